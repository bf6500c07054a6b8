"""Pending events: a runtime's input, checked and buffered until its time is final.

Events are kept per key and time. A machine that reduces same-time events
(``reduce_same_time``) keeps one event per ``(key, time)``; any other keeps them all
and orders them by :func:`~statemachines.events.event_rank` when they are taken::

    fed (key, symbol, time, order)      buffered            taken by take(upto=5)
    (a, x, 3, 1), (a, y, 3, 0)          a: {3: [x, y]}      a: [y@3, x@3]
    (b, z, 7)                           b: {7: [z]}         (stays: 7 >= 5)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from statemachines.events import Event, Reason, Rejected, event_rank
from statemachines.intake import Intake
from statemachines.updates import sorted_any

__all__ = ["PendingEvents"]

Reduce = Callable[[Event, Event], Event]


def _rank_of(event: Event) -> tuple[Any, ...]:
    return event_rank(event.order, event.symbol)


class PendingEvents:
    """Checked events per key and time, until a frontier makes them final.

    Attributes:
        by_key: key -> time -> the buffered event (reducing machines) or a list of
            events; plain data, as checkpoints store it.
    """

    def __init__(self, reduce: Reduce | None = None, by_key: dict[Any, dict[Any, Any]] | None = None) -> None:
        self._reduce = reduce
        self.by_key: dict[Any, dict[Any, Any]] = {} if by_key is None else by_key

    def feed(self, raw_events: Iterable[Any], intake: Intake, frontier: Any, reject: Callable[[Rejected], None]) -> int:
        """Check each raw event (``intake``, late below ``frontier``) and buffer it, or
        hand its rejection to ``reject``. Returns how many raw events there were."""
        reduce = self._reduce
        check = intake.check
        pending = self.by_key
        fed = 0
        for raw in raw_events:
            fed += 1
            checked = check(raw, frontier)
            if type(checked) is Rejected:
                reject(checked)
                continue
            event = cast(Event, checked)
            key, time = event[0], event[2]
            try:
                by_time = pending.get(key)
            except TypeError as exc:
                reject(Rejected(event, Reason.BAD_KEY, f"the key cannot be hashed: {exc}"))
                continue
            if by_time is None:
                pending[key] = {time: event if reduce is not None else [event]}
                continue
            buffered = by_time.get(time)
            if buffered is None:
                by_time[time] = event if reduce is not None else [event]
            elif reduce is None:
                buffered.append(event)
            else:
                try:
                    by_time[time] = reduce(buffered, event)
                except Exception as exc:  # noqa: BLE001 - user code; reject, keep going
                    reason = f"reduce_same_time failed: {type(exc).__name__}: {exc}"
                    reject(Rejected(event, Reason.TRANSITION_FAILED, reason))
        return fed

    def take(self, upto: Any) -> dict[Any, dict[Any, Any]]:
        """Remove and return the buffered events at times below ``upto`` (all if ``None``)."""
        pending = self.by_key
        if upto is None:
            self.by_key = {}
            return pending
        ready, emptied = {}, []
        for key, by_time in pending.items():
            due = [t for t in by_time if t < upto]
            if len(due) == len(by_time):
                ready[key] = by_time
                emptied.append(key)
            elif due:
                ready[key] = {t: by_time.pop(t) for t in due}
        for key in emptied:
            del pending[key]
        return ready

    def ordered(self, by_time: dict[Any, Any]) -> list[Event]:
        """One key's buffered events in ``(time, event_rank)`` order."""
        times = sorted(by_time)
        if self._reduce is not None:
            return [by_time[t] for t in times]
        events = []
        for t in times:
            same_time = by_time[t]
            if len(same_time) > 1:
                same_time.sort(key=_rank_of)
            events.extend(same_time)
        return events

    def events(self) -> list[Event]:
        """Every buffered event, in ``(key, time, event_rank)`` order."""
        events = []
        for key in sorted_any(self.by_key):
            events.extend(self.ordered(self.by_key[key]))
        return events

    def waiting(self) -> tuple[int, Any]:
        """How many events are buffered and the earliest of their times (``(0, None)``)."""
        count = sum(
            len(slot) if isinstance(slot, list) else 1 for by_time in self.by_key.values() for slot in by_time.values()
        )
        return count, self.earliest()

    def earliest(self) -> Any:
        """The earliest buffered time (``None`` if nothing is buffered)."""
        return min((min(by_time) for by_time in self.by_key.values()), default=None)

    def key_times(self) -> int:
        """How many ``(key, time)`` slots are buffered."""
        return sum(len(by_time) for by_time in self.by_key.values())

    def last_time(self) -> Any:
        """The latest buffered time (``None`` if nothing is buffered)."""
        return max((t for by_time in self.by_key.values() for t in by_time), default=None)

    def __bool__(self) -> bool:
        return bool(self.by_key)
