"""Upsert's micro-batch in a key bucket, computed in Arrow.

:func:`~statemachines.spark.bucket_state.advance` runs a bucket's micro-batch through
a :class:`~statemachines.LocalRuntime`: every event becomes a Python object twice
(when it is buffered and when it is applied). For :class:`~statemachines.library.Upsert`
over plain columns (symbols of text or integers, or records as a change feed's rows
are, see :func:`~statemachines.spark.upsert_arrow.plain_record`), :func:`advance_upsert`
gives the same updates, rejections and state with whole-column operations instead:

=====================  ================================================================
step                   in Arrow
=====================  ================================================================
apply the due events   sort by ``(key, time, order, symbol)``; the last command of
                       each ``(key, time)`` wins; compare each winner with the one
                       before it, or with the key's value in the state
buffer the new events  the rows the intake would take (key and time set, time in
                       range and not late) keep the winner of each ``(key, time)``
refuse the others      each through the runtime's own :class:`~statemachines.intake.Intake`,
                       for the same reason and detail
=====================  ================================================================

The winners and the updates they make are :mod:`statemachines.spark.upsert_arrow`'s,
as a batch run's partitions take them.

:func:`upsert_step` says whether a run can take this path (the machine is exactly
``Upsert``, its values are its symbols in a column of their type, keys, times and
orders of types whose Arrow order is the intake's, symbols too or records of fields
Arrow compares as Python does). A micro-batch declines, and the bucket runs it through the runtime instead
(both read and write the same state), where its state holds a key with several
values (seeded from an arrangement another machine wrote), or where two unequal
records are at one ``(key, time, order)``: the runtime ranks them by their symbols,
which Arrow cannot sort.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Machine, Rejected
from statemachines.intake import Intake
from statemachines.spark.bucket_state import BucketState, BucketTypes, event_rows
from statemachines.spark.clock import frontier_of
from statemachines.spark.tabulated import held_beyond_python, plain_times
from statemachines.spark.upsert_arrow import (
    changes,
    last_per_key,
    plain_upsert,
    refusals,
    winners,
)
from statemachines.times import encode_time

__all__ = ["advance_upsert", "upsert_step"]

Step = Callable[..., Any]


def upsert_step(machine: Machine, types: BucketTypes) -> Step | None:
    """:func:`advance_upsert` if it gives exactly the runtime's micro-batch for this
    run, else ``None``. Its values are its symbols, in a column of their own type, so
    none needs the runtime's check that it fits."""
    plain = plain_upsert(machine, types.key, types.value, types.symbol, types.time, types.order)
    return advance_upsert if plain else None


def advance_upsert(
    state: BucketState, machine: Machine, events: Any, watermark_ms: int, kind: str, now_ms: int | None = None
) -> tuple[Any, list[Rejected], int | None] | None:
    """One micro-batch of an upsert bucket, as :func:`~statemachines.spark.bucket_state.advance`
    gives it: the updates (a table ``key, value, time, diff``), the rejected events,
    and when the earliest event applied arrived. ``None`` (nothing changed) where the
    state holds a key with several values, or where unequal records are at one
    ``(key, time, order)`` (the runtime ranks them by their symbols).

    ``events``: a table ``key, symbol, time, order`` and optionally ``refusal``
    (``struct<reason, detail>``: refused before the run).
    """
    types = state.types
    record = state.record
    if record["kind"] not in (None, kind) or record["order_kind"] not in (None, _order_kind_of(types.order)):
        return None  # state another run left: the intake would refuse every event
    frontier = frontier_of(watermark_ms, kind)
    advancing = frontier is not None and (state.frontier is None or frontier > state.frontier)
    due = state.due_rows(watermark_ms) if advancing else types.events().empty_table()
    applied = winners(due)
    before = None if applied is None else _single_values(state, applied["key"])
    taken, timed, ordered = _taken(events, frontier if advancing else state.frontier)
    taken_rows = events.filter(taken).select(["key", "symbol", "time", "order"])
    kept = winners(taken_rows)
    if before is None or kept is None:
        return None
    if advancing:
        if due.num_rows:
            state.drop_due_rows(watermark_ms)
        state.note(frontier=encode_time(frontier), kind=kind)
    updates = changes(applied, before)
    state.keep_values(*last_per_key(applied))
    if pc.any(timed).as_py():  # the first event with a key and a time fixes the time kind
        state.note(kind=kind)
    if pc.any(ordered).as_py():  # the first order the intake reads fixes the order kind
        state.note(order_kind=_order_kind_of(events.schema.field("order").type))
    rejected = _refused(state, machine, events.filter(pc.invert(taken)), state.frontier)
    state.buffer(kept, now_ms)
    arrived = pc.min(due["arrived"]).as_py() if due.num_rows else None
    return updates, rejected, arrived


def _order_kind_of(kind: Any) -> str | None:
    """The intake's order kind of the values of an order column of Arrow type ``kind``."""
    if pa.types.is_integer(kind):
        return "number"
    return "text" if pa.types.is_string(kind) or pa.types.is_large_string(kind) else None


def _single_values(state: BucketState, keys: Any) -> Any:
    """The value each of ``keys`` holds in ``state`` (null: none), or ``None`` if some
    key holds several."""
    lists = state.value_lists(keys)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    if len(lengths) and lengths.max() > 1:
        return None
    present = lengths > 0  # each present list holds one value: the flat values' next
    at = pa.array(np.cumsum(present) - 1, mask=~present)
    return pc.list_flatten(lists).cast(state.types.value).take(at)


def _taken(events: Any, frontier: Any) -> tuple[Any, Any, Any]:
    """Which events the intake takes as they are at ``frontier`` (the rest it refuses);
    which have a key and a time (the first fixes the time kind); which have an order
    the intake reads, refused later or not (the first fixes the order kind: its key
    or symbol may still hold a date beyond Python's years)."""
    timed = pc.and_(pc.is_valid(events["key"]), pc.is_valid(events["time"]))
    if "refusal" in events.column_names:
        timed = pc.and_(timed, pc.is_null(events["refusal"]))
    read = pc.and_(timed, pa.array(plain_times(events, frontier)))
    taken = pc.and_(read, pa.array(~held_beyond_python(events)))
    return taken, timed, pc.and_(read, pc.is_valid(events["order"]))


def _refused(state: BucketState, machine: Machine, events: Any, frontier: Any) -> list[Rejected]:
    """The rejection of each event of ``events`` (refused at the source, or by the
    runtime's intake, with its reason and detail)."""
    if events.num_rows == 0:
        return []
    intake = Intake(machine, kind=state.record["kind"])
    intake.order_kind = state.record["order_kind"]
    return refusals(intake, event_rows(events), frontier)
