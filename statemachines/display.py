"""How runs, runtimes and arrangements show themselves: one-line summaries and HTML.

Notebooks call ``_repr_html_`` to display an object; the methods here build that HTML
from plain rows (standard library only) and never raise: a display that fails shows
what went wrong instead of a traceback.

>>> print(pending_note(12, 1_000_042))
12 events wait for time 1,000,042
>>> print(html_table(["key", "value"], [("a", 1), ("b", None)], total=5))
<table>
<thead><tr><th>key</th><th>value</th></tr></thead>
<tbody>
<tr><td>a</td><td>1</td></tr>
<tr><td>b</td><td>None</td></tr>
</tbody>
</table>
<p>first 2 of 5 rows</p>
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["SAMPLE_ROWS", "counts_line", "html_table", "never_raises", "pending_note", "show_time"]

SAMPLE_ROWS = 10  # rows of a table shown in a notebook


def show_time(time: Any) -> str:
    """A time for people: integers with thousands separators, others as ``str``."""
    if isinstance(time, int) and not isinstance(time, bool):
        return f"{time:,}"
    return str(time)


def counts_line(updates: int, reasons: Mapping[str, int]) -> str:
    """Updates out and rejected events by reason, e.g. for a run's summary.

    >>> counts_line(5, {"null_key": 1, "bad_time": 1})
    '5 updates out, 2 rejected (1 bad_time, 1 null_key)'
    """
    noun = "update" if updates == 1 else "updates"
    detail = ", ".join(f"{n:,} {reason}" for reason, n in sorted(reasons.items()))
    return f"{updates:,} {noun} out, {sum(reasons.values()):,} rejected" + (f" ({detail})" if detail else "")


def pending_note(count: int, earliest: Any) -> str:
    """What still waits for the frontier, e.g. ``12 events wait for time 1,000,042``.

    ``earliest`` is the earliest waiting time (``None``: not known).
    """
    if not count:
        return "no events wait"
    noun = "event waits" if count == 1 else "events wait"
    return f"{count:,} {noun}" + ("" if earliest is None else f" for time {show_time(earliest)}")


def html_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, total: int | None = None
) -> str:
    """An HTML table of ``rows`` (already cut to what should show) under ``header``.

    An empty ``header`` gives a table of facts, without a heading row.

    With ``total`` above the number of rows given, a line says how many were left out.
    """
    rows = list(rows)
    lines = ["<table>"]
    if header:
        lines.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead>")
    lines.append("<tbody>")
    for row in rows:
        lines.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>")
    lines += ["</tbody>", "</table>"]
    if total is not None and total > len(rows):
        lines.append(f"<p>first {len(rows):,} of {total:,} rows</p>")
    return "\n".join(lines)


def never_raises(method: Callable[..., str]) -> Callable[..., str]:
    """Wrap a display method so that a failure shows as text instead of raising."""

    @functools.wraps(method)
    def shown(self: Any, *args: Any, **kwargs: Any) -> str:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a display must not raise
            return (
                f"<pre>{html.escape(type(self).__name__)}: cannot display "
                f"({html.escape(type(exc).__name__)}: {html.escape(str(exc))})</pre>"
            )

    return shown
