"""A tabulated machine's partitions in bulk (see :mod:`statemachines.tabulated`).

The generic batch path hands each partition to Python sorted by key, row kind, time
and order, and steps it key by key, event by event. For a machine that declares
``tabulated`` the partition is cut into chunks of whole keys and each chunk is
stepped at once: the transition is asked once per distinct ``(values, symbol)``
pair met, keys move in lockstep in numpy, and each changed ``(key, time)`` writes
the difference of its values before and after.

A key goes the generic way instead (event by event, the same rows out) when one of
its events is anything but plain (a null key or time, a time below the frontier or
at the greatest long, two events at one time with one order or none) or meets a
pair the transition rejects. A chunk whose columns are not plain (times or orders
other than integers, keys Arrow cannot compare, symbols that are not hashable) goes
the generic way whole.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Machine
from statemachines.columns import beyond_python, column_to_python, same_items, value_check_for
from statemachines.intake import INT64_MAX, plain_key_type
from statemachines.spark.output import EVENT_ROW, checked_arrays, update_rows
from statemachines.tabulated import TableFull, TransitionTable, step_keys

__all__ = [
    "CHUNK_ROWS", "bulk_key_type", "distinct_symbols", "held_beyond_python", "key_groups", "plain_events", "plain_times", "positions_in", "runs_tabulated",
    "tabulated_runner", "tied_with_previous",
    "whole_key_chunks",
]

_GREATEST_US = (_dt.datetime.max - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1)
"""The greatest datetime, in microseconds since 1970 (see the intake)."""

CHUNK_ROWS = 65_536
"""Rows of a partition stepped at once (cut at a key's first row)."""


def runs_tabulated(machine: Machine) -> bool:
    """Whether the batch path steps ``machine`` in bulk: it is tabulated, and has no
    hook that looks at each event (symbol checks, symbol preparation, settings)."""
    spec = machine.spec
    return spec.tabulated and not (spec.validates_symbols or spec.prepares_symbols or spec.keeps_settings)


def tabulated_runner(
    machine: Machine,
    lower: Any,
    arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]],
    counter: Any = None,
    check_values: bool = True,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The partition function: whole keys in chunks; ``generic`` (the per-event
    partition function, counting nothing) takes the rows of the keys that are not
    plain. ``counter``, an accumulator, is given the number of events the partition
    held; ``check_values`` as for the generic path."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        check = value_check_for(arrow_schema.field("value").type) if check_values else None
        table: TransitionTable | None = TransitionTable(machine, check)
        for chunk in whole_key_chunks(batches, counter):
            table = yield from _chunk_or_generic(chunk, table, lower, arrow_schema, generic)

    return run


def whole_key_chunks(batches: Iterator[Any], counter: Any = None) -> Iterator[Any]:
    """A partition's batches as tables of about :data:`CHUNK_ROWS` rows, each cut
    at a key's first row (a key's rows all in one); ``counter``, an accumulator, is
    given the number of event rows once all are read."""
    held: list[Any] = []
    rows = events = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        events += pc.sum(pc.equal(batch.column("kind"), EVENT_ROW)).as_py() or 0
        if rows >= CHUNK_ROWS:
            chunk = pa.Table.from_batches(held)
            cut = _last_key_start(chunk)
            if cut:
                yield chunk.slice(0, cut)
                chunk = chunk.slice(cut)
            held, rows = chunk.to_batches(), chunk.num_rows
    if rows:
        yield pa.Table.from_batches(held)
    if counter is not None:
        counter.add(events)


def _chunk_or_generic(
    chunk: Any, table: TransitionTable | None, lower: Any, arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]],
) -> Iterator[Any]:
    """:func:`_chunk`, or the generic way once the table is full (for this chunk and
    the rest of the partition). Returns the table to go on with (``None``: full)."""
    if table is not None:
        try:
            batches = list(_chunk(chunk, table, lower, arrow_schema, generic))
        except TableFull:
            table = None
        else:
            yield from batches
            return table
    yield from generic(iter(chunk.to_batches()))
    return None


def _last_key_start(chunk: Any) -> int:
    """Where the rows of the chunk's last key begin (0: it has one key)."""
    keys = chunk.column("key")
    last = keys[len(keys) - 1]
    if not last.is_valid:
        return 0
    if pa.types.is_nested(keys.type):  # records and lists do not compare in Arrow
        codes = _item_codes(keys)
        found = np.flatnonzero(codes != codes[-1])
        return int(found[-1]) + 1 if len(found) else 0
    differ = pc.invert(pc.fill_null(same_items(keys, last), False))
    found = np.flatnonzero(differ.to_numpy(zero_copy_only=False))
    return int(found[-1]) + 1 if len(found) else 0


def _chunk(
    chunk: Any, table: TransitionTable, lower: Any, arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]],
) -> Iterator[Any]:
    """The output batches of a chunk of whole keys."""
    if not _plain_columns(chunk, lower):
        yield from generic(iter(chunk.to_batches()))
        return
    new_key, group, is_event, times = key_groups(chunk)
    starts = np.flatnonzero(new_key)
    odd = is_event & ~plain_events(chunk, lower)
    irregular = np.zeros(len(starts), bool)
    irregular[group[odd | tied_with_previous(chunk, new_key, is_event, times)]] = True

    key_list = column_to_python(chunk.column("key").take(pa.array(starts)))
    initial = np.zeros(len(starts), np.int64)
    state_rows = np.flatnonzero(~is_event)
    if len(state_rows):
        priors: dict[int, list[Any]] = {}
        for g, prior in zip(group[state_rows].tolist(), column_to_python(chunk.column("prior").take(pa.array(state_rows))), strict=True):
            priors.setdefault(g, []).extend(prior)
        for g, prior in priors.items():
            initial[g] = table.state_id(frozenset(prior))

    stepped = np.flatnonzero(is_event & ~irregular[group])
    try:
        symbols = _symbol_ids(chunk.column("symbol").take(pa.array(stepped)), table)
    except TypeError:  # a symbol that cannot be hashed: every key the generic way
        yield from generic(iter(chunk.to_batches()))
        return
    numbered = np.unique(group[stepped], return_inverse=True)
    first, before, after, met = step_keys(
        table, numbered[1].astype(np.int64), initial[numbered[0]], symbols, times[stepped],
        [key_list[g] for g in numbered[0].tolist()],
    )
    irregular[numbered[0][met]] = True
    updates = list(_updates(chunk, stepped[first], before, after, table, arrow_schema))
    if not irregular.any():
        yield from updates
        return
    # the keys stepped event by event join the others in key order (a file's row
    # groups then hold key ranges)
    rows = np.flatnonzero(irregular[group])
    out = pa.Table.from_batches([*updates, *generic(iter(chunk.take(pa.array(rows)).to_batches()))], arrow_schema)
    yield from out.take(pc.sort_indices(out, [("key", "ascending")])).to_batches()


def key_groups(chunk: Any) -> tuple[Any, Any, Any, Any]:
    """Per row of a chunk sorted by key (a plain key type, see :func:`bulk_key_type`):
    whether it is its key's first, its key's number (0, 1, ...), whether it is an
    event, its time (null: 0)."""
    n = chunk.num_rows
    keys = chunk.column("key")
    if pa.types.is_struct(keys.type):  # keys of several columns
        codes = _item_codes(keys)
        new_key = np.r_[True, codes[1:] != codes[:-1]]
    else:
        new_key = np.r_[True, pc.fill_null(pc.not_equal(keys.slice(1), keys.slice(0, n - 1)), True).to_numpy(zero_copy_only=False)]
    is_event = pc.equal(chunk.column("kind"), EVENT_ROW).to_numpy(zero_copy_only=False)
    return new_key, np.cumsum(new_key) - 1, is_event, chunk.column("time").fill_null(0).to_numpy()


def tied_with_previous(chunk: Any, new_key: Any, is_event: Any, times: Any) -> Any:
    """Per row of a chunk (as :func:`key_groups` reads it), whether it is an event
    at the time of the row before, of the same key, whose rank Spark's sort does not
    settle (equal orders, or none): the intake ranks such events by their symbols."""
    orders = chunk.column("order").fill_null(0).to_numpy()
    ordered = chunk.column("order").is_valid().to_numpy(zero_copy_only=False)
    tied = np.where(ordered[1:] & ordered[:-1], orders[1:] == orders[:-1], ~ordered[1:] & ~ordered[:-1])
    return np.r_[False, (~new_key[1:]) & is_event[1:] & is_event[:-1] & (times[1:] == times[:-1]) & tied]


def _symbol_ids(symbols: Any, table: TransitionTable) -> Any:
    """The table's ids of ``symbols`` (an Arrow column)."""
    distinct, inverse = distinct_symbols(symbols)
    return table.symbol_ids(distinct)[inverse]


def distinct_symbols(symbols: Any) -> tuple[list[Any], Any]:
    """The distinct values of an Arrow column as Python objects (as
    :func:`column_to_python` makes them), and each row's index among them. Equal
    symbols are found in Arrow where it can tell (codes from each field's
    dictionary), so only the distinct ones become Python objects; otherwise each
    row's symbol does."""
    codes = _codes(symbols)
    if codes is None:
        return column_to_python(symbols), np.arange(len(symbols))
    inverse, _ = pd.factorize(codes)
    return column_to_python(symbols.take(pa.array(_first_of_each(inverse)))), inverse


def positions_in(values: Any, value_set: Any) -> Any:
    """Where each of ``values`` first is in ``value_set`` (an array of int32, null
    where absent), as :func:`pyarrow.compute.index_in` finds it, for records too:
    those are looked up by their codes (:func:`_item_codes`).

    >>> kind = pa.struct([("tenant", pa.string()), ("id", pa.int64())])
    >>> keys = pa.array([("b", 1), ("a", 2), ("a", None)], kind)
    >>> positions_in(keys, pa.array([("a", 2), ("b", 1)], kind)).to_pylist()
    [1, 0, None]
    """
    values, value_set = (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in (values, value_set))
    if not pa.types.is_struct(values.type):
        return pc.index_in(values, value_set=value_set)
    codes = _item_codes(pa.concat_arrays([values, value_set.cast(values.type)]))
    return pc.index_in(pa.array(codes[: len(values)]), value_set=pa.array(codes[len(values):]))


def _item_codes(column: Any) -> Any:
    """Integers equal exactly where the items of ``column`` are equal (as Python finds
    the values :func:`column_to_python` makes of them equal): :func:`_codes`, or where
    Arrow cannot code them, numbered in Python."""
    codes = _codes(column)
    if codes is None:
        numbers: dict[Any, int] = {}
        codes = np.fromiter((numbers.setdefault(item, len(numbers)) for item in column_to_python(column)), np.int64, len(column))
    return codes


def _first_of_each(numbers: Any) -> Any:
    """Where each of the numbers 0, 1, ... first occurs in ``numbers``, whose new
    numbers come in that order (as :func:`pandas.factorize` numbers them)."""
    seen = np.maximum.accumulate(np.r_[-1, numbers[:-1]])
    return np.flatnonzero(numbers > seen)


def _codes(column: Any) -> Any:
    """Integers equal exactly where the values of ``column`` are equal (nulls too), or
    ``None`` for a column Arrow cannot encode so (floats, lists, maps; too many fields)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_struct(column.type):
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        parts = [valid, *(_codes(column.field(i)) for i in range(column.type.num_fields))]
        if any(part is None for part in parts):
            return None
        codes, bound = np.zeros(len(column), np.int64), 1
        for part in parts:
            part = np.asarray(part, np.int64)
            width = int(part.max(initial=0)) + 1
            if bound * width >= 1 << 62:
                return None
            codes, bound = codes * width + part, bound * width
        return np.where(valid, codes, 0)
    if pa.types.is_floating(column.type) or pa.types.is_nested(column.type):
        return None
    encoded = pc.dictionary_encode(column)
    return encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


def _plain_columns(chunk: Any, lower: Any) -> bool:
    """Whether the chunk's columns (and the frontier) allow stepping in bulk."""
    schema = chunk.schema
    if not (pa.types.is_integer(schema.field("time").type) and pa.types.is_integer(schema.field("order").type)):
        return False
    if lower is not None and type(lower) is not int:
        return False
    return bulk_key_type(schema.field("key").type)


def bulk_key_type(kind: Any) -> bool:
    """Whether keys of Arrow type ``kind`` step in bulk: integers, text or bytes, or
    records (keys of several columns, told apart by their fields' codes) of such
    fields, booleans, decimals, dates and microsecond timestamps (those beyond
    Python's years the intake refuses, see :func:`plain_events`)."""
    if pa.types.is_struct(kind):
        return kind.num_fields > 0 and all(_plain_key_field(kind.field(i).type) for i in range(kind.num_fields))
    return pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)


def _plain_key_field(kind: Any) -> bool:
    return (
        plain_key_type(kind) or pa.types.is_boolean(kind) or pa.types.is_decimal128(kind)
        or pa.types.is_date32(kind) or (pa.types.is_timestamp(kind) and kind.unit == "us")
    )


def plain_events(chunk: Any, lower: Any) -> Any:
    """For each row (a numpy array), whether it is an event the intake takes as it
    is: :func:`plain_times`, and nothing in its key or symbol beyond Python's years."""
    return plain_times(chunk, lower) & ~held_beyond_python(chunk)


def held_beyond_python(chunk: Any) -> Any:
    """For each row (a numpy array), whether its key or symbol holds a date or time
    beyond Python's years (the intake refuses its event, after reading its order)."""
    return beyond_python(chunk.column("key")) | beyond_python(chunk.column("symbol"))


def plain_times(chunk: Any, lower: Any) -> Any:
    """For each row (a numpy array), whether the intake takes its key and time as they
    are (and goes on to its order): a key and a time, the time neither the greatest
    long or datetime, nor beyond Python's years, nor below ``lower``."""
    time = chunk.column("time")
    ok = pc.and_kleene(chunk.column("key").is_valid(), time.is_valid())
    if time.type == pa.int64():  # the greatest long is reserved (see the intake)
        ok = pc.and_kleene(ok, pc.not_equal(time, pa.scalar(INT64_MAX, time.type)))
    elif pa.types.is_timestamp(time.type):  # and so is the greatest datetime
        ok = pc.and_kleene(ok, pc.not_equal(time.cast(pa.int64()), pa.scalar(_GREATEST_US, pa.int64())))
    if lower is not None:
        ok = pc.and_kleene(ok, pc.greater_equal(time, pa.scalar(lower, time.type)))
    return pc.fill_null(ok, False).to_numpy(zero_copy_only=False) & ~beyond_python(time)


def _updates(chunk: Any, rows: Any, before: Any, after: Any, table: TransitionTable, arrow_schema: Any) -> Iterator[Any]:
    """The updates of the changed ``(key, time)`` whose first event is at ``rows``."""
    if not len(rows):
        return
    width = len(table.states)
    inverse, pairs = pd.factorize(before * width + after)  # hashing: no sort
    index: dict[Any, int] = {}
    value_ids: list[int] = []
    diffs: list[int] = []
    starts, counts = [], []
    for code in pairs.tolist():
        old, new = table.states[code // width], table.states[code % width]
        starts.append(len(value_ids))
        changes = [(v, -1) for v in old - new] + [(v, 1) for v in new - old]
        counts.append(len(changes))
        for value, diff in changes:
            value_ids.append(index.setdefault(value, len(index)))
            diffs.append(diff)
    values = list(index)
    repeat = np.asarray(counts, np.int64)[inverse]
    total = int(repeat.sum())
    at = np.repeat(np.asarray(starts, np.int64)[inverse] - (np.cumsum(repeat) - repeat), repeat) + np.arange(total)
    origin = pa.array(np.repeat(rows, repeat))
    (value_column,) = checked_arrays([values], pa.schema([arrow_schema.field("value")]))
    columns = {
        "key": chunk.column("key").take(origin),
        "value": value_column.take(pa.array(np.asarray(value_ids, np.int64)[at])),
        "time": chunk.column("time").take(origin),
        "diff": pa.array(np.asarray(diffs, np.int64)[at]),
    }
    yield update_rows(columns, arrow_schema)
