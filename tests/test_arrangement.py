"""Arrangements in use: feedback runs, compaction, crashes, history, file format."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from library import Upsert
from statemachines import (
    Arrangement,
    HistoryRow,
    PersistedArrangement,
    Reason,
    run_local,
)
from tests import strategies as sst
from tests.machines import Session, Tags

SEED = [("frank", v, t) for t, v in enumerate(["mcsherry", "zappa", None, "oz", "oz", None])]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(
    machine=st.sampled_from([Upsert(), Tags(), Session(3)]),
    data=st.data(),
    cuts=st.lists(st.integers(1, 13), max_size=4),
)
def test_runs_split_over_time_ranges_with_reopens_equal_one_run(tmp_path_factory, machine, data, cuts):
    symbols = {Upsert: sst.upsert_values, Tags: sst.tag_symbols, Session: st.sampled_from("ab")}
    events = data.draw(sst.events(symbols[type(machine)]))
    path = tmp_path_factory.mktemp("arr")
    whole = Arrangement()
    run_local(machine, events, into=whole, frontier=20)

    bounds = sorted(set(cuts)) + [20]
    lower = None
    for upper in bounds:
        arr = PersistedArrangement(path)  # a fresh process each time
        chunk = [e for e in events if (lower is None or e.time >= lower) and e.time < upper]
        result = run_local(machine, chunk, into=arr, frontier=upper)
        assert result.rejected == []
        lower = upper
    assert PersistedArrangement(path).updates() == whole.updates()


def test_events_below_the_arrangement_upper_are_late():
    arr = Arrangement()
    run_local(Upsert(), SEED[:3], into=arr, frontier=3)
    result = run_local(Upsert(), [("frank", "late", 2), ("frank", "oz", 3)], into=arr, frontier=4)
    assert [(r.event.time, r.reason) for r in result.rejected] == [(2, Reason.LATE)]
    assert arr.values("frank") == {"oz"}


def test_feedback_reads_prior_values_from_the_arrangement():
    arr = Arrangement()
    run_local(Upsert(), [("k", "a", 0)], into=arr)
    # the second run knows nothing but the arrangement: it must retract "a"
    second = run_local(Upsert(), [("k", "b", 5)], into=arr)
    assert [(u.data, u.time, u.diff) for u in second.updates] == [
        (("k", "a"), 5, -1),
        (("k", "b"), 5, 1),
    ]
    assert arr.upper == 6


def test_deadlines_survive_a_restart_through_the_arrangement(tmp_path):
    run_local(Session(ttl=4), [("k", "a", 1)], into=PersistedArrangement(tmp_path))
    reopened = PersistedArrangement(tmp_path)
    result = run_local(Session(ttl=4), [], into=reopened, frontier=10)
    assert [(u.time, u.diff) for u in result.updates] == [(5, -1)]


def test_compaction_to_upper_stores_only_live_pairs_while_a_reader_keeps_history(tmp_path):
    arr = PersistedArrangement(tmp_path)
    events = [(k, f"v{t % 7}", t) for t in range(200) for k in range(5)]
    events += [(k, None, 200) for k in range(2)]  # two keys end deleted
    run_local(Upsert(), events, into=arr)
    history_before = list(arr.history())
    reader = arr.reader(since=0)
    assert arr.compact(arr.upper) == 0  # the reader holds compaction back
    assert list(arr.history()) == history_before
    assert arr.get(3, as_of=10) == {"v3": 1}

    reader.release()
    assert arr.compact(arr.upper) == arr.upper
    live = arr.snapshot()
    assert arr.stored_updates() == len(live) == 3
    assert PersistedArrangement(tmp_path).stored_updates() == 3
    assert len(arr.files()) == 1


def test_a_dropped_reader_releases_its_hold():
    arr = Arrangement()
    arr.append([(("k", "v"), 0, 1)], lower=None, upper=5)
    reader = arr.reader(since=0)
    assert arr.compact(5) == 0
    del reader
    assert arr.compact(5) == 5


FAULT_POINTS = ["batches_written", "manifest_written", "published"]


@pytest.mark.parametrize("operation", ["append", "compact"])
@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_writer_dying_at_any_point_leaves_the_last_published_state(tmp_path, monkeypatch, operation, point):
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

    reopened = PersistedArrangement(tmp_path)
    survived = (reopened.upper, reopened.since, reopened.updates())
    if point == "published":  # the rename happened: the new state is the durable one
        assert survived != published
    else:
        assert survived == published
        assert (arr.upper, arr.since) == published[:2]  # memory did not run ahead of disk

    # retrying completes the work exactly once
    if operation == "append":
        run_local(Upsert(), SEED[3:], into=reopened, frontier=6)
        assert reopened.updates() == run_local(Upsert(), SEED).updates
    else:
        reopened.compact(3)
        assert reopened.since == 3
    again = PersistedArrangement(tmp_path)
    assert again.updates() == reopened.updates()
    # the next write removes whatever the dead writer left behind
    again.append([], lower=again.upper, upper=again.upper + 1)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"manifest.json", *(p.name for p in again.files())}


def test_a_replayed_append_is_a_no_op_on_disk(tmp_path):
    arr = PersistedArrangement(tmp_path)
    batch = [(("k", "v"), 1, 1)]
    assert arr.append(batch, lower=None, upper=2) is True
    manifest = (tmp_path / "manifest.json").read_text()
    assert PersistedArrangement(tmp_path).append(batch, lower=None, upper=2) is False
    assert (tmp_path / "manifest.json").read_text() == manifest


def test_history_of_the_seed_example_is_the_hand_written_scd2():
    arr = Arrangement()
    run_local(Upsert(), SEED, into=arr)
    assert list(arr.history()) == [
        HistoryRow("frank", "mcsherry", 0, 1),
        HistoryRow("frank", "zappa", 1, 2),
        HistoryRow("frank", "oz", 3, 5),
    ]
    run_local(Upsert(), [("frank", "zappa", 9)], into=arr)
    assert list(arr.history())[-1] == HistoryRow("frank", "zappa", 9, None)


def test_batches_are_typed_parquet_tables(tmp_path):
    arr = PersistedArrangement(tmp_path)
    t0 = dt.datetime(2026, 1, 1, 12, 0)
    events = [("ann", 30, t0), ("bob", 41, t0 + dt.timedelta(seconds=5))]
    run_local(Upsert(), events, into=arr)
    (path,) = arr.files()
    table = pq.read_table(path)
    assert str(table.schema.field("key").type) == "string"
    assert str(table.schema.field("value").type) == "int64"
    assert str(table.schema.field("time").type).startswith("timestamp")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["upper"] == {"datetime": "2026-01-01T12:00:05.000001"}
    assert PersistedArrangement(tmp_path).values("bob") == {41}


def test_values_arrow_cannot_hold_exactly_are_pickled(tmp_path):
    arr = PersistedArrangement(tmp_path)
    run_local(Tags(), [(("composite", 1), ("add", ("a", 2)), 0)], into=arr)
    assert PersistedArrangement(tmp_path).values(("composite", 1)) == {("a", 2)}


def snapshot_of_files(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_directory_with_files_but_no_manifest_is_refused_and_left_untouched(tmp_path):
    from statemachines import InvalidArgument

    theirs = tmp_path / "theirs"
    (theirs / "batch-keep").mkdir(parents=True)
    (theirs / "batch-keep" / "part.parquet").write_bytes(b"someone else's data")
    (theirs / "pending-notes.txt").write_text("mine")
    before = snapshot_of_files(theirs)
    with pytest.raises(InvalidArgument, match="holds files but no arrangement"):
        PersistedArrangement(theirs)
    assert snapshot_of_files(theirs) == before


def test_an_arrangement_whose_manifest_was_lost_is_refused_not_emptied(tmp_path):
    from statemachines import InvalidArgument

    arr = PersistedArrangement(tmp_path / "arr")
    arr.append([(("k", "v"), 0, 1)], lower=None, upper=1)
    (tmp_path / "arr" / "manifest.json").unlink()
    before = snapshot_of_files(tmp_path / "arr")
    assert any(name.name.startswith("batch-") for name in before)
    with pytest.raises(InvalidArgument, match="restore it from a backup"):
        PersistedArrangement(tmp_path / "arr")
    assert snapshot_of_files(tmp_path / "arr") == before


def test_a_creation_that_died_before_publishing_is_created_again(tmp_path):
    (tmp_path / "arr").mkdir()
    (tmp_path / "arr" / "manifest.json.0123abcd.tmp").write_text("{")  # staged, never renamed
    arr = PersistedArrangement(tmp_path / "arr")
    assert arr.upper is None and (tmp_path / "arr" / "manifest.json").exists()
