"""Upsert with lateness: old data is refused by the upsert itself, soundly.

``UpsertWithLateness(lateness, value_time=...)`` is an :class:`~statemachines.library.Upsert`
that refuses commands too far behind the newest data. ``value_time(value)`` gives a
value's event time. The *waterline* for the commands at time ``t`` is the newest
``value_time`` of any value inserted into the collection at a time ``< t`` (by any
key), minus ``lateness``. The commands at ``t`` are applied in order, each checked
against that waterline and against the key's value as it stands at that moment;
a command is rejected if

- its new value's time is below the waterline (``value_below_waterline``), or
- it would overwrite or delete a value whose time is below the waterline
  (``overwrites_below_waterline``).

A rejected command is reported and otherwise ignored, so an earlier command at the
same time still stands. With lateness 5 and ``value_time`` the value's first field::

    time | command       | waterline | result                  | updates
    1    | a -> (10, x)  | none      | applied                 | (a, (10, x)) 1 +1
    2    | a -> (12, y)  | 5         | applied                 | (a, (10, x)) 2 -1, (a, (12, y)) 2 +1
    2    | a -> (3, z)   | 5         | value_below_waterline   |
    3    | b -> (4, w)   | 7         | value_below_waterline   |
    3    | a -> None     | 7         | applied (12 >= 7)       | (a, (12, y)) 3 -1

Only values that entered the collection move the waterline; a value overwritten at
the same time it was set never did. So the waterline is a function of the output's
history, and a run continued from an arrangement recomputes it from there.

``key_time(key)`` adds key lateness: commands to a key whose time is below the key
waterline (newest ``key_time`` among keys inserted earlier, minus ``lateness``) are
rejected (``key_below_waterline``) without looking the key up, which is what makes it
sound for a runtime to evict such a key's state.

Why there is no other clean-up of the state: to reject an update to an old value,
the upsert must still see that old value. If old values were garbage-collected, a
late update to a forgotten key would look like an insert into an empty key and be
applied, and a collector that removed one of several copies would make the upsert
reject valid updates. Filtering late commands *after* the upsert is wrong too: the
upsert would already have replaced a valid value by the late one, and the filter
would then leave the key with nothing. So the value rule keeps every live key, and
memory grows with the number of live keys (see ``LocalRuntime.stats()``); only key
lateness lets keys go.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from statemachines import Machine, Reason, Refused
from statemachines.diagram import Diagram, Edge, Node
from statemachines.errors import InvalidArgument
from statemachines.times import is_duration, is_finite_time, is_time
from statemachines.updates import canonical, require_hashable
from statemachines.waterline import Mark, Waterline

__all__ = ["Late", "UpsertWithLateness"]

_EMPTY: frozenset[Any] = frozenset()


class Late(enum.StrEnum):
    """Why :class:`UpsertWithLateness` refuses a command (the rejected output's ``reason``)."""

    VALUE_BELOW_WATERLINE = "value_below_waterline"
    """Its new value's event time is below the waterline."""
    OVERWRITES_BELOW_WATERLINE = "overwrites_below_waterline"
    """It would overwrite or delete a value whose event time is below the waterline."""
    KEY_BELOW_WATERLINE = "key_below_waterline"
    """Its key's event time is below the key waterline (key lateness)."""


class UpsertWithLateness(Machine):
    """An upsert that rejects commands behind its waterlines; see the module documentation.

    >>> from statemachines import run_local, format_table
    >>> machine = UpsertWithLateness(5, value_time=lambda v: v[0])
    >>> events = [("a", (10, "x"), 1), ("a", (12, "y"), 2), ("a", (3, "z"), 2, 1)]
    >>> result = run_local(machine, events)
    >>> print(format_table(result.updates))
    key | value     | time | diff
    a   | (10, 'x') | 1    | +1
    a   | (10, 'x') | 2    | -1
    a   | (12, 'y') | 2    | +1
    >>> [(r.event.symbol, r.reason.value) for r in result.rejected]
    [((3, 'z'), 'value_below_waterline')]

    Args:
        lateness: how far behind the newest time a time may be (same units as the
            times ``value_time`` and ``key_time`` return: a finite number of at least
            0, or a ``timedelta`` for datetimes; anything else is refused, NaN
            included, which would let every late command through).
        value_time: a value's event time (value lateness), or ``None``.
        key_time: a key's event time (key lateness), or ``None``. A command for which
            either gives no finite time (NaN, infinity, no time at all) or raises is
            rejected (``invalid_symbol``, ``bad_key``).
    """

    def __init__(
        self,
        lateness: Any,
        *,
        value_time: Callable[[Any], Any] | None = None,
        key_time: Callable[[Any], Any] | None = None,
        waterline: Waterline | None = None,
    ) -> None:
        if value_time is None and key_time is None:
            raise InvalidArgument(
                "UpsertWithLateness needs value_time, key_time or both: the event time "
                "that lateness is measured on"
            )
        for name, fn in (("value_time", value_time), ("key_time", key_time)):
            if fn is not None and not callable(fn):
                raise InvalidArgument(f"{name} must be a function, got {fn!r}")
        if not is_duration(lateness):
            raise InvalidArgument(
                f"lateness is a finite duration of at least 0 (a number, or a timedelta for datetimes), got {lateness!r}"
            )
        self.lateness = lateness
        self.value_time = value_time
        self.key_time = key_time
        self.waterline = waterline or Waterline()

    def __repr__(self) -> str:
        return f"UpsertWithLateness({self.lateness!r})"

    # -- the waterline protocol -------------------------------------------------------

    def insert_marks(self, key: Any, value: Any) -> Mark:
        """``(value_time(value), key_time(key))``, ``None`` for a rule not in use."""
        return (  # a zoned time as its instant in UTC: the waterline subtracts lateness from it
            None if self.value_time is None else canonical(self.value_time(value)),
            None if self.key_time is None else canonical(self.key_time(key)),
        )

    def guess_marks(self, key: Any, symbol: Any) -> Mark | None:
        """The marks of ``symbol`` as the key's new value (a delete inserts nothing)."""
        return None if symbol is None else self.insert_marks(key, symbol)

    def with_waterline(self, waterline: Waterline) -> UpsertWithLateness:
        """The same machine reading its waterlines from ``waterline``."""
        return UpsertWithLateness(
            self.lateness, value_time=self.value_time, key_time=self.key_time, waterline=waterline
        )

    def diagram(self) -> Diagram:
        """The upsert's diagram, plus the commands the waterlines reject."""
        late = "rejected (value below waterline)"
        edges = [
            Edge("absent", "present", "v / insert +v"),
            Edge("absent", "absent", f"None / no-op, v / {late}"),
            Edge("present", "present", f"w / -v +w, v / no-op, w / {late}, any / rejected (overwrites v below it)"),
            Edge("present", "absent", "None / delete -v (rejected if v is below the waterline)"),
        ]
        notes = [f"waterline = newest value time inserted earlier - {self.lateness!r}"]
        if self.key_time is not None:
            notes.append("key lateness: keys below the key waterline are rejected, and may be evicted")
        nodes = (Node("absent", "absent", initial=True), Node("present", "present (v)"))
        return Diagram(type(self).__name__, nodes, tuple(edges), tuple(notes))

    def forgets(self, key: Any, high: Mark | None) -> bool:
        """True if every later command to ``key`` is rejected without a look-up."""
        line = self._line(high, 1)
        if line is None or self.key_time is None:
            return False
        try:
            return bool(self.key_time(key) < line)
        except Exception:  # noqa: BLE001 - such a key is kept; its commands get the error
            return False

    def _line(self, high: Mark | None, rule: int) -> Any:
        newest = None if high is None else high[rule]
        return None if newest is None else newest - self.lateness

    # -- the machine ------------------------------------------------------------------

    def transition(self, key: Any, values: frozenset[Any], symbol: Any, time: Any) -> frozenset[Any]:
        """The command applied as :class:`~statemachines.library.Upsert` does, unless a
        waterline refuses it (:class:`Late`)."""
        high = self.waterline.high_before(time)
        if self.key_time is not None:
            self._check_key(key, time, high)
        if self.value_time is not None:
            self._check_value(next(iter(values), None), symbol, time, high)
        return _EMPTY if symbol is None else frozenset((symbol,))

    def validate_symbol(self, symbol: Any) -> None:
        """A value must be hashable: it becomes part of the collection's data."""
        require_hashable(symbol)

    def _check_key(self, key: Any, time: Any, high: Mark | None) -> None:
        key_time = _time_of(self.key_time, key)  # type: ignore[arg-type]
        if isinstance(key_time, str):
            raise Refused(Reason.BAD_KEY, f"key_time({key!r}) {key_time}")
        line = self._line(high, 1)
        if line is not None and key_time < line:
            raise Refused(Late.KEY_BELOW_WATERLINE, (
                f"key time {key_time!r} < key waterline {line!r} (newest key time {high[1]!r} "  # type: ignore[index]
                f"inserted before time {time!r}, minus lateness {self.lateness!r})"
            ))

    def _check_value(self, current: Any, new: Any, time: Any, high: Mark | None) -> None:
        """Refuse a command whose new value, or the value it replaces, is below the waterline."""
        if new is not None:
            new_time = _time_of(self.value_time, new)  # type: ignore[arg-type]
            if isinstance(new_time, str):
                raise Refused(Reason.INVALID_SYMBOL, f"value_time({new!r}) {new_time}")
        line = self._line(high, 0)
        if line is None:
            return
        if new is not None and new_time < line:
            raise Refused(Late.VALUE_BELOW_WATERLINE, f"value time {new_time!r} < {self._why(line, high, time)}")
        if current is not None and (old_time := self.value_time(current)) < line:  # type: ignore[misc]
            raise Refused(
                Late.OVERWRITES_BELOW_WATERLINE,
                f"the key's value {current!r} has time {old_time!r} < {self._why(line, high, time)}",
            )

    def _why(self, line: Any, high: Any, time: Any) -> str:
        return (
            f"waterline {line!r} (newest value time {high[0]!r} inserted before time "
            f"{time!r}, minus lateness {self.lateness!r})"
        )


def _time_of(fn: Callable[[Any], Any], item: Any) -> Any:
    """``fn(item)`` if it is a time (a number, datetime or date), else why not (a str)."""
    try:
        time = fn(item)
    except Exception as exc:  # noqa: BLE001 - user code; the command is rejected
        return f"failed: {type(exc).__name__}: {exc}"
    if not is_time(time):  # NaN included
        return f"returned {time!r}, which is not a time (a number, datetime or date)"
    if not is_finite_time(time):  # would hold the waterline at infinity for good
        return f"returned {time!r}, which is not a finite time"
    return canonical(time)
