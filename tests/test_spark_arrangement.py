"""Spark reads a persisted arrangement exactly as Python does."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from statemachines import InvalidArgument, PersistedArrangement, consolidate, run_local
from statemachines.library import Upsert
from statemachines.persisted import DamagedArrangement, check
from statemachines.spark import read_history, read_snapshot, read_updates
from statemachines.spark.arrangement import LISTED_IN_A_JOB, read_files
from tests.contract import Case
from tests.delta_reader import commit_times, delta_rs_change_feed, statistics_problems
from tests.machines import Tags
from tests.test_contract import stream_runner

pytestmark = pytest.mark.spark


@pytest.fixture
def customers(tmp_path):
    arr = PersistedArrangement(tmp_path / "customers")
    commands = [
        ("c1", "ann@a.org", 1), ("c2", "bob@b.org", 1), ("c1", "ann@new.org", 3),
        ("c2", None, 4), ("c3", "cy@c.org", 4), ("c2", "bob@back.org", 6),
        ("c1", "ann@a.org", 7),
    ]
    run_local(Upsert(), commands[:4], into=arr, frontier=5)
    run_local(Upsert(), commands[4:], into=arr, frontier=8)
    return arr


def rows(frame, *columns):
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def test_many_local_files_are_read_whole_without_a_job_to_look_them_up(spark, tmp_path):
    """Past Spark's threshold (32 paths) a read would run a job to look its files up."""
    paths = []
    for i in range(40):
        paths.append(str(tmp_path / f"part-{i}.parquet"))
        pq.write_table(pa.table({"key": [f"k{i}"], "time": [i]}), paths[-1])
    threshold = spark.conf.get(LISTED_IN_A_JOB)
    group = f"read-{tmp_path.name}"
    spark.sparkContext.setJobGroup(group, "reading files")
    try:
        frame = read_files(spark, paths, "key string, time long")  # the schema given: no job reads a footer
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert jobs == []
    assert spark.conf.get(LISTED_IN_A_JOB) == threshold
    assert sorted(frame.collect()) == sorted((f"k{i}", i) for i in range(40))


def test_spark_reads_the_same_updates_snapshots_and_history(spark, customers):
    path = customers.path
    assert rows(read_updates(spark, path), "key", "value", "time", "diff") == sorted(
        (k, v, t, d) for (k, v), t, d in customers.updates()
    )
    for as_of in (1, 4, 6, None):
        assert rows(read_snapshot(spark, path, as_of), "key", "value", "count") == sorted(
            (k, v, n) for (k, v), n in customers.snapshot(as_of)
        )
    assert rows(read_history(spark, path), "key", "value", "start", "end") == sorted(
        tuple(r) for r in customers.history()
    )


def test_spark_reads_a_compacted_arrangement_at_its_since(spark, customers):
    customers.compact(5)
    path = customers.path
    assert rows(read_updates(spark, path), "key", "value", "time", "diff") == sorted(
        (k, v, t, d) for (k, v), t, d in customers.updates()
    )
    with pytest.raises(InvalidArgument, match="compacted"):
        read_snapshot(spark, path, as_of=4)


def test_spark_reading_a_version_whose_files_a_vacuum_deleted_is_refused_as_locally(spark, customers):
    """Spark's read of a version a compaction and a vacuum (delta-rs's, which leaves
    the arrangement's states) left without data files gives the error the local read
    gives, not Spark's missing path; later versions read."""
    before, latest = customers.version, sorted(customers.snapshot(None))
    customers.compact(5)
    DeltaTable(customers.path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(DamagedArrangement, match="vacuum deleted it") as local:
        PersistedArrangement.open(customers.path, version=before).updates()
    for read in (read_updates, read_snapshot, read_history):
        with pytest.raises(DamagedArrangement) as on_spark:
            read(spark, customers.path, version=before)
        # the same error, though it may name another of the version's files first
        assert str(on_spark.value).replace(on_spark.value.path, local.value.path) == str(local.value)
    assert rows(read_snapshot(spark, customers.path), "key", "value", "count") == [(k, v, n) for (k, v), n in latest]


def test_tuples_a_local_run_stored_read_as_structs_on_spark(spark, tmp_path):
    arr = PersistedArrangement(tmp_path)
    run_local(Tags(), [(("a", 1), ("add", ("x", 2)), 0), (("b", 2), ("add", ("y", 3)), 1)], into=arr)
    frame = read_updates(spark, tmp_path)
    assert frame.schema["key"].dataType.simpleString() == "struct<_1:string,_2:bigint>"
    assert frame.schema["value"].dataType.simpleString() == "struct<_1:string,_2:bigint>"
    rows = consolidate(((tuple(r.key), tuple(r.value)), r.time, r.diff) for r in frame.collect())
    assert rows == arr.updates()


def test_local_and_spark_runs_continue_each_others_arrangement_with_struct_values(spark, tmp_path):
    """Spark writes, a local run continues, Spark continues again: as one local run."""
    from statemachines.spark import run_batch

    rnd = random.Random(4)
    events = [
        (f"k{rnd.randrange(6)}", (rnd.choice("abc"), rnd.randrange(3)) if rnd.random() > 0.2 else None, t, i)
        for t in range(30) for i in range(3)
    ]
    schema = "key string, symbol struct<name:string,n:bigint>, time long, order long"
    thirds = [[e for e in events if lo <= e[2] < hi] for lo, hi in ((0, 10), (10, 20), (20, 30))]
    run_batch(Upsert(), spark.createDataFrame(thirds[0], schema), order="order", into=tmp_path)
    local = run_local(Upsert(), thirds[1], into=PersistedArrangement(tmp_path))
    assert local.rejected == []
    run_batch(Upsert(), spark.createDataFrame(thirds[2], schema), order="order", into=tmp_path)

    whole = run_local(Upsert(), events).updates
    assert PersistedArrangement.open(tmp_path).updates() == whole
    frame = read_updates(spark, tmp_path)
    assert frame.schema["value"].dataType.simpleString() == "struct<name:string,n:bigint>"
    assert consolidate(((r.key, tuple(r.value)), r.time, r.diff) for r in frame.collect()) == whole


def test_values_holding_maps_run_on_spark_and_locally_as_pairs_into_one_arrangement(spark, tmp_path):
    """A value with a map field (Spark's ``map<string, bigint>``) reads into Python as
    the tuple of its ``(key, value)`` pairs, hashable as a value must be, and writes
    back as the map: Spark's runs and a local one continue one arrangement, equal to
    the local run of the pairs; Spark reads the maps back, and a stream of the
    events makes the same updates."""
    from statemachines.spark import run_batch

    rnd = random.Random(5)
    maps = [None, (), (("tier", 1),), (("tier", 2), ("x", 3))]
    events = [(f"k{rnd.randrange(5)}", (rnd.choice("ab"), rnd.choice(maps)), t, 0) for t in range(30)]
    schema = "key string, symbol struct<name:string,attrs:map<string,bigint>>, time long, order long"
    as_maps = [(k, (name, None if attrs is None else dict(attrs)), t, o) for k, (name, attrs), t, o in events]
    thirds = [[e for e in rows if lo <= e[2] < hi] for rows in (as_maps, events) for lo, hi in ((0, 10), (10, 20), (20, 30))]
    assert run_batch(Upsert(), spark.createDataFrame(thirds[0], schema), order="order", into=tmp_path).rejected.count() == 0
    assert run_local(Upsert(), thirds[4], into=PersistedArrangement(tmp_path)).rejected == []
    assert run_batch(Upsert(), spark.createDataFrame(thirds[2], schema), order="order", into=tmp_path).rejected.count() == 0

    whole = run_local(Upsert(), events).updates
    assert PersistedArrangement.open(tmp_path).updates() == whole
    frame = read_updates(spark, tmp_path)
    assert frame.schema["value"].dataType.simpleString() == "struct<name:string,attrs:map<string,bigint>>"
    pairs = consolidate(((r.key, (r.value.name, None if r.value.attrs is None else tuple(sorted(r.value.attrs.items())))),
                         r.time, r.diff) for r in frame.collect())
    assert pairs == whole

    case = Case("maps", Upsert(), as_maps, [], schema=schema, value_type="struct<name:string,attrs:map<string,bigint>>")
    assert stream_runner(case, tmp_path / "stream", spark, batches=2) == (whole, [])


def test_the_files_spark_tasks_write_keep_the_statistics_of_keys_times_and_diffs(spark, tmp_path):
    """A task of a machine without a Spark-native path writes its data file itself."""
    from statemachines.spark import run_batch

    rnd = random.Random(7)
    events = [(f"k{rnd.randrange(9)}", (rnd.choice(["add", "del"]), rnd.choice("xyz")), t) for t in range(40)]
    schema = "key string, symbol struct<op:string,tag:string>, time long"
    for lo, hi in ((0, 20), (20, 40)):
        frame = spark.createDataFrame([e for e in events if lo <= e[2] < hi], schema)
        assert run_batch(Tags(), frame, into=tmp_path, value_type="string").rejected.count() == 0
    assert PersistedArrangement.open(tmp_path).updates() == run_local(Tags(), events).updates
    assert statistics_problems(tmp_path) == []


def test_a_local_arrangement_of_struct_values_is_continued_on_spark(spark, tmp_path):
    from statemachines.spark import run_batch

    first = [("a", ("x", 1), 0, 0), ("b", ("y", 2), 1, 0)]
    later = [("a", ("z", 3), 5, 0), ("b", None, 6, 0)]
    run_local(Upsert(), first, into=PersistedArrangement(tmp_path))
    schema = "key string, symbol struct<_1:string,_2:bigint>, time long, order long"
    run_batch(Upsert(), spark.createDataFrame(later, schema), order="order", into=tmp_path)
    assert PersistedArrangement.open(tmp_path).updates() == run_local(Upsert(), first + later).updates


def test_compaction_on_spark_equals_compaction_in_one_process(spark, tmp_path):
    from statemachines.spark import compact

    rnd = random.Random(8)
    events = [(f"k{rnd.randrange(30)}", rnd.choice(["a", "b", None]), t) for t in range(40) for _ in range(4)]
    for path in (tmp_path / "spark", tmp_path / "local"):
        arr = PersistedArrangement(path)
        for lo in range(0, 40, 10):
            run_local(Upsert(), [e for e in events if lo <= e[2] < lo + 10], into=arr, frontier=lo + 10)
    before = PersistedArrangement.open(tmp_path / "spark")
    assert compact(spark, tmp_path / "spark", 25) == 25
    assert PersistedArrangement.open(tmp_path / "local").compact(25) == 25
    on_spark, local = PersistedArrangement.open(tmp_path / "spark"), PersistedArrangement.open(tmp_path / "local")
    assert len(on_spark.batches) == 1 and on_spark.since == 25
    assert on_spark.updates() == local.updates()
    assert all(on_spark.values(f"k{i}") == local.values(f"k{i}") for i in range(30))
    # the version before stays readable, files and all
    assert PersistedArrangement.open(tmp_path / "spark", version=before.version).updates() == before.updates()
    assert check(tmp_path / "spark") == []
    # a compaction holds no new updates: Delta's change data feed skips it
    feed = delta_rs_change_feed(tmp_path / "spark")
    assert {kind for kind, _, _ in feed} == {"insert"} and max(version for _, version, _ in feed) == before.version
    assert consolidate(update for _, _, update in feed) == before.updates()


def test_spark_reads_the_version_committed_at_a_time(spark, tmp_path):
    import datetime as dt
    import time

    arrangement = PersistedArrangement(tmp_path / "arr")
    for t in range(3):
        arrangement.append([((f"k{t}", "v"), t, 1)], t if t else None, t + 1)
        time.sleep(0.01)  # commit times in distinct milliseconds
    commits = commit_times(tmp_path / "arr")
    version = sorted(commits)[-2]
    moment = dt.datetime.fromtimestamp(commits[version] / 1000, dt.UTC)

    def rows(frame):
        return sorted(tuple(r) for r in frame.collect())

    assert rows(read_updates(spark, tmp_path / "arr", version=moment)) == rows(
        read_updates(spark, tmp_path / "arr", version=version)
    )
    assert rows(read_updates(spark, tmp_path / "arr", version=moment)) != rows(read_updates(spark, tmp_path / "arr"))
