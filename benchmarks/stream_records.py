"""Benchmark: a stream of record upserts against the same stream of text upserts.

Usage:
    python benchmarks/stream_records.py [--n N] [--files F] [--k K] [--runs R]

F files of N upserts each on K keys (times rising by file, an order column), with
symbols of text, records ``(name, city)`` (a change feed's rows), records of the
types databases keep (``name, city, price`` a double, ``active`` a boolean, ``seen`` a
timestamp), and records ``(name, city)`` under keys of two columns ``(tenant, id)``
(a feed keyed by several columns), each run by ``run_stream(Upsert())`` one file per micro-batch
(``availableNow``), warm and interleaved (text, records, typed, two-column keys, text ...) in one
session. Each stream's arrangement is checked equal to ``run_local``'s updates over
the same commands before the stream's upper (the last times wait for a later watermark).
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

from statemachines import PersistedArrangement, consolidate, run_local  # noqa: E402
from statemachines.library import Upsert  # noqa: E402

NAMES = [f"name{i}" for i in range(50)]
CITIES = [f"city{i}" for i in range(20)]
DELAY = 50


def commands(n: int, files: int, k: int, seed: int = 1) -> list[list[tuple]]:
    """Per file, ``(key, (name, city, price, active, seen), time, order)``: times rise by 100 a file."""
    import datetime as dt

    rnd = random.Random(seed)
    epoch = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [
        [
            (f"k{rnd.randrange(k)}",
             (rnd.choice(NAMES), rnd.choice(CITIES), rnd.randrange(100) / 4, rnd.random() < 0.5, epoch + dt.timedelta(seconds=f * n + i)),
             f * 100 + i * 100 // n, f * n + i)
            for i in range(n)
        ]
        for f in range(files)
    ]


KINDS = {"text": 1, "records": 2, "typed": 5, "two-column keys": 2}  # how many of a command's fields its symbol holds


def symbol(fields: tuple, kind: str):
    """A command's symbol of this kind: its name (text), or a record of its first fields."""
    return fields[0] if kind == "text" else fields[: KINDS[kind]]


def key(name: str, kind: str):
    """A command's key of this kind: ``k17``, or a record ``(tenant, id)`` (``("t1", 17)``)."""
    return ("t" + name[1], int(name[1:])) if kind == "two-column keys" else name


def write(batches: list[list[tuple]], kind: str, folder: str) -> None:
    """The commands as Parquet files, symbols of this kind."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = [("name", pa.string()), ("city", pa.string()), ("price", pa.float64()), ("active", pa.bool_()),
              ("seen", pa.timestamp("us", tz="UTC"))]
    arrow_type = pa.string() if kind == "text" else pa.struct(fields[: KINDS[kind]])
    key_type = pa.struct([("tenant", pa.string()), ("id", pa.int64())]) if kind == "two-column keys" else pa.string()
    os.makedirs(folder)
    for f, rows in enumerate(batches):
        table = pa.table({
            "key": pa.array([key(r[0], kind) for r in rows], key_type), "symbol": pa.array([symbol(r[1], kind) for r in rows], arrow_type),
            "time": pa.array([r[2] for r in rows], pa.int64()), "order": pa.array([r[3] for r in rows], pa.int64()),
        })
        pq.write_table(table, f"{folder}/{f:03d}.parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--k", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    from statemachines.spark import local_session, run_stream

    spark = local_session()
    batches = commands(args.n, args.files, args.k)
    events = [row for rows in batches for row in rows]
    expected = {kind: run_local(Upsert(), [(key(k, kind), symbol(s, kind), t, o) for k, s, t, o in events]).updates for kind in KINDS}
    work = tempfile.mkdtemp(prefix="bench-stream-records-")
    sources = {kind: f"{work}/{kind}" for kind in KINDS}
    for kind, source in sources.items():
        write(batches, kind, source)
    seconds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        for run in range(args.runs + 1):  # the first round warms up
            for kind, source in sources.items():
                target = f"{work}/out-{kind}-{run}"
                frame = spark.readStream.schema(spark.read.parquet(source).schema).option("maxFilesPerTrigger", 1).parquet(source)
                started = time.perf_counter()
                run_stream(
                    Upsert(), frame, into=target, checkpoint=target + "-checkpoint", order="order",
                    trigger={"availableNow": True}, progress=None, delay=DELAY,
                ).awaitTermination()
                seconds[kind].append(time.perf_counter() - started)
                streamed = PersistedArrangement.open(target)
                assert streamed.upper >= events[-1][2] - 2 * DELAY, "the stream stopped short"
                applied = (u for u in expected[kind] if u.time < streamed.upper)
                assert streamed.updates() == consolidate(applied), f"the {kind} stream differs"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    median = {kind: statistics.median(taken[1:]) for kind, taken in seconds.items()}
    total = args.n * args.files
    print(f"{args.files} files x {args.n:,} upserts, {args.k:,} keys; {os.cpu_count()} cores; median of {args.runs} warm "
          "interleaved runs, each arrangement checked against run_local")
    shown = {"text": "text symbols", "records": "records (name, city)", "typed": "records, 5 typed fields",
             "two-column keys": "records, keys (tenant, id)"}
    for kind, taken in median.items():
        ratio = "" if kind == "text" else f"  {taken / median['text']:.2f}x the text stream's time"
        print(f"  {shown[kind]:<28}{taken:7.2f} s  {total / taken:9,.0f} upserts/s{ratio}")


if __name__ == "__main__":
    main()
