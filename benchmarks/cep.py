"""Benchmark: a 3-step pattern with ``within`` over N login events and K users.

Usage:
    python benchmarks/cep.py [--n N] [--k K] [--window W] [--skip-spark]

Pattern: ``fail`` then ``fail`` then ``ok`` (relaxed), within W time units. Events:
user ``rnd(K)``, ``fail`` / ``ok`` / ``view`` (50/20/30 %), time ``i // 10``.
Prints events/s of the local runtime (fed in 20 frontier steps, peak live partial
matches measured after each) and of a Spark batch run (reading Parquet, writing the
output as Parquet; peak memory of its Python workers), and checks that Spark found exactly the local matches and
timeouts before printing its time.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from statemachines import LocalRuntime  # noqa: E402
from statemachines.library import Detector, Pattern, matches, timeouts  # noqa: E402


def pattern(window: int) -> Pattern:
    return (
        Pattern.begin("fail").where(lambda s: s == "fail")
        .followed_by("again").where(lambda s: s == "fail")
        .followed_by("ok").where(lambda s: s == "ok")
        .within(window)
    )


def logins(n: int, k: int, seed: int = 5) -> list[tuple[str, str, int]]:
    rnd = random.Random(seed)
    kinds = ["fail"] * 5 + ["ok"] * 2 + ["view"] * 3
    return [(f"u{rnd.randrange(k)}", rnd.choice(kinds), i // 10) for i in range(n)]


def findings_digest(rows) -> tuple[int, int, str]:
    """Counts of matches and timeouts, and a hash of both (as plain text)."""
    found = matches(rows), timeouts(rows)
    text = "\n".join(repr((f.key, f.time, f.events)) for group in found for f in group)
    return len(found[0]), len(found[1]), hashlib.sha256(text.encode()).hexdigest()[:16]


def peak_partials(deltas) -> int:
    """The most partial matches alive at once, over all keys: from ``(time, diff)`` of
    the output's partial-match rows (the state, exactly as the output records it)."""
    by_time: dict = {}
    for at, diff in deltas:
        by_time[at] = by_time.get(at, 0) + diff
    live = peak = 0
    for at in sorted(by_time):
        live += by_time[at]
        peak = max(peak, live)
    return peak


def run_local_steps(detector: Detector, events, steps: int = 20):
    runtime = LocalRuntime(detector)
    last = events[-1][2] + 1
    bounds = [last * (i + 1) // steps for i in range(steps)]
    updates, peak, fed = [], 0, 0
    started = time.perf_counter()
    for bound in bounds:
        upto = fed
        while upto < len(events) and events[upto][2] < bound:
            upto += 1
        runtime.feed(events[fed:upto])
        fed = upto
        updates += runtime.advance_to(bound).updates
        peak = max(peak, runtime.stats()["live_values"])
    updates += runtime.finish().updates
    return time.perf_counter() - started, updates, peak


def run_spark(detector: Detector, events, work: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statemachines.spark import local_session, run_batch

    source = f"{work}/logins.parquet"
    pq.write_table(pa.table({c: [e[i] for e in events] for i, c in enumerate(("key", "symbol", "time"))}), source)
    from run import WorkerPeak

    spark = local_session()
    started = time.perf_counter()
    with WorkerPeak() as workers:
        result = run_batch(detector, spark.read.parquet(source))
        result.updates.write.parquet(f"{work}/out")
    elapsed = time.perf_counter() - started
    out = spark.read.parquet(f"{work}/out")
    found = out.where("value.kind != 'partial'").collect()
    per_time = out.where("value.kind = 'partial'").groupBy("time").sum("diff").collect()
    peak = peak_partials((r[0], r[1]) for r in per_time)

    def plain(v):
        return tuple(plain(x) for x in v) if isinstance(v, list | tuple) else v

    rows = [((r.key, plain(r.value)), r.time, r.diff) for r in found]
    return elapsed, rows, workers.peak_mb, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=3_000)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    detector = Detector(pattern(args.window))
    events = logins(args.n, args.k)

    seconds, updates, peak = run_local_steps(detector, events)
    local = findings_digest(updates)
    print(f"N={args.n:,} events, K={args.k:,} keys, within {args.window}; {os.cpu_count()} cores")
    print(f"{'runtime':<34}{'seconds':>9}{'events/s':>12}  findings")
    print(f"{'local (20 frontier steps)':<34}{seconds:>9.2f}{args.n / seconds:>12,.0f}  "
          f"{local[0]:,} matches, {local[1]:,} timeouts")
    exact = peak_partials((u.time, u.diff) for u in updates if u.data[1][0] == "partial")
    print(f"peak live partial matches: {exact:,} from the output ({exact / args.k:.1f} per key); "
          f"{peak:,} in the runtime's state at the 20 frontier steps")
    if args.skip_spark:
        return
    work = tempfile.mkdtemp(prefix="bench-cep-")
    try:
        seconds, rows, worker_mb, spark_peak = run_spark(detector, events, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    spark = findings_digest(rows)
    if spark != local:
        raise SystemExit(f"Spark's findings differ from the local runtime's: {spark} != {local}")
    print(f"{'spark batch (generic path)':<34}{seconds:>9.2f}{args.n / seconds:>12,.0f}  same as local")
    print(f"peak live partial matches from Spark's output: {spark_peak:,}; "
          f"peak memory of a Spark Python worker: {worker_mb:,.0f} MB")
    if spark_peak != exact:
        raise SystemExit(f"Spark's peak state {spark_peak} differs from the local {exact}")


if __name__ == "__main__":
    main()
