"""The checks every runtime applies to an input event before it is buffered.

One :class:`Intake` per run turns raw input into :class:`~statemachines.events.Event`
or into :class:`~statemachines.events.Rejected` with a reason, so the local and the
Spark runtimes reject exactly the same events for exactly the same reasons.

Checks, in order: the shape ``(key, symbol, time[, order])``; a non-null key; a
non-null time of the run's clock kind (the first valid time fixes it), finite if a
float (NaN and infinities are ``bad_time``); the time not
below the frontier already processed (late); the machine's ``validate_symbol``.
"""

from __future__ import annotations

from math import isfinite
from typing import Any

from statemachines.events import Event, Reason, Rejected
from statemachines.machine import Machine
from statemachines.times import time_kind

__all__ = ["Intake"]

_NEW = tuple.__new__
_SHAPE = "an event is a (key, symbol, time) or (key, symbol, time, order) tuple"


class Intake:
    """Checks raw events for one run of one machine."""

    def __init__(
        self, machine: Machine, *, kind: str | None = None, value_check: Any = None
    ) -> None:
        self.kind = kind
        self.value_check = value_check  # the output's test of new values (see core.ValueCheck)
        self._time_type: type | None = None
        self._validate = machine.validate_symbol if machine.spec.validates_symbols else None

    def check(self, raw: Any, frontier: Any = None) -> Event | Rejected:
        """The event ``raw`` stands for, or why it cannot be applied.

        Args:
            raw: an :class:`Event` or a 3- or 4-tuple (or list).
            frontier: times below it were already processed (``None``: none were).
        """
        kind = type(raw)
        if kind is Event:
            event = raw
        elif kind is tuple and len(raw) == 4:
            event = _NEW(Event, raw)
        elif isinstance(raw, tuple | list) and len(raw) in (3, 4):
            event = _NEW(Event, (*raw, None) if len(raw) == 3 else tuple(raw))
        else:
            return Rejected(raw, Reason.MALFORMED, _SHAPE)
        if event[0] is None:
            return Rejected(event, Reason.NULL_KEY, "the key is None")
        time = event[2]
        if type(time) is not self._time_type:
            problem = self._time_problem(event)
            if problem is not None:
                return problem
        if type(time) is float and not isfinite(time):  # NaN compares false with every time
            return Rejected(event, Reason.BAD_TIME, f"time {time!r} is not a finite number")
        if frontier is not None and time < frontier:
            return Rejected(
                event, Reason.LATE, f"time {time!r} is below the processed frontier {frontier!r}"
            )
        if self._validate is not None:
            try:
                self._validate(event[1])
            except (ValueError, TypeError) as exc:
                return Rejected(event, Reason.INVALID_SYMBOL, str(exc))
        return event

    def _time_problem(self, event: Event) -> Rejected | None:
        time = event.time
        if time is None:
            return Rejected(event, Reason.NULL_TIME, "the time is None")
        kind = time_kind(time)
        if kind is None or (self.kind is not None and kind != self.kind):
            expected = self.kind or "number, datetime or date"
            return Rejected(
                event,
                Reason.BAD_TIME,
                f"time {time!r} of type {type(time).__name__} is not a {expected} time",
            )
        self.kind = kind
        self._time_type = type(time)
        return None
