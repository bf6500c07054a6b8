"""Arrangements: the shared, indexed, multi-version home of a keyed collection.

An arrangement stores ``key -> value -> [(time, diff)]`` as a *spine* of immutable
batches. One writer appends batches; each batch covers the times ``[lower, upper)``
and the batches tile time without gaps. Many readers share it:

- ``upper``: every time below it is written (``None`` before the first append);
- ``since``: times below it are compacted: advanced to ``since`` and consolidated,
  so the collection is exact as of any time ``>= since`` (``None``: nothing yet).

Readers that need older history hold a :class:`ReadHandle`; compaction never passes
the least ``since`` held. Appends merge batches geometrically (a batch is merged
O(log n) times over its life), so appends stay cheap and reads visit O(log n) batches.

>>> arr = Arrangement()
>>> arr.append([(("frank", "mcsherry"), 0, 1), (("frank", "mcsherry"), 1, -1),
...             (("frank", "zappa"), 1, 1)], lower=None, upper=2)
True
>>> arr.values("frank", as_of=0), arr.values("frank")
(frozenset({'mcsherry'}), frozenset({'zappa'}))
>>> for row in arr.history():
...     print(row)
HistoryRow(key='frank', value='mcsherry', start=0, end=1)
HistoryRow(key='frank', value='zappa', start=1, end=None)
"""

from __future__ import annotations

import heapq
import html
import itertools
import threading
import uuid
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from sortedcontainers import SortedKeyList

from statemachines._gc import gc_paused
from statemachines.display import SAMPLE_ROWS, html_table, never_raises, show_time
from statemachines.errors import InvalidArgument
from statemachines.times import is_time, time_kind
from statemachines.updates import Update, canonical, is_diff, sort_updates, total_order_key

__all__ = ["REPLAY_WINDOW", "Arrangement", "Batch", "HistoryRow", "ReadHandle"]

Entries = dict[Any, list[tuple[Any, int]]]  # value -> [(time, diff)], by time

REPLAY_WINDOW = 1000
"""How many recent batch boundaries an arrangement keeps to recognise replays."""


class HistoryRow(NamedTuple):
    """One validity interval of a ``(key, value)``: present in ``[start, end)``.

    ``end`` is ``None`` for a row that is still current (SCD type 2).
    """

    key: Any
    value: Any
    start: Any
    end: Any


class Batch:
    """An immutable batch of consolidated updates for the times ``[lower, upper)``.

    Times below the batch's ``since`` were advanced to ``since`` when it was built.
    """

    __slots__ = ("count", "data", "id", "keys", "lower", "since", "upper")
    rewritten = False  # a stored batch of files another engine rewrote (stored.StoredBatch)

    def __init__(
        self,
        data: dict[Any, Entries],
        lower: Any,
        upper: Any,
        since: Any = None,
        id: str | None = None,
    ) -> None:
        self.data = data
        self.lower = lower
        self.upper = upper
        self.since = since
        self.id = id or uuid.uuid4().hex
        self.keys = SortedKeyList(data, key=total_order_key)
        self.count = sum(len(times) for entries in data.values() for times in entries.values())

    @classmethod
    def build(
        cls, updates: Iterable[tuple[Any, Any, int]], lower: Any, upper: Any, since: Any = None
    ) -> Batch:
        """Consolidate keyed updates ``((key, value), time, diff)`` into a batch."""
        data: dict[Any, Entries] = {}
        for (key, value), time, diff in updates:
            entries = data.get(key)
            if entries is None:
                data[key] = {value: [(time, diff)]}
            else:
                times = entries.get(value)
                if times is None:
                    entries[value] = [(time, diff)]
                else:
                    times.append((time, diff))
        return cls(consolidate_entries(data, since, lists_sorted=False), lower, upper, since)

    @classmethod
    def merge(cls, batches: list[Batch], since: Any = None) -> Batch:
        """One batch holding the updates of adjacent ``batches`` (oldest first)."""
        data: dict[Any, Entries] = {}
        emptied = []
        for batch in batches:
            for key, entries in batch.data.items():
                # time lists are shared, never mutated: concatenation makes new ones
                into = data.get(key)
                if into is None:
                    data[key] = dict(entries)
                    continue
                for value, times in entries.items():
                    existing = into.get(value)
                    if existing is None:
                        into[value] = times
                    elif existing[-1][0] < times[0][0]:
                        into[value] = existing + times
                    else:  # times advanced to a since overlap the newer batch's
                        kept = _consolidate_times(existing + times, None)
                        if kept:
                            into[value] = kept
                        else:
                            del into[value]
                            emptied.append(key)
        for key in emptied:
            if key in data and not data[key]:
                del data[key]
        merged = consolidate_entries(data, since, lists_sorted=True)
        return cls(merged, batches[0].lower, batches[-1].upper, since)

    def entries(self, key: Any) -> Entries | None:
        """``key``'s updates in this batch (``None``: it has none)."""
        return self.data.get(key)

    def updates(self) -> Iterator[Update]:
        """Every stored update, key by key in key order."""
        for key in self.keys:
            for value, times in self.data[key].items():
                for time, diff in times:
                    yield Update((key, value), time, diff)

    def __repr__(self) -> str:
        return f"Batch([{self.lower!r}, {self.upper!r}), since={self.since!r}, {self.count} updates)"


def _consolidate_times(times: list[tuple[Any, int]], since: Any) -> list[tuple[Any, int]]:
    """Advance times below ``since`` to it, sum equal times, drop zeros, sort by time."""
    sums: dict[Any, int] = {}
    for time, diff in times:
        if since is not None and time < since:
            time = since
        sums[time] = sums.get(time, 0) + diff
    return sorted(item for item in sums.items() if item[1] != 0)


def consolidate_entries(data: dict[Any, Entries], since: Any, *, lists_sorted: bool) -> dict[Any, Entries]:
    """Make every value's time list consolidated; drop emptied values and keys.

    With ``lists_sorted`` the lists are already sorted, without repeated times or
    zero diffs, and only ``since`` may still need applying. Mutates ``data`` (the
    dicts, never the lists: lists may be shared with other batches).
    """
    emptied_keys = []
    for key, entries in data.items():
        emptied_values = []
        for value, times in entries.items():
            first_time, first_diff = times[0]
            if since is not None and first_time < since:
                pass  # some time must be advanced: consolidate below
            elif lists_sorted:
                continue
            elif len(times) == 1:
                if first_diff != 0:
                    continue
            elif len(times) == 2:
                second_time, second_diff = times[1]
                if first_time < second_time and first_diff != 0 and second_diff != 0:
                    continue
            kept = _consolidate_times(times, since)
            if kept:
                entries[value] = kept
            else:
                emptied_values.append(value)
        for value in emptied_values:
            del entries[value]
        if not entries:
            emptied_keys.append(key)
    for key in emptied_keys:
        del data[key]
    return data


class ReadHandle:
    """A reader's hold on an arrangement's history from ``since`` on.

    While the handle lives, the arrangement does not compact past its ``since``.
    Release it with :meth:`release` (or a ``with`` block); a handle that is garbage
    collected releases itself.
    """

    def __init__(self, arrangement: Arrangement, since: Any) -> None:
        self._arrangement = arrangement
        self._since = since
        self._id = next(arrangement._handle_ids)
        arrangement._holds[self._id] = since
        self._finalizer = weakref.finalize(self, arrangement._holds.pop, self._id, None)

    @property
    def since(self) -> Any:
        """The least time whose collection this reader may still read exactly."""
        return self._since

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def downgrade(self, since: Any) -> None:
        """Let go of history before ``since`` (a hold only ever moves forward)."""
        if self.released:
            raise InvalidArgument("this read handle was released")
        if self._since is not None and (since is None or since < self._since):
            raise InvalidArgument(f"a hold only moves forward: {since!r} < {self._since!r}")
        self._since = since
        self._arrangement._holds[self._id] = since

    def release(self) -> None:
        """Stop holding history back."""
        self._finalizer()

    def __enter__(self) -> ReadHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Arrangement:
    """An in-memory arrangement; see the module documentation.

    Complexity: append O(b log b) for a batch of b updates plus amortised merging
    O(log n) per stored update; a key read O(batches + its stored updates).
    """

    def __init__(self) -> None:
        self._batches: list[Batch] = []
        self._upper: Any = None
        self._since: Any = None
        # the lower of the first batch, then every batch's upper (the last
        # REPLAY_WINDOW of them): a replayed batch must align with them
        self._boundaries: list[Any] = []
        self._first: Any = None  # the lower of the first batch
        self._notes: dict[str, Any] = {}
        self._holds: dict[int, Any] = {}
        self._handle_ids = itertools.count()
        # taking a hold and advancing ``since`` must not interleave (reader threads)
        self._holds_lock = threading.RLock()

    # -- frontiers ------------------------------------------------------------------

    @property
    def upper(self) -> Any:
        """Every time below this is written (``None``: nothing written yet)."""
        return self._upper

    @property
    def since(self) -> Any:
        """Times below this are compacted (``None``: nothing compacted)."""
        return self._since

    @property
    def batches(self) -> list[Batch]:
        """The spine, oldest first (a copy; batches themselves are immutable)."""
        return list(self._batches)

    @property
    def first(self) -> Any:
        """The ``lower`` of the first batch ever appended (``None`` also before any)."""
        return self._first

    @property
    def notes(self) -> dict[str, Any]:
        """What the writer noted with its latest append (e.g. a waterline's high mark)."""
        return dict(self._notes)

    def stored_updates(self) -> int:
        """How many ``(key, value, time, diff)`` entries are stored, over all batches."""
        return sum(batch.count for batch in self._batches)

    # -- writing --------------------------------------------------------------------

    def append(
        self,
        updates: Iterable[tuple[Any, Any, int]],
        lower: Any,
        upper: Any,
        *,
        notes: dict[str, Any] | None = None,
    ) -> bool:
        """Append the updates of the times ``[lower, upper)`` as one batch.

        ``lower`` must be the current ``upper`` (``None`` for the first batch allows
        any). A batch whose ``(lower, upper)`` matches batches already appended (of
        the last ``REPLAY_WINDOW``) is a replay: it is ignored (the writer is
        trusted to be deterministic). ``notes`` (JSON-able values) replace the
        writer's notes with the batch, e.g. a waterline's high mark, which
        compaction could otherwise lose with the updates it came from.

        Returns:
            True if the batch was appended, False if it was an ignored replay.

        Raises:
            InvalidArgument: the batch overlaps what was written without being a
                replay, leaves a gap, is empty or backwards, or holds an update
                outside ``[lower, upper)`` or whose diff is no integer.
        """
        if not self._accepts(lower, upper):
            return False
        updates = list(updates)
        for data, time, diff in updates:
            try:
                outside = (lower is not None and time < lower) or not time < upper
            except TypeError:  # a time of another kind
                outside = True
            if outside:
                raise InvalidArgument(
                    f"update {data!r} at time {time!r} lies outside its batch "
                    f"[{lower!r}, {upper!r})"
                )
            if not is_diff(diff):
                raise InvalidArgument(f"update {data!r} at time {time!r} has diff {diff!r}; a diff is an integer")
        with gc_paused():
            self._push(Batch.build(updates, lower, upper, self._since))
        if notes is not None:
            self._notes = {**self._notes, **notes}
        return True

    def _accepts(self, lower: Any, upper: Any) -> bool:
        """Whether a batch ``[lower, upper)`` is new (True) or a replay (False).

        Raises:
            InvalidArgument: it is neither: it overlaps, leaves a gap, or is empty.
        """
        for bound in (lower, upper):
            if bound is not None:
                self._check_time(bound, "append a batch")  # NaN would be an upper nothing follows
        if upper is None or (lower is not None and not lower < upper):
            raise InvalidArgument(f"a batch needs lower < upper; got [{lower!r}, {upper!r})")
        if self._upper is not None and upper <= self._upper:
            if self._is_replay(lower, upper):
                return False
            raise InvalidArgument(
                f"batch [{lower!r}, {upper!r}) lies below the arrangement's upper "
                f"{self._upper!r} and matches no batch written before; appending below "
                f"upper is an error (append [{self._upper!r}, ...) next)"
            )
        if self._boundaries and lower != self._upper:
            problem = "overlaps" if lower is None or lower < self._upper else "leaves a gap after"
            raise InvalidArgument(
                f"batch [{lower!r}, {upper!r}) {problem} the arrangement's upper "
                f"{self._upper!r}; the next batch must start at lower={self._upper!r}"
            )
        return True

    def _is_replay(self, lower: Any, upper: Any) -> bool:
        bounds = self._boundaries
        if lower is None:
            lower_ok = bool(bounds) and bounds[0] is None
        else:
            start = 1 if bounds and bounds[0] is None else 0
            i = bisect_left(bounds, lower, start)
            lower_ok = i < len(bounds) and bounds[i] == lower
        j = bisect_left(bounds, upper, 1)
        return lower_ok and j < len(bounds) and bounds[j] == upper

    def _push(self, batch: Batch, *, merge: bool = True) -> None:
        """Add ``batch`` at the end of the spine, merging as :meth:`_merged` says
        (unless ``merge`` is false: :meth:`_merge_spine` does it later)."""
        self._add_boundaries(batch.lower, batch.upper)
        # The spine is rebuilt aside and swapped in whole, so a reader in another
        # thread sees the spine before or after, never a batch missing mid-merge.
        self._batches = self._merged(self._batches, batch) if merge else [*self._batches, batch]
        self._upper = batch.upper

    def _merged(self, spine: list[Batch], batch: Batch) -> list[Batch]:
        """A merged spine (no two neighbours that :meth:`_merges`) with ``batch`` added at its end."""
        spine = [*spine, batch]
        while len(spine) >= 2 and self._merges(spine[-2], spine[-1]):
            newer = spine.pop()
            older = spine.pop()
            spine.append(self._merge([older, newer]))
        return spine

    def _merge_spine(self) -> None:
        """Merge the spine as if each batch had been merged when it was added: the
        batches added without merging join one by one."""
        spine: list[Batch] = []
        for batch in self._batches:
            spine = self._merged(spine, batch)
        self._batches = spine

    def _merges(self, older: Batch, newer: Batch) -> bool:
        """Geometric merging: merge while the newer batch is at least half the older."""
        return older.count <= 2 * newer.count

    def _add_boundaries(self, lower: Any, upper: Any) -> None:
        if not self._boundaries:
            self._boundaries.append(lower)
            self._first = lower
        self._boundaries.append(upper)
        if len(self._boundaries) > REPLAY_WINDOW:
            del self._boundaries[: len(self._boundaries) - REPLAY_WINDOW]

    def _merge(self, batches: list[Batch]) -> Batch:
        return Batch.merge(batches, self._since)

    def advance_since(self, since: Any) -> Any:
        """Logical compaction: allow times below ``since`` to be advanced to it.

        The frontier is clamped so it never passes ``upper`` nor the least ``since``
        held by a reader, and never moves back. Batches apply it as they merge.

        Returns:
            The ``since`` actually reached.
        """
        self._check_time(since, "advance since")
        if self._upper is None:
            return self._since  # nothing written, nothing to compact
        with self._holds_lock:
            target = min(since, self._upper)
            for held in list(self._holds.values()):  # handles may be released meanwhile
                if held is None:
                    return self._since
                target = min(target, held)
            if self._since is None or target > self._since:
                self._since = target
            return self._since

    def compact(self, since: Any = None) -> Any:
        """Advance ``since`` (if given) and merge the whole spine into one batch.

        After ``compact(arr.upper)`` with no reader holding history, the stored
        updates are exactly the live ``(key, value)`` pairs.

        Returns:
            The ``since`` reached (see :meth:`advance_since`).
        """
        if since is not None:
            self.advance_since(since)
        if self._batches:
            with gc_paused():
                self._batches = [self._merge(self._batches)]
        return self._since

    # -- reading --------------------------------------------------------------------

    def reader(self, since: Any = None) -> ReadHandle:
        """A handle that holds history from ``since`` (default: the current ``since``)."""
        with self._holds_lock:
            since = self._since if since is None else since
            self._check_readable(since, "hold")
            return ReadHandle(self, since)

    def _check_time(self, time: Any, what: str) -> None:
        """Refuse to ``what`` at a ``time`` that is no time of the arrangement's kind."""
        kind = None if self._upper is None else time_kind(self._upper)
        if not is_time(time, kind):
            of_kind = f" of the arrangement's kind ({kind})" if kind else ""
            raise InvalidArgument(f"cannot {what} at {time!r}: it is not a time{of_kind}")

    def _check_readable(self, time: Any, what: str) -> None:
        if time is not None:
            self._check_time(time, what)
        if self._since is not None and time is not None and time < self._since:
            raise InvalidArgument(
                f"cannot {what} at {time!r}: the arrangement is compacted up to since="
                f"{self._since!r}; hold a reader (arr.reader()) before compacting to keep "
                f"older history exact"
            )

    def _version(self) -> tuple[list[Batch], Any]:
        """The spine and ``since`` as they stand: one version for a whole read.

        Writers replace the spine list whole (never change it in place), so a read
        that keeps this list sees one version however long it runs.
        """
        return self._batches, self._since

    def _entries(self, key: Any, version: tuple[list[Batch], Any] | None = None) -> Entries:
        """A key's updates merged over all batches: value -> [(time, diff)] by time.

        Times below ``since`` read as ``since``, whether or not a merge has yet
        rewritten the batch that holds them. ``version`` (default: the current one)
        is the spine and ``since`` to read.
        """
        spine, since = version or self._version()
        merged: dict[Any, dict[Any, int]] = {}
        for batch in spine:
            entries = batch.entries(key)
            if entries:
                for value, times in entries.items():
                    by_time = merged.setdefault(value, {})
                    for time, diff in times:
                        if since is not None and time < since:
                            time = since
                        by_time[time] = by_time.get(time, 0) + diff
        result = {}
        for value, by_time in merged.items():
            times = sorted((t, d) for t, d in by_time.items() if d != 0)
            if times:
                result[value] = times
        return result

    def get(self, key: Any, as_of: Any = None) -> dict[Any, int]:
        """``key``'s values with their multiplicities as of ``as_of`` (default: latest).
        A NaN in ``key`` is any NaN (:func:`~statemachines.updates.canonical`)."""
        self._check_readable(as_of, "read")
        counts = {}
        for value, times in self._entries(canonical(key)).items():
            n = sum(d for t, d in times if as_of is None or t <= as_of)
            if n:
                counts[value] = n
        return counts

    def values(self, key: Any, as_of: Any = None) -> frozenset[Any]:
        """The values present for ``key`` as of ``as_of`` (default: latest)."""
        return frozenset(v for v, n in self.get(key, as_of).items() if n > 0)

    def cursor(self, start: Any = None) -> Iterator[tuple[Any, Entries]]:
        """Keys in order (from ``start`` on), each with its merged ``value -> [(time, diff)]``.

        The whole iteration reads the version current at its first step, whatever
        is appended or compacted meanwhile (no torn reads).
        """
        version = self._version()
        iterators = []
        for batch in version[0]:
            if start is None:
                iterators.append(iter(batch.keys))
            else:
                iterators.append(batch.keys.irange_key(min_key=total_order_key(start)))
        previous = object()
        for key in heapq.merge(*iterators, key=total_order_key):
            if key is previous or key == previous:  # NaN: one math.nan, the same object
                continue
            previous = key
            entries = self._entries(key, version)
            if entries:
                yield key, entries

    def keys(self) -> Iterator[Any]:
        """Every key with stored updates, in order."""
        for key, _ in self.cursor():
            yield key

    def snapshot(self, as_of: Any = None) -> list[tuple[Any, int]]:
        """The collection as of ``as_of``: ``[((key, value), count)]`` in key order."""
        self._check_readable(as_of, "read")
        rows = []
        for key, entries in self.cursor():
            for value, times in entries.items():
                n = sum(d for t, d in times if as_of is None or t <= as_of)
                if n:
                    rows.append(((key, value), n))
        return rows

    def changes(self, lower: Any = None, upper: Any = None) -> list[Update]:
        """The consolidated updates at times in ``[lower, upper)``, sorted by (time, data).

        When ``lower == since``, updates compacted from earlier times appear at ``since``.
        """
        self._check_readable(lower, "read changes")
        if upper is not None:
            self._check_time(upper, "read changes")
        found = []
        for key, entries in self.cursor():
            for value, times in entries.items():
                for time, diff in times:
                    if (lower is None or time >= lower) and (upper is None or time < upper):
                        found.append(Update((key, value), time, diff))
        return sort_updates(found)

    def updates(self) -> list[Update]:
        """Every update stored, consolidated across batches and sorted by (time, data)."""
        return self.changes()

    def history(self) -> Iterator[HistoryRow]:
        """Every ``(key, value)`` with its validity intervals, by key, then start.

        A row starts when the value's multiplicity becomes positive and ends when it
        drops back to zero; ``end`` is ``None`` for a current row (SCD type 2).
        Starts below ``since`` read as ``since``.
        """
        for key, entries in self.cursor():
            rows = []
            for value, times in entries.items():
                count, start = 0, None
                for time, diff in times:
                    before, count = count, count + diff
                    if before <= 0 < count:
                        start = time
                    elif count <= 0 < before:
                        rows.append(HistoryRow(key, value, start, time))
                if count > 0:
                    rows.append(HistoryRow(key, value, start, None))
            rows.sort(key=lambda row: (row.start, total_order_key(row.value)))
            yield from rows

    # -- display --------------------------------------------------------------------

    def _label(self) -> str:
        return type(self).__name__

    def summary(self) -> str:
        """One line: the frontiers and the size of the spine."""
        stored = self.stored_updates()
        return (
            f"upper {show_time(self._upper)}, since {show_time(self._since)}, "
            f"{len(self._batches):,} batches, {stored:,} stored updates"
        )

    def sample(self, rows: int = SAMPLE_ROWS) -> list[tuple[Any, Any, int]]:
        """The first ``rows`` rows of the latest snapshot, ``(key, value, count)``, in key order."""
        found: list[tuple[Any, Any, int]] = []
        for key, entries in self.cursor():
            for value, times in entries.items():
                count = sum(diff for _, diff in times)
                if count:
                    found.append((key, value, count))
            if len(found) >= rows:
                break
        return found[:rows]

    def __repr__(self) -> str:
        return f"<{self._label()}: {self.summary()}>"

    @never_raises
    def _repr_html_(self) -> str:
        facts = [
            ("upper", show_time(self._upper)),
            ("since", show_time(self._since)),
            ("batches", f"{len(self._batches):,}"),
            ("stored updates", f"{self.stored_updates():,}"),
            ("readers holding history", f"{len(self._holds):,}"),
        ]
        return (
            f"<p><b>{html.escape(self._label())}</b></p>"
            + html_table((), facts)
            + "\n<p>Latest snapshot (sample)</p>"
            + html_table(["key", "value", "count"], self.sample())
        )

    # -- invariants -----------------------------------------------------------------

    def _check(self) -> None:
        """Assert every structural invariant (used by tests after each mutation)."""
        batches = self._batches
        assert self._upper == (batches[-1].upper if batches else None)
        for older, newer in itertools.pairwise(batches):
            assert older.upper == newer.lower, (older, newer)
        if batches:
            assert self._first == batches[0].lower
            assert self._boundaries[-1] == self._upper
        for held in self._holds.values():
            assert held is None or self._since is None or held >= self._since
        if self._since is not None:
            assert self._upper is not None and self._since <= self._upper
        for batch in batches:
            _check_batch(batch, self._since)


def _check_batch(batch: Batch, since: Any) -> None:
    assert batch.lower is None or batch.lower < batch.upper, batch
    assert batch.since is None or (since is not None and batch.since <= since), batch
    assert list(batch.keys) == sorted(batch.data, key=total_order_key), batch
    count = 0
    for entries in batch.data.values():
        assert entries, "a key without values is stored"
        for times in entries.values():
            assert times, "a value without updates is stored"
            count += len(times)
            for (t1, _), (t2, _) in itertools.pairwise(times):
                assert t1 < t2, "times of a value are not strictly increasing"
            for time, diff in times:
                assert diff != 0, "a zero diff is stored"
                in_range = (batch.lower is None or time >= batch.lower) and time < batch.upper
                if batch.since is None:
                    assert in_range, (batch, time)
                else:
                    assert time >= batch.since and (in_range or time == batch.since), (batch, time)
    # a batch of files another engine rewrote counts their rows, which may hold an
    # update twice (two batches' times advanced to one since): consolidated, fewer
    assert batch.count == count or (batch.rewritten and batch.count > count)
