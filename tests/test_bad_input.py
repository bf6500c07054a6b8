"""Random mixtures of valid and invalid events: the valid ones' output, the invalid ones rejected."""

from __future__ import annotations

import datetime as dt
import random
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from statemachines import PersistedArrangement, Reason, run_local
from statemachines.library import Detector, Pattern, Upsert
from tests import strategies as sst
from tests.machines import Decoded, Fragile, Measure, Unpicklable

# each kind of invalid event, with the reason it must be rejected for
INVALID = st.one_of(
    st.builds(lambda s, t: (None, s, t), sst.upsert_values, sst.times).map(lambda e: (e, Reason.NULL_KEY)),
    st.builds(lambda k, s: (k, s, None), sst.keys, sst.upsert_values).map(lambda e: (e, Reason.NULL_TIME)),
    st.builds(lambda k, s: (k, s, "noon"), sst.keys, sst.upsert_values).map(lambda e: (e, Reason.BAD_TIME)),
    st.builds(lambda k, t: (k, ["un", "hashable"], t), sst.keys, sst.times).map(lambda e: (e, Reason.INVALID_SYMBOL)),
    st.just(((1, 2), Reason.MALFORMED)),
    st.just(("just a string", Reason.MALFORMED)),
)


@given(sst.events(), st.lists(INVALID, max_size=10), st.randoms(use_true_random=False))
def test_invalid_events_are_exactly_the_rejected_ones(valid, invalid, rnd):
    mixed = list(valid) + [event for event, _ in invalid]
    rnd.shuffle(mixed)
    result = run_local(Upsert(), mixed)
    assert result.updates == run_local(Upsert(), valid).updates
    assert sorted(r.reason for r in result.rejected) == sorted(reason for _, reason in invalid)
    assert len(mixed) == len(valid) + len(result.rejected)  # input = applied + rejected


def test_a_transition_that_raises_rejects_its_event_and_leaves_the_key_unchanged():
    events = [("k", "a", 0), ("k", "boom", 1), ("j", "x", 1)]
    result = run_local(Fragile(), events)
    assert [(r.event.key, r.reason) for r in result.rejected] == [("k", Reason.TRANSITION_FAILED)]
    assert result.updates == run_local(Fragile(), [events[0], events[2]]).updates


@pytest.mark.spark
def test_spark_rejects_the_same_mixture(spark):
    rnd = random.Random(11)
    valid = [(rnd.choice("abc"), rnd.choice(["x", "y", None]), rnd.randrange(10), rnd.randrange(3)) for _ in range(60)]
    invalid = [(None, "x", 3, 0), ("a", "y", None, 1), (None, None, None, None)]
    mixed = valid + invalid
    rnd.shuffle(mixed)
    from statemachines.spark import run_batch

    frame = spark.createDataFrame(mixed, "key string, symbol string, time long, order long")
    for native in (False, True):
        result = run_batch(Upsert(), frame, order="order", native=native)
        got = sorted(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
        assert got == sorted(tuple(u) for u in run_local(Upsert(), valid).updates)
        assert sorted(r.reason for r in result.rejected.collect()) == ["null_key", "null_key", "null_time"]


def test_a_value_the_arrangement_cannot_store_is_rejected_and_the_run_goes_on(tmp_path):
    bad = Unpicklable()
    events = [("k", "a", 0), ("k", bad, 1), ("j", "x", 1), ("k", "b", 2, 0), ("k", bad, 2, 1), ("k", "c", 3)]
    arrangement = PersistedArrangement(tmp_path)
    result = run_local(Upsert(), events, into=arrangement)
    assert [(r.event.time, r.reason) for r in result.rejected] == [
        (1, Reason.UNSERIALISABLE_VALUE),
        (2, Reason.UNSERIALISABLE_VALUE),
    ]
    assert "cannot be stored" in result.rejected[0].detail
    stored = [e for e in events if e[1] is not bad]
    assert PersistedArrangement(tmp_path).updates() == run_local(Upsert(), stored).updates


@pytest.mark.spark
def test_spark_rejects_values_that_do_not_fit_the_value_column(spark):
    from statemachines.spark import run_batch

    events = [("k", "1", 0), ("k", "oops", 1), ("j", "7", 1), ("k", "3", 2)]
    frame = spark.createDataFrame(events, "key string, symbol string, time long")
    result = run_batch(Measure(), frame, value_type="bigint")
    rejected = [(r.key, r.time, r.reason) for r in result.rejected.collect()]
    assert rejected == [("k", 1, "unserialisable_value")]
    got = sorted(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    assert got == sorted(tuple(u) for u in run_local(Measure(), [e for e in events if e[1] != "oops"]).updates)


@pytest.mark.spark
def test_streaming_rejects_unstorable_values_and_missing_columns(spark, tmp_path):
    from statemachines import InvalidArgument
    from statemachines.spark import run_stream
    from tests.contract import Case
    from tests.test_contract import stream_runner

    events = [("k", "1", 0, None), ("k", "oops", 1, None), ("j", "7", 1, None), ("k", "3", 2, None)]
    case = Case("unstorable", Measure(), events, [], value_type="bigint")
    updates, rejected = stream_runner(case, tmp_path, spark)
    assert rejected == [("k", 1, "unserialisable_value")]
    assert updates == run_local(Measure(), [e for e in events if e[1] != "oops"]).updates

    frame = spark.readStream.schema("key string, symbol string").parquet(str(tmp_path / "in"))
    with pytest.raises(InvalidArgument, match="time"):
        run_stream(Measure(), frame, into=tmp_path / "never", checkpoint=tmp_path / "ckpt2")
    assert not (tmp_path / "never").exists()  # nothing written


INT64 = range(-(2**63), 2**63)
wide_ints = st.integers(-(2**64), 2**64) | st.integers(-5, 5)


@given(
    events=st.lists(st.tuples(wide_ints, wide_ints | st.just(()) | st.none(), st.integers(0, 5)), max_size=20),
    cut=st.integers(0, 6),
)
def test_keys_and_values_a_persisted_arrangement_cannot_store_reject_their_events(events, cut, tmp_path_factory):
    """Keys beyond 64 bits are ``bad_key``; values beyond 64 bits or empty tuples
    (no Parquet type holds them) are ``unserialisable_value``; every other event
    applies, in two runs, as in memory."""
    target = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    first = run_local(Upsert(), [e for e in events if e[2] < cut], into=target)
    second = run_local(Upsert(), [e for e in events if e[2] >= cut], into=target)
    rejected = [*first.rejected, *second.rejected]

    def why(event):
        key, value, _ = event
        if key not in INT64:
            return Reason.BAD_KEY
        if value == () or (value is not None and value not in INT64):
            return Reason.UNSERIALISABLE_VALUE
        return None

    assert sorted(((tuple(r.event)[:3], r.reason) for r in rejected), key=repr) == sorted(
        ((e, why(e)) for e in events if why(e)), key=repr
    )
    stored = [e for e in events if why(e) is None]
    assert PersistedArrangement(target.path).updates() == run_local(Upsert(), stored).updates


UNSTORABLE = {
    "a lone surrogate": ("\ud800", "text"),
    "one inside a tuple": (("x", "\udfff"), ("x", "y")),
    "an aware datetime after naive ones": (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 1)),
    "a naive datetime after aware ones": (dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE))
def test_a_value_or_key_that_would_not_read_back_rejects_its_event(case, tmp_path):
    """A string Arrow cannot encode, or a datetime whose zone the column does not
    have (Arrow would shift it or drop its zone): rejected, not written changed or
    failing the write."""
    bad, good = UNSTORABLE[case]
    values = [("a", good, 1), ("b", bad, 2), ("c", good, 3)]
    keys = [(good, "v", 1), (bad, "w", 2), (good, "x", 3)]
    for events, reason in ((values, Reason.UNSERIALISABLE_VALUE), (keys, Reason.BAD_KEY)):
        target = PersistedArrangement(tmp_path / reason.value)
        result = run_local(Upsert(), events, into=target)
        assert [(r.event.time, r.reason) for r in result.rejected] == [(2, reason)]
        kept = [e for e in events if e[2] != 2]
        assert PersistedArrangement(target.path).updates() == run_local(Upsert(), kept).updates


@pytest.mark.spark
def test_spark_rejects_a_value_its_string_column_cannot_hold(spark):
    from statemachines.spark import run_batch

    events = [("k", "fine", 0), ("k", "u+d800", 1), ("j", "also fine", 1)]
    frame = spark.createDataFrame(events, "key string, symbol string, time long")
    result = run_batch(Decoded(), frame)
    assert [(r.key, r.time, r.reason) for r in result.rejected.collect()] == [("k", 1, "unserialisable_value")]
    got = sorted(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    assert got == sorted(tuple(u) for u in run_local(Decoded(), [e for e in events if e[1] != "u+d800"]).updates)


@pytest.mark.spark
@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_spark_refuses_events_whose_key_or_time_type_differs_from_the_arrangements(spark, tmp_path, native):
    """Found before the job runs (it used to fail a task, or fail when publishing
    its files, after all the work), naming the cast; the arrangement is unchanged."""
    from statemachines import InvalidArgument
    from statemachines.spark import run_batch

    target = tmp_path / "arr"
    run_local(Upsert(), [(1, "a", 1), (2, "b", 1)], into=PersistedArrangement(target))
    before = PersistedArrangement(target).updates()
    text_keys = spark.createDataFrame([("1", "c", 2)], "key string, symbol string, time long")
    with pytest.raises(InvalidArgument, match=r"the key column has type string; the arrangement's keys are bigint"):
        run_batch(Upsert(), text_keys, into=target, native=native)
    stamped = spark.createDataFrame([(1, "c", dt.datetime(2026, 1, 1, tzinfo=dt.UTC))], "key long, symbol string, time timestamp")
    with pytest.raises(InvalidArgument, match=r"holds datetime_tz times; the arrangement's are number times"):
        run_batch(Upsert(), stamped, into=target, native=native)
    assert PersistedArrangement(target).updates() == before


@pytest.mark.parametrize("machine", [Upsert(), Detector(Pattern.begin("a").where(lambda e: True))], ids=["upsert", "detector"])
def test_an_unhashable_symbol_is_rejected_saying_how_to_write_it_and_its_pairs_run(machine):
    """A dict or a list inside a symbol cannot be kept in a value: its event is
    rejected naming the tuple form, and the events written so run."""
    written = {"dict": ("a", {"tier": "gold"}), "list in a tuple": ("b", ("x", ["y"]))}
    as_tuples = {"dict": ("a", (("tier", "gold"),)), "list in a tuple": ("b", ("x", ("y",)))}
    result = run_local(machine, [(key, symbol, 1) for key, symbol in written.values()])
    assert [r.event.key for r in result.rejected] == ["a", "b"]
    assert all(r.reason == Reason.INVALID_SYMBOL and "the tuple of its (key, value) pairs" in r.detail for r in result.rejected)
    fixed = run_local(machine, [(key, symbol, 1) for key, symbol in as_tuples.values()])
    assert fixed.rejected == [] and fixed.updates


def test_a_key_or_symbol_nested_too_deeply_to_read_rejects_its_event_and_the_run_goes_on():
    """Tuples within tuples deeper than Python reads recursively: the event is rejected
    saying so (before, the run stopped with a RecursionError), the others applied."""
    import sys

    deep = 1
    for _ in range(sys.getrecursionlimit() + 100):
        deep = (deep,)
    events = [("k", deep, 0), (deep, 1, 0), ("j", 2, 0), ("k", 3, 1)]
    result = run_local(Upsert(), events)
    assert [(r.event.key is deep, r.reason, r.detail) for r in result.rejected] == [
        (False, Reason.INVALID_SYMBOL, "the symbol nests tuples within tuples too deeply to read"),
        (True, Reason.BAD_KEY, "the key nests tuples within tuples too deeply to read"),
    ]
    assert result.updates == run_local(Upsert(), [events[2], events[3]]).updates


def _nested(depth, inner):
    for _ in range(depth):
        inner = (inner,)
    return inner


@settings(max_examples=10, deadline=None)
@given(depth=st.integers(0, 1200), where=st.sampled_from(["key", "value"]))
@example(depth=31, where="value").via("the first depth refused")
@example(depth=42, where="value").via("made a table delta-rs wrote but could not read again")
@example(depth=120, where="key").via("failed the first commit, past Parquet's schema depth")
@example(depth=500, where="value").via("a RecursionError stopped the run")
def test_a_key_or_value_nested_deeper_than_a_table_holds_rejects_its_event_and_the_table_reads(depth, where, tmp_path_factory):
    """A persisted arrangement stores keys or values of tuples nested up to
    MAX_TYPE_NESTING levels and reads them back; deeper ones reject their events
    saying why, and leave a table that later runs write and read."""
    from statemachines.columns import MAX_TYPE_NESTING

    plain = [("k", "v", 0), ("j", "x", 0), ("j", "y", 1)]
    events = [(_nested(depth, k), v, t) if where == "key" else (k, _nested(depth, v), t) for k, v, t in plain]
    path = tmp_path_factory.mktemp("arr")
    result = run_local(Upsert(), events, into=PersistedArrangement(path))
    if depth <= MAX_TYPE_NESTING:
        assert not result.rejected
        assert PersistedArrangement(path).updates() == run_local(Upsert(), events).updates
        return
    assert len(result.rejected) == len(events)
    for rejected in result.rejected:
        # a value the store refuses; or, deeper than Python reads, a symbol the intake refuses
        assert rejected.reason in ({Reason.BAD_KEY} if where == "key" else {Reason.UNSERIALISABLE_VALUE, Reason.INVALID_SYMBOL})
        assert re.search(r"nests (\d+ levels|tuples within tuples too) deep", rejected.detail)
    later = [("a", "b", 5)]
    run_local(Upsert(), later, into=PersistedArrangement(path))
    assert PersistedArrangement(path).updates() == run_local(Upsert(), later).updates


def test_a_value_type_declared_deeper_than_a_table_holds_is_refused(tmp_path):
    import pyarrow as pa

    from statemachines import InvalidArgument
    from statemachines.columns import MAX_TYPE_NESTING

    deep = pa.int64()
    for _ in range(MAX_TYPE_NESTING + 1):
        deep = pa.struct([("_1", deep)])
    with pytest.raises(InvalidArgument, match=f"nests {MAX_TYPE_NESTING + 1} levels deep"):
        PersistedArrangement(tmp_path).expect_value_type(deep)
    PersistedArrangement(tmp_path).expect_value_type(deep.field(0).type)


@pytest.mark.spark
def test_spark_refuses_keys_or_values_nested_deeper_than_a_table_holds_before_writing(spark, tmp_path):
    """On Spark the types are known before anything runs: keys or symbols nested more
    than MAX_TYPE_NESTING levels are refused then, and nothing is written; as deep as
    that they are stored and read back as the local runtime stores them."""
    from statemachines import InvalidArgument
    from statemachines.columns import MAX_TYPE_NESTING
    from statemachines.spark import run_batch

    def frame(depth, where):
        nested = "1" if where == "symbol" else "'k'"
        for _ in range(depth):
            nested = f"named_struct('_1', {nested})"
        key, symbol = (nested, "1") if where == "key" else ("'k'", nested)
        return spark.sql(f"SELECT {key} AS key, {symbol} AS symbol, 1L AS time")

    for where in ("key", "symbol"):
        into = tmp_path / f"{where}-deepest"
        run_batch(Upsert(), frame(MAX_TYPE_NESTING, where), into=into)
        row = frame(MAX_TYPE_NESTING, where).first()
        event = (_as_tuples(row.key), _as_tuples(row.symbol), 1)
        assert PersistedArrangement(into).updates() == run_local(Upsert(), [event]).updates
        with pytest.raises(InvalidArgument, match=f"the {where.replace('symbol', 'value')}s have a type nesting"):
            run_batch(Upsert(), frame(MAX_TYPE_NESTING + 1, where), into=tmp_path / f"{where}-deeper")
        assert not (tmp_path / f"{where}-deeper").exists()


def _as_tuples(value):
    """A Spark Row (of Rows) as the plain tuples an arrangement reads back."""
    return tuple(_as_tuples(v) for v in value) if isinstance(value, tuple) else value
