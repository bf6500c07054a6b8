"""Updates, consolidation and update tables."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import (
    Event,
    InvalidArgument,
    Machine,
    Update,
    UpdateColumns,
    collection_at,
    consolidate,
    format_table,
    is_consolidated,
    parse_table,
    sort_updates,
)
from statemachines.core import advance_key
from statemachines.library import Detector, Pattern
from statemachines.updates import sort_key_runs, total_order_key
from tests import strategies as sst
from tests.machines import Session, Tags


@given(sst.update_batches)
def test_consolidation_keeps_every_collection_and_is_canonical(updates):
    merged = consolidate(updates)
    assert is_consolidated(merged)
    assert all(u.diff != 0 for u in merged)
    assert len({(u.data, u.time) for u in merged}) == len(merged)
    assert merged == sorted(merged, key=lambda u: (u.time, u.data))
    for time in range(-1, 14):
        assert collection_at(merged, time) == collection_at(updates, time)


@given(sst.update_batches, sst.update_batches)
def test_consolidation_does_not_depend_on_how_the_stream_was_split(a, b):
    assert consolidate(a + b) == consolidate(consolidate(b) + consolidate(a))


@given(sst.update_batches)
def test_tables_round_trip(updates):
    merged = consolidate(updates)
    assert parse_table(format_table(merged)) == merged


def test_tables_parse_none_and_quoted_numbers():
    assert parse_table(
        """
        key | value | time | diff
        k   | None  | 3    | -1
        k   | '7'   | 3    | +1
        """
    ) == [Update(("k", None), 3, -1), Update(("k", "7"), 3, 1)]


mixed_data = st.tuples(sst.keys, sst.upsert_values | st.tuples(st.integers(0, 2), st.none() | st.text("ab", max_size=2)))


@given(st.lists(st.builds(Update, mixed_data, sst.times, st.sampled_from([-1, 1])), max_size=40))
def test_key_runs_in_time_and_value_order_sort_as_sort_updates_does(updates):
    """The local runtime joins each key's updates (each run in (time, value) order, as
    the one step emits them) with sort_key_runs: the same order as sort_updates."""
    runs: dict = {}
    for u in sort_updates(list(updates)):  # a key's updates in (time, value) order
        runs.setdefault(u.data[0], []).append(u)
    assert sort_key_runs(runs) == sort_updates(list(updates))


def test_the_step_emits_a_keys_changes_at_one_time_in_value_order():
    class Swap(Machine):
        def transition(self, key, values, symbol, time):
            return frozenset(symbol)

    events = [("k", ("b", "a", "c"), 1), ("k", ("d",), 2), ("k", (None, 2), 3)]  # mixed: the total order
    _, updates, _ = advance_key(Swap(), "k", frozenset(), [Event(*e, None) for e in events], None)
    for time in (1, 2, 3):
        at = [u for u in updates if u.time == time]
        assert at == sorted(at, key=lambda u: total_order_key(u.data[1])) and len(at) > 1


def key_events(symbols):
    """Events of key ``k`` from ``(symbol, time)`` pairs, in order of time, then of arrival."""
    return sorted((Event("k", s, t, i) for i, (s, t) in enumerate(symbols)), key=lambda e: (e.time, e.order))


FLOOD = Detector(  # partial matches, matches and timeouts
    Pattern.begin("add").where(lambda s: s[0] == "add").times(2)
    .followed_by("del").where(lambda s: s[0] == "del").within(4)
)


@given(
    st.sampled_from([Tags(), Session(), FLOOD]),
    st.lists(st.tuples(sst.tag_symbols, sst.times), max_size=30),
    st.none() | st.integers(1, 6),
)
def test_the_step_into_columns_gives_the_updates_it_returns(machine, symbols, beyond):
    """Updates gathered as columns are those the step returns, in a table's rows; each
    key's rows carry it."""
    events = key_events(symbols)
    upto = None if beyond is None else max((e.time for e in events), default=0) + beyond  # the events are final
    columns, expected = UpdateColumns(), []
    for key in ("j", "k"):
        after, updates, rejected = advance_key(machine, key, frozenset(), events, upto)
        assert advance_key(machine, key, frozenset(), events, upto, columns=columns) == (after, [], rejected)
        expected += [(key, value, time, diff) for (_, value), time, diff in updates]
    assert sorted(zip(*columns.take(), strict=True), key=repr) == sorted(expected, key=repr)
    assert len(columns) == 0


@given(
    st.sampled_from([Tags(), Session(), FLOOD]),
    st.lists(st.tuples(sst.tag_symbols, sst.times), min_size=1, max_size=10),
    st.integers(0, 3),
)
def test_the_step_refuses_events_that_are_not_below_upto(machine, symbols, below):
    """An event at or after the frontier is not final: the step says so, naming its time."""
    events = key_events(symbols)
    last = events[-1].time
    with pytest.raises(InvalidArgument, match=re.escape(f"the last is at time {last!r}")):
        advance_key(machine, "k", frozenset(), events, last - below)


orderless = st.one_of(st.just(math.nan), st.integers(-2, 2), st.floats(-2, 2), st.frozensets(st.integers(0, 2), max_size=2))


@given(st.lists(st.tuples(st.tuples(st.sampled_from("ab"), orderless), st.integers(0, 2), st.integers(-2, 2)), max_size=12,
                unique_by=lambda u: (u[0], u[1])), st.randoms())
def test_updates_sort_the_same_whatever_their_order_with_nan_and_sets(updates, rnd):
    """NaN is neither below nor above a number and sets order by inclusion: the
    updates at one time still come in one order, whatever order they came in."""
    shuffled = list(updates)
    rnd.shuffle(shuffled)
    assert sort_updates([Update(*u) for u in shuffled]) == sort_updates([Update(*u) for u in updates])
    assert consolidate(shuffled) == consolidate(updates)
