"""Upsert's micro-batch in a key bucket, computed in Arrow.

:func:`~statemachines.spark.bucket_state.advance` runs a bucket's micro-batch through
a :class:`~statemachines.LocalRuntime`: every event becomes a Python object twice
(when it is buffered and when it is applied). For :class:`~statemachines.library.Upsert`
over plain columns, :func:`advance_upsert` gives the same updates, rejections and
state with whole-column operations instead:

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
``Upsert``, its values are its symbols in a column of their type, keys, symbols, times and orders of
types whose Arrow order is the intake's). A micro-batch whose state holds a key with
several values (seeded from an arrangement another machine wrote) declines, and the
bucket runs it through the runtime instead: both read and write the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Machine, Rejected
from statemachines.intake import INT64_MAX, Intake
from statemachines.library import Upsert
from statemachines.spark.bucket_state import BucketState, BucketTypes, event_rows
from statemachines.spark.clock import frontier_of
from statemachines.spark.upsert_arrow import (
    changes,
    last_per_key,
    last_per_key_time,
    ordered_like_python,
    refusals,
)
from statemachines.times import encode_time

__all__ = ["advance_upsert", "upsert_step"]

Step = Callable[..., Any]


def upsert_step(machine: Machine, types: BucketTypes) -> Step | None:
    """:func:`advance_upsert` if it gives exactly the runtime's micro-batch for this
    run, else ``None``. Its values are its symbols, in a column of their own type, so
    none needs the runtime's check that it fits."""
    time = types.time
    plain = (
        type(machine) is Upsert
        and types.value == types.symbol
        and all(ordered_like_python(kind) for kind in (types.key, types.symbol))
        and (ordered_like_python(types.order) or pa.types.is_null(types.order))
        and (pa.types.is_signed_integer(time) or (pa.types.is_timestamp(time) and time.unit == "us"))
    )
    return advance_upsert if plain else None


def advance_upsert(
    state: BucketState, machine: Machine, events: Any, watermark_ms: int, kind: str, now_ms: int | None = None
) -> tuple[Any, list[Rejected], int | None] | None:
    """One micro-batch of an upsert bucket, as :func:`~statemachines.spark.bucket_state.advance`
    gives it: the updates (a table ``key, value, time, diff``), the rejected events,
    and when the earliest event applied arrived. ``None`` (nothing changed) where the
    state holds a key with several values.

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
    winners = last_per_key_time(due)
    before = _single_values(state, winners["key"])
    if before is None:
        return None
    if advancing:
        if due.num_rows:
            state.drop_due_rows(watermark_ms)
        state.note(frontier=encode_time(frontier), kind=kind)
    updates = changes(winners, before)
    state.keep_values(*last_per_key(winners))
    taken, rejected = _intake(state, machine, events, kind)
    state.buffer(last_per_key_time(taken), now_ms)
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
    lengths = pc.fill_null(pc.list_value_length(lists), 0)
    if len(lists) and pc.max(lengths).as_py() > 1:
        return None
    present = pc.greater(lengths, 0)
    return pc.replace_with_mask(pa.nulls(len(keys), state.types.value), present, pc.list_flatten(lists))


def _intake(state: BucketState, machine: Machine, events: Any, kind: str) -> tuple[Any, list[Rejected]]:
    """The events the intake takes at the state's frontier (a table ``key, symbol,
    time, order``) and the rejected ones; the record's time and order kinds as the
    intake leaves them."""
    frontier = state.frontier
    timed = pc.and_(pc.is_valid(events["key"]), pc.is_valid(events["time"]))
    if "refusal" in events.column_names:
        timed = pc.and_(timed, pc.is_null(events["refusal"]))
    plain = timed
    time_type = events.schema.field("time").type
    if pa.types.is_int64(time_type):
        plain = pc.and_(plain, pc.not_equal(events["time"], INT64_MAX))
    if frontier is not None:
        plain = pc.and_(plain, pc.greater_equal(events["time"], pa.scalar(frontier, time_type)))
    plain = pc.fill_null(plain, False)
    taken = events.filter(plain).select(["key", "symbol", "time", "order"])
    if pc.any(timed).as_py():  # the first event with a key and a time fixes the time kind
        state.note(kind=kind)
    if taken.num_rows > taken["order"].null_count:  # the first order taken fixes the order kind
        state.note(order_kind=_order_kind_of(events.schema.field("order").type))
    return taken, _refused(state, machine, events.filter(pc.invert(plain)), frontier)


def _refused(state: BucketState, machine: Machine, events: Any, frontier: Any) -> list[Rejected]:
    """The rejection of each event of ``events`` (refused at the source, or by the
    runtime's intake, with its reason and detail)."""
    if events.num_rows == 0:
        return []
    intake = Intake(machine, kind=state.record["kind"])
    intake.order_kind = state.record["order_kind"]
    return refusals(intake, event_rows(events), frontier)
