"""Linear operators: one general operator, the standard ones as its instances, fusion.

A linear operator is given by ``logic(data) -> iterable of (data2, time2, diff2)``.
Applied to an update ``(data, time, diff)`` it yields, for each triple of
``logic(data)``, the update ``(data2, max(time, time2), diff * diff2)``; ``time2`` may
be ``None`` (no constraint: the input time). It is the join of the input with the
collection ``logic`` describes, so ``op(x + y) == op(x) + op(y)``.

``map``, ``filter``, ``flat_map``, ``explode`` and ``temporal_filter`` are instances;
``a | b`` (``a.followed_by(b)``) fuses two operators into one whose logic runs both
in a single pass. A temporal filter keeps each record from ``lower(data)`` until
``upper(data)``::

    updates in          keep for 15 (lower = t, upper = t + 15)   updates out
    (alert, 3, +1)      logic: (alert, 3, +1), (alert, 18, -1)    (alert, 3, +1)
                                                                   (alert, 18, -1)

>>> from statemachines import linear
>>> op = linear.filter(lambda d: d[1] > 1) | linear.map(lambda d: d[0])
>>> op.apply([(("a", 2), 0, 1), (("b", 1), 0, 1), (("a", 2), 5, -1)])
[Update(data='a', time=0, diff=1), Update(data='a', time=5, diff=-1)]
>>> print(op)
filter(<lambda>) | map(<lambda>)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs

from statemachines.arrangement import Arrangement
from statemachines.errors import InvalidArgument
from statemachines.local import RunResult
from statemachines.times import is_time
from statemachines.updates import Update, collection_at, consolidate, is_diff

__all__ = [
    "Linear",
    "LinearView",
    "Step",
    "explode",
    "filter",
    "flat_map",
    "logic",
    "map",
    "temporal_filter",
]

Triple = tuple[Any, Any, int]


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or repr(fn)


@attrs.frozen
class Step:
    """One standard step of a chain: its kind, its functions, optional Spark SQL.

    ``sql`` holds Spark SQL expressions equivalent to the functions (over the
    update columns ``key``, ``value``), letting the Spark runtime apply the step as
    column expressions instead of Python.
    """

    kind: str
    functions: tuple[Callable[..., Any], ...]
    sql: tuple[Any, ...] | None = None

    def logic(self, data: Any) -> Iterable[Triple]:
        """This step's ``logic(data)``."""
        kind, fns = self.kind, self.functions
        if kind == "map":
            return ((fns[0](data), None, 1),)
        if kind == "filter":
            return ((data, None, 1),) if fns[0](data) else ()
        if kind == "flat_map":
            return [(item, None, 1) for item in fns[0](data)]
        if kind == "explode":
            exploded = [(item, None, diff) for item, diff in fns[0](data)]
            _check_diffs(self, data, exploded)
            return exploded
        if kind == "temporal_filter":
            lower, upper = fns[0](data), fns[1](data)
            for bound in (lower, upper):
                if bound is not None and not is_time(bound):  # NaN would make every interval empty
                    raise InvalidArgument(f"temporal_filter's bounds are times or None; got {bound!r} for {data!r}")
            if lower is not None and upper is not None and not lower < upper:
                return ()  # an empty interval: never present
            out: list[Triple] = [(data, lower, 1)]
            if upper is not None:
                out.append((data, upper, -1))
            return out
        triples = list(fns[0](data))  # "logic": the general operator
        if any(t is not None and t != t for _, t, _ in triples):  # NaN is no time: it would never compare
            raise InvalidArgument(f"{self} gave the time nan for {data!r}; its times are times or None")
        _check_diffs(self, data, triples)
        return triples

    def __str__(self) -> str:
        names = ", ".join(_name(f) for f in self.functions)
        return f"{self.kind}({names})"


def _check_diffs(step: Step, data: Any, triples: list[Triple]) -> None:
    """A step's diffs multiply the input's, which are integers: they are integers too."""
    for _, _, diff in triples:
        if not is_diff(diff):
            raise InvalidArgument(f"{step} gave the diff {diff!r} for {data!r}; a diff is an integer")


def _later(a: Any, b: Any) -> Any:
    """``max`` where ``None`` means "no constraint"."""
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


@attrs.frozen
class Linear:
    """A chain of steps that behaves as one linear operator with a fused logic."""

    steps: tuple[Step, ...]

    def logic(self, data: Any) -> list[Triple]:
        """The fused logic: every step applied in turn, times joined, diffs multiplied."""
        current: list[Triple] = [(data, None, 1)]
        for step in self.steps:
            step_logic = step.logic
            current = [
                (d2, _later(t1, t2), r1 * r2)
                for d1, t1, r1 in current
                for d2, t2, r2 in step_logic(d1)
            ]
            if not current:
                break
        return current

    def updates(self, updates: Iterable[tuple[Any, Any, int]]) -> Iterator[Update]:
        """The output updates, one input update at a time (not consolidated)."""
        logic = self.logic
        for data, time, diff in updates:
            for d2, t2, r2 in logic(data):
                if r2:
                    yield Update(d2, time if t2 is None or t2 <= time else t2, diff * r2)

    def apply(self, updates: Any) -> list[Update]:
        """The consolidated output for updates, a run's result, or an arrangement.

        Accepts any iterable of ``(data, time, diff)``, a
        :class:`~statemachines.local.RunResult` (its ``updates``) or an
        :class:`~statemachines.arrangement.Arrangement` (all its updates).
        """
        if isinstance(updates, Arrangement):
            updates = updates.updates()
        elif isinstance(updates, RunResult):
            updates = updates.updates
        return consolidate(self.updates(updates))

    __call__ = apply

    def derive(self, arrangement: Arrangement) -> Arrangement:
        """A new arrangement holding this operator's output, final up to the source's upper.

        Output updates at times at or beyond the source's ``upper`` (for example
        the retractions a temporal filter schedules) are not final yet; derive
        again once the source has advanced, or read through :meth:`view`.
        """
        derived = Arrangement()
        upper = arrangement.upper
        if upper is not None:
            final = [u for u in self.apply(arrangement) if u.time < upper]
            derived.append(final, lower=None, upper=upper)
        return derived

    def view(self, arrangement: Arrangement) -> LinearView:
        """A lazily transformed read of ``arrangement`` through this operator."""
        return LinearView(arrangement, self)

    def followed_by(self, other: Linear) -> Linear:
        """One operator doing ``self`` then ``other`` (fused: a single pass)."""
        if not isinstance(other, Linear):
            raise InvalidArgument(f"can only chain linear operators, not {other!r}")
        return Linear(self.steps + other.steps)

    __or__ = followed_by

    def __str__(self) -> str:
        return " | ".join(str(step) for step in self.steps) or "identity"

    def __repr__(self) -> str:
        return f"Linear({self})"


@attrs.frozen
class LinearView:
    """Reads of an arrangement as transformed by a linear operator, computed on demand."""

    arrangement: Arrangement
    op: Linear

    def collection(self, as_of: Any = None) -> dict[Any, int]:
        """The output collection as of ``as_of`` (default: the source's latest)."""
        updates = self.op.apply(self.arrangement)
        if as_of is None:
            as_of = max((u.time for u in updates), default=None)
            if as_of is None:
                return {}
        return collection_at(updates, as_of)

    def changes(self, lower: Any = None, upper: Any = None) -> list[Update]:
        """The output updates at times in ``[lower, upper)``."""
        return [
            u
            for u in self.op.apply(self.arrangement)
            if (lower is None or u.time >= lower) and (upper is None or u.time < upper)
        ]


def _step(kind: str, functions: tuple[Callable[..., Any], ...], sql: Any = None) -> Linear:
    for fn in functions:
        if not callable(fn):
            raise InvalidArgument(f"{kind} needs a function, got {fn!r}")
    return Linear((Step(kind, functions, sql),))


def map(fn: Callable[[Any], Any], *, sql: dict[str, str] | None = None) -> Linear:  # noqa: A001
    """Replace each record by ``fn(record)``.

    ``sql`` optionally gives the same as Spark SQL, one expression per output
    column (``{"key": "key", "value": "upper(value)"}``).
    """
    return _step("map", (fn,), None if sql is None else tuple(sql.items()))


def filter(predicate: Callable[[Any], bool], *, sql: str | None = None) -> Linear:  # noqa: A001
    """Keep the records for which ``predicate(record)`` is true (``sql``: the same in Spark SQL)."""
    return _step("filter", (predicate,), None if sql is None else (sql,))


def flat_map(fn: Callable[[Any], Iterable[Any]]) -> Linear:
    """Replace each record by every record of ``fn(record)``."""
    return _step("flat_map", (fn,))


def explode(fn: Callable[[Any], Iterable[tuple[Any, int]]]) -> Linear:
    """Replace each record by ``fn(record)``'s ``(record2, diff2)`` pairs; diffs multiply."""
    return _step("explode", (fn,))


def temporal_filter(
    lower: Callable[[Any], Any],
    upper: Callable[[Any], Any],
    *,
    sql: tuple[str | None, str | None] | None = None,
) -> Linear:
    """Keep each record from ``lower(record)`` until ``upper(record)``.

    The record appears at ``max(time, lower)`` and disappears at ``max(time, upper)``;
    ``None`` from either function means unbounded on that side, and an empty
    interval (``upper <= lower``) keeps nothing. ``sql`` optionally gives both bounds
    as Spark SQL expressions.
    """
    return _step("temporal_filter", (lower, upper), sql)


def logic(fn: Callable[[Any], Iterable[Triple]]) -> Linear:
    """The general linear operator with ``fn`` as its logic."""
    return _step("logic", (fn,))

