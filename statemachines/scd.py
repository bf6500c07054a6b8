"""SCD type 1 and type 2 tables kept from an arrangement of a one-value-per-key collection.

An :class:`ScdTable` is a Delta table of its own (the same format as the
arrangement) with the key columns, the value columns and, for type 2, the interval
of times each value held: ``__START_AT`` (included) and ``__END_AT`` (excluded;
null while it holds). Type 1 keeps only the current value. The updates of one key::

    arrangement updates           SCD type 2 rows (id, name, __START_AT, __END_AT)
    (1, Ada)    100 +1            1, Ada,  100, 104
    (1, Ada)    104 -1            1, Rome, 104, null
    (1, Rome)   104 +1

:meth:`ScdTable.refresh` brings the table up to the arrangement's latest version in
one Delta commit. It reads only the updates at or after the ``upper`` of the version
it reflected last: an arrangement takes no update below its ``upper``, so earlier
history is final, and a row placed out of order was placed by the runtime, before
its time became final. Each commit names the arrangement version it reflects (a
Delta application transaction), so a refresh repeated after a crash, or by a
second run, changes nothing twice. One writer refreshes a table at a time; any
number read it.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from statemachines import delta
from statemachines._gc import gc_paused
from statemachines.columns import same_items
from statemachines.errors import InvalidArgument
from statemachines.times import decode_time

__all__ = ["START_AT", "END_AT", "ScdTable"]

START_AT = "__START_AT"
END_AT = "__END_AT"
APP_ID = "statemachines.scd"
ACTION = "__action"  # of a source row: "open" (a new interval), "close" (ends a stored one)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@attrs.frozen
class ScdTable:
    """The SCD table at ``path`` of an arrangement's ``(key, value)`` collection.

    Args:
        path: the table's directory or URI.
        keys: the names of the key's columns (one, or one per field of a tuple key).
        values: the names of the value's columns (one per field of a tuple value).
        scd_type: 2 (history) or 1 (current values only).
        start, end: type 2's interval columns.
    """

    path: str = attrs.field(converter=os.fspath)
    keys: tuple[str, ...] = attrs.field(converter=tuple)
    values: tuple[str, ...] = attrs.field(converter=tuple)
    scd_type: int = 2
    start: str = START_AT
    end: str = END_AT
    storage_options: dict[str, str] | None = None

    def __attrs_post_init__(self) -> None:
        if self.scd_type not in (1, 2):
            raise InvalidArgument(f"scd_type is 1 or 2, not {self.scd_type!r}")
        names = [*self.keys, *self.values, *((self.start, self.end) if self.scd_type == 2 else ())]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"the SCD table's columns must differ: {', '.join(names)}")

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.keys, *self.values, *((self.start, self.end) if self.scd_type == 2 else ()))

    def reflects(self) -> int | None:
        """The arrangement version the table shows (``None``: none yet)."""
        table = self._table()
        return None if table is None else table.transaction_version(APP_ID)

    def refresh(self, arrangement: str | os.PathLike[str]) -> bool:
        """Bring the table up to the arrangement's latest version; whether it changed.

        Raises:
            InvalidArgument: the arrangement holds a key with several values, or was
                compacted past the times this table has shown (remove the table and
                refresh to rebuild it).
        """
        loc = delta.location(arrangement, self.storage_options)
        latest = delta.read_snapshot(loc)
        if latest.version is None:
            return False  # nothing committed yet
        table = self._table()
        shown = None if table is None else table.transaction_version(APP_ID)
        if shown is not None and shown >= latest.version:
            return False
        lower = None if shown is None else decode_time(delta.read_snapshot(loc, shown).state["upper"])
        since = decode_time(latest.state["since"])
        if lower is not None and since is not None and since > lower:
            raise InvalidArgument(
                f"{loc.uri} was compacted to {since!r}, past {lower!r}, the upper of the version "
                f"{self.path} shows; remove {self.path} and refresh to rebuild it"
            )
        updates = _updates_from(loc, latest, lower)
        with gc_paused():  # Arrow work with few Python objects, beside a caller's large heap
            source = self._source(updates, latest.schema)
        if table is None:
            table = self._create(source.schema)
        self._merge(table, source, latest.version)
        return True

    def read(self, version: delta.VersionSpec | None = None) -> Any:
        """The table (a ``pyarrow.Table``) at ``version`` (default: the latest), sorted.

        ``version`` is one of the table's own Delta versions, or a commit time (a
        datetime, naive meaning UTC, or an ISO 8601 string): the latest version
        committed at or before it, as Delta's ``timestampAsOf``.
        """
        from deltalake import DeltaTable

        loc = delta.location(self.path, self.storage_options)
        if version is not None and not isinstance(version, int):
            version = delta.version_at(loc, version)
        table = DeltaTable(self.path, version=version, storage_options=self.storage_options)
        order = [(c, "ascending") for c in self.keys + ((self.start,) if self.scd_type == 2 else ())]
        return _rows(table, loc).select(list(self.columns)).sort_by(order)

    # -- building the source of a merge ------------------------------------------

    def _source(self, updates: Any, schema: Any) -> Any:
        """The rows to merge (columns, vectorised): per key, sorted by time with
        removals first, each addition opens an interval that the key's next row (its
        removal) ends; a key's first row, if a removal, ends the stored interval::

            key  value  time  diff        source rows
            1    Ada    104   -1          close 1 at 104
            1    Rome   104   +1          open  1 Rome [104, 107)
            1    Rome   107   -1
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        target = self._arrow_schema(schema)
        if updates.num_rows == 0:
            return target.empty_table()
        keys = _spread(self.keys, updates.column("key"))
        values = _spread(self.values, updates.column("value"))
        order = pc.sort_indices(
            pa.table({**{f"k{i}": k for i, k in enumerate(keys)}, "time": updates.column("time"), "diff": updates.column("diff")}),
            sort_keys=[*((f"k{i}", "ascending") for i in range(len(keys))), ("time", "ascending"), ("diff", "ascending")],
        )
        keys = [k.take(order) for k in keys]
        values = [v.take(order) for v in values]
        time, diff = (updates.column(c).combine_chunks().take(order) for c in ("time", "diff"))
        n = len(diff)
        same_next = _same_as_next(keys, n)
        same_prev = pa.concat_arrays([pa.array([False]), same_next[: n - 1]])
        next_diff, prev_diff = pc.fill_null(_shifted(diff), 0), pc.fill_null(_shifted(diff, back=True), 0)
        added, removed = pc.equal(diff, 1), pc.equal(diff, -1)
        several = pc.or_(
            pc.invert(pc.or_(added, removed)),
            pc.or_(
                pc.and_(pc.and_(added, same_next), pc.not_equal(next_diff, -1)),
                pc.and_(pc.and_(removed, same_prev), pc.not_equal(prev_diff, 1)),
            ),
        )
        if pc.any(several).as_py():
            at = pc.index(several, True).as_py()
            raise InvalidArgument(
                f"key {keys[0][at]!r} has several values at once (update at {time[at]!r}, diff {diff[at]!r}); "
                f"an SCD table is of a collection with one value per key, as Upsert keeps"
            )
        if self.scd_type == 1:
            last = pc.invert(same_next)
            present = pc.and_(last, added)
            rows = pc.or_(present, pc.and_(last, removed))
            kept = [*(k.filter(rows) for k in keys), *(pc.if_else(present, v, pa.nulls(n, v.type)).filter(rows) for v in values)]
            return pa.Table.from_arrays([*kept, present.filter(rows)], schema=target)
        ends = pc.if_else(pc.and_(same_next, pc.equal(next_diff, -1)), _shifted(time), pa.nulls(n, time.type))
        closes = pc.and_(removed, pc.invert(same_prev))
        m = pc.sum(closes).as_py() or 0
        opened = pa.Table.from_arrays(
            [*(k.filter(added) for k in keys), *(v.filter(added) for v in values), time.filter(added),
             ends.filter(added), pa.repeat("open", pc.sum(added).as_py() or 0)],
            schema=target,
        )
        closed = pa.Table.from_arrays(
            [*(k.filter(closes) for k in keys), *(pa.nulls(m, v.type) for v in values), pa.nulls(m, time.type),
             time.filter(closes), pa.repeat("close", m)],
            schema=target,
        )
        return pa.concat_tables([closed, opened])

    def _arrow_schema(self, arrangement: Any) -> Any:
        import pyarrow as pa

        def spread(names: tuple[str, ...], field: Any) -> list[Any]:
            if not _is_record(names, field.type):
                return [pa.field(names[0], field.type)]
            if field.type.num_fields != len(names):
                raise InvalidArgument(
                    f"the arrangement's {field.name} ({field.type}) does not have the {len(names)} "
                    f"field(s) {', '.join(names)}"
                )
            return [pa.field(n, f.type) for n, f in zip(names, field.type, strict=True)]

        time = arrangement.field("time").type
        fields = spread(self.keys, arrangement.field("key")) + spread(self.values, arrangement.field("value"))
        if self.scd_type == 2:
            fields += [pa.field(self.start, time), pa.field(self.end, time)]
        return pa.schema([*fields, pa.field(ACTION, pa.string() if self.scd_type == 2 else pa.bool_())])

    # -- the Delta table -----------------------------------------------------------

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.path, storage_options=self.storage_options):
            return None
        return DeltaTable(self.path, storage_options=self.storage_options)

    def _create(self, source_schema: Any) -> Any:
        import pyarrow as pa
        from deltalake import DeltaTable

        schema = pa.schema([f for f in source_schema if f.name != ACTION])
        return DeltaTable.create(self.path, schema, storage_options=self.storage_options)

    def _merge(self, table: Any, source: Any, version: int) -> None:
        from deltalake import CommitProperties, Transaction

        same_key = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in self.keys)
        every = {_quoted(c): f"s.{_quoted(c)}" for c in self.columns}
        action = f"s.{_quoted(ACTION)}"
        merge = table.merge(
            source, source_alias="s", target_alias="t",
            predicate=(
                f"{same_key} AND t.{_quoted(self.end)} IS NULL AND {action} = 'close'"
                if self.scd_type == 2 else same_key
            ),
            commit_properties=CommitProperties(app_transactions=[Transaction(APP_ID, version)]),
        )
        if self.scd_type == 2:
            end = _quoted(self.end)
            merge = merge.when_matched_update({end: f"s.{end}"}).when_not_matched_insert(
                every, predicate=f"{action} = 'open'"
            )
        else:
            values = {_quoted(c): f"s.{_quoted(c)}" for c in self.values}
            merge = (
                merge.when_matched_update(values, predicate=action)
                .when_matched_delete(predicate=f"NOT {action}")
                .when_not_matched_insert(every, predicate=action)
            )
        merge.execute()


def _updates_from(loc: Any, snapshot: Any, lower: Any) -> Any:
    """The arrangement's updates at or after ``lower`` (all of them when ``None``), a table."""
    import pyarrow.dataset as ds

    files = [
        loc.path(f)
        for batch in snapshot.state["batches"]
        if lower is None or batch["upper"] is None or decode_time(batch["upper"]) > lower
        for f in batch["files"]
    ]
    data = ds.dataset(files, schema=snapshot.schema, filesystem=loc.filesystem, format="parquet")
    return data.to_table(
        columns=["key", "value", "time", "diff"], filter=None if lower is None else ds.field("time") >= lower
    )


def _is_record(names: tuple[str, ...], kind: Any) -> bool:
    """Whether a key or value of this type spreads over the columns ``names`` (a struct),
    or fills the one column (a struct only if it is not one field for one name)."""
    import pyarrow as pa

    return pa.types.is_struct(kind) and not (len(names) == 1 and kind.num_fields != 1)


def _spread(names: tuple[str, ...], column: Any) -> list[Any]:
    """A key or value column as one array per name."""
    array = column.combine_chunks()
    if not _is_record(names, array.type):
        return [array]
    return [array.field(i) for i in range(array.type.num_fields)]


def _same_as_next(columns: list[Any], n: int) -> Any:
    """For each row, whether the next row has the same values in ``columns`` (the last: no)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    same = pa.repeat(True, n - 1)
    for column in columns:
        same = pc.and_(same, pc.fill_null(same_items(column[:-1], column[1:]), False))
    return pa.concat_arrays([same, pa.array([False])])


def _shifted(array: Any, back: bool = False) -> Any:
    """Each row's next row's value (``back``: the previous row's), null past the end."""
    import pyarrow as pa

    edge = pa.nulls(1, array.type)
    return pa.concat_arrays([edge, array[:-1]]) if back else pa.concat_arrays([array[1:], edge])


def _rows(table: Any, loc: delta.Location) -> Any:
    """The Delta table's rows as a ``pyarrow.Table``.

    Not ``table.to_pyarrow_table()``: its file system calls back into delta-rs from
    pyarrow's threads, and a process that used it aborted at exit more often than not
    ("terminate called without an active exception", deltalake 1.6 with pyarrow 26).
    A local table is read through pyarrow's own file system; elsewhere the scan
    stays on this thread.
    """
    from pyarrow import fs

    if loc.is_local:
        return table.to_pyarrow_table(filesystem=fs.SubTreeFileSystem(loc.root, loc.filesystem))
    return table.to_pyarrow_dataset().to_table(use_threads=False)
