"""Clocks: which values are times, and the least time after a time.

Times of one run share a *kind*: ``number`` (int or float, not bool), ``datetime``
(naive), ``datetime_tz`` (aware) or ``date``. Within a kind they are totally ordered.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
from typing import Any

__all__ = ["decode_time", "encode_time", "is_duration", "is_finite_time", "is_time", "time_after", "time_kind"]


def time_kind(time: Any) -> str | None:
    """The kind of clock ``time`` belongs to, or ``None`` if it is not a time.

    >>> time_kind(3), time_kind(_dt.date(2024, 1, 1)), time_kind("3"), time_kind(True)
    ('number', 'date', None, None)
    """
    if isinstance(time, bool):
        return None
    if isinstance(time, numbers.Real):
        return "number"
    if isinstance(time, _dt.datetime):
        return "datetime" if time.tzinfo is None else "datetime_tz"
    if isinstance(time, _dt.date):
        return "date"
    return None


def is_time(value: Any, kind: str | None = None) -> bool:
    """Whether ``value`` is a time (of ``kind``, if given): NaN is none, since it is
    neither before nor after any time.

    >>> is_time(3), is_time(float("nan")), is_time(3, "date"), is_time("3")
    (True, False, False, False)
    """
    found = time_kind(value)
    return found is not None and value == value and (kind is None or found == kind)


def is_finite_time(value: Any, kind: str | None = None) -> bool:
    """Whether ``value`` is a time (:func:`is_time`) other than an infinity, which no
    event may carry: what it would set (a waterline, a deadline) could never pass.

    >>> is_finite_time(3.5), is_finite_time(float("inf")), is_finite_time(float("nan"))
    (True, False, False)
    """
    return is_time(value, kind) and not (isinstance(value, float) and math.isinf(value))


def is_duration(value: Any, *, positive: bool = False) -> bool:
    """Whether ``value`` is a finite, non-negative (with ``positive``: greater than zero)
    span of some clock: a number (not a bool), or a ``timedelta`` for datetimes and dates.

    ====================  =========  ===============
    value                 duration   positive
    ====================  =========  ===============
    5, 0.5, timedelta(1)  yes        yes
    0, timedelta(0)       yes        no
    -1, nan, inf          no         no
    "5", True, None       no         no
    ====================  =========  ===============
    """
    if isinstance(value, _dt.timedelta):
        zero: Any = _dt.timedelta(0)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        zero = 0
    else:
        return False
    return value > zero if positive else value >= zero


def time_after(time: Any) -> Any:
    """The least time of the same kind that is greater than ``time``.

    Integers step by 1, floats to the next float, datetimes by one microsecond and
    dates by one day.

    >>> time_after(41), time_after(_dt.date(2024, 2, 28))
    (42, datetime.date(2024, 2, 29))
    """
    if isinstance(time, numbers.Integral):
        return time + 1
    if isinstance(time, numbers.Real):
        return math.nextafter(float(time), math.inf)
    if isinstance(time, _dt.datetime):
        return time + _dt.timedelta(microseconds=1)
    return time + _dt.timedelta(days=1)


def encode_time(time: Any) -> Any:
    """A time as JSON: numbers as they are, datetimes and dates tagged (see :func:`decode_time`)."""
    if isinstance(time, _dt.datetime):
        return {"datetime": time.isoformat()}
    if isinstance(time, _dt.date):
        return {"date": time.isoformat()}
    return time


def decode_time(value: Any) -> Any:
    """The inverse of :func:`encode_time`."""
    if isinstance(value, dict):
        if "datetime" in value:
            return _dt.datetime.fromisoformat(value["datetime"])
        return _dt.date.fromisoformat(value["date"])
    return value
