"""Expression conditions: SQL over an event's fields, evaluated in bulk, equal to functions.

The model is SQL's three-valued logic written out by hand (``None`` is NULL); each
expression is generated with its model, so the two are built independently.
"""

from __future__ import annotations

import datetime
import math
import random
import re
from typing import NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError, run_local
from statemachines.library import Detector, Expression, Pattern, expressions, matches, timeouts
from statemachines.library.expressions import records_table


class Login(NamedTuple):
    kind: str | None
    amount: int | None


KINDS = ["fail", "ok", "view", None]
AMOUNTS = [None, 0, 5, 20, 150]

logins = st.builds(Login, st.sampled_from(KINDS), st.sampled_from(AMOUNTS))


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a):
    return None if a is None else not a


def _atoms():
    """``(sql, model)`` pairs, the model a three-valued function of a Login."""

    def cmp(field, op, literal, fn):
        def model(e, field=field):
            value = getattr(e, field)
            return None if value is None else fn(value, literal)

        text = f"'{literal}'" if isinstance(literal, str) else str(literal)
        return st.just((f"{field} {op} {text}", model))

    ops = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b}
    kind_cmps = [cmp("kind", op, k, fn) for op, fn in ops.items() if op in ("=", "<>") for k in ("fail", "ok")]
    amount_cmps = [cmp("amount", op, n, fn) for op, fn in ops.items() for n in (5, 20)]
    return st.one_of(
        *kind_cmps,
        *amount_cmps,
        st.just(("kind IS NULL", lambda e: e.kind is None)),
        st.just(("amount IS NOT NULL", lambda e: e.amount is not None)),
        st.just(("kind IN ('fail', 'view')", lambda e: None if e.kind is None else e.kind in ("fail", "view"))),
        st.just(("kind IN ('ok', NULL)", lambda e: True if e.kind == "ok" else None)),
        st.just(("amount BETWEEN 5 AND 20", lambda e: None if e.amount is None else 5 <= e.amount <= 20)),
        st.just(("kind LIKE 'f%'", lambda e: None if e.kind is None else e.kind.startswith("f"))),
        st.just(("kind NOT LIKE 'f%'", lambda e: None if e.kind is None else not e.kind.startswith("f"))),
        st.just(("amount * 2 > 30", lambda e: None if e.amount is None else e.amount * 2 > 30)),
        st.just(("amount <=> NULL", lambda e: e.amount is None)),
        st.just(("coalesce(amount, 0) = 0", lambda e: (e.amount or 0) == 0)),
    )


def _combine(children):
    def join(pair):
        (left, lm), (right, rm) = pair[1], pair[2]
        if pair[0] == "AND":
            return (f"({left}) AND ({right})", lambda e: _and(lm(e), rm(e)))
        return (f"({left}) OR ({right})", lambda e: _or(lm(e), rm(e)))

    def negate(child):
        text, model = child
        return (f"NOT ({text})", lambda e: _not(model(e)))

    return st.one_of(
        st.tuples(st.sampled_from(["AND", "OR"]), children, children).map(join),
        children.map(negate),
    )


conditions = st.recursive(_atoms(), _combine, max_leaves=5)


@settings(max_examples=150, deadline=None)
@given(conditions, st.lists(logins, min_size=1, max_size=30))
def test_an_expression_evaluates_as_sql_three_valued_logic_says(condition, events):
    sql, model = condition
    met = Expression(sql).evaluate(records_table(events, Login._fields, None)).to_pylist()
    assert met == [model(e) is True for e in events]


def _div(a, b):
    """Spark SQL's ``div`` of whole numbers (truncated toward zero), ``None`` for NULL."""
    if a is None or b is None:
        return None
    if b == 0:
        raise ZeroDivisionError
    return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)


# each operand written to be read only where Spark SQL reads it (Python's and / or skip the rest)
SKIPPED_OPERANDS = {
    "amount > 10 div amount": lambda e: None if e.amount is None else e.amount > _div(10, e.amount),
    "(10 div amount) > amount": lambda e: (lambda q: None if q is None else q > e.amount)(_div(10, e.amount)),
    "amount IN (0, 10 div amount)": lambda e: None if e.amount is None else e.amount == 0 or e.amount == _div(10, e.amount),
    "amount IN (10 div amount, 0)": lambda e: None if e.amount is None else e.amount == _div(10, e.amount) or e.amount == 0,
    "amount BETWEEN 1 AND 10 div amount": lambda e: None if e.amount is None else e.amount >= 1 and e.amount <= _div(10, e.amount),
    "amount - 10 div amount < 0": lambda e: None if e.amount is None else e.amount - _div(10, e.amount) < 0,
    "(10 div amount) div amount = 0": lambda e: None if e.amount is None else _div(_div(10, e.amount), e.amount) == 0,
    "concat(kind, 10 div amount) = 'ok2'": lambda e: None if e.kind is None or e.amount is None else f"{e.kind}{_div(10, e.amount)}" == "ok2",
}


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(SKIPPED_OPERANDS)), st.lists(logins, min_size=1, max_size=8))
def test_an_operand_is_read_only_where_spark_sql_reads_it(sql, events):
    """A comparison's or sum's second operand is not read where its first is NULL (a
    divisor, read first, where it is NULL), IN's items only until one equals,
    BETWEEN's upper bound only where the lower holds: dividing by zero there is no
    error. Where a row does read it, the whole batch fails (as Spark's query)."""
    model = SKIPPED_OPERANDS[sql]
    try:
        expected = [model(e) is True for e in events]
    except ZeroDivisionError:
        expected = "raises"
    table = records_table(events, Login._fields, None)
    try:
        met = Expression(sql).evaluate(table).to_pylist()
    except (ArithmeticError, ValueError):  # Arrow's "divide by zero" is a ValueError
        met = "raises"
    assert met == expected


class Typed(NamedTuple):
    kind: str
    amount: str | None  # as a CSV file gives it


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from([None, "5", " 20 ", "-30", "+12", "1.5", "lots", ""]), min_size=1, max_size=8))
def test_a_text_field_beside_a_number_is_read_as_that_number(amounts):
    """``amount > 10`` over text reads each text as a whole number, as Spark SQL casts
    it (trimmed); an event whose text is no whole number is rejected, saying so; the
    others are answered."""
    events = [(f"k{i}", Typed("ok", a), i) for i, a in enumerate(amounts)]
    result = run_local(Detector(Pattern.begin("big").where("amount > 10")), events)
    whole = {a: int(a) for a in amounts if a is not None and a.strip().lstrip("+-").isdigit()}
    assert sorted(m.key for m in matches(result.updates)) == sorted(k for k, e, _ in events if whole.get(e.amount, 0) > 10)
    refused = sorted(k for k, e, _ in events if e.amount is not None and e.amount not in whole)
    assert sorted(r.event.key for r in result.rejected) == refused
    assert all(r.reason == "condition_failed" and "is no int64" in r.detail for r in result.rejected)


class Measured(NamedTuple):
    code: str | None
    score: float | None


def _whole_or_none(text):
    text = text.strip()
    return int(text) if text.lstrip("+-").isdigit() else None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.builds(
    Measured,
    st.one_of(st.none(), st.integers(-200, 200).map(str), st.sampled_from([" 7 ", "1.5", "x", "", "+3"])),
    st.one_of(st.none(), st.floats(-1e6, 1e6), st.sampled_from([float("nan"), 1e300])),
), min_size=1, max_size=8))
def test_a_cast_reads_values_as_sparks_ansi_cast(rows):
    """``TRY_CAST`` of text to a whole number is NULL where the text is none;
    ``CAST`` of fractions to whole numbers truncates toward zero, and a fraction no
    whole number holds (NaN, 1e300) is an error for the batch."""
    table = records_table(rows, Measured._fields, None)
    tried = Expression("TRY_CAST(code AS BIGINT) > 10").evaluate(table).to_pylist()
    assert tried == [r.code is not None and (_whole_or_none(r.code) or 0) > 10 for r in rows]
    fractions = [r.score for r in rows if r.score is not None]
    try:
        truncated = Expression("CAST(score AS BIGINT) < -2").evaluate(table).to_pylist()
    except ValueError:
        assert any(math.isnan(f) or abs(f) > 2**63 for f in fractions)
    else:
        assert truncated == [r.score is not None and int(r.score) < -2 for r in rows]  # -2.5 is -2


def test_a_literal_that_does_not_cast_is_null_with_try_cast_and_refused_with_cast():
    table = records_table([Login("ok", 5), Login("ok", None)], Login._fields, None)
    assert Expression("amount = TRY_CAST('x' AS INT) OR amount IS NULL").evaluate(table).to_pylist() == [False, True]
    with pytest.raises(DefinitionError, match="'x' is no int32"):
        Expression("amount = CAST('x' AS INT)")


def fraud(fail, ok):
    return Pattern.begin("fail").where(fail).times(3).followed_by("ok").where(ok).within(10)


def as_function(model):
    return lambda e: model(e) is True


@settings(max_examples=40, deadline=None)
@given(conditions, conditions, st.integers(0, 2**32), st.integers(1, 200))
def test_expression_and_function_conditions_find_the_same_matches(fail, ok, seed, n):
    rnd = random.Random(seed)
    events = [
        (f"u{rnd.randrange(4)}", Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)), rnd.randrange(40)) for _ in range(n)
    ]
    by_sql = run_local(Detector(fraud(fail[0], ok[0])), events)
    by_function = run_local(Detector(fraud(as_function(fail[1]), as_function(ok[1]))), events)
    assert by_sql.updates == by_function.updates
    assert by_sql.rejected == by_function.rejected == []


class Geo(NamedTuple):
    country: str | None
    risk: int | None


class Place(NamedTuple):
    city: str | None
    geo: Geo | None


class Visit(NamedTuple):
    kind: str | None
    place: Place | None


places = st.one_of(
    st.none(),
    st.builds(Place, st.sampled_from(["Paris", "Oslo", None]),
              st.one_of(st.none(), st.builds(Geo, st.sampled_from(["FR", "NO", None]), st.sampled_from([None, 1, 9])))),
)
NESTED_CONDITIONS = [  # SQL reading fields of fields, and the function reading them alike
    ("kind = 'fail' AND place.city = 'Paris'", lambda e: e.kind == "fail" and e.place is not None and e.place.city == "Paris"),
    ("place.geo.risk > 5 OR PLACE.Geo.Country = 'NO'", lambda e: e.place is not None and e.place.geo is not None and (
        e.place.geo.risk is not None and e.place.geo.risk > 5 or e.place.geo.country == "NO")),
    ("place.geo IS NULL", lambda e: e.place is None or e.place.geo is None),
    ("place IS NOT NULL AND place.city IS NULL", lambda e: e.place is not None and e.place.city is None),
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(KINDS), places), max_size=40),
       st.sampled_from(NESTED_CONDITIONS), st.sampled_from(NESTED_CONDITIONS))
def test_conditions_read_fields_of_nested_records_as_functions_do(rows, first, then):
    """A record field that is itself a record (``place: Place | None``, at any depth,
    NULL at any depth, or NULL in every event of a batch) is a struct: SQL reads
    ``place.geo.risk`` as a function reads ``e.place.geo.risk``."""
    events = [(key, Visit(kind, place), t) for t, (key, kind, place) in enumerate(rows)]
    by_sql = run_local(Detector(Pattern.begin("x").where(first[0]).followed_by("y").where(then[0])), events)
    by_function = run_local(Detector(Pattern.begin("x").where(first[1]).followed_by("y").where(then[1])), events)
    assert by_sql.updates == by_function.updates
    assert by_sql.rejected == by_function.rejected == []


def test_the_fraud_rule_as_sql_finds_what_the_function_rule_finds():
    rnd = random.Random(7)
    events = [(f"u{rnd.randrange(5)}", Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)), i // 3) for i in range(400)]
    by_sql = run_local(Detector(fraud("kind = 'fail'", "kind = 'ok' AND amount > 10")), events).updates
    by_function = run_local(
        Detector(fraud(lambda e: e.kind == "fail", lambda e: e.kind == "ok" and e.amount is not None and e.amount > 10)),
        events,
    ).updates
    assert matches(by_sql) and timeouts(by_sql)  # the data exercises both
    assert by_sql == by_function


def test_an_event_an_expression_cannot_read_is_rejected_with_the_reason():
    detector = Detector(fraud("kind = 'fail'", "kind = 'ok'"))
    events = [("u", Login("fail", 1), 1), ("u", ("fail", 1), 2), ("u", Login("fail", 2), 3)]
    result = run_local(detector, events)
    [rejected] = result.rejected
    assert rejected.event.symbol == ("fail", 1) and rejected.reason == "condition_failed"
    assert "NamedTuple" in rejected.detail
    # the others were applied: two fails are a partial match of two
    assert any(v[1].startswith("0#2") for (_, v), _, d in result.updates if v[0] == "partial" and d == 1)


def test_a_field_the_events_do_not_have_rejects_each_event_naming_it():
    result = run_local(Detector(fraud("kind = 'fail'", "status = 'ok'")), [("u", Login("ok", 1), 1)])
    [rejected] = result.rejected
    assert rejected.reason == "condition_failed" and "'status'" in rejected.detail


@pytest.mark.parametrize(
    "sql, says",
    [
        ("amount", "the condition 'amount' gives int64 values, not TRUE or FALSE"),
        ("kind = 'ok' OR amount", "OR needs TRUE or FALSE: 'amount' gives int64 values"),
        ("NOT kind", "NOT needs TRUE or FALSE: 'kind' gives string values"),
        ("kind = 'ok' AND amount BETWEEN 'a' AND 'z'", """"amount BETWEEN 'a' AND 'z'": 'a' is no int64"""),
        ("kind = 'ok' OR amount > '1.5'", """"amount > '1.5'": '1.5' is no int64"""),
        ("kind > 5", "is no int64"),  # 'ok' in one event, 'fail' in the other
        ("amount > 0 AND amount / 0 > 1", "divide by zero"),
        ("kind = 'ok' AND amount / 2 RLIKE '1'", "reads text; 'amount / 2' gives double values"),
        ("amount IS TRUE", "IS needs TRUE or FALSE: 'amount' gives int64 values"),
        ("trim(amount / 2) = '1'", "reads text; 'amount / 2' gives double values"),
        ("CASE WHEN amount > 0 THEN kind ELSE 1.5BD END = 'ok'", "its branches give decimal128(2, 1), string values"),
        ("CASE WHEN amount > 0 THEN kind ELSE amount END = 'ok'", "as a scalar of type int64"),
    ],
)
def test_a_condition_the_fields_types_cannot_meet_rejects_each_event_naming_it(sql, says):
    events = [("u", Login("ok", 1), 1), ("v", Login("fail", 3), 2)]
    result = run_local(Detector(Pattern.begin("a").where(sql)), events)
    rejected = [(r.event.key, r.event.symbol, r.event.time, r.reason) for r in result.rejected]
    assert rejected == [(*e, "condition_failed") for e in events]
    assert all(says in r.detail for r in result.rejected) and result.updates == []


def test_and_or_case_read_a_side_only_in_the_rows_it_decides():
    """As Spark SQL evaluates them: a division by zero in a row the left side decides
    is no error, in bulk and for a detector's events; a right side of the wrong type
    is refused even where the left side decides every row."""
    events = [("u", Login("ok", 0), 1), ("v", Login("fail", 0), 1), ("w", Login("fail", 5), 1)]
    table = records_table([e[1] for e in events], Login._fields, None)
    assert Expression("amount <> 0 AND 10 % amount = 0").evaluate(table).to_pylist() == [False, False, True]
    assert Expression("amount = 0 OR 10 % amount = 0").evaluate(table).to_pylist() == [True, True, True]
    assert Expression("kind = 'ok' AND 10 div amount = 0").evaluate(table.slice(1)).to_pylist() == [False, False]
    # a part written twice is read in each place only where that place is read
    assert Expression("kind = 'fail' OR 10 div amount = 1 OR 10 div amount = 2").evaluate(table.slice(1)).to_pylist() == [
        True, True]
    with pytest.raises(ValueError, match="divide by zero"):
        Expression("kind = 'fail' AND 10 % amount = 0").evaluate(table)
    with pytest.raises(TypeError, match="AND needs TRUE or FALSE"):
        Expression("amount = 99 AND kind").evaluate(table)
    result = run_local(Detector(Pattern.begin("a").where("kind = 'fail' AND 10 % amount = 0")), events)
    assert [(r.event.key, r.reason) for r in result.rejected] == [("v", "condition_failed")]
    assert [m.key for m in matches(result.updates)] == ["w"]
    # CASE, IF and coalesce read each branch in the rows it decides
    assert Expression("CASE WHEN amount <> 0 THEN 10 % amount = 0 END").evaluate(table).to_pylist() == [False, False, True]
    assert Expression("IF(amount = 0, NULL, 10 div amount) = 2").evaluate(table).to_pylist() == [False, False, True]
    assert Expression("CASE amount WHEN 0 THEN kind = 'ok' ELSE 10 % amount = 0 END").evaluate(table).to_pylist() == [
        True, False, True]
    assert Expression("coalesce(IF(amount = 0, 1, NULL), 10 % amount) = 1").evaluate(table).to_pylist() == [True, True, False]
    # text beside numbers is read as a number, only in the rows its branch is chosen
    assert Expression("IF(amount = 0, 7, kind) = 7").evaluate(table.slice(0, 2)).to_pylist() == [True, True]
    assert Expression("IF(amount = 0, ' 7 ', amount) = 7").evaluate(table).to_pylist() == [True, True, False]
    with pytest.raises(ValueError, match="as a scalar of type int64"):
        Expression("IF(amount = 0, kind, 1) = 7").evaluate(table)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2, 5, None]), min_size=1, max_size=40))
def test_a_batch_answers_every_row_but_those_a_condition_raises_on(amounts):
    """Halves of a batch are read until the rows that raise are found: the others get
    their answers, as each would alone."""
    from statemachines.library.nfa import answer_one, answer_rows

    nfa = Detector(Pattern.begin("a").where("100 % amount = 0"))._nfa
    rows = [Login("ok", a) for a in amounts]
    bits, failed = answer_rows(nfa, records_table(rows, Login._fields, None))
    alone = []
    for row in rows:
        try:
            alone.append(answer_one(nfa, row, None))
        except (ArithmeticError, ValueError):
            alone.append(None)
    failed = failed.to_pylist() if failed is not None else [False] * len(rows)
    assert failed == [a is None for a in alone]  # few rows raise: the splits find each
    assert [b for b, f in zip(bits.to_pylist(), failed, strict=True) if not f] == [a for a in alone if a is not None]


def test_an_event_a_condition_raises_on_is_rejected_and_the_others_run_as_without_it():
    rnd = random.Random(3)
    events = [(f"u{rnd.randrange(5)}", Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)), i // 4) for i in range(600)]
    detector = Detector(fraud("kind = 'fail'", "kind = 'ok' AND 100 % amount = 0"))
    result = run_local(detector, events)
    raising = [e for e in events if e[1].kind in ("ok", None) and e[1].amount == 0]  # NULL AND ...: read on
    assert raising and sorted(map(repr, (r.event[:3] for r in result.rejected))) == sorted(map(repr, raising))
    assert {r.reason for r in result.rejected} == {"condition_failed"}
    assert result.updates == run_local(detector, [e for e in events if e not in raising]).updates


@pytest.mark.parametrize(
    "sql, says",
    [
        ("kind = ", "cannot parse"),
        ("rand() > 0.5", "do not support"),
        ("crc32(kind) > 0", "do not support"),
        ("sin(amount) > 0", "do not support"),
        ("CAST(kind AS BINARY) IS NULL", "cast values to numbers, text, booleans, dates or timestamps only"),
        ("at > DATE '2024-13-01'", "'2024-13-01' is no date32"),
        ("kind = CAST('a' AS ARRAY<STRING>)", "have no ARRAY<STRING> values"),
        ("kind RLIKE '(?=f)'", "Arrow cannot run"),
        ("amount / 2", "not a test: it gives numbers"),
        ("kind IS 1", "IS takes NULL, TRUE or FALSE"),
        ("kind LIKE kind", "string literal as its pattern"),
        ("", "needs SQL text"),
        ("amount + 1", "not a test: it gives numbers"),
        ("'fail'", "not a test: it gives text"),
        ("kind = 'fail' AND (length(kind))", "not a test: 'LENGTH.kind.' gives numbers"),
        ("NOT lower(kind)", "not a test: 'LOWER.kind.' gives text"),
        ("trim(kind, 'x') = 'a'", "as TRIM"),
        ("substring(kind, amount) = 'a'", "whole-number literals"),
        ("kind || 'a'", "not a test: it gives text"),
        ("log10(amount, 2) > 0", "takes 1 argument"),
        ("bround(amount, amount) > 1", "whole-number literal as its scale"),
        ("regexp_extract(kind, kind, 1) = 'a'", "string literal as its pattern"),
        ("regexp_extract(kind, '(?=a)', 0) = 'a'", "Arrow cannot run"),
        ("tags[amount] = 'x'", "whole-number literal as its index"),
        ("lpad(kind, amount) = 'x'", "whole-number literals as lengths"),
        ("unix_timestamp(at, 'yyyy') > 0", "no other format"),
        ("unix_timestamp() > 0", "no current time"),
        ("date_trunc('XYZ', at) IS NULL", "takes one of the units YEAR"),
        ("trunc(day, 'DD') IS NULL", "takes one of the units YEAR, YYYY, YY, QUARTER, MONTH, MM, MON, WEEK, as"),
        ("add_months(day, amount) IS NULL", "whole-number literal as its months"),
        ("size(tags)", "not a test: it gives numbers"),
        ("split(kind, '')[0] = 'a'", "matches empty text"),
        ("split(kind, ',') IS NULL OR split(kind, ',')", "not a test: .SPLIT.kind, ','.. gives arrays"),
    ],
)
def test_an_expression_the_evaluator_cannot_run_is_refused_when_the_pattern_is_built(sql, says):
    with pytest.raises(DefinitionError, match=says):
        Pattern.begin("a").where(sql)


def test_a_step_mixes_no_expressions_with_functions():
    with pytest.raises(DefinitionError, match="all SQL expressions or all functions"):
        Pattern.begin("a").where("kind = 'fail'").where(lambda e: True)
    with pytest.raises(DefinitionError, match="all SQL expressions or all functions"):
        Pattern.begin("a").where(lambda e: True).or_where("kind = 'ok'")


def test_where_and_or_where_of_expressions_join_into_one_expression():
    step = Pattern.begin("a").where("kind = 'fail'").where("amount > 5").or_where("amount IS NULL").steps[0]
    assert step.condition == Expression("((kind = 'fail') AND (amount > 5)) OR (amount IS NULL)")


def test_a_condition_text_is_parsed_once_per_process_and_a_refused_one_every_time(monkeypatch):
    """Unpickling a pattern (as each Spark task does) makes its conditions again: a
    text parsed before is not parsed again, and still finds what it found; a text
    that is refused is refused each time it is given."""
    import pickle
    import uuid

    import sqlglot

    parsed = []
    parse_one = sqlglot.parse_one
    monkeypatch.setattr(sqlglot, "parse_one", lambda sql, **kw: parsed.append(sql) or parse_one(sql, **kw))
    marker = uuid.uuid4().int % 10**9  # in each text: texts no other test has parsed in this process
    fail, ok, refused = f"kind = 'fail' AND {marker} > 0", f"kind = 'ok' AND amount > {marker} - {marker}", f"amount + {marker}"
    rule = fraud(fail, ok)
    events = [("ann", Login(k, a), t) for t, (k, a) in enumerate([("fail", 1)] * 3 + [("ok", 20)])]
    found = matches(run_local(Detector(rule), events).updates)
    assert found and [parsed.count(fail), parsed.count(ok)] == [1, 1]
    again = pickle.loads(pickle.dumps(Detector(rule)))
    assert matches(run_local(again, events).updates) == found
    assert [parsed.count(fail), parsed.count(ok)] == [1, 1]
    for _ in range(2):
        with pytest.raises(DefinitionError, match="not a test"):
            Expression(refused)
    assert parsed.count(refused) == 2


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 2000), st.sampled_from(["OR", "AND"]), st.lists(st.integers(0, 2100) | st.none(), max_size=6))
@example(2000, "OR", [5, 2000, None]).via("a chain 600 terms long crashed")
@example(2000, "AND", [5, 2000, None]).via("a chain 600 terms long crashed")
def test_a_chain_of_thousands_of_terms_runs_as_a_function_finds(n, how, amounts):
    """A rule generated as one long chain (``amount = 0 OR amount = 1 OR ...``, or of
    ``AND``) parses as a tree as deep as it is long; it runs at any length and finds
    what the same test as a function finds, NULL included."""
    test, join = ("=", any) if how == "OR" else ("<>", all)
    sql = f" {how} ".join(f"amount {test} {i}" for i in range(n))
    events = [("u", Login("fail", a), t) for t, a in enumerate(amounts)]

    def function(e):
        return e.amount is not None and join((e.amount == i) if how == "OR" else (e.amount != i) for i in range(n))

    found = run_local(Detector(Pattern.begin("a").where(sql)), events)
    assert not found.rejected
    assert matches(found.updates) == matches(run_local(Detector(Pattern.begin("a").where(function)), events).updates)


def test_conditions_joined_one_by_one_make_a_flat_chain_that_runs_at_any_length():
    events = [("u", Login("fail", a), t) for t, a in enumerate([5, 150, None, 1000])]
    pattern = Pattern.begin("a")
    for i in range(0, 200, 2):  # 100 where()s: before, each nested the chain a level deeper
        pattern = pattern.where(f"amount <> {i}")
    function = Pattern.begin("a").where(lambda e: e.amount is not None and all(e.amount != i for i in range(0, 200, 2)))
    found = matches(run_local(Detector(pattern), events).updates)
    assert found and found == matches(run_local(Detector(function), events).updates)


JOINED_TERMS = ["amount > 5", "kind = 'fail'", "Amount IS NULL", "kind = 'a' OR amount < 3",
                "kind = 'b' AND amount <> 2", "NOT (amount = 1)", "(amount + 1) * 2 > 4"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(JOINED_TERMS),
       st.lists(st.tuples(st.sampled_from(["where", "or_where"]), st.sampled_from(JOINED_TERMS)), max_size=10))
def test_conditions_joined_one_by_one_are_read_as_their_text_parses(first, calls):
    """where() and or_where() join a step's conditions into one whose text, parsed
    afresh (as an unpickled pattern's is), is read the same: the same tree, the
    same fields and the same nesting (private parts, as the join makes them without
    parsing the whole text again)."""
    pattern = Pattern.begin("a").where(first)
    for how, term in calls:
        pattern = getattr(pattern, how)(term)
    joined = pattern.steps[0].condition
    expressions._parsed.cache_clear()
    parsed = Expression(joined.sql)
    assert (parsed._tree, parsed.fields, parsed._depth) == (joined._tree, joined.fields, joined._depth)


def test_conditions_joined_one_by_one_parse_only_the_texts_given(monkeypatch):
    """n where()s parse the n texts given, not each longer chain again (which made
    building 300 of them take 16 s)."""
    import uuid

    import sqlglot

    parsed = []
    parse_one = sqlglot.parse_one
    monkeypatch.setattr(sqlglot, "parse_one", lambda sql, **kw: parsed.append(sql) or parse_one(sql, **kw))
    marker = uuid.uuid4().int % 10**9
    pattern = Pattern.begin("a")
    for i in range(300):
        pattern = pattern.where(f"amount <> {marker + i}")
    assert pattern.steps[0].condition.sql.count(" AND ") == 299
    assert parsed and max(text.count(" AND ") for text in parsed) == 1  # the first join: (a) AND (b)


def test_a_term_too_deep_for_the_parser_in_a_chain_is_refused_when_joined():
    """A chain continued by where() is not parsed whole; a term the parser reads alone
    but not inside the chain's parentheses is refused then, not when the text is
    parsed again in a Spark task."""
    chain = Pattern.begin("a").where("kind = 'x'").where("amount > 1")
    deepest = max(k for k in range(1, 100) if _builds("(" * k + "amount = 1" + ")" * k))
    with pytest.raises(DefinitionError, match="nest too deeply for the parser"):
        chain.where("(" * deepest + "amount = 1" + ")" * deepest)
    one_less = chain.where("(" * (deepest - 1) + "amount = 1" + ")" * (deepest - 1)).steps[0].condition
    expressions._parsed.cache_clear()
    assert Expression(one_less.sql) == one_less


def _builds(sql):
    try:
        Expression(sql)
    except DefinitionError:
        return False
    return True


@pytest.mark.parametrize(("sql", "says"), [
    ("(" * 60 + "kind = 'fail'" + ")" * 60, "nest too deeply for the parser"),
    ("NOT " * 300 + "kind = 'fail'", "nest too deeply for the parser"),
    ("amount" + " + 1" * 300 + " > 0", "levels deep, more than the 200"),
])
def test_a_condition_nested_deeper_than_it_can_be_read_is_refused_when_built(sql, says):
    with pytest.raises(DefinitionError, match=says):
        Pattern.begin("a").where(sql)


def test_a_data_patterns_diagram_shows_its_conditions():
    text = Detector(fraud("kind = 'fail'", "kind = 'ok'")).diagram().to_dot()
    assert "fail where kind = 'fail'" in text and "ok where kind = 'ok'" in text


# -- the same answers as Spark SQL ----------------------------------------------------------------


class Reading(NamedTuple):
    kind: str | None
    amount: int | None
    score: float | None
    at: datetime.datetime | None  # an instant (Spark's TIMESTAMP)
    wall: datetime.datetime | None  # a wall clock (TIMESTAMP_NTZ)
    day: datetime.date | None
    flag: bool | None
    code: str | None = None  # numbers as text, or not


READING_SCHEMA = "kind string, amount bigint, score double, at timestamp, wall timestamp_ntz, day date, flag boolean, code string"
DAYS = [datetime.date(2024, 1, d) for d in (1, 2, 31)]
WALLS = [datetime.datetime(2024, 1, 1, h, m) for h, m in ((0, 0), (9, 30), (23, 59))]
MOMENTS = [w.replace(tzinfo=datetime.UTC) for w in WALLS]

readings = st.builds(
    Reading,
    st.sampled_from(["fail", "ok", "Fail", None]),
    st.sampled_from([None, -3, 0, 5, 20]),
    st.sampled_from([None, -1.5, 0.0, -0.0, 2.5, 1e300]),  # NaN (and inf, which arithmetic makes NaN): see test_nan.py
    st.sampled_from([None, *MOMENTS]),
    st.sampled_from([None, *WALLS]),
    st.sampled_from([None, *DAYS]),
    st.sampled_from([None, True, False]),
    st.sampled_from([None, "5", " 20 ", "-3", "1.5", "x", "true", " 1e1 "]),
)


def _spelled(name):
    """A field's name as a user may write it: Spark matches names ignoring case."""
    return st.sampled_from([name, name.upper(), name.capitalize()])


TIMESTAMPS = [
    "'2024-01-01'", "'2024-01-01 09:30:00'", "'2024-01-01T09:30:00Z'", "'2024-01-01T10:30:00+01:00'",
    "TIMESTAMP '2024-01-01 09:30:00'", "TIMESTAMP '2024-01-01 10:30:00+01:00'", "TIMESTAMP_NTZ '2024-01-01 09:30:00'",
    "DATE '2024-01-01'",
]


def _compared():
    """``field op literal``, the literal of the field's type or text Spark casts to it
    (some of which does not cast: then both refuse the condition)."""
    literals = {
        "kind": ["'fail'", "'ok'", "'F%'"],
        "amount": ["5", "'5'", "' 20 '", "'1.5'", "'abc'", "5L", "CAST('0' AS INT)", "2.5"],
        "score": ["0", "'2.5'", "'-1.5'", "1.5D", "'x'"],
        "at": TIMESTAMPS,
        "wall": TIMESTAMPS,
        "day": ["'2024-01-02'", "DATE '2024-01-31'", "'2024-01-02 12:00:00'", "TIMESTAMP '2024-01-02 00:00:00'"],
        "flag": ["TRUE", "'true'", "'no'", "'maybe'"],
    }
    operators = ["=", "<>", "<", ">=", "<=>"]
    return st.sampled_from(sorted(literals)).flatmap(lambda field: st.one_of(
        st.tuples(_spelled(field), st.sampled_from(operators), st.sampled_from(literals[field])).map(" ".join),
        st.tuples(_spelled(field), st.lists(st.sampled_from(literals[field]), min_size=1, max_size=3)).map(
            lambda p: f"{p[0]} IN ({', '.join(p[1])})"),
        st.tuples(_spelled(field), st.sampled_from(literals[field]), st.sampled_from(literals[field])).map(
            lambda p: f"{p[0]} BETWEEN {p[1]} AND {p[2]}"),
        _spelled(field).map(lambda f: f"{f} IS NULL"),
        _spelled(field).map(lambda f: f"{f} IS NOT NULL"),
        st.tuples(_spelled(field), st.lists(st.sampled_from(literals[field]), min_size=1, max_size=2)).map(
            lambda p: f"{p[0]} NOT IN ({', '.join(p[1])})"),
        st.tuples(_spelled(field), st.sampled_from(literals[field]), st.sampled_from(literals[field])).map(
            lambda p: f"{p[0]} NOT BETWEEN {p[1]} AND {p[2]}"),
    ))


TEXT_AND_FRACTIONS = [
    "kind RLIKE '^[Ff]a'", "kind REGEXP 'i.$'", "startswith(kind, 'F')", "endswith(kind, 'k')", "contains(kind, 'ai')",
    "kind LIKE 'f%'", "kind NOT LIKE 'f%'", "kind NOT ILIKE 'F%'", "kind NOT RLIKE '^o'", "kind LIKE ANY ('f%', 'o_')",
    "kind NOT LIKE ALL ('%a%', 'o%')", "amount / 2 > 2", "amount / 8 = 2.5", "score / amount < 0", "abs(amount) / 3 <= 1",
    "flag IS TRUE", "(amount > 4) IS NOT FALSE", "kind IS DISTINCT FROM 'ok'", "amount IS NOT DISTINCT FROM 5",
    "amount % 3 = -0", "amount % -3 < 0", "amount % 7 = 6", "score % 2 > 0.4", "-score % 1.5 < 0", "score % amount > 0",
    "amount div 3 = 1", "amount div -2 < 0", "-amount div 2 = 1", "amount div 0 = 0", "score div 2 = 0", "amount div 1.5BD = 3",
    "amount % 1.5BD = 0.5", "-amount % 2.5BD < 0", "amount % 0.0BD = 0", "1.5BD % amount = 1.5", "amount % 1.5BD = score",
    "CASE WHEN amount <> 0 THEN 20 % amount = 0 ELSE flag END", "CASE amount WHEN 5 THEN 'five' WHEN 0 THEN kind END = 'ok'",
    "CASE WHEN kind = 'fail' THEN 1 WHEN flag THEN score END > 2", "IF(amount > 4, score, amount) > 1", "IF(flag, 1.5BD, amount) = 1.5",
    "CASE WHEN amount > 0 THEN 1 ELSE kind END = 1", "CASE WHEN score > 1 THEN amount END IS NULL", "IF(amount = 0, NULL, 10 div amount) > 1",
    "trim(kind) = 'ok'", "TRIM(LEADING 'F' FROM kind) = 'ail'", "rtrim(kind) = 'ok'", "substring(kind, 2, 2) = 'ai'", "substr(kind, -2) = 'il'",
    "substring(kind, -5, 3) = 'f'", "concat(kind, amount) = 'fail-3'", "kind || '!' = 'ok!'", "upper(substring(kind, 1, 1)) = 'F'",
    "lower(flag) = 'true'", "coalesce(score, 10 % amount) > 0", "coalesce(amount, score) > 1", "length(amount) = 2", "concat(day, '') LIKE '2024-01-0%'",
    "amount IN (0, 10 div amount)", "amount IN (10 div amount, 0)", "score IN (2.5, 10 div amount)", "amount BETWEEN 1 AND 10 div amount",
    "score > 10 div amount", "(10 div amount) > score", "score + 10 div amount > 0", "(10 div amount) / score > 0", "score % amount > 10 % amount",
    "code > 10", "code = amount", "amount = code", "code + 1 > 5", "code > 1.5", "code IN (5, 20)", "code BETWEEN 1 AND 30",
    "score < code", "10 % code = 1", "code * 2 = 10", "code > 1.5BD", "concat(kind, 10 div amount) = 'ok2'",
    "concat(10 div amount, kind) IS NULL", "kind || (10 div amount) LIKE 'f%'",
    "CAST(code AS INT) > 10", "TRY_CAST(code AS INT) IS NULL", "CAST(code AS DOUBLE) > 1", "CAST(score AS BIGINT) = 2",
    "CAST(score AS INT) < 0", "CAST(amount AS DOUBLE) / 8 = 0.625", "CAST(amount AS STRING) = '5'", "CAST(flag AS INT) = 1",
    "CAST(amount AS BOOLEAN)", "CAST(code AS DECIMAL(5,1)) > 1", "CAST(score AS DECIMAL(3,0)) = 3", "CAST(kind AS BOOLEAN)",
    "CAST(day AS STRING) LIKE '2024-01-3%'", "TRY_CAST(code AS DATE) IS NULL", "CAST(amount AS TINYINT) > 0",
    "CAST(code AS SMALLINT) = 20", "CAST(score AS FLOAT) > 1", "TRY_CAST(score AS INT) IS NULL", "CAST(flag AS STRING) = 'true'",
    "amount = TRY_CAST('x' AS INT)", "TRY_CAST('300' AS TINYINT) IS NULL AND flag", "amount < TRY_CAST('7' AS INT)",
    "isnan(score)", "NOT isnan(score * amount)", "isnan(code)", "isnan(amount) OR flag", "isnan(kind)", "isnan('NaN')",
    "round(score) = 3", "round(amount, -1) = 20", "floor(score) = -2", "ceil(amount / 8) = 3", "round(code) = 20",
    "floor(code) = 1", "greatest(amount, score) > 2", "least(amount, score, 0) < 0", "greatest(kind, 'ok') = 'ok'",
    "nanvl(score, amount) > 2", "least(day, DATE '2024-01-02') = day", "hour(at) = 9", "minute(wall) = 30",
    "dayofweek(day) = 3", "year(at) = 2024", "day(wall) = 1", "weekofyear(day) = 1", "hour(day) = 0", "month(at) = 1",
    "datediff(day, at) = 1", "date_add(wall, 1) = day", "to_date(at) = day", "CAST(at AS DATE) = day",
    "CAST(day AS TIMESTAMP) <= at", "CAST(wall AS TIMESTAMP) = at", "CAST(2.7 AS INT) < amount",
    "ln(score) > 0.5", "log10(amount) >= 1", "pow(amount, 2) > 100", "pow(score, amount) > 1", "bround(score) = 2",
    "exp(amount) < 1", "cbrt(amount) < 0", "isnull(amount) OR flag", "regexp_extract(kind, '(a)(i)', 2) = 'i'",
    "regexp_extract(code, '(\\\\d+)', 1) = '20'", "lpad(kind, 5, '-') = '-fail'", "initcap(kind) = 'Fail'",
    "reverse(kind) = 'ko'", "translate(kind, 'ai', 'A') = 'fAl'", "ascii(kind) = 70", "octet_length(code) = 4",
    "date_trunc('HOUR', at) < at", "unix_timestamp(at) > 1704100000", "trunc(day, 'MM') = DATE '2024-01-01'",
    "add_months(day, 1) = DATE '2024-02-29'", "last_day(day) = day", "split(kind, 'a')[0] = 'f'", "size(split(code, ' ')) = 3",
    "sqrt(amount) = 2", "sign(score) = -1", "nullif(amount, 5) IS NULL", "nvl2(score, kind, 'none') = 'none'",
    "instr(kind, 'ai') = 2", "left(kind, 1) = 'F'", "right(code, 2) = '0 '", "replace(kind, 'ai', 'a') = 'fal'",
]

spark_conditions = st.recursive(
    st.one_of(_compared(), _spelled("flag"), st.sampled_from(TEXT_AND_FRACTIONS)),
    lambda children: st.one_of(
        st.tuples(children, st.sampled_from(["AND", "OR"]), children).map(lambda p: f"({p[0]}) {p[1]} ({p[2]})"),
        children.map(lambda c: f"NOT ({c})"),
    ),
    max_leaves=4,
)


def _answers(evaluate):
    """Whether each row meets the condition (NULL: not), or "refused" if it cannot run."""
    try:
        return [bool(met) for met in evaluate()]
    except (DefinitionError, TypeError, ValueError, ArithmeticError):
        return "refused"


# Spark SQL reading a condition as written: the optimizer's boolean simplification
# would drop a read that raises from ``flag AND (flag OR code > 10)``, and generated
# code evaluates a part written twice once, ahead of the ``OR`` that should spare it
# (subexpression elimination): ``kind = 'fail' OR 10 div amount = 1 OR 10 div amount
# = 2`` divides by zero where amount is 0 and kind is 'fail', which the ``OR`` spares.
AS_WRITTEN = {
    "spark.sql.optimizer.excludedRules": "org.apache.spark.sql.catalyst.optimizer.BooleanSimplification",
    "spark.sql.subexpressionElimination.enabled": "false",
}


def _spark_answers(frame, condition):
    """Spark SQL's answers (is each row's condition TRUE) as the condition is written
    (``AS_WRITTEN``), or "refused" where its query fails."""
    import pyspark.errors

    from statemachines.spark.session import scoped_conf

    try:
        with scoped_conf(frame.sparkSession, AS_WRITTEN):
            return [row[0] is True for row in frame.selectExpr(condition).collect()]
    except (pyspark.errors.PySparkException, ArithmeticError, ValueError):
        return "refused"


@pytest.mark.spark
@settings(max_examples=30, deadline=None)
@given(spark_conditions, st.lists(readings, min_size=1, max_size=6))
def test_an_expression_means_what_spark_sql_means(spark, condition, rows):
    """Each condition gives Spark SQL's answers (a ``selectExpr`` over the same rows,
    ANSI casts and all) over the local runtime's table of NamedTuples and over the
    Spark runtime's (Spark's own Arrow batch, its timestamps zoned), or is refused
    where Spark refuses it."""
    frame = spark.createDataFrame(rows, READING_SCHEMA)
    expected = _spark_answers(frame, condition)
    local = records_table(rows, Reading._fields, None)
    assert _answers(lambda: Expression(condition).evaluate(local).to_pylist()) == expected
    on_spark = frame.toArrow()
    assert _answers(lambda: Expression(condition).evaluate(on_spark).to_pylist()) == expected


NAN_TESTS = ["isnan(x)", "NOT isnan(x)", "isnan(n)", "isnan(x * 0)", "isnan(NULL)", "isnan(t)", "isnan(CAST(t AS DOUBLE))"]


@pytest.mark.spark
def test_isnan_is_true_for_nan_alone_as_in_spark_sql(spark):
    rows = [(x, n, t) for x in (math.nan, 1.0, -0.0, math.inf, None) for n, t in ((1, "NaN"), (None, " 1.5"), (2, None))]
    frame = spark.createDataFrame(rows, "x double, n bigint, t string")
    answers = frame.selectExpr(*(f"({c}) IS TRUE" for c in NAN_TESTS)).collect()
    for i, condition in enumerate(NAN_TESTS):
        expected = [row[i] for row in answers]
        assert True in expected or condition in ("isnan(n)", "isnan(NULL)"), condition  # the rows tell
        assert Expression(condition).evaluate(frame.toArrow()).to_pylist() == expected, condition


def _agree_with_spark(frame, conditions, refused, rows=None, *, each_true=True):
    """Each of ``conditions`` gives Spark SQL's answers over ``frame`` (one query for
    all; with ``each_true``, each TRUE in some row, so that the rows tell) over Spark's
    Arrow batch of it and, given its ``rows``, over the local runtime's table of them;
    each of ``refused`` is refused by Spark and over each table. Returns Spark's
    answers, a list per condition."""
    tables = [frame.toArrow()] + ([records_table(rows, frame.columns, None)] if rows else [])
    answers = frame.selectExpr(*(f"({c}) IS TRUE" for c in conditions)).collect()
    spark_answers = []
    for i, condition in enumerate(conditions):
        expected = [row[i] for row in answers]
        spark_answers.append(expected)
        assert True in expected or not each_true, condition
        for table in tables:
            assert _answers(lambda c=condition, t=table: Expression(c).evaluate(t).to_pylist()) == expected, condition
    for condition in refused:
        assert _spark_answers(frame, condition) == "refused", condition
        for table in tables:
            assert _answers(lambda c=condition, t=table: Expression(c).evaluate(t).to_pylist()) == "refused", condition
    return spark_answers


IN_ROWS = [Reading("fail", 5, 2.5, None, None, None, None), Reading("ok", None, None, None, None, None, None),
           Reading("ok", -3, -1.5, None, None, None, None)]
IN_CONDITIONS = ["amount IN ('1.5', 2.5)", "amount IN ('5', 2.5)", "amount IN (-3.0, '7')", "score IN ('2.5', 1)",
                 "amount IN ('5', 1.5D)", "NOT amount IN ('-3', 2.5)", "amount IN ('5')"]


@pytest.mark.spark
def test_in_reads_its_text_items_as_the_type_of_the_whole_list_as_spark_sql(spark):
    """Spark SQL types ``x IN (...)`` as one wider type of ``x`` and every item, so a
    text item is read as that type (``amount IN ('1.5', 2.5)`` reads '1.5' as a
    decimal, where ``amount = '1.5'`` fails): the answers are Spark's; text that
    is no such number fails, as there."""
    frame = spark.createDataFrame(IN_ROWS, READING_SCHEMA)
    answers = _agree_with_spark(frame, IN_CONDITIONS, ["amount IN ('x', 2.5)", "amount IN ('1.5', 2)", "amount IN ()"], IN_ROWS, each_true=False)
    assert sum(True in a for a in answers) >= len(IN_CONDITIONS) - 1  # all but the first are TRUE somewhere


# A number in every kind of column: x with NaN and infinities, y finite (one beyond a
# BIGINT's reach doubled), a FLOAT, a decimal, text; the NaN row's n is NULL.
NUMBER_ROWS = list(zip(
    [math.nan, 2.5, -2.5, 2.675, -0.0, 0.5, math.inf, 1e300, -math.inf, None],
    [2.5, -2.5, 2.675, -0.0, 0.5, 1.005, -1.5, 0.49999999999999994, 9.2e18, None],
    [2.675, -2.5, 0.25, None, 0.5, 1.005, -1.5, 2.5, 3.5, 1.0],
    [None, 125, -125, 7, 0, 96, 1, -1, 3, 2],
    [7, 96, -5, None, 0, 125, 1, 2, 3, 4],
    [" 2.5", "3", "NaN", None, "3", "1", "2", "-1", "0", "7"],
    ["1.255", "-1.255", "0.005", None, "12.345", "99.995", "-0.500", "0.500", "1.000", "2.000"],
    strict=True,
))
NUMBER_SCHEMA = "x double, y double, f float, n bigint, i int, t string, d string"
# each answered by Spark SQL over every row (one query for all)
NUMBER_FUNCTIONS = [
    "round(y) = 3", "round(y, 2) = 2.68", "round(y, 2) = 1.01", "round(y, -1) = 0", "round(y) = 0",
    "round(x, 1) = 2.5", "round(n, -1) = -130", "round(i, -2) = 100", "round(n, 2) = n", "round(t) = 3",
    "round(f, 1) > 2.6", "round(d, 2) = 1.26", "round(d, -1) = 0", "round(d, 1) = 100.0", "round(x, -400) = 0",
    "round(CAST(i AS SMALLINT), -1) = 130", "round(y / 8, 3) = 0.313", "round(-y) = -3",
    "floor(y) = 2", "ceil(y) = -2", "floor(-y) = -3", "ceil(y / 2) = 1", "floor(n / 8) = 15", "floor(d) = 1",
    "ceil(d) = -1", "ceiling(n) = 125", "floor(y) = -2", "floor(x * 0) = 0", "ceil(x * 0) = 0", "ceil(f) = 3", "floor(t) = 2",
    "greatest(y, n) > 100", "least(y, n) < 0", "greatest(y, 0) = y", "least(x, 1) = 1", "isnan(greatest(x, 1))",
    "NOT isnan(least(x, 1))", "greatest(n, i) = 125", "greatest(n, d) > 100", "greatest(t, '3') = '3'",
    "least(y, NULL, n) < 0", "greatest(y > 1, n > 1)", "greatest(f, y) > 2", "least(n, 2.5) = 2.5",
    "nanvl(x, 0) = 0", "nanvl(x, 10 div n) IS NULL", "nanvl(y, 1) > 2", "nanvl(n, 1) = 1", "nanvl(x, NULL) IS NULL",
    "n * 0.1 = 0.7", "0.1 + 0.2 = 0.3 AND n = 7", "y + 7.1 = 7.6", "i * 1.1 = 7.7", "n / 10 = 0.7", "y * 1e0 = 0.5",
    "n / 0.3 = 23.333333", "d / 3 = 0.418333", "d * 1.5 = 1.8825", "d + 0.0005 = 1.2555", "i / 0.7 = 10",
    "1 / 3.0 = 0.333333 AND n = 7", "d / CAST(3 AS DECIMAL(20, 10)) > 0.418333333333",
    "(NULL + NULL) IS NULL", "(NULL * n) IS NULL", "try_divide(NULL, y) IS NULL", "nanvl(x * 0, n) = 0", "isnan(nanvl(x, x))", "x % 7 = 1 AND x > 1e299", "y % 7 = 5 AND y > 1e18", "pmod(-y, 7) = 2 AND y > 1e18",
]
# each refused by Spark SQL (some row raises, or the types do not go together)
NUMBER_FUNCTIONS_REFUSED = [
    "floor(x) = 2", "ceil(x) > 0", "floor(y * 2) > 0", "round(CAST(i AS TINYINT), -1) = 100", "round(CAST(n AS INT) * 20000000, -1) > 0",
    "greatest(n, t) = 1", "nanvl(t || 'x', 1) > 1", "(x > 0) % 2 = 1", "(y > 0) / 2 > 0", "(n > 0) div 2 = 0",
    "(t + NULL) IS NULL", "(NULL * t) IS NULL", "((x > 0) - NULL) IS NULL", "try_add(t, NULL) IS NULL",
    "pmod(NULL, t) IS NULL", "NULL div t IS NULL", "t + t > 0", "(x > 0) + 1 > 0", "(y > 0) * n > 0",
    "x div NULL IS NULL",
]


@pytest.mark.spark
def test_number_functions_answer_as_in_spark_sql(spark):
    """round, floor, ceil, greatest, least and nanvl over NaN, infinities, -0.0,
    huge, halfway and NULL values of every numeric type and of text, and literals
    with a point as the decimals Spark SQL types them (``0.1 + 0.2 = 0.3``), their
    arithmetic of the precision and scale Spark's rules give (``7 / 0.3`` is
    23.333333): over Spark's
    own Arrow batch, each condition gives Spark SQL's answers, or is refused where
    Spark's query fails."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(NUMBER_ROWS, NUMBER_SCHEMA).withColumn("d", F.col("d").cast("decimal(6,3)"))
    _agree_with_spark(frame, NUMBER_FUNCTIONS, NUMBER_FUNCTIONS_REFUSED)


# instants (in UTC and at +05:00), wall clocks, dates and ISO text of each
DATE_ROWS = [
    (datetime.datetime(2024, 1, 1, 23, 59, 58, 900000, tzinfo=datetime.UTC), datetime.datetime(2024, 12, 30, 0, 0, 1),
     datetime.date(2024, 2, 29), "2024-03-10 05:06:07"),
    (datetime.datetime(2023, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
     datetime.datetime(2021, 1, 3, 12, 30), datetime.date(2021, 1, 3), "2024-03-10T05:06:07+01:00"),
    (datetime.datetime(2020, 12, 31, 12, tzinfo=datetime.UTC), datetime.datetime(2027, 1, 1), datetime.date(2026, 12, 31),
     "2027-01-01"),
    (None, None, None, None),
]
DATE_SCHEMA = "at timestamp, wall timestamp_ntz, day date, t string"
DATE_FUNCTIONS = [
    "year(at) = 2022", "year(wall) = 2027", "year(day) = 2024", "year(t) = 2024", "quarter(wall) = 4", "quarter(day) = 1",
    "month(at) = 12", "month(t) = 3", "day(day) = 29", "dayofmonth(at) = 31", "dayofmonth(t) = 10",
    "dayofyear(day) = 3", "dayofyear(at) = 366", "dayofweek(at) = 7", "dayofweek(day) = 5", "dayofweek(wall) = 2",
    "dayofweek(t) = 1", "weekofyear(wall) = 53", "weekofyear(day) = 9", "weekofyear(at) = 1", "weekofyear(t) = 10",
    "hour(at) = 19", "hour(wall) = 12", "hour(day) = 0", "hour(t) = 4", "minute(wall) = 30", "minute(t) = 6",
    "second(at) = 58", "second(wall) = 1", "hour(at) BETWEEN 0 AND 5 OR dayofweek(at) IN (1, 7)",
    "to_date(at) = DATE '2022-12-31'", "to_date(wall) = day", "to_date(t) = DATE '2024-03-10'", "datediff(day, at) = 59",
    "datediff(wall, day) = 0", "datediff(t, day) > 0", "datediff(at, '2024-01-01') = 0", "date_add(day, 1) = DATE '2024-03-01'",
    "date_add(at, 1) = DATE '2023-01-01'", "date_add(t, 1) = DATE '2024-03-11'", "date_sub(day, 1) = DATE '2021-01-02'",
    "date_add(day, '2') = DATE '2024-03-02'", "datediff(date_add(day, 30), day) = 30", "datediff(day, NULL) IS NULL",
    "day + 1 = DATE '2024-03-01'", "1 + day = DATE '2027-01-01'", "day - 1 = DATE '2021-01-02'", "(day - 1) IS NULL",
    "day + CAST(2 AS SMALLINT) = DATE '2021-01-05'", "try_add(day, 1) = DATE '2024-03-01'",
    "try_subtract(day, 1) = DATE '2021-01-02'", "datediff(day + 30, day) = 30", "(day + NULL) IS NULL",
    "(at - NULL) IS NULL", "try_add(NULL, day) IS NULL", "date_sub(wall, 365) < DATE '2024-01-01'", "CAST(at AS DATE) = DATE '2022-12-31'", "CAST(wall AS DATE) = day",
    "CAST(day AS TIMESTAMP) < at", "CAST(day AS TIMESTAMP_NTZ) <= wall", "CAST(wall AS TIMESTAMP) > at",
    "CAST(at AS TIMESTAMP_NTZ) = TIMESTAMP_NTZ '2022-12-31 19:00:00'", "CAST(t AS TIMESTAMP) > at",
    "CAST(1700000000 AS TIMESTAMP) > at", "CAST(year(at) AS TIMESTAMP) < at", "CAST(t AS TIMESTAMP_NTZ) > wall",
    "hour(CAST(t AS TIMESTAMP)) = 4", "TRY_CAST(t || 'x' AS TIMESTAMP) IS NULL", "CAST(4.7 AS INT) + 1 = dayofweek(day)", "at < wall",
]
DATE_FUNCTIONS_REFUSED = [
    "hour(2) = 1", "year(at) * 2000000 > 0", "hour(t || 'x') = 1", "month(at > wall) = 1", "date_add(day, 1L) IS NULL",
    "date_add(day, 1.5) IS NULL", "to_date(2) IS NULL", "datediff(t || 'x', day) > 0",
    "CAST(1700000000 AS TIMESTAMP_NTZ) > wall", "CAST(t || 'x' AS TIMESTAMP) > at", "CAST(day AS BIGINT) > 0",
    "day + 1L > day", "day + t > day", "day - day > 0", "1 - day > day", "day * 2 > day", "day + 1.5 > day",
    "at + 1 > at", "wall - 1 < wall", "pmod(day, 1) > 0", "(day * NULL) IS NULL", "(at / NULL) IS NULL",
]

# seconds of instants, wall clocks, dates and text; truncation of each kind; months added at a month's end
TIME_FUNCTIONS = [
    "unix_timestamp(at) = 1704153598", "unix_timestamp(wall) = 1735516801", "unix_timestamp(day) = 1709164800",
    "CASE WHEN t LIKE '____-__-__ __:__:__' THEN unix_timestamp(t) = 1710047167 END", "to_unix_timestamp(at) < 1704153599",
    "date_trunc('HOUR', at) = TIMESTAMP '2024-01-01 23:00:00'", "date_trunc('WEEK', at) = TIMESTAMP '2024-01-01 00:00:00'",
    "date_trunc('QUARTER', wall) = TIMESTAMP '2024-10-01 00:00:00'", "date_trunc('YY', day) = TIMESTAMP '2024-01-01 00:00:00'",
    "date_trunc('MINUTE', t) = TIMESTAMP '2027-01-01 00:00:00'", "date_trunc('SECOND', at) < at", "date_trunc('mon', wall) < wall",
    "trunc(day, 'MM') = DATE '2024-02-01'", "trunc(at, 'QUARTER') = DATE '2022-10-01'", "trunc(wall, 'WEEK') = DATE '2024-12-30'",
    "trunc(t, 'YEAR') = DATE '2027-01-01'", "add_months(day, 12) = DATE '2025-02-28'", "add_months(day, -1) = DATE '2020-12-03'",
    "add_months(at, 1) = DATE '2024-02-01'", "add_months(t, 2) = DATE '2024-05-10'", "last_day(day) = DATE '2024-02-29'",
    "last_day(wall) = DATE '2021-01-31'", "last_day(at) = DATE '2022-12-31'",
]
TIME_FUNCTIONS_REFUSED = ["unix_timestamp(t) > 0", "last_day(2) IS NULL"]


@pytest.mark.spark
def test_time_functions_answer_as_in_spark_sql(spark):
    """unix_timestamp, date_trunc, trunc, add_months and last_day over instants,
    wall clocks, dates and text, in a UTC session: each gives Spark SQL's answers or
    is refused where Spark's query fails (text unix_timestamp cannot parse)."""
    _agree_with_spark(spark.createDataFrame(DATE_ROWS, DATE_SCHEMA), TIME_FUNCTIONS, TIME_FUNCTIONS_REFUSED, DATE_ROWS)


@pytest.mark.spark
def test_date_functions_answer_as_in_spark_sql(spark):
    """year, quarter, month, day, dayofyear, dayofweek, weekofyear, hour, minute,
    second, to_date, datediff, date_add, date_sub and casts between dates and
    timestamps of instants (a UTC session's parts), wall clocks, dates and text, over
    Spark's own Arrow batch and over the local runtime's table of tuples, give Spark
    SQL's answers, or are refused where Spark's query fails."""
    _agree_with_spark(spark.createDataFrame(DATE_ROWS, DATE_SCHEMA), DATE_FUNCTIONS, DATE_FUNCTIONS_REFUSED, DATE_ROWS)


# text Spark reads as a date and a timestamp (the part after a date's day aside), and text it does not
READABLE_TIMES = [
    "2024", "2024-1", "2024-1-5", "2024-01-05 9:3:7", "2024-01-05T09:30", "2024-01-05 09:30:00.123456789",
    "2024-01-05 09:30:00 UTC", "2024-01-05 09:30:00Z", "2024-01-05 09:30:00 +01:00", "2024-01-05 09:30:00+0100",
    "2024-01-05 09:30:00 America/New_York", "2024-01-05T09:30:00GMT+1", "2024-01-05 09:30:00.5-02:30", "+2024-01-05 ",
    "2024-01-05 09", "2024-12-31 23:59:59.999999",
]
UNREADABLE_TIMES = ["2024-13-01", "2024-02-30", "2024/01/05", "20240105", "1e1", "24", "2024-01-05 24:00:00", "2024-01-05 x"]


@pytest.mark.spark
def test_text_reads_as_dates_and_timestamps_as_spark_sql_reads_it(spark):
    """A string literal compared with a timestamp, a wall clock or a date is read as
    Spark SQL casts it (partial dates, 1-digit parts, a zone as an offset, a name or
    a region; a wall clock ignores the zone): over Spark's Arrow batch and the local
    table, each comparison gives Spark SQL's answers; text Spark cannot read is
    refused as Spark refuses it."""
    rows = [
        (datetime.datetime(2024, 1, 5, 9, 30, tzinfo=datetime.UTC), datetime.datetime(2024, 1, 5, 9, 30), datetime.date(2024, 1, 5)),
        (datetime.datetime(2024, 1, 5, 8, 30, tzinfo=datetime.UTC), datetime.datetime(2024, 1, 1), datetime.date(2023, 12, 31)),
        (datetime.datetime(2024, 1, 5, 14, 30, tzinfo=datetime.UTC), datetime.datetime(2024, 1, 5, 12), datetime.date(2024, 1, 6)),
    ]
    frame = spark.createDataFrame(rows, "at timestamp, wall timestamp_ntz, day date")
    conditions = [f"{field} {op} '{text}'" for text in READABLE_TIMES for field in ("at", "wall", "day") for op in ("<", "=")]
    refused = [f"at = '{text}'" for text in UNREADABLE_TIMES]
    answers = _agree_with_spark(frame, conditions, refused, rows, each_true=False)
    assert sum(True in expected for expected in answers) > len(conditions) // 3


# NaN, -0.0, a negative, an infinity; characters of two bytes, empty and NULL text
MORE_ROWS = [(math.nan, 4, "banana", ""), (-0.0, None, "Ábc", "a"), (-4.0, -1, None, None), (math.inf, 0, "aXa", "X"),
             (2.25, 7, "", "an")]
MORE_SCHEMA = "x double, n bigint, k string, s string"
MORE_FUNCTIONS = [
    "sqrt(x) = 1.5", "isnan(sqrt(x))", "sqrt(n) = 2", "isnan(sqrt(n))", "sign(x) = -1", "isnan(sign(x))", "signum(n) = 0",
    "nullif(n, 4) IS NULL", "nullif(k, s) = 'Ábc'", "nvl2(n, 1, 2) = 2", "nvl2(k, k, 'none') = 'none'",
    "instr(k, 'an') = 2", "instr(k, '') = 1", "instr(k, 'b') = 2", "locate('X', k) = 2", "instr(n, '1') = 2",
    "left(k, 2) = 'Áb'", "right(k, 2) = 'Xa'", "left(k, -1) = ''", "right(k, 0) = ''", "right(k, 10) = k",
    "right(k, 3) = 'ana'", "left(n, 1) = '-'", "replace(k, 'a', 'o') = 'bonono'", "replace(k, 'a') = 'X'",
    "replace(k, '', 'x') = k", "sqrt(x) = 0", "sign(x) = 0", "isnull(n)", "isnotnull(k) AND isnull(n)",
    "coalesce(concat(k, ' '), s) = 'banana '", "nullif(concat(' ', k), 'x') = ' aXa'",
    "CASE WHEN n > 0 THEN concat(k, ' ') END = 'banana '", "IF(n IS NULL, concat(' ', k), s) = ' Ábc'",
]
MORE_FUNCTIONS_REFUSED = [
    "1 / sqrt(x) < 0", "1 / sign(x) < 0", "sqrt(k) > 0", "nullif(n, 'x') IS NULL", "nvl2(n, 'a', 2) = 2", "isnull(n, k)",
]
# logarithms of zero, -0.0 and negatives (NULL), of NaN and infinity; Java's pow where C's differs; NaN kept
# from > by x < 3 (it exceeds every number in Spark SQL, none in Python, as the module says)
MATH_FUNCTIONS = [
    "ln(x) > 0 AND NOT isnan(x)", "ln(x) IS NULL", "isnan(ln(x))", "log(x) < 1", "log10(n) IS NULL", "log10(x) > 0.3 AND x < 3", "log2(n) > 2",
    "log2(x) IS NULL", "log(2, x) > 1 AND x < 3", "log(x, 8) > 1 AND x < 3", "log(n, x) IS NULL", "log(0.5, n) < 0", "exp(x) > 1 AND x < 3",
    "exp(n) < 1", "cbrt(x) < 0", "cbrt(n) > 1.9", "pow(x, 2) > 5 AND x < 3", "pow(n, 0.5) = 2", "power(x, n) > 1 AND x < 3",
    "isnan(pow(1, x))", "pow(x, 0) = 1", "isnan(power(-1, x))", "pow(n, -1) > 0.2", "pow(x, 0.5) = 1.5",
    "bround(x) = 2", "bround(x, 1) = 2.2", "round(x, 1) = 2.3", "bround(n, -1) = 0", "bround(n, -1) = 10",
    "bround(2.5) = bround(1.5)", "bround(-0.5) = 0", "log10(1000) = 3 AND n IS NOT NULL",
    "log(10, 1000) = 3 OR n IS NULL", "log2(8) = 3 AND x < 3",
]
# groups that take part, repeat, take no part, are named; the whole match; no match; a digit class
REGEXP_FUNCTIONS = [
    "regexp_extract(k, '(a)(n)', 2) = 'n'", "regexp_extract(k, 'b(an)+', 0) = 'banan'", "regexp_extract(k, 'b(an)+', 1) = 'an'",
    "regexp_extract(k, '(X)|(q)', 2) = ''", "regexp_extract(k, '(X)|(q)', 1) = 'X'", "regexp_extract(k, 'q', 0) = ''",
    "regexp_extract(k, '(?i)(x)', 1) = 'X'", "regexp_extract(k, '(?<v>[aeiou])(.)', 2) = 'n'", "regexp_extract(k, 'Á(b)') = 'b'",
    "regexp_extract(n, '(\\\\d)', 1) = '4'", "regexp_extract(k, 'q+', 2) = ''", "regexp(k, 'X')", "regexp_extract(k, '\\\\Q(a)\\\\E|(b)', 1) = 'b'",
    "split(k, 'a')[0] = 'b'", "size(split(k, 'a')) = 4", "size(split(k, 'a')) = 3", "size(split(k, 'a', 2)) = 2",
    "element_at(split(k, 'a', 2), -1) = 'nana'", "array_contains(split(k, '[aeiou]'), 'n')", "split(k, 'a', 0)[0] = 'b'",
    "CASE WHEN k LIKE '%X%' THEN split(k, 'X')[1] = 'a' END", "size(split(n, '-')) = 2", "split(s, 'a')[0] = ''",
]
REGEXP_FUNCTIONS_REFUSED = ["split(k, 'a')[1] = 'x'", "regexp_extract(k, 'a+', 1) = ''", "regexp_extract(k, '(a)', -1) = ''", "regexp_extract(k, 'a', 1.5) = ''"]
# padding, cutting and repeating; two-byte characters; numbers read as text; duplicates in translate's from
TEXT_FUNCTIONS = [
    "lpad(k, 8, 'xy') = 'xybanana'", "lpad(k, 2) = 'ba'", "lpad(k, 2, '') = 'ba'", "lpad(k, 3) = '   '", "lpad(k, -1) = ''",
    "rpad(k, 5, 'Xy') = 'ÁbcXy'", "rpad(k, 4, 'é') = 'aXaé'", "initcap(k) = 'Banana'", "initcap(k) = 'Axa'",
    "initcap(concat(k, ' x-y  z')) = 'Banana X-y  Z'", "reverse(k) = 'ananab'", "reverse(k) = 'cbÁ'",
    "translate(k, 'an', 'o') = 'booo'", "translate(k, 'aa', 'xy') = 'xXx'", "repeat(k, 2) = 'aXaaXa'", "repeat(k, 0) = ''",
    "repeat(n, 2) = '44'", "ascii(k) = 98", "ascii(k) = 193", "ascii(k) = 0", "ascii(n) = 45", "octet_length(k) = 4",
    "bit_length(k) = 48", "octet_length(n) = 2", "btrim(k, 'ab') = 'nan'", "btrim(s) = 'an'", "btrim(k, 'a') = 'X'",
]
# negated and quantified text tests: NOT over each pattern (NOT LIKE ANY holds where some pattern fails)
LIKE_TESTS = [
    "k NOT LIKE 'b%'", "k NOT ILIKE 'áB%'", "NOT k NOT LIKE 'b%'", "k LIKE ANY ('b%', '%a')", "k LIKE SOME ('%X%')",
    "k ILIKE ANY ('x', '%x%')", "k LIKE ALL ('%a%', '%n%')", "k NOT LIKE ANY ('b%', '%a')", "k NOT LIKE ALL ('b%', '%a')",
    "k NOT ILIKE ALL ('A%', '%C')", "n NOT LIKE '-%'", "k NOT RLIKE 'a.a'", "NOT k LIKE ANY ('%a%')",
    "(k NOT LIKE ANY ('b%')) IS NULL",
]
LIKE_TESTS_REFUSED = ["k LIKE ANY ('b%', s)", "k NOT LIKE ALL (s)"]
TEXT_FUNCTIONS_REFUSED = ["lpad(k) = 'x'", "initcap(k, 'x') = 'a'", "repeat(k) = ''", "btrim(k, 'a', 'b') = ''"]
# arrays with and without NULL elements, empty and NULL ones
ARRAY_ROWS = [(["x", "y"], [1, None], "x", 1), ([], [], "y", 0), (None, [3], None, None), (["y", None], [2, 5], "q", 2)]
ARRAY_SCHEMA = "tags array<string>, nums array<bigint>, k string, n bigint"
ARRAY_FUNCTIONS = [
    "array_contains(tags, 'x')", "array_contains(tags, 'q') IS NULL", "array_contains(tags, k)", "array_contains(nums, n)",
    "array_contains(nums, 5)", "NOT array_contains(tags, 'x')", "size(tags) = 2", "size(tags) IS NULL", "cardinality(nums) = 1",
    "size(tags) = 0", "try_element_at(tags, 2) = 'y'", "try_element_at(tags, -1) IS NULL", "try_element_at(nums, 3) IS NULL",
    "CASE WHEN size(tags) > 1 THEN element_at(tags, 2) = 'y' END", "CASE WHEN size(tags) > 0 THEN tags[0] = 'x' END",
    "CASE WHEN size(nums) > 0 THEN element_at(nums, -1) = 5 END", "array_contains(nums, 2.0)",
]
ARRAY_FUNCTIONS_REFUSED = [
    "element_at(tags, 1) = 'x'", "tags[0] = 'x'", "tags[-1] = 'x'", "element_at(tags, 0) = 'x'", "size(k) > 0",
    "array_contains(nums, 'a')", "tags[n] = 'x'", "array_contains(tags, 1)", "array_contains(nums, '5')",
]
MATH_FUNCTIONS_REFUSED = ["ln(k) IS NULL", "pow(x, k) > 0", "bround(x, n) = 2", "log10(x, 2) > 0", "pow(x) > 1"]


@pytest.mark.spark
def test_more_functions_answer_as_in_spark_sql(spark):
    """sqrt, sign, nullif, nvl2, isnull, isnotnull, instr / locate, left, right and replace over NaN,
    -0.0 (whose square root and sign keep its sign: 1 / it divides by zero, an error
    as in Spark), negative, infinite, NULL and two-byte values: over Spark's Arrow
    batch and the local table, each gives Spark SQL's answers or is refused where
    Spark's query fails."""
    _agree_with_spark(spark.createDataFrame(MORE_ROWS, MORE_SCHEMA), MORE_FUNCTIONS, MORE_FUNCTIONS_REFUSED, MORE_ROWS)


@pytest.mark.spark
def test_math_functions_answer_as_in_spark_sql(spark):
    """exp, ln / log, log10, log2, log(base, x), pow / power, cbrt and bround (half
    to even) over NaN, -0.0, negatives, infinities, NULL and text that is no number
    (an error where read, as Spark's cast): each gives Spark SQL's answers or is
    refused where Spark refuses the query; ``log10(1000)`` is 3 where ``log(10,
    1000)`` is not, as there."""
    _agree_with_spark(spark.createDataFrame(MORE_ROWS, MORE_SCHEMA), MATH_FUNCTIONS, MATH_FUNCTIONS_REFUSED, MORE_ROWS)


@pytest.mark.spark
def test_regexp_extract_answers_as_in_spark_sql(spark):
    """regexp_extract takes the group Java's matcher numbers (named groups counted,
    a repeated group's last text, empty where no match or the group takes no part)
    and fails where it matches but has no such group; split keeps empty pieces, at
    the ends too, and a limit's last piece holds the rest: as Spark SQL."""
    _agree_with_spark(spark.createDataFrame(MORE_ROWS, MORE_SCHEMA), REGEXP_FUNCTIONS, REGEXP_FUNCTIONS_REFUSED, MORE_ROWS)


@pytest.mark.spark
def test_text_functions_answer_as_in_spark_sql(spark):
    """lpad / rpad, btrim, initcap, reverse, translate, repeat, ascii, octet_length
    and bit_length over two-byte characters, empty and NULL text and numbers read
    as text: each gives Spark SQL's answers or is refused where Spark refuses it."""
    _agree_with_spark(spark.createDataFrame(MORE_ROWS, MORE_SCHEMA), TEXT_FUNCTIONS, TEXT_FUNCTIONS_REFUSED, MORE_ROWS)


@pytest.mark.spark
def test_negated_and_quantified_text_tests_answer_as_in_spark_sql(spark):
    """``NOT LIKE`` / ``NOT ILIKE`` (however sqlglot's version parses them), and
    ``LIKE`` / ``ILIKE`` with ``ANY`` / ``SOME`` / ``ALL``, ``NOT`` negating each
    pattern, over two-byte characters, empty and NULL text and numbers read as text:
    each gives Spark SQL's answers; a pattern that is not a string literal is refused."""
    frame = spark.createDataFrame(MORE_ROWS, MORE_SCHEMA)
    answers = _agree_with_spark(frame, LIKE_TESTS, [], MORE_ROWS)
    assert False in answers[0] and False in answers[2]  # a NOT LIKE and its NOT: not all TRUE, so the rows tell
    for condition in LIKE_TESTS_REFUSED:
        with pytest.raises(DefinitionError, match="string literal"):
            Expression(condition)


# quotes in string literals: doubled, escaped, the other kind, adjacent literals joined
QUOTE_ROWS = [("it's",), ('say "hi"',), ("its",), (None,)]
QUOTED = [
    "k = 'it''s'", "k = \"it's\"", "k = 'it\\'s'", "k = 'say \"hi\"'", "k = \"say \"\"hi\"\"\"", "k = 'it' 's'",
    "k LIKE '%''%'", "concat(k, '''') = 'its'''", "length('''') = 1 AND k IS NULL", "k IN ('it''s', 'x')",
]


@pytest.mark.spark
def test_quotes_in_string_literals_read_as_in_spark_sql(spark):
    """A quote written twice inside a string literal is one quote, as Spark SQL
    reads it (``'it''s'``), a backslash escapes one, the other kind of quote is
    itself, and adjacent literals are joined (``'it' 's'`` is ``its``): each gives
    Spark SQL's answers; ``BETWEEN SYMMETRIC``, which Spark SQL does not parse, is
    refused."""
    frame = spark.createDataFrame(QUOTE_ROWS, "k string")
    _agree_with_spark(frame, QUOTED, ["k BETWEEN SYMMETRIC 'z' AND 'a'"], QUOTE_ROWS)


# pmod (Java's wrapping where a whole number's sum overflows), positive / negative (and -x, abs(x)) of numbers and
# of text read as DOUBLE, equal_null, nullifzero / zeroifnull, e() / pi(), decode (NULL matching NULL)
SPARK_FUNCTIONS = [
    "pmod(n, 3) = 1", "pmod(n, -3) = -1", "pmod(x, 2) = 0.25 AND x < 3", "pmod(x, -1.5) < 0 AND x < 3",
    "pmod(CAST(n AS INT), CAST(-2147483648 AS INT)) = 2147483647", "pmod(n, 2.5) = 1.5", "pmod(n, NULL) IS NULL",
    "positive(n) = 7", "negative(n) = 1", "negative(x) = 4", "-x = 4", "abs(x) = 4", "negative('5') = -5",
    "equal_null(n, NULL)", "equal_null(k, s)", "equal_null(n, '4')", "nullifzero(n) IS NULL", "nullifzero(x) IS NULL",
    "zeroifnull(n) = 0", "pi() > x AND x > 2", "e() > x AND x > 2", "decode(n, 4, 'four', NULL, 'none', 'other') = 'none'",
    "decode(n, 4, 'four', 7, 'seven') = 'seven'", "decode(k, 'banana', 1) IS NULL", "decode(n, -1, x) = -4",
    "try_divide(n, 0) IS NULL", "try_divide(x, n) = 4", "try_divide(n, n) = 1", "try_divide(x, -0.0) IS NULL AND x < 3",
    "try_add(n, 9223372036854775807) IS NULL AND n > 0", "try_add(n, 9223372036854775807) = 9223372036854775806",
    "try_subtract(n, -9223372036854775807) IS NULL AND n > 1", "try_multiply(CAST(n AS INT), 1000000000) IS NULL AND n > 2",
    "try_multiply(n, 2) = 14", "try_add(x, 1) = 3.25", "try_add(k, 1) IS NULL AND k IS NOT NULL",
    "try_add(s, n) IS NULL AND s IS NOT NULL", "try_mod(n, 0) IS NULL", "try_mod(n, 3) = 1", "try_mod(x, 0) IS NULL AND x < 3",
    "try_mod(n, 2.5) = 1.5", "try_add(n, 2.5) = 6.5", "try_subtract(n, 1) = -2",
]
SPARK_FUNCTIONS_REFUSED = [
    "pmod(k, 2) = 1", "pmod(n, 0) = 0", "positive(s) > 0", "-k > 0", "abs(k) > 0", "equal_null(n) IS NULL",
    "try_add(10 div n, 1) > 0", "try_divide(n, CAST(k AS INT)) > 0", "e(1) > 0", "decode(n, 4, 'a', 7, 2) = 2",
]


@pytest.mark.spark
def test_spark_sqls_own_functions_answer_as_in_spark_sql(spark):
    """pmod, positive, negative, equal_null, nullifzero, zeroifnull, e, pi, decode
    and try_add / try_subtract / try_multiply / try_divide / try_mod (NULL where
    their own operation overflows or divides by zero, or their text is no number;
    an error inside an operand still an error) over NaN, -0.0, negatives,
    infinities, NULL and text: each gives Spark SQL's answers or is refused where
    Spark refuses the query; decode of bytes
    (``decode(k, 'utf-8')``) is refused when the pattern is built."""
    _agree_with_spark(spark.createDataFrame(MORE_ROWS, MORE_SCHEMA), SPARK_FUNCTIONS, SPARK_FUNCTIONS_REFUSED, MORE_ROWS)
    with pytest.raises(DefinitionError, match="DECODE"):
        Expression("decode(k, 'utf-8') IS NULL")


# Unicode's full case mappings, as Java's: one character to two, a final sigma, a title-case letter
UNICODE_ROWS = [("straße",), ("İstanbul",), ("ΣΑΣ",), ("ǆemal",), ("ﬁne",), ("ok",), (None,)]
UNICODE_CASES = [
    "upper(k) = 'STRASSE'", "lower(k) = 'σας'", "initcap(k) = 'ǅemal'", "initcap(k) = 'Fine'", "upper(k) = 'FINE'",
    "length(lower(k)) = 9", "initcap(k) = 'İstanbul'", "initcap(k) = 'Σας'", "upper(k) = 'OK'", "initcap(concat(k, ' ß')) = 'Ok Ss'",
]


@pytest.mark.spark
def test_case_mappings_are_unicodes_full_ones_as_in_spark_sql(spark):
    """upper, lower and initcap map a character to several where Unicode says so,
    as Java (and so Spark SQL) does (``upper('straße')`` is ``'STRASSE'``); a POSIX
    class in a regular expression (``[[:alpha:]]``), which Java reads as the
    characters it lists and RE2 as a class, is refused when the pattern is built."""
    _agree_with_spark(spark.createDataFrame(UNICODE_ROWS, "k string"), UNICODE_CASES, [], UNICODE_ROWS)
    for condition in ("k RLIKE '[[:alpha:]]'", "regexp_extract(k, '([[:digit:]]+)', 1) = '1'", "size(split(k, '[[:space:]]')) = 2"):
        with pytest.raises(DefinitionError, match="POSIX class"):
            Expression(condition)


@pytest.mark.spark
def test_array_functions_answer_as_in_spark_sql(spark):
    """array_contains (NULL where no element equals but one is NULL), size /
    cardinality (NULL for NULL), element_at / a[i] / try_element_at (an index beyond
    an array an error where read, as under ANSI SQL; NULL with try_) over arrays
    with NULL elements, empty and NULL arrays: each gives Spark SQL's answers or is
    refused where Spark's query fails."""
    _agree_with_spark(spark.createDataFrame(ARRAY_ROWS, ARRAY_SCHEMA), ARRAY_FUNCTIONS, ARRAY_FUNCTIONS_REFUSED, ARRAY_ROWS)


# maps with and without a key, with a NULL value, empty and NULL ones; text and whole-number keys
MAP_ROWS = [({"country": "NO", "x": None}, {1: "a"}, "country"), ({}, {2: "b"}, "x"), (None, None, None), ({"x": "y"}, {}, "q")]
MAP_SCHEMA = "attrs map<string, string>, nums map<bigint, string>, k string"
MAP_FUNCTIONS = [
    "attrs['country'] = 'NO'", "attrs['missing'] IS NULL", "element_at(attrs, 'x') = 'y'",
    "try_element_at(attrs, 'nope') IS NULL", "attrs.country = 'NO'", "attrs['COUNTRY'] IS NULL", "attrs['x'] IS NULL",
    "map_contains_key(attrs, 'x')", "NOT map_contains_key(attrs, 'x')", "size(attrs) = 0", "cardinality(nums) = 1",
    "size(attrs) IS NULL", "nums[1] = 'a'", "element_at(nums, 2) = 'b'", "map_contains_key(nums, 2)", "attrs[1] IS NULL",
    "nums['2'] = 'b'",
]
MAP_FUNCTIONS_REFUSED = ["nums['x'] = 'a'", "map_contains_key(attrs, 1)", "map_contains_key(nums, '2')", "element_at(k, 'x') = 'a'", "size(k) > 0"]


@pytest.mark.spark
def test_map_functions_answer_as_in_spark_sql(spark):
    """m['key'], m.key, element_at / try_element_at (NULL for a missing key),
    map_contains_key and size / cardinality over maps with text and whole-number
    keys, empty and NULL maps, from Spark's batch: each gives Spark SQL's answers or is refused where Spark's query fails."""
    _agree_with_spark(spark.createDataFrame(MAP_ROWS, MAP_SCHEMA), MAP_FUNCTIONS, MAP_FUNCTIONS_REFUSED)


INT_CONDITIONS = [
    "n * 1000000 > 0", "n * 1000000L > 0", "n * 3000000000 > 0", "n + 2147483647 > 0", "lo - 1 < 0", "-lo > 0",
    "abs(lo) > 0", "lo div -1 > 0", "lo % -1 = 0", "lo / -1 > 0", "(lo % 7) * 1000 < 0", "big * 1000000 > 0",
    "length(kind) + 2147483647 > 0", "CASE WHEN n > 0 THEN 2147483647 ELSE 1 END + 1 > 0", "n * 2 = 10000",
]


@pytest.mark.spark
@pytest.mark.parametrize("rows", [[(5000, 3000000000, -2147483648, "ok")], [(5, 1, 7, None), (None, None, -7, "fail")]])
def test_whole_number_literals_are_ints_as_in_spark_sql(spark, rows):
    """A literal that fits an INT is one, so an INT field's arithmetic with it
    overflows where Spark's does (an error), a BIGINT literal or field widens it, and
    ``div`` / ``%`` of the least INT by -1 do not overflow (Spark computes them in 64
    bits): over Spark's own Arrow batch (INT fields as int32), each condition gives
    Spark SQL's answers or is refused where Spark's query fails."""
    frame = spark.createDataFrame(rows, "n int, big bigint, lo int, kind string")
    table = frame.toArrow()
    for condition in INT_CONDITIONS:
        expected = _spark_answers(frame, condition)
        assert _answers(lambda c=condition: Expression(c).evaluate(table).to_pylist()) == expected, condition


def test_a_name_that_fields_share_but_for_case_is_ambiguous():
    class Cased(NamedTuple):
        kind: str
        KIND: str

    table = records_table([Cased("a", "b")], Cased._fields, None)
    assert Expression("KIND = 'b'").evaluate(table).to_pylist() == [True]  # an exact match first
    with pytest.raises(ValueError, match="ambiguous: the events have 'kind', 'KIND'"):
        Expression("Kind = 'a'").evaluate(table)


@pytest.mark.parametrize("layout", ["large_string", "string_view"])
@settings(max_examples=100, deadline=None)
@given(condition=spark_conditions, rows=st.lists(readings, min_size=1, max_size=6))
def test_text_in_arrows_other_layouts_is_read_as_text(layout, condition, rows):
    """Text given as Arrow's large_string (Spark's batches with useLargeVarTypes) or
    string_view (Polars), as a field or inside a struct, gives the answers plain
    text gives."""
    import pyarrow as pa

    table = records_table(rows, Reading._fields, None)
    other = table.cast(pa.schema([
        pa.field(f.name, getattr(pa, layout)() if pa.types.is_string(f.type) else f.type) for f in table.schema
    ]))
    expected = _answers(lambda: Expression(condition).evaluate(table).to_pylist())
    assert _answers(lambda: Expression(condition).evaluate(other).to_pylist()) == expected
    nested = pa.table({"r": pa.StructArray.from_arrays([c.combine_chunks() for c in other.columns], names=other.column_names)})
    in_struct = condition
    for name in Reading._fields:  # every field read as r.<field> (a function of its name, day(...), stays)
        in_struct = re.sub(rf"\b({name})\b(?!\s*\()", r"r.\1", in_struct, flags=re.IGNORECASE)
    assert _answers(lambda: Expression(in_struct).evaluate(nested).to_pylist()) == expected, in_struct
