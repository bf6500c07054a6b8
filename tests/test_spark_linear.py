"""The same linear chains on Spark and locally give identical updates."""

from __future__ import annotations

import math
import random
import re

import pytest

from statemachines import InvalidArgument, consolidate, linear
from statemachines.spark import apply_linear, consolidated, is_vectorised

pytestmark = pytest.mark.spark

SCHEMA = "key string, value long, time long, diff long"


def random_updates(seed, n=200):
    rnd = random.Random(seed)
    return [
        ((rnd.choice("abc"), rnd.randrange(-3, 9)), rnd.randrange(20), rnd.choice([-1, 1, 2]))
        for _ in range(n)
    ]


def on_spark(spark, op, updates, **options):
    frame = spark.createDataFrame([(k, v, t, d) for (k, v), t, d in updates], SCHEMA)
    return on_spark_rows(apply_linear(op, frame, **options))


def on_spark_rows(frame):
    return consolidate(((r.key, r.value), r.time, r.diff) for r in consolidated(frame).collect())


def test_a_sql_chain_runs_as_column_expressions_and_matches(spark):
    op = (
        linear.filter(lambda d: d[1] >= 0, sql="value >= 0")
        | linear.map(lambda d: (d[0], d[1] * 10), sql={"key": "key", "value": "value * 10"})
        | linear.temporal_filter(lambda d: d[1] // 10, lambda d: d[1] // 10 + 4, sql=("value div 10", "value div 10 + 4"))
    )
    assert is_vectorised(op)
    updates = random_updates(1)
    frame = spark.createDataFrame([(k, v, t, d) for (k, v), t, d in updates], SCHEMA)
    plan = apply_linear(op, frame)._jdf.queryExecution().executedPlan().toString()
    assert "Python" not in plan and "Exchange" not in plan
    assert on_spark(spark, op, updates) == op.apply(updates)


def test_a_python_chain_runs_as_one_pass_and_matches(spark):
    op = (
        linear.flat_map(lambda d: [d, (d[0] + "!", d[1])])
        | linear.explode(lambda d: [((d[0], d[1] % 3), 2)])
        | linear.temporal_filter(lambda d: d[1], lambda d: None)
    )
    assert not is_vectorised(op)
    updates = random_updates(2)
    frame = spark.createDataFrame([(k, v, t, d) for (k, v), t, d in updates], SCHEMA)
    plan = apply_linear(op, frame)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("MapInArrow") == 1 and "Exchange" not in plan
    assert on_spark(spark, op, updates) == op.apply(updates)


@pytest.mark.parametrize("vectorised", [True, False], ids=["sql", "python"])
def test_a_nan_bound_fails_the_job_as_it_fails_locally(spark, vectorised):
    """Spark orders NaN above every time: a NaN bound would empty the interval and drop
    the record silently. Over float times it fails the job, naming the record."""
    sql = ("IF(value = 0, double('NaN'), double('Infinity'))", None) if vectorised else None
    op = linear.temporal_filter(lambda d: math.inf if d[1] else math.nan, lambda d: None, sql=sql)
    updates = [(("a", 1), 1.0, 1), (("b", 0), 2.0, 1)]
    with pytest.raises(InvalidArgument, match=re.escape("temporal_filter's bounds are times or None; got nan for ('b', 0)")):
        op.apply(updates)
    frame = spark.createDataFrame([(k, v, t, d) for (k, v), t, d in updates], "key string, value long, time double, diff long")
    names = "(b, 0)" if vectorised else "('b', 0)"  # Spark's text of the record, or Python's
    with pytest.raises(Exception, match=re.escape(f"temporal_filter's bounds are times or None; got nan for {names}")):
        apply_linear(op, frame).collect()
    kept = [(("a", 1), 1.0, 1)]
    assert on_spark_rows(apply_linear(op, frame.where("key = 'a'"))) == op.apply(kept)
