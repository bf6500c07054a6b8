"""The pattern language of complex event detection: steps, contiguity, quantifiers.

A pattern is a sequence of named steps, each matching one event or a run of events,
built fluently; every call returns a new, immutable pattern::

    fraud = (
        Pattern.begin("fail").where(lambda e: e[0] == "fail").times(3)
        .followed_by("ok").where(lambda e: e[0] == "ok")
        .within(600)
    )

Building checks the pattern, so a pattern that cannot work fails here, saying why.

Contiguity, between a step and the one before it (for the first event of a step):

    method                 events a, c, b1, b2 for "a then b"      matches
    next(name)             strict: b must directly follow a        (none)
    followed_by(name)      relaxed: skip events b cannot take      a b1
    followed_by_any(name)  also skip events b could take           a b1, a b2

Inside a looping step (``times``, ``one_or_more``) events are relaxed by default;
``consecutive()`` makes them strict, ``allow_combinations()`` non-deterministic.

Quantifiers: ``times(n)``, ``times(n, m)``, ``times_or_more(n)``, ``one_or_more()``,
``optional()`` (the step may also match no event: ``times(2, 4).optional()`` takes 0,
2, 3 or 4), ``greedy()`` (a looping step keeps every event it can take: the steps
after it take only events the loop cannot), ``until(cond)`` (once, on an unbounded
loop: the step takes no event meeting ``cond``; inside the loop such an event ends it).
``times(0, m)`` is ``times(1, m).optional()``.

Negation: ``not_next(name)`` (the event right after the previous step must not
meet the condition) and ``not_followed_by(name)`` (no event meeting it may come
before the next step; at the end of a pattern it needs ``within``: the match is
then complete when the window closes without such an event).

Conditions: ``where(cond)`` (and), ``or_where(cond)`` (or). ``cond(event)`` sees the
event's symbol; ``cond(event, matched)`` also sees the events the partial match has
taken so far, as ``{step name: (symbols...)}``. A condition may also be SQL text
over the event's fields, ``where("kind = 'fail' AND amount > 100")``, or a Spark
``Column`` (written back as that text: :mod:`statemachines.spark.column_sql`): such
conditions are evaluated for a whole batch of events at once (see
:mod:`statemachines.library.expressions`), and a step's conditions are then all
expressions.

Groups: a ``Pattern`` given to ``begin``, ``next``, ``followed_by`` or
``followed_by_any`` is taken as one step (Flink's group pattern), with a step's
quantifiers; each time it is taken its steps match once more::

    c (a b)+ d          over c a1 b1 a2 b2 d     matches c a1 b1 d, c a1 b1 a2 b2 d

``within(duration)``: the last event of a match is less than ``duration`` after its
first (given more than once, the smallest applies). ``within(duration,
"previous_and_current")`` (Flink's ``WithinType.PREVIOUS_AND_CURRENT``) bounds the gap
before one step instead: the step's event is less than ``duration`` after the event
taken just before it, and a partial match waiting for it times out then::

    a, then b within 3 of a       events a@0 a@2 b@4         matches a@2 b@4
                                                             timeout a@0 at 3

After a match, ``skip`` says which other partial matches to drop: see :class:`Skip`.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import attrs

from statemachines.errors import DefinitionError
from statemachines.library.expressions import Expression
from statemachines.times import is_duration

__all__ = ["Contiguity", "Group", "Negation", "Pattern", "Skip", "Step", "WithinType"]

EnumT = TypeVar("EnumT", bound=enum.StrEnum)
# a function of the event and the partial match so far, or SQL evaluated in bulk
Condition: TypeAlias = Callable[[Any, dict[str, tuple[Any, ...]]], bool] | Expression


class Contiguity(enum.StrEnum):
    """How a step treats events it does not take (see the module documentation)."""

    STRICT = "strict"
    RELAXED = "relaxed"
    ANY = "any"


class Skip(enum.StrEnum):
    """After-match skip strategies: which partial matches a match discards.

    For ``b.one_or_more().consecutive().greedy().next(c)`` over ``b1 b2 b3 c``
    (Flink CEP's documented example; ``tests/test_cep.py`` checks it)::

        strategy                matches                          discards
        NO_SKIP                 b1 b2 b3 c, b2 b3 c, b3 c        nothing
        SKIP_TO_NEXT            b1 b2 b3 c, b2 b3 c, b3 c        those begun at the match's first event
        SKIP_PAST_LAST_EVENT    b1 b2 b3 c                       those begun up to its last event
        SKIP_TO_FIRST (b)       b1 b2 b3 c, b2 b3 c, b3 c        those begun before its first b
        SKIP_TO_LAST (b)        b1 b2 b3 c, b3 c                 those begun before its last b

    A match discards only partial matches (and waiting matches) begun at or after its
    own start: under every strategy but NO_SKIP a match waits until no partial match
    begun before it is live, as Flink's NFA does.
    """

    NO_SKIP = "no_skip"
    SKIP_TO_NEXT = "skip_to_next"
    SKIP_PAST_LAST_EVENT = "skip_past_last_event"
    SKIP_TO_FIRST = "skip_to_first"
    SKIP_TO_LAST = "skip_to_last"


class WithinType(enum.StrEnum):
    """What ``within`` bounds (Flink's ``WithinType``)."""

    FIRST_AND_LAST = "first_and_last"
    """A match's last event comes less than the duration after its first."""
    PREVIOUS_AND_CURRENT = "previous_and_current"
    """The current step's event comes less than the duration after the event taken
    just before it (the previous step's, which takes one event)."""


def _always(event: Any, matched: Any) -> bool:
    return True


def _as_condition(cond: Callable[..., bool] | str, what: str) -> Condition:
    """``cond`` as a two-argument condition (one-argument conditions ignore ``matched``),
    or as an :class:`Expression` if it is SQL text or a Spark Column (written back as
    SQL text: :mod:`statemachines.spark.column_sql`)."""
    if isinstance(cond, str):
        return Expression(cond)
    if isinstance(cond, Expression):
        return cond
    if type(cond).__name__ == "Column" and type(cond).__module__.startswith("pyspark."):
        from statemachines.spark.column_sql import column_sql  # a Column means PySpark is here

        return Expression(column_sql(cond))
    if not callable(cond):
        raise DefinitionError(f"{what} needs a function, SQL text or a Spark Column, got {cond!r}")
    try:
        params = [
            p
            for p in inspect.signature(cond).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):  # builtins without a signature: one argument
        params = [None]  # type: ignore[list-item]
    if len(params) == 1:
        return _OneArgument(cond)
    if len(params) == 2:
        return cond
    raise DefinitionError(
        f"{what} takes cond(event) or cond(event, matched); {cond!r} takes {len(params)} arguments"
    )


def _combined(old: Condition, new: Condition, how: str) -> Condition:
    """Two conditions of one step joined by ``AND`` / ``OR``: an expression if both are."""
    if isinstance(old, Expression) and isinstance(new, Expression):
        return old.joined(new, how)
    if isinstance(old, Expression) or isinstance(new, Expression):
        raise DefinitionError(
            "a step's conditions are all SQL expressions or all functions: an expression is "
            "evaluated for a whole batch of events at once, a function per event"
        )
    return _All((old, new)) if how == "AND" else _Any((old, new))


@attrs.frozen
class _OneArgument:
    fn: Callable[[Any], bool]

    def __call__(self, event: Any, matched: Any) -> bool:
        return bool(self.fn(event))


@attrs.frozen(repr=False)
class _InstanceOf:
    cls: type | tuple[type, ...]

    def __call__(self, event: Any) -> bool:
        return isinstance(event, self.cls)

    def __repr__(self) -> str:
        classes = self.cls if isinstance(self.cls, tuple) else (self.cls,)
        return f"subtype({', '.join(c.__qualname__ for c in classes)})"


def subtypes_in(condition: Any) -> list[tuple[type, ...]]:
    """The classes of each ``subtype(...)`` within ``condition``."""
    if isinstance(condition, _InstanceOf):
        return [condition.cls if isinstance(condition.cls, tuple) else (condition.cls,)]
    if isinstance(condition, _OneArgument):
        return subtypes_in(condition.fn)
    if isinstance(condition, _All | _Any):
        return [classes for part in condition.parts for classes in subtypes_in(part)]
    return []


@attrs.frozen
class _All:
    parts: tuple[Condition, ...]

    def __call__(self, event: Any, matched: Any) -> bool:
        return all(part(event, matched) for part in self.parts)


@attrs.frozen
class _Any:
    parts: tuple[Condition, ...]

    def __call__(self, event: Any, matched: Any) -> bool:
        return any(part(event, matched) for part in self.parts)


@attrs.frozen
class Negation:
    """A condition no event may meet at a point of the pattern."""

    name: str
    kind: str  # "not_next" or "not_followed_by"
    condition: Condition = _always
    gap: Any = None  # a trailing not_followed_by's within(d, PREVIOUS_AND_CURRENT)


@attrs.frozen
class Step:
    """One named step: its condition, how many events it takes, its contiguity."""

    name: str
    contiguity: Contiguity = Contiguity.RELAXED  # to the step before (first event)
    condition: Condition = _always
    min: int = 1  # events taken when the step is not left out
    max: int | None = 1  # None: no upper bound
    optional: bool = False  # the step may also take no event at all
    inner: Contiguity = Contiguity.RELAXED  # between the events of a looping step
    greedy: bool = False
    until: Condition | None = None
    guards: tuple[Negation, ...] = ()  # negations between the previous step and this one
    gap: Any = None  # within(d, PREVIOUS_AND_CURRENT): its event less than d after the one before

    @property
    def loops(self) -> bool:
        return self.max is None or self.max > 1


@attrs.frozen
class Group:
    """A pattern taken as one step (Flink's group pattern): each time the group is
    taken, its pattern matches once more. It has the quantifiers and contiguity of a
    step (``contiguity`` for its first event, ``inner`` between one time's last event
    and the next time's first) but no condition of its own."""

    pattern: Pattern
    contiguity: Contiguity = Contiguity.RELAXED
    min: int = 1
    max: int | None = 1
    optional: bool = False
    inner: Contiguity = Contiguity.RELAXED
    guards: tuple[Negation, ...] = ()

    @property
    def loops(self) -> bool:
        return self.max is None or self.max > 1

    @property
    def name(self) -> str:
        """The group as its steps' names, for messages: ``(a b)``."""
        return f"({' '.join(element.name for element in self.pattern.steps)})"


@attrs.frozen
class Pattern:
    """An immutable pattern; build it with :meth:`begin` and the fluent methods."""

    steps: tuple[Step | Group, ...]
    trailing: tuple[Negation, ...] = ()
    window: Any = None
    skip: Skip = Skip.NO_SKIP
    skip_step: str | None = None
    raise_on_miss: bool = False  # Flink's throwExceptionOnMiss (see begin)
    _quantified: bool = attrs.field(default=False, eq=False)  # the last step had its quantifier set
    _pending: tuple[Negation, ...] = ()  # negations waiting for the next step

    # -- starting and chaining ---------------------------------------------------------

    @classmethod
    def begin(
        cls, name: str | Pattern, skip: Skip | str = Skip.NO_SKIP, step: str | None = None, *,
        raise_on_miss: bool = False,
    ) -> Pattern:
        """A pattern whose first step is ``name`` (or a group: a ``Pattern``); ``skip`` is
        the after-match strategy (``step`` names the step of ``SKIP_TO_FIRST`` /
        ``SKIP_TO_LAST``).

        A match whose named step took no event prunes nothing (as ``NO_SKIP``). With
        ``raise_on_miss`` (Flink's ``throwExceptionOnMiss``) it is an error instead,
        and so is a match that would skip to its own first event: the event that
        completes it is rejected as ``transition_failed`` (a match released when a
        window closes stops the run).
        """
        strategy = _member(Skip, skip, "skip strategy")
        if (strategy in (Skip.SKIP_TO_FIRST, Skip.SKIP_TO_LAST)) != (step is not None):
            raise DefinitionError(
                f"{strategy.value} {'needs' if step is None else 'takes no'} a step name "
                f"(skip_to_first / skip_to_last name the step to skip to)"
            )
        if raise_on_miss and step is None:
            raise DefinitionError("raise_on_miss applies to skip_to_first / skip_to_last, which name a step")
        first = _group(name, Contiguity.RELAXED) if isinstance(name, Pattern) else Step(_name(name))
        return cls((first,), skip=strategy, skip_step=step, raise_on_miss=bool(raise_on_miss))

    def next(self, name: str | Pattern) -> Pattern:
        """A new step (or group) whose first event directly follows the previous step's last."""
        return self._then(name, Contiguity.STRICT)

    def followed_by(self, name: str | Pattern) -> Pattern:
        """A new step (or group); events it cannot take are skipped until it takes one."""
        return self._then(name, Contiguity.RELAXED)

    def followed_by_any(self, name: str | Pattern) -> Pattern:
        """A new step (or group) that may also skip events it could take (every combination)."""
        return self._then(name, Contiguity.ANY)

    def not_next(self, name: str) -> Pattern:
        """The event right after the previous step must not meet this step's condition.

        At the end of a pattern, as in Flink, a match completes at the key's next event
        (without it) unless that event meets the condition; a window that closes first
        times the partial match out.
        """
        return self._negate(name, "not_next")

    def not_followed_by(self, name: str) -> Pattern:
        """No event meeting this step's condition may come before the next step."""
        return self._negate(name, "not_followed_by")

    # -- conditions ----------------------------------------------------------------------

    def where(self, cond: Callable[..., bool] | str | Any) -> Pattern:
        """The current step also requires ``cond``: SQL text, a Spark ``Column``, or a
        function ``cond(event)`` or ``cond(event, matched)`` (the symbols the partial
        match took, by step name). A function of the event alone must depend on nothing
        else: a detector may call it on events no step asks about, and only once for
        several equal events (see :mod:`statemachines.library.lockstep`)."""
        condition = _as_condition(cond, "where")
        return self._change(lambda old: condition if old is _always else _combined(old, condition, "AND"))

    def subtype(self, cls: type | tuple[type, ...]) -> Pattern:
        """The current step also requires its event to be an instance of ``cls``, as
        Flink's ``subtype(SubEvent.class)``; ``where`` conditions given after it see only
        such events. The symbol is checked as the runtime hands it: on Spark a struct
        symbol is a :class:`~statemachines.records.Record` of its fields, not the class
        it was written from, so there ``subtype`` tells apart only the Python types a
        column holds (``str``, ``int``, ``Record``, ...); a Spark job refuses a
        ``subtype`` its symbol column can never meet before it starts.

        ======================  ===================================
        ``subtype(Click)``      takes
        ======================  ===================================
        ``Click("home")``       yes
        ``View("home")``        no
        ======================  ===================================
        """
        if not (isinstance(cls, type) or (isinstance(cls, tuple) and cls and all(isinstance(c, type) for c in cls))):
            raise DefinitionError(f"subtype needs a class (or a tuple of classes), got {cls!r}")
        return self.where(_InstanceOf(cls))

    def or_where(self, cond: Callable[..., bool] | str | Any) -> Pattern:
        """The current step accepts events meeting its condition so far or ``cond``."""
        condition = _as_condition(cond, "or_where")
        if self._condition() is _always:
            raise DefinitionError("or_where needs a where before it (an always-true step stays true)")
        return self._change(lambda old: _combined(old, condition, "OR"))

    # -- quantifiers ---------------------------------------------------------------------

    def times(self, n: int, m: int | None = ...) -> Pattern:  # type: ignore[assignment]
        """Exactly ``n`` events, or between ``n`` and ``m`` with ``times(n, m)``;
        ``times(0, m)`` is ``times(1, m).optional()``, as in Flink."""
        upper = n if m is ... else m
        if n == 0 and type(n) is int and m is not ... and m != 0:
            return self.times(1, upper).optional()
        if not _is_count(n) or n < 1 or (upper is not None and (not _is_count(upper) or upper < n)):
            raise DefinitionError(f"times needs 1 <= n <= m (or 0 < m); got n={n!r}, m={upper!r}")
        return self._quantify(n, upper)

    def times_or_more(self, n: int) -> Pattern:
        """At least ``n`` events."""
        if not _is_count(n) or n < 1:
            raise DefinitionError(f"times_or_more needs n >= 1; got {n!r}")
        return self._quantify(n, None)

    def one_or_more(self) -> Pattern:
        """One event or more."""
        return self._quantify(1, None)

    def optional(self) -> Pattern:
        """The current step may also match no event at all."""
        return self._last(lambda s: attrs.evolve(s, optional=True), "optional")

    def greedy(self) -> Pattern:
        """A looping step keeps every event it can take (the next step does not get it)."""
        self._refuse_on_group("greedy")
        return self._looping("greedy", lambda s: attrs.evolve(s, greedy=True))

    def consecutive(self) -> Pattern:
        """A looping step's events must directly follow one another."""
        return self._looping("consecutive", lambda s: attrs.evolve(s, inner=Contiguity.STRICT))

    def allow_combinations(self) -> Pattern:
        """A looping step may skip events it could take (every combination)."""
        return self._looping("allow_combinations", lambda s: attrs.evolve(s, inner=Contiguity.ANY))

    def until(self, cond: Callable[..., bool] | str) -> Pattern:
        """An event meeting ``cond`` ends the current unbounded loop (``one_or_more``,
        ``times_or_more``; it is not taken). One ``until`` per step, as in Flink."""
        condition = _as_condition(cond, "until")
        self._refuse_on_group("until")
        step = self.steps[-1]
        if not self._pending and step.max is not None and step.loops:
            raise DefinitionError(
                f"until applies to an unbounded loop (one_or_more, times_or_more); step "
                f"{step.name!r} takes at most {step.max} events"
            )
        if not self._pending and step.until is not None:
            raise DefinitionError(f"step {step.name!r} already has an until condition; give it one")
        return self._looping("until", lambda s: attrs.evolve(s, until=condition))

    def within(self, duration: Any, within_type: WithinType | str = WithinType.FIRST_AND_LAST) -> Pattern:
        """Every match's last event comes less than ``duration`` after its first.

        A pattern has one window: called again (on a later step, say), the smallest
        applies, as in Flink. With ``within_type="previous_and_current"`` the bound is
        on the current step instead: its event comes less than ``duration`` after the
        event taken just before it, and a partial match waiting for it times out then
        (a trailing ``not_followed_by``: its match completes then). As Flink checks
        the gap only while a partial match waits at the step, the step and the one
        before it must each take one event (no loop, no optional step, no group), and
        the step is not the first; the gap is at most the pattern's window.
        """
        kind = _member(WithinType, within_type, "within type")
        bound = self.window
        if kind == WithinType.PREVIOUS_AND_CURRENT:
            bound = self._pending[-1].gap if self._pending else getattr(self.steps[-1], "gap", None)
        try:
            positive = is_duration(duration, positive=True)
            smallest = duration if bound is None else min(bound, duration)
        except TypeError:  # a timedelta beside a number
            positive = False
        if not positive:
            raise DefinitionError(
                f"within needs a positive duration of the pattern's kind, got {duration!r}"
                + ("" if bound is None else f" (the bound so far is {bound!r})")
            )
        if kind == WithinType.FIRST_AND_LAST:
            return attrs.evolve(self, window=smallest)
        if self._pending:
            negation = self._pending[-1]
            if negation.kind != "not_followed_by":
                raise DefinitionError(
                    f"within(..., previous_and_current) applies to a step or a trailing not_followed_by, "
                    f"not to not_next({negation.name!r})"
                )
            return attrs.evolve(self, pending=(*self._pending[:-1], attrs.evolve(negation, gap=smallest)))
        self._refuse_on_group("within(..., previous_and_current)")
        return self._replace_last(lambda s: attrs.evolve(s, gap=smallest))

    # -- as data -------------------------------------------------------------------------

    def to_json(self) -> str:
        """This pattern as JSON (its conditions must be SQL); see :mod:`~statemachines.library.pattern_data`."""
        from statemachines.library.pattern_data import pattern_to_json

        return pattern_to_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Pattern:
        """The pattern a :meth:`to_json` document describes."""
        from statemachines.library.pattern_data import pattern_from_json

        return pattern_from_json(text)

    # -- reading -------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Every step and negation name, in pattern order."""
        names = []
        for step in self.steps:
            names += [g.name for g in step.guards]
            names += step.pattern.names if isinstance(step, Group) else [step.name]
        return names + [g.name for g in (*self.trailing, *self._pending)]

    @property
    def step_names(self) -> list[str]:
        """The names of the steps that take events (in groups too), in pattern order."""
        names = []
        for step in self.steps:
            names += step.pattern.step_names if isinstance(step, Group) else [step.name]
        return names

    def __repr__(self) -> str:
        return f"Pattern({_steps_text(self.steps)}, within={self.window!r}, skip={self.skip.value})"

    # -- insides -------------------------------------------------------------------------

    def _then(self, name: str | Pattern, contiguity: Contiguity) -> Pattern:
        step: Step | Group
        if self._pending and self._pending[-1].gap is not None:
            raise DefinitionError(
                f"within(..., previous_and_current) on not_followed_by({self._pending[-1].name!r}) applies "
                f"at the end of a pattern only; give it to the step after the negation"
            )
        if isinstance(name, Pattern):
            for inner in name.names:
                self._new_name(inner)
            step = attrs.evolve(_group(name, contiguity), guards=self._pending)
        else:
            step = Step(self._new_name(name), contiguity, guards=self._pending)
        return attrs.evolve(self, steps=(*self.steps, step), pending=(), quantified=False)

    def _refuse_on_group(self, what: str) -> None:
        if not self._pending and isinstance(self.steps[-1], Group):
            raise DefinitionError(
                f"{what} applies to a step, not to the group {self.steps[-1].name} (as in Flink); "
                f"give it to a step inside the group"
            )

    def _negate(self, name: str, kind: str) -> Pattern:
        name = self._new_name(name)
        if self._pending:
            raise DefinitionError(
                f"{kind}({name!r}) follows the negation {self._pending[-1].name!r}; put a step "
                f"between two negations"
            )
        if self.steps[-1].optional:
            raise DefinitionError(
                f"{kind}({name!r}) follows the optional step {self.steps[-1].name!r}: a negation "
                f"cannot come after an optional step (write two patterns, with and without it)"
            )
        return attrs.evolve(self, pending=(Negation(name, kind),))

    def _new_name(self, name: str) -> str:
        name = _name(name)
        if name in self.names:
            raise DefinitionError(f"step name {name!r} is used twice; names must be unique")
        return name

    def _condition(self) -> Condition:
        self._refuse_on_group("or_where")
        return self._pending[-1].condition if self._pending else self.steps[-1].condition  # type: ignore[union-attr]

    def _change(self, update: Callable[[Condition], Condition]) -> Pattern:
        if self._pending:
            negation = self._pending[-1]
            changed = attrs.evolve(negation, condition=update(negation.condition))
            return attrs.evolve(self, pending=(*self._pending[:-1], changed))
        self._refuse_on_group("a condition")
        return self._replace_last(lambda s: attrs.evolve(s, condition=update(s.condition)))

    def _replace_last(self, change: Callable[[Step], Step]) -> Pattern:
        return attrs.evolve(self, steps=(*self.steps[:-1], change(self.steps[-1])))

    def _last(self, change: Callable[[Step], Step], what: str) -> Pattern:
        if self._pending:
            raise DefinitionError(f"{what} applies to a step, not to the negation {self._pending[-1].name!r}")
        return self._replace_last(change)

    def _quantify(self, low: int, high: int | None) -> Pattern:
        if self._quantified:
            raise DefinitionError(f"step {self.steps[-1].name!r} already has a quantifier")
        quantified = self._last(lambda s: attrs.evolve(s, min=low, max=high), "a quantifier")
        return attrs.evolve(quantified, quantified=True)

    def _looping(self, what: str, change: Callable[[Step], Step]) -> Pattern:
        step = self.steps[-1]
        if self._pending or not step.loops:
            raise DefinitionError(
                f"{what} applies to a looping step (times, times_or_more, one_or_more); "
                f"{self._pending[-1].name if self._pending else step.name!r} is not one"
            )
        return self._replace_last(change)

    def compiled(self) -> Pattern:
        """This pattern, checked as a whole: what a detector runs."""
        if _may_take_nothing(self):
            raise DefinitionError("every step is optional: a pattern must take at least one event")
        last = self._pending[-1] if self._pending else None
        if last is not None and last.kind == "not_followed_by" and self.window is None and last.gap is None:
            raise DefinitionError(
                f"the pattern ends with the negation {last.name!r} but has no within(); "
                f"a trailing not_followed_by is only decided when the window closes"
            )
        if self.skip_step is not None and self.skip_step not in self.step_names:
            raise DefinitionError(f"the skip strategy names {self.skip_step!r}, which is not a step")
        self._check_gaps()
        return attrs.evolve(self, trailing=(*self.trailing, *self._pending), pending=())

    def _check_gaps(self) -> None:
        """Refuse a ``previous_and_current`` window where Flink would not check it while
        the partial match waits for the step (see :meth:`within`), or beyond the window."""
        bounded: list[tuple[str, Any, Step | Group | None, Step | Group | None]] = [
            (s.name, s.gap, s, self.steps[i - 1] if i else None)
            for i, s in enumerate(self.steps) if getattr(s, "gap", None) is not None
        ]
        bounded += [(g.name, g.gap, None, self.steps[-1]) for g in self._pending if g.gap is not None]
        for name, gap, step, before in bounded:
            why = ""
            if before is None:
                why = "it is the first step: no event comes before it"
            elif isinstance(step, Step) and (step.loops or step.optional):
                why = "it takes no event or several (give the gap to a step that takes one)"
            elif isinstance(before, Group) or before.loops or before.optional:
                why = f"the step before it, {before.name!r}, may take no event or several"
            elif self.window is not None and _larger(gap, self.window):
                why = f"the gap {gap!r} is larger than the pattern's window {self.window!r} (as Flink refuses)"
            if why:
                raise DefinitionError(f"within(..., previous_and_current) on {name!r}: {why}")


def _steps_text(steps: tuple[Step | Group, ...]) -> str:
    """``a[1..1] -> (b[1..1] -> c[1..])[0|2..3]``: each step's name or group, and its count."""
    return " -> ".join(
        f"{s.name if isinstance(s, Step) else '(' + _steps_text(s.pattern.steps) + ')'}"
        f"[{'0|' if s.optional else ''}{s.min}..{'' if s.max is None else s.max}]"
        for s in steps
    )


def _group(pattern: Pattern, contiguity: Contiguity) -> Group:
    """``pattern`` as a group step, checked: a group is only steps, and takes an event."""
    if pattern._pending:
        raise DefinitionError(
            f"a group cannot end with the negation {pattern._pending[-1].name!r}: put a step after "
            f"it, or the negation after the group"
        )
    if pattern.window is not None or any(getattr(s, "gap", None) is not None for s in pattern.steps):
        raise DefinitionError("a group takes no within(); give the window to the whole pattern")
    if pattern.skip != Skip.NO_SKIP:
        raise DefinitionError("a group takes no skip strategy; give it to the whole pattern's begin")
    if _may_take_nothing(pattern):
        raise DefinitionError(f"every step of the group {Group(pattern).name} is optional: a group must take an event")
    return Group(pattern, contiguity)


def _may_take_nothing(pattern: Pattern) -> bool:
    return all(s.optional or (isinstance(s, Group) and _may_take_nothing(s.pattern)) for s in pattern.steps)


def _name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise DefinitionError(f"a step needs a non-empty name, got {name!r}")
    if ":" in name:
        raise DefinitionError(f"step name {name!r} contains ':', which step names cannot (as in Flink)")
    return name


def _larger(gap: Any, window: Any) -> bool:
    try:
        return bool(gap > window)
    except TypeError:
        raise DefinitionError(
            f"within(..., previous_and_current) of {gap!r} and the window {window!r} are durations of different kinds"
        ) from None


def _is_count(n: Any) -> bool:
    """Whether ``n`` is an int that counts events (``True`` is no count)."""
    return isinstance(n, int) and not isinstance(n, bool)


def _member(kind: type[EnumT], value: Any, what: str) -> EnumT:
    """``value`` as a member of the enum ``kind``, or a refusal naming the members."""
    try:
        return kind(value)
    except ValueError:
        raise DefinitionError(f"unknown {what} {value!r}; use one of {', '.join(kind)}") from None
