"""The machine base class: a per-key automaton over a set of values.

Subclass :class:`Machine` and write ``transition``. Each key holds a set of values
(its part of the output collection; empty at first). For every event the runtime calls
``transition(key, values, symbol, time)`` and turns "values before" vs "values after"
into updates, netted per time::

    class Tags(Machine):
        def transition(self, key, values, symbol, time):
            op, tag = symbol
            return values | {tag} if op == "add" else values - {tag}

    events (key, symbol, time)          updates
    ann | ("add", "x")   | 1            (ann, x) | 1 | +1
    ann | ("add", "y")   | 2            (ann, y) | 2 | +1
    ann | ("del", "x")   | 3            (ann, x) | 3 | -1

Optional hooks, each with a default that does nothing special:

- ``initial_values(key)``: what ``transition`` sees for a key whose set is empty
  (default: the empty set). A key whose set is empty is indistinguishable from one
  never seen, so this is also what a key starts from again after its set empties.
- ``validate_symbol(symbol)``: raise ``ValueError`` or ``TypeError`` to reject a
  symbol before it is buffered (reason ``invalid_symbol``).
- ``reduce_same_time(first, second)``: combine two events at one ``(key, time)`` into
  one event with the same effect as applying both in rank order. It must be
  associative and commutative (the runtime folds events in arrival order), and lets
  the runtime buffer one event per ``(key, time)`` instead of all of them.
- ``deadline(key, values)`` and ``on_deadline(key, values, time)``: the next time the
  key wants to be woken without a symbol, derived from its (non-empty) values, and
  the transition taken then. A deadline fires before the events at its own time, and
  must lie strictly after the time of the change that produced it. Define both or
  neither.

The class is checked once, when it is created: a wrong declaration raises
:class:`~statemachines.errors.DefinitionError` then, not in the middle of a run.
Machines are plain objects; keep them picklable (runtimes ship them to workers).
Intermediate base classes that do not define ``transition`` pass ``abstract=True``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

from statemachines.errors import DefinitionError
from statemachines.events import Event

__all__ = ["Machine", "MachineSpec"]

_EMPTY: frozenset[Any] = frozenset()

# hook name -> the parameters it must take after ``self``
_SIGNATURES = {
    "transition": ("key", "values", "symbol", "time"),
    "initial_values": ("key",),
    "validate_symbol": ("symbol",),
    "reduce_same_time": ("first", "second"),
    "deadline": ("key", "values"),
    "on_deadline": ("key", "values", "time"),
}


@attrs.frozen
class MachineSpec:
    """What the class check found out about a machine class (cached on the class)."""

    name: str
    has_initial_values: bool
    validates_symbols: bool
    reduces_same_time: bool
    has_deadlines: bool
    has_own_step: bool  # defines advance_key: a faster equivalent of the generic step


class Machine:
    """Base class of every machine; see the module documentation."""

    spec: ClassVar[MachineSpec]

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not abstract and not _rebuilt_by_value():
            cls.spec = _check_definition(cls)

    # -- the hooks ------------------------------------------------------------------

    def transition(self, key: Any, values: frozenset[Any], symbol: Any, time: Any) -> Iterable[Any]:
        """The next set of values of ``key`` after ``symbol`` arrives at ``time``."""
        raise NotImplementedError  # pragma: no cover - every concrete class overrides it

    def initial_values(self, key: Any) -> frozenset[Any]:
        """What ``transition`` sees for a key whose set of values is empty."""
        return _EMPTY

    def validate_symbol(self, symbol: Any) -> None:
        """Raise ``ValueError`` or ``TypeError`` to reject ``symbol`` (default: accept)."""

    def reduce_same_time(self, first: Event, second: Event) -> Event:
        """One event with the effect of ``first`` and ``second`` at one ``(key, time)``."""
        raise NotImplementedError  # pragma: no cover - only called when overridden

    def deadline(self, key: Any, values: frozenset[Any]) -> Any:
        """The next time ``key`` wants to be woken without a symbol, or ``None``."""
        return None

    def on_deadline(self, key: Any, values: frozenset[Any], time: Any) -> Iterable[Any]:
        """The next set of values of ``key`` when its deadline ``time`` is reached."""
        return values

    # -- plumbing -------------------------------------------------------------------

    def advance_key(
        self, key: Any, values: frozenset[Any], events: list[Event], upto: Any, check: Any = None
    ) -> tuple[frozenset[Any], list[Any], list[Any]]:
        """A faster equivalent of :func:`statemachines.core.advance_key` for this machine.

        Optional: runtimes call it (through :func:`statemachines.core.step`) only when
        a class defines it; the generic step is the reference it is tested against.
        """
        raise NotImplementedError  # pragma: no cover - only called when overridden

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and getattr(self, "__dict__", {}) == getattr(
            other, "__dict__", {}
        )

    def __hash__(self) -> int:
        return hash(type(self))


def _rebuilt_by_value() -> bool:
    """True while cloudpickle rebuilds a class by value on a worker.

    A class defined in ``__main__``, a notebook cell or a nested scope travels by
    value: cloudpickle first creates an empty class, then sets its methods and its
    cached ``spec``. That empty class is not a declaration to check: the user's own
    process checked the real one when it was created.
    """
    frame = sys._getframe(2)  # the frame that created the class
    for _ in range(4):  # types.new_class sits between it and cloudpickle
        if frame is None:
            return False
        if frame.f_code.co_name == "_make_skeleton_class" and "cloudpickle" in frame.f_globals.get(
            "__name__", ""
        ):
            return True
        frame = frame.f_back
    return False


def _overrides(cls: type, name: str) -> bool:
    return getattr(cls, name) is not getattr(Machine, name)


def _check_definition(cls: type[Machine]) -> MachineSpec:
    """Check a machine class once, when it is created, and describe it."""
    name = cls.__qualname__
    if not _overrides(cls, "transition"):
        raise DefinitionError(
            f"{name} does not define transition(self, key, values, symbol, time); "
            f"define it, or declare the class with `class {cls.__name__}(..., abstract=True)` "
            f"if it is a base for other machines"
        )
    for hook, params in _SIGNATURES.items():
        method = getattr(cls, hook)
        if not callable(method):
            raise DefinitionError(f"{name}.{hook} must be a method, not {method!r}")
        if _overrides(cls, hook):
            _check_signature(name, hook, method, params)
    if _overrides(cls, "deadline") != _overrides(cls, "on_deadline"):
        given, missing = (
            ("deadline", "on_deadline") if _overrides(cls, "deadline") else ("on_deadline", "deadline")
        )
        raise DefinitionError(
            f"{name} defines {given} but not {missing}; a machine with deadlines needs both "
            f"(deadline says when to wake, on_deadline what to do then)"
        )
    return MachineSpec(
        name=name,
        has_initial_values=_overrides(cls, "initial_values"),
        validates_symbols=_overrides(cls, "validate_symbol"),
        reduces_same_time=_overrides(cls, "reduce_same_time"),
        has_deadlines=_overrides(cls, "deadline"),
        has_own_step=_overrides(cls, "advance_key"),
    )


def _check_signature(name: str, hook: str, method: Any, params: tuple[str, ...]) -> None:
    wanted = f"{hook}(self, {', '.join(params)})"
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return
    try:
        signature.bind(None, *params)
    except TypeError as exc:
        raise DefinitionError(
            f"{name}.{hook} must accept {wanted}; it is declared as {hook}{signature} ({exc})"
        ) from None
