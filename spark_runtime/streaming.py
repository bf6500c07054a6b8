"""Running a machine over a Spark Structured Streaming source, exactly once.

Two runners, chosen by the machine; both publish each micro-batch ``b`` into the
persisted arrangement with one Delta commit that records ``b``, so a
micro-batch that Spark replays after a failure finds ``b`` published and changes
nothing:

- **Buckets** (every machine whose keys are independent): Spark's grouped stateful
  processing, the reference runtime's step per key bucket, checkpointed in Spark's state
  store, the event-time watermark as the frontier, timers for waiting events and
  deadlines (:mod:`statemachines.spark.buckets`). :class:`BucketSink` publishes.
- **Arrangement as state** (machines with a waterline, whose rule reads across
  keys): each micro-batch runs the batch runtime over its events and the pending
  ones, with the keys' values read from the arrangement (:class:`MicroBatchRunner`).
  Its frontier is ``max(frontier, latest event time seen - delay)``; events below
  the old frontier are late; events not yet final are written beside the updates as
  *pending* and published with them.

Late events are rejected rows in both (``read_rejected``), never dropped.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import threading
import time as _time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Observation
from pyspark.sql import functions as F

from statemachines import InvalidArgument, Machine
from statemachines.delta import on_local_disk
from statemachines.machine import resume_machine, settings_note
from statemachines.persisted import (
    REJECTED_COLUMNS,
    PersistedArrangement,
    is_replay,
    publish_batch,
    read_state,
    rejected_files,
    same_query,
)
from statemachines.spark.arrangement import read_files
from statemachines.spark.batch import (
    EventColumns,
    for_event_times,
    latest_time,
    open_arrangement,
    prepare_events,
    process_events,
    refuse_unmet_subtypes,
    refuse_unstorable,
    require_frame,
    split_refused,
    time_kind_of,
)
from statemachines.spark.bucket_state import decode_table
from statemachines.spark.buckets import bucketed_output, check_bucket_settings
from statemachines.spark.clock import frontier_of
from statemachines.spark.output import (
    PENDING,
    REJECTED,
    UPDATE,
    aside,
    drop,
    move_aside,
    waiting_count,
    write_keyed,
    write_parts,
)
from statemachines.spark.relay import MicroBatchReport, ReportRelay
from statemachines.spark.rule_stream import check_rules, kept_settings, taken_rules
from statemachines.spark.session import scoped_conf
from statemachines.spark.shipping import is_connect, self_contained, ship_code
from statemachines.times import decode_time, encode_time, is_duration

__all__ = [
    "BucketSink",
    "MicroBatchReport",
    "MicroBatchRunner",
    "absolute",
    "flush_progress",
    "read_rejected",
    "run_stream",
]


KEPT_REPORTS = 100  # the latest micro-batches' reports kept in the arrangement
ARRIVED = "arrived"  # when the micro-batch that took an event ran (Unix milliseconds)


def with_report(progress: dict[str, Any], stream: dict[str, Any], report: MicroBatchReport) -> dict[str, Any]:
    """The stream progress to publish: ``progress``, this report and the running totals.

    Published with the micro-batch, so a client that did not run the sink (Spark
    Connect runs it on the server) reads the reports from the arrangement.
    """
    totals = dict(stream.get("totals") or {"events": 0, "updates": 0, "rejected": 0})
    for name in totals:
        totals[name] += getattr(report, name)
    reports = [*stream.get("reports", [])[-(KEPT_REPORTS - 1) :], report.to_json()]
    return {**progress, "totals": totals, "reports": reports}


def write_output(payloads: Any, arrow_schema: Any, path: str) -> tuple[str, dict[int, int]]:
    """Write the rows of the buckets' output payloads as ``write_parts`` lays out its
    frame (a bucket's updates are in a file of its own; those of a bucket that wrote
    none, as earlier versions did, are written here)."""

    name = f"batch-{uuid.uuid4().hex}"
    parts = [decode_table(p) for p in payloads.to_pylist() if p is not None]
    table = pa.concat_tables(parts) if parts else arrow_schema.empty_table()
    counts = {}
    for kind in (UPDATE, REJECTED):
        rows = table.filter(pc.equal(table["kind"], kind)).drop_columns(["kind"])
        if rows.num_rows:
            write_keyed(rows, path, f"{name}/kind={kind}/part-00000.parquet")
            counts[kind] = rows.num_rows
    return name, counts


def _latest_and_count(frame: Any) -> tuple[Any, int]:
    row = frame.agg(latest_time(frame), F.count(F.lit(1))).toArrow()
    return row.column(0)[0].as_py(), row.column(1)[0].as_py()


def _minus(latest: Any, delay: Any) -> Any:
    if isinstance(latest, _dt.datetime) and not isinstance(delay, _dt.timedelta):
        raise InvalidArgument(f"with timestamp times the delay is a timedelta, not {delay!r}")
    return latest - delay


@attrs.define
class MicroBatchRunner:
    """The ``foreachBatch`` function: one micro-batch into the arrangement, exactly once."""

    machine: Machine
    into: str
    columns: EventColumns
    delay: Any
    value_type: Any = None
    native: bool = True
    progress: Callable[[MicroBatchReport], None] | None = print
    after_publish: Callable[[str], None] | None = None
    checkpoint: str | None = None  # the query's: micro-batch ids count within one checkpoint

    def __call__(self, batch: Any, batch_id: int) -> None:
        self._run(batch, batch_id)
        if self.after_publish is not None:  # after a replay too: it may not have run
            self.after_publish(self.into)

    def _run(self, batch: Any, batch_id: int) -> None:
        started = _time.perf_counter()
        state, stream = published(self.into)
        if replayed(stream, self.checkpoint, batch_id):
            tell(self.progress, MicroBatchReport(batch_id, 0, 0, 0, 0, None, 0.0, replayed=True))
            return
        check_sole_writer(state, stream, self.checkpoint, batch_id)
        spark = batch.sparkSession
        taken, refused = split_refused(prepare_events(batch, self.columns))
        taken = taken.withColumn(ARRIVED, F.lit(round(_time.time() * 1000)).cast("long"))
        lower = decode_time(state["upper"])
        pending = self._pending(spark, stream, taken)
        events = taken if pending is None else taken.unionByName(pending)

        frontier = decode_time(stream.get("frontier"))
        latest, n_all = _latest_and_count(events)
        if latest is not None:
            candidate = _minus(latest, self.delay)
            if frontier is None or candidate > frontier:
                frontier = candidate
        if lower is not None and (frontier is None or frontier < lower):
            frontier = lower

        time_type = events.schema["time"].dataType
        bound = F.lit(frontier).cast(time_type) if frontier is not None else None
        if bound is None:  # no time seen yet: only rows without a time can be judged
            due, waiting = events.where(F.col("time").isNull()), events.where(F.col("time").isNotNull())
        else:
            waiting = events.where(F.col("time").isNotNull() & (F.col("time") >= bound))
            due = events.where(F.col("time").isNull() | (F.col("time") < bound))
        notes: dict[str, Any] = {}
        first_arrival = Observation(f"arrived-{uuid.uuid4().hex}")
        due = due.observe(first_arrival, F.min(ARRIVED).alias(ARRIVED)).drop(ARRIVED)
        output = process_events(
            self.machine, due, lower=lower, upto=frontier, into=self.into,
            value_type=self.value_type, native=self.native, cache=False, notes=notes,
        )
        if refused is not None:
            output = output.unionByName(refused, allowMissingColumns=True)
        # updates (kind 0), rejected (1) and pending events (2): written in one job
        held = waiting.select(
            F.lit(PENDING).cast("byte").alias("kind"), "key", "time", "symbol", "order", ARRIVED
        )
        parts = write_parts(output.unionByName(held, allowMissingColumns=True), self.into)
        output.unpersist()  # cached only when settling a waterline took several runs
        name = parts.name
        n_updates, n_rejected, n_pending = (parts.counts.get(k, 0) for k in (UPDATE, REJECTED, PENDING))
        progress = {
            "batch_id": batch_id,
            "checkpoint": self.checkpoint,
            "frontier": encode_time(frontier),
            "pending": aside(name, PENDING) if n_pending else None,
            "pending_count": n_pending,
            "rejected": stream.get("rejected", []) + ([aside(name, REJECTED)] if n_rejected else []),
        }
        n_events = n_all - stream.get("pending_count", 0)
        earliest = waiting.agg(F.min("time")).toArrow().column(0)[0].as_py() if n_pending else None
        arrived = first_arrival.get[ARRIVED]
        report = MicroBatchReport(
            batch_id, n_events, n_updates, n_rejected, n_pending, frontier,
            _time.perf_counter() - started, waiting_for=earliest,
            latency=None if arrived is None else max(0.0, _time.time() - arrived / 1000),
        )
        publish_micro_batch(
            self.into, name, lower, frontier, progress, stream, report, self.progress, notes=notes or None,
            files=parts.update_files,
        )

    def _pending(self, spark: Any, stream: dict[str, Any], like: Any) -> Any:
        if not stream.get("pending"):
            return None
        stored = spark.read.parquet(os.path.join(self.into, stream["pending"]))
        if ARRIVED not in stored.columns:  # held by an earlier version: arrival not known
            stored = stored.withColumn(ARRIVED, F.lit(None).cast("long"))
        return stored.select(*(stored[c].cast(like.schema[c].dataType).alias(c) for c in like.columns))


@attrs.define
class BucketSink:
    """The ``foreachBatch`` function of a bucketed query: publish each micro-batch once.

    The buckets' output rows (see :mod:`statemachines.spark.buckets`) are collected
    in one job; the updates are in the data files the buckets wrote, their rejected
    rows are written by this process; all are published with the micro-batch id in
    one atomic commit. A micro-batch Spark replays after a failure finds its id
    published: the buckets run again (Spark requires their state to be committed),
    their output is discarded.
    """

    into: str
    kind: str
    arrow_schema: Any
    labels: tuple[int, ...]  # the buckets' (bucket_labels), noted so that a restart keeps them
    progress: Callable[[MicroBatchReport], None] | None = print
    after_publish: Callable[[str], None] | None = None
    settings: dict[str, Any] = attrs.Factory(dict)  # the machine's settings note (settings_note)
    checkpoint: str | None = None  # the query's: micro-batch ids count within one checkpoint

    def __call__(self, packed: Any, batch_id: int) -> None:
        self._run(packed, batch_id)
        if self.after_publish is not None:  # after a replay too: it may not have run
            self.after_publish(self.into)

    def _run(self, packed: Any, batch_id: int) -> None:
        started = _time.perf_counter()
        state, stream = published(self.into)
        if replayed(stream, self.checkpoint, batch_id):
            # Spark requires every state store partition to commit the replayed batch;
            # the buckets recompute the same state from the one before, output unused
            packed.write.format("noop").mode("overwrite").save()
            tell(self.progress, MicroBatchReport(batch_id, 0, 0, 0, None, None, 0.0, replayed=True))
            return
        check_sole_writer(state, stream, self.checkpoint, batch_id)
        # one row per bucket that ran: a single job, and the output is one micro-batch's
        with merging_meanwhile(self.into):
            table = packed.toArrow()
        watermark, n_events = pc.max(table["watermark"]).as_py(), pc.sum(table["events"]).as_py()
        lower = decode_time(state["upper"])
        frontier = frontier_of(watermark or 0, self.kind)
        upper = frontier if frontier is not None and (lower is None or frontier > lower) else lower
        name, counts = write_output(table["payload"], self.arrow_schema, self.into)
        files = table["file"].drop_null().to_pylist()
        if counts.get(UPDATE):
            files.append(f"{name}/kind={UPDATE}/part-00000.parquet")
        n_updates = counts.get(UPDATE, 0) + (pc.sum(table["file_rows"]).as_py() or 0)
        n_rejected = counts.get(REJECTED, 0)
        before = (stream.get("waiting") or {}) if same_query(stream, self.checkpoint) else {}
        waiting = waiting_by_bucket(before, table)
        n_waiting = waiting_count(waiting)
        earliest = min((decode_time(json.loads(t)) for _, t in waiting.values()), default=None)
        progress = {
            "batch_id": batch_id,
            "checkpoint": self.checkpoint,
            "frontier": encode_time(upper),
            "rejected": stream.get("rejected", []) + ([aside(name, REJECTED)] if n_rejected else []),
            "buckets": len(self.labels),
            "labels": list(self.labels),
            "waiting": waiting,
        }
        progress.update(taken_rules(table["rules_taken"].drop_null().to_pylist(), stream))
        notes = kept_settings(self.settings, progress.get("rules_accepted", []))
        arrived = pc.min(table["arrived"]).as_py()
        report = MicroBatchReport(
            batch_id, n_events or 0, n_updates, n_rejected, n_waiting, upper,
            _time.perf_counter() - started, waiting_for=earliest,
            latency=None if arrived is None else max(0.0, _time.time() - arrived / 1000),
        )
        publish_micro_batch(
            self.into, name, lower, upper, progress, stream, report, self.progress, notes or None, merge=False,
            files=files,
        )


@contextlib.contextmanager
def merging_meanwhile(into: str) -> Iterator[None]:
    """Merge the batches the last micro-batch published unmerged into the
    arrangement's spine (:meth:`PersistedArrangement.merge_batches`, one commit) in a
    thread of this process, while the block runs Spark's job for the next one.

    The merge is over when the block ends, so it never meets the next publish or
    another writer; an error in it is raised here.
    """
    failed: list[BaseException] = []

    def merge() -> None:
        try:
            PersistedArrangement.open(into).merge_batches()
        except BaseException as exc:  # noqa: BLE001 - raised in the sink's thread
            failed.append(exc)

    thread = threading.Thread(target=merge, name="statemachines-merge")
    thread.start()
    try:
        yield
    finally:
        thread.join()
    if failed:
        raise failed[0]


def replayed(stream: dict[str, Any], checkpoint: str | None, batch_id: int) -> bool:
    """Whether micro-batch ``batch_id`` of the query on ``checkpoint`` is published
    already (Spark replays it after a failure; see
    :func:`~statemachines.persisted.is_replay`)."""
    return is_replay(stream, {"batch_id": batch_id, "checkpoint": checkpoint})


def check_sole_writer(
    state: dict[str, Any], stream: dict[str, Any], checkpoint: str | None, batch_id: int | None = None
) -> None:
    """Refuse to go on with the query on ``checkpoint`` if another writer appended to
    its arrangement (published ``state``, the query's progress ``stream``) since the
    query's last micro-batch, or if the arrangement lacks micro-batches before
    ``batch_id`` that the query ran (a Delta ``RESTORE`` rolled it back): the query's
    state (its keys' values, its events not yet final) no longer matches the
    arrangement, and going on would publish updates that contradict it."""
    if not same_query(stream, checkpoint):
        return
    last = stream.get("batch_id", -1)
    if batch_id is not None and batch_id > last + 1:
        raise InvalidArgument(
            f"the arrangement holds this query's micro-batches up to {last}, but the query on "
            f"checkpoint {checkpoint} runs micro-batch {batch_id}: the arrangement was rolled back "
            f"(a Delta RESTORE) and the query's state is ahead of it. Start the query on a new "
            f"checkpoint to continue from the arrangement's values"
        )
    if "frontier" not in stream:
        return
    mine, upper = decode_time(stream["frontier"]), decode_time(state["upper"])
    if mine != upper:
        raise InvalidArgument(
            f"another writer appended to the arrangement (its upper is {upper!r}) after this "
            f"query's last micro-batch (frontier {mine!r}): the query's state on checkpoint "
            f"{checkpoint} no longer matches it. Start the query on a new checkpoint to continue "
            f"from the arrangement's values (with abandon_waiting=True if this one holds events "
            f"not yet final)"
        )


def published(into: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arrangement's published state and its stream progress (``{}`` if none).

    A sink compares a micro-batch's id with the progress's ``batch_id``: not above it,
    the micro-batch was published before and Spark replays it after a failure.
    """
    state = read_state(into)
    return state, state.get("stream") or {}


def publish_micro_batch(
    into: str,
    name: str,
    lower: Any,
    upper: Any,
    progress: dict[str, Any],
    stream: dict[str, Any],
    report: MicroBatchReport,
    callback: Callable[[MicroBatchReport], None] | None,
    notes: dict[str, Any] | None = None,
    merge: bool = True,
    *,
    files: list[str],
) -> None:
    """Publish the micro-batch written as ``into/name`` with its progress and report, then tell.

    One commit holds the updates (the data ``files``) as the batch ``[lower, upper)``,
    the stream progress (with the micro-batch id, which makes a replay a no-op) and
    the report with the running totals. The rejected rows and pending events the
    micro-batch wrote (``name/kind=1``, ``kind=2``) are first set aside in the
    state directory (see :func:`aside`), where the progress names them. With
    ``merge=False`` the batch joins the spine unmerged (see :func:`merging_meanwhile`).
    """
    for kind in (REJECTED, PENDING):
        move_aside(into, name, kind)
    publish_batch(
        into, files, lower, upper, report.updates,
        stream=with_report(progress, stream, report), notes=notes, merge=merge,
    )
    before = stream.get("pending")
    if before and before != progress.get("pending"):  # read by nobody now
        drop(into, before)
    tell(callback, report)


def tell(callback: Callable[[MicroBatchReport], None] | None, report: MicroBatchReport) -> None:
    """Give ``report`` to a sink's ``progress`` callback, if it has one."""
    if callback is not None:
        callback(report)


def waiting_by_bucket(before: dict[str, Any], table: Any) -> dict[str, Any]:
    """Each bucket's waiting events ``[count, earliest time as JSON]``, after a micro-batch.

    ``table`` holds a row for each bucket that ran; the others did not change (a
    bucket with waiting events has a timer, so it runs when any of them is due).
    """
    waiting = dict(before)
    for bucket, count, earliest in zip(
        table["bucket"].to_pylist(), table["waiting"].to_pylist(), table["waiting_for"].to_pylist(), strict=True
    ):
        if count:
            waiting[str(bucket)] = [count, earliest]
        else:
            waiting.pop(str(bucket), None)
    return waiting


def run_stream(
    machine: Machine,
    events: Any,
    *,
    into: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str],
    key: str = "key",
    symbol: str = "symbol",
    time: str = "time",
    order: str | None = None,
    delay: Any = 0,
    value_type: Any = None,
    native: bool = True,
    buckets: int | None = None,
    trigger: dict[str, Any] | None = None,
    progress: Callable[[MicroBatchReport], None] | None = print,
    refusal: str | None = None,
    after_publish: Callable[[str], None] | None = None,
    rules: Any = None,
    abandon_waiting: bool = False,
) -> Any:
    """Start a streaming query that runs ``machine`` over the streaming DataFrame ``events``.

    The machine runs in Spark's grouped stateful processing
    (``transformWithStateInPandas``), the reference runtime's step per key bucket
    (:mod:`statemachines.spark.buckets`); the event-time watermark is the frontier. A
    machine whose rules read across keys (a waterline, as in
    :class:`~statemachines.library.UpsertWithLateness`) runs micro-batch by micro-batch with the
    arrangement as its state instead (:class:`MicroBatchRunner`).

    Args:
        machine: any machine instance.
        events: a streaming DataFrame (``spark.readStream...``).
        into: the persisted arrangement directory (created if missing). If it
            already holds updates when the query first starts, each key continues
            from its values there and events below its ``upper`` are late.
        checkpoint: Spark's checkpoint directory for this query. It also holds the
            buckets' state, including events not yet final: a query started on a
            new checkpoint continues from the arrangement's values only.
        key, symbol, time, order: the event columns.
        delay: how far behind the latest event time the frontier stays (a finite
            number of at least 0, or a ``timedelta`` for timestamp and date times;
            anything else is refused before the query starts). The frontier of a
            micro-batch comes from the events of earlier ones; events below it
            when they arrive are rejected as late.
        value_type: as for :func:`~statemachines.spark.batch.run_batch`.
        native: for the arrangement-state runner: use a native path if any.
        buckets: how many key buckets hold the state (fixed for a checkpoint; by
            default four per shuffle partition, at least 16:
            :func:`~statemachines.spark.buckets.default_buckets`).
        trigger: keyword arguments for ``DataStreamWriter.trigger`` (e.g.
            ``{"availableNow": True}``).
        progress: called with a :class:`MicroBatchReport` after each micro-batch
            (default: printed); ``None`` for silence.
        refusal: a column of rows refused before the run (see :class:`EventColumns`).
        after_publish: called with the arrangement's URI after each micro-batch is
            published, and after each replayed one (e.g. to refresh an SCD table). It
            runs where the sink runs (the Spark Connect server, with Spark Connect).
        rules: for a :class:`~statemachines.library.RuleDetector`, a streaming
            DataFrame of rule rows ``rule_id, pattern_json, valid_from`` that extend
            its book while the query runs, each from the frontier of the micro-batch
            that brings it (:mod:`statemachines.spark.rule_stream`). Rows set aside
            are read with :func:`~statemachines.spark.rule_stream.read_rejected_rules`.
        abandon_waiting: start on a new ``checkpoint`` although the arrangement's
            last query holds events not yet final in its own checkpoint (without it,
            that is refused: the new query would never apply them).

    Returns:
        The started ``StreamingQuery``.
    """
    require_frame(events, "run_stream")
    if not events.isStreaming:
        raise InvalidArgument("run_stream needs a streaming DataFrame; use run_batch for a static one")
    if not is_duration(delay):
        raise InvalidArgument(
            f"delay is a finite duration of at least 0 (a number, or a timedelta for timestamps), got {delay!r}"
        )
    if trigger is not None and not isinstance(trigger, dict):
        raise InvalidArgument(
            f"trigger is a dict of DataStreamWriter.trigger's arguments, such as {{'availableNow': True}}; got {trigger!r}"
        )
    if rules is not None:
        check_rules(machine, rules)
    columns = EventColumns(key, symbol, time, order, refusal)
    prepared = prepare_events(events, columns)  # column and type errors surface now
    refuse_unmet_subtypes(machine, prepared)
    ship_code(events.sparkSession, machine)
    kind = time_kind_of(events.schema[time].dataType)
    if kind != "number" and not isinstance(delay, _dt.timedelta) and delay != 0:
        raise InvalidArgument(f"with {kind} times the delay is a timedelta, not {delay!r}")
    if not machine.spec.has_waterline:
        check_bucket_settings(events.sparkSession, buckets)
    machine = for_event_times(machine, kind)
    refuse_unstorable(machine, prepared, value_type)
    into = open_arrangement(events.sparkSession, into)
    checkpoint = absolute(checkpoint)
    state = read_state(into)  # as the runs into it so far, up to its upper
    check_sole_writer(state, state.get("stream") or {}, checkpoint)
    machine = resume_machine(machine, state.get("notes") or {}, decode_time(state["upper"]))
    spark = events.sparkSession
    # with Spark Connect the sink runs on the server: reports come back through the arrangement
    in_sink = None if is_connect(spark) else progress
    if machine.spec.has_waterline:
        sink: Any = MicroBatchRunner(
            machine, into, columns, delay, value_type, native, in_sink, after_publish, checkpoint
        )
        writer = events.writeStream
    else:
        output, arrow_schema, labels = bucketed_output(
            machine, prepared, kind, into, checkpoint, delay, value_type, buckets, rules, abandon_waiting
        )
        sink = BucketSink(into, kind, arrow_schema, labels, in_sink, after_publish, settings_note(machine), checkpoint)
        writer = output.writeStream
    writer = writer.foreachBatch(self_contained(spark, sink)).option("checkpointLocation", checkpoint)
    if trigger:
        writer = writer.trigger(**trigger)
    relay = None
    if in_sink is None and progress is not None:
        relay = ReportRelay(into, progress)  # before the query publishes anything
    files = checkpoint_files(spark, checkpoint)
    with scoped_conf(spark, files):  # read as the query starts, and as its sources start
        query = writer.start()
        if files:
            sources_started(query)
    if relay is not None:
        relay.start(query)
        _RELAYS[str(query.id)] = relay
    return query


def flush_progress(query: Any) -> None:
    """Report the micro-batches of ``query`` not reported yet, and stop relaying them.

    Only Spark Connect needs it: there the sink runs on the server and the reports
    reach this client by polling the arrangement, shortly after each micro-batch.
    Call it after ``query.awaitTermination()`` (or ``query.stop()``) to see the last
    ones. Elsewhere it does nothing.
    """
    relay = _RELAYS.pop(str(query.id), None)
    if relay is not None:
        relay.close()


_RELAYS: dict[str, Any] = {}  # query id -> its ReportRelay, with Spark Connect


CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def checkpoint_files(spark: Any, checkpoint: str) -> dict[str, str]:
    """The Spark setting a query on ``checkpoint`` starts with: on the local file
    system, Spark's checkpoint file manager that writes through Hadoop's
    ``FileSystem`` rather than its ``FileContext`` (unless the session names one).

    Without Hadoop's native library (a pip install of pyspark has none) the local
    ``FileContext`` starts a ``readlink`` process for each path a rename checks:
    about 18 a micro-batch, a quarter of the JVM's CPU in a small stream
    (``benchmarks/checkpoints.py``; both also start a ``chmod`` for each file they create). On a local disk the two are
    alike otherwise: a rename that must not overwrite checks the destination first in
    both, as ``rename(2)`` cannot refuse to overwrite. The class moved package in
    Spark 4.1.

    ===============================  ==========================================
    checkpoint                       setting
    ===============================  ==========================================
    ``/path``, ``file:/path``        ``FileSystemBasedCheckpointFileManager``
    ``s3a://...``, ``hdfs://...``    none: Spark's default
    either, the session naming one   none: the session's
    ===============================  ==========================================
    """
    if not on_local_disk(checkpoint) or spark.conf.get(CHECKPOINT_FILE_MANAGER, None):
        return {}
    major, minor = (int(part) for part in spark.version.split(".")[:2])
    package = "checkpointing." if (major, minor) >= (4, 1) else ""
    return {CHECKPOINT_FILE_MANAGER: f"org.apache.spark.sql.execution.streaming.{package}FileSystemBasedCheckpointFileManager"}


_STARTING = ("Initializing StreamExecution", "Initializing sources")
SOURCES_WAIT = 60.0  # seconds a query's sources may take to start before run_stream returns anyway


def sources_started(query: Any, timeout: float = SOURCES_WAIT) -> None:
    """Return once ``query`` has made its sources (or stopped, or after ``timeout``).

    Spark makes a query's sources in the query's own thread, after ``start`` returns,
    and a file source's log takes its checkpoint file manager from the session's
    settings then: waiting keeps :func:`checkpoint_files`' setting in force for it
    too (about 0.1 s). Without it the log renames through ``FileContext``, a
    ``readlink`` process per path, seven a micro-batch.
    """
    deadline = _time.monotonic() + timeout
    while query.isActive and query.status["message"] in _STARTING and _time.monotonic() < deadline:
        _time.sleep(0.01)


def absolute(path: str | os.PathLike[str]) -> str:
    """A path for Spark: URIs (``s3://``, ``file:``...) as given, local paths made absolute.

    Spark resolves a relative path against its own working directory, which is the
    server's with Spark Connect and may differ from this process's anyway.
    """
    path = os.fspath(path)
    return path if "://" in path or path.startswith("file:") else os.path.abspath(path)


def read_rejected(spark: Any, path: str | os.PathLike[str]) -> Any:
    """Every rejected row the runs into the arrangement at ``path`` kept there: each
    stream's micro-batches and each ``run_batch(..., into=path)``.

    Returns ``None`` when nothing was rejected.
    """
    state = read_state(path)
    names = rejected_files(state.get("notes"), state.get("stream"))
    if not names:
        return None
    frame = read_files(spark, [os.path.join(os.fspath(path), n) for n in names])
    return frame.select(*REJECTED_COLUMNS)
