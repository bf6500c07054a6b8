"""Updates, consolidation and update tables."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statemachines import (
    Event,
    Machine,
    Update,
    collection_at,
    consolidate,
    format_table,
    is_consolidated,
    parse_table,
    sort_updates,
)
from statemachines.core import advance_key
from statemachines.updates import sort_key_runs, total_order_key
from tests import strategies as sst


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
