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

from collections import deque
from collections.abc import Iterable
from typing import Any

import attrs

from statemachines.core import apply_transition
from statemachines.errors import InvalidArgument
from statemachines.events import Event, Rejected
from statemachines.machine import Machine
from statemachines.updates import sorted_any

__all__ = ["Diagram", "Edge", "Node", "diagram", "explore"]


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
        label = "\\n".join([self.title, *self.notes])
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
        lines = ["---", f"title: {_mermaid_text(self.title)}", "---", "stateDiagram-v2", "  direction LR"]
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


def _mermaid_text(text: str) -> str:
    # Mermaid labels cannot hold ':' '"' ';' '{' '}' or new lines literally
    for bad, good in ((";", "#59;"), (":", "#58;"), ('"', "#quot;"), ("{", "#123;"), ("}", "#125;"), ("\n", " ")):
        text = text.replace(bad, good)
    return text


def diagram(machine: Machine, *, alphabet: Iterable[Any] | None = None, max_states: int = 40) -> Diagram:
    """The diagram of ``machine``: its own ``diagram()`` if it has one, else an exploration.

    Raises:
        InvalidArgument: the machine has no diagram of its own and no ``alphabet``
            was given to explore it with.
    """
    own = getattr(machine, "diagram", None)
    if own is not None and alphabet is None:
        return own()
    if alphabet is None:
        raise InvalidArgument(
            f"{machine.spec.name} declares no diagram; pass alphabet=[...] (a few symbols) "
            f"to draw the value sets reachable with them"
        )
    return explore(machine, alphabet, max_states=max_states)


def explore(
    machine: Machine, alphabet: Iterable[Any], *, key: Any = "key", max_states: int = 40
) -> Diagram:
    """Breadth-first from the initial values of ``key`` over ``alphabet``.

    Each node is a set of values the key can hold; each edge a symbol that moves it.
    Symbols the machine rejects are listed in a note, not drawn. At most
    ``max_states`` nodes are drawn; if more were reachable, a note says so.
    """
    symbols = list(alphabet)
    if not symbols:
        raise InvalidArgument("explore needs at least one symbol")
    start = frozenset(machine.initial_values(key))  # an empty set reads as these
    names: dict[frozenset[Any], str] = {start: _set_label(start)}
    edges: list[Edge] = []
    rejected: set[str] = set()
    queue = deque([start])
    cut = False
    step = 0
    while queue:
        values = queue.popleft()
        for symbol in symbols:
            step += 1
            outcome = apply_transition(machine, key, values, Event(key, symbol, step))
            if isinstance(outcome, Rejected):
                rejected.add(repr(symbol))
                continue
            outcome = outcome or start
            if outcome not in names:
                if len(names) >= max_states:
                    cut = True
                    continue
                names[outcome] = _set_label(outcome)
                queue.append(outcome)
            edges.append(Edge(names[values], names[outcome], repr(symbol)))
    notes = [f"explored over {', '.join(repr(s) for s in symbols)}"]
    if rejected:
        notes.append(f"rejected: {', '.join(sorted(rejected))}")
    if cut:
        notes.append(f"cut at {max_states} states: more are reachable")
    nodes = tuple(Node(label, label, initial=values == start) for values, label in names.items())
    return Diagram(machine.spec.name, nodes, _merge_edges(edges), tuple(notes))


def _set_label(values: frozenset[Any]) -> str:
    return "{" + ", ".join(repr(v) for v in sorted_any(values)) + "}"


def _merge_edges(edges: list[Edge]) -> tuple[Edge, ...]:
    """One edge per (source, target), its labels joined, in first-seen order."""
    merged: dict[tuple[str, str], list[str]] = {}
    for edge in edges:
        merged.setdefault((edge.source, edge.target), []).append(edge.label)
    return tuple(Edge(s, t, ", ".join(labels)) for (s, t), labels in merged.items())
