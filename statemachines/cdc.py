"""Change data capture that survives duplication, reordering and re-batching.

Two kinds of message, each a statement that is true of the final history, so that
writing one twice, or in any order, or cut differently, says nothing new:

- :class:`Updates`: some ``(data, time, diff)`` triples; each ``diff`` is the final,
  accumulated diff of its ``(data, time)``.
- :class:`Progress`: for the times in ``[lower, upper)``, how many distinct updates
  each time has (``counts``; a time not listed has none). ``upper=None`` means the
  history is complete from ``lower`` on.

A :class:`CdcReader` accepts messages in any order, any number of times, cut into
any batches (by one writer or several), and releases each time, once, as soon as it
is known to be complete: its count is known, that many distinct updates arrived, and
every earlier time is released. What it keeps is only what is still unresolved::

    messages (any order)                    released
    Updates([(a, 1, +1)])                   -
    Progress(0, 3, [(1, 2)])                -            time 1 needs 2 updates
    Updates([(a, 1, +1), (b, 1, +1)])       time 1: (a, 1, +1), (b, 1, +1); frontier 3
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import Any

import attrs
from sortedcontainers import SortedDict

from statemachines.errors import InvalidArgument, StateMachinesError
from statemachines.textfiles import open_text
from statemachines.times import decode_time, encode_time, is_finite_time, time_kind
from statemachines.updates import (
    Update,
    canonical,
    consolidate,
    hashable,
    is_diff,
    sort_updates,
)

__all__ = [
    "CdcConflict",
    "CdcReader",
    "CdcWriter",
    "Progress",
    "check_message",
    "Updates",
    "messages_from_arrangement",
    "read_into",
    "read_jsonl",
    "read_parquet",
    "write_jsonl",
    "write_parquet",
]


class CdcConflict(StateMachinesError, ValueError):
    """Two messages contradict each other about the history."""


@attrs.frozen
class Updates:
    """Final updates: for each ``(data, time)`` the accumulated diff."""

    updates: tuple[Update, ...]


@attrs.frozen
class Progress:
    """The number of distinct updates at each time of ``[lower, upper)`` that has any."""

    lower: Any
    upper: Any
    counts: tuple[tuple[Any, int], ...] = ()


def check_message(message: Any, kind: str | None = None) -> str | None:
    """Check that ``message`` is a well-formed CDC message whose times are of ``kind``
    (any kind if ``None``), and return the kind of its times (``kind`` if it has none).

    ==========================================  ==========================================
    message                                     is
    ==========================================  ==========================================
    ``Updates([(a, 1, 2)])``                    well formed
    ``Updates([(a, 1, 0)])``, ``(a, 1, 1.5)``   refused: a diff is a non-zero integer
    ``Updates([(a, nan, 1)])``, ``inf``         refused: a time is a finite time
    ``Progress(0, 3, [(1, 2)])``                well formed
    ``Progress(3, 0)``, ``[(1, 0)]``            refused: lower <= upper, counts >= 1
    ==========================================  ==========================================

    Raises:
        InvalidArgument: naming the message and what is wrong with it.
    """
    if isinstance(message, Updates):
        for update in message.updates:
            try:
                _, time, diff = update
            except (TypeError, ValueError):
                raise InvalidArgument(f"an update is a (data, time, diff) triple, not {update!r}") from None
            if type(diff) is not int or not diff:  # an int other than 0, most diffs, passes at once
                _check_diff(update, diff)
            if type(time) is not int or kind != "number":  # as does an int time among number times
                kind = _time_of_kind(time, kind, message)
    elif isinstance(message, Progress):
        for time in (message.lower, message.upper):
            if time is not None:
                kind = _time_of_kind(time, kind, message)
        for time, count in message.counts:
            kind = _time_of_kind(time, kind, message)
            if not is_diff(count) or count < 1:  # an integer, as a diff is
                raise InvalidArgument(f"{message!r}: a time's count is a positive integer, not {count!r}")
        if message.lower is not None and message.upper is not None and message.upper < message.lower:
            raise InvalidArgument(f"{message!r}: its upper is below its lower")
    else:
        raise InvalidArgument(f"not a CDC message: {message!r}")
    return kind


def _check_diff(update: Any, diff: Any) -> None:
    """A final diff is a non-zero integer."""
    if not is_diff(diff) or diff == 0:
        raise InvalidArgument(f"update {update!r}: a diff is a non-zero integer (the accumulated diff)")


def _time_of_kind(time: Any, kind: str | None, message: Any) -> str:
    """The kind of ``time``, a finite time of ``kind`` (any if ``None``), or an error."""
    if type(time) is int or (type(time) is float and math.isfinite(time)):  # most times, quickly
        found: str | None = "number"
    else:
        found = time_kind(time) if is_finite_time(time) else None
        if found is None:
            raise InvalidArgument(f"{message!r}: {time!r} is not a finite time (a number, datetime or date)")
    if kind is not None and found != kind:
        raise InvalidArgument(f"{message!r}: time {time!r} is a {found} time; the history's are {kind} times")
    return found  # type: ignore[return-value]


def _covers(lower: Any, upper: Any, time: Any) -> bool:
    return (lower is None or time >= lower) and (upper is None or time < upper)


class CdcWriter:
    """Turns a stream of updates plus frontier advances into CDC messages.

    >>> writer = CdcWriter(batch_size=2)
    >>> for message in writer.advance([("a", 0, 1), ("b", 0, 1), ("a", 1, -1)], upper=2):
    ...     print(message)
    Updates(updates=(Update(data='a', time=0, diff=1), Update(data='b', time=0, diff=1)))
    Updates(updates=(Update(data='a', time=1, diff=-1),))
    Progress(lower=None, upper=2, counts=((0, 2), (1, 1)))
    """

    def __init__(self, *, batch_size: int = 1000) -> None:
        if batch_size < 1:
            raise InvalidArgument(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.lower: Any = None

    def advance(self, updates: Iterable[tuple[Any, Any, int]], upper: Any) -> list[Any]:
        """Messages for the updates of ``[lower, upper)``, all final; then ``lower = upper``.

        ``upper=None`` declares the history complete.
        """
        final = consolidate(updates)
        for data, time, _ in final:
            if not _covers(self.lower, upper, time):
                raise InvalidArgument(
                    f"update {data!r} at time {time!r} is outside [{self.lower!r}, {upper!r})"
                )
        messages: list[Any] = [
            Updates(tuple(final[i : i + self.batch_size]))
            for i in range(0, len(final), self.batch_size)
        ]
        counts: dict[Any, int] = {}
        for _, time, _ in final:
            counts[time] = counts.get(time, 0) + 1
        messages.append(Progress(self.lower, upper, tuple(sorted(counts.items()))))
        self.lower = upper
        return messages


def messages_from_arrangement(arrangement: Any, *, batch_size: int = 1000) -> list[Any]:
    """CDC messages for everything an arrangement holds, up to its ``upper``."""
    return CdcWriter(batch_size=batch_size).advance(arrangement.updates(), arrangement.upper)


def _low(bound: Any) -> tuple[Any, ...]:
    return (0,) if bound is None else (1, bound)


def _high(bound: Any) -> tuple[Any, ...]:
    return (2,) if bound is None else (1, bound)


class _Coverage:
    """The times whose counts are known: disjoint, merged intervals ``[lower, upper)``."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any]] = []  # sorted by lower; None is unbounded

    def __len__(self) -> int:
        return len(self.items)

    def add(self, lower: Any, upper: Any) -> None:
        low, high = _low(lower), _high(upper)
        kept = []
        for lo, up in self.items:
            if _high(up) < low or _low(lo) > high:
                kept.append((lo, up))
            else:  # overlapping or touching: merge
                if _low(lo) < low:
                    lower, low = lo, _low(lo)
                if _high(up) > high:
                    upper, high = up, _high(up)
        kept.append((lower, upper))
        kept.sort(key=lambda item: _low(item[0]))
        self.items = kept

    def containing(self, time: Any, *, bottom: bool = False) -> tuple[Any, Any] | None:
        """The interval holding ``time`` (with ``bottom``: the one starting unbounded)."""
        if bottom:
            first = self.items[0] if self.items else None
            return first if first is not None and first[0] is None else None
        i = bisect_right(self.items, (1, time), key=lambda item: _low(item[0])) - 1
        if i >= 0 and (self.items[i][1] is None or time < self.items[i][1]):
            return self.items[i]
        return None

    def drop_below(self, time: Any) -> None:
        self.items = [(lo, up) for lo, up in self.items if up is None or up > time]


class CdcReader:
    """Recovers a history from CDC messages; see the module documentation.

    Memory: O(updates and counts at unreleased times + the gaps between known
    intervals); released times leave only the frontier behind. Each update costs
    O(log n); each progress message O(its counts + the known intervals).
    """

    def __init__(self, *, start: Any = None) -> None:
        """Read a history from ``start`` on (``None``: from its beginning)."""
        if start is not None and not is_finite_time(start):
            raise InvalidArgument(f"start is a finite time or None, not {start!r}")
        self.frontier: Any = start  # every time below it is released (None: nothing is)
        self.complete = False  # the whole history is released
        self._counts: SortedDict = SortedDict()  # known counts of unreleased times
        self._received: SortedDict = SortedDict()  # time -> data -> diff, unreleased
        self._coverage = _Coverage()
        self._held = 0  # updates in _received
        self._kind = None if start is None else time_kind(start)  # of the history's times

    def resident(self) -> int:
        """How many items the reader holds: updates, counts and intervals."""
        return self._held + len(self._counts) + len(self._coverage)

    def _released(self, time: Any) -> bool:
        return self.complete or (self.frontier is not None and time < self.frontier)

    def _covered(self, time: Any) -> bool:
        return self._coverage.containing(time) is not None

    def expected_counts(self) -> dict[Any, int]:
        """The known counts of the times not yet released."""
        return dict(self._counts)

    def is_released(self, time: Any) -> bool:
        """Whether ``time`` was released (so its updates are all known and given out)."""
        return self._released(time)

    def is_covered(self, time: Any) -> bool:
        """Whether a progress statement told how many updates ``time`` has."""
        return self._covered(time)

    def reach(self) -> tuple[bool, Any]:
        """How far the progress statements reach, contiguously, from the frontier.

        Returns ``(False, None)`` when nothing is known from the start, else
        ``(True, end)``: every time below ``end`` has a known count (``end=None``:
        to the end of the history).
        """
        if self.complete:
            return True, None
        interval = self._coverage.containing(self.frontier, bottom=self.frontier is None)
        if interval is None:
            return self.frontier is not None, self.frontier
        return True, interval[1]

    def push(self, message: Any) -> list[tuple[Any, list[Update]]]:
        """Take one message; return the times it completes, with their updates, in order.

        Raises:
            CdcConflict: the message contradicts what earlier messages said.
            InvalidArgument: the message is malformed (see :func:`check_message`).
        """
        self._kind = check_message(message, self._kind)
        if self.complete:
            return []  # everything is released; a late repeat says nothing new
        if isinstance(message, Updates):
            for data, time, diff in message.updates:
                self._receive(data, time, diff)
        elif isinstance(message, Progress):
            self._progress(message)
        else:
            raise InvalidArgument(f"not a CDC message: {message!r}")
        return self._release()

    def read(self, messages: Iterable[Any]) -> Iterator[tuple[Any, list[Update]]]:
        """Every time the messages complete, in order."""
        for message in messages:
            yield from self.push(message)

    def _receive(self, data: Any, time: Any, diff: int) -> None:
        if self._released(time):
            return  # a repeat of something already released
        data = canonical(data)  # a repeat's NaN is a NaN of its own (decoded, unpickled): NaN is one value
        by_data = self._received.get(time)
        if by_data is None:
            if self._covered(time) and time not in self._counts:
                raise CdcConflict(f"an update ({data!r}, {time!r}) at a time progress says has none")
            by_data = self._received[time] = {}
        known = by_data.get(data)
        if known is not None:
            if known != diff:
                raise CdcConflict(
                    f"({data!r}, {time!r}) arrived with diff {known} and with diff {diff}"
                )
            return
        by_data[data] = diff
        self._held += 1
        expected = self._counts.get(time)
        if expected is not None and len(by_data) > expected:
            raise CdcConflict(f"time {time!r} has more than its {expected} updates")

    def _progress(self, message: Progress) -> None:
        lower, upper = message.lower, message.upper
        given = dict(message.counts)
        for time, count in given.items():
            if not _covers(lower, upper, time):
                raise CdcConflict(f"progress [{lower!r}, {upper!r}) counts time {time!r} outside it")
            if self._released(time):
                continue
            known = self._counts.get(time)
            if (known is not None and known != count) or (known is None and self._covered(time)):
                raise CdcConflict(
                    f"time {time!r} has {known or 0} updates by one message and {count} by another"
                )
            received = len(self._received.get(time, ()))
            if received > count:
                raise CdcConflict(f"time {time!r} has {received} updates, progress says {count}")
            self._counts[time] = count
        inside = (lower, upper, (True, False))
        for time in self._counts.irange(*inside):
            if time not in given:
                raise CdcConflict(
                    f"time {time!r} has {self._counts[time]} updates by one message and 0 by another"
                )
        for time in self._received.irange(*inside):
            if time not in given:
                raise CdcConflict(f"updates arrived at time {time!r}, progress says it has none")
        if upper is None or self.frontier is None or upper > self.frontier:
            self._coverage.add(lower, upper)

    def _release(self) -> list[tuple[Any, list[Update]]]:
        released: list[tuple[Any, list[Update]]] = []
        while not self.complete:
            interval = self._coverage.containing(self.frontier, bottom=self.frontier is None)
            if interval is None:
                break
            upper = interval[1]
            counts = self._counts
            while counts and (upper is None or counts.peekitem(0)[0] < upper):
                time, want = counts.peekitem(0)
                by_data = self._received.get(time, {})
                if len(by_data) < want:
                    self._move_frontier(time)
                    return released
                counts.popitem(0)
                self._received.pop(time, None)
                self._held -= len(by_data)
                released.append((time, sort_updates([Update(d, time, n) for d, n in by_data.items()])))
            if upper is None:
                self.complete = True
                self._received.clear()
                self._coverage = _Coverage()
                self._held = 0
            else:
                self._move_frontier(upper)
        return released

    def _move_frontier(self, time: Any) -> None:
        if self.frontier is not None and time <= self.frontier:
            return
        self.frontier = time
        self._coverage.drop_below(time)
        for stale in list(self._received.irange(None, time, (True, False))):
            self._held -= len(self._received.pop(stale))  # repeats of released times


def read_into(messages: Iterable[Any], arrangement: Any) -> Any:
    """Append to ``arrangement`` what ``messages`` complete beyond its ``upper``.

    The arrangement's ``upper`` is where reading starts; the times the messages
    complete are appended as one batch ending at the frontier reached.

    Returns:
        The new ``upper`` of the arrangement (unchanged if nothing completed).
    """
    start = arrangement.upper
    reader = CdcReader(start=start)
    updates = [u for _, released in reader.read(messages) for u in released]
    if reader.complete:
        raise InvalidArgument(
            "the messages declare the history complete (upper=None); an arrangement needs a "
            "finite upper: write the messages with a finite upper"
        )
    if reader.frontier is not None and reader.frontier != start:
        arrangement.append(updates, lower=start, upper=reader.frontier)
    return arrangement.upper


# -- files ------------------------------------------------------------------------


def _encode(message: Any) -> dict[str, Any]:
    if isinstance(message, Updates):
        return {"updates": [[d, encode_time(t), n] for d, t, n in message.updates]}
    return {
        "progress": {
            "lower": encode_time(message.lower),
            "upper": encode_time(message.upper),
            "counts": [[encode_time(t), n] for t, n in message.counts],
        }
    }


def _decode(record: dict[str, Any]) -> Any:
    if "updates" in record:
        message: Any = Updates(tuple(Update(hashable(d), decode_time(t), n) for d, t, n in record["updates"]))
    else:
        p = record["progress"]
        counts = tuple((decode_time(t), n) for t, n in p["counts"])
        message = Progress(decode_time(p["lower"]), decode_time(p["upper"]), counts)
    check_message(message)
    return message


def write_jsonl(messages: Iterable[Any], path: str | os.PathLike[str]) -> None:
    """Write messages as JSON Lines: ``{"updates": [[data, time, diff], ...]}`` or
    ``{"progress": {"lower": ..., "upper": ..., "counts": [[time, n], ...]}}``;
    datetimes as ``{"datetime": iso}``, dates as ``{"date": iso}``; tuples as lists.
    A path ending ``.gz`` or ``.bz2`` is written compressed."""
    with open_text(path, "w") as out:
        for message in messages:
            out.write(json.dumps(_encode(message)) + "\n")


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The messages of a JSON Lines file written by :func:`write_jsonl` (compressed
    if its name ends ``.gz`` or ``.bz2``).

    Raises:
        InvalidArgument: a line is not a CDC message (its line number is named), or
            the file cannot be decompressed.
    """
    try:
        with open_text(path) as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    message = _decode(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise InvalidArgument(f"{path}:{number}: not a CDC message ({exc})") from exc
                yield message
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path}: {exc}") from exc


def write_parquet(messages: Iterable[Any], path: str | os.PathLike[str]) -> None:
    """Write messages as a Parquet table, one row per message.

    Columns: ``updates`` (JSON of the update triples, or null) and ``progress``
    (JSON of the progress statement, or null), with the encodings of
    :func:`write_jsonl`. Any number of such files form one CDC stream.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [_encode(m) for m in messages]
    table = pa.table(
        {
            "updates": [json.dumps(r["updates"]) if "updates" in r else None for r in rows],
            "progress": [json.dumps(r["progress"]) if "progress" in r else None for r in rows],
        },
        schema=pa.schema([("updates", pa.string()), ("progress", pa.string())]),
    )
    pq.write_table(table, path)


def read_parquet(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The messages of Parquet CDC files (one file, or every ``*.parquet`` in a folder)."""
    import pyarrow.parquet as pq

    path = pathlib.Path(path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    for file in files:
        table = pq.read_table(file, columns=["updates", "progress"])
        for updates, progress in zip(
            table.column("updates").to_pylist(), table.column("progress").to_pylist(), strict=True
        ):
            if updates is not None:
                yield _decode({"updates": json.loads(updates)})
            else:
                yield _decode({"progress": json.loads(progress)})
