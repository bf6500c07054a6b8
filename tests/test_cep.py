"""Pattern detectors: each feature on hand-written sequences, and a brute-force check."""

from __future__ import annotations

import datetime
import itertools
import os
import subprocess
import sys
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError, LocalRuntime, MachineError, run_local
from statemachines.library import Detector, Pattern, matches, timeouts
from tests.test_pattern_data import patterns


def kind(*prefixes):
    return lambda symbol: symbol.startswith(prefixes)


def found(pattern, symbols, times=None):
    """Matches and timeouts of one key's symbols (time i unless given), as symbol lists."""
    times = list(range(len(symbols))) if times is None else times
    result = run_local(Detector(pattern), [("k", s, t) for s, t in zip(symbols, times, strict=True)])
    assert not result.rejected
    as_lists = lambda rows: [[e[3] for e in row.events] for row in rows]  # noqa: E731
    return as_lists(matches(result.updates)), as_lists(timeouts(result.updates))


def a_then_b(contiguity):
    return getattr(Pattern.begin("a").where(kind("a")), contiguity)("b").where(kind("b"))


# -- contiguity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("contiguity", "expected"),
    [("next", []), ("followed_by", [["a", "b1"]]), ("followed_by_any", [["a", "b1"], ["a", "b2"]])],
)
def test_contiguity_between_steps(contiguity, expected):
    assert found(a_then_b(contiguity), ["a", "c", "b1", "b2"])[0] == expected


def test_strict_contiguity_matches_adjacent_events():
    assert found(a_then_b("next"), ["c", "a", "b1", "b2"])[0] == [["a", "b1"]]


def flink_loop_example(consecutive):
    """Flink CEP's documented example for consecutive(): c, then a+, then b."""
    middle = Pattern.begin("start").where(kind("C")).followed_by("middle").where(kind("A")).one_or_more()
    if consecutive:
        middle = middle.consecutive()
    return middle.followed_by("end").where(kind("B"))


@pytest.mark.parametrize(
    ("consecutive", "expected"),
    [
        (True, [["C", "A1", "B"], ["C", "A1", "A2", "B"], ["C", "A1", "A2", "A3", "B"]]),
        (False, [["C", "A1", "B"], ["C", "A1", "A2", "B"], ["C", "A1", "A2", "A3", "B"], ["C", "A1", "A2", "A3", "A4", "B"]]),
    ],
)
def test_looping_contiguity_follows_flinks_documented_example(consecutive, expected):
    events = ["C", "D", "A1", "A2", "A3", "D", "A4", "B"]
    assert sorted(found(flink_loop_example(consecutive), events)[0]) == sorted(expected)


@pytest.mark.parametrize(
    ("inner", "then", "expected"),
    [
        ("consecutive", "next", [["a", "b3", "c"]]),
        ("consecutive", "followed_by", [["a", "b1", "c"], ["a", "b2", "c"], ["a", "b3", "c"]]),
        (None, "followed_by", [
            ["a", "b1", "b2", "b3", "c"], ["a", "b1", "b2", "c"], ["a", "b1", "c"], ["a", "b2", "b3", "c"],
            ["a", "b2", "c"], ["a", "b3", "c"],
        ]),
        ("allow_combinations", "followed_by", [
            ["a", "b1", "b2", "b3", "c"], ["a", "b1", "b2", "c"], ["a", "b1", "b3", "c"], ["a", "b1", "c"],
            ["a", "b2", "b3", "c"], ["a", "b2", "c"], ["a", "b3", "c"],
        ]),
    ],
)
def test_contiguity_within_a_loop_follows_flinks_documented_example(inner, then, expected):
    """Flink's "contiguity within looping patterns": ``a`` then any ``b+`` then ``c``
    over ``a b1 d1 b2 d2 b3 c``. The relaxed and non-deterministic results are the
    documentation's with ``c`` relaxed; its strict result, ``{a b3 c}``, is what a
    consecutive loop gives with ``c`` strict too (with ``c`` relaxed, a partial match
    may leave the loop after any b, as in the ``consecutive()`` example's ``{C A1 B}``)."""
    loop = Pattern.begin("a").where(kind("a")).followed_by_any("b").where(kind("b")).one_or_more()
    if inner:
        loop = getattr(loop, inner)()
    pattern = getattr(loop, then)("c").where(kind("c"))
    assert sorted(found(pattern, ["a", "b1", "d1", "b2", "d2", "b3", "c"])[0]) == sorted(expected)


def test_allow_combinations_may_skip_events_a_loop_could_take():
    pattern = Pattern.begin("a").where(kind("a")).times(2).allow_combinations().followed_by("b").where(kind("b"))
    got = found(pattern, ["a1", "a2", "a3", "b"])[0]
    assert sorted(got) == [["a1", "a2", "b"], ["a1", "a3", "b"], ["a2", "a3", "b"]]
    relaxed = Pattern.begin("a").where(kind("a")).times(2).followed_by("b").where(kind("b"))
    assert sorted(found(relaxed, ["a1", "a2", "a3", "b"])[0]) == [["a1", "a2", "b"], ["a2", "a3", "b"]]


# -- quantifiers ------------------------------------------------------------------------


def test_times_exact_and_ranges():
    exact = Pattern.begin("a").where(kind("a")).times(2).consecutive()
    assert found(exact, ["a1", "a2", "a3"])[0] == [["a1", "a2"], ["a2", "a3"]]
    ranged = Pattern.begin("a").where(kind("a")).times(2, 3).consecutive()
    assert found(ranged, ["a1", "a2", "a3"])[0] == [["a1", "a2"], ["a1", "a2", "a3"], ["a2", "a3"]]
    at_least = Pattern.begin("a").where(kind("a")).times_or_more(3).consecutive()
    assert found(at_least, ["a1", "a2", "a3", "a4"])[0] == [["a1", "a2", "a3"], ["a1", "a2", "a3", "a4"], ["a2", "a3", "a4"]]


def test_optional_step_may_be_left_out():
    pattern = Pattern.begin("a").where(kind("a")).followed_by("b").where(kind("b")).optional().followed_by("c").where(kind("c"))
    assert sorted(found(pattern, ["a", "b", "c"])[0]) == [["a", "b", "c"], ["a", "c"]]


def test_greedy_loop_keeps_the_events_the_next_step_also_wants():
    def pattern(greedy):
        loop = Pattern.begin("x").where(kind("x")).one_or_more().consecutive()
        loop = loop.greedy() if greedy else loop
        return loop.next("y").where(kind("x2"))

    events = ["x1", "x2"]
    assert found(pattern(False), events)[0] == [["x1", "x2"]]  # x2 may end the loop as y
    assert found(pattern(True), events)[0] == []  # the greedy loop keeps x2


def test_until_ends_a_loop():
    pattern = Pattern.begin("a").where(kind("a")).one_or_more().until(kind("stop")).followed_by("b").where(kind("b"))
    assert sorted(found(pattern, ["a1", "stop", "a2", "b"])[0]) == [["a1", "b"], ["a2", "b"]]


# -- negation ---------------------------------------------------------------------------


def test_not_next_and_not_followed_by():
    not_next = Pattern.begin("a").where(kind("a")).not_next("x").where(kind("x")).followed_by("b").where(kind("b"))
    assert found(not_next, ["a1", "x", "b", "a2", "c", "x", "b"])[0] == [["a2", "b"]]
    never = Pattern.begin("a").where(kind("a")).not_followed_by("x").where(kind("x")).followed_by("b").where(kind("b"))
    assert found(never, ["a1", "c", "x", "a2", "b"])[0] == [["a2", "b"]]


def test_trailing_not_next_completes_at_the_next_event_unless_it_meets_it():
    """As Flink's compiler builds it (the not_next state ignores into the final state):
    the match completes at the key's next event, without taking it; a window that
    closes first times the partial match out; an event it meets discards it."""
    pattern = Pattern.begin("a").where(kind("a")).not_next("x").where(kind("x")).within(3)
    events = [("k", s, t) for s, t in [("a1", 0), ("c", 1), ("a2", 2), ("x", 3), ("a3", 4), ("c", 7), ("a4", 9)]]
    result = run_local(Detector(pattern), events)
    assert [([e[3] for e in m.events], m.time) for m in matches(result.updates)] == [(["a1"], 1)]
    assert [([e[3] for e in m.events], m.time) for m in timeouts(result.updates)] == [(["a3"], 7), (["a4"], 12)]
    loop = Pattern.begin("a").where(kind("a")).followed_by("b").where(kind("b")).one_or_more().not_next("x").where(kind("x"))
    assert found(loop, ["a", "b1", "b2", "c", "b3", "x"])[0] == [["a", "b1"], ["a", "b1", "b2"]]


# Each pattern over one sequence, with the matches Flink's runtime reports (events in order)
FLINK_SEQUENCE = [
    "-", "a1", "b1", "b2", "-", "a2", "-", "b3", "c1", "-", "a3", "-", "-", "c2", "b4", "b5", "-", "b6", "-", "c3",
    "-", "b7", "-",
]


def a_then():
    return Pattern.begin("1").where(kind("a"))


FLINK_RUNS = [
    (lambda: a_then().next("2").where(kind("b")), ["a1 b1"]),
    (lambda: a_then().followed_by("2").where(kind("b")), ["a1 b1", "a2 b3", "a3 b4"]),
    (lambda: a_then().followed_by("2").where(kind("b")).followed_by("3").where(kind("a")), ["a1 b1 a2", "a2 b3 a3"]),
    (lambda: a_then().not_next("2").where(kind("b")), ["a2", "a3"]),
    (lambda: a_then().not_next("2").where(kind("b")).next("3").where(kind("a")).optional(), ["a1", "a2", "a3"]),
    (lambda: a_then().not_followed_by("2").where(kind("b")).followed_by("3").where(kind("c")), ["a3 c2"]),
    (lambda: a_then().next("2").where(kind("b")).one_or_more().consecutive(), ["a1 b1", "a1 b1 b2"]),
    (
        lambda: a_then().followed_by("2").where(kind("b")).times(2, 4).greedy(),
        ["a1 b1 b2", "a1 b1 b2 b3", "a1 b1 b2 b3 b4", "a2 b3 b4", "a2 b3 b4 b5", "a3 b4 b5", "a2 b3 b4 b5 b6",
         "a3 b4 b5 b6", "a3 b4 b5 b6 b7"],
    ),
    (
        lambda: a_then().followed_by("2").where(kind("b")).one_or_more().consecutive(),
        ["a1 b1", "a1 b1 b2", "a2 b3", "a3 b4", "a3 b4 b5"],
    ),
    (
        lambda: a_then().followed_by("2").where(kind("b")).one_or_more().greedy().until(kind("c")),
        ["a1 b1", "a1 b1 b2", "a1 b1 b2 b3", "a2 b3", "a3 b4", "a3 b4 b5", "a3 b4 b5 b6"],
    ),
    (
        lambda: Pattern.begin("1", "skip_past_last_event").where(kind("a"))
        .followed_by("2").where(kind("b")).one_or_more().until(kind("c")),
        ["a1 b1", "a2 b3", "a3 b4"],
    ),
]


@pytest.mark.parametrize(("build", "expected"), FLINK_RUNS)
def test_matches_and_their_order_are_those_flinks_runtime_reports(build, expected):
    assert [" ".join(m) for m in found(build(), FLINK_SEQUENCE)[0]] == expected


def negated_after_loop(then, loop, combinations=False, negation="not_followed_by"):
    """``a`` then ``b`` (``followed_by`` or ``followed_by_any``) looping, a negation of
    ``c``, then ``d``."""
    b = getattr(Pattern.begin("a").where(kind("a")), then)("b").where(kind("b"))
    b = b.one_or_more() if loop == "+" else b.times(loop)
    b = b.allow_combinations() if combinations else b
    return getattr(b, negation)("n").where(kind("c")).followed_by("d").where(kind("d"))


def negated_before_loop(then, combinations, optional):
    """``a``, no ``c``, then ``b+`` (``b*`` if ``optional``) then ``d``."""
    b = getattr(Pattern.begin("a").where(kind("a")).not_followed_by("n").where(kind("c")), then)("b")
    b = b.where(kind("b")).one_or_more()
    b = b.optional() if optional else b
    return (b.allow_combinations() if combinations else b).followed_by("d").where(kind("d"))


AFTER = ["a1", "b1", "b2", "b3", "c1", "b4", "b5", "b6", "d1"]
BEFORE = ["a1", "b1", "c1", "b4", "b5", "b6", "d1"]
B1_THEN = ["a1 b1 b4 b5 b6 d1", "a1 b1 b4 b5 d1", "a1 b1 b4 d1", "a1 b1 d1"]
# (pattern, events, the matches Flink's negation tests expect, in any order)
FLINK_NEGATIONS = [
    (lambda: negated_after_loop("followed_by_any", 2), ["a1", "b1", "c1", "b2", "d1"], []),
    (lambda: negated_after_loop("followed_by_any", 2), ["a1", "d1", "e1", "b1", "b2", "c1", "d2"], []),
    (lambda: negated_after_loop("followed_by", "+", negation="not_next"), ["a1", "b1", "c1", "b2", "d1"], []),
    (lambda: negated_after_loop("followed_by_any", "+", negation="not_next"), ["a1", "b1", "c1", "b2", "d1"], ["a1 b2 d1"]),
    (lambda: negated_after_loop("followed_by", "+"), AFTER, []),
    (lambda: negated_after_loop("followed_by", "+", combinations=True), AFTER, []),
    (
        lambda: negated_after_loop("followed_by_any", "+"), AFTER,
        ["a1 b4 b5 b6 d1", "a1 b4 b5 d1", "a1 b4 d1", "a1 b5 b6 d1", "a1 b5 d1", "a1 b6 d1"],
    ),
    (
        lambda: negated_after_loop("followed_by_any", "+", combinations=True), AFTER,
        ["a1 b4 b5 b6 d1", "a1 b4 b5 d1", "a1 b4 b6 d1", "a1 b4 d1", "a1 b5 b6 d1", "a1 b5 d1", "a1 b6 d1"],
    ),
    *(
        (
            lambda then=then, combinations=combinations, optional=optional: negated_before_loop(then, combinations, optional),
            BEFORE,
            B1_THEN + (["a1 b1 b4 b6 d1", "a1 b1 b5 b6 d1", "a1 b1 b5 d1", "a1 b1 b6 d1"] if combinations else []),
        )
        for then in ("followed_by", "followed_by_any") for combinations in (False, True) for optional in (False, True)
    ),
    (
        lambda: Pattern.begin("s").where(kind("a")).not_next("n").where(kind("b"))
        .followed_by_any("m").where(kind("c")).followed_by("e").where(kind("d")),
        ["a1", "c1", "b1", "c2", "d1"], ["a1 c1 d1", "a1 c2 d1"],
    ),
    (
        lambda: Pattern.begin("s").where(kind("a")).followed_by_any("m").where(kind("c"))
        .followed_by_any("e").where(kind("d")).not_next("n").where(kind("b")),
        ["a1", "c1", "c2", "d1", "b1"], [],
    ),
    (
        lambda: Pattern.begin("s").where(kind("a")).not_followed_by("n").where(kind("b"))
        .followed_by_any("e").where(kind("c")).optional(),
        ["a1", "c1", "b1", "c2"], ["a1 c1", "a1"],
    ),
    (
        lambda: Pattern.begin("s").where(kind("a")).not_followed_by("n").where(kind("b"))
        .followed_by_any("m").where(kind("c")).times(2).optional().followed_by("e").where(kind("d")),
        ["a1", "d1", "e1", "b1", "c1", "c2", "d2"], ["a1 d1"],
    ),
    (
        lambda: Pattern.begin("s").where(kind("a")).not_followed_by("n").where(kind("b"))
        .followed_by("m").where(kind("c")).followed_by("e").where(kind("d")),
        ["a1", "b1", "c1", "a2", "c2", "d1"], ["a2 c2 d1"],
    ),
]


@pytest.mark.parametrize(("build", "symbols", "expected"), FLINK_NEGATIONS)
def test_negations_end_partial_matches_as_flinks_negation_tests_expect(build, symbols, expected):
    """An event meeting a negation ends the partial match, every way on (a loop that
    could take more events too), and a ``not_followed_by`` after a loop holds from the
    loop's first event, as Flink's compiler and NFA do."""
    assert sorted(" ".join(m) for m in found(build(), symbols)[0]) == sorted(expected)


def test_trailing_not_followed_by_completes_when_the_window_closes():
    pattern = Pattern.begin("a").where(kind("a")).not_followed_by("x").where(kind("x")).within(3)
    result = run_local(Detector(pattern), [("k", s, t) for t, s in enumerate(["a1", "c", "x", "a2", "c"])])
    assert [([e[3] for e in m.events], m.time) for m in matches(result.updates)] == [(["a2"], 6)]
    assert timeouts(result.updates) == []


# -- within, timeouts, skip strategies, iterative conditions ----------------------------


def test_partial_matches_time_out_at_the_end_of_their_window():
    pattern = a_then_b("followed_by").within(2)
    result = run_local(Detector(pattern), [("k", s, t) for t, s in enumerate(["a1", "c", "b1", "a2", "b2"])])
    assert [([e[3] for e in m.events], m.time) for m in matches(result.updates)] == [(["a2", "b2"], 4)]
    assert [(m.state, [e[3] for e in m.events], m.time) for m in timeouts(result.updates)] == [("0#1", ["a1"], 2)]


def test_a_state_notes_skipped_events_only_where_a_strict_step_or_not_next_is_open():
    events = [("k", s, t) for t, s in enumerate(["a1", "c"])]
    relaxed = run_local(Detector(a_then_b("followed_by").within(5)), events)
    strict = run_local(Detector(a_then_b("next").within(5)), events)
    # "c" passes the relaxed partial match by without changing it; the strict one ends
    assert [(u.data[1][1], u.time, u.diff) for u in relaxed.updates if u.data[1][0] == "partial"] == [
        ("0#1", 0, 1), ("0#1", 5, -1)  # until its window closes
    ]
    assert [(u.data[1][1], u.time, u.diff) for u in strict.updates if u.data[1][0] == "partial"] == [
        ("0#1", 0, 1), ("0#1", 1, -1)
    ]
    guarded = Pattern.begin("a").where(kind("a")).not_next("x").where(kind("x")).followed_by("b").where(kind("b"))
    updates = run_local(Detector(guarded.within(5)), events).updates
    assert [(u.data[1][1], u.time, u.diff) for u in updates if u.data[1][0] == "partial"] == [
        ("0#1", 0, 1), ("0#1", 1, -1), ("0#1~", 1, 1), ("0#1~", 5, -1)  # past "c", an "x" no longer ends it
    ]


def test_a_timeout_fires_without_any_later_event_for_its_key():
    runtime = LocalRuntime(Detector(a_then_b("followed_by").within(5)))
    runtime.feed([("k", "a", 1), ("other", "c", 9)])
    step = runtime.advance_to(10)  # key k had nothing after time 1
    assert [(t.key, t.time) for t in timeouts(step.updates)] == [("k", 6)]


SKIP_INPUT = ["b1", "b2", "b3", "c"]


@pytest.mark.parametrize(
    ("skip", "step", "expected"),
    [
        ("no_skip", None, [["b1", "b2", "b3", "c"], ["b2", "b3", "c"], ["b3", "c"]]),
        ("skip_to_next", None, [["b1", "b2", "b3", "c"], ["b2", "b3", "c"], ["b3", "c"]]),
        ("skip_past_last_event", None, [["b1", "b2", "b3", "c"]]),
        ("skip_to_first", "b", [["b1", "b2", "b3", "c"], ["b2", "b3", "c"], ["b3", "c"]]),
        ("skip_to_last", "b", [["b1", "b2", "b3", "c"], ["b3", "c"]]),
    ],
)
def test_skip_strategies_on_flinks_documented_example(skip, step, expected):
    """Flink's table for ``b+ c`` over ``b1 b2 b3 c`` (b+ greedy and strict, like a regex)."""
    pattern = Pattern.begin("b", skip, step).where(kind("b")).one_or_more().consecutive().greedy().next("c").where(kind("c"))
    assert found(pattern, SKIP_INPUT)[0] == expected


def test_skip_strategies_differ_on_the_same_input():
    def pattern(skip, step=None):
        return Pattern.begin("a", skip, step).where(kind("a")).one_or_more().followed_by("b").where(kind("b"))

    events = ["a1", "a2", "b"]
    results = {skip: found(pattern(skip), events)[0] for skip in ("no_skip", "skip_to_next", "skip_past_last_event")}
    assert results["no_skip"] == [["a1", "a2", "b"], ["a1", "b"], ["a2", "b"]]
    assert results["skip_to_next"] == [["a1", "a2", "b"], ["a2", "b"]]
    assert results["skip_past_last_event"] == [["a1", "a2", "b"]]


def test_conditions_can_read_the_events_already_matched():
    rising = Pattern.begin("first").followed_by("higher").where(lambda v, matched: v > matched["first"][0]).times(2).consecutive()
    assert found(rising, [5, 7, 9, 3])[0] == [[5, 7, 9]]


class Reading(NamedTuple):
    name: str


class Sample(NamedTuple):  # Flink's SubEvent: a reading with a volume
    name: str
    volume: float


def test_subtype_follows_flinks_documented_example():
    """``begin("start").where(start).next("middle").subtype(SubEvent).where(volume >= 10)
    .followed_by("end").where(end)``: the middle step takes only samples, so its
    ``where`` never sees a plain reading (which has no volume)."""
    pattern = (
        Pattern.begin("start").where(lambda e: e.name == "start")
        .next("middle").subtype(Sample).where(lambda e: e.volume >= 10.0)
        .followed_by("end").where(lambda e: e.name == "end")
    )
    start, end = Reading("start"), Reading("end")
    histories = {
        "sampled": [start, Sample("s", 12.0), Reading("x"), end],
        "too small": [start, Sample("s", 2.0), end],
        "not a sample": [start, Reading("s"), end],
    }
    assert {name: found(pattern, symbols)[0] for name, symbols in histories.items()} == {
        "sampled": [histories["sampled"][:2] + [end]],
        "too small": [],
        "not a sample": [],
    }
    # the same where without subtype reads a volume a plain reading does not have
    unguarded = Pattern.begin("start").where(lambda e: e.name == "start").next("middle").where(lambda e: e.volume >= 10.0)
    events = [("k", s, t) for t, s in enumerate(histories["not a sample"])]
    assert {r.detail for r in run_local(Detector(unguarded), events).rejected} == {
        "AttributeError: 'Reading' object has no attribute 'volume'"
    }


# -- Flink's documented behaviours (issue reproducers and the CEP documentation) -------


@pytest.mark.parametrize("bs", range(6))
def test_an_optional_counted_step_takes_no_event_or_its_count(bs):
    """``times(2, 4).optional()`` takes 0, 2, 3 or 4 events, never 1 or 5."""
    pattern = (
        Pattern.begin("s").where(kind("s"))
        .next("b").where(kind("b")).times(2, 4).consecutive().optional()
        .next("c").where(kind("c"))
    )
    symbols = ["s", *[f"b{i}" for i in range(bs)], "c"]
    takes = bs == 0 or 2 <= bs <= 4
    assert found(pattern, symbols)[0] == ([symbols] if takes else [])


def test_an_optional_counted_step_is_not_cut_short():
    pattern = Pattern.begin("a").where(kind("b")).times(2).optional().followed_by("c").where(kind("c"))
    assert found(pattern, ["b", "c"])[0] == [["c"]]


def test_until_follows_flinks_documented_example():
    """Flink: ``(a+ until b)`` over ``a1 c a2 b a3`` gives {a1 a2} {a1} {a2} {a3}."""
    pattern = Pattern.begin("a").where(kind("a")).one_or_more().until(kind("b"))
    assert sorted(found(pattern, ["a1", "c", "a2", "b", "a3"])[0]) == [["a1"], ["a1", "a2"], ["a2"], ["a3"]]


def test_the_smallest_of_several_withins_applies():
    """Flink: a pattern has one window; given several, the smallest applies."""
    is_a, is_b = kind("a"), kind("b")

    def pattern(first, then):
        return Pattern.begin("a").where(is_a).within(first).followed_by("b").where(is_b).within(then)

    assert pattern(5, 10) == pattern(10, 5) == pattern(5, 5)
    events = [("k", "a", 0), ("k", "b", 7)]  # b comes 7 after a: within 10, not within 5
    assert matches(run_local(Detector(pattern(5, 10)), events).updates) == []
    assert len(matches(run_local(Detector(pattern(10, 10)), events).updates)) == 1


@pytest.mark.parametrize(
    "window, gap, times, wrong",
    [
        (datetime.timedelta(seconds=5), None, [1, 2, 4], datetime.timedelta(seconds=5)),
        (5, None, [datetime.datetime(2024, 1, 1, 0, 0, s) for s in (1, 2, 4)], 5),
        (None, datetime.timedelta(seconds=3), [1.0, 2.0, 4.0], datetime.timedelta(seconds=3)),
        (10, 3, [datetime.date(2024, 1, d) for d in (1, 2, 4)], 10),
    ],
)
def test_events_whose_times_the_windows_do_not_fit_are_rejected_naming_the_window(window, gap, times, wrong):
    """A window or gap of another kind than the events' times (a timedelta beside
    numbers, a number beside datetimes) cannot time a partial match out: each event
    is rejected (``time_kind``) instead of the run failing at its first deadline."""
    pattern = Pattern.begin("a").where(kind("a")).followed_by("b").where(kind("b"))
    pattern = pattern.within(gap, "previous_and_current") if gap is not None else pattern
    pattern = pattern.within(window) if window is not None else pattern
    events = [("k", s, t) for s, t in zip("aab", times, strict=True)]
    result = run_local(Detector(pattern), events)
    assert result.updates == []
    assert [(*r.event[:3], r.reason) for r in result.rejected] == [(*e, "time_kind") for e in events]
    assert all(f"within {wrong!r} does not fit times of kind" in r.detail for r in result.rejected)


@pytest.mark.parametrize("within_type", ["first_and_last", "previous_and_current"])
def test_a_timedelta_window_over_datetimes_finds_what_seconds_find_over_numbers(within_type):
    pattern = Pattern.begin("a").where(kind("a")).followed_by("b").where(kind("b"))
    seconds = [0, 2, 10, 20, 21, 25, 26]
    symbols = "abababb"
    start = datetime.datetime(2024, 1, 1)

    def found(window, at):
        events = [("k", s, at(t)) for s, t in zip(symbols, seconds, strict=True)]
        updates = run_local(Detector(pattern.within(window, within_type)), events).updates
        return [[e[3] for e in m.events] for m in matches(updates)], len(timeouts(updates))

    as_numbers = found(3, lambda t: t)
    assert as_numbers[0] and as_numbers == found(datetime.timedelta(seconds=3), lambda t: start + datetime.timedelta(seconds=t))


# -- within(d, previous_and_current): Flink's WithinType.PREVIOUS_AND_CURRENT --------------

# Flink's NFATest: start at 1 and 2, middle at 3, foobar at 4, end at 11 and 13
FLINK_WINDOW_EVENTS = [("start", 1), ("start", 2), ("middle", 3), ("foobar", 4), ("end", 11), ("end", 13)]


def start_middle_end(then, within_type, window):
    """``start`` then ``middle`` then ``end`` with the contiguity ``then``, and ``within``."""
    pattern = getattr(Pattern.begin("start").where(kind("start")), then)("middle").where(kind("middle"))
    return getattr(pattern, then)("end").where(kind("end")).within(window, within_type)


def flink_found(pattern, events):
    """Matches and timeouts as ``[(symbol, time), ...]`` lists, a timeout with its time."""
    result = run_local(Detector(pattern), [("k", s, t) for s, t in events])
    as_pairs = lambda found_: [(e[3], e[1]) for e in found_.events]  # noqa: E731
    return sorted(map(as_pairs, matches(result.updates))), sorted((as_pairs(t), t.time) for t in timeouts(result.updates))


def test_within_previous_and_current_follows_flinks_nfa_tests():
    """Flink's NFATest ``testSimplePatternWithTimeWindowNFAWithin*`` and
    ``testSimplePatternWithTimeoutHandlingWithin*``: the gap bounds ``end`` after
    ``middle``; a partial match waiting for ``end`` times out 10 after ``middle``,
    one waiting for ``middle`` (no gap there) never does."""
    both = [[("start", 1), ("middle", 3), ("end", 11)], [("start", 2), ("middle", 3), ("end", 11)]]
    assert flink_found(start_middle_end("followed_by", "previous_and_current", 9), FLINK_WINDOW_EVENTS)[0] == both
    assert flink_found(start_middle_end("followed_by", "first_and_last", 10), FLINK_WINDOW_EVENTS)[0] == both[1:]
    found_, timed_out = flink_found(start_middle_end("followed_by_any", "previous_and_current", 10), FLINK_WINDOW_EVENTS)
    assert found_ == both
    assert timed_out == [([("start", 1), ("middle", 3)], 13), ([("start", 2), ("middle", 3)], 13)]
    found_, timed_out = flink_found(start_middle_end("followed_by_any", "first_and_last", 10), FLINK_WINDOW_EVENTS)
    assert found_ == both[1:]
    assert timed_out == [
        ([("start", 1)], 11), ([("start", 1), ("middle", 3)], 11), ([("start", 2)], 12), ([("start", 2), ("middle", 3)], 12),
    ]


@pytest.mark.parametrize("within_type", ["first_and_last", "previous_and_current"])
def test_a_trailing_negation_within_either_type_follows_flinks_pending_state_test(within_type):
    """Flink's ``testPendingStateMatchesWithin*``: ``start`` not followed by ``middle``
    within 5; a start whose 5 pass without a middle is a match, then."""
    pattern = Pattern.begin("start").where(kind("start")).not_followed_by("middle").where(kind("middle"))
    events = [("start", 1), ("middle", 4), ("start", 5), ("start", 11), ("middle", 18)]
    result = run_local(Detector(pattern.within(5, within_type)), [("k", s, t) for s, t in events])
    assert [([e[1] for e in m.events], m.time) for m in matches(result.updates)] == [([5], 10), ([11], 16)]


def test_gaps_and_a_window_together():
    """Each step's gap and the pattern's window: whichever closes first ends the
    partial match, and a match meets both."""
    pattern = (
        Pattern.begin("a").where(kind("a"))
        .followed_by("b").where(kind("b")).within(3, "previous_and_current")
        .followed_by("c").where(kind("c")).within(2, "previous_and_current")
        .within(6)
    )
    assert found(pattern, ["a", "b", "c"], [0, 2, 3]) == ([["a", "b", "c"]], [])
    assert found(pattern, ["a", "b", "c"], [0, 3, 4]) == ([], [["a"]])  # b too late: a times out at 3
    assert found(pattern, ["a", "b", "c"], [0, 2, 4]) == ([], [["a", "b"]])  # c too late: at 4, not 2 + 2
    assert found(pattern, ["a", "b", "c"], [0, 2, 6]) == ([], [["a", "b"]])
    # each gap met, but the window not: b at 2.5, c at 4.5, the window closes at 6 first? no: 4.5 < 6
    assert found(pattern, ["a", "b", "c"], [0, 2.5, 4.4]) == ([["a", "b", "c"]], [])
    tight = pattern.within(4)
    assert found(tight, ["a", "b", "c"], [0, 2.5, 4.4]) == ([], [["a", "b"]])  # the window closes at 4


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Pattern.begin("a").within(3, "previous_and_current"), "the first step"),
        (lambda: Pattern.begin("a").followed_by("b").times(2).within(3, "previous_and_current"), "takes no event or several"),
        (lambda: Pattern.begin("a").followed_by("b").within(3, "previous_and_current").optional(), "takes no event or several"),
        (lambda: Pattern.begin("a").one_or_more().followed_by("b").within(3, "previous_and_current"), "the step before it, 'a'"),
        (lambda: Pattern.begin("a").optional().followed_by("b").within(3, "previous_and_current"), "the step before it, 'a'"),
        (lambda: Pattern.begin(Pattern.begin("a")).followed_by("b").within(3, "previous_and_current"), "the step before it"),
        (lambda: Pattern.begin("a").followed_by(Pattern.begin("b")).within(3, "previous_and_current"), "not to the group"),
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("a").followed_by("b").within(3, "previous_and_current")), "takes no within"),
        (lambda: Pattern.begin("a").followed_by("b").within(7, "previous_and_current").within(5), "larger than the pattern's window"),
        (lambda: Pattern.begin("a").not_next("n").within(3, "previous_and_current"), "not to not_next"),
        (lambda: Pattern.begin("a").not_followed_by("n").within(3, "previous_and_current").followed_by("b"), "at the end of a pattern"),
        (lambda: Pattern.begin("a").followed_by("b").within(3, "sideways"), "unknown within type"),
    ],
)
def test_a_gap_where_flink_would_not_check_it_is_refused(build, message):
    with pytest.raises(DefinitionError, match=message):
        Detector(build())


@pytest.mark.parametrize("most", [1, 3, None])
def test_times_from_zero_is_an_optional_times_from_one(most):
    """Flink: ``times(0, m)`` is ``times(1, m).optional()``."""
    step = Pattern.begin("a").followed_by("b")
    assert step.times(0, most) == step.times(1, most).optional()


class Priced(NamedTuple):
    """An event of Flink's CEP tests: a name and a price, and a label to show it by."""

    name: str
    price: float
    label: str


def named(name):
    return lambda e: e.name == name


def priced(*rows):
    return [Priced(*row) for row in rows]


START, A1, A2, A3, BREAK, END = priced(("c", 1, "c"), ("a", 2, "a1"), ("a", 3, "a2"), ("a", 4, "a3"), ("a", 5, "x"), ("b", 5, "b"))
AT_FIVE = lambda e: e.price == 5  # noqa: E731


def c_then_a(then="followed_by", times=None, *changes):
    """``c``, then ``a`` (``then``: its contiguity) one or more times (or ``times``
    or more), with ``changes`` (method names) applied to that step."""
    a = getattr(Pattern.begin("start").where(named("c")), then)("middle").where(named("a"))
    a = a.one_or_more() if times is None else a.times_or_more(times)
    for change in changes:
        a = getattr(a, change)()
    return a


def sum_of_middle_is(total):
    return lambda e, matched: sum(m.price for m in matched.get("middle", ())) == total


# (pattern, events, the matches Flink's until, times-or-more and greedy tests expect)
FLINK_QUANTIFIERS = [
    (
        lambda: c_then_a().until(AT_FIVE).followed_by("end").where(AT_FIVE),
        [START, A1, A2, BREAK, *priced(("a", 6, "a4"))], ["c a1 a2 x", "c a1 x"],
    ),
    (
        lambda: c_then_a("followed_by", None, "allow_combinations").until(AT_FIVE).followed_by("end").where(AT_FIVE),
        [START, A1, A2, A3, BREAK], ["c a1 a2 a3 x", "c a1 a2 x", "c a1 a3 x", "c a1 x"],
    ),
    (
        lambda: c_then_a("followed_by", None, "optional", "consecutive").until(AT_FIVE).followed_by("end").where(AT_FIVE),
        [START, A1, A2, BREAK], ["c a1 a2 x", "c a1 x", "c x"],
    ),
    (
        lambda: c_then_a("followed_by_any", None, "optional").until(AT_FIVE),
        [START, A1, A2, BREAK, *priced(("a", 6, "a3"))], ["c a1 a2", "c a1", "c a2", "c a3", "c"],
    ),
    (
        lambda: Pattern.begin("start").where(named("c")).followed_by("middle").one_or_more().optional()
        .until(sum_of_middle_is(6)),
        [START, A1, A2, *priced(("d", 1, "d")), BREAK], ["c a1 a2 d", "c a1 a2", "c a1", "c"],
    ),
    (
        lambda: c_then_a("followed_by", 2, "allow_combinations").followed_by("end").where(named("b")),
        [START, A1, A2, A3, END], ["c a1 a2 a3 b", "c a1 a2 b", "c a1 a3 b"],
    ),
    (
        lambda: c_then_a("followed_by_any", 2, "allow_combinations").followed_by("end").where(named("b")),
        [START, *priced(("f", 1, "f")), A1, *priced(("f", 1, "f")), A2, A3, END],
        ["c a1 a2 a3 b", "c a1 a2 b", "c a1 a3 b", "c a2 a3 b"],
    ),
    (
        lambda: c_then_a("followed_by_any", 2, "consecutive", "optional").followed_by("end").where(named("b")),
        [START, *priced(("f", 1, "f")), A1, *priced(("f", 1, "f")), A2, A3, END], ["c a2 a3 b", "c b"],
    ),
    (
        lambda: c_then_a("next", 2, "consecutive", "optional").followed_by("end").where(named("b")),
        [START, A1, A2, A3, END], ["c a1 a2 a3 b", "c a1 a2 b", "c b"],
    ),
    (
        lambda: c_then_a("followed_by", None, "optional", "greedy").followed_by("end").where(named("b")),
        [START, *priced(("x", 0, "x")), A1, *priced(("x", 0, "x")), A2, A3, END], ["c a1 a2 a3 b"],
    ),
    (
        lambda: c_then_a("followed_by", None, "optional", "greedy").followed_by("d").where(named("d"))
        .optional().followed_by("end").where(named("b")),
        [START, A1, A2, *priced(("d", 1, "d")), END], ["c a1 a2 b", "c a1 a2 d b"],
    ),
    (
        lambda: c_then_a("followed_by", None, "greedy").until(lambda e: e.price > 3).followed_by("end").where(named("b")),
        [START, *priced(("a", 9, "a0")), A1, A2, *priced(("a", 3, "a3")), END], [],
    ),
]


@pytest.mark.parametrize(("build", "events", "expected"), FLINK_QUANTIFIERS)
def test_loops_find_what_flinks_until_times_or_more_and_greedy_tests_expect(build, events, expected):
    result = run_local(Detector(build()), [("k", e, t) for t, e in enumerate(events)])
    assert not result.rejected
    assert sorted(" ".join(e[3].label for e in m.events) for m in matches(result.updates)) == sorted(expected)


def test_until_is_never_taken_even_as_a_loops_first_event():
    assert found(Pattern.begin("a").where(kind("b")).one_or_more().until(kind("b")), ["b"])[0] == []
    # an event meeting both the loop's condition and until ends the loop; it is not taken
    pattern = Pattern.begin("a").where(kind("a")).one_or_more().until(kind("ax")).followed_by("b").where(kind("b"))
    assert sorted(found(pattern, ["a1", "ax", "a2", "b"])[0]) == [["a1", "b"], ["a2", "b"]]


def greedy_example(skip="no_skip", step=None):
    """Flink's example: ``(a | b | c) (b | c) c+.greedy d``, every step relaxed."""
    return (
        Pattern.begin("s", skip, step).where(kind("a", "b", "c"))
        .followed_by("m").where(kind("b", "c"))
        .followed_by("c").where(kind("c")).one_or_more().greedy()
        .followed_by("d").where(kind("d"))
    )


GREEDY_INPUT = ["a", "b", "c1", "c2", "c3", "d"]


def test_greedy_follows_flinks_documented_example():
    """A greedy loop takes every c: the step after it never takes an event the loop can."""
    assert found(greedy_example(), GREEDY_INPUT)[0] == [GREEDY_INPUT, GREEDY_INPUT[1:], GREEDY_INPUT[2:]]


def test_skip_to_first_follows_flinks_documented_example():
    """After ``a b c1 c2 c3 d``, partial matches begun before c1 are discarded: ``b c1 ...``."""
    assert found(greedy_example("skip_to_first", "c"), GREEDY_INPUT)[0] == [GREEDY_INPUT, GREEDY_INPUT[2:]]


@pytest.mark.parametrize(("skip", "expected"), [("no_skip", 3), ("skip_to_next", 1)])
def test_skip_to_next_follows_flinks_documented_example(skip, expected):
    """``a b+`` over ``a b1 b2 b3``: NO_SKIP gives a b1, a b1 b2, a b1 b2 b3; SKIP_TO_NEXT
    discards the partial matches begun at a once a b1 is found."""
    pattern = Pattern.begin("a", skip).where(kind("a")).followed_by("b").where(kind("b")).one_or_more()
    symbols = ["a", "b1", "b2", "b3"]
    assert found(pattern, symbols)[0] == [symbols[: i + 2] for i in range(expected)]


def test_skip_strategies_spare_partial_matches_begun_before_the_match():
    """A match waits while a partial match begun before it lives; it is reported, and
    prunes, once that one has completed or ended (Flink's order of processing)."""
    pattern = Pattern.begin("a", "skip_to_first", "a").where(kind("a")).one_or_more().within(3)
    result = run_local(Detector(pattern), [("k", s, t) for t, s in enumerate(["a0", "a1", "a2"])])
    got = [([e[3] for e in m.events], m.time) for m in matches(result.updates)]
    assert got == [
        (["a0"], 0), (["a0", "a1"], 1), (["a0", "a1", "a2"], 2),  # each begun at the earliest live start
        (["a1"], 3), (["a1", "a2"], 3),  # released when the match begun at a0 times out at 3
        (["a2"], 4),
    ]


def test_skip_past_last_event_keeps_the_timeout_of_an_earlier_partial_match():
    """``a? b`` where a b needs a "b!" the lone b does not: the match [b] completes while
    the partial match begun at a lives; it must not discard it, and a times out."""
    pattern = (
        Pattern.begin("a", "skip_past_last_event").where(kind("a")).optional()
        .followed_by("b").where(lambda s, matched: s == "b!" if matched.get("a") else s.startswith("b"))
        .within(5)
    )
    result = run_local(Detector(pattern), [("k", "a", 0), ("k", "b", 1)])
    assert [([e[3] for e in m.events], m.time) for m in timeouts(result.updates)] == [(["a"], 5)]
    assert [([e[3] for e in m.events], m.time) for m in matches(result.updates)] == [(["b"], 5)]


def test_raise_on_miss_makes_a_match_that_cannot_skip_an_error_as_flinks_throw_exception_on_miss():
    """Flink's AfterMatchSkipITCase: skipping to a step the match took no event of,
    or to the match's own first event, is an error with throwExceptionOnMiss (the
    completing event is rejected); without it the match prunes nothing."""
    alone = lambda raises: Pattern.begin("a", "skip_to_first", "a", raise_on_miss=raises).where(kind("a"))  # noqa: E731
    missed = lambda skip, raises: (  # noqa: E731
        Pattern.begin("a", skip, "b", raise_on_miss=raises).where(kind("a"))
        .next("b").where(kind("b")).one_or_more().optional().consecutive()
        .next("c").where(kind("c"))
    )
    for pattern, symbols in ((alone, ["a1"]), (lambda r: missed("skip_to_first", r), ["a", "c"]),
                             (lambda r: missed("skip_to_last", r), ["a", "c"])):
        assert found(pattern(False), symbols) == ([symbols], [])
        result = run_local(Detector(pattern(True)), [("k", s, t) for t, s in enumerate(symbols)])
        assert not matches(result.updates)
        (rejected,) = result.rejected
        assert rejected.event.symbol == symbols[-1] and rejected.reason == "transition_failed"
        assert "raise_on_miss" in rejected.detail


def test_raise_on_miss_leaves_matches_that_can_skip_as_they_are():
    ab = lambda raises: (  # noqa: E731
        Pattern.begin("start", "skip_to_first", "end", raise_on_miss=raises).where(kind("a")).times(2)
        .next("end").where(lambda s: "b" in s).times(2)
    )
    symbols = [f"ab{i}" for i in range(1, 7)]
    assert found(ab(True), symbols) == found(ab(False), symbols) == (
        [["ab1", "ab2", "ab3", "ab4"], ["ab3", "ab4", "ab5", "ab6"]], [],
    )


def test_a_match_released_when_a_window_closes_that_cannot_skip_stops_the_run():
    """``a? b`` where a b needs a "b!": the lone b completes [b] while the partial match
    begun at a lives, so [b] waits; released when a's window closes, it took no a.
    There is no event to reject then: as Flink fails the job, the run stops, naming why."""
    pattern = (
        Pattern.begin("a", "skip_to_first", "a", raise_on_miss=True).where(kind("a")).optional()
        .followed_by("b").where(lambda s, matched: s == "b!" if matched.get("a") else s.startswith("b"))
        .within(5)
    )
    runtime = LocalRuntime(Detector(pattern))
    runtime.feed([("k", "a", 0), ("k", "b", 1)])
    runtime.advance_to(2)  # [b] completed, and waits for the partial match begun at 0
    with pytest.raises(MachineError, match="on_deadline.*SkipMissed.*took no event"):
        runtime.advance_to(6)


TIED = """
import random, sys
from statemachines import run_local
from statemachines.library import Detector, Pattern, matches
pattern = (
    Pattern.begin("x", "skip_to_next").where(lambda s: s[0] in "ab").one_or_more()
    .followed_by("y").where(lambda s: s[0] in "bc").one_or_more()
    .followed_by("z").where(lambda s: s[0] == "d").within(8)
)
rnd = random.Random(5)
events = [(f"k{rnd.randrange(3)}", rnd.choice("abcd") + str(i), i // 2, i) for i in range(60)]
for m in matches(run_local(Detector(pattern), events).updates):
    print(m.key, m.time, [(e[0], e[3]) for e in m.events])
"""


def test_tied_matches_prune_each_other_the_same_way_under_every_hash_seed():
    """Two loops over overlapping conditions split the same events in several ways; under
    SKIP_TO_NEXT the first reported prunes the rest, so the order must not come from sets."""
    outputs = set()
    for seed in ("0", "1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", TIED], capture_output=True, text=True, env=env, check=True, timeout=120)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert outputs.pop().count("\n") > 3  # the case finds matches


# -- definitions that cannot work --------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Pattern.begin("a").not_followed_by("x"), "has no within"),
        (lambda: Pattern.begin("a").optional(), "every step is optional"),
        (lambda: Pattern.begin("a").followed_by("a"), "used twice"),
        (lambda: Pattern.begin("a").greedy(), "applies to a looping step"),
        (lambda: Pattern.begin("a").until(kind("x")), "applies to a looping step"),
        (lambda: Pattern.begin("a").times(3, 2), "1 <= n <= m"),
        (lambda: Pattern.begin("a").times(True), "1 <= n <= m"),
        (lambda: Pattern.begin("a").times(2, True), "1 <= n <= m"),
        (lambda: Pattern.begin("a").times_or_more(True), "n >= 1"),
        (lambda: Pattern.begin("a").times(2).times(3), "already has a quantifier"),
        (lambda: Pattern.begin("a").within(0), "positive duration"),
        (lambda: Pattern.begin("a").within(float("nan")), "positive duration"),
        (lambda: Pattern.begin("a").within("5"), "positive duration"),
        (lambda: Pattern.begin("a").within(True), "positive duration"),
        (lambda: Pattern.begin("a").where(lambda a, b, c: True), "takes 3 arguments"),
        (lambda: Pattern.begin("a", "skip_to_last"), "needs a step name"),
        (lambda: Pattern.begin("a", "skip_to_last", "zz"), "not a step"),
        (lambda: Pattern.begin("a", "sideways"), "unknown skip strategy"),
        (lambda: Pattern.begin("a", "skip_to_next", raise_on_miss=True), "raise_on_miss applies to skip_to_first"),
        (lambda: Pattern.begin("a").not_next("x").not_followed_by("y"), "between two negations"),
        (lambda: Pattern.begin("a").not_next("x").times(2), "not to the negation"),
        # the rules Flink's documentation gives for building patterns
        (lambda: Pattern.begin("x").followed_by("a").optional().not_next("n"), "after an optional step"),
        (lambda: Pattern.begin("x").times(1, 2).optional().not_followed_by("n"), "after an optional step"),
        (lambda: Pattern.begin("a").times(2).until(kind("x")), "unbounded loop"),
        (lambda: Pattern.begin("a").one_or_more().until(kind("x")).until(kind("y")), "already has an until"),
        (lambda: Pattern.begin("a:1"), "contains ':'"),
        (lambda: Pattern.begin("a").subtype("Sample"), "needs a class"),
        (lambda: Pattern.begin(Pattern.begin("a")).subtype(Sample), "not to the group"),
        # groups: only steps, each taking an event; conditions and until belong to their steps
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("a").optional()), "group must take an event"),
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("a").not_followed_by("n")), "cannot end with"),
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("a").within(5)), "takes no within"),
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("a", "skip_to_next")), "takes no skip"),
        (lambda: Pattern.begin("x").followed_by(Pattern.begin("x")), "used twice"),
        (lambda: Pattern.begin(Pattern.begin("a")).where(kind("a")), "not to the group"),
        (lambda: Pattern.begin(Pattern.begin("a").where(kind("a"))).one_or_more().until(kind("b")), "not to the group"),
        (lambda: Pattern.begin(Pattern.begin("a")).one_or_more().greedy(), "not to the group"),
        (lambda: Pattern.begin(Pattern.begin("a")).optional(), "every step is optional"),
        (lambda: Pattern.begin(Pattern.begin("a")).followed_by(Pattern.begin("b")).times(2).greedy(), "group"),
        (lambda: Pattern.begin("a").within(5).followed_by("b").within(datetime.timedelta(seconds=5)), "kind"),
    ],
)
def test_invalid_patterns_fail_when_built(build, message):
    with pytest.raises(DefinitionError, match=message):
        Detector(build())


# -- against brute force ----------------------------------------------------------------

alphabet = st.sampled_from(["a", "b", "c"])
# (symbol, time) in the order the runtime applies them: by time, then by symbol
histories = st.lists(st.tuples(alphabet, st.integers(0, 3)), max_size=9).map(
    lambda rows: sorted(
        [(s, t) for s, t in zip([r[0] for r in rows], itertools.accumulate(r[1] for r in rows), strict=True)],
        key=lambda r: (r[1], r[0]),
    )
)
step_kinds = st.lists(alphabet, min_size=1, max_size=3)


def brute_force(kinds, contiguity, history, window, most_after=None, not_next=None):
    """Every way to pick one event per step, by the definitions of the contiguities
    (``most_after``: per step, how long after the one before its event must come, or
    None), each with the time it completes: its last event's, or with a trailing
    ``not_next`` the next event's, which must come within the window and not be it."""
    found_ = []
    n = len(history)
    for picks in itertools.combinations(range(n), len(kinds)):
        if any(history[i][0] != k for i, k in zip(picks, kinds, strict=True)):
            continue
        if window is not None and history[picks[-1]][1] - history[picks[0]][1] >= window:
            continue
        if most_after and any(
            gap is not None and history[j][1] - history[i][1] >= gap
            for gap, (i, j) in zip(most_after[1:], itertools.pairwise(picks), strict=True)
        ):
            continue
        gaps = list(itertools.pairwise(picks))
        if contiguity == "next" and any(j != i + 1 for i, j in gaps):
            continue
        if contiguity == "followed_by" and any(
            history[m][0] == kinds[g + 1] for g, (i, j) in enumerate(gaps) for m in range(i + 1, j)
        ):
            continue
        last = picks[-1]
        if not_next is None:
            found_.append((list(picks), history[last][1]))
        elif last + 1 < n and history[last + 1][0] != not_next and (
            window is None or history[last + 1][1] - history[picks[0]][1] < window
        ):
            found_.append((list(picks), history[last + 1][1]))
    return sorted(found_)


@settings(max_examples=400)  # about a second
@given(
    step_kinds, st.sampled_from(["next", "followed_by", "followed_by_any"]), histories, st.none() | st.integers(1, 6),
    st.lists(st.none() | st.integers(1, 4), min_size=3, max_size=3), st.none() | alphabet,
)
def test_single_event_steps_match_exactly_the_brute_force_subsequences(kinds, contiguity, history, window, gaps, not_next):
    """With a window, a gap (``within(d, "previous_and_current")``) on some steps
    but the first, at most the window, and a trailing ``not_next``."""
    gaps = [None] + [g if g is None or window is None else min(g, window) for g in gaps[1 : len(kinds)]]
    pattern = Pattern.begin("s0").where(kind(kinds[0]))
    for i, k in enumerate(kinds[1:], start=1):
        pattern = getattr(pattern, contiguity)(f"s{i}").where(kind(k))
        if gaps[i] is not None:
            pattern = pattern.within(gaps[i], "previous_and_current")
    if not_next is not None:
        pattern = pattern.not_next("n").where(kind(not_next))
    if window is not None:
        pattern = pattern.within(window)
    result = run_local(Detector(pattern), [("k", s, t) for s, t in history])
    # an event's identity is (time, seq); map it back to its index in the history
    index = {}
    for i, (_, t) in enumerate(history):
        index[(t, sum(1 for _, u in history[:i] if u == t))] = i
    got = sorted((sorted(index[e[1:3]] for e in m.events), m.time) for m in matches(result.updates))
    assert got == brute_force(kinds, contiguity, history, window, gaps, not_next)


def test_state_is_bounded_by_the_window():
    events = [("k", "a", t) for t in range(400)]
    pattern = a_then_b("followed_by_any")
    for window, bound in ((None, None), (10, 10)):
        runtime = LocalRuntime(Detector(pattern.within(window) if window else pattern))
        peak = 0
        for t in range(0, 400, 20):
            runtime.feed([e for e in events if t <= e[2] < t + 20])
            runtime.advance_to(t + 20)
            peak = max(peak, runtime.stats()["live_values"])
        if bound is None:
            assert peak == 400  # every "a" waits for a "b" forever
        else:
            assert peak <= bound


def test_a_compiled_pattern_compiles_to_itself():
    pattern = Pattern.begin("a").where(kind("a")).not_followed_by("x").where(kind("x")).within(5)
    assert pattern.compiled().compiled() == pattern.compiled()
    assert pattern.compiled().compiled().trailing  # the trailing negation is kept


@given(st.lists(st.tuples(st.sampled_from("uv"), st.sampled_from(["fail", "ok", "view"]), st.integers(0, 12)), max_size=40))
def test_a_detector_into_a_persisted_arrangement_stores_every_partial_match(tmp_path_factory, events):
    """Partial matches of one event and of several share one value column (the type
    the detector declares, not the first value's): the persisted run rejects nothing,
    and equals a run into an arrangement in memory, also when read back."""
    from statemachines import Arrangement, PersistedArrangement

    pattern = Pattern.begin("fail").where(kind("fail")).times(2).followed_by("ok").where(kind("ok")).within(5)
    path = tmp_path_factory.mktemp("arr")
    persisted = run_local(Detector(pattern), events, into=PersistedArrangement(path))
    in_memory = run_local(Detector(pattern), events, into=Arrangement())
    assert persisted.rejected == in_memory.rejected == []
    assert persisted.updates == in_memory.updates
    assert PersistedArrangement(path).updates() == in_memory.updates


def _logins_some_unstorable():
    """``(key, Login, time)`` events: mostly of one type, some whose amount or time
    does not store as the first event's (a float amount or time after ints, NaN)."""
    from tests.test_expressions import Login

    amounts = st.sampled_from([None, 0, 5, 20]) | st.sampled_from([7.5, float("nan")])
    symbols = st.builds(Login, st.sampled_from(["fail", "ok", "view", None]), amounts)
    time = st.integers(0, 14) | st.sampled_from([2.5, 6.5])
    first = st.tuples(st.sampled_from("uv"), st.builds(Login, st.just("fail"), st.just(5)), st.just(0))
    return st.tuples(first, st.lists(st.tuples(st.sampled_from("uv"), symbols, time), max_size=30)).map(
        lambda parts: [parts[0], *parts[1]]
    )


@settings(max_examples=150, deadline=None)
@given(pattern=patterns(), events=_logins_some_unstorable())
def test_a_persisted_run_checking_events_equals_one_checking_every_value(tmp_path_factory, pattern, events):
    """Into a persisted arrangement of the detector's own type, an event whose symbol
    and time store makes values that store, unchecked; the others' values are checked
    one by one. Same updates, same rejected events (``unserialisable_value`` for a
    value holding a float amount or time, or NaN) as checking every value."""
    from statemachines import PersistedArrangement

    if pattern is None or isinstance(pattern.window, datetime.timedelta):  # number times here
        return
    runs = []
    for checks_every_value in (False, True):
        into = PersistedArrangement(tmp_path_factory.mktemp("arr"))
        runtime = LocalRuntime(Detector(pattern), into=into, value_check=into.value_check if checks_every_value else None)
        runtime.feed(events)
        result = runtime.finish()
        runs.append((result.updates, [(r.event, r.reason, r.detail) for r in result.rejected], into.updates()))
    assert repr(runs[0]) == repr(runs[1])  # repr: NaN symbols in rejected events equal only as text
