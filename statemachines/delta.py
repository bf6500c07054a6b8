"""The Delta Lake table under a persisted arrangement: files, log and state.

An arrangement at ``uri`` is a Delta table (``key, value, time, diff``) that any
engine reads, plus the arrangement's own state beside it::

    _delta_log/                        the Delta log: which data files each version holds
    batch-<id>.parquet                 data files, sorted by key (or Spark's part files)
    _statemachines/state-<n>-<a>.json  the arrangement's state at sequence number n,
                                       written by commit attempt a

The state (upper, since, batch boundaries, which files form which batch, a stream's
progress, the writer's notes such as waterline high marks) is written *before* the
Delta commit that publishes it; the commit carries the Delta application
transactions ``statemachines = n`` and ``statemachines.attempt = a``, so a version
of the table names its state, and the two change in one atomic step. Delta
checkpoints keep application transactions, so the state survives them. Before the
first commit (an arrangement with nothing stored yet) the state is ``state-0``.

Data files are only ever added and removed through commits; nothing deletes them
but :func:`vacuum`, after a retention period, so a reader pinned to a version keeps
its files. Paths are local paths or URIs (``file://``, ``s3://``, ``abfss://``,
``gs://``): the log goes through delta-rs's object stores, files through pyarrow's,
on S3 with the same settings (:func:`location`).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import os
import time as _time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from statemachines.errors import InvalidArgument, MissingDependency

__all__ = [
    "APP_ID",
    "FORMAT",
    "STATE_DIR",
    "DamagedArrangement",
    "Location",
    "MaintainedMeanwhile",
    "Snapshot",
    "VersionSpec",
    "batch_files",
    "commit",
    "data_file",
    "location",
    "missing_data_file",
    "missing_data_files",
    "on_local_disk",
    "read_snapshot",
    "s3_filesystem",
    "table_retention_hours",
    "vacuum",
    "version_at",
]

# a Delta version, or a commit time: the latest version committed then (Delta's timestampAsOf)
VersionSpec = int | _dt.datetime | str

FORMAT = 2
APP_ID = "statemachines"
# The commit's attempt: two writers (a mistake) at one sequence write two state files,
# and the version names the one its commit wrote; the loser's never replaces it.
ATTEMPT_ID = "statemachines.attempt"
STATE_DIR = "_statemachines"
LOG_DIR = "_delta_log"
LEGACY_MANIFEST = "manifest.json"
RETENTION_HOURS = 168  # Delta's default: a week
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
# a checkpoint every 10 commits: opening replays at most 9 commit files (6 ms, not 26)
TABLE_SETTINGS = {"delta.checkpointInterval": "10", "delta.enableChangeDataFeed": "true"}
# Delta deletes log files older than delta.logRetentionDuration (30 days) after a
# commit, listing the whole log to find them; doing it after every commit made each
# commit cost what the log holds (25 ms at 3,000 versions, 7 ms without)
LOG_CLEANUP_EVERY = 100


class DamagedArrangement(InvalidArgument):
    """A file the arrangement needs is missing or unreadable; the message says which, and the remedy."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class MaintainedMeanwhile(InvalidArgument):
    """A commit lost to table maintenance (:data:`MAINTENANCE`, and nothing else)
    committed since its version was read: it changed nothing, and made again on the
    table as the maintenance left it (which changed no row), it does what it would
    have done."""


def deltalake() -> Any:
    try:
        import deltalake as dl
        import pyarrow.parquet  # noqa: F401 - loads the parquet submodule
    except ImportError as exc:
        raise MissingDependency(
            "persisted arrangements need deltalake and pyarrow: pip install 'statemachines[persist]'"
        ) from exc
    return dl


@attrs.frozen
class Location:
    """Where an arrangement lives: its URI, and pyarrow's file system for its files."""

    uri: str  # an absolute local path, or a URI
    filesystem: Any
    root: str  # the table's path inside ``filesystem``
    storage_options: dict[str, str] | None = None

    @property
    def is_local(self) -> bool:
        return type(self.filesystem).__name__ == "LocalFileSystem"

    def path(self, relative: str) -> str:
        """A path inside the table, for ``filesystem``."""
        return f"{self.root.rstrip('/')}/{relative}"

    def uri_of(self, relative: str) -> str:
        """A path inside the table as a URI (what Spark and other engines open)."""
        return f"{self.uri.rstrip('/')}/{relative}"


def on_local_disk(path: str) -> bool:
    """Whether ``path`` is on the local file system: a plain path or a ``file:`` URI
    (``s3a://``, ``hdfs://``... are not)."""
    return "://" not in path or path.startswith("file:")


def location(path: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> Location:
    """The :class:`Location` of ``path``: a local path (made absolute) or a URI.

    An ``s3://`` (or ``s3a://``) location's files are reached with the options
    delta-rs reads for its log, so both go to one store with one identity: the
    ``AWS_*`` environment variables, overridden by ``storage_options``
    (:func:`s3_filesystem`). Other object stores take their settings from the
    environment, which delta-rs and pyarrow both read; ``storage_options`` for them
    are refused rather than half applied.
    """
    from pyarrow import fs

    text = os.fspath(path)
    if "://" not in text:
        text = os.path.abspath(text)
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in ("s3", "s3a"):
        root = text.split("://", 1)[1].rstrip("/")
        return Location(text, s3_filesystem({**_aws_environment(), **(storage_options or {})}), root, storage_options)
    if storage_options and scheme not in ("", "file"):
        raise InvalidArgument(
            f"storage_options are read for s3:// locations; for {scheme}:// give the store's settings "
            f"as environment variables, which both delta-rs (the log) and pyarrow (the files) read"
        )
    try:
        filesystem, root = fs.FileSystem.from_uri(text)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds here
        raise InvalidArgument(f"cannot open {text}: {exc}") from exc
    if text.startswith("file://"):
        text = root
    return Location(text, filesystem, root, storage_options)


# delta-rs's (object_store's) S3 settings, without ``aws_`` and in lower case -> the
# argument of pyarrow's S3FileSystem that means the same
_S3_ARGUMENTS = {
    "access_key_id": "access_key",
    "secret_access_key": "secret_key",
    "session_token": "session_token",
    "token": "session_token",
    "region": "region",
    "default_region": "region",
    "endpoint_url": "endpoint_override",
    "endpoint": "endpoint_override",
}


def s3_filesystem(options: dict[str, str]) -> Any:
    """pyarrow's S3 file system for the S3 settings ``options``, named as delta-rs
    names them (``AWS_ACCESS_KEY_ID`` or ``access_key_id``, ``AWS_ENDPOINT_URL``,
    ``AWS_REGION``, ``AWS_ALLOW_HTTP``, ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST``, ...).
    Settings that concern only the Delta log's commits (locking, renames) are
    delta-rs's alone.

        options                                               S3FileSystem
        AWS_ENDPOINT_URL=http://127.0.0.1:9000                endpoint_override=127.0.0.1:9000, scheme=http
        AWS_REGION=eu-west-1, AWS_ACCESS_KEY_ID=k, ...        region=eu-west-1, access_key=k, ...
    """
    from pyarrow import fs

    arguments: dict[str, Any] = {}
    for key, value in options.items():
        name = key.lower().removeprefix("aws_")
        if name in _S3_ARGUMENTS:
            arguments[_S3_ARGUMENTS[name]] = value
        elif name == "allow_http" and value.lower() == "true":
            arguments.setdefault("scheme", "http")
        elif name == "virtual_hosted_style_request":
            arguments["force_virtual_addressing"] = value.lower() == "true"
    endpoint = arguments.get("endpoint_override")
    if endpoint is not None and "://" in endpoint:  # pyarrow takes the scheme apart
        arguments["scheme"], arguments["endpoint_override"] = endpoint.split("://", 1)
    try:
        return fs.S3FileSystem(**arguments)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds here
        raise InvalidArgument(f"cannot reach S3 with these settings: {exc}") from exc


def _aws_environment() -> dict[str, str]:
    """The ``AWS_*`` environment variables (delta-rs reads them too)."""
    return {key: value for key, value in os.environ.items() if key.startswith("AWS_")}


@attrs.frozen
class Snapshot:
    """One version of an arrangement: its state and the Delta table version holding it.

    ``version`` is ``None`` before the first commit (no Delta log yet).
    """

    state: dict[str, Any]
    version: int | None
    schema: Any = None  # the table's Arrow schema (None before the first commit)
    table: Any = attrs.field(default=None, eq=False, repr=False)  # delta-rs's table at ``version``


def contents(loc: Location) -> list[str]:
    """The names directly inside ``loc`` (empty if it does not exist)."""
    from pyarrow import fs

    info = loc.filesystem.get_file_info(loc.root)
    if info.type == fs.FileType.NotFound:
        return []
    if info.type != fs.FileType.Directory:
        raise InvalidArgument(f"{loc.uri} is a file, not an arrangement")
    selector = fs.FileSelector(loc.root, recursive=False)
    return sorted(item.base_name for item in loc.filesystem.get_file_info(selector))


def present(loc: Location, names: Iterable[str]) -> set[str]:
    """Which of ``names`` exist directly inside ``loc`` (one call, no listing)."""
    from pyarrow import fs

    names = list(names)
    infos = loc.filesystem.get_file_info([loc.path(name) for name in names])
    return {name for name, info in zip(names, infos, strict=True) if info.type != fs.FileType.NotFound}


def state_name(sequence: int, attempt: int | None = None) -> str:
    """The state file of ``sequence`` written by commit ``attempt`` (``None``: the
    first state, or one written before attempts were named)."""
    tag = "" if attempt is None else f"-{attempt:016x}"
    return f"{STATE_DIR}/state-{sequence:020d}{tag}.json"


def _state_file_parts(name: str) -> tuple[int, int | None]:
    """``(sequence, attempt)`` of a state file's base name."""
    sequence, _, attempt = name.removeprefix("state-").removesuffix(".json").partition("-")
    return int(sequence), int(attempt, 16) if attempt else None


def put(loc: Location, relative: str, data: bytes) -> None:
    """Write a whole file at once: readers see all of it or none.

    Object stores put atomically; a local file is written aside and renamed.
    """
    target = loc.path(relative)
    loc.filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    if not loc.is_local:
        with loc.filesystem.open_output_stream(target) as out:
            out.write(data)
        return
    aside = f"{target}.{uuid.uuid4().hex}.tmp"
    with open(aside, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(aside, target)


def put_state(loc: Location, state: dict[str, Any], attempt: int | None = None) -> None:
    """Write ``state`` as the state file of its sequence number and commit ``attempt``
    (not yet published)."""
    put(loc, state_name(state["sequence"], attempt), json.dumps(state, indent=1).encode())


TORN_READ_ATTEMPTS = 3
"""How often a state file on an object store is read before it is taken as damaged.
pyarrow reads such a file in ranges of the size it found when it opened it, so a
file replaced meanwhile (state-0, rewritten by the first commit) can read torn; the
next read sees the whole new file. A local file is replaced by a rename: never torn."""


def _read_state(loc: Location, relative: str) -> dict[str, Any]:
    for attempt in range(1, TORN_READ_ATTEMPTS):
        try:
            return _read_state_once(loc, relative)
        except DamagedArrangement as exc:
            if loc.is_local or not isinstance(exc.__cause__, ValueError):  # missing, or a local file
                raise
        _time.sleep(0.05 * attempt)
    return _read_state_once(loc, relative)


def _read_state_once(loc: Location, relative: str) -> dict[str, Any]:
    try:
        with loc.filesystem.open_input_stream(loc.path(relative)) as stream:
            state: dict[str, Any] = json.loads(stream.read())
        if not isinstance(state, dict) or not {"format", "sequence", "upper", "since", "batches"} <= set(state):
            raise ValueError("a field is missing")
    except FileNotFoundError as exc:
        raise DamagedArrangement(
            f"{loc.uri_of(relative)} is missing: the arrangement's state at this version is "
            f"lost; restore the file from a backup (the data files are intact)",
            loc.uri_of(relative),
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedArrangement(
            f"{loc.uri_of(relative)} is damaged ({exc}); restore the file from a backup",
            loc.uri_of(relative),
        ) from exc
    if state["format"] != FORMAT:
        raise InvalidArgument(f"{loc.uri_of(relative)} has format {state['format']!r}; this version reads {FORMAT}")
    return state


def _open_table(loc: Location, version: int | None) -> Any:
    dl = deltalake()
    try:
        return dl.DeltaTable(loc.uri, version=version, storage_options=loc.storage_options)
    except dl.exceptions.TableNotFoundError as exc:
        if version is not None:  # its log entry expired, unless the whole log is gone
            _open_table(loc, None)  # raises if it is
            raise _no_version(loc, version) from exc
        raise DamagedArrangement(
            f"the Delta log {loc.uri_of(LOG_DIR)} is missing or empty; restore it from a backup",
            loc.uri_of(LOG_DIR),
        ) from exc
    except Exception as exc:  # noqa: BLE001 - delta-rs reports damage as several kinds
        if version is not None and "version" in str(exc).lower() and "not" in str(exc).lower():
            _open_table(loc, None)  # raises if the log is damaged
            raise _no_version(loc, version) from exc
        raise DamagedArrangement(
            f"the Delta log {loc.uri_of(LOG_DIR)} is damaged ({type(exc).__name__}: "
            f"{first_line(exc)}); restore it from a backup",
            loc.uri_of(LOG_DIR),
        ) from exc


def _no_version(loc: Location, version: int) -> InvalidArgument:
    """The error for a ``version`` the log does not hold (yet, or any more)."""
    held = [v for v, _ in commit_times(loc)]
    why = ""
    if held and version < held[0]:
        why = (
            " (Delta removes the log entries of versions older than the table's "
            "delta.logRetentionDuration, 30 days unless set, once a later checkpoint holds the table)"
        )
    span = f"from {held[0]} to {held[-1]}" if held else "none"
    return InvalidArgument(f"{loc.uri} has no version {version}: the versions its log holds run {span}{why}")


def commit_times(loc: Location) -> list[tuple[int, int]]:
    """``(version, commit time in ms)`` of each version the log still holds, in order.

    As Delta dates a commit without in-commit timestamps (and as delta-rs reads
    ``load_as_version`` and ``restore`` by time): its log file's modification time,
    made to increase (a time not after the one before is taken as 1 ms after it).
    """
    from pyarrow import fs

    found = []
    for info in loc.filesystem.get_file_info(fs.FileSelector(loc.path(LOG_DIR))):
        stem, _, suffix = info.base_name.partition(".")
        if suffix == "json" and stem.isdigit() and info.mtime_ns is not None:
            found.append((int(stem), info.mtime_ns // 1_000_000))
    times: list[tuple[int, int]] = []
    for version, modified in sorted(found):
        times.append((version, max(modified, times[-1][1] + 1) if times else modified))
    return times


def version_at(loc: Location, moment: _dt.datetime | str) -> int:
    """The latest version committed at or before ``moment``, as Delta's
    ``timestampAsOf`` reads: a datetime (naive: UTC) or an ISO 8601 string; a
    version's commit time is its log file's (see :func:`commit_times`).

    With versions 0, 1 and 2 committed at 09:00, 10:00 and 11:00:

    ======  ==================================
    moment  version_at
    ======  ==================================
    10:30   1
    11:00   2
    08:00   refused: before the first commit
    ======  ==================================

    Raises:
        InvalidArgument: ``moment`` is not a time, or comes before the first commit
            the log still holds.
    """
    if isinstance(moment, str):
        try:
            moment = _dt.datetime.fromisoformat(moment)
        except ValueError:
            raise InvalidArgument(
                f"{moment!r} is neither a version nor an ISO 8601 time (such as 2026-11-24T09:30:00Z)"
            ) from None
    if not isinstance(moment, _dt.datetime):
        raise InvalidArgument(f"a version is an integer or a commit time (datetime), not {moment!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    at_ms = moment.timestamp() * 1000
    commits = commit_times(loc)
    before = [version for version, committed in commits if committed <= at_ms]
    if not before:
        earliest = "none"
        if commits:
            at = _dt.datetime.fromtimestamp(commits[0][1] / 1000, _dt.UTC).isoformat()
            earliest = f"version {commits[0][0]}, at {at}"
        raise InvalidArgument(
            f"{loc.uri} has no version committed at or before {moment.isoformat()}; the earliest "
            f"commit its log holds: {earliest}"
        )
    return max(before)


def read_snapshot(loc: Location, version: VersionSpec | None = None, *, foreign: bool = False) -> Snapshot:
    """The arrangement's state at a Delta ``version`` (default: the latest), or at the
    latest version committed at a time (a datetime or ISO string, :func:`version_at`).

    Before the first commit the state is ``state-0``, which the first commit then
    marks (``"table": true``): from then on, a missing log is damage, not an empty
    arrangement. The data files the log names must be those the state's batches
    name: another writer's commit (a Delta ``DELETE``, ``UPDATE`` or append) that
    changed them is refused by name, unless ``foreign`` (then the caller compares).
    A ``RESTORE`` to one of the arrangement's versions, and ``OPTIMIZE`` commits, are
    read through (:func:`_restored_state`, :func:`_optimized_state`).

    Raises:
        InvalidArgument: ``loc`` holds no arrangement, or a format-1 one.
        DamagedArrangement: its log or state file is missing or unreadable, or
            another writer changed the table's files.
    """
    names = present(loc, (LOG_DIR, STATE_DIR, LEGACY_MANIFEST))
    if LOG_DIR not in names and STATE_DIR not in names:
        if LEGACY_MANIFEST in names:
            raise InvalidArgument(
                f"{loc.uri} holds an arrangement of format 1 (Parquet files and {LEGACY_MANIFEST}); "
                f"convert it to a Delta table with: statemachines convert {loc.uri} NEW_PATH"
            )
        raise InvalidArgument(f"{loc.uri} holds no arrangement")
    first = _read_state(loc, state_name(0)) if STATE_DIR in names else {"table": True}
    if not first.get("table"):  # no commit yet (or the first one is under way)
        if version is not None:
            raise InvalidArgument(f"{loc.uri} has no versions yet: nothing was committed")
        return Snapshot(first, None)
    if isinstance(version, bool) or (isinstance(version, int) and version < 0):
        raise InvalidArgument(f"a version is a Delta version, 0 or more, or a commit time; got {version!r}")
    if version is not None and not isinstance(version, int):
        version = version_at(loc, version)
    # looked for again: the first commit may have made the log after the listing above
    if LOG_DIR not in names and LOG_DIR not in present(loc, (LOG_DIR,)):
        raise DamagedArrangement(
            f"the Delta log {loc.uri_of(LOG_DIR)} is missing, and the arrangement stored "
            f"data; restore it from a backup",
            loc.uri_of(LOG_DIR),
        )
    table = _open_table(loc, version)
    sequence = table.transaction_version(APP_ID)
    if sequence is None:
        raise InvalidArgument(
            f"{loc.uri} is a Delta table but not an arrangement (no '{APP_ID}' "
            f"transaction in its log)"
        )
    state_file = state_name(sequence, table.transaction_version(ATTEMPT_ID))
    try:
        state = _read_state(loc, state_file)
    except DamagedArrangement as exc:
        if version is None or not isinstance(exc.__cause__, FileNotFoundError):
            raise
        latest = _open_table(loc, None)
        if latest.transaction_version(APP_ID) == sequence:  # the latest version's own state: damage
            raise
        raise _vacuumed(loc, state_file, version, latest.version()) from exc
    snapshot = Snapshot(state, table.version(), _as_pyarrow(table.schema().to_arrow()), table)
    logged = logged_files(loc, snapshot)
    if logged != set(batch_files(state)):
        history = _history_back_to_own(loc, table.version())
        restored, restore = _restored_state(loc, history, table.version()), None
        if restored is not None:
            state, restore = restored
            if set(batch_files(state)) == logged:
                return attrs.evolve(snapshot, state=state)
        optimized = _optimized_state(history, table, state, logged, restore)
        if optimized is not None:
            return attrs.evolve(snapshot, state=optimized)
        if not foreign:
            raise DamagedArrangement(_foreign_writes(loc, history), loc.uri)
    return snapshot


def missing_data_file(loc: Location, version: int | None, name: str) -> DamagedArrangement:
    """The error for the data file ``name``, which ``version`` names and storage lacks.
    If the latest version no longer names it, a compaction dropped it and a vacuum
    deleted it (as Delta's time travel past the retention period): read a later
    version. Else it is damage: restore it from a backup."""
    return missing_data_files(loc, version, [name])[0]


def missing_data_files(loc: Location, version: int | None, names: list[str]) -> list[DamagedArrangement]:
    """:func:`missing_data_file` for each of ``names``, the latest version read once."""
    try:
        latest = read_snapshot(loc)
    except InvalidArgument:  # the table is damaged further: name these files
        latest = None
    newest, kept = None, set()  # a later version, and the files it names
    if latest is not None and latest.version not in (None, version):
        newest, kept = latest.version, set(batch_files(latest.state))
    return [
        _vacuumed(loc, name, version, newest) if newest is not None and name not in kept
        else DamagedArrangement(
            f"{loc.uri_of(name)} is missing, and version {version} of the arrangement names it; restore the "
            f"file from a backup, or read an older version (PersistedArrangement.open(path, version=...)) "
            f"that does not name it",
            loc.uri_of(name),
        )
        for name in names
    ]


def _vacuumed(loc: Location, relative: str, version: int | None, latest: int) -> DamagedArrangement:
    """The error for a file ``version`` needs that a later version does not, and which
    is gone: a vacuum deleted it, as Delta's time travel past the retention period."""
    return DamagedArrangement(
        f"{loc.uri_of(relative)} is missing: version {version} of the arrangement needs it, but a "
        f"later version does not and a vacuum deleted it (Delta keeps the files only earlier "
        f"versions need for the table's retention period); version {version} can no longer be "
        f"read: read a later one, up to the latest, {latest}",
        loc.uri_of(relative),
    )


def _history_back_to_own(loc: Location, version: int) -> list[dict[str, Any]]:
    """The table's commits, newest first, back to the arrangement's last own commit at
    or before ``version`` (or the whole log): read in growing pieces from the latest
    version, not the whole log of a table that has lived for months.

    From the latest version, as delta-rs numbers the history of an older version's
    table from that version down, later commits included."""
    latest = _open_table(loc, None)
    limit = max(16, latest.version() - version + 16)
    while True:
        history = latest.history(limit)
        if len(history) < limit or any(APP_ID in c for c in history if c["version"] <= version):
            return history
        limit *= 4


def _restored_state(loc: Location, history: list[dict[str, Any]], version: int) -> tuple[dict[str, Any], int] | None:
    """The state of the arrangement's own version that the newest Delta ``RESTORE``
    since its last commit, up to ``version``, brought back, and that restore's
    version; or ``None``. ``history``: the table's commits, newest first.

    A restore to one of its versions rolls the arrangement back to it: the next
    commit continues from that version's state (upper, batches, notes), as
    :func:`read_snapshot` reads that version (through the maintenance before it).
    A restore by time names the version :func:`version_at` finds, as delta-rs
    restores it.
    """
    for commit in history:
        if commit["version"] > version:
            continue
        if APP_ID in commit:
            return None
        if commit.get("operation") != "RESTORE":
            continue
        named = commit.get("operationParameters") or {}
        if named.get("version") is not None:
            target = int(named["version"])
        elif named.get("datetime") is not None:
            target = version_at(loc, _dt.datetime.fromtimestamp(int(named["datetime"]) / 1000, _dt.UTC))
        else:
            return None
        if _open_table(loc, target).transaction_version(APP_ID) is None:
            return None
        return read_snapshot(loc, target).state, commit["version"]
    return None


OPTIMIZE = "OPTIMIZE"
"""The operation of a Delta commit that rewrites files without changing the rows
(``OPTIMIZE``, with or without ``ZORDER BY``; its adds and removes say
``dataChange: false``), as delta-rs and Spark name it."""

MAINTENANCE = (OPTIMIZE, "VACUUM START", "VACUUM END", "SET TBLPROPERTIES")
"""The operations of other engines' commits that change no row: an ``OPTIMIZE``, the
commits a ``VACUUM`` writes around its deletions (delta-rs's and Spark's, this
project's own included), a table property set."""


def _optimized_state(
    history: list[dict[str, Any]], table: Any, state: dict[str, Any], logged: set[str], restore: int | None = None
) -> dict[str, Any] | None:
    """The arrangement's state read through the ``OPTIMIZE`` commits another engine
    made since its last commit, or since the ``restore`` that brought ``state`` back
    (every foreign commit since then one, or other :data:`MAINTENANCE`), or ``None``.

    An ``OPTIMIZE`` rewrites small files into larger ones and changes no row, so the
    arrangement is the same: the batches whose files it replaced, and those between
    them (a batch covers the times from its lower to its upper, one after another),
    become one batch of the files that now hold their rows, marked ``rewritten``
    (their rows in another order: read as such). Its rows are checked against the
    batches' counts, from the log's statistics where it has them.

        batches (files)          OPTIMIZE                  batches read
        [0, 2) a   [2, 5) b      a, b -> ab                [0, 5) ab  [5, 9) c
        [5, 9) c
    """
    newest, foreign = table.version(), []
    for commit in history:  # newest first
        if commit["version"] > newest:
            continue
        if APP_ID in commit or (restore is not None and commit["version"] <= restore):
            break
        foreign.append(commit.get("operation"))
    if OPTIMIZE not in foreign or not set(foreign) <= set(MAINTENANCE):
        return None
    batches = state["batches"]
    named = set(batch_files(state))
    touched = [i for i, batch in enumerate(batches) if not set(batch["files"]) <= logged]
    if not touched:
        return None
    first, last = touched[0], touched[-1]
    run = batches[first : last + 1]
    files = [name for batch in run for name in batch["files"] if name in logged] + sorted(logged - named)
    count = sum(batch["count"] for batch in run)
    rows = _rows_logged(table, files)
    if rows is not None and rows != count:
        return None
    sinces = [batch["since"] for batch in run if batch["since"] is not None]
    merged = {
        "id": uuid.uuid4().hex,
        "files": files,
        "lower": run[0]["lower"],
        "upper": run[-1]["upper"],
        "since": sinces[-1] if sinces else None,
        "count": count,
        "rewritten": True,
    }
    return {**state, "batches": [*batches[:first], merged, *batches[last + 1 :]]}


def _rows_logged(table: Any, files: list[str]) -> int | None:
    """The rows of ``files`` by the Delta log's statistics, or ``None`` where it has none."""
    from urllib.parse import unquote

    actions = table.get_add_actions(flatten=True)
    if "num_records" not in actions.schema.names:
        return None
    wanted = set(files)
    rows = 0
    for path, records in zip(actions.column("path").to_pylist(), actions.column("num_records").to_pylist(), strict=True):
        if unquote(path) in wanted:
            if records is None:
                return None
            rows += records
    return rows


def batch_files(state: dict[str, Any]) -> list[str]:
    """The data files the state's batches name, relative to the table, in batch order."""
    return [name for batch in state["batches"] for name in batch["files"]]


def _foreign_writes(loc: Location, history: list[dict[str, Any]]) -> str:
    """Why a table whose files differ from its arrangement's batches cannot be read as
    the arrangement, naming the commits another writer made (from the table's
    ``history``) and the remedy."""
    ours = [h["version"] for h in history if APP_ID in h]
    foreign = sorted((h["version"], h.get("operation", "?")) for h in history if APP_ID not in h)
    after = [f for f in foreign if not ours or f[0] > max(ours)] or foreign
    shown = ", ".join(f"version {v} ({operation})" for v, operation in after[:5]) or "a commit"
    target = after[0][0] - 1 if after else None
    text = (
        f"another writer changed the Delta table {loc.uri}: {shown}{' ...' if len(after) > 5 else ''}; "
        f"its files are no longer the arrangement's batches. An arrangement has one writer"
    )
    if target is not None:
        text += (
            f"; to continue it, restore the table to version {target}, the last the arrangement "
            f"wrote alone (or to an earlier version it wrote, to roll it back): "
            f"deltalake.DeltaTable({loc.uri!r}).restore({target})"
        )
    return text


def logged_files(loc: Location, snapshot: Snapshot) -> set[str]:
    """The data files the Delta log names at the snapshot's version, relative to the table."""
    from urllib.parse import unquote

    table = snapshot.table if snapshot.table is not None else _open_table(loc, snapshot.version)
    prefixes = {unquote(loc.uri.rstrip("/")) + "/", unquote(loc.uri.rstrip("/")).removeprefix("file://") + "/"}
    names = set()
    for uri in table.file_uris():  # percent-encoded: a table at "/tmp/a b" has "/tmp/a%20b/..."
        name = unquote(uri)
        for prefix in prefixes:
            name = name.removeprefix(prefix)
        names.add(name.removeprefix("file://"))
    return names


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (delta-rs appends backtraces)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _as_pyarrow(schema: Any) -> Any:
    import pyarrow as pa

    return pa.schema(schema)


def data_file(loc: Location, relative: str, data_change: bool = True) -> Any:
    """The Delta add action of a complete Parquet file in the table, with statistics."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    info = loc.filesystem.get_file_info(loc.path(relative))
    metadata = pq.ParquetFile(loc.path(relative), filesystem=loc.filesystem).metadata
    stats = {"numRecords": metadata.num_rows, **_min_max(metadata)}
    return AddAction(
        relative, info.size, {}, int((info.mtime_ns or _time.time_ns()) // 1_000_000), data_change, json.dumps(stats, allow_nan=False)
    )


def _removal(loc: Location, relative: str, at: int) -> Any:
    """The Delta remove action of a file whose updates other files of the commit
    hold (``dataChange`` false), with its size, which change-feed readers need."""
    from deltalake.transaction import RemoveAction

    return RemoveAction(relative, False, at, loc.filesystem.get_file_info(loc.path(relative)).size, {})


STATISTICS_COLUMNS = ("key", "time", "diff")
"""The columns whose minimum and maximum a data file's add action records (and the
only ones whose Parquet statistics this project writes)."""


def _min_max(metadata: Any) -> dict[str, Any]:
    """Delta file statistics of the plain columns (min, max, nulls) from Parquet's own."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    names = metadata.schema.names
    for column in STATISTICS_COLUMNS:
        if column not in names:
            continue
        index = names.index(column)
        found = [metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)]
        if not found or any(s is None or not s.has_min_max for s in found):
            continue
        try:
            lows, highs = [s.min for s in found], [s.max for s in found]
            low[column], high[column] = _jsonable(min(lows)), _jsonable(max(highs))
            nulls[column] = sum(s.null_count or 0 for s in found)
        except TypeError:
            continue
    return {"minValues": low, "maxValues": high, "nullCount": nulls} if low else {}


def _jsonable(value: Any) -> Any:
    """A statistic as the log's JSON holds it; ``TypeError`` for one it records none
    of: bytes (as delta-rs), decimals (a float near the bound would mislead a reader
    skipping files by it), an infinity (JSON has none: ``Infinity`` is not JSON)."""
    if isinstance(value, bytes | decimal.Decimal) or isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"no statistics of {value!r}")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def commit(
    loc: Location,
    base: Snapshot,
    state: dict[str, Any],
    adds: Iterable[str],
    removes: Iterable[str],
    *,
    schema: Any,
    operation: str,
    rewritten: Iterable[str] = (),
    before_commit: Callable[[], None] | None = None,
) -> Snapshot:
    """Publish ``state`` with the files added and removed, as one Delta commit.

    ``adds`` hold new updates (``dataChange`` true); ``rewritten`` files hold updates
    of the ``removes`` again, merged or compacted (``dataChange`` false on both, as
    Delta's ``OPTIMIZE`` writes them). So a reader of the table's changes (Delta's
    change data feed, a Delta streaming source) sees each update once, as appended:

        commit                    adds (dataChange)      removes (dataChange)
        append                    new batch (true)       none
        append with a merge       new batch (true),      the merged batches (false)
                                  merged file (false)
        compact                   merged file (false)    every older file (false)

    ``state['sequence']`` must be one above ``base``'s. The state file is named by
    a random attempt number the commit records (:data:`ATTEMPT_ID`): a commit that
    loses a race with another writer raises, and the state file it wrote is never
    referenced, nor does it replace the winner's.
    """
    import secrets

    dl = deltalake()
    from deltalake.transaction import (
        CommitProperties,
        PostCommitHookProperties,
        Transaction,
    )

    sequence, attempt = state["sequence"], secrets.randbits(63)
    put_state(loc, state, attempt)
    adds = [*(data_file(loc, name) for name in adds), *(data_file(loc, name, False) for name in rewritten)]
    if before_commit is not None:
        before_commit()
    now = int(_time.time() * 1000)
    removed = [_removal(loc, name, now) for name in removes]
    properties = CommitProperties(
        custom_metadata={"statemachines": {"operation": operation, "sequence": sequence}},
        app_transactions=[Transaction(APP_ID, sequence), Transaction(ATTEMPT_ID, attempt)],
        max_commit_retries=0,
    )
    try:
        if base.version is None:
            dl.transaction.create_table_with_add_actions(
                loc.uri, dl.Schema.from_arrow(schema), adds, mode="error", configuration=TABLE_SETTINGS,
                storage_options=loc.storage_options, commit_properties=properties,
            )
            table = None
        else:
            table = base.table if base.table is not None else _open_table(loc, base.version)
            cleanup = None if sequence % LOG_CLEANUP_EVERY == 0 else False  # None: as the table says
            table.create_write_transaction(
                [*adds, *removed], "append", schema, commit_properties=properties,
                post_commithook_properties=PostCommitHookProperties(cleanup_expired_logs=cleanup),
            )
            table.update_incremental()
    except dl.exceptions.CommitFailedError as exc:
        if base.version is not None and _maintained_since(loc, base.version):
            raise MaintainedMeanwhile(
                f"another engine maintained {loc.uri} ({', '.join(MAINTENANCE)}) since version "
                f"{base.version} was read; nothing was committed: open the arrangement again to continue"
            ) from exc
        raise InvalidArgument(
            f"another writer committed to {loc.uri} since version {base.version} was read; "
            f"an arrangement has one writer ({first_line(exc)})"
        ) from exc
    except dl.exceptions.DeltaError as exc:
        if base.version is None and "exists" in str(exc).lower():
            raise InvalidArgument(f"another writer created the table at {loc.uri} meanwhile") from exc
        raise
    if base.version is None:  # from now on the log holds the state; say so in state-0
        put_state(loc, {**base.state, "sequence": 0, "table": True})
        return Snapshot(state, 0, schema)
    if table is None or table.version() != base.version + 1:
        table = None  # another writer's commit came in between: reopen when needed
    return Snapshot(state, base.version + 1, schema, table)


def _maintained_since(loc: Location, version: int) -> bool:
    """Whether every commit after ``version`` is another engine's :data:`MAINTENANCE`."""
    latest = _open_table(loc, None)
    later = [c for c in latest.history(limit=max(1, latest.version() - version)) if c["version"] > version]
    return bool(later) and all(APP_ID not in c and c.get("operation") in MAINTENANCE for c in later)


def vacuum(
    loc: Location,
    retention_hours: float | None = None,
    *,
    enforce_retention_duration: bool = True,
    dry_run: bool = False,
) -> list[str]:
    """Delete files no version within ``retention_hours`` needs; return what went.

    Data files go through Delta's vacuum (removed more than ``retention_hours`` ago,
    or never committed); state files of sequences older than the oldest version kept
    go too. A reader pinned to a version older than the retention may then fail.

    As Delta's ``VACUUM``: the retention defaults to the table's
    ``delta.deletedFileRetentionDuration`` (a week unless set), and a shorter one is
    refused unless ``enforce_retention_duration`` is False (Spark's
    ``retentionDurationCheck``); ``dry_run`` only lists what would go. Delta's vacuum
    counts whole hours: a fraction is rounded up (0.5 keeps an hour).

    Raises:
        InvalidArgument: ``retention_hours`` is negative or not a finite number, or
            below the table's retention while it is enforced.
    """
    import math

    from pyarrow import fs

    if retention_hours is not None and (
        not isinstance(retention_hours, int | float) or not 0 <= retention_hours < math.inf
    ):
        raise InvalidArgument(f"retention_hours is a number of hours, 0 or more; got {retention_hours!r}")
    snapshot = read_snapshot(loc)
    if snapshot.version is None:
        return []
    table_hours = table_retention_hours(snapshot.table.metadata().configuration)
    if retention_hours is None:
        retention_hours = table_hours
    elif enforce_retention_duration and retention_hours < table_hours:
        raise InvalidArgument(
            f"a retention of {retention_hours:g} hours is below the table's {RETENTION_PROPERTY} "
            f"({table_hours:g} hours): readers of older versions and unfinished writers may "
            f"still need those files. Vacuum with enforce_retention_duration=False (CLI: "
            f"--no-retention-check) if none can, or lower the table's {RETENTION_PROPERTY}"
        )
    hours = math.ceil(retention_hours)
    gone = list(
        snapshot.table.vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False, full=True)
    )
    horizon = _time.time_ns() - int(hours * 3600e9)
    current = snapshot.state["sequence"], snapshot.table.transaction_version(ATTEMPT_ID)
    kept = _referenced_parts(snapshot.state)
    for item in loc.filesystem.get_file_info(fs.FileSelector(loc.path(STATE_DIR), recursive=False)):
        name = item.base_name
        old = (item.mtime_ns or 0) < horizon
        if name.startswith("state-") and name.endswith(".json"):
            sequence, attempt = _state_file_parts(name)
            # state-0 says the log exists; at the current sequence, another attempt lost
            stale = 0 < sequence < current[0] or (sequence == current[0] and attempt != current[1])
        else:  # a stream's pending events or a file a writer left unfinished
            stale = name not in kept
        if stale and old:
            gone.append(f"{STATE_DIR}/{name}")
            if dry_run:
                continue
            if item.type == fs.FileType.Directory:
                loc.filesystem.delete_dir(item.path)
            else:
                loc.filesystem.delete_file(item.path)
    return gone


_INTERVAL_UNITS = {
    "nanosecond": 1 / 3.6e12, "microsecond": 1 / 3.6e9, "millisecond": 1 / 3.6e6,
    "second": 1 / 3600, "minute": 1 / 60, "hour": 1, "day": 24, "week": 168,
}


def table_retention_hours(configuration: dict[str, str]) -> float:
    """The table's ``delta.deletedFileRetentionDuration`` in hours (Delta's interval
    text, ``interval 7 days`` or ``1 day 12 hours``), or a week if it is not set.

    Raises:
        InvalidArgument: the property is not such an interval.
    """
    text = configuration.get(RETENTION_PROPERTY)
    if text is None:
        return RETENTION_HOURS
    words = text.lower().split()
    if words[:1] == ["interval"]:
        words = words[1:]
    hours = 0.0
    try:
        if not words or len(words) % 2:
            raise ValueError(text)
        for number, unit in zip(words[::2], words[1::2], strict=True):
            hours += float(number) * _INTERVAL_UNITS[unit.removesuffix("s")]
    except (ValueError, KeyError):
        raise InvalidArgument(
            f"the table's {RETENTION_PROPERTY} is {text!r}, not an interval such as 'interval 7 days'"
        ) from None
    if not 0 <= hours < float("inf"):
        raise InvalidArgument(f"the table's {RETENTION_PROPERTY} is {text!r}: a retention is 0 or more")
    return hours


def _referenced_parts(state: dict[str, Any]) -> set[str]:
    """Names inside the state directory the state still needs (a stream's files)."""
    stream = state.get("stream") or {}
    named = [stream.get("pending"), *stream.get("rejected", [])]
    return {n.split("/")[1] for n in named if n and n.startswith(f"{STATE_DIR}/")}
