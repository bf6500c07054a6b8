"""Benchmark: a stream's micro-batches against the state it holds.

Usage:
    python benchmarks/streaming.py [--keys 100000,5000000] [--batch 100000] [--batches 10]
                                   [--buckets B] [--runs 2]

For each count of live keys K, an arrangement is first given K keys (``run_batch`` of
one upsert per key, native path), then ``run_stream(Upsert())`` takes ``--batches``
files of ``--batch`` upserts each, on keys drawn from all K (times rising, delay
1000), one file per micro-batch. Printed per K: seconds per micro-batch after the
first (the first also loads the initial state), median and slowest; the events'
latency (from the start of the micro-batch that received them to the publication of
the micro-batch that applied them, as the stream reports it); the peak memory of the
Spark JVM heap and of the busiest Spark Python worker. Each stream's arrangement is
checked against ``run_local`` over the same commands. Beside each stream, ``run_batch``
(the generic path, Spark's cache cleared) takes one micro-batch's upserts into a copy
of the same seeded arrangement: the stream's sustained throughput is given as a share
of that batch throughput. Runs are interleaved (K1 K2 K1 K2) in one session.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from run import WorkerPeak, heap_pools, jvm_peak_mb, jvm_pid  # noqa: E402

from statemachines import PersistedArrangement, run_local  # noqa: E402
from statemachines.library import Upsert  # noqa: E402
from statemachines.spark import local_session, run_batch, run_stream  # noqa: E402
from statemachines.spark.buckets import default_buckets  # noqa: E402

DELAY = 1_000


def seed_table(k: int) -> pa.Table:
    """One upsert per key at time 0: K live keys."""
    return pa.table({
        "key": pa.array(np.arange(k, dtype=np.int64)), "symbol": pa.array([f"s{i % 97}" for i in range(k)]),
        "time": pa.array(np.zeros(k, dtype=np.int64)), "order": pa.array(np.zeros(k, dtype=np.int64)),
    })


def stream_tables(k: int, batch: int, batches: int, seed: int = 3) -> list[pa.Table]:
    """``batches`` tables of ``batch`` upserts on random keys of all K, times rising."""
    rng = np.random.default_rng(seed)
    tables = []
    for b in range(batches):
        times = 1 + b * batch + np.arange(batch, dtype=np.int64)
        tables.append(pa.table({
            "key": pa.array(rng.integers(0, k, batch, dtype=np.int64)),
            "symbol": pa.array([f"v{x}" for x in rng.integers(0, 10**6, batch)]),
            "time": pa.array(times), "order": pa.array(times),
        }))
    flush = pa.table({"key": pa.array([-1], pa.int64()), "symbol": pa.array(["end"]),
                      "time": pa.array([10**12], pa.int64()), "order": pa.array([0], pa.int64())})
    return [*tables, flush]


def prepare(spark, work: str, k: int, args) -> tuple[str, list[pa.Table]]:
    """The seed arrangement's directory (kept, copied per run) and the stream's tables."""
    seeded = os.path.join(work, f"seed-{k}")
    if not os.path.exists(seeded):
        path = os.path.join(work, f"seed-{k}.parquet")
        pq.write_table(seed_table(k), path)
        run_batch(Upsert(), spark.read.parquet(path), order="order", into=seeded)
    return seeded, stream_tables(k, args.batch, args.batches)


def run_once(spark, work: str, k: int, seeded: str, tables: list[pa.Table], args) -> dict:
    run_dir = os.path.join(work, f"run-{k}")
    shutil.rmtree(run_dir, ignore_errors=True)
    folder, target, checkpoint = (os.path.join(run_dir, n) for n in ("in", "arr", "ckpt"))
    os.makedirs(folder)
    shutil.copytree(seeded, target)
    for i, table in enumerate(tables):
        path = os.path.join(folder, f"part-{i:03d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i,) * 2)
    frame = spark.readStream.schema("key long, symbol string, time long, order long").option(
        "maxFilesPerTrigger", 1).parquet(folder)
    reports = []
    pools = heap_pools(spark)
    for pool in pools:
        pool.resetPeakUsage()
    started = time.perf_counter()
    with WorkerPeak(jvm_pid(spark)) as workers:
        query = run_stream(Upsert(), frame, into=target, checkpoint=checkpoint, order="order", delay=DELAY,
                           buckets=args.buckets, trigger={"availableNow": True}, progress=reports.append)
        query.awaitTermination()
    elapsed = time.perf_counter() - started
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress if p["numInputRows"]]
    return {
        "elapsed": elapsed, "first": durations[0], "later": durations[1:args.batches],
        "latency": [r.latency for r in reports if getattr(r, "latency", None) is not None],
        "jvm_mb": jvm_peak_mb(pools), "worker_mb": workers.peak_mb, "target": target,
    }


def batch_once(spark, work: str, k: int, seeded: str, tables: list[pa.Table]) -> float:
    """Seconds of run_batch (generic path) over the first micro-batch's upserts."""
    target = os.path.join(work, f"batch-{k}")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(seeded, target)
    path = os.path.join(work, f"batch-{k}.parquet")
    pq.write_table(tables[0], path)
    spark.catalog.clearCache()
    started = time.perf_counter()
    run_batch(Upsert(), spark.read.parquet(path), order="order", into=target, native=False)
    return time.perf_counter() - started


def check(target: str, seeded: str, tables: list[pa.Table]) -> None:
    """The stream's arrangement equals run_local over the seed and the stream's commands."""
    seed = PersistedArrangement(seeded).updates()
    commands = [tuple(r.values()) for t in tables for r in t.to_pylist()]
    expected = run_local(Upsert(), [(d[0], d[1], t, 0) for d, t, _ in seed] + commands)
    got = PersistedArrangement(target)
    frontier = got.upper
    want = sorted(u for u in expected.updates if u.time < frontier)
    if sorted(got.updates()) != want:
        raise SystemExit(f"the stream's arrangement differs from run_local below {frontier}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="100000,5000000")
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--buckets", type=int, default=None, help="default: the stream's own")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--no-check", action="store_true", help="skip the check against run_local")
    args = parser.parse_args()
    sizes = [int(k) for k in args.keys.split(",")]
    spark = local_session()
    work = tempfile.mkdtemp(prefix="bench-stream-")
    try:
        prepared = {k: prepare(spark, work, k, args) for k in sizes}
        results: dict[int, list[dict]] = {k: [] for k in sizes}
        for round_ in range(args.runs):
            for k in sizes:
                outcome = run_once(spark, work, k, *prepared[k], args)
                outcome["batch"] = batch_once(spark, work, k, *prepared[k])
                if round_ == 0 and not args.no_check:
                    check(outcome["target"], *prepared[k])
                results[k].append(outcome)
        buckets = args.buckets or default_buckets(spark)
        print(f"{args.batches} micro-batches of {args.batch:,} upserts on keys drawn from K live keys; "
              f"{buckets} buckets; {os.cpu_count()} cores; {args.runs} runs, interleaved")
        print(f"{'live keys':>10}{'first s':>9}{'median s':>10}{'slowest s':>11}{'events/s':>11}"
              f"{'latency s':>11}{'JVM MB':>8}{'wkr MB':>8}{'of batch':>10}")
        medians = {}
        for k in sizes:
            later = [d for r in results[k] for d in r["later"]]
            medians[k] = statistics.median(later)
            latency = [x for r in results[k] for x in r["latency"]]
            print(f"{k:>10,}{statistics.median(r['first'] for r in results[k]):>9.2f}{medians[k]:>10.2f}"
                  f"{max(later):>11.2f}{args.batch / medians[k]:>11,.0f}"
                  f"{(statistics.median(latency) if latency else float('nan')):>11.2f}"
                  f"{max(r['jvm_mb'] for r in results[k]):>8,.0f}{max(r['worker_mb'] for r in results[k]):>8,.0f}"
                  f"{statistics.median(r['batch'] for r in results[k]) / medians[k]:>9.0%}")
        if len(sizes) > 1:
            print(f"seconds per micro-batch at {sizes[-1]:,} keys / at {sizes[0]:,} keys: "
                  f"{medians[sizes[-1]] / medians[sizes[0]]:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
