"""Spark batch runtime on the U1 upsert workload, beside the floor and a per-key baseline.

Usage: python benchmarks/spark_upsert.py [N] [K] [RUNS]   (default 1000000 100000 3)

Every approach reads the same Parquet file and writes its result as Parquet; the
session start is excluded. Printed: median seconds over RUNS, events/s, the ratio to
the floor measured in the same run (read + sort by (key, time) + write), and peak
memory of this driver process (Python) and of the JVM.
"""

from __future__ import annotations

import resource
import shutil
import statistics
import sys
import tempfile
import time

from workloads import CACHE, upsert_workload

from library import Upsert
from spark_runtime import local_session, run_batch, run_stream


def median_seconds(fn, runs):
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def jvm_peak_mb(spark):
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    return (runtime.totalMemory() - runtime.freeMemory()) / 2**20


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    upsert_workload(n, k)
    source = str(CACHE / f"u1_n{n}_k{k}_s7.parquet")
    spark = local_session()
    out = tempfile.mkdtemp(prefix="bench-")

    def floor():
        frame = spark.read.parquet(source)
        frame.repartition("key").sortWithinPartitions("key", "time").write.mode("overwrite").parquet(f"{out}/floor")

    def ours(native):
        def run():
            target = f"{out}/arr-{native}"
            shutil.rmtree(target, ignore_errors=True)
            frame = spark.read.parquet(source)
            result = run_batch(Upsert(), frame, symbol="value", order="offset", into=target, native=native)
            result.rejected.count()
            result.updates.unpersist()

        return run

    def per_key_pandas(limit):
        def upsert_group(pdf):
            pdf = pdf.sort_values(["time", "offset"])
            rows, current = [], None
            for t, group in pdf.groupby("time", sort=True):
                value = group["value"].iloc[-1]
                value = None if value != value else value
                if value != current:
                    if current is not None:
                        rows.append((pdf["key"].iloc[0], current, t, -1))
                    if value is not None:
                        rows.append((pdf["key"].iloc[0], value, t, 1))
                    current = value
            import pandas as pd

            return pd.DataFrame(rows, columns=["key", "value", "time", "diff"])

        def run():
            frame = spark.read.parquet(source).limit(limit)
            frame.groupBy("key").applyInPandas(
                upsert_group, "key long, value string, time long, diff long"
            ).write.mode("overwrite").parquet(f"{out}/pandas")

        return run

    stream_dir = f"{out}/stream-in"

    def split_for_streaming():
        import os

        import pyarrow.parquet as pq

        table = pq.read_table(source)
        os.makedirs(stream_dir, exist_ok=True)
        size = 100_000
        for i, start in enumerate(range(0, table.num_rows, size)):
            path = f"{stream_dir}/part-{i:03d}.parquet"
            pq.write_table(table.slice(start, size), path)
            os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))

    def streaming():
        target, checkpoint = f"{out}/arr-stream", f"{out}/ckpt"
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
        frame = (
            spark.readStream.schema(spark.read.parquet(source).schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(stream_dir)
        )
        run_stream(
            Upsert(), frame, into=target, checkpoint=checkpoint, symbol="value", order="offset",
            trigger={"availableNow": True}, progress=None,
        ).awaitTermination()

    split_for_streaming()
    floor_s = median_seconds(floor, runs)
    rows = [("floor: read + sort + write", n, floor_s)]
    rows.append(("run_batch native Upsert", n, median_seconds(ours(True), runs)))
    rows.append(("run_batch generic path", n, median_seconds(ours(False), runs)))
    rows.append(("run_stream native, 100k per micro-batch", n, median_seconds(streaming, runs)))
    small = max(n // 50, 1)
    rows.append((f"groupBy.applyInPandas (N={small:,})*", small, median_seconds(per_key_pandas(small), 1)))
    peak_py = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"U1 upsert on Spark (local[*]): N={n:,}, K={k:,}, median of {runs}; session start excluded")
    print(f"{'approach':<38}{'N':>11}{'seconds':>9}{'events/s':>12}{'vs floor':>10}")
    for name, size, secs in rows:
        rate = size / secs
        ratio = secs / floor_s * (n / size)  # per-event cost relative to the floor
        print(f"{name:<38}{size:>11,}{secs:>9.2f}{rate:>12,.0f}{ratio:>10.2f}")
    print("* per-key Python baseline on a 2% slice (too slow for the full N); its ratio is scaled to the full N")
    print(f"peak memory: driver Python {peak_py:,.0f} MB, JVM heap in use {jvm_peak_mb(spark):,.0f} MB")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
