"""An arrangement persisted as a directory of Parquet batches and a manifest.

Layout of the directory::

    manifest.json              upper, since, batch descriptions; the one source of truth
    batch-<id>.parquet         one per non-empty batch: key, value, time, diff

Every change is published atomically: new batch files are written first, then a new
manifest is written beside the old one and renamed over it. A writer that dies at any
point leaves the last published state readable; files no published manifest names are
removed by the next successful publish. Replaying an append that was already
published is a no-op, so a retried job never double-counts.

Keys and values are stored as typed Parquet columns when Arrow can hold them exactly
(numbers, strings, dicts as structs, ...), so the files are ordinary queryable tables;
anything else (tuples, custom objects) is stored pickled, and the column says so in
the file's metadata. pyarrow is imported only when a batch is read or written.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import os
import pathlib
import pickle
import shutil
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from statemachines._gc import gc_paused
from statemachines.arrangement import Arrangement, Batch
from statemachines.errors import InvalidArgument, MissingDependency
from statemachines.updates import hashable

__all__ = [
    "PersistedArrangement",
    "column_to_python",
    "decode_time",
    "encode_time",
    "publish_batch",
    "read_manifest",
]

MANIFEST = "manifest.json"
FORMAT = 1
CODEC_ARROW = b"arrow"
CODEC_PICKLE = b"pickle"


def _arrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - loads the parquet submodule
    except ImportError as exc:
        raise MissingDependency(
            "persisted arrangements need pyarrow: pip install 'statemachines[persist]'"
        ) from exc
    return pyarrow


def encode_time(time: Any) -> Any:
    """A time as JSON: numbers as they are, datetimes and dates tagged."""
    if isinstance(time, _dt.datetime):
        return {"datetime": time.isoformat()}
    if isinstance(time, _dt.date):
        return {"date": time.isoformat()}
    return time


def decode_time(value: Any) -> Any:
    """The inverse of :func:`encode_time`."""
    if isinstance(value, dict):
        if "datetime" in value:
            return _dt.datetime.fromisoformat(value["datetime"])
        return _dt.date.fromisoformat(value["date"])
    return value


_EXACT_IN_ARROW = (frozenset({str}), frozenset({int}), frozenset({float}), frozenset({bytes}))


def _column(pa: Any, items: list[Any]) -> tuple[Any, bytes]:
    """An Arrow array that holds ``items`` exactly, or their pickles."""
    try:
        array = pa.array(items)
        if pa.types.is_null(array.type):
            raise TypeError("no type to infer")
        if frozenset(map(type, items)) in _EXACT_IN_ARROW or array.to_pylist() == items:
            return array, CODEC_ARROW
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    return pa.array([pickle.dumps(x) for x in items], type=pa.binary()), CODEC_PICKLE


def column_to_python(column: Any) -> list[Any]:
    """An Arrow column as hashable Python values: structs and lists become tuples.

    Keys and values must be hashable; a struct column (a Spark struct) therefore
    reads as tuples of its fields, in field order.
    """
    import pyarrow as pa

    items = column.to_pylist()
    kind = column.type
    if pa.types.is_struct(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [hashable(x) for x in items]
    return items


def _decode(column: Any, codec: bytes) -> list[Any]:
    if codec == CODEC_PICKLE:
        return [pickle.loads(x) for x in column.to_pylist()]
    return column_to_python(column)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The published manifest of the arrangement in ``path`` (times still encoded).

    Raises:
        InvalidArgument: there is no arrangement there, or it has another format.
    """
    manifest_path = pathlib.Path(path) / MANIFEST
    if not manifest_path.exists():
        raise InvalidArgument(f"{path} holds no arrangement (no {MANIFEST})")
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT:
        raise InvalidArgument(
            f"{manifest_path} has format {manifest.get('format')!r}; this version reads "
            f"format {FORMAT}"
        )
    return manifest


def _write_manifest(path: pathlib.Path, manifest: dict[str, Any]) -> pathlib.Path:
    """Write ``manifest`` beside the published one (not yet published); return its path."""
    temporary = path / f"{MANIFEST}.{uuid.uuid4().hex}.tmp"
    with open(temporary, "w") as out:
        json.dump(manifest, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    return temporary


_DATA_PREFIXES = ("batch-", "pending-", "rejected-")


def _staged_manifest(name: str) -> bool:
    """A manifest written but never published (a creation that died before its rename)."""
    return name.startswith(f"{MANIFEST}.") and name.endswith(".tmp")


def _listed(manifest: dict[str, Any]) -> set[str]:
    """The top-level files and directories holding data the manifest names."""
    named = [b["file"] for b in manifest["batches"] if b["file"]]
    stream = manifest.get("stream") or {}
    if stream.get("pending"):
        named.append(stream["pending"])
    named.extend(stream.get("rejected", []))
    return {name.split("/")[0] for name in named}


def _remove_unlisted(path: pathlib.Path, manifest: dict[str, Any]) -> None:
    """Delete data files and directories, and temporary manifests, not published."""
    listed = _listed(manifest)
    for item in path.iterdir():
        if (item.name.startswith(_DATA_PREFIXES) and item.name not in listed) or item.name.endswith(
            ".tmp"
        ):
            if item.is_dir():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)


def publish_batch(
    path: str | os.PathLike[str],
    name: str,
    lower: Any,
    upper: Any,
    count: int,
    *,
    stream: dict[str, Any] | None = None,
) -> bool:
    """Publish a batch that another writer (e.g. Spark) wrote as ``path/name``.

    The batch file or directory must already be complete; only the manifest is
    touched (no data is loaded). The same rules as ``Arrangement.append`` hold:
    ``lower`` must be the published ``upper``, and a batch matching batches already
    published is an ignored replay (its files are removed). ``upper == lower``
    publishes no batch, only ``stream``.

    Args:
        stream: a streaming writer's progress (``batch_id``, ``pending``,
            ``rejected``), published in the same atomic step; a ``batch_id`` not
            above the published one makes the call an ignored replay.

    Returns:
        True if published, False if it was a replay.
    """
    path = pathlib.Path(path)
    manifest = read_manifest(path)
    published_id = (manifest.get("stream") or {}).get("batch_id", -1)
    if stream is not None and stream["batch_id"] <= published_id:
        _remove_unlisted(path, manifest)
        return False
    staged = Arrangement()
    staged._upper = decode_time(manifest["upper"])
    staged._boundaries = [decode_time(t) for t in manifest["boundaries"]]
    advances = upper is not None and upper != lower
    if advances:
        if not staged._accepts(lower, upper):
            _remove_unlisted(path, manifest)
            return False
        staged._add_boundaries(lower, upper)
        manifest["upper"] = encode_time(upper)
        manifest["boundaries"] = [encode_time(t) for t in staged._boundaries]
        manifest["batches"].append(
            {
                "id": name.removeprefix("batch-"),
                "file": name if count else None,
                "lower": encode_time(lower),
                "upper": encode_time(upper),
                "since": manifest["since"],
                "count": count,
            }
        )
    if stream is not None:
        manifest["stream"] = stream
    os.replace(_write_manifest(path, manifest), path / MANIFEST)
    _remove_unlisted(path, manifest)
    return True


class PersistedArrangement(Arrangement):
    """An :class:`Arrangement` kept in a directory; opens it, or creates it if missing.

    Created only in a new or empty directory: a directory that holds files but no
    manifest (someone else's files, or an arrangement whose manifest was lost) is
    refused, never taken over.

    Reads are served from memory (loaded at open); appends and compactions write
    through to disk before they take effect in memory.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        _arrow()  # missing pyarrow fails here, before anything is created
        super().__init__()
        self.path = pathlib.Path(path)
        self._files: dict[str, str] = {}  # batch id -> file name
        self._stream: dict[str, Any] | None = None  # a streaming writer's progress
        manifest = self.path / MANIFEST
        if manifest.exists():
            self._open()
            return
        if self.path.is_dir() and any(not _staged_manifest(item.name) for item in self.path.iterdir()):
            raise InvalidArgument(
                f"{self.path} holds files but no arrangement ({MANIFEST} is missing); an "
                f"arrangement created there would take them for its own and delete them. "
                f"Create a new arrangement in an empty or new directory; if {MANIFEST} was "
                f"lost, restore it from a backup"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        self._publish(self)

    # -- writing --------------------------------------------------------------------

    def append(self, updates: Iterable[tuple[Any, Any, int]], lower: Any, upper: Any) -> bool:
        return bool(self._transact(lambda staged: Arrangement.append(staged, updates, lower, upper)))

    # No reader may take a hold between the staged ``since`` and its adoption.
    def advance_since(self, since: Any) -> Any:
        with self._holds_lock:
            return self._transact(lambda staged: Arrangement.advance_since(staged, since))

    def compact(self, since: Any = None) -> Any:
        with self._holds_lock:
            return self._transact(lambda staged: Arrangement.compact(staged, since))

    def _transact(self, change: Callable[[PersistedArrangement], Any]) -> Any:
        """Apply ``change`` to a staged copy, publish it, and only then adopt it."""
        staged = copy.copy(self)
        staged._batches = list(self._batches)
        staged._boundaries = list(self._boundaries)
        with gc_paused():
            result = change(staged)
            changed = (staged._batches, staged._since) != (self._batches, self._since)
            if changed:
                self._publish(staged)
        if changed:
            self._batches, self._boundaries = staged._batches, staged._boundaries
            self._upper, self._since = staged._upper, staged._since
        # only the writer gets here: files left by a writer that died are garbage
        self._remove_unlisted_files()
        return result

    @staticmethod
    def value_check(value: Any) -> str | None:
        """``None`` if a value can be stored here, else why not (runtimes reject it).

        Values are stored as typed Arrow columns or, failing that, pickled; a value
        that cannot even be pickled cannot be stored.
        """
        try:
            pickle.dumps(value)
        except Exception as exc:  # noqa: BLE001 - any failure means "cannot be stored"
            return f"the value {value!r} cannot be stored (pickled): {type(exc).__name__}: {exc}"
        return None

    def _fault(self, point: str) -> None:
        """A named point on the write path; tests make it raise to simulate a crash."""

    def _publish(self, staged: Arrangement) -> None:
        for batch in staged._batches:
            if batch.count and batch.id not in self._files:
                self._files[batch.id] = self._write_batch(batch)
        self._fault("batches_written")
        manifest = {
            "format": FORMAT,
            "upper": encode_time(staged._upper),
            "since": encode_time(staged._since),
            "boundaries": [encode_time(t) for t in staged._boundaries],
            "batches": [
                {
                    "id": batch.id,
                    "file": self._files.get(batch.id),
                    "lower": encode_time(batch.lower),
                    "upper": encode_time(batch.upper),
                    "since": encode_time(batch.since),
                    "count": batch.count,
                }
                for batch in staged._batches
            ],
        }
        if self._stream is not None:
            manifest["stream"] = self._stream
        temporary = _write_manifest(self.path, manifest)
        self._fault("manifest_written")
        os.replace(temporary, self.path / MANIFEST)
        self._fault("published")

    def _write_batch(self, batch: Batch) -> str:
        pa = _arrow()
        keys, values, times, diffs = [], [], [], []
        for key in batch.keys:
            for value, entries in batch.data[key].items():
                for time, diff in entries:
                    keys.append(key)
                    values.append(value)
                    times.append(time)
                    diffs.append(diff)
        key_column, key_codec = _column(pa, keys)
        value_column, value_codec = _column(pa, values)
        table = pa.table(
            {
                "key": key_column,
                "value": value_column,
                "time": pa.array(times),
                "diff": pa.array(diffs, type=pa.int64()),
            }
        ).replace_schema_metadata({"key_codec": key_codec, "value_codec": value_codec})
        name = f"batch-{batch.id}.parquet"
        pa.parquet.write_table(table, self.path / name)
        return name

    def _remove_unlisted_files(self) -> None:
        self._files = {b.id: self._files[b.id] for b in self._batches if b.id in self._files}
        listed = {"batches": [{"file": f} for f in self._files.values()], "stream": self._stream}
        _remove_unlisted(self.path, listed)

    # -- reading --------------------------------------------------------------------

    def _open(self, attempts: int = 20) -> None:
        """Load the published state, even while another process writes.

        A writer publishes a new manifest before it deletes the files the old one
        listed; so a file vanishing under this reader means a newer manifest is in
        place, and the load starts over from it.
        """
        for attempt in range(attempts):
            try:
                with gc_paused():
                    self._load(read_manifest(self.path))
                return
            except FileNotFoundError:
                if attempt == attempts - 1:
                    raise
                self._batches, self._files, self._boundaries = [], {}, []

    def _load(self, manifest: dict[str, Any]) -> None:
        self._stream = manifest.get("stream")
        self._upper = decode_time(manifest["upper"])
        self._since = decode_time(manifest["since"])
        self._boundaries = [decode_time(t) for t in manifest["boundaries"]]
        for entry in manifest["batches"]:
            lower, upper = decode_time(entry["lower"]), decode_time(entry["upper"])
            since = decode_time(entry["since"])
            data = self._read_batch(entry["file"]) if entry["file"] else {}
            self._batches.append(Batch(data, lower, upper, since, id=entry["id"]))
            if entry["file"]:
                self._files[entry["id"]] = entry["file"]

    def _read_batch(self, name: str) -> dict[Any, Any]:
        pa = _arrow()
        table = pa.parquet.read_table(self.path / name)
        meta = table.schema.metadata or {}
        keys = _decode(table.column("key"), meta.get(b"key_codec", CODEC_ARROW))
        values = _decode(table.column("value"), meta.get(b"value_codec", CODEC_ARROW))
        data: dict[Any, Any] = {}
        for key, value, time, diff in zip(
            keys, values, table.column("time").to_pylist(), table.column("diff").to_pylist(),
            strict=True,
        ):
            data.setdefault(key, {}).setdefault(value, []).append((time, diff))
        return data

    def _label(self) -> str:
        return f"PersistedArrangement at {self.path}"

    def files(self) -> list[pathlib.Path]:
        """The Parquet files of the published batches (for other readers, e.g. Spark)."""
        return [self.path / self._files[b.id] for b in self._batches if b.id in self._files]
