"""Patterns as plain data: a pattern of expression conditions to JSON and back.

A pattern whose conditions are all SQL expressions (see
:mod:`statemachines.library.expressions`) is data: it can be stored, reviewed and
versioned as JSON, and read back equal (``Pattern.from_json(p.to_json()) ==
p.compiled()``). The document::

    {"format": "statemachines.pattern/1",
     "steps": [{"name": "fail", "contiguity": "relaxed", "where": "kind = 'fail'",
                "min": 3, "max": 3, "optional": false, "inner": "relaxed",
                "greedy": false, "until": null, "guards": []},
               {"name": "ok", "contiguity": "relaxed", "where": "kind = 'ok'", ...}],
     "trailing": [],
     "within": 10,
     "skip": "no_skip", "skip_step": null}

``contiguity`` is the step's to the one before it (``strict`` for ``next``,
``relaxed`` for ``followed_by``, ``any`` for ``followed_by_any``), ``inner`` between
a loop's events (``strict``: ``consecutive()``, ``any``: ``allow_combinations()``);
``max`` is ``null`` for no upper bound; ``where`` and ``until`` are SQL text or
``null`` (every event); ``guards`` are the negations before the step and
``trailing`` those at the end, each ``{"name", "kind": "not_next" |
"not_followed_by", "where"}``; ``within`` is a number, ``{"microseconds": n}`` for a
``timedelta``, or ``null``; ``"within_previous"``, optional on a step or a trailing
negation, is its ``within(d, "previous_and_current")``, written as ``within``;
``"raise_on_miss": true``, optional, is ``Pattern.begin``'s. A group (a pattern taken as a step) is ``{"group":
[steps...], "contiguity", "min", "max", "optional", "inner", "guards"}``: its steps
as above, its quantifier as a step's. Reading builds the pattern with the fluent methods, so a
document describing a pattern they would refuse is refused with their message.

A key whose value is ``null`` may be left out: absent and ``null`` read the same
(``where``, ``until``, ``max``, ``within``, ``skip_step``, and the optional
``within_previous`` and ``raise_on_miss``). So a document comes back from the forms
Spark gives it: a struct column's ``to_json`` leaves its null fields out, and a
struct column read from a file of several documents holds every key any of them
has, ``null`` where one lacks it (a step's ``group``, a group's ``name``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

from statemachines.errors import DefinitionError
from statemachines.library.expressions import Expression
from statemachines.library.pattern import Contiguity, Group, Negation, Pattern, Step, _always

__all__ = ["FORMAT", "pattern_from_json", "pattern_to_json"]

FORMAT = "statemachines.pattern/1"
# each kind of object's keys: those it must have, and those that may be null (or left out)
_STEP_KEYS = {"name", "contiguity", "min", "optional", "inner", "greedy", "guards"}, {"where", "max", "until", "within_previous"}
_GROUP_KEYS = {"group", "contiguity", "min", "optional", "inner", "guards"}, {"max"}
_NEGATION_KEYS = {"name", "kind"}, {"where", "within_previous"}
_TOP_KEYS = {"format", "steps", "trailing", "skip"}, {"within", "skip_step", "raise_on_miss"}


def pattern_to_json(pattern: Pattern) -> str:
    """``pattern`` (checked as a whole) as a JSON document; every condition must be SQL."""
    pattern = pattern.compiled()
    document = {
        "format": FORMAT,
        "steps": [_element(step) for step in pattern.steps],
        "trailing": [_negation(g) for g in pattern.trailing],
        "within": _window(pattern.window),
        "skip": pattern.skip.value,
        "skip_step": pattern.skip_step,
        **({"raise_on_miss": True} if pattern.raise_on_miss else {}),
    }
    return json.dumps(document, indent=2)


def pattern_from_json(text: str | bytes) -> Pattern:
    """The pattern a :func:`pattern_to_json` document describes."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise DefinitionError(f"a pattern document must be JSON: {error}") from None
    document = _keys(document, _TOP_KEYS, "the pattern document")
    if document["format"] != FORMAT:
        raise DefinitionError(f"unknown pattern format {document['format']!r}; this version reads {FORMAT!r}")
    raise_on_miss = document.get("raise_on_miss", False)
    if type(raise_on_miss) is not bool:
        raise DefinitionError(f"raise_on_miss is true or false, got {raise_on_miss!r}")

    def begin(first: str | Pattern) -> Pattern:
        return Pattern.begin(first, document["skip"], document.get("skip_step"), raise_on_miss=raise_on_miss)

    pattern = _sequence(document["steps"], begin)
    for guard in document["trailing"]:
        pattern = _negated(pattern, guard)
    if document.get("within") is not None:
        pattern = pattern.within(_duration(document["within"]))
    return pattern.compiled()


# -- writing -----------------------------------------------------------------------------------


def _element(element: Step | Group) -> dict[str, Any]:
    if isinstance(element, Group):
        return {
            "group": [_element(inner) for inner in element.pattern.steps],
            "contiguity": element.contiguity.value,
            "min": element.min,
            "max": element.max,
            "optional": element.optional,
            "inner": element.inner.value,
            "guards": [_negation(g) for g in element.guards],
        }
    return _step(element)


def _step(step: Step) -> dict[str, Any]:
    return _with_gap(step.gap, {
        "name": step.name,
        "contiguity": step.contiguity.value,
        "where": _sql(step.condition, f"step {step.name!r}"),
        "min": step.min,
        "max": step.max,
        "optional": step.optional,
        "inner": step.inner.value,
        "greedy": step.greedy,
        "until": None if step.until is None else _sql(step.until, f"until of step {step.name!r}"),
        "guards": [_negation(g) for g in step.guards],
    })


def _negation(negation: Negation) -> dict[str, Any]:
    where = _sql(negation.condition, repr(negation.name))
    return _with_gap(negation.gap, {"name": negation.name, "kind": negation.kind, "where": where})


def _with_gap(gap: Any, item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with its ``within_previous``, written only when there is one."""
    return item if gap is None else {**item, "within_previous": _window(gap)}


def _sql(condition: Any, where: str) -> str | None:
    if condition is _always:
        return None
    if isinstance(condition, Expression):
        return condition.sql
    raise DefinitionError(
        f"{where} has a function condition ({condition!r}); only patterns whose conditions are "
        f"SQL expressions are data"
    )


def _window(window: Any) -> Any:
    if window is None or type(window) in (int, float):
        return window
    if isinstance(window, datetime.timedelta):
        return {"microseconds": window // datetime.timedelta(microseconds=1)}
    raise DefinitionError(f"within({window!r}) cannot be written as JSON: give a number or a timedelta")


# -- reading -----------------------------------------------------------------------------------


def _keys(item: Any, keys: tuple[set[str], set[str]], what: str) -> dict[str, Any]:
    """``item`` without its null keys, checked to have the ``keys`` it must have
    and no others."""
    if not isinstance(item, dict):
        raise DefinitionError(f"{what} must be a JSON object, got {item!r}")
    required, nullable = keys
    item = {key: value for key, value in item.items() if value is not None}
    missing, unknown = required - item.keys(), item.keys() - required - nullable
    if missing or unknown:
        named = f" {item['name']!r}" if "name" in item else ""
        raise DefinitionError(
            f"{what}{named}: "
            + "; ".join(
                part for part in (
                    f"missing {', '.join(sorted(missing))}" if missing else "",
                    f"unknown {', '.join(sorted(unknown))}" if unknown else "",
                ) if part
            )
        )
    return item


def _sequence(steps: Any, begin: Callable[[str | Pattern], Pattern]) -> Pattern:
    """The pattern of a document's list of steps (and groups), begun with ``begin``."""
    if not isinstance(steps, list) or not steps:
        raise DefinitionError("a pattern document needs a non-empty list of steps (a group too)")
    steps = [_keys(step, _GROUP_KEYS if _is_group(step) else _STEP_KEYS, "a step") for step in steps]
    first = steps[0]
    if first["guards"]:
        raise DefinitionError(f"the first step {_label(first)!r} cannot have negations before it")
    pattern = _shaped(begin(_target(first)), first)
    for step in steps[1:]:
        for guard in step["guards"]:
            pattern = _negated(pattern, guard)
        then = {"strict": pattern.next, "relaxed": pattern.followed_by, "any": pattern.followed_by_any}
        if step["contiguity"] not in then:
            raise DefinitionError(f"step {_label(step)!r}: contiguity must be one of {', '.join(then)}")
        pattern = _shaped(then[step["contiguity"]](_target(step)), step)
    return pattern


def _is_group(element: Any) -> bool:
    return isinstance(element, dict) and element.get("group") is not None


def _target(step: dict[str, Any]) -> str | Pattern:
    """A step's name, or a group's pattern."""
    return _sequence(step["group"], Pattern.begin) if _is_group(step) else step["name"]


def _label(step: dict[str, Any]) -> str:
    return step.get("name") or "group"


def _shaped(pattern: Pattern, step: dict[str, Any]) -> Pattern:
    """``pattern`` with its last step (or group) given the document's conditions and quantifier."""
    name = _label(step)
    if step.get("where") is not None:
        pattern = pattern.where(_text(step["where"], name))
    low, high = step["min"], step.get("max")
    if low == 0:  # times(0, m) is optional: the document says that with "optional"
        raise DefinitionError(f"step {name!r}: min must be 1 or more; optional says whether it may take no event")
    if (low, high) != (1, 1):
        pattern = pattern.times_or_more(low) if high is None else pattern.times(low, high)
    if step["optional"]:
        pattern = pattern.optional()
    inner = Contiguity(step["inner"]) if step["inner"] in set(Contiguity) else None
    if inner is None:
        raise DefinitionError(f"step {name!r}: inner must be one of {', '.join(Contiguity)}")
    if inner == Contiguity.STRICT:
        pattern = pattern.consecutive()
    elif inner == Contiguity.ANY:
        pattern = pattern.allow_combinations()
    if step.get("greedy"):
        pattern = pattern.greedy()
    if step.get("until") is not None:
        pattern = pattern.until(_text(step["until"], name))
    return _gapped(pattern, step)


def _gapped(pattern: Pattern, item: dict[str, Any]) -> Pattern:
    gap = item.get("within_previous")
    return pattern if gap is None else pattern.within(_duration(gap), "previous_and_current")


def _negated(pattern: Pattern, guard: Any) -> Pattern:
    guard = _keys(guard, _NEGATION_KEYS, "a negation")
    kinds = {"not_next": pattern.not_next, "not_followed_by": pattern.not_followed_by}
    if guard["kind"] not in kinds:
        raise DefinitionError(f"negation {guard['name']!r}: kind must be one of {', '.join(kinds)}")
    pattern = kinds[guard["kind"]](guard["name"])
    pattern = pattern if guard.get("where") is None else pattern.where(_text(guard["where"], guard["name"]))
    return _gapped(pattern, guard)


def _text(sql: Any, name: str) -> str:
    if not isinstance(sql, str):
        raise DefinitionError(f"step {name!r}: a condition must be SQL text, got {sql!r}")
    return sql


def _duration(within: Any) -> Any:
    if isinstance(within, dict) and within.keys() == {"microseconds"} and type(within["microseconds"]) is int:
        return datetime.timedelta(microseconds=within["microseconds"])
    if type(within) in (int, float):
        return within
    raise DefinitionError(f"within must be a number or {{\"microseconds\": n}}, got {within!r}")
