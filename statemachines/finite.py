"""Finite machines declared on the class: states and labelled transitions.

A :class:`FiniteMachine` subclass declares its states as class attributes and its
transitions with ``source.to(target, on=...)``; it is an ordinary machine (its
values are the key's current states) and draws itself::

    class Door(FiniteMachine):
        closed = State(initial=True)
        opened = State()
        locked = State(final=True)

        open = closed.to(opened, on="open")
        close = opened.to(closed, on="close")
        lock = closed.to(locked, on="lock", guard=lambda key, symbol, time: key != "exit")

    events (symbol)   values after
    open              {opened}
    lock              {opened}      (no transition for "lock" from opened: stays)
    close             {closed}
    lock              {locked}

A symbol with no transition from the current state leaves it there (with
``strict = True`` on the class, such an event is rejected instead). When several
transitions from one state accept a symbol, the key moves to all their targets (a
non-deterministic machine): its values are then several states.

Checked when the class is created: exactly one initial state, every transition
between declared states, every state reachable from the initial one. A subclass
inherits its parent's states and transitions and may add or replace them (by
attribute name), and draws its own diagram.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from statemachines.diagram import Diagram, Edge, Node
from statemachines.errors import DefinitionError
from statemachines.machine import Machine

__all__ = ["FiniteMachine", "State", "Transition"]

Guard = Callable[[Any, Any, Any], bool]


class State:
    """A declared state; its name is the class attribute it is assigned to."""

    def __init__(self, *, initial: bool = False, final: bool = False, label: str | None = None) -> None:
        self.initial = initial
        self.final = final
        self.label = label
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.name:
            self.name = name

    def to(self, target: State, *, on: Any, guard: Guard | None = None, label: str | None = None) -> Transition:
        """A transition from this state to ``target`` on the symbol ``on`` (or any of a tuple)."""
        if not isinstance(target, State):
            raise DefinitionError(f"{self.name or 'a state'}.to() needs a State, got {target!r}")
        symbols = on if isinstance(on, tuple) else (on,)
        if guard is not None and not callable(guard):
            raise DefinitionError(f"a guard is a function guard(key, symbol, time), got {guard!r}")
        return Transition(self, target, symbols, guard, label)

    def __repr__(self) -> str:
        return f"State({self.name!r})"


@attrs.frozen(eq=False)
class Transition:
    """``source -> target`` when the symbol is one of ``on`` and ``guard`` allows it."""

    source: State
    target: State
    on: tuple[Any, ...]
    guard: Guard | None = None
    label: str | None = None

    def text(self) -> str:
        """The edge label: the symbols, the guard's name in brackets."""
        if self.label:
            return self.label
        words = " | ".join(str(s) for s in self.on)
        if self.guard is not None:
            name = getattr(self.guard, "__name__", "guard")
            words += f" [{'guard' if name == '<lambda>' else name}]"
        return words


class FiniteMachine(Machine, abstract=True):
    """Base class of declared finite machines; see the module documentation."""

    strict: ClassVar[bool] = False
    states: ClassVar[dict[str, State]]
    transitions: ClassVar[dict[str, Transition]]
    initial: ClassVar[State]
    _by_source: ClassVar[dict[str, list[Transition]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        _collect(cls)
        super().__init_subclass__(**kwargs)

    def initial_values(self, key: Any) -> frozenset[Any]:
        return frozenset((self.initial.name,))

    def transition(self, key: Any, values: frozenset[Any], symbol: Any, time: Any) -> frozenset[Any]:
        after: set[str] = set()
        for state in values:
            targets = self._targets(state, key, symbol, time)
            if targets:
                after.update(targets)
            elif self.strict:
                raise ValueError(f"no transition from {state!r} on {symbol!r}")
            else:
                after.add(state)
        return frozenset(after)

    def _targets(self, state: str, key: Any, symbol: Any, time: Any) -> list[str]:
        return [
            t.target.name
            for t in self._by_source.get(state, ())
            if symbol in t.on and (t.guard is None or t.guard(key, symbol, time))
        ]

    def diagram(self) -> Diagram:
        """The declared states and transitions."""
        nodes = tuple(
            Node(s.name, s.label or s.name, initial=s is self.initial, final=s.final)
            for s in self.states.values()
        )
        edges = tuple(Edge(t.source.name, t.target.name, t.text()) for t in self.transitions.values())
        notes = ("strict: a symbol without a transition is rejected",) if self.strict else ()
        return Diagram(type(self).__name__, nodes, edges, notes)


def _collect(cls: type[FiniteMachine]) -> None:
    """Gather states and transitions over the class hierarchy, then check them."""
    states: dict[str, State] = {}
    transitions: dict[str, Transition] = {}
    for klass in reversed(cls.__mro__):
        for name, item in vars(klass).items():
            if isinstance(item, State) and item.name == name:  # not an alias such as ``initial``
                states[name] = item
            elif isinstance(item, Transition):
                transitions[name] = item
    name = cls.__qualname__
    initial = [s for s in states.values() if s.initial]
    if len(initial) != 1:
        found = ", ".join(s.name for s in initial) or "none"
        raise DefinitionError(f"{name} needs exactly one State(initial=True); found {found}")
    declared = {id(s) for s in states.values()}
    for label, t in transitions.items():
        for end in (t.source, t.target):
            if id(end) not in declared:
                raise DefinitionError(
                    f"{name}.{label} goes {t.source.name or '?'} -> {t.target.name or '?'}, but "
                    f"{end!r} is not a state declared on {name}"
                )
    reached, frontier = {initial[0].name}, [initial[0].name]
    while frontier:
        here = frontier.pop()
        for t in transitions.values():
            if t.source.name == here and t.target.name not in reached:
                reached.add(t.target.name)
                frontier.append(t.target.name)
    unreachable = [s for s in states if s not in reached]
    if unreachable:
        raise DefinitionError(
            f"{name}: state(s) {', '.join(unreachable)} cannot be reached from the initial "
            f"state {initial[0].name}; add a transition to them or remove them"
        )
    cls.states, cls.transitions, cls.initial = states, transitions, initial[0]
    by_source: dict[str, list[Transition]] = {}
    for t in transitions.values():
        by_source.setdefault(t.source.name, []).append(t)
    cls._by_source = by_source
