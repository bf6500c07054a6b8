"""The bucketed streaming runtime's time mapping (Spark's watermark <-> frontiers and
timers), and the timers a bucket keeps armed."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark import cloudpickle
from pyspark.sql.streaming.stateful_processor import TimerValues

from statemachines.library import Upsert
from statemachines.spark.bucket_state import PARTS, decode_table, encode_table
from statemachines.spark.buckets import HEAD, LEGACY, STATE, Bucket
from statemachines.spark.clock import CLOCK_SHIFT_MS, DAY_MS, frontier_of, timer_ms
from tests.machines import SubclassedUpsert

UTC = dt.UTC
kinds = {
    "number": st.integers(-(10**12), 10**12) | st.floats(-1e12, 1e12, allow_nan=False),
    "datetime_tz": st.datetimes(dt.datetime(1910, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(UTC)),
    "datetime": st.datetimes(dt.datetime(1910, 1, 1), dt.datetime(2200, 1, 1)),
    "date": st.dates(dt.date(1910, 1, 1), dt.date(2200, 1, 1)),
}
watermarks = st.integers(1, 2 * CLOCK_SHIFT_MS)
ARROW_EVENTS = pa.schema([("key", pa.string()), ("symbol", pa.string()), ("time", pa.int64()), ("order", pa.int64())])


@given(st.data())
def test_a_time_is_below_the_frontier_exactly_when_its_timer_has_expired(data):
    """Spark fires a timer once the watermark reaches it: exactly when the frontier passes."""
    kind = data.draw(st.sampled_from(sorted(kinds)))
    time = data.draw(kinds[kind])
    near = st.integers(-2 * DAY_MS, 2 * DAY_MS).map(lambda d: timer_ms(time) + d)
    watermark = data.draw(near | watermarks)
    assert (time < frontier_of(watermark, kind)) == (timer_ms(time) <= watermark)


@given(st.sampled_from(sorted(kinds)), watermarks, watermarks)
def test_frontiers_rise_with_the_watermark(kind, a, b):
    low, high = sorted((a, b))
    assert frontier_of(low, kind) <= frontier_of(high, kind)


def test_no_watermark_yet_is_no_frontier():
    assert frontier_of(0, "number") is None


class InMemoryHandle:
    """What a bucket uses of Spark's processor handle: value states and timers, in
    memory; it counts the calls that list the timers."""

    def __init__(self) -> None:
        self.stored: dict[str, tuple] = {}
        self.timers: set[int] = set()
        self.listings = 0

    def getValueState(self, name, schema):
        stored = self.stored

        class Value:
            def get(self):
                return stored.get(name)

            def update(self, value):
                stored[name] = value

            def clear(self):
                stored.pop(name, None)

        return Value()

    def listTimers(self):
        self.listings += 1
        return iter(sorted(self.timers))

    def registerTimer(self, ms):
        self.timers.add(ms)

    def deleteTimer(self, ms):
        self.timers.discard(ms)


OUTPUT = pa.schema([
    ("kind", pa.int8()), ("key", pa.string()), ("value", pa.string()), ("time", pa.int64()), ("diff", pa.int64()),
    ("symbol", pa.string()), ("order", pa.int64()), ("reason", pa.string()), ("detail", pa.string()),
])


class BucketUnderTest:
    """A :class:`Bucket` over an :class:`InMemoryHandle`, fed micro-batches of events
    on key ``k``; its update files go to ``into``."""

    def __init__(self, machine, into, handle=None):
        self.into = into
        self.handle = handle or InMemoryHandle()
        states = {name: self.handle.getValueState(name, None) for name in (STATE, *PARTS, HEAD, LEGACY)}
        self.bucket = Bucket(cloudpickle.dumps((machine, "number", OUTPUT, None, True, into)), self.handle, states)

    def micro_batch(self, watermark, times):
        events = pa.table({"key": ["k"] * len(times), "symbol": [f"v{t}" for t in times], "time": times, "order": times},
                          schema=ARROW_EVENTS)
        rows = pd.DataFrame({"payload": [encode_table(events)], "rules": [None]})
        return pd.concat(self.bucket.handleInputRows((0,), iter([rows]), TimerValues(0, watermark)))

    def timer(self, watermark):
        return pd.concat(self.bucket.handleExpiredTimer((0,), TimerValues(0, watermark), None))

    def updates(self, output):
        """The updates a call wrote to its own file, as ``(key, value, time, diff)`` rows."""
        files = output["file"].dropna()
        tables = [pq.read_table(f"{self.into}/{name}") for name in files]
        return sorted(tuple(row.values()) for table in tables for row in table.to_pylist())


@pytest.mark.parametrize("machine", [Upsert(), SubclassedUpsert()], ids=["arrow step", "runtime step"])
def test_a_bucket_with_events_drops_the_timers_its_step_made_due(machine, tmp_path):
    """Spark calls a bucket's input rows, then its expired timers. Its input call
    applies everything the watermark made due, so it also deletes those timers: an
    expired one left armed would call the bucket a second time in the micro-batch,
    for nothing. In a timer's own call Spark deletes the timer afterwards."""
    under = BucketUnderTest(machine, str(tmp_path))
    handle = under.handle
    under.micro_batch(0, [5, 10, 20])  # no watermark yet: all wait
    assert handle.timers == {timer_ms(5)}
    output = under.micro_batch(timer_ms(12), [30])  # 5 and 10 apply; 20 and 30 wait
    assert output["events"].sum() == 1 and output["waiting"].sum() == 2
    assert handle.timers == {timer_ms(20)}
    # no input: Spark calls the timer, then deletes it; the bucket arms the next one
    output = under.timer(timer_ms(25))
    assert output["waiting"].sum() == 1
    assert handle.timers == {timer_ms(20), timer_ms(30)}
    assert handle.listings == 0  # the bucket's record names its timer: Spark is never asked


def _stored_as_earlier(layout, today):
    """``today``'s stored state (handle), as an earlier layout stored it: format 1 kept
    each part in a value state of its own, then the base apart from a ``head`` of the
    other three; neither noted the armed timer."""
    parts = dict(zip(PARTS, today.stored[STATE], strict=True))
    record = json.loads(parts["record"])
    del record["timer"]
    parts["record"] = json.dumps(record).encode()
    earlier = InMemoryHandle()
    if layout == "four value states":
        earlier.stored = {name: (parts[name],) for name in PARTS}
    else:
        earlier.stored = {HEAD: (parts["record"], parts["recent"], parts["pending"]), "base": (parts["base"],)}
    earlier.timers = set(today.timers)
    return earlier


@pytest.mark.parametrize("layout", ["four value states", "head and base"])
@pytest.mark.parametrize("machine", [Upsert(), SubclassedUpsert()], ids=["arrow step", "runtime step"])
def test_a_bucket_stored_by_an_earlier_layout_continues_as_one_never_stored_so(machine, layout, tmp_path):
    """A bucket stored in an earlier layout reads it, asks Spark for its timers once,
    stores itself in today's layout (its base still apart until it changes), and goes
    on exactly as a bucket that was never stored the earlier way."""
    today = BucketUnderTest(machine, str(tmp_path))
    today.micro_batch(0, [5, 10, 20])
    earlier = _stored_as_earlier(layout, today.handle)
    continued = BucketUnderTest(machine, str(tmp_path), earlier)

    for step in (lambda b: b.micro_batch(timer_ms(12), [30, 8]), lambda b: b.timer(timer_ms(25)),
                 lambda b: b.micro_batch(timer_ms(40), [45])):
        got, want = step(continued), step(today)
        assert continued.updates(got) == today.updates(want)
        kept = ["events", "watermark", "waiting", "waiting_for", "file_rows"]  # not when events arrived
        assert got[kept].equals(want[kept])
        assert [decode_table(p) for p in got["payload"].dropna()] == [decode_table(p) for p in want["payload"].dropna()]
        assert earlier.timers == today.handle.timers
        assert set(earlier.stored) - {"base"} == {STATE} == set(today.handle.stored)
    assert earlier.listings == 1


@pytest.mark.parametrize("keys", [3, 30_000])
def test_a_small_base_is_stored_with_the_other_parts_a_large_one_apart(keys, tmp_path):
    """One value state holds a bucket whose base is small (one call writes it); a large
    base is kept apart and written only when it changes."""
    from statemachines.spark.buckets import INLINE_BASE_BYTES

    handle = CountingHandle()
    under = BucketUnderTest(Upsert(), str(tmp_path), handle)
    values = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(keys)]  # hardly compressible
    events = pa.table({"key": [f"k{i}" for i in range(keys)], "symbol": values,
                       "time": list(range(keys)), "order": list(range(keys))}, schema=ARROW_EVENTS)
    rows = pd.DataFrame({"payload": [encode_table(events)], "rules": [None]})
    list(under.bucket.handleInputRows((0,), iter([rows]), TimerValues(0, 0)))
    under.micro_batch(timer_ms(keys + 5), [keys + 10])  # every key applies: the base is written
    stored = dict(zip(PARTS, handle.stored[STATE], strict=True))
    large = len(handle.stored["base"][0] if stored["base"] is None else stored["base"]) > INLINE_BASE_BYTES
    assert large == (keys > 3)
    assert (stored["base"] is None) == large == ("base" in handle.stored)
    handle.updates.clear()
    output = under.micro_batch(timer_ms(keys + 20), [keys + 30])  # one key changes: the base does not
    assert output["events"].sum() == 1
    assert handle.updates == [STATE]
    assert under.updates(output) == [("k", f"v{keys + 10}", keys + 10, 1)]


class CountingHandle(InMemoryHandle):
    """An :class:`InMemoryHandle` that notes the value states it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.updates: list[str] = []

    def getValueState(self, name, schema):
        value = super().getValueState(name, schema)
        updates = self.updates

        class Counted:
            def get(self):
                return value.get()

            def update(self, row):
                updates.append(name)
                value.update(row)

            def clear(self):
                value.clear()

        return Counted()
