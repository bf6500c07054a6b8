"""The Spark batch runtime against the local reference, and its arrangement writes."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import (
    InvalidArgument,
    Machine,
    PersistedArrangement,
    Reason,
    consolidate,
    run_local,
)
from statemachines.intake import INT64_MAX
from statemachines.library import Upsert
from statemachines.spark import read_updates, run_batch
from statemachines.spark.batch import partition_runner
from statemachines.spark.output import UPDATE
from tests.delta_reader import delta_rs_updates
from tests.test_tabulated import OUTPUT, emitted, output_rows, partition_rows

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol string, time long, order long"


def random_events(seed, n=300):
    rnd = random.Random(seed)
    return [
        (
            rnd.choice(["a", "b", "c", "d", "e", None] if rnd.random() < 0.02 else "abcde"),
            rnd.choice(["x", "y", "z", None]),
            rnd.randrange(30) if rnd.random() > 0.01 else None,
            rnd.choice([None, 0, 1, 2, 3]),
        )
        for _ in range(n)
    ]


def collected(result):
    updates = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    rejected = sorted(((r.key, r.time, r.reason) for r in result.rejected.collect()), key=repr)
    return updates, rejected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generic_and_native_paths_equal_the_local_runtime(spark, seed):
    events = random_events(seed)
    local = run_local(Upsert(), events)
    expected = (local.updates, sorted(((r.event.key, r.event.time, r.reason.value) for r in local.rejected), key=repr))
    frame = spark.createDataFrame(events, SCHEMA)
    for native in (False, True):
        assert collected(run_batch(Upsert(), frame, order="order", native=native)) == expected


@pytest.mark.parametrize("native", [False, True])
def test_runs_into_an_arrangement_continue_one_another(spark, tmp_path, native):
    events = [e for e in random_events(7) if e[0] is not None and e[2] is not None]
    path = tmp_path / "arr"
    for lo, hi in ((0, 10), (10, 20), (20, 30)):
        chunk = spark.createDataFrame([e for e in events if lo <= e[2] < hi], SCHEMA)
        result = run_batch(Upsert(), chunk, order="order", into=path, native=native)
        assert result.published and result.rejected.count() == 0
    # Python and Spark read the Spark-written batches alike
    one_run = run_local(Upsert(), events).updates
    assert PersistedArrangement(path).updates() == one_run
    assert consolidate(((r.key, r.value), r.time, r.diff) for r in read_updates(spark, path).collect()) == one_run


def test_rerunning_a_published_batch_double_counts_nothing(spark, tmp_path):
    frame = spark.createDataFrame([("k", "a", 1, None), ("k", "b", 2, None)], SCHEMA)
    run_batch(Upsert(), frame, into=tmp_path)
    before = PersistedArrangement(tmp_path).updates()
    again = run_batch(Upsert(), frame, into=tmp_path)
    assert not again.published
    assert again.summary() == "0 updates out, 2 rejected (2 late); nothing published"
    assert {r.reason for r in again.rejected.collect()} == {"late"}
    assert PersistedArrangement(tmp_path).updates() == before


def test_missing_columns_and_bad_time_types_fail_up_front(spark, tmp_path):
    frame = spark.createDataFrame([("k", "a", "yesterday")], "id string, value string, ts string")
    with pytest.raises(InvalidArgument, match="no column"):
        run_batch(Upsert(), frame, into=tmp_path / "arr")
    with pytest.raises(InvalidArgument, match="time column has type string"):
        run_batch(Upsert(), frame, key="id", symbol="value", time="ts", into=tmp_path / "arr")
    assert not (tmp_path / "arr").exists()


def test_map_keys_fail_up_front_and_map_symbols_run_as_their_pairs_run_locally(spark, tmp_path):
    """Spark can neither sort nor group a map: a map key or order column is refused
    before anything runs; a map symbol reads as the tuple of its (key, value) pairs,
    on the native path too, and gives the updates the local runtime gives the pairs."""
    keyed = spark.createDataFrame([({"x": 1}, 1, 1)], "key map<string,int>, symbol long, time long")
    with pytest.raises(InvalidArgument, match="key column key has type map<string,int>: Spark cannot sort"):
        run_batch(Upsert(), keyed, into=tmp_path / "arr")
    ordered = spark.createDataFrame([("a", 1, 1, {"x": 1})], "key string, symbol long, time long, o map<string,int>")
    with pytest.raises(InvalidArgument, match="order column o has type map"):
        run_batch(Upsert(), ordered, order="o")
    assert not (tmp_path / "arr").exists()
    frame = spark.createDataFrame([("a", {"x": 1, "y": 2}, 1), ("b", None, 2), ("a", {}, 3)],
                                  "key string, symbol map<string,int>, time long")
    local = run_local(Upsert(), [("a", (("x", 1), ("y", 2)), 1), ("b", None, 2), ("a", (), 3)])
    assert local.updates
    for native in (True, False):
        result = run_batch(Upsert(), frame, native=native)
        assert result.rejected.count() == 0
        pairs = (((r.key, None if r.value is None else tuple(r.value.items())), r.time, r.diff) for r in result.updates.collect())
        assert consolidate(pairs) == local.updates


def test_values_holding_an_interval_are_refused_before_an_arrangement_is_written(spark, tmp_path):
    """A Delta table has no interval type: a run into a new arrangement whose values
    would hold one is refused up front, as the local runtime rejects each timedelta
    it cannot store; without an arrangement the run goes on."""
    import datetime

    frame = spark.createDataFrame([("a", ("x", datetime.timedelta(seconds=5)), 1)],
                                  "key string, symbol struct<s: string, d: interval day to second>, time long")
    with pytest.raises(InvalidArgument, match="holds an interval: a Delta table has no type for it"):
        run_batch(Upsert(), frame, into=tmp_path / "arr")
    assert not (tmp_path / "arr").exists()
    assert run_batch(Upsert(), frame).updates.count() == 1
    local = run_local(Upsert(), [("a", ("x", datetime.timedelta(seconds=5)), 1), ("b", "y", 1)],
                      into=PersistedArrangement.create(tmp_path / "local"))
    assert [(r.event.key, r.reason.value) for r in local.rejected] == [("a", "unserialisable_value")]
    assert "a Delta table holds no duration" in local.rejected[0].detail and len(local.updates) == 1


def test_timestamps_and_struct_keys_stay_typed(spark, tmp_path):
    frame = spark.sql(
        "select named_struct('region', 'eu', 'id', 7) as key, 'on' as symbol, "
        "timestamp'2026-01-01 10:00:00' as time"
    )
    result = run_batch(Upsert(), frame, into=tmp_path, native=False)
    assert result.updates.schema["key"].dataType.simpleString() == "struct<region:string,id:int>"
    assert str(result.updates.schema["time"].dataType) == "TimestampType()"
    assert PersistedArrangement(tmp_path).values(("eu", 7)) == {"on"}


@pytest.mark.parametrize("point", ["written", "state"])
def test_a_batch_writer_crashing_leaves_the_last_published_state_and_a_retry_completes_once(spark, tmp_path, monkeypatch, point):
    from deltalake import DeltaTable

    import statemachines.spark.batch as batch_module

    events = [e for e in random_events(4) if e[0] is not None and e[2] is not None]
    first = spark.createDataFrame([e for e in events if e[2] < 15], SCHEMA)
    second = spark.createDataFrame([e for e in events if e[2] >= 15], SCHEMA)
    run_batch(Upsert(), first, order="order", into=tmp_path)
    published = PersistedArrangement(tmp_path).updates()

    def crash(*args, **kwargs):
        raise OSError(f"simulated crash: {point}")

    if point == "written":  # the batch's files are on disk, nothing else
        monkeypatch.setattr(batch_module, "publish_batch", crash)
    else:  # the new state file is written, the Delta commit never happens
        monkeypatch.setattr(DeltaTable, "create_write_transaction", crash)
    with pytest.raises(OSError, match="simulated crash"):
        run_batch(Upsert(), second, order="order", into=tmp_path)
    monkeypatch.undo()
    assert PersistedArrangement(tmp_path).updates() == published
    assert consolidate(((r.key, r.value), r.time, r.diff) for r in read_updates(spark, tmp_path).collect()) == published

    retry = run_batch(Upsert(), second, order="order", into=tmp_path)
    assert retry.published
    assert delta_rs_updates(tmp_path) == PersistedArrangement(tmp_path).updates()  # delta-rs reads the same
    assert PersistedArrangement(tmp_path).updates() == run_local(Upsert(), events).updates
    # the dead writer's files go with a vacuum, and nothing the table needs does
    after = PersistedArrangement(tmp_path)
    after.vacuum(retention_hours=0, enforce_retention_duration=False)
    on_disk = {str(p) for p in tmp_path.rglob("*.parquet") if "_statemachines" not in p.parts}
    assert on_disk == set(after.files())
    assert PersistedArrangement(tmp_path).updates() == run_local(Upsert(), events).updates


def test_progress_prints_the_summary(spark, capsys):
    frame = spark.createDataFrame([("k", "a", 1, None), (None, "b", 2, None)], SCHEMA)
    result = run_batch(Upsert(), frame, progress=True)
    assert capsys.readouterr().err.strip().endswith(result.summary())
    assert result.summary().startswith("1 update out, 1 rejected (1 null_key)")


def persistent_rdds(spark):
    return {rdd.id() for rdd in spark.sparkContext._jsc.getPersistentRDDs().values()}


def test_a_native_run_of_plain_columns_is_written_by_its_tasks(spark):
    """Upsert over text and integers steps in Arrow in the tasks (see upsert_arrow),
    which write its rows as files: nothing is cached."""
    before = persistent_rdds(spark)
    frame = spark.createDataFrame([("k", "a", 1, None), ("k", "b", 2, None)], SCHEMA)
    result = run_batch(Upsert(), frame, native=True)
    assert result.scratch is not None and persistent_rdds(spark) == before
    assert sorted((r.value, r.time, r.diff) for r in result.updates.collect()) == [("a", 1, 1), ("a", 2, -1), ("b", 2, 1)]
    result.unpersist()


def test_a_window_function_run_caches_its_output_and_unpersist_releases_it(spark):
    """Values Arrow does not order as Python does (doubles) take Upsert's window
    functions, whose output Spark caches."""
    before = persistent_rdds(spark)
    frame = spark.createDataFrame([("k", 0.5, 1, None), ("k", 1.5, 2, None)], "key string, symbol double, time long, order long")
    result = run_batch(Upsert(), frame, native=True)
    expected = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    assert result.scratch is None
    assert len(persistent_rdds(spark) - before) == 1  # one cached output behind both frames
    result.updates.unpersist()  # a view of the cache: releases nothing
    assert len(persistent_rdds(spark) - before) == 1
    result.unpersist()
    assert persistent_rdds(spark) == before
    again = run_batch(Upsert(), frame, native=True)
    assert consolidate(((r.key, r.value), r.time, r.diff) for r in again.updates.collect()) == expected
    again.unpersist()
    assert persistent_rdds(spark) == before


@pytest.mark.parametrize("given", [False, True], ids=["temporary", "given"])
def test_a_generic_run_reads_what_its_tasks_wrote_into_scratch_and_unpersist_deletes_it(spark, tmp_path, given):
    events = [("k", "a", 1, 0), (None, "b", 1, 0), ("k", "c", None, 0), ("j", "d", 2, 0), ("k", "e", 3, 1)]
    before = persistent_rdds(spark)
    result = run_batch(Upsert(), spark.createDataFrame(events, SCHEMA), order="order", native=False,
                       scratch=tmp_path if given else None)
    assert persistent_rdds(spark) == before  # nothing cached: the rows went to files
    folder = result.scratch
    assert folder is not None and os.path.isdir(folder)
    assert (os.path.dirname(folder) == str(tmp_path)) == given
    reference = run_local(Upsert(), events)
    assert collected(result) == (
        reference.updates, sorted(((r.event.key, r.event.time, r.reason.value) for r in reference.rejected), key=repr)
    )
    result.unpersist()
    assert not os.path.exists(folder)
    if given:
        assert os.path.isdir(tmp_path)  # only the run's own folder goes
    with pytest.raises(Exception, match="(?i)not exist|not found|FileNotFound"):
        result.updates.collect()


class Crash(BaseException):
    """Not an error a transition may raise: it ends the task (and so the job)."""


class CrashesOnBad(Machine):
    def transition(self, key, values, symbol, time):
        if symbol == "bad":
            raise Crash("the task ends here")
        return {symbol}


def test_a_run_that_fails_leaves_no_scratch_folder(spark, tmp_path):
    events = [(f"k{i}", "ok", i, 0) for i in range(40)] + [("k7", "bad", 99, 0)]
    with pytest.raises(Exception, match="the task ends here"):
        run_batch(CrashesOnBad(), spark.createDataFrame(events, SCHEMA), scratch=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_run_with_a_refusal_column_caches_its_output(spark):
    from pyspark.sql import functions as F

    from statemachines.spark.batch import refusal as refused

    frame = spark.createDataFrame([("k", "a", 1, 0), ("j", "b", 2, 0)], SCHEMA)
    frame = frame.withColumn("why", F.when(F.col("key") == "j", refused(Reason.MALFORMED, "unreadable")))
    result = run_batch(Upsert(), frame, native=False, order="order", refusal="why")
    assert result.scratch is None and result.output.is_cached
    assert [(r.key, r.reason, r.detail) for r in result.rejected.collect()] == [("j", "malformed_event", "unreadable")]
    assert consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect()) == run_local(
        Upsert(), [("k", "a", 1, 0)]
    ).updates
    result.unpersist()


@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_a_run_into_an_arrangement_keeps_its_rejected_rows_there_and_caches_nothing(spark, tmp_path, native):
    from statemachines.spark import read_rejected

    before = persistent_rdds(spark)
    runs = [
        [("k", "a", 1, None), (None, "b", 1, None), ("k", "c", None, None)],
        [("k", "d", 5, None), ("k", "late", 0, None), ("j", "e", 6, None)],
    ]
    seen = []
    for rows in runs:
        result = run_batch(Upsert(), spark.createDataFrame(rows, SCHEMA), order="order", into=tmp_path / "arr", native=native)
        assert persistent_rdds(spark) == before  # the result's frames read the written files
        seen += [(r.key, r.time, r.reason) for r in result.rejected.collect()]
        updates = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
        assert updates == PersistedArrangement(tmp_path / "arr").updates()[-len(updates):]
    kept = [(r.key, r.time, r.reason) for r in read_rejected(spark, tmp_path / "arr").collect()]
    assert sorted(kept, key=repr) == sorted(seen, key=repr)
    local = PersistedArrangement(tmp_path / "local")
    expected = [(r.event.key, r.event.time, r.reason.value) for rows in runs for r in run_local(Upsert(), rows, into=local).rejected]
    assert sorted(seen, key=repr) == sorted(expected, key=repr)
    assert PersistedArrangement(tmp_path / "arr").updates() == local.updates()


@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_each_written_file_holds_its_rows_in_key_order(spark, tmp_path, native):
    import pyarrow.parquet as pq

    rng = random.Random(5)
    rows = [(f"k{rng.randrange(60):02d}", rng.choice("abc"), t, None) for t in range(400)]
    frame = spark.createDataFrame(rows, SCHEMA).repartition(3)  # keys arrive out of order
    run_batch(Upsert(), frame, order="order", into=tmp_path, native=native)
    files = PersistedArrangement(tmp_path).files()
    assert files
    for path in files:
        keys = pq.read_table(path, columns=["key"])["key"].to_pylist()
        assert keys == sorted(keys)
    assert PersistedArrangement(tmp_path).updates() == run_local(Upsert(), rows).updates


@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_rows_the_source_refused_are_kept_beside_the_machines_own_rejections(spark, tmp_path, native):
    """Refused rows join the rows the tasks write: both kinds of rejection are kept in
    the arrangement, and the updates are the local runtime's over the rows the source
    did not refuse (two runs: the second's early events are late)."""
    from statemachines.spark import read_rejected

    rng = random.Random(8)
    rows = [
        (None if rng.random() < 0.05 else rng.choice("abc"), rng.choice("xyz"), i // 4 + rng.randrange(-2, 3), i,
         ("unreadable", f"row {i}") if rng.random() < 0.2 else None)
        for i in range(80)
    ]
    schema = f"{SCHEMA}, refusal struct<reason string, detail string>"
    local = PersistedArrangement(tmp_path / "local")
    expected, last = [], None
    for part in (rows[:40], rows[40:]):
        frame = spark.createDataFrame(part, schema)
        last = run_batch(Upsert(), frame, order="order", refusal="refusal", into=tmp_path / "arr", native=native)
        refused = [(r[0], r[2], "unreadable") for r in part if r[4]]
        own = [(x.event.key, x.event.time, x.reason.value) for x in run_local(Upsert(), [r[:4] for r in part if not r[4]], into=local).rejected]
        expected += refused + own
    assert any(reason == "late" for _, _, reason in expected) and any(k is None for k, _, _ in expected)
    assert last.rejected.count() == len(refused) + len(own)
    kept = [(r.key, r.time, r.reason) for r in read_rejected(spark, tmp_path / "arr").collect()]
    assert sorted(kept, key=repr) == sorted(expected, key=repr)
    assert PersistedArrangement(tmp_path / "arr").updates() == local.updates()


def test_a_task_writes_its_rows_as_files_and_names_each_in_one_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statemachines.spark.output import FILE_OF, REJECTED, UPDATE, gather_files, writing_files

    schema = pa.schema([
        ("kind", pa.int8()), ("key", pa.string()), ("value", pa.string()), ("time", pa.int64()),
        ("diff", pa.int64()), ("reason", pa.string()), ("detail", pa.string()),
    ])
    rng = random.Random(11)
    rows = [
        {"kind": UPDATE, "key": f"k{i}", "value": rng.choice("xyz"), "time": i, "diff": rng.choice([-1, 1])}
        if rng.random() < 0.8 else {"kind": REJECTED, "key": f"k{i}", "time": i, "reason": "late", "detail": "d"}
        for i in range(500)
    ]
    batches = [pa.RecordBatch.from_pylist(rows[i : i + 64], schema=schema) for i in range(0, len(rows), 64)]

    def task(function):
        return [r for batch in writing_files(function, str(tmp_path), "batch-1")(iter([])) for r in batch.to_pylist()]

    named = task(lambda given: iter(batches))
    assert sorted(r["kind"] for r in named) == sorted(FILE_OF.values())
    for kind, of in FILE_OF.items():
        (row,) = [r for r in named if r["kind"] == of]
        mine = [r for r in rows if r["kind"] == kind]
        columns = ("key", "value", "time", "diff") if kind == UPDATE else [c for c in schema.names if c != "kind"]
        assert row["diff"] == len(mine)
        assert pq.read_table(tmp_path / row["detail"]).to_pylist() == [{c: r.get(c) for c in columns} for r in mine]

    def failing(given):  # a task that fails half-way names no file
        yield batches[0]
        raise RuntimeError("task lost")

    with pytest.raises(RuntimeError, match="task lost"):
        task(failing)
    # only the named files join the batch: the failed task's rejected rows go
    parts = gather_files(str(tmp_path), "batch-1", pa.Table.from_pylist(named))
    assert parts.counts == {k: sum(r["kind"] == k for r in rows) for k in (UPDATE, REJECTED)}
    assert parts.update_files == [r["detail"] for r in named if r["kind"] == FILE_OF[UPDATE]]
    kept = pq.read_table(tmp_path / f"batch-1/kind={REJECTED}")
    assert kept.num_rows == parts.counts[REJECTED]
    assert not (tmp_path / "batch-1" / "tasks").exists()


def test_values_are_checked_unless_they_fit_the_machines_own_type_by_construction(spark):
    """A machine that sets values_fit_own_type skips the per-value check only when the
    output's value type is its own declared type; a lying machine then fails loudly in
    the writer, and with another value type its values are checked and rejected."""
    import pyarrow as pa
    from pyspark.sql import types as T

    from statemachines import Machine
    from statemachines.spark.batch import EventColumns, checks_values, prepare_events

    class Claims(Machine):
        values_fit_own_type = True

        def value_type(self, symbol_type, time_type):
            return pa.int64()

        def transition(self, key, values, symbol, time):
            return {symbol}  # a string, whatever it claims

    events = spark.createDataFrame([("k", "x", 1)], "key string, symbol string, time long")
    prepared = prepare_events(events, EventColumns("key", "symbol", "time", None))
    assert not checks_values(Claims(), prepared, T.LongType())
    assert checks_values(Claims(), prepared, T.DoubleType())
    assert checks_values(Upsert(), prepared, T.LongType())
    with pytest.raises(Exception, match="does not fit"):
        run_batch(Claims(), events).updates.collect()
    result = run_batch(Claims(), events, value_type="double")
    assert [r.reason for r in result.rejected.collect()] == ["unserialisable_value"]


@pytest.mark.parametrize("given", ["pandas", "arrow", "rows"])
def test_events_that_are_not_a_spark_dataframe_are_one_clear_error(spark, tmp_path, given):
    """A pandas DataFrame, a pyarrow table or a list of rows given to a Spark runner
    is refused by name, with the remedy, before anything is written."""
    import pandas as pd
    import pyarrow as pa

    from statemachines.library import ChangeFeed
    from statemachines.spark import run_feed_batch, run_feed_stream, run_stream

    rows = [("a", "x", 1)]
    events = {
        "pandas": pd.DataFrame(rows, columns=["key", "symbol", "time"]),
        "arrow": pa.table({"key": ["a"], "symbol": ["x"], "time": [1]}),
        "rows": rows,
    }[given]
    feed = ChangeFeed(keys=["key"], sequence_by=["time"])
    calls = {
        "run_batch": lambda: run_batch(Upsert(), events, into=tmp_path / "arr"),
        "run_stream": lambda: run_stream(Upsert(), events, into=tmp_path / "arr", checkpoint=tmp_path / "ck"),
        "run_feed_batch": lambda: run_feed_batch(feed, events, into=tmp_path / "arr"),
        "run_feed_stream": lambda: run_feed_stream(feed, events, into=tmp_path / "arr", checkpoint=tmp_path / "ck"),
    }
    for runner, call in calls.items():
        with pytest.raises(InvalidArgument, match=f"{runner} takes a Spark DataFrame, not a .*spark.createDataFrame"):
            call()
    assert list(tmp_path.iterdir()) == []


class Expiring(Machine):
    """The last symbol, as ``symbol@time``, gone two time units after it was set;
    ``boom`` fails."""

    def transition(self, key, values, symbol, time):
        if symbol == "boom":
            raise RuntimeError("boom")
        return {f"{symbol}@{time}"}

    def deadline(self, key, values):
        ((value,),) = [values]
        return int(value.rsplit("@", 1)[1]) + 2

    def on_deadline(self, key, values, time):
        return frozenset()


hot_events = st.lists(
    st.tuples(
        st.sampled_from(["hot"] * 6 + ["a", None]),
        st.sampled_from(["x", "y", "boom"]),
        st.sampled_from([*range(12)] * 4 + [None, INT64_MAX, -1]),
        st.sampled_from([0, 1, None]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    events=hot_events,
    priors=st.dictionaries(st.sampled_from(["hot", "b"]), st.sampled_from(["x@0", "y@3"]).map(lambda v: frozenset({v}))),
    key_chunk=st.integers(1, 6),
    lower=st.sampled_from([None, 2]),
    upto=st.sampled_from([None, 20]),  # a run's upto lies after its events
)
def test_a_hot_key_run_a_part_at_a_time_gives_the_rows_of_running_it_whole(events, priors, key_chunk, lower, upto):
    """A key with more events than ``key_chunk`` is run in parts that end before a
    later time (so its events and updates need not all be in memory): bad times,
    late events, same-time events, failures, prior values and deadlines firing
    between the parts give the same rows as the whole key at once."""
    table = partition_rows(events, priors)
    whole = partition_runner(Expiring(), "number", lower, upto, OUTPUT, key_chunk=10**9)
    parts = partition_runner(Expiring(), "number", lower, upto, OUTPUT, key_chunk=key_chunk)
    assert output_rows(parts, table, 7) == output_rows(whole, table, 7)
    updates = [[row for row in emitted(runner, table, 7) if row[0] == UPDATE] for runner in (parts, whole)]
    assert updates[0] == updates[1]  # in the same order too


@settings(max_examples=150, deadline=None)
@given(
    clean=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from(["x", "y", "boom"]), st.integers(0, 9), st.sampled_from([0, 1, None])),
        max_size=40,
    ),
    flawed=st.lists(st.tuples(st.sampled_from(["a", None]), st.just("x"), st.sampled_from([None, INT64_MAX, 4]), st.just(0)), max_size=2),
    chunk_rows=st.integers(1, 9),
    key_chunk=st.sampled_from([3, 10**9]),
)
def test_a_task_checking_clean_batches_in_bulk_applies_and_rejects_what_run_local_does(clean, flawed, chunk_rows, key_chunk):
    """A task's batches cut anywhere: those with no flawed event are checked in bulk,
    the others event by event, and a key may span both kinds; the rows are
    run_local's, updates and rejections."""
    events = clean + flawed
    runner = partition_runner(Expiring(), "number", None, None, OUTPUT, key_chunk=key_chunk)
    rows = emitted(runner, partition_rows(events, {}), chunk_rows)
    local = run_local(Expiring(), events)
    assert consolidate(((r[1], r[2]), r[3], r[4]) for r in rows if r[0] == UPDATE) == local.updates
    rejected = sorted(((r[1], r[5], r[3], r[6], r[7]) for r in rows if r[0] != UPDATE), key=repr)
    assert rejected == sorted(((*r.event, str(r.reason)) for r in local.rejected), key=repr)


def test_a_key_with_more_events_than_a_part_runs_on_spark_as_locally(spark):
    """One key with several parts' worth of events, on Spark: the local reference."""
    from statemachines.spark.batch import KEY_CHUNK

    rnd = random.Random(4)
    events = [("hot", rnd.choice("xy"), t // 3, t % 3) for t in range(2 * KEY_CHUNK + 7)] + [("cold", "x", 5, 0)]
    result = run_batch(Expiring(), spark.createDataFrame(events, SCHEMA), order="order")
    assert collected(result) == (run_local(Expiring(), events).updates, [])
    result.unpersist()
