"""Patterns as data: a pattern of SQL conditions to JSON and back, exactly."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError, run_local
from statemachines.library import Detector, Pattern
from statemachines.library.pattern import Step
from tests.test_expressions import Login

SQL = ["kind = 'fail'", "kind = 'ok'", "amount > 5", "kind IS NULL", "amount BETWEEN 1 AND 20"]
# the same conditions as Python functions, reading fields by position: on a symbol
# that is not a login the ``amount`` ones may raise TypeError
FUNCTIONS = [
    lambda e: e[0] == "fail",
    lambda e: e[0] == "ok",
    lambda e: e[1] is not None and e[1] > 5,
    lambda e: e[0] is None,
    lambda e: e[1] is not None and 1 <= e[1] <= 20,
]


@st.composite
def patterns(draw, raising: bool = False, functions: bool = False):
    """Random patterns built with the fluent methods, every condition SQL, or with
    ``functions`` the same as Python functions (a call the pattern refuses, such as
    ``until`` on a bounded loop, is left out; patterns refused as a whole by
    ``compiled`` are skipped); ``raising``: some skip to a step with
    ``raise_on_miss``, which may stop a run."""
    conditions = FUNCTIONS if functions else SQL
    names = iter(f"s{i}" for i in range(100))
    skip = draw(st.sampled_from(["no_skip", "skip_to_next", "skip_past_last_event", "skip_to_first", "skip_to_last"]))
    n = draw(st.integers(1, 4))
    first_name = next(names)
    skip_step = first_name if skip in ("skip_to_first", "skip_to_last") else None
    raise_on_miss = raising and skip_step is not None and draw(st.booleans())  # may stop a run: only where asked
    pattern = Pattern.begin(first_name, skip, skip_step, raise_on_miss=raise_on_miss)
    for i in range(n):
        group = i > 0 and draw(st.integers(0, 3)) == 0
        if i > 0:
            if draw(st.booleans()) and draw(st.booleans()):
                negate = draw(st.sampled_from([Pattern.not_next, Pattern.not_followed_by]))
                pattern = attempt(pattern, negated, negate, next(names), draw(st.sampled_from(conditions)))
            then = draw(st.sampled_from([pattern.next, pattern.followed_by, pattern.followed_by_any]))
            pattern = then(draw(groups(names, conditions)) if group else next(names))
        if draw(st.booleans()) and not group:
            pattern = pattern.where(draw(st.sampled_from(conditions)))
            if draw(st.booleans()):
                pattern = pattern.or_where(draw(st.sampled_from(conditions)))
        before = pattern.steps[-2] if len(pattern.steps) > 1 else None
        gapped = isinstance(before, Step) and not (before.loops or before.optional) and draw(st.booleans())
        quantifier = "one" if gapped else draw(st.sampled_from(["one", "times", "range", "or_more", "one_or_more"]))
        if quantifier == "times":
            pattern = pattern.times(draw(st.integers(1, 3)))
        elif quantifier == "range":
            low = draw(st.integers(1, 2))
            pattern = pattern.times(low, low + draw(st.integers(0, 2)))
        elif quantifier == "or_more":
            pattern = pattern.times_or_more(draw(st.integers(1, 3)))
        elif quantifier == "one_or_more":
            pattern = pattern.one_or_more()
        if gapped:  # within(d, previous_and_current) between two steps of one event each
            pattern = attempt(pattern, Pattern.within, draw(st.sampled_from([2, 5])), "previous_and_current")
        elif draw(st.booleans()):
            pattern = attempt(pattern, Pattern.optional)
        if pattern.steps[-1].loops:
            for change in ("consecutive", "allow_combinations", "greedy"):
                if draw(st.booleans()):
                    pattern = attempt(pattern, getattr(Pattern, change))
            if draw(st.booleans()):
                pattern = attempt(pattern, Pattern.until, draw(st.sampled_from(conditions)))
    if draw(st.booleans()):
        trailing = draw(st.sampled_from([Pattern.not_followed_by, Pattern.not_next]))
        pattern = attempt(pattern, negated, trailing, next(names), draw(st.sampled_from(conditions)))
        if draw(st.booleans()):
            pattern = attempt(pattern, Pattern.within, draw(st.sampled_from([2, 5])), "previous_and_current")
    within = draw(st.sampled_from([None, 10, 2.5, datetime.timedelta(seconds=3)]))
    if within is not None or (pattern._pending and pattern._pending[-1].kind == "not_followed_by" and pattern._pending[-1].gap is None):
        pattern = pattern.within(within if within is not None else 10)
    try:
        return pattern.compiled()
    except DefinitionError:
        return None


@st.composite
def groups(draw, names, conditions=SQL):
    """A group of one or two steps with ``conditions``, the second maybe looping."""
    group = Pattern.begin(next(names)).where(draw(st.sampled_from(conditions)))
    if draw(st.booleans()):
        then = draw(st.sampled_from([group.next, group.followed_by, group.followed_by_any]))
        group = then(next(names)).where(draw(st.sampled_from(conditions)))
        if draw(st.booleans()):
            group = group.one_or_more()
    return group


def attempt(pattern: Pattern, change, *args) -> Pattern:
    """``change(pattern, *args)``, or ``pattern`` if the change is refused."""
    try:
        return change(pattern, *args)
    except DefinitionError:
        return pattern


def negated(pattern: Pattern, negate, name: str, condition: str) -> Pattern:
    return negate(pattern, name).where(condition)


@settings(max_examples=200, deadline=None)
@given(patterns(raising=True))
def test_a_pattern_reads_back_from_its_json_equal(pattern):
    if pattern is None:
        return
    text = pattern.to_json()
    again = Pattern.from_json(text)
    assert again == pattern
    assert again.to_json() == text
    assert json.loads(text)["format"] == "statemachines.pattern/1"


def without_nulls(item):
    """A JSON document with every null key left out, as Spark's ``to_json`` writes a struct."""
    if isinstance(item, dict):
        return {key: without_nulls(value) for key, value in item.items() if value is not None}
    return [without_nulls(value) for value in item] if isinstance(item, list) else item


ELEMENT_KEYS = {"name", "group", "contiguity", "where", "min", "max", "optional", "inner", "greedy", "until", "guards", "within_previous"}


def with_every_key(item, keys=("format", "steps", "trailing", "within", "skip", "skip_step", "raise_on_miss")):
    """A JSON document with each object holding every key an object in its place may
    have, null where it has none: a struct column read from a file of documents."""
    item = {**dict.fromkeys(keys), **item}
    for name, inner in (("steps", ELEMENT_KEYS), ("group", ELEMENT_KEYS), ("guards", {"name", "kind", "where", "within_previous"}), ("trailing", {"name", "kind", "where", "within_previous"})):
        if item.get(name) is not None:
            item[name] = [with_every_key(element, inner) for element in item[name]]
    return item


@settings(max_examples=100, deadline=None)
@given(patterns(raising=True), st.sampled_from([without_nulls, with_every_key]))
def test_a_document_reads_the_same_with_its_null_keys_left_out_or_every_key_null(pattern, form):
    """Absent and null read the same, so a document comes back equal from the forms
    Spark gives it (see tests/test_spark_rules.py for the real ones)."""
    if pattern is None:
        return
    document = json.loads(pattern.to_json())
    assert form(document) != document or form is without_nulls  # the form changes something
    assert Pattern.from_json(json.dumps(form(document))) == pattern


def test_a_null_where_a_key_needs_a_value_is_that_key_missing():
    document = json.loads(Pattern.begin("a").where("kind = 'ok'").to_json())
    document["steps"][0]["min"] = None
    with pytest.raises(DefinitionError, match="a step 'a': missing min"):
        Pattern.from_json(json.dumps(document))
    document["steps"][0]["min"], document["skip"] = 1, None
    with pytest.raises(DefinitionError, match="^the pattern document: missing skip$"):
        Pattern.from_json(json.dumps(document))


def test_a_pattern_read_from_json_detects_what_the_original_detects():
    pattern = (
        Pattern.begin("fail").where("kind = 'fail'").times(3)
        .followed_by("ok").where("kind = 'ok' AND amount > 10")
        .within(10)
    )
    events = [("u", Login(k, a), t) for t, (k, a) in enumerate([("fail", 1), ("fail", 2), ("view", 3), ("fail", 4), ("ok", 50)])]
    assert run_local(Detector(Pattern.from_json(pattern.to_json())), events).updates == run_local(
        Detector(pattern), events
    ).updates


def test_a_gap_is_written_where_it_is_given():
    """``within(d, "previous_and_current")`` on a step or a trailing negation is its
    ``within_previous``; steps without one have none."""
    pattern = (
        Pattern.begin("a").where("kind = 'fail'").followed_by("b").where("kind = 'ok'")
        .within(datetime.timedelta(seconds=2), "previous_and_current")
        .not_followed_by("n").where("kind = 'view'").within(datetime.timedelta(seconds=1), "previous_and_current")
    )
    document = json.loads(pattern.to_json())
    assert ["within_previous" in step for step in document["steps"]] == [False, True]
    assert document["steps"][1]["within_previous"] == {"microseconds": 2_000_000}
    assert document["trailing"][0]["within_previous"] == {"microseconds": 1_000_000}
    assert document["within"] is None
    assert Pattern.from_json(pattern.to_json()) == pattern.compiled()


def test_a_pattern_with_a_function_condition_is_not_data():
    with pytest.raises(DefinitionError, match="function condition"):
        Pattern.begin("a").where(lambda e: e.kind == "fail").to_json()


def _document():
    return json.loads(Pattern.begin("a").where("kind = 'fail'").followed_by("b").within(5).to_json())


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda d: d.update(format="statemachines.pattern/9"), "unknown pattern format"),
        (lambda d: d["steps"][0].update(colour="red"), "unknown colour"),
        (lambda d: d["steps"][1].pop("min"), "missing min"),
        (lambda d: d["steps"][1].update(contiguity="sometimes"), "contiguity must be one of"),
        (lambda d: d["steps"][1].update(min=0), "min must be 1 or more"),
        (lambda d: d["steps"][1].update(min=-1), "times needs"),
        (lambda d: d["steps"][0].update(where="rand() > 1"), "do not support"),
        (lambda d: d["steps"][1].update(name="a"), "used twice"),
        (lambda d: d.update(within="5 minutes"), "within must be"),
        (lambda d: d.update(steps=[]), "non-empty list of steps"),
        (lambda d: d.update(raise_on_miss="yes"), "raise_on_miss is true or false"),
        (lambda d: d.update(raise_on_miss=True), "raise_on_miss applies to skip_to_first"),
    ],
)
def test_a_document_that_describes_no_valid_pattern_is_refused_saying_why(change, says):
    document = _document()
    change(document)
    with pytest.raises(DefinitionError, match=says):
        Pattern.from_json(json.dumps(document))


def test_text_that_is_not_json_is_refused():
    with pytest.raises(DefinitionError, match="must be JSON"):
        Pattern.from_json("{steps: ")
