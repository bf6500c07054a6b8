"""The ``statemachines`` command line: run machines, read and compact arrangements, CDC.

Every command has --help; bad input ends with a one-line error and exit code 2,
before anything is written. Spark is imported only for ``run --runtime spark``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import importlib
import json
import math
import os
import sys
import time
from collections import Counter
from typing import Any

import attrs

from statemachines import (
    LocalRuntime,
    Machine,
    PersistedArrangement,
    StateMachinesError,
    format_table,
    time_kind,
)
from statemachines import cdc as cdc_files
from statemachines.columns import python_rows
from statemachines.display import counts_line, pending_note, show_time
from statemachines.library import (
    ChangeFeed,
    Detector,
    Pattern,
    Upsert,
    UpsertWithLateness,
    inputs,
    run_feed,
)
from statemachines.library.feeds import ENVELOPES
from statemachines.library.progress import CHOICES, ENVIRONMENT, ProgressBar
from statemachines.persisted import REJECTED_COLUMNS, rejected_table
from statemachines.times import is_time
from statemachines.updates import hashable

__all__ = ["main"]

def upsert_with_lateness(lateness: Any, value_field: Any = 0, key_field: Any = None) -> Machine:
    """``UpsertWithLateness`` with value (and key) times read from a field of the value (key)."""
    from operator import itemgetter

    return UpsertWithLateness(
        lateness,
        value_time=itemgetter(value_field) if value_field is not None else None,
        key_time=itemgetter(key_field) if key_field is not None else None,
    )


LIBRARY = {"upsert": Upsert, "upsert_with_lateness": upsert_with_lateness}
CHUNK = 100_000  # events fed at a time by a local run
FORMATS = inputs.FORMATS
DESCRIPTION = "Run keyed state machines that emit differential updates, locally or on Spark."
EXAMPLES = """examples:
  statemachines feed changes.jsonl --into customers --keys id --sequence-by lsn --delete-when op=d --scd2 customers_scd2
  statemachines feed debezium/ --into customers --keys id --sequence-by source.lsn --envelope debezium --runtime spark --stream
  statemachines run upsert commands.parquet --into customers --key id --symbol value --time ts
  statemachines run upsert feed/ --into customers --runtime spark --stream --delay 10
  statemachines run fraud.json logins.csv --into alerts --key user --symbol kind,amount --time ts
  statemachines show customers --history
  statemachines compact customers --since 100
  statemachines check customers
  statemachines vacuum customers --retention-hours 24
  statemachines convert old-customers customers
  statemachines cdc export customers out.jsonl
  statemachines cdc import out.jsonl copy
  statemachines diagram upsert upsert.svg
  statemachines diagram mymachines:Tags tags.mmd --alphabet '[["add", "x"], ["del", "x"]]'

Every command has --help. Bad input ends with a one-line error and exit code 2,
before anything is written."""


SCHEMA_HELP = (
    "the input's columns as name:type pairs with Arrow type names (id:int64, name:string, "
    "at:timestamp[us]); default: inferred from the first file. Both runtimes read with it"
)


class CliError(Exception):
    """A problem to report in one line (exit code 2)."""


def parse_time(text: str | None) -> Any:
    """A time from the command line: an integer, a number with a fraction (``2.5``;
    not NaN), or an ISO date or datetime."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if is_time(number):
            return number
        raise CliError(f"{text!r} is not a time: NaN is neither before nor after any time")
    try:
        return dt.datetime.fromisoformat(text) if "T" in text or ":" in text else dt.date.fromisoformat(text)
    except ValueError:
        raise CliError(f"{text!r} is not a time (a number or an ISO date/datetime)") from None


def load_machine(name: str, params: list[str]) -> Machine:
    """A library machine by name, or ``module:Class``, built with ``key=value`` params,
    or a pattern stored as JSON (``fraud.json``, :meth:`Pattern.to_json
    <statemachines.library.Pattern.to_json>`) as a :class:`~statemachines.library.Detector`.

    ``module`` is looked up on the import path and in the current directory.
    """
    if name.lower().endswith(".json"):
        return _pattern_detector(name, params)
    kwargs = {}
    for param in params:
        key, sep, value = param.partition("=")
        if not sep:
            raise CliError(f"--param takes key=value, got {param!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    if name.lower() in LIBRARY:
        try:
            return LIBRARY[name.lower()](**kwargs)
        except (TypeError, StateMachinesError) as exc:
            raise CliError(f"cannot build {name}: {exc}") from None
    if ":" in name:
        module, _, attr = name.partition(":")
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # a module here wins over an installed namesake
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise CliError(f"cannot load machine {name!r}: {exc}") from None
    else:
        raise CliError(f"unknown machine {name!r}; use one of {', '.join(LIBRARY)} or module:Class")
    if isinstance(cls, Machine):  # module:name may name a ready machine instance
        if kwargs:
            raise CliError(f"{name!r} is a machine instance; it takes no --param")
        return cls
    if not (isinstance(cls, type) and issubclass(cls, Machine)):
        raise CliError(f"{name!r} is not a Machine subclass or instance")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise CliError(f"cannot build {name}: {exc}") from None


def _pattern_detector(path: str, params: list[str]) -> Machine:
    if params:
        raise CliError(f"{path} is a pattern; it takes no --param")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise CliError(f"cannot read the pattern {path}: {exc.strerror or exc}") from None
    try:
        return Detector(Pattern.from_json(text))
    except StateMachinesError as exc:
        raise CliError(f"{path} is not a pattern: {exc}") from None


@contextlib.contextmanager
def _removed_on_failure(*paths: str):
    """Remove the paths this run creates if it fails: a failed run writes nothing."""
    new = [p for p in paths if p and not os.path.exists(p)]
    try:
        yield
    except BaseException:
        import shutil

        for path in new:
            shutil.rmtree(path, ignore_errors=True)
        raise


@contextlib.contextmanager
def _one_line(source: str):
    """Spark's errors about the input as one line (they come with Java stack traces)."""
    try:
        yield
    except (CliError, StateMachinesError):
        raise
    except Exception as exc:
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        text = " ".join(str(exc).split())
        if "MALFORMED_RECORD" in text or "Malformed records" in text:
            raise CliError(
                f"{source} has a row that does not fit its schema (a cell not of its column's "
                f"type); fix the row, or give --schema with the types the file holds"
            ) from None
        reason = text.split(" JVM stacktrace:")[0].split("\tat ")[0]
        raise CliError(f"Spark could not run on {source}: {reason[:400]}") from None


def py_files(text: str | None) -> list[str]:
    """The ``--py-files`` list as absolute paths, each an existing .py, .zip or .egg."""
    items = [item.strip() for item in (text or "").split(",") if item.strip()]
    if not items:
        return []
    from statemachines.spark.shipping import python_file

    try:
        return [python_file(item) for item in items]
    except StateMachinesError as exc:
        raise CliError(f"--py-files: {exc}") from None


def spark_conf(items: list[str]) -> dict[str, str]:
    """The ``--conf KEY=VALUE`` options as a dict."""
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def spark_session(args: argparse.Namespace) -> Any:
    """The Spark session of ``run --runtime spark``, with ``--py-files`` shipped."""
    from statemachines.spark import session
    from statemachines.spark.shipping import ship_files

    spark = session(master=args.master, remote=args.remote, extra=spark_conf(args.conf))
    ship_files(spark, args.py_files)
    return spark


@attrs.frozen
class RunSummary:
    """What a ``run`` did, for its closing line."""

    events: int
    updates: int
    reasons: Counter
    waiting: int = 0
    waiting_for: Any = None
    frontier: Any = None

    def line(self, into: str, seconds: float) -> str:
        """``200,000 events in, 280,900 updates out, 3 rejected (3 null_key); 12 events
        wait for time 1,000,042 (frontier 1,000,040); into customers; 4.2s``."""
        if self.waiting:
            status = f"{pending_note(self.waiting, self.waiting_for)} (frontier {show_time(self.frontier)})"
        else:
            status = "no events wait"
        return f"{self.events:,} events in, {counts_line(self.updates, self.reasons)}; {status}; into {into}; {seconds:.1f}s"


def command_run(args: argparse.Namespace) -> None:
    args.py_files = py_files(args.py_files)
    spark_conf(args.conf)  # a malformed --conf fails before anything runs
    if (args.py_files or args.conf) and args.runtime != "spark":
        raise CliError("--py-files and --conf are for Spark: add --runtime spark")
    for path in args.py_files:  # the driver imports them as the executors will
        sys.path.insert(0, path if not path.endswith(".py") else os.path.dirname(path))
    machine = load_machine(args.machine, args.param)
    if args.stream and args.runtime != "spark":
        raise CliError("--stream runs on Spark: add --runtime spark")
    refuse_rejected_file_on_spark(args)
    if args.remote:  # the server resolves relative paths against its own directory
        from statemachines.spark.streaming import absolute

        args.input = absolute(args.input)
        args.into = absolute(args.into)
        args.checkpoint = absolute(args.checkpoint) if args.checkpoint else None
    if args.stream and not os.path.isdir(args.input):
        raise CliError(f"--stream reads a directory of files; {args.input} is not one")
    fmt = inputs.input_format(args.input, args.format)
    schema = input_schema(args, fmt, _event_columns(args), args.time)
    started = time.perf_counter()
    args.checkpoint = args.checkpoint or args.into.rstrip("/") + ".checkpoint"
    with _removed_on_failure(args.into, args.checkpoint if args.stream else None), _one_line(args.input):
        if args.stream:
            summary = _run_spark_stream(machine, args, fmt, schema)
        elif args.runtime == "spark":
            summary = _run_spark(machine, args, fmt, schema)
        else:
            summary = _run_local(machine, args, fmt, schema)
        print(summary.line(args.into, time.perf_counter() - started))


def _progress_wanted(args: argparse.Namespace) -> bool | None:
    """``--progress``: always / never, or ``None`` for a bar on a terminal only."""
    return {"always": True, "never": False}.get(args.progress)


def _progress_bar(args: argparse.Namespace, machine: Machine, total: int | None) -> ProgressBar:
    return ProgressBar(f"run {machine.spec.name}", total=total, enabled=_progress_wanted(args))


def input_schema(args: argparse.Namespace, fmt: str, columns: list[str], time: str) -> Any:
    """The schema both runtimes read the input with (``--schema``, else inferred), checked:
    the named columns exist (in an empty file as in a full one), times are times, and
    no JSON line lacks a named field."""
    schema = inputs.parse_schema(args.schema) if args.schema else inputs.infer_schema(args.input, fmt)
    inputs.require_columns(schema, columns, args.input)
    inputs.require_time_type(schema, time, args.input)
    inputs.require_fields(args.input, fmt, columns, time)
    if args.runtime == "spark":
        inputs.require_readable(args.input, fmt, schema)
    return schema


def _event_columns(args: argparse.Namespace) -> list[str]:
    return [args.key, *_symbol_columns(args), args.time] + ([args.order] if args.order else [])


def _symbol_columns(args: argparse.Namespace) -> list[str]:
    """``--symbol``: one column, or several (``kind,amount``) making a record symbol."""
    names = _names(args.symbol, "--symbol")
    if len(set(names)) != len(names):
        raise CliError(f"--symbol takes a column, or distinct columns separated by commas; got {args.symbol!r}")
    return names


def _run_local(machine: Machine, args: argparse.Namespace, fmt: str, schema: Any) -> RunSummary:
    """The file's events through a local runtime, fed in chunks, with a progress bar."""
    import pyarrow as pa

    table = inputs.read_table(args.input, fmt, schema)
    fields = _symbol_columns(args)
    symbol = table.column(fields[0]).combine_chunks()
    if len(fields) > 1:  # a record of the columns, as Spark's struct
        symbol = pa.StructArray.from_arrays([table.column(f).combine_chunks() for f in fields], names=fields)
    columns = [table.column(args.key), symbol, table.column(args.time)] + ([table.column(args.order)] if args.order else [])
    rows = list(python_rows(pa.table(columns, names=["key", "symbol", "time", "order"][: len(columns)])))
    events = rows if args.order else [(*row, None) for row in rows]
    arrangement = PersistedArrangement(args.into)
    with _progress_bar(args, machine, len(events)) as bar:
        runtime = LocalRuntime(machine, into=arrangement, progress=bar)
        if len(fields) > 1:  # the record's field names, for the conditions that read them
            runtime.symbol_type = symbol.type
        for start in range(0, len(events), CHUNK):
            runtime.feed(events[start : start + CHUNK])
        result = runtime.finish()
    types = {"key": table.column(args.key).type, "symbol": symbol.type, "time": table.column(args.time).type}
    if args.order:
        types["order"] = table.column(args.order).type
    arrangement.keep_rejected(rejected_table(result.rejected, types))
    write_rejected(args.rejected, result.rejected)
    reasons = Counter(r.reason.value for r in result.rejected)
    return RunSummary(len(events), len(result.updates), reasons)


def write_rejected(path: str | None, rejected: list[Any]) -> None:
    """A local run's rejected events (kept with the arrangement too, as Spark keeps
    its runs') also as JSON Lines at ``path`` (if given): each
    ``{"event": [key, symbol, time, order], "reason", "detail"}``, a value JSON has
    no type for as its text."""
    if not path:
        return
    with open(path, "w") as out:
        for r in rejected:
            row = {"event": _json_safe(r.event), "reason": r.reason.value, "detail": r.detail}
            out.write(json.dumps(row, default=str, allow_nan=False) + "\n")


def _json_safe(value: Any) -> Any:
    """``value`` with its tuples as lists and its NaN and infinities as text
    (``"nan"``), which strict JSON has no numbers for."""
    if isinstance(value, tuple | list):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def refuse_rejected_file_on_spark(args: argparse.Namespace) -> None:
    """``--rejected FILE`` is for local runs: every run keeps its rejected rows in the
    arrangement (``statemachines show INTO --rejected``); a local run can also write them as JSON Lines."""
    if args.rejected and args.runtime == "spark":
        raise CliError(
            "--rejected writes a local run's rejected rows as JSON Lines; every run keeps them in the "
            "arrangement: statemachines show INTO --rejected"
        )


def _run_spark(machine: Machine, args: argparse.Namespace, fmt: str, schema: Any) -> RunSummary:
    from statemachines.spark.batch import run_batch_drawn
    from statemachines.spark.inputs import read_frame

    spark = spark_session(args)
    frame, symbol = _with_symbol(read_frame(spark, args.input, fmt, schema), args)
    _, total, (updates, reasons) = run_batch_drawn(
        machine, frame, label=f"run {machine.spec.name}", enabled=_progress_wanted(args),
        key=args.key, symbol=symbol, time=args.time, order=args.order, into=args.into,
        abandon_waiting=args.abandon_waiting,
    )
    return RunSummary(total, updates, Counter(reasons))


def _run_spark_stream(machine: Machine, args: argparse.Namespace, fmt: str, schema: Any) -> RunSummary:
    """The files now in the input directory, as micro-batches (one file each), then stop.

    Run again later to take the files added since: the checkpoint remembers which
    were done. The progress bar counts the events of the micro-batches; without a
    bar, each micro-batch's report is printed as a line.
    """
    from statemachines.spark import MicroBatchReport, flush_progress, run_stream
    from statemachines.spark.inputs import read_frame

    spark = spark_session(args)
    frame, symbol = _with_symbol(read_frame(spark, args.input, fmt, schema, streaming=True), args)
    before = published_stream(args.into).get("totals") or {"events": 0, "updates": 0}
    with _progress_bar(args, machine, None) as bar:
        # off a terminal, without a bar, each micro-batch's report is one line of the log
        report = bar.micro_batch if bar.enabled else (lambda batch: print(batch, file=sys.stderr, flush=True))
        query = run_stream(
            machine, frame, into=args.into, checkpoint=args.checkpoint,
            key=args.key, symbol=symbol, time=args.time, order=args.order, delay=parse_time(args.delay) or 0,
            trigger={"availableNow": True}, progress=report, abandon_waiting=args.abandon_waiting,
        )
        query.awaitTermination()
        flush_progress(query)
    stream = published_stream(args.into)
    after = stream.get("totals") or {"events": 0, "updates": 0}
    last = MicroBatchReport.from_json(stream["reports"][-1]) if stream.get("reports") else None
    return RunSummary(
        after["events"] - before["events"],
        after["updates"] - before["updates"],
        Counter(read_rejected_reasons(spark, args.into)),
        waiting=(last.pending or 0) if last else 0,
        waiting_for=last.waiting_for if last else None,
        frontier=last.frontier if last else None,
    )


def _with_symbol(frame: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """``frame`` and its symbol column: ``--symbol``'s columns as one struct column if
    it names several."""
    fields = _symbol_columns(args)
    if len(fields) == 1:
        return frame, fields[0]
    from pyspark.sql import functions as F

    name = "symbol"
    while name in frame.columns:
        name = "_" + name
    return frame.withColumn(name, F.struct(*fields)), name


def published_stream(path: str) -> dict[str, Any]:
    """What a stream published into the arrangement at ``path``: totals, last reports.

    Nothing (``{}``) where there is no arrangement yet: the stream will create it.
    """
    from statemachines import delta
    from statemachines.persisted import read_state

    if not delta.contents(delta.location(path)):
        return {}
    return read_state(path).get("stream") or {}


def read_rejected_reasons(spark: Any, path: str) -> dict[str, int]:
    from statemachines.spark import read_rejected

    rejected = read_rejected(spark, path)
    if rejected is None:
        return {}
    return {r.reason: r["count"] for r in rejected.groupBy("reason").count().collect()}


def command_feed(args: argparse.Namespace) -> None:
    if args.stream and args.runtime != "spark":
        raise CliError("--stream runs on Spark: add --runtime spark")
    refuse_rejected_file_on_spark(args)
    if args.remote:  # the server resolves relative paths against its own directory
        from statemachines.spark.streaming import absolute

        for name in ("input", "into", "checkpoint", "scd1", "scd2"):
            if getattr(args, name):
                setattr(args, name, absolute(getattr(args, name)))
    if args.stream and not os.path.isdir(args.input):
        raise CliError(f"--stream reads a directory of files; {args.input} is not one")
    feed = ChangeFeed(
        keys=_names(args.keys, "--keys"), sequence_by=_names(args.sequence_by, "--sequence-by"),
        values=_names(args.values, "--values") or None, except_columns=_names(args.except_columns, "--except-columns"),
        delete_when=parse_markers(args.delete_when),
        envelope=args.envelope,
    )
    fmt = inputs.input_format(args.input, args.format)
    schema = inputs.parse_schema(args.schema) if args.schema else inputs.infer_schema(args.input, fmt)
    if feed.envelope != "debezium":
        read = feed.columns(schema.names).read
        inputs.require_time_type(schema, feed.sequence_by[0], args.input)
        inputs.require_fields(args.input, fmt, read, feed.sequence_by[0])
    else:
        envelope = schema.field("payload").type if "payload" in schema.names and "op" not in schema.names else schema
        if envelope.get_field_index("after") < 0 or envelope.get_field_index("op") < 0:
            raise CliError(f"{args.input} holds no Debezium envelopes (op, before, after); it has {', '.join(schema.names)}")
        feed.columns([f.name for f in envelope.field("after").type])
    if args.runtime == "spark":
        inputs.require_readable(args.input, fmt, schema)
    args.checkpoint = args.checkpoint or args.into.rstrip("/") + ".checkpoint"
    tables = {"scd1": args.scd1, "scd2": args.scd2}
    written = [args.into, args.scd1, args.scd2] + ([args.checkpoint] if args.stream else [])
    started = time.perf_counter()
    with _removed_on_failure(*written), _one_line(args.input):
        if args.stream:
            rows, updates, reasons = _feed_stream(feed, args, fmt, schema, tables)
        elif args.runtime == "spark":
            from statemachines.spark import run_feed_batch
            from statemachines.spark.inputs import read_frame

            frame = read_frame(spark_session(args), args.input, fmt, schema)
            done = run_feed_batch(feed, frame, into=args.into, start=args.start_column, end=args.end_column, **tables)
            updates, reasons = done.result.counts()
            rows = frame.count()
        else:
            table = inputs.read_table(args.input, fmt, schema)
            done = run_feed(feed, table, into=args.into, start=args.start_column, end=args.end_column, **tables)
            done.arrangement.keep_rejected(rejected_table(done.result.rejected))
            write_rejected(args.rejected, done.result.rejected)
            rows, updates = table.num_rows, len(done.result.updates)
            reasons = Counter(r.reason.value for r in done.result.rejected)
        kept = "".join(f"; SCD type {name[-1]} table {path}" for name, path in tables.items() if path)
        print(f"{rows:,} rows in, {counts_line(updates, reasons)}; into {args.into}{kept}; {time.perf_counter() - started:.1f}s")


def _feed_stream(feed: ChangeFeed, args: argparse.Namespace, fmt: str, schema: Any, tables: dict[str, Any]) -> tuple[int, int, Any]:
    """The files now in the input directory through the feed, as micro-batches; then stop."""
    from statemachines.spark import flush_progress, run_feed_stream
    from statemachines.spark.inputs import read_frame

    spark = spark_session(args)
    frame = read_frame(spark, args.input, fmt, schema, streaming=True)
    before = published_stream(args.into).get("totals") or {"events": 0, "updates": 0}
    query, _ = run_feed_stream(
        feed, frame, into=args.into, checkpoint=args.checkpoint, start=args.start_column, end=args.end_column,
        delay=parse_time(args.delay) or 0, trigger={"availableNow": True},
        progress=lambda batch: print(batch, file=sys.stderr, flush=True), **tables,
    )
    query.awaitTermination()
    flush_progress(query)
    after = published_stream(args.into).get("totals") or {"events": 0, "updates": 0}
    return after["events"] - before["events"], after["updates"] - before["updates"], read_rejected_reasons(spark, args.into)


def _names(text: str | None, option: str) -> list[str]:
    """``--keys id,region``: the column names, none empty (``id,`` is a typo, not one column)."""
    if text is None:
        return []
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise CliError(f"{option} takes column names separated by commas, none empty; got {text!r}")
    return names


def parse_markers(items: list[str]) -> dict[str, list[Any]]:
    """``--delete-when op=d,D`` (repeatable) as ``{"op": ["d", "D"]}``; each value JSON or text.

    >>> parse_markers(["op=d,D", "deleted=true"])
    {'op': ['d', 'D'], 'deleted': [True]}
    """
    markers: dict[str, list[Any]] = {}
    for item in items:
        column, sep, values = item.partition("=")
        if not sep or not column.strip() or not values:
            raise CliError(f"--delete-when takes COLUMN=VALUE[,VALUE...], got {item!r}")
        markers.setdefault(column.strip(), []).extend(_symbol(v.strip()) for v in values.split(","))
    return markers


VERSION_HELP = (
    "read this version of the table, or the latest committed at an ISO 8601 time such as "
    "2026-11-24T09:30Z (default: the latest)"
)


def _version(text: str) -> int | str:
    """``--version``: a version number, or a commit time (read by the arrangement)."""
    return int(text) if text.strip().lstrip("-").isdigit() else text


def command_show(args: argparse.Namespace) -> None:
    arr = PersistedArrangement.open(args.arrangement, version=args.version)
    keep = (lambda key: str(key) == args.key) if args.key is not None else (lambda key: True)
    if args.rejected:
        header = list(REJECTED_COLUMNS)
        kept = arr.rejected()
        rows = [] if kept is None else [list(r) for r in python_rows(kept.select(header)) if keep(r[0])]
    elif args.history:
        header = ["key", "value", "start", "end"]
        rows = [list(r) for r in arr.history() if keep(r.key)]
    elif args.changes:
        lower, upper = split_interval(args.changes)
        header = ["key", "value", "time", "diff"]
        changes = arr.changes(arrangement_time(arr, lower or None, "--changes"), arrangement_time(arr, upper or None, "--changes"))
        rows = [[d[0], d[1], t, n] for d, t, n in changes if keep(d[0])]
    else:
        header = ["key", "value", "count"]
        rows = [[d[0], d[1], n] for d, n in arr.snapshot(arrangement_time(arr, args.as_of, "--as-of")) if keep(d[0])]
    write_rows(header, rows, args.output)


def split_interval(text: str) -> tuple[str, str]:
    """``LOWER:UPPER`` (either may be empty) split at the one colon that leaves a time
    on each side: ISO datetimes hold colons of their own.

    >>> split_interval("3:"), split_interval("2024-01-01T10:00:2024-01-01T12:30")
    (('3', ''), ('2024-01-01T10:00', '2024-01-01T12:30'))
    """
    splits = []
    for at, char in enumerate(text):
        if char == ":":
            lower, upper = text[:at], text[at + 1 :]
            with contextlib.suppress(CliError):
                parse_time(lower or None), parse_time(upper or None)
                splits.append((lower, upper))
    if len(splits) != 1:
        raise CliError(f"--changes takes LOWER:UPPER (either may be left out), got {text!r}")
    return splits[0]


def arrangement_time(arr: PersistedArrangement, text: str | None, option: str) -> Any:
    """A time from the command line, of the kind the arrangement's times are."""
    wanted = parse_time(text)
    known = arr.upper
    if wanted is not None and known is not None and time_kind(wanted) != time_kind(known):
        raise CliError(
            f"{option} {text} is a {time_kind(wanted)} time; {arr.path}'s times are {time_kind(known)} "
            f"times (its upper is {show_time(known)})"
        )
    return wanted


def write_rows(header: list[str], rows: list[list[Any]], fmt: str) -> None:
    if fmt == "json":
        for row in rows:
            print(json.dumps(dict(zip(header, row, strict=True)), default=str))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(rows)
    elif header[-1] == "diff":
        print(format_table(((r[0], r[1]), r[2], r[3]) for r in rows))
    else:
        cells = [header] + [["" if c is None else str(c) for c in row] for row in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
        for row in cells:
            print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def command_compact(args: argparse.Namespace) -> None:
    arr = PersistedArrangement.open(args.arrangement)
    before = arr.stored_updates()
    reached = arr.compact(parse_time(args.since))
    print(f"since {reached!r}: {before:,} stored updates -> {arr.stored_updates():,}")


def command_cdc_export(args: argparse.Namespace) -> None:
    arr = PersistedArrangement.open(args.arrangement)
    messages = cdc_files.messages_from_arrangement(arr, batch_size=args.batch_size)
    writer = cdc_files.write_parquet if args.out.endswith(".parquet") else cdc_files.write_jsonl
    writer(messages, args.out)
    print(f"{len(messages):,} messages for {arr.stored_updates():,} stored updates -> {args.out}")


def command_diagram(args: argparse.Namespace) -> None:
    from statemachines import diagram
    from statemachines.library.diagrams import render

    machine = load_machine(args.machine, args.param)
    alphabet = parse_alphabet(args.alphabet) if args.alphabet is not None else None
    drawn = diagram(machine, alphabet=alphabet)
    if alphabet is not None and not drawn.edges:
        raise CliError(
            f"{machine.spec.name} takes none of the symbols {alphabet!r}: every one was rejected, "
            f"so there is nothing to draw; give symbols the machine accepts (JSON for tuples: "
            f"'[[\"add\", \"x\"]]')"
        )
    try:
        written = render(drawn, args.output)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc}") from None
    print(f"{type(machine).__name__} -> {written}")


def parse_alphabet(text: str) -> list[Any]:
    """``--alphabet``: one JSON array of symbols, or comma-separated symbols, each JSON or text.

    Commas inside brackets, braces or quotes do not split; arrays inside become
    tuples (symbols must be hashable).

    >>> parse_alphabet('[["add", "x"], ["del", "x"]]')
    [('add', 'x'), ('del', 'x')]
    >>> parse_alphabet('["add", "x"],["del", "x"], 3, open')
    [('add', 'x'), ('del', 'x'), 3, 'open']
    >>> parse_alphabet('[1, 2, null]')
    [1, 2, None]
    """
    text = text.strip()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list) and whole:
        return [hashable(item) for item in whole]
    pieces, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        elif char == "," and depth == 0 and not quoted:
            pieces.append(text[start:i])
            start = i + 1
    pieces.append(text[start:])
    if depth or quoted:
        raise CliError(f"--alphabet {text!r} has an unclosed bracket or quote")
    symbols = [hashable(_symbol(piece.strip())) for piece in pieces if piece.strip()]
    if not symbols:
        raise CliError("--alphabet names no symbol")
    return symbols


def _symbol(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def command_check(args: argparse.Namespace) -> None:
    from statemachines.persisted import check

    problems = check(args.arrangement, args.version)
    if problems:
        raise CliError(f"{len(problems)} problem(s): " + "; ".join(problems))
    arr = PersistedArrangement.open(args.arrangement, version=args.version)
    files = len(arr.files())
    print(f"{args.arrangement}: intact (version {arr.version}, {files:,} data files read, {arr.summary()})")


def command_vacuum(args: argparse.Namespace) -> None:
    gone = PersistedArrangement.open(args.arrangement).vacuum(
        args.retention_hours, enforce_retention_duration=args.retention_check, dry_run=args.dry_run
    )
    if args.dry_run:
        print("\n".join(gone))
    print(f"{args.arrangement}: {len(gone):,} files {'would be deleted' if args.dry_run else 'deleted'}")


def command_convert(args: argparse.Namespace) -> None:
    from statemachines.legacy import convert

    new = convert(args.source, args.target)
    print(f"{args.source} converted into {args.target}: {new.summary()}")


def command_cdc_import(args: argparse.Namespace) -> None:
    messages = []
    for path in args.input:  # read every file before anything is written
        if not os.path.exists(path):
            raise CliError(f"no such input: {path}")
        reader = cdc_files.read_parquet if path.endswith(".parquet") else cdc_files.read_jsonl
        messages.extend(reader(path))
    arrangement = PersistedArrangement(args.arrangement)
    before = arrangement.upper
    upper = cdc_files.read_into(messages, arrangement)
    news = "nothing new" if upper == before else f"now complete up to {upper!r}"
    print(f"{len(messages):,} messages read from {len(args.input)} file(s); {args.arrangement}: {news}")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' layout and shows every option's default, where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, [], argparse.SUPPRESS) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def version() -> str:
    """The installed version of the project."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("statemachines")
    except PackageNotFoundError:
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="statemachines", description=DESCRIPTION, epilog=EXAMPLES, formatter_class=_HelpFormatter
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND", help="what to do")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=summary, description=summary, formatter_class=_HelpFormatter)

    run = command("run", "run a machine over an input file (or a directory) into an arrangement")
    run.add_argument(
        "machine", help=f"a library machine ({', '.join(LIBRARY)}), module:Class, or a pattern stored as JSON (fraud.json)"
    )
    run.add_argument("input", help="a Parquet, CSV or JSON Lines file (with --stream: a directory of them)")
    run.add_argument("--into", required=True, help="the arrangement directory (created if missing)")
    run.add_argument("--key", default="key", help="the column holding each event's key")
    run.add_argument(
        "--symbol", default="symbol",
        help="the column holding the symbol fed to the machine, or columns separated by commas (kind,amount) "
        "fed as one record, as a pattern's SQL conditions read them",
    )
    run.add_argument("--time", default="time", help="the column holding the event time (a number, ISO date or datetime)")
    run.add_argument("--order", default=None, help="the column ranking the events of one key and time (without it they are ranked by symbol)")
    run.add_argument("--format", choices=FORMATS, help="the input format (default: from the file name)")
    run.add_argument("--schema", help=SCHEMA_HELP)
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a machine parameter, JSON or text (repeatable)")
    run.add_argument("--runtime", choices=("local", "spark"), default="local", help="where to run")
    run.add_argument("--master", help="Spark master URL (default: local[*])")
    run.add_argument("--remote", help="Spark Connect URL (sc://host:15002); needs the connect extra")
    run.add_argument(
        "--py-files", metavar="FILES",
        help="comma-separated .py/.zip/.egg files with your machines, shipped to the executors (Spark)",
    )
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    run.add_argument("--stream", action="store_true", help="INPUT is a directory: run its files as micro-batches (Spark)")
    run.add_argument("--checkpoint", help="streaming checkpoint directory (default: INTO.checkpoint)")
    run.add_argument("--delay", default="0", help="streaming: how far the frontier stays behind the latest time")
    run.add_argument(
        "--abandon-waiting", action="store_true",
        help="Spark: go on although the arrangement's last stream holds events not yet final, without them",
    )
    run.add_argument("--rejected", help="also write the rejected events here as JSON Lines (local runtime; "
                     "every run keeps them in the arrangement: show INTO --rejected)")
    run.add_argument(
        "--progress", choices=CHOICES, default="auto",
        help=f"draw a progress bar on standard error (auto: as ${ENVIRONMENT} says, else on a terminal)",
    )
    run.set_defaults(handler=command_run)

    feed = command("feed", "read a change feed (flat rows or Debezium envelopes) into an arrangement and SCD tables")
    feed.add_argument("input", help="a Parquet, CSV or JSON Lines file (with --stream: a directory of them)")
    feed.add_argument("--into", required=True, help="the arrangement directory (created if missing)")
    feed.add_argument("--keys", required=True, help="the key column(s), comma-separated")
    feed.add_argument("--sequence-by", help="the column(s) ordering a key's changes, comma-separated; the highest wins (Debezium: paths such as source.lsn; Delta: default _commit_version)")
    feed.add_argument("--values", help="the value column(s), comma-separated (default: every other column)")
    feed.add_argument("--except-columns", help="columns left out of the default values, comma-separated")
    feed.add_argument(
        "--delete-when", action="append", default=[], metavar="COLUMN=VALUE[,VALUE]",
        help="a row whose column holds one of the values is a delete (repeatable: all must hold); nothing else deletes",
    )
    feed.add_argument("--envelope", choices=ENVELOPES, default="flat", help="the rows' shape (delta: a Delta table's change data feed)")
    feed.add_argument("--scd1", help="keep an SCD type 1 table (current values) here")
    feed.add_argument("--scd2", help="keep an SCD type 2 table (history) here")
    feed.add_argument("--start-column", default="__START_AT", help="the SCD type 2 table's interval start column")
    feed.add_argument("--end-column", default="__END_AT", help="the SCD type 2 table's interval end column (null while a value holds)")
    feed.add_argument("--format", choices=FORMATS, help="the input format (default: from the file name)")
    feed.add_argument("--schema", help=SCHEMA_HELP)
    feed.add_argument("--runtime", choices=("local", "spark"), default="local", help="where to run")
    feed.add_argument("--master", help="Spark master URL (default: local[*])")
    feed.add_argument("--remote", help="Spark Connect URL (sc://host:15002); needs the connect extra")
    feed.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    feed.add_argument("--stream", action="store_true", help="INPUT is a directory: run its files as micro-batches (Spark)")
    feed.add_argument("--checkpoint", help="streaming checkpoint directory (default: INTO.checkpoint)")
    feed.add_argument("--delay", default="0", help="streaming: how far the frontier stays behind the latest sequence")
    feed.add_argument("--rejected", help="also write the rejected rows here as JSON Lines (local runtime; "
                      "every run keeps them in the arrangement: show INTO --rejected)")
    feed.set_defaults(handler=command_feed, py_files=[])

    show = command("show", "read an arrangement: the latest snapshot, a past one, changes or history")
    show.add_argument("arrangement", help="the arrangement directory")
    view = show.add_mutually_exclusive_group()
    view.add_argument("--as-of", help="the snapshot at this time (default: latest)")
    view.add_argument("--changes", metavar="LOWER:UPPER", help="the updates in [LOWER, UPPER); either end may be empty")
    view.add_argument("--history", action="store_true", help="validity intervals (SCD type 2)")
    view.add_argument("--rejected", action="store_true", help="the rejected events the runs into it kept, with reasons")
    show.add_argument("--key", help="only this key (compared as text)")
    show.add_argument("--version", type=_version, help=VERSION_HELP)
    show.add_argument("--output", choices=("table", "json", "csv"), default="table", help="how to print the rows")
    show.set_defaults(handler=command_show)

    compact = command("compact", "compact an arrangement up to a time")
    compact.add_argument("arrangement", help="the arrangement directory")
    compact.add_argument("--since", required=True, help="times below this are advanced to it and consolidated")
    compact.set_defaults(handler=command_compact)

    verify = command("check", "verify every file one version of an arrangement names (default: the latest)")
    verify.add_argument("arrangement", help="the arrangement (a path or URI)")
    verify.add_argument("--version", type=_version, help=VERSION_HELP)
    verify.set_defaults(handler=command_check)

    vacuum = command("vacuum", "delete the files no version within the retention period needs")
    vacuum.add_argument("arrangement", help="the arrangement (a path or URI)")
    vacuum.add_argument(
        "--retention-hours", type=float, default=None,
        help="keep every version committed this recently readable, with its files (default: the "
        "table's delta.deletedFileRetentionDuration, a week unless set)",
    )
    vacuum.add_argument(
        "--no-retention-check", dest="retention_check", action="store_false",
        help="allow a retention below the table's (readers of older versions may then fail)",
    )
    vacuum.add_argument("--dry-run", action="store_true", help="list the files that would go; delete nothing")
    vacuum.set_defaults(handler=command_vacuum)

    convert = command("convert", "write an arrangement of format 1 (manifest.json) as a Delta table")
    convert.add_argument("source", help="the format-1 arrangement directory (left unchanged)")
    convert.add_argument("target", help="a new or empty directory for the converted arrangement")
    convert.set_defaults(handler=command_convert)

    cdc = command("cdc", "change data capture files: export an arrangement, import messages")
    cdc_commands = cdc.add_subparsers(dest="cdc_command", required=True, metavar="COMMAND", help="export or import")
    export = cdc_commands.add_parser(
        "export", help="write an arrangement as CDC messages", formatter_class=_HelpFormatter
    )
    export.add_argument("arrangement", help="the arrangement directory")
    export.add_argument("out", help="a .jsonl or .parquet file")
    export.add_argument("--batch-size", type=int, default=1000, help="updates per Updates message")
    export.set_defaults(handler=command_cdc_export)
    imp = cdc_commands.add_parser(
        "import", help="read CDC messages into an arrangement", formatter_class=_HelpFormatter
    )
    imp.add_argument("input", nargs="+", help=".jsonl or .parquet files, in any order, duplicates allowed")
    imp.add_argument("arrangement", help="the arrangement directory (created if missing)")
    imp.set_defaults(handler=command_cdc_import)

    draw = command("diagram", "draw a machine's state diagram")
    draw.add_argument(
        "machine", help=f"a library machine ({', '.join(LIBRARY)}), module:Class, or a pattern stored as JSON (fraud.json)"
    )
    draw.add_argument("output", help="the file: .svg .png .pdf (need Graphviz), .dot, .mmd (Mermaid)")
    draw.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a machine parameter, JSON or text (repeatable)")
    draw.add_argument(
        "--alphabet", metavar="SYMBOLS",
        help="symbols to explore a machine that draws no diagram itself: one JSON array of symbols "
        "('[[\"add\", \"x\"], [\"del\", \"x\"]]') or comma-separated symbols, each JSON or text "
        "(commas inside brackets or quotes do not split)",
    )
    draw.set_defaults(handler=command_diagram)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.handler(args)
    except (CliError, StateMachinesError) as exc:
        print(f"statemachines: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
