"""One detector, three runtimes: run_local, Spark batch and Spark streaming agree."""

from __future__ import annotations

import random
import re

import pytest

from statemachines import InvalidArgument, consolidate, run_local
from statemachines.library import Detector, Pattern, RuleDetector, matches, timeouts
from tests.contract import Case
from tests.test_contract import stream_runner

pytestmark = pytest.mark.spark

SCHEMA = "key string, symbol string, time long, order long"


def fraud():
    """Three failed logins, then a success, within 10."""
    return (
        Pattern.begin("fail").where(lambda s: s == "fail").times(3)
        .followed_by("ok").where(lambda s: s == "ok")
        .within(10)
    )


def logins(seed=3, users=12, n=240):
    rnd = random.Random(seed)
    return [
        (f"u{rnd.randrange(users)}", rnd.choice(["fail", "fail", "ok", "view"]), t // 4, t % 3)
        for t in range(n)
    ]


def struct_logins(seed, users, n):
    """``(user, Login(kind, amount), time, order)``, amounts NULL in a third."""
    from tests.test_expressions import KINDS, Login

    rnd = random.Random(seed)
    return [(f"u{rnd.randrange(users)}", Login(rnd.choice(KINDS), rnd.choice([None, 5, 50])), t // 3, t % 3) for t in range(n)]


def plain(value):
    """A value Spark collected (rows, lists, dicts for maps) as the runtimes hold it."""
    if isinstance(value, list | tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):  # a map: its (key, value) pairs
        return tuple((k, plain(v)) for k, v in value.items())
    return value


def test_batch_and_streaming_find_what_the_local_runtime_finds(spark, tmp_path):
    from statemachines.spark import run_batch

    detector = Detector(fraud())
    events = logins()
    local = run_local(detector, events).updates
    assert matches(local) and timeouts(local)  # the data exercises both

    batch = run_batch(detector, spark.createDataFrame(events, SCHEMA), order="order")
    batch_updates = consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect())
    assert batch_updates == local
    assert batch.rejected.count() == 0
    # the findings read straight from Spark's output: the DataFrame, or its rows
    assert matches(batch.updates) == matches(local) == matches(batch.updates.collect())
    assert timeouts(batch.updates) == timeouts(local)

    streamed, rejected = stream_runner(Case("fraud", detector, events, []), tmp_path, spark)
    assert matches(streamed) == matches(local)
    assert timeouts(streamed) == timeouts(local)
    assert streamed == local and rejected == []
    print(f"{len(matches(local))} matches, {len(timeouts(local))} timeouts, alike on 3 runtimes")


def tied():
    """Two loops over overlapping conditions split the same events in several ways."""
    return (
        Pattern.begin("x", "skip_to_next").where(lambda s: s[0] in "ab").one_or_more()
        .followed_by("y").where(lambda s: s[0] in "bc").one_or_more()
        .followed_by("z").where(lambda s: s[0] == "d").within(8)
    )


def held():
    """``a? b`` where a b needs a "b!": a lone b completes while the match begun at a lives."""
    return (
        Pattern.begin("a", "skip_past_last_event").where(lambda s: s[0] == "a").optional()
        .followed_by("b").where(lambda s, matched: s[:2] == "b!" if matched.get("a") else s[0] == "b")
        .within(5)
    )


def grouped():
    """``s (a b)+ c``, any a after s, skipping to the first b of a match (a group's step)."""
    ab = Pattern.begin("a").where(lambda s: s[0] == "a").followed_by("b").where(lambda s: s[0] == "b")
    return (
        Pattern.begin("s", "skip_to_first", "b").where(lambda s: s[0] == "s")
        .followed_by_any(ab).one_or_more()
        .followed_by("c").where(lambda s: s[0] == "c").within(30)
    )


def gapped():
    """``a b c`` then no ``d``, ``b`` within 3 of ``a`` and the match complete 2 after
    ``c`` (``within(d, "previous_and_current")``), under a skip strategy."""
    return (
        Pattern.begin("a", "skip_past_last_event").where(lambda s: s[0] == "a")
        .followed_by_any("b").where(lambda s: s[0] == "b").within(3, "previous_and_current")
        .followed_by("c").where(lambda s: s[0] == "c")
        .not_followed_by("d").where(lambda s: s[0] == "d").within(2, "previous_and_current")
        .within(20)
    )


def trailing():
    """``a b+`` then not ``c`` next: a match completes at the key's next event."""
    return (
        Pattern.begin("a", "skip_to_next").where(lambda s: s[0] == "a")
        .followed_by("b").where(lambda s: s[0] == "b").one_or_more()
        .not_next("c").where(lambda s: s[0] == "c").within(6)
    )


@pytest.mark.parametrize(
    ("pattern", "symbols"),
    [
        (tied, ["a", "b", "c", "d"]), (held, ["a", "b", "b!", "c"]), (grouped, ["s", "a", "b", "c"]),
        (gapped, ["a", "b", "c", "d"]), (trailing, ["a", "b", "c", "d"]),
    ],
)
def test_skip_strategies_are_alike_on_every_runtime(spark, tmp_path, pattern, symbols):
    """Tied matches prune each other, and matches wait for partial matches begun before
    them (held values), in groups too, and gaps end partial matches: batch and stream
    give exactly the local result."""
    from statemachines.spark import run_batch

    rnd = random.Random(5)
    events = [(f"k{rnd.randrange(4)}", rnd.choice(symbols) + str(i), i // 2, i) for i in range(120)]
    detector = Detector(pattern())
    local = run_local(detector, events).updates
    assert matches(local)
    if pattern is held:
        assert any(v[0] == "held" for (_, v), _, _ in local)  # the data exercises held matches
    if pattern is gapped:  # the data exercises both gaps: partial matches end 3 after a, matches 2 after c
        assert any(t.events[-1][0] == "a" and t.time == t.events[-1][1] + 3 for t in timeouts(local))
        assert any(m.time == m.events[-1][1] + 2 for m in matches(local))
    if pattern is trailing:  # matches complete at a later event; partial matches time out waiting for one
        assert any(m.time > m.events[-1][1] for m in matches(local)) and timeouts(local)

    batch = run_batch(detector, spark.createDataFrame(events, SCHEMA), order="order")
    batch_updates = consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect())
    assert batch_updates == local

    streamed, rejected = stream_runner(Case(pattern.__name__, detector, events, []), tmp_path, spark)
    assert streamed == local and rejected == []


def _bigger_than_a_failure(e, matched):
    return e.amount is not None and any(f.amount is not None and e.amount > f.amount for f in matched["fail"])


FRAUD_CONDITIONS = {  # as SQL, as functions reading fields by name, and reading the match's too
    # names as Spark matches them (ignoring case), a number as text Spark casts
    "sql": ("KIND = 'fail'", "Kind = 'ok' AND amount > '10'"),
    "functions": (lambda e: e.kind == "fail", lambda e: e.kind == "ok" and e.amount is not None and e.amount > 10),
    "functions of the match": (lambda e: e.kind == "fail", lambda e, m: e.kind == "ok" and _bigger_than_a_failure(e, m)),
}


@pytest.mark.parametrize("conditions", FRAUD_CONDITIONS.values(), ids=FRAUD_CONDITIONS)
def test_conditions_on_struct_events_read_fields_by_name_on_spark_as_locally(spark, tmp_path, conditions):
    """A pattern reads a struct column's fields by name on Spark (batch, and streaming
    over micro-batches whose partial matches come back from Spark's state) as it reads
    a NamedTuple's locally, NULLs included: SQL conditions, and functions reading the
    event's or the partial match's fields as attributes."""
    from statemachines.spark import run_batch

    events = struct_logins(seed=11, users=6, n=300)
    fail, ok = conditions
    pattern = Pattern.begin("fail").where(fail).times(3).followed_by("ok").where(ok).within(10)
    detector = Detector(pattern)
    local = run_local(detector, events).updates
    assert matches(local) and timeouts(local)
    schema = "key string, symbol struct<kind: string, amount: bigint>, time long, order long"

    batch = run_batch(detector, spark.createDataFrame(events, schema), order="order")
    assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect()) == local
    assert batch.rejected.count() == 0

    case = Case("fraud, fields by name", detector, events, [], schema=schema)
    streamed, rejected = stream_runner(case, tmp_path, spark, batches=3)
    assert streamed == local and rejected == []


def test_conditions_on_nested_structs_read_fields_of_fields_on_spark_as_locally(spark):
    """A struct field of a struct (``place.geo.risk``), NULL at either depth: SQL and
    function conditions find on Spark what they find over NamedTuples locally."""
    from statemachines.spark import run_batch
    from tests.test_expressions import NESTED_CONDITIONS, Geo, Place, Visit

    rnd = random.Random(3)
    cities, geos = ["Paris", "Oslo", None], [None, Geo("FR", 9), Geo("NO", None), Geo(None, 1)]
    places = [None, *(Place(city, geo) for city in cities for geo in geos)]
    events = [(f"u{rnd.randrange(5)}", Visit(rnd.choice(["fail", "ok"]), rnd.choice(places)), t, 0) for t in range(300)]
    schema = ("key string, symbol struct<kind: string, place: struct<city: string, "
              "geo: struct<country: string, risk: bigint>>>, time long, order long")
    frame = spark.createDataFrame(events, schema)
    for i in (0, 1):
        first, then = NESTED_CONDITIONS[i], NESTED_CONDITIONS[i + 2]
        for conditions in ((first[0], then[0]), (first[1], then[1])):
            detector = Detector(Pattern.begin("x").where(conditions[0]).followed_by("y").where(conditions[1]).within(5))
            local = run_local(detector, events).updates
            assert matches(local)
            batch = run_batch(detector, frame, order="order")
            assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect()) == local
            assert batch.rejected.count() == 0


def test_conditions_on_a_map_field_read_it_on_spark_as_over_a_local_table(spark):
    """A struct symbol with a map field (``attrs map<string, string>``): SQL reads its
    keys (NULL where missing) on Spark as over the same pyarrow table locally, and a
    function reads the same events' ``(key, value)`` pairs alike."""
    import pyarrow as pa

    from statemachines.spark import run_batch

    rnd = random.Random(8)
    maps = [None, [], [("channel", "web")], [("channel", "app"), ("country", "NO")], [("country", "FR")]]
    rows = [(f"u{rnd.randrange(4)}", {"kind": rnd.choice(["fail", "ok"]), "attrs": rnd.choice(maps)}, t) for t in range(200)]
    symbol = pa.struct([("kind", pa.string()), ("attrs", pa.map_(pa.string(), pa.string()))])
    table = pa.table({"key": [r[0] for r in rows], "symbol": pa.array([r[1] for r in rows], symbol), "time": [r[2] for r in rows]})
    sql = Pattern.begin("x").where("kind = 'fail' AND attrs['channel'] = 'web'").followed_by("y").where(
        "kind = 'ok' AND NOT map_contains_key(attrs, 'country')").within(6)
    functions = Pattern.begin("x").where(lambda e: e.kind == "fail" and dict(e.attrs or ()).get("channel") == "web").followed_by(
        "y").where(lambda e: e.kind == "ok" and e.attrs is not None and "country" not in dict(e.attrs)).within(6)
    local = run_local(Detector(sql), table)
    assert matches(local.updates) and local.rejected == []
    assert run_local(Detector(functions), table).updates == local.updates
    frame = spark.createDataFrame([(k, (s["kind"], None if s["attrs"] is None else dict(s["attrs"])), t) for k, s, t in rows],
                                  "key string, symbol struct<kind: string, attrs: map<string, string>>, time long")
    batch = run_batch(Detector(sql), frame)
    assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect()) == local.updates
    assert batch.rejected.count() == 0


@pytest.mark.parametrize("conditions", [FRAUD_CONDITIONS["sql"], FRAUD_CONDITIONS["functions"]], ids=["sql", "functions"])
def test_a_pattern_over_sparks_large_text_batches_finds_what_it_finds_locally(spark, conditions):
    """With ``spark.sql.execution.arrow.useLargeVarTypes`` Spark hands the runtime its
    text as Arrow's large_string: the pattern's rounds find what they find locally."""
    from statemachines.spark import run_batch
    from statemachines.spark.session import scoped_conf

    events = struct_logins(seed=5, users=4, n=120)
    fail, ok = conditions
    detector = Detector(Pattern.begin("fail").where(fail).times(3).followed_by("ok").where(ok).within(10))
    local = run_local(detector, events).updates
    assert matches(local)
    frame = spark.createDataFrame(events, "key string, symbol struct<kind: string, amount: bigint>, time long, order long")
    with scoped_conf(spark, {"spark.sql.execution.arrow.useLargeVarTypes": "true"}):
        batch = run_batch(detector, frame, order="order")
        assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in batch.updates.collect()) == local
        assert batch.rejected.count() == 0


@pytest.mark.parametrize(
    "condition, says",
    [("status = 'locked'", "reads 'status', which the events do not have"), ("kind = 'ok' OR amount", "OR needs TRUE")],
    ids=["a field the struct lacks", "a field that is no boolean"],
)
def test_a_condition_the_struct_cannot_meet_rejects_each_event_as_locally(spark, condition, says):
    """An SQL condition over a field the symbol struct does not have, or one that is
    not boolean where a test is needed: each event is rejected with the reason the
    local runtime gives."""
    from statemachines.spark import run_batch
    from tests.test_expressions import Login

    events = [("u1", Login("fail", t), t, 0) for t in range(5)]
    schema = "key string, symbol struct<kind: string, amount: bigint>, time long, order long"
    detector = Detector(Pattern.begin("a").where(condition))
    refused = run_batch(detector, spark.createDataFrame(events, schema), order="order").rejected.collect()
    local = run_local(detector, events).rejected
    assert sorted((r.time, r.reason, r.detail) for r in refused) == [(r.event.time, r.reason, r.detail) for r in local]
    assert len(refused) == 5 and all(says in r.detail for r in refused)



def test_a_subtype_no_symbol_of_the_column_can_be_is_refused_before_anything_runs(spark, tmp_path):
    """Locally ``subtype(Login)`` tells Logins apart; on Spark a struct symbol is a
    Record of its fields, so the step would never match: run_batch and run_stream
    refuse it, naming the column's type. ``subtype(Record)`` (and ``str`` over a
    string column) can hold, and runs as locally."""
    from statemachines.records import Record, record
    from statemachines.spark import run_batch, run_stream
    from tests.test_expressions import Login

    events = [("u1", Login("fail", t), t, 0) for t in range(4)]
    schema = "key string, symbol struct<kind: string, amount: bigint>, time long, order long"
    frame = spark.createDataFrame(events, schema)
    never = Detector(Pattern.begin("a").subtype(Login).where(lambda e: e.kind == "fail").times(2))
    says = "subtype(Login) never holds on Spark: the symbol column is struct<kind:string,amount:bigint>"
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        run_batch(never, frame, order="order")
    book = RuleDetector([("clicks", never.pattern, 0)])
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        run_batch(book, frame, order="order")
    stream = spark.readStream.schema(schema).parquet(str(tmp_path))
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        run_stream(never, stream, into=tmp_path / "arr", checkpoint=tmp_path / "ckpt")
    assert not (tmp_path / "arr").exists()

    records = Detector(Pattern.begin("a").subtype((Record, int)).where(lambda e: e.kind == "fail").times(2))
    got = run_batch(records, frame, order="order").updates.collect()
    local = run_local(records, [(k, record(("kind", "amount"), s), t, o) for k, s, t, o in events])
    assert consolidate(((r.key, plain(r.value)), r.time, r.diff) for r in got) == consolidate(
        ((k, plain(v)), t, d) for (k, v), t, d in local.updates
    ) and matches(local.updates)
    texts = Detector(Pattern.begin("a").subtype(str).where(lambda e: e == "fail").times(2))
    assert run_batch(texts, spark.createDataFrame(logins(), SCHEMA), order="order").updates.count() > 0


def test_timestamp_events_with_a_timedelta_gap_and_with_a_number_window_run_as_locally(spark):
    """A timedelta window and gap over a timestamp column find what the local runtime
    finds; a number window over the same column rejects each event (``time_kind``) as
    the local runtime does."""
    import datetime

    from statemachines.spark import run_batch

    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    rnd = random.Random(4)
    events = [(f"u{rnd.randrange(3)}", rnd.choice("abc"), start + datetime.timedelta(seconds=t), 0) for t in range(60)]
    frame = spark.createDataFrame(events, "key string, symbol string, time timestamp, order long")
    base = Pattern.begin("a").where(lambda e: e == "a").followed_by("b").where(lambda e: e == "b")
    fitting = base.within(datetime.timedelta(seconds=4), "previous_and_current").within(datetime.timedelta(seconds=9))

    def aware(x):  # collect() gives naive local times
        if isinstance(x, datetime.datetime):
            return x.astimezone(datetime.UTC)
        return tuple(aware(y) for y in x) if isinstance(x, tuple) else x

    for pattern in (fitting, base.within(9)):
        local = run_local(Detector(pattern), events)
        batch = run_batch(Detector(pattern), frame, order="order")
        got = consolidate(((r.key, aware(plain(r.value))), aware(r.time), r.diff) for r in batch.updates.collect())
        assert got == local.updates
        refused = sorted((r.key, aware(r.time), r.reason) for r in batch.rejected.collect())
        assert refused == sorted((r.event.key, r.event.time, r.reason.value) for r in local.rejected)
    assert matches(run_local(Detector(fitting), events).updates) and not run_local(Detector(fitting), events).rejected
    assert len(refused) == len(events) and {r[2] for r in refused} == {"time_kind"}
