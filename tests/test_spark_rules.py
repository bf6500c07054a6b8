"""Rules that change while the job runs, on Spark batch and streaming: exactly what
the local runtime finds (which ``tests/test_rules.py`` checks against each rule alone)."""

from __future__ import annotations

import random

import pytest

from statemachines import PersistedArrangement, consolidate, run_local
from statemachines.library import Pattern, RuleBook, RuleDetector, ended, matches, timeouts
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
    assert ended(batch.updates) == ended(local) and matches(batch.updates) == matches(local)  # read from Spark's output

    case = Case("rules", detector, events, [], schema=SCHEMA)
    streamed, rejected = stream_runner(case, tmp_path, spark, batches=4)
    assert streamed == local and rejected == []


def test_rules_arriving_as_a_stream_take_effect_at_their_times_and_late_ones_are_set_aside(spark, tmp_path):
    """Events of times 0-24, 25-49, 50-74, 75-99 in micro-batches 0 to 3; the rows of
    micro-batch ``b`` arrive at the frontier the events before it reached.

    Key ``q`` has one event at 45, applied in micro-batch 2, which begins a partial
    match of rule "big", whose pattern has no window: nothing wakes ``q`` until the
    retirement of "big" at 52 arrives in that micro-batch, which ends it at 52."""
    from statemachines.spark.rule_stream import read_rejected_rules

    rnd = random.Random(5)
    events = [
        (f"u{rnd.randrange(5)}", Login(rnd.choice(KINDS[:3]), rnd.choice([None, 5, 50])), t // 3, t % 3)
        for t in range(300)
    ]
    events[135] = ("q", Login("ok", 50), 45, 0)
    big = Pattern.begin("big").where("amount > 40").followed_by("fail").where("kind = 'fail'").to_json()
    arriving = [
        [("big", big, 30)],
        [("fraud", fraud(4, 0), 40), ("late", fraud(2, 0), 10)],  # the frontier is 24: 10 is late
        [("big", None, 52)],
    ]
    first = [("fraud", fraud(3, 10), 0)]
    case = Case("rules", RuleDetector(first), events, [], schema=SCHEMA)
    streamed, rejected = stream_runner(case, tmp_path, spark, batches=4, rules=arriving)

    known = run_local(RuleDetector([*first, *arriving[0], arriving[1][0], *arriving[2]]), events).updates
    assert streamed == known and rejected == []
    assert {(f.reason, f.rule, f.time) for f in ended(known)} == {("replaced", "fraud", 40), ("retired", "big", 52)}
    assert [(f.rule, f.time) for f in ended(known) if f.key == "q"] == [("big", 52)]
    assert [(r.row, r.reason) for r in read_rejected_rules(tmp_path / "arr")] == [(arriving[1][1], "late")]

    # the book is kept with the arrangement: a run continuing it agrees with the rows
    # that arrived as a stream, and refuses a table that rewrites its past
    from statemachines import DefinitionError, PersistedArrangement
    from statemachines.spark import run_batch

    kept = PersistedArrangement(tmp_path / "arr").notes["machine_settings"]
    assert RuleBook.from_rows(kept) == RuleDetector([*first, *arriving[0], arriving[1][0], *arriving[2]]).rules
    rewritten = RuleDetector([("fraud", fraud(2, 0), 0)])
    with pytest.raises(DefinitionError, match="below the output's frontier"):
        run_batch(
            rewritten, spark.createDataFrame(events[:1], SCHEMA), into=tmp_path / "arr", order="order",
            abandon_waiting=True,  # the flush event waits in the stream
        )


def test_a_rules_stream_valid_from_that_does_not_cast_is_set_aside_with_the_value_it_came_with(spark, tmp_path):
    """Rule rows whose ``valid_from`` is text: "30" casts to the events' long times
    and takes effect; "noon" does not, and its row is set aside as invalid_time with
    "noon" in it, as the local runtime sets the same row aside."""
    from statemachines.spark.rule_stream import read_rejected_rules

    rnd = random.Random(8)
    events = [(f"u{rnd.randrange(4)}", Login(rnd.choice(KINDS[:3]), 50), t // 3, t % 3) for t in range(150)]
    big = Pattern.begin("big").where("amount > 40").followed_by("fail").where("kind = 'fail'").to_json()
    arriving = [[("big", big, "30")], [("noon", fraud(2, 0), "noon"), ("fraud", fraud(4, 0), "40")]]
    first = [("fraud", fraud(3, 10), 0)]
    case = Case("rules", RuleDetector(first), events, [], schema=SCHEMA)
    streamed, rejected = stream_runner(
        case, tmp_path, spark, batches=3, rules=arriving,
        rules_schema="rule_id string, pattern_json string, valid_from string",
    )
    cast = [("big", big, 30), ("fraud", fraud(4, 0), 40)]
    assert streamed == run_local(RuleDetector([*first, *cast]), events).updates and rejected == []
    (set_aside,) = read_rejected_rules(tmp_path / "arr")
    (local,) = RuleDetector([*first, *cast]).rules.extended([arriving[1][0]], frontier=24).rejected
    assert (set_aside.row, set_aside.reason) == (arriving[1][0], local.reason) == (arriving[1][0], "invalid_time")
    assert "'noon'" in set_aside.detail


def test_a_rules_stream_is_refused_where_it_cannot_be_used(spark, tmp_path):
    from statemachines import InvalidArgument
    from statemachines.library import Upsert
    from statemachines.spark import run_stream

    events = spark.readStream.schema(SCHEMA).parquet(str(tmp_path))
    rules = spark.readStream.schema("rule_id string, pattern_json string, valid_from long").parquet(str(tmp_path))
    table = spark.createDataFrame(RULES, "rule_id string, pattern_json string, valid_from long")
    kept = dict(into=tmp_path / "arr", checkpoint=tmp_path / "ckpt")
    with pytest.raises(InvalidArgument, match="needs a RuleDetector"):
        run_stream(Upsert(), events, rules=rules, **kept)
    with pytest.raises(InvalidArgument, match="streaming DataFrame"):
        run_stream(RuleDetector(RULES), events, rules=table, **kept)
    with pytest.raises(InvalidArgument, match="no column valid_from"):
        run_stream(RuleDetector(RULES), events, rules=rules.drop("valid_from"), **kept)


def test_rules_of_timestamp_times_from_a_table_and_a_stream_match_timestamp_events(spark, tmp_path):
    """A table's timestamps come back from ``collect()`` as naive local times, the
    events' as UTC times: the detector reads its rules' times as the events' are."""
    import datetime as dt

    from statemachines.spark import read_rejected_rules, run_batch, run_stream
    from tests.test_contract import file_stream

    utc = dt.UTC
    at = lambda s: dt.datetime(2026, 1, 1, tzinfo=utc) + dt.timedelta(seconds=s)  # noqa: E731

    def fraud(fails):
        return (
            Pattern.begin("fail").where("kind = 'fail'").times(fails).followed_by("ok").where("kind = 'ok'")
            .within(dt.timedelta(seconds=12))
        ).to_json()

    rnd = random.Random(3)
    events = [(f"u{rnd.randrange(4)}", Login(rnd.choice(KINDS[:3]), 5), at(t // 3), t % 3) for t in range(240)]
    schema = SCHEMA.replace("time long", "time timestamp")
    rows = "rule_id string, pattern_json string, valid_from timestamp"
    detector = RuleDetector(spark.createDataFrame([("fraud", fraud(2), at(0))], rows).collect())
    arriving = [[("fraud", fraud(3), at(30))], [("late", fraud(2), at(5)), ("fraud", None, at(60))]]
    in_time_rows = [("fraud", fraud(2), at(0)), arriving[0][0], arriving[1][1]]
    in_time = RuleDetector(in_time_rows)
    def read(updates):  # naive times, as collect() gives them, are local times
        def aware(x):
            if isinstance(x, dt.datetime):
                return x.astimezone(utc)
            return tuple(aware(y) for y in x) if isinstance(x, tuple) else x

        return consolidate(((k, aware(plain(v))), aware(t), d) for (k, v), t, d in updates)

    expected = read(run_local(in_time, events).updates)
    assert {(f.reason, f.time) for f in ended(expected)} == {("replaced", at(30)), ("retired", at(60))}

    from_table = RuleDetector(spark.createDataFrame(in_time_rows, rows).collect())
    batch = run_batch(from_table, spark.createDataFrame(events, schema), order="order").updates.collect()
    assert read(((r.key, r.value), r.time, r.diff) for r in batch) == expected

    files = [events[i : i + 60] for i in range(0, 240, 60)] + [[("~flush", None, at(10**6), None)]]
    run_stream(
        detector, file_stream(spark, files, schema, tmp_path / "in"), into=tmp_path / "arr",
        checkpoint=tmp_path / "ckpt", order="order", trigger={"availableNow": True}, progress=None,
        rules=file_stream(spark, arriving, rows, tmp_path / "rules"),
    ).awaitTermination()
    streamed = PersistedArrangement(tmp_path / "arr").updates()
    assert read(streamed) == expected
    assert [(r.row[0], r.reason) for r in read_rejected_rules(tmp_path / "arr")] == [("late", "late")]


def test_a_batch_run_continuing_an_arrangement_runs_the_rules_earlier_runs_used(spark, tmp_path):
    """The rows before 50 in the first run, the retirement at 70 alone in the second:
    together they find what one run with every row finds."""
    from statemachines import Arrangement, PersistedArrangement
    from statemachines.library import RuleBook
    from statemachines.spark import run_batch

    rnd = random.Random(11)
    events = [
        (f"u{rnd.randrange(5)}", Login(rnd.choice(KINDS[:3]), rnd.choice([None, 5, 50])), t // 3, t % 3)
        for t in range(300)
    ]
    for part, rows in ((lambda t: t < 50, RULES[:3]), (lambda t: t >= 50, RULES[3:])):
        frame = spark.createDataFrame([e for e in events if part(e[2])], SCHEMA)
        run_batch(RuleDetector(RuleBook.from_rows(rows)), frame, into=tmp_path / "arr", order="order")
    alone = run_local(RuleDetector(RULES), events, into=Arrangement()).updates
    published = PersistedArrangement(tmp_path / "arr").updates()
    assert consolidate(((k, plain(v)), t, d) for (k, v), t, d in published) == alone
    assert ("retired", 70) in {(f.reason, f.time) for f in ended(alone)}


GROUPED = (
    Pattern.begin("first").where("kind = 'fail'")
    .followed_by(Pattern.begin("g1").where("kind = 'fail'").next("g2").where("kind = 'ok'"))
    .within(20)
)
GAPPED = (
    Pattern.begin("big", "skip_to_first", "big").where("amount > 40")
    .followed_by("fail").where("kind = 'fail'").within(5, "previous_and_current")
    .not_followed_by("ok").where("kind = 'ok'").within(10)
)
UNCONDITIONED = (  # a step without a condition, a loop without a bound
    Pattern.begin("any").one_or_more().until("kind = 'ok'").followed_by("ok").where("kind = 'ok'").within(8)
)


def test_rules_written_as_json_objects_read_by_spark_as_structs_are_the_rules_of_their_text(spark, tmp_path):
    """A file of rule rows whose ``pattern_json`` is a JSON object: ``spark.read.json``
    makes it a struct holding every key of every document, null where one lacks it,
    and a rules stream reads that struct through ``to_json``, which leaves the null
    keys out. Both are the book of the same rows with the documents as text."""
    import json

    from pyspark.sql import types as T

    from statemachines.spark import read_rejected, run_stream
    from tests.test_contract import FLUSH_KEY, FLUSH_TIME, file_stream

    rows = [
        ("fraud", fraud(3, 10), 0), ("grouped", GROUPED.to_json(), 0), ("gapped", GAPPED.to_json(), 0),
        ("loose", UNCONDITIONED.to_json(), 0), ("fraud", None, 60),
    ]
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "rules.json").write_text("".join(
        json.dumps({"rule_id": r, "pattern_json": None if text is None else json.loads(text), "valid_from": t}) + "\n"
        for r, text, t in rows
    ))
    table = spark.read.json(str(folder))
    assert isinstance(table.schema["pattern_json"].dataType, T.StructType)
    book = RuleBook.from_rows(table.collect())
    assert book == RuleBook.from_rows(rows) and book.rejected == ()

    rnd = random.Random(3)
    events = [(f"u{rnd.randrange(3)}", Login(rnd.choice(KINDS[:3]), rnd.choice([None, 5, 50])), t // 2, t % 2) for t in range(200)]
    files = [events[:100], events[100:], [(FLUSH_KEY, None, FLUSH_TIME, None)]]
    query = run_stream(
        RuleDetector([]), file_stream(spark, files, SCHEMA, tmp_path / "in"), into=tmp_path / "arr",
        checkpoint=tmp_path / "ckpt", order="order", trigger={"availableNow": True}, progress=None,
        rules=spark.readStream.schema(table.schema).json(str(folder)),
    )
    query.awaitTermination()
    found = run_local(RuleDetector(rows), events).updates
    assert {m.rule for m in matches(found)} >= {"fraud", "grouped", "loose"}
    assert PersistedArrangement(tmp_path / "arr").updates() == found
    assert read_rejected(spark, tmp_path / "arr") is None
