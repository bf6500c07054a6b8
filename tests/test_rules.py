"""Rules that change while the job runs: each rule version finds what its pattern
alone finds over the events of its validity interval, and its partial matches left
at the end of the interval end with the reason."""

from __future__ import annotations

import datetime
import json
import random
from collections import Counter

import attrs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from statemachines import DefinitionError, InvalidArgument, run_local
from statemachines.events import Event
from statemachines.library import Detector, Pattern, RuleBook, RuleDetector, ended, matches
from statemachines.library.pattern import Skip
from statemachines.library.rules import RuleWhy, Version
from tests.test_expressions import Login, logins
from tests.test_lockstep import both_ways, keyed_events
from tests.test_pattern_data import patterns

FINDINGS = ("match", "timeout", "replaced", "retired")


def discards(skip, skip_step, match, other):
    """Flink's after-match skip: whether reporting ``match`` drops ``other`` (begun no
    earlier), by the identities ``(time, seq)`` of their events."""
    first = other[0][1:3]
    if skip == "skip_to_next":
        return first == match[0][1:3]
    if skip == "skip_past_last_event":
        return first <= match[-1][1:3]
    if skip in ("skip_to_first", "skip_to_last"):
        of_step = [e[1:3] for e in match if e[0] == skip_step]
        return bool(of_step) and first < (of_step[0] if skip == "skip_to_first" else of_step[-1])
    return False


def model(book, events):
    """What each rule version finds alone over its interval's events; at the interval's
    end its live partial matches end with the reason and its held matches are reported
    (earliest first, each dropping what its skip strategy discards)."""
    expected = Counter()
    for version in book.versions:
        rule, until = version.rule_id, version.valid_until
        inside = [e for e in events if version.valid_from <= e[2] and (until is None or e[2] < until)]
        alone = run_local(Detector(version.pattern), inside).updates
        live = Counter()
        for (key, value), time, diff in alone:
            if until is not None and time > until:
                continue
            if value[0] in FINDINGS or (until is None or time < until):
                expected[key, (*value, rule), time] += diff
            if value[0] in ("partial", "held"):
                live[key, value] += diff
        if until is None:
            continue
        for key in {k for k, _ in live}:
            partials = sorted((v for (k, v), n in live.items() if k == key and n > 0 and v[0] == "partial"), key=repr)
            held = sorted((v[2] for (k, v), n in live.items() if k == key and n > 0 and v[0] == "held"),
                          key=lambda m: [(e[1], e[2], e[0]) for e in m])
            for value in partials:
                expected[key, (version.ends_as, value[1], value[2], rule), until] += 1
            while held:
                match, held = held[0], held[1:]
                expected[key, ("match", "", match, rule), until] += 1
                held = [m for m in held if not discards(version.pattern.skip, version.pattern.skip_step, match, m)]
            for value in {v for (k, v), n in live.items() if k == key and n > 0}:
                expected[key, (*value, rule), until] -= 1
    return +expected


def observed(updates):
    return +Counter({(key, value, time): diff for (key, value), time, diff in updates})


# at most 20 events of two keys: a pattern whose loop keeps every combination of the
# events it takes (followed_by_any, allow_combinations) and has no window holds 2^n
# matches of a key's n events, which at 60 events ran for more than ten minutes
EVENTS = st.lists(st.tuples(st.sampled_from(["k1", "k2"]), logins, st.integers(0, 30)), min_size=5, max_size=20)


@st.composite
def rule_rows(draw):
    rows = []
    for rule in draw(st.lists(st.sampled_from(["r1", "r2", "r3"]), min_size=1, max_size=3, unique=True)):
        for valid_from in draw(st.lists(st.integers(0, 24), min_size=1, max_size=3, unique=True)):
            pattern = draw(patterns()) if draw(st.integers(0, 2)) else None
            if pattern is not None:
                assume(not isinstance(pattern.window, datetime.timedelta))
            rows.append((rule, None if pattern is None else pattern.to_json(), valid_from))
    return rows


@settings(max_examples=300, deadline=None)
@given(
    rule_rows(),
    EVENTS,
)
def test_each_rule_version_finds_what_its_pattern_finds_alone_over_its_interval(rows, events):
    book = RuleBook.from_rows(rows)
    assert all(r.reason == RuleWhy.NOT_IN_FORCE for r in book.rejected)  # a retirement of nothing
    result = run_local(RuleDetector(book), events)
    assert result.rejected == []
    assert observed(result.updates) == model(book, events)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.booleans().flatmap(lambda functions: book_of_patterns(functions)),
    # at most 14 events: a loop taking any event may hold 2^n partial matches of n events
    st.integers(0, 2**32), st.integers(1, 14), st.integers(1, 3), st.booleans(), st.booleans(),
)
def test_a_rule_book_steps_many_keys_at_once_as_each_key_steps_event_by_event(book, seed, n, keys, floats, cut):
    """``RuleDetector.advance_keys`` (each version's keys in rounds where its pattern
    allows, cut at the version's end) gives each key exactly what ``advance_key`` gives,
    up to a frontier and from there on; events a condition cannot read included."""
    by_key = keyed_events(seed, n, keys, 30, floats)
    if floats and seed % 4:  # float times (else int rules' times, where keys run whole)
        book = book.with_times(float)
    both_ways(RuleDetector(book), by_key, 12.5 if cut else None)


def test_a_key_holding_matches_of_times_of_another_type_than_the_rules_runs_whole():
    """Rules of whole-number times over events at float times: after the cut at 7.5
    the key has no events but holds partial matches begun at 5.0. At 15 the window
    of one (5.0 + 10) and the other's rule (retired at 15) end together; the key runs
    whole, so the updates at that time have one time, as event by event."""
    pattern = Pattern.begin("a").where("kind = 'fail'").followed_by("b").where("kind = 'ok'")
    book = RuleDetector([("windowed", pattern.within(10).to_json(), 0), ("retired", pattern.to_json(), 0), ("retired", None, 15)])
    assert book.rules.time_type is int
    both_ways(book, {"u0": [Event("u0", Login("fail", 1), 5.0)]}, 7.5)


@st.composite
def book_of_patterns(draw, functions: bool, rounds: bool = False):
    """A rule book of random patterns (SQL, or Python functions), most of them without
    a skip strategy (so that their keys step in rounds; ``rounds``: all of them, with
    whole-number windows), valid from times in 0-24."""
    versions = []
    for rule in draw(st.lists(st.sampled_from(["r1", "r2", "r3"]), min_size=1, max_size=3, unique=True)):
        times = sorted(draw(st.lists(st.integers(0, 24), min_size=1, max_size=3, unique=True)))
        for i, valid_from in enumerate(times):
            pattern = draw(patterns(functions=functions))
            assume(pattern is not None)
            if isinstance(pattern.window, datetime.timedelta):  # the rules' times are numbers
                pattern = attrs.evolve(pattern, window=10)
            if rounds or draw(st.integers(0, 3)):
                pattern = attrs.evolve(pattern, skip=Skip.NO_SKIP, skip_step=None)
            if rounds and isinstance(pattern.window, float):
                pattern = attrs.evolve(pattern, window=int(pattern.window) + 1)
            until = times[i + 1] if i + 1 < len(times) else draw(st.sampled_from([None, 27]))
            ends = None if until is None else draw(st.sampled_from(["replaced", "retired"]))
            versions.append(Version(rule, pattern, valid_from, until, ends))
    return RuleBook(versions)


@pytest.mark.parametrize("seed", range(6))
def test_matches_held_back_by_a_skip_strategy_are_reported_when_their_rule_ends(seed):
    """``a? b`` under skip-past-last-event: a lone b's match waits for a partial match
    begun before it; when the rule ends, that partial match ends and the wait is over."""
    from tests.test_spark_cep import held, tied

    rnd = random.Random(seed)
    events = [(f"k{rnd.randrange(3)}", rnd.choice(["a", "b", "b!", "c", "d"]) + str(i), i // 2, i) for i in range(80)]
    book = RuleBook([
        Version("held", held(), 0, 21, "replaced"), Version("held", held(), 21, 33, "retired"),
        Version("tied", tied(), 5, 27, "retired"),
    ])
    updates = run_local(RuleDetector(book), events).updates
    assert observed(updates) == model(book, events)
    assert any(v[0] == "held" for (_, v), _, _ in updates)


def fraud(fails):
    return (
        Pattern.begin("fail").where("kind = 'fail'").times(fails)
        .followed_by("ok").where("kind = 'ok'")
        .within(10)
    )


def test_a_rule_replaced_and_retired_mid_stream_ends_its_partial_matches_saying_why():
    rows = [("fraud", fraud(2).to_json(), 0), ("fraud", fraud(3).to_json(), 5), ("fraud", None, 9)]
    kinds = ["fail", "fail", "fail", "fail", "ok", "fail", "fail", "fail", "ok", "fail", "fail"]
    events = [("u", Login(kind, 1), t) for t, kind in enumerate(kinds)]
    updates = run_local(RuleDetector(rows), events).updates
    # two fails then ok before 5; three fails then ok from 5; nothing from 9
    assert [[e[1] for e in m.events] for m in matches(updates)] == [[0, 1, 4], [1, 2, 4], [2, 3, 4], [5, 6, 7, 8]]
    assert [(f.time, f.reason, f.rule, [e[1] for e in f.events]) for f in ended(updates)] == [
        (5, "replaced", "fraud", [3]),  # one fail, waiting for a second when fraud(3) took over
        (9, "retired", "fraud", [6, 7]),
        (9, "retired", "fraud", [7]),
    ]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (("", "{}", 0), RuleWhy.INVALID_RULE_ID),
        ((7, "{}", 0), RuleWhy.INVALID_RULE_ID),
        (("r", fraud(2).to_json(), float("nan")), RuleWhy.INVALID_TIME),
        (("r", fraud(2).to_json(), "noon"), RuleWhy.INVALID_TIME),
        (("r", "not json", 0), RuleWhy.INVALID_PATTERN),
        (("r", '{"format": "other/1"}', 0), RuleWhy.INVALID_PATTERN),
        (("r", None, 0), RuleWhy.NOT_IN_FORCE),
        (("r", 42, 0), RuleWhy.INVALID_PATTERN),
        (("r", Pattern.begin("a", "skip_to_first", "a", raise_on_miss=True).where("kind = 'x'").to_json(), 0),
         RuleWhy.INVALID_PATTERN),  # one rule's miss would reject the event for every rule
        (("r", fraud(2).to_json()), RuleWhy.MALFORMED),
        ("r", RuleWhy.MALFORMED),
    ],
)
def test_a_rule_row_that_cannot_be_used_is_set_aside_with_a_reason(row, reason):
    book = RuleBook.from_rows([row, ("ok", fraud(2).to_json(), 0)])
    assert [(r.row, r.reason) for r in book.rejected] == [(row, reason)]
    assert [v.rule_id for v in book.versions] == ["ok"]
    with pytest.raises(DefinitionError, match=reason.value):
        RuleDetector([row])


def test_two_different_rows_for_one_rule_at_one_time_are_both_set_aside_and_repeats_are_one():
    two, three = fraud(2).to_json(), fraud(3).to_json()
    book = RuleBook.from_rows([("r", two, 0), ("r", three, 0), ("s", two, 0), ("s", two, 0)])
    assert sorted(r.row for r in book.rejected) == sorted([("r", two, 0), ("r", three, 0)])
    assert {r.reason for r in book.rejected} == {RuleWhy.CONFLICTING}
    assert [(v.rule_id, v.valid_from) for v in book.versions] == [("s", 0)]


def test_rules_read_from_mappings_and_valid_from_times_of_one_kind():
    at = datetime.datetime(2026, 1, 1)
    parsed = json.loads(fraud(2).to_json())  # a document already parsed (a JSON column read as a map)
    assert RuleBook.from_rows([("r", parsed, 0)]).versions[0].pattern == Pattern.from_json(fraud(2).to_json())
    book = RuleBook.from_rows([{"rule_id": "r", "pattern_json": fraud(2).to_json(), "valid_from": at}])
    assert book.time_kind == "datetime" and book.in_force(at + datetime.timedelta(1))[0].rule_id == "r"
    with pytest.raises(InvalidArgument, match="several kinds"):
        RuleBook.from_rows([("r", fraud(2).to_json(), at), ("s", fraud(2).to_json(), 0)])


def test_an_event_whose_time_the_rules_cannot_compare_is_rejected_saying_why():
    at = datetime.datetime(2026, 1, 1)
    result = run_local(RuleDetector([("r", fraud(2).to_json(), at)]), [("u", Login("fail", 1), 3)])
    assert [(r.reason, r.event.symbol) for r in result.rejected] == [(RuleWhy.TIME_KIND, Login("fail", 1))]
    assert "datetime" in result.rejected[0].detail


def test_an_event_whose_time_a_rules_window_does_not_fit_is_rejected_naming_the_rule():
    minutes = Pattern.begin("fail").where("kind = 'fail'").within(datetime.timedelta(minutes=5)).to_json()
    events = [("u", Login("fail", 1), t) for t in (3, 4)]  # number times: the timedelta cannot time them out
    result = run_local(RuleDetector([("ok", fraud(2).to_json(), 0), ("minutes", minutes, 0)]), events)
    assert [(r.reason, r.event.time) for r in result.rejected] == [(RuleWhy.TIME_KIND, 3), (RuleWhy.TIME_KIND, 4)]
    assert all(r.detail.startswith("rule 'minutes': the pattern's within") for r in result.rejected)


STEP = 8  # rules arriving at step s find the frontier at s * STEP


def run_with_arriving_rules(arrivals, events, steps=4):
    """A runtime fed one step of events at a time, the rows of ``arrivals[s]`` taken
    after step ``s`` advanced to its frontier."""
    from statemachines import LocalRuntime

    runtime = LocalRuntime(RuleDetector(RuleBook([])))
    updates = []
    for step in range(steps):
        frontier = step * STEP
        updates += runtime.advance_to(frontier).updates if step else []
        last = step == steps - 1
        runtime.feed([e for e in events if frontier <= e[2] and (last or e[2] < frontier + STEP)])
        book = runtime.machine.rules.extended(arrivals.get(step, []), frontier=frontier if step else None)
        runtime.reconfigure(RuleDetector(book))
    result = runtime.finish()
    return [*updates, *result.updates], result.rejected, runtime.machine.rules


@settings(max_examples=200, deadline=None)
@given(
    rule_rows(),
    st.lists(st.integers(0, 3), min_size=12, max_size=12),
    EVENTS,
)
def test_rules_arriving_while_the_job_runs_find_what_the_book_known_from_the_start_finds(rows, steps, events):
    arrivals = {}
    for row, step in zip(rows, steps, strict=False):
        arrivals.setdefault(step, []).append(row)
    updates, rejected, book = run_with_arriving_rules(arrivals, events)
    assert rejected == []
    assert observed(updates) == observed(run_local(RuleDetector(book), events).updates)
    # late exactly when valid_from is below the frontier the row arrived at
    late = [row for step in sorted(arrivals) for row in arrivals[step] if step and row[2] < step * STEP]
    assert [r.row for r in book.rejected if r.reason == RuleWhy.LATE] == late
    if all(r.reason == RuleWhy.LATE for r in book.rejected):
        on_time = [row for step in sorted(arrivals) for row in arrivals[step] if row not in late]
        assert book == RuleBook.from_rows(on_time)


def test_a_rule_retired_while_the_job_runs_ends_the_partial_matches_of_keys_with_no_more_events():
    """The retirement arrives after the key's last event: the key's deadline, armed for
    its window, is armed again for the retirement."""
    events = [("u", Login("fail", 1), 1), ("v", Login("ok", 1), 30)]
    arrivals = {0: [("fraud", fraud(3).to_json(), 0)], 1: [("fraud", None, 9)]}
    updates, _, book = run_with_arriving_rules(arrivals, events)
    assert [(f.time, f.reason, [e[1] for e in f.events]) for f in ended(updates)] == [(9, "retired", [1])]
    assert [v.valid_until for v in book.versions] == [9]


def test_rows_arriving_while_the_job_runs_are_set_aside_saying_why():
    book = RuleBook.from_rows([("r1", fraud(2).to_json(), 0), ("r1", None, 50)])
    arriving = [
        ("r1", fraud(3).to_json(), 30),  # replaces r1 from 30
        ("r2", fraud(2).to_json(), 10),  # late
        ("r1", None, 40),  # would void the retirement at 50
        ("r1", fraud(3).to_json(), 30),  # a repeat: one row
        ("r1", fraud(2).to_json(), 30),  # conflicts with the row at 30
        ("r3", fraud(2).to_json(), datetime.datetime(2026, 1, 1)),  # a time of another kind
    ]
    extended = book.extended(arriving, frontier=20)
    assert [(v.valid_from, v.valid_until, v.ends_as) for v in extended.versions] == [(0, 30, "replaced"), (30, 50, "retired")]
    assert [(r.row, r.reason) for r in extended.rejected] == [
        (arriving[1], RuleWhy.LATE), (arriving[2], RuleWhy.CONFLICTING),
        (arriving[4], RuleWhy.CONFLICTING), (arriving[5], RuleWhy.INVALID_TIME),
    ]
    assert book.versions[0].valid_until == 50  # the book itself is unchanged


def test_a_runtime_takes_another_machine_of_its_class_only():
    from statemachines import LocalRuntime
    from statemachines.library import Upsert

    with pytest.raises(InvalidArgument, match="RuleDetector"):
        LocalRuntime(RuleDetector(RuleBook([]))).reconfigure(Upsert())


END = 100  # past every event and window


@settings(max_examples=150, deadline=None)
@given(
    rule_rows(),
    st.integers(1, 29),
    st.booleans(),
    EVENTS,
)
def test_a_run_continuing_an_arrangement_keeps_the_rules_earlier_runs_used(rows, upper, whole, events):
    """Run 1 knows the rows before ``upper``; run 2 continues its arrangement with the
    rows from ``upper`` on (and, or not, the earlier ones again): together they find
    what one run with every row finds."""
    from statemachines import Arrangement

    book = RuleBook.from_rows(rows)
    clean = book.rows()
    arrangement = Arrangement()
    first = run_local(RuleDetector([r for r in clean if r[2] < upper]), [e for e in events if e[2] < upper],
                      frontier=upper, into=arrangement)
    # a table of the later rows only may retire a rule it does not hold: a RuleBook runs it
    second = RuleDetector(RuleBook.from_rows(clean if whole else [r for r in clean if r[2] >= upper]))
    rest = run_local(second, [e for e in events if e[2] >= upper], frontier=END, into=arrangement)
    assert first.rejected == rest.rejected == []
    alone = run_local(RuleDetector(book), events, frontier=END, into=Arrangement()).updates
    assert observed([*first.updates, *rest.updates]) == observed(alone)


def test_a_run_continuing_an_arrangement_asks_each_version_of_the_partial_matches_it_holds():
    """The arrangement holds the findings of the version replaced at 1 (begun at 0)
    beside the partial matches of its successor: the continuing run reads the
    successor's states with the successor's pattern, not the one the findings began in."""
    from statemachines import Arrangement

    gap = Pattern.begin("fail").where("kind = 'fail'").followed_by("ok").where("kind = 'ok'").within(5, "previous_and_current")
    three = Pattern.begin("fail").where("kind = 'fail'").times(3).followed_by("ok").where("kind = 'ok'")
    rows = [("fraud", gap.to_json(), 0), ("fraud", three.to_json(), 1)]
    events = [("u", Login("fail", 1), t) for t in (0, 1, 1, 3)] + [("u", Login("ok", 1), 8)]
    arrangement = Arrangement()
    first = run_local(RuleDetector(rows), [e for e in events if e[2] < 2], frontier=2, into=arrangement)
    assert {v[0] for v in arrangement.values("u")} == {"replaced", "partial"}
    rest = run_local(RuleDetector(rows), [e for e in events if e[2] >= 2], frontier=END, into=arrangement)
    alone = run_local(RuleDetector(rows), events, frontier=END).updates
    assert observed([*first.updates, *rest.updates]) == observed(alone)
    assert [len(m.events) for m in matches(alone)] == [4]


def test_a_rule_row_below_the_arrangements_upper_that_earlier_runs_did_not_use_is_refused():
    from statemachines import Arrangement

    arrangement = Arrangement()
    run_local(RuleDetector([("fraud", fraud(2).to_json(), 0)]), [("u", Login("fail", 1), 3)], frontier=10, into=arrangement)
    changed = RuleDetector([("fraud", fraud(2).to_json(), 0), ("fraud", fraud(3).to_json(), 5)])
    with pytest.raises(DefinitionError, match=r"below the output's frontier 10.*'fraud', a pattern, 5"):
        run_local(changed, [("u", Login("ok", 1), 12)], into=arrangement)
    later = RuleDetector([("fraud", fraud(3).to_json(), 10)])  # from the upper on: taken
    updates = run_local(later, [("u", Login("ok", 1), 12)], into=arrangement).updates
    assert [(f.time, f.reason) for f in ended(updates)] == [(10, "replaced")]
