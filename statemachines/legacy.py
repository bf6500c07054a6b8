"""Arrangements of format 1 (Parquet batches and ``manifest.json``): read to convert.

Format 1 kept its state in ``manifest.json`` and stored keys or values Arrow could
not type exactly (tuples, objects) pickled. This module only reads it, so that
:func:`convert` can write the same arrangement as a Delta table (format 2); the
source is left as it is.

    statemachines convert OLD_PATH NEW_PATH
"""

from __future__ import annotations

import json
import os
import pathlib
import pickle
from typing import Any

from statemachines.arrangement import Arrangement, Batch
from statemachines.columns import column_to_python, storage_problem
from statemachines.errors import InvalidArgument
from statemachines.persisted import PersistedArrangement
from statemachines.times import decode_time

__all__ = ["convert", "read_format_1"]

MANIFEST = "manifest.json"


def read_format_1(path: str | os.PathLike[str]) -> Arrangement:
    """The format-1 arrangement at ``path``, in memory.

    Raises:
        InvalidArgument: ``path`` holds no format-1 arrangement, or a file is damaged.
    """
    import pyarrow.parquet as pq

    root = pathlib.Path(path)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        if manifest.get("format") != 1:
            raise InvalidArgument(f"{root / MANIFEST} has format {manifest.get('format')!r}, not 1")
        arrangement = Arrangement()
        arrangement._upper = decode_time(manifest["upper"])
        arrangement._since = decode_time(manifest["since"])
        arrangement._boundaries = [decode_time(t) for t in manifest["boundaries"]]
        arrangement._first = arrangement._boundaries[0] if arrangement._boundaries else None
        for entry in manifest["batches"]:
            data: dict[Any, Any] = {}
            if entry["file"]:
                table = pq.read_table(root / entry["file"])
                meta = table.schema.metadata or {}
                keys = _decode(table.column("key"), meta.get(b"key_codec"))
                values = _decode(table.column("value"), meta.get(b"value_codec"))
                rows = zip(keys, values, table.column("time").to_pylist(), table.column("diff").to_pylist(), strict=True)
                for key, value, time, diff in rows:
                    data.setdefault(key, {}).setdefault(value, []).append((time, diff))
            lower, upper = decode_time(entry["lower"]), decode_time(entry["upper"])
            arrangement._batches.append(Batch(data, lower, upper, decode_time(entry["since"]), id=entry["id"]))
    except FileNotFoundError as exc:
        raise InvalidArgument(f"cannot convert {root}: {exc.filename} is missing") from exc
    except (ValueError, KeyError, OSError) as exc:
        raise InvalidArgument(f"cannot convert {root}: {type(exc).__name__}: {exc}") from exc
    return arrangement


def _decode(column: Any, codec: bytes | None) -> list[Any]:
    if codec == b"pickle":  # written by this project's format 1 in the user's own directory
        return [pickle.loads(x) for x in column.to_pylist()]  # noqa: S301
    return column_to_python(column)


def convert(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> PersistedArrangement:
    """Write the format-1 arrangement at ``source`` as a new arrangement at ``target``.

    The result has the same upper, since, batches and updates; ``source`` is not
    changed. ``target`` must be missing or an empty directory.

    Raises:
        InvalidArgument: a key or value cannot be stored as a typed column (the
            message names it), or a file of ``source`` is damaged.
    """
    old = read_format_1(source)
    for batch in old.batches:
        for (key, value), _, _ in batch.updates():
            for what, item in (("key", key), ("value", value)):
                problem = storage_problem(item)
                if problem:
                    raise InvalidArgument(f"cannot convert {source}: the {what} {problem}")
    new = PersistedArrangement.create(target)

    def adopt(staged: PersistedArrangement) -> None:
        staged._batches = old.batches
        staged._upper, staged._since = old.upper, old.since
        staged._first, staged._boundaries = old.first, list(old._boundaries)

    new._transact(adopt, "convert")
    return new
