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

import datetime
import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from statemachines import Emit, Machine, advance_key
from statemachines.diagram import Diagram, Edge, Node
from statemachines.errors import InvalidArgument
from statemachines.events import Refused
from statemachines.library.expressions import Expression
from statemachines.library.lockstep import advance_keys, table_of
from statemachines.library.nfa import (
    EVALUATION_ERRORS,
    Nfa,
    Records,
    answer_all,
    answer_one,
    cap,
    matched_of,
    records_of,
)
from statemachines.library.pattern import Pattern, Skip, subtypes_in
from statemachines.times import time_kind
from statemachines.updates import require_hashable

__all__ = ["Detector", "Found", "Why", "found_in", "matches", "timeouts", "value_fields"]

PARTIAL, HELD, MATCH, TIMEOUT = "partial", "held", "match", "timeout"
_UNBUILT = object()
_ANSWERS_KEPT = 1 << 20  # distinct symbols whose expression answers are kept


class Why(enum.StrEnum):
    """Why a detector refuses an event (the ``reason`` of its rejected row)."""

    CONDITION_FAILED = "condition_failed"
    """An expression condition cannot be evaluated on it (a field missing, a type
    it cannot compare)."""
    TIME_KIND = "time_kind"
    """Its time is of another kind than the pattern's ``within`` and gaps (a number
    against a ``timedelta``, or a datetime against a number)."""


class Detector(Machine):
    """Detects ``pattern`` per key; see the module documentation.

    >>> from statemachines import run_local
    >>> pattern = (Pattern.begin("hot").where(lambda t: t > 80).times(3).consecutive()
    ...            .within(10))
    >>> readings = [("s1", t, i) for i, t in enumerate([81, 85, 79, 90, 91, 95])]
    >>> [[s for _, _, _, s in m.events] for m in matches(run_local(Detector(pattern), readings).updates)]
    [[90, 91, 95]]
    """

    values_fit_own_type = True  # made of the input's symbols and times, and strings and counts

    def __init__(self, pattern: Pattern, *, tag: tuple[Any, ...] = ()) -> None:
        if not isinstance(pattern, Pattern):
            raise InvalidArgument(f"Detector needs a Pattern, got {pattern!r}")
        self.pattern = pattern.compiled()
        self.tag = tag  # appended to every value (a rule detector's rule id)
        self._compile()

    def __repr__(self) -> str:
        return f"Detector({self.pattern!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "tag": self.tag}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.pattern = state["pattern"]
        self.tag = state.get("tag", ())
        self._compile()

    def _compile(self) -> None:
        self._nfa = Nfa(self.pattern)
        # expression conditions' answers by symbol, for symbols of one type (equal
        # tuples of two types, a NamedTuple and a plain tuple, may not read alike)
        self._answers: dict[Any, int] = {}
        self._answers_kind: type | None = None
        self._symbol_type: Any = None  # the symbols' Arrow type, once a runtime gave it
        self._table: Any = _UNBUILT  # the NFA as arrays, built when first asked (None: not covered)
        self._time_fits: dict[type, str | None] = {}  # a time's type -> why the spans do not fit it

    def __eq__(self, other: object) -> bool:
        return type(other) is Detector and other.pattern == self.pattern and other.tag == self.tag

    def __hash__(self) -> int:
        return hash((Detector, len(self.pattern.steps)))

    # -- what runtimes and users ask ------------------------------------------------------

    def value_type(self, symbol_type: Any, time_type: Any) -> Any:
        """The Arrow type of this detector's values, given its input's Arrow types."""
        import pyarrow as pa

        return pa.struct(value_fields(symbol_type, time_type))

    def is_finding(self, value: Any) -> bool:
        """Matches and timeouts are reported once; only partial matches are held."""
        return value[0] == MATCH or value[0] == TIMEOUT

    def validate_symbol(self, symbol: Any) -> None:
        """Symbols are kept in partial matches, which are values: they must be hashable."""
        require_hashable(symbol)

    def prepare_symbols(self, symbols: Sequence[Any], symbol_type: Any) -> None:
        """Evaluate the expression conditions for a batch of events at once."""
        if self.reads_expressions and symbols:
            known = symbol_type if symbol_type is not None else self._symbol_type
            self.prepare_records(records_of(symbols, known), symbol_type)

    @property
    def subtypes(self) -> list[tuple[type, ...]]:
        """The classes of each ``subtype(...)`` in the pattern (its steps and negations)."""
        return [classes for condition in self._nfa.conditions for classes in subtypes_in(condition)]

    @property
    def reads_expressions(self) -> bool:
        """Whether the pattern has expression conditions (answered in bulk)."""
        return bool(self._nfa.expression_mask)

    def prepare_records(self, records: Records | None, symbol_type: Any) -> None:
        """Answer the expression conditions for a batch's records (:func:`records_of`),
        which several detectors may share."""
        if symbol_type is not None:
            self._symbol_type = symbol_type
        kind, answers = answer_all(self._nfa, records)
        if kind is not self._answers_kind or len(self._answers) > _ANSWERS_KEPT:
            self._answers, self._answers_kind = {}, kind
        self._answers.update(answers)

    @property
    def times_out(self) -> bool:
        """Whether partial matches end when time passes (``within``)."""
        return self.pattern.window is not None or bool(self._nfa.gaps)

    def deadline(self, key: Any, values: frozenset[Any]) -> Any:
        """When the first partial match's window (or gap) closes (``None`` without ``within``)."""
        window = self.pattern.window
        if self._nfa.gaps:
            ends = [end for value in values if value[0] == PARTIAL and (end := self._end(value)) is not None]
            return min(ends) if ends else None
        if window is None:
            return None
        start = None  # the earliest start of a partial match (held ones wait); a loop is 2.7x min() over a generator
        for value in values:
            if value[0] == PARTIAL:
                begun = value[2][0][1]
                if start is None or begun < start:
                    start = begun
        return None if start is None else start + window

    def _end(self, partial: Any) -> Any:
        """When a partial match ends: its window closes, or the gap it waits in."""
        window, events = self.pattern.window, partial[2]
        end = None if window is None else events[0][1] + window
        position = self._nfa.state(partial[1]).position
        gap = self._nfa.gaps.get((position.step, position.count))
        if gap is not None and (end is None or events[-1][1] + gap < end):
            end = events[-1][1] + gap
        return end

    def on_deadline(self, key: Any, values: frozenset[Any], time: Any) -> Emit:
        """The partial matches left when the windows closing at ``time`` have closed,
        and what those windows found (timeouts, matches ended by a trailing negation)."""
        return Emit(*self.expire(values, time))

    def transition(
        self, key: Any, values: frozenset[Any], symbol: Any, time: Any, position: int = 0
    ) -> Emit | frozenset[Any]:
        """The partial matches after one event, and the matches it completes; the
        event is the ``position``-th (from 0) the key applies at ``time``."""
        misfit = self.time_misfit(time)
        if misfit:
            raise Refused(Why.TIME_KIND, misfit)
        after, found = self.advance_partials(values, symbol, time, position)
        return Emit(after, found) if found else after

    def time_misfit(self, time: Any) -> str | None:
        """Why the pattern's window or gaps cannot time partial matches out at times
        of ``time``'s kind (a ``timedelta`` beside numbers, a number beside datetimes),
        or ``None``."""
        kind = type(time)
        if kind not in self._time_fits:
            self._time_fits[kind] = _span_misfit(self.pattern.window, self._nfa.gaps.values(), time)
        return self._time_fits[kind]

    def advance_keys(
        self, work: Iterable[tuple[Any, frozenset[Any], list[Any]]], upto: Any, check: Any
    ) -> Iterable[tuple[Any, frozenset[Any], tuple[frozenset[Any], list[Any], list[Any]]]]:
        """Many keys at once: in rounds with arrays when no condition reads the
        partial match (:mod:`~statemachines.library.lockstep`), else key by key."""
        table = self.rounds_table()
        if table is None:
            return ((key, values, advance_key(self, key, values, events, upto, check)) for key, values, events in work)
        return advance_keys(self, table, work, upto, check)

    def rounds_table(self) -> Any:
        """The NFA as the arrays keys step through in rounds (built once), or ``None``
        if the pattern is not covered. A subclass may change what an event does, so
        it is never stepped in rounds."""
        if self._table is _UNBUILT:
            self._table = table_of(self) if type(self) is Detector else None
        return self._table

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
                condition = nfa.steps[cont.target].condition
                if isinstance(condition, Expression):  # a data pattern shows what it tests
                    label += f" where {condition.sql}"
                if cont.guards:
                    label += " " + " ".join(f"[{g.kind} {g.name}]" for g in cont.guards)
                if nfa.steps[cont.target].until is not None:  # never takes an event meeting it
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
                loop = "+" if step.max is None and at[1] >= cap(step) else ""
                label = f"{step.name} #{at[1]}{loop}" + (f", time {nfa.times[at[0]]}" if nfa.times[at[0]] else "")
            nodes.append(Node(_node_id(at), label, initial=at == (0, 0), final=position.accepting))
        notes = [f"after a match: {pattern.skip.value}" + (f" ({pattern.skip_step})" if pattern.skip_step else "")]
        if pattern.window is not None:
            notes.insert(0, f"within {pattern.window}: partial matches time out")
        for step in nfa.steps:
            if step.gap is not None:
                notes.append(f"{step.name} within {step.gap} of the event before it")
        for negation in pattern.trailing:
            if negation.gap is not None:
                notes.append(f"{negation.name}: the match completes {negation.gap} after its last event")
        if nfa.next_decides:
            notes.append(f"accepting states complete at the next event, unless it is {pattern.trailing[0].name}")
        elif pattern.trailing:
            names = ", ".join(g.name for g in pattern.trailing)
            notes.append(f"accepting states complete when the window closes without {names}")
        return Diagram(f"Detector({' -> '.join(s.name for s in nfa.steps)})", tuple(nodes), tuple(edges), tuple(notes))

    # -- the NFA ---------------------------------------------------------------------------

    def may_begin(self, symbol: Any) -> bool:
        """Whether ``symbol`` may begin a partial match (``True`` when only a function
        condition can tell): a key with no partial matches skips the others."""
        nfa = self._nfa
        start = nfa.start
        if nfa.iterative or start.mask & ~nfa.expression_mask:
            return True
        yes = self._expression_answers(symbol) if start.mask else 0
        return bool((start.outcomes.get(yes & start.mask) or nfa.outcome(start, yes)).takes)

    def advance_partials(
        self, values: Iterable[Any], symbol: Any, time: Any, seq: int
    ) -> tuple[frozenset[Any], list[Any]]:
        """The key's values after one event, and the matches it releases."""
        nfa, tag = self._nfa, self.tag
        states = nfa.states
        kept: set[Any] = set()
        completed: list[Any] = []
        made: dict[str, tuple[Any, ...]] = {}  # the event as each step takes it, made once
        # the conditions asked about this event and those that said yes, as bits
        asked = nfa.expression_mask
        yes = self._expression_answers(symbol) if asked else 0
        iterative, first = nfa.iterative, (asked, yes)
        state, value, taken = nfa.start, None, ()  # first the start: every event may begin a match
        for value in (None, *values):
            if value is not None:
                if value[0] != PARTIAL:  # a held match waits as it is
                    kept.add(value)
                    continue
                taken = value[2]
                state = states.get(value[1]) or nfa.state(value[1])
            if iterative:  # conditions that read the partial match are asked for each
                said = nfa.ask(state, symbol, matched_of(taken), *first)[1]
            else:
                if state.mask & ~asked:
                    asked, yes = nfa.ask(state, symbol, None, asked, yes)
                said = yes
            outcome = state.outcomes.get(said & state.mask) or nfa.outcome(state, said)
            for name, after, completes in outcome.takes:
                event = made.get(name)
                if event is None:
                    event = made[name] = (name, time, seq, symbol)
                events = (*taken, event)
                if completes:
                    completed.append((MATCH, "", events) + tag)
                if after is not None:
                    kept.add((PARTIAL, after, events) + tag)
            if outcome.completes:
                completed.append((MATCH, "", taken) + tag)
            stay = outcome.stay
            if stay is not None:
                kept.add(value if stay == state.text else (PARTIAL, stay, taken) + tag)
        if self.pattern.skip == Skip.NO_SKIP:
            return frozenset(kept), sorted(completed, key=finding_order) if len(completed) > 1 else completed
        return self.release(kept, completed)

    def _expression_answers(self, symbol: Any) -> int:
        """The expression conditions' answers for ``symbol``: prepared in bulk, else
        worked out alone; a symbol they cannot read is refused, saying why."""
        known = type(symbol) is self._answers_kind
        yes = self._answers.get(symbol) if known else None
        if yes is None:
            try:
                yes = answer_one(self._nfa, symbol, self._symbol_type)
            except EVALUATION_ERRORS as error:
                raise Refused(Why.CONDITION_FAILED, str(error)) from None
            if known and len(self._answers) < _ANSWERS_KEPT:
                self._answers[symbol] = yes
        return yes

    def expire(self, values: Iterable[Any], time: Any) -> tuple[frozenset[Any], list[Any]]:
        """Close the windows (and gaps) ending at or before ``time``: matches and timeouts."""
        nfa = self._nfa
        window, gaps = self.pattern.window, nfa.gaps
        left, ended, timed_out = set(), [], []
        for value in values:
            if value[0] == HELD or (
                value[2][0][1] + window > time if not gaps else (end := self._end(value)) is None or end > time
            ):
                left.add(value)
                continue
            # no trailing not_followed_by's event came (a trailing not_next waits for an event)
            if nfa.pending(nfa.state(value[1])) and not nfa.next_decides:
                ended.append((MATCH, "", value[2]) + self.tag)
            else:
                timed_out.append((TIMEOUT, value[1], value[2]) + self.tag)
        remaining, released = self.release(left, ended)
        return remaining, released + sorted(timed_out, key=finding_order)

    def release(self, values: set[Any], completed: list[Any]) -> tuple[frozenset[Any], list[Any]]:
        """Report completed matches as Flink does under a skip strategy: earliest begun
        first, each only once no partial match begun before it is live, each pruning
        what its strategy discards. Matches still waiting are held as values."""
        if self.pattern.skip == Skip.NO_SKIP:
            return frozenset(values), sorted(completed, key=finding_order) if len(completed) > 1 else completed
        tag = self.tag
        waiting = sorted([(MATCH, "", v[2]) + tag for v in values if v[0] == HELD] + completed, key=finding_order)
        partials = [v for v in values if v[0] == PARTIAL]
        released = []
        while waiting:
            match = waiting[0]
            if partials and _start(match) > min(_start(p) for p in partials):
                break
            released.append(match)
            discards = _pruner(self.pattern, match)
            partials = [p for p in partials if not discards(p)]
            waiting = [m for m in waiting[1:] if not discards(m)]
        return frozenset([*partials, *((HELD, "", m[2]) + tag for m in waiting)]), released


def value_fields(symbol_type: Any, time_type: Any) -> list[Any]:
    """The Arrow fields of a detector's values ``(kind, state, events)``."""
    import pyarrow as pa

    event = pa.struct([("step", pa.string()), ("time", time_type), ("seq", pa.int64()), ("symbol", symbol_type)])
    return [pa.field("kind", pa.string()), pa.field("state", pa.string()), pa.field("events", pa.list_(event))]


def _node_id(position: tuple[int, int]) -> str:
    return f"p{position[0]}_{position[1]}"


def finding_order(found: Any) -> tuple[Any, ...]:
    """A total order of matches: by their events' identities ``(time, seq)``, then by
    the steps that took them; never by a set's iteration order."""
    return tuple((time, seq, step) for step, time, seq, _ in found[2])


def _start(found: Any) -> tuple[Any, int]:
    """The identity ``(time, seq)`` of the first event a partial match or match took."""
    return found[2][0][1], found[2][0][2]


def _pruner(pattern: Pattern, match: Any) -> Callable[[Any], bool]:
    """The test of whether ``match``'s skip strategy discards a partial match or a
    waiting match.

    Raises:
        SkipMissed: see :func:`_skip_target`.
    """
    events = match[2]
    skip = pattern.skip
    if skip == Skip.SKIP_TO_NEXT:
        return lambda other: other[2][0][1:3] == events[0][1:3]
    if skip == Skip.SKIP_PAST_LAST_EVENT:
        return lambda other: other[2][0][1:3] <= events[-1][1:3]
    target = _skip_target(pattern, match)
    return lambda other: target is not None and other[2][0][1:3] < target


def _skip_target(pattern: Pattern, match: Any) -> tuple[Any, int] | None:
    """The event a ``SKIP_TO_FIRST`` / ``SKIP_TO_LAST`` match skips to, ``(time, seq)``;
    ``None`` if its step took none (then it prunes nothing).

    Raises:
        SkipMissed: with ``raise_on_miss``, the step took none, or the match would
            skip to its own first event.
    """
    of_step = [e[1:3] for e in match[2] if e[0] == pattern.skip_step]
    target = (of_step[0] if pattern.skip == Skip.SKIP_TO_FIRST else of_step[-1]) if of_step else None
    if pattern.raise_on_miss and (target is None or target == match[2][0][1:3]):
        why = "took no event of that step" if target is None else "would skip to its own first event"
        raise SkipMissed(
            f"{pattern.skip.value}({pattern.skip_step!r}): the match of events at "
            f"{[e[1] for e in match[2]]} {why} (raise_on_miss)"
        )
    return target


class SkipMissed(Exception):
    """A match its ``SKIP_TO_FIRST`` / ``SKIP_TO_LAST`` strategy cannot skip from (with
    ``raise_on_miss``)."""


@attrs.frozen
class Found:
    """A match or a timed-out partial match, read from a detector's output."""

    key: Any
    time: Any
    events: tuple[tuple[Any, Any, int, Any], ...]
    state: str = ""
    rule: str | None = None  # the rule that found it (a RuleDetector's findings)
    reason: str | None = None  # why a partial match ended early ("replaced", "retired")

    def by_step(self) -> dict[str, tuple[Any, ...]]:
        """The symbols taken, per step."""
        return matched_of(self.events)


def found_in(updates: Any, kinds: tuple[str, ...]) -> list[Found]:
    """The findings of the given kinds in a detector's updates, by time.

    ``updates`` are a local run's (``((key, value), time, diff)``), or a Spark run's:
    its rows ``key, value, time, diff`` (collected), or the DataFrame itself, whose
    rows of those kinds are collected here. A Spark row's symbols stay ``Row``
    objects, which read by field name and position as a local run's records do.
    """
    if hasattr(updates, "collect") and hasattr(updates, "where"):  # a Spark DataFrame
        updates = updates.where(f"value.kind IN ({', '.join(repr(kind) for kind in kinds)})").collect()
    rows = [
        Found(
            key, time, tuple(tuple(e) for e in value[2]), value[1],
            value[3] if len(value) > 3 else None, value[0] if value[0] not in (MATCH, TIMEOUT) else None,
        )
        for (key, value), time, diff in map(_triple, updates)
        for _ in range(diff)
        if value[0] in kinds
    ]
    return sorted(rows, key=lambda f: (f.time, repr(f.key), f.rule or "", [(e[1], e[2], e[0]) for e in f.events]))


def _triple(update: Any) -> tuple[Any, Any, int]:
    """An update as ``((key, value), time, diff)``, from itself or from a Spark row
    ``(key, value, time, diff)``."""
    if len(update) == 4:
        key, value, time, diff = update
        return (key, value), time, diff
    return update


def matches(updates: Any) -> list[Found]:
    """The matches in a detector's updates (as :func:`found_in` takes them), by completion time."""
    return found_in(updates, (MATCH,))


def timeouts(updates: Any) -> list[Found]:
    """The partial matches whose window closed (in updates as :func:`found_in` takes
    them), by expiry time."""
    return found_in(updates, (TIMEOUT,))


def _span_misfit(window: Any, gaps: Iterable[Any], time: Any) -> str | None:
    """Why the pattern's window or gaps cannot be added to times of ``time``'s kind
    (numbers take a number, datetimes and dates a ``timedelta``), or ``None``."""
    kind = time_kind(time)
    for span in (window, *gaps):
        if span is not None and isinstance(span, datetime.timedelta) != (kind in ("datetime", "datetime_tz", "date")):
            return (
                f"the pattern's within {span!r} does not fit times of kind {kind}: "
                f"numbers take a number, datetimes and dates a timedelta"
            )
    return None
