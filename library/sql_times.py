"""Dates and timestamps in expressions, as Spark SQL gives them: their parts,
truncation, days added, Unix seconds::

    expression                                  gives
    DATE '2024-02-28' + 1                       2024-02-29
    month(TIMESTAMP '2024-01-31 09:30:00')      1
    date_trunc('month', '2024-01-31 09:30')     2024-01-01 00:00:00
"""

from __future__ import annotations

import calendar
import datetime
import functools
import re
from collections.abc import Callable
from typing import Any

from statemachines.library.sql_values import (
    cast_values,
    is_null_type,
    is_text,
    one_by_one,
    tried,
    whole_literal,
)

__all__ = [
    "DATE_UNITS",
    "TIME_UNITS",
    "date_part",
    "date_parts",
    "days_added",
    "days_since_epoch",
    "of_date",
    "one_clock",
    "time_unit",
    "truncated_time",
    "unix_seconds",
]


@functools.cache
def date_parts() -> dict[type, tuple[Callable[[Any], Any], bool]]:
    """The functions giving a part of a date or a timestamp: how Arrow computes each,
    and whether it reads a time of day (text then read as a timestamp, not a date)."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.Year: (pc.year, False), exp.Quarter: (pc.quarter, False), exp.Month: (pc.month, False),
        exp.Day: (pc.day, False), exp.DayOfMonth: (pc.day, False), exp.DayOfYear: (pc.day_of_year, False),
        exp.DayOfWeek: (lambda v: pc.day_of_week(v, count_from_zero=False, week_start=7), False),  # Sunday 1
        exp.WeekOfYear: (pc.iso_week, False), exp.Hour: (pc.hour, True), exp.Minute: (pc.minute, True),
        exp.Second: (pc.second, True),
    }


TIME_UNITS = {  # date_trunc's units (trunc takes year to week), as Arrow's floor_temporal names them
    "YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
    "MON": "month", "WEEK": "week", "DAY": "day", "DD": "day", "HOUR": "hour", "MINUTE": "minute",
    "SECOND": "second", "MILLISECOND": "millisecond", "MICROSECOND": "microsecond",
}
DATE_UNITS = ("year", "quarter", "month", "week")


def time_unit(node: Any) -> str | None:
    """The unit of ``date_trunc`` / ``trunc`` as Arrow names it (None: none of theirs)."""
    from sqlglot import exp

    unit = TIME_UNITS.get(node.args["unit"].name.upper())
    return unit if type(node) is exp.TimestampTrunc or unit in DATE_UNITS else None


def unix_seconds(node: Any, value: Any) -> Any:
    """``unix_timestamp(x)``: the whole seconds (a BIGINT, toward zero) since
    1970-01-01 00:00 UTC of a timestamp (a wall clock's read as UTC, this project's
    sessions' zone), a date's midnight or text written ``yyyy-MM-dd HH:mm:ss`` (other
    text an error for its event, as Spark's parser under ANSI SQL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return value
    kind = value.type
    if pa.types.is_date32(kind):
        return pc.multiply(value.cast(pa.int32()).cast(pa.int64()), 86400)
    if is_text(kind):  # as 'yyyy-MM-dd HH:mm:ss', in UTC

        def seconds(text: str) -> int:
            if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text):
                raise ValueError(f"{node.sql(dialect='spark')!r}: {text!r} is not written as yyyy-MM-dd HH:mm:ss")
            return int(datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC).timestamp())

        return one_by_one(value, seconds, pa.int64())
    if not pa.types.is_timestamp(kind):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads timestamps, dates or text, not {kind} values")
    micros = value.cast(pa.timestamp("us", kind.tz)).cast(pa.int64())
    return pc.divide(pc.subtract(micros, pc.remainder(micros, 1_000_000)), 1_000_000)  # as Java's / truncates


def truncated_time(node: Any, value: Any) -> Any:
    """``date_trunc('unit', x)``: the timestamp ``x`` cut to the start of its year,
    quarter, month, week (from Monday), day, hour... in UTC; a date as its midnight
    UTC, text read as a timestamp (an error for its event where it is none)::

        x                      date_trunc('HOUR', x)   date_trunc('WEEK', x)
        2024-01-03 09:30 UTC   2024-01-03 09:00 UTC    2024-01-01 00:00 UTC
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return value
    kind = value.type
    if is_text(kind):
        value = cast_values(node, value, pa.timestamp("us", "UTC"), False)
    elif pa.types.is_date32(kind):
        value = value.cast(pa.timestamp("us")).cast(pa.timestamp("us", "UTC"))
    elif not pa.types.is_timestamp(kind):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads timestamps, dates or text, not {kind} values")
    elif kind.tz is not None:
        value = value.cast(pa.timestamp(kind.unit, "UTC"))
    return pc.floor_temporal(value, unit=time_unit(node), week_starts_monday=True)


def of_date(node: Any, dates: Any) -> Any:
    """``trunc(d, 'unit')`` (the first day of ``d``'s year, quarter, month or week,
    from Monday), ``add_months(d, n)`` (the same day ``n`` months on, or the last of
    a shorter month) and ``last_day(d)`` (the last of its month), dates as Spark SQL
    gives them; timestamps and text are read as dates first, as ``to_date`` reads them::

        d            trunc(d, 'MM')   add_months(d, 1)   last_day(d)
        2024-01-31   2024-01-01       2024-02-29         2024-01-31
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from sqlglot import exp

    if is_null_type(dates):
        return dates
    kind = type(node)
    if kind is exp.DateTrunc:
        return pc.floor_temporal(dates, unit=time_unit(node), week_starts_monday=True)
    months = whole_literal(node.expression) if kind is exp.AddMonths else 0

    def shifted(day: datetime.date) -> datetime.date:
        year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
        last = calendar.monthrange(year, month + 1)[1]
        return datetime.date(year, month + 1, last if kind is exp.LastDay else min(day.day, last))

    return one_by_one(dates, shifted, pa.date32())


def days_since_epoch(dates: Any) -> Any:
    """Dates as INT days since 1970-01-01 (NULL of no type passes)."""
    import pyarrow as pa

    return dates if is_null_type(dates) else dates.cast(pa.int32())


def days_added(node: Any, left: Any, right: Any) -> Any:
    """``x + n``, ``n + x`` and ``x - n`` of a date ``x`` and an INT (or smaller)
    ``n`` (and ``try_add`` and ``try_subtract`` of them): the date ``n`` days after
    (before) ``x``, as Spark SQL reads them (``date_add``, ``date_sub``); other
    arithmetic with a date is refused::

        x                 n    x + n         x - n
        DATE 2024-02-28   1    2024-02-29    2024-02-27
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from sqlglot import exp

    date_first = pa.types.is_date32(left.type)
    start, days = (left, right) if date_first else (right, left)
    kind = tried().get(type(node), type(node))  # try_add and try_subtract as + and -
    if not (kind is exp.Add or kind is exp.Sub and date_first) or not (
        pa.types.is_signed_integer(days.type) and days.type.bit_width <= 32
    ):
        raise TypeError(f"{node.sql(dialect='spark')!r}: a date takes + or - an INT number of days, "
                        f"not {left.type} and {right.type}")
    days = pc.cast(days, pa.int32())
    return pc.add_checked(days_since_epoch(start), pc.negate_checked(days) if kind is exp.Sub else days).cast(pa.date32())


def date_part(node: Any, value: Any) -> Any:
    """``year(x)``, ``hour(x)``...: a part of a date or a timestamp, an INT, as Spark
    SQL gives it in a UTC session: an instant's parts in UTC, a wall clock's
    (``TIMESTAMP_NTZ``) as they are, a date's time of day 0; ``dayofweek`` counts from
    Sunday (1), ``weekofyear`` is ISO's week. A date part's value comes as
    ``TO_DATE(x)`` (sqlglot parses ``year(x)`` so), :func:`to_date`; text for a time
    of day is read as a timestamp, and text that is none is an error for its event::

        x                             hour(x)   dayofweek(x)   weekofyear(x)
        2024-01-01 23:59:58 (UTC)     23        2              1
        2023-01-01 00:00+05:00        19        7              52
        DATE 2024-02-29               0         5              9
    """
    import pyarrow as pa

    if is_null_type(value):
        return value
    part, of_time = date_parts()[type(node)]
    kind = value.type
    if is_text(kind):
        value = cast_values(node, value, pa.timestamp("us", "UTC") if of_time else pa.date32(), False)
    elif pa.types.is_timestamp(kind) and kind.tz is not None:
        value = value.cast(pa.timestamp(kind.unit, "UTC"))
    elif pa.types.is_date(kind) and of_time:
        value = value.cast(pa.timestamp("s"))
    elif not (pa.types.is_timestamp(kind) or pa.types.is_date(kind)):
        raise TypeError(f"{node.sql(dialect='spark')!r} takes dates or timestamps, not {kind} values")
    return part(value).cast(pa.int32())


def one_clock(left: Any, right: Any) -> tuple[Any, Any]:
    """Two timestamps of different kinds as instants in microseconds, as Spark SQL
    compares a ``TIMESTAMP`` with a ``TIMESTAMP_NTZ`` (the wall clock read as UTC,
    the session's time zone); anything else as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_timestamp(left.type) and pa.types.is_timestamp(right.type)) or left.type == right.type:
        return left, right
    kind = pa.timestamp("us", "UTC" if left.type.tz or right.type.tz else None)
    return pc.cast(left, kind, safe=False), pc.cast(right, kind, safe=False)
