"""Machines whose transition reads only a key's values and the symbol, run in bulk.

A machine class that sets ``tabulated = True`` declares that ``transition(key,
values, symbol, time)`` depends on ``values`` and ``symbol`` alone. A runtime may then
ask it once per distinct ``(values, symbol)`` pair it meets, keep the answer in a
table, and step many keys' events at once without Python per event::

    values id  symbol id  ->  values id          keys in lockstep (event position j)
    0 {}       0 add x        1 {x}              j=0: ann 0 -add x-> 1, bob 0 -add y-> 2
    0 {}       1 add y        2 {y}              j=1: ann 1 -del x-> 0
    1 {x}      2 del x        0 {}

A pair whose transition rejects the event (it raises, or a new value fails the
output's check) is *irregular*: every key that meets it is stepped event by event
instead (:func:`~statemachines.core.run_key`), which gives the same rejection.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from statemachines.core import ValueCheck, apply_transition
from statemachines.events import Event, Rejected
from statemachines.machine import Machine

__all__ = ["IRREGULAR", "MAX_CELLS", "TableFull", "TransitionTable", "step_keys"]

UNKNOWN = -1
IRREGULAR = -2
MAX_CELLS = 1 << 22
"""The most (values, symbol) cells a table holds (32 MiB): a machine meeting more
distinct values and symbols than that is not worth tabulating."""


class TableFull(Exception):
    """The table would outgrow :data:`MAX_CELLS`; step the events one by one."""


class TransitionTable:
    """``(values id, symbol id) -> values id`` of one machine, filled on first use.

    Values id 0 is the empty set; ``symbols`` are the distinct symbols met, by id.
    """

    def __init__(self, machine: Machine, check: ValueCheck | None) -> None:
        self.machine, self.check = machine, check
        self.states: list[frozenset[Any]] = [frozenset()]
        self._state_ids: dict[frozenset[Any], int] = {frozenset(): 0}
        self.symbols: list[Any] = []
        self._symbol_ids: dict[Any, int] = {}
        self._steps = np.full((1, 0), UNKNOWN, np.int64)

    def state_id(self, values: frozenset[Any]) -> int:
        found = self._state_ids.get(values)
        if found is None:
            found = self._state_ids[values] = len(self.states)
            self.states.append(values)
            self._grow(len(self.states), self._steps.shape[1])
        return found

    def symbol_ids(self, symbols: list[Any]) -> Any:
        """The ids of ``symbols`` (new ones added), as an array."""
        ids = self._symbol_ids
        out = np.fromiter((ids.setdefault(s, len(ids)) for s in symbols), np.int64, len(symbols))
        if len(ids) > len(self.symbols):
            self.symbols.extend(list(ids)[len(self.symbols) :])
            self._grow(len(self.states), len(self.symbols))
        return out

    def step(self, states: Any, symbols: Any, event_at: Callable[[int], tuple[Any, Any]]) -> Any:
        """The values ids after ``symbols`` (ids) reach ``states`` (ids); ``IRREGULAR``
        where the transition rejects the event. Where a pair is asked the first time,
        ``event_at(i)`` gives the key and time of the ``i``-th for the transition."""
        after = self._steps[states, symbols]
        unknown = np.flatnonzero(after == UNKNOWN)
        if len(unknown):
            width = max(len(self.symbols), 1)
            codes, first = np.unique(states[unknown] * width + symbols[unknown], return_index=True)
            for code, at in zip(codes.tolist(), unknown[first].tolist(), strict=True):
                s, y = divmod(code, width)
                key, time = event_at(at)
                time = time.item() if isinstance(time, np.generic) else time  # a Python number, as elsewhere
                event = Event(key, self.symbols[y], time, None)
                outcome = apply_transition(self.machine, key, self.states[s], event, self.check)
                self._steps[s, y] = IRREGULAR if type(outcome) is Rejected or outcome[1] else self.state_id(outcome[0])
            after = self._steps[states, symbols]
        return after

    def _grow(self, rows: int, columns: int) -> None:
        old = self._steps
        if rows <= old.shape[0] and columns <= old.shape[1]:
            return
        if rows * columns > MAX_CELLS:
            raise TableFull(f"{rows} sets of values and {columns} symbols")
        grown = np.full((max(rows, min(2 * old.shape[0], MAX_CELLS // max(columns, 1))), columns), UNKNOWN, np.int64)
        grown[: old.shape[0], : old.shape[1]] = old
        self._steps = grown


def step_keys(
    table: TransitionTable, groups: Any, initial: Any, symbols: Any, times: Any, keys: list[Any]
) -> tuple[Any, Any, Any, Any]:
    """Step every key's events at once.

    Args:
        table: the machine's transition table.
        groups: for each event, its key's number (0, 1, ...: events of one key are
            consecutive, in ``(time, order)`` order).
        initial: for each key number, the values id it starts from.
        symbols: for each event, its symbol id.
        times: for each event, its time (an array of comparable numbers).
        keys: for each key number, the key.

    Returns:
        ``(first, before, after, irregular)``: for each ``(key, time)`` at which the
        key's values changed, the index of its first event and the values ids before
        and after; and for each key number, whether it met an irregular pair (its
        changes are then left out: step it event by event).
    """
    n = len(groups)
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]]) if n else np.zeros(0, np.int64)
    position = np.arange(n) - starts[groups] if n else np.zeros(0, np.int64)
    if n and position.max() < 1 << 15:  # numpy sorts 16-bit numbers by radix
        position = position.astype(np.int16)
    by_position = np.argsort(position, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(position))] if n else np.zeros(1, np.int64)
    current = np.asarray(initial, np.int64).copy()
    irregular = np.zeros(len(current), bool)
    before, after = np.empty(n, np.int64), np.empty(n, np.int64)
    for j in range(len(bounds) - 1):
        at = by_position[bounds[j] : bounds[j + 1]]
        g = groups[at]
        now = current[g]
        nxt = table.step(now, symbols[at], partial(_event_at, keys, times, g, at))
        bad = nxt == IRREGULAR
        if bad.any():
            irregular[g[bad]] = True
            nxt = np.where(bad, now, nxt)
        current[g] = nxt
        before[at], after[at] = now, nxt
    first = np.flatnonzero(np.r_[True, (groups[1:] != groups[:-1]) | (times[1:] != times[:-1])]) if n else starts
    last = np.r_[first[1:] - 1, n - 1] if n else first
    b, a = before[first], after[last]
    changed = (b != a) & ~irregular[groups[first]]
    return first[changed], b[changed], a[changed], irregular


def _event_at(keys: list[Any], times: Any, groups: Any, events: Any, i: int) -> tuple[Any, Any]:
    """The key and time of the ``i``-th of ``events`` (whose key numbers are ``groups``)."""
    return keys[groups[i]], times[events[i]]
