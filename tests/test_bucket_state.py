"""A bucket's streaming state in parts: micro-batch by micro-batch, it does what one
LocalRuntime over all its keys does, while reading and rewriting only the keys due."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import LocalRuntime
from statemachines.errors import MachineError
from statemachines.library import Detector, Pattern, Upsert
from statemachines.spark import bucket_state
from statemachines.spark.bucket_state import BucketState, BucketTypes, advance
from statemachines.spark.clock import CLOCK_SHIFT_MS
from statemachines.updates import sort_updates
from tests import strategies as sst
from tests.machines import RaisingDeadline, Session, Tags

TYPES = {
    "upsert": BucketTypes(pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64()),
    "tags": BucketTypes(
        pa.int64(), pa.string(), pa.struct([("op", pa.string()), ("tag", pa.string())]), pa.int64(), pa.int64()
    ),
    "session": BucketTypes(
        pa.string(), pa.struct([("v", pa.string()), ("at", pa.int64())]), pa.string(), pa.int64(), pa.int64()
    ),
}
MACHINES = {"upsert": Upsert(), "tags": Tags(), "session": Session(3)}
SYMBOLS = {"upsert": sst.text_values, "tags": sst.tag_symbols, "session": st.sampled_from(["a", "b"])}
KEYS = {"upsert": sst.text_keys, "tags": st.integers(0, 5), "session": sst.text_keys}


def watermark(frontier):
    return frontier + CLOCK_SHIFT_MS  # a number time's frontier, on Spark's clock


def stored_round_trip(state, stored):
    """Keep what the state changed, as Spark's state store would, and read it back."""
    stored.update(state.parts())
    return BucketState.decode(state.types, stored)


def normal(updates, rejected):
    return sort_updates(list(updates)), sorted((repr(r.event), r.reason.value) for r in rejected)


def run_both(name, batches, frontiers, merge_at=None):
    machine, types = MACHINES[name], TYPES[name]
    reference = LocalRuntime(machine)
    state, stored = BucketState.fresh(types), {}
    for events, frontier in zip(batches, frontiers, strict=True):
        if frontier is not None and (reference.frontier is None or frontier > reference.frontier):
            step = reference.advance_to(frontier)
            expected_updates, expected_rejected = step.updates, list(step.rejected)
        else:
            expected_updates, expected_rejected = [], []
        reference.feed(events)
        expected_rejected += reference.take_rejected()
        w = watermark(frontier) if frontier is not None else 0
        updates, rejected, _ = advance(state, machine, events, w, "number")
        assert normal(updates, rejected) == normal(expected_updates, expected_rejected)
        state = stored_round_trip(state, stored)
        live = {key for key, vs in reference.checkpoint()["values"].items() if vs}
        assert len(state) == len(live)
        waiting = {(e.key, e.time) for e in reference.pending_events()}  # same-time events may be reduced
        assert set(zip(state.pending["key"].to_pylist(), state.pending["time"].to_pylist(), strict=True)) == waiting
    return state


micro_batches = st.lists(st.tuples(st.integers(0, 12), st.none() | st.integers(0, 14)), min_size=1, max_size=6)


@pytest.mark.parametrize("name", sorted(MACHINES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_micro_batches_over_the_parts_equal_one_runtime_over_every_key(name, data):
    """Also with ``recent`` merged into ``base`` at every change (the merge is exercised)."""
    events = data.draw(sst.events(SYMBOLS[name], key=KEYS[name], max_size=30))
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=5).map(sorted))
    frontiers = sorted(data.draw(st.lists(st.none() | st.integers(0, 15), min_size=len(cuts) + 1, max_size=len(cuts) + 1)), key=lambda f: -1 if f is None else f)
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]
    with pytest.MonkeyPatch.context() as patch:
        if data.draw(st.booleans()):
            patch.setattr(bucket_state, "MERGE_AT_LEAST", 0)
        run_both(name, batches, frontiers)


def test_a_micro_batch_reads_and_rewrites_only_the_keys_it_touches(monkeypatch):
    """Many live keys, one event: the base is not rewritten, recent holds one key."""
    monkeypatch.setattr(bucket_state, "MERGE_AT_LEAST", 10)
    pairs = pa.table({"key": [f"k{i}" for i in range(1000)], "value": [f"v{i}" for i in range(1000)]})
    state = BucketState.seeded(TYPES["upsert"], Upsert(), pairs, 0)
    stored = {}
    state = stored_round_trip(state, stored)
    advance(state, Upsert(), [("k7", "new", 5)], watermark(1), "number")
    advance(state, Upsert(), [], watermark(6), "number")  # the event at 5 applies
    assert sorted(state.parts()) == ["pending", "recent", "record"]  # not the base
    assert state.recent.num_rows == 1 and state.base.num_rows == 1000
    assert state.values(["k7", "k8"]) == {"k7": frozenset({"new"}), "k8": frozenset({"v8"})}


def test_deadlines_wake_their_keys_without_events():
    state = BucketState.fresh(TYPES["session"])
    advance(state, Session(3), [("a", "x", 1), ("b", "y", 4)], 0, "number", now_ms=1_000)
    updates, _, arrived = advance(state, Session(3), [], watermark(5), "number", now_ms=2_000)  # a's value set at 1 ends at 4
    assert arrived == 1_000  # the events it applied were taken at 1,000 ms
    assert [(u.data[0], u.time, u.diff) for u in updates] == [("a", 1, 1), ("a", 4, -1), ("b", 4, 1)]
    assert state.earliest_wake() == watermark(8)  # b, set at 4, ends at 7: due once the frontier passes 7
    assert state.due_keys(watermark(7)) == [] and state.due_keys(watermark(8)) == ["b"]


def test_a_bucket_of_the_earlier_format_is_read():
    """The state of versions that kept one pickled runtime per bucket becomes the parts."""
    runtime = LocalRuntime(Detector(Pattern.begin("a").where(lambda s: s == "a").followed_by("b").where(lambda s: s == "b").within(5)))
    runtime.feed([("k", "a", 1), ("k", "b", 9)])
    runtime.advance_to(3)
    checkpoint = pickle.loads(pickle.dumps(runtime.checkpoint()))
    symbol, time = pa.string(), pa.int64()
    types = BucketTypes(pa.string(), runtime.machine.value_type(symbol, time), symbol, time, pa.int64())
    state = BucketState.of_runtime(types, runtime.machine, checkpoint)
    expected = runtime.advance_to(10)
    updates, _, _ = advance(state, runtime.machine, [], watermark(10), "number")
    assert sort_updates(updates) == expected.updates and expected.updates


@pytest.mark.parametrize("name", ["upsert", "session"])  # values grouped in Arrow; deadlines in Python
def test_a_bucket_seeded_from_an_arrangement_holds_its_values(name):
    machine, types = MACHINES[name], TYPES[name]
    held = {"upsert": {"k": {"a", "b"}, "j": {"a"}}, "session": {"k": {("a", 1)}, "j": {("b", 2)}}}[name]
    pairs = [(key, value) for key, values in held.items() for value in sorted(values)]
    table = pa.table({"key": [k for k, _ in pairs], "value": pa.array([v for _, v in pairs], types.value)})
    state = BucketState.seeded(types, machine, table, 5)
    assert state.values(["k", "j", "x"]) == {key: frozenset(values) for key, values in held.items()}
    assert state.frontier == 5 and len(state) == 2
    deadlines = [machine.deadline(key, frozenset(values)) for key, values in held.items()] if name == "session" else []
    assert state.earliest_wake() == (min(watermark(d + 1) for d in deadlines) if deadlines else None)


def test_a_deadline_that_raises_stops_the_micro_batch_naming_the_machine_and_key():
    """Read when a bucket is seeded and when a key's values are loaded to step it."""
    says = "RaisingDeadline.deadline failed for key 'bad': ValueError: no clock"
    types = TYPES["session"]
    table = pa.table({"key": ["bad"], "value": pa.array([("a", 1)], types.value)})
    with pytest.raises(MachineError, match=says):
        BucketState.seeded(types, RaisingDeadline(), table, 0)
    state = BucketState.seeded(types, Session(), table, 0)
    with pytest.raises(MachineError, match=says):
        advance(state, RaisingDeadline(), [], watermark(5), "number")  # its deadline, 4, is due
