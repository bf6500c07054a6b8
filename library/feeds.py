"""Change feeds: the rows a database emits, read as :class:`~statemachines.library.Upsert` commands.

A :class:`ChangeFeed` names the key columns, the value columns, the sequence
columns (highest wins, in any arrival order) and what marks a delete. Each row
becomes one event ``(key, symbol, time, order)``: the key is the key column's cell
(a tuple of cells for several), the symbol the tuple of value cells (``None`` for a
delete), the time the first sequence column and the order the rest (one cell, or a
tuple). ``ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})``::

    row (id, name, city, lsn, op)      event or rejection
    1, Ada, London, 100, c             (1, ('Ada', 'London'), 100, None)
    1, Ada, Paris, 104, u              (1, ('Ada', 'Paris'), 104, None)
    1, -, -, 107, d                    (1, None, 107, None)              delete
    None, Bob, Oslo, 108, c            rejected null_key: key column id is null
    2, Eve, Rome, 109, None            rejected missing_field: delete marker op is null
    3, Kim, Nice, None, c              rejected null_time: sequence column lsn is null

A row that lacks a field the rules read is rejected with reason ``missing_field``;
it is never taken for a delete: only ``delete_when`` deletes. A null value cell is
a value (as in SQL). The same rules run on Spark as column expressions
(:mod:`statemachines.spark.feeds`).

Debezium envelopes (``envelope="debezium"``, as Kafka Connect's JSON converter
writes them, with or without its ``schema``/``payload`` wrapper) are read as such:
keys and values are fields of ``after`` (of ``before`` for a delete), sequence
columns are paths in the envelope (``source.lsn``, ``ts_ms``)::

    op        row image   event
    c, u, r   after       upsert of after's values; a ``u`` whose ``before``
                          holds another key also deletes that key
    d         before      delete of before's key
    t         -           rejected bad_operation (a TRUNCATE names no key)
    other     -           rejected bad_operation

A value Debezium did not send (PostgreSQL's unchanged TOASTed columns, without
``REPLICA IDENTITY FULL``) arrives as its placeholder, ``__debezium_unavailable_value``
(base64-encoded for a bytes column): such a row is rejected (``missing_field``)
rather than storing the placeholder as the value.

Delta Lake's change data feed (``envelope="delta"``: the rows of
``DeltaTable.load_cdf()``, or of Spark's ``readChangeFeed``) is read by its
``_change_type``; ``sequence_by`` defaults to ``_commit_version`` (the commit
orders the changes: a delete or preimage row holds the old row's cells), and
within one commit a key's deletes come before its upserts (an overwrite deletes
every row and inserts the new ones in one commit)::

    _change_type       event
    update_preimage    delete of the row's key: an update that kept the key
                       upserts it again (its postimage), one that changed the key
                       leaves the old key deleted
    delete             delete
    insert             upsert, after the commit's deletes
    update_postimage   upsert, after the commit's deletes
    other, null        rejected bad_operation, missing_field

An update of ``id`` 1 to 7 (one commit, version 3) deletes key 1 and inserts 7;
an update of its name only changes key 1's value::

    id  name  _change_type      _commit_version    updates at time 3
    1   Ada   update_preimage   3                  (1, Ada) -1
    7   Ada   update_postimage  3                  (7, Ada) +1
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from statemachines import (
    Event,
    InvalidArgument,
    LocalRuntime,
    PersistedArrangement,
    Reason,
    Rejected,
)
from statemachines.columns import column_to_python
from statemachines.library.upsert import Upsert
from statemachines.scd import END_AT, START_AT, ScdTable
from statemachines.updates import hashable

__all__ = [
    "DEBEZIUM_DELETE",
    "DEBEZIUM_TRUNCATE",
    "DEBEZIUM_UPSERTS",
    "ENCODED_TWICE",
    "TOMBSTONE",
    "TRUNCATE",
    "UNAVAILABLE",
    "UNAVAILABLE_FORMS",
    "DELTA_CHANGES",
    "DELTA_COLUMNS",
    "DELTA_DELETES",
    "ChangeFeed",
    "FeedColumns",
    "FeedResult",
    "run_feed",
    "scd_tables",
    "unavailable_detail",
]

DEBEZIUM_UPSERTS = ("c", "u", "r")  # create, update, read (a snapshot row)
DEBEZIUM_DELETE = "d"
DEBEZIUM_TRUNCATE = "t"
TRUNCATE = (
    "op 't' is a TRUNCATE, which deletes every row of the table: it is not applied, as it names no "
    "key (delete the keys with a run of deletes; Debezium skips truncates unless skipped.operations leaves t out)"
)
# Debezium's unavailable.value.placeholder default, and its base64 form (a bytes column in JSON)
UNAVAILABLE = "__debezium_unavailable_value"
UNAVAILABLE_FORMS = (UNAVAILABLE, "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")
TOMBSTONE = "an empty envelope (no op, before or after): a Kafka tombstone, which Debezium writes after a delete, changes nothing"
ENCODED_TWICE = (
    "the message's payload is text, not a record: an envelope encoded as JSON twice; decode the payload "
    "first (json.loads, or Spark's F.from_json)"
)
# Delta's change data feed: a change type's rank among a commit's changes of a key
DELTA_CHANGES = {"delete": 0, "update_preimage": 0, "insert": 1, "update_postimage": 1}
DELTA_DELETES = ("delete", "update_preimage")
DELTA_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
ENVELOPES = ("flat", "debezium", "delta")
_MISSING = object()


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(f"column names must be non-empty strings, got {value!r}")
    return names


def _optional_names(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _names(value)


def _markers(value: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``{"op": "d"}`` or ``{"op": ["d", "D"]}`` as ``(("op", ("d",)),)``."""
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"delete_when maps a column to the value(s) that mark a delete, e.g. {{'op': 'd'}}; got {value!r}")
    return tuple(
        (column, tuple(marks) if isinstance(marks, list | tuple | set | frozenset) else (marks,))
        for column, marks in value.items()
    )


@attrs.frozen
class FeedColumns:
    """A feed's columns resolved against the columns a source has."""

    keys: tuple[str, ...]
    values: tuple[str, ...]
    sequence_by: tuple[str, ...]
    markers: tuple[tuple[str, tuple[Any, ...]], ...]

    @property
    def read(self) -> tuple[str, ...]:
        """Every column a row must have."""
        return (*self.keys, *self.values, *self.sequence_by, *(c for c, _ in self.markers))


@attrs.frozen
class ChangeFeed:
    """How to read a change feed's rows as upsert commands; see the module documentation.

    Args:
        keys: the key column(s).
        sequence_by: the column(s) whose values order a key's changes, compared
            lexicographically; the highest wins. For Debezium, paths in the envelope;
            for Delta, default ``_commit_version``.
        values: the value column(s); default: every column but the keys, the
            sequence columns, the delete markers and ``except_columns``.
        except_columns: columns left out of the default values.
        delete_when: ``{column: value or [values]}``: a row whose columns all hold one
            of their values is a delete. Not for Debezium or Delta (their rows say).
        envelope: ``"flat"`` (a row per change), ``"debezium"`` or ``"delta"``.
    """

    keys: tuple[str, ...] = attrs.field(converter=_names)
    sequence_by: tuple[str, ...] = attrs.field(default=(), converter=_names)
    values: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_names)
    except_columns: tuple[str, ...] = attrs.field(default=(), converter=_names)
    delete_when: tuple[tuple[str, tuple[Any, ...]], ...] = attrs.field(default=(), converter=_markers)
    envelope: str = "flat"

    def __attrs_post_init__(self) -> None:
        if not self.keys:
            raise InvalidArgument("a change feed needs at least one key column (keys=[...])")
        if self.envelope not in ENVELOPES:
            raise InvalidArgument(f"envelope is one of {', '.join(ENVELOPES)}, not {self.envelope!r}")
        if self.envelope == "delta" and not self.sequence_by:
            object.__setattr__(self, "sequence_by", ("_commit_version",))
        if not self.sequence_by:
            raise InvalidArgument("a change feed needs at least one sequence column (sequence_by=[...])")
        if self.envelope == "debezium" and self.delete_when:
            raise InvalidArgument("a Debezium feed's op says what is a delete; drop delete_when")
        if self.envelope == "delta" and self.sequence_by[0] != "_commit_version" and (
            self.sequence_by[:2] != ("_commit_timestamp", "_commit_version")
        ):
            raise InvalidArgument(
                "a Delta change feed is ordered by its commits: sequence_by begins with _commit_version "
                "(or _commit_timestamp, _commit_version), as a delete or update_preimage row holds the "
                f"old row's cells; got {list(self.sequence_by)}"
            )
        if self.envelope == "delta" and self.delete_when:
            raise InvalidArgument("a Delta change feed's _change_type says what is a delete; drop delete_when")
        if self.values is not None and self.except_columns:
            raise InvalidArgument("give values or except_columns, not both")
        if self.values == ():
            raise InvalidArgument("values names no column; a feed needs at least one value column")
        for role in ("keys", "sequence_by", "values", "except_columns"):
            names = getattr(self, role) or ()
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise InvalidArgument(f"{role} names {', '.join(twice)} more than once: {list(names)}")

    def columns(self, available: Sequence[str]) -> FeedColumns:
        """The feed's columns, given the columns (fields of ``after`` for Debezium) a source has.

        Raises:
            InvalidArgument: a named column is not among ``available``, or no value
                column is left.
        """
        markers = self.delete_when
        named = [*self.keys, *(self.values or ()), *self.except_columns, *(c for c, _ in markers)]
        if self.envelope != "debezium":
            named += self.sequence_by
        if self.envelope == "delta":
            named.append("_change_type")
        missing = [c for c in dict.fromkeys(named) if c not in available]
        if missing:
            where = "after" if self.envelope == "debezium" else "the feed"
            raise InvalidArgument(
                f"{where} has no column(s) {', '.join(missing)}; it has {', '.join(available) or 'none'}"
            )
        if self.values is not None:
            values = self.values
        else:
            taken = {*self.keys, *self.sequence_by, *self.except_columns, *(c for c, _ in markers)}
            if self.envelope == "delta":
                taken.update(DELTA_COLUMNS)
            values = tuple(c for c in available if c not in taken)
        if not values:
            raise InvalidArgument(f"no value column is left of {', '.join(available)}; name values=[...]")
        return FeedColumns(self.keys, values, self.sequence_by, markers)

    def events(self, rows: Iterable[Mapping[str, Any]], columns: FeedColumns | None = None) -> list[Event | Rejected]:
        """The events (or rejection) of each row, in order; ``columns`` default: the
        first row that names columns (where no row does, as tombstones, each row is
        refused with its reason)."""
        rows = iter(rows)
        ahead: list[Any] = []  # rows up to the first one that names columns (tombstones may come first)
        if columns is None:
            ahead, available = _leading(self, rows)
            if not ahead:
                return []
            if available is None:  # each row will be refused, saying why
                columns = FeedColumns(self.keys, self.values or (), self.sequence_by, self.delete_when)
            else:
                columns = self.columns(available)
        changes = self.reader(columns)
        return [found for row in itertools.chain(ahead, rows) for found in changes(row)]

    def reader(self, columns: FeedColumns) -> Any:
        """The function from one row (a mapping) to its events, or its rejection: one
        event, or two for a Debezium update that moved a row to another key (the old
        key's delete, then the new key's upsert)."""
        keys, values, sequence = columns.keys, columns.values, columns.sequence_by
        markers = columns.markers
        one_key, n_sequence = len(keys) == 1, len(sequence)
        debezium, delta = self.envelope == "debezium", self.envelope == "delta"

        def event(row: Mapping[str, Any] | None) -> Event | Rejected:
            if row is None:  # a null message, as Kafka's tombstones: a row of no fields
                row = {}
            elif not isinstance(row, Mapping):
                return Rejected(
                    Event(None, None, None), Reason.MALFORMED,
                    f"a feed row maps column names to cells; got {type(row).__name__} {row!r}",
                )
            delete, refusal, envelope, rank = False, None, row, None
            if delta:
                change = row.get("_change_type")
                refusal = _delta_refusal(change)
                delete, rank = change in DELTA_DELETES, DELTA_CHANGES.get(change)
            elif debezium:
                envelope = _payload(row)
                refusal = _debezium_refusal(envelope)
                if envelope is row and isinstance(row.get("payload"), str | bytes) and "op" not in row:
                    refusal = Reason.MALFORMED, ENCODED_TWICE
                delete = envelope.get("op") == DEBEZIUM_DELETE
                image = envelope.get("before" if delete else "after")
                row = image if isinstance(image, Mapping) else {}
            key_cells = [row.get(c, _MISSING) for c in keys]
            value_cells = [] if delete else [row.get(c, _MISSING) for c in values]
            seq_cells = [_path(envelope, c) if debezium else row.get(c, _MISSING) for c in sequence]
            key = _cell(key_cells[0]) if one_key else tuple(map(_cell, key_cells))
            symbol = None if delete else tuple(map(_cell, value_cells))
            time = _cell(seq_cells[0])
            order = None if n_sequence == 1 else _cell(seq_cells[1]) if n_sequence == 2 else tuple(map(_cell, seq_cells[1:]))
            if delta:  # within a commit, deletes first
                order = rank if order is None else (*(order if n_sequence > 2 else (order,)), rank)
            found = Event(key, symbol, time, order)
            if refusal is not None:
                return Rejected(found, *refusal)
            names = (*keys, *(() if delete else values), *sequence)
            named = zip(names, (*key_cells, *value_cells, *seq_cells), strict=True)
            missing = [c for c, cell in named if cell is _MISSING]
            if markers:
                delete = True
            for column, marks in markers:  # a delete when every marker holds one of its values
                mark = row.get(column, _MISSING)
                if mark is _MISSING:
                    missing.append(column)
                elif mark is None:
                    return Rejected(found, Reason.MISSING_FIELD, f"delete marker {column} is null")
                else:
                    delete = delete and mark in marks
            if missing:
                return Rejected(found, Reason.MISSING_FIELD, f"the row has no field(s) {', '.join(missing)}")
            if debezium and not delete:
                unsent = [c for c, cell in zip(values, value_cells, strict=True) if isinstance(cell, str) and cell in UNAVAILABLE_FORMS]
                if unsent:
                    return Rejected(found, Reason.MISSING_FIELD, unavailable_detail(', '.join(unsent)))
            if delete:
                found = found._replace(symbol=None)
            for column, cell in zip(keys, key_cells, strict=True):
                if cell is None:
                    return Rejected(found, Reason.NULL_KEY, f"key column {column} is null")
            for column, cell in zip(sequence, seq_cells, strict=True):
                if cell is None:
                    return Rejected(found, Reason.NULL_TIME, f"sequence column {column} is null")
            return found

        def changes(row: Mapping[str, Any] | None) -> tuple[Event | Rejected, ...]:
            found = event(row)
            if debezium and type(found) is Event and found.symbol is not None:
                moved = _moved_from(_payload(row or {}), keys, found.key)
                if moved is not _MISSING:
                    return Event(moved, None, found.time, found.order), found
            return (found,)

        return changes


def _cell(cell: Any) -> Any:
    """A cell as an event holds it: hashable (lists become tuples), absent as ``None``."""
    return None if cell is _MISSING else hashable(cell)


def _payload(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Kafka Connect JSON message's envelope: its ``payload``, with or without the
    ``schema`` beside it, when the row has no ``op`` of its own (as on Spark)."""
    payload = row.get("payload")
    return payload if isinstance(payload, Mapping) and "op" not in row else row


def _debezium_refusal(envelope: Mapping[str, Any]) -> tuple[Reason, str] | None:
    op = envelope.get("op")
    if op is None and envelope.get("before") is None and envelope.get("after") is None:
        return Reason.MISSING_FIELD, TOMBSTONE
    if op is None:
        return Reason.MISSING_FIELD, "the envelope has no op"
    if op == DEBEZIUM_DELETE:
        image = "before"
    elif op in DEBEZIUM_UPSERTS:
        image = "after"
    elif op == DEBEZIUM_TRUNCATE:
        return Reason.BAD_OPERATION, TRUNCATE
    else:
        return Reason.BAD_OPERATION, f"op {op!r} is not applied (c, u, r upsert; d deletes)"
    if not isinstance(envelope.get(image), Mapping):
        return Reason.MISSING_FIELD, f"op {op!r} without {image}"
    return None


def unavailable_detail(columns: str) -> str:
    """Why a Debezium row whose ``columns`` (names, comma-separated) hold the
    unavailable-value placeholder is refused."""
    return (
        f"column(s) {columns} hold Debezium's placeholder for a value it did not send "
        f"({UNAVAILABLE}: an unchanged TOASTed column); set REPLICA IDENTITY FULL on the source "
        f"table, or leave the column(s) out with except_columns"
    )


def _moved_from(envelope: Mapping[str, Any], keys: tuple[str, ...], key: Any) -> Any:
    """The key a Debezium update moved its row from: ``before``'s key where it holds
    every key column, none null, and differs from ``key`` (``_MISSING`` otherwise)."""
    before = envelope.get("before")
    if envelope.get("op") != "u" or not isinstance(before, Mapping):
        return _MISSING
    cells = [before.get(c) for c in keys]
    if any(cell is None for cell in cells):
        return _MISSING
    old = hashable(cells[0]) if len(keys) == 1 else tuple(map(hashable, cells))
    return old if old != key else _MISSING


def _delta_refusal(change: Any) -> tuple[Reason, str] | None:
    if change is None:
        return Reason.MISSING_FIELD, "the row has no _change_type"
    if change not in DELTA_CHANGES:
        return Reason.BAD_OPERATION, (
            f"_change_type {change!r} is not applied (insert, update_postimage upsert; delete, update_preimage delete)"
        )
    return None


def _image_fields(row: Mapping[str, Any]) -> list[str]:
    envelope = _payload(row)
    image = envelope.get("after") or envelope.get("before") or {}
    return list(image)


def _path(envelope: Mapping[str, Any], path: str) -> Any:
    """``source.lsn`` of an envelope; ``_MISSING`` where a step is absent."""
    cell: Any = envelope
    for step in path.split("."):
        if not isinstance(cell, Mapping) or step not in cell:
            return _MISSING
        cell = cell[step]
    return cell


@attrs.frozen
class FeedResult:
    """What a feed run did: the runtime's result, the feed's columns, its SCD tables."""

    result: Any  # a RunResult locally, a BatchResult on Spark
    columns: FeedColumns | None  # None: the feed had no row to say which columns it has
    scd1: ScdTable | None = None
    scd2: ScdTable | None = None
    arrangement: PersistedArrangement | None = None  # locally, the arrangement published into


def scd_tables(
    columns: FeedColumns, scd1: Any = None, scd2: Any = None, start: str = START_AT, end: str = END_AT,
    storage_options: dict[str, str] | None = None,
) -> tuple[ScdTable | None, ScdTable | None]:
    """The SCD tables of a feed at the paths given (``None``: no such table)."""
    keys, values, options = columns.keys, columns.values, storage_options
    one = ScdTable(scd1, keys, values, scd_type=1, storage_options=options) if scd1 is not None else None
    two = ScdTable(scd2, keys, values, start=start, end=end, storage_options=options) if scd2 is not None else None
    return one, two


def run_feed(
    feed: ChangeFeed,
    rows: Any,
    *,
    into: Any = None,
    scd1: Any = None,
    scd2: Any = None,
    start: str = START_AT,
    end: str = END_AT,
    storage_options: dict[str, str] | None = None,
) -> FeedResult:
    """Run a change feed's rows through :class:`Upsert` locally, and refresh its SCD tables.

    Args:
        feed: how to read the rows.
        rows: mappings (e.g. ``json.loads`` of each line), a ``pyarrow.Table`` or a
            pandas ``DataFrame``.
        into: a persisted arrangement (path) to continue and publish into.
        scd1, scd2: paths of SCD type 1 and type 2 tables to keep (need ``into``).
        start, end: the type 2 table's interval columns.
        storage_options: the object store's settings for the arrangement and the
            SCD tables (see :func:`statemachines.delta.location`).

    Returns:
        A :class:`FeedResult`; its ``result.rejected`` holds each refused row with
        its reason, beside the runtime's own rejections.
    """
    if (scd1 is not None or scd2 is not None) and into is None:
        raise InvalidArgument("SCD tables are kept from an arrangement: give into=...")
    rows, available = _rows_and_columns(feed, rows)
    columns = None if available is None else feed.columns(available)
    arrangement = PersistedArrangement(into, storage_options=storage_options) if into is not None else None
    runtime = LocalRuntime(Upsert(), into=arrangement)
    runtime.feed(feed.events(rows, columns))  # no row naming a column (tombstones): each is refused
    result = runtime.finish()
    tables = scd_tables(columns, scd1, scd2, start, end, storage_options) if columns is not None else (None, None)
    for table in tables:
        if table is not None:
            table.refresh(into)
    return FeedResult(result, columns, *tables, arrangement=arrangement)


def _rows_and_columns(feed: ChangeFeed, rows: Any) -> tuple[list[Any], list[str] | None]:
    """The rows as mappings, and the columns they have (``None``: no row says)."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns") and hasattr(rows, "dtypes"):  # a pandas DataFrame
        import pyarrow as pa

        rows = pa.Table.from_pandas(rows, preserve_index=False)  # missing cells as nulls, numbers as Python's
    if hasattr(rows, "to_pylist") and hasattr(rows, "schema"):  # a pyarrow table or batch
        schema = rows.schema
        if feed.envelope == "debezium":
            if "after" not in schema.names and "payload" in schema.names:
                schema = schema.field("payload").type
            available = [f.name for f in schema.field("after").type]
        else:
            available = list(schema.names)
        return _mappings(rows), available
    rows = list(rows)
    return rows, _leading(feed, iter(rows))[1]


def _mappings(table: Any) -> list[dict[str, Any]]:
    """A pyarrow table's rows as dicts, records within as dicts too (``to_pylist``);
    a date or time beyond Python's years as an :class:`~statemachines.updates.Unreadable`,
    which the intake refuses."""
    try:
        return table.to_pylist()
    except (OverflowError, ValueError):
        columns = {name: _cells(table.column(name)) for name in table.column_names}
        return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _cells(column: Any) -> list[Any]:
    """The cells of an Arrow column as ``to_pylist`` gives them (records as dicts),
    but read by :func:`~statemachines.columns.column_to_python` within."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_struct(column.type):
        return column_to_python(column)
    fields = {f.name: _cells(part) for f, part in zip(column.type, column.flatten(), strict=True)}
    rows = zip(*fields.values(), strict=True) if fields else [()] * len(column)
    return [dict(zip(fields, row, strict=True)) if ok else None
            for ok, row in zip(column.is_valid().to_pylist(), rows, strict=True)]


def _leading(feed: ChangeFeed, rows: Iterator[Any]) -> tuple[list[Any], list[str] | None]:
    """The rows taken up to the first that names columns, and its columns (``None``:
    no row names any)."""
    ahead = []
    for row in rows:
        ahead.append(row)
        named = _row_columns(feed, row)
        if named:
            return ahead, named
    return ahead, None


def _row_columns(feed: ChangeFeed, row: Any) -> list[str]:
    """The columns a row names (none for a row that is no mapping, or a tombstone)."""
    if not isinstance(row, Mapping):
        return []
    return _image_fields(row) if feed.envelope == "debezium" else list(row)
