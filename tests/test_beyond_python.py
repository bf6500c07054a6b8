"""Dates and times beyond Python's years (1 to 9999), which Arrow, Parquet and Spark
hold: an event holding one is rejected with a reason on every runtime, the rest run,
and the rejected row keeps the value as it was."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import Machine, PersistedArrangement, Reason, consolidate, run_local
from statemachines.columns import arrow_array, beyond_python, column_to_python
from statemachines.intake import beyond_python_detail
from statemachines.library import Detector, Pattern, Upsert
from statemachines.persisted import rejected_table
from statemachines.updates import Unreadable, holds_unreadable
from tests.machines import TabulatedTags

# days from 1970: Python's dates are 0001-01-01 (-719162) to 9999-12-31 (2932896)
FIRST_DAY, LAST_DAY = -719_162, 2_932_896
IN_RANGE = [0, 19_000, 19_001, LAST_DAY]
BEYOND = [LAST_DAY + 1, LAST_DAY + 20_000, FIRST_DAY - 1]  # 10000-01-01, 10054-..., the year 0
DAY_US = 86_400_000_000
RECORD = pa.struct([("op", pa.string()), ("tag", pa.date32())])


def beyond(days):
    return days is not None and not FIRST_DAY <= days <= LAST_DAY


def holds_beyond(cell):
    if isinstance(cell, dict):
        return any(holds_beyond(v) for v in cell.values())
    if isinstance(cell, list | tuple):  # a list, or a map's (key, value) pairs
        return any(holds_beyond(v) for v in cell)
    return type(cell) is int and beyond(cell)


def expected_refusal(key, symbol, time, order, *, time_days=False):
    """The intake's first refusal of a row whose dates are given as day numbers: its
    reason, and what holds a date beyond Python's years (``None``: nothing)."""
    if key is None:
        return Reason.NULL_KEY, None
    if time is None:
        return Reason.NULL_TIME, None
    if time_days and beyond(time):
        return Reason.BAD_TIME, "time"
    if time_days and time == LAST_DAY:  # the greatest date: no time after it
        return Reason.BAD_TIME, None
    for where, reason, cell in (("order", Reason.BAD_ORDER, order), ("key", Reason.BAD_KEY, key),
                                ("symbol", Reason.INVALID_SYMBOL, symbol)):
        if holds_beyond(cell):
            return reason, where
    return None


def shapes(days):
    """Symbol types, and strategies of their cells of day numbers drawn from ``days``."""
    return {
        "date": (pa.date32(), days),
        "record": (RECORD, st.fixed_dictionaries({"op": st.sampled_from(["add", "del"]), "tag": st.none() | days})),
        "list": (pa.list_(pa.date32()), st.lists(days, max_size=3)),
        "map": (pa.map_(pa.string(), pa.date32()), st.lists(st.tuples(st.sampled_from("ab"), days), max_size=2, unique_by=lambda p: p[0])),
    }


@st.composite
def event_tables(draw):
    # where dates beyond Python's years may be: one column (so each reason is met
    # alone), or any
    where = draw(st.sampled_from(["key", "symbol", "time", "order", "anywhere"]), label="beyond in")

    def days(column):
        return st.sampled_from(IN_RANGE + (BEYOND if where in (column, "anywhere") else []))

    shape = draw(st.sampled_from(["date", "list", "map", "record"]), label="symbol shape")
    symbol_type, symbols = shapes(days("symbol"))[shape]
    date_keys = draw(st.booleans(), label="date keys")
    date_times = draw(st.booleans(), label="date times")
    keys = (st.none() | days("key")) if date_keys else st.sampled_from(["a", "b", None])
    times = st.none() | (days("time") if date_times else st.integers(0, 5))
    orders = st.none() | days("order")
    rows = draw(st.lists(st.tuples(keys, st.none() | symbols, times, orders), max_size=12), label="rows")
    types = {
        "key": pa.date32() if date_keys else pa.string(), "symbol": symbol_type,
        "time": pa.date32() if date_times else pa.int64(), "order": pa.date32(),
    }
    columns = list(zip(*rows, strict=True)) if rows else [[]] * 4
    table = pa.table({name: pa.array(list(cells), types[name]) for name, cells in zip(types, columns, strict=True)})
    return table, rows, date_times


@settings(max_examples=150, deadline=None)
@given(drawn=event_tables())
def test_events_holding_a_date_beyond_pythons_years_are_rejected_and_the_rest_run(drawn):
    table, rows, date_times = drawn
    refusals = [expected_refusal(*row, time_days=date_times) for row in rows]
    result = run_local(Upsert(), table)
    bad = pa.array([r is not None for r in refusals], pa.bool_())
    assert [r.reason for r in result.rejected] == [r[0] for r in refusals if r is not None]
    assert run_local(Upsert(), table.filter(pa.compute.invert(bad))).updates == result.updates
    beyond_rows = [where for r in refusals if r is not None for where in r[1:] if where is not None]
    said = [r.detail for r in result.rejected if "beyond the years 1 to 9999" in r.detail]
    assert said == [beyond_python_detail(where) for where in beyond_rows]
    # the rejected rows, written as a table of the events' types, hold the values read
    kept = rejected_table(result.rejected, dict(zip(table.column_names, table.schema.types, strict=True)))
    assert kept.select(table.column_names).equals(table.filter(bad))


def test_a_cell_beyond_pythons_years_reads_as_unreadable_and_writes_back_as_it_was():
    tag = pa.array([LAST_DAY + 1, 0, None], pa.date32())
    records = pa.StructArray.from_arrays([pa.array(["add", "del", "add"]), tag], fields=list(RECORD))
    read = column_to_python(records)
    assert isinstance(read[0].tag, Unreadable) and read[0].tag.text == "10000-01-01"
    assert read[1:] == [("del", dt.date(1970, 1, 1)), ("add", None)]
    assert read[0].tag == column_to_python(tag)[0] and hash(read[0].tag) == hash(column_to_python(tag)[0])
    moment = pa.array([(LAST_DAY + 1) * DAY_US + 5], pa.timestamp("us", tz="UTC"))
    assert column_to_python(moment)[0].text == "10000-01-01 00:00:00.000005Z"
    lists = pa.array([[LAST_DAY + 1, 0], None, []], pa.list_(pa.date32()))
    maps = pa.array([[("a", LAST_DAY + 1)], None], pa.map_(pa.string(), pa.date32()))
    for column in (records, moment, lists, maps, maps.slice(1), lists.slice(1)):
        assert arrow_array(column_to_python(column), column.type).equals(column)


UNITS = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


@st.composite
def columns_near_the_bounds(draw):
    """A column of dates or times (alone, in records, lists or maps) near Python's bounds."""
    unit = draw(st.sampled_from(["day", "s", "ms", "us"]), label="unit")
    kind = pa.date32() if unit == "day" else pa.timestamp(unit, tz=draw(st.sampled_from([None, "UTC"])))
    per_day = 1 if unit == "day" else 86_400 * UNITS[unit]
    near = st.sampled_from([FIRST_DAY - 1, FIRST_DAY, 0, LAST_DAY, LAST_DAY + 1])
    counts = st.builds(lambda d, e: d * per_day + e, near, st.integers(-1, 1))
    wrap = draw(st.sampled_from(["plain", "record", "list", "map"]), label="shape")
    cells = st.none() | {
        "plain": counts, "record": st.fixed_dictionaries({"at": st.none() | counts}),
        "list": st.lists(st.none() | counts, max_size=3), "map": st.lists(st.tuples(st.just("k"), counts), max_size=1),
    }[wrap]
    arrow_type = {"plain": kind, "record": pa.struct([("at", kind)]), "list": pa.list_(kind), "map": pa.map_(pa.string(), kind)}[wrap]
    column = pa.array(draw(st.lists(cells, max_size=6), label="cells"), arrow_type)
    offset = draw(st.integers(0, len(column)), label="slice")
    return column.slice(offset)


@settings(max_examples=200, deadline=None)
@given(column=columns_near_the_bounds())
def test_the_arrow_test_of_pythons_years_finds_what_reading_the_column_finds(column):
    read = column_to_python(column)
    assert beyond_python(column).tolist() == [holds_unreadable(cell) for cell in read]
    assert arrow_array(read, column.type).equals(column)


# ---- Spark: the same rows through each path, against the local runtime ------------


def tag_rows():
    """Tags commands (op, tag date) with date orders, some beyond Python's years."""
    return [
        ("a", {"op": "add", "tag": 19_000}, 1, None),
        ("a", {"op": "add", "tag": LAST_DAY + 10}, 2, None),  # invalid_symbol
        ("b", {"op": "add", "tag": 19_001}, 2, 19_000),
        ("b", {"op": "add", "tag": 19_002}, 3, LAST_DAY + 1),  # bad_order
        ("c", {"op": "add", "tag": None}, 3, None),
        ("c", {"op": "del", "tag": None}, 4, None),
        ("a", {"op": "add", "tag": 0}, 5, None),
    ]


class Counter(Machine):
    """How many events a key has had, whatever their symbols (its values never hold one)."""

    tabulated = True

    def transition(self, key, values, symbol, time):
        return frozenset({next(iter(values), 0) + 1})


PAIRS = Detector(Pattern.begin("a").where("op = 'add'").followed_by("b").where(lambda e: e.op == "add"))
"""Two adds, one a SQL condition, one a function (Spark steps its keys in rounds)."""


def unordered_tag_rows():
    """:func:`tag_rows` without orders (a tabulated machine steps in bulk with integer ones)."""
    return [(*row[:3], None) for row in tag_rows()]


def keyed_rows():
    """Upserts with date keys and timestamp times, some beyond Python's years."""
    at = 19_000 * DAY_US
    return [
        (19_000, "x", at, None),
        (LAST_DAY + 1, "y", at, None),  # bad_key
        (19_001, "z", (LAST_DAY + 2) * DAY_US, None),  # bad_time
        (19_001, "w", at + 1, None),
        (None, "v", at, None),  # null_key
    ]


def timed_rows():
    """Upserts of text at timestamp times, some beyond Python's years (the Arrow step's)."""
    at = 19_000 * DAY_US
    return [("a", "x", at, None), ("a", "y", (LAST_DAY + 1) * DAY_US, None), ("b", "z", at + 1, None),
            ("b", "w", (FIRST_DAY - 1) * DAY_US, None)]


def listed_rows():
    """Upserts of lists of dates, some beyond Python's years."""
    return [("a", [19_000], 1, None), ("a", [LAST_DAY + 1, 0], 2, None), ("b", [], 3, None), ("b", [0, None], 4, None),
            ("c", None, 5, None)]


LISTED_TYPES = {"key": pa.string(), "symbol": pa.list_(pa.date32()), "time": pa.int64(), "order": pa.int64()}
TIMED_TYPES = {"key": pa.string(), "symbol": pa.string(), "time": pa.timestamp("us", tz="UTC"), "order": pa.int64()}
TAGS_TYPES = {"key": pa.string(), "symbol": RECORD, "time": pa.int64(), "order": pa.date32()}
KEYED_TYPES = {"key": pa.date32(), "symbol": pa.string(), "time": pa.timestamp("us", tz="UTC"), "order": pa.date32()}


def as_table(rows, types):
    columns = list(zip(*rows, strict=True))
    return pa.table({name: pa.array(list(cells), types[name]) for name, cells in zip(types, columns, strict=True)})


def outcome(updates, rejected):
    """The updates consolidated, and the rejected rows as Arrow values (key, time,
    reason, detail, symbol and order), sorted."""
    rows = rejected.select(["key", "time", "reason", "detail", "symbol", "order"])
    return consolidate(updates), sorted(map(repr, zip(*(column_to_python(c) for c in rows.columns), strict=True)))


def local_outcome(machine, table):
    result = run_local(machine, table)
    types = dict(zip(table.column_names, table.schema.types, strict=True))
    return outcome(result.updates, rejected_table(result.rejected, types))


@pytest.mark.spark
@pytest.mark.parametrize(
    "machine, rows, types, native",
    [
        pytest.param(Upsert(), tag_rows, TAGS_TYPES, True, id="upsert-native"),
        pytest.param(Upsert(), tag_rows, TAGS_TYPES, False, id="upsert-generic"),
        pytest.param(TabulatedTags(), unordered_tag_rows, {**TAGS_TYPES, "order": pa.int64()}, True, id="tabulated"),
        pytest.param(Counter(), unordered_tag_rows, {**TAGS_TYPES, "order": pa.int64()}, True, id="tabulated-counter"),
        pytest.param(PAIRS, unordered_tag_rows, {**TAGS_TYPES, "order": pa.int64()}, True, id="detector-in-rounds"),
        pytest.param(Upsert(), keyed_rows, KEYED_TYPES, True, id="keys-and-times-native"),
        pytest.param(Upsert(), keyed_rows, KEYED_TYPES, False, id="keys-and-times-generic"),
        pytest.param(Upsert(), timed_rows, TIMED_TYPES, True, id="times-in-arrow"),
        pytest.param(Upsert(), listed_rows, LISTED_TYPES, True, id="lists-native"),
    ],
)
def test_spark_batch_rejects_what_the_local_runtime_rejects(spark, tmp_path, machine, rows, types, native):
    from statemachines.spark import run_batch

    table = as_table(rows(), types)
    pq.write_table(table, tmp_path / "events.parquet")
    frame = spark.read.parquet(str(tmp_path / "events.parquet"))
    value_type = {TabulatedTags: "date", Counter: "long"}.get(type(machine))
    run_batch(machine, frame, order="order", into=tmp_path / "arr", native=native, value_type=value_type)
    arrangement = PersistedArrangement(tmp_path / "arr")
    expected = local_outcome(machine, table)
    assert any("beyond the years" in row for row in expected[1])  # the case holds such rows
    assert outcome(arrangement.updates(), arrangement.rejected()) == expected


@pytest.mark.spark
def test_a_spark_stream_rejects_what_the_local_runtime_rejects(spark, tmp_path):
    from statemachines.spark import run_stream
    from tests.test_contract import FLUSH_KEY, FLUSH_TIME, file_stream

    rows = [*tag_rows(), (FLUSH_KEY, {"op": "add", "tag": 0}, FLUSH_TIME, None)]
    table = as_table(rows, TAGS_TYPES)
    schema = "key string, symbol struct<op: string, tag: date>, time long, order date"
    frame = file_stream(spark, [rows[:4], rows[4:]], schema, tmp_path / "in")
    run_stream(Upsert(), frame, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt", order="order",
               trigger={"availableNow": True}, progress=None).awaitTermination()
    arrangement = PersistedArrangement(tmp_path / "arr")
    got_updates, got_rejected = outcome(arrangement.updates(), arrangement.rejected())
    want_updates, want_rejected = local_outcome(Upsert(), table)
    assert sum("beyond the years" in row for row in want_rejected) == sum(holds_beyond(r[1]) or holds_beyond(r[3]) for r in rows)
    assert got_rejected == want_rejected
    assert got_updates == [u for u in want_updates if u.data[0] != FLUSH_KEY]  # the flush waits for a later watermark


def test_the_command_line_runs_a_file_holding_such_dates_and_shows_its_rejected_rows(tmp_path, capsys):
    from statemachines.library.cli import main

    rows = tag_rows()
    pq.write_table(as_table(rows, TAGS_TYPES), tmp_path / "events.parquet")
    assert main(["run", "upsert", str(tmp_path / "events.parquet"), "--into", str(tmp_path / "arr"), "--order", "order"]) == 0
    assert "1 bad_order, 1 invalid_symbol" in capsys.readouterr().out
    assert main(["show", str(tmp_path / "arr"), "--rejected"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("beyond the years 1 to 9999") == 2 and "10000-01-01" in shown


FEED = {"id": pa.int64(), "born": pa.date32(), "lsn": pa.int64()}
FEED_ROWS = [(1, 0, 1), (2, LAST_DAY + 1, 2), (1, 19_000, 3), (3, None, 4), (2, 5, 5)]


def local_feed(tmp_path):
    from statemachines.library import ChangeFeed, run_feed

    found = run_feed(ChangeFeed(keys=["id"], sequence_by=["lsn"]), as_table(FEED_ROWS, FEED), into=tmp_path / "local")
    rejected = sorted((r.reason.value, r.detail) for r in found.result.rejected)
    return consolidate(PersistedArrangement(tmp_path / "local").updates()), rejected


def test_a_change_feed_row_holding_such_a_date_is_rejected_and_the_rest_applied(tmp_path):
    updates, rejected = local_feed(tmp_path)
    assert rejected == [("invalid_symbol", beyond_python_detail("symbol"))]
    applied = [(1, (dt.date(1970, 1, 1),)), (1, (dt.date(2022, 1, 8),)), (3, (None,)), (2, (dt.date(1970, 1, 6),))]
    assert sorted(u.data for u in updates if u.diff > 0) == sorted(applied)


@pytest.mark.spark
def test_a_change_feed_on_spark_rejects_the_row_as_locally(spark, tmp_path):
    from statemachines.library import ChangeFeed
    from statemachines.spark import run_feed_batch

    pq.write_table(as_table(FEED_ROWS, FEED), tmp_path / "feed.parquet")
    frame = spark.read.parquet(str(tmp_path / "feed.parquet"))
    run_feed_batch(ChangeFeed(keys=["id"], sequence_by=["lsn"]), frame, into=tmp_path / "spark")
    arrangement = PersistedArrangement(tmp_path / "spark")
    kept = arrangement.rejected()
    rejected = sorted(zip(kept.column("reason").to_pylist(), kept.column("detail").to_pylist(), strict=True))
    assert (consolidate(arrangement.updates()), rejected) == local_feed(tmp_path)
