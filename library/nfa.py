"""A pattern compiled to an NFA whose states decide each event by table lookup.

A partial match sits in a *state*: a position ``(step, count)`` in the pattern, whether
it is *fresh* (no event skipped since its last one: strict contiguity and ``not_next``
need that, so a state tracks it only while one of them is open), and
the continuations it has *blocked* (a negation met, an event a relaxed step had to
take, ``until`` inside a loop). A state's text, ``step#count`` then ``~`` if not fresh
then ``!`` and the blocked steps, is what partial-match values and timeouts carry.

What a state does with an event depends only on the answers of the few conditions it
reads (its ``reads``), so the outcome is computed once per state and answer vector
and then looked up (answers as bits)::

    state   answers (fail?, ok?)   outcome
    0#1     (True, False)          take "fail" -> 0#2; stay as 0#1~ (relaxed, blocked)
    0#1     (False, False)         stay as 0#1~ (an event skipped)

Conditions that read the partial match (``cond(event, matched)``) are asked per
partial match; other functions once per event, when a state first reads them;
expression conditions for a whole batch of events at once (:func:`answer_all` over
:func:`records_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from statemachines.library.expressions import Expression, records_table
from statemachines.library.pattern import (
    Contiguity,
    Group,
    Negation,
    Pattern,
    Step,
    _All,
    _always,
    _Any,
    _OneArgument,
)

__all__ = [
    "ACCEPT", "EVALUATION_ERRORS", "Cont", "Nfa", "Outcome", "Position", "Records", "State", "answer_all",
    "answer_column", "answer_one", "answer_rows", "cap",
    "matched_of", "records_of",
    "state_text",
]

ACCEPT = -1  # the "continuation" a trailing not_next blocks once it has decided the match
# what evaluating expression conditions raises on events they cannot read (Arrow's
# errors are also ValueError, TypeError, KeyError, IndexError or NotImplementedError)
EVALUATION_ERRORS = (ArithmeticError, NotImplementedError, TypeError, ValueError, KeyError, IndexError)
_NOTHING: dict[str, tuple[Any, ...]] = {}


@attrs.frozen
class Cont:
    """A way a partial match at some position may take its next event."""

    target: int  # the step that takes the event
    count: int  # the position's count in that step afterwards
    contiguity: Contiguity
    guards: tuple[Negation, ...]
    loop: bool  # another event of the current step
    greedy_over: tuple[int, ...] = ()  # greedy steps: while one of them takes an event, this does not


@attrs.frozen
class Position:
    step: int
    count: int
    conts: tuple[Cont, ...]
    accepting: bool


@attrs.frozen
class Outcome:
    """What a state does with one event.

    ``takes``: ``(step name, state after or None if nothing is left to wait for,
    completes a match)`` per continuation that takes the event; ``stay``: the state
    of the partial match that lets the event pass, or None if it cannot;
    ``completes``: the partial match is a match, completed by this event without
    taking it (a trailing ``not_next`` the event does not meet).
    """

    takes: tuple[tuple[str, str | None, bool], ...]
    stay: str | None
    completes: bool = False


class State:
    """One NFA state: its position, flags, the conditions it reads, its outcomes."""

    __slots__ = ("blocked", "fresh", "mask", "outcomes", "position", "reads", "text")

    def __init__(self, text: str | None, position: Position, fresh: bool, blocked: frozenset[int]) -> None:
        self.text = text  # None for the start, which every event may leave
        self.position = position
        self.fresh = fresh
        self.blocked = blocked
        self.reads: tuple[int, ...] = ()  # the conditions it asks, by index
        self.mask = 0  # the same, as bits
        self.outcomes: dict[int, Outcome] = {}  # by the answers: bit i set if condition i said yes


def state_text(position: Position, fresh: bool, blocked: frozenset[int]) -> str:
    """A state as text: ``step#count``, then its flags."""
    text = f"{position.step}#{position.count}"
    if not fresh:
        text += "~"
    if blocked:
        text += "!" + ",".join(str(b) for b in sorted(blocked))
    return text


def cap(step: Step) -> int:
    """Counts above this are all alike (an unbounded loop past its minimum)."""
    return step.max if step.max is not None else max(step.min, 1)


@attrs.define
class _Junction:
    """A point between steps that takes no event: passing it adds the negations before
    the next step; each edge leads to a junction or to a step (``step``: its index),
    and may name a greedy step it passes over (skipped optional steps)."""

    guards: tuple[Negation, ...] = ()
    edges: list[tuple[_Junction | int, tuple[int, ...]]] = attrs.Factory(list)
    end: bool = False  # a match is complete here


class Nfa:
    """The compiled pattern: positions, states by text, and every condition by index.

    A group (:class:`~statemachines.library.pattern.Group`) is laid out once per time
    it may be taken, its steps copied (a copy per time up to its minimum, one per
    optional time, one that repeats for an unbounded group), so ``steps`` holds every
    step that takes events, in groups too, and a step's index names it in states.
    """

    def __init__(self, pattern: Pattern) -> None:
        self.steps: list[Step] = []
        self.times: list[str] = []  # per step: which time of its groups it is ("2", "1.3", "2, 4, …"; "" outside)
        self.trailing = pattern.trailing
        # a trailing not_next: the event after the match decides it
        self.next_decides = any(g.kind == "not_next" for g in self.trailing)
        self._leave: list[_Junction] = []  # per step: where a partial match goes on from it
        entry, done = self._lay_out(pattern.steps, None)
        done.end = True
        self.positions: dict[tuple[int, int], Position] = {}
        for i, step in enumerate(self.steps):
            for count in range(1, cap(step) + 1):
                self.positions[i, count] = self._position(i, count)
        conts, _ = self._onwards([(entry, ())], (), ())
        self.positions[0, 0] = Position(0, 0, conts, False)  # the start: every event may begin
        # within(d, previous_and_current): a partial match waiting at a position for the
        # step with the gap ends d after its last event (the step before takes one event)
        self.gaps: dict[tuple[int, int], Any] = {(i - 1, 1): s.gap for i, s in enumerate(self.steps) if s.gap is not None}
        trailing_gaps = [g.gap for g in self.trailing if g.gap is not None]
        if trailing_gaps:
            self.gaps[len(self.steps) - 1, 1] = min(trailing_gaps)
        self.conditions: list[Any] = [s.condition for s in self.steps]  # step i's condition is i
        self.until: dict[int, int] = {}
        for i, s in enumerate(self.steps):
            if s.until is not None:
                self.until[i] = self._index(s.until)
        self.guard: dict[int, int] = {}  # id(negation) -> its condition's index
        for g in (*_negations(pattern.steps), *self.trailing):
            self.guard[id(g)] = self._index(g.condition)
        self.iterative = any(_reads_matched(c) for c in self.conditions)
        # expression conditions are answered for a batch of events before the NFA runs
        self.expressions = [(i, c) for i, c in enumerate(self.conditions) if isinstance(c, Expression)]
        self.expression_mask = sum(1 << i for i, _ in self.expressions)
        self.states: dict[str, State] = {}
        self.start = self._compiled(State(None, self.positions[0, 0], True, frozenset()))

    def _index(self, condition: Any) -> int:
        self.conditions.append(condition)
        return len(self.conditions) - 1

    # -- laying the pattern out ------------------------------------------------------------

    def _lay_out(
        self, elements: Sequence[Step | Group], head: Contiguity | None, time: str = ""
    ) -> tuple[_Junction, _Junction]:
        """Junctions before and after ``elements`` in sequence; ``head``, if given, is
        the first one's contiguity (a group's, for the first step of each time);
        ``time``, which time of the groups around them this is."""
        entry = current = _Junction()
        for element in elements:
            before, after = (
                self._lay_out_group(element, head, time)
                if isinstance(element, Group)
                else self._lay_out_step(element, head, time)
            )
            current.edges.append((before, ()))
            current, head = after, None
        return entry, current

    def _lay_out_step(self, step: Step, head: Contiguity | None, time: str) -> tuple[_Junction, _Junction]:
        index = len(self.steps)
        self.steps.append(step if head is None else attrs.evolve(step, contiguity=head))
        self.times.append(time)
        before, after = _Junction(step.guards), _Junction()
        self._leave.append(after)
        before.edges.append((index, ()))
        if step.optional:  # left out: the steps after it, held back while a greedy one takes the event
            before.edges.append((after, (index,) if step.greedy else ()))
        return before, after

    def _lay_out_group(self, group: Group, head: Contiguity | None, within: str) -> tuple[_Junction, _Junction]:
        before, after = _Junction(group.guards), _Junction()
        current = before
        if group.optional:
            before.edges.append((after, ()))
        times = group.min if group.max is None else group.max
        for time in range(times):
            contiguity = (head or group.contiguity) if time == 0 else group.inner
            entry, done = self._lay_out(group.pattern.steps, contiguity, _time(within, str(time + 1)))
            if time >= group.min:  # an optional time: the group may end before it
                current.edges.append((after, ()))
            current.edges.append((entry, ()))
            current = done
        if group.max is None:
            # one more time, again and again: two copies taking turns, so that a step
            # never leads back to itself by a new time (a+ in a group: one more a, or
            # a new time's a, are two continuations, and a state has one per step)
            (entry_a, done_a), (entry_b, done_b) = (
                self._lay_out(group.pattern.steps, group.inner, _time(within, f"{first}, {first + 2}, …"))
                for first in (times + 1, times + 2)
            )
            again_a = _Junction(edges=[(entry_a, ()), (after, ())])
            again_b = _Junction(edges=[(entry_b, ()), (after, ())])
            current.edges.append((again_a, ()))
            done_a.edges.append((again_b, ()))
            done_b.edges.append((again_a, ()))
        else:
            current.edges.append((after, ()))
        return before, after

    def _onwards(
        self, edges: list[tuple[_Junction | int, tuple[int, ...]]], guards: tuple[Negation, ...], over: tuple[int, ...]
    ) -> tuple[tuple[Cont, ...], bool]:
        """The continuations reached through ``edges`` (passing the junctions between
        steps, gathering their negations and the greedy steps passed over), and
        whether the end of the pattern is reached."""
        conts: dict[int, Cont] = {}
        accepting = False
        seen: set[int] = set()
        stack = [(target, guards, over + passed) for target, passed in reversed(edges)]
        while stack:
            target, guards_so_far, over_so_far = stack.pop()
            if isinstance(target, int):
                if target not in conts:
                    step = self.steps[target]
                    conts[target] = Cont(target, 1, step.contiguity, guards_so_far, False, over_so_far)
                continue
            if id(target) in seen:
                continue
            seen.add(id(target))
            accepting = accepting or target.end
            more = guards_so_far + target.guards
            stack += [(t, more, over_so_far + passed) for t, passed in reversed(target.edges)]
        return tuple(conts.values()), accepting

    def _position(self, i: int, count: int) -> Position:
        step = self.steps[i]
        conts = []
        if step.max is None or count < step.max:
            conts.append(Cont(i, min(count + 1, cap(step)), step.inner, self._loop_guards(i), True))
        accepting = False
        if count >= step.min:
            # Flink's compiler: leaving a greedy step is "and not the step's own condition"
            over = (i,) if step.greedy and (step.max is None or count < step.max) else ()
            onwards, accepting = self._onwards([(self._leave[i], ())], (), over)
            conts += onwards
        return Position(i, count, tuple(conts), accepting)

    def _loop_guards(self, i: int) -> tuple[Negation, ...]:
        """The ``not_followed_by`` negations right after loop step ``i`` (outside
        groups): as in Flink's compiler, their events end the partial match from the
        loop's first event on, not only once it leaves the loop."""
        if self.times[i]:
            return ()
        onwards, _ = self._onwards([(self._leave[i], ())], (), ())
        guards = [g for cont in onwards for g in cont.guards]
        if i == len(self.steps) - 1:
            guards += self.trailing
        return tuple({id(g): g for g in guards if g.kind == "not_followed_by"}.values())

    # -- states -----------------------------------------------------------------------------

    def state(self, text: str) -> State:
        """The state a partial match's text names (parsed once)."""
        found = self.states.get(text)
        if found is None:
            head, _, flags = text.partition("!")
            step, count = head.rstrip("~").split("#")
            blocked = frozenset(int(b) for b in flags.split(",")) if flags else frozenset()
            found = self._compiled(State(text, self.positions[int(step), int(count)], not head.endswith("~"), blocked))
            self.states[text] = found
        return found

    def _compiled(self, state: State) -> State:
        """``state`` with the conditions whose answers decide its outcome."""
        reads: list[int] = []
        for cont in state.position.conts:
            if cont.target in state.blocked:
                continue
            reads.append(cont.target)
            if cont.target in self.until:
                reads.append(self.until[cont.target])
            if state.text is not None:  # nothing to guard at a start
                reads += [self.guard[id(g)] for g in cont.guards if g.kind == "not_followed_by" or state.fresh]
        if self.pending(state):
            reads += [self.guard[id(g)] for g in self.trailing if g.kind == "not_followed_by" or state.fresh]
        state.reads = tuple(dict.fromkeys(reads))
        state.mask = sum(1 << i for i in state.reads)
        return state

    def pending(self, state: State) -> bool:
        """A partial match that completes when its window closes (at the next event,
        for a trailing ``not_next``), unless a trailing negation's event comes first."""
        return bool(state.text is not None and state.position.accepting and self.trailing and ACCEPT not in state.blocked)

    def outcome(self, state: State, yes: int) -> Outcome:
        """What ``state`` does with an event whose conditions said ``yes`` (bit i set:
        condition i holds; only the bits of ``state.mask`` count)."""
        answers = yes & state.mask
        found = state.outcomes.get(answers)
        if found is None:
            said = {i: bool(answers >> i & 1) for i in state.reads}
            found = state.outcomes[answers] = self._decide(state, said)
        return found

    def _decide(self, state: State, said: dict[int, bool]) -> Outcome:
        position, fresh, blocked, start = state.position, state.fresh, state.blocked, state.text is None
        newly: set[int] = set()  # continuations this event closes: until inside a loop
        negated = False  # the event meets a negation of the partial match: it ends (below)
        for cont in position.conts if not start else ():
            if cont.target in blocked:
                continue
            negated = negated or self._negated(cont.guards, said, fresh)
            if cont.loop and cont.target in self.until and said[self.until[cont.target]]:
                newly.add(cont.target)  # the loop can neither take nor skip it
        pending = self.pending(state)
        negated = negated or (pending and self._negated(self.trailing, said, fresh))
        live = [c for c in position.conts if c.target not in blocked and c.target not in newly]
        takes = [
            c for c in live
            if said[c.target] and (c.contiguity != Contiguity.STRICT or fresh)
            and not (c.target in self.until and said[self.until[c.target]])  # a step takes no event meeting until
        ]
        greedy = {c.target for c in takes}  # a greedy step taking the event keeps it to itself
        held_back = [c for c in live if greedy.intersection(c.greedy_over)]
        if held_back:
            takes = [c for c in takes if c not in held_back]
            live = [c for c in live if c not in held_back]
        taken = []
        for cont in takes:
            after = self.positions[cont.target, cont.count]
            completes = after.accepting and not self.trailing
            waits = bool(after.conts) or (after.accepting and bool(self.trailing))
            text = state_text(after, True, frozenset()) if waits else None
            taken.append((self.steps[cont.target].name, text, completes))
        if start:
            return Outcome(tuple(taken), None)
        if negated:
            # as Flink's NFA discards a partial match one of whose paths reaches a
            # negation's stop state: every way on ends, but matches this event completes
            return Outcome(tuple((name, None, True) for name, _, completes in taken if completes), None)
        completes = False
        if pending and self.next_decides:  # the event after the match does not meet the not_next
            newly.add(ACCEPT)
            pending, completes = False, True
        surviving = [
            c for c in live
            if c.contiguity == Contiguity.ANY or (c.contiguity == Contiguity.RELAXED and not said[c.target])
        ]
        stay = None
        if surviving or pending:
            lost = {c.target for c in live if c not in surviving}
            left = blocked | newly | lost
            stay = state_text(position, not self.minds_skips(position, left), left)
        return Outcome(tuple(taken), stay, completes)

    def minds_skips(self, position: Position, blocked: frozenset[int]) -> bool:
        """Whether a partial match here acts differently once an event has passed it by:
        a strict continuation, or a ``not_next`` (its own or a trailing one), is still
        open. Where none is, a skipped event leaves the state as it was (no ``~``)."""
        for cont in position.conts:
            if cont.target not in blocked and (
                cont.contiguity == Contiguity.STRICT or any(g.kind == "not_next" for g in cont.guards)
            ):
                return True
        return (
            position.accepting and ACCEPT not in blocked
            and any(g.kind == "not_next" for g in self.trailing)
        )

    def _negated(self, guards: tuple[Negation, ...], said: dict[int, bool], fresh: bool) -> bool:
        """Whether this event meets one of ``guards`` (a ``not_next`` only while it is
        the event right after the partial match's last)."""
        return any((g.kind == "not_followed_by" or fresh) and said[self.guard[id(g)]] for g in guards)

    # -- asking the conditions ----------------------------------------------------------------

    def ask(self, state: State, symbol: Any, matched: Any, asked: int, yes: int) -> tuple[int, int]:
        """Ask the conditions ``state`` reads that were not ``asked`` yet about one event;
        ``(asked, yes)`` as bits, updated."""
        missing = state.mask & ~asked
        conditions = self.conditions
        for i in state.reads:
            if missing >> i & 1 and conditions[i](symbol, matched):
                yes |= 1 << i
        return asked | missing, yes


@attrs.frozen
class Records:
    """A batch's distinct symbols, all of one type, and their fields as an Arrow table
    (what every pattern's expression conditions are evaluated over)."""

    kind: type
    distinct: list[Any]
    table: Any


def records_of(symbols: Sequence[Any], symbol_type: Any) -> Records | None:
    """The distinct ``symbols`` as records, or ``None`` if they cannot be read as one
    table (then each is answered alone)."""
    distinct = list(dict.fromkeys(symbols))
    kinds = {type(s) for s in distinct}
    names = _field_names(distinct[0], symbol_type) if len(kinds) == 1 else None
    if names is None:
        return None
    try:
        table = records_table(distinct, names, symbol_type)
    except EVALUATION_ERRORS:
        return None
    return Records(kinds.pop(), distinct, table)


def answer_all(nfa: Nfa, records: Records | None) -> tuple[type | None, dict[Any, int]]:
    """The expression conditions' answers (bit i: condition i holds) for each of the
    records' symbols, evaluated together, and the symbols' one type; the symbols they
    raise on are left out (each is then answered alone, and refused); ``(None, {})``
    without records."""
    if records is None:
        return None, {}
    bits, failed = answer_rows(nfa, records.table)
    if bits is None:
        return records.kind, dict.fromkeys(records.distinct, 0)
    answered = zip(records.distinct, bits.to_pylist(), [False] * len(bits) if failed is None else failed.to_pylist(),
                   strict=True)
    return records.kind, {symbol: yes for symbol, yes, fails in answered if not fails}


_SPLITS = 64  # the evaluations a batch may take to set apart the rows its conditions raise on


def answer_rows(nfa: Nfa, table: Any, answers: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """:func:`answer_column`, the rows it raises on set apart: ``(bits, failed)``,
    ``failed`` a boolean array (``None`` if no row failed), whose rows' bits are 0.
    Conditions that raise over no rows at all (they cannot read the fields' types)
    fail every row; ones that raise on some rows' values (a division by zero) are
    read over halves of the rows, then halves of the halves that raise, until those
    rows are found or ``_SPLITS`` evaluations are spent (the parts left fail whole)::

        rows    1  2  3  4   (10 % amount = 0; amount 0 in row 3)
        read    1  2  3  4   raises
        halves  1  2         answered
                      3  4   raises: 3 raises, 4 answered

    One row that raises thus no longer sends the whole batch to be answered event by event.
    """
    import pyarrow as pa

    try:
        return answer_column(nfa, table, answers), None
    except EVALUATION_ERRORS:
        pass
    pieces: list[tuple[Any, int]] = []  # (bits, or None where the rows fail; rows), in row order
    try:
        answer_column(nfa, table.slice(0, 0))
        budget = _SPLITS
    except EVALUATION_ERRORS:  # by type: every row fails
        budget = 0

    def read(part: Any) -> None:  # ``part`` raises
        nonlocal budget
        if part.num_rows < 2 or budget <= 0:
            pieces.append((None, part.num_rows))
            return
        half = part.num_rows // 2
        for piece in (part.slice(0, half), part.slice(half)):
            budget -= 1
            try:
                pieces.append((answer_column(nfa, piece), piece.num_rows))
            except EVALUATION_ERRORS:
                read(piece)

    read(table)
    bits = pa.concat_arrays([b if b is not None else pa.repeat(pa.scalar(0, pa.int64()), rows) for b, rows in pieces])
    failed = pa.concat_arrays([pa.repeat(pa.scalar(b is None), rows) for b, rows in pieces])
    return bits, failed


def answer_one(nfa: Nfa, symbol: Any, symbol_type: Any) -> int:
    """The expression conditions' answers for one symbol; raises ``TypeError`` /
    ``KeyError`` / an Arrow error when the symbol does not have what they read (a
    null symbol has nothing: on every runtime, whatever its column's type)."""
    if symbol is None:
        raise TypeError("a null event has no fields for expression conditions to read")
    names = _field_names(symbol, symbol_type)
    if names is None:
        raise TypeError(
            f"expression conditions read fields by name; give events as NamedTuples (locally) or "
            f"structs (on Spark), not {type(symbol).__name__} {symbol!r}"
        )
    return _bits(nfa, records_table([symbol], names, symbol_type))[0]


def _field_names(symbol: Any, symbol_type: Any) -> tuple[str, ...] | None:
    import pyarrow as pa

    if symbol_type is not None and pa.types.is_struct(symbol_type):
        return tuple(f.name for f in symbol_type)
    names = getattr(symbol, "_fields", None)
    return tuple(names) if names is not None and type(symbol) is not tuple else None


def _bits(nfa: Nfa, table: Any) -> list[int]:
    bits = answer_column(nfa, table)
    return bits.to_pylist() if bits is not None else [0] * table.num_rows


def answer_column(nfa: Nfa, table: Any, answers: dict[str, Any] | None = None) -> Any:
    """The expression conditions' answers for each row of ``table`` (the events'
    fields) as an Arrow int64 array, bit i set where condition i holds (``None``:
    the pattern has no expressions). ``answers``: each SQL text's answers over
    ``table`` already evaluated (by other patterns), where new ones are kept."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bits = None
    if answers is None:  # by SQL text: a group's copies of a step share their condition
        answers = {}
    for i, expression in nfa.expressions:
        if expression.sql not in answers:
            answers[expression.sql] = pc.cast(expression.evaluate(table), pa.int64())
        answer = pc.shift_left(answers[expression.sql], i)
        bits = answer if bits is None else pc.bit_wise_or(bits, answer)
    return bits


def _time(within: str, time: str) -> str:
    """The time of a group inside the time ``within`` of the groups around it: ``1.2``."""
    return f"{within}.{time}" if within else time


def _negations(elements: Sequence[Step | Group]) -> list[Negation]:
    """Every negation before a step or a group, in groups too (each once)."""
    found: list[Negation] = []
    for element in elements:
        found += element.guards
        if isinstance(element, Group):
            found += _negations(element.pattern.steps)
    return found


def matched_of(taken: tuple[Any, ...]) -> dict[str, tuple[Any, ...]]:
    """The symbols a partial match took, per step (what ``cond(event, matched)`` sees)."""
    if not taken:
        return _NOTHING
    matched: dict[str, tuple[Any, ...]] = {}
    for name, _, _, symbol in taken:
        matched[name] = (*matched.get(name, ()), symbol)
    return matched


def _reads_matched(condition: Any) -> bool:
    """Whether a condition looks at the events already matched (then they are built)."""
    if isinstance(condition, _OneArgument | Expression):
        return False
    if isinstance(condition, _All | _Any):
        return any(_reads_matched(part) for part in condition.parts)
    return condition is not _always
