"""State diagrams: a plain model of a machine's states and transitions, and its text.

Extract a :class:`Diagram` with :func:`diagram` (a machine's own ``diagram()``
method when it has one, else a breadth-first exploration over a small alphabet),
then write it as Graphviz DOT or Mermaid text. Both are deterministic: the same
machine gives the same text, so diagrams can be committed and diffed. Rendering DOT
to SVG, PNG or PDF needs Graphviz and lives outside the core
(``statemachines.library.diagrams.render``); Mermaid renders on GitHub as it is.

    machine            how it is drawn
    FiniteMachine      its declared states and transitions (guards in the labels)
    Upsert, ...        the machine's own diagram() (absent / present ...)
    Detector           its compiled NFA: positions, takes, loops, the window
    anything else      explore(machine, alphabet): the value sets reachable from
                       the initial one, up to a bound (the diagram says if it was cut)
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable
from typing import Any

import attrs

from statemachines.core import apply_transition
from statemachines.errors import InvalidArgument
from statemachines.events import Event, Rejected
from statemachines.machine import Machine
from statemachines.updates import sorted_any
from statemachines.waterline import Waterline, highest

__all__ = ["Diagram", "Edge", "Exploration", "Node", "diagram", "exploration", "explore"]


@attrs.frozen
class Node:
    """A state. ``initial`` gets an arrow from a start point, ``final`` a double border."""

    id: str
    label: str
    initial: bool = False
    final: bool = False


@attrs.frozen
class Edge:
    """A labelled transition between two states."""

    source: str
    target: str
    label: str = ""


@attrs.frozen
class Diagram:
    """A machine's states and transitions, ready to be written as DOT or Mermaid."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    notes: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        ids = {n.id for n in self.nodes}
        for edge in self.edges:
            for end in (edge.source, edge.target):
                if end not in ids:
                    raise InvalidArgument(f"edge {edge} refers to {end!r}, which is not a node")

    def to_dot(self) -> str:
        """Graphviz DOT source."""
        lines = [f"digraph {_dot_id(self.title)} {{", "  rankdir=LR;", '  node [shape=ellipse, fontname="Helvetica"];']
        lines.append('  edge [fontname="Helvetica", fontsize=10];')
        label = "\n".join([self.title, *self.notes])  # a line each (_dot_text escapes new lines for DOT)
        lines.append(f'  labelloc="t"; label="{_dot_text(label)}";')
        for node in self.nodes:
            shape = ', peripheries=2' if node.final else ""
            lines.append(f'  {_dot_id(node.id)} [label="{_dot_text(node.label)}"{shape}];')
            if node.initial:
                lines.append(f"  {_dot_id('__start_' + node.id)} [shape=point, label=\"\"];")
                lines.append(f"  {_dot_id('__start_' + node.id)} -> {_dot_id(node.id)};")
        for edge in self.edges:
            lines.append(f'  {_dot_id(edge.source)} -> {_dot_id(edge.target)} [label="{_dot_text(edge.label)}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_mermaid(self) -> str:
        """Mermaid ``stateDiagram-v2`` source (renders in GitHub Markdown)."""
        ids = {node.id: f"s{i}" for i, node in enumerate(self.nodes)}
        lines = ["---", f"title: {_yaml_text(self.title)}", "---", "stateDiagram-v2", "  direction LR"]
        for node in self.nodes:
            lines.append(f"  state \"{_mermaid_text(node.label)}\" as {ids[node.id]}")
        for node in self.nodes:
            if node.initial:
                lines.append(f"  [*] --> {ids[node.id]}")
        for edge in self.edges:
            label = f" : {_mermaid_text(edge.label)}" if edge.label else ""
            lines.append(f"  {ids[edge.source]} --> {ids[edge.target]}{label}")
        for node in self.nodes:
            if node.final:
                lines.append(f"  {ids[node.id]} --> [*]")
        if self.notes and self.nodes:
            lines.append(f"  note right of {ids[self.nodes[0].id]}")
            lines.extend(f"    {_mermaid_text(note)}" for note in self.notes)
            lines.append("  end note")
        return "\n".join(lines) + "\n"

    def _repr_markdown_(self) -> str:  # Jupyter: Mermaid renders in Markdown cells' output
        return f"```mermaid\n{self.to_mermaid()}```"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """What a notebook shows: Mermaid (rendered by JupyterLab 4.1+), and a text line.

        ``statemachines.library.diagrams.show()`` adds an SVG drawn by Graphviz where it is installed.
        """
        return {
            "text/markdown": self._repr_markdown_(),
            "text/plain": f"Diagram {self.title!r}: {len(self.nodes)} states, {len(self.edges)} transitions",
        }


def _dot_id(text: str) -> str:
    return '"' + _dot_text(text) + '"'


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _yaml_text(text: str) -> str:
    """A title for Mermaid's YAML front matter (shown as plain text): as it is if YAML
    reads it so, else a quoted string (JSON's, which YAML reads)."""
    text = text.replace("\n", " ")
    plain = re.fullmatch(r"[A-Za-z][\w ().,-]*", text) and not text.endswith(" ")
    if plain and text.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n"):
        return text
    return json.dumps(text, ensure_ascii=False)


def _mermaid_text(text: str) -> str:
    # Mermaid labels cannot hold ':' '"' ';' '{' '}' or new lines literally, and it
    # renders them as HTML: '<' '>' '&' would be read as tags and entities
    # ("amount<limit AND n>1" lost its middle); each becomes Mermaid's entity code
    for bad, good in (
        (";", "#59;"), (":", "#58;"), ('"', "#quot;"), ("{", "#123;"), ("}", "#125;"), ("\n", " "),
        ("<", "#lt;"), (">", "#gt;"), ("&", "#amp;"),
    ):
        text = text.replace(bad, good)
    return text


def diagram(machine: Machine, *, alphabet: Iterable[Any] | None = None, max_states: int = 40) -> Diagram:
    """The diagram of ``machine``: its own ``diagram()`` if it has one, else an exploration.

    Raises:
        InvalidArgument: the machine has no diagram of its own and no ``alphabet``
            was given to explore it with.
    """
    if machine.spec.has_diagram and alphabet is None:
        return machine.diagram()  # type: ignore[return-value]
    if alphabet is None:
        raise InvalidArgument(
            f"{machine.spec.name} declares no diagram; pass alphabet=[...] (a few symbols) "
            f"to draw the value sets reachable with them"
        )
    return explore(machine, alphabet, max_states=max_states)


@attrs.frozen
class Exploration:
    """What :func:`exploration` found: the states a key reaches over an alphabet.

    A state is ``(values, high)``: the key's values and, for a machine with
    waterlines, the high mark of its inserts so far (else ``None``). Each state was
    first reached by the symbols in ``paths[state]``, the ``i``-th at time ``i``
    (from 1); ``moves[state, symbol]`` is the symbol's effect at the next time:
    ``(next state, findings)``, or its :class:`~statemachines.events.Rejected`.
    """

    symbols: tuple[Any, ...]
    start: tuple[frozenset[Any], Any]
    paths: dict[tuple[frozenset[Any], Any], tuple[Any, ...]]
    moves: dict[tuple[tuple[frozenset[Any], Any], Any], Any]
    cut: bool


def exploration(
    machine: Machine, alphabet: Iterable[Any], *, key: Any = "key", max_states: int = 40
) -> Exploration:
    """Breadth-first from the initial values of ``key`` over ``alphabet``, through the
    same step the runtimes take (:func:`~statemachines.core.apply_transition`): the
    value sets, findings and refusals :func:`~statemachines.local.run_local` gives for
    one key fed those symbols at times 1, 2, ...
    """
    symbols = list(alphabet)
    if not symbols:
        raise InvalidArgument("explore needs at least one symbol")
    waterlines = machine.spec.has_waterline
    initial = frozenset(machine.initial_values(key))  # an empty set reads as these
    start: tuple[frozenset[Any], Any] = (initial, None)
    paths: dict[tuple[frozenset[Any], Any], tuple[Any, ...]] = {start: ()}
    moves: dict[tuple[tuple[frozenset[Any], Any], Any], Any] = {}
    queue = deque([start])
    cut = False
    while queue:
        state = queue.popleft()
        values, high = state
        path = paths[state]
        bound = machine.with_waterline(Waterline(high)) if waterlines else machine
        for symbol in symbols:
            outcome = apply_transition(bound, key, values, Event(key, symbol, len(path) + 1))
            if isinstance(outcome, Rejected):
                moves[state, symbol] = outcome
                continue
            after, found = outcome
            new_high = high
            if waterlines:
                for value in after - values:
                    new_high = highest(new_high, machine.insert_marks(key, value))
            target = (after or initial, new_high)
            if target not in paths:
                if len(paths) >= max_states:
                    cut = True
                    continue
                paths[target] = (*path, symbol)
                queue.append(target)
            moves[state, symbol] = (target, found)
    return Exploration(tuple(symbols), start, paths, moves, cut)


def explore(
    machine: Machine, alphabet: Iterable[Any], *, key: Any = "key", max_states: int = 40
) -> Diagram:
    """The :func:`exploration` of ``machine`` drawn: each node a set of values the key
    can hold (with the waterline's high mark, for a machine with waterlines), each
    edge the symbols that move it (``/ n found`` when they report findings). Symbols
    the machine rejects are listed in a note, not drawn. At most ``max_states``
    nodes are drawn; if more were reachable, a note says so.
    """
    found = exploration(machine, alphabet, key=key, max_states=max_states)
    names = {state: _state_label(state) for state in found.paths}
    edges: list[Edge] = []
    rejected: set[str] = set()
    for (state, symbol), move in found.moves.items():
        if isinstance(move, Rejected):
            rejected.add(repr(symbol))
            continue
        target, findings = move
        label = repr(symbol) + (f" / {len(findings)} found" if findings else "")
        edges.append(Edge(names[state], names[target], label))
    notes = [f"explored over {', '.join(repr(s) for s in found.symbols)}"]
    if rejected:
        notes.append(f"rejected: {', '.join(sorted(rejected))}")
    if found.cut:
        notes.append(f"cut at {max_states} states: more are reachable")
    nodes = tuple(Node(label, label, initial=state == found.start) for state, label in names.items())
    return Diagram(machine.spec.name, nodes, _merge_edges(edges), tuple(notes))


def _state_label(state: tuple[frozenset[Any], Any]) -> str:
    values, high = state
    label = _set_label(values)
    return label if high is None else f"{label} high {', '.join(repr(t) for t in high if t is not None)}"


def _set_label(values: frozenset[Any]) -> str:
    return "{" + ", ".join(repr(v) for v in sorted_any(values)) + "}"


def _merge_edges(edges: list[Edge]) -> tuple[Edge, ...]:
    """One edge per (source, target), its labels joined, in first-seen order."""
    merged: dict[tuple[str, str], list[str]] = {}
    for edge in edges:
        merged.setdefault((edge.source, edge.target), []).append(edge.label)
    return tuple(Edge(s, t, ", ".join(labels)) for (s, t), labels in merged.items())
