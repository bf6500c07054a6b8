"""Upsert: ``(key, Optional[value])`` commands become a keyed collection.

Each key holds at most one value. A command sets it (``value``) or removes it
(``None``); at one time the command with the highest order wins, and only the net
change is emitted. Repeating the current value, or deleting an absent key, emits
nothing. The upserts of one key at times 0..5::

    symbol    time      updates
    mcsherry  0         (frank, mcsherry) 0 +1
    zappa     1         (frank, mcsherry) 1 -1, (frank, zappa) 1 +1
    None      2         (frank, zappa) 2 -1
    oz        3         (frank, oz) 3 +1
    oz        4         (nothing)
    None      5         (frank, oz) 5 -1
"""

from __future__ import annotations

from typing import Any

from statemachines import Event, Machine, event_rank
from statemachines.diagram import Diagram, Edge, Node
from statemachines.updates import require_hashable

__all__ = ["Upsert"]

_EMPTY: frozenset[Any] = frozenset()


class Upsert(Machine):
    """Upsert commands to a keyed collection; see the module documentation.

    >>> from statemachines import run_local, format_table
    >>> events = [("frank", "mcsherry", 0), ("frank", "zappa", 1), ("frank", None, 2)]
    >>> print(format_table(run_local(Upsert(), events).updates))
    key   | value    | time | diff
    frank | mcsherry | 0    | +1
    frank | mcsherry | 1    | -1
    frank | zappa    | 1    | +1
    frank | zappa    | 2    | -1
    """

    def transition(self, key: Any, values: frozenset[Any], symbol: Any, time: Any) -> frozenset[Any]:
        return _EMPTY if symbol is None else frozenset((symbol,))

    def validate_symbol(self, symbol: Any) -> None:
        """A value must be hashable: it becomes part of the collection's data."""
        require_hashable(symbol)

    def diagram(self) -> Diagram:
        """A key is absent or holds one value; each command's effect on the output."""
        return Diagram(
            type(self).__name__,
            (Node("absent", "absent", initial=True), Node("present", "present (v)")),
            (
                Edge("absent", "present", "v / insert +v"),
                Edge("absent", "absent", "None / no-op"),
                Edge("present", "present", "v / no-op, w / -v +w"),
                Edge("present", "absent", "None / delete -v"),
            ),
        )

    def reduce_same_time(self, first: Event, second: Event) -> Event:
        """Keep the command that is applied last: the one of highest ``event_rank``."""
        if first.order is not None and second.order is not None and first.order != second.order:
            return second if second.order > first.order else first
        later = event_rank(second.order, second.symbol) > event_rank(first.order, first.symbol)
        return second if later else first
