"""Tabulated machines: the class check, and the batch path stepping them in bulk
gives exactly the rows of stepping them event by event, on any input."""

from __future__ import annotations

import contextlib
import enum

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError, Machine, Refused, run_local
from statemachines.columns import python_rows
from statemachines.intake import INT64_MAX
from statemachines.spark.batch import partition_runner
from statemachines.spark.output import EVENT_ROW, STATE_ROW, UPDATE


class Shouted(enum.StrEnum):
    SHOUTED = "shouted"


class Tags(Machine):
    """A tag set; "boom" fails, "!x" refuses, "#" adds a value a text column refuses."""

    tabulated = True

    def transition(self, key, values, symbol, time):
        if symbol == "boom":
            raise RuntimeError("boom")
        if symbol.startswith("!"):
            raise Refused(Shouted.SHOUTED, symbol)
        if symbol == "#":
            return values | {7}
        tag = symbol[1:]
        return values | {tag} if symbol[0] == "+" else values - {tag}


def test_a_tabulated_class_that_reads_a_key_or_a_time_is_refused_when_it_is_created():
    with pytest.raises(DefinitionError, match="reads key"):
        class ByKey(Machine):
            tabulated = True

            def transition(self, key, values, symbol, time):
                return values | {key}

    with pytest.raises(DefinitionError, match="reads time"):
        class ByTime(Machine):
            tabulated = True

            def transition(self, key, values, symbol, time):
                return values | {(lambda: time)()}

    with pytest.raises(DefinitionError, match="defines initial_values"):
        class Started(Machine):
            tabulated = True

            def transition(self, key, values, symbol, time):
                return values

            def initial_values(self, key):
                return frozenset({"new"})

    assert Tags.spec.tabulated


SCHEMA = pa.schema([
    ("key", pa.string()), ("kind", pa.int8()), ("symbol", pa.string()), ("time", pa.int64()),
    ("order", pa.int64()), ("prior", pa.list_(pa.string())),
])
OUTPUT = pa.schema([
    ("kind", pa.int8(), False), ("key", pa.string()), ("value", pa.string()), ("time", pa.int64()),
    ("diff", pa.int64()), ("symbol", pa.string()), ("order", pa.int64()), ("reason", pa.string()),
    ("detail", pa.string()),
])

# mostly plain events, so that most keys step in bulk beside the few that cannot
keys = st.sampled_from(["a", "b", "c", "d"] * 4 + [None])
symbols = st.sampled_from(["+x", "+y", "-x", "-y", "+z"] * 5 + ["boom", "!no", "#"])
times = st.sampled_from([0, 1, 2, 3] * 6 + [None, INT64_MAX, -1])
orders = st.sampled_from([0, 1, None])
events = st.lists(st.tuples(keys, symbols, times, orders), max_size=60)
priors = st.dictionaries(st.sampled_from(["a", "b", "e"]), st.frozensets(st.sampled_from(["x", "y", "q"]), max_size=2))


KEY = pa.struct([("tenant", pa.string()), ("id", pa.int64()), ("day", pa.date32())])  # a key of several columns
BEYOND_DAY = 2_932_897  # 10000-01-01: no Python date


def composite_keys(beyond=True):
    """Keys of several columns (dates as day counts): null fields, one beyond Python's years."""
    return st.tuples(
        st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None]),
        st.sampled_from([18_262, None] + ([BEYOND_DAY] if beyond else [])),
    )


def _null_first(value):
    """Nulls first; a key of several columns field by field (as Spark sorts a struct)."""
    if isinstance(value, tuple):
        return (True, tuple(map(_null_first, value)))
    return (value is not None, value if value is not None else 0)


def partition_rows(events, priors, schema=SCHEMA):
    """The rows Spark hands a partition: events and state rows, sorted by key, kind,
    time and order (nulls first)."""
    rows = [(k, EVENT_ROW, s, t, o, []) for k, s, t, o in events]
    rows += [(k, STATE_ROW, None, None, None, sorted(values)) for k, values in priors.items()]
    rows.sort(key=lambda r: (_null_first(r[0]), r[1], _null_first(r[3]), _null_first(r[4])))
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    return table if priors else table.drop_columns(["kind", "prior"])  # no prior values: events only


def emitted(runner, table, chunk_rows):
    """The rows ``runner`` yields for ``table``, in the order it yields them, as the
    runtimes read them (NaN one value, a date beyond Python's years an Unreadable)."""
    batches = table.to_batches(max_chunksize=chunk_rows) if table.num_rows else []
    return [row for batch in runner(iter(batches)) for row in python_rows(batch)]


@contextlib.contextmanager
def chunks_of(rows):
    """Partitions cut into chunks of about ``rows`` rows, not the runners' default."""
    import statemachines.spark.tabulated as tabulated

    saved, tabulated.CHUNK_ROWS = tabulated.CHUNK_ROWS, rows
    try:
        yield
    finally:
        tabulated.CHUNK_ROWS = saved


def output_rows(runner, table, chunk_rows):
    return sorted(emitted(runner, table, chunk_rows), key=repr)


@settings(max_examples=150, deadline=None)
@given(events, priors, st.integers(1, 7), st.sampled_from([None, 2]))
def test_stepping_in_bulk_gives_the_rows_of_stepping_event_by_event(events, priors, chunk_rows, lower):
    """Bad times (null, the greatest long, below the frontier), null keys, events at
    one time with equal orders or none, transitions that fail or refuse, values the output
    refuses, prior values, chunks cut anywhere: the same rows, with the same reasons, and
    the updates in key order (as the task writes them to a file)."""
    table = partition_rows(events, priors)
    machine = Tags()
    check = partition_runner(machine, "number", lower, None, OUTPUT, tabulate=False)
    bulk = partition_runner(machine, "number", lower, None, OUTPUT)
    with chunks_of(chunk_rows):
        assert output_rows(bulk, table, 3) == output_rows(check, table, 3)
        keys = [row[1] for row in emitted(bulk, table, 3) if row[0] == UPDATE]
        assert keys == sorted(keys)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.none() | composite_keys(), symbols, times, orders), max_size=60),
    st.dictionaries(composite_keys(beyond=False), st.frozensets(st.sampled_from(["x", "y", "q"]), max_size=2)),
    st.integers(1, 7),
)
def test_keys_of_several_columns_step_in_bulk_as_event_by_event(events, priors, chunk_rows):
    """Keys that are records (null fields, null keys, a date beyond Python's years:
    refused), told apart by their fields' codes: the same rows as event by event."""
    from statemachines.spark.tabulated import bulk_key_type

    assert bulk_key_type(KEY)
    schema, output = (s.set(s.get_field_index("key"), pa.field("key", KEY)) for s in (SCHEMA, OUTPUT))
    table = partition_rows(events, priors, schema)
    check = partition_runner(Tags(), "number", None, None, output, tabulate=False)
    bulk = partition_runner(Tags(), "number", None, None, output)
    with chunks_of(chunk_rows):
        assert output_rows(bulk, table, 3) == output_rows(check, table, 3)


def test_a_table_that_would_outgrow_its_cells_leaves_the_partition_to_the_event_by_event_path(monkeypatch):
    """A machine meeting more distinct values and symbols than the table holds (as an
    upsert would) is stepped event by event from that chunk on: the same rows."""
    import random

    import statemachines.tabulated as core

    rnd = random.Random(3)
    events = [(f"k{rnd.randrange(6)}", f"+{rnd.randrange(40)}", t // 6, t % 6) for t in range(300)]
    table = partition_rows(events, {"k1": frozenset({"x"})})
    machine = Tags()
    check = partition_runner(machine, "number", None, None, OUTPUT, tabulate=False)
    monkeypatch.setattr(core, "MAX_CELLS", 64)
    bulk = partition_runner(machine, "number", None, None, OUTPUT)
    assert output_rows(bulk, table, 50) == output_rows(check, table, 50)


def test_the_bulk_path_asks_the_transition_once_per_pair_and_agrees_with_run_local():
    class Counting(Machine):
        tabulated = True
        asked: list = []

        def transition(self, key, values, symbol, time):
            Counting.asked.append((values, symbol))
            op, tag = symbol[0], symbol[1:]
            return values | {tag} if op == "+" else values - {tag}

    events = [(f"k{i % 50}", f"{'+-'[i % 3 == 0]}{'xyz'[i % 7 % 3]}", i // 50, i % 50) for i in range(2_000)]
    table = partition_rows(events, {})
    out = output_rows(partition_runner(Counting(), "number", None, None, OUTPUT), table, 1024)
    assert len(Counting.asked) == len(set(Counting.asked)) < 60
    local = run_local(Counting(), events).updates
    assert sorted(((r[1], r[2]), r[3], r[4]) for r in out) == sorted(local)


fields = st.none() | st.sampled_from(["a", "b", ""])
structs = st.none() | st.tuples(fields, st.none() | st.integers(-2, 2))


@given(st.lists(structs, max_size=30))
def test_symbols_found_equal_in_arrow_are_exactly_the_equal_ones(rows):
    """Codes of struct symbols (nulls in the struct and in its fields) are equal
    exactly where the symbols the machine would see are equal."""
    from statemachines.columns import column_to_python
    from statemachines.spark.tabulated import _codes

    column = pa.array(
        [None if r is None else {"op": r[0], "n": r[1]} for r in rows],
        pa.struct([("op", pa.string()), ("n", pa.int64())]),
    )
    codes = _codes(column)
    seen = column_to_python(column)
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (codes[i] == codes[j]) == (seen[i] == seen[j])
