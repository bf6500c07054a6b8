"""The local runtime with user machines: laws, deadlines, rejected events."""

from __future__ import annotations

import datetime
import math
import pickle
import re
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import (
    Event,
    InvalidArgument,
    LocalRuntime,
    Machine,
    MachineError,
    PersistedArrangement,
    Reason,
    collection_at,
    event_rank,
    is_consolidated,
    run_local,
)
from statemachines.library import Upsert
from tests import strategies as sst
from tests.machines import Fragile, Light, RaisingDeadline, Session, Tags
from tests.models import collection_from_replay, replay


def run_in_steps(machine, events, steps):
    runtime = LocalRuntime(machine)
    runtime.feed(events)
    updates, rejected = [], []
    for frontier in steps:
        step = runtime.advance_to(frontier)
        updates += step.updates
        rejected += step.rejected
    final = runtime.finish()
    return updates + final.updates, rejected + final.rejected


@pytest.mark.parametrize("machine", [Tags(), Light()], ids=repr)
@given(events=st.data())
def test_user_machines_obey_the_laws(machine, events):
    symbols = sst.tag_symbols if isinstance(machine, Tags) else st.none()
    evs = events.draw(sst.events(symbols))
    steps = events.draw(sst.frontier_steps())
    result = run_local(machine, evs)
    assert is_consolidated(result.updates)
    history = replay(machine, evs)
    for time in range(-1, 14):
        accumulated = collection_at(result.updates, time)
        assert set(accumulated) == collection_from_replay(history, time)
        assert set(accumulated.values()) <= {1}
    assert run_in_steps(machine, list(reversed(evs)), steps)[0] == result.updates


def test_initial_values_appear_when_a_key_is_first_touched():
    updates = run_local(Light(), [("hall", None, 1), ("hall", None, 2), ("hall", None, 3)]).updates
    assert [(u.data[1], u.time, u.diff) for u in updates] == [
        ("on", 1, 1),
        ("off", 2, 1),
        ("on", 2, -1),
        ("off", 3, -1),
        ("on", 3, 1),
    ]


def naive_sessions(events, ttl, horizon):
    """Session semantics tick by tick: at each time, expire first, then apply events."""
    by_time = defaultdict(list)
    for e in events:
        by_time[e.time].append(e)
    state, present = {}, {}
    for t in range(horizon):
        for key, (_value, set_at) in list(state.items()):
            if set_at + ttl == t:
                del state[key]
        for e in sorted(by_time[t], key=lambda e: event_rank(e.order, e.symbol)):
            state[e.key] = (e.symbol, t)
        present[t] = {(k, v) for k, v in state.items()}
    return present


@given(sst.events(st.sampled_from(["a", "b"])), st.integers(1, 4), sst.frontier_steps(20))
def test_deadlines_fire_like_a_tick_by_tick_model(events, ttl, steps):
    updates, rejected = run_in_steps(Session(ttl), events, steps)
    assert rejected == []
    assert is_consolidated(updates)
    expected = naive_sessions(events, ttl, horizon=20)
    for t in range(20):
        assert set(collection_at(updates, t)) == expected[t]
    # every session expires once the input is complete
    assert collection_at(updates, 10**6) == {}


def test_deadline_fires_before_the_events_at_its_time():
    # set at 0, expires at 2; a new value at 2 is applied after the expiry
    updates = run_local(Session(2), [("k", "a", 0), ("k", "b", 2)], frontier=3).updates
    assert [(u.data[1], u.time, u.diff) for u in updates] == [
        (("a", 0), 0, 1),
        (("a", 0), 2, -1),
        (("b", 2), 2, 1),
    ]


def test_deadlines_wait_for_the_frontier():
    runtime = LocalRuntime(Session(5))
    runtime.feed([("k", "a", 0)])
    assert [u.diff for u in runtime.advance_to(5).updates] == [1]  # expiry at 5 not final
    assert runtime.stats()["armed_deadlines"] == 1
    assert [(u.time, u.diff) for u in runtime.advance_to(6).updates] == [(5, -1)]
    assert runtime.stats() == {
        "live_keys": 0, "buffered_key_times": 0, "armed_deadlines": 0, "evicted_keys": 0,
        "live_values": 0,
    }


def test_a_deadline_that_does_not_move_forward_is_an_error():
    class Stuck(Session):
        def deadline(self, key, values):
            ((_, set_at),) = values
            return set_at

    with pytest.raises(MachineError, match="strictly after"):
        run_local(Stuck(), [("k", "a", 0)])


def test_transition_failure_rejects_that_event_only():
    events = [("k", "a", 0), ("k", "boom", 1), ("k", "b", 2), ("j", "boom", 1), ("j", "c", 1, 5)]
    result = run_local(Fragile(), events)
    assert sorted((r.event.key, r.reason) for r in result.rejected) == [
        ("j", Reason.TRANSITION_FAILED),
        ("k", Reason.TRANSITION_FAILED),
    ]
    assert "cannot handle boom" in result.rejected[0].detail
    kept = run_local(Fragile(), [e for e in events if e[1] != "boom"]).updates
    assert result.updates == kept


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ((None, "a", 1), Reason.NULL_KEY),
        (("k", "a", None), Reason.NULL_TIME),
        (("k", "a", "noon"), Reason.BAD_TIME),
        (("k", "a", True), Reason.BAD_TIME),
        (("k", "a"), Reason.MALFORMED),
        ("k", Reason.MALFORMED),
        ((["un", "hashable"], "a", 1), Reason.BAD_KEY),
    ],
)
def test_bad_events_are_rejected_with_a_reason_and_the_rest_runs(event, reason):
    good = [("k", ("add", "x"), 1), ("j", ("add", "y"), 2)]
    result = run_local(Tags(), [*good, event])
    well_formed = isinstance(event, tuple) and len(event) == 3
    assert [(r.event, r.reason) for r in result.rejected] == [
        (Event(*event) if well_formed else event, reason)
    ]
    assert result.updates == run_local(Tags(), good).updates


def test_events_behind_the_frontier_are_rejected_as_late():
    runtime = LocalRuntime(Tags())
    runtime.feed([("k", ("add", "x"), 3)])
    runtime.advance_to(5)
    runtime.feed([("k", ("add", "y"), 4), ("k", ("add", "z"), 5)])
    step = runtime.finish()
    assert [(r.event.time, r.reason) for r in step.rejected] == [(4, Reason.LATE)]
    assert [u.data for u in step.updates] == [("k", "z")]
    runtime.feed([("k", ("add", "w"), 9)])
    assert runtime.stats()["buffered_key_times"] == 0


def test_frontiers_only_advance_and_keep_their_kind():
    runtime = LocalRuntime(Tags())
    runtime.advance_to(5)
    with pytest.raises(InvalidArgument, match="below the current frontier"):
        runtime.advance_to(4)
    with pytest.raises(InvalidArgument, match="kind"):
        runtime.advance_to("tomorrow")
    with pytest.raises(InvalidArgument, match="frontier nan is not a time"):  # it would never compare
        runtime.advance_to(float("nan"))
    assert runtime.frontier == 5 and runtime.advance_to(6).updates == []
    with pytest.raises(InvalidArgument, match="frontier nan is not a time"):
        run_local(Tags(), [("k", ("add", "x"), 1)], frontier=float("nan"))


def test_pending_events_stay_buffered_until_final():
    events = [Event("k", ("add", "x"), 1), Event("k", ("add", "y"), 7)]
    result = run_local(Tags(), events, frontier=5)
    assert [u.data for u in result.updates] == [("k", "x")]
    assert result.pending == [events[1]]


def test_mixed_key_types_still_sort_deterministically():
    result = run_local(Tags(), [(1, ("add", "x"), 0), ("a", ("add", "x"), 0)])
    assert [u.data[0] for u in result.updates] == [1, "a"]


@pytest.mark.parametrize("machine", [Tags(), Light(), Session(4)], ids=repr)
def test_machines_are_picklable(machine):
    copy = pickle.loads(pickle.dumps(machine))
    assert copy == machine
    assert copy.spec == machine.spec


def as_format_1(state):
    """A checkpoint as the previous version wrote it: no format, no order kind."""
    return {k: v for k, v in state.items() if k not in ("format", "order_kind")}


def run_resumed(machine, chunks, steps, older=False):
    """Feed ``chunks`` one per frontier step, through a pickled checkpoint each time.

    With ``older`` the checkpoints are written as the previous format (1)."""
    state = None
    updates, rejected = [], []
    for chunk, frontier in zip(chunks, steps, strict=True):
        runtime = LocalRuntime(machine) if state is None else LocalRuntime.restore(machine, pickle.loads(state))
        runtime.feed(chunk)
        step = runtime.advance_to(frontier)
        updates += step.updates
        rejected += step.rejected
        checkpoint = runtime.checkpoint()
        state = pickle.dumps(as_format_1(checkpoint) if older else checkpoint)
    final = LocalRuntime.restore(machine, pickle.loads(state)).finish()
    return updates + final.updates, rejected + final.rejected


@pytest.mark.parametrize("older", [False, True], ids=["format 2", "format 1"])
@pytest.mark.parametrize("machine", [Tags(), Session(3)], ids=repr)
@given(data=st.data())
def test_a_restored_checkpoint_continues_exactly(machine, older, data):
    symbols = sst.tag_symbols if isinstance(machine, Tags) else st.sampled_from(["a", "b"])
    evs = data.draw(sst.events(symbols))
    steps = data.draw(sst.frontier_steps().filter(bool))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(evs)), min_size=len(steps) - 1, max_size=len(steps) - 1)))
    chunks = [evs[a:b] for a, b in zip([0, *cuts], [*cuts, len(evs)], strict=True)]
    uninterrupted = LocalRuntime(machine)
    expected, expected_rejected = [], []
    for chunk, frontier in zip(chunks, steps, strict=True):
        uninterrupted.feed(chunk)
        step = uninterrupted.advance_to(frontier)
        expected += step.updates
        expected_rejected += step.rejected
    final = uninterrupted.finish()
    updates, rejected = run_resumed(machine, chunks, steps, older)
    assert updates == expected + final.updates
    assert sorted(rejected, key=repr) == sorted(expected_rejected + final.rejected, key=repr)


def test_a_checkpoint_says_its_format_and_an_unknown_one_is_refused_with_the_remedy():
    runtime = LocalRuntime(Tags())
    runtime.feed([("k", ("add", "x"), 3)])
    state = runtime.checkpoint()
    assert state["format"] == 2
    for unreadable in ({**state, "format": 99}, ["not", "a", "checkpoint"]):
        with pytest.raises(InvalidArgument, match="new checkpoint directory continues from the arrangement"):
            LocalRuntime.restore(Tags(), unreadable)


@given(sst.events(st.sampled_from(["a", "b"])), sst.frontier_steps(20))
def test_nothing_happens_until_the_frontier_passes_the_earliest_waiting_time(events, steps):
    runtime = LocalRuntime(Session(3))
    runtime.feed(events)
    for frontier in steps:
        waiting = runtime.earliest_waiting()
        step = runtime.advance_to(frontier)
        if waiting is None or frontier <= waiting:
            assert step.updates == []
    waiting = runtime.earliest_waiting()
    assert (waiting is None) == (runtime.finish().updates == [])


def test_a_seeded_runtime_continues_from_the_given_values():
    events = [("k", "a", 0), ("j", "b", 1), ("k", "c", 4), ("j", "d", 6)]
    first = run_local(Session(3), events[:2], frontier=2)
    seeded = LocalRuntime(Session(3))
    seeded.seed([u.data for u in first.updates], frontier=2)
    seeded.feed([*events[2:], ("late", "x", 1)])
    rest = seeded.finish()
    assert first.updates + rest.updates == run_local(Session(3), events).updates
    assert [(r.event.key, r.reason) for r in rest.rejected] == [("late", Reason.LATE)]
    with pytest.raises(InvalidArgument, match="fresh"):
        seeded.seed([], frontier=9)


def test_refused_events_can_be_taken_before_the_next_step():
    runtime = LocalRuntime(Session(3))
    runtime.feed([("k", "a", 0), (None, "b", 1)])
    assert [r.reason for r in runtime.take_rejected()] == [Reason.NULL_KEY]
    step = runtime.advance_to(2)
    assert step.rejected == [] and [u.diff for u in step.updates] == [1]


def test_a_step_hands_the_machine_its_events_symbols_at_once_before_their_transitions():
    class Prepared(Machine):
        def __init__(self):
            self.batches, self.seen = [], []

        def prepare_symbols(self, symbols, symbol_type):
            self.batches.append((sorted(symbols), symbol_type))

        def transition(self, key, values, symbol, time):
            self.seen.append((len(self.batches), symbol))
            return frozenset({symbol})

    machine = Prepared()
    runtime = LocalRuntime(machine)
    runtime.feed([("a", "x", 1), ("b", "y", 2), ("a", "z", 5)])
    runtime.advance_to(3)
    runtime.finish()
    assert machine.batches == [(["x", "y"], None), (["z"], None)]
    assert sorted(machine.seen) == [(1, "x"), (1, "y"), (2, "z")]  # each after its batch was prepared


@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["x", "y", None]), st.integers(0, 5), st.integers(0, 2)),
        max_size=12,
    ),
    with_order=st.booleans(),
)
def test_a_table_of_events_runs_as_its_rows(rows, with_order):
    """A pyarrow table or batch, or a pandas DataFrame, with columns key, symbol, time
    (and order) runs as the tuples of its rows; other columns are not read."""
    import pyarrow as pa

    tuples = [row if with_order else row[:3] for row in rows]
    columns = {name: [row[i] for row in tuples] for i, name in enumerate(["key", "symbol", "time", "order"][: 4 if with_order else 3])}
    columns["note"] = ["ignored"] * len(rows)
    table = pa.table(columns, schema=pa.schema(
        [(name, pa.int64() if name in ("time", "order") else pa.string()) for name in columns]
    ))
    expected = run_local(Upsert(), tuples)
    for given_as in (table, table.to_batches()[0] if rows else table, table.to_pandas()):
        got = run_local(Upsert(), given_as)
        assert (got.updates, [r.reason for r in got.rejected]) == (expected.updates, [r.reason for r in expected.rejected])


@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from(["x", "y", None, math.nan]),  # a missing text cell is NaN in pandas (read_csv's)
            st.sampled_from([1.5, math.nan]),
            st.integers(0, 4),
        ),
        max_size=12,
    ),
    categories=st.booleans(),
)
def test_a_dataframe_runs_as_arrow_and_spark_read_it(rows, categories):
    """A DataFrame with missing text cells (NaN in a column of objects or
    categories) runs as its Arrow table: the cell is None, a delete for an upsert.
    A float column's NaN is a reading, as in the tuples the frame was made of."""
    import pandas as pd
    import pyarrow as pa

    frame = pd.DataFrame(rows, columns=["key", "symbol", "reading", "time"])
    frame["symbol"] = frame["symbol"].astype("category" if categories else object)  # (all NaN: float64)
    texts = frame[["key", "symbol", "time"]]
    as_arrow = run_local(Upsert(), pa.Table.from_pandas(texts, preserve_index=False))
    assert run_local(Upsert(), texts).updates == as_arrow.updates
    readings = frame[["key", "reading", "time"]].rename(columns={"reading": "symbol"})
    assert run_local(Upsert(), readings).updates == run_local(Upsert(), [(k, r, t) for k, _, r, t in rows]).updates


def test_a_table_without_the_event_columns_is_refused():
    import pyarrow as pa

    with pytest.raises(InvalidArgument, match="lacks symbol, time .it has key, value, ts."):
        run_local(Upsert(), pa.table({"key": ["a"], "value": ["x"], "ts": [1]}))


def test_struct_and_list_cells_of_a_table_run_as_tuples():
    """As Spark's rows hand them to a machine: a struct cell is the tuple of its fields,
    a list cell a tuple."""
    import pyarrow as pa

    rows = [(("eu", 1), {"name": "Ada", "tags": ["x"]}, 1), (("eu", 1), {"name": None, "tags": []}, 2), (("us", 2), None, 3)]
    table = pa.table({
        "key": [{"region": k[0], "id": k[1]} for k, _, _ in rows],
        "symbol": [s for _, s, _ in rows],
        "time": [t for _, _, t in rows],
    })
    as_tuples = [(k, None if s is None else (s["name"], tuple(s["tags"])), t) for k, s, t in rows]
    for given_as in (table, table.to_pandas()):
        got = run_local(Upsert(), given_as)
        assert (got.updates, got.rejected) == (run_local(Upsert(), as_tuples).updates, [])


class _RaisingOnDeadline(Session):
    def on_deadline(self, key, values, time):
        raise ValueError("cannot expire")


@pytest.mark.parametrize(
    "machine, says",
    [
        (RaisingDeadline(), "RaisingDeadline.deadline failed for key 'bad': ValueError: no clock"),
        (_RaisingOnDeadline(), "_RaisingOnDeadline.on_deadline failed for key 'ok' at time 4: ValueError: cannot expire"),
    ],
)
def test_a_deadline_hook_that_raises_stops_the_run_naming_the_machine_and_key(machine, says):
    """A deadline cannot be rejected as an event can: the run stops with a MachineError."""
    with pytest.raises(MachineError, match=re.escape(says)):
        run_local(machine, [("ok", "x", 1), ("bad", "y", 2)])


class _Returning(Session):
    def __init__(self, due):
        super().__init__()
        self.due = due

    def deadline(self, key, values):
        return self.due if key == "bad" else super().deadline(key, values)


@pytest.mark.parametrize(
    "due, says",
    [
        (float("nan"), "returned nan for key 'bad'; a deadline is None or a finite time"),
        (float("inf"), "returned inf for key 'bad'; a deadline is None or a finite time"),
        ("soon", "returned 'soon' for key 'bad'; a deadline is None or a finite time"),
        (True, "returned True for key 'bad'; a deadline is None or a finite time"),
        (datetime.date(2024, 1, 1), "after a change at time 2: a deadline is a time of the events' kind"),
    ],
    ids=repr,
)
def test_a_deadline_that_is_no_finite_time_of_the_events_kind_stops_the_run(due, says):
    """A NaN deadline made an update at time NaN; text or a date crashed the run
    comparing it with the event times."""
    with pytest.raises(MachineError, match=re.escape(says)):
        run_local(_Returning(due), [("ok", "x", 1), ("bad", "y", 2), ("ok", "z", 10)])



@given(events=sst.events(key=sst.text_keys, symbols=sst.text_values, max_size=20), cut=sst.times)
@settings(max_examples=25)
def test_into_a_path_is_the_persisted_arrangement_there_created_then_continued(tmp_path_factory, events, cut):
    by_path, by_object = (tmp_path_factory.mktemp("into") / "arrangement" for _ in range(2))
    for part, path in (([e for e in events if e.time < cut], str(by_path)), ([e for e in events if e.time >= cut], by_path)):
        given_a_path = run_local(Upsert(), part, into=path)
        given_an_object = run_local(Upsert(), part, into=PersistedArrangement(by_object))
        assert (given_a_path.updates, given_a_path.rejected) == (given_an_object.updates, given_an_object.rejected)
    kept = PersistedArrangement.open(by_path)
    assert kept.updates() == PersistedArrangement.open(by_object).updates()
    assert sorted(kept.updates()) == sorted(run_local(Upsert(), events).updates)


def test_into_something_not_an_arrangement_is_refused_saying_what_it_takes():
    with pytest.raises(InvalidArgument, match="into is an Arrangement or the path of a persisted one, not dict"):
        run_local(Upsert(), [("k", 1, 0)], into={})
