"""What a drawing explores is what the runtimes run.

For every state an exploration reaches and every symbol of its alphabet, replaying
the symbols that led there, then the symbol, through ``run_local`` gives the move
the exploration recorded: the same values, findings and refusals.
"""

from __future__ import annotations

import pytest

from statemachines import Rejected, collection_at, run_local
from statemachines.diagram import exploration, explore
from statemachines.library import Detector, Pattern, Upsert, UpsertWithLateness
from tests.machines import Light, Tags


def starts_with(prefix):
    return lambda symbol: symbol[0] == prefix


MACHINES = {
    "upsert": (Upsert(), ["x", "y", None]),
    "value lateness": (UpsertWithLateness(2, value_time=lambda v: v[0]), [(1, "a"), (3, "b"), (6, "c"), None]),
    "key lateness": (UpsertWithLateness(1, key_time=len, value_time=lambda v: v[0]), [(1, "a"), (4, "b"), None]),
    "detector": (
        Detector(Pattern.begin("a").where(starts_with("a")).followed_by("b").where(starts_with("b")).one_or_more()),
        ["a1", "b1", "c1"],
    ),
    "strict detector": (
        Detector(Pattern.begin("a").where(starts_with("a")).next("b").where(starts_with("b"))),
        ["a1", "b1", "c1"],
    ),
    "tags": (Tags(), [("add", "x"), ("add", "y"), ("del", "x")]),
    "initial values": (Light(), ["toggle", "noise"]),
}


def held(machine, updates, time):
    """The key's values after ``time``, as its transition sees them."""
    values = {v for (_, v) in collection_at(updates, time) if not machine.is_finding(v)}
    return frozenset(values) or machine.initial_values("key")


@pytest.mark.parametrize("name", MACHINES)
def test_every_explored_move_is_what_run_local_does(name):
    machine, alphabet = MACHINES[name]
    found = exploration(machine, alphabet, max_states=25)
    assert len(found.moves) > len(alphabet)  # the walk went past the first state
    checked = 0
    for (state, symbol), move in found.moves.items():
        path = (*found.paths[state], symbol)
        now = len(path)
        result = run_local(machine, [("key", s, t) for t, s in enumerate(path, 1)])
        assert all(r.event[2] == now for r in result.rejected)  # the path itself was accepted
        if isinstance(move, Rejected):
            assert [(r.event[1], r.reason) for r in result.rejected] == [(symbol, move.reason)]
            assert [u for u in result.updates if u[1] == now] == []
            continue
        assert result.rejected == []
        (before, _), ((after, _), findings) = state, move
        assert held(machine, result.updates, now - 1) == before
        assert held(machine, result.updates, now) == after
        reported = [u[0][1] for u in result.updates if u[1] == now and machine.is_finding(u[0][1])]
        assert sorted(reported, key=repr) == sorted(findings, key=repr)
        checked += 1
    assert checked


def test_explorations_see_refusals_findings_and_waterlines():
    lateness, alphabet = MACHINES["value lateness"]
    drawn = explore(lateness, alphabet)
    assert any("rejected" in note for note in drawn.notes)  # (1, "a") behind (6, "c") is refused
    assert any("high" in node.label for node in drawn.nodes)
    detector, alphabet = MACHINES["detector"]
    assert any("found" in edge.label for edge in explore(detector, alphabet).edges)
