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
- ``is_finding(value)``: declares *findings*, values a key reports once and does not
  hold (a detector's matches). ``transition`` and ``on_deadline`` may then return
  ``Emit(values, found)``: the key holds ``values``, and each finding in ``found`` is
  added to the output at that time, for good::

      values before | event | transition returns       | updates at t
      {p}           | e     | Emit({q}, [m])           | (k, p) -1, (k, q) +1, (k, m) +1

- ``insert_marks(key, value)`` and ``with_waterline(waterline)``: rules that read
  what the whole collection accepted at earlier times (see
  :mod:`statemachines.waterline`). Define both or neither. ``forgets(key, high)``
  says a key's later commands are all refused, so a runtime may drop its state.
  ``guess_marks(key, symbol)``: the marks an event would insert if the machine
  accepted it (``None``: it inserts nothing), which a runtime takes as its first
  guess of the waterline: when the events are mostly accepted, one run settles it
  instead of two or three. Only the number of runs depends on it, never the result.
- ``value_type(symbol_type, time_type)``: the Arrow type of the machine's values,
  given its input's Arrow types (default ``None``: the symbol's type). A class that
  sets ``values_fit_own_type = True`` builds every value and finding only from its
  input's symbols and times and its own constants, so they fit that type by
  construction: a runtime whose output column has that type skips checking each new
  value (a detector's partial matches are large, and checking them cost more than
  making them); the local runtime checks the event's symbol and time instead
  (:class:`~statemachines.core.OwnTypeCheck`), since its input has no fixed types.
- ``prepare_symbols(symbols, symbol_type)``: called by every runtime with the
  symbols of the events it is about to apply (a batch, before their transitions, as a
  sequence the local runtime gathers only when it is first read), and
  their Arrow type where the runtime has one (``None`` otherwise), so the machine can
  work out what it needs of them in bulk (a detector evaluates its expression
  conditions here). ``transition`` must give the same result whether or not it was
  called: it is an optimisation, never a channel.
- ``tabulated = True`` on the class declares that ``transition`` reads only
  ``values`` and ``symbol`` (never ``key`` nor ``time``), so a runtime may ask it
  once per distinct ``(values, symbol)`` pair and step keys in bulk (see
  :mod:`statemachines.tabulated`). The class check refuses it beside a hook that
  reads the key or the time (``initial_values``, deadlines, findings, a waterline,
  ``position``) and for a ``transition`` whose code reads ``key`` or ``time``.
- ``advance_keys(work, upto, check)``: run many keys' final events at once, giving
  for each ``(key, values, events)`` of ``work`` exactly what
  :func:`~statemachines.core.advance_key` gives (a detector steps all keys together
  in arrays). An optimisation, never a channel; a runtime that writes update
  columns still runs key by key.
- ``diagram()``: the machine's own drawing (default ``None``: explore it).
- ``settings()`` and ``resumed(settings, frontier)``: a machine whose behaviour at
  a time is data that may change between runs (a rule detector's book). A runtime
  writing into an arrangement keeps ``settings()`` (JSON-able) with the output; a
  later run continuing that output from its ``frontier`` runs
  ``machine.resumed(kept, frontier)``: the machine to use, which agrees with the
  kept settings below the frontier (or raises ``DefinitionError`` saying why it
  cannot). Define both or neither.

A transition refuses an event by raising :class:`~statemachines.events.Refused` with
a reason of its own (a ``StrEnum`` member) and a detail; any other exception rejects
the event as ``transition_failed``. Either way the key's values stay as they were.
If ``transition`` takes a parameter named ``position``, it is given the event's
place among the events the key applied at its time (0, 1, ...), which tells apart
equal events at one time.

The class is checked once, when it is created: a wrong declaration raises
:class:`~statemachines.errors.DefinitionError` then, not in the middle of a run.
Machines are plain objects; keep them picklable (runtimes ship them to workers).
Intermediate base classes that do not define ``transition`` pass ``abstract=True``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from statemachines.errors import DefinitionError
from statemachines.events import Event

if TYPE_CHECKING:
    from statemachines.diagram import Diagram
    from statemachines.waterline import Mark, Waterline

__all__ = ["Emit", "Machine", "MachineSpec"]

_EMPTY: frozenset[Any] = frozenset()

# hook name -> the parameters it must take after ``self``
_SIGNATURES = {
    "transition": ("key", "values", "symbol", "time"),
    "initial_values": ("key",),
    "validate_symbol": ("symbol",),
    "reduce_same_time": ("first", "second"),
    "deadline": ("key", "values"),
    "on_deadline": ("key", "values", "time"),
    "is_finding": ("value",),
    "insert_marks": ("key", "value"),
    "with_waterline": ("waterline",),
    "forgets": ("key", "high"),
    "guess_marks": ("key", "symbol"),
    "value_type": ("symbol_type", "time_type"),
    "prepare_symbols": ("symbols", "symbol_type"),
    "diagram": (),
    "settings": (),
    "resumed": ("settings", "frontier"),
}

# hooks that only make sense together: defining one of a pair means defining both
_PAIRS = (
    ("deadline", "on_deadline", "deadline says when to wake, on_deadline what to do then"),
    ("insert_marks", "with_waterline", "insert_marks gives the marks, with_waterline reads them"),
    ("settings", "resumed", "settings are kept with the output, resumed reads them back"),
)


SETTINGS_NOTE = "machine_settings"  # the arrangement note holding a machine's settings()


def resume_machine(machine: Machine, notes: dict[str, Any], frontier: Any) -> Machine:
    """``machine`` as a run continuing an output (its ``notes``) from ``frontier`` runs it."""
    kept = notes.get(SETTINGS_NOTE)
    if not machine.spec.keeps_settings or kept is None or frontier is None:
        return machine
    return machine.resumed(kept, frontier)


def settings_note(machine: Machine) -> dict[str, Any]:
    """The note to keep ``machine``'s settings with its output (``{}``: none)."""
    settings = machine.settings() if machine.spec.keeps_settings else None
    return {} if settings is None else {SETTINGS_NOTE: settings}


class Emit(tuple):
    """What ``transition`` or ``on_deadline`` returns to report findings: the key's
    next values, and the findings it adds to the output for good (see ``is_finding``).
    """

    __slots__ = ()

    def __new__(cls, values: Iterable[Any], found: Iterable[Any] = ()) -> Emit:
        return tuple.__new__(cls, (frozenset(values), tuple(found)))

    @property
    def values(self) -> frozenset[Any]:
        return self[0]

    @property
    def found(self) -> tuple[Any, ...]:
        return self[1]


@attrs.frozen
class MachineSpec:
    """What the class check found out about a machine class (cached on the class)."""

    name: str
    has_initial_values: bool
    validates_symbols: bool
    reduces_same_time: bool
    has_deadlines: bool
    emits_findings: bool  # is_finding: some values are reported once, never held
    has_waterline: bool  # insert_marks and with_waterline: rules read earlier inserts
    forgets_keys: bool  # forgets: a runtime may drop the state of keys it names
    guesses_marks: bool  # guess_marks: the events give a first guess of the waterline
    declares_value_type: bool
    has_diagram: bool
    takes_position: bool  # transition accepts ``position``
    prepares_symbols: bool  # prepare_symbols: the runtime hands over each batch's symbols
    values_fit_own_type: bool  # new values need no check against value_type's type
    keeps_settings: bool  # settings and resumed: kept with the output, read back to continue
    tabulated: bool  # transition reads only values and symbol: it may be tabulated
    advances_keys: bool  # advance_keys: many keys are run at once


class Machine:
    """Base class of every machine; see the module documentation."""

    spec: ClassVar[MachineSpec]
    values_fit_own_type: ClassVar[bool] = False  # see value_type in the module documentation
    tabulated: ClassVar[bool] = False  # see the module documentation

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

    def is_finding(self, value: Any) -> bool:
        """True for a value the key reports once and does not hold (default: none are)."""
        return False

    def insert_marks(self, key: Any, value: Any) -> Mark:
        """The mark an insert of ``(key, value)`` contributes to later times' waterline."""
        raise NotImplementedError  # pragma: no cover - only called when overridden

    def with_waterline(self, waterline: Waterline) -> Machine:
        """This machine, reading its high marks from ``waterline``."""
        raise NotImplementedError  # pragma: no cover - only called when overridden

    def forgets(self, key: Any, high: Mark | None) -> bool:
        """True if every later event of ``key`` is refused, given the high mark ``high``."""
        return False

    def guess_marks(self, key: Any, symbol: Any) -> Mark | None:
        """The marks an event would insert if accepted: a first guess of the waterline."""
        return None

    def value_type(self, symbol_type: Any, time_type: Any) -> Any:
        """The Arrow type of the values, given the symbol's and time's (``None``: the symbol's)."""
        return None

    def prepare_symbols(self, symbols: Sequence[Any], symbol_type: Any) -> None:
        """Look at a batch of symbols before their transitions run (default: nothing)."""

    def advance_keys(
        self, work: Iterable[tuple[Any, frozenset[Any], list[Event]]], upto: Any, check: Any
    ) -> Iterable[tuple[Any, frozenset[Any], tuple[frozenset[Any], list[Any], list[Any]]]]:
        """``(key, values before, advance_key's outcome)`` for each key of ``work``."""
        raise NotImplementedError  # pragma: no cover - only called when overridden

    def diagram(self) -> Diagram | None:
        """The machine's own diagram (default ``None``: draw it by exploring)."""
        return None

    def settings(self) -> Any:
        """What a later run continuing this one's output must agree with (JSON-able)."""
        return None

    def resumed(self, settings: Any, frontier: Any) -> Machine:
        """The machine to continue output made with ``settings`` up to ``frontier``."""
        return self

    # -- plumbing -------------------------------------------------------------------

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
    frame: Any = sys._getframe(2)  # the frame that created the class
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
            if hook == "transition" and _accepts(method, "position"):
                params = (*params, "position")
            _check_signature(name, hook, method, params)
    for first, second, why in _PAIRS:
        if _overrides(cls, first) != _overrides(cls, second):
            given, missing = (first, second) if _overrides(cls, first) else (second, first)
            raise DefinitionError(
                f"{name} defines {given} but not {missing}; define both or neither ({why})"
            )
    for hook in ("forgets", "guess_marks"):
        if _overrides(cls, hook) and not _overrides(cls, "insert_marks"):
            raise DefinitionError(
                f"{name} defines {hook} but no waterline (insert_marks, with_waterline); "
                f"{hook} is about the waterline's marks"
            )
    if cls.values_fit_own_type and not _overrides(cls, "value_type"):
        raise DefinitionError(
            f"{name} sets values_fit_own_type but does not define value_type(symbol_type, time_type); "
            f"the values can only fit a type the machine declares"
        )
    if cls.tabulated:
        _check_tabulated(cls, name)
    return MachineSpec(
        name=name,
        has_initial_values=_overrides(cls, "initial_values"),
        validates_symbols=_overrides(cls, "validate_symbol"),
        reduces_same_time=_overrides(cls, "reduce_same_time"),
        has_deadlines=_overrides(cls, "deadline"),
        emits_findings=_overrides(cls, "is_finding"),
        has_waterline=_overrides(cls, "insert_marks"),
        forgets_keys=_overrides(cls, "forgets"),
        guesses_marks=_overrides(cls, "guess_marks"),
        declares_value_type=_overrides(cls, "value_type"),
        has_diagram=_overrides(cls, "diagram"),
        takes_position=_accepts(cls.transition, "position"),
        prepares_symbols=_overrides(cls, "prepare_symbols"),
        values_fit_own_type=bool(cls.values_fit_own_type),
        keeps_settings=_overrides(cls, "settings"),
        tabulated=bool(cls.tabulated),
        advances_keys=_overrides(cls, "advance_keys"),
    )


# hooks a tabulated machine cannot have: they read a key or a time, or report
# findings, none of which a table of (values, symbol) -> values keeps
_PER_KEY_HOOKS = ("initial_values", "deadline", "is_finding", "insert_marks", "forgets")


def _check_tabulated(cls: type[Machine], name: str) -> None:
    for hook in _PER_KEY_HOOKS:
        if _overrides(cls, hook):
            raise DefinitionError(
                f"{name} sets tabulated but defines {hook}; a tabulated machine's keys step "
                f"by their values and symbols alone, so drop one or the other"
            )
    if _accepts(cls.transition, "position"):
        raise DefinitionError(f"{name} sets tabulated but its transition takes position; drop one or the other")
    read = _reads(cls.transition, ("key", "time"))
    if read:
        raise DefinitionError(
            f"{name} sets tabulated but its transition reads {' and '.join(read)}; a tabulated "
            f"transition depends on values and symbol alone (it may be asked once per pair)"
        )


def _reads(function: Any, names: tuple[str, ...]) -> list[str]:
    """Which of the parameters ``names`` the code of ``function`` reads."""
    import dis

    code = getattr(function, "__code__", None)
    if code is None:  # pragma: no cover - not plain Python code: nothing to inspect
        return []
    loads: set[Any] = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE")):
            argval = instruction.argval  # a pair of names for LOAD_FAST_LOAD_FAST (3.13)
            loads.update(argval if isinstance(argval, tuple) else (argval,))
    return [name for name in names if name in loads]


def _accepts(method: Any, name: str) -> bool:
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


def _check_signature(name: str, hook: str, method: Any, params: tuple[str, ...]) -> None:
    wanted = f"{hook}({', '.join(('self', *params))})"
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
