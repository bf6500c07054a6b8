"""Upsert computed in Arrow: the winner of each key and time, and the changes it makes.

Both Spark runtimes step exactly :class:`~statemachines.library.Upsert` over plain
columns (keys and symbols of integers or text, orders of either or none, times of
integers or microsecond timestamps) with whole-column operations instead of the
runtime's event by event, with the same updates and rejections: a stream's bucket
(:mod:`statemachines.spark.bucket_upsert`) and a batch run's partition
(:func:`upsert_runner`, here). Symbols may also be records, as a change feed's rows
are, of fields Arrow compares as Python does (:func:`compared_like_python`: text,
integers, booleans, floats, decimals, bytes, dates, timestamps), and so may keys, as
a feed's keys of several columns are (of such fields but floats,
:func:`~statemachines.spark.tabulated.bulk_key_type`). Of a partition's
rows, in chunks of whole keys:

==========================  ==========================================================
rows                        in Arrow
==========================  ==========================================================
a key's value before        its state row (from the arrangement): at most one value
events the intake takes     sort by ``(key, time, order, symbol)``; the last command
as they are                 of each ``(key, time)`` wins; each winner is compared
                            with the key's winner before it, or its value before
other events                each refused by the runtime's own
                            :class:`~statemachines.intake.Intake`, for the same
                            reason and detail
==========================  ==========================================================

    before  after  updates at the winner's time
    absent  v      (k, v) +1
    v       w      (k, v) -1, (k, w) +1
    v       None   (k, v) -1
    v       v      (nothing)

A chunk holding a key with several values before (an arrangement another machine
wrote), or unequal records at one ``(key, time, order)`` (Arrow cannot rank records
as Python does), goes the generic way, event by event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Intake, Machine, Rejected
from statemachines.columns import python_rows, same_items
from statemachines.library import Upsert
from statemachines.spark.output import STATE_ROW, OutputRows, update_rows
from statemachines.spark.tabulated import (
    bulk_key_type,
    plain_events,
    positions_in,
    whole_key_chunks,
)

__all__ = [
    "changes", "compared_like_python", "equal_values", "last_per_key", "last_per_key_time", "ordered_like_python", "plain_record", "plain_upsert",
    "refusals", "runs_in_arrow", "steps", "upsert_runner", "winners",
]


def ordered_like_python(kind: Any) -> bool:
    """Whether Arrow sorts and compares values of ``kind`` as the intake's Python does."""
    return pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)


def runs_in_arrow(machine: Machine, arrow_schema: Any) -> bool:
    """Whether a batch run's partitions of ``machine``, giving rows of ``arrow_schema``
    (see :func:`~statemachines.spark.output.output_schema`), are stepped in Arrow."""
    field = arrow_schema.field
    return plain_upsert(machine, *(field(name).type for name in ("key", "value", "symbol", "time", "order")))


def plain_upsert(machine: Machine, key: Any, value: Any, symbol: Any, time: Any, order: Any) -> bool:
    """Whether ``machine`` over columns of these Arrow types steps in Arrow: it is
    exactly ``Upsert``, its values are its symbols in a column of their type, and keys,
    symbols (or their records' fields), orders and times are plain."""
    return (
        type(machine) is Upsert
        and value == symbol
        and (ordered_like_python(key) or (pa.types.is_struct(key) and bulk_key_type(key)))
        and (ordered_like_python(symbol) or plain_record(symbol))
        and (ordered_like_python(order) or pa.types.is_null(order))
        and (pa.types.is_signed_integer(time) or (pa.types.is_timestamp(time) and time.unit == "us"))
    )


def plain_record(kind: Any) -> bool:
    """Whether ``kind`` is a struct of fields :func:`compared_like_python`: records
    Arrow compares as Python does, but cannot sort."""
    return pa.types.is_struct(kind) and kind.num_fields > 0 and all(
        compared_like_python(kind.field(i).type) for i in range(kind.num_fields)
    )


def compared_like_python(kind: Any) -> bool:
    """Whether Arrow tells two values of ``kind`` equal as Python tells the values the
    intake makes of them equal (:func:`equal_values`): those :func:`ordered_like_python`,
    booleans, bytes, decimals, dates and microsecond timestamps (instants, as the
    intake's are; those beyond Python's years the intake refuses, see
    :func:`~statemachines.spark.tabulated.plain_events`), and floats (NaN one value;
    no ``-0.0``: the events were prepared, :func:`~statemachines.spark.batch.prepare_events`)."""
    return (
        ordered_like_python(kind) or pa.types.is_boolean(kind) or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind) or pa.types.is_decimal128(kind) or pa.types.is_floating(kind)
        or pa.types.is_date32(kind) or (pa.types.is_timestamp(kind) and kind.unit == "us")
    )


def upsert_runner(
    machine: Machine, kind: str, lower: Any, arrow_schema: Any,
    generic: Callable[[Iterator[Any]], Iterator[Any]], counter: Any = None,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The partition function of a batch run (rows sorted by key, row kind, time and
    order, as the generic path's): whole keys in chunks, each in Arrow; ``generic``
    (the per-event partition function, counting nothing) takes a chunk Arrow cannot
    step (see the module documentation). ``kind``: the run's time kind; ``lower``:
    times below it are late. ``counter``, an accumulator, is given the number of events."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        intake = Intake(machine, kind=kind)
        for chunk in whole_key_chunks(batches, counter):
            yield from _chunk(chunk, intake, lower, arrow_schema, generic)

    return run


def _chunk(
    chunk: Any, intake: Intake, lower: Any, arrow_schema: Any, generic: Callable[[Iterator[Any]], Iterator[Any]],
) -> Iterator[Any]:
    """The output batches of a chunk of whole keys: its updates, then its rejections."""
    is_state = pc.equal(chunk.column("kind"), STATE_ROW)
    events = chunk.filter(pc.invert(is_state)).select(["key", "symbol", "time", "order"])
    state = chunk.filter(is_state)
    if state.num_rows and (
        not pc.all(pc.equal(pc.list_value_length(state.column("prior")), 1)).as_py()
        or not steps(state.column("key")).all()  # a key with several values: a state row each
    ):
        yield from generic(iter(chunk.to_batches()))
        return
    taken = pa.array(plain_events(events, lower))
    won = winners(events.filter(taken))
    if won is None:
        yield from generic(iter(chunk.to_batches()))
        return
    value_type = arrow_schema.field("value").type
    if state.num_rows:
        values = pc.list_flatten(state.column("prior")).cast(value_type)
        before = values.take(positions_in(won.column("key"), state.column("key")))
    else:
        before = pa.nulls(won.num_rows, value_type)
    updates = changes(won, before)
    if updates.num_rows:
        ordered = updates.take(pc.sort_indices(updates, [("key", "ascending"), ("time", "ascending"), ("diff", "ascending")]))
        yield update_rows({name: ordered.column(name) for name in ordered.column_names}, arrow_schema)
    refused = events.filter(pc.invert(taken))
    if refused.num_rows:
        out = OutputRows(arrow_schema)
        out.add(rejected=refusals(intake, python_rows(refused), lower))
        yield out.take()


def refusals(intake: Intake, rows: Iterable[Any], frontier: Any) -> list[Rejected]:
    """The rejection of each of ``rows`` (event tuples the upsert step did not take,
    or a :class:`~statemachines.Rejected` as it stands) by ``intake`` at ``frontier``."""
    out = []
    for row in rows:
        checked = row if type(row) is Rejected else intake.check(row, frontier)
        if type(checked) is not Rejected:
            raise AssertionError(f"the intake takes {row!r}, which the upsert step refused")
        out.append(checked)
    return out


def last_per_key_time(events: Any) -> Any:
    """The command that wins each ``(key, time)`` (the last by ``order``, then symbol,
    nulls first), in ``(key, time)`` order."""
    if events.num_rows == 0:
        return events
    ranked = events.take(
        pc.sort_indices(
            events,
            sort_keys=[(name, "ascending", "at_start") for name in ("key", "time", "order", "symbol")],
        )
    )
    return ranked.filter(_last_of_runs(ranked["key"], ranked["time"]))


def winners(events: Any) -> Any:
    """:func:`last_per_key_time` of ``events``, or ``None`` where their symbols are
    records (which Arrow cannot sort) and two unequal ones are at one ``(key, time,
    order)``: their symbols would rank them. Equal records (a row delivered twice)
    win alike."""
    if ordered_like_python(events.schema.field("symbol").type):
        return last_per_key_time(events)
    ranked = events.take(
        pc.sort_indices(events, sort_keys=[(name, "ascending", "at_start") for name in ("key", "time", "order")])
    )
    tied = ~steps(ranked["key"], ranked["time"], ranked["order"])
    if tied.any() and steps(ranked["symbol"])[tied].any():
        return None
    return ranked.filter(_last_of_runs(ranked["key"], ranked["time"]))


def last_per_key(winners: Any) -> tuple[Any, Any]:
    """Each key of ``winners`` (in key order) and the value its last command leaves."""
    kept = winners.filter(_last_of_runs(winners["key"]))
    return kept["key"].combine_chunks(), kept["symbol"].combine_chunks()


def _last_of_runs(*columns: Any) -> Any:
    """Whether each row is the last of its run of equal values in ``columns``."""
    changed = steps(*columns)
    return pa.array(np.append(changed, True) if len(columns[0]) else changed)


def steps(*columns: Any) -> Any:
    """Whether each row after the first differs from the one before it in ``columns``
    (a numpy array, one shorter than the columns), as Python compares them: a null
    follows a null without a step."""
    n = len(columns[0])
    changed = np.zeros(max(n - 1, 0), dtype=bool)
    for column in columns if n else ():
        changed |= pc.invert(equal_values(column.slice(1), column.slice(0, n - 1))).to_numpy(zero_copy_only=False)
    return changed


def equal_values(left: Any, right: Any) -> Any:
    """Whether each item of ``left`` equals ``right``'s as Python compares them (None
    equals None; records field by field), without nulls.

    >>> import pyarrow as pa
    >>> kind = pa.struct([("name", pa.string()), ("n", pa.int64())])
    >>> left = pa.array([{"name": "a", "n": None}, None, {"name": None, "n": None}], kind)
    >>> right = pa.array([{"name": "a", "n": None}, None, None], kind)
    >>> equal_values(left, right).to_pylist()
    [True, True, False]
    """
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    if pa.types.is_struct(left.type):
        same = pc.and_(left.is_valid(), right.is_valid())
        for left_field, right_field in zip(left.flatten(), right.flatten(), strict=True):
            same = pc.and_(same, equal_values(left_field, right_field))
        return pc.or_(same, both_null)
    return pc.or_(pc.fill_null(same_items(left, right), False), both_null)


def changes(winners: Any, before: Any) -> Any:
    """The updates ``key, value, time, diff`` of the winners, each compared with the
    key's winner before it or, for its first, with ``before`` (one per winner)."""
    fields = winners.schema
    schema = pa.schema([("key", fields.field("key").type), ("value", fields.field("symbol").type),
                        ("time", fields.field("time").type), ("diff", pa.int64())])
    if winners.num_rows == 0:
        return schema.empty_table()
    keys, values, times = (winners[name].combine_chunks() for name in ("key", "symbol", "time"))
    later = pa.array(np.insert(steps(keys), 0, True) == False)  # noqa: E712 - numpy
    previous = pa.concat_arrays([pa.nulls(1, values.type), values.slice(0, len(values) - 1)])
    prior = pc.if_else(later, previous, before)
    changed = pc.invert(equal_values(prior, values))
    parts = []
    for rows, value, diff in ((pc.and_(changed, pc.is_valid(prior)), prior, -1), (pc.and_(changed, pc.is_valid(values)), values, 1)):
        count = pc.sum(rows).as_py() or 0
        parts.append(pa.table([keys.filter(rows), value.filter(rows), times.filter(rows), pa.array(np.full(count, diff))], schema=schema))
    return pa.concat_tables(parts)
