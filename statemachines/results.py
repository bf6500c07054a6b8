"""What a local run gives back: its result, and the progress it reports on the way.

A :class:`RunResult` prints as one line and displays as tables in a notebook::

    >>> from statemachines import run_local
    >>> from statemachines.library import Upsert
    >>> run_local(Upsert(), [("a", "x", 1), (None, "y", 2)])
    <RunResult: 1 update out, 1 rejected (1 null_key); the input is complete>
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

import attrs

from statemachines.display import (
    SAMPLE_ROWS,
    counts_line,
    html_table,
    never_raises,
    pending_note,
    show_time,
)
from statemachines.events import Event, Rejected
from statemachines.updates import Update

__all__ = ["RunProgress", "RunResult", "event_cells"]


@attrs.frozen
class RunProgress:
    """How far a local run has come: what a ``progress`` callback is given as it goes.

    Attributes:
        events_in: events fed so far (by this runtime object).
        waiting: events buffered, not yet final (superseded same-time events of a
            reducing machine are not counted: they will never apply).
        updates_out: updates produced so far.
        rejected: events refused so far.
    """

    events_in: int
    waiting: int
    updates_out: int
    rejected: int

    @property
    def events_done(self) -> int:
        """Events fed and no longer waiting: applied, superseded or rejected."""
        return self.events_in - self.waiting


def event_cells(event: Any) -> tuple[Any, Any, Any, Any]:
    """An event as table cells; input too malformed to be an event shows whole."""
    if isinstance(event, Event):
        return event.key, event.symbol, event.time, event.order
    return repr(event), "", "", ""


@attrs.frozen(repr=False)
class RunResult:
    """What a run (or one frontier step of it) produced.

    Attributes:
        updates: consolidated updates ``((key, value), time, diff)``, sorted by
            ``(time, data)``.
        rejected: events that were not applied, each with a reason (in no
            particular order).
        frontier: the frontier after the step (``None`` once the input is complete).
        pending: events still buffered because their time is not final yet.
    """

    updates: list[Update]
    rejected: list[Rejected]
    frontier: Any = None
    pending: list[Event] = attrs.field(factory=list)

    def summary(self) -> str:
        """One line: updates out, rejected by reason, and what still waits.

        >>> from statemachines import run_local
        >>> from statemachines.library import Upsert
        >>> print(run_local(Upsert(), [("a", 1, 0), (None, 2, 0), ("a", 3, 7)], frontier=5).summary())
        1 update out, 1 rejected (1 null_key); 1 event waits for time 7 (frontier 5)
        """
        line = counts_line(len(self.updates), Counter(refused.reason.value for refused in self.rejected))
        if self.frontier is None and not self.pending:
            return line + "; the input is complete"
        earliest = min((e.time for e in self.pending), default=None)
        return line + f"; {pending_note(len(self.pending), earliest)} (frontier {show_time(self.frontier)})"

    def __repr__(self) -> str:
        return f"<RunResult: {self.summary()}>"

    @never_raises
    def _repr_html_(self) -> str:
        parts = [f"<p><b>RunResult</b>: {html.escape(self.summary())}</p>"]
        shown = self.updates[:SAMPLE_ROWS]
        rows = [(u.data[0], u.data[1], u.time, f"{u.diff:+d}") for u in shown]
        parts.append(html_table(["key", "value", "time", "diff"], rows, total=len(self.updates)))
        if self.rejected:
            refused = [(*event_cells(r.event), r.reason.value, r.detail) for r in self.rejected[:SAMPLE_ROWS]]
            header = ["key", "symbol", "time", "order", "reason", "detail"]
            parts.append("<p>Rejected</p>" + html_table(header, refused, total=len(self.rejected)))
        if self.pending:
            waiting = [event_cells(e) for e in self.pending[:SAMPLE_ROWS]]
            header = ["key", "symbol", "time", "order"]
            parts.append("<p>Pending</p>" + html_table(header, waiting, total=len(self.pending)))
        return "\n".join(parts)
