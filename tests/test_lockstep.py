"""A detector whose conditions read only the event steps its keys together in arrays
(``library/lockstep.py``): it must give exactly what the detector gives event by
event (``advance_key``), for any pattern, events, frontier and values before."""

from __future__ import annotations

import datetime
import random

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from statemachines import Machine, advance_key, run_local
from statemachines.events import Event
from statemachines.library import Detector, Pattern, matches
from statemachines.library.lockstep import table_of
from statemachines.library.pattern import Skip
from tests.test_expressions import AMOUNTS, KINDS, Login
from tests.test_pattern_data import patterns


def keyed_events(seed: int, n: int, keys: int, span: int, floats: bool) -> dict[str, list[Event]]:
    """Random logins for a few keys, each key's sorted by time (ties kept in order)."""
    rnd = random.Random(seed)
    by_key: dict[str, list[Event]] = {}
    for _ in range(n):
        key = f"u{rnd.randrange(keys)}"
        time = rnd.randrange(span) / (2 if floats else 1)
        symbol = Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)) if rnd.random() > 0.02 else ("not", "a record")
        by_key.setdefault(key, []).append(Event(key, symbol, float(time) if floats else int(time)))
    return {k: sorted(es, key=lambda e: e.time) for k, es in by_key.items()}


def both_ways(machine: Machine, by_key: dict[str, list[Event]], cut: float | None):
    """Each key's outcome up to ``cut``, then from there to the end, is the same
    event by event and through the machine's ``advance_keys`` (in rounds)."""
    before = {k: frozenset() for k in by_key}
    steps = [(cut, lambda e: e.time < cut), (None, lambda e: True)] if cut is not None else [(None, lambda e: True)]
    done: dict[str, int] = dict.fromkeys(by_key, 0)
    for upto, takes in steps:
        work = []
        for key, events in by_key.items():
            now = [e for e in events[done[key]:] if takes(e)]
            done[key] += len(now)
            work.append((key, before[key], now))
        try:
            expected = {key: advance_key(machine, key, values, events, upto, None) for key, values, events in work}
        except TypeError:  # a function condition asked about a symbol it cannot read
            with pytest.raises(TypeError):
                list(machine.advance_keys(work, upto, None))
            return
        got = {key: outcome for key, _, outcome in machine.advance_keys(work, upto, None)}
        assert got == expected
        for key, (_, updates, _) in expected.items():  # 0 == 0.0: the times' types too
            assert [type(u[1]) for u in got[key][1]] == [type(u[1]) for u in updates]
        before = {key: expected[key][0] for key in by_key}


@settings(max_examples=300, deadline=None)
@given(
    st.booleans().flatmap(lambda functions: patterns(functions=functions)),
    # at most 14 events: a loop taking any event may hold 2^n partial matches of n events
    st.integers(0, 2**32), st.integers(1, 14), st.integers(1, 3), st.booleans(), st.booleans(),
)
def test_keys_stepped_in_rounds_give_what_each_key_gives_event_by_event(pattern, seed, n, keys, floats, cut):
    """SQL or function conditions; a function may raise on a symbol that is not a
    login, and must then raise in rounds exactly when it does event by event."""
    assume(pattern is not None)
    # rounds cover patterns without a skip strategy; windows of time deltas are left to datetimes' tests
    window = 10 if isinstance(pattern.window, datetime.timedelta) else pattern.window
    detector = Detector(attrs.evolve(pattern, skip=Skip.NO_SKIP, skip_step=None, raise_on_miss=False, window=window))
    assume(table_of(detector) is not None)
    by_key = keyed_events(seed, n, keys, 30, floats)
    both_ways(detector, by_key, 12.5 if cut else None)


def test_patterns_whose_conditions_read_only_the_event_and_skip_nothing_are_stepped_in_rounds():
    sql = Pattern.begin("fail").where("kind = 'fail'").times(2).followed_by("ok").where("kind = 'ok'").within(10)
    assert table_of(Detector(sql)) is not None
    function = Pattern.begin("fail").where(lambda e: e.kind == "fail").followed_by("ok").where("kind = 'ok'")
    assert table_of(Detector(function)) is not None
    skipping = Pattern.begin("fail", "skip_past_last_event").where("kind = 'fail'").followed_by("ok").where("kind = 'ok'")
    assert table_of(Detector(skipping)) is None
    reads_matched = Pattern.begin("fail").where("kind = 'fail'").followed_by("ok").where(
        lambda e, matched: e.amount > len(matched["fail"]))
    assert table_of(Detector(reads_matched)) is None


def test_a_function_condition_that_raises_on_an_event_no_step_asks_about_does_not_stop_the_run():
    """Event by event a step asks only its own condition: ``amount > 5`` is asked
    only after a ``fail``, so a first event without an amount never reaches it."""
    pattern = Pattern.begin("fail").where(lambda e: e.kind == "fail").followed_by("big").where(
        lambda e: e.amount > 5).within(10)
    events = [("ann", Login("view", None), 0), ("ann", Login("fail", 1), 1), ("ann", Login("ok", 9), 2),
              ("bob", Login("fail", 1), 0), ("bob", Login("ok", 9), 1)]
    stepped = run_local(Detector(pattern), events)
    assert stepped.updates == run_local(one_by_one(pattern), events).updates
    assert {m.key for m in matches(stepped.updates)} == {"ann", "bob"}


def test_a_run_gives_the_same_matches_whether_keys_step_in_rounds_or_one_by_one():
    pattern = Pattern.begin("fail").where("kind = 'fail'").times(3).followed_by("ok").where(
        "kind = 'ok' AND amount > 10").within(10)
    rnd = random.Random(3)
    events = [(f"u{rnd.randrange(30)}", Login(rnd.choice(KINDS), rnd.choice(AMOUNTS)), rnd.randrange(200))
              for _ in range(3000)]

    stepped = run_local(Detector(pattern), events)
    alone = run_local(one_by_one(pattern), events)
    assert stepped.updates == alone.updates and stepped.rejected == alone.rejected
    assert len(matches(stepped.updates)) > 10


def test_a_subclass_of_the_detector_runs_key_by_key_through_its_own_transition():
    class Counting(Detector):
        seen = 0

        def transition(self, key, values, symbol, time, position=0):
            Counting.seen += 1
            return super().transition(key, values, symbol, time, position)

    pattern = Pattern.begin("fail").where("kind = 'fail'").followed_by("ok").where("kind = 'ok'").within(5)
    events = [("ann", Login(kind, 1), t) for t, kind in enumerate(["fail", "ok", "view"])]
    assert run_local(Counting(pattern), events).updates == run_local(Detector(pattern), events).updates
    assert Counting.seen == len(events)


def one_by_one(pattern: Pattern) -> Detector:
    """A detector that runs key by key, event by event (its pattern not covered)."""
    detector = Detector(pattern)
    detector._table = None  # not covered: advance_keys runs key by key
    return detector
