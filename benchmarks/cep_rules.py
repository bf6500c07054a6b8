"""Benchmark: one RuleDetector running 1, 10 and 100 rules over the same events.

Usage:
    python benchmarks/cep_rules.py [--n N] [--k K] [--rules 1,10,100] [--runs R] [--skip-spark]
                                   [--event-by-event]

Events are cep_expressions' logins; rule ``i`` is the fraud pattern with SQL
conditions, ``2 + i % 3`` failures then a success above ``10 * (i % 7)`` within 10.
Per rule count: run_local and run_batch (Parquet in, output written as Parquet by its tasks)
timed warm and interleaved (A B A B ...) in one process, run_batch's findings
checked against run_local's; and, untimed, the peak resident memory of a fresh
process running run_local, and the most partial matches alive at once.
``--event-by-event`` adds both runs of a rule detector that steps each key alone,
event by event (as before the rule versions stepped their keys in rounds),
interleaved with the others.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from cep import BatchRuns, child_peak_mb, interleaved, peak_partials  # noqa: E402
from cep_expressions import logins, write_logins  # noqa: E402

from statemachines import Machine, run_local  # noqa: E402
from statemachines.library import Pattern, RuleDetector  # noqa: E402


class EventByEvent(RuleDetector):
    """A rule detector that runs each key alone, event by event."""

    advance_keys = Machine.advance_keys


def rule_rows(count: int, window: int = 10) -> list[tuple[str, str, int]]:
    rows = []
    for i in range(count):
        pattern = (
            Pattern.begin("fail").where("kind = 'fail'").times(2 + i % 3)
            .followed_by("ok").where(f"kind = 'ok' AND amount > {10 * (i % 7)}")
            .within(window)
        )
        rows.append((f"rule{i:03d}", pattern.to_json(), 0))
    return rows


def digest(updates) -> tuple[int, int, int]:
    """Counts of matches and timeouts, and a hash of them: key, time, kind, rule,
    number of events and the first and last event's identity ``(time, seq)``."""
    return summed(
        (k, t, v[0], v[3], len(v[2]), v[2][0][1], v[2][0][2], v[2][-1][1], v[2][-1][2])
        for (k, v), t, _ in updates if v[0] in ("match", "timeout")
    )


def summed(found) -> tuple[int, int, int]:
    rows = sorted(found)
    return sum(r[2] == "match" for r in rows), sum(r[2] == "timeout" for r in rows), hash(tuple(rows))


def read(result) -> tuple[int, int, int]:
    """:func:`digest` of a Spark run's findings, projected by Spark SQL (collecting
    every match's events as rows takes minutes at 100 rules)."""
    found = result.updates.where("value.kind IN ('match', 'timeout')").selectExpr(
        "key", "time", "value.kind", "value.rule", "size(value.events)", "value.events[0].time",
        "value.events[0].seq", "element_at(value.events, -1).time", "element_at(value.events, -1).seq",
    ).toArrow()
    return summed(zip(*(c.to_pylist() for c in found.columns), strict=True))


def peak_mb(n: int, k: int, rules: int) -> float:
    """Peak resident memory of a fresh process running ``rules`` rules locally."""
    return child_peak_mb(
        f"import cep_rules as b; b.run_local(b.RuleDetector(b.rule_rows({rules})), b.logins({n}, {k}, 10))"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--rules", default="1,10,100")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--event-by-event", action="store_true", help="also each key alone, event by event")
    args = parser.parse_args()
    counts = [int(c) for c in args.rules.split(",")]
    events = logins(args.n, args.k, 10)
    work = tempfile.mkdtemp(prefix="bench-cep-rules-")
    spark = None
    if not args.skip_spark:
        from statemachines.spark import local_session

        source = write_logins(events, work)
        spark = local_session()

    print(f"N={args.n:,} events, K={args.k:,} users; {os.cpu_count()} cores; "
          f"median of {args.runs} interleaved runs after a warm-up, run_batch checked against run_local")
    print(f"{'rules':>6}{'run_local s':>13}{'events/s':>11}{'run_batch s':>13}{'events/s':>11}"
          f"{'local peak MB':>15}{'peak partials':>15}{'matches':>10}")
    try:
        for count in counts:
            detector = RuleDetector(rule_rows(count))
            reference = run_local(detector, events).updates
            expected = digest(reference)
            peak = peak_partials((u.time, u.diff) for u in reference if u.data[1][0] == "partial")
            del reference
            slow = EventByEvent(rule_rows(count))
            approaches = {"local": (lambda d=detector: run_local(d, events).updates, digest)}
            if args.event_by_event:
                approaches["local, one by one"] = (lambda d=slow: run_local(d, events).updates, digest)
            if spark is not None:
                approaches["batch"] = (BatchRuns(spark, detector, source), read)
                if args.event_by_event:
                    approaches["batch, one by one"] = (BatchRuns(spark, slow, source), read)
            seconds = {name: statistics.median(s) for name, s in interleaved(approaches, args.runs, expected).items()}
            batch = seconds.get("batch")
            print(f"{count:>6}{seconds['local']:>13.2f}{args.n / seconds['local']:>11,.0f}"
                  + (f"{batch:>13.2f}{args.n / batch:>11,.0f}" if batch else f"{'-':>13}{'-':>11}")
                  + f"{peak_mb(args.n, args.k, count):>15,.0f}{peak:>15,}{expected[0]:>10,}", flush=True)
            for name in ("local, one by one", "batch, one by one"):
                if name in seconds:
                    rounds = seconds[name.split(",")[0]]
                    print(f"{'':>6}{name}: {seconds[name]:.2f} s, {args.n / seconds[name]:,.0f} events/s "
                          f"(in rounds {seconds[name] / rounds:.2f}x faster)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
