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
from collections.abc import Iterable
from typing import Any

import attrs

from statemachines import delta
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
        source = self._source(updates, latest.schema)
        if table is None:
            table = self._create(source.schema)
        self._merge(table, source, latest.version)
        return True

    def read(self, version: int | None = None) -> Any:
        """The table (a ``pyarrow.Table``) at ``version`` (default: the latest), sorted."""
        from deltalake import DeltaTable

        table = DeltaTable(self.path, version=version, storage_options=self.storage_options)
        order = [(c, "ascending") for c in self.keys + ((self.start,) if self.scd_type == 2 else ())]
        return table.to_pyarrow_table().select(list(self.columns)).sort_by(order)

    # -- building the source of a merge ------------------------------------------

    def _source(self, updates: list[tuple[Any, Any, Any, int]], schema: Any) -> Any:
        """The rows to merge: per key, the intervals the new updates open and close."""
        import pyarrow as pa

        rows: list[dict[str, Any]] = []
        for key, changes in _by_key(updates):
            keyed = dict(zip(self.keys, _fields(key, len(self.keys), "key"), strict=True))
            closes, intervals, current = _intervals(key, changes)
            if self.scd_type == 2:
                if closes is not None:
                    rows.append({**keyed, self.end: closes, ACTION: "close"})
                for value, start, end in intervals:
                    rows.append({**keyed, **self._valued(value), self.start: start, self.end: end, ACTION: "open"})
            elif current is not None or closes is not None or intervals:
                present = current is not None
                rows.append({**keyed, **self._valued(current[0] if present else None), ACTION: present})
        return pa.Table.from_pylist(rows, schema=self._arrow_schema(schema))

    def _valued(self, value: Any) -> dict[str, Any]:
        cells = [None] * len(self.values) if value is None else _fields(value, len(self.values), "value")
        return dict(zip(self.values, cells, strict=True))

    def _arrow_schema(self, arrangement: Any) -> Any:
        import pyarrow as pa

        def spread(names: tuple[str, ...], field: Any) -> list[Any]:
            if len(names) == 1 and not (pa.types.is_struct(field.type) and field.type.num_fields == 1):
                return [pa.field(names[0], field.type)]
            if not pa.types.is_struct(field.type) or field.type.num_fields != len(names):
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


def _updates_from(loc: Any, snapshot: Any, lower: Any) -> list[tuple[Any, Any, Any, int]]:
    """The arrangement's updates at or after ``lower`` (all of them when ``None``)."""
    import pyarrow.dataset as ds

    files = [
        loc.path(f)
        for batch in snapshot.state["batches"]
        if lower is None or batch["upper"] is None or decode_time(batch["upper"]) > lower
        for f in batch["files"]
    ]
    if not files:
        return []
    data = ds.dataset(files, schema=snapshot.schema, filesystem=loc.filesystem, format="parquet")
    found = data.to_table(filter=None if lower is None else ds.field("time") >= lower)
    columns = [found.column(c).to_pylist() for c in ("key", "value", "time", "diff")]
    return list(zip(*columns, strict=True))


def _by_key(updates: list[tuple[Any, Any, Any, int]]) -> Iterable[tuple[Any, list[tuple[Any, Any, int]]]]:
    """Updates grouped by key, each key's in time order, removals before additions."""
    keyed = sorted(((_hashable(k), v, t, d) for k, v, t, d in updates), key=lambda u: (u[0], u[2], u[3]))
    start = 0
    for i in range(1, len(keyed) + 1):
        if i == len(keyed) or keyed[i][0] != keyed[start][0]:
            yield keyed[start][0], [(v, t, d) for _, v, t, d in keyed[start:i]]
            start = i


def _intervals(key: Any, changes: list[tuple[Any, Any, int]]) -> tuple[Any, list[tuple[Any, Any, Any]], Any]:
    """A key's new updates as: when its stored value ends (or ``None``), the intervals
    of the values they add (``end`` ``None`` while held), and the value it holds after
    them (a 1-tuple, or ``None`` for none)."""
    closes, held = None, None  # held: (value, start) added by these updates
    intervals: list[tuple[Any, Any, Any]] = []
    for value, time, diff in changes:
        if diff == -1 and held is not None and held[0] == value:
            intervals.append((value, held[1], time))
            held = None
        elif diff == -1 and held is None and closes is None and not intervals:
            closes = time
        elif diff == 1 and held is None:
            held = (value, time)
        else:
            raise InvalidArgument(
                f"key {key!r} has several values at once (update {value!r} {time!r} {diff:+d}); "
                f"an SCD table is of a collection with one value per key, as Upsert keeps"
            )
    if held is not None:
        intervals.append((held[0], held[1], None))
    return closes, intervals, None if held is None else (held[0],)


def _hashable(cell: Any) -> Any:
    if isinstance(cell, dict):  # a struct read from Parquet
        return tuple(_hashable(v) for v in cell.values())
    if isinstance(cell, list):
        return tuple(_hashable(v) for v in cell)
    return cell


def _fields(cell: Any, n: int, what: str) -> list[Any]:
    """A key's or value's cells, one per column."""
    if isinstance(cell, dict):
        cell = tuple(cell.values())
    if n == 1 and not (isinstance(cell, tuple) and len(cell) == 1):
        return [cell]
    if not isinstance(cell, tuple) or len(cell) != n:
        raise InvalidArgument(f"the {what} {cell!r} does not have {n} fields")
    return list(cell)
