"""UpsertWithLateness: the two known failure shapes, a literal reference, eviction."""

from __future__ import annotations

import datetime
import math
import random
from operator import itemgetter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import (
    Arrangement,
    Event,
    InvalidArgument,
    LocalRuntime,
    PersistedArrangement,
    Reason,
    consolidate,
    run_local,
    sort_updates,
)
from statemachines.library import Late, Upsert, UpsertWithLateness
from statemachines.waterline import Waterline
from tests import strategies as sst
from tests.models import upsert_with_lateness

at = itemgetter(0)  # a value is (event time, payload)


def by_time(value):
    return value[0]


def test_a_late_second_command_leaves_the_first_one_standing():
    """Two commands to one key at one time: the first valid, the second too late.

    Applying both and filtering afterwards would leave nothing; the upsert itself
    refuses the second, so the first one's value is in the collection.
    """
    machine = UpsertWithLateness(5, value_time=at)
    runtime = LocalRuntime(machine)
    runtime.feed([("other", (100, "seen"), 1), ("k", (96, "old"), 1)])
    runtime.advance_to(2)
    runtime.feed([("k", (101, "valid"), 2, 0), ("k", (20, "too late"), 2, 1)])
    step = runtime.advance_to(3)
    assert runtime.values("k") == {(101, "valid")}
    assert [(u.data, u.diff) for u in step.updates] == [
        (("k", (96, "old")), -1),
        (("k", (101, "valid")), 1),
    ]
    assert [(r.event.symbol, r.reason) for r in step.rejected] == [
        ((20, "too late"), Late.VALUE_BELOW_WATERLINE)
    ]
    assert "waterline 95" in step.rejected[0].detail


def test_a_late_insert_to_an_existing_key_does_not_delete_it():
    machine = UpsertWithLateness(10, value_time=at)
    result = run_local(machine, [("k", (50, "row"), 1), ("k", (3, "late"), 2)])
    assert run_local(Upsert(), [("k", (50, "row"), 1)]).updates == result.updates
    assert [r.reason for r in result.rejected] == [Late.VALUE_BELOW_WATERLINE]


def test_a_value_below_the_waterline_can_be_neither_overwritten_nor_deleted():
    machine = UpsertWithLateness(10, value_time=at)
    events = [("old", (5, "x"), 1), ("new", (40, "y"), 2), ("old", (41, "z"), 3), ("old", None, 4)]
    result = run_local(machine, events)
    assert {u.data for u in result.updates} == {("old", (5, "x")), ("new", (40, "y"))}
    assert [r.reason for r in result.rejected] == [Late.OVERWRITES_BELOW_WATERLINE] * 2


def test_the_waterline_reads_only_earlier_times():
    # at time 1 both values are judged against the waterline of time 0 (none yet)
    machine = UpsertWithLateness(1, value_time=at)
    result = run_local(machine, [("a", (100, "x"), 1), ("b", (3, "y"), 1)])
    assert len(result.updates) == 2 and not result.rejected


def test_a_value_set_and_replaced_within_one_time_does_not_move_the_waterline():
    machine = UpsertWithLateness(5, value_time=at)
    events = [("k", (100, "flash"), 1, 0), ("k", (10, "kept"), 1, 1), ("j", (9, "ok"), 2)]
    result = run_local(machine, events)
    assert not result.rejected
    assert ("j", (9, "ok")) in {u.data for u in result.updates}


def test_definition_and_user_function_errors():
    with pytest.raises(InvalidArgument, match="value_time, key_time or both"):
        UpsertWithLateness(5)
    with pytest.raises(InvalidArgument, match="must be a function"):
        UpsertWithLateness(5, value_time=3)
    for lateness in (-1, float("nan"), float("inf"), "5", True, None, datetime.timedelta(seconds=-1)):
        with pytest.raises(InvalidArgument, match="lateness is a finite duration of at least 0"):
            UpsertWithLateness(lateness, value_time=at)
    machine = UpsertWithLateness(5, value_time=at, key_time=len)
    events = [("k", (10, "x"), 1), ("k", "no time", 2), ("k", (None,), 2), ("k", None, 3, None)]
    events += [(3, (11, "x"), 3)]
    result = run_local(machine, events)
    assert [(r.event.symbol, r.reason) for r in result.rejected] == [
        ("no time", Reason.INVALID_SYMBOL),
        ((None,), Reason.INVALID_SYMBOL),
        ((11, "x"), Reason.BAD_KEY),
    ]
    assert "value_time('no time') returned 'n', which is not a time" in result.rejected[0].detail
    assert "key_time(3) failed: TypeError" in result.rejected[2].detail
    assert [(u.time, u.diff) for u in result.updates] == [(1, 1), (3, -1)]


@pytest.mark.parametrize("rule", ["value_time", "key_time"])
def test_an_infinite_event_time_is_rejected_not_the_waterline_forever(rule):
    """One command whose event time is infinite would lift the waterline to infinity,
    and every later command on every key would be late; it is rejected instead, as
    an event whose own time is infinite is."""
    machine = UpsertWithLateness(5, **{rule: (lambda v: v[0]) if rule == "value_time" else (lambda k: k[1])})
    sane = [(("a", 10), (10, "x"), 1), (("b", 12), (12, "y"), 3)]
    events = [sane[0], (("c", math.inf), (math.inf, "u"), 2), (("d", -math.inf), (-math.inf, "w"), 2), sane[1]]
    result = run_local(machine, events)
    assert [(r.reason, r.detail.split(") ")[-1]) for r in result.rejected] == [
        (Reason.INVALID_SYMBOL if rule == "value_time" else Reason.BAD_KEY, f"returned {t}, which is not a finite time")
        for t in ("inf", "-inf")
    ]
    assert result.updates == run_local(machine, sane).updates == run_local(Upsert(), sane).updates


# -- against the literal reference ---------------------------------------------------

timed_values = st.none() | st.tuples(st.integers(0, 30), st.sampled_from(["p", "q"]))
latenesses = st.integers(0, 12)


def check_against_reference(events, lateness, **rules):
    machine = UpsertWithLateness(lateness, **rules)
    result = run_local(machine, events)
    expected, expected_rejected = upsert_with_lateness(events, lateness, **rules)
    assert result.updates == sort_updates(consolidate(expected))
    got = sorted(((r.event, r.reason.value) for r in result.rejected), key=repr)
    assert got == sorted(expected_rejected, key=repr)
    # every command is accounted for: the accepted ones alone, upserted, give the output
    refused = [r.event for r in result.rejected]
    accepted = list(events)
    for event in refused:
        accepted.remove(event)
    assert len(accepted) + len(refused) == len(events)
    assert run_local(Upsert(), accepted).updates == result.updates
    return result


@given(sst.events(timed_values, max_size=50), latenesses)
def test_value_lateness_matches_the_reference(events, lateness):
    check_against_reference(events, lateness, value_time=at)


@given(sst.events(timed_values, max_size=50), latenesses, st.lists(st.none() | st.integers(-5, 40), min_size=1))
def test_any_first_guess_of_the_waterline_gives_the_same_result(events, lateness, guesses):
    """The first guess (``guess_marks``) only decides how many runs settle the
    waterline: guesses too high, too low or missing give the reference's result."""
    drawn = iter(guesses * (len(events) + 1))

    class Guessing(UpsertWithLateness):
        def guess_marks(self, key, symbol):
            guess = next(drawn, None)
            return None if guess is None else (guess, None)

    result = run_local(Guessing(lateness, value_time=at), events)
    expected, expected_rejected = upsert_with_lateness(events, lateness, value_time=at)
    assert result.updates == sort_updates(consolidate(expected))
    assert sorted(((r.event, r.reason.value) for r in result.rejected), key=repr) == sorted(expected_rejected, key=repr)


def test_commands_all_accepted_settle_the_waterline_in_one_run_with_the_guess_and_two_without():
    runs = []

    class Counted(UpsertWithLateness):
        def with_waterline(self, waterline):
            runs.append(waterline)
            return super().with_waterline(waterline)

    class Unguessed(Counted):
        def guess_marks(self, key, symbol):
            return None

    events = [Event(f"k{i % 3}", (i, "v"), i) for i in range(20)]  # each newer than the last
    counts = {}
    for machine in (Counted(5, value_time=at), Unguessed(5, value_time=at)):
        runs.clear()
        result = run_local(machine, events)
        assert not result.rejected
        counts[type(machine).__name__] = len(runs)
    assert counts == {"Counted": 1, "Unguessed": 2}


keyed_by_time = st.tuples(st.sampled_from(["s1", "s2"]), st.integers(0, 30))


@given(sst.events(timed_values, key=keyed_by_time, max_size=50), latenesses, st.booleans())
def test_key_lateness_matches_the_reference(events, lateness, with_values):
    rules = {"key_time": itemgetter(1)}
    if with_values:
        rules["value_time"] = at
    check_against_reference(events, lateness, **rules)


@given(
    sst.events(timed_values, max_size=50),
    latenesses,
    sst.frontier_steps(),
    st.randoms(use_true_random=False),
)
def test_batching_and_arrival_order_do_not_matter(events, lateness, frontiers, rnd):
    machine = UpsertWithLateness(lateness, value_time=at)
    whole = run_local(machine, events)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    runtime = LocalRuntime(machine)
    updates, rejected, done = [], [], None
    for frontier in frontiers:
        runtime.feed([e for e in shuffled if (done is None or e.time >= done) and e.time < frontier])
        step = runtime.advance_to(frontier)
        updates += step.updates
        rejected += step.rejected
        done = frontier
    runtime.feed([e for e in shuffled if done is None or e.time >= done])
    last = runtime.finish()
    updates += last.updates
    rejected += last.rejected
    assert sort_updates(consolidate(updates)) == whole.updates
    assert sorted(rejected, key=repr) == sorted(whole.rejected, key=repr)


@given(sst.events(timed_values, max_size=40), latenesses, st.integers(0, 13))
def test_a_run_continued_from_its_arrangement_equals_one_run(events, lateness, split):
    machine = UpsertWithLateness(lateness, value_time=at)
    arrangement = Arrangement()
    first = run_local(machine, [e for e in events if e.time < split], into=arrangement)
    second = run_local(machine, [e for e in events if e.time >= split], into=arrangement)
    whole = run_local(machine, events)
    assert sort_updates(consolidate(first.updates + second.updates)) == whole.updates
    assert sorted(first.rejected + second.rejected, key=repr) == sorted(whole.rejected, key=repr)


# -- key lateness lets the runtime forget keys ---------------------------------------


def sensor_windows(n_windows, rnd):
    """Readings per (sensor, window): each window's key time is its start."""
    events = []
    for window in range(n_windows):
        for sensor in range(20):
            key = (f"s{sensor}", window * 10)
            for i in range(3):
                events.append(Event(key, (window * 10 + i, rnd.random()), window * 10 + i))
        if window > 2:  # stragglers for a window long closed: rejected, not looked up
            events.append(Event(("s0", (window - 3) * 10), (window * 10, 0.5), window * 10 + 5))
    return events


def test_key_lateness_keeps_working_state_bounded_and_the_output_unchanged():
    rnd = random.Random(7)
    events = sensor_windows(60, rnd)
    machine = UpsertWithLateness(15, key_time=itemgetter(1))
    runtime = LocalRuntime(machine)
    updates, rejected, live = [], [], []
    for window in range(61):
        runtime.feed([e for e in events if window * 10 - 10 <= e.time < window * 10])
        step = runtime.advance_to(window * 10)
        updates += step.updates
        rejected += step.rejected
        live.append(runtime.stats()["live_keys"])
    keeping = run_local(machine, events, into=Arrangement())  # an arrangement never forgets
    assert sort_updates(consolidate(updates)) == keeping.updates
    assert sorted(rejected, key=repr) == sorted(keeping.rejected, key=repr)
    assert {r.reason for r in rejected} == {Late.KEY_BELOW_WATERLINE}
    total_keys = len({e.key for e in events})
    assert max(live) <= 3 * 20 < total_keys  # a few windows of 20 sensors, not all 60
    assert runtime.stats()["evicted_keys"] >= total_keys - 3 * 20


def test_waterline_step_function():
    line = Waterline.from_marks((1, None), {5: (3, 7), 2: (2, None)})
    assert [line.high_before(t) for t in (0, 2, 3, 5, 6)] == [
        (1, None), (1, None), (2, None), (2, None), (3, 7)
    ]
    assert line.high == (3, 7)


# the events of timed_values as Spark rows
SPARK_SCHEMA = "key string, symbol struct<at: long, p: string>, time long, order long"


@pytest.mark.spark
@settings(max_examples=4, deadline=None)
@given(sst.events(timed_values, key=st.sampled_from(["a", "b", "c"]), max_size=30), latenesses, st.integers(0, 13))
def test_spark_batch_continued_from_its_arrangement_equals_run_local(spark, tmp_path_factory, events, lateness, split):
    from statemachines.spark import run_batch

    machine = UpsertWithLateness(lateness, value_time=at)
    into = tmp_path_factory.mktemp("arr")
    rejected = []
    for part in ([e for e in events if e.time < split], [e for e in events if e.time >= split]):
        if part:
            result = run_batch(machine, spark.createDataFrame(part, SPARK_SCHEMA), order="order", into=into)
            rejected += [(r.key, r.symbol and tuple(r.symbol), r.time, r.reason) for r in result.rejected.collect()]
    whole = run_local(machine, events)
    stored = PersistedArrangement(into).updates() if events else []
    assert sort_updates(consolidate(stored)) == whole.updates
    expected = [(r.event.key, r.event.symbol, r.event.time, r.reason.value) for r in whole.rejected]
    assert sorted(rejected, key=repr) == sorted(expected, key=repr)


@pytest.mark.spark
@settings(max_examples=4, deadline=None)
@given(sst.events(timed_values, key=st.sampled_from(["a", "b", "c", "d"]), max_size=30), latenesses, st.integers(-15, 15))
def test_spark_settles_from_any_first_guess_to_the_reference(spark, events, lateness, shift):
    """First guesses ``shift`` too high or too low take several runs to settle, to
    the reference's result."""
    from statemachines.spark import run_batch

    class Guessing(UpsertWithLateness):
        def guess_marks(self, key, symbol):
            return None if symbol is None else (symbol[0] + shift, None)

    result = run_batch(Guessing(lateness, value_time=at), spark.createDataFrame(events, SPARK_SCHEMA), order="order")
    expected, expected_rejected = upsert_with_lateness(events, lateness, value_time=at)
    got = [((r.key, r.value and tuple(r.value)), r.time, r.diff) for r in result.updates.collect()]
    assert sort_updates(consolidate(got)) == sort_updates(consolidate(expected))
    rejected = [((r.key, r.symbol and tuple(r.symbol), r.time, r.order), r.reason) for r in result.rejected.collect()]
    assert sorted(rejected, key=repr) == sorted(((tuple(e), why) for e, why in expected_rejected), key=repr)



@given(sst.events(timed_values, max_size=40), latenesses, st.sampled_from(["Europe/Paris", "America/New_York", "UTC"]))
def test_value_times_of_any_zone_are_instants(events, lateness, zone):
    """A value's time in minutes after midnight UTC of the night Paris and New York
    repeat an hour, read by ``value_time`` as a datetime of ``zone``: the run is the
    one over the same instants in UTC (the waterline had subtracted the lateness
    from a wall clock, an hour short across the change)."""
    from zoneinfo import ZoneInfo

    start = datetime.datetime(2024, 10, 27, tzinfo=datetime.UTC)

    def moment(value, tz):
        return (start + datetime.timedelta(minutes=15 * value[0])).astimezone(tz)

    lateness = datetime.timedelta(minutes=15 * lateness)
    in_zone = run_local(UpsertWithLateness(lateness, value_time=lambda v: moment(v, ZoneInfo(zone))), events)
    in_utc = run_local(UpsertWithLateness(lateness, value_time=lambda v: moment(v, datetime.UTC)), events)
    assert (in_zone.updates, [r.event for r in in_zone.rejected]) == (in_utc.updates, [r.event for r in in_utc.rejected])
