"""Hypothesis strategies shared by every property test."""

from __future__ import annotations

from hypothesis import strategies as st

from statemachines import Event, Update

keys = st.sampled_from(["ann", "bob", "cy", "dee"]) | st.integers(0, 3)
times = st.integers(0, 12)
orders = st.none() | st.integers(0, 5)
upsert_values = st.none() | st.sampled_from(["a", "b", "c"]) | st.integers(0, 2)
# a persisted arrangement's columns are typed: one type of key, one type of value
text_keys = st.sampled_from(["ann", "bob", "cy", "dee"])
text_values = st.none() | st.sampled_from(["a", "b", "c"])
tag_symbols = st.tuples(st.sampled_from(["add", "del"]), st.sampled_from(["x", "y", "z"]))


def events(symbols=upsert_values, *, key=keys, max_size=40):
    """Lists of events ``(key, symbol, time, order)`` for one run."""
    return st.lists(st.builds(Event, key, symbols, times, orders), max_size=max_size)


def frontier_steps(max_time=14):
    """Increasing frontiers that split a run into steps."""
    return st.lists(st.integers(0, max_time), max_size=5).map(lambda fs: sorted(set(fs)))


data = st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 3))
update_batches = st.lists(st.builds(Update, data, times, st.integers(-2, 2)), max_size=40)


# Standard linear operators over records (key, int), each with its textbook logic
# written independently (time None: "no constraint").
def _standard_ops():
    from statemachines import linear

    def bump(d):
        return (d[0], d[1] + 1)

    def even(d):
        return d[1] % 2 == 0

    def twice(d):
        return [d, (d[0], d[1] * 2)]

    def signed(d):
        return [(d, 2), ((d[0], -d[1]), -1)]

    def start(d):
        return d[1] % 5

    def stop(d):
        return d[1] % 5 + 3

    def never(d):
        return None

    return [
        (linear.map(bump), lambda d: [(bump(d), None, 1)]),
        (linear.filter(even), lambda d: [(d, None, 1)] if even(d) else []),
        (linear.flat_map(twice), lambda d: [(x, None, 1) for x in twice(d)]),
        (linear.explode(signed), lambda d: [(x, None, r) for x, r in signed(d)]),
        (linear.temporal_filter(start, stop), lambda d: [(d, start(d), 1), (d, stop(d), -1)]),
        (linear.temporal_filter(start, never), lambda d: [(d, start(d), 1)]),
    ]


STANDARD_OPS = _standard_ops()
standard_op_indexes = st.integers(0, len(STANDARD_OPS) - 1)
chains = st.lists(standard_op_indexes, min_size=1, max_size=4)
record_updates = st.lists(
    st.builds(
        Update,
        st.tuples(st.sampled_from(["k1", "k2"]), st.integers(-3, 6)),
        times,
        st.sampled_from([-2, -1, 1, 2]),
    ),
    max_size=25,
)
