"""Linear operators: linearity, fusion, definitions as joins, temporal filters."""

from __future__ import annotations

import re
from functools import reduce

import pytest
from hypothesis import given

from statemachines import Arrangement, InvalidArgument, consolidate, format_table, linear, run_local
from statemachines.library import Upsert
from tests import strategies as sst


def chain_of(indexes):
    return reduce(lambda a, b: a | b, (sst.STANDARD_OPS[i][0] for i in indexes))


def join_with_logic(updates, logic):
    """The definition: join each update with the collection ``logic`` describes."""
    out = []
    for data, time, diff in updates:
        for data2, time2, diff2 in logic(data):
            joined = time if time2 is None else max(time, time2)
            out.append((data2, joined, diff * diff2))
    return consolidate(out)


@given(sst.chains, sst.record_updates, sst.record_updates)
def test_linearity(indexes, x, y):
    op = chain_of(indexes)
    assert op.apply(x + y) == consolidate(op.apply(x) + op.apply(y))


@given(sst.chains, sst.record_updates)
def test_a_fused_chain_equals_applying_its_steps_one_by_one(indexes, updates):
    step_by_step = updates
    for i in indexes:
        step_by_step = sst.STANDARD_OPS[i][0].apply(step_by_step)
    assert chain_of(indexes).apply(updates) == step_by_step
    assert len(chain_of(indexes).steps) == len(indexes)


@given(sst.standard_op_indexes, sst.record_updates)
def test_each_standard_operator_is_its_join_with_logic(index, updates):
    op, textbook_logic = sst.STANDARD_OPS[index]
    assert op.apply(updates) == join_with_logic(updates, textbook_logic)


@given(sst.record_updates)
def test_the_general_operator_is_the_join_with_its_logic(updates):
    def logic(d):
        return [(d[0], d[1] % 4, 1), ((d[0], "neg"), None, -d[1])]

    assert linear.logic(logic).apply(updates) == join_with_logic(updates, logic)


def test_temporal_filter_appears_at_max_time_lower_and_goes_at_max_time_upper():
    keep = linear.temporal_filter(lambda d: d[1], lambda d: d[1] + 10)
    # lower after the update's time: deferred; lower before it: at the update's time
    assert keep.apply([(("a", 5), 2, 1), (("b", 1), 3, 1)]) == [
        (("b", 1), 3, 1),
        (("a", 5), 5, 1),
        (("b", 1), 11, -1),
        (("a", 5), 15, -1),
    ]
    # an update after the upper bound: appears and goes at once, i.e. never
    assert keep.apply([(("c", 1), 20, 1)]) == []
    # retracting the input retracts both scheduled updates
    assert keep.apply([(("a", 5), 2, 1), (("a", 5), 7, -1)]) == [
        (("a", 5), 5, 1),
        (("a", 5), 7, -1),
    ]
    # an empty interval keeps nothing
    assert linear.temporal_filter(lambda d: 5, lambda d: 5).apply([(("a", 1), 0, 1)]) == []


@pytest.mark.parametrize(
    "op, says",
    [
        (linear.temporal_filter(lambda d: 0, lambda d: float("nan")), "temporal_filter's bounds are times or None; got nan"),
        (linear.temporal_filter(lambda d: "soon", lambda d: None), "got 'soon'"),
        (linear.logic(lambda d: [(d, float("nan"), 1)]) | linear.map(lambda d: d[0]), "gave the time nan for ('a', 2)"),
        (linear.map(lambda d: d[0]) | linear.logic(lambda d: [(d, float("nan"), 1)]), "gave the time nan for 'a'"),
    ],
)
def test_a_time_that_is_nan_or_no_time_is_an_error_naming_the_step_and_record(op, says):
    """NaN compares with no time: as a bound it would empty every interval, silently."""
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        op.apply([(("a", 2), 0, 1)])


def test_chains_explain_themselves():
    def is_alert(d):
        return d[1] == "alert"

    def shown_at(d):
        return 0

    def hidden_at(d):
        return 15

    op = linear.filter(is_alert).followed_by(linear.temporal_filter(shown_at, hidden_at))
    assert str(op) == "filter(is_alert) | temporal_filter(shown_at, hidden_at)"
    assert repr(op) == "Linear(filter(is_alert) | temporal_filter(shown_at, hidden_at))"


def test_machine_output_to_filter_to_temporal_filter_to_arrangement():
    """The docs' example: sensor states -> alerts -> shown for 15 time units."""
    states = run_local(Upsert(), [("s1", "ok", 0), ("s1", "alert", 10), ("s2", "alert", 12), ("s1", "ok", 30)])
    alerts = linear.filter(lambda d: d[1] == "alert") | linear.temporal_filter(
        lambda d: None, lambda d: 25
    )
    shown = alerts.apply(states)
    assert format_table(shown).splitlines() == [
        "key | value | time | diff",
        "s1  | alert | 10   | +1",
        "s2  | alert | 12   | +1",
        "s1  | alert | 25   | -1",
        "s2  | alert | 25   | -1",
    ]
    arr = Arrangement()
    run_local(Upsert(), [("s1", "ok", 0), ("s1", "alert", 10), ("s2", "alert", 12)], into=arr, frontier=20)
    derived = alerts.derive(arr)
    assert derived.upper == 20 and derived.updates() == [u for u in shown if u.time < 20]
    assert alerts.view(arr).collection(as_of=30) == {}
    assert alerts.view(arr).changes(20, 30) == [u for u in shown if 20 <= u.time < 30]


@pytest.mark.parametrize(
    "op, says",
    [
        (linear.explode(lambda d: [(d, 1.5)]), "explode(<lambda>) gave the diff 1.5 for ('a', 2); a diff is an integer"),
        (linear.map(lambda d: d[0]) | linear.logic(lambda d: [(d, 0, True)]), "gave the diff True for 'a'"),
        (linear.logic(lambda d: [(d, 0, float("nan"))]), "gave the diff nan for ('a', 2)"),
    ],
)
def test_a_diff_that_is_no_integer_is_an_error_naming_the_step_and_record(op, says):
    """Diffs are signed integers: a fractional one made a multiset of no collection."""
    with pytest.raises(InvalidArgument, match=re.escape(says)):
        op.apply([(("a", 2), 0, 1)])
    assert linear.explode(lambda d: [(d, 2), (d, -1)]).apply([(("a", 2), 0, 3)]) == [(("a", 2), 0, 3)]
