"""Benchmark: a change feed into an arrangement and its SCD type 2 table, against Spark SQL.

Usage:
    python benchmarks/feeds.py [--n N] [--k K] [--runs R] [--skip-spark]

Feed: N rows ``id, name, city, lsn, op`` over K keys (10 % deletes), in log order
shuffled within windows of 1,000 rows, as a database's feed arrives through a
partitioned transport.

Approaches, measured warm and interleaved (A B C ... A B C ...) in one session:

- ``run_feed`` locally into an arrangement, SCD type 2 off and on;
- ``run_feed_batch`` on a local Spark session (Parquet in), SCD type 2 off and on;
- ``run_feed_stream``: the feed as 10 files, one per micro-batch (``availableNow``,
  delay 1,000), without SCD tables;
- the floor: Spark SQL window functions computing the same SCD type 2 table from
  the feed (``lag`` to drop repeats, ``lead`` for the end) and writing it as Parquet.

Also timed: refreshing a new SCD type 2 table from a whole local arrangement.
Each SCD type 2 table is checked equal to the floor's, each batch run's number of
updates equal to the local run's, and the stream's arrangement equal to the local
run's updates before the stream's upper (the last rows wait for a later watermark).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from statemachines import PersistedArrangement, consolidate  # noqa: E402
from statemachines.library import ChangeFeed, run_feed  # noqa: E402
from statemachines.library.feeds import scd_tables  # noqa: E402

FEED = ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})
NAMES = [f"name{i}" for i in range(50)]
CITIES = [f"city{i}" for i in range(20)]


def feed_rows(n: int, k: int, seed: int = 3) -> list[dict]:
    """The feed: lsn = position in the log; shuffled within windows of 1,000 rows."""
    rnd = random.Random(seed)
    rows = []
    for lsn in range(n):
        op = "d" if rnd.random() < 0.1 else rnd.choice("cu")
        rows.append({"id": rnd.randrange(k), "name": rnd.choice(NAMES), "city": rnd.choice(CITIES), "lsn": lsn, "op": op})
    for start in range(0, n, 1000):
        window = rows[start : start + 1000]
        rnd.shuffle(window)
        rows[start : start + 1000] = window
    return rows


def scd2_floor_sql(spark, feed, out: str, values=("name", "city"), keys=("id",)) -> None:
    """SCD type 2 with window functions: per key (the columns ``keys``) in lsn order, a
    row starts an interval when its value (the columns ``values``) differs from the row
    before; the interval ends at the next interval's start; delete rows start none."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_key = Window.partitionBy(*keys).orderBy("lsn")
    value = F.when(F.col("op") != "d", F.struct(*values))
    changes = (
        feed.select(*keys, "lsn", value.alias("value"))
        .withColumn("before", F.lag("value").over(by_key))
        .where(~F.col("value").eqNullSafe(F.col("before")))
        .withColumn("end", F.lead("lsn").over(by_key))
        .where(F.col("value").isNotNull())
        .select(*keys, *(f"value.{v}" for v in values), F.col("lsn").alias("__START_AT"), F.col("end").alias("__END_AT"))
    )
    changes.write.mode("overwrite").parquet(out)


def sorted_table(table):
    return table.sort_by([("id", "ascending"), ("__START_AT", "ascending")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    rows = feed_rows(args.n, args.k)
    work = tempfile.mkdtemp(prefix="feeds-bench-")
    try:
        measure(rows, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(rows: list[dict], args: argparse.Namespace, work: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    counter = iter(range(10**6))

    def fresh(name: str) -> str:
        return os.path.join(work, f"{name}-{next(counter)}")

    outputs: dict[str, object] = {}

    def local(scd: bool):
        def run():
            target = fresh("local")
            done = run_feed(FEED, rows, into=target, scd2=target + "-scd2" if scd else None)
            outputs["local updates"] = done.result.updates
            outputs["arrangement"], outputs["columns"] = target, done.columns
            if scd:
                outputs["local scd2"] = done.scd2  # read back after the timed rounds
        return run

    approaches = {"run_feed local": local(False), "run_feed local + SCD2": local(True)}
    spark = None
    if not args.skip_spark:
        from statemachines.spark import local_session, run_feed_batch, run_feed_stream

        spark = local_session(shuffle_partitions=4)
        source = os.path.join(work, "feed.parquet")
        table = pa.Table.from_pylist(rows)
        pq.write_table(table, source)
        files = os.path.join(work, "feed-files")
        os.makedirs(files)
        for i in range(10):  # whole windows of the shuffle: no row arrives late
            pq.write_table(table.slice(i * len(rows) // 10, (i + 1) * len(rows) // 10 - i * len(rows) // 10), f"{files}/{i:02d}.parquet")

        def batch(scd: bool):
            def run():
                target = fresh("spark")
                frame = spark.read.parquet(source)
                done = run_feed_batch(FEED, frame, into=target, scd2=target + "-scd2" if scd else None)
                outputs["spark updates"] = done.result.updates.count()
                if scd:
                    outputs["spark scd2"] = done.scd2
            return run

        def stream():
            target = fresh("stream")
            frame = spark.readStream.schema(spark.read.parquet(files).schema).option("maxFilesPerTrigger", 1).parquet(files)
            query, _ = run_feed_stream(
                FEED, frame, into=target, checkpoint=target + "-checkpoint",
                trigger={"availableNow": True}, progress=None, delay=1000,
            )
            query.awaitTermination()
            outputs["stream arrangement"] = target

        def floor():
            target = fresh("floor")
            scd2_floor_sql(spark, spark.read.parquet(source), target)
            outputs["floor scd2"] = sorted_table(pq.read_table(target))

        approaches = {
            "Spark SQL window functions (floor)": floor,
            **approaches,
            "run_feed_batch": batch(False),
            "run_feed_batch + SCD2": batch(True),
            "run_feed_stream, 10 micro-batches": stream,
        }
    times: dict[str, list[float]] = {name: [] for name in approaches}
    for _ in range(args.runs + 1):  # the first round warms up
        for name, run in approaches.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    check(outputs)
    refresh = []
    for _ in range(args.runs):  # the SCD type 2 table alone, built afresh from the whole arrangement
        table = scd_tables(outputs["columns"], scd2=fresh("refresh"))[1]
        started = time.perf_counter()
        table.refresh(outputs["arrangement"])
        refresh.append(time.perf_counter() - started)
    print(f"{args.n:,} feed rows, {args.k:,} keys; median of {args.runs} warm interleaved runs")
    base = statistics.median(times[next(iter(times))][1:])
    for name, taken in times.items():
        median = statistics.median(taken[1:])
        print(f"  {name:<36} {median:7.2f} s  {median / base:5.2f}x  ({len(rows) / median:,.0f} rows/s)")
    print(f"  {'SCD2 refresh alone, whole arrangement':<36} {statistics.median(refresh):7.2f} s")


def check(outputs: dict) -> None:
    """Every SCD type 2 table equals the floor's (or the local one's without Spark)."""
    reference = outputs.get("floor scd2") or sorted_table(outputs["local scd2"].read())
    names = list(reference.column_names)
    for name in ("local scd2", "spark scd2"):
        if name in outputs:
            table = sorted_table(outputs[name].read()).select(names).cast(reference.schema)
            assert table.equals(reference), f"{name} differs from the floor"
    local = outputs["local updates"]
    if "spark updates" in outputs:
        assert outputs["spark updates"] == len(local), "run_feed_batch's updates differ"
    if "stream arrangement" in outputs:
        streamed = PersistedArrangement.open(outputs["stream arrangement"])
        applied = [u for u in local if u.time < streamed.upper]
        assert len(applied) > 0.9 * len(local), "the stream applied too little to tell"
        assert streamed.updates() == consolidate(applied), "the stream differs"
    print("checked: every SCD type 2 table equals the floor's; Spark's updates count the local run's; "
          "the stream's arrangement is the local run's before its upper")


if __name__ == "__main__":
    main()
