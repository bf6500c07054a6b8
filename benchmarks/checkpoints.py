"""Benchmark: a stream's checkpoint written through Hadoop's FileContext or its FileSystem.

Usage:
    python benchmarks/checkpoints.py [--files 6] [--rows 60] [--runs 4]

``run_stream(Upsert())`` takes ``--files`` Parquet files of ``--rows`` upserts each (one
file per micro-batch, times rising, delay 3, a last far-off upsert making the others
final) into a fresh arrangement and checkpoint, two ways interleaved (A B A B) in one
local session after a warm-up round:

- ``FileContext``: the session names Spark's default checkpoint file manager, which
  on a local disk without Hadoop's native library starts a ``readlink`` process for
  each path a rename checks;
- ``FileSystem``: the stream's own choice for a local checkpoint
  (``statemachines.spark.streaming.checkpoint_files``).

Each arrangement is checked against ``run_local`` over the same upserts (below its
upper). Printed: the median seconds of a stream and the CPU seconds of the Spark JVM
with the processes it started and reaped (Hadoop's ``readlink`` and ``chmod``), from
Linux's ``/proc``.
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

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from run import cpu_ticks, jvm_pid  # noqa: E402

from statemachines import PersistedArrangement, run_local  # noqa: E402
from statemachines.library import Upsert  # noqa: E402
from statemachines.spark import local_session, run_stream  # noqa: E402
from statemachines.spark.session import scoped_conf  # noqa: E402
from statemachines.spark.streaming import CHECKPOINT_FILE_MANAGER, checkpoint_files  # noqa: E402

DELAY = 3


def upserts(files: int, rows: int, seed: int = 5) -> list[list[tuple[str, str, int, int]]]:
    """``files`` lists of ``rows`` upserts ``(key, symbol, time, order)``, times rising,
    and a last list of one far-off upsert."""
    rnd = random.Random(seed)
    lists = [
        [(rnd.choice("abcdefgh"), rnd.choice("xyz"), f * 10 + rnd.randrange(10), i) for i in range(rows)]
        for f in range(files)
    ]
    return [*lists, [("end", "x", 10**9, 0)]]


def jvm_cpu_seconds(pid: int) -> float:
    """User and system CPU of process ``pid`` and of the children it reaped."""
    return cpu_ticks(pid, reaped=True) / os.sysconf("SC_CLK_TCK")


def stream_once(spark, work: str, lists) -> tuple[float, float]:
    """Seconds and JVM CPU seconds of one stream over ``lists``, its output checked."""
    shutil.rmtree(work, ignore_errors=True)
    folder, target, checkpoint = (os.path.join(work, n) for n in ("in", "arr", "ckpt"))
    os.makedirs(folder)
    for i, rows in enumerate(lists):
        path = os.path.join(folder, f"part-{i:03d}.parquet")
        columns = ([r[c] for r in rows] for c in range(4))
        pq.write_table(pa.table(dict(zip(("key", "symbol", "time", "order"), columns, strict=True))), path)
        os.utime(path, (1_700_000_000 + i,) * 2)
    frame = spark.readStream.schema("key string, symbol string, time long, order long").option(
        "maxFilesPerTrigger", 1).parquet(folder)
    pid = jvm_pid(spark)
    cpu, started = jvm_cpu_seconds(pid), time.perf_counter()
    query = run_stream(Upsert(), frame, into=target, checkpoint=checkpoint, order="order", delay=DELAY,
                       trigger={"availableNow": True}, progress=None)
    query.awaitTermination()
    seconds, cpu = time.perf_counter() - started, jvm_cpu_seconds(pid) - cpu
    got = PersistedArrangement(target)
    want = sorted(u for u in run_local(Upsert(), [r for rows in lists for r in rows]).updates if u.time < got.upper)
    if sorted(got.updates()) != want:
        raise SystemExit(f"the stream's arrangement differs from run_local below {got.upper}")
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--rows", type=int, default=60)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    spark = local_session(master="local[2]", shuffle_partitions=2)
    work = tempfile.mkdtemp(prefix="bench-checkpoints-")
    lists = upserts(args.files, args.rows)
    ours = checkpoint_files(spark, work)[CHECKPOINT_FILE_MANAGER]
    ways = {
        "FileContext": {CHECKPOINT_FILE_MANAGER: ours.replace("FileSystemBased", "FileContextBased")},
        "FileSystem": {},
    }
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for round_ in range(1 + args.runs):
            for name, settings in ways.items():
                with scoped_conf(spark, settings):
                    figures = stream_once(spark, os.path.join(work, name), lists)
                if round_:
                    measured[name].append(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.files} micro-batches of {args.rows} upserts and one of a far-off upsert; {os.cpu_count()} cores; median of {args.runs} "
          f"interleaved runs after one, each checked against run_local")
    print(f"{'checkpoint written through':<28}{'seconds':>9}{'JVM CPU s':>11}")
    medians = {name: [statistics.median(f[i] for f in runs) for i in (0, 1)] for name, runs in measured.items()}
    for name, (seconds, cpu) in medians.items():
        print(f"{name:<28}{seconds:>9.2f}{cpu:>11.2f}")
    (a, a_cpu), (b, b_cpu) = medians.values()
    print(f"FileSystem / FileContext: {b / a:.2f}x the time, {b_cpu / a_cpu:.2f}x the JVM CPU")


if __name__ == "__main__":
    main()
