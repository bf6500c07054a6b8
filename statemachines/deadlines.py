"""Armed deadlines: when each key of a machine with deadlines wants to be woken.

A key's deadline is ``machine.deadline(key, values)``, read again whenever its values
change. A step wakes the keys whose deadline falls below its frontier, earliest
first; a key that moved on since it was armed is not woken for its old deadline::

    arm(a, {x}) -> 5      arm(b, {y}) -> 3      arm(a, {z}) -> 9
    due(upto=6): b        (a's 5 is stale: a now wakes at 9)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Deadlines"]


class Deadlines:
    """The armed deadline of each key, and a heap to wake them in time order.

    Attributes:
        due: key -> the time its armed deadline wakes it; plain data, as
            checkpoints store it.
    """

    def __init__(self, deadline: Callable[[Any, frozenset[Any]], Any], due: dict[Any, Any] | None = None) -> None:
        self._deadline = deadline
        self.due: dict[Any, Any] = {}
        self._heap: list[tuple[Any, int, Any]] = []
        self._seq = 0  # breaks ties between equal times without comparing keys
        for key, time in (due or {}).items():
            self._push(key, time)

    def arm(self, key: Any, values: frozenset[Any]) -> None:
        """Arm ``key`` for the deadline its ``values`` ask for (none for empty values)."""
        time = self._deadline(key, values) if values else None
        if time is None:
            self.due.pop(key, None)
        elif self.due.get(key) != time:
            self._push(key, time)

    def pop_due(self, upto: Any) -> Iterator[Any]:
        """The keys whose armed deadline lies below ``upto`` (every one if ``None``),
        earliest first; each stays armed until it is armed again."""
        heap = self._heap
        while heap and (upto is None or heap[0][0] < upto):
            time, _, key = heapq.heappop(heap)
            if self.due.get(key) == time:
                yield key

    def earliest(self) -> Any:
        """The earliest armed deadline, or ``None``."""
        return min(self.due.values(), default=None)

    def __len__(self) -> int:
        return len(self.due)

    def _push(self, key: Any, time: Any) -> None:
        self.due[key] = time
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, key))
