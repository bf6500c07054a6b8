"""Probe: the fraud pattern's NFA as a Spark SQL fold, against run_batch with SQL conditions.

Usage:
    python benchmarks/cep_in_jvm.py [--n N] [--k K] [--runs R]

A design that would keep Python out of a detector whose conditions are all SQL:
each key's events gathered (``collect_list``, sorted by time, then symbol, as the
runtime orders same-time events) and folded by Spark's ``aggregate`` higher-order
function, its state the key's partial matches and its result their updates and the
matches, exploded into rows in the JVM. Written by hand for this one pattern (three
``kind = 'fail'``, then ``kind = 'ok' AND amount > 10``, within 10; no timeouts at
the end and no consolidation, so it does less than the detector), it bounds what
the design could do. Measured warm and interleaved with ``run_batch`` in one
session, the matches of both checked against ``run_local``'s. Also timed: the same
fold keeping only the partial matches (no updates), and reading, shuffling and
sorting the events alone.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from cep import BatchRuns, interleaved  # noqa: E402
from cep_expressions import logins, patterns, write_logins  # noqa: E402

from statemachines import run_local  # noqa: E402
from statemachines.library import Detector, matches  # noqa: E402

EVENT = "struct<time:bigint,kind:string,amount:bigint,seq:bigint>"
PARTIAL = f"struct<start:bigint,count:int,events:array<{EVENT}>>"
UPDATE = f"struct<kind:string,time:bigint,diff:int,events:array<{EVENT}>>"


def fold(keep_updates: bool) -> str:
    """The SQL folding a key's sorted ``events`` into its updates (or, without
    ``keep_updates``, into its last partial matches)."""
    live = "e.time - x.start < 10"
    grows = f"{live} AND x.count < 3 AND e.kind = 'fail'"
    completes = f"coalesce({live} AND x.count = 3 AND e.kind = 'ok' AND e.amount > 10, false)"
    partials = f"""concat(
        transform(filter(acc.partials, x -> {live} AND NOT {completes}),
            x -> IF({grows}, named_struct('start', x.start, 'count', x.count + 1, 'events', concat(x.events, array(e))), x)),
        IF(e.kind = 'fail', array(named_struct('start', e.time, 'count', 1, 'events', array(e))), array()))"""
    updates = f"""concat(acc.updates,
        transform(filter(acc.partials, x -> NOT ({live})), x -> named_struct('kind', 'timeout', 'time', e.time, 'diff', 1, 'events', x.events)),
        transform(filter(acc.partials, x -> {grows}), x -> named_struct('kind', 'partial', 'time', e.time, 'diff', -1, 'events', x.events)),
        transform(filter(acc.partials, x -> {grows}), x -> named_struct('kind', 'partial', 'time', e.time, 'diff', 1, 'events', concat(x.events, array(e)))),
        transform(filter(acc.partials, x -> {completes}), x -> named_struct('kind', 'match', 'time', e.time, 'diff', 1, 'events', concat(x.events, array(e)))),
        IF(e.kind = 'fail', array(named_struct('kind', 'partial', 'time', e.time, 'diff', 1, 'events', array(e))), array()))"""
    kept = updates if keep_updates else "acc.updates"
    result = "acc -> acc.updates" if keep_updates else (
        "acc -> transform(acc.partials, x -> named_struct('kind', 'partial', 'time', x.start, 'diff', 1, 'events', x.events))"
    )
    return f"""aggregate(events,
        named_struct('partials', cast(array() AS array<{PARTIAL}>), 'updates', cast(array() AS array<{UPDATE}>)),
        (acc, e) -> named_struct('partials', {partials}, 'updates', {kept}),
        {result})"""


class FoldRuns:
    """One way of running the events through Spark, its output written to ``noop``
    (rows made, nothing stored) or, for the matches, collected."""

    def __init__(self, spark, source: str, keep_updates: bool | None) -> None:
        from pyspark.sql import functions as F

        events = spark.read.parquet(source).withColumn("seq", F.monotonically_increasing_id())
        if keep_updates is None:
            self.frame = events.repartition("key").sortWithinPartitions("key", "time", "seq")
            return
        event = F.struct("time", F.col("symbol.kind").alias("kind"), F.col("symbol.amount").alias("amount"), "seq")
        gathered = events.groupBy("key").agg(F.array_sort(F.collect_list(event)).alias("events"))
        self.frame = gathered.select("key", F.explode(F.expr(fold(keep_updates))).alias("u")).select("key", "u.*")

    def __call__(self):
        self.frame.write.format("noop").mode("overwrite").save()
        return self.frame


def digest(found) -> tuple[int, str]:
    """How many matches, and a hash of their keys, times and events."""
    text = "\n".join(sorted(map(repr, found)))
    return len(found), hashlib.sha256(text.encode()).hexdigest()[:16]


def fold_matches(frame) -> tuple[int, str]:
    found = frame.where("kind = 'match'").collect()
    return digest([(r.key, r.time, tuple((e.time, e.kind, e.amount) for e in r.events)) for r in found])


def batch_matches(result) -> tuple[int, str]:
    found = result.updates.where("value.kind = 'match'").collect()
    return digest([
        (r.key, r.time, tuple((e.time, e.symbol.kind, e.symbol.amount) for e in r.value.events))
        for r in found for _ in range(r.diff)
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from statemachines.spark import local_session

    events = logins(args.n, args.k, 10)
    found = matches(run_local(Detector(patterns(10)["functions"]), events).updates)
    expected = digest([(f.key, f.time, tuple((e[1], e[3].kind, e[3].amount) for e in f.events)) for f in found])
    work = tempfile.mkdtemp(prefix="bench-cep-jvm-")
    try:
        spark = local_session()
        source = write_logins(events, work)
        approaches = {
            "run_batch, SQL conditions": (BatchRuns(spark, Detector(patterns(10)["SQL"]), source), batch_matches),
            "SQL fold, updates": (FoldRuns(spark, source, True), fold_matches),
            "SQL fold, partial matches only": (FoldRuns(spark, source, False), lambda _: expected),
            "read, shuffle and sort only": (FoldRuns(spark, source, None), lambda _: expected),
        }
        seconds = interleaved(approaches, args.runs, expected)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"N={args.n:,} events, K={args.k:,} users, within 10; {os.cpu_count()} cores; median of {args.runs} "
          f"interleaved runs; {expected[0]:,} matches, run_batch's and the fold's checked against run_local's")
    print(f"{'approach':<34}{'seconds':>9}{'events/s':>12}")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        print(f"{name:<34}{median:>9.2f}{args.n / median:>12,.0f}")


if __name__ == "__main__":
    main()
