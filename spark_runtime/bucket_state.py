"""One key bucket's streaming state as Arrow tables, read and rewritten in parts.

A bucket holds what one :class:`~statemachines.LocalRuntime` would hold for its keys:
each key's values and armed deadline, the events not yet final, the frontier. Kept
as one pickled runtime, every micro-batch would read and rewrite every live key of
the bucket. Kept as these tables, a micro-batch reads whole columns (vectorised, no
Python object per key) but converts, runs and rewrites only the keys whose events or
deadlines are due:

=======  ======================================  =====================================
table    rows                                    rewritten
=======  ======================================  =====================================
base     ``key, values, wake``: live keys        when ``recent`` outgrows a quarter of it
recent   the same, for keys changed since the    in each micro-batch that changes a key
         base was written (no values: gone)
pending  ``key, symbol, time, order, wake,      in each micro-batch that buffers or
         arrived``: the events not yet final     takes events
=======  ======================================  =====================================

beside a small record of the frontier, the run's time and order kinds, and an id of
the base's contents (a worker that kept the base of an earlier micro-batch in memory
does not read it again while the id is the same). ``wake``
is the least watermark (Spark clock milliseconds, :func:`~statemachines.spark.clock.timer_ms`)
at which a key's armed deadline, or a pending event, is due: a micro-batch whose
watermark is ``W`` takes the keys whose wake is at most ``W``. A key of ``recent``
hides the same key in ``base``. ``arrived`` is when the bucket took the event (Unix
milliseconds), for the stream's latency.

Each part is stored as Arrow IPC bytes (:meth:`BucketState.part`, buffers compressed
with LZ4); :meth:`BucketState.changed` names the parts that changed, so a micro-batch
writes only those (the bucket stores ``base`` apart, the other three together).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statemachines import Event, LocalRuntime, Machine, Rejected, Update
from statemachines.columns import column_to_python, columns_of, python_rows
from statemachines.core import call_deadline, held_values
from statemachines.spark.clock import CLOCK_SHIFT_MS, frontier_of, timer_ms
from statemachines.spark.tabulated import positions_in
from statemachines.times import decode_time, encode_time, time_kind

__all__ = [
    "FORMAT", "PARTS", "BucketState", "BucketTypes", "advance", "decode_table", "encode_table", "event_rows",
    "split_by_bucket",
]

FORMAT = 1  # the record's "format"
PARTS = ("record", "base", "recent", "pending")
COMPRESSION = "lz4"  # of the parts' buffers: a third fewer bytes to the state store (a base of 6,250 keys: 172 KB, not 260 KB) for 0.3 ms
MERGE_FRACTION = 4  # recent merges into base once it has more than base / 4 rows ...
MERGE_AT_LEAST = 1_024  # ... and more than this many


def encode_table(table: Any, compression: str | None = None) -> bytes:
    """A table or record batch as Arrow IPC stream bytes (its buffers compressed
    with ``compression``, ``"lz4"`` or ``"zstd"``, if given)."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def decode_table(data: bytes) -> Any:
    """The table :func:`encode_table` wrote."""
    return pa.ipc.open_stream(data).read_all()


def split_by_bucket(batch: Any) -> tuple[list[int], list[bytes]]:
    """The buckets a record batch's first column names, and for each its rows' other
    columns (:func:`encode_table`): one payload per bucket."""
    buckets = batch.column(0)
    rows = batch.select(list(range(1, batch.num_columns)))
    ids = pc.unique(buckets).to_pylist()
    return ids, [encode_table(rows.filter(pc.equal(buckets, bucket))) for bucket in ids]


@attrs.frozen
class BucketTypes:
    """The Arrow types of a run's keys, values, symbols, times and orders."""

    key: Any
    value: Any
    symbol: Any
    time: Any
    order: Any

    @classmethod
    def of(cls, output_schema: Any) -> BucketTypes:
        """The types of the output schema of :func:`~statemachines.spark.output.output_schema`."""
        field = output_schema.field
        return cls(field("key").type, field("value").type, field("symbol").type, field("time").type, field("order").type)

    def keyed(self) -> Any:
        return pa.schema([("key", self.key), ("values", pa.list_(self.value)), ("wake", pa.int64())])

    def events(self) -> Any:
        return pa.schema(
            [
                ("key", self.key), ("symbol", self.symbol), ("time", self.time), ("order", self.order),
                ("wake", pa.int64()), ("arrived", pa.int64()),
            ]
        )


class BucketState:
    """The state of one key bucket; see the module documentation."""

    def __init__(self, types: BucketTypes, record: dict[str, Any], base: Any, recent: Any, pending: Any) -> None:
        self.types = types
        self.record = record
        self.base, self.recent, self.pending = base, recent, pending
        self._changed: set[str] = set()
        self._shown_rows: Any = None  # rows of base not hidden by recent (None: all, or not known)
        self._read: dict[str, bytes] = {}  # the tables as read, encoded (given again while unchanged)

    @classmethod
    def fresh(cls, types: BucketTypes, frontier: Any = None) -> BucketState:
        """An empty bucket whose frontier is ``frontier`` (earlier events are late)."""
        kind = None if frontier is None else time_kind(frontier)
        record = {
            "format": FORMAT, "frontier": encode_time(frontier), "kind": kind, "order_kind": None, "base": _new_id(),
        }
        empty = types.keyed().empty_table()
        state = cls(types, record, empty, empty, types.events().empty_table())
        state._changed.update(PARTS)
        return state

    @classmethod
    def decode(cls, types: BucketTypes, parts: dict[str, bytes | None], *, base: Any = None) -> BucketState:
        """A bucket from its stored parts (as :meth:`parts` gave them); ``base``, if
        given, is the table the record's ``base`` id names, already decoded (its part
        is then not read)."""
        record = json.loads(parts["record"] or b"{}")
        if record.get("format") != FORMAT:
            raise ValueError(f"a bucket state of format {record.get('format')!r}; this version reads {FORMAT}")

        def table(name: str, schema: Any) -> Any:
            data = parts.get(name)
            return decode_table(data) if data else schema.empty_table()

        if base is None:
            base = table("base", types.keyed())
        state = cls(types, record, base, table("recent", types.keyed()), table("pending", types.events()))
        state._read = {name: parts[name] for name in ("base", "recent", "pending") if parts.get(name)}
        return state

    @classmethod
    def seeded(cls, types: BucketTypes, machine: Machine, pairs: Any, frontier: Any) -> BucketState:
        """A bucket whose keys start with the values of ``pairs`` (a table ``key, value``
        of distinct rows), at ``frontier``.

        The values are grouped per key in Arrow; only a machine with deadlines needs
        each key's values in Python (to ask when it wakes).
        """
        state = cls.fresh(types, frontier)
        pairs = pa.table([pairs.column(0).cast(types.key), pairs.column(1).cast(types.value)], names=["key", "value"])
        try:
            grouped = pairs.group_by("key", use_threads=False).aggregate([("value", "list")])
        except pa.ArrowNotImplementedError:  # a key or value type Arrow cannot group: in Python
            grouped = None
        if grouped is None or machine.spec.has_deadlines:
            by_key: dict[Any, set[Any]] = {}
            for key, value in zip(column_to_python(pairs["key"]), column_to_python(pairs["value"]), strict=True):
                by_key.setdefault(key, set()).add(value)
            state.base = _keyed_table(types, _armed(machine, by_key.items()))
        else:
            values = grouped["value_list"].cast(pa.list_(types.value))
            state.base = pa.table([grouped["key"], values, pa.nulls(grouped.num_rows, pa.int64())], schema=types.keyed())
        state.record["base"] = _new_id()
        return state

    @classmethod
    def of_runtime(cls, types: BucketTypes, machine: Machine, checkpoint: dict[str, Any]) -> BucketState:
        """A bucket holding what a :meth:`LocalRuntime.checkpoint` holds (the earlier
        format of streaming state, one pickled runtime per bucket)."""
        state = cls.fresh(types, checkpoint["frontier"])
        state.record.update(kind=checkpoint["kind"], order_kind=checkpoint.get("order_kind"))
        wakes = {key: timer_ms(time) for key, time in checkpoint["due"].items()}
        state.base = _keyed_table(types, ((key, vs, wakes.get(key)) for key, vs in checkpoint["values"].items()))
        state.record["base"] = _new_id()
        state.pending = _events_table(types, _buffered(checkpoint["pending"]), None)  # arrival unknown
        return state

    # -- reading -----------------------------------------------------------------------

    @property
    def frontier(self) -> Any:
        return decode_time(self.record["frontier"])

    def __len__(self) -> int:
        """Live keys."""
        shown = self._shown()
        older = self.base.num_rows if shown is None else (pc.sum(shown).as_py() or 0)
        return older + (pc.sum(pc.greater(pc.list_value_length(self.recent["values"]), 0)).as_py() or 0)

    def due_keys(self, watermark_ms: int) -> list[Any]:
        """The keys with a pending event or an armed deadline due at ``watermark_ms``."""
        keys = []
        for table, shown in ((self.base, self._shown()), (self.recent, None), (self.pending, None)):
            due = pc.less_equal(table["wake"], watermark_ms)
            if not pc.any(due).as_py():  # no deadline (null) or none due: no copy of the table
                continue
            keys.append(table["key"].filter(due if shown is None else pc.and_(due, shown)))
        return list(dict.fromkeys(k for column in keys for k in column_to_python(column)))

    def values(self, keys: list[Any]) -> dict[Any, frozenset[Any]]:
        """The values of ``keys`` that have any (looked up in ``recent``, then ``base``)."""
        found: dict[Any, frozenset[Any]] = {}
        rest = keys
        for table in (self.recent, self.base):
            if not rest or table.num_rows == 0:
                continue
            taken = table.filter(_member(table["key"], pa.array(rest, self.types.key)))
            for key, values in zip(column_to_python(taken["key"]), column_to_python(taken["values"]), strict=True):
                found[key] = frozenset(values)  # empty: removed since the base was written
            rest = [key for key in rest if key not in found]
        return {key: values for key, values in found.items() if values}

    def runtime(self, machine: Machine, keys: list[Any], value_check: Any = None) -> LocalRuntime:
        """A runtime at this bucket's frontier holding the values and armed deadlines of
        ``keys`` (a :meth:`LocalRuntime.checkpoint` of format 2, built from the tables)."""
        values = self.values(keys)
        due = {}
        if machine.spec.has_deadlines:
            for key, vs in values.items():
                held = held_values(machine, vs)
                time = call_deadline(machine, key, held) if held else None
                if time is not None:
                    due[key] = time
        checkpoint = {
            "format": 2, "values": values, "pending": {}, "rejected": [], "frontier": self.frontier,
            "finished": False, "kind": self.record["kind"], "order_kind": self.record["order_kind"],
            "due": due, "evicted": 0, "evicted_at": None, "high": None,
        }
        return LocalRuntime.restore(machine, checkpoint, value_check=value_check)

    def value_lists(self, keys: Any) -> Any:
        """The values of each of ``keys`` (an array) as a list array (null: none kept),
        looked up in ``recent``, then ``base``, without a Python object per key."""
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        found = pa.nulls(len(keys), pa.list_(self.types.value))
        missing = pa.array(np.ones(len(keys), dtype=bool))
        for table in (self.recent, self.base):
            if table.num_rows == 0 or len(keys) == 0:
                continue
            at = positions_in(keys, table["key"])
            hit = pc.and_(missing, pc.is_valid(at))
            found = pc.if_else(hit, table["values"].combine_chunks().take(pc.fill_null(at, 0)), found)
            missing = pc.and_(missing, pc.invert(hit))
        return found

    def keep_values(self, keys: Any, values: Any) -> None:
        """Each of ``keys`` (distinct) now holds its value in ``values`` (null: none)."""
        if len(keys) == 0:
            return
        present = pc.is_valid(values).to_numpy(zero_copy_only=False)
        offsets = pa.array(np.concatenate([[0], np.cumsum(present)]).astype(np.int32))
        lists = pa.ListArray.from_arrays(offsets, pc.drop_null(values)).cast(pa.list_(self.types.value))
        self._replace(pa.table([keys, lists, pa.nulls(len(keys), pa.int64())], schema=self.types.keyed()))

    def due_rows(self, watermark_ms: int) -> Any:
        """The pending events due at ``watermark_ms`` (a table; they stay pending)."""
        return self.pending.filter(pc.less_equal(self.pending["wake"], watermark_ms))

    def buffer(self, events: Any, now_ms: int | None) -> None:
        """Keep ``events`` (a table ``key, symbol, time, order`` the intake took), arrived at ``now_ms``."""
        if events.num_rows == 0:
            return
        rows = events.append_column("wake", _wakes(events["time"])).append_column(
            "arrived", pa.array(np.full(events.num_rows, now_ms), pa.int64()) if now_ms is not None else pa.nulls(events.num_rows, pa.int64())
        )
        self.pending = pa.concat_tables([self.pending, rows.cast(self.types.events())])
        self._changed.add("pending")

    def take_due_rows(self, watermark_ms: int) -> Any:
        """Remove and return the pending events due at ``watermark_ms`` (a table)."""
        taken = self.due_rows(watermark_ms)
        if taken.num_rows:
            self.drop_due_rows(watermark_ms)
        return taken

    def drop_due_rows(self, watermark_ms: int) -> None:
        """Remove the pending events due at ``watermark_ms`` (read with :meth:`due_rows`)."""
        self.pending = self.pending.filter(pc.greater(self.pending["wake"], watermark_ms))
        self._changed.add("pending")

    def take_due_events(self, watermark_ms: int) -> tuple[list[Event], int | None]:
        """Remove and return the pending events due at ``watermark_ms``, and when the
        earliest of them arrived (Unix milliseconds; ``None``: none, or not known)."""
        taken = self.take_due_rows(watermark_ms)
        if taken.num_rows == 0:
            return [], None
        columns = [column_to_python(taken[name]) for name in ("key", "symbol", "time", "order")]
        return [Event(*row) for row in zip(*columns, strict=True)], pc.min(taken["arrived"]).as_py()

    def earliest_wake(self) -> int | None:
        """The least watermark at which anything of this bucket is due, or ``None``."""
        wakes = [pc.min(self.recent["wake"]).as_py(), pc.min(self.pending["wake"]).as_py()]
        base = self.base["wake"]
        if base.null_count < len(base):  # some key of the base has a deadline
            shown = self._shown()
            wakes.append(pc.min(base if shown is None else base.filter(shown)).as_py())
        return min((w for w in wakes if w is not None), default=None)

    def is_empty(self) -> bool:
        return self.pending.num_rows == 0 and len(self) == 0 and not self.record.get("rules")

    def live(self) -> Any:
        """The live keys' rows (``key, values, wake``), each key once."""
        shown = self._shown()
        older = self.base if shown is None else self.base.filter(shown)
        return pa.concat_tables([older, self.recent.filter(pc.greater(pc.list_value_length(self.recent["values"]), 0))])

    # -- writing -----------------------------------------------------------------------

    def put(self, runtime: LocalRuntime, keys: Iterable[Any], now_ms: int | None = None) -> None:
        """Keep what ``runtime`` (run over some of this bucket's keys) holds now: the
        values and deadlines of ``keys``, its buffered events (arrived at ``now_ms``),
        its frontier and kinds."""
        checkpoint = runtime.checkpoint()
        values, due = checkpoint["values"], checkpoint["due"]
        changed = [
            (key, values.get(key, ()), timer_ms(due[key]) if key in due else None) for key in keys
        ]
        if changed:
            self._replace(_keyed_table(self.types, changed))
        buffered = list(_buffered(checkpoint["pending"]))
        if buffered:
            self.pending = pa.concat_tables([self.pending, _events_table(self.types, buffered, now_ms)])
            self._changed.add("pending")
        self.record.update(
            frontier=encode_time(checkpoint["frontier"]), kind=checkpoint["kind"], order_kind=checkpoint["order_kind"]
        )
        self._changed.add("record")

    def note(self, **fields: Any) -> None:
        """Set fields of the record (``frontier`` as ``encode_time`` gives it, ``kind``, ``order_kind``)."""
        self.record.update(fields)
        self._changed.add("record")

    def rearm(self, machine: Machine) -> None:
        """Ask ``machine`` again when each live key wakes (it replaced the machine the
        keys were armed by): every key is read and the base rewritten."""
        live = self.live()
        keyed = zip(column_to_python(live["key"]), column_to_python(live["values"]), strict=True)
        self._rebase(_keyed_table(self.types, _armed(machine, keyed)))

    def changed(self) -> set[str]:
        """The parts changed since this state was read."""
        return set(self._changed)

    def part(self, name: str) -> bytes:
        """One part, encoded for storing (a table as it was read, if unchanged)."""
        if name not in self._changed and name in self._read:
            return self._read[name]
        if name == "record":
            return json.dumps(self.record).encode()
        table = {"base": self.base, "recent": self.recent, "pending": self.pending}[name]
        return encode_table(table, COMPRESSION)

    def parts(self) -> dict[str, bytes]:
        """The parts changed since this state was read, encoded for storing."""
        return {name: self.part(name) for name in PARTS if name in self._changed}

    def _replace(self, rows: Any) -> None:
        """``rows`` (keyed) replace the rows of their keys; ``recent`` merges into ``base``
        when it has grown large enough."""
        kept = self.recent.filter(pc.invert(_member(self.recent["key"], rows["key"])))
        self.recent = pa.concat_tables([kept, rows])
        self._shown_rows = None
        self._changed.add("recent")
        if self.recent.num_rows > max(MERGE_AT_LEAST, self.base.num_rows // MERGE_FRACTION):
            self._rebase(self.live())

    def _rebase(self, base: Any) -> None:
        """``base`` (keyed, each live key once) becomes the base; ``recent`` empties."""
        self.base = base
        self.recent = self.types.keyed().empty_table()
        self._shown_rows = None
        self.record["base"] = _new_id()
        self._changed.update(("base", "recent", "record"))

    def _shown(self) -> Any:
        """Which rows of ``base`` no row of ``recent`` hides (``None``: all of them)."""
        if self._shown_rows is None and self.recent.num_rows:
            self._shown_rows = pc.invert(_member(self.base["key"], self.recent["key"]))
        return self._shown_rows


def advance(
    state: BucketState,
    machine: Machine,
    events: list[Any],
    watermark_ms: int,
    kind: str,
    value_check: Any = None,
    now_ms: int | None = None,
) -> tuple[list[Update], list[Rejected], int | None]:
    """One micro-batch of a bucket: what its runtime would do, over the keys it touches.

    As :class:`LocalRuntime` would: advance to the frontier the watermark stands for
    (the pending events and deadlines due apply), then buffer ``events`` (those
    below the frontier are late). Only the due keys are read and rewritten.

    Returns:
        The updates and the rejected events of the micro-batch, and when the earliest
        event it applied arrived (``now_ms`` of the micro-batch that buffered it).
    """
    frontier = frontier_of(watermark_ms, kind)
    advancing = frontier is not None and (state.frontier is None or frontier > state.frontier)
    keys = state.due_keys(watermark_ms) if advancing else []
    runtime = state.runtime(machine, keys, value_check)
    runtime.symbol_type = state.types.symbol
    updates: list[Update] = []
    rejected: list[Rejected] = []
    arrived = None
    if advancing:
        due, arrived = state.take_due_events(watermark_ms)
        runtime.feed(due)
        step = runtime.advance_to(frontier)
        updates, rejected = step.updates, list(step.rejected)
    runtime.feed(events)
    rejected += runtime.take_rejected()
    state.put(runtime, keys, now_ms)
    return updates, rejected, arrived


def _armed(machine: Machine, keyed: Iterable[tuple[Any, Iterable[Any]]]) -> list[tuple[Any, Iterable[Any], int | None]]:
    """Each key's values with the wake its deadline asks for (``None``: none)."""
    timed = machine.spec.has_deadlines
    rows = []
    for key, values in keyed:
        due = call_deadline(machine, key, frozenset(values)) if timed else None
        rows.append((key, values, None if due is None else timer_ms(due)))
    return rows


def _keyed_table(types: BucketTypes, rows: Iterable[tuple[Any, Iterable[Any], int | None]]) -> Any:
    keys, values, wakes = [], [], []
    for key, vs, wake in rows:
        keys.append(key)
        values.append(list(vs))
        wakes.append(wake)
    schema = types.keyed()
    return pa.table([pa.array(c, f.type) for c, f in zip((keys, values, wakes), schema, strict=True)], schema=schema)


def event_rows(table: Any) -> list[Any]:
    """The rows of an event table (``key, symbol, time, order[, refusal]``) as a
    runtime takes them: event tuples, or for a row its source refused, its
    :class:`~statemachines.Rejected`."""
    rows = python_rows(table)
    if table.num_columns == 4:
        return list(rows)
    out: list[Any] = []
    for *event, refusal in rows:
        out.append(tuple(event) if refusal is None else Rejected(Event(*event), *refusal))
    return out


def _wakes(times: Any) -> Any:
    """:func:`~statemachines.spark.clock.timer_ms` of each time of an integer or
    microsecond timestamp column."""
    if pa.types.is_timestamp(times.type):
        ms = np.floor_divide(pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False), 1000)
    else:
        ms = pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False)
    return pc.add_checked(pa.array(ms), 1 + CLOCK_SHIFT_MS)  # beyond Spark's clock: an error


def _events_table(types: BucketTypes, events: Iterable[Event], arrived: int | None) -> Any:
    schema = types.events()
    events = list(events)
    columns = columns_of(events, 4)
    columns.append([timer_ms(time) for time in columns[2]])
    columns.append([arrived] * len(events))
    return pa.table([pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def _buffered(pending: dict[Any, dict[Any, Any]]) -> Iterable[Event]:
    """The events of a runtime checkpoint's ``pending`` (key -> time -> event or list)."""
    for by_time in pending.values():
        for slot in by_time.values():
            yield from slot if isinstance(slot, list) else (slot,)


def _new_id() -> str:
    """A name for a base table's contents: a worker that holds it may skip reading it."""
    return uuid.uuid4().hex


def _member(column: Any, keys: Any) -> Any:
    """Whether each item of ``column`` is among ``keys`` (a boolean array)."""
    return pc.is_valid(positions_in(column, keys))
