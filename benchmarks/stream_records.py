"""Benchmark: a stream of record upserts against the same stream of text upserts.

Usage:
    python benchmarks/stream_records.py [--n N] [--files F] [--k K] [--runs R]

F files of N upserts each on K keys (times rising by file, an order column), once
with symbols of text and once with records ``(name, city)`` (a change feed's rows),
each run by ``run_stream(Upsert())`` one file per micro-batch (``availableNow``),
warm and interleaved (text, records, text, records ...) in one session. Each
stream's arrangement is checked equal to ``run_local``'s updates over the same
commands before the stream's upper (the last times wait for a later watermark).
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
    """Per file, ``(key, (name, city), time, order)``: times rise by 100 a file."""
    rnd = random.Random(seed)
    return [
        [(f"k{rnd.randrange(k)}", (rnd.choice(NAMES), rnd.choice(CITIES)), f * 100 + i * 100 // n, f * n + i) for i in range(n)]
        for f in range(files)
    ]


def write(batches: list[list[tuple]], records: bool, folder: str) -> None:
    """The commands as Parquet files, symbols as records or as their name alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = pa.struct([("name", pa.string()), ("city", pa.string())]) if records else pa.string()
    os.makedirs(folder)
    for f, rows in enumerate(batches):
        symbols = [{"name": s[0], "city": s[1]} if records else s[0] for _, s, _, _ in rows]
        table = pa.table({
            "key": [r[0] for r in rows], "symbol": pa.array(symbols, kind),
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
    expected = {
        False: run_local(Upsert(), [(k, s[0], t, o) for k, s, t, o in events]).updates,
        True: run_local(Upsert(), events).updates,
    }
    work = tempfile.mkdtemp(prefix="bench-stream-records-")
    sources = {}
    for records in (False, True):
        sources[records] = f"{work}/{'records' if records else 'text'}"
        write(batches, records, sources[records])
    seconds: dict[bool, list[float]] = {False: [], True: []}
    try:
        for run in range(args.runs + 1):  # the first round warms up
            for records in (False, True):
                source, target = sources[records], f"{work}/out-{records}-{run}"
                frame = spark.readStream.schema(spark.read.parquet(source).schema).option("maxFilesPerTrigger", 1).parquet(source)
                started = time.perf_counter()
                run_stream(
                    Upsert(), frame, into=target, checkpoint=target + "-checkpoint", order="order",
                    trigger={"availableNow": True}, progress=None, delay=DELAY,
                ).awaitTermination()
                seconds[records].append(time.perf_counter() - started)
                streamed = PersistedArrangement.open(target)
                assert streamed.upper >= events[-1][2] - 2 * DELAY, "the stream stopped short"
                applied = (u for u in expected[records] if u.time < streamed.upper)
                assert streamed.updates() == consolidate(applied), f"the {'record' if records else 'text'} stream differs"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text, records = (statistics.median(seconds[kind][1:]) for kind in (False, True))
    total = args.n * args.files
    print(f"{args.files} files x {args.n:,} upserts, {args.k:,} keys; {os.cpu_count()} cores; median of {args.runs} warm "
          "interleaved runs, each arrangement checked against run_local")
    print(f"  text symbols         {text:7.2f} s  {total / text:9,.0f} upserts/s")
    print(f"  records (name, city) {records:7.2f} s  {total / records:9,.0f} upserts/s  {records / text:.2f}x the text stream's time")


if __name__ == "__main__":
    main()
