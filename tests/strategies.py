"""Hypothesis strategies shared by every property test."""

from __future__ import annotations

from hypothesis import strategies as st

from statemachines import Event, Update

keys = st.sampled_from(["ann", "bob", "cy", "dee"]) | st.integers(0, 3)
times = st.integers(0, 12)
orders = st.none() | st.integers(0, 5)
upsert_values = st.none() | st.sampled_from(["a", "b", "c"]) | st.integers(0, 2)
tag_symbols = st.tuples(st.sampled_from(["add", "del"]), st.sampled_from(["x", "y", "z"]))


def events(symbols=upsert_values, *, key=keys, max_size=40):
    """Lists of events ``(key, symbol, time, order)`` for one run."""
    return st.lists(st.builds(Event, key, symbols, times, orders), max_size=max_size)


def frontier_steps(max_time=14):
    """Increasing frontiers that split a run into steps."""
    return st.lists(st.integers(0, max_time), max_size=5).map(lambda fs: sorted(set(fs)))


data = st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 3))
update_batches = st.lists(st.builds(Update, data, times, st.integers(-2, 2)), max_size=40)
