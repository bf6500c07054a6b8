"""Spark's grouped stateful processing, the reference runtime's step per key bucket.

Keys are hashed into a fixed number of buckets. Each bucket's state (its keys'
values and armed deadlines, its buffered events) is kept in parts as Arrow tables
(:mod:`statemachines.spark.bucket_state`) in Spark's state store; a micro-batch
runs a :class:`~statemachines.LocalRuntime` over the keys it touches only (``Upsert``
over plain columns runs in Arrow instead: :mod:`statemachines.spark.bucket_upsert`). Python is
called once per bucket per micro-batch, never once per key::
    events ─ pack ─► (bucket, payload, clock) ─ groupBy(bucket).transformWithStateInPandas ─► (file, payload)

*Packing* turns each Arrow batch of events into one row per bucket whose ``payload``
is those events in Arrow IPC form, plus one *clock* row carrying the batch's latest
event time minus the delay. Spark's event-time watermark is defined on ``clock`` and
is the frontier. Event rows have no clock, so Spark's own late-row filter never
drops one: a late event reaches its bucket, which rejects it with reason ``late``.

In micro-batch ``N`` with watermark ``W`` (the latest clock of earlier micro-batches),
each bucket with events or an expired timer:

=====  ===================================================================
step   what happens
=====  ===================================================================
1      reads its state: the columns of every key, the values of the keys due
2      advances to ``W``: buffered events and deadlines below ``W`` apply
3      buffers the new events; those below ``W`` are rejected as late
4      writes the parts that changed, and sets one timer at the earliest
       time still waiting
5      writes its updates as a key-sorted data file of the arrangement; its
       output row names the file, and carries its rejected events
=====  ===================================================================

A bucket with nothing new is not called until its timer fires. Its updates have
times below ``W`` and at or above the previous watermark. The sink publishes the
micro-batch's files as one batch: the updates never pass through the driver. Files
of a micro-batch Spark replays after a failure are never published; the
arrangement's vacuum deletes them.

A bucket's state lives in one value state, ``bucket`` (the record, base, recent keys
and pending events), so a micro-batch reads it and writes it once. A base larger
than :data:`INLINE_BASE_BYTES` is kept apart in the value state ``base``, written
only when it changes. The record notes the one timer armed. Buckets that earlier
versions stored (the base apart from a ``head``; the parts in four value states;
one pickled runtime in ``runtime``) are read and stored again in this layout. A
query declares those earlier state variables only on a checkpoint that has them
(:func:`state_variables`): Spark sets up each declared variable anew in every task
of every micro-batch.

Times map to Spark's milliseconds as :mod:`statemachines.spark.clock` says.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming import StatefulProcessor

from statemachines import InvalidArgument, Machine, Reason
from statemachines._gc import gc_paused
from statemachines.columns import value_check_for
from statemachines.delta import on_local_disk
from statemachines.intake import INT64_MAX
from statemachines.library.rules import RuleDetector
from statemachines.persisted import read_state, same_query
from statemachines.spark.batch import checks_values, refusal, resolve_value_type
from statemachines.spark.bucket_state import (
    PARTS,
    BucketState,
    BucketTypes,
    advance,
    decode_table,
    encode_table,
    event_rows,
    split_by_bucket,
)
from statemachines.spark.bucket_upsert import upsert_step
from statemachines.spark.clock import (
    CLOCK_LIMIT_MS,
    CLOCK_SHIFT_MS,
    DAY_MS,
    delay_ms,
    frontier_of,
    latest_ms,
)
from statemachines.spark.output import (
    REFUSAL,
    OutputRows,
    output_schema,
    waiting_count,
    write_keyed,
)
from statemachines.spark.rule_stream import book_of, packed_rules, rule_rows, take_rules
from statemachines.spark.session import ROCKSDB
from statemachines.spark.shipping import carried, code_loader, is_connect
from statemachines.times import decode_time, encode_time

__all__ = [
    "BUCKET_OUTPUT",
    "Bucket",
    "bucket_of",
    "bucket_processor",
    "bucketed_output",
    "check_bucket_settings",
    "frontier_of",
    "packed_events",
]

# per bucket and micro-batch: its rows other than updates in Arrow IPC form (or null),
# the data file of its updates and their count (or nulls), the events
# it took, the watermark, the events still waiting with the earliest of their times
# (JSON, as encode_time), when the earliest event it applied arrived (Unix ms), and
# the rule rows it accepted and set aside (JSON, see rule_stream.take_rules)
BUCKET_OUTPUT = (
    "bucket int, payload binary, file string, file_rows long, events long, watermark long, waiting long, "
    "waiting_for string, arrived long, rules_taken string"
)

CLOCK_ROWS = -1  # the bucket of clock rows: no bucket's state is touched by them
STATE = "bucket"  # the value state holding a bucket's parts (PARTS; base null when kept apart)
STATE_SCHEMA = "record binary, base binary, recent binary, pending binary"
INLINE_BASE_BYTES = 256 * 1024
"""A base encoded in at most this many bytes (about 9,000 keys of short text values)
is stored with the other parts, rewritten with them in every micro-batch; a larger
one is kept apart and written only when it changes. Together, a micro-batch makes one
call to write the state instead of two (at 2-3 ms a call on a busy worker)."""
HEAD = "head"  # format 2: the record, recent keys and pending events, the base apart
HEAD_PARTS = ("record", "recent", "pending")
HEAD_SCHEMA = "record binary, recent binary, pending binary"
LEGACY = "runtime"  # the state variable of earlier versions: one pickled LocalRuntime
CURRENT = (STATE, "base")  # the state variables this version writes
STATE_SCHEMAS = {  # every state variable a checkpoint may hold, as earlier versions declared them
    STATE: STATE_SCHEMA, **{name: "data binary" for name in PARTS}, HEAD: HEAD_SCHEMA, LEGACY: "runtime binary",
}
# bucket -> (base id, base table): the bases this worker process read or wrote last; a
# bucket whose record names the same base id needs no reading of it (it is the largest part)
_BASES: dict[int, tuple[str, Any]] = {}


def bucket_of(key: str, labels: Sequence[int]) -> Any:
    """The column ``bucket``: the label of the bucket the key of column ``key``
    belongs to, of ``len(labels)`` buckets (see :func:`bucket_labels`).

    Events and the arrangement's initial values must both be bucketed by this one
    function: a key whose events and values landed in different buckets would
    lose its values.
    """

    index = F.pmod(F.xxhash64(key), F.lit(len(labels)))
    return F.element_at(F.array(*(F.lit(label) for label in labels)), (index + 1).cast("int")).alias("bucket")


LABEL_SEARCH = 64
""":func:`bucket_labels` looks for labels among ``0 .. LABEL_SEARCH * max(buckets, tasks)``."""


def bucket_labels(spark: Any, buckets: int, partitions: int) -> tuple[int, ...]:
    """Labels for ``buckets`` buckets that Spark spreads evenly over the stateful
    operator's ``partitions`` tasks.

    Spark places a bucket in the task ``pmod(hash(label), partitions)``: labels
    ``0..15`` over 4 tasks land 3, 3, 4 and 6 to a task, and the busiest task sets a
    micro-batch's pace. Taking the numbers from 0 up, a number becomes a label while
    its task holds fewer than its share (``buckets / partitions``, give or take one),
    so the 16 land 4 to a task. Spark computes the hashes: the placement is its own.
    """
    limit = LABEL_SEARCH * max(buckets, partitions)
    candidate = F.col("id").cast("int")
    rows = spark.range(limit).select(
        candidate.alias("label"), F.pmod(F.hash(candidate), F.lit(partitions)).alias("task")
    ).toArrow()
    share = [buckets // partitions + (task < buckets % partitions) for task in range(partitions)]
    labels: list[int] = []
    for label, task in zip(rows["label"].to_pylist(), rows["task"].to_pylist(), strict=True):
        if share[task]:
            share[task] -= 1
            labels.append(label)
            if len(labels) == buckets:
                return tuple(labels)
    taken = set(labels)  # some task's share was not met (never seen): the rest in order
    return tuple(labels + [c for c in range(limit) if c not in taken][: buckets - len(labels)])


def shuffle_partitions(spark: Any, checkpoint: str) -> int:
    """How many tasks the stateful operator runs: what the checkpoint's micro-batches
    recorded (Spark keeps it for the query's life), else the session's
    ``spark.sql.shuffle.partitions``."""
    offsets = os.path.join(checkpoint, "offsets")
    names = sorted((n for n in os.listdir(offsets) if n.isdigit()), key=int) if os.path.isdir(offsets) else []
    if names:
        with open(os.path.join(offsets, names[-1])) as f:
            lines = f.read().splitlines()
        recorded = json.loads(lines[1]).get("conf", {}).get("spark.sql.shuffle.partitions") if len(lines) > 1 else None
        if recorded is not None:
            return int(recorded)
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def beyond_clock(prepared: Any) -> Any:
    """``prepared`` with the times Spark's clock cannot hold refused as ``bad_time`` in
    the ``refusal`` column: beyond ± :data:`~statemachines.spark.clock.CLOCK_LIMIT_MS`
    milliseconds from the epoch (number times in micro- or nanoseconds, a
    9999-12-31 timestamp), which would fail the query. NaN, infinities and the
    greatest long stay the intake's to refuse, with its own detail."""
    kind = prepared.schema["time"].dataType
    time = F.col("time")
    if isinstance(kind, T.NumericType):
        ms = time
    elif isinstance(kind, T.DateType):
        ms = F.unix_date(time).cast("long") * DAY_MS
    else:  # a timestamp, with or without a time zone
        ms = F.unix_millis(time.cast("timestamp"))
    beyond = F.abs(ms) > F.lit(CLOCK_LIMIT_MS)
    if isinstance(kind, T.FloatType | T.DoubleType):
        beyond = beyond & ~F.isnan(time) & ~time.isin(float("inf"), float("-inf"))
    elif isinstance(kind, T.LongType):
        beyond = beyond & (time != F.lit(INT64_MAX))
    refused = refusal(
        Reason.BAD_TIME,
        F.format_string(
            f"time %s is beyond Spark's event-time clock: a stream's times lie within "
            f"{CLOCK_LIMIT_MS} milliseconds of the epoch (numbers count milliseconds)", time.cast("string")
        ),
    )
    kept = F.col(REFUSAL) if REFUSAL in prepared.columns else F.lit(None).cast("struct<reason:string,detail:string>")
    return prepared.withColumn(REFUSAL, F.when(kept.isNull() & beyond, refused).otherwise(kept))


def packed_schema() -> Any:
    """The Arrow schema of packed rows: a bucket's events (``payload``) or rule rows
    (``rules``, see :mod:`statemachines.spark.rule_stream`), or a clock."""

    schema = T.StructType(
        [
            T.StructField("bucket", T.IntegerType()),
            T.StructField("payload", T.BinaryType()),
            T.StructField("clock", T.TimestampType()),
            T.StructField("rules", T.BinaryType()),
        ]
    )
    return to_arrow_schema(schema, timezone="UTC")


def pack_events(delay: float, schema: Any):
    """The ``mapInArrow`` function packing ``bucket, key, symbol, time, order`` rows."""

    def pack(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ids, payloads = split_by_bucket(batch)  # key, symbol, time, order[, refusal]
            times = batch.column(3)
            if batch.num_columns > 5:  # a refused row's time moves no clock
                times = pc.filter(times, pc.is_null(batch.column(5)))
            latest = latest_ms(times)
            clock = None if latest is None else math.floor(latest - delay) + CLOCK_SHIFT_MS
            ids.append(CLOCK_ROWS)
            payloads.append(None)
            clocks = [None] * (len(ids) - 1) + [None if clock is None else clock * 1000]
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.int32()), pa.array(payloads, pa.binary()),
                 pa.array(clocks, schema.field("clock").type), pa.nulls(len(ids), pa.binary())],
                schema=schema,
            )

    return pack


class Bucket:
    """One bucket's work in a micro-batch (see the module), over its state in parts
    (:class:`~statemachines.spark.bucket_state.BucketState`).

    Built on an executor by the processor of :func:`bucket_processor`, from the
    processor's state handle, its state variables by part name, and its pickled
    ``(machine, kind, arrow_schema, floor, check_values)``.
    """

    def __init__(self, config: bytes, handle: Any, states: dict[str, Any]) -> None:
        self.machine, self.kind, self.arrow_schema, self.floor, check_values, self.into = pickle.loads(config)
        # floor: the arrangement's upper when the query started (earlier times are late)
        self.handle = handle
        self.states = states
        self.types = BucketTypes.of(self.arrow_schema)
        self.check = value_check_for(self.arrow_schema.field("value").type) if check_values else None
        self.books: dict[str, Any] = {}  # a rule detector's book extended by a rules stream
        self.upsert = upsert_step(self.machine, self.types)  # the step in Arrow, if it applies

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        if key[0] == CLOCK_ROWS:
            return
        events, rules = [], []
        for frame in rows:
            events.extend(decode_table(payload) for payload in frame["payload"].dropna())
            rules.extend(frame["rules"].dropna())
        with gc_paused():
            output = self._step(key[0], events, timerValues, rule_rows(rules))
        yield output

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        with gc_paused():
            output = self._step(key[0], [], timerValues, timer=True)
        yield output

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
        tables = [decode_table(payload).select([0, 1]) for payload in initialState["payload"]]
        pairs = pa.concat_tables(tables) if tables else pa.table({"key": [], "value": []})
        self._save(key[0], BucketState.seeded(self.types, self.machine, pairs, self.floor), apart=False)

    # -- one bucket, one micro-batch -------------------------------------------------

    def _load(self, bucket: int) -> tuple[BucketState, bool]:
        """The bucket's state, and whether its base is kept apart."""
        stored = self.states[STATE].get()
        if stored is None:
            # the earlier layouts' variables are declared only on a checkpoint that has them
            return self._load_earlier() if HEAD in self.states else self._fresh()
        parts = dict(zip(PARTS, stored, strict=True))
        apart = parts["base"] is None
        kept = _BASES.get(bucket)
        if kept is not None and kept[0] == json.loads(parts["record"]).get("base"):  # this worker holds it
            base = kept[1]
        else:
            base = None
            if apart:
                parts["base"] = (self.states["base"].get() or (None,))[0]
        state = BucketState.decode(self.types, parts, base=base)
        _BASES[bucket] = (state.record["base"], state.base)
        return state, apart

    def _load_earlier(self) -> tuple[BucketState, bool]:
        """A bucket as earlier versions stored it (then stored in today's layout, its
        base still apart), or a new one."""
        head = self.states[HEAD].get()
        if head is not None:  # format 1 in two value states, the base apart
            parts = dict(zip(HEAD_PARTS, head, strict=True))
            parts["base"] = (self.states["base"].get() or (None,))[0]
            self.states[HEAD].clear()
            state = BucketState.decode(self.types, parts)
            state.note()  # so that the state is stored
            return state, True
        record = self.states["record"].get()
        if record is not None:  # format 1 in four value states, one per part
            stored = {"record": record[0], **{name: (self.states[name].get() or (None,))[0] for name in PARTS[1:]}}
            for name in HEAD_PARTS:
                self.states[name].clear()
            state = BucketState.decode(self.types, stored)
            state.note()  # so that the state is stored (its base stays where it was)
            return state, True
        legacy = self.states[LEGACY].get()
        if legacy is not None:  # one pickled runtime, as versions before format 1 kept it
            checkpoint = pickle.loads(legacy[0])
            self.states[LEGACY].clear()
            return BucketState.of_runtime(self.types, self.machine, checkpoint), False
        return self._fresh()

    def _fresh(self) -> tuple[BucketState, bool]:
        state = BucketState.fresh(self.types, self.floor)
        state.note(timer=None)  # never stored: no timer armed
        return state, False

    def _save(self, bucket: int, state: BucketState, apart: bool, expired_by: int | None = None) -> None:
        """Store the changed parts and arm one timer at the earliest wake. ``apart``:
        whether the base was stored apart. ``expired_by``: in a timer's call, the
        watermark (Spark deletes the timers it expired after the call). In any other
        call every other timer goes, expired ones too: the step applied what they were
        armed for, and Spark would call the bucket again for them.

        The record notes the timer armed, so that no call asks Spark for its timers;
        a state of an earlier version has no such note, and asks once.
        """
        wanted = state.earliest_wake()
        if "timer" in state.record:
            armed = {state.record["timer"]} - {None}
        else:
            armed = set(self.handle.listTimers())
        for timer in armed - {wanted}:
            if expired_by is None or timer > expired_by:
                self.handle.deleteTimer(timer)
        if wanted is not None and wanted not in armed:
            self.handle.registerTimer(wanted)
        if "timer" not in state.record or state.record["timer"] != wanted:
            state.note(timer=wanted)
        if state.is_empty():  # nothing left: the bucket is fresh again
            for name in (STATE, "base"):
                self.states[name].clear()
            _BASES.pop(bucket, None)
            return
        changed = state.changed()
        if not changed:
            return
        base = None
        if "base" in changed:
            base = state.part("base")
            if len(base) > INLINE_BASE_BYTES:
                self.states["base"].update((base,))
                base = None
            elif apart:
                self.states["base"].clear()
        elif not apart:
            base = state.part("base")
        self.states[STATE].update((state.part("record"), base, state.part("recent"), state.part("pending")))
        _BASES[bucket] = (state.record["base"], state.base)

    def _step(
        self, bucket: int, events: list[Any], timer_values: Any, rules: list[Any] = (), timer: bool = False
    ) -> Any:
        """``events``: the micro-batch's event tables for this bucket (see :func:`pack_events`)."""
        state, apart = self._load(bucket)
        machine = book_of(self.machine, state.record, self.books) if isinstance(self.machine, RuleDetector) else self.machine
        watermark_ms = timer_values.getCurrentWatermarkInMs()
        now_ms = round(time.time() * 1000)
        out = OutputRows(self.arrow_schema)
        stepped = None
        if self.upsert is not None:
            stepped = self.upsert(state, machine, self._table(events), watermark_ms, self.kind, now_ms)
        if stepped is None:
            updates, rejected, arrived = advance(
                state, machine, [row for table in events for row in event_rows(table)], watermark_ms, self.kind,
                self.check, now_ms,
            )
            out.add(updates, rejected)
        else:
            updated, rejected, arrived = stepped
            out.add_table(updated)
            out.add(rejected=rejected)
        rules_taken = None
        if rules:  # they take effect from the frontier just reached, in every bucket alike
            machine, rules_taken = take_rules(bucket, state.record, machine, rules, state.frontier)
            state.rearm(machine)
        self._save(bucket, state, apart, watermark_ms if timer else None)
        payload, file, file_rows = self._output(out)
        return pd.DataFrame(
            {
                "bucket": [bucket],
                "payload": [payload],
                "file": [file],
                "file_rows": [file_rows],
                "events": [sum(table.num_rows for table in events)],
                "watermark": [watermark_ms],
                "waiting": [state.pending.num_rows],
                "waiting_for": [_earliest_pending(state)],
                "arrived": [arrived],
                "rules_taken": [rules_taken],
            }
        )

    def _output(self, out: OutputRows) -> tuple[bytes | None, str | None, int | None]:
        """The payload of the rejected rows gathered (:func:`encode_table`), and the
        data file of the arrangement the updates went to (key-sorted, named in the
        output with its row count), which the sink publishes with the micro-batch."""
        updates = out.take_updates()
        payload = encode_table(out.take()) if len(out) else None
        if not updates.num_rows:
            return payload, None, None
        file = f"batch-{uuid.uuid4().hex}.parquet"
        write_keyed(updates, self.into, file)
        return payload, file, updates.num_rows

    def _table(self, events: list[Any]) -> Any:
        """The event tables as one (``key, symbol, time, order[, refusal]``)."""
        if events:
            return pa.concat_tables(events)
        return self.types.events().empty_table().select(["key", "symbol", "time", "order"])


def _earliest_pending(state: BucketState) -> str | None:
    """The earliest time of a bucket's pending events, as JSON (``encode_time``)."""
    if state.pending.num_rows == 0:
        return None
    return json.dumps(encode_time(pc.min(state.pending["time"]).as_py()))


def bucket_processor(
    machine: Machine,
    kind: str,
    arrow_schema: Any,
    floor: Any,
    into: str,
    load: Any = None,
    check_values: bool = True,
    variables: Sequence[str] = CURRENT,
) -> Any:
    """The stateful processor handed to Spark: a thin shell over :class:`Bucket`.

    Spark also unpickles the processor in a driver-side Python process that calls
    only ``init`` and cannot import the code shipped to the executors (neither the
    user's modules nor this project's). So the shell is a class built here, pickled
    by value, that imports nothing of the project until a bucket runs, and the
    machine travels inside it as bytes. ``into``: the arrangement the buckets write
    their updates' data files into. ``load``, if given (Spark Connect, whose
    stateful tasks do not see the session's artifacts), is a
    :func:`~statemachines.spark.shipping.code_loader` called before the first bucket runs.
    ``variables``: the state variables it declares (:func:`state_variables`).
    """

    config = cloudpickle.dumps((machine, kind, arrow_schema, floor, check_values, into))
    # the shell imports nothing of the project
    schemas = {name: STATE_SCHEMAS[name] for name in variables}

    class BucketProcessor(StatefulProcessor):
        def __init__(self) -> None:
            self.quiet_driver_worker = True  # some state, so that unpickling calls __setstate__

        def __setstate__(self, state: dict[str, Any]) -> None:
            # PySpark's driver-side worker, which only calls ``init``, prints four debug
            # lines to the user's terminal after it unpickles the processor; its output
            # is nothing else (it talks to Spark over a socket), so it is silenced.

            main = getattr(sys.modules.get("__main__"), "__spec__", None)
            if main is not None and main.name.endswith("transform_with_state_driver_worker"):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
            self.__dict__.update(state)

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.states = {name: handle.getValueState(name, schema) for name, schema in schemas.items()}
            self.bucket: Any = None

        def _bucket(self) -> Any:
            if self.bucket is None:
                if load is not None:
                    load()
                from statemachines.spark.buckets import Bucket

                self.bucket = Bucket(config, self.handle, self.states)
            return self.bucket

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            return self._bucket().handleInputRows(key, rows, timerValues)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            return self._bucket().handleExpiredTimer(key, timerValues, expiredTimerInfo)

        def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
            self._bucket().handleInitialState(key, initialState, timerValues)

        def close(self) -> None:
            pass

    return BucketProcessor()


def packed_events(prepared: Any, labels: Sequence[int], delay: Any) -> Any:
    """The prepared events (``key, symbol, time, order[, refusal]``) packed into the
    key buckets ``labels`` (:func:`pack_events`), with times beyond Spark's clock
    refused (:func:`beyond_clock`)."""
    bucketed = beyond_clock(prepared).select(bucket_of("key", labels), "*")
    schema = packed_schema()
    pack = carried(prepared.sparkSession, pack_events(delay_ms(delay), schema))
    return bucketed.mapInArrow(pack, from_arrow_schema(schema))


def pack_values(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function packing ``bucket, key, value`` rows (initial state)."""

    for batch in batches:
        ids, payloads = split_by_bucket(batch)
        yield pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.int32()), pa.array(payloads, pa.binary())], names=["bucket", "payload"]
        )


def bucketed_output(
    machine: Machine,
    prepared: Any,
    kind: str,
    into: str,
    checkpoint: str,
    delay: Any,
    value_type: Any,
    buckets: int | None,
    rules: Any = None,
    abandon_waiting: bool = False,
) -> tuple[Any, Any, tuple[int, ...]]:
    """The streaming DataFrame of bucket outputs, the Arrow schema of their rows, and
    the labels of the buckets that hold the state: ``buckets`` of them, or when ``None``
    as many as the query kept, or :func:`default_buckets` for a new one; a query keeps
    its labels, a new one gets :func:`bucket_labels` (``buckets`` already passed
    :func:`check_bucket_settings`).

    ``prepared`` holds the events (``key, symbol, time, order``). If the arrangement
    ``into`` holds values and the query has not started yet, they are the buckets'
    initial state. ``rules``, a stream of rule rows for a rule detector, reaches every
    bucket (:mod:`statemachines.spark.rule_stream`).
    """

    spark = prepared.sparkSession
    state = read_state(into)
    stream = state.get("stream") or {}
    _check_waiting(stream, checkpoint, abandon_waiting)
    kept = stream.get("buckets")
    started = _started(checkpoint)
    if buckets is None:
        buckets = kept if kept is not None and started else default_buckets(spark)
    if kept is not None and kept != buckets and started:
        raise InvalidArgument(
            f"the query's state is held in {kept} buckets; restart it with buckets={kept}. "
            f"A new checkpoint would start from the arrangement's values, without the "
            f"events still waiting in this checkpoint's state"
        )
    if started and kept == buckets and same_query(stream, checkpoint):  # the labels its state is under
        labels = tuple(stream.get("labels") or range(buckets))  # none noted: a query from before labels
    else:
        labels = bucket_labels(spark, buckets, shuffle_partitions(spark, checkpoint))
    value_type, seed = resolve_value_type(machine, prepared, into, value_type)
    schema = output_schema(prepared, value_type)
    arrow_schema = to_arrow_schema(schema, timezone=spark.conf.get("spark.sql.session.timeZone"))
    floor = decode_time(state["upper"])
    packed = packed_events(prepared, labels, delay)
    if rules is not None:
        packed = packed.unionByName(packed_rules(rules, labels, prepared.schema["time"].dataType, packed_schema()))
    packed = packed.withWatermark("clock", "0 seconds")
    initial = None
    if seed is not None and not started:
        initial = _initial_state(seed, labels).groupBy("bucket")
    load = code_loader(spark, machine) if is_connect(spark) else None
    processor = bucket_processor(
        machine, kind, arrow_schema, floor, into, load, checks_values(machine, prepared, value_type),
        state_variables(spark, checkpoint, started),
    )
    output = packed.groupBy("bucket").transformWithStateInPandas(
        processor, BUCKET_OUTPUT, "Append", "EventTime", initialState=initial
    )
    return output, arrow_schema, labels


def check_bucket_settings(spark: Any, buckets: Any) -> None:
    """Refuse a session without the RocksDB state store, or ``buckets`` that is not
    ``None`` or a positive integer (before anything is created)."""
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    if provider != ROCKSDB:
        raise InvalidArgument(
            f"streaming state needs Spark's RocksDB state store; set "
            f"spark.sql.streaming.stateStore.providerClass={ROCKSDB} when building the "
            f"session (statemachines.spark.session() does)"
        )
    if buckets is not None and (not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1):
        raise InvalidArgument(f"buckets must be a positive integer, not {buckets!r}")


def default_buckets(spark: Any) -> int:
    """How many key buckets a new query's state gets: four per shuffle partition (the
    stateful operator's tasks, fixed by the checkpoint), so that the buckets even out
    across tasks, and at least 16.

    A bucket costs one Python call per micro-batch in which it has work, and its state
    is read as whole columns: fewer, larger buckets cost fewer calls for the same
    columns read. Many more buckets than tasks only add calls.
    """
    return max(16, 4 * int(spark.conf.get("spark.sql.shuffle.partitions")))


def _check_waiting(stream: dict[str, Any], checkpoint: str, abandon: bool) -> None:
    """Refuse to start a query on a new checkpoint while the arrangement's last query
    holds events not yet final in its own checkpoint (a new one never reads them),
    unless ``abandon``."""
    before = stream.get("checkpoint")
    waiting = waiting_count(stream.get("waiting") or {})
    if same_query(stream, checkpoint) or not waiting or abandon:
        return
    raise InvalidArgument(
        f"the arrangement's last query (checkpoint {before}) holds {waiting} events not yet "
        f"final in its checkpoint's state, which a query on checkpoint {checkpoint} does "
        f"not read: restart the query on {before} to apply them, or pass "
        f"abandon_waiting=True to start without them"
    )


def state_variables(spark: Any, checkpoint: str, started: bool) -> tuple[str, ...]:
    """The state variables a query on ``checkpoint`` declares: today's on a new
    checkpoint or one of this version; on one of an earlier version, every variable
    any version declared, so that its buckets are read. ``started``: whether the
    checkpoint on this machine's disk has begun (one elsewhere, or a Spark Connect
    server's, is asked).

        checkpoint               declared
        new                      bucket, base
        of this version          bucket, base
        of an earlier version    bucket, record, base, recent, pending, head, runtime
    """
    if not started and on_local_disk(checkpoint) and not is_connect(spark):
        return CURRENT
    try:
        declared = declared_state_variables(spark, checkpoint)
    except Exception:  # noqa: BLE001 - metadata Spark cannot read: every variable, as before
        return tuple(STATE_SCHEMAS)
    return CURRENT if declared is None or declared == set(CURRENT) else tuple(STATE_SCHEMAS)


def declared_state_variables(spark: Any, checkpoint: str) -> set[str] | None:
    """The state variables the stateful operator of ``checkpoint`` declared, as Spark's
    ``state-metadata`` source gives them (Spark's own timers left out); ``None`` if
    nothing is committed there yet."""
    operators = spark.read.format("state-metadata").load(checkpoint).collect()
    if not operators:
        return None
    variables = json.loads(operators[0].operatorProperties or "{}").get("stateVariables", [])
    return {v["stateName"] for v in variables if not v["stateName"].startswith("$")}


def _started(checkpoint: str) -> bool:
    offsets = os.path.join(checkpoint, "offsets")
    return os.path.isdir(offsets) and any(not n.startswith(".") for n in os.listdir(offsets))


def _initial_state(values: Any, labels: Sequence[int]) -> Any:
    """The arrangement's values as packed ``(bucket, payload)`` rows for the buckets."""

    rows = values.select(bucket_of("key", labels), "key", "value")
    schema = T.StructType([T.StructField("bucket", T.IntegerType()), T.StructField("payload", T.BinaryType())])
    return rows.repartition("bucket").mapInArrow(carried(values.sparkSession, pack_values), schema)
