"""Drawing machines to files: DOT and Mermaid text, or SVG / PNG / PDF through Graphviz.

    render(Upsert(), "upsert.svg")                  # needs Graphviz's ``dot`` binary
    render(Door(), "door.mmd")                      # Mermaid text: no binary needed
    render(MyMachine(), "mine.png", alphabet=[...]) # explored over a few symbols

The ``graphviz`` Python package is imported only when an image is asked for.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import attrs

from statemachines.diagram import Diagram, diagram
from statemachines.errors import InvalidArgument, StateMachinesError

__all__ = ["Drawing", "GraphvizMissing", "IMAGE_FORMATS", "TEXT_FORMATS", "render", "show"]

TEXT_FORMATS = ("dot", "gv", "mmd", "mermaid")
IMAGE_FORMATS = ("svg", "png", "pdf")
INSTALL_HINT = (
    "install Graphviz (Debian/Ubuntu: apt-get install -y graphviz; macOS: brew install "
    "graphviz; conda: conda install graphviz), or write .dot or .mmd text instead"
)


class GraphvizMissing(StateMachinesError, RuntimeError):
    """Rendering an image needs Graphviz, which is not installed."""


def _diagram_of(machine_or_diagram: Any, alphabet: Any) -> Diagram:
    if isinstance(machine_or_diagram, Diagram):
        return machine_or_diagram
    return diagram(machine_or_diagram, alphabet=alphabet)


def render(machine_or_diagram: Any, path: str | os.PathLike[str], *, alphabet: Any = None) -> pathlib.Path:
    """Write the diagram to ``path``; its suffix picks the format.

    Raises:
        InvalidArgument: an unknown suffix, or a machine without a diagram of its own
            and no ``alphabet``.
        GraphvizMissing: an image was asked for and Graphviz is not installed.
    """
    path = pathlib.Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in TEXT_FORMATS + IMAGE_FORMATS:
        raise InvalidArgument(
            f"cannot tell the format of {str(path)!r}; use one of "
            f"{', '.join('.' + f for f in TEXT_FORMATS + IMAGE_FORMATS)}"
        )
    drawn = _diagram_of(machine_or_diagram, alphabet)
    if fmt in TEXT_FORMATS:
        path.write_text(drawn.to_mermaid() if fmt in ("mmd", "mermaid") else drawn.to_dot())
        return path
    path.write_bytes(_pipe(drawn, fmt))
    return path


def _pipe(drawn: Diagram, fmt: str) -> bytes:
    try:
        import graphviz
    except ImportError as exc:
        raise GraphvizMissing(
            f"the graphviz Python package is missing ({exc}); pip install graphviz, and {INSTALL_HINT}"
        ) from None
    try:
        return graphviz.Source(drawn.to_dot()).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise GraphvizMissing(
            f"cannot render {fmt.upper()}: Graphviz's dot program was not found; {INSTALL_HINT}"
        ) from None


@attrs.frozen
class Drawing:
    """A diagram for a notebook: SVG where Graphviz is installed, Mermaid otherwise.

    Displaying it never raises: without the ``graphviz`` package or the ``dot``
    program the SVG is left out and the Mermaid text (and a text line) remain.
    """

    diagram: Diagram

    def svg(self) -> str | None:
        """The diagram as SVG text, or ``None`` if Graphviz cannot draw it here."""
        try:
            return _pipe(self.diagram, "svg").decode()
        except Exception:  # noqa: BLE001 - any failure to draw means "no SVG"
            return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle = self.diagram._repr_mimebundle_()
        svg = self.svg()
        if svg is not None:
            bundle["image/svg+xml"] = svg
        return bundle


def show(machine_or_diagram: Any, *, alphabet: Any = None) -> Drawing:
    """The diagram as a :class:`Drawing`: SVG in a notebook where Graphviz is installed,
    Mermaid otherwise.

    Raises:
        InvalidArgument: a machine without a diagram of its own and no ``alphabet``.
    """
    return Drawing(_diagram_of(machine_or_diagram, alphabet))
