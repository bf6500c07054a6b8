"""The rows a Spark run writes: one output schema for updates and rejections, the
Arrow batches Python builds of them, and key-sorted Parquet batches.

    kind      key  value  time  diff  symbol  order  reason  detail
    UPDATE    k    v      t     +1    -       -      -       -
    REJECTED  k    -      t     -     s       o      late    time 3 is below ...
    3         -    -      -     812   -       -      -       batch-3f2a....parquet

A Python task may write its rows itself (:func:`writing_files`), the updates as a
data file of the arrangement, and hand Spark only a row naming each file (kind 3 for
updates, 4 for rejected rows).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs
from pyspark.sql import types as T

from statemachines import InvalidArgument, UpdateColumns
from statemachines.columns import columns_of, typed_array
from statemachines.delta import STATE_DIR, location
from statemachines.persisted import parquet_files, set_aside
from statemachines.spark.session import scoped_conf
from statemachines.stored import WRITE_OPTIONS

__all__ = [
    "OutputRows",
    "Parts",
    "batch_name",
    "gather_files",
    "aside",
    "checked_arrays",
    "count_rows",
    "drop",
    "drop_parts",
    "move_aside",
    "output_schema",
    "schema_arrays",
    "update_rows",
    "waiting_count",
    "write_keyed",
    "write_parts",
    "writing_files",
]

UPDATE = 0
REJECTED = 1
STATE_ROW = 0
EVENT_ROW = 1
PENDING = 2  # a stream's events that wait for a later frontier
FILE_OF = {UPDATE: 3, REJECTED: 4}
"""The row kinds naming a file of rows of a kind a task wrote (``detail``: the file,
``diff``: its rows)."""
UPDATE_COLUMNS = ("key", "value", "time", "diff")
REFUSAL = "refusal"  # prepared events: why their source refused a row (EventColumns.refusal)


def output_schema(prepared: Any, value_type: Any) -> Any:
    fields = {f.name: f.dataType for f in prepared.schema.fields}
    return T.StructType(
        [
            T.StructField("kind", T.ByteType(), False),
            T.StructField("key", fields["key"], True),
            T.StructField("value", value_type, True),
            T.StructField("time", fields["time"], True),
            T.StructField("diff", T.LongType(), True),
            T.StructField("symbol", fields["symbol"], True),
            T.StructField("order", fields["order"], True),
            T.StructField("reason", T.StringType(), True),
            T.StructField("detail", T.StringType(), True),
        ]
    )


class OutputRows:
    """Output rows gathered for one Arrow record batch: updates first, then rejections.

    A partition runner hands :attr:`columns` to :func:`~statemachines.core.run_key`,
    which adds its updates there directly.
    """

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.columns = UpdateColumns()
        self.rejected: list[Any] = []  # Rejected
        self.tables: list[Any] = []  # updates as tables of key, value, time, diff

    def __len__(self) -> int:
        return len(self.columns) + len(self.rejected) + sum(table.num_rows for table in self.tables)

    def add(self, updates: Any = (), rejected: Any = ()) -> None:
        """Add updates ``((key, value), time, diff)`` and rejections."""
        self.columns.add_updates(updates)
        self.rejected.extend(rejected)

    def add_table(self, updates: Any) -> None:
        """Add updates given as a table ``key, value, time, diff`` of the schema's
        types (taken by :meth:`take_updates`)."""
        self.tables.append(updates)

    def take_updates(self) -> Any:
        """The updates gathered so far, as one table ``key, value, time, diff`` of the
        schema's types; the rejections stay for :meth:`take`."""
        tables, self.tables = self.tables, []
        schema = pa.schema([self.schema.field(name) for name in UPDATE_COLUMNS])
        given = pa.Table.from_arrays(checked_arrays(self.columns.take(), schema), schema=schema)
        return pa.concat_tables([*(table.select(list(UPDATE_COLUMNS)).cast(schema) for table in tables), given])

    def take(self) -> Any:
        """The rows gathered so far as a record batch, updates first; starts afresh."""
        if self.tables:
            raise ValueError("updates added as tables are taken with take_updates")
        keys, values, times, diffs = self.columns.take()
        rejected, self.rejected = self.rejected, []
        u, r = len(values), len(rejected)
        events = [x.event for x in rejected]
        r_keys, symbols, r_times, orders = columns_of(events, 4)
        if r:
            keys.extend(r_keys)
            values.extend([None] * r)
            times.extend(r_times)
            diffs.extend([None] * r)  # type: ignore[list-item]
        columns = (
            [UPDATE] * u + [REJECTED] * r,
            keys,
            values,
            times,
            diffs,
            [None] * u + symbols,
            [None] * u + orders,
            [None] * u + [str(x.reason) for x in rejected],
            [None] * u + [x.detail for x in rejected],
        )
        return pa.RecordBatch.from_arrays(checked_arrays(columns, self.schema), schema=self.schema)


def schema_arrays(given: dict[str, Any], schema: Any, rows: int) -> list[Any]:
    """An array of ``rows`` items per field of ``schema``: ``given``'s, cast to the
    field's type, else nulls."""
    return [given[f.name].cast(f.type) if f.name in given else pa.nulls(rows, f.type) for f in schema]


def update_rows(columns: dict[str, Any], schema: Any) -> Any:
    """Output rows of kind ``UPDATE`` (one record batch of ``schema``, the output
    schema) of the arrays or chunked arrays ``key, value, time, diff``."""
    given = {name: c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for name, c in columns.items()}
    rows = len(given["diff"])
    given["kind"] = pa.array(np.full(rows, UPDATE, np.int8))
    return pa.RecordBatch.from_arrays(schema_arrays(given, schema, rows), schema=schema)


def checked_arrays(columns: Any, schema: Any) -> list[Any]:
    """Python ``columns`` as arrays of the schema's types; a value that does not fit
    is the machine's error, named."""
    arrays = []
    for column, field in zip(columns, schema, strict=True):
        try:
            arrays.append(typed_array(column, field.type))
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidArgument(
                f"the machine produced a {field.name} that does not fit the column type "
                f"{field.type}: {exc}. Declare the value type with value_type=..."
            ) from exc
    return arrays


ROW_GROUP_BYTES = ("parquet.block.size", str(1 << 20))
"""Small row groups: a point read of the arrangement decodes one (Spark's default is 128 MiB)."""


def keyed(frame: Any, *first: str) -> Any:
    """``frame`` sorted by key within each file (after ``first``): row groups hold key ranges."""
    return frame.sortWithinPartitions(*first, "key")


def write_keyed(rows: Any, path: str, relative: str) -> None:
    """Write ``rows`` sorted by key (row groups of key ranges, for point reads) as the
    Parquet file ``relative`` of the arrangement at ``path``."""
    loc = location(path)
    with contextlib.suppress(pa.ArrowNotImplementedError):  # a struct key stays unsorted
        rows = rows.sort_by("key")
    _make_parent(loc, relative)
    pq.write_table(rows, loc.path(relative), filesystem=loc.filesystem, **WRITE_OPTIONS)


def _make_parent(loc: Any, relative: str) -> None:
    """Create the folder the file ``relative`` goes in (the root itself included)."""
    parent = relative.rpartition("/")[0]
    loc.filesystem.create_dir(loc.path(parent) if parent else loc.root)


def count_rows(loc: Any, relative: str) -> int:
    """The rows of the Parquet files under ``relative``, from their footers."""

    return int(ds.dataset(loc.path(relative), filesystem=loc.filesystem, format="parquet").count_rows())


def writing_files(
    function: Callable[[Iterator[Any]], Iterator[Any]], into: str, name: str
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``function`` (a partition function yielding output rows) with its rows written
    by the task itself, in the order they come: the updates as one data file of the
    arrangement ``into``, the rejected rows as one file under ``name/tasks`` (the
    batch folder :func:`write_parts` or :func:`gather_files` completes). Spark gets
    only a row naming each file (of kind ``FILE_OF[UPDATE]`` or ``FILE_OF[REJECTED]``,
    the file in ``detail``, its rows in ``diff``): the rows make no Arrow trip back
    to Spark and meet no Spark writer.

    A task that fails leaves its files unnamed: nothing publishes them; the batch
    folder goes, and the arrangement's vacuum deletes an unnamed data file.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        loc = location(into)
        files = {
            UPDATE: _FileOut(loc, f"batch-{uuid.uuid4().hex}.parquet", UPDATE_COLUMNS),
            REJECTED: _FileOut(loc, f"{name}/tasks/rejected-{uuid.uuid4().hex}.parquet"),
        }
        schema = None
        try:
            for batch in function(batches):
                schema = batch.schema
                for kind, out in files.items():
                    out.add(batch, kind)
        finally:
            for out in files.values():
                out.close()
        named = [(FILE_OF[kind], out.relative, out.rows) for kind, out in files.items() if out.rows]
        if named:
            kinds, names, rows = zip(*named, strict=True)
            given = {"kind": pa.array(kinds, pa.int8()), "detail": pa.array(names), "diff": pa.array(rows)}
            yield pa.RecordBatch.from_arrays(schema_arrays(given, schema, len(named)), schema=schema)

    return run


class _FileOut:
    """The rows of one kind a task writes to one file (opened with the first row):
    ``columns``, or all but ``kind`` (as Spark writes a partition of ``kind``)."""

    def __init__(self, loc: Any, relative: str, columns: tuple[str, ...] | None = None) -> None:
        self.loc, self.relative, self.columns = loc, relative, columns
        self.writer: Any = None
        self.rows = 0

    def add(self, batch: Any, kind: int) -> None:
        is_kind = pc.equal(batch.column("kind"), kind)
        n = pc.sum(is_kind).as_py() or 0
        if not n:
            return
        rows = batch if n == batch.num_rows else batch.filter(is_kind)
        rows = rows.select(list(self.columns)) if self.columns else rows.drop_columns(["kind"])
        if self.writer is None:  # written as write_keyed writes, a batch at a time
            _make_parent(self.loc, self.relative)
            self.writer = pq.ParquetWriter(
                self.loc.path(self.relative), rows.schema, filesystem=self.loc.filesystem,
                use_dictionary=WRITE_OPTIONS["use_dictionary"], write_statistics=WRITE_OPTIONS["write_statistics"],
            )
        self.writer.write_batch(rows, row_group_size=WRITE_OPTIONS["row_group_size"])
        self.rows += n

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@attrs.frozen
class Parts:
    """What a run wrote in the batch folder ``name``: rows per kind, and the data
    files holding the updates (relative to the arrangement; Spark's under
    ``name/kind=0`` and those tasks wrote themselves)."""

    name: str
    counts: dict[int, int]
    update_files: list[str]


def batch_name() -> str:
    """A new batch folder's name."""
    return f"batch-{uuid.uuid4().hex}"


def write_parts(frame: Any, path: str, name: str | None = None, *, key_ordered: bool = False) -> Parts:
    """Write ``frame`` under ``path/<name>/kind=<k>`` in one job; count rows per kind.

    Each file's rows are sorted by key (row groups of key ranges, for point reads).
    ``key_ordered`` says the frame's partitions already come in key order (a run's
    output does): then the kinds are written side by side as the rows come, unsorted.
    Rows naming files tasks wrote (see :func:`writing_files`) are gathered as
    :func:`gather_files` does.
    """
    loc = location(path)
    name = name or batch_name()
    conf = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
    if key_ordered:  # a writer per kind open at once: no sort by kind, the key order stays
        conf["spark.sql.maxConcurrentOutputFileWriters"] = "4"
    else:
        frame = keyed(frame, "kind")
    with scoped_conf(frame.sparkSession, conf):
        frame.write.option(*ROW_GROUP_BYTES).partitionBy("kind").parquet(loc.uri_of(name))
    counts, named = {}, []
    for part in loc.filesystem.get_file_info(fs.FileSelector(loc.path(name))):
        if not part.base_name.startswith("kind="):
            continue
        kind, relative = int(part.base_name.removeprefix("kind=")), f"{name}/{part.base_name}"
        if kind not in FILE_OF.values():
            counts[kind] = count_rows(loc, relative)
            continue
        rows = ds.dataset(loc.path(relative), filesystem=loc.filesystem, format="parquet")
        rows = rows.to_table(columns=["detail", "diff"])
        named.append(rows.add_column(0, "kind", pa.array([kind] * rows.num_rows, pa.int8())))
        drop(path, relative)
    return gather_files(path, name, pa.concat_tables(named) if named else None, counts)


def gather_files(path: str, name: str, named: Any, counts: dict[int, int] | None = None) -> Parts:
    """The parts of the batch folder ``name`` once the files tasks wrote (``named``:
    a table of their rows ``kind, detail, diff``, or ``None``) join it: the updates'
    data files stay where they are; the rejected rows' files move to ``name/kind=1``.
    ``counts``: rows of each kind Spark wrote there. Files of failed tasks go."""
    loc = location(path)
    counts = dict(counts or {})
    files = parquet_files(loc, f"{name}/kind={UPDATE}") if counts.get(UPDATE) else []
    if named is not None:
        for kind, of in FILE_OF.items():
            mine = named.filter(pc.equal(named["kind"], of))
            if not mine.num_rows:
                continue
            counts[kind] = counts.get(kind, 0) + pc.sum(mine["diff"]).as_py()
            relative = mine["detail"].to_pylist()
            if kind == UPDATE:
                files += relative
                continue
            loc.filesystem.create_dir(loc.path(f"{name}/kind={kind}"))
            for file in relative:
                loc.filesystem.move(loc.path(file), loc.path(f"{name}/kind={kind}/{file.rpartition('/')[2]}"))
    drop(path, f"{name}/tasks")
    return Parts(name, counts, files)


def drop_parts(path: str, parts: Parts) -> None:
    """Delete what a run wrote as ``parts`` (nothing published it)."""
    drop(path, parts.name)
    loc = location(path)
    for file in parts.update_files:
        if not file.startswith(f"{parts.name}/"):
            loc.filesystem.delete_file(loc.path(file))


def aside(name: str, kind: int) -> str:
    """Where a micro-batch's rejected rows (kind 1) or pending events (kind 2) are kept.

    Not in the table's data files (they are not updates), but in its state
    directory, which Delta's vacuum leaves alone.
    """
    what = "rejected" if kind == REJECTED else "pending"
    return f"{STATE_DIR}/{what}-{name}"


def move_aside(into: str, name: str, kind: int) -> str | None:
    """Move the rows of ``kind`` that :func:`write_parts` wrote as ``name`` to
    :func:`aside`; return where they are now (``None``: there were none)."""
    return set_aside(into, f"{name}/kind={kind}", aside(name, kind).removeprefix(f"{STATE_DIR}/"))


def drop(into: str, relative: str) -> None:
    """Delete the directory ``relative`` of ``into`` (if it is there): one of an
    arrangement that no version names any more, or a run's scratch folder."""
    loc = location(into)
    if loc.filesystem.get_file_info(loc.path(relative)).type != fs.FileType.NotFound:
        loc.filesystem.delete_dir(loc.path(relative))


def waiting_count(waiting: dict[str, Any]) -> int:
    """How many events a bucketed stream's buckets hold not yet final, by its
    progress's ``waiting`` (bucket -> ``[count, earliest time]``)."""
    return sum(count for count, _ in waiting.values())
