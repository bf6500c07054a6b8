"""Spark's grouped stateful processing, one reference runtime per key bucket.

Keys are hashed into a fixed number of buckets. Each bucket's state is one
:class:`~statemachines.LocalRuntime` (its keys' values, buffered events and armed
deadlines), checkpointed in Spark's state store. Python is called once per bucket
per micro-batch, never once per key::
    events ─ pack ─► (bucket, payload, clock) ─ groupBy(bucket).transformWithStateInPandas ─► (payload)

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
1      restores its runtime from the state store
2      advances it to ``W``: buffered events and deadlines below ``W`` apply
3      feeds it the new events; those below ``W`` are rejected as late
4      saves it, and sets one timer at the earliest time still waiting
=====  ===================================================================

A bucket with nothing new is not called until its timer fires. Its updates have
times below ``W`` and at or above the previous watermark.

Times map to Spark's milliseconds monotonically: numbers as milliseconds (floored),
timestamps and dates by their distance from the epoch, all shifted by
:data:`CLOCK_SHIFT_MS` so that times before the epoch (or negative numbers) still
move Spark's watermark, which starts at 0.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming import StatefulProcessor

from statemachines import Event, InvalidArgument, LocalRuntime, Machine, Rejected
from statemachines._gc import gc_paused
from statemachines.columns import python_rows, value_check_for
from statemachines.intake import INT64_MAX
from statemachines.persisted import read_state
from statemachines.spark.batch import checks_values, resolve_value_type
from statemachines.spark.output import OutputRows, output_schema
from statemachines.spark.session import ROCKSDB
from statemachines.spark.shipping import carried, code_loader, is_connect
from statemachines.times import decode_time, encode_time

__all__ = [
    "BUCKET_OUTPUT",
    "Bucket",
    "bucket_of",
    "bucket_processor",
    "bucketed_output",
    "encode_payload",
    "frontier_of",
]

# what each bucket call returns: its output rows in Arrow IPC form (or null), how
# many events it took, and the watermark it advanced to
# per bucket and micro-batch: its output rows, the events it took, the watermark, and
# the events still waiting with the earliest of their times (JSON, as encode_time)
BUCKET_OUTPUT = (
    "bucket int, payload binary, events long, watermark long, waiting long, waiting_for string"
)

CLOCK_SHIFT_MS = 2**41  # about 70 years
DAY_MS = 86_400_000
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_DATE = _dt.date(1970, 1, 1)
CLOCK_ROWS = -1  # the bucket of clock rows: no bucket's state is touched by them


def delay_ms(delay: Any) -> float:
    """The delay in clock milliseconds: a number as is, a ``timedelta`` in milliseconds."""
    if isinstance(delay, _dt.timedelta):
        return delay / _dt.timedelta(milliseconds=1)
    return delay


def _ms_of(time: Any) -> float:
    """A single time in (unshifted) milliseconds, exactly enough to floor."""
    if isinstance(time, _dt.datetime):
        since = time - (_EPOCH_UTC if time.tzinfo is not None else _EPOCH)
        return since // _dt.timedelta(microseconds=1) / 1000
    if isinstance(time, _dt.date):
        return (time - _EPOCH_DATE).days * DAY_MS
    return time


def frontier_of(watermark_ms: int, kind: str) -> Any:
    """The frontier (a time of ``kind``) that Spark's watermark stands for.

    ``None`` while Spark has no watermark yet (0). Every time below the frontier
    maps below the watermark, and none at or above it does.
    """
    if watermark_ms <= 0:
        return None
    ms = watermark_ms - CLOCK_SHIFT_MS
    if kind == "number":
        return ms
    if kind == "date":
        return _EPOCH_DATE + _dt.timedelta(days=-(-ms // DAY_MS))
    epoch = _EPOCH_UTC if kind == "datetime_tz" else _EPOCH
    return epoch + _dt.timedelta(milliseconds=ms)


def timer_ms(time: Any) -> int:
    """The smallest watermark whose frontier lies above ``time``."""
    return math.floor(_ms_of(time)) + 1 + CLOCK_SHIFT_MS


def _latest_ms(times: Any) -> float | None:
    """The latest valid time of an Arrow column, in (unshifted) milliseconds; times
    the intake rejects (NaN, infinities, the greatest long) do not count."""
    kind = times.type
    if pa.types.is_floating(kind):
        times = pc.filter(times, pc.is_finite(times))
    elif pa.types.is_int64(kind):
        times = pc.filter(times, pc.not_equal(times, INT64_MAX))
    if pa.types.is_timestamp(kind):
        per_ms = {"s": 1e-3, "ms": 1, "us": 1e3, "ns": 1e6}[kind.unit]
        latest = pc.max(times.cast(pa.int64())).as_py()
        return None if latest is None else latest / per_ms
    if pa.types.is_date32(kind):
        latest = pc.max(times.cast(pa.int32())).as_py()
        return None if latest is None else latest * DAY_MS
    if pa.types.is_date64(kind):
        return pc.max(times.cast(pa.int64())).as_py()
    return pc.max(times).as_py()


def encode_payload(batch: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode_payload(payload: bytes) -> Any:
    return pa.ipc.open_stream(payload).read_all()


def bucket_of(key: str, buckets: int) -> Any:
    """The column ``bucket``: which of ``buckets`` the key of column ``key`` belongs to.

    Events and the arrangement's initial values must both be bucketed by this one
    function: a key whose events and values landed in different buckets would
    lose its values.
    """

    return F.pmod(F.xxhash64(key), F.lit(buckets)).cast("int").alias("bucket")


def packed_schema() -> tuple[Any, Any]:
    """The Spark schema of packed rows, and the Arrow type of their clock."""

    schema = T.StructType(
        [
            T.StructField("bucket", T.IntegerType()),
            T.StructField("payload", T.BinaryType()),
            T.StructField("clock", T.TimestampType()),
        ]
    )
    return schema, to_arrow_schema(schema, timezone="UTC").field("clock").type


def pack_events(delay: float, clock_type: Any):
    """The ``mapInArrow`` function packing ``bucket, key, symbol, time, order`` rows."""

    def pack(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            buckets = batch.column(0)
            events = batch.select(list(range(1, batch.num_columns)))  # key, symbol, time, order[, refusal]
            ids, payloads = [], []
            for bucket in pc.unique(buckets).to_pylist():
                ids.append(bucket)
                payloads.append(encode_payload(events.filter(pc.equal(buckets, bucket))))
            times = batch.column(3)
            if batch.num_columns > 5:  # a refused row's time moves no clock
                times = pc.filter(times, pc.is_null(batch.column(5)))
            latest = _latest_ms(times)
            clock = None if latest is None else math.floor(latest - delay) + CLOCK_SHIFT_MS
            ids.append(CLOCK_ROWS)
            payloads.append(None)
            clocks = [None] * (len(ids) - 1) + [None if clock is None else clock * 1000]
            yield pa.RecordBatch.from_arrays(
                [pa.array(ids, pa.int32()), pa.array(payloads, pa.binary()), pa.array(clocks, clock_type)],
                names=["bucket", "payload", "clock"],
            )

    return pack


class Bucket:
    """One bucket's work in a micro-batch: one :class:`LocalRuntime` (see the module).

    Built on an executor by the processor of :func:`bucket_processor`, from the
    processor's state handle and its pickled ``(machine, kind, arrow_schema, floor,
    check_values)``.
    """

    def __init__(self, config: bytes, handle: Any, state: Any) -> None:
        self.machine, self.kind, self.arrow_schema, self.floor, check_values = pickle.loads(config)
        # floor: the arrangement's upper when the query started (earlier times are late)
        self.handle = handle
        self.state = state
        self.check = value_check_for(self.arrow_schema.field("value").type) if check_values else None

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        if key[0] == CLOCK_ROWS:
            return
        events = []
        for frame in rows:
            for payload in frame["payload"]:
                table = decode_payload(payload)
                events.extend(python_rows(table) if table.num_columns == 4 else map(_refused_or_event, python_rows(table)))
        with gc_paused():
            output = self._step(key[0], events, timerValues)
        yield output

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        with gc_paused():
            output = self._step(key[0], [], timerValues)
        yield output

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
        pairs = []
        for payload in initialState["payload"]:
            table = decode_payload(payload)
            pairs.extend(python_rows(table.select([0, 1])))
        runtime = LocalRuntime(self.machine, value_check=self.check)
        runtime.seed(pairs, self.floor)
        self._save(runtime)

    # -- one bucket, one micro-batch -------------------------------------------------

    def _load(self) -> LocalRuntime:
        stored = self.state.get()
        if stored is not None:
            return LocalRuntime.restore(self.machine, pickle.loads(stored[0]), value_check=self.check)
        runtime = LocalRuntime(self.machine, value_check=self.check)
        if self.floor is not None:
            runtime.seed([], self.floor)
        return runtime

    def _save(self, runtime: LocalRuntime, watermark_ms: int | None = None) -> None:
        waiting = runtime.earliest_waiting()
        wanted = None if waiting is None else timer_ms(waiting)
        armed = set(self.handle.listTimers())
        for timer in armed - {wanted}:
            if watermark_ms is None or timer > watermark_ms:  # Spark removes expired ones itself
                self.handle.deleteTimer(timer)
        if wanted is not None and wanted not in armed:
            self.handle.registerTimer(wanted)
        state = runtime.checkpoint()
        if state["values"] or waiting is not None:
            self.state.update((pickle.dumps(state, protocol=5),))
        else:
            self.state.clear()  # nothing left: the bucket is fresh again

    def _step(self, bucket: int, events: list[Any], timer_values: Any) -> Any:
        runtime = self._load()
        out = OutputRows(self.arrow_schema)
        watermark_ms = timer_values.getCurrentWatermarkInMs()
        frontier = frontier_of(watermark_ms, self.kind)
        if frontier is not None and (runtime.frontier is None or frontier > runtime.frontier):
            step = runtime.advance_to(frontier)
            out.add(step.updates)
            rejected = step.rejected
        else:
            rejected = []
        runtime.feed(events)
        out.add(rejected=[*rejected, *runtime.take_rejected()])
        self._save(runtime, watermark_ms)
        payload = encode_payload(out.take()) if len(out) else None
        waiting, earliest = runtime.waiting()
        return pd.DataFrame(
            {
                "bucket": [bucket],
                "payload": [payload],
                "events": [len(events)],
                "watermark": [watermark_ms],
                "waiting": [waiting],
                "waiting_for": [None if earliest is None else json.dumps(encode_time(earliest))],
            }
        )


def _refused_or_event(row: tuple[Any, ...]) -> Any:
    """A ``key, symbol, time, order, refusal`` row: the event, or its refusal."""
    *event, refusal = row
    if refusal is None:
        return tuple(event)
    reason, detail = refusal
    return Rejected(Event(*event), reason, detail)


def bucket_processor(
    machine: Machine, kind: str, arrow_schema: Any, floor: Any, load: Any = None, check_values: bool = True
) -> Any:
    """The stateful processor handed to Spark: a thin shell over :class:`Bucket`.

    Spark also unpickles the processor in a driver-side Python process that calls
    only ``init`` and cannot import the code shipped to the executors (neither the
    user's modules nor this project's). So the shell is a class built here, pickled
    by value, that imports nothing of the project until a bucket runs, and the
    machine travels inside it as bytes. ``load``, if given (Spark Connect, whose
    stateful tasks do not see the session's artifacts), is a
    :func:`~statemachines.spark.shipping.code_loader` called before the first bucket runs.
    """

    config = cloudpickle.dumps((machine, kind, arrow_schema, floor, check_values))

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
            self.state = handle.getValueState("runtime", "runtime binary")
            self.bucket: Any = None

        def _bucket(self) -> Any:
            if self.bucket is None:
                if load is not None:
                    load()
                from statemachines.spark.buckets import Bucket

                self.bucket = Bucket(config, self.handle, self.state)
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


def pack_values(batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function packing ``bucket, key, value`` rows (initial state)."""

    for batch in batches:
        buckets = batch.column(0)
        pairs = batch.select([1, 2])
        ids = pc.unique(buckets).to_pylist()
        payloads = [encode_payload(pairs.filter(pc.equal(buckets, b))) for b in ids]
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
    buckets: int,
) -> tuple[Any, Any]:
    """The streaming DataFrame of bucket outputs, and the Arrow schema of their rows.

    ``prepared`` holds the events (``key, symbol, time, order``). If the arrangement
    ``into`` holds values and the query has not started yet, they are the buckets'
    initial state.
    """

    spark = prepared.sparkSession
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    if provider != ROCKSDB:
        raise InvalidArgument(
            f"streaming state needs Spark's RocksDB state store; set "
            f"spark.sql.streaming.stateStore.providerClass={ROCKSDB} when building the "
            f"session (statemachines.spark.session() does)"
        )
    if not isinstance(buckets, int) or buckets < 1:
        raise InvalidArgument(f"buckets must be a positive integer, not {buckets!r}")
    state = read_state(into)
    kept = (state.get("stream") or {}).get("buckets", buckets)
    if kept != buckets and _started(checkpoint):
        raise InvalidArgument(
            f"the query's state is held in {kept} buckets; restart it with buckets={kept}. "
            f"A new checkpoint would start from the arrangement's values, without the "
            f"events still waiting in this checkpoint's state"
        )
    value_type, seed = resolve_value_type(machine, prepared, into, value_type)
    schema = output_schema(prepared, value_type)
    arrow_schema = to_arrow_schema(schema, timezone=spark.conf.get("spark.sql.session.timeZone"))
    floor = decode_time(state["upper"])
    bucketed = prepared.select(bucket_of("key", buckets), "*")
    pack_schema, clock_type = packed_schema()
    packed = bucketed.mapInArrow(carried(spark, pack_events(delay_ms(delay), clock_type)), pack_schema)
    packed = packed.withWatermark("clock", "0 seconds")
    initial = None
    if seed is not None and not _started(checkpoint):
        initial = _initial_state(seed, buckets).groupBy("bucket")
    load = code_loader(spark, machine) if is_connect(spark) else None
    processor = bucket_processor(
        machine, kind, arrow_schema, floor, load, checks_values(machine, prepared, value_type)
    )
    output = packed.groupBy("bucket").transformWithStateInPandas(
        processor, BUCKET_OUTPUT, "Append", "EventTime", initialState=initial
    )
    return output, arrow_schema


def _started(checkpoint: str) -> bool:
    offsets = os.path.join(checkpoint, "offsets")
    return os.path.isdir(offsets) and any(not n.startswith(".") for n in os.listdir(offsets))


def _initial_state(values: Any, buckets: int) -> Any:
    """The arrangement's values as packed ``(bucket, payload)`` rows for the buckets."""

    rows = values.select(bucket_of("key", buckets), "key", "value")
    schema = T.StructType([T.StructField("bucket", T.IntegerType()), T.StructField("payload", T.BinaryType())])
    return rows.repartition("bucket").mapInArrow(carried(values.sparkSession, pack_values), schema)
