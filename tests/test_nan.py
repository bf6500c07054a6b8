"""NaN is one value, equal to itself (as in Spark SQL), on every runtime.

A key's NaN reading repeated is no change, a NaN key is one key, and NaN values
store and read back, wherever the NaN came from (each event here makes its own
``float("nan")`` object, or NumPy's). Checked against a model: the same run with NaN replaced by
a stand-in float no event uses, which is one value by construction.
"""

from __future__ import annotations

import math
import pickle
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given
from hypothesis import strategies as st

from statemachines import LocalRuntime, Machine, PersistedArrangement, consolidate, run_local
from statemachines.library import Upsert
from statemachines.spark.tabulated import _last_key_start
from statemachines.updates import canonical
from tests.delta_reader import delta_rs_rows
from tests.machines import TabulatedTags, Tags

STAND_IN = math.inf  # no event below uses it; like NaN, it ranks after every number


def nan_as(item, stand_in):
    """``item`` with every NaN in it (at any depth of tuples) replaced by ``stand_in``."""
    if isinstance(item, float | np.floating) and math.isnan(item):
        return stand_in
    if isinstance(item, tuple):
        parts = [nan_as(part, stand_in) for part in item]
        return item._make(parts) if hasattr(item, "_make") else tuple(parts)
    return item


def stand_in_as_nan(item):
    if isinstance(item, float) and item == STAND_IN:
        return math.nan
    if isinstance(item, tuple):
        parts = [stand_in_as_nan(part) for part in item]
        return item._make(parts) if hasattr(item, "_make") else tuple(parts)
    return item


def model(machine, events):
    """The updates of ``machine`` over ``events`` with NaN as one ordinary value."""
    return as_text(stand_in_as_nan(u) for u in run_local(machine, [nan_as(e, STAND_IN) for e in events]).updates)


def as_text(updates):
    """Updates in an order-free, comparable form (NaN reads ``nan``)."""
    return sorted(repr(tuple(u)) for u in updates)


fresh_nan = st.sampled_from([float, np.float32, np.float16]).flatmap(  # a NaN object of its own per draw,
    lambda kind: st.builds(kind, st.just("nan"))  # of Python's or NumPy's (from to_numpy() arrays)
)
readings = st.sampled_from([1.0, 2.0]) | fresh_nan
keys = st.sampled_from([1.5, 2.5]) | fresh_nan
upserts = st.lists(st.tuples(keys, readings, st.integers(0, 6)), max_size=25)
tags = st.lists(
    st.tuples(keys, st.tuples(st.sampled_from(["add", "del"]), readings), st.integers(0, 6)), max_size=25
)


@pytest.mark.parametrize(("machine", "strategy"), [(Upsert(), upserts), (Tags(), tags)], ids=["upsert", "tags"])
@given(data=st.data())
def test_local_runs_take_nan_as_one_value(machine, strategy, data, tmp_path_factory):
    events = data.draw(strategy)
    expected = model(machine, events)
    assert as_text(run_local(machine, events).updates) == expected

    # into a persisted arrangement, in two runs: the second reads NaN values back
    target = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    first = run_local(machine, [e for e in events if e[2] < 3], into=target)
    second = run_local(machine, [e for e in events if e[2] >= 3], into=target)
    assert not first.rejected and not second.rejected
    assert as_text(PersistedArrangement(target.path).updates()) == expected

    # a checkpoint pickled (its NaN objects come back as NaNs of their own) and restored
    runtime = LocalRuntime(machine)
    runtime.feed([e for e in events if e[2] < 3])
    before = runtime.advance_to(3).updates
    runtime.feed([e for e in events if e[2] >= 5])
    restored = LocalRuntime.restore(machine, pickle.loads(pickle.dumps(runtime.checkpoint())))
    restored.feed([e for e in events if 3 <= e[2] < 5])
    assert as_text([*before, *restored.finish().updates]) == expected


decimal_nans = st.sampled_from(["NaN", "-NaN", "sNaN"]).map(Decimal)
decimal_keys = st.sampled_from(["a", "b"]) | st.tuples(st.just("c"), decimal_nans) | decimal_nans
decimal_readings = st.sampled_from([Decimal("1.5"), Decimal("2")]) | decimal_nans | st.tuples(st.just(1), decimal_nans)


@given(events=st.lists(st.tuples(decimal_keys, decimal_readings, st.integers(0, 6)), max_size=20))
def test_decimal_nans_are_rejected_and_the_other_events_run_as_without_them(events, tmp_path_factory):
    """A decimal NaN orders with nothing (comparing it raises) and stores nowhere: an
    event holding one in its key or symbol is rejected (bad_key / invalid_symbol),
    in memory and into a persisted arrangement; the rest runs as if it were absent."""
    from statemachines.updates import holds_decimal_nan

    holding = [e for e in events if holds_decimal_nan(e[0]) or holds_decimal_nan(e[1])]
    expected = run_local(Upsert(), [e for e in events if not any(e is h for h in holding)]).updates
    target = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    for result in (run_local(Upsert(), events), run_local(Upsert(), events, into=target)):
        assert result.updates == expected
        assert sorted(map(repr, (r.event[:3] for r in result.rejected))) == sorted(map(repr, holding))
        assert {r.reason.value for r in result.rejected} <= {"bad_key", "invalid_symbol"}
        assert all(("key" if holds_decimal_nan(r.event[0]) else "symbol") in r.detail for r in result.rejected)
    assert target.updates() == expected


def test_a_change_feed_of_nan_values_survives_duplication_and_reordering(tmp_path):
    """Messages that travelled (pickled: each copy has NaNs of its own) and arrive
    twice, latest first: a repeat must still be a repeat, not a second update."""
    from statemachines.cdc import CdcReader, messages_from_arrangement

    arrangement = PersistedArrangement(tmp_path / "arr")
    events = [(1.5, float("nan"), 0), (float("nan"), 2.0, 0), (1.5, 3.0, 1), (float("nan"), float("nan"), 2)]
    run_local(Upsert(), events, into=arrangement)
    sent = pickle.dumps(messages_from_arrangement(arrangement, batch_size=1))
    messages = [m for pair in zip(pickle.loads(sent), pickle.loads(sent), strict=True) for m in pair][::-1]
    reader = CdcReader()
    released = [u for m in messages for _, updates in reader.push(m) for u in updates]
    assert as_text(released) == as_text(arrangement.updates()) == model(Upsert(), events)


def test_canonical_keeps_what_holds_no_nan_and_no_negative_zero_and_makes_every_nan_math_nan():
    plain = ("a", (1, 2.5, 0.0))
    assert canonical(plain) is plain
    zero = canonical(("a", (1, -0.0)))
    assert zero == ("a", (1, 0.0)) and math.copysign(1.0, zero[1][1]) > 0
    made = canonical(("a", (1, float("nan"))))
    assert made[1][1] is math.nan
    assert made == ("a", (1, math.nan)) and hash(made) == hash(("a", (1, math.nan)))


@pytest.mark.parametrize(
    ("keys", "start"),
    [
        (pa.array([1.0, math.nan, float("nan"), math.nan]), 1),
        (pa.array([math.nan, 2.0, 2.0]), 1),
        (pa.array([(1, "a"), (1, "b"), (1, "b")], pa.struct([("x", pa.int64()), ("y", pa.string())])), 1),
        (pa.array([(1, math.nan), (1, float("nan"))], pa.struct([("x", pa.int64()), ("y", pa.float64())])), 0),
    ],
    ids=["nan-last", "nan-first", "struct", "struct-nan"],
)
def test_a_chunk_of_rows_ends_before_its_last_keys_rows_whatever_the_key_type(keys, start):
    """The tabulated path cuts its chunks at a key's first row: struct keys (which
    Arrow does not compare) and NaN keys included."""
    assert _last_key_start(pa.table({"key": keys})) == start


SPARK_EVENTS = {
    "upsert": (
        Upsert(),
        "key double, symbol double, time long",
        [
            (1.5, float("nan"), 1), (1.5, float("nan"), 2), (1.5, 2.0, 3), (1.5, float("nan"), 4),
            (float("nan"), 1.0, 1), (float("nan"), 1.0, 2), (float("nan"), float("nan"), 4), (float("nan"), float("nan"), 5),
            (2.5, float("nan"), 1), (2.5, 1.0, 1), (2.5, 3.0, 2), (2.5, float("nan"), 2), (2.5, 0.5, 2),  # ties
        ],
    ),
    "tags": (
        Tags(),
        "key double, symbol struct<op: string, tag: double>, time long",
        [
            (1.5, ("add", float("nan")), 1), (1.5, ("add", float("nan")), 2), (1.5, ("add", 2.0), 2),
            (1.5, ("del", float("nan")), 3), (float("nan"), ("add", float("nan")), 1),
            (float("nan"), ("add", 1.0), 2), (float("nan"), ("del", float("nan")), 4),
        ],
    ),
    "tabulated": (
        TabulatedTags(),
        "key double, symbol struct<op: string, tag: string>, time long",
        [(float("nan"), ("add", "x"), 1), (1.5, ("add", "x"), 1), (float("nan"), ("add", "y"), 2),
         (float("nan"), ("del", "x"), 3), (float("nan"), ("add", "y"), 4)],
    ),
}


def collected(frame):
    return consolidate(
        ((canonical(r.key), canonical(tuple(r.value) if isinstance(r.value, tuple) else r.value)), r.time, r.diff)
        for r in frame.collect()
    )


# each Spark path once: the native upsert (batch, and streaming's bucket upsert), the
# generic per-event path (batch, into, and streaming's buckets) and the tabulated one
SPARK_RUNS = [
    ("upsert", "generic"), ("upsert", "native"), ("upsert", "into"), ("upsert", "stream"),
    ("tags", "generic"), ("tags", "into"),
    ("tabulated", "generic"), ("tabulated", "into"), ("tabulated", "stream"),
]


@pytest.mark.spark
@pytest.mark.parametrize(("case", "how"), SPARK_RUNS)
def test_spark_runs_take_nan_as_one_value(spark, tmp_path, case, how):
    from statemachines.spark import run_batch, run_stream

    machine, schema, events = SPARK_EVENTS[case]
    value_type = "string" if case == "tabulated" else "double"
    frame = spark.createDataFrame(events, schema)
    if how == "stream":
        source = tmp_path / "in"
        frame.coalesce(1).write.parquet(str(source))
        stream = spark.readStream.schema(schema).parquet(str(source))
        query = run_stream(machine, stream, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt",
                           value_type=value_type, trigger={"availableNow": True}, progress=None)
        query.awaitTermination()
        # a stream leaves the events at its last time waiting: compare what is final
        last = max(e[2] for e in events)
        got = PersistedArrangement(tmp_path / "arr").updates()
        expected = model(machine, [e for e in events if e[2] < last])
    else:
        into = tmp_path / "arr" if how == "into" else None
        result = run_batch(machine, frame, into=into, value_type=value_type, native=how == "native")
        assert result.rejected.count() == 0
        got = collected(result.updates)
        expected = model(machine, events)
    assert as_text(got) == expected


def test_a_sql_condition_compares_nan_as_the_same_function_does():
    """Arrow evaluates expressions (on every runtime): NaN is never equal, greater or
    less, as in Python (see library/expressions.py), not as in Spark SQL."""
    from typing import NamedTuple

    from statemachines.library import Detector, Pattern, matches

    class Reading(NamedTuple):
        amount: float | None

    events = [(k, Reading(a), 1) for k, a in [("nan", float("nan")), ("low", 5.0), ("high", 50.0), ("null", None)]]
    tests = {
        "amount > 10": lambda r: r.amount is not None and r.amount > 10,
        "amount < 10": lambda r: r.amount is not None and r.amount < 10,
        "amount = amount": lambda r: r.amount is not None and r.amount == r.amount,  # noqa: PLR0124
        "amount <> 5": lambda r: r.amount is not None and r.amount != 5,
    }
    for sql, function in tests.items():
        found = [sorted(m.key for m in matches(run_local(Detector(Pattern.begin("a").where(c)), events).updates))
                 for c in (sql, function)]
        assert found[0] == found[1], sql


# -- zero is one value, written 0.0 ---------------------------------------------------------


def zero_as_zero(item):
    """``item`` with every ``-0.0`` in it (at any depth of tuples) made ``0.0``."""
    if isinstance(item, float) and item == 0:
        return 0.0
    if isinstance(item, tuple):
        parts = [zero_as_zero(part) for part in item]
        return item._make(parts) if hasattr(item, "_make") else tuple(parts)
    return item


def as_tuples(item):
    """A value Spark gives back (rows holding lists) as the tuples it stands for."""
    return tuple(as_tuples(part) for part in item) if isinstance(item, list | tuple) else item


def holds_negative_zero(item):
    if isinstance(item, float):
        return item == 0 and math.copysign(1.0, item) < 0
    return isinstance(item, tuple) and any(holds_negative_zero(part) for part in item)


zero_keys = [st.sampled_from([0.0, -0.0, 2.5]), st.sampled_from([("a", 0.0), ("a", -0.0), ("b", 0.0)])]
zero_readings = st.sampled_from([0.0, -0.0, 1.0])
zero_cases = {  # (machine, events given their keys)
    "upsert": (Upsert(), lambda keys: st.tuples(keys, zero_readings, st.integers(0, 6))),
    "tags": (Tags(), lambda keys: st.tuples(keys, st.tuples(st.sampled_from(["add", "del"]), zero_readings),
                                            st.integers(0, 6))),
}


@pytest.mark.parametrize("case", zero_cases)
@given(data=st.data())
def test_local_runs_take_negative_zero_as_zero(case, data, tmp_path_factory):
    """-0.0 equals 0.0, and Spark SQL groups them as one, but Arrow does not: a key or
    value holding -0.0 is written 0.0, so that an update and its retraction group
    together wherever the output is read. The model: the same run with every -0.0
    made 0.0 before it starts (``repr`` tells the two apart)."""
    machine, event = zero_cases[case]
    events = data.draw(st.sampled_from(zero_keys).flatmap(lambda keys: st.lists(event(keys), max_size=25)))
    expected = as_text(run_local(machine, [zero_as_zero(e) for e in events]).updates)
    assert as_text(run_local(machine, events).updates) == expected
    target = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    run_local(machine, [e for e in events if e[2] < 3], into=target)
    run_local(machine, [e for e in events if e[2] >= 3], into=target)
    assert as_text(PersistedArrangement(target.path).updates()) == expected


@pytest.mark.spark
@pytest.mark.parametrize("how", ["generic", "native", "into", "stream"])
def test_spark_runs_write_negative_zero_as_zero(spark, tmp_path, how):
    """Every update a Spark path makes, before any consolidation, holds 0.0 where its
    event held -0.0, and the updates are the local runtime's."""
    from statemachines.spark import run_batch, run_stream

    events = [
        (-0.0, -0.0, 1), (0.0, 1.0, 2), (0.0, 0.0, 3), (-0.0, -0.0, 4), (-0.0, 1.0, 5),
        (2.5, 0.0, 1), (2.5, -0.0, 2), (2.5, 1.0, 3), (2.5, -0.0, 4), (-0.0, 0.0, 6),
    ]
    schema = "key double, symbol double, time long"
    frame = spark.createDataFrame(events, schema)
    if how == "stream":
        source = tmp_path / "in"
        frame.coalesce(1).write.parquet(str(source))
        stream = spark.readStream.schema(schema).parquet(str(source))
        query = run_stream(Upsert(), stream, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt",
                           trigger={"availableNow": True}, progress=None)
        query.awaitTermination()
        events = [e for e in events if e[2] < max(e[2] for e in events)]  # a stream leaves its last time waiting
    else:
        result = run_batch(Upsert(), frame, into=tmp_path / "arr" if how == "into" else None, native=how == "native")
        written = [((r.key, r.value), r.time, r.diff) for r in result.updates.collect()]
    if how in ("into", "stream"):  # the rows stored, as Arrow reads them
        table = delta_rs_rows(DeltaTable(str(tmp_path / "arr")))
        written = list(zip(zip(*(table[c].to_pylist() for c in ("key", "value")), strict=True),
                           table["time"].to_pylist(), table["diff"].to_pylist(), strict=True))
    assert written and not [u for u in written if holds_negative_zero(u[0])]
    assert as_text(consolidate(written)) == as_text(run_local(Upsert(), [zero_as_zero(e) for e in events]).updates)


@pytest.mark.spark
def test_a_pattern_on_spark_writes_the_negative_zero_of_its_events_as_zero(spark):
    """The detector's keys step together over the chunk's Arrow columns (no event is
    a Python object), and its matches hold 0.0 where their events held -0.0, as locally."""
    from typing import NamedTuple

    from statemachines.library import Detector, Pattern
    from statemachines.spark import run_batch

    class Reading(NamedTuple):
        kind: str
        amount: float

    events = [(k, Reading(kind, amount), t) for k, kind, amount, t in [
        ("u", "a", -0.0, 1), ("u", "b", 0.0, 2), ("v", "a", 0.0, 1), ("v", "b", -0.0, 3), ("u", "b", -0.0, 4),
    ]]
    detector = Detector(Pattern.begin("a").where("kind = 'a'").followed_by("b").where("kind = 'b' AND amount = 0"))
    frame = spark.createDataFrame(events, "key string, symbol struct<kind: string, amount: double>, time long")
    written = [((r.key, as_tuples(r.value)), r.time, r.diff) for r in run_batch(detector, frame).updates.collect()]
    assert written and not [u for u in written if holds_negative_zero(u[0])]
    expected = run_local(detector, [zero_as_zero(e) for e in events]).updates
    assert consolidate(written) == expected


class Computed(Machine):
    """A key's values computed from its symbol, a small number: its reading (NaN for
    0 and 3, ``-0.0`` for 1) alone and in a tuple with the symbol's parity, then NaN
    alone from a deadline at 100; with ``fresh``, each NaN and ``-0.0`` a new object,
    as arithmetic makes them, else the one ``math.nan`` and ``0.0`` (the model)."""

    def __init__(self, fresh):
        self.fresh = fresh

    def reading(self, n):
        if n % 3 == 0:
            return float("inf") - float("inf") if self.fresh else math.nan
        if n == 1:
            return -1.0 * 0.0 if self.fresh else 0.0
        return float(n)

    def transition(self, key, values, symbol, time):
        return [self.reading(symbol), (symbol % 2, self.reading(symbol + 1)), self.reading(symbol + 3)]

    def deadline(self, key, values):  # at 100, after every event, the key's values become NaN alone
        return None if values == {math.nan} else 100

    def on_deadline(self, key, values, time):
        return [self.reading(0), self.reading(3)]


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3), st.integers(0, 5)), max_size=20))
def test_values_a_machine_computes_take_nan_as_one_value_and_negative_zero_as_zero(events):
    """A NaN a transition makes is the one NaN a key holds, as a NaN symbol is: a new
    NaN object for the NaN the key holds is no change, and two are one value."""
    expected = as_text(run_local(Computed(fresh=False), events).updates)
    assert as_text(run_local(Computed(fresh=True), events).updates) == expected

