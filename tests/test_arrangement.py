"""Arrangements in use: feedback runs, compaction, crashes, history, file format."""

from __future__ import annotations

import datetime
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemachines import (
    Arrangement,
    HistoryRow,
    InvalidArgument,
    PersistedArrangement,
    Reason,
    run_local,
)
from statemachines.library import Upsert
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
    symbols = {Upsert: sst.text_values, Tags: sst.tag_symbols, Session: st.sampled_from("ab")}
    events = data.draw(sst.events(symbols[type(machine)], key=sst.text_keys))
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


@pytest.mark.parametrize("persisted", [False, True], ids=["memory", "persisted"])
@pytest.mark.parametrize("bad", [float("nan"), "3", datetime.date(2024, 1, 1)], ids=repr)
def test_a_time_argument_that_is_no_time_of_the_arrangements_kind_is_refused(tmp_path, persisted, bad):
    """NaN compares with no time: read as of it, an arrangement would show nothing, and
    compacted to it, its since would never move again."""
    arr = PersistedArrangement(tmp_path) if persisted else Arrangement()
    run_local(Upsert(), [("k", "a", 1), ("k", "b", 5)], into=arr)
    before = (arr.since, arr.snapshot(), arr.changes())
    reads = [
        lambda: arr.snapshot(bad), lambda: arr.get("k", bad), lambda: arr.changes(bad), lambda: arr.changes(0, bad),
        lambda: arr.reader(bad), lambda: arr.compact(bad), lambda: arr.advance_since(bad),
    ]
    for read in reads:
        with pytest.raises(InvalidArgument, match=f"at {re.escape(repr(bad))}: it is not a time of the arrangement's kind"):
            read()
    assert (arr.since, arr.snapshot(), arr.changes()) == before
    assert arr.compact(3) == 3 and arr.snapshot(5) == [(("k", "b"), 1)]


def test_a_dropped_reader_releases_its_hold():
    arr = Arrangement()
    arr.append([(("k", "v"), 0, 1)], lower=None, upper=5)
    reader = arr.reader(since=0)
    assert arr.compact(5) == 0
    del reader
    assert arr.compact(5) == 5


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


@pytest.mark.parametrize("diff", [1.5, float("nan"), True, "1", None], ids=repr)
@pytest.mark.parametrize("persisted", [False, True], ids=["in memory", "persisted"])
def test_an_update_whose_diff_is_no_integer_is_refused_and_nothing_is_appended(tmp_path, persisted, diff):
    """A fractional diff was kept (and stored), NaN or True kept in memory: refused
    now, naming the update, and the arrangement stays as it was."""
    arrangement = PersistedArrangement.create(tmp_path / "a") if persisted else Arrangement()
    arrangement.append([(("a", "x"), 0, 1)], None, 1)
    with pytest.raises(InvalidArgument, match=re.escape(f"update ('b', 'y') at time 1 has diff {diff!r}; a diff is an integer")):
        arrangement.append([(("a", "x"), 1, -1), (("b", "y"), 1, diff)], 1, 2)
    assert arrangement.upper == 1 and arrangement.updates() == [(("a", "x"), 0, 1)]
    arrangement.append([(("a", "x"), 1, -1)], 1, 2)  # the batch, well formed, appends
    assert arrangement.snapshot() == []


@pytest.mark.parametrize(
    "batch, says",
    [
        (([], None, float("nan")), "cannot append a batch at nan: it is not a time"),
        (([], None, "z"), "cannot append a batch at 'z': it is not a time"),
        (([], 1, datetime.date(2024, 1, 1)), "cannot append a batch at datetime.date(2024, 1, 1): it is not a time of the arrangement's kind (number)"),
        (([(("b", "y"), datetime.date(2024, 1, 1), 1)], 1, 2), "update ('b', 'y') at time datetime.date(2024, 1, 1) lies outside its batch [1, 2)"),
    ],
    ids=["nan upper", "text upper", "upper of another kind", "update of another kind"],
)
def test_a_batch_bound_or_update_time_that_is_no_time_of_the_arrangements_kind_is_refused(batch, says):
    """A NaN upper was kept (no batch could follow it); other kinds failed comparing."""
    arrangement = Arrangement()
    arrangement.append([(("a", "x"), 0, 1)], None, 1)
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        arrangement.append(*batch)
    assert arrangement.upper == 1 and arrangement.updates() == [(("a", "x"), 0, 1)]
