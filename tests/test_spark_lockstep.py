"""Spark's batch path runs a detector of SQL or function conditions over a
partition's columns, keys in rounds (``spark_runtime/lockstep.py``): its output must
be what the detector gives event by event locally, for any pattern, with ties ranked
by their symbols, NULL fields, and keys that go the generic way beside the others."""

from __future__ import annotations

import datetime
import random

import attrs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from statemachines import Machine, Reason, consolidate, run_local
from statemachines.library import Detector, RuleDetector, matches
from statemachines.library.pattern import Skip
from tests.test_expressions import AMOUNTS, KINDS, Login
from tests.test_lockstep import one_by_one
from tests.test_pattern_data import patterns
from tests.test_rules import book_of_patterns
from tests.test_spark_cep import plain

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol struct<kind: string, amount: bigint>, time long, order long"
# A drawn pattern whose partial matches multiply can make 10^5 updates and more from
# 50 events: it checks nothing the others do not, and Spark takes minutes over it.
MOST_UPDATES = 20_000


def logins(seed: int, n: int, users: int, span: int) -> list[tuple]:
    """Random logins at times below ``span``, many at one time for a user; some with
    an order, a few with a null time, key or symbol (their keys go the generic way)."""
    rnd = random.Random(seed)
    rows = []
    for _ in range(n):
        key = f"u{rnd.randrange(users)}" if rnd.random() > 0.01 else None
        symbol = Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)) if rnd.random() > 0.01 else None
        time = rnd.randrange(span) if rnd.random() > 0.01 else None
        rows.append((key, symbol, time, rnd.choice([None, None, 1, 2])))
    return rows


def check_alike(spark, detector: Detector | RuleDetector, rows: list[tuple], schema: str = SCHEMA, local=None) -> list:
    """Spark in rounds against ``local``, the pattern run event by event (run here if not given)."""
    from statemachines.spark import run_batch

    if local is None:
        local = run_local(one_by_one(detector.pattern), rows)
    batch = run_batch(detector, spark.createDataFrame(rows, schema), order="order")
    got = consolidate(((plain(r.key), plain(r.value)), r.time, r.diff) for r in batch.updates.collect())
    assert got == consolidate(((k, plain(v)), t, d) for (k, v), t, d in local.updates)
    rejected = sorted(((plain(r.key), r.time, r.reason) for r in batch.rejected.collect()), key=repr)
    assert rejected == sorted(((e.event[0], e.event[2], str(e.reason)) for e in local.rejected), key=repr)
    return local.updates


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.booleans().flatmap(lambda functions: patterns(functions=functions)), st.integers(0, 2**32))
def test_a_pattern_finds_on_spark_in_rounds_what_it_finds_event_by_event(spark, pattern, seed):
    from statemachines.spark.lockstep import runs_in_rounds

    assume(pattern is not None and not isinstance(pattern.window, float | datetime.timedelta))
    assume(not any(isinstance(g, float) for g in Detector(pattern)._nfa.gaps.values()))
    detector = Detector(attrs.evolve(pattern, skip=Skip.NO_SKIP, skip_step=None, raise_on_miss=False))
    assume(runs_in_rounds(detector))
    rows = logins(seed, 50, 4, 20)
    local = run_local(one_by_one(detector.pattern), rows)
    assume(len(local.updates) <= MOST_UPDATES)
    check_alike(spark, detector, rows, local=local)


def test_the_fraud_rule_in_rounds_finds_matches_among_many_ties(spark):
    from statemachines.library import Pattern

    fraud = (Pattern.begin("fail").where("kind = 'fail'").times(3)
             .followed_by("ok").where("kind = 'ok' AND amount > 10").within(10))
    from statemachines.spark.lockstep import runs_in_rounds

    assert runs_in_rounds(Detector(fraud))
    updates = check_alike(spark, Detector(fraud), logins(7, 3000, 40, 100))
    assert len(matches(updates)) > 20


def test_a_detector_keyed_by_two_columns_runs_in_rounds_on_spark_as_locally(spark):
    """Keys that are records (a user and a device; a null device among them) step in
    rounds as keys of one column do."""
    from statemachines.library import Pattern
    from statemachines.spark.tabulated import bulk_key_type

    fraud = (Pattern.begin("fail").where("kind = 'fail'").times(3)
             .followed_by("ok").where("kind = 'ok' AND amount > 10").within(10))
    rows = [(k and (k, (None, 1, 2)[int(k[1:]) % 3]), s, t, o) for k, s, t, o in logins(7, 3000, 40, 100)]
    schema = f"key struct<user: string, device: bigint>, {SCHEMA.split(', ', 1)[1]}"
    assert bulk_key_type(spark.createDataFrame(rows[:1], schema).toArrow().schema.field("key").type)
    updates = check_alike(spark, Detector(fraud), rows, schema)
    assert len(matches(updates)) > 20


def test_a_pattern_of_functions_over_plain_symbols_in_rounds_ranks_ties_by_the_symbol(spark):
    from statemachines.library import Pattern
    from statemachines.spark.lockstep import runs_in_rounds

    fraud = (Pattern.begin("fail").where(lambda s: s == "fail").times(3)
             .followed_by("ok").where(lambda s: s == "ok").within(10))
    assert runs_in_rounds(Detector(fraud))
    rnd = random.Random(11)
    rows = [(f"u{rnd.randrange(30)}", rnd.choice(["fail", "ok", "view"]) if rnd.random() > 0.002 else None,
             rnd.randrange(60), rnd.choice([None, None, 1])) for _ in range(2000)]  # a null symbol: its key goes generic
    updates = check_alike(spark, Detector(fraud), rows, "key string, symbol string, time long, order long")
    assert len(matches(updates)) > 20


def test_a_function_that_raises_on_an_event_no_step_asks_about_does_not_stop_a_spark_run(spark):
    """``amount.bit_length()`` raises on a null amount: ``ann``'s first event has
    one, and no step asks the second condition before a ``fail``; ``cy``'s second
    is asked, so it is rejected (``transition_failed``) on both runtimes."""
    from statemachines.library import Pattern

    pattern = Pattern.begin("fail").where(lambda e: e[0] == "fail").followed_by("big").where(
        lambda e: e[1].bit_length() > 2).within(10)
    rows = [("ann", Login("view", None), 0, None), ("ann", Login("fail", 1), 1, None), ("ann", Login("ok", 9), 2, None),
            ("bob", Login("fail", 1), 0, None), ("bob", Login("ok", 9), 1, None),
            ("cy", Login("fail", 1), 0, None), ("cy", Login("ok", None), 1, None), ("cy", Login("ok", 9), 2, None)]
    updates = check_alike(spark, Detector(pattern), rows)
    assert {m.key for m in matches(updates)} == {"ann", "bob", "cy"}
    assert [(r.event[0], r.reason) for r in run_local(Detector(pattern), rows).rejected] == [
        ("cy", Reason.TRANSITION_FAILED)]


def test_a_null_symbol_is_rejected_on_spark_as_locally_when_sql_conditions_read_it(spark):
    from statemachines.library import Pattern
    from statemachines.library.cep import Why

    fraud = (Pattern.begin("fail").where("kind = 'fail'").times(2)
             .followed_by("ok").where("kind = 'ok' AND amount > 10").within(10))
    rows = [(key, symbol, t, None) for key, symbol, t, _ in logins(5, 400, 8, 50)]
    rows += [("u1", None, 3, None), ("u2", None, 7, 1)]
    check_alike(spark, Detector(fraud), rows)
    local = run_local(Detector(fraud), rows)
    null_symbols = sorted((k, t) for k, s, t, _ in rows if s is None and k is not None and t is not None)
    assert ("u1", 3) in null_symbols and ("u2", 7) in null_symbols
    assert sorted((r.event[0], r.event[2]) for r in local.rejected if r.reason == Why.CONDITION_FAILED) == null_symbols


def test_sql_conditions_over_symbols_that_are_not_records_reject_each_event_on_spark_as_locally(spark):
    """SQL conditions read fields by name: over plain strings, every event the
    conditions are asked about is rejected with the reason the local runtime gives;
    the partition's run does not fail."""
    from statemachines.library import Pattern
    from statemachines.library.cep import Why

    pattern = Pattern.begin("fail").where("kind = 'fail'").followed_by("ok").where("kind = 'ok'").within(10)
    rnd = random.Random(3)
    rows = [(f"u{rnd.randrange(4)}", rnd.choice(["fail", "ok"]), rnd.randrange(20), None) for _ in range(30)]
    check_alike(spark, Detector(pattern), rows, "key string, symbol string, time long, order long")
    rejected = run_local(Detector(pattern), rows).rejected
    assert len(rejected) == len(rows) and {r.reason for r in rejected} == {Why.CONDITION_FAILED}


class EventByEvent(RuleDetector):
    """A rule detector run key by key, event by event (the local reference)."""

    advance_keys = Machine.advance_keys


# many books drawn are not covered by the rounds (a float gap, a step taking an event two ways)
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(st.booleans().flatmap(lambda functions: book_of_patterns(functions, rounds=True)), st.integers(0, 2**32))
def test_a_rule_book_finds_on_spark_in_rounds_what_it_finds_event_by_event(spark, book, seed):
    """Each rule version's keys step in rounds over the events of its interval, and
    what is left ends at the version's end (``replaced`` or ``retired``)."""
    from statemachines.spark.lockstep import runs_in_rounds

    assume(runs_in_rounds(RuleDetector(book)))
    rows = logins(seed, 50, 4, 30)
    local = run_local(EventByEvent(book), rows)
    assume(len(local.updates) <= MOST_UPDATES)
    check_alike(spark, RuleDetector(book), rows, local=local)


def test_events_a_sql_condition_raises_on_are_rejected_and_their_chunk_steps_in_rounds(spark):
    """``100 % amount`` divides by zero for an ``ok`` (or NULL kind) with amount 0 (the
    ``AND`` reads it where ``kind = 'ok'`` is not FALSE): those events are rejected on
    both runtimes, the others find what they find event by event."""
    from statemachines.library import Pattern
    from statemachines.library.cep import Why

    fraud = (Pattern.begin("fail").where("kind = 'fail'").times(2)
             .followed_by("ok").where("kind = 'ok' AND 100 % amount = 0").within(10))
    rows = logins(9, 600, 10, 60)
    check_alike(spark, Detector(fraud), rows)
    local = run_local(Detector(fraud), rows)
    raising = sorted((k, t) for k, s, t, _ in rows if (s is None or s.kind in ("ok", None) and s.amount == 0)
                     and k is not None and t is not None)  # a null symbol has no fields to read
    assert raising and sorted((r.event[0], r.event[2]) for r in local.rejected if r.reason == Why.CONDITION_FAILED) == raising
