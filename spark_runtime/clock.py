"""Event times on Spark's streaming clock: milliseconds that the watermark counts in.

Times map to Spark's milliseconds monotonically: numbers as milliseconds (floored),
timestamps and dates by their distance from the epoch, all shifted by
:data:`CLOCK_SHIFT_MS` so that times before the epoch (or negative numbers) still
move Spark's watermark, which starts at 0. A watermark ``W`` stands for the
frontier :func:`frontier_of` ``(W)``; a time lies below that frontier exactly when
its :func:`timer_ms` is at most ``W``.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statemachines.intake import INT64_MAX

__all__ = ["CLOCK_LIMIT_MS", "CLOCK_SHIFT_MS", "DAY_MS", "delay_ms", "frontier_of", "latest_ms", "timer_ms"]

CLOCK_SHIFT_MS = 2**41  # about 70 years
# Spark hands the clock to Python as nanosecond timestamps: a time beyond ± this many
# milliseconds from the epoch (1747-05-29 to 2192-08-04), shifted, does not fit them
CLOCK_LIMIT_MS = (2**63 - 1) // 10**6 - CLOCK_SHIFT_MS - 1
DAY_MS = 86_400_000
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_DATE = _dt.date(1970, 1, 1)


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


def latest_ms(times: Any) -> float | None:
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
