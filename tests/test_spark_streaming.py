"""Structured Streaming: equal to the local runtime step by step, exactly once, restartable."""

from __future__ import annotations

import os
import random
from collections import Counter
from operator import itemgetter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from statemachines import (
    InvalidArgument,
    LocalRuntime,
    PersistedArrangement,
    consolidate,
    run_local,
)
from statemachines.library import Upsert, UpsertWithLateness
from statemachines.persisted import check, read_state
from statemachines.spark import MicroBatchRunner, read_rejected, run_stream
from statemachines.spark.batch import EventColumns
from statemachines.spark.buckets import declared_state_variables
from statemachines.spark.output import UPDATE
from statemachines.spark.session import scoped_conf
from statemachines.spark.streaming import CHECKPOINT_FILE_MANAGER, checkpoint_files
from tests import background
from tests.delta_reader import delta_rs_change_feed, delta_rs_updates
from tests.machines import Session, SubclassedUpsert

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol string, time long, order long"
TIMESTAMPED = "key string, symbol string, time timestamp, order long"
ARROW_SCHEMA = pa.schema([("key", pa.string()), ("symbol", pa.string()), ("time", pa.int64()), ("order", pa.int64())])
DELAY = 3


def make_files(directory, n_files=4, per_file=60, seed=5):
    """Event files whose times mostly rise, with some late and some null rows."""
    rnd = random.Random(seed)
    files = []
    for f in range(n_files):
        rows = []
        for _ in range(per_file):
            time = f * 10 + rnd.randrange(-8, 10)
            rows.append((rnd.choice("abcdef"), rnd.choice(["x", "y", None]), time, rnd.randrange(3)))
        rows.append((None, "x", f * 10, 0))
        files.append(rows)
        table = pa.table(
            {name: [r[i] for r in rows] for i, name in enumerate(("key", "symbol", "time", "order"))},
            schema=pa.schema([("key", pa.string()), ("symbol", pa.string()), ("time", pa.int64()), ("order", pa.int64())]),
        )
        path = os.path.join(directory, f"part-{f}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + f * 10,) * 2)
    return files


def local_reference(files, machine=None, delay=DELAY, runtime=None):
    """The local runtime fed file by file, as micro-batches see the watermark.

    Micro-batch ``i`` advances to the frontier that the earlier files set (their
    latest time - DELAY), then takes its events; events below that frontier are late.
    A last step advances to the frontier all the files set.
    """
    runtime = runtime or LocalRuntime(machine or Upsert())
    updates, rejected, latest = [], [], None
    for rows in [*files, []]:
        if latest is not None and (runtime.frontier is None or latest - delay > runtime.frontier):
            step = runtime.advance_to(latest - delay)
            updates += step.updates
            rejected += step.rejected
        runtime.feed(rows)
        rejected += runtime.take_rejected()
        times = [r[2] for r in rows if r[2] is not None]
        latest = max([*times, *([latest] if latest is not None else [])], default=None)
    return consolidate(updates), sorted(((r.event.key, r.event.time, r.reason.value) for r in rejected), key=repr)


def stream(spark, source, arrangement, checkpoint, reports):
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    return run_stream(
        Upsert(), frame, into=arrangement, checkpoint=checkpoint, order="order", delay=DELAY,
        trigger={"availableNow": True}, progress=reports.append,
    )


def published(spark, arrangement):
    rejected = read_rejected(spark, arrangement)
    rows = [] if rejected is None else rejected.collect()
    return (
        PersistedArrangement(arrangement).updates(),
        sorted(((r.key, r.time, r.reason) for r in rows), key=repr),
    )


def test_streaming_equals_the_local_runtime_step_by_step(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    files = make_files(source)
    reports = []
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    query = run_stream(
        Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order",
        delay=DELAY, trigger={"availableNow": True}, progress=reports.append,
    )
    query.awaitTermination()
    assert [r.batch_id for r in reports][:4] == [0, 1, 2, 3]  # then batches without data
    assert sum(r.events for r in reports) == sum(len(f) for f in files)
    # a micro-batch applies what earlier ones took: its latency spans at least its own run
    applied = [r for r in reports if r.updates]
    assert applied and all(r.latency is not None and r.latency >= r.seconds for r in applied)
    assert reports[0].latency is None  # the first applies nothing: its watermark is not set
    assert published(spark, tmp_path / "arr") == local_reference(files)
    assert delta_rs_updates(tmp_path / "arr") == PersistedArrangement(tmp_path / "arr").updates()
    assert_change_feed_is_the_updates(tmp_path / "arr")
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER, None) is None  # the query's setting, not the session's
    # ... which the file source's log, made in the query's thread after start, took too
    assert source_log_manager(query) == checkpoint_files(spark, str(tmp_path / "ckpt"))[CHECKPOINT_FILE_MANAGER]
    # each micro-batch merged the spine the one before it published, all but the last batch
    counts = [b.count for b in PersistedArrangement(tmp_path / "arr").batches]
    assert len(counts) >= 2 and all(older > 2 * newer for older, newer in zip(counts[:-2], counts[1:-1], strict=True))
    # the updates never passed through the driver: the buckets wrote them, a file each
    assert not list((tmp_path / "arr").rglob(f"kind={UPDATE}"))
    last = PersistedArrangement(tmp_path / "arr").batches[-1]
    assert last.count and all("/" not in name for name in last.files)


def source_log_manager(query) -> str:
    """The class of the checkpoint file manager the query's (file) source writes its log through."""
    source = query._jsq.streamingQuery().sources().apply(0)
    field = source.getClass().getDeclaredField("metadataLog")
    field.setAccessible(True)
    return field.get(source).fileManager().getClass().getName()


def test_a_stream_runs_on_while_another_engine_optimises_its_arrangement(spark, tmp_path):
    """Table maintenance (delta-rs's ``OPTIMIZE``, again and again) beside a running
    query: each micro-batch publishes and merges through it (a commit that lost to
    it is made again), and the arrangement is the local runtime's."""
    import threading

    from deltalake.exceptions import DeltaError

    source = tmp_path / "in"
    source.mkdir()
    files = make_files(source, n_files=4)
    arrangement = tmp_path / "arr"
    done, optimised = threading.Event(), []

    def optimise() -> None:
        while not done.is_set():
            try:
                metrics = DeltaTable(str(arrangement)).optimize.compact()
                optimised.append(metrics["numFilesRemoved"])
            except (DeltaError, OSError):  # no table yet, or it lost to the stream's commit
                pass
            done.wait(0.05)

    maintenance = threading.Thread(target=optimise)
    maintenance.start()
    try:
        frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
        run_stream(
            Upsert(), frame, into=arrangement, checkpoint=tmp_path / "ckpt", order="order",
            delay=DELAY, trigger={"availableNow": True}, progress=None,
        ).awaitTermination()
    finally:
        done.set()
        maintenance.join()
    operations = [c.get("operation") for c in DeltaTable(str(arrangement)).history()]
    assert operations.count("OPTIMIZE") >= 2, operations  # the stream met the maintenance
    assert published(spark, arrangement) == local_reference(files)
    assert delta_rs_updates(arrangement) == PersistedArrangement(arrangement).updates()
    assert check(arrangement) == []


def test_a_local_checkpoint_is_written_through_a_file_manager_this_spark_has(spark, tmp_path):
    """Local checkpoints get Spark's FileSystem-based checkpoint file manager, by the
    class name of the running Spark's version; other stores and a session's own
    choice keep Spark's."""
    settings = checkpoint_files(spark, str(tmp_path / "checkpoint"))
    (name,) = settings.values()
    spark._jvm.java.lang.Class.forName(name)  # raises if this Spark has no such class
    assert checkpoint_files(spark, f"file://{tmp_path}/checkpoint") == settings
    assert checkpoint_files(spark, "s3a://bucket/checkpoint") == {}
    with scoped_conf(spark, {CHECKPOINT_FILE_MANAGER: name.replace("FileSystem", "FileContext")}):
        assert checkpoint_files(spark, str(tmp_path / "checkpoint")) == {}


def write_files(directory, files, schema=SCHEMA):
    for i, rows in enumerate(files):
        path = os.path.join(directory, f"part-{i:02d}.parquet")
        pq.write_table(pa.Table.from_pylist([dict(zip(("key", "symbol", "time", "order"), r, strict=True)) for r in rows], schema=ARROW_SCHEMA), path)
        os.utime(path, (1_700_000_000 + i,) * 2)


def batches_of(arrangement):
    """Each published batch: its bounds and the times of its updates."""
    for batch in read_state(arrangement)["batches"]:
        times = [t for f in batch["files"] for t in pq.read_table(arrangement / f).column("time").to_pylist()]
        yield batch["lower"], batch["upper"], times


def test_deadlines_fire_in_the_micro_batch_whose_watermark_passes_them(spark, tmp_path):
    """Timers at the exact boundary: each update lands in the batch covering its time."""
    source = tmp_path / "in"
    source.mkdir()
    # Session(3): "a"@0 expires at 3, which the frontier passes once it reaches 4;
    # "b"@2 expires at 5, passed at frontier 6 (reached by the no-data batch)
    files = [[("k", "a", 0, 0)], [("j", "b", 2, 0)], [("m", "c", 3, 0)], [("m", "d", 4, 0)], [("n", "e", 6, 0)]]
    write_files(source, files)
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    reports = []
    run_stream(
        Session(3), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order",
        value_type="struct<_1: string, _2: long>", trigger={"availableNow": True}, progress=reports.append,
    ).awaitTermination()
    print(*reports, sep="\n")
    expected, rejected = local_reference(files, Session(3), delay=0)
    assert rejected == [] and published(spark, tmp_path / "arr")[1] == []
    assert consolidate(PersistedArrangement(tmp_path / "arr").updates()) == expected
    expiries = [u for u in expected if u[2] < 0 and u[1] in (3, 5)]
    assert len(expiries) == 2  # both deadlines fired within the run
    for lower, upper, times in batches_of(tmp_path / "arr"):
        assert all((lower is None or lower <= t) and t < upper for t in times), (lower, upper, times)


def test_a_stream_continues_an_arrangement_written_in_batch(spark, tmp_path):
    """Each key starts from its values there (deadlines armed); earlier events are late."""
    from statemachines.spark import run_batch

    value_type = "struct<_1: string, _2: long>"
    first = [("k", "a", 0, 0), ("j", "b", 4, 0), ("m", "c", 5, 0)]
    files = [[("k", "d", 7, 0), ("j", "late", 5, 0)], [("n", "e", 8, 0), ("m", "f", 9, 0)], [("z", "g", 20, 0)]]
    run_batch(Session(3), spark.createDataFrame(first, SCHEMA), order="order", into=tmp_path / "arr", value_type=value_type)
    source = tmp_path / "in"
    source.mkdir()
    write_files(source, files)
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    run_stream(
        Session(3), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order",
        value_type=value_type, trigger={"availableNow": True}, progress=None,
    ).awaitTermination()

    reference = PersistedArrangement(tmp_path / "ref")
    run_local(Session(3), first, into=reference)
    expected, rejected = local_reference(files, delay=0, runtime=LocalRuntime(Session(3), into=reference))
    assert consolidate(PersistedArrangement(tmp_path / "arr").updates()) == consolidate(reference.updates())
    assert published(spark, tmp_path / "arr")[1] == rejected == [("j", 5, "late")]
    # struct values the batch run and the stream wrote, read by delta-rs as by the arrangement
    assert delta_rs_updates(tmp_path / "arr") == PersistedArrangement(tmp_path / "arr").updates()
    assert_change_feed_is_the_updates(tmp_path / "arr")


def assert_change_feed_is_the_updates(arrangement):
    """Delta's change data feed of an arrangement no compaction touched: inserts of
    its updates, each once, though micro-batches merged the spine's files."""
    feed = delta_rs_change_feed(arrangement)
    assert {kind for kind, _, _ in feed} == {"insert"}
    assert len(feed) == len(PersistedArrangement(arrangement).updates())
    assert consolidate(u for _, _, u in feed) == PersistedArrangement(arrangement).updates()


def test_a_replayed_micro_batch_is_a_no_op(spark, tmp_path):
    frame = spark.createDataFrame([("k", "a", 5, 0), ("k", "b", 9, 0)], SCHEMA)
    reports = []
    runner = MicroBatchRunner(
        Upsert(), str(tmp_path), EventColumns(order="order"), DELAY, progress=reports.append
    )
    PersistedArrangement(tmp_path)
    runner(frame, 0)
    before = DeltaTable(str(tmp_path)).version()
    runner(frame, 0)  # Spark replays batch 0 after a failure
    assert DeltaTable(str(tmp_path)).version() == before
    assert [r.replayed for r in reports] == [False, True]
    assert (reports[0].pending, reports[0].waiting_for) == (1, 9)  # ("k", "b", 9) waits
    assert PersistedArrangement(tmp_path).updates() == [(("k", "a"), 5, 1)]
    assert 0 <= reports[0].latency <= reports[0].seconds + 1  # ("k", "a", 5) applied as it came
    runner(spark.createDataFrame([("k", "c", 20, 0)], SCHEMA), 1)  # ("k", "b", 9) applies, held since 0
    assert reports[-1].latency >= reports[-1].seconds


def test_a_replayed_micro_batch_of_the_buckets_is_a_no_op(spark, tmp_path):
    from pyspark.sql.pandas.types import to_arrow_schema

    from statemachines.events import Reason, Rejected
    from statemachines.spark import BucketSink
    from statemachines.spark.batch import prepare_events
    from statemachines.spark.bucket_state import encode_table
    from statemachines.spark.buckets import BUCKET_OUTPUT
    from statemachines.spark.clock import CLOCK_SHIFT_MS
    from statemachines.spark.output import OutputRows, output_schema, write_keyed

    events = prepare_events(spark.createDataFrame([], SCHEMA), EventColumns(order="order"))
    schema = output_schema(events, events.schema["symbol"].dataType)
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    rows = OutputRows(arrow_schema)
    rows.add(rejected=[Rejected(("j", None, 2, 0), Reason.LATE, "below the frontier")])
    PersistedArrangement(tmp_path)
    write_keyed(pa.table({"key": ["k"], "value": ["a"], "time": [5], "diff": [1]}), str(tmp_path), "batch-7.parquet")
    # what bucket 7 returned in micro-batch 0: watermark 9, one event waits for time 12
    packed = spark.createDataFrame(
        [(7, encode_table(rows.take()), "batch-7.parquet", 1, 2, CLOCK_SHIFT_MS + 9, 1, "12", None, None)],
        BUCKET_OUTPUT,
    )
    reports = []
    sink = BucketSink(str(tmp_path), "number", arrow_schema, tuple(range(64)), progress=reports.append)
    sink(packed, 0)
    before = DeltaTable(str(tmp_path)).version()
    sink(packed, 0)  # Spark replays batch 0 after a failure
    assert DeltaTable(str(tmp_path)).version() == before
    assert [r.replayed for r in reports] == [False, True]
    assert (reports[0].pending, reports[0].waiting_for) == (1, 12)
    assert (reports[0].pending, reports[0].waiting_for) == (1, 12)
    assert PersistedArrangement(tmp_path).updates() == [(("k", "a"), 5, 1)]
    assert PersistedArrangement(tmp_path).upper == 9
    assert [(r.key, r.reason) for r in read_rejected(spark, tmp_path).collect()] == [("j", "late")]


def test_a_query_stopped_midway_and_restarted_from_its_checkpoint_loses_and_repeats_nothing(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    make_files(source, n_files=4)
    uninterrupted = []
    stream(spark, source, tmp_path / "whole", tmp_path / "ckpt-whole", uninterrupted).awaitTermination()

    # the same, but stopped after two files and restarted from the checkpoint
    partial = tmp_path / "in-partial"
    partial.mkdir()
    for name in ("part-0.parquet", "part-1.parquet"):
        os.link(source / name, partial / name)
    first = []
    stream(spark, partial, tmp_path / "arr", tmp_path / "ckpt", first).awaitTermination()
    for name in ("part-2.parquet", "part-3.parquet"):
        os.link(source / name, partial / name)
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(partial))
    from statemachines.spark.buckets import bucket_labels, default_buckets

    kept = default_buckets(spark)  # the first run's, by default: four per shuffle partition
    noted = read_state(tmp_path / "arr")["stream"]
    assert noted["buckets"] == kept
    assert noted["labels"] == list(bucket_labels(spark, kept, int(spark.conf.get("spark.sql.shuffle.partitions"))))
    with pytest.raises(InvalidArgument, match=f"held in {kept} buckets"):  # keys would move buckets
        run_stream(Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", buckets=kept + 1)
    second = []
    stream(spark, partial, tmp_path / "arr", tmp_path / "ckpt", second).awaitTermination()

    ids = [r.batch_id for r in first + second]
    assert ids == list(range(len(ids)))  # the restart continues; no micro-batch repeats
    assert sum(r.events for r in first + second) == sum(r.events for r in uninterrupted)
    assert published(spark, tmp_path / "arr") == published(spark, tmp_path / "whole")
    # a new checkpoint, and its restart, declare only the state variables buckets write now
    assert declared_state_variables(spark, str(tmp_path / "ckpt")) == {"bucket", "base"}


@background.job("killed-driver")
def killed_drivers(work):
    """Run ``tests/stream_job.py`` over four files, its driver killed (SIGKILL) at a
    different point of micro-batches 1, 2 and 3, restarted after each, then to the end.
    What each printed, and the upper published after each kill."""
    import subprocess
    import sys

    source = work / "in"
    source.mkdir()
    make_files(source, n_files=4)
    job = [sys.executable, "-m", "tests.stream_job", str(source), str(work / "arr"), str(work / "ckpt")]
    env = background.environment()
    kills = []
    for batch_id, point in enumerate(["written", "state", "published"], start=1):
        killed = subprocess.run([*job, point, str(batch_id)], capture_output=True, text=True, timeout=300, env=env)
        assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL, mid-way through the batch
        upper = PersistedArrangement(work / "arr").upper  # readable: the last published state
        kills.append(f"killed at {point!r} of micro-batch {batch_id}; published upper {upper}; it printed:\n"
                     f"{killed.stdout}")
    restarted = subprocess.run(job, capture_output=True, text=True, timeout=300, env=env)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    return work, kills, restarted.stdout


@pytest.mark.background("killed-driver")
def test_a_driver_killed_mid_micro_batch_restarts_to_the_uninterrupted_arrangement(spark, tmp_path):
    """SIGKILL the driver at a different point of three micro-batches, restarting after each."""
    work, kills, printed = background.result("killed-driver")
    print(*kills, f"final restart printed:\n{printed}", sep="\n")
    stream(spark, work / "in", tmp_path / "whole", tmp_path / "ckpt-whole", []).awaitTermination()
    arrangement = work / "arr"
    assert published(spark, arrangement) == published(spark, tmp_path / "whole")
    # what the dead drivers wrote goes with a vacuum; nothing the table needs does
    assert check(arrangement) == []
    PersistedArrangement(arrangement).vacuum(retention_hours=0, enforce_retention_duration=False)
    assert check(arrangement) == []
    assert published(spark, arrangement) == published(spark, tmp_path / "whole")
    live = set(PersistedArrangement(arrangement).files())
    assert {str(p) for p in arrangement.rglob("*.parquet") if "_statemachines" not in p.parts} == live


def test_streaming_state_without_rocksdb_is_a_clear_error(spark, tmp_path):
    setting = "spark.sql.streaming.stateStore.providerClass"
    frame = spark.readStream.schema(SCHEMA).parquet(str(tmp_path))
    kept = spark.conf.get(setting)
    spark.conf.set(setting, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    try:
        with pytest.raises(InvalidArgument, match="RocksDB"):
            run_stream(Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt")
    finally:
        spark.conf.set(setting, kept)
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "arr").exists()


@pytest.mark.parametrize(
    "setting, says",
    [
        *(({"delay": d}, "delay is a finite duration of at least 0") for d in (-3, float("nan"), float("inf"), "3", True)),
        *(({"buckets": b}, "buckets must be a positive integer") for b in (0, True, 2.5)),
        ({"trigger": "availableNow"}, "trigger is a dict"),
        ({"delay": 3, "timestamps": True}, "times the delay is a timedelta, not 3"),
    ],
    ids=repr,
)
def test_a_setting_out_of_its_range_is_refused_before_the_query_starts(spark, tmp_path, setting, says):
    """A negative delay would make events final before they were seen; NaN, infinity
    or text would fail the query at its first micro-batch; True is no number of buckets;
    timestamps wait a timedelta. Neither the checkpoint nor the arrangement is created."""
    frame = spark.readStream.schema(SCHEMA if not setting.pop("timestamps", False) else TIMESTAMPED).parquet(str(tmp_path))
    with pytest.raises(InvalidArgument, match=says):
        run_stream(Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", **setting)
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "arr").exists()


@pytest.mark.parametrize("machine", [Upsert(), SubclassedUpsert()], ids=["arrow", "runtime"])
def test_number_times_beyond_sparks_clock_are_refused_not_a_failed_query(spark, tmp_path, machine):
    """Spark hands its event-time clock to Python as nanosecond timestamps: number
    times in nanoseconds since the epoch, or beyond the year 2192 in milliseconds,
    would fail the query. Such times are rejected as bad_time, naming the clock; the
    greatest long keeps the intake's own reason; the other events run as locally."""
    from statemachines.intake import INT64_MAX
    from statemachines.spark.clock import CLOCK_LIMIT_MS

    beyond = [("a", "x", 1_700_000_000_000_000_000, 0), ("d", "w", -(2**62), 0), ("f", "u", CLOCK_LIMIT_MS + 1, 0)]
    files = [
        [("b", "y", 10, 0), *beyond, ("c", "z", INT64_MAX, 0)],
        [("b", "q", 30, 0), ("e", "v", CLOCK_LIMIT_MS, 0)],
    ]
    source = tmp_path / "in"
    source.mkdir()
    write_files(source, files)
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    run_stream(
        machine, frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order", delay=DELAY,
        trigger={"availableNow": True}, progress=None,
    ).awaitTermination()
    refused = [*beyond, ("c", "z", INT64_MAX, 0)]  # (the reference would let the greatest long move its clock)
    expected, rejected = local_reference([[r for r in rows if r not in refused] for rows in files], machine)
    rows = read_rejected(spark, tmp_path / "arr").collect()
    assert sorted((r.key, r.reason) for r in rows) == sorted(
        [(key, reason) for key, _, reason in rejected] + [(key, "bad_time") for key, *_ in refused]
    )
    assert all("beyond Spark's event-time clock" in r.detail for r in rows if r.key in ("a", "d", "f"))
    assert all("64-bit integer range" in r.detail for r in rows if r.key == "c")
    assert PersistedArrangement(tmp_path / "arr").updates() == expected


def test_timestamp_times_with_a_timedelta_delay(spark, tmp_path):
    import datetime as dt

    at = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)

    def s(seconds):
        return at + dt.timedelta(seconds=seconds)

    files = [
        [("a", "x", s(0), 0), ("b", "y", s(3), 0)],
        [("a", "z", s(5), 0), ("b", "late", s(0.5), 0), ("c", "w", None, 0)],
        [("c", "v", s(9), 0), ("a", None, s(6.25), 0)],
    ]
    far = ("d", "open-ended", dt.datetime(9999, 12, 31, tzinfo=dt.UTC), 0)  # beyond Spark's clock: bad_time
    files[1].append(far)
    schema = pa.schema([("key", pa.string()), ("symbol", pa.string()), ("time", pa.timestamp("us", tz="UTC")), ("order", pa.int64())])
    source = tmp_path / "in"
    source.mkdir()
    for i, rows in enumerate(files):
        path = source / f"part-{i}.parquet"
        pq.write_table(pa.Table.from_pylist([dict(zip(("key", "symbol", "time", "order"), r, strict=True)) for r in rows], schema=schema), path)
        os.utime(path, (1_700_000_000 + i,) * 2)
    frame = spark.readStream.schema(TIMESTAMPED).option(
        "maxFilesPerTrigger", 1).parquet(str(source))
    run_stream(
        Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order",
        delay=dt.timedelta(seconds=2), trigger={"availableNow": True}, progress=None,
    ).awaitTermination()
    expected, rejected = local_reference([[r for r in rows if r != far] for rows in files], delay=dt.timedelta(seconds=2))
    assert consolidate(PersistedArrangement(tmp_path / "arr").updates()) == expected
    # (Spark collects timestamps as naive local datetimes: compare keys and reasons)
    assert sorted((key, reason) for key, _, reason in published(spark, tmp_path / "arr")[1]) == sorted(
        [(key, reason) for key, _, reason in rejected] + [("d", "bad_time")]
    )
    assert {(key, reason) for key, _, reason in rejected} == {("b", "late"), ("c", "null_time")}


def legacy_processor(machine, kind, arrow_schema, floor, into, load=None, check_values=True, variables=()):
    """The bucket processor of versions before the state in parts: each bucket's state
    is one pickled LocalRuntime checkpoint in the value state ``runtime`` (its only
    state variable, whatever ``variables`` asks)."""
    import pickle

    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    from statemachines.spark.bucket_state import decode_table, encode_table
    from statemachines.spark.buckets import CLOCK_ROWS
    from statemachines.spark.clock import frontier_of, timer_ms
    from statemachines.spark.output import OutputRows

    class Legacy(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.state = handle.getValueState("runtime", "runtime binary")

        def handleInputRows(self, key, rows, timerValues):
            if key[0] != CLOCK_ROWS:
                # (as these versions packed them: without the refusal column packing adds now)
                tables = [decode_table(p) for f in rows for p in f["payload"]]
                events = [tuple(r.values())[:4] for t in tables for r in t.to_pylist()]
                yield self._step(key[0], events, timerValues)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            yield self._step(key[0], [], timerValues)

        def _step(self, bucket, events, timer_values):
            stored = self.state.get()
            runtime = LocalRuntime.restore(machine, pickle.loads(stored[0])) if stored else LocalRuntime(machine)
            watermark = timer_values.getCurrentWatermarkInMs()
            frontier, out = frontier_of(watermark, kind), OutputRows(arrow_schema)
            if frontier is not None and (runtime.frontier is None or frontier > runtime.frontier):
                step = runtime.advance_to(frontier)
                out.add(step.updates, step.rejected)
            runtime.feed(events)
            out.add(rejected=runtime.take_rejected())
            waiting = runtime.earliest_waiting()
            for timer in self.handle.listTimers():
                if timer > watermark:
                    self.handle.deleteTimer(timer)
            if waiting is not None:
                self.handle.registerTimer(timer_ms(waiting))
            self.state.update((pickle.dumps(runtime.checkpoint()),))
            n_waiting, earliest = runtime.waiting()
            return pd.DataFrame({
                "bucket": [bucket], "payload": [encode_table(out.take()) if len(out) else None],
                "file": [None], "file_rows": [None], "events": [len(events)], "watermark": [watermark], "waiting": [n_waiting],
                "waiting_for": [None if earliest is None else str(earliest)], "arrived": [None],
                "rules_taken": [None],
            })

        def close(self):
            pass

    return Legacy()


def test_a_checkpoint_of_the_earlier_state_format_is_read_and_continued(spark, tmp_path, monkeypatch):
    """A query that ran with one pickled runtime per bucket continues on the state in
    parts: its waiting events and values carry over, the result is the uninterrupted one."""
    from statemachines.spark import buckets

    source = tmp_path / "in"
    source.mkdir()
    files = make_files(source, n_files=4)
    first = tmp_path / "first"
    first.mkdir()
    for name in ("part-0.parquet", "part-1.parquet"):  # the earlier version saw two files
        os.link(source / name, first / name)
    with monkeypatch.context() as patch:
        patch.setattr(buckets, "bucket_processor", legacy_processor)
        stream(spark, first, tmp_path / "arr", tmp_path / "ckpt", []).awaitTermination()
    assert read_state(tmp_path / "arr")["stream"]["waiting"]  # events were left waiting
    for name in ("part-2.parquet", "part-3.parquet"):
        os.link(source / name, first / name)
    stream(spark, first, tmp_path / "arr", tmp_path / "ckpt", []).awaitTermination()
    assert published(spark, tmp_path / "arr") == local_reference(files)
    # the restart declared every variable a version declared, the earlier one's among them
    assert declared_state_variables(spark, str(tmp_path / "ckpt")) == {
        "bucket", "record", "base", "recent", "pending", "head", "runtime",
    }


@pytest.mark.parametrize(("buckets", "tasks"), [(16, 4), (8, 4), (20, 3), (64, 16)])
def test_bucket_labels_spread_the_buckets_evenly_over_the_stateful_tasks(spark, buckets, tasks):
    """As Spark places the groups of a stateful operator (hash partitioning of the
    bucket column), every task holds as many buckets as the others, give or take one."""
    from pyspark.sql import functions as F

    from statemachines.spark.buckets import CLOCK_ROWS, bucket_labels

    labels = bucket_labels(spark, buckets, tasks)
    assert len(set(labels)) == buckets and CLOCK_ROWS not in labels
    placed = spark.createDataFrame([(label,) for label in labels], "bucket int").repartition(tasks, "bucket")
    per_task = Counter(r.task for r in placed.select(F.spark_partition_id().alias("task")).collect())
    assert len(per_task) == min(tasks, buckets)
    assert max(per_task.values()) - min(per_task.values()) <= 1


def test_a_query_from_before_bucket_labels_continues_under_its_plain_labels(spark, tmp_path, monkeypatch):
    """A query whose notes name no labels kept its state under labels ``0..buckets-1``:
    restarted, its keys find their values and waiting events there."""
    from statemachines.spark import buckets, streaming

    source = tmp_path / "in"
    source.mkdir()
    files = make_files(source, n_files=4)
    first = tmp_path / "first"
    first.mkdir()
    for name in ("part-0.parquet", "part-1.parquet"):
        os.link(source / name, first / name)

    def unlabelled(into, name, lower, upper, progress, *rest, **named):
        progress.pop("labels")
        return publish(into, name, lower, upper, progress, *rest, **named)

    publish = streaming.publish_micro_batch
    with monkeypatch.context() as patch:  # as the version before labels ran it
        patch.setattr(buckets, "bucket_labels", lambda spark, n, tasks: tuple(range(n)))
        patch.setattr(streaming, "publish_micro_batch", unlabelled)
        stream(spark, first, tmp_path / "arr", tmp_path / "ckpt", []).awaitTermination()
    noted = read_state(tmp_path / "arr")["stream"]
    assert "labels" not in noted and noted["waiting"]  # events were left waiting
    first_tasks = spark.conf.get("spark.sql.shuffle.partitions")
    try:  # the stateful operator's tasks are the checkpoint's, whatever the session says now
        spark.conf.set("spark.sql.shuffle.partitions", str(int(first_tasks) + 5))
        assert buckets.shuffle_partitions(spark, str(tmp_path / "ckpt")) == int(first_tasks)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", first_tasks)
    for name in ("part-2.parquet", "part-3.parquet"):
        os.link(source / name, first / name)
    stream(spark, first, tmp_path / "arr", tmp_path / "ckpt", []).awaitTermination()
    assert read_state(tmp_path / "arr")["stream"]["labels"] == list(range(noted["buckets"]))
    assert published(spark, tmp_path / "arr") == local_reference(files)


@pytest.mark.parametrize(
    "machine", [Upsert(), UpsertWithLateness(100, value_time=itemgetter(0))], ids=["buckets", "arrangement-state"]
)
def test_a_query_on_a_new_checkpoint_continues_the_arrangement_with_new_micro_batches(spark, tmp_path, machine):
    """Micro-batch ids count within one checkpoint: the second query's batch 0 is new,
    not a replay of the first query's batch 0. (The first query's last event, at its
    frontier 10, waits in its checkpoint's buckets, which a new checkpoint does not
    read; the arrangement-state runner keeps waiting events in the arrangement.)"""
    from tests.test_contract import file_stream

    schema = "key string, symbol struct<at: long, tag: string>, time long, order long"
    first = [[("k1", (1, "a"), 1, 0), ("k2", (2, "b"), 2, 0)], [("k1", (5, "c"), 5, 0)], [("k9", (10, "z"), 10, 0)]]
    second = [[("k3", (20, "d"), 20, 0), ("k1", (21, "e"), 21, 0)], [("k9", (40, "y"), 40, 0)]]
    def stream(name, files, **options):
        return run_stream(
            machine, file_stream(spark, files, schema, tmp_path / name), into=tmp_path / "arr",
            checkpoint=tmp_path / f"ckpt-{name}", order="order", trigger={"availableNow": True}, progress=None,
            **options,
        )

    stream("first", first).awaitTermination()
    events = [e for files in (first, second) for rows in files for e in rows]
    if isinstance(machine, Upsert):  # refused, then abandoned on purpose
        with pytest.raises(InvalidArgument, match="holds 1 events not yet final"):
            stream("refused", second)
        events.remove(("k9", (10, "z"), 10, 0))
    stream("second", second, abandon_waiting=True).awaitTermination()
    expected = [u for u in run_local(machine, events).updates if u.time < 40]  # 40 waits: the frontier is 40
    assert consolidate(PersistedArrangement(tmp_path / "arr").updates()) == expected


def test_a_query_whose_arrangement_another_writer_appended_to_is_refused(spark, tmp_path):
    """A backfill by run_batch between two runs of a query (refused while the query holds
    an event not yet final, then forced): the query's buckets still hold the values
    from before, so going on would retract values the arrangement no longer has."""
    from statemachines.spark import run_batch
    from tests.test_contract import file_stream

    schema = "key string, symbol string, time long, order long"
    source = tmp_path / "src"
    options = dict(into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order", progress=None)
    files = [[("k1", "a", 1, 0)], [("k2", "b", 10, 0)]]
    run_stream(Upsert(), file_stream(spark, files, schema, source), trigger={"availableNow": True}, **options).awaitTermination()
    backfill = spark.createDataFrame([("k1", "B", 50, 0)], schema)
    with pytest.raises(InvalidArgument, match="streaming query holds 1 events not yet final"):
        run_batch(Upsert(), backfill, into=tmp_path / "arr", order="order")  # k2 at 10 waits
    run_batch(Upsert(), backfill, into=tmp_path / "arr", order="order", abandon_waiting=True)
    before = PersistedArrangement(tmp_path / "arr").updates()
    with pytest.raises(InvalidArgument, match=r"another writer appended to the arrangement \(its upper is 51\)"):
        run_stream(Upsert(), spark.readStream.schema(schema).parquet(str(source)), **options)
    assert PersistedArrangement(tmp_path / "arr").updates() == before


def test_a_stream_into_a_restored_arrangement_is_refused_until_it_starts_on_a_new_checkpoint(spark, tmp_path):
    """A Delta RESTORE rolls the arrangement back under a query, whose state is
    ahead: its next micro-batch is refused and nothing is published; on a new
    checkpoint the query continues the restored arrangement."""
    source, arrangement = tmp_path / "in", tmp_path / "arr"
    source.mkdir()
    files = [[("k", "a", 0, 0)], [("j", "b", 4, 0)], [("k", "d", 6, 0)], [("m", "e", 7, 0)], [("k", "c", 9, 0)]]
    write_files(source, files[:-1])

    def run(checkpoint, abandon_waiting=False):
        frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
        return run_stream(
            Upsert(), frame, into=arrangement, checkpoint=checkpoint, order="order", delay=0,
            trigger={"availableNow": True}, progress=None, abandon_waiting=abandon_waiting,
        )

    run(tmp_path / "ckpt").awaitTermination()
    assert PersistedArrangement(arrangement).version >= 1
    DeltaTable(str(arrangement)).restore(0)
    restored = PersistedArrangement(arrangement)
    kept, upper = restored.updates(), restored.upper
    write_files(source, files)
    with pytest.raises(Exception, match="rolled back"):
        run(tmp_path / "ckpt").awaitTermination()
    assert (PersistedArrangement(arrangement).updates(), PersistedArrangement(arrangement).upper) == (kept, upper)
    run(tmp_path / "ckpt-2", abandon_waiting=True).awaitTermination()  # the restored version's waiting events
    continued = PersistedArrangement(arrangement)
    reference = run_local(Upsert(), [e for f in files for e in f], frontier=continued.upper)
    assert continued.upper > upper and consolidate(continued.updates()) == consolidate(reference.updates)
    assert delta_rs_updates(arrangement) == continued.updates() and check(arrangement) == []
