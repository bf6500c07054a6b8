"""Batches whose updates live in Parquet files, read only as far as a read needs.

Opening a persisted arrangement reads its log and state, never its data: each batch
is a :class:`StoredBatch` that knows its files, bounds and size. A point read
(``values(key)``) of a large batch reads only the row groups whose key statistics
can hold the key (files are written sorted by key, so that is one or two small row
groups per file), keeping the last few it read; a small batch, a scan (snapshot,
cursor, history) or a merge loads the batch whole, once.

    read                     large batch (> SMALL_BATCH updates)     small batch
    values(key), get(key)    the row groups that can hold ``key``    loaded whole
    snapshot, cursor         loaded whole                             loaded whole
    merge, compaction        in Arrow, file to file (Python for structs)

Merging stored batches never builds Python objects: their files are read as Arrow
tables and consolidated there (:func:`merge_tables`) into one new key-sorted file.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import OrderedDict
from typing import Any

from sortedcontainers import SortedKeyList

from statemachines.arrangement import Batch, Entries, consolidate_entries
from statemachines.columns import column_to_python, same_items
from statemachines.delta import STATISTICS_COLUMNS
from statemachines.updates import total_order_key

__all__ = ["ROW_GROUP_ROWS", "SMALL_BATCH", "WRITE_OPTIONS", "StoredBatch", "merge_tables"]

SMALL_BATCH = 50_000
"""A batch of at most this many updates is loaded whole on its first read."""

ROW_GROUP_ROWS = 1024
"""Rows per Parquet row group in the files this project writes: the unit of a point read."""

WRITE_OPTIONS = {"row_group_size": ROW_GROUP_ROWS, "use_dictionary": False, "write_statistics": list(STATISTICS_COLUMNS)}
"""How this project writes a key-sorted data file (``pyarrow.parquet.write_table``):
small row groups; no dictionaries, which each small group would carry its own of
(1.2M string updates: 10% larger and written 40% slower with them); and statistics
only of the columns whose statistics are read (a point read's keys, a Delta add's
minimum and maximum): a detector's nested values took a fifth of the writing for
statistics nothing reads."""

CACHED_GROUPS = 32
"""Row groups a large batch keeps after point reads."""

COLUMNS = ["key", "value", "time", "diff"]


class _FileIndex:
    """A Parquet file's row groups with their key ranges, from its footer."""

    def __init__(self, parquet: Any) -> None:
        self.parquet = parquet
        self.lows: list[Any] = []
        self.highs: list[Any] = []
        column = parquet.schema_arrow.get_field_index("key")
        metadata = parquet.metadata
        for g in range(metadata.num_row_groups):
            stats = metadata.row_group(g).column(column).statistics
            if stats is None or not stats.has_min_max:
                self.lows, self.highs = [], []
                break
            self.lows.append(stats.min)
            self.highs.append(stats.max)
        self.ordered = bool(self.lows) and all(
            self.highs[g] <= self.lows[g + 1] for g in range(len(self.lows) - 1)
        )

    def groups_for(self, key: Any) -> list[int]:
        """The row groups whose key range holds ``key``."""
        if key != key:  # noqa: PLR0124 - NaN, which Parquet's key ranges leave out: every group
            return list(range(len(self.lows)))
        try:
            if self.ordered:
                first = bisect_left(self.highs, key)
                found = []
                for g in range(first, len(self.lows)):
                    if self.lows[g] > key:
                        break
                    found.append(g)
                return found
            return [g for g, (lo, hi) in enumerate(zip(self.lows, self.highs, strict=True)) if lo <= key <= hi]
        except TypeError:  # a key of another type than the column's: it is not stored here
            return []


class StoredBatch(Batch):
    """A :class:`Batch` stored in Parquet files; its updates are read when needed."""

    def __init__(
        self,
        read_file: Any,
        open_file: Any,
        files: list[str],
        lower: Any,
        upper: Any,
        since: Any,
        id: str,
        count: int,
        rewritten: bool = False,
    ) -> None:
        # no Batch.__init__: that builds a batch from data in memory
        self.lower, self.upper, self.since, self.id, self.count = lower, upper, since, id, count
        self.rewritten = rewritten  # files another engine rewrote: rows in any order
        self.files = list(files)
        self._read_file = read_file  # name, into-dict -> None: loads a whole file
        self._open_file = open_file  # name -> pyarrow.parquet.ParquetFile
        self._data: dict[Any, Entries] | None = None
        self._keys: Any = None
        self._indexes: dict[str, _FileIndex] = {}
        self._groups: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._lock = threading.RLock()

    @property
    def loaded(self) -> bool:
        return self._data is not None

    @property
    def data(self) -> dict[Any, Entries]:  # type: ignore[override]
        if self._data is None:
            with self._lock:
                if self._data is None:
                    data: dict[Any, Entries] = {}
                    for name in self.files:
                        self._read_file(name, data)
                    if self.rewritten:  # rows in another engine's order: times sorted and summed
                        data = consolidate_entries(data, None, lists_sorted=False)
                    self._groups.clear()
                    self._data = data
        return self._data

    @property
    def keys(self) -> Any:
        if self._keys is None:
            with self._lock:
                if self._keys is None:
                    self._keys = SortedKeyList(self.data, key=total_order_key)
        return self._keys

    def entries(self, key: Any) -> Entries | None:
        if self._data is not None or self.count <= SMALL_BATCH:
            return self.data.get(key)
        with self._lock:
            indexes = [(name, self._index(name)) for name in self.files]
            if not all(index.lows for _, index in indexes):  # no key statistics: read it all
                return self.data.get(key)
            found: Entries = {}
            for name, index in indexes:
                for group in index.groups_for(key):
                    self._read_group(name, index, group, key, found)
        for times in found.values():
            times.sort()
        return found or None

    def _index(self, name: str) -> _FileIndex:
        index = self._indexes.get(name)
        if index is None:
            index = self._indexes[name] = _FileIndex(self._open_file(name))
        return index

    def _read_group(self, name: str, index: _FileIndex, group: int, key: Any, into: Entries) -> None:
        import pyarrow as pa

        table = self._groups.get((name, group))
        if table is None:
            table = index.parquet.read_row_group(group, columns=COLUMNS, use_threads=False)  # small: no threads
            self._groups[(name, group)] = table
            if len(self._groups) > CACHED_GROUPS:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end((name, group))
        try:
            rows = table.filter(same_items(table.column("key"), key))
        except (pa.ArrowException, TypeError, ValueError):  # pyarrow cannot compare: filter here
            keys = column_to_python(table.column("key"))
            rows = table.take([i for i, k in enumerate(keys) if k == key])
        if not rows.num_rows:
            return
        values = column_to_python(rows.column("value"))
        for value, time, diff in zip(values, rows.column("time").to_pylist(), rows.column("diff").to_pylist(), strict=True):
            into.setdefault(value, []).append((time, diff))

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else f"in {len(self.files)} file(s)"
        return f"StoredBatch([{self.lower!r}, {self.upper!r}), since={self.since!r}, {self.count} updates, {state})"


def merge_tables(tables: list[Any], since: Any, *, disjoint: bool = False) -> Any:
    """The consolidated updates of ``tables`` (``key, value, time, diff``), sorted by key.

    Times below ``since`` become ``since``; equal ``(key, value, time)`` sum their
    diffs; zeros go. Vectorised in Arrow. ``None`` when Arrow cannot group the
    columns (structs, lists): the caller merges in Python instead.

    ``disjoint`` says the tables are consolidated batches of disjoint time intervals,
    none of whose times ``since`` advances: no two of their rows can consolidate, so
    they are only sorted by key (the order within a key kept), several times faster.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables([t.select(COLUMNS) for t in tables], promote_options="permissive")
    if disjoint:
        keys = table.column("key")
        if pa.types.is_integer(keys.type) and keys.null_count == 0:
            # numpy's stable sort of integers merges the tables' sorted runs (timsort)
            return table.take(keys.to_numpy().argsort(kind="stable"))
        try:
            return table.sort_by([("key", "ascending")])
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    if since is not None:
        bound = pa.scalar(since, type=table.schema.field("time").type)
        table = table.set_column(2, "time", pc.max_element_wise(table.column("time"), bound))
    try:
        summed = table.group_by(["key", "value", "time"], use_threads=False).aggregate([("diff", "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    summed = summed.filter(pc.not_equal(summed.column("diff_sum"), 0))
    ordered = summed.sort_by([("key", "ascending"), ("value", "ascending"), ("time", "ascending")])
    return pa.table(
        [ordered.column(name) for name in ("key", "value", "time", "diff_sum")],
        schema=pa.schema([table.schema.field(name) for name in COLUMNS]),
    )
