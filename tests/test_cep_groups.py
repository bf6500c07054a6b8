"""Groups of patterns (Flink's GroupPattern): Flink's own cases, and each group
against the plain patterns it stands for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import run_local
from statemachines.library import Detector, Pattern, matches
from tests.test_cep import found, kind


def step(pattern: Pattern | None, how: str, name: str, condition: str) -> Pattern:
    """``pattern.how(name).where(kind(condition))``, or a pattern beginning so."""
    begun = Pattern.begin(name) if pattern is None else getattr(pattern, how)(name)
    return begun.where(kind(condition))


def ab(first="middle1", second="middle2", how="followed_by"):
    """The group ``(a b)`` of Flink's cases."""
    return step(step(None, "", first, "a"), how, second, "b")


def split(text):
    return text.split()


# (pattern, events, the matches Flink's GroupITCase expects)
FLINK_CASES = {
    "c (a b){2} d": (
        step(Pattern.begin("start").where(kind("c")).followed_by(ab()).times(2), "followed_by", "end", "d"),
        "c a1 b1 a2 b2 d", ["c a1 b1 a2 b2 d"],
    ),
    "c (a b)? d": (
        step(Pattern.begin("start").where(kind("c")).followed_by(ab()).optional(), "followed_by", "end", "d"),
        "c a1 a2 b d", ["c d", "c a1 b d"],
    ),
    "c (a b){2}? d": (
        step(Pattern.begin("start").where(kind("c")).followed_by(ab()).times(2).optional(), "followed_by", "end", "d"),
        "c a d", ["c d"],
    ),
    "c (a b)+ d": (
        step(Pattern.begin("start").where(kind("c")).followed_by(ab()).one_or_more(), "followed_by", "end", "d"),
        "c a1 b1 a2 b2 d", ["c a1 b1 d", "c a1 b1 a2 b2 d"],
    ),
    "c (a b)* d": (
        step(
            Pattern.begin("start").where(kind("c")).followed_by(ab()).one_or_more().optional(),
            "followed_by", "end", "d",
        ),
        "c a1 b1 a2 b2 d", ["c d", "c a1 b1 d", "c a1 b1 a2 b2 d"],
    ),
    "c any (a b){2} combinations d": (
        step(
            Pattern.begin("start").where(kind("c")).followed_by_any(ab()).times(2).allow_combinations(),
            "followed_by", "end", "d",
        ),
        "c a1 b1 a2 b2 a3 b3 d", ["c a1 b1 a2 b2 d", "c a1 b1 a3 b3 d", "c a2 b2 a3 b3 d"],
    ),
    "c any (a b){2}? d": (
        step(
            Pattern.begin("start").where(kind("c")).followed_by_any(ab()).times(2).optional(),
            "followed_by", "end", "d",
        ),
        "c a1 b1 a2 b2 a3 b3 d", ["c d", "c a1 b1 a2 b2 d", "c a2 b2 a3 b3 d"],
    ),
    "c any (a b)+ d": (
        step(Pattern.begin("start").where(kind("c")).followed_by_any(ab()).one_or_more(), "followed_by", "end", "d"),
        "c a1 b1 a2 b2 a3 b3 d",
        ["c a1 b1 d", "c a2 b2 d", "c a3 b3 d", "c a1 b1 a2 b2 d", "c a2 b2 a3 b3 d", "c a1 b1 a2 b2 a3 b3 d"],
    ),
    "c next (a b)* consecutive d": (
        step(
            Pattern.begin("start").where(kind("c")).next(ab()).one_or_more().optional().consecutive(),
            "followed_by", "end", "d",
        ),
        "c a1 b1 a2 b2 a3 b3 d", ["c d", "c a1 b1 d", "c a1 b1 a2 b2 d", "c a1 b1 a2 b2 a3 b3 d"],
    ),
    "c any (a b) not followed by d, then e": (
        step(
            Pattern.begin("start").where(kind("c")).followed_by_any(ab()).not_followed_by("not").where(kind("d")),
            "followed_by", "end", "e",
        ),
        "c a1 b1 d a2 b2 e", ["c a2 b2 e"],
    ),
    "c any (a b) not next d, then e": (
        step(
            Pattern.begin("start").where(kind("c")).followed_by_any(ab()).not_next("not").where(kind("d")),
            "followed_by", "end", "e",
        ),
        "c a1 b1 d a2 b2 e", ["c a2 b2 e"],
    ),
    "d (a (b c)*)? e": (
        step(
            Pattern.begin("start").where(kind("d")).followed_by(
                Pattern.begin("middle1").where(kind("a")).followed_by(
                    Pattern.begin("middle2").where(kind("b")).followed_by("middle3").where(kind("c"))
                ).one_or_more().optional()
            ).optional(),
            "followed_by", "end", "e",
        ),
        "d a1 b1 c1 b2 c2 e", ["d e", "d a1 e", "d a1 b1 c1 e", "d a1 b1 c1 b2 c2 e"],
    ),
    "d any (a (b c){3}){0,2} e": (
        step(
            Pattern.begin("start").where(kind("d")).followed_by_any(
                Pattern.begin("middle1").where(kind("a")).followed_by(
                    Pattern.begin("middle2").where(kind("b")).followed_by("middle3").where(kind("c"))
                ).times(3)
            ).times(0, 2),
            "followed_by", "end", "e",
        ),
        "d a1 b1 c1 b2 c2 b3 c3 a2 b4 c4 b5 c5 b6 c6 e",
        [
            "d e", "d a1 b1 c1 b2 c2 b3 c3 e", "d a2 b4 c4 b5 c5 b6 c6 e",
            "d a1 b1 c1 b2 c2 b3 c3 a2 b4 c4 b5 c5 b6 c6 e",
        ],
    ),
    "d any (a (b c){3} consecutive){0,2} consecutive e": (
        step(
            Pattern.begin("start").where(kind("d")).followed_by_any(
                Pattern.begin("middle1").where(kind("a")).followed_by(
                    Pattern.begin("middle2").where(kind("b")).followed_by("middle3").where(kind("c"))
                ).times(3).consecutive()
            ).times(0, 2).consecutive(),
            "followed_by", "end", "e",
        ),
        "d a1 b1 c1 b2 c2 b3 c3 a2 b4 c4 x b5 c5 b6 c6 e", ["d e", "d a1 b1 c1 b2 c2 b3 c3 e"],
    ),
    "(a b){1,2} d": (
        step(Pattern.begin(ab()).times(1, 2), "followed_by", "end", "d"),
        "a1 b1 a2 b2 d", ["a1 b1 d", "a2 b2 d", "a1 b1 a2 b2 d"],
    ),
    "a next (b? next c) next d": (
        step(
            Pattern.begin("start").where(kind("a")).next(
                Pattern.begin("middle1").where(kind("b")).optional().next("middle2").where(kind("c"))
            ),
            "next", "end", "d",
        ),
        "a c d", ["a c d"],
    ),
    "a (b next c)? next d": (
        step(Pattern.begin("start").where(kind("a")).followed_by(ab(how="next")).optional(), "next", "end", "d"),
        "a d1 d2", ["a d1"],
    ),
}


@pytest.mark.parametrize("case", list(FLINK_CASES))
def test_groups_match_as_in_flinks_group_cases(case):
    """Flink's GroupITCase: each pattern over its events gives exactly its matches."""
    pattern, events, expected = FLINK_CASES[case]
    got, _ = found(pattern, split(events))
    assert sorted(got) == sorted(split(m) for m in expected)


def test_a_match_names_each_event_by_the_step_in_the_group_that_took_it():
    pattern = step(Pattern.begin("start").where(kind("c")).followed_by(ab()).times(2), "followed_by", "end", "d")
    (match,) = matches(run_local(Detector(pattern), [("k", s, t) for t, s in enumerate(split("c a1 b1 a2 b2 d"))]).updates)
    assert [(e[0], e[3]) for e in match.events] == [
        ("start", "c"), ("middle1", "a1"), ("middle2", "b1"), ("middle1", "a2"), ("middle2", "b2"), ("end", "d"),
    ]


# -- a group against the plain patterns it stands for -------------------------------------

HOW = ["next", "followed_by", "followed_by_any"]
INNER = {"relaxed": "followed_by", "consecutive": "next", "combinations": "followed_by_any"}


@st.composite
def group_cases(draw):
    """``x`` then a group of one to three steps taken between ``low`` and ``high``
    times, then ``z``: ``(inner steps (how each follows, its letter, its quantifier),
    how the group follows x, inner contiguity, low, high, how z follows)``.
    Conditions read the symbol's first letter."""
    size = draw(st.integers(1, 3))
    inner = [
        (draw(st.sampled_from(HOW)), draw(st.sampled_from("abc")), draw(st.sampled_from(list(QUANTIFIED))))
        for _ in range(size)
    ]
    if all(quantifier == "optional" for _, _, quantifier in inner):
        inner[0] = (*inner[0][:2], "one")  # a group must take an event
    low = draw(st.integers(1, 2))
    high = draw(st.sampled_from([low, low + 1, None]))
    return inner, draw(st.sampled_from(HOW)), draw(st.sampled_from(list(INNER))), low, high, draw(st.sampled_from(HOW))


# how a step inside a group is quantified
QUANTIFIED = {
    "one": lambda p: p, "optional": Pattern.optional, "twice": lambda p: p.times(2),
    "one_or_more": Pattern.one_or_more, "consecutive_loop": lambda p: p.one_or_more().consecutive(),
}


def grouped(inner, how, contiguity, low, high, after):
    group = None
    for i, (inner_how, letter, quantifier) in enumerate(inner):
        group = QUANTIFIED[quantifier](step(group, inner_how, f"g{i}", letter))
    pattern = getattr(Pattern.begin("x").where(kind("x")), how)(group)
    pattern = pattern.one_or_more() if (low, high) == (1, None) else (
        pattern.times_or_more(low) if high is None else pattern.times(low, high)
    )
    if contiguity == "consecutive":
        pattern = pattern.consecutive()
    elif contiguity == "combinations":
        pattern = pattern.allow_combinations()
    return step(pattern, after, "z", "z")


def unrolled(inner, how, contiguity, times, after):
    """The group taken ``times`` times, written out: each time's first step follows
    as the group does the first time, and as its inner contiguity after that."""
    pattern = Pattern.begin("x").where(kind("x"))
    for time in range(times):
        for i, (inner_how, letter, quantifier) in enumerate(inner):
            head = how if time == 0 else INNER[contiguity]
            pattern = QUANTIFIED[quantifier](step(pattern, head if i == 0 else inner_how, f"g{i}_{time}", letter))
    return step(pattern, after, "z", "z")


@st.composite
def cases_and_histories(draw):
    """A group case, and events: x, then mostly letters the group takes, then z (and
    maybe more), as numbered symbols; many such cases have matches."""
    case = draw(group_cases())
    letters = [letter for _, letter, _ in case[0]]
    middle = draw(st.lists(st.sampled_from([*letters, *letters, "a", "b", "c", "x"]), max_size=7))
    tail = draw(st.lists(st.sampled_from("abcz"), max_size=2))
    return case, [f"{s}{i}" for i, s in enumerate(["x", *middle, "z", *tail])]


@settings(max_examples=200, deadline=None)
@given(cases_and_histories())
def test_a_group_matches_what_its_times_written_out_match(case_and_symbols):
    """Without a skip strategy a match is any way to take the events, so a group
    taken ``low`` to ``high`` times matches what its times written out, one pattern
    per number of times, match together (an unbounded group: as many times as the
    events allow)."""
    (inner, how, contiguity, low, high, after), symbols = case_and_symbols
    if (low, high) == (1, 1):
        contiguity = "relaxed"  # taken once: no contiguity between times
    got, _ = found(grouped(inner, how, contiguity, low, high, after), symbols)
    most = high if high is not None else len(symbols)
    expected = set()
    for times in range(low, most + 1):
        matches_, _ = found(unrolled(inner, how, contiguity, times, after), symbols)
        expected |= {tuple(m) for m in matches_}
    assert {tuple(m) for m in got} == expected


@settings(max_examples=60, deadline=None)
@given(cases_and_histories())
def test_a_group_taken_once_is_its_steps_in_line(case_and_symbols):
    """A group without a quantifier is its steps written in its place, the first one
    following as the group does; partial matches time out alike."""
    (inner, how, _, _, _, after), symbols = case_and_symbols
    group = grouped(inner, how, "relaxed", 1, 1, after).within(4)
    in_line = unrolled(inner, how, "relaxed", 1, after).within(4)
    as_sets = lambda pair: tuple(sorted(map(tuple, rows)) for rows in pair)  # noqa: E731
    assert as_sets(found(group, symbols)) == as_sets(found(in_line, symbols))


def test_a_loop_inside_a_repeating_group_may_go_on_or_start_the_next_time():
    """``x next (a+ consecutive)+ next z``: after a1 the loop cannot go on (b breaks
    it), but the group's next time takes a3 (relaxed between times), then a5."""
    inner = Pattern.begin("a").where(kind("a")).one_or_more().consecutive()
    pattern = step(Pattern.begin("x").where(kind("x")).next(inner).one_or_more(), "next", "z", "z")
    got, _ = found(pattern, split("x a1 b2 a3 b4 a5 z"))
    assert got == [split("x a1 a3 a5 z")]


def test_every_way_through_a_group_with_an_optional_group_inside_is_one_match():
    pattern = step(
        Pattern.begin("x").where(kind("x")).followed_by(
            Pattern.begin("a").where(kind("a")).followed_by(Pattern.begin("b").where(kind("b"))).optional()
        ).one_or_more(),
        "followed_by", "z", "z",
    )
    got, _ = found(pattern, split("x a1 b1 a2 z"))
    # relaxed: the group's first time takes a1, the first a; its optional b may take b1 or not
    expected = {("x", "a1", "z"), ("x", "a1", "b1", "z"), ("x", "a1", "a2", "z"), ("x", "a1", "b1", "a2", "z")}
    assert {tuple(m) for m in got} == expected and len(got) == len(expected)


def test_groups_are_drawn_with_one_state_per_step_of_each_time_labelled_with_the_time():
    pattern = step(Pattern.begin("start").where(kind("c")).followed_by(ab()).times(2), "followed_by", "end", "d")
    diagram = Detector(pattern).diagram()
    labels = sorted(node.label for node in diagram.nodes)
    assert labels == sorted([
        "start", "start #1", "middle1 #1, time 1", "middle2 #1, time 1", "middle1 #1, time 2", "middle2 #1, time 2",
        "end #1",
    ])
    assert [node.label for node in diagram.nodes if node.final] == ["end #1"]


def test_a_groups_copies_evaluate_their_sql_conditions_once_per_batch(monkeypatch):
    """``(fail)`` taken three times is three copies of one step: the batch evaluates
    its condition once, and the matches are those of the step taken three times."""
    from collections import namedtuple

    from statemachines.library.expressions import Expression

    login = namedtuple("Login", ["kind"])
    evaluated = []
    evaluate = Expression.evaluate
    monkeypatch.setattr(Expression, "evaluate", lambda self, table: evaluated.append(self.sql) or evaluate(self, table))
    fail = Pattern.begin("fail").where("kind = 'fail'")
    grouped = Pattern.begin(fail).times(3).followed_by("ok").where("kind = 'ok'")
    plain = Pattern.begin("fail").where("kind = 'fail'").times(3).followed_by("ok").where("kind = 'ok'")
    events = [("k", login(kind), t) for t, kind in enumerate(split("fail fail ok fail fail fail ok"))]
    got = matches(run_local(Detector(grouped), events).updates)
    assert sorted(evaluated) == ["kind = 'fail'", "kind = 'ok'"]  # one batch, each text once
    as_times = lambda found_: sorted([e[1] for e in m.events] for m in found_)  # noqa: E731
    assert as_times(got) == as_times(matches(run_local(Detector(plain), events).updates))
    assert [3, 4, 5, 6] in as_times(got)
