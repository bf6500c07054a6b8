"""Declared finite machines, and diagrams of every kind of machine."""

from __future__ import annotations

import html
import json
import os
import pathlib
import re
import shutil
import sys
from operator import itemgetter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import (
    DefinitionError,
    FiniteMachine,
    InvalidArgument,
    Machine,
    Reason,
    State,
    diagram,
    explore,
    run_local,
)
from statemachines.diagram import Diagram, Edge, Node
from statemachines.library import Detector, Pattern, Upsert, UpsertWithLateness
from statemachines.library.cli import main
from statemachines.library.diagrams import GraphvizMissing, render
from tests import strategies as sst
from tests.machines import Light, Tags

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))


def not_exit(key, symbol, time):
    return key != "exit"


class Door(FiniteMachine):
    closed = State(initial=True)
    opened = State()
    locked = State(final=True)

    open = closed.to(opened, on="open")
    close = opened.to(closed, on="close")
    lock = closed.to(locked, on="lock", guard=not_exit)
    unlock = locked.to(closed, on=("unlock", "force"))


class HandWrittenDoor(Machine):
    """The same door as a plain transition function."""

    moves = {("closed", "open"): "opened", ("opened", "close"): "closed", ("locked", "unlock"): "closed",
             ("locked", "force"): "closed"}

    def initial_values(self, key):
        return frozenset({"closed"})

    def transition(self, key, values, symbol, time):
        (state,) = values
        if state == "closed" and symbol == "lock" and key != "exit":
            return {"locked"}
        return {self.moves.get((state, symbol), state)}


@given(
    sst.events(st.sampled_from(["open", "close", "lock", "unlock", "force", "knock"]), key=st.sampled_from(["front", "exit"])),
)
def test_the_declared_door_runs_like_the_hand_written_one(events):
    assert run_local(Door(), events).updates == run_local(HandWrittenDoor(), events).updates


class SecureDoor(Door):
    """A subclass: force no longer unlocks; an alarm state is added."""

    alarm = State()
    unlock = Door.locked.to(Door.closed, on="unlock")
    tamper = Door.locked.to(alarm, on="force")


def test_a_subclass_inherits_overrides_and_draws_its_own_diagram():
    events = [("d", "lock", 1), ("d", "force", 2)]
    def entered_at_2(machine):
        return [u.data for u in run_local(machine, events).updates if u.time == 2 and u.diff > 0]

    assert entered_at_2(Door()) == [("d", "closed")]
    assert entered_at_2(SecureDoor()) == [("d", "alarm")]
    parent, child = diagram(Door()).to_mermaid(), diagram(SecureDoor()).to_mermaid()
    assert "unlock | force" in parent and "alarm" not in parent
    assert '"alarm"' in child and ": force" in child and "unlock | force" not in child


class Fork(FiniteMachine):
    """Non-deterministic: "split" leads to two states at once."""

    start = State(initial=True)
    left = State()
    right = State()
    go_left = start.to(left, on="split")
    go_right = start.to(right, on="split")


class StrictDoor(Door):
    strict = True


def test_non_deterministic_and_strict_machines():
    assert {u.data for u in run_local(Fork(), [("k", "split", 1)]).updates} == {("k", "left"), ("k", "right")}
    result = run_local(StrictDoor(), [("d", "open", 1), ("d", "lock", 2)])
    assert [(r.event.symbol, r.reason) for r in result.rejected] == [("lock", Reason.TRANSITION_FAILED)]
    assert "no transition from 'opened' on 'lock'" in result.rejected[0].detail


def test_wrong_declarations_fail_when_the_class_is_created():
    with pytest.raises(DefinitionError, match="exactly one State\\(initial=True\\); found none"):
        type("NoStart", (FiniteMachine,), {"a": State()})
    with pytest.raises(DefinitionError, match="found a, b"):
        type("TwoStarts", (FiniteMachine,), {"a": State(initial=True), "b": State(initial=True)})
    stray, home = State(), State(initial=True)
    with pytest.raises(DefinitionError, match="is not a state declared on"):
        type("Stray", (FiniteMachine,), {"home": home, "go": home.to(stray, on="x")})
    with pytest.raises(DefinitionError, match="island cannot be reached"):
        type("Island", (FiniteMachine,), {"home": State(initial=True), "island": State()})
    with pytest.raises(DefinitionError, match="needs a State"):
        State().to("closed", on="x")


# -- diagram text of every kind of machine --------------------------------------------


def fraud():
    return (
        Pattern.begin("fail").where(lambda s: s == "fail").times(3)
        .followed_by("ok").where(lambda s: s == "ok").within(10)
    )


KINDS = {
    "declared": (Door, ["closed", "opened", "locked", "lock [not_exit]", "unlock | force"]),
    "upsert": (Upsert, ["absent", "present (v)", "insert +v", "delete -v"]),
    "lateness": (lambda: UpsertWithLateness(5, value_time=itemgetter(0)), ["value below waterline", "overwrites", "- 5"]),
    "pattern": (lambda: Detector(fraud()), ["start", "fail #1", "fail #3", "ok #1", "relaxed", "within 10"]),
}


@pytest.mark.parametrize("kind", KINDS)
def test_dot_and_mermaid_name_every_state_and_label_deterministically(kind):
    build, words = KINDS[kind]
    drawn = diagram(build())
    dot, mermaid = drawn.to_dot(), drawn.to_mermaid()
    for node in drawn.nodes:
        assert f'"{node.id}" [label=' in dot
        assert f'state "{node.label}"'.replace(":", "#58;") in mermaid
    assert dot.count('" -> "') == len(drawn.edges) + sum(n.initial for n in drawn.nodes)
    assert mermaid.count(" --> ") == len(drawn.edges) + sum(n.initial for n in drawn.nodes) + sum(n.final for n in drawn.nodes)
    for word in words:
        assert word in dot or word in mermaid.replace("#58;", ":")
    assert diagram(build()).to_dot() == dot and diagram(build()).to_mermaid() == mermaid


def test_the_detector_diagram_shows_loops_and_accepting_states():
    pattern = Pattern.begin("a").where(lambda s: s == "a").one_or_more().next("b").where(lambda s: s == "b")
    drawn = diagram(Detector(pattern))
    labels = {(e.source, e.target): e.label for e in drawn.edges}
    assert labels[("p0_1", "p0_1")] == "relaxed: a"  # the loop
    assert labels[("p0_1", "p1_1")] == "strict: b"
    assert [n.label for n in drawn.nodes if n.final] == ["b #1"]


def test_the_detector_diagram_notes_each_gap():
    pattern = (
        Pattern.begin("a").followed_by("b").within(3, "previous_and_current")
        .not_followed_by("n").within(2, "previous_and_current").within(9)
    )
    notes = diagram(Detector(pattern)).notes
    assert "within 9: partial matches time out" in notes
    assert "b within 3 of the event before it" in notes
    assert "n: the match completes 2 after its last event" in notes


def test_the_rule_detector_diagram_holds_each_rule_versions_diagram_and_validity():
    from statemachines.library import RuleDetector

    def fraud_sql(fails):
        return Pattern.begin("fail").where("kind = 'fail'").times(fails).followed_by("ok").where("kind = 'ok'").within(fails * 2)

    rules = RuleDetector([("fraud", fraud_sql(2).to_json(), 0), ("fraud", fraud_sql(3).to_json(), 5), ("fraud", None, 9)])
    drawn = diagram(rules)
    alone = [diagram(Detector(fraud_sql(n))) for n in (2, 3)]
    for start, own in zip((0, 5), alone, strict=True):  # each version's notes, its window among them
        assert own.notes and all(f"fraud from {start}: {note}" in drawn.notes for note in own.notes)
    assert len(drawn.nodes) == sum(len(d.nodes) for d in alone)
    assert sorted(e.label for e in drawn.edges) == sorted(e.label for d in alone for e in d.edges)
    assert len({n.id for n in drawn.nodes}) == len(drawn.nodes)  # the versions' states stay apart
    assert any("fraud from 5 until 9 (retired)" in note for note in drawn.notes)
    assert "where kind = 'fail'" in drawn.to_dot()


def test_exploration_draws_reachable_value_sets_and_says_when_cut():
    lights = explore(Light(), ["toggle"])
    assert [n.label for n in lights.nodes] == ["{'off'}", "{'on'}"]
    assert [(e.source, e.target, e.label) for e in lights.edges] == [
        ("{'off'}", "{'on'}", "'toggle'"), ("{'on'}", "{'off'}", "'toggle'")
    ]
    assert explore(Light(), ["toggle"]).to_dot() == lights.to_dot()  # deterministic
    tags = explore(Tags(), [("add", t) for t in "abcdef"], max_states=10)
    assert len(tags.nodes) == 10 and any("cut at 10 states" in note for note in tags.notes)
    assert any("rejected" in note for note in explore(Tags(), ["not a pair"]).notes)
    with pytest.raises(InvalidArgument, match="declares no diagram; pass alphabet"):
        diagram(Tags())


# -- files, the dot binary, the command line ------------------------------------------

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None and not os.environ.get("CI"), reason="Graphviz's dot is not installed here"
)


@needs_dot
def test_real_svg_and_png_files(tmp_path):
    svg = render(Door(), tmp_path / "door.svg")
    assert "<svg" in svg.read_text() and "locked" in svg.read_text()
    png = render(Detector(fraud()), tmp_path / "fraud.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_dot
def test_the_title_and_each_note_are_lines_of_their_own_in_the_drawing(tmp_path):
    drawn = diagram(Detector(fraud()))
    assert drawn.notes
    svg = render(Detector(fraud()), tmp_path / "fraud.svg").read_text()
    lines = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert drawn.title in lines and all(note in lines for note in drawn.notes)
    assert not any("\\" in line for line in lines)


def test_a_missing_dot_binary_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on this PATH
    with pytest.raises(GraphvizMissing, match="apt-get install -y graphviz"):
        render(Upsert(), tmp_path / "upsert.svg")
    assert render(Upsert(), tmp_path / "upsert.mmd").read_text().startswith("---")  # text needs no binary


def test_the_diagram_command(tmp_path, capsys):
    assert main(["diagram", "upsert", str(tmp_path / "u.mmd")]) == 0
    assert (tmp_path / "u.mmd").read_text() == diagram(Upsert()).to_mermaid()
    assert main(["diagram", "upsert_with_lateness", str(tmp_path / "l.dot"), "--param", "lateness=5"]) == 0
    assert "waterline" in (tmp_path / "l.dot").read_text()
    assert main(["diagram", "tests.machines:Light", str(tmp_path / "light.mmd"), "--alphabet", "t"]) == 0
    assert (tmp_path / "light.mmd").read_text() == explore(Light(), ["t"]).to_mermaid()
    assert main(["diagram", "tests.test_diagrams:Door", str(tmp_path / "door.txt")]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    assert main(["diagram", "tests.machines:Tags", str(tmp_path / "t.mmd")]) == 2
    assert "pass alphabet" in capsys.readouterr().err


def test_the_readme_shows_the_example_machines_diagram():
    from order_lifecycle import OrderLifecycle

    readme = (EXAMPLES.parent / "README.md").read_text()
    assert "```mermaid\n" + diagram(OrderLifecycle()).to_mermaid() + "```" in readme


def test_notebooks_see_mermaid():
    assert Door().diagram()._repr_markdown_().startswith("```mermaid\n---\ntitle: Door")


ENTITY_CODE = r"#(\d+|[a-z]+);"


def mermaid_shown(text):
    """A Mermaid label as Mermaid shows it: its entity codes (``#59;``, ``#lt;``) decoded."""
    return re.sub(ENTITY_CODE, lambda m: chr(int(m[1])) if m[1].isdigit() else html.unescape(f"&{m[1]};"), text)


@given(st.text(alphabet=st.sampled_from(list("ab <>&;:\"{}#\n=1")), max_size=20))
def test_a_mermaid_label_holds_no_character_mermaid_or_html_would_read_and_shows_its_text(label):
    """Conditions such as ``amount<limit AND n>1`` are labels: Mermaid renders labels as
    HTML, where ``<limit AND n>`` is a tag, and its own syntax reads ``:`` ``;`` ``"``.
    The title is YAML front matter: a quoted string (JSON's, which YAML reads)."""
    drawn = Diagram(label, (Node("a", label, initial=True), Node("b", "b")), (Edge("a", "b", label),))
    lines = drawn.to_mermaid().splitlines()
    title = lines[1][len("title: "):]
    assert lines[1].startswith("title: ") and (title if re.fullmatch(r"[\w ]*", title) else json.loads(title)) == label.replace("\n", " ")
    state = next(line for line in lines if line.endswith(" as s0"))
    edge = next(line for line in lines if line.startswith("  s0 --> s1"))
    for shown in (state[len('  state "'):-len('" as s0')], edge[len("  s0 --> s1 : "):] if label else ""):
        assert not set(re.sub(ENTITY_CODE, "", shown)) & set('<>&;:"{}\n')
        assert mermaid_shown(shown) == label.replace("\n", " ")
