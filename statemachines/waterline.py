"""Waterlines: a machine rule that looks at what the whole collection accepted before.

Some machines judge a command by more than its own key: an upsert with lateness
rejects values far behind the newest value *any* key holds. Such a machine declares
a **mark** for each inserted ``(key, value)`` (a tuple of event times, one per rule,
``None`` where a rule does not apply) and reads, for commands at time ``t``, the
component-wise maximum of the marks of every insert at times ``< t``: the *high
mark* at ``t``. It depends only on earlier times, so the output never depends on
batching::

    inserts (time, mark)        high mark at time
    1  (10,)                    1 -> (None,)   2 -> (10,)
    2  (7,)                     3 -> (10,)
    3  (15,)                    4 -> (15,)

Runtimes run such a machine key by key, in parallel, by speculation: run every key
with a guessed :class:`Waterline`, read the true one off the inserts that run made,
and repeat until the two agree (:func:`settle`). If a guess is right at every time up
to ``s``, the run is exact up to ``s``, so each round fixes at least one more time
and the result is exactly the time-by-time one, whatever the first guess. That guess
is what the events would insert if all were accepted, when the machine says
(``guess_marks``); then, when the events are mostly accepted, the first run already
agrees. Without it the first guess is that the run inserts nothing, and a second run
(often a third) is needed.

A machine with waterlines defines two hooks (``machine.spec.has_waterline``):
``insert_marks(key, value)`` and ``with_waterline(waterline)``, the same machine
bound to a waterline; and may define ``guess_marks(key, symbol)``.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import attrs

from statemachines.errors import MachineError
from statemachines.machine import Machine
from statemachines.times import decode_time, encode_time

__all__ = [
    "NOTE",
    "Mark",
    "Waterline",
    "arrangement_high",
    "guessed_marks",
    "highest",
    "highs_by_time",
    "mark_from_note",
    "mark_note",
    "marks_by_time",
    "settle",
]

Mark = tuple[Any, ...]
"""One event time (or ``None``) per waterline rule of a machine."""

R = TypeVar("R")


def highest(first: Mark | None, second: Mark | None) -> Mark | None:
    """Component-wise maximum of two marks; ``None`` (no mark) is below everything.

    >>> highest((3, None), (2, 5))
    (3, 5)
    """
    if first is None:
        return second
    if second is None:
        return first
    return tuple(
        b if a is None else a if b is None else (a if a >= b else b)
        for a, b in zip(first, second, strict=True)
    )


@attrs.frozen
class Waterline:
    """The high mark of the inserts at times below each time: a step function.

    Two waterlines are equal when their step functions are: only the times where the
    high mark rises are kept.

    Attributes:
        base: the high mark of everything before this run (``None``: nothing).
        times: the times at which an insert raised the high mark, increasing.
        highs: ``highs[i]`` is the high mark of ``base`` and the inserts at times up
            to ``times[i]``.
    """

    base: Mark | None = None
    times: tuple[Any, ...] = ()
    highs: tuple[Mark, ...] = ()

    @classmethod
    def from_marks(cls, base: Mark | None, marks: Mapping[Any, Mark]) -> Waterline:
        """The waterline of ``base`` followed by the inserts' marks per time.

        >>> line = Waterline.from_marks(None, {2: (7,), 1: (10,), 3: (15,)})
        >>> line.high_before(3), line.times
        ((10,), (1, 3))
        """
        times: list[Any] = []
        highs: list[Mark] = []
        high = base
        for t in sorted(marks):
            raised = highest(high, marks[t])
            if raised != high:
                times.append(t)
                highs.append(raised)  # type: ignore[arg-type]  # marks[t] is a mark
                high = raised
        return cls(base, tuple(times), tuple(highs))

    def high_before(self, time: Any) -> Mark | None:
        """The high mark of every insert at a time ``< time`` (and of ``base``)."""
        i = bisect.bisect_left(self.times, time)
        return self.highs[i - 1] if i else self.base

    @property
    def high(self) -> Mark | None:
        """The high mark after every insert of the run."""
        return self.highs[-1] if self.highs else self.base


NOTE = "waterline_high"
"""The arrangement note (``Arrangement.notes``) holding a writer's high mark."""


def mark_note(mark: Mark | None) -> Any:
    """A high mark as JSON, for an arrangement's notes (``None`` stays ``None``)."""
    return None if mark is None else [encode_time(t) for t in mark]


def mark_from_note(note: Any) -> Mark | None:
    """The inverse of :func:`mark_note`."""
    return None if note is None else tuple(decode_time(t) for t in note)


def highs_by_time(marks: Iterable[tuple[Any, Mark | None]]) -> dict[Any, Mark]:
    """The high mark at each time of ``(time, mark)`` pairs (a ``None`` mark adds nothing).

    >>> highs_by_time([(1, (3, None)), (2, None), (1, (2, 5))])
    {1: (3, 5)}
    """
    highs: dict[Any, Mark] = {}
    for time, mark in marks:
        if mark is not None:
            highs[time] = highest(highs.get(time), mark)  # type: ignore[assignment]
    return highs


def marks_by_time(
    machine: Machine, updates: Iterable[tuple[Any, Any, int]]
) -> dict[Any, Mark]:
    """The high mark of the inserts (positive diffs) at each time."""
    return highs_by_time(
        (time, machine.insert_marks(key, value)) for (key, value), time, diff in updates if diff > 0
    )


def guessed_marks(machine: Machine, events: Iterable[tuple[Any, Any, Any]]) -> dict[Any, Mark]:
    """The high mark per time of what ``(key, symbol, time)`` events would insert if
    the machine accepted them all (its ``guess_marks``): the first guess of a run.
    An event without a time, or whose guess raises, guesses nothing; marks that do
    not compare give no guess at all.

    >>> from statemachines.library import UpsertWithLateness
    >>> machine = UpsertWithLateness(5, value_time=lambda v: v[0])
    >>> guessed_marks(machine, [("a", (3,), 1), ("b", (9,), 1), ("a", None, 2), ("c", 7, 3)])
    {1: (9, None)}
    """

    def guesses() -> Iterator[tuple[Any, Mark | None]]:
        for key, symbol, time in events:
            if time is None:
                continue
            try:
                mark = machine.guess_marks(key, symbol)
            except Exception:  # noqa: BLE001 - only a guess: the run judges the event
                continue
            yield time, mark

    try:
        return highs_by_time(guesses())
    except TypeError:
        return {}


def arrangement_high(machine: Machine, arrangement: Any) -> Mark | None:
    """The high mark of every insert ``arrangement`` ever held.

    Its writer notes the high mark with each append (:data:`NOTE`), because
    compaction drops inserts that were later retracted, and with them their marks;
    an arrangement without the note (written before notes existed) is read whole.
    """
    notes = arrangement.notes
    if NOTE in notes:
        return mark_from_note(notes[NOTE])
    high = None
    for mark in marks_by_time(machine, arrangement.updates()).values():
        high = highest(high, mark)
    return high


def settle(
    machine: Machine,
    base: Mark | None,
    run: Callable[[Machine, Waterline], R],
    marks_of: Callable[[R], Mapping[Any, Mark]],
    *,
    max_rounds: int | Callable[[], int],
    guess: Mapping[Any, Mark] | None = None,
) -> tuple[R, Waterline]:
    """Run ``run`` with better and better waterlines until the guess is the truth.

    Args:
        machine: the machine with waterlines.
        base: the high mark of everything before this run.
        run: runs every key with the machine bound to the given waterline (also given:
            a key whose events see the same high marks in two waterlines runs the
            same in both, since a command at ``t`` reads only the high mark at ``t``);
            must not commit anything.
        marks_of: the inserts' high marks per time in one run's result.
        max_rounds: a bound the rounds cannot exceed (one more than the number of
            distinct event times suffices, since each round fixes one more time), or
            a function giving it, called only if two rounds do not settle.
        guess: marks per time to start from (:func:`guessed_marks`) rather than
            ``base`` alone; any guess gives the same result, a good one in fewer runs.

    Returns:
        ``(the result of the final run, its waterline)``.
    """
    line = Waterline(base)
    if guess:
        with contextlib.suppress(Exception):  # marks that do not compare: no guess
            line = Waterline.from_marks(base, guess)
    bound = max_rounds if isinstance(max_rounds, int) else None
    rounds = 0
    while True:
        result = run(machine.with_waterline(line), line)
        rounds += 1
        found = Waterline.from_marks(base, marks_of(result))
        if found == line:
            return result, found
        line = found
        if bound is None and rounds >= 2:
            bound = max_rounds()  # type: ignore[operator]  # a function here
        if bound is not None and rounds >= max(bound, 1):
            raise MachineError(  # pragma: no cover - impossible unless a machine is not deterministic
                f"the waterline did not settle in {bound} rounds; is the machine deterministic?"
            )
