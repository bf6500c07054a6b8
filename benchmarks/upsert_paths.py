"""Benchmark: Upsert on Spark batch, stepped in Arrow against its window functions.

Usage:
    python benchmarks/upsert_paths.py [--n N] [--k K] [--runs R]

``run_batch(Upsert(), ..., into=...)`` steps the partitions of plain columns in Arrow
(:mod:`statemachines.spark.upsert_arrow`); before, it ran them as Spark SQL window
functions, the path other column types still take. Four workloads, each approach
warm and interleaved in one session (A B C A B C ...):

- U1, ``N`` upsert commands over ``K`` keys (``benchmarks/run.py``'s, text values),
  with its floor: reading, sorting by key and time and writing the commands;
- a change feed of ``N`` rows over ``N / 10`` keys (``benchmarks/feeds.py``'s, each
  value a record of name and city) through ``run_feed_batch``, with its floor: Spark
  SQL window functions computing its SCD type 2 table;
- the same feed with the columns databases type (:func:`typed_feed`: a double, a
  decimal, a boolean, a date and a timestamp beside name and city), the same way;
- the same feed keyed by two columns, ``region`` (a function of the id) and ``id``
  (:data:`TWO_COLUMN_FEED`), the same way.

The window functions are chosen for a run by making the Arrow path decline it (this
script's only reach into the runtime). Each run's arrangement is checked equal to
the other path's, and U1's to the local reference runtime's; each feed's, once, to
``run_feed`` locally.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import run as main_benchmark  # noqa: E402
from feeds import FEED, feed_rows, scd2_floor_sql  # noqa: E402

import statemachines.spark.batch as batch  # noqa: E402
from statemachines import PersistedArrangement, consolidate  # noqa: E402
from statemachines.library import ChangeFeed, Upsert, run_feed  # noqa: E402


def typed_feed(rows: list[dict]):
    """The feed's rows with the columns databases type beside name and city: each a
    function of the row's id and lsn, so that updates change some and repeat others."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    epoch = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    table = pa.Table.from_pylist(rows)
    ids, lsns = table.column("id").to_pylist(), table.column("lsn").to_pylist()
    columns = {
        "price": pa.array([(i * 7 + n % 5) / 10 for i, n in zip(ids, lsns, strict=True)], pa.float64()),
        "amount": pa.array([Decimal(n % 1000) / 100 for n in lsns], pa.decimal128(10, 2)),
        "active": pa.array([n % 3 != 0 for n in lsns], pa.bool_()),
        "born": pa.array([dt.date(1990, 1, 1) + dt.timedelta(days=i % 9000) for i in ids], pa.date32()),
        "seen": pa.array([epoch + dt.timedelta(seconds=n // 4) for n in lsns], pa.timestamp("us", tz="UTC")),
    }
    for name, column in columns.items():
        table = table.append_column(name, column)
    return table


TYPED_VALUES = ("name", "city", "price", "amount", "active", "born", "seen")
TWO_COLUMN_FEED = ChangeFeed(keys=["region", "id"], sequence_by=["lsn"], delete_when={"op": "d"})


def with_regions(rows: list[dict]) -> list[dict]:
    """The feed's rows with a ``region`` of three, a function of the row's id."""
    return [dict(row, region=("eu", "us", "ap")[row["id"] % 3]) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    from statemachines.spark import local_session, run_batch, run_feed_batch

    main_benchmark.upsert_workload(args.n, args.k)
    u1_reference = main_benchmark.reference(args.n, args.k)
    u1 = str(main_benchmark.CACHE / f"u1_n{args.n}_k{args.k}_s7.parquet")
    rows = feed_rows(args.n, max(args.n // 10, 1))
    work = tempfile.mkdtemp(prefix="bench-upsert-paths-")
    feed, typed = os.path.join(work, "feed.parquet"), os.path.join(work, "typed.parquet")
    two_columns, region_rows = os.path.join(work, "two-columns.parquet"), with_regions(rows)
    pq.write_table(pa.Table.from_pylist(rows), feed)
    pq.write_table(pa.Table.from_pylist(region_rows), two_columns)
    typed_table = typed_feed(rows)
    pq.write_table(typed_table, typed)
    spark = local_session()
    in_arrow = batch.runs_in_arrow
    fresh = iter(range(10**6))

    def path(arrow: bool) -> None:
        batch.runs_in_arrow = in_arrow if arrow else (lambda *_: False)

    def upserts(arrow: bool):
        def go():
            path(arrow)
            target = os.path.join(work, f"u1-{next(fresh)}")
            run_batch(Upsert(), spark.read.parquet(u1), symbol="value", order="offset", into=target).unpersist()
            return target
        return go

    def feed_run(arrow: bool, source: str = feed, change_feed: ChangeFeed = FEED):
        def go():
            path(arrow)
            target = os.path.join(work, f"feed-{next(fresh)}")
            run_feed_batch(change_feed, spark.read.parquet(source), into=target).result.unpersist()
            return target
        return go

    def u1_floor():
        frame = spark.read.parquet(u1)
        frame.repartition("key").sortWithinPartitions("key", "time").write.mode("overwrite").parquet(f"{work}/floor")

    def feed_floor():
        scd2_floor_sql(spark, spark.read.parquet(feed), f"{work}/feed-floor")

    def typed_floor():
        scd2_floor_sql(spark, spark.read.parquet(typed), f"{work}/typed-floor", TYPED_VALUES)

    def two_column_floor():
        scd2_floor_sql(spark, spark.read.parquet(two_columns), f"{work}/two-column-floor", keys=("region", "id"))

    sets = {
        "U1 upserts": {"floor: read + sort + write": u1_floor, "in Arrow": upserts(True), "window functions": upserts(False)},
        "change feed": {"floor: SCD2 window functions": feed_floor, "in Arrow": feed_run(True), "window functions": feed_run(False)},
        "typed feed": {
            "floor: SCD2 window functions": typed_floor, "in Arrow": feed_run(True, typed), "window functions": feed_run(False, typed),
        },
        "two-column keys": {
            "floor: SCD2 window functions": two_column_floor, "in Arrow": feed_run(True, two_columns, TWO_COLUMN_FEED),
            "window functions": feed_run(False, two_columns, TWO_COLUMN_FEED),
        },
    }
    seconds: dict[str, dict[str, list[float]]] = {name: {a: [] for a in approaches} for name, approaches in sets.items()}
    last: dict[str, dict[str, object]] = {name: {} for name in sets}
    try:
        for _ in range(args.runs + 1):  # the first round warms up
            for name, approaches in sets.items():
                for approach, go in approaches.items():
                    started = time.perf_counter()
                    target = go()
                    seconds[name][approach].append(time.perf_counter() - started)
                    last[name][approach] = target and PersistedArrangement(target).updates()  # read untimed
                if last[name]["in Arrow"] != last[name]["window functions"]:
                    raise SystemExit(f"{name}: the two paths' arrangements differ")
        path(True)
        main_benchmark.verify("U1 in Arrow", main_benchmark.digest(last["U1 upserts"]["in Arrow"]), u1_reference)
        if consolidate(last["change feed"]["in Arrow"]) != consolidate(run_feed(FEED, rows).result.updates):
            raise SystemExit("change feed: not run_feed's updates")
        if consolidate(last["typed feed"]["in Arrow"]) != consolidate(run_feed(FEED, typed_table).result.updates):
            raise SystemExit("typed feed: not run_feed's updates")
        if consolidate(last["two-column keys"]["in Arrow"]) != consolidate(run_feed(TWO_COLUMN_FEED, region_rows).result.updates):
            raise SystemExit("two-column keys: not run_feed's updates")
    finally:
        batch.runs_in_arrow = in_arrow
        shutil.rmtree(work, ignore_errors=True)

    print(f"N={args.n:,}; {os.cpu_count()} cores; median of {args.runs} warm interleaved runs after one; "
          "each arrangement checked equal to the other path's, U1's to run_local's, the feed's to run_feed's")
    for name, approaches in seconds.items():
        floor = statistics.median(approaches[next(iter(approaches))][1:])
        for approach, taken in approaches.items():
            median = statistics.median(taken[1:])
            print(f"{name + ', ' + approach:<46}{median:8.2f} s{median / floor:8.2f}x floor")
        arrow, window = (statistics.median(approaches[a][1:]) for a in ("in Arrow", "window functions"))
        print(f"{name}: window functions / in Arrow: {window / arrow:.2f}x the time")


if __name__ == "__main__":
    main()
