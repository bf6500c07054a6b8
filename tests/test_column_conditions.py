"""Spark Column conditions: written back as SQL text, they mean what the Column means
(SQL's three-valued logic, checked against a model), from a classic session's
Columns and from Spark Connect's alike."""

from __future__ import annotations

import datetime
import decimal
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError
from statemachines.library import Pattern
from statemachines.library.expressions import Expression, records_table
from tests.test_expressions import Login, _and, _not, _or, logins

pytestmark = pytest.mark.spark


def _half_up(x):
    """``x`` rounded to a whole number, halves away from zero (Spark SQL's ``round``)."""
    return int(decimal.Decimal(repr(x)).quantize(decimal.Decimal(1), decimal.ROUND_HALF_UP))


def _field(name, test):
    """A model reading one field: NULL when the field is NULL."""
    return lambda e: None if getattr(e, name) is None else test(getattr(e, name))


# (make, model): make(F) builds the Column with the functions module F
ATOMS = [
    (lambda F: F.col("kind") == "fail", _field("kind", lambda k: k == "fail")),
    (lambda F: F.col("kind") != "ok", _field("kind", lambda k: k != "ok")),
    (lambda F: F.col("amount") > 5, _field("amount", lambda a: a > 5)),
    (lambda F: F.col("amount") <= 20, _field("amount", lambda a: a <= 20)),
    (lambda F: F.col("kind").isNull(), lambda e: e.kind is None),
    (lambda F: F.col("amount").isNotNull(), lambda e: e.amount is not None),
    (lambda F: F.col("kind").isin("fail", "view"), _field("kind", lambda k: k in ("fail", "view"))),
    (lambda F: F.col("amount").between(5, 20), _field("amount", lambda a: 5 <= a <= 20)),
    (lambda F: F.col("kind").like("f%"), _field("kind", lambda k: k.startswith("f"))),
    (lambda F: F.col("amount") * 2 > 30, _field("amount", lambda a: a * 2 > 30)),
    (lambda F: -F.col("amount") < -10, _field("amount", lambda a: -a < -10)),
    (lambda F: F.col("amount").eqNullSafe(None), lambda e: e.amount is None),
    (lambda F: F.coalesce(F.col("amount"), F.lit(0)) == 0, lambda e: (e.amount or 0) == 0),
    (lambda F: F.lower(F.col("kind")) == "ok", _field("kind", lambda k: k.lower() == "ok")),
    (lambda F: F.expr("kind = 'view'"), _field("kind", lambda k: k == "view")),
    (lambda F: F.col("kind") == "it's", _field("kind", lambda k: k == "it's")),
    (lambda F: F.col("kind").startswith("f"), _field("kind", lambda k: k.startswith("f"))),
    (lambda F: F.col("kind").contains("ie"), _field("kind", lambda k: "ie" in k)),
    (lambda F: F.col("kind").rlike("^[fo].?[ak]"), _field("kind", lambda k: re.search("^[fo].?[ak]", k) is not None)),
    (lambda F: F.col("amount") / 4 > 3, _field("amount", lambda a: a / 4 > 3)),
    (lambda F: F.col("amount").cast("string") == "5", _field("amount", lambda a: str(a) == "5")),
    (lambda F: F.col("amount").cast("double") / 8 > 2, _field("amount", lambda a: a / 8 > 2)),
    (lambda F: F.col("kind").try_cast("int").isNull(), lambda e: True),  # no kind is a whole number
    (lambda F: F.when(F.col("amount") > 5, True).otherwise(False), lambda e: e.amount is not None and e.amount > 5),
    (lambda F: ~F.isnan(F.col("amount") / 2), lambda e: True),  # never NaN, nor NULL
    (lambda F: F.round(F.col("amount") / 8) == 2, _field("amount", lambda a: _half_up(a / 8) == 2)),
    (lambda F: F.floor(F.col("amount") / 3) == 1, _field("amount", lambda a: math.floor(a / 3) == 1)),
    (lambda F: F.ceil(F.col("amount") / 3) == 2, _field("amount", lambda a: math.ceil(a / 3) == 2)),
    (lambda F: F.greatest(F.col("amount"), F.lit(10)) == 10, lambda e: e.amount is None or e.amount <= 10),  # NULL skipped
    (lambda F: F.least(F.col("amount"), F.lit(0)) < 0, lambda e: e.amount is not None and e.amount < 0),
    (lambda F: F.pow(F.col("amount"), 2) > 100, _field("amount", lambda a: a * a > 100)),
    (lambda F: F.regexp_extract(F.col("kind"), "(i)(e)", 2) == "e", _field("kind", lambda k: "ie" in k)),
    (lambda F: F.log10(F.col("amount")) >= 1, lambda e: None if e.amount is None or e.amount <= 0 else e.amount >= 10),
    (lambda F: F.bround(F.col("amount") / 10) == 0, _field("amount", lambda a: round(a / 10) == 0)),  # 0.5 to even 0
    (  # no otherwise: NULL
        lambda F: F.when(F.col("kind") == "fail", F.col("amount") > 10),
        lambda e: (None if e.amount is None else e.amount > 10) if e.kind == "fail" else None,
    ),
    (  # the first branch whose condition holds
        lambda F: F.when(F.col("kind") == "ok", "yes").when(F.col("amount") > 5, F.lit("big")).otherwise("no") == "big",
        lambda e: e.kind != "ok" and e.amount is not None and e.amount > 5,
    ),
]


def _combine(children):
    def join(pair):
        op, (lmake, lm), (rmake, rm) = pair
        if op == "&":
            return (lambda F: lmake(F) & rmake(F), lambda e: _and(lm(e), rm(e)))
        return (lambda F: lmake(F) | rmake(F), lambda e: _or(lm(e), rm(e)))

    def negate(child):
        make, model = child
        return (lambda F: ~make(F), lambda e: _not(model(e)))

    return st.one_of(st.tuples(st.sampled_from("&|"), children, children).map(join), children.map(negate))


columns = st.recursive(st.sampled_from(ATOMS), _combine, max_leaves=5)
KINDS_TOO = st.builds(Login, st.sampled_from(["fail", "ok", "view", "it's", None]), st.sampled_from([None, 0, 5, 20, 150]))


@pytest.fixture(scope="module")
def flavours(spark):
    """The functions modules of a classic session and of Spark Connect."""
    from pyspark.sql import functions as classic
    from pyspark.sql.connect import functions as connect

    return {"classic": classic, "connect": connect}


@settings(max_examples=100, deadline=None)
@given(columns, st.lists(st.one_of(logins, KINDS_TOO), min_size=1, max_size=30))
def test_a_column_condition_means_what_the_column_means(flavours, condition, events):
    make, model = condition
    records = records_table(events, Login._fields, None)
    expected = [model(e) is True for e in events]
    for F in flavours.values():
        step = Pattern.begin("a").where(make(F))
        expression = step.steps[0].condition
        assert isinstance(expression, Expression) and expression.evaluate(records).to_pylist() == expected
        assert Pattern.from_json(step.to_json()) == step  # kept as its SQL text


@pytest.mark.parametrize("how", ["or", "and"])
def test_a_column_chain_of_hundreds_of_conditions_is_one_level_of_sql(flavours, how):
    """``reduce(operator.or_, [F.col("amount") == v for v in values])``, as PySpark code
    writes a filter of many values: each operator nests the Column a level deeper, but
    its SQL text is one chain, which parses and means what the Column means."""
    import functools
    import operator

    events = [Login(k, a) for k in ("fail", None) for a in (None, 0, 5, 199, 200)]
    records = records_table(events, Login._fields, None)
    if how == "or":
        expected = [e.amount is not None and e.amount < 200 for e in events]
    else:
        expected = [e.amount is not None and e.amount >= 200 for e in events]
    for F in flavours.values():
        tests = [F.col("amount") == v if how == "or" else F.col("amount") != v for v in range(200)]
        step = Pattern.begin("a").where(functools.reduce(operator.or_ if how == "or" else operator.and_, tests))
        assert step.steps[0].condition.evaluate(records).to_pylist() == expected


def test_a_column_nested_too_deeply_to_read_is_refused_saying_so(flavours):
    for F in flavours.values():
        nested = F.col("amount")
        for _ in range(600):  # amount + (amount + (amount + ...))
            nested = F.col("amount") + nested
        with pytest.raises(DefinitionError, match="too deeply"):
            Pattern.begin("a").where(nested > 0)


def test_a_column_step_is_the_step_of_its_sql_text(flavours):
    for F in flavours.values():
        fraud = Pattern.begin("fail").where((F.col("kind") == "fail") & F.col("amount").isNotNull()).times(2)
        assert fraud == Pattern.begin("fail").where("((kind = 'fail') AND (amount IS NOT NULL))").times(2)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda F: F.col("amount").cast("binary").isNull(), "(?i)cast"),
        (lambda F: F.col("payload") == F.lit(b"x"), "(?i)binary|x"),
        (lambda F: F.col("amount") == float("nan"), "nan"),
        (lambda F: F.sin("amount") > 1, "(?i)sin"),
    ],
)
def test_a_column_the_expressions_cannot_write_or_run_is_refused_naming_it(flavours, make, says):
    for F in flavours.values():
        with pytest.raises(DefinitionError, match=says):
            Pattern.begin("a").where(make(F))


TYPED_LITERALS = {
    "timestamp": lambda F: F.col("at") >= F.lit(datetime.datetime(2024, 1, 1, 9, 30, tzinfo=datetime.UTC)),
    "timestamp with an offset": lambda F: F.col("at") < F.lit(datetime.datetime(2024, 1, 1, 10, 30, tzinfo=ONE_HOUR)),
    "timestamp_ntz": lambda F: F.col("wall") <= F.expr("TIMESTAMP_NTZ '2024-01-01 09:30:00'"),
    "date": lambda F: F.col("day") == F.lit(datetime.date(2024, 1, 2)),
    "decimal": lambda F: F.col("score") > F.lit(decimal.Decimal("2.50")),
}
ONE_HOUR = datetime.timezone(datetime.timedelta(hours=1))


@pytest.mark.parametrize("make", TYPED_LITERALS.values(), ids=TYPED_LITERALS)
def test_a_column_with_a_date_timestamp_or_decimal_literal_means_what_spark_says(spark, flavours, make):
    from tests.test_expressions import DAYS, MOMENTS, READING_SCHEMA, WALLS, Reading

    rows = [Reading(None, None, s, m, w, d, None) for s in (None, 2.5, 3.0) for m, w, d in zip(MOMENTS, WALLS, DAYS, strict=True)]
    rows.append(Reading(None, None, None, None, None, None, None))
    frame = spark.createDataFrame(rows, READING_SCHEMA)
    expected = [row[0] is True for row in frame.select(make(flavours["classic"])).collect()]
    assert True in expected and False in expected  # the rows tell the literal's value
    for F in flavours.values():
        expression = Pattern.begin("a").where(make(F)).steps[0].condition
        assert expression.evaluate(frame.toArrow()).to_pylist() == expected
        assert expression.evaluate(records_table(rows, Reading._fields, None)).to_pylist() == expected


def test_a_columns_fraction_literal_is_a_double_as_in_spark(spark, flavours):
    """``F.lit(0.1)`` is a DOUBLE, so ``amount * 0.1`` is a DOUBLE's product (3 * 0.1
    is 0.30000000000000004, above 0.3), where ``0.1`` in SQL text is a DECIMAL: the
    Column's answers are Spark's, from either kind of session."""
    frame = spark.createDataFrame([(3,), (2,), (None,)], "amount bigint")
    make = lambda F: F.col("amount") * F.lit(0.1) <= F.lit(0.3)  # noqa: E731
    expected = [row[0] is True for row in frame.select(make(flavours["classic"])).collect()]
    assert True in expected and False in expected  # the rows tell a DOUBLE from a DECIMAL
    for F in flavours.values():
        assert Pattern.begin("a").where(make(F)).steps[0].condition.evaluate(frame.toArrow()).to_pylist() == expected


NESTED = {
    "an element": lambda F: F.col("tags")[1] == "y",
    "a field (getField)": lambda F: F.col("login").getField("kind") == "fail",
    "a field (item)": lambda F: F.col("login")["n"] > 1,
    "array_contains and size": lambda F: F.array_contains("tags", "y") & (F.size("tags") > 1),
    "a field of a field": lambda F: F.col("login").getField("geo")["risk"] > 5,
    "a dotted path": lambda F: F.col("login.geo.risk") > 5,
}


@pytest.mark.parametrize("make", NESTED.values(), ids=NESTED)
def test_a_column_reading_an_array_element_or_a_struct_field_means_what_spark_says(spark, flavours, make):
    """``a[i]`` and ``a.getField('b')`` / ``a['b']`` Columns (of a field too), written
    back as ``a[i]`` and ``a.b`` (``a.b.c``), give Spark's answers, from either kind
    of session."""
    rows = [(["x", "y"], ("fail", 2, (9,))), (["y", "z"], ("ok", None, None)), (None, None), (["x", None], ("fail", 1, (None,)))]
    frame = spark.createDataFrame(rows, "tags array<string>, login struct<kind:string, n:bigint, geo:struct<risk:bigint>>")
    expected = [row[0] is True for row in frame.select(make(flavours["classic"])).collect()]
    assert True in expected and False in expected
    for F in flavours.values():
        assert Pattern.begin("a").where(make(F)).steps[0].condition.evaluate(frame.toArrow()).to_pylist() == expected
