"""A persisted arrangement is a Delta Lake table: format, versions, crashes, damage."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import subprocess
import sys
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import from_dtype

from statemachines import InvalidArgument, PersistedArrangement, Reason, consolidate, run_local
from statemachines.delta import MaintainedMeanwhile, table_retention_hours
from statemachines.events import Event, Rejected
from statemachines.library import Upsert, UpsertWithLateness
from statemachines.persisted import MAINTENANCE_ATTEMPTS, DamagedArrangement, check, rejected_table
from statemachines.stored import merge_tables
from statemachines.updates import python_scalar
from tests import strategies as sst
from tests.delta_reader import (
    commit_times,
    delta_rs_change_feed,
    delta_rs_rows,
    delta_rs_updates,
    statistics_problems,
)
from tests.machines import Tags

SEED = [("frank", v, t) for t, v in enumerate(["mcsherry", "zappa", None, "oz", "oz", None])]


def files_in(directory):
    """Every file under ``directory`` with its bytes."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- the table any engine reads ---------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25, deadline=None)
@given(events=sst.events(sst.tag_symbols, key=sst.text_keys))
def test_delta_rs_reads_the_same_updates_as_the_arrangement(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("arr")
    arr = PersistedArrangement(path)
    for upper in (4, 9, 13):  # several commits, with merges
        run_local(Tags(), [e for e in events if upper - 5 < e.time + 1 <= upper], into=arr, frontier=upper)
    if arr.version is None:  # nothing stored: no table yet
        assert arr.updates() == []
        return
    assert delta_rs_updates(path) == consolidate(arr.updates()) == PersistedArrangement.open(path).updates()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=20, deadline=None)
@given(events=sst.events(sst.tag_symbols, key=sst.text_keys, max_size=80))
def test_each_data_file_keeps_the_statistics_of_its_keys_times_and_diffs(tmp_path_factory, events):
    """Data skipping reads a file's minimum and maximum key, time and diff from its
    add action; a point read reads each row group's keys'."""
    path = tmp_path_factory.mktemp("arr")
    arr = PersistedArrangement(path)
    for upper in (4, 9, 13):  # several commits, with merges
        run_local(Tags(), [e for e in events if upper - 5 < e.time + 1 <= upper], into=arr, frontier=upper)
    if arr.version is not None:
        assert statistics_problems(path) == []


def log_actions(path, kind):
    """Every ``add`` or ``remove`` action of the table's log, with its version."""
    for file in sorted((path / "_delta_log").glob("*.json")):
        for line in file.read_text().splitlines():
            action = json.loads(line)
            if kind in action:
                yield int(file.stem), action[kind]


change_steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["append", "publish unmerged"]), st.integers(0, 7)),
        st.tuples(st.sampled_from(["merge", "compact"]), st.just(0)),
    ),
    min_size=1, max_size=14,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25, deadline=None)
@given(steps=change_steps, data=st.data())
def test_the_change_data_feed_holds_each_appended_update_once_at_its_commit(tmp_path_factory, steps, data):
    """Delta's change data feed (delta-rs ``load_cdf``) of the arrangement is its
    appended updates, each once, at the version that appended it: merges and
    compactions rewrite files with ``dataChange`` false, as Delta's ``OPTIMIZE``,
    so change readers (and Delta streaming sources) skip them."""
    from statemachines.persisted import publish_batch

    path = tmp_path_factory.mktemp("arr")
    arr = PersistedArrangement(path)
    appended = {}  # version -> the updates it appended
    time = 0
    for step, size in steps:
        if step in ("append", "publish unmerged"):
            batch = consolidate(
                ((f"k{data.draw(st.integers(0, 5))}", data.draw(st.sampled_from("xyz"))), time, data.draw(st.sampled_from([1, -1, 2])))
                for _ in range(size)
            )
            if step == "append":
                arr.append(batch, lower=time, upper=time + 1)
            else:
                write_batch(path / f"b{time}", batch)
                publish_batch(path, f"b{time}", time, time + 1, len(batch), merge=False)
            arr = PersistedArrangement.open(path)
            if batch:
                appended[arr.version] = sorted(batch, key=repr)
            time += 1
        elif step == "merge":
            arr.merge_batches()
        elif arr.upper is not None:
            arr.compact(arr.upper)
    if arr.version is None:
        return
    feed = delta_rs_change_feed(path)
    assert {kind for kind, _, _ in feed} <= {"insert"}
    by_version = {}
    for _, version, update in feed:
        by_version.setdefault(version, []).append(update)
    assert {v: sorted(u, key=repr) for v, u in by_version.items()} == appended
    assert all(not removed["dataChange"] and removed["size"] > 0 for _, removed in log_actions(path, "remove"))
    assert delta_rs_updates(path) == PersistedArrangement.open(path).updates()
    assert net(delta_rs_updates(path)) == net(u for batch in appended.values() for u in batch)


def net(updates):
    """The collection the updates sum to, whatever their times: data -> total diff."""
    total = {}
    for data, _, diff in updates:
        total[data] = total.get(data, 0) + diff
    return {data: n for data, n in total.items() if n}


def test_keys_values_and_times_are_typed_columns_with_tuples_as_structs(tmp_path):
    t0 = dt.datetime(2026, 1, 1, 12, 0)
    run_local(Tags(), [("ann", ("add", ("x", 2)), t0), ("bob", ("add", ("y", 3)), t0 + dt.timedelta(seconds=5))],
              into=PersistedArrangement(tmp_path))
    schema = DeltaTable(str(tmp_path)).schema().to_arrow()
    types = {f.name: str(pa.schema(schema).field(f.name).type) for f in pa.schema(schema)}
    assert types["key"] == "string"
    assert types["value"] == "struct<_1: string, _2: int64>"
    assert types["time"].startswith("timestamp")
    assert types["diff"] == "int64"
    reopened = PersistedArrangement.open(tmp_path)
    assert reopened.values("bob") == {("y", 3)}
    assert reopened.upper == t0 + dt.timedelta(seconds=5, microseconds=1)


decimals = st.integers(0, 18).flatmap(lambda places: st.decimals(-(10**19), 10**19, places=places))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30, deadline=None)
@given(amounts=st.lists(decimals, min_size=2, max_size=12))
def test_decimal_values_of_any_scale_store_whatever_the_first_one_was(tmp_path_factory, amounts):
    """Money: a first amount of 2 must not fix the column to decimal(1, 0) and refuse a
    later 1.5. Decimals are stored as decimal(38, 18), as Spark types a Python
    decimal; every amount within it stores, run after run, and reads back equal."""
    target = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    events = [(f"k{i % 3}", amount, i) for i, amount in enumerate(amounts)]
    for run in (events[: len(events) // 2], events[len(events) // 2 :]):
        assert not run_local(Upsert(), run, into=target).rejected
    assert PersistedArrangement.open(target.path).updates() == run_local(Upsert(), events).updates


def test_a_value_type_declared_first_takes_what_the_first_value_would_have_refused(tmp_path):
    """Readings of 20 then 20.5: the first fixes an integer column and 20.5 is rejected,
    saying how to declare the type; declared as a double first, both store."""
    readings = [("s", 20, 0), ("s", 20.5, 1)]
    refused = run_local(Upsert(), readings, into=PersistedArrangement(tmp_path / "fixed")).rejected
    assert [r.event.symbol for r in refused] == [20.5]
    assert "expect_value_type" in refused[0].detail
    declared = PersistedArrangement(tmp_path / "declared")
    declared.expect_value_type(pa.float64())
    assert not run_local(Upsert(), readings, into=declared).rejected
    assert PersistedArrangement.open(tmp_path / "declared").updates() == run_local(Upsert(), readings).updates


def test_values_no_column_can_hold_are_rejected_up_front_with_a_reason(tmp_path):
    arr = PersistedArrangement(tmp_path)
    events = [("a", ("add", 1), 0), ("b", ("add", frozenset({1})), 0), ("c", ("add", "text"), 1), ("d", ("add", 2), 1)]
    result = run_local(Tags(), events, into=arr)
    rejected = {r.event.key: r.reason for r in result.rejected}
    assert rejected == {"b": Reason.UNSERIALISABLE_VALUE, "c": Reason.UNSERIALISABLE_VALUE}
    assert all(r.detail for r in result.rejected)
    assert PersistedArrangement.open(tmp_path).snapshot() == [(("a", 1), 1), (("d", 2), 1)]
    # once the table exists, its column type decides
    later = run_local(Tags(), [("e", ("add", "text"), 5), ("f", ("add", 7), 5)], into=arr)
    assert [r.event.key for r in later.rejected] == ["e"]


class Reading(NamedTuple):
    name: str
    amount: Any


class Tagged(NamedTuple):
    reading: Reading | None
    tags: tuple


odd_scalars = st.one_of(
    st.none(), st.integers(-(2**70), 2**70), st.floats(), st.booleans(), st.timedeltas(), st.text(max_size=2),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
)
readings = st.builds(Reading, st.text(max_size=2), odd_scalars)
odd_values = st.one_of(
    st.integers(-(2**70), 2**70), st.decimals(allow_nan=False, places=None).filter(lambda d: d.is_finite()),
    st.timedeltas(), st.times(), st.text(max_size=3), st.binary(max_size=2), st.datetimes(), st.dates(),
    st.floats(), st.booleans(), st.tuples(st.text(max_size=2), st.one_of(st.none(), st.integers(), st.timedeltas())),
    readings, st.builds(Tagged, st.none() | readings, st.tuples(odd_scalars)),  # records, as CDC rows are
    st.sampled_from(["int8", "uint64", "float16", "float32", "bool", "M8[D]", "M8[s]", "M8[ns]", "m8[us]"]).flatmap(
        lambda dtype: from_dtype(np.dtype(dtype))  # numpy's scalars, from arrays and pandas
    ),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), odd_values), min_size=1, max_size=6))
@example([("a", decimal.Decimal("9.99E-19")), ("a", 10)])  # decimal(38, 37) has one digit before the point
@example([("a", np.datetime64("0000-12-31"))])  # a date of no Python date
def test_any_value_is_stored_and_read_back_or_rejected_with_a_reason(tmp_path_factory, rows):
    """Numbers beyond 64 bits or 38 digits, durations, times of day, text no codec
    writes, NaN, numpy's scalars: a run into a persisted arrangement never fails; every event is
    applied (its value read back from the table) or rejected with a reason."""
    path = tmp_path_factory.mktemp("odd")
    events = [(key, value, t) for t, (key, value) in enumerate(rows)]
    result = run_local(Upsert(), events, into=PersistedArrangement(path))
    assert all(r.reason == Reason.UNSERIALISABLE_VALUE and r.detail for r in result.rejected)
    refused = {r.event.time for r in result.rejected}  # (an event's time is its place)
    applied = [e for e in events if e[2] not in refused]
    assert result.updates == run_local(Upsert(), applied).updates
    assert PersistedArrangement.open(path).updates() == python_updates(result.updates)


def python_updates(updates):
    """The updates, numpy's scalars in them as the Python values they equal (a numpy
    integer and a Decimal do not compare: ``np.int8(0) == Decimal(0)`` raises)."""
    return [((python_scalar(k), python_scalar(v)), t, d) for (k, v), t, d in updates]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40, deadline=None)
@given(st.lists(st.tuples(odd_values, st.sampled_from("vw")), min_size=1, max_size=6))
@example([(decimal.Decimal("1.5"), "v")])  # no file statistics of a decimal key
@example([(decimal.Decimal("1"), "v"), (np.int8(0), "v")])  # which compare only as Python's
@example([(math.inf, "v"), (1.5, "w")])  # no statistic of an infinity
def test_any_key_is_stored_and_read_back_or_rejected_with_a_reason(tmp_path_factory, rows):
    """As values, so keys: every event is applied or rejected with a reason, its key
    read back and looked up; delta-rs reads the table and its file statistics."""
    path = tmp_path_factory.mktemp("odd")
    events = [(key, value, t) for t, (key, value) in enumerate(rows)]
    result = run_local(Upsert(), events, into=PersistedArrangement(path))
    assert all(r.reason == Reason.BAD_KEY and r.detail for r in result.rejected)
    refused = {r.event.time for r in result.rejected}
    applied = [e for e in events if e[2] not in refused]
    assert result.updates == run_local(Upsert(), applied).updates
    stored = PersistedArrangement.open(path)
    assert stored.updates() == python_updates(result.updates)
    assert all(stored.values(key) == {value} for (key, value), _ in stored.snapshot())
    if result.updates:  # (a run that takes no event commits nothing)
        assert DeltaTable(str(path)).to_pyarrow_table().num_rows == len(result.updates)
        for log in path.glob("_delta_log/*.json"):  # statistics are JSON: no Infinity, no NaN
            for action in map(json.loads, log.read_text().splitlines()):
                if action.get("add", {}).get("stats"):
                    json.loads(action["add"]["stats"], parse_constant=not_json)


def not_json(constant):
    raise ValueError(f"{constant} is not JSON")



@pytest.mark.parametrize(
    "values, refused",
    [
        ([5, np.int64(6), np.uint8(7), np.uint64(2**63)], [3]),  # beyond the int64 column
        ([np.float32(0.1), 1.5, np.float16(2.5)], []),
        ([True, np.bool_(False)], []),
        ([dt.datetime(2024, 1, 1), np.datetime64("2024-01-02T03:04:05"), np.datetime64("2024-01-02T03:04:05.000000001")], [2]),
        ([np.datetime64("2024-01-02"), dt.date(2024, 1, 3)], []),
    ],
    ids=["ints", "floats", "booleans", "timestamps", "dates"],
)
def test_numpy_scalars_are_stored_as_the_python_values_they_equal_in_one_column(tmp_path, values, refused):
    events = [(f"k{i}", value, 0) for i, value in enumerate(values)]
    result = run_local(Upsert(), events, into=tmp_path)
    assert [r.event.key for r in result.rejected] == [f"k{i}" for i in refused]
    assert all(r.reason == Reason.UNSERIALISABLE_VALUE for r in result.rejected)
    stored = PersistedArrangement.open(tmp_path).snapshot()
    assert stored == [((f"k{i}", v), 1) for i, v in enumerate(values) if i not in refused]  # equal: np.int64(6) == 6
    assert all(type(value).__module__ != "numpy" for (_, value), _ in stored)  # read back as Python's

# -- versions -----------------------------------------------------------------------------


def test_every_version_stays_readable_after_appends_and_compactions_until_vacuum(tmp_path):
    arr = PersistedArrangement(tmp_path)
    seen = {}
    for t, value in enumerate(["a", "b", None, "c", "d"]):
        run_local(Upsert(), [("k", value, t), (f"x{t}", "v", t)], into=arr, frontier=t + 1)
        seen[arr.version] = arr.updates()
    arr.compact(arr.upper)
    seen[arr.version] = arr.updates()
    for version, updates in seen.items():
        assert PersistedArrangement.open(tmp_path, version=version).updates() == updates
        assert delta_rs_updates(tmp_path, version) == consolidate(updates)
    assert len(arr.vacuum(retention_hours=0, enforce_retention_duration=False)) > 0
    assert PersistedArrangement.open(tmp_path).updates() == seen[arr.version]
    assert check(tmp_path) == []


@pytest.mark.parametrize("hours", [0.5, 1])
def test_a_vacuum_keeps_what_versions_of_the_last_hours_need_a_fraction_rounded_up(tmp_path, hours):
    """Delta's vacuum counts whole hours: a retention of half an hour keeps what the
    last hour's versions need, never less than asked."""
    arr = PersistedArrangement(tmp_path)
    for t in range(3):
        arr.append([((f"k{t}", "v"), t, 1)], lower=t or None, upper=t + 1)
    before, updates = arr.version, arr.updates()
    arr.compact(arr.upper)  # the batches merge: their files leave the next version
    assert arr.vacuum(retention_hours=hours, enforce_retention_duration=False) == []
    assert PersistedArrangement.open(tmp_path, version=before).updates() == updates
    assert len(arr.vacuum(retention_hours=0, enforce_retention_duration=False)) > 0


def compacted(path):
    """An arrangement whose compaction left files only its earlier versions need:
    ``(arrangement, an earlier version, its updates)``."""
    arr = PersistedArrangement(path)
    for t in range(3):
        arr.append([((f"k{t}", "v"), t, 1)], lower=t or None, upper=t + 1)
    before, updates = arr.version, arr.updates()
    arr.compact(arr.upper)
    return arr, before, updates


def set_retention(path, text):
    DeltaTable(str(path)).alter.set_table_properties({"delta.deletedFileRetentionDuration": text})


def test_a_vacuum_keeps_the_tables_retention_by_default_and_refuses_a_shorter_one(tmp_path):
    """As Delta's VACUUM: without a retention, the table's
    delta.deletedFileRetentionDuration applies (a week unless set), and a shorter
    retention is refused unless the check is turned off."""
    arr, before, updates = compacted(tmp_path)
    assert arr.vacuum() == []
    with pytest.raises(InvalidArgument, match=r"below the table's delta.deletedFileRetentionDuration \(168 hours\)"):
        arr.vacuum(retention_hours=167)
    set_retention(tmp_path, "interval 2 days")
    arr = PersistedArrangement.open(tmp_path)  # a property commit changes no file: it opens
    with pytest.raises(InvalidArgument, match=r"\(48 hours\)"):
        arr.vacuum(retention_hours=24)
    assert arr.vacuum(retention_hours=48) == []
    assert PersistedArrangement.open(tmp_path, version=before).updates() == updates
    set_retention(tmp_path, "interval 0 seconds")
    gone = PersistedArrangement.open(tmp_path).vacuum()
    left = {str(name) for name in files_in(tmp_path)}
    assert gone and not left.intersection(gone)
    with pytest.raises(DamagedArrangement):
        PersistedArrangement.open(tmp_path, version=before).updates()


VACUUMS = {
    "delta-rs": lambda arr: DeltaTable(arr.path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False),
    "the arrangement's (its states too)": lambda arr: arr.vacuum(retention_hours=0, enforce_retention_duration=False),
}


@pytest.mark.parametrize("vacuum", VACUUMS)
def test_a_version_whose_files_a_vacuum_deleted_says_so_and_names_the_latest(tmp_path, vacuum):
    """As Delta's time travel past the retention period: a version whose files a
    later compaction dropped and a vacuum deleted cannot be read, and the error says
    why and which version is the latest; the later versions read as before. A file
    the latest version names, deleted by hand, is damage: restore it."""
    arr, before, _ = compacted(tmp_path)
    for t in range(3, 5):
        arr.append([((f"k{t}", "v"), t, 1)], lower=t, upper=t + 1)
    updates = arr.updates()
    VACUUMS[vacuum](arr)
    latest = DeltaTable(str(tmp_path)).version()  # delta-rs logs its vacuum too
    with pytest.raises(DamagedArrangement, match=rf"version {before} .* a vacuum deleted it .* the latest, {latest}$"):
        PersistedArrangement.open(tmp_path, version=before).updates()
    problems = check(tmp_path, version=before)
    assert problems and all("a vacuum deleted it" in line for line in problems)
    assert PersistedArrangement.open(tmp_path).updates() == updates
    data, _ = _damage(tmp_path, "missing data file")
    with pytest.raises(DamagedArrangement, match="restore the file from a backup") as damaged:
        PersistedArrangement.open(tmp_path).updates()
    assert damaged.value.path.endswith(data.name)


def test_a_dry_run_lists_what_the_vacuum_then_deletes_and_deletes_nothing(tmp_path):
    arr, before, updates = compacted(tmp_path)
    files = files_in(tmp_path)
    listed = arr.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    assert listed and files_in(tmp_path) == files
    assert PersistedArrangement.open(tmp_path, version=before).updates() == updates
    assert sorted(arr.vacuum(retention_hours=0, enforce_retention_duration=False)) == sorted(listed)


@pytest.mark.parametrize("text", ["interval 36 hours", "interval 3 days", "interval 1 week", "interval 2 weeks"])
def test_the_tables_retention_is_read_as_delta_rs_reads_it(tmp_path, text):
    """Where delta-rs reads the property (its canonical form), it enforces the same
    minimum: it refuses an hour less and takes it exactly."""
    arr, _, _ = compacted(tmp_path)
    set_retention(tmp_path, text)
    table = DeltaTable(str(tmp_path))
    hours = table_retention_hours(table.metadata().configuration)
    table.vacuum(retention_hours=int(hours), dry_run=True)
    with pytest.raises(Exception, match="retention"):
        table.vacuum(retention_hours=int(hours) - 1, dry_run=True)
    with pytest.raises(InvalidArgument):
        PersistedArrangement.open(tmp_path).vacuum(retention_hours=hours - 1)


@pytest.mark.parametrize(
    ("text", "hours"),
    [("INTERVAL 1 Day 12 Hours", 36), ("2 days", 48), ("interval 90 minutes", 1.5), ("interval 1 day", 24)],
)
def test_the_tables_retention_is_read_as_sparks_interval_text(text, hours):
    """Spark's Delta reads the property as an interval: any case, with or without
    ``interval``, several units (delta-rs 1.6 takes only the first unit of a
    lower-case text that starts with ``interval``)."""
    assert table_retention_hours({"delta.deletedFileRetentionDuration": text}) == hours


@pytest.mark.parametrize("text", ["a week", "interval 1 month", "interval 3", "interval -1 days", ""])
def test_a_retention_property_that_is_no_interval_is_refused_by_name(tmp_path, text):
    arr, _, _ = compacted(tmp_path)
    set_retention(tmp_path, text)
    with pytest.raises(InvalidArgument, match="delta.deletedFileRetentionDuration"):
        PersistedArrangement.open(tmp_path).vacuum()


@pytest.mark.parametrize("hours", [-1, math.nan, math.inf, "24"])
def test_a_retention_that_is_no_number_of_hours_is_refused(tmp_path, hours):
    arr = PersistedArrangement(tmp_path)
    arr.append([(("k", "v"), 0, 1)], lower=None, upper=1)
    with pytest.raises(InvalidArgument, match="retention_hours is a number of hours"):
        arr.vacuum(retention_hours=hours)


def test_a_replayed_append_commits_nothing(tmp_path):
    arr = PersistedArrangement(tmp_path)
    batch = [(("k", "v"), 1, 1)]
    assert arr.append(batch, lower=None, upper=2) is True
    version = arr.version
    assert PersistedArrangement(tmp_path).append(batch, lower=None, upper=2) is False
    assert DeltaTable(str(tmp_path)).version() == version


def test_the_state_survives_delta_checkpoints(tmp_path):
    arr = PersistedArrangement(tmp_path)
    for t in range(12):
        arr.append([((f"k{t}", t), t, 1)], lower=t or None, upper=t + 1)
    table = DeltaTable(str(tmp_path))
    table.create_checkpoint()
    reopened = PersistedArrangement.open(tmp_path)
    assert (reopened.upper, reopened.first, reopened.updates()) == (12, None, arr.updates())


FOREIGN_WRITES = {
    "DELETE": lambda table: table.delete("key = 'k1'"),
    "UPDATE": lambda table: table.update({"diff": "2"}, predicate="key = 'k2'"),
    "WRITE": lambda table: write_deltalake(table.table_uri, delta_rs_rows(table).slice(0, 1), mode="append"),
    "OPTIMIZE": lambda table: (
        write_deltalake(table.table_uri, delta_rs_rows(table).slice(0, 1), mode="append"),
        DeltaTable(table.table_uri).optimize.compact(),
    ),
}


@pytest.mark.parametrize("operation", FOREIGN_WRITES)
def test_a_table_another_writer_changed_is_refused_naming_the_commit_and_restoring_continues_it(tmp_path, operation):
    """Delta engines may write the table (a DELETE, an UPDATE, an append, an OPTIMIZE);
    the arrangement's batches then no longer describe it. Reading or writing it as the
    arrangement is refused, naming the commit; a restore to the version the message
    names continues the arrangement, and Delta readers and the arrangement agree."""
    arr = PersistedArrangement(tmp_path)
    for t in range(3):
        arr.append([((f"k{t}", "v"), t, 1)], lower=t or None, upper=t + 1)
    ours = arr.updates()
    FOREIGN_WRITES[operation](DeltaTable(str(tmp_path)))
    assert delta_rs_updates(tmp_path) != consolidate(ours)  # the table changed
    with pytest.raises(DamagedArrangement, match=rf"another writer .* \({operation}\).*\.restore\((\d+)\)") as refused:
        PersistedArrangement(tmp_path)
    assert any("another writer changed the table" in line for line in check(tmp_path))
    DeltaTable(str(tmp_path)).restore(int(refused.value.args[0].rsplit("restore(", 1)[1].rstrip(")")))
    arr = PersistedArrangement(tmp_path)
    assert arr.updates() == ours and check(tmp_path) == []
    arr.append([(("k9", "v"), 5, 1)], lower=3, upper=6)
    assert delta_rs_updates(tmp_path) == consolidate(PersistedArrangement(tmp_path).updates())


OPTIMIZES = {
    "compact": lambda table: table.optimize.compact(),
    "z-order by key": lambda table: table.optimize.z_order(["key"]),
    "z-order by time": lambda table: table.optimize.z_order(["time"]),
    "compact a part": lambda table: table.optimize.compact(target_size=1),  # nothing to bin: no commit
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.one_of(
            st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("xyz"), st.sampled_from([-1, 1, 2])), min_size=1, max_size=6),
            st.just("compact"),
        ),
        min_size=1, max_size=7,
    ).map(lambda steps: [[("a", "x", 1)], *steps]),  # a table from the first commit on
    optimize=st.sampled_from(sorted(OPTIMIZES)),
    optimizes=st.integers(1, 2),
    after=st.lists(st.tuples(st.sampled_from("abe"), st.sampled_from("xw"), st.sampled_from([-1, 1])), min_size=1, max_size=4),
)
def test_an_optimize_by_another_engine_is_read_through_and_the_arrangement_continues(tmp_path_factory, steps, optimize, optimizes, after):
    """Delta's ``OPTIMIZE`` (delta-rs's compaction or Z-order, as a platform's table
    maintenance runs it) rewrites files and changes no row: the arrangement reads as
    before, every version included, ``check`` finds nothing, and it continues (an
    append, a compaction) to what an arrangement never optimised holds."""
    path, model = tmp_path_factory.mktemp("optimized"), tmp_path_factory.mktemp("model")
    time = 0
    for step in steps:
        for where in (path, model):
            arr = PersistedArrangement(where)
            if step == "compact":
                arr.compact(time)
            else:
                arr.append([((k, v), time, d) for k, v, d in step], time or None, time + 1)
        time += step != "compact"
    ours = PersistedArrangement(path)
    versions = {v: PersistedArrangement.open(path, version=v).updates() for v in range(ours.version + 1)}
    for _ in range(optimizes):
        OPTIMIZES[optimize](DeltaTable(str(path)))
    arr = PersistedArrangement(path)
    assert arr.updates() == ours.updates() and arr.upper == ours.upper and check(path) == []
    assert all(PersistedArrangement.open(path, version=v).updates() == versions[v] for v in versions)
    assert all(arr.values(k) == ours.values(k) for k in "abcd")  # point reads, through the rewritten files
    arr._check()  # loaded, the rewritten batch is consolidated, each value's times in order
    for continued in (arr, PersistedArrangement(model)):  # arr's batches loaded by its reads: merged in Python
        continued.append([((k, v), time, d) for k, v, d in after], time or None, time + 1)
        continued.compact(time)
    assert PersistedArrangement(path).updates() == PersistedArrangement(model).updates()
    assert delta_rs_updates(path) == consolidate(PersistedArrangement(model).updates()) and check(path) == []


MAINTENANCE = {
    "OPTIMIZE": lambda table: table.optimize.compact(),
    "VACUUM": lambda table: table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False),
    "SET TBLPROPERTIES": lambda table: table.alter.set_table_properties({"delta.logRetentionDuration": "interval 40 days"}),
    "OPTIMIZE, VACUUM": lambda table: (
        table.optimize.compact(),
        DeltaTable(table.table_uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False),
    ),
}


@pytest.mark.parametrize("merges", [False, True], ids=["appends", "merges"])
@pytest.mark.parametrize("maintenance", MAINTENANCE)
def test_a_writer_that_read_the_table_before_its_maintenance_commits_as_if_after_it(tmp_path, maintenance, merges):
    """A writer whose version table maintenance by another engine followed (an
    ``OPTIMIZE``, a ``VACUUM``'s commits, a property set) loses its commit (its
    merges would remove files an optimisation already removed) and makes it again
    on the maintained table, once: the same updates as without the maintenance.
    Another writer's append in between is still refused."""
    arr = PersistedArrangement(tmp_path)
    for t in range(4):
        arr.append([((f"k{t % 2}", f"v{t}"), t, 1)], t or None, t + 1)
    before = arr.updates()
    MAINTENANCE[maintenance](DeltaTable(str(tmp_path)))
    maintained = DeltaTable(str(tmp_path)).version()
    new = [((f"k{t}", "n"), 4, 1) for t in range(8 if merges else 1)]  # eight updates merge the spine
    arr.append(new, 4, 5)
    assert arr.version == maintained + 1 and arr.updates() == consolidate([*before, *new])
    assert PersistedArrangement(tmp_path).updates() == arr.updates() == delta_rs_updates(tmp_path)
    assert check(tmp_path) == []
    stale = PersistedArrangement(tmp_path)
    arr.append([(("k9", "w"), 5, 1)], 5, 6)
    MAINTENANCE[maintenance](DeltaTable(str(tmp_path)))
    with pytest.raises(InvalidArgument, match="another writer committed|a vacuum deleted it"):  # files its merge reads
        stale.append([(("k9", "z"), 5, 1)], 5, 6)
    assert PersistedArrangement(tmp_path).updates() == arr.updates()


def test_maintenance_long_after_the_last_own_commit_is_read_through(tmp_path):
    """Many more commits of other engines since the arrangement's last than the
    first part of the log's history it reads back covers: read through all the same,
    by the latest version and by number, and after a restore."""
    arr = PersistedArrangement(tmp_path)
    for t in range(4):
        arr.append([((f"k{t % 2}", f"v{t}"), t, 1)], t or None, t + 1)
    versions = {v: PersistedArrangement.open(tmp_path, version=v).updates() for v in range(arr.version + 1)}

    def maintained(times):
        MAINTENANCE["OPTIMIZE"](DeltaTable(str(tmp_path)))
        for _ in range(times):
            MAINTENANCE["SET TBLPROPERTIES"](DeltaTable(str(tmp_path)))

    maintained(20)
    versions[DeltaTable(str(tmp_path)).version()] = versions[arr.version]
    DeltaTable(str(tmp_path)).restore(1)
    maintained(20)
    assert PersistedArrangement(tmp_path).updates() == versions[1] and check(tmp_path) == []
    assert {v: PersistedArrangement.open(tmp_path, version=v).updates() for v in versions} == versions


@pytest.mark.parametrize("wins", [2, MAINTENANCE_ATTEMPTS - 1, MAINTENANCE_ATTEMPTS])
def test_maintenance_that_wins_again_and_again_is_waited_out_a_bounded_number_of_times(tmp_path, monkeypatch, wins):
    """Maintenance that beats each attempt in turn (it runs again just after the
    writer reloads): the writer commits on the table as it was left, unless the
    maintenance won every attempt, when nothing is committed and it says so."""
    from statemachines import delta as delta_log

    arr = PersistedArrangement(tmp_path)
    arr.append([(("k", "v"), 0, 1)], None, 1)
    load, won = delta_log.read_snapshot, [1]

    def maintained_after_reading(*args, **kwargs):
        snapshot = load(*args, **kwargs)
        if won[0] < wins:
            MAINTENANCE["SET TBLPROPERTIES"](DeltaTable(str(tmp_path)))
            won[0] += 1
        return snapshot

    monkeypatch.setattr(delta_log, "read_snapshot", maintained_after_reading)
    MAINTENANCE["SET TBLPROPERTIES"](DeltaTable(str(tmp_path)))
    if wins == MAINTENANCE_ATTEMPTS:
        with pytest.raises(MaintainedMeanwhile, match="another engine maintained"):
            arr.append([(("k", "w"), 1, 1)], 1, 2)
        assert PersistedArrangement(tmp_path).updates() == [(("k", "v"), 0, 1)]
    else:
        arr.append([(("k", "w"), 1, 1)], 1, 2)
        assert PersistedArrangement(tmp_path).updates() == arr.updates() == [(("k", "v"), 0, 1), (("k", "w"), 1, 1)]
    assert won[0] == wins and check(tmp_path) == []


def own_history(path):
    """An arrangement of appends (merging along the spine), a compaction and more
    appends, 60 ms apart: each version's updates and upper."""
    import time

    arr = PersistedArrangement(path)
    for t in range(6):
        time.sleep(0.06)
        arr.append([((f"k{t % 3}", f"v{t}"), t, 1), ((f"k{(t + 1) % 3}", "w"), t, (-1) ** t)], t or None, t + 1)
        if t == 3:
            arr.compact(2)
    versions = (PersistedArrangement.open(path, version=v) for v in range(arr.version + 1))
    return {opened.version: (opened.updates(), opened.upper) for opened in versions}


@pytest.mark.parametrize("by", ["version", "time"])
@pytest.mark.parametrize("target", [0, 2, 4, 5])
def test_a_delta_restore_to_one_of_its_versions_rolls_the_arrangement_back_and_it_continues(tmp_path, target, by):
    """Delta's ``RESTORE`` (by version or by time) to a version the arrangement
    wrote: it then reads as that version, continues from there (its upper, its
    batches), and every version stays readable, the abandoned ones included."""
    versions = own_history(tmp_path)
    table = DeltaTable(str(tmp_path))
    if by == "version":
        table.restore(target)
    else:
        table.restore(dt.datetime.fromtimestamp((commit_times(tmp_path)[target] + 30) / 1000, dt.UTC))  # the next: 60 ms on
    arr = PersistedArrangement(tmp_path)
    updates, upper = versions[target]
    assert (arr.updates(), arr.upper) == (updates, upper) and check(tmp_path) == []
    arr.append([(("k9", "again"), upper, 1)], upper, upper + 1)
    arr = PersistedArrangement(tmp_path)
    assert arr.updates() == consolidate([*updates, (("k9", "again"), upper, 1)])
    assert delta_rs_updates(tmp_path) == arr.updates() and check(tmp_path) == []
    assert {v: PersistedArrangement.open(tmp_path, version=v).updates() for v in versions} == {
        v: versions[v][0] for v in versions
    }


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.just("OPTIMIZE"), st.integers(0, 99)), min_size=1, max_size=4))
@example(steps=["OPTIMIZE", 0])  # version 7, the OPTIMIZE's, then read by number beside a later restore
@example(steps=[3, "OPTIMIZE"])  # a restore, then a platform's routine OPTIMIZE
@example(steps=["OPTIMIZE", 0, 7, "OPTIMIZE"])  # a restore to the OPTIMIZE's version, optimised again
def test_restores_and_optimizes_in_any_order_read_as_the_version_restored(tmp_path_factory, steps):
    """Delta ``RESTORE`` (to any earlier version: the arrangement's own, an
    ``OPTIMIZE``'s or another restore's) and ``OPTIMIZE`` by another engine, in any
    order: the arrangement reads as the version last restored, every version stays
    readable as it was, and it continues from there."""
    path = tmp_path_factory.mktemp("restored")
    arr = PersistedArrangement(path)
    for t in range(6):
        arr.append([((f"k{t % 3}", f"v{t}"), t, 1), ((f"k{(t + 1) % 3}", "w"), t, (-1) ** t)], t or None, t + 1)
        if t == 3:
            arr.compact(2)
    readable = {v: PersistedArrangement.open(path, version=v).updates() for v in range(arr.version + 1)}
    expected = readable[arr.version]
    for step in steps:
        table = DeltaTable(str(path))
        if step == "OPTIMIZE":
            table.optimize.compact()
        elif (target := sorted(readable)[step % len(readable)]) != table.version():
            table.restore(target)
            expected = readable[target]
        readable[DeltaTable(str(path)).version()] = expected
        assert PersistedArrangement(path).updates() == expected and check(path) == []
    assert {v: PersistedArrangement.open(path, version=v).updates() for v in readable} == readable
    arr = PersistedArrangement(path)
    arr.append([(("k9", "again"), arr.upper, 1)], arr.upper, arr.upper + 1)
    assert PersistedArrangement(path).updates() == consolidate([*expected, (("k9", "again"), arr.upper - 1, 1)])
    assert delta_rs_updates(path) == PersistedArrangement(path).updates() and check(path) == []


def test_a_restore_by_time_finds_the_version_delta_rs_dated_by_its_log_file(tmp_path):
    """delta-rs dates a version by its log file, written just after the commit's own
    time: restored by a time between the two, the table holds the version before, and
    so does the arrangement."""
    import os

    versions = own_history(tmp_path)
    committed = {h["version"]: h["timestamp"] for h in DeltaTable(str(tmp_path)).history()}
    log = tmp_path / "_delta_log" / f"{2:020d}.json"
    os.utime(log, ns=(log.stat().st_atime_ns, (committed[2] + 20) * 10**6))
    DeltaTable(str(tmp_path)).restore(dt.datetime.fromtimestamp((committed[2] + 5) / 1000, dt.UTC))
    arr = PersistedArrangement(tmp_path)
    assert (arr.updates(), arr.upper) == versions[1] and delta_rs_updates(tmp_path) == arr.updates()


def test_a_restore_then_another_writers_change_is_refused(tmp_path):
    own_history(tmp_path)
    table = DeltaTable(str(tmp_path))
    table.restore(2)
    table.delete("key = 'k1'")
    with pytest.raises(DamagedArrangement, match=r"\(RESTORE\), version \d+ \(DELETE\)"):
        PersistedArrangement(tmp_path)


# -- creating and opening ---------------------------------------------------------------


def test_an_arrangement_under_a_path_with_spaces_and_accents_opens_and_checks_clean(tmp_path):
    """The Delta log names files percent-encoded ("a%20b"); the arrangement's batches do not."""
    path = tmp_path / "a b é"
    for t in range(3):
        run_local(Upsert(), [(f"k{t}", "v", t)], into=PersistedArrangement(path), frontier=t + 1)
    assert PersistedArrangement.open(path).updates() == delta_rs_updates(path)
    assert check(path) == []


def test_a_directory_holding_anything_else_is_refused_and_left_untouched(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "batch-keep").mkdir(parents=True)
    (theirs / "batch-keep" / "part.parquet").write_bytes(b"someone else's data")
    before = files_in(theirs)
    with pytest.raises(InvalidArgument, match="not empty"):
        PersistedArrangement(theirs)
    with pytest.raises(InvalidArgument, match="holds no arrangement"):
        PersistedArrangement.open(theirs)
    with pytest.raises(InvalidArgument, match="not empty"):
        PersistedArrangement.create(theirs)
    assert files_in(theirs) == before


def test_open_and_create_are_explicit(tmp_path):
    with pytest.raises(InvalidArgument, match="holds no arrangement"):
        PersistedArrangement.open(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
    PersistedArrangement.create(tmp_path / "new").append([(("k", 1), 0, 1)], None, 1)
    with pytest.raises(InvalidArgument, match="not empty"):
        PersistedArrangement.create(tmp_path / "new")
    assert PersistedArrangement(tmp_path / "new").values("k") == {1}


def test_a_format_1_arrangement_is_refused_by_name_and_converted_by_the_command(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    table = pa.table({"key": ["frank", "frank"], "value": ["mcsherry", "zappa"], "time": [0, 1], "diff": [1, 1]})
    pq.write_table(table, old / "batch-1.parquet")
    manifest = {
        "format": 1, "upper": 2, "since": None, "boundaries": [None, 2],
        "batches": [{"id": "1", "file": "batch-1.parquet", "lower": None, "upper": 2, "since": None, "count": 2}],
    }
    (old / "manifest.json").write_text(json.dumps(manifest))
    before = files_in(old)
    with pytest.raises(InvalidArgument, match="statemachines convert"):
        PersistedArrangement(old)
    done = subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", "convert", str(old), str(tmp_path / "new")],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    new = PersistedArrangement.open(tmp_path / "new")
    assert (new.upper, new.values("frank", as_of=0), new.values("frank")) == (2, {"mcsherry"}, {"mcsherry", "zappa"})
    assert files_in(old) == before


# -- crashes ------------------------------------------------------------------------------


FAULT_POINTS = ["batches_written", "state_written", "published"]


@pytest.mark.parametrize("operation", ["append", "compact"])
@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_writer_dying_at_any_point_leaves_the_last_published_version(tmp_path, monkeypatch, operation, point):
    arr = PersistedArrangement(tmp_path)
    run_local(Upsert(), SEED[:3], into=arr, frontier=3)
    published = (arr.upper, arr.since, arr.updates())

    def crash(self, at):
        if at == point:
            raise OSError(f"simulated crash at {at}")

    monkeypatch.setattr(PersistedArrangement, "_fault", crash)
    with pytest.raises(OSError, match="simulated crash"):
        if operation == "append":
            run_local(Upsert(), SEED[3:], into=arr, frontier=6)
        else:
            arr.compact(3)
    monkeypatch.undo()

    reopened = PersistedArrangement.open(tmp_path)
    survived = (reopened.upper, reopened.since, reopened.updates())
    if point == "published":  # the commit happened: the new version is the durable one
        assert survived != published
    else:
        assert survived == published
        assert (arr.upper, arr.since) == published[:2]  # memory did not run ahead of the table

    # retrying completes the work exactly once
    if operation == "append":
        run_local(Upsert(), SEED[3:], into=reopened, frontier=6)
        assert reopened.updates() == run_local(Upsert(), SEED).updates
    else:
        reopened.compact(3)
        assert reopened.since == 3
    assert PersistedArrangement.open(tmp_path).updates() == reopened.updates()
    assert check(tmp_path) == []
    # what the dead writer left behind goes with a vacuum; nothing the table needs does
    reopened.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert check(tmp_path) == []
    live = {name for b in PersistedArrangement.open(tmp_path).files() for name in [b.rsplit("/", 1)[1]]}
    assert {p.name for p in tmp_path.glob("*.parquet")} == live


# -- the waterline survives compaction -------------------------------------------------------


@pytest.mark.parametrize("compact", [False, True])
def test_compaction_never_lowers_the_lateness_waterline(tmp_path, compact):
    machine = UpsertWithLateness(10, value_time=itemgetter(1))
    run_local(machine, [("a", ("x", 100), 1, 0), ("a", None, 2, 1)], into=PersistedArrangement(tmp_path))
    if compact:
        PersistedArrangement.open(tmp_path).compact(3)
    reopened = PersistedArrangement.open(tmp_path)
    result = run_local(machine, [("b", ("z", 20), 3, 2), ("c", ("w", 95), 3, 3)], into=reopened)
    assert [r.event.key for r in result.rejected] == ["b"]  # below the waterline 90, as without compaction
    assert reopened.values("c") == {("w", 95)}


# -- damage -------------------------------------------------------------------------------


def _damage(path, how):
    data = path / PersistedArrangement.open(path).files()[-1].rsplit("/", 1)[1]
    state = sorted((path / "_statemachines").glob("state-*.json"))[-1]
    if how == "missing data file":
        data.unlink()
    elif how == "truncated data file":
        data.write_bytes(data.read_bytes()[: len(data.read_bytes()) // 2])
    elif how == "empty data file":
        data.write_bytes(b"")
    elif how == "missing state file":
        state.unlink()
    elif how == "corrupt state file":
        state.write_text("{not json")
    elif how == "empty state file":
        state.write_text("")
    elif how == "state field missing":
        record = json.loads(state.read_text())
        del record["batches"]
        state.write_text(json.dumps(record))
    elif how == "missing log":
        for item in (path / "_delta_log").iterdir():
            item.unlink()
        (path / "_delta_log").rmdir()
    elif how == "corrupt log entry":
        last = sorted((path / "_delta_log").glob("*.json"))[-1]
        last.write_text("{broken")
    return data, state


DAMAGE = [
    "missing data file", "truncated data file", "empty data file", "missing state file",
    "corrupt state file", "empty state file", "state field missing", "missing log", "corrupt log entry",
]


@pytest.mark.parametrize("how", DAMAGE)
def test_each_damaged_file_gives_one_error_naming_it_and_the_cli_one_line(tmp_path, how):
    arr = PersistedArrangement(tmp_path)
    run_local(Upsert(), SEED[:3], into=arr, frontier=3)
    run_local(Upsert(), SEED[3:], into=arr, frontier=6)
    _damage(tmp_path, how)
    before = files_in(tmp_path)
    with pytest.raises(DamagedArrangement) as raised:
        PersistedArrangement.open(tmp_path).snapshot()
    message = str(raised.value)
    assert "\n" not in message and raised.value.path in message
    assert "restore" in message
    for command in (["show", str(tmp_path)], ["check", str(tmp_path)]):
        done = subprocess.run(
            [sys.executable, "-m", "statemachines.library.cli", *command], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert raised.value.path.rsplit("/", 1)[-1] in done.stderr
    assert files_in(tmp_path) == before  # nothing was touched


def test_check_reads_every_file_of_an_intact_arrangement(tmp_path):
    arr = PersistedArrangement(tmp_path)
    run_local(Upsert(), SEED, into=arr)
    done = subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", "check", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "intact" in done.stdout, done.stderr


@pytest.mark.parametrize("keys, key_type", [(sst.text_keys, pa.string()), (st.integers(-3, 3), pa.int64())], ids=["text", "integer"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_merging_batches_of_disjoint_times_only_sorts_them(keys, key_type, data):
    """The fast merge of a spine's batches (disjoint intervals, since not moving any
    time) gives what consolidating them gives, sorted by key."""
    rows = st.tuples(keys, st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.sampled_from([-1, 1]))
    batches = data.draw(st.lists(st.lists(rows, max_size=12), min_size=1, max_size=4))
    tables = []
    for i, rows in enumerate(batches):  # batch i holds times 10*i .. 10*i + 3
        merged = consolidate(((k, v), 10 * i + t, d) for k, v, t, d in rows)
        tables.append(pa.table({
            "key": pa.array([u.data[0] for u in merged], key_type),
            "value": pa.array([u.data[1] for u in merged], pa.string()),
            "time": pa.array([u.time for u in merged], pa.int64()),
            "diff": pa.array([u.diff for u in merged], pa.int64()),
        }))
    fast, slow = merge_tables(tables, 0, disjoint=True), merge_tables(tables, 0)
    assert fast["key"].to_pylist() == sorted(fast["key"].to_pylist())
    assert sorted(fast.to_pylist(), key=repr) == sorted(slow.to_pylist(), key=repr)


def write_batch(folder, batch):
    """Write consolidated string updates as another writer (Spark) does: one key-sorted file."""
    folder.mkdir()
    pq.write_table(pa.table({
        "key": pa.array([u.data[0] for u in batch], pa.string()),
        "value": pa.array([u.data[1] for u in batch], pa.string()),
        "time": pa.array([u.time for u in batch], pa.int64()),
        "diff": pa.array([u.diff for u in batch], pa.int64()),
    }).sort_by("key"), folder / "part-0.parquet")


def test_batches_another_writer_publishes_merge_to_the_same_updates(tmp_path, monkeypatch):
    """Batches Spark writes and publishes merge file to file (the fast merge), then a
    compaction moves times (the consolidating merge): the updates stay the model's."""
    import statemachines.persisted as persisted
    import statemachines.stored as stored
    from statemachines.persisted import publish_batch

    monkeypatch.setattr(stored, "SMALL_BATCH", 5)
    monkeypatch.setattr(persisted, "SMALL_BATCH", 5)
    used = []
    real = stored.merge_tables
    monkeypatch.setattr(persisted, "merge_tables", lambda *a, **k: used.append(k.get("disjoint")) or real(*a, **k))
    PersistedArrangement(tmp_path).append([(("k0", "v"), 0, 1)], lower=0, upper=1)
    updates = [(("k0", "v"), 0, 1)]
    for step in range(1, 13):
        batch = consolidate(((f"k{(step * 7 + i) % 13}", f"v{step % 3}"), step, 1) for i in range(8))
        write_batch(tmp_path / f"b{step}", batch)
        publish_batch(tmp_path, f"b{step}", step, step + 1, len(batch))
        updates += batch
    assert True in used  # the spine's stored batches merged without consolidating
    assert PersistedArrangement.open(tmp_path).updates() == consolidate(updates)
    PersistedArrangement.open(tmp_path).compact(6)
    assert PersistedArrangement.open(tmp_path).updates() == consolidate((d, max(t, 6), n) for d, t, n in updates)


def test_a_long_stream_rewrites_each_update_a_logarithmic_number_of_times(tmp_path, monkeypatch):
    """Micro-batches each larger than ``SMALL_BATCH``: merging rewrites an update about
    as many times as the stream's length doubles, not once per later micro-batch,
    and the large batches a point read visits stay about log4(updates / SMALL_BATCH)."""
    import statemachines.persisted as persisted
    import statemachines.stored as stored
    from statemachines.persisted import publish_batch

    monkeypatch.setattr(stored, "SMALL_BATCH", 5)
    monkeypatch.setattr(persisted, "SMALL_BATCH", 5)
    rewritten = []

    def merge_tables(*args, **kwargs):
        merged = stored.merge_tables(*args, **kwargs)
        rewritten.append(merged.num_rows)
        return merged

    monkeypatch.setattr(persisted, "merge_tables", merge_tables)
    micro_batches, size, updates, most_large = 120, 8, [], 0
    PersistedArrangement.create(tmp_path)
    for step in range(micro_batches):
        batch = consolidate(((f"k{(step * 7 + i) % 97}", f"v{step % 3}"), step, 1) for i in range(size))
        write_batch(tmp_path / f"b{step}", batch)
        publish_batch(tmp_path, f"b{step}", step or None, step + 1, len(batch), stream={"batch_id": step})
        updates += batch
        most_large = max(most_large, sum(b.count > 5 for b in PersistedArrangement.open(tmp_path).batches))
    assert sum(rewritten) <= 2 * math.log2(micro_batches) * len(updates)
    assert most_large <= math.log(len(updates) / 5, 4) + 1
    assert PersistedArrangement.open(tmp_path).updates() == consolidate(updates)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 9), min_size=1, max_size=8), merge_at=st.sets(st.integers(0, 8)))
def test_batches_published_unmerged_merge_later_into_the_spine_merging_at_once_makes(tmp_path_factory, sizes, merge_at):
    """A stream publishes each micro-batch unmerged and merges the spine while Spark
    computes the next one: the spine ends as merging at once makes it, and every
    version holds the same updates."""
    from statemachines.persisted import publish_batch

    def spine(path):
        return [(b.lower, b.upper, b.count) for b in PersistedArrangement.open(path).batches]

    at_once, later = tmp_path_factory.mktemp("at-once"), tmp_path_factory.mktemp("later")
    updates = []
    for path in (at_once, later):
        PersistedArrangement(path).append([(("k", "v"), 0, 1)], lower=0, upper=1)
    for step, size in enumerate(sizes, start=1):
        batch = consolidate(((f"k{(step * 7 + i) % 13}", f"v{step % 3}"), step, 1) for i in range(size))
        updates += batch
        for path, merge in ((at_once, True), (later, False)):
            write_batch(path / f"b{step}", batch)
            publish_batch(path, f"b{step}", step, step + 1, len(batch), merge=merge)
        assert PersistedArrangement.open(later).updates() == PersistedArrangement.open(at_once).updates()
        if step in merge_at:
            PersistedArrangement.open(later).merge_batches()
            assert PersistedArrangement.open(later).updates() == PersistedArrangement.open(at_once).updates()
    for path in (at_once, later):  # merging at once merges a batch from the next commit on
        PersistedArrangement.open(path).merge_batches()
    assert spine(later) == spine(at_once)
    assert PersistedArrangement.open(later).updates() == consolidate([(("k", "v"), 0, 1), *updates])


@pytest.mark.parametrize("kept_bytes", [None, 0], ids=["kept", "none kept"])
def test_a_merge_takes_what_the_last_merge_wrote_from_memory_not_from_its_file(tmp_path, monkeypatch, kept_bytes):
    """Batches merge again and again into the one the last merge wrote: that table
    stays in memory (up to ``MERGES_KEPT_BYTES``) and is not read back from its file.
    The spine holds the same updates either way."""
    from statemachines import persisted
    from statemachines.persisted import publish_batch

    if kept_bytes is not None:
        monkeypatch.setattr(persisted, "MERGES_KEPT_BYTES", kept_bytes)
    read = []
    original = PersistedArrangement._read_table

    def counted(self, name):
        if self.location.path(name).startswith(str(tmp_path)):  # not another thread's arrangement
            read.append(name)
        return original(self, name)

    monkeypatch.setattr(PersistedArrangement, "_read_table", counted)
    PersistedArrangement.create(tmp_path)
    updates = []
    for step in range(6):
        batch = consolidate(((f"k{(step * 7 + i) % 13}", f"v{step % 3}"), step, 1) for i in range(8))
        write_batch(tmp_path / f"b{step}", batch)
        publish_batch(tmp_path, f"b{step}", step or None, step + 1, len(batch))
        updates += batch
    merged_files = [name for name in read if name.startswith("batch-")]  # the files merges wrote
    assert (merged_files == []) == (kept_bytes is None)
    assert len(PersistedArrangement.open(tmp_path).batches) < 6  # merges happened
    assert PersistedArrangement.open(tmp_path).updates() == consolidate(updates)


def test_expired_log_files_are_deleted_every_few_commits_not_after_each(tmp_path, monkeypatch):
    """Delta's cleanup of expired log files lists the whole log; it runs with every
    ``LOG_CLEANUP_EVERY``-th commit, so a commit's cost does not grow with the log.
    What it deletes (here, with no retention, everything before the last checkpoint)
    leaves the arrangement whole."""
    import statemachines.delta as delta

    monkeypatch.setattr(delta, "LOG_CLEANUP_EVERY", 15)
    arrangement = PersistedArrangement(tmp_path)
    arrangement.append([(("a", "x0"), 0, 1)], lower=0, upper=1)
    DeltaTable(str(tmp_path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    first_logs = []
    for t in range(1, 31):
        arrangement = PersistedArrangement.open(tmp_path)
        arrangement.append([(("a", f"x{t}"), t, 1)], lower=t, upper=t + 1)
        logs = sorted(f for f in (tmp_path / "_delta_log").iterdir() if f.suffix == ".json")
        first_logs.append((arrangement._snapshot.state["sequence"], int(logs[0].stem)))
    assert first_logs[0][1] == 0
    moved = [sequence for (sequence, first), (_, before) in zip(first_logs[1:], first_logs, strict=False) if first != before]
    assert moved == [15, 30]  # the log's first file changes only with a cleanup
    assert PersistedArrangement.open(tmp_path).updates() == consolidate((("a", f"x{t}"), t, 1) for t in range(31))
    first, latest = first_logs[-1][1], DeltaTable(str(tmp_path)).version()
    assert PersistedArrangement.open(tmp_path, version=first).version == first
    with pytest.raises(InvalidArgument, match=rf"no version {first - 1}: .* from {first} to {latest} .*logRetentionDuration") as gone:
        PersistedArrangement.open(tmp_path, version=first - 1)  # not damage: its log entry expired
    assert not isinstance(gone.value, DamagedArrangement)
    with pytest.raises(InvalidArgument, match=rf"no version committed at or before .* holds: version {first}, at "):
        PersistedArrangement.open(tmp_path, version=dt.datetime(2000, 1, 1))


def test_data_files_are_written_in_small_row_groups_without_dictionaries(tmp_path):
    """A point read reads one 1,024-row group; a dictionary per group that small only
    makes the file larger and slower to write."""
    arrangement = PersistedArrangement(tmp_path)
    arrangement.append([((f"k{i:05d}", f"v{i % 7}"), i % 3, 1) for i in range(3000)], lower=0, upper=3)
    files = PersistedArrangement.open(tmp_path).files()
    assert files
    for uri in files:
        metadata = pq.ParquetFile(uri.removeprefix("file://")).metadata
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        assert max(group.num_rows for group in groups) <= 1024
        assert not any(group.column(c).has_dictionary_page for group in groups for c in range(group.num_columns))


@pytest.fixture(scope="module")
def committed_over_time(tmp_path_factory):
    """An arrangement of five appends a few milliseconds apart: its path, each
    version's updates and each commit's time (from the Delta log)."""
    import time

    path = tmp_path_factory.mktemp("over-time") / "arr"
    arrangement = PersistedArrangement(path)
    for t in range(5):
        arrangement.append([((f"k{t % 2}", f"v{t}"), t, 1)], t if t else None, t + 1)
        time.sleep(0.02)
    commits = commit_times(path)
    updates = {v: PersistedArrangement.open(path, version=v).updates() for v in commits}
    return path, updates, commits


@given(offset_ms=st.integers(0, 200), zoned=st.booleans(), as_text=st.booleans())
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_commit_time_opens_the_latest_version_committed_then(committed_over_time, offset_ms, zoned, as_text):
    """As Delta's timestampAsOf: a datetime (naive: UTC) or ISO string opens the latest
    version whose commit time is at or before it; before the first, it is refused."""
    path, updates, commits = committed_over_time
    at_ms = min(commits.values()) - 50 + offset_ms
    moment = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC)
    if zoned:
        moment = moment.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    else:
        moment = moment.replace(tzinfo=None)
    given_as = moment.isoformat() if as_text else moment
    before = [v for v, committed in commits.items() if committed <= at_ms]
    if not before:
        with pytest.raises(InvalidArgument, match="no version committed at or before"):
            PersistedArrangement.open(path, version=given_as)
        return
    opened = PersistedArrangement.open(path, version=given_as)
    assert opened.version == max(before)
    assert opened.updates() == updates[max(before)]
    table = DeltaTable(str(path))
    table.load_as_version(moment)
    assert table.version() == opened.version  # as delta-rs reads the same time


@pytest.mark.parametrize(
    ("version", "message"),
    [(-1, "0 or more"), (True, "0 or more"), (99, "has no version 99: the versions its log holds run from 0 to 4$")],
)
def test_a_version_the_table_cannot_have_is_refused_by_name(committed_over_time, version, message):
    """Not taken for damage (a negative version once said the log was damaged), nor a
    bool for a version."""
    path, _, _ = committed_over_time
    with pytest.raises(InvalidArgument, match=message) as refused:
        PersistedArrangement.open(path, version=version)
    assert not isinstance(refused.value, DamagedArrangement)


def test_a_version_that_is_not_a_time_is_refused(committed_over_time):
    path, _, _ = committed_over_time
    with pytest.raises(InvalidArgument, match="neither a version nor an ISO 8601 time"):
        PersistedArrangement.open(path, version="yesterday")


def test_show_reads_the_version_committed_at_a_time(committed_over_time):
    path, updates, commits = committed_over_time
    version = sorted(commits)[2]
    moment = dt.datetime.fromtimestamp(commits[version] / 1000, dt.UTC).isoformat()
    done = subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", "show", str(path), "--version", moment, "--output", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    at_version = subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", "show", str(path), "--version", str(version), "--output", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.stdout == at_version.stdout and done.stdout.strip()


def test_a_second_writer_losing_the_race_leaves_the_winners_arrangement_intact(tmp_path):
    """Two writers (a mistake) append from the same version: the second's commit is
    refused, and its state file, written before, neither replaces the first's nor
    outlives a vacuum; the arrangement opens as the first writer left it."""
    PersistedArrangement(tmp_path).append([(("k", "v"), 0, 1)], None, 1)
    first, second = PersistedArrangement.open(tmp_path), PersistedArrangement.open(tmp_path)
    first.append([(("k", "w"), 1, 1)], 1, 2)
    with pytest.raises(InvalidArgument, match="another writer committed"):
        second.append([(("k", "z"), 1, 1)], 1, 2)
    reopened = PersistedArrangement.open(tmp_path)
    assert reopened.updates() == first.updates() and reopened.version == first.version
    assert delta_rs_updates(tmp_path) == consolidate(first.updates())
    assert check(tmp_path) == []
    states = len(list((tmp_path / "_statemachines").glob("state-*.json")))
    reopened.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert len(list((tmp_path / "_statemachines").glob("state-*.json"))) == states - 2  # the loser's and sequence 1's
    assert PersistedArrangement.open(tmp_path).updates() == first.updates()


def test_an_arrangement_whose_commits_name_no_attempt_opens_and_continues(tmp_path):
    """Written before state files were named by their commit's attempt: the log holds
    only the sequence transaction and the state file its plain name."""
    arr = PersistedArrangement(tmp_path)
    arr.append([(("k", "v"), 0, 1)], None, 1)
    log = next((tmp_path / "_delta_log").glob("*.json"))
    lines = log.read_text().splitlines()
    log.write_text("\n".join(line for line in lines if '"statemachines.attempt"' not in line) + "\n")
    (state,) = [p for p in (tmp_path / "_statemachines").glob("state-*-*.json")]
    state.rename(state.with_name(state.name.rsplit("-", 1)[0] + ".json"))
    reopened = PersistedArrangement.open(tmp_path)
    assert reopened.updates() == arr.updates()
    reopened.append([(("k", "w"), 1, 1)], 1, 2)
    assert PersistedArrangement.open(tmp_path).updates() == [(("k", "v"), 0, 1), (("k", "w"), 1, 1)]
    assert check(tmp_path) == []


_rejected_events = st.builds(
    Rejected,
    st.builds(
        Event,
        st.one_of(st.none(), st.text(max_size=3), st.integers(-5, 5), st.tuples(st.text(max_size=2), st.integers())),
        st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=True)),
        st.one_of(st.none(), st.integers(-10, 10), st.floats(allow_nan=True)),
        st.one_of(st.none(), st.integers(0, 3)),
    ),
    st.sampled_from(list(Reason)),
    st.text(max_size=10),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_rejected_events, max_size=6), max_size=3))
def test_rejected_events_kept_with_the_arrangement_are_all_read_back(tmp_path_factory, runs):
    """Each run's rejected events, of whatever mixture of kinds, are kept in order:
    a value as it was where its column's values share a type, else as its text."""
    arr = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    arr.append([(("k", 1), 0, 1)], 0, 1)
    for run in runs:
        arr.keep_rejected(rejected_table(run))
    kept = PersistedArrangement(arr.path).rejected()  # a new reader: the notes were committed
    rows = [r for run in runs for r in run]
    assert (kept is None) == (not rows)
    got = kept.to_pylist() if rows else []
    assert [(g["reason"], g["detail"]) for g in got] == [(r.reason.value, r.detail) for r in rows]
    for g, r in zip(got, rows, strict=True):
        for name, value in zip(("key", "symbol", "time", "order"), r.event, strict=True):
            cell = g[name]
            if value is None or isinstance(cell, str):  # None stays None; text is the value's or its text
                assert (cell is None) == (value is None) and (not isinstance(value, str) or cell == value)
            elif isinstance(value, tuple):
                assert tuple(cell.values()) == value
            else:
                assert cell == value or (math.isnan(cell) and math.isnan(value)), (name, value, cell)
    assert PersistedArrangement(arr.path).updates() == [(("k", 1), 0, 1)]  # the data stays as it was
