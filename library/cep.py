"""Complex event detection: a pattern compiled to an NFA, run as a machine per key.

``Detector(pattern)`` is a machine whose values are the key's live *partial
matches*: each is a position in the pattern's NFA with the events it has taken.
Its output holds three kinds of rows, told apart by the value's first field:

    value                                   updates
    ("partial", state, events)              +1 when it appears, -1 when it moves on
    ("held", "", events)                    a match waiting for an earlier partial match
                                            (skip strategies): +1, then -1 when reported
    ("match", "", events)                   +1 at the time the match is reported
    ("timeout", state, events)              +1 when a partial match's window ends

``events`` is a tuple of ``(step, time, seq, symbol)``: ``seq`` numbers a key's
events at one time in the order they are applied, so every event has an identity.
Matches and timeouts are never retracted: they are the detector's findings, and
:func:`matches` / :func:`timeouts` read them back. Only partial matches are state;
with ``within`` every one of them ends (as a match or a timeout) when its window
closes, through a deadline, so a key's state is bounded by what its window holds.

Three failed logins then a success within 10 (one key)::

    time  event      partial matches after                 found
    1     fail       fail#1                                 -
    2     fail       fail#1 (from 2), fail#2 (from 1)       -
    4     fail       fail#1, fail#2, fail#3 (from 1)        -
    5     ok         ...                                    match: fail fail fail ok (from 1)
    11    (window)   the partial matches begun at 1 end     timeouts for those still partial

Semantics follow Flink CEP's documentation where it is explicit: contiguity,
quantifiers, negation, ``within`` (last event minus first below the window) and
the skip strategies; where it is silent, Flink's NFA compiler and NFA: the steps
after a greedy loop take no event the loop can take, ``until`` is never taken, and
under a skip strategy a match waits (held) while a partial match begun before it
lives, then prunes only what began at or after it. Where we differ: identical
partial matches reached by two paths are one value (a set, not a bag), ties are
ordered by event identity and step names (never by hash order), and a trailing
``not_followed_by`` match is reported when its window closes (Flink reports it
then too, but only as time advances; here the deadline makes it exact).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from statemachines import Emit, Machine
from statemachines.diagram import Diagram, Edge, Node
from statemachines.errors import InvalidArgument
from statemachines.library.pattern import (
    Contiguity,
    Negation,
    Pattern,
    Skip,
    Step,
    _All,
    _always,
    _Any,
    _OneArgument,
)

__all__ = ["Detector", "Found", "matches", "timeouts"]

PARTIAL, HELD, MATCH, TIMEOUT = "partial", "held", "match", "timeout"
_ACCEPT = -1  # the "continuation" a trailing negation blocks


@attrs.frozen
class _Cont:
    """A way a partial match at some position may take its next event."""

    target: int  # the step that takes the event
    count: int  # the position's count in that step afterwards
    contiguity: Contiguity
    guards: tuple[Negation, ...]
    loop: bool  # another event of the current step
    greedy_over: tuple[int, ...] = ()  # greedy steps: while one of them takes an event, this does not


@attrs.frozen
class _Position:
    step: int
    count: int
    conts: tuple[_Cont, ...]
    accepting: bool


def _cap(step: Step) -> int:
    """Counts above this are all alike (an unbounded loop past its minimum)."""
    return step.max if step.max is not None else max(step.min, 1)


class _Nfa:
    """The compiled pattern: positions ``(step, count)`` and their continuations."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.steps = pattern.steps
        self.index = {s.name: i for i, s in enumerate(self.steps)}
        self.positions: dict[tuple[int, int], _Position] = {}
        for i, step in enumerate(self.steps):
            for count in range(_cap(step) + 1):
                self.positions[i, count] = self._position(i, count)
        self.start = self.positions[0, 0]
        self.parsed: dict[str, tuple[_Position, bool, frozenset[int]]] = {}  # state text -> parts
        conditions = [s.condition for s in self.steps] + [s.until for s in self.steps if s.until]
        conditions += [g.condition for s in self.steps for g in s.guards]
        conditions += [g.condition for g in pattern.trailing]
        self.iterative = any(_reads_matched(c) for c in conditions)

    def _position(self, i: int, count: int) -> _Position:
        steps = self.steps
        step = steps[i]
        conts = []
        if step.max is None or count < step.max:
            contiguity = step.contiguity if count == 0 else step.inner
            guards = step.guards if count == 0 else ()
            conts.append(_Cont(i, min(count + 1, _cap(step)), contiguity, guards, count > 0))
        accepting = False
        if count >= step.min or (count == 0 and step.optional):
            guards: tuple[Negation, ...] = ()
            # Flink's compiler: leaving a greedy step is "and not the step's own condition"
            over = (i,) if step.greedy and (step.max is None or count < step.max) else ()
            j = i + 1
            while j < len(steps):
                guards += steps[j].guards
                conts.append(_Cont(j, 1, steps[j].contiguity, guards, False, over))
                if not steps[j].optional:
                    break
                over += (j,) if steps[j].greedy else ()
                j += 1
            else:
                accepting = count > 0 or i > 0
        return _Position(i, count, tuple(conts), accepting)


def _reads_matched(condition: Any) -> bool:
    """Whether a condition looks at the events already matched (then they are built)."""
    if isinstance(condition, _OneArgument):
        return False
    if isinstance(condition, _All | _Any):
        return any(_reads_matched(part) for part in condition.parts)
    return condition is not _always


_NOTHING: dict[str, tuple[Any, ...]] = {}


def _state(position: _Position, fresh: bool, blocked: frozenset[int]) -> str:
    """A partial match's NFA state as text: ``step#count``, then its flags."""
    text = f"{position.step}#{position.count}"
    if not fresh:
        text += "~"
    if blocked:
        text += "!" + ",".join(str(b) for b in sorted(blocked))
    return text


class Detector(Machine):
    """Detects ``pattern`` per key; see the module documentation.

    >>> from statemachines import run_local
    >>> pattern = (Pattern.begin("hot").where(lambda t: t > 80).times(3).consecutive()
    ...            .within(10))
    >>> readings = [("s1", t, i) for i, t in enumerate([81, 85, 79, 90, 91, 95])]
    >>> [[s for _, _, _, s in m.events] for m in matches(run_local(Detector(pattern), readings).updates)]
    [[90, 91, 95]]
    """

    def __init__(self, pattern: Pattern) -> None:
        if not isinstance(pattern, Pattern):
            raise InvalidArgument(f"Detector needs a Pattern, got {pattern!r}")
        self.pattern = pattern.compiled()
        self._nfa = _Nfa(self.pattern)

    def __repr__(self) -> str:
        return f"Detector({self.pattern!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"pattern": self.pattern}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.pattern = state["pattern"]
        self._nfa = _Nfa(self.pattern)

    def __eq__(self, other: object) -> bool:
        return type(other) is Detector and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash((Detector, len(self.pattern.steps)))

    # -- what runtimes and users ask ------------------------------------------------------

    def value_type(self, symbol_type: Any, time_type: Any) -> Any:
        """The Arrow type of this detector's values, given its input's Arrow types."""
        import pyarrow as pa

        event = pa.struct(
            [("step", pa.string()), ("time", time_type), ("seq", pa.int64()), ("symbol", symbol_type)]
        )
        return pa.struct([("kind", pa.string()), ("state", pa.string()), ("events", pa.list_(event))])

    def is_finding(self, value: Any) -> bool:
        """Matches and timeouts are reported once; only partial matches are held."""
        return value[0] == MATCH or value[0] == TIMEOUT

    def validate_symbol(self, symbol: Any) -> None:
        """Symbols are kept in partial matches, which are values: they must be hashable."""
        hash(symbol)

    def deadline(self, key: Any, values: frozenset[Any]) -> Any:
        """When the oldest partial match's window closes (``None`` without ``within``)."""
        window = self.pattern.window
        starts = [v[2][0][1] for v in values if v[0] == PARTIAL]  # held matches wait for events
        return min(starts) + window if window is not None and starts else None

    def on_deadline(self, key: Any, values: frozenset[Any], time: Any) -> Emit:
        """The partial matches left when the windows closing at ``time`` have closed,
        and what those windows found (timeouts, matches ended by a trailing negation)."""
        return Emit(*self._expire(values, time))

    def transition(
        self, key: Any, values: frozenset[Any], symbol: Any, time: Any, position: int = 0
    ) -> Emit:
        """The partial matches after one event, and the matches it completes; the
        event is the ``position``-th (from 0) the key applies at ``time``."""
        return Emit(*self._on_event(values, symbol, time, position))

    def diagram(self) -> Diagram:
        """The compiled NFA: one state per ``step#count`` position, edges that take events."""
        nfa, pattern = self._nfa, self.pattern
        reachable = [(0, 0)]
        seen = {(0, 0)}
        edges = []
        for at in reachable:
            position = nfa.positions[at]
            for cont in position.conts:
                target = (cont.target, cont.count)
                name = nfa.steps[cont.target].name
                label = f"{cont.contiguity.value}: {name}" if at != (0, 0) else f"begin: {name}"
                if cont.guards:
                    label += " " + " ".join(f"[{g.kind} {g.name}]" for g in cont.guards)
                if cont.loop and nfa.steps[cont.target].until is not None:
                    label += " [until]"
                edges.append(Edge(_node_id(at), _node_id(target), label))
                if target not in seen:
                    seen.add(target)
                    reachable.append(target)
        nodes = []
        for at in reachable:
            position = nfa.positions[at]
            if at == (0, 0):
                label = "start"
            else:
                step = nfa.steps[at[0]]
                loop = "+" if step.max is None and at[1] >= _cap(step) else ""
                label = f"{step.name} #{at[1]}{loop}"
            nodes.append(Node(_node_id(at), label, initial=at == (0, 0), final=position.accepting))
        notes = [f"after a match: {pattern.skip.value}" + (f" ({pattern.skip_step})" if pattern.skip_step else "")]
        if pattern.window is not None:
            notes.insert(0, f"within {pattern.window}: partial matches time out")
        if pattern.trailing:
            names = ", ".join(g.name for g in pattern.trailing)
            notes.append(f"accepting states complete when the window closes without {names}")
        return Diagram(f"Detector({' -> '.join(s.name for s in nfa.steps)})", tuple(nodes), tuple(edges), tuple(notes))

    # -- the NFA ---------------------------------------------------------------------------

    def _on_event(
        self, values: frozenset[Any], symbol: Any, time: Any, seq: int
    ) -> tuple[frozenset[Any], list[Any]]:
        """The key's values after one event, and the matches it releases."""
        kept: set[Any] = {v for v in values if v[0] == HELD}
        completed: list[Any] = []
        trailing = self.pattern.trailing
        steps = self._nfa.steps
        for value in (None, *(v for v in values if v[0] == PARTIAL)):
            if value is None:  # every event may begin a new match
                position, fresh, blocked, taken = self._nfa.start, True, frozenset(), ()
            else:
                position, fresh, blocked, taken = self._parse(value)
            matched = self._matched(taken) if self._nfa.iterative else _NOTHING
            meets: dict[int, bool] = {}
            for cont in position.conts:
                if cont.target not in meets:
                    meets[cont.target] = bool(steps[cont.target].condition(symbol, matched))
            newly: set[int] = set()
            for cont in position.conts if value is not None else ():  # nothing to guard at a start
                if cont.target not in blocked and self._stops(cont, symbol, matched, fresh):
                    newly.add(cont.target)
            live = [c for c in position.conts if c.target not in blocked and c.target not in newly]
            takes = [
                c for c in live
                if meets[c.target] and (c.contiguity != Contiguity.STRICT or fresh)
                and not self._until(c.target, symbol, matched)  # a step takes no event meeting until
            ]
            greedy = {c.target for c in takes}  # a greedy step taking the event keeps it to itself
            held_back = [c for c in live if greedy.intersection(c.greedy_over)]
            if held_back:
                takes = [c for c in takes if c not in held_back]
                live = [c for c in live if c not in held_back]
            for cont in takes:
                step = steps[cont.target]
                events = (*taken, (step.name, time, seq, symbol))
                after = self._nfa.positions[cont.target, cont.count]
                if after.accepting and not trailing:
                    completed.append((MATCH, "", events))
                if after.conts or (after.accepting and trailing):
                    kept.add((PARTIAL, _state(after, True, frozenset()), events))
            if value is None:
                continue
            pending = position.accepting and trailing and _ACCEPT not in blocked
            if pending and any(g.condition(symbol, matched) for g in trailing if g.kind == "not_followed_by" or fresh):
                newly.add(_ACCEPT)
                pending = False
            surviving = [
                c for c in live
                if c.contiguity == Contiguity.ANY or (c.contiguity == Contiguity.RELAXED and not meets[c.target])
            ]
            if surviving or pending:
                lost = {c.target for c in live if c not in surviving}
                state = _state(position, False, blocked | newly | lost)
                kept.add((PARTIAL, state, taken))
        return self._release(kept, completed)

    def _until(self, target: int, symbol: Any, matched: Any) -> bool:
        until = self._nfa.steps[target].until
        return until is not None and bool(until(symbol, matched))

    def _stops(self, cont: _Cont, symbol: Any, matched: Any, fresh: bool) -> bool:
        """Whether this event closes ``cont`` for good: a negation it meets, or ``until``
        inside a loop (the loop can neither take nor skip it)."""
        for guard in cont.guards:
            if (guard.kind == "not_followed_by" or fresh) and guard.condition(symbol, matched):
                return True
        return cont.loop and self._until(cont.target, symbol, matched)

    def _expire(self, values: frozenset[Any], time: Any) -> tuple[frozenset[Any], list[Any]]:
        """Close the windows ending at or before ``time``: matches and timeouts."""
        window = self.pattern.window
        left, ended, timed_out = set(), [], []
        for value in values:
            if value[0] == HELD or value[2][0][1] + window > time:
                left.add(value)
                continue
            position, _, blocked, taken = self._parse(value)
            if position.accepting and self.pattern.trailing and _ACCEPT not in blocked:
                ended.append((MATCH, "", taken))
            else:
                timed_out.append((TIMEOUT, value[1], taken))
        remaining, released = self._release(left, ended)
        return remaining, released + sorted(timed_out, key=_order)

    def _release(self, values: set[Any], completed: list[Any]) -> tuple[frozenset[Any], list[Any]]:
        """Report completed matches as Flink does under a skip strategy: earliest begun
        first, each only once no partial match begun before it is live, each pruning
        what its strategy discards. Matches still waiting are held as values."""
        if self.pattern.skip == Skip.NO_SKIP:
            return frozenset(values), sorted(completed, key=_order)
        waiting = sorted([(MATCH, "", v[2]) for v in values if v[0] == HELD] + completed, key=_order)
        partials = [v for v in values if v[0] == PARTIAL]
        released = []
        while waiting:
            match = waiting[0]
            if partials and _start(match) > min(_start(p) for p in partials):
                break
            released.append(match)
            partials = [p for p in partials if not _discards(self.pattern, match, p)]
            waiting = [m for m in waiting[1:] if not _discards(self.pattern, match, m)]
        return frozenset([*partials, *((HELD, "", m[2]) for m in waiting)]), released

    def _parse(self, value: Any) -> tuple[_Position, bool, frozenset[int], tuple[Any, ...]]:
        parsed = self._nfa.parsed.get(value[1])
        if parsed is None:
            head, _, flags = value[1].partition("!")
            step, count = head.rstrip("~").split("#")
            blocked = frozenset(int(b) for b in flags.split(",")) if flags else frozenset()
            parsed = self._nfa.positions[int(step), int(count)], not head.endswith("~"), blocked
            self._nfa.parsed[value[1]] = parsed
        return (*parsed, value[2])

    def _matched(self, taken: tuple[Any, ...]) -> dict[str, tuple[Any, ...]]:
        matched: dict[str, tuple[Any, ...]] = {}
        for name, _, _, symbol in taken:
            matched[name] = (*matched.get(name, ()), symbol)
        return matched


def _node_id(position: tuple[int, int]) -> str:
    return f"p{position[0]}_{position[1]}"


def _order(found: Any) -> tuple[Any, ...]:
    """A total order of matches: by their events' identities ``(time, seq)``, then by
    the steps that took them; never by a set's iteration order."""
    return tuple((time, seq, step) for step, time, seq, _ in found[2])


def _start(found: Any) -> tuple[Any, int]:
    """The identity ``(time, seq)`` of the first event a partial match or match took."""
    return found[2][0][1], found[2][0][2]


def _discards(pattern: Pattern, match: Any, other: Any) -> bool:
    """Whether ``match``'s skip strategy discards ``other`` (a partial match or a match)."""
    events = match[2]
    first = other[2][0][1:3]
    skip = pattern.skip
    if skip == Skip.SKIP_TO_NEXT:
        return first == events[0][1:3]
    if skip == Skip.SKIP_PAST_LAST_EVENT:
        return first <= events[-1][1:3]
    of_step = [e[1:3] for e in events if e[0] == pattern.skip_step]
    if not of_step:
        return False
    target = of_step[0] if skip == Skip.SKIP_TO_FIRST else of_step[-1]
    return first < target


@attrs.frozen
class Found:
    """A match or a timed-out partial match, read from a detector's output."""

    key: Any
    time: Any
    events: tuple[tuple[Any, Any, int, Any], ...]
    state: str = ""

    def by_step(self) -> dict[str, tuple[Any, ...]]:
        """The symbols taken, per step."""
        steps: dict[str, tuple[Any, ...]] = {}
        for name, _, _, symbol in self.events:
            steps[name] = (*steps.get(name, ()), symbol)
        return steps


def _found(updates: Iterable[tuple[Any, Any, int]], kind: str) -> list[Found]:
    rows = [
        Found(key, time, tuple(tuple(e) for e in value[2]), value[1])
        for (key, value), time, diff in updates
        for _ in range(diff)
        if value[0] == kind
    ]
    return sorted(rows, key=lambda f: (f.time, repr(f.key), [(e[1], e[2], e[0]) for e in f.events]))


def matches(updates: Iterable[tuple[Any, Any, int]]) -> list[Found]:
    """The matches in a detector's updates, by completion time."""
    return _found(updates, MATCH)


def timeouts(updates: Iterable[tuple[Any, Any, int]]) -> list[Found]:
    """The partial matches whose window closed, by expiry time."""
    return _found(updates, TIMEOUT)
