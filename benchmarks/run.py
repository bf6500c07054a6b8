"""The benchmark runner: one command, a table of medians, ratios to a floor, checked outputs.

Usage:
    python benchmarks/run.py [SET ...] [--n N] [--k K] [--runs R] [--slow]

SETs: ``local`` (U1 upsert in pure Python), ``tags`` (T1, a tag-set machine written by
subclassing, against a hand-written loop), ``spark`` (U1 on a local Spark session:
batch native, batch generic, Spark SQL window functions, streaming in 10
micro-batches), ``spark-tags`` (T1 on Spark), ``cdc`` (C1: 1M updates delivered twice
and shuffled). Default: all. ``--slow`` adds Spark's own ``groupBy().applyInPandas``
per-key approach, on a 2% slice.

Each set runs in its own process. Within it the approaches are measured warm and
interleaved: each runs once untimed (its output checked), then RUNS rounds run every
approach in turn (A B A B ...), with Spark's cache cleared and garbage collected
before each run, so every approach sees the same session state and no run reads
another's cached output. The table shows the median, events/s, the peak memory of
this Python process, of this session's Spark Python workers and of the JVM heap
during that approach's runs (each peak reset before a run), and the ratio to the
set's floor. Every approach's output is checked (count and content hash) against the
local reference runtime, after its warm-up and its last timed run; a mismatch fails
the run.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from operator import itemgetter

from workloads import CACHE, tag_symbol, tag_workload, upsert_workload

from statemachines import Machine

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = ("local", "tags", "spark", "spark-tags", "cdc")
STREAM_FILES = 10


def digest(updates) -> dict:
    """Count and content hash of consolidated updates ``((key, value), time, diff)``."""
    lines = sorted(f"{k!r}|{v!r}|{t!r}|{d!r}" for (k, v), t, d in updates)
    return {"count": len(lines), "hash": hashlib.sha256("\n".join(lines).encode()).hexdigest()}


def table_digest(table) -> dict:
    """:func:`digest` of a table ``key, value, time, diff``."""
    return digest(((key, value), t, diff) for key, value, t, diff in zip(*table.to_pydict().values(), strict=True))


def commands_of(n, k):
    table = upsert_workload(n, k)
    return list(zip(*(table.column(c).to_pylist() for c in ("key", "value", "time", "offset")), strict=True))


def bare_dict_loop(commands):
    """The upsert without the framework: sort, keep the last per (key, time), diff."""
    ordered = sorted(commands, key=itemgetter(0, 2, 3))
    current, out, last = {}, [], len(ordered) - 1
    for i, (key, value, t, _) in enumerate(ordered):
        if i < last and ordered[i + 1][0] == key and ordered[i + 1][2] == t:
            continue
        old = current.get(key)
        if old == value:
            continue
        if old is not None:
            out.append(((key, old), t, -1))
        if value is None:
            del current[key]
        else:
            out.append(((key, value), t, 1))
            current[key] = value
    return out  # by key, then time: a bare loop need not sort its output again


class TagSet(Machine):
    """A tag set per key, written by subclassing: symbols ``("add" | "del", tag)``.
    Its transition reads only values and symbol, which it declares (``tabulated``):
    Spark batch steps its keys in bulk."""

    tabulated = True

    def transition(self, key, values, symbol, time):
        op, tag = symbol
        return values | {tag} if op == "add" else values - {tag}


class EventByEventTagSet(TagSet):
    """The same machine without the declaration: stepped event by event everywhere."""

    tabulated = False


def tag_events_of(n, k):
    return [(key, tag_symbol(value, t), t, offset) for key, value, t, offset in commands_of(n, k)]


def hand_tag_loop(events):
    """The tag set without the framework: sort, apply each time's commands, diff."""
    ordered = sorted(events, key=itemgetter(0, 2, 3))
    current, out, i, n = {}, [], 0, len(ordered)
    while i < n:
        key, _, t, _ = ordered[i]
        before = current.get(key, frozenset())
        after = set(before)
        while i < n and ordered[i][0] == key and ordered[i][2] == t:
            op, tag = ordered[i][1]
            if op == "add":
                after.add(tag)
            else:
                after.discard(tag)
            i += 1
        if after != before:
            out.extend(((key, v), t, -1) for v in before - after)
            out.extend(((key, v), t, 1) for v in after - before)
            if after:
                current[key] = frozenset(after)
            else:
                del current[key]
    return out


# -- approaches: each returns (prepare, run, check); run is timed, check is not ------


def local_approaches(n, k):
    from statemachines import run_local
    from statemachines.library import Upsert

    commands = commands_of(n, k)
    return {
        "local floor: bare dict loop": (lambda: bare_dict_loop(commands), digest),
        "local: run_local(Upsert())": (
            lambda: run_local(Upsert(), commands),
            lambda result: digest(result.updates),
        ),
    }


def tag_approaches(n, k):
    from statemachines import run_local

    events = tag_events_of(n, k)
    return {
        "tags floor: hand-written dict loop": (lambda: hand_tag_loop(events), digest),
        "tags: run_local(TagSet())": (lambda: run_local(TagSet(), events), lambda result: digest(result.updates)),
    }


def spark_tag_approaches(n, k, work):
    from statemachines import PersistedArrangement
    from statemachines.spark import local_session, run_batch

    spark = local_session()
    tag_workload(n, k)
    source = str(CACHE / f"t1_n{n}_k{k}_s7.parquet")

    def floor():
        frame = spark.read.parquet(source)
        frame.repartition("key").sortWithinPartitions("key", "time").write.mode("overwrite").parquet(f"{work}/floor")

    def hand_loop():
        """The per-event floor: the hand-written loop in each partition, no framework."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = "key long, value string, time long, diff long"
        arrow_schema = pa.schema([("key", pa.int64()), ("value", pa.string()), ("time", pa.int64()), ("diff", pa.int64())])

        def partition(batches):
            rows = []
            for batch in batches:
                key, symbol, t, offset = (c.to_pylist() for c in batch.columns)
                ops, tags = (f.to_pylist() for f in batch.column(1).flatten())
                rows += zip(key, zip(ops, tags, strict=True), t, offset, strict=True)
            updates = hand_tag_loop(rows)
            pairs, times, diffs = zip(*updates, strict=True) if updates else ((), (), ())
            keys, values = zip(*pairs, strict=True) if updates else ((), ())
            columns = (keys, values, times, diffs)
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, f.type) for c, f in zip(columns, arrow_schema, strict=True)], schema=arrow_schema
            )

        frame = spark.read.parquet(source).repartition("key").sortWithinPartitions("key", "time", "offset")
        frame.mapInArrow(partition, schema).write.mode("overwrite").parquet(f"{work}/hand")
        return pq.read_table(f"{work}/hand")

    def batch(machine):
        def run():
            target = f"{work}/arr"
            shutil.rmtree(target, ignore_errors=True)
            result = run_batch(
                machine, spark.read.parquet(source), order="offset", into=target, value_type="string", native=False
            )
            result.unpersist()
            return target

        return run

    def arrangement_digest(target):
        return digest(PersistedArrangement(target).updates())

    return spark, {
        "spark tags floor: read + sort + write": (floor, None),
        "spark tags: hand-written loop in mapInArrow": (hand_loop, table_digest),
        "spark tags: run_batch(TagSet()), tabulated": (batch(TagSet()), arrangement_digest),
        "spark tags: run_batch, event by event": (batch(EventByEventTagSet()), arrangement_digest),
    }


SUSTAINED: list[float] = []  # events/s of a streaming run after its first micro-batch


def fresh_checkpoint(work):
    """A new checkpoint folder for each run: a stopped query's state store may still
    write into its old one (reusing it failed a run with STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)."""
    return tempfile.mkdtemp(dir=work, prefix="ckpt-")


def spark_approaches(n, k, work):
    from statemachines import PersistedArrangement
    from statemachines.library import Upsert
    from statemachines.spark import local_session, run_batch, run_stream

    spark = local_session()
    source = str(CACHE / f"u1_n{n}_k{k}_s7.parquet")

    def floor():
        frame = spark.read.parquet(source)
        frame.repartition("key").sortWithinPartitions("key", "time").write.mode(
            "overwrite"
        ).parquet(f"{work}/floor")

    def batch(native):
        def run():
            target = f"{work}/arr"
            shutil.rmtree(target, ignore_errors=True)
            result = run_batch(
                Upsert(), spark.read.parquet(source), symbol="value", order="offset",
                into=target, native=native,
            )
            result.unpersist()
            return target

        return run

    def window_functions():
        """The upsert as a Spark SQL user writes it: the last command per (key, time)
        (row_number), the value before it (lag), a retraction and an insertion."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        frame = spark.read.parquet(source)
        last = Window.partitionBy("key", "time").orderBy(F.col("offset").desc())
        winners = frame.withColumn("rank", F.row_number().over(last)).where("rank = 1")
        steps = winners.withColumn("before", F.lag("value").over(Window.partitionBy("key").orderBy("time")))
        change = F.array(
            F.when(F.col("before").isNotNull(), F.struct(F.col("before").alias("value"), F.lit(-1).alias("diff"))),
            F.when(F.col("value").isNotNull(), F.struct(F.col("value").alias("value"), F.lit(1).alias("diff"))),
        )
        out = (
            steps.where(~F.col("before").eqNullSafe(F.col("value")))
            .select("key", "time", F.explode(change).alias("o"))
            .where(F.col("o").isNotNull())
            .select("key", "o.value", "time", "o.diff")
        )
        out.write.mode("overwrite").parquet(f"{work}/window")
        return f"{work}/window"

    def parquet_digest(path):
        return digest(((r.key, r.value), r.time, r.diff) for r in spark.read.parquet(path).toLocalIterator())

    def stream_files():
        """The U1 commands as STREAM_FILES files (plus a far-future flush), in order."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = f"{work}/in"
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        table = pq.read_table(source)
        size = -(-table.num_rows // STREAM_FILES)
        for i in range(STREAM_FILES):
            path = f"{folder}/part-{i:02d}.parquet"
            pq.write_table(table.slice(i * size, size), path)
            os.utime(path, (1_700_000_000 + i,) * 2)
        # a last event far in the future moves the frontier past every command
        flush = table.slice(0, 1).to_pylist()[0]
        flush.update(key=-1, value=None, time=flush["time"] + 10**12)
        pq.write_table(pa.Table.from_pylist([flush], schema=table.schema), f"{folder}/part-99.parquet")
        os.utime(f"{folder}/part-99.parquet", (1_700_000_099,) * 2)
        return folder

    def stream_floor():
        """Spark's own cost of streaming: the floor's sort + write, once per micro-batch."""
        folder, checkpoint = stream_files(), fresh_checkpoint(work)
        frame = spark.readStream.schema(spark.read.parquet(source).schema).option(
            "maxFilesPerTrigger", 1
        ).parquet(folder)

        def sort_and_write(batch, batch_id):
            batch.repartition("key").sortWithinPartitions("key", "time").write.mode(
                "overwrite"
            ).parquet(f"{work}/floor-{batch_id}")

        started = time.perf_counter()
        frame.writeStream.foreachBatch(sort_and_write).option("checkpointLocation", checkpoint).trigger(
            availableNow=True
        ).start().awaitTermination()
        return None, time.perf_counter() - started

    def stateful_floor():
        """Spark's own cost of the bucketed stream: packing, the stateful operator with
        one small state update per bucket, the collect; no machine runs."""
        import pandas as pd
        from pyspark.sql.streaming import StatefulProcessor

        from statemachines.spark.batch import EventColumns, prepare_events
        from statemachines.spark.bucket_state import decode_table
        from statemachines.spark.buckets import (
            bucket_labels,
            default_buckets,
            packed_events,
            shuffle_partitions,
        )

        class CountingProcessor(StatefulProcessor):
            """Counts each bucket's events in its state; runs no machine."""

            def init(self, handle):
                self.state = handle.getValueState("count", "count long")

            def handleInputRows(self, key, rows, timerValues):
                n = sum(decode_table(p).num_rows for f in rows for p in f["payload"] if p is not None)
                stored = self.state.get()
                self.state.update(((stored[0] if stored else 0) + n,))
                yield pd.DataFrame({"events": [n]})

            def close(self):
                pass

        folder, checkpoint = stream_files(), fresh_checkpoint(work)
        frame = spark.readStream.schema(spark.read.parquet(source).schema).option(
            "maxFilesPerTrigger", 1
        ).parquet(folder)
        prepared = prepare_events(frame, EventColumns(symbol="value", order="offset"))
        # packed as run_stream packs them, into as many buckets, labelled alike
        labels = bucket_labels(spark, default_buckets(spark), shuffle_partitions(spark, checkpoint))
        packed = packed_events(prepared, labels, 1000).withWatermark("clock", "0 seconds")
        counted = packed.groupBy("bucket").transformWithStateInPandas(
            CountingProcessor(), "events long", "Append", "EventTime"
        )
        started = time.perf_counter()
        counted.writeStream.foreachBatch(lambda batch, _: batch.toArrow()).option(
            "checkpointLocation", checkpoint
        ).trigger(availableNow=True).start().awaitTermination()
        return None, time.perf_counter() - started

    def stream():
        folder, target, checkpoint = stream_files(), f"{work}/arr", fresh_checkpoint(work)
        shutil.rmtree(target, ignore_errors=True)
        frame = spark.readStream.schema(spark.read.parquet(source).schema).option(
            "maxFilesPerTrigger", 1
        ).parquet(folder)
        started = time.perf_counter()
        query = run_stream(
            Upsert(), frame, into=target, checkpoint=checkpoint, symbol="value",
            order="offset", delay=1000, trigger={"availableNow": True}, progress=None,
        )
        query.awaitTermination()
        elapsed = time.perf_counter() - started  # file splitting is not timed
        # sustained: the micro-batches after the first, which also starts the query
        later = [p for p in query.recentProgress if p["batchId"] > 0]
        SUSTAINED.append(
            sum(p["numInputRows"] for p in later) / (sum(p["durationMs"]["triggerExecution"] for p in later) / 1000)
        )
        return target, elapsed

    def arrangement_digest(target):
        return digest(PersistedArrangement(target).updates())

    return spark, {
        "spark floor: read + sort + write": (floor, None),
        "spark: run_batch native Upsert": (batch(True), arrangement_digest),
        "spark: run_batch generic path": (batch(False), arrangement_digest),
        "spark SQL: window functions, Parquet out": (window_functions, parquet_digest),
        "spark stream floor: 10 x sort + write": (stream_floor, None),
        "spark stateful floor: buckets, no machine": (stateful_floor, None),
        "spark: run_stream, 10 micro-batches": (stream, arrangement_digest),
    }


def pandas_approach(n, k, work):
    """Spark's per-key applyInPandas upsert on a 2% slice (too slow for the full N)."""
    import pandas as pd

    from statemachines.spark import local_session

    spark = local_session()
    size = max(n // 50, 1)
    source = str(CACHE / f"u1_n{n}_k{k}_s7.parquet")

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
        return pd.DataFrame(rows, columns=["key", "value", "time", "diff"])

    def run():
        frame = spark.read.parquet(source).orderBy("offset").limit(size)
        out = frame.groupBy("key").applyInPandas(upsert_group, "key long, value string, time long, diff long")
        out.write.mode("overwrite").parquet(f"{work}/pandas")
        return f"{work}/pandas"

    def check(path):
        rows = spark.read.parquet(path).collect()
        return digest(((r.key, r.value), r.time, r.diff) for r in rows)

    return spark, size, (run, check)


def cdc_approaches(n):
    import random

    from cdc_reader import mangled_messages

    from statemachines.cdc import CdcReader

    history, messages = mangled_messages(n, random.Random(3))

    def floor():
        """A dict keeping each delivered (data, time) once: no progress, no ordering."""
        final = {(u.data, u.time): u.diff for m in messages if hasattr(m, "updates") for u in m.updates}
        return [(data, time, diff) for (data, time), diff in final.items()]

    def read():
        reader = CdcReader()
        return [u for m in messages for _, ups in reader.push(m) for u in ups]

    return {
        "cdc floor: dict of delivered updates": (floor, digest),
        "cdc: CdcReader, 2x duplicated, shuffled": (read, digest),
    }, digest(history)


# -- one set in one process, its approaches interleaved --------------------------


def reset_peak_rss(pid: int | str = "self") -> None:
    """Start the process's peak resident memory (VmHWM) afresh (Linux: clear_refs 5)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass  # not Linux, or not ours: the peak then covers the process's life


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident memory (VmHWM) since it started or was last reset."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if pid == "self" else 0.0


def descendants(root: int) -> set[int]:
    """The processes below ``root`` (its children, their children, ...)."""
    parents = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parents[int(pid)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def cpu_ticks(pid: int, reaped: bool = False) -> int | None:
    """User + system CPU time a process has used, in clock ticks (None: it is gone);
    with ``reaped``, that of the children it waited for too."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11 : 15 if reaped else 13])
    except (OSError, IndexError, ValueError):
        return None


class WorkerPeak:
    """The peak memory of this session's Spark Python workers during a block.

    Counted: the Python processes below this session's JVM (``pyspark.daemon``, its
    forks, the streaming workers) that used CPU during the block. Idle workers left
    resident by an earlier approach, and other sessions' workers, do not count.
    """

    def __init__(self, jvm_pid: int | None, every: float = 0.2) -> None:
        import threading

        self.peak_mb = 0.0
        self._cpu_before: dict[int, int | None] = {}
        self._jvm = jvm_pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._every = every

    def __enter__(self) -> WorkerPeak:
        if self._jvm is not None:
            for pid in descendants(self._jvm):
                reset_peak_rss(pid)
                self._cpu_before[pid] = cpu_ticks(pid)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._poll()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._poll()

    def _poll(self) -> None:
        if self._jvm is None:
            return
        for pid in descendants(self._jvm):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"pyspark" not in f.read():
                        continue
            except OSError:
                continue  # the process ended meanwhile
            if pid in self._cpu_before and cpu_ticks(pid) == self._cpu_before[pid]:
                continue  # idle all along: not this block's worker
            self.peak_mb = max(self.peak_mb, peak_rss_mb(pid))


def jvm_pid(spark) -> int | None:
    return None if spark is None else int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def heap_pools(spark) -> list:
    if spark is None:
        return []
    factory = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    return [p for p in factory.getMemoryPoolMXBeans() if p.getType().name() == "HEAP"]


def jvm_peak_mb(pools) -> float:
    return sum(p.getPeakUsage().getUsed() for p in pools) / 2**20


def approaches_of(group: str, names: list[str], args, work: str) -> tuple:
    """``(spark or None, {name: (run, check, events, expected)})`` for one set."""
    if group == "local":
        found = local_approaches(args.n, args.k)
        return None, {name: (*found[name], args.n, None) for name in names}
    if group in ("tags", "spark-tags"):
        expected = tag_reference(args.n, args.k)
        if group == "tags":
            spark, found = None, tag_approaches(args.n, args.k)
        else:
            spark, found = spark_tag_approaches(args.n, args.k, work)
        return spark, {name: (*found[name], args.n, expected) for name in names}
    if group == "cdc":
        found, expected = cdc_approaches(args.n)
        return None, {name: (*found[name], 2 * args.n, expected) for name in names}
    spark, found = spark_approaches(args.n, args.k, work)
    chosen = {name: (*found[name], args.n, None) for name in names if name in found}
    slow = [name for name in names if name not in found]
    if slow:  # the per-key applyInPandas approach, on a slice
        _, events, (run, check) = pandas_approach(args.n, args.k, work)
        chosen[slow[0]] = (run, check, events, None)
    return spark, chosen


def run_set(group: str, names: list[str], args) -> dict:
    """Every approach of the set: warm-up, then ``args.runs`` interleaved timed rounds."""
    work = tempfile.mkdtemp(prefix="bench-")
    spark, approaches = approaches_of(group, names, args, work)
    pools, jvm = heap_pools(spark), jvm_pid(spark)
    outcomes = {
        name: {"seconds": [], "py_mb": 0.0, "worker_mb": 0.0, "jvm_mb": 0.0, "events": events,
               "expected": expected, "checks": []}
        for name, (_, _, events, expected) in approaches.items()
    }

    def once(name: str, timed: bool, checked: bool) -> None:
        run, check, *_ = approaches[name]
        outcome = outcomes[name]
        if spark is not None:
            spark.catalog.clearCache()
        gc.collect()
        reset_peak_rss()
        for pool in pools:
            pool.resetPeakUsage()
        with WorkerPeak(jvm) as workers:
            started = time.perf_counter()
            result = run()
            elapsed = time.perf_counter() - started
        if isinstance(result, tuple):  # the approach timed itself
            result, elapsed = result
        if timed:
            outcome["seconds"].append(elapsed)
            outcome["py_mb"] = max(outcome["py_mb"], peak_rss_mb())
            outcome["worker_mb"] = max(outcome["worker_mb"], workers.peak_mb)
            outcome["jvm_mb"] = max(outcome["jvm_mb"], jvm_peak_mb(pools))
        if checked and check is not None:
            outcome["checks"].append(check(result))

    for name in approaches:  # warm-up: not timed, output checked
        once(name, timed=False, checked=True)
    SUSTAINED.clear()
    for round_ in range(args.runs):
        for name in approaches:
            once(name, timed=True, checked=round_ == args.runs - 1)
    if "spark: run_stream, 10 micro-batches" in outcomes:
        outcomes["spark: run_stream, 10 micro-batches"]["sustained"] = statistics.median(SUSTAINED)
    shutil.rmtree(work, ignore_errors=True)
    return outcomes


def verify(name: str, got: dict, want: dict) -> None:
    """Fail the whole run when an approach's output is not the reference's."""
    if got != want:
        raise SystemExit(f"{name}: output differs from the local reference: {got} != {want}")


def reference(n, k, slice_size=None) -> dict:
    """The local reference runtime's output digest for U1 (or its first ``slice_size`` arrivals)."""
    from statemachines import run_local
    from statemachines.library import Upsert

    path = CACHE / f"reference_n{n}_k{k}_{slice_size or 'all'}.json"
    if path.exists():
        return json.loads(path.read_text())
    commands = commands_of(n, k)
    if slice_size:
        commands = sorted(commands, key=itemgetter(3))[:slice_size]
    ref = digest(run_local(Upsert(), commands).updates)
    path.write_text(json.dumps(ref))
    return ref


def tag_reference(n, k) -> dict:
    """The local reference runtime's output digest for T1."""
    from statemachines import run_local

    path = CACHE / f"reference_t1_n{n}_k{k}.json"
    if not path.exists():
        path.write_text(json.dumps(digest(run_local(TagSet(), tag_events_of(n, k)).updates)))
    return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description="Run benchmark sets and print one table.")
    parser.add_argument("sets", nargs="*", metavar="SET", help=f"{', '.join(SETS)} (default: all)")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slow", action="store_true", help="add the per-key applyInPandas approach")
    parser.add_argument("--set", help=argparse.SUPPRESS)  # run one set in this process
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.set:
        print(json.dumps(run_set(args.set, json.loads(args.names), args)))
        return
    args.sets = args.sets or list(SETS)
    unknown = set(args.sets) - set(SETS)
    if unknown:
        parser.error(f"unknown set(s) {', '.join(sorted(unknown))}; choose from {', '.join(SETS)}")

    names = {
        "local": ["local floor: bare dict loop", "local: run_local(Upsert())"],
        "spark": [
            "spark floor: read + sort + write", "spark: run_batch native Upsert",
            "spark: run_batch generic path", "spark SQL: window functions, Parquet out",
            "spark stream floor: 10 x sort + write",
            "spark stateful floor: buckets, no machine", "spark: run_stream, 10 micro-batches",
        ] + (["spark: groupBy.applyInPandas (2% slice)*"] if args.slow else []),
        "cdc": ["cdc floor: dict of delivered updates", "cdc: CdcReader, 2x duplicated, shuffled"],
        "tags": ["tags floor: hand-written dict loop", "tags: run_local(TagSet())"],
        "spark-tags": [
            "spark tags floor: read + sort + write", "spark tags: hand-written loop in mapInArrow",
            "spark tags: run_batch(TagSet()), tabulated", "spark tags: run_batch, event by event",
        ],
    }
    upsert_workload(args.n, args.k)
    u1 = reference(args.n, args.k) if {"local", "spark"} & set(args.sets) else None
    if {"tags", "spark-tags"} & set(args.sets):
        tag_workload(args.n, args.k)
        tag_reference(args.n, args.k)
    rows, sustained = [], {}
    for group in args.sets:
        command = [
            sys.executable, __file__, "--set", group, "--names", json.dumps(names[group]),
            "--n", str(args.n), "--k", str(args.k), "--runs", str(args.runs),
        ]
        done = subprocess.run(command, capture_output=True, text=True, cwd=HERE)
        if done.returncode != 0:
            raise SystemExit(f"{group} failed:\n{done.stderr[-3000:]}")
        outcomes = json.loads(done.stdout.strip().splitlines()[-1])
        floor = None
        for name in names[group]:
            outcome = outcomes[name]
            if "applyInPandas" in name:
                want = reference(args.n, args.k, slice_size=max(args.n // 50, 1))
            else:
                want = outcome["expected"] or u1
            for got in outcome["checks"]:
                verify(name, got, want)
            median = statistics.median(outcome["seconds"])
            per_event = median / outcome["events"]
            floor = floor or per_event
            rows.append((name, outcome["events"], median, outcome["events"] / median, outcome["py_mb"], outcome["worker_mb"], outcome["jvm_mb"], per_event / floor))
            if outcome.get("sustained"):
                sustained[name] = outcome["sustained"]
        print(f"  done: {group}", file=sys.stderr)

    print(
        f"N={args.n:,} K={args.k:,}, median of {args.runs} runs per approach, interleaved warm in one "
        f"session per set (cache cleared before each run), {os.cpu_count()} cores; outputs checked against run_local"
    )
    print(f"{'approach':<44}{'N':>11}{'median s':>10}{'events/s':>12}{'py MB':>8}{'wkr MB':>8}{'JVM MB':>8}{'vs floor':>10}")
    for name, events, median, rate, py_mb, worker_mb, jvm_mb, ratio in rows:
        print(f"{name:<44}{events:>11,}{median:>10.2f}{rate:>12,.0f}{py_mb:>8,.0f}{worker_mb:>8,.0f}{jvm_mb:>8,.0f}{ratio:>10.2f}")
    if args.slow:
        print("* on a 2% slice: too slow for the full N; its ratio is per event")
    rates = {name: rate for name, _, _, rate, *_ in rows}
    batch, stream, floors = "spark: run_batch generic path", "spark: run_stream, 10 micro-batches", (
        "spark floor: read + sort + write", "spark stream floor: 10 x sort + write",
        "spark stateful floor: buckets, no machine")
    if batch in rates and stream in rates:
        print(
            f"streaming / batch throughput (generic path): {rates[stream] / rates[batch]:.0%} whole run, "
            f"{sustained[stream] / rates[batch]:.0%} sustained ({sustained[stream]:,.0f} events/s after "
            f"the first micro-batch); Spark's own stream floor / batch floor: "
            f"{rates[floors[1]] / rates[floors[0]]:.0%}; stateful floor / batch floor: "
            f"{rates[floors[2]] / rates[floors[0]]:.0%}"
        )


if __name__ == "__main__":
    main()
