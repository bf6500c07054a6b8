"""Upsert against the seed's example, a naive replay, and its own generic path."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from statemachines import (
    Event,
    LocalRuntime,
    collection_at,
    event_rank,
    parse_table,
    run_local,
)
from statemachines.library import Upsert
from tests import strategies as sst
from tests.models import collection_from_replay, replay

# The seed's example (six upserts -> six updates) is the first case of the contract
# suite, tests/contract.py, run against every runtime.


def test_same_time_commands_net_out_and_highest_order_wins():
    events = [("k", "a", 0, 1), ("k", "c", 1, 9), ("k", "b", 1, 3), ("k", "a", 1, 2)]
    assert run_local(Upsert(), events).updates == parse_table(
        """
        key | value | time | diff
        k   | a     | 0    | +1
        k   | a     | 1    | -1
        k   | c     | 1    | +1
        """
    )
    # a flicker away and back within one time emits nothing at all
    flicker = [("k", "a", 0, 0), ("k", None, 1, 0), ("k", "a", 1, 1)]
    assert [u.time for u in run_local(Upsert(), flicker).updates] == [0]


def test_missing_orders_tie_break_by_symbol_repr_whatever_the_arrival():
    events = [("k", "b", 0), ("k", "a", 0), ("k", "c", 0, 0)]
    for _ in range(5):
        random.shuffle(events)
        # ordered events win over unordered ones; among unordered, repr decides
        assert run_local(Upsert(), events).updates[0].data == ("k", "c")
    assert run_local(Upsert(), [("k", "b", 0), ("k", "a", 0)]).updates[0].data == ("k", "b")


@given(sst.events())
def test_accumulated_updates_equal_a_naive_replay_at_every_time(events):
    result = run_local(Upsert(), events)
    history = replay(Upsert(), events)
    for time in range(-1, 14):
        accumulated = collection_at(result.updates, time)
        assert set(accumulated) == collection_from_replay(history, time)
        assert all(count == 1 for count in accumulated.values())


@given(sst.events(), st.randoms(use_true_random=False), sst.frontier_steps())
def test_output_ignores_arrival_order_and_frontier_steps(events, rnd, steps):
    whole = run_local(Upsert(), events)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    runtime = LocalRuntime(Upsert())
    runtime.feed(shuffled)
    stepped = []
    for frontier in steps:
        stepped.extend(runtime.advance_to(frontier).updates)
    stepped.extend(runtime.finish().updates)
    assert stepped == whole.updates


@given(sst.events(), st.randoms(use_true_random=False), sst.frontier_steps())
def test_events_fed_between_steps_give_the_same_output(events, rnd, steps):
    """Feed each event just before the frontier passes its time, in random chunks."""
    runtime = LocalRuntime(Upsert())
    remaining = list(events)
    rnd.shuffle(remaining)
    stepped = []
    for frontier in steps:
        now = [e.time < frontier or rnd.random() < 0.3 for e in remaining]
        runtime.feed([e for e, take in zip(remaining, now, strict=True) if take])
        remaining = [e for e, take in zip(remaining, now, strict=True) if not take]
        stepped.extend(runtime.advance_to(frontier).updates)
    runtime.feed(remaining)
    stepped.extend(runtime.finish().updates)
    assert stepped == run_local(Upsert(), events).updates


@given(st.lists(st.builds(Event, st.just("k"), sst.upsert_values, st.just(0), sst.orders)))
def test_same_time_reduction_is_order_insensitive(events):
    upsert = Upsert()
    for _ in range(3):
        random.shuffle(events)
        if events:
            winner = events[0]
            for event in events[1:]:
                winner = upsert.reduce_same_time(winner, event)
            assert winner == max(events, key=lambda e: event_rank(e.order, e.symbol))
