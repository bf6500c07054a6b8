"""The pure heart of every runtime: one key's prior values and events in, updates out.

:func:`advance_key` knows nothing of buffering, frontiers across keys, storage or
Spark. Every runtime calls it, once per key with the events that are now final: it
is the only place where events become updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from statemachines.errors import InvalidArgument, MachineError
from statemachines.events import Event, Reason, Refused, Rejected, event_rank
from statemachines.intake import Intake
from statemachines.machine import Emit, Machine
from statemachines.times import is_finite_time
from statemachines.updates import Update, canonical, sort_by_data

__all__ = [
    "OwnTypeCheck", "UpdateColumns", "ValueCheck", "advance_key", "apply_transition", "call_deadline", "held_values", "run_key",
]

ValueCheck = Callable[[Any], "str | None"]
"""A runtime's test that its output can store a value: ``None`` if so, else why not."""


@attrs.frozen
class OwnTypeCheck:
    """The value check of an output whose value column has the type the machine
    declares (``value_type``) for a machine whose values fit it by construction
    (``values_fit_own_type``: built from the input's symbols and times and the
    machine's own constants). Values the key already holds were checked when they
    were new, so a transition's new values can hold nothing unchecked but its event's
    symbol and time::

        the event's symbol and time         the transition's new values
        store as the input's types          stored, each unchecked
        do not                              each checked (one that does not store
                                            rejects the event)
    """

    check: ValueCheck  # the output's own check of one value
    symbol: ValueCheck  # the symbols' column type: None if a symbol stores as it
    time: ValueCheck  # the times' column type, likewise

    def __call__(self, value: Any) -> str | None:
        return self.check(value)

    def stores(self, event: Event) -> bool:
        """Whether ``event``'s symbol and time store as the input's types."""
        return self.symbol(event[1]) is None and self.time(event[2]) is None


@attrs.define
class UpdateColumns:
    """Updates gathered as four columns, for a runtime that writes them as a table:
    no :class:`~statemachines.updates.Update` per row, and a key's changes at one
    time in no particular order (a table has none)::

        keys  values  times  diffs
        k     x       1      +1
        k     x       3      -1        x left and y arrived at time 3:
        k     y       3      +1        either row may come first
    """

    keys: list[Any] = attrs.Factory(list)
    values: list[Any] = attrs.Factory(list)
    times: list[Any] = attrs.Factory(list)
    diffs: list[int] = attrs.Factory(list)

    def __len__(self) -> int:
        return len(self.values)

    def add(self, time: Any, gone: Any, arrived: Any) -> None:
        """Values that left (``-1``) and arrived (``+1``) at ``time``; their key comes
        with :meth:`fill_keys`."""
        self.values.extend(gone)
        self.values.extend(arrived)
        self.diffs.extend([-1] * len(gone))
        self.diffs.extend([1] * (len(self.values) - len(self.diffs)))
        self.times.extend([time] * (len(self.values) - len(self.times)))

    def fill_keys(self, key: Any) -> None:
        """Give ``key`` to the values added since the last call."""
        self.keys.extend([key] * (len(self.values) - len(self.keys)))

    def add_updates(self, updates: Any) -> None:
        """Add updates ``((key, value), time, diff)``."""
        # a comprehension per column: zip(*updates) over 500k updates took 9x as long
        self.keys.extend([u[0][0] for u in updates])
        self.values.extend([u[0][1] for u in updates])
        self.times.extend([u[1] for u in updates])
        self.diffs.extend([u[2] for u in updates])

    def take(self) -> tuple[list[Any], list[Any], list[Any], list[int]]:
        """``(keys, values, times, diffs)`` gathered so far; starts afresh."""
        taken = self.keys, self.values, self.times, self.diffs
        self.keys, self.values, self.times, self.diffs = [], [], [], []
        return taken


_NEW = tuple.__new__


def apply_transition(
    machine: Machine,
    key: Any,
    values: frozenset[Any],
    event: Event,
    check: ValueCheck | None = None,
    position: int = 0,
) -> tuple[frozenset[Any], tuple[Any, ...]] | Rejected:
    """``machine.transition`` on one event: ``(next values, findings)``, or a rejection.

    The machine sees ``machine.initial_values(key)`` in place of an empty set. A
    transition that raises :class:`~statemachines.events.Refused` rejects the event
    with the machine's reason; one that raises anything else, or returns something
    that is not an iterable of hashable values, rejects it as ``transition_failed``;
    so does a new value or finding that ``check`` refuses (``unserialisable_value``).
    A rejected event leaves the key's values as they were. ``position`` is the
    event's place among the key's events applied at its time (for machines whose
    ``transition`` takes it).
    """
    spec = machine.spec
    seen = values if values or not spec.has_initial_values else machine.initial_values(key)
    try:
        if spec.takes_position:
            result = machine.transition(key, seen, event.symbol, event.time, position=position)  # type: ignore[call-arg]
        else:
            result = machine.transition(key, seen, event.symbol, event.time)
        after, found = (result, ()) if type(result) is frozenset else _outcome(machine, result, "transition")
    except Refused as refusal:
        return Rejected(event, refusal.reason, refusal.detail)
    except Exception as exc:  # noqa: BLE001 - any failure of user code rejects the event
        return Rejected(event, Reason.TRANSITION_FAILED, f"{type(exc).__name__}: {exc}")
    if check is not None:
        new = after - values
        if not spec.values_fit_own_type:  # checked as they will be stored
            after, found, new = _canonical_outcome(after, found, values, new)
        if (new or found) and not (type(check) is OwnTypeCheck and check.stores(event)):
            for value in (*new, *found):
                problem = check(value)
                if problem is not None:
                    return Rejected(event, Reason.UNSERIALISABLE_VALUE, problem)
    return after, found


def _outcome(machine: Machine, result: Any, hook: str) -> tuple[frozenset[Any], tuple[Any, ...]]:
    """A hook's result as ``(values, findings)``; raises on a result that is neither."""
    if type(result) is frozenset:
        return result, ()
    if type(result) is Emit:
        if not machine.spec.emits_findings:
            raise TypeError(
                f"{hook} returned Emit, but {machine.spec.name} does not define is_finding(value)"
            )
        return result
    if result is None:
        raise TypeError(f"{hook} returned None; it must return the key's next set of values")
    return frozenset(result), ()


_PLAIN = frozenset({str, int, bool, type(None)})  # canonical whatever their value


def _canonical_values(values: Any, new: Any = None) -> Any:
    """``values`` (a frozenset or a tuple) with every value :func:`canonical`, or
    ``values`` itself if each already is; ``new``, if given, the only ones that may not
    be (those not held before). A NaN a machine computes is then the one NaN a key
    holds, as a NaN symbol is, and a NumPy scalar the Python value it equals::

        held      the machine's next values       _canonical_values
        {nan}     {float("nan")} (a new object)   {nan}: no change
        {}        {float("nan"), float("nan")}    {nan}: one value
        {}        {np.int64(5)}                   {5}
    """
    for value in values if new is None else new:
        if type(value) not in _PLAIN and canonical(value) is not value:
            return type(values)(map(canonical, values))
    return values


def _canonical_outcome(after: frozenset[Any], found: Any, values: frozenset[Any], new: Any) -> tuple[Any, Any, Any]:
    """A step's next values ``after``, findings ``found`` and new values ``new``
    (``after - values``) with every value canonical (:func:`_canonical_values`): a
    NaN the key holds, made anew, is then no new value."""
    canonical_after = _canonical_values(after, new)
    if canonical_after is not after:
        after, new = canonical_after, canonical_after - values
    return after, _canonical_values(found), new


def held_values(machine: Machine, values: frozenset[Any]) -> frozenset[Any]:
    """The values a key holds: ``values`` (as an output stores them) without the
    findings among them, which were reported once and are not the machine's state::

        stored values                        held
        {partial p, match m}                 {partial p}
    """
    if machine.spec.emits_findings and values:
        return frozenset(v for v in values if not machine.is_finding(v))
    return values


def advance_key(
    machine: Machine,
    key: Any,
    values: frozenset[Any],
    events: list[Event],
    upto: Any,
    check: ValueCheck | None = None,
    columns: UpdateColumns | None = None,
) -> tuple[frozenset[Any], list[Update], list[Rejected]]:
    """Run one key forward over its final events and the deadlines before ``upto``.

    The one step of every runtime. Each time at which something happens yields the
    net change of the key's values at that time, then the findings reported at it: a
    deadline at time ``d`` fires first, then the events at ``d`` are applied in the
    order given::

        values before | events at t           | updates at t
        {}            | add x, add y          | (k, x) +1, (k, y) +1
        {x, y}        | del x, add x          | (nothing: no net change)

    Args:
        machine: the machine.
        key: the key.
        values: the key's current values (empty for a key never seen); findings
            among them (``is_finding``) are reported, not held, and are left out.
        events: the key's events, sorted by ``(time, event_rank)``; all are final
            (below ``upto``).
        upto: the frontier: deadlines at times ``< upto`` fire. ``None`` means the
            input is complete, so every deadline fires.
        check: the runtime's test that its output can store a new value; an event
            whose new value fails it is rejected (see :func:`apply_transition`).
        columns: where the updates go instead, for a runtime that writes a table
            (the updates returned are then none).

    Returns:
        ``(values after, updates, rejected events)``; the updates are in ``(time,
        value)`` order and consolidated apart from findings, each of which is one
        ``+1``.

    Raises:
        InvalidArgument: the last event is not below ``upto``.
        MachineError: a deadline did not lie after the time of the change that set
            it, or ``deadline`` or ``on_deadline`` raised.
    """
    if upto is not None and events and not events[-1][2] < upto:
        raise InvalidArgument(
            f"advance_key takes final events only (below upto={upto!r}); the last is at time {events[-1][2]!r}"
        )
    spec = machine.spec
    values = held_values(machine, values)
    updates: list[Update] = []
    rejected: list[Rejected] = []
    timed = spec.has_deadlines
    due = call_deadline(machine, key, values) if timed and values else None
    i, n = 0, len(events)
    while True:
        t = events[i][2] if i < n else None
        if due is not None and (upto is None or due < upto) and (t is None or due <= t):
            now = due
            after, fired = _fire_deadline(machine, key, values, due)
            found: list[Any] = list(fired)
        elif t is not None:
            now, after, found = t, values, []
        else:
            break
        position = 0
        while i < n and events[i][2] == now:
            outcome = apply_transition(machine, key, after, events[i], check, position)
            if type(outcome) is Rejected:
                rejected.append(outcome)
            else:
                after, new = outcome  # type: ignore[misc]
                if new:
                    found.extend(new)
                position += 1
            i += 1
        arrived = after - values if after is not values else ()
        if not spec.values_fit_own_type:  # the values held and reported are canonical
            after, found, arrived = _canonical_outcome(after, found, values, arrived)
        if columns is not None:
            if arrived or found or after != values:
                columns.add(now, values - after, (*arrived, *found))
                values = after
        else:
            start = len(updates)
            if arrived or after != values:
                for v in values - after:
                    updates.append(_NEW(Update, ((key, v), now, -1)))
                for v in arrived:
                    updates.append(_NEW(Update, ((key, v), now, 1)))
                values = after
            for v in found:
                updates.append(_NEW(Update, ((key, v), now, 1)))
            if len(updates) - start > 1:
                _order_by_value(updates, start)
        due = call_deadline(machine, key, values) if timed and values else None
        if due is not None and _not_after(due, now, machine, key):
            raise MachineError(
                f"{spec.name}.deadline returned {due!r} for key {key!r} after a change "
                f"at time {now!r}; a deadline must lie strictly after the change that sets it"
            )
    if columns is not None:
        columns.fill_keys(key)
    return values, updates, rejected


def _order_by_value(updates: list[Update], start: int) -> None:
    """Put ``updates[start:]`` (one key's changes at one time) in value order."""
    if len(updates) - start == 2:  # the common case: one value left, another arrived
        try:
            if updates[start + 1][0] < updates[start][0]:
                updates[start], updates[start + 1] = updates[start + 1], updates[start]
            if updates[start][0] <= updates[start + 1][0]:  # (not so beside a NaN)
                return
        except TypeError:
            pass
    changes = updates[start:]
    sort_by_data(changes)
    updates[start:] = changes


def call_deadline(machine: Machine, key: Any, values: frozenset[Any]) -> Any:
    """``machine.deadline(key, values)``; a deadline that raises, or returns neither
    ``None`` nor a finite time, stops the run with a :class:`MachineError` naming the
    machine and key (no event to reject)."""
    try:
        due = machine.deadline(key, values)
    except Exception as exc:
        raise MachineError(
            f"{machine.spec.name}.deadline failed for key {key!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if due is not None and type(due) is not int and not is_finite_time(due):  # a bool is no int here
        raise MachineError(
            f"{machine.spec.name}.deadline returned {due!r} for key {key!r}; a deadline is None or a "
            f"finite time (a number, datetime or date)"
        )
    return due


def _not_after(due: Any, now: Any, machine: Machine, key: Any) -> bool:
    """Whether ``due <= now``; a deadline of another kind than the times is an error."""
    try:
        return bool(due <= now)
    except TypeError:
        raise MachineError(
            f"{machine.spec.name}.deadline returned {due!r} for key {key!r} after a change at time "
            f"{now!r}: a deadline is a time of the events' kind"
        ) from None


def _fire_deadline(
    machine: Machine, key: Any, values: frozenset[Any], time: Any
) -> tuple[frozenset[Any], tuple[Any, ...]]:
    try:
        return _outcome(machine, machine.on_deadline(key, values, time), "on_deadline")
    except Exception as exc:
        raise MachineError(
            f"{machine.spec.name}.on_deadline failed for key {key!r} at time {time!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _time_then_rank(event: Event) -> tuple[Any, Any]:
    return event[2], event_rank(event[3], event[1])


def run_key(
    machine: Machine,
    intake: Intake,
    key: Any,
    values: frozenset[Any],
    raw_events: list[Any],
    *,
    frontier: Any,
    upto: Any,
    sound: bool = False,
    columns: UpdateColumns | None = None,
) -> tuple[frozenset[Any], list[Update], list[Rejected]]:
    """Check, order and apply one key's raw events: a runtime's per-key entry point.

    Runtimes that see a key's events all at once (the Spark runtime, a partition at a
    time) call this: each raw event goes through ``intake`` (events below
    ``frontier`` are late), the rest are put in ``(time, event_rank)`` order and
    handed to :func:`advance_key` with ``upto``. ``sound``: the raw events are 4-tuples
    whose columns :meth:`Intake.sound_in_bulk` passed, so only their symbols are
    checked (:meth:`Intake.check_symbol`). ``columns``: as for :func:`advance_key`.

    Returns:
        ``(values after, updates, rejected events)``.
    """
    events: list[Event] = []
    rejected: list[Rejected] = []
    in_order = True
    for raw in raw_events:
        checked = intake.check_symbol(raw) if sound else intake.check(raw, frontier)
        if isinstance(checked, Rejected):
            rejected.append(checked)
            continue
        if in_order and events:  # Spark hands them in (time, order) order: no sort
            last = events[-1]
            if last[2] != checked[2]:
                in_order = last[2] < checked[2]
            else:  # the same time: only lower orders surely come first (else event_rank)
                in_order = last[3] is not None and checked[3] is not None and last[3] < checked[3]
        events.append(checked)
    if not in_order:
        events.sort(key=_time_then_rank)
    after, updates, failed = advance_key(machine, key, values, events, upto, intake.value_check, columns)
    return after, updates, rejected + failed if failed else rejected
