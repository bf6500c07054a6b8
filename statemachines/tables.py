"""Update tables: the way docs and tests write streams of updates.

A table has a header line and one row per update, cells separated by ``|``::

    key   | value    | time | diff
    frank | mcsherry | 0    | +1
    frank | mcsherry | 1    | -1

Columns ``key`` and ``value`` form ``data = (key, value)``; a table with a single
``data`` column uses that cell as the data. Cells that read as integers become
``int``, ``None`` becomes ``None``, a quoted cell (``'7'``) stays a string, and
anything else is a string.

>>> ups = parse_table('''
...     key   | value    | time | diff
...     frank | mcsherry | 0    | +1
... ''')
>>> ups
[Update(data=('frank', 'mcsherry'), time=0, diff=1)]
>>> print(format_table(ups))
key   | value    | time | diff
frank | mcsherry | 0    | +1
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from statemachines.errors import InvalidArgument
from statemachines.updates import Update

__all__ = ["format_table", "parse_table"]

_INT = re.compile(r"^[+-]?\d+$")


def _parse_cell(cell: str) -> Any:
    cell = cell.strip()
    if cell == "None":
        return None
    if _INT.match(cell):
        return int(cell)
    if len(cell) >= 2 and cell[0] == cell[-1] and cell[0] in "'\"":
        return cell[1:-1]
    return cell


def parse_table(text: str) -> list[Update]:
    """Parse an update table into a list of :class:`Update`.

    Raises:
        InvalidArgument: the header lacks ``time`` or ``diff``, has neither
            ``key``/``value`` nor ``data``, or a row has the wrong number of cells.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return []
    header = [name.strip() for name in lines[0].split("|")]
    missing = {"time", "diff"} - set(header)
    keyed = "key" in header and "value" in header
    if missing or not (keyed or "data" in header):
        raise InvalidArgument(
            f"an update table needs columns key | value | time | diff (or data | time | "
            f"diff); got {' | '.join(header)!r}"
        )
    updates = []
    for line in lines[1:]:
        cells = [_parse_cell(c) for c in line.split("|")]
        if len(cells) != len(header):
            raise InvalidArgument(
                f"row {line!r} has {len(cells)} cells; the header has {len(header)}"
            )
        row = dict(zip(header, cells, strict=True))
        data = (row["key"], row["value"]) if keyed else row["data"]
        updates.append(Update(data, row["time"], int(row["diff"])))
    return updates


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def format_table(updates: Iterable[tuple[Any, Any, int]]) -> str:
    """Render updates as an aligned update table (the inverse of :func:`parse_table`).

    Keyed data (``(key, value)`` pairs) get ``key`` and ``value`` columns; other
    data get a single ``data`` column. Diffs are written with their sign.
    """
    updates = list(updates)
    keyed = all(isinstance(d, tuple) and len(d) == 2 for d, _, _ in updates)
    header = ["key", "value", "time", "diff"] if keyed else ["data", "time", "diff"]
    rows = [header]
    for data, time, diff in updates:
        lead = [_show(data[0]), _show(data[1])] if keyed else [_show(data)]
        rows.append([*lead, _show(time), f"{diff:+d}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
