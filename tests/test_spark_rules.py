"""Rules that change while the job runs, on Spark batch and streaming: exactly what
the local runtime finds (which ``tests/test_rules.py`` checks against each rule alone)."""

from __future__ import annotations

import random

import pytest

from statemachines import consolidate, run_local
from statemachines.library import Pattern, RuleDetector, ended, matches, timeouts
from tests.contract import Case
from tests.test_contract import stream_runner
from tests.test_expressions import KINDS, Login
from tests.test_spark_cep import plain

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol struct<kind: string, amount: bigint>, time long, order long"


def fraud(fails, amount):
    return (
        Pattern.begin("fail").where("kind = 'fail'").times(fails)
        .followed_by("ok").where(f"kind = 'ok' AND amount > {amount}")
        .within(12)
    ).to_json()


# "fraud" replaced at 40 by a stricter version, "burst" added at 25 and retired at 70
RULES = [
    ("fraud", fraud(3, 10), 0),
    ("burst", fraud(2, 40), 25),
    ("fraud", fraud(4, 0), 40),
    ("burst", None, 70),
]


def test_rules_added_replaced_and_retired_mid_stream_find_on_spark_what_they_find_locally(spark, tmp_path):
    from statemachines.spark import run_batch

    rnd = random.Random(17)
    events = [
        (f"u{rnd.randrange(5)}", Login(rnd.choice(KINDS[:3]), rnd.choice([None, 5, 50])), t // 3, t % 3)
        for t in range(300)
    ]
    rules = spark.createDataFrame(RULES, "rule_id string, pattern_json string, valid_from long")
    detector = RuleDetector(rules.collect())  # the rule book, read from a table
    assert detector == RuleDetector(RULES)
    local = run_local(detector, events).updates
    assert {m.rule for m in matches(local)} == {"fraud", "burst"} and timeouts(local)
    assert {(f.reason, f.time) for f in ended(local)} == {("replaced", 40), ("retired", 70)}

    batch = run_batch(detector, spark.createDataFrame(events, SCHEMA), order="order")
    assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect()) == local
    assert batch.rejected.count() == 0

    case = Case("rules", detector, events, [], schema=SCHEMA)
    streamed, rejected = stream_runner(case, tmp_path, spark, batches=4)
    assert streamed == local and rejected == []
