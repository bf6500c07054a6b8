"""Input files read the same way by every runtime: CSV, JSON Lines and Parquet, one schema.

The schema is given (``id:int64, name:string, lsn:int64``: Arrow type names) or
inferred once, by pyarrow, from the first file; the local runtime reads every file
with it (:func:`read_table`) and Spark is handed the same schema
(:func:`statemachines.spark.inputs.read_frame`, in ``FAILFAST`` mode), so both see the same columns and
types, and a file either runtime cannot read with them is an error, never a
partly applied file. Checks on the schema (:func:`require_columns`) therefore hold
for an empty file as for a full one.

    file                               both runtimes
    header-only CSV, misspelt column   error: no column lsm; it has id, name, lsn
    CSV time 2.5 in an int64 column    error: cannot read feed.csv as csv: ...
    CSV field NA, NULL or NaN          the text (a string column), NaN (a double one): only
                                       an empty field is null, as Spark reads CSV
    JSON line that is not an object    error: feed.jsonl line 3 is not a JSON object
    JSON line without a named field    error: feed.jsonl line 7 has no field name
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from statemachines import InvalidArgument, MissingDependency
from statemachines.intake import INT64_MAX, INT64_MIN, INT64_RANGE
from statemachines.textfiles import COMPRESSED, open_text

__all__ = [
    "FORMATS",
    "files_of",
    "infer_schema",
    "input_format",
    "parse_schema",
    "read_table",
    "require_columns",
    "require_fields",
    "require_readable",
    "require_time_type",
]

FORMATS = ("parquet", "csv", "jsonl")
SUFFIXES = {"parquet": (".parquet",), "csv": (".csv",), "jsonl": (".jsonl", ".ndjson", ".json")}


def input_format(path: str, given: str | None) -> str:
    """The format of a file, or of the files of a directory (from their suffix; a
    CSV or JSON Lines file may be compressed, ``changes.jsonl.gz``, ``.bz2``)."""
    if not given and os.path.isdir(path):  # a directory: the suffix its files share
        suffixes = {_suffix(f) for f in os.listdir(path) if not f.startswith((".", "_"))}
        path = "x" + suffixes.pop() if len(suffixes) == 1 else path
    fmt = given or _suffix(path).lstrip(".").lower().replace("ndjson", "jsonl")
    if fmt == "json":
        fmt = "jsonl"
    if fmt not in FORMATS:
        raise InvalidArgument(f"cannot tell the format of {path!r}; pass --format {'/'.join(FORMATS)}")
    return fmt


def _suffix(name: str) -> str:
    """The suffix that names a file's format, behind a compression suffix (Arrow and
    Spark read such text files by their suffix too)."""
    stem, suffix = os.path.splitext(name)
    return os.path.splitext(stem)[1] if suffix.lower() in COMPRESSED else suffix


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """A text file's lines, numbered from 1, decompressed as its suffix says.

    Raises:
        InvalidArgument: the file cannot be decompressed.
    """
    try:
        with open_text(path, errors="replace") as handle:
            yield from enumerate(handle, 1)
    except (OSError, EOFError) as exc:
        raise InvalidArgument(f"cannot read {path}: {_first_line(exc)}") from None


def files_of(path: str, fmt: str) -> list[str]:
    """``path`` itself, or the files of the directory ``path`` (hidden ones left out)."""
    if not os.path.exists(path):
        raise InvalidArgument(f"no such input: {path}")
    if not os.path.isdir(path):
        return [path]
    found = sorted(
        os.path.join(path, f) for f in os.listdir(path)
        if not f.startswith((".", "_")) and os.path.isfile(os.path.join(path, f))
    )
    if not found:
        raise InvalidArgument(f"{path} holds no {fmt} file; put the input files there")
    return found


def parse_schema(text: str) -> Any:
    """``"id:int64, name:string"`` as an Arrow schema (types by their Arrow names).

    >>> parse_schema("id:int64, at: timestamp[us], name:string")
    id: int64
    at: timestamp[us]
    name: string
    """
    _require_pyarrow()
    import pyarrow as pa

    fields = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, kind = item.partition(":")
        try:
            if not sep or not name.strip():
                raise ValueError
            fields.append(pa.field(name.strip(), pa.type_for_alias(kind.strip())))
        except (ValueError, KeyError):
            raise InvalidArgument(
                f"--schema takes name:type pairs with Arrow type names (int64, double, string, bool, "
                f"date32, timestamp[us]), got {item!r}"
            ) from None
    if not fields:
        raise InvalidArgument("--schema names no column")
    return pa.schema(fields)


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise MissingDependency("reading input files needs pyarrow: pip install 'statemachines[persist]'") from None


def infer_schema(path: str, fmt: str) -> Any:
    """The schema of the first file of ``path``, as pyarrow infers it, with unsigned
    integers read as the signed type that holds them (Spark has none: ``uint64``, as
    Delta's change data feed writes ``_commit_version``, reads as ``int64``).

    ======  ======  ======  ======
    uint8   uint16  uint32  uint64
    int16   int32   int64   int64
    ======  ======  ======  ======
    """
    first = files_of(path, fmt)[0]
    _require_pyarrow()
    import pyarrow as pa

    signed = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}
    schema = _read_file(first, fmt, None).schema
    return pa.schema([field.with_type(signed.get(field.type, field.type)) for field in schema])


def read_table(path: str, fmt: str, schema: Any) -> Any:
    """Every file of ``path`` read with ``schema``, as one ``pyarrow.Table``."""
    import pyarrow as pa

    tables = [_read_file(f, fmt, schema) for f in files_of(path, fmt)]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def require_readable(path: str, fmt: str, schema: Any) -> None:
    """Every file of ``path`` reads with ``schema`` (one at a time, nothing kept): run
    before Spark reads them, a file that does not fit is the same one-line error on
    both runtimes, before anything runs."""
    for file in files_of(path, fmt):
        _read_file(file, fmt, schema)


def _read_file(path: str, fmt: str, schema: Any) -> Any:
    import pyarrow as pa

    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            return table if schema is None else _cast(table, schema, path)
        if fmt == "csv":
            from pyarrow import csv

            convert = csv.ConvertOptions(  # as Spark reads CSV: only an empty field is null
                null_values=[""], strings_can_be_null=True, **({"column_types": schema} if schema is not None else {})
            )
            table = csv.read_csv(path, convert_options=convert)
            return table if schema is None else _cast(table, schema, path)
        from pyarrow import json as pj

        _require_objects(path)
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore") if schema is not None else None
        return pj.read_json(path, parse_options=options)
    except InvalidArgument:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read {path} as {fmt}: {_first_line(exc)}") from None


def _cast(table: Any, schema: Any, path: str) -> Any:
    """``table`` with ``schema``'s columns and types; the missing columns are left for
    :func:`require_columns` to name."""
    import pyarrow as pa

    columns = {}
    for field in schema:
        if field.name in table.column_names:
            try:
                columns[field.name] = table.column(field.name).cast(field.type)
            except (pa.ArrowException, ValueError) as exc:
                raise InvalidArgument(
                    f"cannot read {path}: column {field.name} is not {field.type} ({_first_line(exc)})"
                ) from None
    return pa.table(columns)


def _require_objects(path: str) -> None:
    for number, line in _lines(path):
        if line.strip() and not line.lstrip().startswith("{"):
            raise InvalidArgument(f"{path} line {number} is not a JSON object; JSON Lines hold one object per line")


def require_fields(path: str, fmt: str, names: Iterable[str], time: str | None = None) -> None:
    """Every line of a JSON Lines input has the top-level fields ``names``, and its
    ``time``, if an integer, is one a 64-bit column holds.

    A field that is absent would read as null, and a null may mean something (an
    ``Upsert`` symbol of null is a delete): an absent field is an error instead. An
    integer beyond 64 bits would read as an inexact float.
    """
    if fmt != "jsonl":
        return
    names = list(names)
    for file in files_of(path, fmt):
        for number, line in _lines(file):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidArgument(f"{file} line {number} is not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise InvalidArgument(f"{file} line {number} is not a JSON object; JSON Lines hold one object per line")
            missing = [n for n in names if n not in row]
            if missing:
                raise InvalidArgument(
                    f"{file} line {number} has no field {', '.join(missing)}; every line needs it "
                    f"(write null for a null cell)"
                )
            cell = row.get(time) if time is not None else None
            if type(cell) is int and not INT64_MIN <= cell < INT64_MAX:
                raise InvalidArgument(
                    f"{file} line {number}: time {cell} is outside the 64-bit integer range {INT64_RANGE}"
                )


def require_columns(schema: Any, names: Iterable[str], path: str) -> None:
    """Each of ``names`` is a column of ``schema``, or an error naming the missing ones."""
    missing = [n for n in dict.fromkeys(names) if n not in schema.names]
    if missing:
        raise InvalidArgument(f"{path} has no column(s) {', '.join(missing)}; it has {', '.join(schema.names) or 'none'}")


def require_time_type(schema: Any, column: str, path: str) -> None:
    """The time column holds numbers, dates or timestamps (as every runtime needs)."""
    import pyarrow as pa

    kind = schema.field(column).type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_temporal(kind)):
        raise InvalidArgument(
            f"the time column {column} of {path} reads as {kind}; times are numbers, dates or "
            f"timestamps (ISO 8601 text reads as a timestamp; give --schema to say which)"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
