"""Runtime input and the rejected-events output.

An :class:`Event` ``(key, symbol, time, order)`` feeds ``symbol`` to the machine of
``key`` at ``time``. Events at one ``(key, time)`` are applied in increasing
:func:`event_rank`: by ``order``, events without an order first, and equal orders
broken by the symbol's own order (``None`` first; see
:func:`~statemachines.updates.total_order_key`). The rank depends only on the event itself, so every
runtime applies the same events in the same sequence whatever order they arrive in.

An event the runtime cannot apply is never dropped: it becomes a :class:`Rejected`
with a machine-readable reason and a human-readable detail. The runtime's reasons
are :class:`Reason`; a machine brings its own by raising :class:`Refused` with a
member of its own ``StrEnum``.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from statemachines.updates import total_order_key

__all__ = ["Event", "Reason", "Refused", "Rejected", "event_rank"]


class Event(NamedTuple):
    """One input symbol for one key at one time; ``order`` breaks same-time ties."""

    key: Any
    symbol: Any
    time: Any
    order: Any = None


class Reason(enum.StrEnum):
    """Why an event was rejected (the ``reason`` column of the rejected output)."""

    LATE = "late"
    """Its time is below the frontier the runtime has already processed."""
    MALFORMED = "malformed_event"
    """It is not a ``(key, symbol, time[, order])`` tuple."""
    NULL_KEY = "null_key"
    """Its key is ``None`` (or pandas' ``NA`` or ``NaT``)."""
    BAD_KEY = "bad_key"
    """Its key cannot be hashed, holds a decimal NaN, nests tuples too deeply to read,
    or cannot be stored in the arrangement's key column."""
    NULL_TIME = "null_time"
    """Its time is ``None`` (or pandas' ``NA`` or ``NaT``)."""
    BAD_TIME = "bad_time"
    """Its time is not of the run's time type (int, float, datetime or date), or is
    not finite, or is an integer outside the 64-bit range times are stored in."""
    BAD_ORDER = "bad_order"
    """Its order cannot be compared with the run's other orders (another type, or NaN)."""
    INVALID_SYMBOL = "invalid_symbol"
    """The machine's ``validate_symbol`` refused it, or it holds a decimal NaN (which
    no runtime can order or store), or it nests tuples too deeply to read."""
    TRANSITION_FAILED = "transition_failed"
    """The machine's transition raised on it; the key's values are unchanged."""
    UNSERIALISABLE_VALUE = "unserialisable_value"
    """It would give the key a value the output cannot store (e.g. not of the column type)."""
    MISSING_FIELD = "missing_field"
    """A change-feed row lacks a field its rules read (a delete marker, an envelope's
    ``op``, ``after`` or ``before``); it is never taken for a delete."""
    BAD_OPERATION = "bad_operation"
    """A change-feed envelope's ``op`` is not one the feed applies (e.g. a truncate)."""


class Rejected(NamedTuple):
    """An input event that was not applied, with why (a :class:`Reason`, or a
    machine's own reason)."""

    event: Any
    reason: enum.StrEnum
    detail: str


class Refused(Exception):  # noqa: N818 - raised by a transition, it reads as what happened
    """Raised by a machine's ``transition`` to refuse an event for a reason of its own.

    ``reason`` is a member of a ``StrEnum`` (its value is the ``reason`` column of
    the rejected output); the key's values stay as they were::

        class Why(enum.StrEnum):
            TOO_BIG = "too_big"

        def transition(self, key, values, symbol, time):
            if symbol > 100:
                raise Refused(Why.TOO_BIG, f"{symbol} > 100")
            ...
    """

    def __init__(self, reason: enum.StrEnum, detail: str) -> None:
        if not isinstance(reason, enum.StrEnum):
            raise TypeError(f"Refused needs a StrEnum member as its reason, got {reason!r}")
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail


def event_rank(order: Any, symbol: Any) -> tuple[Any, ...]:
    """The position of an event among the events at its ``(key, time)``.

    >>> sorted([(2, "b"), (None, "z"), (1, "y"), (2, "a")], key=lambda e: event_rank(*e))
    [(None, 'z'), (1, 'y'), (2, 'a'), (2, 'b')]
    """
    if order is None:
        return (0, total_order_key(symbol))
    return (1, order, total_order_key(symbol))
