"""Benchmark: a small stream's fixed costs, by how its checkpoint is written and what it declares.

Usage:
    python benchmarks/checkpoints.py [--files 6] [--rows 60] [--runs 4]

``run_stream(Upsert())`` takes ``--files`` Parquet files of ``--rows`` upserts each (one
file per micro-batch, times rising, delay 3, a last far-off upsert making the others
final) into a fresh arrangement and checkpoint, three ways interleaved (A B C A B C)
in one local session after a warm-up round:

- ``FileContext``: the session names Spark's default checkpoint file manager, which
  on a local disk without Hadoop's native library starts a ``readlink`` process for
  each path a rename checks;
- ``every state variable``: the checkpoint written through Hadoop's ``FileSystem``
  (the stream's own choice for a local checkpoint,
  ``statemachines.spark.streaming.checkpoint_files``), its buckets declaring every
  state variable any version of them declared, as a query on an earlier version's
  checkpoint does (``statemachines.spark.buckets.state_variables``);
- ``today's``: the stream as it runs on a new checkpoint: ``FileSystem``, and only
  the state variables buckets write today.

Each arrangement is checked against ``run_local`` over the same upserts (below its
upper), and each checkpoint's state variables against the way's. Printed: the median
seconds of a stream and the CPU seconds of the Spark JVM with the processes it
started and reaped (Hadoop's ``readlink`` and ``chmod``), from Linux's ``/proc``.
"""

from __future__ import annotations

import argparse
import contextlib
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
from statemachines.spark import buckets, local_session, run_stream  # noqa: E402
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


def stream_once(spark, work: str, lists) -> tuple[float, float, set[str] | None]:
    """Seconds and JVM CPU seconds of one stream over ``lists``, its output checked, and
    the state variables its checkpoint declares."""
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
    return seconds, cpu, buckets.declared_state_variables(spark, checkpoint)


@contextlib.contextmanager
def declaring(variables: tuple[str, ...] | None):
    """Streams started in the block declare ``variables`` (``None``: as they choose)."""
    chosen = buckets.state_variables
    if variables is not None:
        buckets.state_variables = lambda spark, checkpoint, started: variables
    try:
        yield
    finally:
        buckets.state_variables = chosen


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
    every = tuple(buckets.STATE_SCHEMAS)
    ways = {  # name: the session's settings, the state variables declared
        "FileContext": ({CHECKPOINT_FILE_MANAGER: ours.replace("FileSystemBased", "FileContextBased")}, None),
        "every state variable": ({}, every),
        "today's": ({}, None),
    }
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for round_ in range(1 + args.runs):
            for name, (settings, variables) in ways.items():
                with scoped_conf(spark, settings), declaring(variables):
                    seconds, cpu, declared = stream_once(spark, os.path.join(work, name), lists)
                if declared != set(variables or buckets.CURRENT):
                    raise SystemExit(f"{name}: the checkpoint declares {sorted(declared or ())}")
                if round_:
                    measured[name].append((seconds, cpu))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.files} micro-batches of {args.rows} upserts and one of a far-off upsert; {os.cpu_count()} cores; median of {args.runs} "
          f"interleaved runs after one, each checked against run_local")
    print(f"{'stream':<24}{'seconds':>9}{'JVM CPU s':>11}")
    medians = {name: [statistics.median(f[i] for f in runs) for i in (0, 1)] for name, runs in measured.items()}
    for name, (seconds, cpu) in medians.items():
        print(f"{name:<24}{seconds:>9.2f}{cpu:>11.2f}")
    today, today_cpu = medians["today's"]
    for name in ("FileContext", "every state variable"):
        seconds, cpu = medians[name]
        print(f"today's / {name}: {today / seconds:.2f}x the time, {today_cpu / cpu:.2f}x the JVM CPU")


if __name__ == "__main__":
    main()
