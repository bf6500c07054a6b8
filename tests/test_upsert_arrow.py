"""A batch run's Upsert partitions stepped in Arrow give exactly the rows of stepping
them event by event, on any input, and runs take that path only where it applies."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from statemachines import Machine, consolidate, run_local
from statemachines.intake import INT64_MAX
from statemachines.library import Upsert
from statemachines.spark.batch import partition_runner
from statemachines.spark.output import EVENT_ROW, STATE_ROW, UPDATE
from statemachines.spark.upsert_arrow import runs_in_arrow
from tests.test_tabulated import (
    BEYOND_DAY,
    KEY,
    _null_first,
    chunks_of,
    composite_keys,
    emitted,
    output_rows,
)

UTC = dt.UTC


TEXT, LONG = pa.string(), pa.int64()


def schemas(time_type, key_type=TEXT, symbol_type=TEXT, order_type=LONG):
    """The rows a partition gets, and the output rows, for these column types."""
    rows = pa.schema([
        ("key", key_type), ("kind", pa.int8()), ("symbol", symbol_type), ("time", time_type),
        ("order", order_type), ("prior", pa.list_(symbol_type)),
    ])
    output = pa.schema([
        ("kind", pa.int8(), False), ("key", key_type), ("value", symbol_type), ("time", time_type),
        ("diff", pa.int64()), ("symbol", symbol_type), ("order", order_type), ("reason", pa.string()),
        ("detail", pa.string()),
    ])
    return rows, output


def partition(events, priors, schema):
    """Events and state rows (a row per prior value, as the batch path sends them),
    sorted by key, kind, time and order, nulls first."""
    rows = [(k, EVENT_ROW, s, t, o, []) for k, s, t, o in events]
    rows += [(k, STATE_ROW, None, None, None, [v]) for k, values in priors.items() for v in sorted(values, key=repr)]
    rows.sort(key=lambda r: (_null_first(r[0]), r[1], _null_first(r[3]), _null_first(r[4])))
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    return table if priors else table.drop_columns(["kind", "prior"])  # no prior values: events only


def both_runners(output, kind, lower):
    """The partition function stepping in Arrow, as a batch run calls it, and the
    one stepping event by event."""
    arrow = partition_runner(Upsert(), kind, lower, None, output, upsert_in_arrow=True)
    return arrow, partition_runner(Upsert(), kind, lower, None, output, tabulate=False)


keys = st.sampled_from(["a", "b", "c", "é"] * 4 + [None])
symbols = st.sampled_from(["x", "y", "z", ""] * 4 + [None])
times = st.sampled_from([0, 1, 2, 3] * 6 + [None, INT64_MAX, -1])
orders = st.sampled_from([0, 1, None])
events = st.lists(st.tuples(keys, symbols, times, orders), max_size=60)
# a key holding two values before (written by another machine) sends its chunk the generic way
priors = st.dictionaries(st.sampled_from(["a", "b", "e"]), st.frozensets(st.sampled_from(["x", "y", "q"]), min_size=1, max_size=2))


@settings(max_examples=150, deadline=None)
@given(events, priors, st.integers(1, 7), st.sampled_from([None, 2]))
def test_stepping_upserts_in_arrow_gives_the_rows_of_stepping_them_event_by_event(events, priors, chunk_rows, lower):
    """Null keys and times, the greatest long, times below the frontier, commands at
    one time with equal orders or none (the symbol decides), deletes, prior values
    (one or several), chunks cut anywhere: the same rows with the same reasons, the
    updates in key order (as the task writes them to a file)."""
    rows, output = schemas(pa.int64())
    table = partition(events, priors, rows)
    arrow, generic = both_runners(output, "number", lower)
    with chunks_of(chunk_rows):
        assert output_rows(arrow, table, 3) == output_rows(generic, table, 3)
        keys = [row[1] for row in emitted(arrow, table, 3) if row[0] == UPDATE]
        assert keys == sorted(keys)


stamps = st.sampled_from(
    [dt.datetime(2024, 1, 1, h) for h in range(4)] * 4 + [None, dt.datetime.max, dt.datetime.min]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3) | st.none(), symbols, stamps, orders), max_size=40),
    st.sampled_from([None, dt.datetime(2024, 1, 1, 2)]),
    st.booleans(),
)
def test_timestamp_times_step_in_arrow_as_event_by_event(events, lower, zoned):
    """Times of both Spark timestamp types (a zone: UTC instants; none: wall clocks),
    the greatest datetime among them, over integer keys."""
    tz = UTC if zoned else None
    events = [(k, s, None if t is None else t.replace(tzinfo=tz), o) for k, s, t, o in events]
    rows, output = schemas(pa.timestamp("us", tz="UTC" if zoned else None), key_type=pa.int64())
    table = partition(events, {}, rows)
    lower = None if lower is None else lower.replace(tzinfo=tz)
    arrow, generic = both_runners(output, "datetime_tz" if zoned else "datetime", lower)
    assert output_rows(arrow, table, 5) == output_rows(generic, table, 5)


RECORD = pa.struct([("name", pa.string()), ("n", pa.int64())])
FLOAT_KEY = pa.struct([("id", pa.int64()), ("at", pa.float64())])  # Arrow cannot code floats: numbered in Python
records = st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, None]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(keys, st.none() | records, st.sampled_from([0, 1, 2, None]), st.sampled_from([0, 1, 2, 3, None])), max_size=40),
    st.dictionaries(st.sampled_from(["a", "b"]), st.frozensets(records, min_size=1, max_size=2)),
    st.integers(1, 5),
)
def test_record_symbols_step_in_arrow_as_event_by_event(events, priors, chunk_rows):
    """Symbols that are records of text and integers (a change feed's rows), null
    fields and null records among them, prior values: records equal field by field as
    Python's tuples; commands at one (key, time, order), which only Python ranks, send
    their chunk event by event."""
    rows, output = schemas(pa.int64(), symbol_type=RECORD)
    table = partition(events, priors, rows)
    arrow, generic = both_runners(output, "number", None)
    with chunks_of(chunk_rows):
        assert output_rows(arrow, table, 4) == output_rows(generic, table, 4)


TYPED = pa.struct([
    ("ok", pa.bool_()), ("score", pa.float64()), ("price", pa.decimal128(10, 2)), ("born", pa.date32()),
    ("seen", pa.timestamp("us", tz="UTC")), ("raw", pa.binary()),
])


def typed_records(beyond=True):
    """Records of every field type Arrow compares as Python does but ints and text
    (dates and times as the day or microsecond counts Arrow takes); often one of a
    few, so that a key meets an equal record again (NaN in it or not)."""
    nan = float("nan")
    few = [NAN_RECORD, (True, 1.5, Decimal("1.10"), 18_262, 0, b"x"), (None, nan, None, None, None, None)]
    return st.sampled_from(few) | st.tuples(
        st.sampled_from([True, False, None]), st.sampled_from([1.5, nan, float("inf"), 0.0, None]),
        st.sampled_from([Decimal("1.10"), Decimal("2"), None]),
        st.sampled_from([18_262, None] + ([BEYOND_DAY] if beyond else [])),
        st.sampled_from([0, 1_700_000_000_000_000, None]), st.sampled_from([b"x", b"", None]),
    )


NAN_RECORD = (True, float("nan"), Decimal("1.10"), 18_262, 0, b"x")


@settings(max_examples=100, deadline=None)
@example([("a", NAN_RECORD, 0, None), ("a", NAN_RECORD, 1, None)], {}, 4)  # NaN is one value: no change
@given(
    st.lists(st.tuples(keys, st.none() | typed_records(), st.sampled_from([0, 1, 2, None]), st.sampled_from([0, 1, None])), max_size=40),
    st.dictionaries(st.sampled_from(["a", "b"]), st.frozensets(typed_records(beyond=False), min_size=1, max_size=2)),
    st.integers(1, 5),
)
def test_records_of_booleans_numbers_dates_and_times_step_in_arrow_as_event_by_event(events, priors, chunk_rows):
    """A change feed's rows as databases hold them: booleans, floats (NaN one value),
    decimals, dates (one beyond Python's years: refused), zoned times and bytes."""
    rows, output = schemas(pa.int64(), symbol_type=TYPED)
    assert runs_in_arrow(Upsert(), output)
    table = partition(events, priors, rows)
    arrow, generic = both_runners(output, "number", None)
    with chunks_of(chunk_rows):
        assert output_rows(arrow, table, 4) == output_rows(generic, table, 4)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.none() | composite_keys(), st.none() | records, st.sampled_from([0, 1, 2, None]), st.sampled_from([0, 1, None])), max_size=40),
    st.dictionaries(composite_keys(beyond=False), st.frozensets(records, min_size=1, max_size=2)),
    st.integers(1, 5),
)
def test_keys_of_several_columns_step_in_arrow_as_event_by_event(events, priors, chunk_rows):
    """A change feed keyed by several columns: keys are records (null fields among
    them, null keys, a date beyond Python's years: refused), prior values found by
    key, chunks cut between keys."""
    rows, output = schemas(pa.int64(), key_type=KEY, symbol_type=RECORD)
    assert runs_in_arrow(Upsert(), output)
    table = partition(events, priors, rows)
    arrow, generic = both_runners(output, "number", None)
    with chunks_of(chunk_rows):
        assert output_rows(arrow, table, 4) == output_rows(generic, table, 4)


def test_a_partition_stepped_in_arrow_is_the_local_runtimes_upsert():
    """Checked against run_local itself, not only the generic path: commands over
    many keys, ties at one time broken by order then value, deletes and repeats."""
    import random

    rnd = random.Random(11)
    commands = [
        (f"k{rnd.randrange(40)}", rnd.choice(["u", "v", "w", None]), rnd.randrange(30), rnd.choice([0, 1, None]))
        for _ in range(3_000)
    ]
    rows, output = schemas(pa.int64())
    arrow, _ = both_runners(output, "number", None)
    got = [((r[1], r[2]), r[3], r[4]) for r in emitted(arrow, partition(commands, {}, rows), 500) if r[0] == UPDATE]
    assert consolidate(got) == consolidate(run_local(Upsert(), commands).updates)


class NotUpsert(Upsert):
    pass


class Other(Machine):
    def transition(self, key, values, symbol, time):
        return values


@pytest.mark.parametrize(
    ("machine", "types", "expected"),
    [
        (Upsert(), dict(time_type=pa.int64()), True),
        (Upsert(), dict(time_type=pa.int32(), key_type=pa.int16(), symbol_type=pa.large_string()), True),
        (Upsert(), dict(time_type=pa.timestamp("us", tz="UTC"), order_type=pa.string()), True),
        (Upsert(), dict(time_type=pa.timestamp("us"), order_type=pa.null()), True),
        (Upsert(), dict(time_type=pa.float64()), False),
        (Upsert(), dict(time_type=pa.uint64()), False),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.float64()), False),
        (Upsert(), dict(time_type=pa.int64(), key_type=pa.binary()), False),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([("a", pa.string()), ("n", pa.int8())])), True),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([("a", pa.float64()), ("d", pa.date32())])), True),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([("a", pa.timestamp("ns"))])), False),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([("a", pa.list_(pa.string()))])), False),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([("a", pa.struct([("b", pa.string())]))])), False),
        (Upsert(), dict(time_type=pa.int64(), symbol_type=pa.struct([])), False),
        (Upsert(), dict(time_type=pa.int64(), order_type=pa.float64()), False),
        (Upsert(), dict(time_type=pa.int64(), key_type=KEY), True),
        (Upsert(), dict(time_type=pa.int64(), key_type=FLOAT_KEY), False),
        (Upsert(), dict(time_type=pa.int64(), key_type=pa.struct([("a", pa.list_(pa.string()))])), False),
        (NotUpsert(), dict(time_type=pa.int64()), False),
        (Other(), dict(time_type=pa.int64()), False),
    ],
)
def test_only_exactly_upsert_over_plain_columns_steps_in_arrow(machine, types, expected):
    _, output = schemas(**types)
    assert runs_in_arrow(machine, output) is expected


def test_values_of_another_type_than_the_symbols_do_not_step_in_arrow():
    _, output = schemas(pa.int64())
    wider = output.set(output.get_field_index("value"), pa.field("value", pa.large_string()))
    assert runs_in_arrow(Upsert(), output) and not runs_in_arrow(Upsert(), wider)


@given(st.lists(st.tuples(st.none() | records, st.none() | records), max_size=20))
def test_records_are_equal_in_arrow_exactly_where_python_finds_them_equal(pairs):
    from statemachines.spark.upsert_arrow import equal_values

    left, right = (pa.array([p[i] for p in pairs], RECORD) for i in (0, 1))
    assert equal_values(left, right).to_pylist() == [a == b for a, b in pairs]


float_keys = st.tuples(st.sampled_from([1, 2, None]), st.sampled_from([0.5, float("nan"), None]))


@given(st.data(), st.sampled_from([(KEY, composite_keys()), (FLOAT_KEY, float_keys)]))
def test_keys_of_several_columns_are_found_where_python_finds_them(data, kind):
    from statemachines.columns import column_to_python
    from statemachines.spark.tabulated import positions_in

    arrow_type, keys = kind
    values, value_set = (pa.array(data.draw(st.lists(st.none() | keys, max_size=12)), arrow_type) for _ in range(2))
    first = {}
    for i, key in enumerate(column_to_python(value_set)):  # NaN read as one value
        first.setdefault(key, i)
    found = positions_in(values, value_set)
    assert found.to_pylist() == [first.get(key) for key in column_to_python(values)]
