"""An arrangement persisted as a Delta Lake table (see :mod:`statemachines.delta`).

Every append, compaction and micro-batch is one Delta commit, so the table is one
any engine reads (Spark with Delta, DuckDB, Polars, delta-rs) and every reader sees
whole versions. Keys and values are typed columns (tuples as structs, see
:mod:`statemachines.columns`); a value no column can hold is refused before it is
stored, never pickled.

    call                               Delta commit             files
    PersistedArrangement.create(uri)   none yet (state only)    _statemachines/state-0
    append(updates, 0, 2)              version 0: add           batch-<id>.parquet
    compact(2)                         version 1: add, remove   merged file added; old
                                       (dataChange false)       ones stay until vacuum()

New updates are files of their own (``dataChange`` true), so the table's change data
feed is the appended updates, each once (see :func:`delta.commit`).

A writer that dies at any point leaves the last published version readable;
replaying an append that was already published is a no-op.
"""

from __future__ import annotations

import copy
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from statemachines import delta
from statemachines._gc import gc_paused
from statemachines.arrangement import Arrangement, Batch
from statemachines.columns import (
    BEYOND_STORED,
    MAX_TYPE_NESTING,
    arrow_array,
    column_to_python,
    fixed_type,
    nesting_problem,
    shape_of,
    storage_problem,
    type_nesting,
    unified_shape,
)
from statemachines.delta import DamagedArrangement, Location, Snapshot
from statemachines.errors import InvalidArgument
from statemachines.stored import SMALL_BATCH, WRITE_OPTIONS, StoredBatch, merge_tables
from statemachines.times import decode_time, encode_time

__all__ = [
    "REJECTED_COLUMNS",
    "DamagedArrangement",
    "PersistedArrangement",
    "check",
    "is_replay",
    "parquet_files",
    "publish_batch",
    "read_state",
    "rejected_files",
    "rejected_table",
    "same_query",
    "set_aside",
]


UPDATE_COLUMNS = ("key", "value", "time", "diff")
REJECTED_COLUMNS = ("key", "symbol", "time", "order", "reason", "detail")
"""The columns of the rejected events kept with an arrangement (see
:meth:`PersistedArrangement.keep_rejected`)."""

PYTHON_MERGE = 1_000_000
"""Batches that must merge in Python (struct or list columns) merge only up to this size."""

LARGE_MERGE_RATIO = 4
"""A batch larger than ``SMALL_BATCH`` merges with the next while it is at most this many
times the next one's size (smaller batches: twice). A point read reads a row group of
each large batch, so large batches shrink along the spine four times over: at most
about log4(updates / SMALL_BATCH) of them, each update rewritten about as often."""

MAINTENANCE_ATTEMPTS = 10
"""A commit that lost to another engine's table maintenance (an ``OPTIMIZE``, a
``VACUUM``) is made again on the maintained table: this many attempts in all, so a
platform that maintains the table often does not fail a stream that commits often."""

MERGES_KEPT_BYTES = 256 * 2**20
"""The files this process's merges wrote stay in memory as Arrow tables up to this many
bytes (least recently written out first), for the next merge to take instead of
reading them back: a stream's spine merges the batch its last merge wrote again and
again (in a micro-batch of 100k upserts, reading it back was a third of the merge).
A merge takes its table out; nothing else reads them."""
_merges_kept: OrderedDict[str, Any] = OrderedDict()  # data file path -> its table
_merges_kept_lock = threading.Lock()


def _new_state() -> dict[str, Any]:
    return {
        "format": delta.FORMAT,
        "sequence": 0,
        "upper": None,
        "since": None,
        "first": None,
        "boundaries": [],
        "batches": [],
        "stream": None,
        "notes": {},
    }


def read_state(path: str | os.PathLike[str], version: delta.VersionSpec | None = None) -> dict[str, Any]:
    """The published state of the arrangement at ``path`` (times still encoded).

    Its ``batches`` name their data files (``files``, relative to ``path``).

    Raises:
        InvalidArgument: there is no arrangement there, or it has another format.
        DamagedArrangement: a file of its log or state is missing or unreadable.
    """
    return delta.read_snapshot(delta.location(path), version).state


def check(path: str | os.PathLike[str], version: delta.VersionSpec | None = None) -> list[str]:
    """What is wrong with the arrangement at ``path``: one line per damaged file.

    Reads the log and state of ``version`` (default: the latest), then every data
    file that version names, whole: it must be readable, hold the columns of the
    table and as many rows as its batch says. An empty list: everything is intact.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    loc = delta.location(path)
    try:
        snapshot = delta.read_snapshot(loc, version, foreign=True)  # compared below, file by file
    except DamagedArrangement as exc:
        return [str(exc)]
    problems = []
    if snapshot.version is not None:
        named = set(delta.batch_files(snapshot.state))
        logged = delta.logged_files(loc, snapshot)
        for name in sorted(logged - named):
            problems.append(f"{loc.uri_of(name)} is in the Delta log but in no batch of the arrangement: another writer changed the table")
        for name in sorted(named - logged):
            problems.append(f"{loc.uri_of(name)} is in a batch of the arrangement but not in the Delta log: another writer changed the table")
    missing: dict[int, str] = {}  # where in problems each missing file's line goes: worded once all are known
    for batch in snapshot.state["batches"]:
        rows, readable = 0, True
        for name in batch["files"]:
            try:
                table = pq.read_table(loc.path(name), filesystem=loc.filesystem)
            except FileNotFoundError:
                missing[len(problems)] = name
                problems.append(name)
                readable = False
                continue
            except (pa.ArrowException, OSError) as exc:
                problems.append(f"{loc.uri_of(name)} is damaged ({exc}); restore it from a backup")
                readable = False
                continue
            if snapshot.schema is not None and not _same_columns(
                table.select([n for n in UPDATE_COLUMNS if n in table.column_names]).schema, snapshot.schema
            ):
                problems.append(f"{loc.uri_of(name)} has the columns {_show(table.schema)}, not the table's")
            rows += table.num_rows
        if readable and rows != batch["count"]:
            problems.append(f"the batch {batch['id']} holds {rows:,} rows; its state says {batch['count']:,}")
    if missing:
        for at, error in zip(missing, delta.missing_data_files(loc, snapshot.version, list(missing.values())), strict=True):
            problems[at] = str(error)
    return problems


def parquet_files(loc: Location, relative: str) -> list[str]:
    """The non-empty Parquet files under ``relative`` (a file, or a directory Spark wrote)."""
    from pyarrow import fs

    info = loc.filesystem.get_file_info(loc.path(relative))
    if info.type == fs.FileType.File:
        return [relative]
    if info.type == fs.FileType.NotFound:
        return []
    found = loc.filesystem.get_file_info(fs.FileSelector(loc.path(relative), recursive=True))
    prefix = loc.root.rstrip("/") + "/"
    return sorted(
        item.path.removeprefix(prefix)
        for item in found
        if item.type == fs.FileType.File
        and item.base_name.endswith(".parquet")
        and not item.base_name.startswith((".", "_"))
        and item.size
    )


def set_aside(path: str | os.PathLike[str], relative: str, name: str) -> str | None:
    """Move ``relative`` (files a writer made) into the state directory as ``name``.

    A stream's pending events and rejected rows live there: they are not updates,
    so they must not be table data, and Delta's vacuum leaves that directory alone.

    Returns:
        The new relative path, or ``None`` if there was nothing to move.
    """
    from pyarrow import fs

    loc = delta.location(path)
    if loc.filesystem.get_file_info(loc.path(relative)).type == fs.FileType.NotFound:
        return None
    target = f"{delta.STATE_DIR}/{name}"
    loc.filesystem.create_dir(loc.path(delta.STATE_DIR), recursive=True)
    loc.filesystem.move(loc.path(relative), loc.path(target))
    return target


def same_query(stream: dict[str, Any] | None, checkpoint: str | None) -> bool:
    """Whether a streaming writer's progress ``stream`` is the query's on
    ``checkpoint`` (progress written before checkpoints were noted counts as its)."""
    return (stream or {}).get("checkpoint", checkpoint) == checkpoint


def is_replay(published: dict[str, Any] | None, stream: dict[str, Any]) -> bool:
    """Whether a streaming writer's progress ``stream`` is for a micro-batch already
    published (``published``: the progress published last, if any).

    Micro-batch ids count within one streaming query, named by its ``checkpoint``: a
    query on another checkpoint (a new one continuing the arrangement) starts
    afresh at micro-batch 0. Progress without a checkpoint counts as the same query's.
    """
    return same_query(published, stream.get("checkpoint")) and stream["batch_id"] <= (published or {}).get("batch_id", -1)


def publish_batch(
    path: str | os.PathLike[str],
    name: str | list[str],
    lower: Any,
    upper: Any,
    count: int,
    *,
    stream: dict[str, Any] | None = None,
    notes: dict[str, Any] | None = None,
    merge: bool = True,
) -> bool:
    """Publish a batch another writer (e.g. Spark) wrote under ``path/name`` as one commit
    (``name``: a folder, or a list of the batch's files).

    The batch's Parquet files must already be complete; only the log is written (no
    data is loaded). The same rules as ``Arrangement.append`` hold: ``lower`` must be
    the published ``upper``, and a batch matching batches already published is an
    ignored replay. ``upper == lower`` publishes no batch, only ``stream``.

    Args:
        stream: a streaming writer's progress (``batch_id``, ``pending``,
            ``rejected``, ``checkpoint``...), published in the same commit; a
            ``batch_id`` not above the published one of the same query makes the
            call an ignored replay (:func:`is_replay`).
        notes: the writer's notes (see ``Arrangement.append``).
        merge: merge the spine now; with ``False`` a later ``merge_batches`` does
            (a stream does it while Spark computes the next micro-batch).

    Returns:
        True if published, False if it was a replay.
    """
    return PersistedArrangement.open(path).publish_files(
        name, lower, upper, count, stream=stream, notes=notes, merge=merge
    )


def _checked_schema(loc: Location, relative: str, table_schema: Any) -> Any:
    """The table columns of a new file, which must be the table's (when it has them).

    A file may hold more columns (a streaming writer's one job writes updates and
    rejections alike); readers of the table read only its columns.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    found = pq.read_schema(loc.path(relative), filesystem=loc.filesystem).remove_metadata()
    missing = [name for name in UPDATE_COLUMNS if name not in found.names]
    if missing:
        raise InvalidArgument(f"{loc.uri_of(relative)} has no column(s) {', '.join(missing)}")
    schema = pa.schema([found.field(name) for name in UPDATE_COLUMNS])
    if table_schema is not None and not _same_columns(schema, table_schema):
        raise InvalidArgument(
            f"{loc.uri_of(relative)} has the columns {_show(schema)}; the arrangement "
            f"stores {_show(table_schema)}"
        )
    return table_schema if table_schema is not None else schema


def _same_columns(one: Any, other: Any) -> bool:
    return [(f.name, f.type) for f in one] == [(f.name, f.type) for f in other]


def _show(schema: Any) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in schema)


class PersistedArrangement(Arrangement):
    """An :class:`Arrangement` kept as a Delta table at a path or URI.

    ``PersistedArrangement(uri)`` opens the arrangement there, or creates one if
    ``uri`` is missing or an empty directory; :meth:`open` and :meth:`create` do only
    one of the two. A directory holding anything else is refused, never taken over.

    Reads are served from memory (loaded at open, from one version); appends and
    compactions commit to the table before they take effect in memory.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        version: delta.VersionSpec | None = None,
        storage_options: dict[str, str] | None = None,
        _create: bool | None = None,
    ) -> None:
        super().__init__()
        delta.deltalake()  # a missing package fails here, before anything is created
        self.location = delta.location(path, storage_options)
        self.path = self.location.uri
        self._files: dict[str, list[str]] = {}  # batch id -> its data files
        self._stream: dict[str, Any] | None = None  # a streaming writer's progress
        self._pushed: set[str] = set()  # in a commit: the batches of new updates (see _push)
        self._fixed_types: dict[str, Any] = {}  # "key"/"value" -> its column's type, once an item fixed it
        self._shapes: dict[str, Any] = {}  # "key"/"value" -> the shape of the items taken while none fixed it
        self._column_types: tuple[Any, dict[str, Any]] = (None, {})  # (schema, column -> its type)
        if _create is None:  # open what looks like an arrangement (or says what it is)
            _create = not delta.present(self.location, (delta.STATE_DIR, delta.LOG_DIR, delta.LEGACY_MANIFEST))
        if not _create:
            self._load(delta.read_snapshot(self.location, version))
            return
        names = delta.contents(self.location)
        if names:
            raise InvalidArgument(
                f"{self.path} holds no arrangement and is not empty ({', '.join(names[:3])}"
                f"{', ...' if len(names) > 3 else ''}); an arrangement is created only in a "
                f"new or empty directory, so that it never takes files it did not write for its own"
            )
        self._snapshot = Snapshot(_new_state(), None)
        delta.put_state(self.location, self._snapshot.state)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, version: delta.VersionSpec | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> PersistedArrangement:
        """The arrangement at ``path`` as of Delta ``version`` (default: the latest);
        a datetime or ISO 8601 string opens the latest version committed then, as
        Delta's ``timestampAsOf`` (:func:`~statemachines.delta.version_at`).

        Raises:
            InvalidArgument: ``path`` holds no arrangement, or no such version.
            DamagedArrangement: a file it needs is missing or unreadable.
        """
        return cls(path, version=version, storage_options=storage_options, _create=False)

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None
    ) -> PersistedArrangement:
        """A new, empty arrangement at ``path``, which must be missing or an empty directory."""
        return cls(path, storage_options=storage_options, _create=True)

    @property
    def version(self) -> int | None:
        """The Delta version this object reads (``None``: nothing committed yet)."""
        return self._snapshot.version

    # -- writing --------------------------------------------------------------------

    def append(
        self,
        updates: Iterable[tuple[Any, Any, int]],
        lower: Any,
        upper: Any,
        *,
        notes: dict[str, Any] | None = None,
    ) -> bool:
        return bool(
            self._transact(lambda staged: Arrangement.append(staged, updates, lower, upper, notes=notes), "append")
        )

    # No reader may take a hold between the staged ``since`` and its adoption.
    def advance_since(self, since: Any) -> Any:
        with self._holds_lock:
            return self._transact(lambda staged: Arrangement.advance_since(staged, since), "advance_since")

    def compact(self, since: Any = None) -> Any:
        def change(staged: PersistedArrangement) -> Any:
            if since is not None:  # in this commit, not one of its own
                Arrangement.advance_since(staged, since)
            return Arrangement.compact(staged)

        with self._holds_lock:
            return self._transact(change, "compact")

    def publish_files(
        self,
        name: str | list[str],
        lower: Any,
        upper: Any,
        count: int,
        *,
        stream: dict[str, Any] | None = None,
        notes: dict[str, Any] | None = None,
        merge: bool = True,
    ) -> bool:
        """Publish the batch another writer wrote under ``name``: see :func:`publish_batch`.

        The batch joins the spine as appended batches do (see :meth:`_merges`), so a
        stream of small micro-batches keeps few batches however long it runs. With
        ``merge=False`` it joins unmerged, and a later :meth:`merge_batches` merges it.
        """
        if stream is not None and is_replay(self._stream, stream):
            return False
        files, schema = self._written(name, count)

        def change(staged: PersistedArrangement) -> bool:
            if upper is not None and upper != lower:
                if not staged._accepts(lower, upper):
                    return False
                staged._push(self._stored(files, lower, upper, staged._since, count), merge=merge)
            if stream is not None:
                staged._stream = stream
            if notes is not None:
                staged._notes = {**staged._notes, **notes}
            return True

        return bool(self._transact(change, "publish", schema=schema))

    def merge_batches(self) -> None:
        """Merge the batches published with ``merge=False`` into the spine, as they
        would have been merged when published (one commit, if any merges). The
        contents at every version stay the same: only how they are stored changes."""
        self._transact(lambda staged: staged._merge_spine(), "merge")

    def replace_all(self, name: str, count: int, since: Any) -> None:
        """Replace every batch with the one another writer wrote under ``name`` (one commit).

        The compacted form of this version, with times below ``since`` advanced to
        it (see ``statemachines.spark.compact``); ``since`` must be what a reader holds
        back no further than.
        """
        files, schema = self._written(name, count)

        def change(staged: PersistedArrangement) -> None:
            if since is not None and Arrangement.advance_since(staged, since) != since:
                raise InvalidArgument(f"a reader holds history before {since!r}: compaction to it is refused")
            first, last = staged._batches[0], staged._batches[-1]
            staged._batches = [self._stored(files, first.lower, last.upper, since, count)]

        with self._holds_lock:
            self._transact(change, "compact", schema=schema)

    def _written(self, name: str | list[str], count: int) -> tuple[list[str], Any]:
        """The Parquet files another writer made under ``name`` (or those named), and
        their (checked) columns."""
        if not count:
            files = []
        elif isinstance(name, str):
            files = parquet_files(self.location, name)
        else:
            files = sorted(name)
        schema = _checked_schema(self.location, files[0], self._snapshot.schema) if files else None
        return files, schema

    def _stored(
        self, files: list[str], lower: Any, upper: Any, since: Any, count: int, id: str | None = None,
        rewritten: bool = False,
    ) -> StoredBatch:
        """A batch of this arrangement held in ``files``, read when needed (``rewritten``:
        files another engine's ``OPTIMIZE`` wrote, :func:`delta.read_snapshot`)."""
        return StoredBatch(
            self._read_file, self._open_file, files, lower, upper, since, id or uuid.uuid4().hex, count, rewritten
        )

    # -- rejected events ------------------------------------------------------------

    def keep_rejected(self, table: Any) -> str | None:
        """Keep a run's rejected events (a table of :data:`REJECTED_COLUMNS`, see
        :func:`rejected_table`) with the arrangement, where Spark's runs keep theirs:
        a Parquet file in the state directory (not table data, left alone by
        vacuum), named in the writer's notes in one commit. Returns its path
        relative to the arrangement (``None``: the table is empty)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return None
        relative = f"{delta.STATE_DIR}/rejected-{uuid.uuid4().hex}/part-00000.parquet"
        sink = pa.BufferOutputStream()
        pq.write_table(table.select(list(REJECTED_COLUMNS)), sink)
        delta.put(self.location, relative, sink.getvalue().to_pybytes())

        def change(staged: PersistedArrangement) -> None:
            staged._notes = {**staged._notes, "rejected": [*staged._notes.get("rejected", []), relative]}

        self._transact(change, "rejected")
        return relative

    def rejected(self) -> Any:
        """Every rejected event the runs into this arrangement kept with it (local runs
        through the command line, ``run_batch(..., into=)`` and streams on Spark), as
        one table of :data:`REJECTED_COLUMNS` (``None``: none was kept)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        kept = rejected_files(self._notes, self._stream)
        if not kept:
            return None
        parts = [ds.dataset(self.location.path(name), filesystem=self.location.filesystem, format="parquet")
                 .to_table(columns=list(REJECTED_COLUMNS)) for name in kept]
        return pa.concat_tables(_alike(parts))

    def vacuum(
        self, retention_hours: float | None = None, *, enforce_retention_duration: bool = True, dry_run: bool = False
    ) -> list[str]:
        """Delete files no version of the last ``retention_hours`` needs; return their names.

        Until then every older version stays readable (``open(path, version=...)``).
        As Delta's ``VACUUM``: the retention defaults to the table's
        ``delta.deletedFileRetentionDuration`` (a week unless set); a shorter one is
        refused unless ``enforce_retention_duration=False``; ``dry_run`` only lists.
        """
        return delta.vacuum(
            self.location, retention_hours, enforce_retention_duration=enforce_retention_duration, dry_run=dry_run
        )

    def _transact(
        self, change: Callable[[PersistedArrangement], Any], operation: str, schema: Any = None
    ) -> Any:
        """Apply ``change`` to a staged copy, commit it, and only then adopt it.

        A commit that lost to table maintenance (another engine's ``OPTIMIZE`` or
        ``VACUUM``, which change no row: :data:`delta.MAINTENANCE`) is made again on
        the table as that left it, up to :data:`MAINTENANCE_ATTEMPTS` times in all.

        ``schema``: the columns of files another writer made (see :meth:`publish_files`).
        """
        for attempt in range(1, MAINTENANCE_ATTEMPTS + 1):
            staged = copy.copy(self)
            staged._pushed = set()
            staged._batches = list(self._batches)
            staged._boundaries = list(self._boundaries)
            with gc_paused():
                result = change(staged)
                changed = (staged._batches, staged._since, staged._notes, staged._stream) != (
                    self._batches, self._since, self._notes, self._stream,
                )
                if changed:
                    try:
                        self._publish(staged, operation, schema)
                    except delta.MaintainedMeanwhile:
                        if attempt == MAINTENANCE_ATTEMPTS:
                            raise
                        self._load(delta.read_snapshot(self.location))
                        continue
            break
        if changed:
            self._batches, self._boundaries = staged._batches, staged._boundaries
            self._upper, self._since, self._first = staged._upper, staged._since, staged._first
            self._notes, self._stream = staged._notes, staged._stream
        return result

    def expect_value_type(self, arrow_type: Any) -> None:
        """The value column's type, as the machine declares it: it holds until the
        table has a type (instead of the type of the first value checked, which
        need not fit the later ones: a detector's partial match of one event)."""
        depth = type_nesting(arrow_type)
        if depth > MAX_TYPE_NESTING:
            raise InvalidArgument(f"the value type {arrow_type} nests {depth} levels deep, {BEYOND_STORED}")
        if self._snapshot.schema is None and self._fixed_types.get("value") is None:
            self._fixed_types["value"] = arrow_type

    def value_column_type(self) -> Any:
        """The type of the value column, once the table or a value fixed it (else
        ``None``)."""
        return self._column_type("value")

    def value_check(self, value: Any) -> str | None:
        """``None`` if ``value`` can be stored here, else why not (runtimes reject it).

        Values are stored in a typed column: the first value checked fixes its type
        (unless a field of it is ``None``), and later values must fit it, as they
        must fit the table's once it has one.
        """
        return self._storage_problem("value", value)

    def key_check(self, key: Any) -> str | None:
        """``None`` if ``key`` can be stored here, else why not (runtimes reject its
        events as ``bad_key``). As for values (:meth:`value_check`), the first key
        checked fixes the key column's type until the table has one."""
        problem = self._storage_problem("key", key)
        return None if problem is None else problem.replace("the value", "the key", 1)

    def _storage_problem(self, column: str, item: Any) -> str | None:
        """Why ``item`` cannot be stored in ``column`` (``None``: it can); the first
        storable item of a known type fixes the column's type until the table has one."""
        fixed = self._column_type(column)
        if fixed is not None:
            problem = storage_problem(item, fixed)
            if problem is not None and self._snapshot.schema is None and column == "value":
                problem += (
                    " (the first value fixed it; declare the value type before the first run, "
                    "e.g. arrangement.expect_value_type(pyarrow.float64()))"
                )
            return problem
        problem = storage_problem(item)
        if problem is not None:
            return problem
        try:
            item_shape = shape_of(item)
        except RecursionError:
            item_shape = None
        problem = nesting_problem(item, item_shape)
        if problem is not None:
            return problem
        shape = unified_shape(self._shapes.get(column), item_shape)
        if shape is None:
            return (f"the value {item!r} cannot be stored: it does not fit the type of the earlier values, "
                    f"{self._shapes[column]}")
        self._shapes[column] = shape
        self._fixed_types[column] = fixed_type(shape)  # none while a field of every value so far is None
        return None

    def _column_type(self, column: str) -> Any:
        """The type of ``column`` ("key" or "value"), once the table or an item fixed
        it (else ``None``): one type object per schema, so that checks find theirs by
        identity (``schema.field(...).type`` makes a new one at each call)."""
        schema = self._snapshot.schema
        if schema is None:
            return self._fixed_types.get(column)
        if self._column_types[0] is not schema:
            self._column_types = (schema, {name: schema.field(name).type for name in ("key", "value")})
        return self._column_types[1][column]

    def _fault(self, point: str) -> None:
        """A named point on the write path; tests make it raise to simulate a crash."""

    def _push(self, batch: Batch, *, merge: bool = True) -> None:
        """Add ``batch`` unmerged, after merging the spine's last batch into the ones
        before it: a batch merges from the next commit on, so a merge rewrites
        published updates only, and a commit's new updates are files of their own
        (see :func:`delta.commit`)."""
        if merge and self._batches:
            self._batches = self._merged(self._batches[:-1], self._batches[-1])
        super()._push(batch, merge=False)
        self._pushed.add(batch.id)

    def _merges(self, older: Batch, newer: Batch) -> bool:
        if not self._merges_in_arrow():
            return older.count + newer.count <= PYTHON_MERGE and super()._merges(older, newer)
        if older.count > SMALL_BATCH:
            return older.count <= LARGE_MERGE_RATIO * newer.count
        return super()._merges(older, newer)

    def _merges_in_arrow(self) -> bool:
        """Whether batches merge in Arrow: keys and values of plain (not nested) types."""
        schema = self._snapshot.schema
        if schema is None:
            return False
        import pyarrow as pa

        return not any(pa.types.is_nested(schema.field(name).type) for name in ("key", "value"))

    def _merge(self, batches: list[Batch]) -> Batch:
        """Stored batches merge in Arrow, file to file; others (or structs) in Python."""
        if all(isinstance(b, StoredBatch) and not b.loaded for b in batches):
            tables = [self._merge_input(name) for b in batches for name in b.files]  # type: ignore[attr-defined]
            # a spine's batches cover disjoint intervals; unless since moves some of their
            # times, their union is already consolidated
            disjoint = self._since is None or (batches[0].lower is not None and not batches[0].lower < self._since)
            disjoint = disjoint and not any(b.rewritten for b in batches)
            merged = merge_tables(tables, self._since, disjoint=disjoint) if tables else None
            if merged is not None:
                name = self._write_table(merged, f"batch-{uuid.uuid4().hex}.parquet")
                _keep_merged(self.location.path(name), merged)
                return self._stored([name], batches[0].lower, batches[-1].upper, self._since, merged.num_rows)
        return super()._merge(batches)

    def _merge_input(self, name: str) -> Any:
        """A data file to merge: the table a merge of this process wrote, else read."""
        with _merges_kept_lock:
            kept = _merges_kept.pop(self.location.path(name), None)
        return kept if kept is not None else self._read_table(name)

    def _publish(self, staged: PersistedArrangement, operation: str, schema: Any = None) -> None:
        written: dict[str, list[str]] = {}
        schema = self._snapshot.schema or schema
        for batch in staged._batches:
            if batch.count and batch.id not in self._files:
                if isinstance(batch, StoredBatch):  # already in files (another writer's)
                    written[batch.id] = batch.files
                else:
                    name, schema = self._write_batch(batch, schema)
                    written[batch.id] = [name]
        self._fault("batches_written")
        files = {**self._files, **written}
        kept = {b.id for b in staged._batches}
        removed = [f for batch_id, names in self._files.items() if batch_id not in kept for f in names]
        state = {
            **_new_state(),
            "sequence": self._snapshot.state["sequence"] + 1,
            "upper": encode_time(staged._upper),
            "since": encode_time(staged._since),
            "first": encode_time(staged._first),
            "boundaries": [encode_time(t) for t in staged._boundaries],
            "batches": [
                {
                    "id": batch.id,
                    "files": files.get(batch.id, []),
                    "lower": encode_time(batch.lower),
                    "upper": encode_time(batch.upper),
                    "since": encode_time(batch.since),
                    "count": batch.count,
                    **({"rewritten": True} if batch.rewritten else {}),
                }
                for batch in staged._batches
            ],
            "stream": staged._stream,
            "notes": staged._notes,
        }
        if schema is None:  # nothing stored yet: the state alone, in state-0
            state["sequence"] = 0
            delta.put_state(self.location, state)
            self._snapshot = Snapshot(state, None)
        else:
            new = staged._pushed  # any other file written holds published updates again, merged
            assert new <= kept, "a batch of new updates merged in the commit that publishes it"
            self._snapshot = delta.commit(
                self.location, self._snapshot, state,
                [n for batch_id, names in written.items() if batch_id in new for n in names],
                removed, schema=schema, operation=operation,
                rewritten=[n for batch_id, names in written.items() if batch_id not in new for n in names],
                before_commit=lambda: self._fault("state_written"),
            )
        self._fault("published")
        self._files = {b.id: files[b.id] for b in staged._batches if b.id in files}

    def _write_batch(self, batch: Batch, schema: Any) -> tuple[str, Any]:
        """Write ``batch`` as one key-sorted Parquet file; return its name and schema."""
        import pyarrow as pa

        keys, values, times, diffs = [], [], [], []
        for key in batch.keys:
            for value, entries in batch.data[key].items():
                for time, diff in entries:
                    keys.append(key)
                    values.append(value)
                    times.append(time)
                    diffs.append(diff)
        columns = {
            "key": arrow_array(keys, schema.field("key").type if schema else self._fixed_types.get("key")),
            "value": arrow_array(values, schema.field("value").type if schema else self._fixed_types.get("value")),
            "time": arrow_array(times, schema.field("time").type if schema else None),
            "diff": pa.array(diffs, type=pa.int64()),
        }
        table = pa.table(columns) if schema is None else pa.table(columns, schema=schema)
        return self._write_table(table, f"batch-{batch.id}.parquet"), table.schema

    def _write_table(self, table: Any, name: str) -> str:
        """Write a key-sorted table as the data file ``name``, in small row groups."""
        import pyarrow.parquet as pq

        pq.write_table(table, self.location.path(name), filesystem=self.location.filesystem, **WRITE_OPTIONS)
        return name

    # -- reading --------------------------------------------------------------------

    def _load(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._batches, self._files = [], {}
        state = snapshot.state
        self._stream = state.get("stream")
        self._notes = state.get("notes") or {}
        self._upper = decode_time(state["upper"])
        self._since = decode_time(state["since"])
        self._first = decode_time(state.get("first"))
        self._boundaries = [decode_time(t) for t in state["boundaries"]]
        for entry in state["batches"]:  # read lazily: opening reads no data
            self._batches.append(
                self._stored(
                    entry["files"], decode_time(entry["lower"]), decode_time(entry["upper"]),
                    decode_time(entry["since"]), entry["count"], entry["id"], entry.get("rewritten", False),
                )
            )
            self._files[entry["id"]] = list(entry["files"])

    def _open_file(self, name: str) -> Any:
        """A data file of this version, open for row-group reads."""
        import pyarrow.parquet as pq

        if self.location.is_local:  # mapped: a point read touches only the pages it reads, unbuffered
            return self._damage_checked(
                name, lambda: pq.ParquetFile(self.location.path(name), memory_map=True, pre_buffer=False)
            )
        return self._damage_checked(name, lambda: pq.ParquetFile(self.location.path(name), filesystem=self.location.filesystem))

    def _read_table(self, name: str) -> Any:
        """A whole data file as an Arrow table of the update columns."""
        import pyarrow.parquet as pq

        return self._damage_checked(
            name,
            lambda: pq.ParquetFile(self.location.path(name), filesystem=self.location.filesystem).read(
                columns=list(UPDATE_COLUMNS)
            ),
        )

    def _read_file(self, name: str, data: dict[Any, Any]) -> None:
        """Add a whole data file's updates to ``data`` (key -> value -> [(time, diff)])."""
        table = self._read_table(name)
        keys = column_to_python(table.column("key"))
        values = column_to_python(table.column("value"))
        with gc_paused():
            for key, value, time, diff in zip(
                keys, values, table.column("time").to_pylist(), table.column("diff").to_pylist(),
                strict=True,
            ):
                data.setdefault(key, {}).setdefault(value, []).append((time, diff))

    def _damage_checked(self, name: str, read: Callable[[], Any]) -> Any:
        """``read()`` of the data file ``name``, its failures as one clear error."""
        import pyarrow as pa

        try:
            return read()
        except FileNotFoundError as exc:
            raise delta.missing_data_file(self.location, self.version, name) from exc
        except (pa.ArrowException, OSError) as exc:
            raise DamagedArrangement(
                f"{self.location.uri_of(name)} is damaged ({exc}); restore the file from a backup",
                self.location.uri_of(name),
            ) from exc

    def _label(self) -> str:
        return f"PersistedArrangement at {self.path}"

    def files(self) -> list[str]:
        """The data files of this version (URIs), for other readers."""
        return [self.location.uri_of(f) for b in self._batches for f in self._files.get(b.id, [])]


def _keep_merged(path: str, table: Any) -> None:
    """Keep the table a merge wrote to ``path`` for the next merge (``MERGES_KEPT_BYTES``)."""
    if table.nbytes > MERGES_KEPT_BYTES:
        return
    with _merges_kept_lock:
        _merges_kept[path] = table
        while sum(t.nbytes for t in _merges_kept.values()) > MERGES_KEPT_BYTES:
            _merges_kept.popitem(last=False)


def _alike(tables: list[Any]) -> list[Any]:
    """Tables of the same columns made of one schema: a column that is NULL in every
    row of a table takes the type the others give it, and a column the tables give
    different types is text in all of them."""
    import pyarrow as pa

    for name in tables[0].column_names:
        typed = {t.schema.field(name).type for t in tables if t.column(name).null_count < t.num_rows}
        wanted = typed.pop() if len(typed) == 1 else pa.string() if typed else tables[0].schema.field(name).type
        for i, table in enumerate(tables):
            column = table.column(name)
            if column.type == wanted:
                continue
            cast = pa.nulls(len(column), wanted) if column.null_count == len(column) else _as_text(column.to_pylist())
            tables[i] = table.set_column(table.schema.get_field_index(name), name, cast)
    return tables


def _as_text(values: list[Any]) -> Any:
    """Values as text, as Python writes them (a string as it is)."""
    import pyarrow as pa

    return pa.array([v if v is None or isinstance(v, str) else repr(v) for v in values], pa.string())


def rejected_files(notes: dict[str, Any] | None, stream: dict[str, Any] | None) -> list[str]:
    """Where an arrangement keeps rejected rows (relative to it), from its writer's
    notes (batch runs) and its stream's progress (micro-batches)."""
    return [*(notes or {}).get("rejected", []), *(stream or {}).get("rejected", [])]


def rejected_table(rejected: Iterable[Any], types: dict[str, Any] | None = None) -> Any:
    """Rejected events (``Rejected``: ``event``, ``reason``, ``detail``) as a table of
    :data:`REJECTED_COLUMNS`, each event column of its type in ``types`` (by column
    name: the events' source columns), else of the type its values have; a column
    whose values have none in common is kept as their text, so no event is lost::

        event (key, symbol, time, order)   reason      ->  key   symbol  time  order  reason    detail
        (None, 'x', 3, None)               null_key        null  'x'     3     null   null_key  ...
    """
    import pyarrow as pa

    rows = list(rejected)
    columns = {}
    for i, name in enumerate(REJECTED_COLUMNS[:4]):  # an Event's fields
        values = [r.event[i] for r in rows]
        try:
            columns[name] = arrow_array(values, (types or {}).get(name))
        except InvalidArgument:
            columns[name] = _as_text(values)
        if pa.types.is_null(columns[name].type):  # Parquet readers such as Spark's want a type
            columns[name] = columns[name].cast(pa.int64() if name == "order" else pa.string())
    columns["reason"] = pa.array([r.reason.value for r in rows], pa.string())
    columns["detail"] = pa.array([r.detail for r in rows], pa.string())
    return pa.table(columns)
