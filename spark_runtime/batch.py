"""Running any machine over a Spark DataFrame of events, in batch.

Events are partitioned by key and sorted by ``(key, time, order)`` within partitions;
each partition is handed to Python once (``mapInArrow``), which walks it key by key
and calls the same per-key function as the local runtime
(:func:`statemachines.core.run_key`). Python memory is bounded by the largest key,
not by the partition. With ``into=`` a persisted arrangement, each key's prior values
are read from it and shipped beside its events (feedback), events below its ``upper``
are late, and one job writes the updates (published atomically as one new batch) and
the rejected rows (kept in the arrangement: ``read_rejected``); on the generic path
the Python tasks write both themselves and the job only collects the files' names.
The result's frames read those files. Without ``into`` the tasks write their rows
into a scratch folder the same way (a temporary one in a local session), else the
output is cached.

    events (key, symbol, time, order)  ->  updates (key, value, time, diff)
                                       ->  rejected (key, symbol, time, order, reason, detail)
"""

from __future__ import annotations

import atexit
import datetime
import decimal
import functools
import html
import itertools
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema, to_arrow_type

from statemachines import Intake, InvalidArgument, Machine, Reason, delta, run_key, time_after
from statemachines._gc import gc_paused
from statemachines.columns import BEYOND_STORED, MAX_TYPE_NESTING, column_to_python, value_check_for
from statemachines.display import SAMPLE_ROWS, counts_line, html_table, never_raises
from statemachines.intake import INT64_MAX, plain_key_type
from statemachines.library.cep import Detector
from statemachines.library.rules import RuleDetector
from statemachines.machine import resume_machine, settings_note
from statemachines.persisted import (
    REJECTED_COLUMNS,
    PersistedArrangement,
    publish_batch,
    read_state,
)
from statemachines.records import record_type
from statemachines.spark import native as native_paths
from statemachines.spark.arrangement import read_files, read_snapshot
from statemachines.spark.lockstep import lockstep_runner, runs_in_rounds
from statemachines.spark.output import (
    EVENT_ROW,
    REFUSAL,
    REJECTED,
    STATE_ROW,
    UPDATE,
    UPDATE_COLUMNS,
    OutputRows,
    Parts,
    aside,
    batch_name,
    drop,
    drop_parts,
    gather_files,
    move_aside,
    output_schema,
    waiting_count,
    write_parts,
    writing_files,
)
from statemachines.spark.progress import StageProgress
from statemachines.spark.shipping import is_local, ship_code
from statemachines.spark.tabulated import runs_tabulated, tabulated_runner
from statemachines.spark.upsert_arrow import runs_in_arrow, upsert_runner
from statemachines.spark.waterline import arrangement_high, settled_output
from statemachines.times import decode_time, time_kind

__all__ = ["BatchResult", "EventColumns", "prepare_events", "refuse_unmet_subtypes", "run_batch", "run_batch_drawn"]


@attrs.frozen
class EventColumns:
    """Which input columns hold the key, the symbol, the time and (optionally) the order.

    ``refusal``, optional, names a ``struct<reason string, detail string>`` column: a
    row where it is not null was already refused by its source (a change-feed row
    that cannot be read) and goes to the rejected output as it is.
    """

    key: str = "key"
    symbol: str = "symbol"
    time: str = "time"
    order: str | None = None
    refusal: str | None = None


@attrs.frozen
class BatchResult:
    """What a Spark batch run produced.

    Attributes:
        updates: DataFrame ``key, value, time, diff`` (consolidated per key and time).
        rejected: DataFrame ``key, symbol, time, order, reason, detail``.
        lower, upper: the times the run covered (``upper`` is ``None`` without an
            arrangement: the input was complete).
        published: True if a new batch was published into the arrangement.
        output: the cached rows both frames read, when the run cached them (release
            it with :meth:`unpersist`).
        scratch: the folder of the files both frames read, when the run's tasks
            wrote them into a scratch folder (:meth:`unpersist` deletes it).
    """

    updates: Any
    rejected: Any
    lower: Any = None
    upper: Any = None
    published: bool = False
    output: Any = attrs.field(default=None, repr=False)
    scratch: str | None = None

    def unpersist(self) -> None:
        """Release the cached output, or delete the scratch files, that ``updates``
        and ``rejected`` read: they cannot be read afterwards (a published batch
        stays in its arrangement).

        Unpersisting ``updates`` itself releases nothing: it is a view of the cache.
        Returns once the cache is gone, so a run that follows has its memory.
        """
        if self.output is not None:
            self.output.unpersist(blocking=True)
        if self.scratch is not None:
            _delete_folder(self.scratch)

    def counts(self) -> tuple[int, dict[str, int]]:
        """How many updates, and how many rejected rows by reason (two Spark jobs)."""

        reasons = {r.reason: r.n for r in self.rejected.groupBy("reason").agg(F.count("*").alias("n")).collect()}
        return self.updates.count(), reasons

    def summary(self, counts: tuple[int, dict[str, int]] | None = None) -> str:
        """A one-line account: updates out, rejected by reason, what was published.

        Counts the cached output (one pass over it) unless ``counts`` (from
        :meth:`counts`) are given. A batch run takes its input as complete, so no
        event waits.
        """
        updates, reasons = counts or self.counts()
        where = (
            f"published [{self.lower!r}, {self.upper!r})" if self.published else "nothing published"
        )
        return f"{counts_line(updates, reasons)}; {where}"

    @never_raises
    def _repr_html_(self) -> str:
        """The summary and the first rows of the updates and the rejected rows."""
        parts = [f"<p><b>BatchResult</b>: {html.escape(self.summary())}</p>"]
        for title, frame in (("Updates", self.updates), ("Rejected", self.rejected)):
            rows = [tuple(row) for row in frame.limit(SAMPLE_ROWS).collect()]
            total = frame.count() if len(rows) == SAMPLE_ROWS else len(rows)
            parts.append(f"<p>{title}</p>" + html_table(frame.columns, rows, total=total))
        return "\n".join(parts)


def time_kind_of(data_type: Any) -> str:
    if isinstance(data_type, T.DecimalType):  # Python's Decimal is not a time (Intake)
        raise InvalidArgument(
            f"the time column has type {data_type.simpleString()}; cast it to a long or a "
            f"double first (e.g. F.col('time').cast('long'))"
        )
    if isinstance(data_type, T.TimestampType):
        return "datetime_tz"
    if isinstance(data_type, T.TimestampNTZType):
        return "datetime"
    if isinstance(data_type, T.DateType):
        return "date"
    if isinstance(data_type, T.IntegralType | T.FractionalType):
        return "number"
    raise InvalidArgument(
        f"the time column has type {data_type.simpleString()}; use a number, timestamp or "
        f"date column (cast strings first, e.g. F.to_timestamp)"
    )


def for_event_times(machine: Machine, kind: str) -> Machine:
    """``machine`` comparing its own times with events' times of ``kind`` as the Spark
    runtimes read them (a rule detector's book of naive datetimes, for a timestamp
    column read as UTC times: :meth:`~statemachines.library.RuleDetector.for_time_kind`)."""
    return machine.for_time_kind(kind) if isinstance(machine, RuleDetector) else machine


def latest_time(events: Any) -> Any:
    """The aggregate of the latest valid time of ``events``: times the intake rejects
    (NaN, infinities, the greatest long, datetime or date, one beyond Python's
    years) are left out, so they cannot move ``upper``."""
    time = F.col("time")
    data_type = events.schema["time"].dataType
    if REFUSAL in events.columns:  # a refused row's time moves nothing
        time = F.when(F.col(REFUSAL).isNull(), time)
    if isinstance(data_type, T.FloatType | T.DoubleType):
        time = F.when(~F.isnan(time) & ~time.isin(float("inf"), float("-inf")), time)
    elif isinstance(data_type, T.LongType):
        time = F.when(time != F.lit(INT64_MAX), time)
    elif (greatest := native_paths.greatest_time(data_type)) is not None:
        time = F.when((time != greatest[0]) & ~native_paths.beyond_python(time, data_type), time)
    return F.max(time)


def require_frame(events: Any, runner: str) -> None:
    """Refuse ``events`` that are not a Spark DataFrame (classic or Spark Connect).

    Raises:
        InvalidArgument: naming what was given and how to make a DataFrame of it.
    """
    kind = type(events)  # the class: a Spark Connect frame's properties ask its server
    if not (hasattr(kind, "isStreaming") and hasattr(kind, "sparkSession")):
        raise InvalidArgument(
            f"{runner} takes a Spark DataFrame, not a {kind.__module__}.{kind.__name__}: "
            f"make one with spark.createDataFrame(...), or run locally with run_local, which takes "
            f"rows, a pyarrow table or a pandas DataFrame"
        )


# the Python type a symbol of a Spark type arrives as in a machine (structs: Record)
_ARRIVES_AS: dict[type, type] = {
    T.StringType: str, T.BinaryType: bytes, T.BooleanType: bool, T.ByteType: int, T.ShortType: int,
    T.IntegerType: int, T.LongType: int, T.FloatType: float, T.DoubleType: float, T.DecimalType: decimal.Decimal,
    T.DateType: datetime.date, T.TimestampType: datetime.datetime, T.TimestampNTZType: datetime.datetime,
    T.ArrayType: tuple,
}


def refuse_unmet_subtypes(machine: Machine, prepared: Any) -> None:
    """Refuse a detector's (or a rule book's) ``subtype(cls)`` that no symbol of the
    column can meet: on Spark a symbol is the Python value of its column's type (a
    struct a :class:`~statemachines.records.Record`), never an instance of the class
    the rows were written from, so such a step would silently never match.

    Raises:
        InvalidArgument: naming the classes, the column's type and what its symbols are.
    """
    subtypes = machine.subtypes if isinstance(machine, Detector | RuleDetector) else []
    if not subtypes:
        return
    spark_type = prepared.schema["symbol"].dataType
    if isinstance(spark_type, T.StructType):
        arrives_as = record_type(tuple(spark_type.fieldNames()))
    else:
        arrives_as = _ARRIVES_AS.get(type(spark_type))
    for classes in subtypes:
        if arrives_as is not None and not issubclass(arrives_as, classes):
            raise InvalidArgument(
                f"subtype({', '.join(c.__qualname__ for c in classes)}) never holds on Spark: the symbol column is "
                f"{spark_type.simpleString()}, whose values reach the pattern as {arrives_as.__qualname__} "
                f"(a struct as a Record of its fields); test a field instead, e.g. where(\"kind = 'click'\")"
            )


def prepare_events(events: Any, columns: EventColumns) -> Any:
    """Select and rename the event columns to ``key, symbol, time, order``, every
    ``-0.0`` in a key or symbol made ``0.0`` (:func:`~statemachines.updates.canonical`).

    Raises:
        InvalidArgument: a named column is missing, or the time column's type is
            not a number, timestamp or date. Nothing runs in that case.
    """

    wanted = [columns.key, columns.symbol, columns.time] + [c for c in (columns.order, columns.refusal) if c]
    missing = [c for c in wanted if c not in events.columns]
    if missing:
        raise InvalidArgument(
            f"the events have no column(s) {', '.join(missing)}; they have "
            f"{', '.join(events.columns)}. Map them with key=/symbol=/time=/order=."
        )
    time_kind_of(events.schema[columns.time].dataType)
    for role, name in (("key", columns.key), ("order", columns.order)):
        if name and native_paths.holds_a_map(events.schema[name].dataType):
            raise InvalidArgument(
                f"the {role} column {name} has type {events.schema[name].dataType.simpleString()}: Spark cannot "
                f"sort or group by a map (and a map is no {role} locally either, being unhashable); make it "
                f"a struct, an array of entries (F.array_sort(F.map_entries(...))) or text (F.to_json(...)) first"
            )
    order = F.col(columns.order) if columns.order else F.lit(None).cast("long")
    refusal = [F.col(columns.refusal).alias(REFUSAL)] if columns.refusal else []
    return events.select(  # -0.0 is 0.0 in keys and symbols, as the intake makes it
        native_paths.canonical_zeros(F.col(columns.key), events.schema[columns.key].dataType).alias("key"),
        native_paths.canonical_zeros(F.col(columns.symbol), events.schema[columns.symbol].dataType).alias("symbol"),
        F.col(columns.time).alias("time"),
        order.alias("order"),
        *refusal,
    )


def refusal(reason: Reason, detail: Any) -> Any:
    """A ``refusal`` column value: ``reason``, and ``detail`` (text or a Column)."""
    detail = F.lit(detail) if isinstance(detail, str) else detail
    return F.struct(F.lit(reason.value).alias("reason"), detail.alias("detail"))


def split_refused(prepared: Any) -> tuple[Any, Any]:
    """The prepared events without those their source refused, and those as rejected
    output rows (``None`` when the events carry no refusal column)."""
    if REFUSAL not in prepared.columns:
        return prepared, None
    refused = prepared.where(F.col(REFUSAL).isNotNull()).select(
        F.lit(REJECTED).cast("byte").alias("kind"), "key", "symbol", "time", "order",
        F.col(f"{REFUSAL}.reason").alias("reason"), F.col(f"{REFUSAL}.detail").alias("detail"),
    )
    return prepared.where(F.col(REFUSAL).isNull()).drop(REFUSAL), refused


KEY_CHUNK = 50_000
"""A key with more events than this in a partition is run a part at a time (see
:func:`partition_runner`)."""


def partition_runner(
    machine: Machine, kind: str, lower: Any, upto: Any, arrow_schema: Any, counter: Any = None,
    check_values: bool = True, *, tabulate: bool = True, key_chunk: int = KEY_CHUNK, upsert_in_arrow: bool = False,
):
    """The function Spark calls once per partition: rows ``key, kind, symbol, time,
    order, prior`` sorted by key, kind, time and order; or, when there are no prior
    values, event rows ``key, symbol, time, order``.

    ``counter``, an accumulator, is given the number of events the partition held.
    ``check_values``: check each new value against the output's value type (see
    :func:`checks_values`). A tabulated machine's partition is stepped in bulk (see
    :mod:`statemachines.spark.tabulated`) unless ``tabulate`` is false.
    ``upsert_in_arrow``: the machine is ``Upsert`` over columns
    :func:`~statemachines.spark.upsert_arrow.runs_in_arrow` takes, stepped so.

    A key's events are run a part of at least ``key_chunk`` events at a time, each
    part ending before a later time, with the deadlines before that time: so a hot
    key holds a part's events and updates in memory, not all of them, and its
    output is the same.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        batches = with_kinds(batches)
        check = value_check_for(arrow_schema.field("value").type) if check_values else None
        intake = Intake(machine, kind=kind, value_check=check)
        out = OutputRows(arrow_schema)
        no_key = object()
        current, prior, raw, sound = no_key, [], [], True
        events = 0
        prepares = machine.spec.prepares_symbols

        def flush(until: Any = upto) -> frozenset[Any]:
            values, _, rejected = run_key(
                machine, intake, current, frozenset(prior), raw, frontier=lower, upto=until, sound=sound,
                columns=out.columns,
            )
            out.add(rejected=rejected)
            return values

        # The rows read and the updates made stay alive until their batch is written:
        # collections meanwhile would only scan them (a third of a detector's time).
        with gc_paused():
            for batch in batches:
                columns = [column_to_python(c) for c in batch.columns]  # key, row, symbol, ...
                if len(columns) == 5:  # no state rows: no prior column
                    columns.append([()] * batch.num_rows)
                if prepares:
                    machine.prepare_symbols([s for s in columns[2] if s is not None], batch.schema.field(2).type)
                keys, rows, symbols, times, orders, priors = columns
                sound_batch = sound_events(intake, batch, lower)
                for start, end in key_runs(batch.column(0), keys):
                    key = keys[start]
                    if not _same_key(key, current):
                        if current is not no_key:
                            flush()
                        current, prior, raw, sound = key, [], [], True
                    sound = sound and sound_batch
                    if rows[start] == EVENT_ROW and len(raw) + end - start < key_chunk:  # events only (sorted by kind)
                        raw.extend(zip(keys[start:end], symbols[start:end], times[start:end], orders[start:end], strict=True))
                        events += end - start
                        continue
                    for i in range(start, end):  # state rows, or a hot key: row by row
                        if rows[i] == STATE_ROW:
                            prior.extend(priors[i])
                            continue
                        time = times[i]
                        if len(raw) >= key_chunk and _before(raw[-1][2], time):  # a hot key: run a part
                            prior, raw = list(flush(time if upto is None or _before(time, upto) else upto)), []
                        raw.append((key, symbols[i], time, orders[i]))
                        events += 1
                if len(out) >= 50_000:
                    yield out.take()
            if current is not no_key:
                flush()
            yield out.take()
        if counter is not None:
            counter.add(events)

    if upsert_in_arrow:
        generic = partition_runner(machine, kind, lower, upto, arrow_schema, None, check_values, tabulate=False)
        in_bulk = upsert_runner(machine, kind, lower, arrow_schema, generic, counter)
        return lambda batches: in_bulk(with_kinds(batches))
    if tabulate and runs_in_rounds(machine):
        generic = partition_runner(machine, kind, lower, upto, arrow_schema, None, check_values, tabulate=False)
        rounds = lockstep_runner(machine, lower, upto, arrow_schema, generic, counter)
        return lambda batches: rounds(with_kinds(batches))
    if tabulate and runs_tabulated(machine):
        generic = partition_runner(machine, kind, lower, upto, arrow_schema, None, check_values, tabulate=False)
        bulk = tabulated_runner(machine, lower, arrow_schema, generic, counter, check_values)
        return lambda batches: bulk(with_kinds(batches))
    return run


def key_runs(column: Any, keys: list[Any]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of rows of one key in a batch sorted by key:
    ``column``, read as ``keys``. Text, bytes and integer keys are compared by
    Arrow (a null key is a run of its own, which the caller joins); other keys
    (nested, floats) in Python, where one NaN key (``math.nan``) is one key."""
    n = len(keys)
    if n > 1 and plain_key_type(column.type):
        changed = pc.fill_null(pc.not_equal(column.slice(1), column.slice(0, n - 1)), True)
        bounds = [0, *(np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1).tolist(), n]
    else:
        bounds = [0, *(i for i in range(1, n) if not _same_key(keys[i], keys[i - 1])), n] if n else [0]
    return itertools.pairwise(bounds)


def _same_key(a: Any, b: Any) -> bool:
    """Whether two keys read from Arrow are one key: equal, or one NaN (``math.nan``)."""
    return a is b or a == b


def sound_events(intake: Intake, batch: Any, frontier: Any) -> bool:
    """Whether the event rows of ``batch`` (``key, kind, symbol, time, order, ...``)
    pass the intake in bulk (:meth:`Intake.sound_in_bulk`)."""
    key, kind, symbol, time, order = batch.columns[:5]
    events = pc.equal(kind, EVENT_ROW)
    if not pc.all(events).as_py():  # state rows too
        key, symbol, time, order = (pc.filter(c, events) for c in (key, symbol, time, order))
    return intake.sound_in_bulk(key, symbol, time, order, frontier)


def _before(earlier: Any, later: Any) -> bool:
    """Whether ``earlier < later``; false for times that do not compare (None, NaN)."""
    try:
        return bool(earlier < later)
    except TypeError:
        return False


def with_kinds(batches: Iterator[Any]) -> Iterator[Any]:
    """A partition's batches with a ``kind`` column: a run without prior values
    sends event rows only, and none."""
    for batch in batches:
        if batch.schema.get_field_index("kind") < 0:
            batch = batch.add_column(1, "kind", pa.array(np.full(batch.num_rows, EVENT_ROW, np.int8)))
        yield batch


def _arrangement_state(spark: Any, path: str, prepared: Any, value_type: Any) -> tuple[Any, Any]:
    """Prior values per key from the arrangement, and the value type to use."""

    if not any(b["files"] for b in read_state(path)["batches"]):
        return None, value_type
    snapshot = read_snapshot(spark, path)
    stored_key, given_key = (frame.schema["key"].dataType.simpleString() for frame in (snapshot, prepared))
    if stored_key != given_key:  # found before the job runs, not when its files are published
        raise InvalidArgument(
            f"the key column has type {given_key}; the arrangement's keys are {stored_key}: cast it "
            f"first (e.g. F.col('key').cast('{stored_key}'))"
        )
    stored_type = snapshot.schema["value"].dataType
    if value_type is not None and value_type != stored_type:
        raise InvalidArgument(
            f"value_type {value_type.simpleString()} differs from the arrangement's value "
            f"type {stored_type.simpleString()}"
        )
    state = snapshot.where(F.col("count") > 0).select(
        F.col("key").cast(prepared.schema["key"].dataType).alias("key"), "value"
    )
    return state, stored_type


def run_batch(
    machine: Machine,
    events: Any,
    *,
    key: str = "key",
    symbol: str = "symbol",
    time: str = "time",
    order: str | None = None,
    into: str | os.PathLike[str] | None = None,
    value_type: Any = None,
    native: bool = True,
    progress: Any = False,
    refusal: str | None = None,
    abandon_waiting: bool = False,
    scratch: str | os.PathLike[str] | None = None,
) -> BatchResult:
    """Run ``machine`` over the DataFrame ``events`` on Spark.

    Args:
        machine: any machine instance (it is pickled to the executors).
        events: a DataFrame with key, symbol, time and optionally order columns.
        key, symbol, time, order: the names of those columns.
        into: a persisted arrangement directory (created if missing) to read prior
            values from and publish the updates into.
        value_type: the Spark type (or DDL string) of the machine's values; default:
            the arrangement's value type, else what the machine declares with a
            ``value_type(symbol_type, time_type)`` method (pattern detectors do),
            else the symbol column's type.
        native: use a library machine's native path when it has one: ``Upsert``
            steps in Arrow over keys of text or integers and values of those or
            records of those (see :mod:`~statemachines.spark.upsert_arrow`), else
            in window functions.
        refusal: a column of rows refused before the run (see :class:`EventColumns`).
        progress: True draws a progress bar on standard error (events the machine
            processed, the running stages' tasks, rate, time left; see
            :class:`~statemachines.spark.progress.StageProgress`) and prints the summary at
            the end; it counts the input first (one more Spark job). A
            ``StageProgress`` of your own is moved instead, and nothing is printed.
        abandon_waiting: append to an arrangement whose streaming query holds events
            not yet final (without it, that is refused: the append moves the
            arrangement's upper past them, and the query could never apply them).
        scratch: without ``into``, a folder (path or URI) that every executor and
            this process reach, where the run's Python tasks write its output as
            Parquet files for the result to read, instead of Spark caching it (the
            rows then make no trip back through Spark: faster, and no memory held).
            Each run writes a folder of its own inside; ``result.unpersist()``
            deletes it. Default: a temporary folder (deleted when this process
            exits) in a classic local session, whose tasks run on this machine;
            elsewhere the output is cached. Used by a machine's generic Python path
            without a ``refusal`` column, and by ``Upsert`` in Arrow; its window
            functions or a waterline path cache.

    Returns:
        A :class:`BatchResult`. With ``into``, its DataFrames read the files the run
        wrote; without, the scratch files or one cached output
        (``result.unpersist()`` releases either).

    Raises:
        InvalidArgument: missing columns, a time column of the wrong type, a
            value type that does not match the arrangement.
    """
    columns = EventColumns(key, symbol, time, order, refusal)
    if not progress:
        return _run_batch(
            machine, events, columns, into, value_type, native, abandon_waiting=abandon_waiting, scratch=scratch
        )

    if isinstance(progress, StageProgress):
        return _run_batch(
            machine, events, columns, into, value_type, native, progress.counter,
            abandon_waiting=abandon_waiting, scratch=scratch,
        )
    result, _, counts = run_batch_drawn(
        machine, events, label=f"run_batch {machine.spec.name}", key=key, symbol=symbol,
        time=time, order=order, into=into, value_type=value_type, native=native, refusal=refusal,
        abandon_waiting=abandon_waiting, scratch=scratch,
    )
    print(result.summary(counts), file=sys.stderr)
    return result


def run_batch_drawn(
    machine: Machine, events: Any, *, label: str, enabled: bool | None = None, **options: Any
) -> tuple[BatchResult, int, tuple[int, dict[str, int]]]:
    """``run_batch(machine, events, **options)`` drawing a progress bar to its end.

    Counts the input first (one more Spark job) for the bar's total, and the output
    after (:meth:`BatchResult.counts`) for its last state.

    Returns:
        The result, the number of input events, and the result's counts.
    """

    total = events.count()
    with StageProgress(events.sparkSession, label=label, total=total, enabled=enabled) as shown:
        result = run_batch(machine, events, progress=shown, **options)
        counts = result.counts()
        shown.finish(total, updates=counts[0], rejected=sum(counts[1].values()))
    return result, total, counts


def _run_batch(
    machine: Machine,
    events: Any,
    columns: EventColumns,
    into: Any,
    value_type: Any,
    native: bool,
    counter: Any = None,
    *,
    abandon_waiting: bool = False,
    scratch: Any = None,
) -> BatchResult:
    require_frame(events, "run_batch")
    prepared = prepare_events(events, columns)
    refuse_unmet_subtypes(machine, prepared)
    ship_code(prepared.sparkSession, machine)
    if into is None:
        folder = None if columns.refusal else _scratch_folder(prepared.sparkSession, scratch)
        name = batch_name()
        output, files_only = _output(
            machine, prepared, lower=None, upto=None, into=None, value_type=value_type, native=native,
            counter=counter, notes=None, task_files=(folder, name) if folder else None,
        )
        if files_only:
            return _scratch_result(output, folder, name)
        return _result(_cached(output))
    refuse_unstorable(machine, prepared, value_type)
    into = open_arrangement(prepared.sparkSession, into)
    state = read_state(into)
    _check_stream_waiting(state.get("stream") or {}, abandon_waiting)
    lower = decode_time(state["upper"])
    kind = time_kind_of(prepared.schema["time"].dataType)
    if lower is not None and time_kind(lower) != kind:
        raise InvalidArgument(
            f"the time column holds {kind} times; the arrangement's are {time_kind(lower)} times "
            f"(its upper is {lower!r}): cast the column to the arrangement's kind first"
        )
    machine = for_event_times(machine, kind)
    machine = resume_machine(machine, state.get("notes") or {}, lower)  # as earlier runs into it
    notes: dict[str, Any] = settings_note(machine)
    if machine.spec.has_deadlines or machine.spec.has_waterline:  # the run needs upto first
        upto = _upto(prepared.agg(latest_time(prepared)).toArrow().column(0)[0].as_py(), lower)

        def upto_of() -> Any:
            return upto
    else:  # the run does not need upto: the write job observes the latest time as it reads
        upto = None
        observation = Observation(f"latest-{uuid.uuid4().hex}")
        prepared = prepared.observe(observation, latest_time(prepared).alias("latest"))

        def upto_of() -> Any:
            return _upto(observation.get["latest"], lower)

    name = batch_name()
    output, files_only = _output(
        machine, prepared, lower=lower, upto=upto, into=into, value_type=value_type, native=native,
        counter=counter, notes=notes, task_files=(into, name),
    )
    if files_only:  # the tasks write every row: the job only collects the files' names
        parts = gather_files(into, name, output.select("kind", "detail", "diff").toArrow())
    else:
        parts = write_parts(output, into, name, key_ordered=not machine.spec.has_waterline)
    return _publish(output, parts, into, state, lower, upto_of, notes)


def _check_stream_waiting(stream: dict[str, Any], abandon: bool) -> None:
    """Refuse to append to an arrangement whose streaming query holds events not yet
    final (in its checkpoint's buckets, or pending in the arrangement), unless ``abandon``."""
    waiting = waiting_count(stream.get("waiting") or {}) + (stream.get("pending_count") or 0)
    if waiting and not abandon:
        raise InvalidArgument(
            f"the arrangement's streaming query holds {waiting} events not yet final; appending "
            f"now would move its upper past them, and the query could never apply them. Let the "
            f"stream apply them first, or pass abandon_waiting=True to append without them"
        )


def _upto(latest: Any, lower: Any) -> Any:
    """The upper of a run whose latest valid time is ``latest``, from ``lower``."""
    upto = time_after(latest) if latest is not None else lower
    if lower is not None and (upto is None or upto < lower):
        upto = lower  # every event is late: nothing new to publish
    return upto


def _publish(
    output: Any,
    parts: Parts,
    into: str,
    state: dict[str, Any],
    lower: Any,
    upto_of: Callable[[], Any],
    notes: dict[str, Any],
) -> BatchResult:
    """Publish the updates of ``output``, written as ``parts``, as the batch ``[lower,
    upto)`` (``upto_of()``, known once the job ran) and keep its rejected rows in the
    arrangement (the writer's note ``rejected`` names them;
    :func:`~statemachines.spark.streaming.read_rejected` reads them); the result's
    frames read what was written."""
    upto = upto_of()
    n_updates, n_rejected = parts.counts.get(UPDATE, 0), parts.counts.get(REJECTED, 0)
    if n_rejected:
        notes["rejected"] = [*(state.get("notes") or {}).get("rejected", []), move_aside(into, parts.name, REJECTED)]
    new_batch = upto is not None and (lower is None or upto > lower)
    if new_batch or notes:
        publish_batch(into, parts.update_files, lower, upto, n_updates, notes=notes or None)
    if not (new_batch and n_updates):
        drop_parts(into, parts)

    frames = (
        _read_files(output, into, parts.update_files if n_updates else [], UPDATE_COLUMNS),
        _read_files(output, into, [aside(parts.name, REJECTED)] if n_rejected else [], REJECTED_COLUMNS),
    )
    return BatchResult(*frames, lower, upto, published=new_batch)


def _read_files(output: Any, root: str, relative: list[str], columns: tuple[str, ...]) -> Any:
    """A frame of ``columns`` (typed as in ``output``) reading the Parquet files or
    folders ``relative`` to ``root``; an empty frame for none."""
    spark = output.sparkSession
    schema = T.StructType([output.schema[c] for c in columns])
    if not relative:
        return spark.createDataFrame([], schema)
    return read_files(spark, [os.path.join(root, r) for r in relative], schema).select(*columns)


@functools.cache
def _local_scratch() -> str:
    """This process's temporary scratch folder, deleted when it exits."""
    folder = tempfile.mkdtemp(prefix="statemachines-batch-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _scratch_folder(spark: Any, scratch: Any) -> str | None:
    """A new folder for one run's task-written output inside ``scratch`` (or inside
    this process's temporary folder, in a classic local session), or ``None``: cache."""
    if scratch is None:
        if not is_local(spark):
            return None
        scratch = _local_scratch()
    return delta.location(scratch).uri_of(f"run-{uuid.uuid4().hex}")


def _scratch_result(output: Any, folder: str, name: str) -> BatchResult:
    """Run the job whose tasks write their rows as files in ``folder`` (the batch
    folder ``name`` in it gathers the rejected ones): a result reading them. A job
    that fails leaves no folder."""
    try:
        parts = gather_files(folder, name, output.select("kind", "detail", "diff").toArrow())
    except BaseException:
        _delete_folder(folder)
        raise
    rejected = [f"{name}/kind={REJECTED}"] if parts.counts.get(REJECTED) else []
    return BatchResult(
        _read_files(output, folder, parts.update_files, UPDATE_COLUMNS),
        _read_files(output, folder, rejected, REJECTED_COLUMNS),
        scratch=folder,
    )


def _delete_folder(folder: str) -> None:
    """Delete a run's scratch ``folder`` (if it is there)."""
    parent, _, name = folder.rpartition("/")
    drop(parent, name)


def _cached(output: Any) -> Any:
    """``output``, persisted unless it is already (a waterline's settling caches its own)."""
    return output if output.is_cached else output.persist()


def open_arrangement(spark: Any, path: str | os.PathLike[str]) -> str:
    """The arrangement's URI (a local path made absolute), created empty if missing.

    Absolute, because Spark's JVM and this Python process may not share a working
    directory (Python may have changed its own since the session started).

    Raises:
        InvalidArgument: ``path`` holds something that is not an arrangement, or is
            on a store Spark has no file system for (checked before anything is
            written: Spark's jobs read and write the arrangement's files themselves).
    """
    loc = delta.location(path)
    if not loc.is_local:
        _require_spark_reaches(spark, loc)
    if delta.contents(loc):
        read_state(loc.uri)  # an arrangement (of this format), or a clear error
    else:
        PersistedArrangement.create(loc.uri)
    return loc.uri


def _require_spark_reaches(spark: Any, loc: delta.Location) -> None:
    """Refuse a store Spark has no file system for (its analysis of a read there is
    enough to tell: it names the missing file system, or only a missing path)."""
    try:
        spark.read.format("text").load(loc.uri_of(delta.STATE_DIR)).schema  # noqa: B018 - analysed for its error
    except Exception as exc:  # noqa: BLE001 - Spark's errors differ by flavour
        if "No FileSystem for scheme" not in str(exc):
            return  # Spark reached the store (the path need not exist)
        scheme = loc.uri.split("://", 1)[0]
        raise InvalidArgument(
            f"Spark has no file system for {scheme}:// ({loc.uri}); its jobs read and write the arrangement's "
            f"files themselves. On S3 give an s3a:// URI with hadoop-aws on Spark's classpath "
            f"(spark.jars.packages=org.apache.hadoop:hadoop-aws:<Spark's Hadoop version>)"
        ) from None


def process_events(
    machine: Machine,
    prepared: Any,
    *,
    lower: Any = None,
    upto: Any = None,
    into: str | None = None,
    value_type: Any = None,
    native: bool = True,
    cache: bool = True,
    counter: Any = None,
    notes: dict[str, Any] | None = None,
) -> Any:
    """The output rows (updates and rejections) of ``machine`` over ``prepared``.

    Events below ``lower`` are late; deadlines before ``upto`` fire (all of them when
    ``upto`` is ``None``); with ``into``, prior values come from that arrangement.
    With ``cache`` the output is persisted, for callers that read it more than once.
    ``counter``, an accumulator, counts the events the generic path hands the machine
    (for progress; a machine settling a waterline runs several times and a native
    path runs no Python, so neither counts). ``notes``, a dict, receives what the
    writer should note in the arrangement with this output (a waterline's high mark).
    """
    output, _ = _output(
        machine, prepared, lower=lower, upto=upto, into=into, value_type=value_type, native=native,
        counter=counter, notes=notes,
    )
    return _cached(output) if cache else output


def _output(
    machine: Machine, prepared: Any, *, lower: Any, upto: Any, into: str | None, value_type: Any, native: bool,
    counter: Any, notes: dict[str, Any] | None, task_files: tuple[str, str] | None = None,
) -> tuple[Any, bool]:
    """:func:`process_events`' rows, uncached. With ``task_files`` (a folder, and a
    batch folder's name in it) the generic path's tasks write their rows as files
    there (see :func:`~statemachines.spark.output.writing_files`); the second value
    says whether the output is only the rows naming them."""
    prepared, refused = split_refused(prepared)
    if refused is not None:
        output, _ = _output(
            machine, prepared, lower=lower, upto=upto, into=into, value_type=value_type, native=native,
            counter=counter, notes=notes, task_files=task_files,
        )
        return output.unionByName(refused, allowMissingColumns=True), False
    kind = time_kind_of(prepared.schema["time"].dataType)
    machine = for_event_times(machine, kind)
    value_type, state = resolve_value_type(machine, prepared, into, value_type)
    in_arrow = native and upto is None and runs_in_arrow(machine, _arrow_output_schema(prepared, value_type))
    fast = None
    if native and not in_arrow:
        fast = native_paths.for_machine(machine, prepared.schema["symbol"].dataType, value_type)
    if fast is not None:
        return fast(prepared, state, lower=lower, value_type=value_type), False
    if machine.spec.has_waterline:
        base = arrangement_high(prepared.sparkSession, into, machine) if into else None
        output = settled_output(
            machine, prepared, base,
            lambda bound: _generic(prepared, state, bound, kind, lower, upto, value_type),
            notes,
        )
        return output, False
    output = _generic(prepared, state, machine, kind, lower, upto, value_type, counter, task_files, in_arrow=in_arrow)
    return output, task_files is not None


def resolve_value_type(machine: Machine, prepared: Any, into: str | None, value_type: Any) -> tuple[Any, Any]:
    """The Spark type of the machine's values, and the arrangement's values (or None).

    In order: the arrangement's value type (``value_type``, if given, must match it),
    ``value_type``, what the machine declares, the symbol column's type.
    """

    if isinstance(value_type, str):
        value_type = T._parse_datatype_string(value_type)
    state = None
    if into is not None:
        state, value_type = _arrangement_state(prepared.sparkSession, into, prepared, value_type)
    return _values_type(machine, prepared, value_type), state


def _values_type(machine: Machine, prepared: Any, value_type: Any) -> Any:
    """``value_type`` (a DDL string parsed), else the type the machine declares, else
    the symbol column's."""
    if isinstance(value_type, str):
        value_type = T._parse_datatype_string(value_type)
    return value_type or _machine_value_type(machine, prepared) or prepared.schema["symbol"].dataType


def refuse_unstorable(machine: Machine, prepared: Any, value_type: Any) -> None:
    """Refuse, before an arrangement is opened, keys or values (``value_type``, else
    what the machine declares, else the symbols') that would hold an interval,
    which a Delta table has no type for, or nest deeper than a table holds
    (:data:`~statemachines.columns.MAX_TYPE_NESTING`).

    Raises:
        InvalidArgument: naming the keys or values and their type.
    """
    values = _values_type(machine, prepared, value_type)
    for role, data_type in (("key", prepared.schema["key"].dataType), ("value", values)):
        if native_paths.holds_an_interval(data_type):
            raise InvalidArgument(
                f"the {role}s have type {data_type.simpleString()}, which holds an interval: a Delta table has "
                f"no type for it; make it a number (of seconds, say) or text first"
            )
        depth = native_paths.type_nesting(data_type)
        if depth > MAX_TYPE_NESTING:
            raise InvalidArgument(f"the {role}s have a type nesting {depth} levels deep (structs, arrays or maps), {BEYOND_STORED}")


def _machine_value_type(machine: Machine, prepared: Any) -> Any:
    """The Spark type of the values a machine declares (``value_type``, in Arrow types)."""

    if not machine.spec.declares_value_type:
        return None
    symbol, time = (to_arrow_type(prepared.schema[c].dataType, timezone="UTC") for c in ("symbol", "time"))
    declared = machine.value_type(symbol, time)
    return None if declared is None else from_arrow_type(declared)


def checks_values(machine: Machine, prepared: Any, value_type: Any) -> bool:
    """Whether each new value must be checked against ``value_type``: always, unless
    the machine's values fit its own declared type by construction and that is it."""

    return not (machine.spec.values_fit_own_type and value_type == _machine_value_type(machine, prepared))


def _result(output: Any, lower: Any = None, upper: Any = None) -> BatchResult:
    updates = output.where(F.col("kind") == UPDATE).select(*UPDATE_COLUMNS)
    rejected = output.where(F.col("kind") == REJECTED).select(*REJECTED_COLUMNS)
    return BatchResult(updates, rejected, lower, upper, output=output)


def _arrow_output_schema(prepared: Any, value_type: Any) -> Any:
    """The Arrow schema of a run's output rows (see :func:`output_schema`)."""
    timezone = prepared.sparkSession.conf.get("spark.sql.session.timeZone")
    return to_arrow_schema(output_schema(prepared, value_type), timezone=timezone)


def _generic(prepared, state, machine, kind, lower, upto, value_type, counter=None, files=None, *, in_arrow=False):
    spark = prepared.sparkSession
    fields = {f.name: f.dataType for f in prepared.schema.fields}
    # A key's prior values travel in state rows beside its events, each as a list of
    # one value; an event row's list is empty. Not null: Spark hands a null of a
    # nested type to Python about eight times slower than an empty list. Without
    # prior values there is no such column.
    priors = T.ArrayType(value_type)
    rows = prepared.select("key", "symbol", "time", "order")  # events only: no kind column
    sort = ("key", "time", "order")
    if state is not None:
        rows = prepared.select("key", F.lit(EVENT_ROW).cast("byte").alias("kind"), "symbol", "time", "order")
        rows = rows.withColumn("prior", F.array().cast(priors))
        sort = ("key", "kind", "time", "order")
        if machine.spec.has_deadlines:
            needed = state  # keys without events may still have deadlines to fire
        else:
            needed = state.join(prepared.select("key").distinct(), "key", "left_semi")
        rows = rows.unionByName(
            needed.select(
                "key",
                F.lit(STATE_ROW).cast("byte").alias("kind"),
                F.lit(None).cast(fields["symbol"]).alias("symbol"),
                F.lit(None).cast(fields["time"]).alias("time"),
                F.lit(None).cast(fields["order"]).alias("order"),
                F.array(F.col("value").cast(value_type)).alias("prior"),
            )
        )
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    ordered = rows.repartition(partitions, "key").sortWithinPartitions(*sort)
    arrow_schema = _arrow_output_schema(prepared, value_type)
    check = checks_values(machine, prepared, value_type)
    run = partition_runner(machine, kind, lower, upto, arrow_schema, counter, check, upsert_in_arrow=in_arrow)
    return ordered.mapInArrow(run if files is None else writing_files(run, *files), output_schema(prepared, value_type))
