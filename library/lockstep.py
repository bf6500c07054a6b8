"""A detector's NFA run for many keys at once: one event per key per round, in arrays.

When no condition of a pattern reads the partial match (each is an expression,
answered for a batch of events before the NFA runs, or a function of the event
alone), what a partial match does with an event depends only on its state and the
event's answers, so the whole NFA is a table (:class:`Table`) and the keys can step
together: round ``r`` applies the ``r``-th event of every key that has
one, to all of their partial matches at once, with numpy. A partial match is a row
``(key, state, chain, start, last, end)``; its events are a *chain*, a parent chain
and the event a step took. No two rows share a chain (a pattern where one step may
take an event two ways is not covered), so a key's partial matches stay a set.
What rows appear, end and report is logged, and turned into updates once at the
end, consolidated per key and time as :func:`~statemachines.core.advance_key` does::

    round   key ann's event   partial matches (state, events)       logged at the event's time
    0       fail at 1         (0#1, [f1])                           + (0#1, [f1])
    1       fail at 2         (0#1, [f2]), (0#2, [f1 f2])           - (0#1, [f1]), + both
    ...
    end     (window closes)                                         - each, + its timeout

The result is exactly the per-event detector's (``tests/test_lockstep.py`` checks it
against :func:`~statemachines.core.advance_key` with hypothesis); an event the
expressions cannot read is rejected as there. Every function condition is called on
every event (event by event, only on those a state asks it about); one that raises
sends its key event by event, where it raises (and the runtime rejects the event as
``transition_failed``) only if a step asks. Patterns it does not
cover (a condition that reads the partial match, a skip strategy) and keys whose
events it cannot take as they are (times that are not all ints or all floats, a
symbol the output cannot store) run event by event.
:mod:`statemachines.spark.lockstep` runs the same rounds over Spark's columns.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from statemachines.core import OwnTypeCheck, _order_by_value, advance_key
from statemachines.events import Event, Refused, Rejected
from statemachines.library.expressions import Expression
from statemachines.library.nfa import Nfa, State
from statemachines.library.pattern import Skip, _always
from statemachines.updates import Update

if TYPE_CHECKING:
    from statemachines.library.cep import Detector

__all__ = [
    "KINDS", "MATCH_KIND", "REPLACED", "RETIRED", "Rounds", "Table", "advance_keys", "always_bits", "event_answers", "event_lists", "function_conditions", "table_of",
]

PARTIAL, MATCH, TIMEOUT = "partial", "match", "timeout"
RETIRED, REPLACED = "retired", "replaced"  # a rule version's partial matches ending with it
_NEW = tuple.__new__
_MAX_STATES = 4096  # a pattern whose NFA has more states runs event by event
_MAX_CONDITIONS = 10  # the table holds a row per state and answer vector
_EXACT_INT = 1 << 52  # int times beyond this are not compared exactly as floats


class Table:
    """A pattern's NFA as flat arrays, row ``state * combos + answers``: how many
    steps take the event (``takes_at``), each one's step name, state after (-1: none)
    and whether it completes a match (``step_at``, ``after_at``, ``completes_at``, row
    times ``width`` plus the take); the state the partial match stays in (-1: it
    ends; ``stay_at``); whether it completes without taking the event
    (``completes_here_at``). State 0 is the start."""

    def __init__(self, nfa: Nfa) -> None:
        import numpy as np

        self.texts: list[str | None] = [None]
        states: list[State] = [nfa.start]
        ids: dict[str | None, int] = {None: 0}
        combos = 1 << len(nfa.conditions)
        outcomes = []
        i = 0
        while i < len(states):
            row = [nfa.outcome(states[i], a) for a in range(combos)]
            outcomes.append(row)
            for outcome in row:
                if len({name for name, _, _ in outcome.takes}) < len(outcome.takes):
                    # one step taking an event into two states: two partial matches
                    # would share their events, which rows do not (see Rounds)
                    raise _Uncovered("a step takes one event two ways")
                for text in (*(after for _, after, _ in outcome.takes), outcome.stay):
                    if text is not None and text not in ids:
                        if len(states) >= _MAX_STATES:
                            raise _Uncovered(f"more than {_MAX_STATES} states")
                        ids[text] = len(states)
                        states.append(nfa.state(text))
                        self.texts.append(text)
            i += 1
        names = list(dict.fromkeys(s.name for s in nfa.steps))
        self.names = names
        width = max(1, max(len(o.takes) for row in outcomes for o in row))
        n = len(states)
        takes = np.zeros((n, combos), np.int64)
        step = np.zeros((n, combos, width), np.int64)
        after = np.full((n, combos, width), -1, np.int64)
        completes = np.zeros((n, combos, width), bool)
        stay = np.full((n, combos), -1, np.int64)
        completes_here = np.zeros((n, combos), bool)
        for s, row in enumerate(outcomes):
            for a, outcome in enumerate(row):
                takes[s, a] = len(outcome.takes)
                for j, (name, state_after, completing) in enumerate(outcome.takes):
                    step[s, a, j] = names.index(name)
                    after[s, a, j] = ids[state_after] if state_after is not None else -1
                    completes[s, a, j] = completing
                if s:  # the start is never a partial match that stays
                    stay[s, a] = ids[outcome.stay] if outcome.stay is not None else -1
                    completes_here[s, a] = outcome.completes
        # kept flat: row ``state * combos + answers`` (times ``width``, plus the take)
        self.combos, self.width = combos, width
        self.takes_at, self.stay_at, self.completes_here_at = takes.ravel(), stay.ravel(), completes_here.ravel()
        self.step_at, self.after_at, self.completes_at = step.ravel(), after.ravel(), completes.ravel()
        # a partial match whose window closes here is a match (a trailing not_followed_by)
        self.match_at_end = np.array([s.text is not None and nfa.pending(s) and not nfa.next_decides for s in states])
        # the gap a partial match waiting here has (within(d, previous_and_current)), else inf
        if not all(isinstance(g, int | float) for g in nfa.gaps.values()):
            raise _Uncovered("a gap of timedeltas: its times are datetimes, which step event by event")
        self.gap = np.array(
            [float("inf") if s.text is None else nfa.gaps.get((s.position.step, s.position.count), float("inf"))
             for s in states],
            np.float64,
        )
        self.ids = ids


class _Uncovered(Exception):  # noqa: N818 - an internal signal: run event by event
    pass


def table_of(detector: Detector) -> Table | None:
    """The detector's table, or ``None`` if its pattern is not covered (see the module)."""
    nfa, pattern = detector._nfa, detector.pattern
    if pattern.skip != Skip.NO_SKIP or nfa.iterative or len(nfa.conditions) > _MAX_CONDITIONS:
        return None
    if importlib.util.find_spec("numpy") is None:  # the core install: event by event
        return None
    try:
        return Table(nfa)
    except _Uncovered:
        return None


def advance_keys(
    detector: Detector,
    table: Table,
    work: Iterable[tuple[Any, frozenset[Any], list[Event]]],
    upto: Any,
    check: Any,
) -> Iterable[tuple[Any, frozenset[Any], tuple[frozenset[Any], list[Any], list[Rejected]]]]:
    """``(key, values before, advance_key's outcome)`` for each key of ``work``: the
    keys the table can step together in rounds, the others event by event."""
    import numpy as np

    nfa = detector._nfa
    answers = event_answers(detector)
    own = type(check) is OwnTypeCheck
    spans = [s for s in (detector.pattern.window, *nfa.gaps.values()) if s is not None]
    run_kind: type | None = None
    stepped: list[tuple[Any, frozenset[Any], list[Rejected]]] = []
    symbols: list[Any] = []
    times: list[Any] = []
    seqs: list[int] = []
    bits: list[int] = []
    counts: list[int] = []
    for key, values, events in work:
        kind = _time_kind(events, values, spans)
        if run_kind is None:
            run_kind = kind
        if (
            kind is None
            or kind is not run_kind
            or not _plain_values(values, table)
            or (check is not None and not (own and all(check.stores(e) for e in events)))
            or (upto is not None and events and not events[-1][2] < upto)
        ):
            yield key, values, advance_key(detector, key, values, events, upto, check)
            continue
        try:
            rejected, *answered = _answered(events, answers)
        except Exception:  # a function condition raised: event by event asks only what a step needs
            yield key, values, advance_key(detector, key, values, events, upto, check)
            continue
        for column, items in zip((symbols, times, seqs, bits), answered, strict=True):
            column.extend(items)
        counts.append(len(events) - len(rejected))
        stepped.append((key, values, rejected))
    if not stepped:
        return
    dtype = np.float64 if run_kind is float else np.int64
    given = _GivenChains(stepped, table.ids, dtype)
    rounds = Rounds(
        table, detector.pattern.window, np.array(counts, np.int64), np.array(times, dtype), np.array(bits, np.int64),
        given.rows, len(given.events), upto,
    )
    yield from _python_outcomes(rounds, given.events, stepped, symbols, times, seqs, detector.tag)


def always_bits(nfa: Nfa) -> int:
    """The answers of the conditions that always hold (a step without ``where``)."""
    return sum(1 << i for i, c in enumerate(nfa.conditions) if c is _always)


def _plain_values(values: frozenset[Any], table: Table) -> bool:
    """Whether the rounds take these partial matches: states the table knows, and no
    two with the same events (as rows never are)."""
    partials = [v for v in values if v[0] == PARTIAL]
    return all(v[1] in table.ids for v in partials) and len({v[2] for v in partials}) == len(partials)


def event_answers(detector: Detector) -> Callable[[Any], int]:
    """Every condition's answer for one symbol, as bits (bit i: condition i holds):
    the expressions' (a symbol they cannot read is :class:`Refused`), those that
    always hold, and each function's, called on the symbol alone (what one raises
    is raised: then the key runs event by event, asking only what its steps need)."""
    nfa = detector._nfa
    # a pattern without expressions asks nothing of an event in bulk (so refuses none)
    expressions = detector._expression_answers if nfa.expression_mask else None
    always = always_bits(nfa)
    functions = function_conditions(nfa)

    def answers(symbol: Any) -> int:
        yes = always if expressions is None else expressions(symbol) | always
        for bit, condition in functions:
            if condition(symbol, None):
                yes |= bit
        return yes

    return answers


def function_conditions(nfa: Nfa) -> list[tuple[int, Any]]:
    """``(bit, condition)`` for the conditions that are Python functions of the event."""
    return [(1 << i, c) for i, c in enumerate(nfa.conditions) if not isinstance(c, Expression) and c is not _always]


def _answered(
    events: list[Event], answers: Callable[[Any], int]
) -> tuple[list[Rejected], list[Any], list[Any], list[int], list[int]]:
    """The events the conditions cannot read (rejected), and for the others their
    symbols, times, places among the key's events applied at their time, and answers
    (as bits)."""
    rejected: list[Rejected] = []
    symbols, times, seqs, bits = [], [], [], []
    seq, at = 0, None
    for event in events:
        if event[2] != at:
            seq, at = 0, event[2]
        try:
            bits.append(answers(event[1]))
        except Refused as refusal:
            rejected.append(Rejected(event, refusal.reason, refusal.detail))
            continue
        symbols.append(event[1])
        times.append(event[2])
        seqs.append(seq)
        seq += 1
    return rejected, symbols, times, seqs, bits


def _time_kind(events: list[Event], values: frozenset[Any], spans: list[Any]) -> type | None:
    """``int`` or ``float``: the one type of the key's times, if numpy compares them
    (and their sums with the window and gaps) exactly as Python does and those sums
    are of the same type (int times with a float window end at float times, which
    the rounds' one time column cannot tell from the events' int ones); else
    ``None``."""
    times = [e[2] for e in events]
    times += [t for v in values if v[0] == PARTIAL for t in (v[2][0][1], v[2][-1][1])]
    kinds = {type(t) for t in times}
    if len(kinds) != 1 or not {type(s) for s in spans} <= {int, float}:
        return None
    kind = kinds.pop()
    if kind is float:
        return float
    if kind is int and all(type(s) is int for s in spans) and all(-_EXACT_INT < t < _EXACT_INT for t in (*times, *spans)):
        return int
    return None


class _GivenChains:
    """The keys' partial matches before their events, as rows of :class:`Rounds`, and
    their events (chain ``i`` is ``events[i]``)."""

    def __init__(self, stepped: list[tuple[Any, frozenset[Any], list[Rejected]]], ids: dict[Any, int], dtype: Any) -> None:
        import numpy as np

        keys, states, starts, lasts = [], [], [], []
        self.events: list[tuple[Any, ...]] = []
        for k, (_, values, _) in enumerate(stepped):
            for value in values:
                if value[0] != PARTIAL:  # a finding read back with them
                    continue
                events = value[2]
                self.events.append(events)
                keys.append(k)
                states.append(ids[value[1]])
                starts.append(events[0][1])
                lasts.append(events[-1][1])
        self.rows = {
            "key": np.array(keys, np.int64), "state": np.array(states, np.int64), "chain": np.arange(len(keys), dtype=np.int64),
            "start": np.array(starts, dtype), "last": np.array(lasts, dtype),
        }


def _python_outcomes(
    rounds: Rounds, given: list[tuple[Any, ...]], stepped: list[tuple[Any, frozenset[Any], list[Rejected]]],
    symbols: list[Any], times: list[Any], seqs: list[int], tag: tuple[Any, ...],
) -> Iterable[tuple[Any, frozenset[Any], tuple[frozenset[Any], list[Any], list[Rejected]]]]:
    """Each key's outcome as :func:`~statemachines.core.advance_key` gives it."""
    import numpy as np

    kind, key, state, chain, time, diff = rounds.logged()
    left = rounds.left
    names, texts = rounds.table.names, rounds.table.texts
    # every chain's events, parents before children (chains are made in that order)
    chain_events = list(given)
    parent, step, event = (c[len(given):].tolist() for c in rounds.chains())
    for p, n, e in zip(parent, step, event, strict=True):
        chain_events.append((*(chain_events[p] if p >= 0 else ()), (names[n], times[e], seqs[e], symbols[e])))
    events_of = chain_events.__getitem__
    keys = [s[0] for s in stepped]
    updates: list[list[Any]] = [[] for _ in stepped]
    bounds = np.flatnonzero((np.diff(key) != 0) | (np.diff(time) != 0)) + 1
    rows = zip(kind.tolist(), key.tolist(), state.tolist(), chain.tolist(), time.tolist(), diff.tolist(), strict=True)
    start = 0
    for end in [*bounds.tolist(), len(key)]:
        k = -1
        for _ in range(start, end):
            what, k, s, c, t, d = next(rows)
            value = (KINDS[what], "" if what == _MATCH else texts[s], events_of(c)) + tag
            updates[k].append(_NEW(Update, ((keys[k], value), t, d)))
        if end - start > 1:  # one key's changes at one time, in value order
            _order_by_value(updates[k], len(updates[k]) - (end - start))
        start = end
    after: list[list[Any]] = [[] for _ in stepped]
    for k, s, c in zip(left["key"].tolist(), left["state"].tolist(), left["chain"].tolist(), strict=True):
        after[k].append((PARTIAL, texts[s], events_of(c)) + tag)
    for k, (key_, values, rejected) in enumerate(stepped):
        yield key_, values, (frozenset(after[k]), updates[k], rejected)


class Rounds:
    """Keys stepped together, one event per key per round.

    ``counts[k]``: key ``k``'s events, which are ``event_time``/``event_bits`` one key
    after another, in the order applied;
    ``given``: its partial matches before them, rows ``key, state, chain, start,
    last`` whose chains ``0 .. given_chains - 1`` the caller knows the events of;
    ``ending``: ``(time, kind)``, at ``time`` (not below ``upto``) the partial matches
    left end, after the windows closing by then have closed, found as ``kind`` (a
    number of :data:`KINDS`: a rule version replaced or retired).
    """

    def __init__(
        self, table: Table, window: Any, counts: Any, event_time: Any, event_bits: Any,
        given: dict[str, Any], given_chains: int, upto: Any, *, ending: tuple[Any, int] | None = None,
    ) -> None:
        import numpy as np

        self.np, self.table, self.upto, self.ending = np, table, upto, ending
        self.window = float("inf") if window is None else window
        self.event_time, self.event_bits = event_time, event_bits
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        # keys by decreasing number of events: those still stepping in a round are a prefix
        self.order = np.argsort(-counts, kind="stable")
        self.counts, self.offsets = counts[self.order], offsets[self.order]
        rank = np.empty_like(self.order)
        rank[self.order] = np.arange(len(self.order))
        rows = dict(given, key=rank[given["key"]])
        rows["end"] = self._end(rows["start"], rows["last"], rows["state"])
        given_none = np.full(given_chains, -1, np.int64)
        # chains: parent (-1: none), step name, event, in the order they are made
        self.parents, self.steps, self.events = [given_none], [given_none], [given_none]
        self.made = given_chains
        self.logs: list[tuple[Any, ...]] = []  # (kind, key, state, chain, time, diff): columns and constants
        self.left = self._step(rows)
        self.left["key"] = self.order[self.left["key"]]

    def chains(self) -> tuple[Any, Any, Any]:
        """Every chain's parent (-1: none), step name and event."""
        np = self.np
        return np.concatenate(self.parents), np.concatenate(self.steps), np.concatenate(self.events)

    def _end(self, start: Any, last: Any, state: Any) -> Any:
        """When each row's partial match ends: its window closes, or its gap."""
        np = self.np
        end = start + self.window
        gap = self.table.gap[state]
        if np.isfinite(gap).any():
            end = np.minimum(end, last + gap)
        return end

    def _log(self, kind: int, rows: dict[str, Any], time: Any, diff: int) -> None:
        """Log ``rows`` as ``kind`` at ``time`` (``None``: each at its end) with ``diff``."""
        if len(rows["key"]):
            self.logs.append((kind, rows["key"], rows["state"], rows["chain"], rows["end"] if time is None else time, diff))

    def _expire(self, rows: dict[str, Any], ending: Any) -> None:
        """Log the end of ``rows[ending]``: each leaves at its end, found as a timeout
        (or a match)."""
        gone = _take(rows, ending)
        if not len(gone["key"]):
            return
        self._log(_PARTIAL, gone, None, -1)
        matched = self.table.match_at_end[gone["state"]]
        self._log(_MATCH, _take(gone, matched), None, 1)
        self._log(_TIMEOUT, _take(gone, ~matched), None, 1)

    def _step(self, rows: dict[str, Any]) -> dict[str, Any]:
        """Run every round; the rows left after the last."""
        np, table = self.np, self.table
        done: list[dict[str, Any]] = []  # rows of keys whose events are all applied
        stepping = len(self.counts)
        for r in range(int(self.counts[0]) if len(self.counts) else 0):
            active = int(np.searchsorted(-self.counts, -r, side="left"))  # keys with more than r events
            if active < stepping:  # some keys have no more events: their rows wait for the end
                going = rows["key"] < active
                done.append(_take(rows, ~going))
                rows, stepping = _take(rows, going), active
            event_of_key = self.offsets[:active] + r
            live = rows
            ending = live["end"] <= self.event_time[event_of_key[live["key"]]]
            if ending.any():
                self._expire(live, ending)
                live = _take(live, ~ending)
            n_live = len(live["key"])
            # the live partial matches, then a start for each key: every event may begin one
            key = np.concatenate([live["key"], np.arange(active, dtype=np.int64)])
            state = np.concatenate([live["state"], np.zeros(active, np.int64)])
            chain = np.concatenate([live["chain"], np.full(active, -1, np.int64)])
            event = event_of_key[key]
            time = self.event_time[event]
            start = np.concatenate([live["start"], time[n_live:]])
            # the table's row for each row's state and its event's answers
            at = state * table.combos + self.event_bits[event]
            # partial matches that stay, move to another state, or end
            stay = table.stay_at[at[:n_live]]
            kept = stay == live["state"]
            self._log(_PARTIAL, _take(live, ~kept), time[:n_live][~kept], -1)
            candidates = []
            moved = ~kept & (stay >= 0)
            if moved.any():
                m = _take(live, moved)
                m["state"] = stay[moved]
                m["end"] = self._end(m["start"], m["last"], m["state"])
                candidates.append(m)
            here = table.completes_here_at[at[:n_live]]
            if here.any():
                self._log(_MATCH, _take(live, here), time[:n_live][here], 1)
            # the steps that take the event
            n = table.takes_at[at]
            row = np.repeat(np.arange(len(key)), n)
            if len(row):
                j = np.arange(len(row)) - np.repeat(np.cumsum(n) - n, n)
                taking = at[row] * table.width + j
                after, completes = table.after_at[taking], table.completes_at[taking]
                taken = {
                    "key": key[row], "state": after, "chain": self._chains(chain[row], table.step_at[taking], event[row]),
                    "start": start[row], "last": time[row],
                }
                if completes.any():
                    self._log(_MATCH, _take(taken, completes), time[row][completes], 1)
                waiting = after >= 0
                if waiting.any():
                    w = _take(taken, waiting)
                    w["end"] = self._end(w["start"], w["last"], w["state"])
                    candidates.append(w)
            kept_rows = _take(live, kept)
            if candidates:
                # rows never share events (each take makes a new chain; a row that moves
                # leaves its own), so every candidate is a new value
                born = _join(*candidates)
                self._log(_PARTIAL, born, self.event_time[event_of_key[born["key"]]], 1)
                rows = _join(kept_rows, born)
            else:
                rows = kept_rows
        rows = _join(rows, *done)
        closing = rows["end"] < float("inf") if self.upto is None else rows["end"] < self.upto
        self._expire(rows, closing)
        left = _take(rows, ~closing)
        if self.ending is None:
            return left
        at, kind = self.ending
        closing = left["end"] <= at
        self._expire(left, closing)
        ended = _take(left, ~closing)
        now = np.full(len(ended["key"]), at, self.event_time.dtype)
        self._log(_PARTIAL, ended, now, -1)
        self._log(kind, ended, now, 1)
        return _take(ended, np.zeros(len(now), bool))

    def _chains(self, parents: Any, names: Any, events: Any) -> Any:
        """New chains: each ``parent`` (-1: none) and the event taken by step ``name``."""
        self.parents.append(parents)
        self.steps.append(names)
        self.events.append(events)
        self.made += len(parents)
        return self.np.arange(self.made - len(parents), self.made, dtype=self.np.int64)

    def logged(self, by_time: bool = True) -> tuple[Any, ...]:
        """The logged rows as columns ``(kind, key, state, chain, time, diff)`` in
        key order (``by_time``: then time order), a partial match's changes at one
        time summed (none left that sum to 0)."""
        np = self.np
        if not self.logs:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, empty, np.zeros(0, self.event_time.dtype), empty
        kinds, keys, states, chains, times, diffs = zip(*self.logs, strict=True)
        lengths = [len(k) for k in keys]
        kind, diff = np.repeat(np.array(kinds, np.int64), lengths), np.repeat(np.array(diffs, np.int64), lengths)
        key, state, chain = np.concatenate(keys), np.concatenate(states), np.concatenate(chains)
        time = np.concatenate(times).astype(self.event_time.dtype)  # ends: times plus spans of their type
        key = self.order[key]
        partial = np.flatnonzero(kind == _PARTIAL)
        if len(partial):
            # a partial match's rows are logged in time order: grouped by value
            # (stably), its changes at one time are neighbours
            value = chain * len(self.table.texts) + state
            ordered = partial[np.argsort(value[partial], kind="stable")]
            value = value[ordered]
            head = np.r_[True, (value[1:] != value[:-1]) | (time[ordered][1:] != time[ordered][:-1])]
            sums = np.add.reduceat(diff[ordered], np.flatnonzero(head))
            heads = ordered[head]
            diff = diff.copy()
            diff[heads] = sums
            kept = np.concatenate([heads[sums != 0], np.flatnonzero(kind != _PARTIAL)])
            kind, key, state, chain, time, diff = (c[kept] for c in (kind, key, state, chain, time, diff))
        ordered = np.lexsort((time, key)) if by_time else np.argsort(key, kind="stable")
        return tuple(c[ordered] for c in (kind, key, state, chain, time, diff))


def _take(rows: dict[str, Any], where: Any) -> dict[str, Any]:
    """The rows where the mask ``where`` is true."""
    import numpy as np

    at = np.flatnonzero(where)  # once for every column
    return {name: column[at] for name, column in rows.items()}


def _join(*parts: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


_PARTIAL, _MATCH, _TIMEOUT = 0, 1, 2
KINDS = (PARTIAL, MATCH, TIMEOUT, REPLACED, RETIRED)
"""The value kinds, by the number the rounds log for each."""
MATCH_KIND = _MATCH


def event_lists(rounds: Rounds, chains: Any) -> tuple[Any, Any, Any]:
    """The events of each of ``chains`` (made by ``rounds``, none given) as lists:
    ``(offsets, events, steps)``, list ``i`` holding ``events[offsets[i]:offsets[i + 1]]``
    (first taken first) and the step name each was taken by."""
    import numpy as np

    parent, step, event = rounds.chains()
    depth = _depths(parent)
    lengths = depth[chains]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat_event = np.empty(int(offsets[-1]), np.int64)
    flat_step = np.empty(int(offsets[-1]), np.int64)
    position = offsets[1:] - 1
    current = chains.astype(np.int64)
    going = np.flatnonzero(current >= 0)
    while len(going):
        c = current[going]
        flat_event[position[going]] = event[c]
        flat_step[position[going]] = step[c]
        position[going] -= 1
        current[going] = parent[c]
        going = going[current[going] >= 0]
    return offsets, flat_event, flat_step


def _depths(parent: Any) -> Any:
    """Each chain's number of events (one per level up to a chain without parent)."""
    import numpy as np

    depth = np.ones(len(parent), np.int64)
    up = parent.copy()
    going = np.flatnonzero(up >= 0)
    while len(going):
        depth[going] += 1
        up[going] = parent[up[going]]
        going = going[up[going] >= 0]
    return depth
