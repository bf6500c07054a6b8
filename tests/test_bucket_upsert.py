"""Upsert's micro-batch in Arrow gives what the runtime's micro-batch gives: the same
updates, rejections, arrival and state, micro-batch after micro-batch."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import Update
from statemachines.columns import column_to_python, python_rows
from statemachines.intake import INT64_MAX
from statemachines.library import Upsert
from statemachines.spark.bucket_state import BucketState, BucketTypes, advance, event_rows
from statemachines.spark.bucket_upsert import advance_upsert, upsert_step
from statemachines.spark.clock import timer_ms
from statemachines.updates import sort_updates
from tests.machines import Tags
from tests.test_tabulated import KEY, composite_keys
from tests.test_upsert_arrow import NAN_RECORD, TYPED, typed_records

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RECORD = pa.struct([("name", pa.string()), ("n", pa.int64())])  # a change feed's rows
TYPES = {
    "number": BucketTypes(pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64()),
    "datetime_tz": BucketTypes(pa.int64(), pa.int64(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.string()),
    "records": BucketTypes(pa.string(), RECORD, RECORD, pa.int64(), pa.int64()),
    "typed records": BucketTypes(pa.string(), TYPED, TYPED, pa.int64(), pa.int64()),  # as databases type them
    "composite keys": BucketTypes(KEY, RECORD, RECORD, pa.int64(), pa.int64()),  # a feed keyed by several columns
}
TIME_KIND = {kind: "datetime_tz" if kind == "datetime_tz" else "number" for kind in TYPES}
REFUSAL = pa.struct([("reason", pa.string()), ("detail", pa.string())])


def time_of(kind, t):
    if t is None or kind != "datetime_tz":
        return t
    if t == INT64_MAX:  # the greatest datetime, which the intake refuses as it refuses the greatest long
        return dt.datetime.max.replace(tzinfo=dt.UTC)
    return EPOCH + dt.timedelta(milliseconds=t // 3, microseconds=t % 3)  # some times share a millisecond


def event_lists(kind):
    keys = {"datetime_tz": st.sampled_from([1, 2, 3, None]), "composite keys": st.none() | composite_keys()}.get(
        kind, st.sampled_from(["ann", "bob", "cy", None])
    )
    records = st.tuples(st.sampled_from(["a", "b", None]), st.none() | st.integers(0, 2))
    symbols = st.none() | {
        "number": st.sampled_from(["a", "b", "c"]),
        "datetime_tz": st.integers(0, 2),
        "records": records,
        "composite keys": records,
        "typed records": typed_records(),
    }[kind]
    orders = st.none() | (st.sampled_from(["0/1", "0/2"]) if kind == "datetime_tz" else st.integers(0, 3))
    times = st.none() | st.integers(0, 40) | st.just(INT64_MAX)
    refusals = st.none() | st.just(("unreadable", "a row the source refused"))
    return st.lists(st.tuples(keys, symbols, times.map(lambda t: time_of(kind, t)), orders, refusals), max_size=12)


def table_of(types, rows, refused):
    columns = list(zip(*rows, strict=True)) if rows else [[]] * 5
    names = ["key", "symbol", "time", "order"]
    arrays = [pa.array(list(c), k) for c, k in zip(columns, (types.key, types.symbol, types.time, types.order), strict=False)]
    if refused:
        arrays.append(pa.array([None if r is None else {"reason": r[0], "detail": r[1]} for r in columns[4]], REFUSAL))
        names.append("refusal")
    return pa.table(arrays, names=names)


def state_of(state):
    live = state.live()
    columns = (column_to_python(live[c]) for c in ("key", "values"))
    values = sorted(((k, tuple(sorted(vs, key=repr))) for k, vs in zip(*columns, strict=True)), key=repr)
    pending = sorted(map(repr, python_rows(state.pending.select(["key", "symbol", "time", "order", "wake"]))))
    return values, pending, state.record["frontier"], state.record["kind"], state.record["order_kind"]


def round_trip(state, stored):
    stored.update(state.parts())
    return BucketState.decode(state.types, stored)


@pytest.mark.parametrize("kind", sorted(TYPES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_arrow_step_gives_what_the_runtime_gives(kind, data):
    types, time_kind = TYPES[kind], TIME_KIND[kind]
    refused = data.draw(st.booleans(), label="refusal column")
    batches = data.draw(st.lists(event_lists(kind), min_size=1, max_size=6), label="micro-batches")
    steps = data.draw(st.lists(st.integers(0, 12), min_size=len(batches), max_size=len(batches)), label="watermark steps")
    generic, generic_stored = BucketState.fresh(types), {}
    arrow, arrow_stored = BucketState.fresh(types), {}
    watermark = 0
    for i, (rows, step) in enumerate(zip(batches, steps, strict=True)):
        if i and step:  # Spark's watermark: 0 until the first micro-batch, then it only moves on
            watermark = max(watermark, timer_ms(time_of(kind, 3 * step * i)) - 1)
        table = table_of(types, rows, refused)
        expected = advance(generic, Upsert(), event_rows(table), watermark, time_kind, None, 1000 + i)
        kept = state_of(arrow)
        got = advance_upsert(arrow, Upsert(), table, watermark, time_kind, 1000 + i)
        if got is None:  # records tied at one (key, time, order): the bucket runs the runtime
            assert "records" in kind and state_of(arrow) == kept
            got = advance(arrow, Upsert(), event_rows(table), watermark, time_kind, None, 1000 + i)
        updates, rejected, arrived = got
        assert sort_updates(update_list(updates)) == sort_updates(list(expected[0]))
        assert sorted(map(repr, rejected)) == sorted(map(repr, expected[1]))
        assert arrived == expected[2]
        generic, arrow = round_trip(generic, generic_stored), round_trip(arrow, arrow_stored)
        assert state_of(arrow) == state_of(generic)


def update_list(updates):
    """The updates of a table ``key, value, time, diff`` (the Arrow step's), or as they are."""
    if not isinstance(updates, pa.Table):
        return list(updates)
    return [Update((k, v), t, d) for k, v, t, d in python_rows(updates)]


def test_unequal_records_tied_at_one_key_time_and_order_are_left_to_the_runtime():
    """Within a micro-batch or across two (the first's winner buffered), two unequal
    records at one ``(key, time, order)``: the step declines, changing nothing. A
    record delivered twice steps in Arrow."""
    types = TYPES["records"]
    within = BucketState.fresh(types)
    tied = [("k", ("b", 1), 5, None, None), ("k", ("a", 2), 5, None, None)]
    assert advance_upsert(within, Upsert(), table_of(types, tied, False), 0, "number", 1) is None
    assert state_of(within) == state_of(BucketState.fresh(types))
    twice = table_of(types, [("k", ("b", None), 5, 3, None)] * 2, False)
    assert advance_upsert(within, Upsert(), twice, 0, "number", 1) is not None

    across = BucketState.fresh(types)
    for i, row in enumerate(tied):
        assert advance_upsert(across, Upsert(), table_of(types, [row], False), 0, "number", i) is not None
    kept = state_of(across)
    assert advance_upsert(across, Upsert(), table_of(types, [], False), timer_ms(10), "number", 2) is None
    assert state_of(across) == kept
    updates, _, _ = advance(across, Upsert(), [], timer_ms(10), "number")
    assert [(u.data, u.diff) for u in updates] == [(("k", max(r[1] for r in tied)), 1)]


def test_a_record_holding_nan_sent_again_later_changes_nothing():
    """NaN is one value: the record again at a later time is no change, as in the runtime."""
    types = TYPES["typed records"]
    arrow, generic = BucketState.fresh(types), BucketState.fresh(types)
    rows = [("k", NAN_RECORD, 1, None, None), ("k", NAN_RECORD, 2, None, None)]
    for i, row in enumerate(rows):
        table = table_of(types, [row], False)
        expected = advance(generic, Upsert(), event_rows(table), timer_ms(i), "number", None, i)
        got = advance_upsert(arrow, Upsert(), table, timer_ms(i), "number", i)
        assert update_list(got[0]) == list(expected[0])
    updates, _, _ = advance_upsert(arrow, Upsert(), table_of(types, [], False), timer_ms(10), "number", 2)
    assert [u.diff for u in update_list(updates)] == [u.diff for u in advance(generic, Upsert(), [], timer_ms(10), "number")[0]]


def test_a_key_holding_several_values_is_left_to_the_runtime():
    types = TYPES["number"]
    state = BucketState.seeded(types, Upsert(), pa.table({"key": ["k", "k"], "value": ["a", "b"]}), 0)
    state.buffer(table_of(types, [("k", "c", 5, None, None)], False), 1)
    kept = state_of(state)
    assert advance_upsert(state, Upsert(), table_of(types, [], False), timer_ms(10), "number") is None
    assert state_of(state) == kept
    updates, _, _ = advance(state, Upsert(), [], timer_ms(10), "number")
    assert sorted(u.diff for u in updates) == [-1, -1, 1]


def test_the_step_applies_only_where_arrow_orders_as_the_intake():
    plain = TYPES["number"]
    assert upsert_step(Upsert(), plain) is advance_upsert
    assert upsert_step(Tags(), plain) is None
    wider = BucketTypes(pa.string(), pa.large_string(), pa.string(), pa.int64(), pa.int64())
    assert upsert_step(Upsert(), wider) is None  # a value column of another type: the runtime checks each
    floats = BucketTypes(pa.string(), pa.float64(), pa.float64(), pa.int64(), pa.int64())
    assert upsert_step(Upsert(), floats) is None
    float_times = BucketTypes(pa.string(), pa.string(), pa.string(), pa.float64(), pa.int64())
    assert upsert_step(Upsert(), float_times) is None
    assert upsert_step(Upsert(), TYPES["records"]) is advance_upsert
    nested = pa.struct([("name", pa.string()), ("inner", RECORD)])
    assert upsert_step(Upsert(), BucketTypes(pa.string(), nested, nested, pa.int64(), pa.int64())) is None
    assert upsert_step(Upsert(), TYPES["typed records"]) is advance_upsert
    assert upsert_step(Upsert(), TYPES["composite keys"]) is advance_upsert
    nanos = pa.struct([("name", pa.string()), ("at", pa.timestamp("ns"))])  # the intake refuses finer than microseconds
    assert upsert_step(Upsert(), BucketTypes(pa.string(), nanos, nanos, pa.int64(), pa.int64())) is None
