"""Native Spark paths for library machines: the same updates without per-row Python.

A native path takes the prepared events (``key, symbol, time, order``) and the prior
state (``key, value`` or ``None``) and returns rows in the batch runtime's output
shape. Each must produce exactly the updates and rejected events of the generic path;
``tests/test_spark_contract.py`` checks that.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from statemachines import Machine, Reason
from statemachines.columns import PYTHON_DAYS
from statemachines.intake import INT64_MAX, INT64_RANGE, beyond_python_detail, greatest_detail
from statemachines.library import Upsert

__all__ = ["beyond_python", "canonical_zeros", "for_machine", "greatest_time", "holds_every", "upsert"]


def for_machine(machine: Machine, symbol_type: Any, value_type: Any):
    """The native path for ``machine`` with these column types, or ``None``.

    A native path applies only where every symbol is a value the output column
    holds as it is (:func:`holds_every`): elsewhere the generic path's value check
    rejects the symbols that do not fit, one by one, where a cast in SQL would fail
    the job or change the value.
    """
    if type(machine) is Upsert and holds_every(value_type, symbol_type) and not holds_a_map(symbol_type):
        return upsert  # (SQL cannot order maps; the generic path runs them as their (key, value) pairs)
    return None


def holds_a_map(data_type: Any) -> bool:
    """Whether values of ``data_type`` hold a map, which Spark can neither sort nor group.

    >>> from pyspark.sql import types as T
    >>> holds_a_map(T.ArrayType(T.MapType(T.StringType(), T.LongType()))), holds_a_map(T.LongType())
    (True, False)
    """
    return _holds(data_type, T.MapType)


def holds_an_interval(data_type: Any) -> bool:
    """Whether values of ``data_type`` hold an interval, which a Delta table has no type for.

    >>> holds_an_interval(T.StructType([T.StructField("d", T.DayTimeIntervalType())])), holds_an_interval(T.LongType())
    (True, False)
    """
    return _holds(data_type, (T.DayTimeIntervalType, T.YearMonthIntervalType, T.CalendarIntervalType))


def type_nesting(data_type: Any) -> int:
    """How many levels of structs, arrays and maps ``data_type`` nests, counted as
    :func:`statemachines.columns.type_nesting` counts its Arrow type (a map two: a
    list of key-value structs).

    >>> type_nesting(T.LongType()), type_nesting(T.StructType([T.StructField("a", T.ArrayType(T.LongType()))]))
    (0, 2)
    """
    if isinstance(data_type, T.StructType):
        return 1 + max((type_nesting(f.dataType) for f in data_type.fields), default=-1)
    if isinstance(data_type, T.ArrayType):
        return 1 + type_nesting(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return 2 + max(type_nesting(data_type.keyType), type_nesting(data_type.valueType))
    return 0


def _holds(data_type: Any, kinds: Any) -> bool:
    """Whether values of ``data_type`` are or hold, in arrays, maps and structs, ``kinds``."""
    if isinstance(data_type, kinds):
        return True
    if isinstance(data_type, T.ArrayType):
        return _holds(data_type.elementType, kinds)
    if isinstance(data_type, T.MapType):
        return _holds(data_type.keyType, kinds) or _holds(data_type.valueType, kinds)
    if isinstance(data_type, T.StructType):
        return any(_holds(f.dataType, kinds) for f in data_type.fields)
    return False


_DATES = (T.DateType, T.TimestampType, T.TimestampNTZType)
_DAY_US = 86_400_000_000
_LEAST_US, _LAST_US = PYTHON_DAYS[0] * _DAY_US, (PYTHON_DAYS[1] + 1) * _DAY_US - 1
"""The first and last microseconds of Python's years 1 to 9999, from 1970 in UTC."""


def beyond_python(column: Any, data_type: Any) -> Any:
    """Whether a value of ``data_type`` is or holds (in structs and arrays) a
    date or timestamp beyond the years 1 to 9999, which Python's dates and datetimes
    cannot hold and Spark's can (the intake refuses such an event,
    :class:`~statemachines.updates.Unreadable`); ``None`` for a type holding neither.
    Null where the value is null."""
    if isinstance(data_type, T.DateType):
        least, last = (F.lit(d.isoformat()).cast("date") for d in (_dt.date.min, _dt.date.max))
        return (column < least) | (column > last)
    if isinstance(data_type, T.TimestampType):
        micros = F.unix_micros(column)
        return (micros < F.lit(_LEAST_US)) | (micros > F.lit(_LAST_US))
    if isinstance(data_type, T.TimestampNTZType):
        least, last = (F.lit(t.isoformat(" ")).cast(data_type) for t in (_dt.datetime.min, _dt.datetime.max))
        return (column < least) | (column > last)

    def found(part: Any, kind: Any) -> Any:
        return F.coalesce(beyond_python(part, kind), F.lit(False))

    parts = []  # (no maps: runs refuse them in keys and orders, and symbols holding them skip this path)
    if isinstance(data_type, T.StructType):
        parts = [found(column[f.name], f.dataType) for f in data_type.fields if _holds(f.dataType, _DATES)]
    elif isinstance(data_type, T.ArrayType) and _holds(data_type.elementType, _DATES):
        parts = [F.exists(column, lambda item: found(item, data_type.elementType))]
    if not parts:
        return None
    anywhere = parts[0]
    for part in parts[1:]:
        anywhere = anywhere | part
    return F.when(column.isNotNull(), anywhere)


_INTEGRAL_WIDTH = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


def holds_every(value_type: Any, symbol_type: Any) -> bool:
    """Whether every value of ``symbol_type`` fits ``value_type`` unchanged.

    The same type (nullability aside), a wider integer, or an integer or float in a
    double.

    >>> from pyspark.sql import types as T
    >>> holds_every(T.LongType(), T.IntegerType()), holds_every(T.IntegerType(), T.LongType())
    (True, False)
    >>> holds_every(T.LongType(), T.StringType()), holds_every(T.DoubleType(), T.FloatType())
    (False, True)
    """
    value, symbol = value_type.simpleString(), symbol_type.simpleString()
    if value == symbol:
        return True
    if value in _INTEGRAL_WIDTH and symbol in _INTEGRAL_WIDTH:
        return _INTEGRAL_WIDTH[symbol] <= _INTEGRAL_WIDTH[value]
    return value == "double" and (symbol in _INTEGRAL_WIDTH or symbol == "float")


def greatest_time(time_type: Any) -> tuple[Any, str] | None:
    """For a timestamp or date column: its greatest value (a Column), which the
    intake refuses (:func:`~statemachines.intake.is_greatest`), and the detail it
    gives; ``None`` for a number column."""
    if isinstance(time_type, T.TimestampType):  # an instant: Python reads it in UTC
        greatest = _dt.datetime.max.replace(tzinfo=_dt.UTC)
        return F.lit(greatest), greatest_detail(greatest)
    if isinstance(time_type, T.TimestampNTZType):
        return F.lit(_dt.datetime.max.isoformat(" ")).cast(time_type), greatest_detail(_dt.datetime.max)
    if isinstance(time_type, T.DateType):
        return F.lit(_dt.date.max), greatest_detail(_dt.date.max)
    return None


def upsert(prepared: Any, state: Any, *, lower: Any, value_type: Any) -> Any:
    """Upsert as window functions.

    Per ``(key, time)`` the command of highest rank wins (order, events without one
    first, then the symbol's order, null first); per key, each winner is compared
    with the value before it (the previous winner, or the arrangement's value):
        before  | after | updates
        absent  | v     | (k, v) +1
        v       | w     | (k, v) -1, (k, w) +1
        v       | null  | (k, v) -1
        v       | v     | (nothing)
    """

    time_type = prepared.schema["time"].dataType
    reason = (
        F.when(F.col("key").isNull(), F.lit(Reason.NULL_KEY.value))
        .when(F.col("time").isNull(), F.lit(Reason.NULL_TIME.value))
    )
    detail = (
        F.when(F.col("key").isNull(), F.lit("the key is None"))
        .when(F.col("time").isNull(), F.lit("the time is None"))
    )
    beyond = beyond_python(F.col("time"), time_type)
    if beyond is not None:  # as Intake: no Python time equals it
        reason = reason.when(beyond, F.lit(Reason.BAD_TIME.value))
        detail = detail.when(beyond, F.lit(beyond_python_detail("time")))
    if isinstance(time_type, T.FloatType | T.DoubleType):  # as Intake: NaN and infinities
        infinite = F.col("time").isin(float("inf"), float("-inf"))
        shown = F.when(F.isnan("time"), "nan").when(F.col("time") > 0, "inf").otherwise("-inf")
        reason = reason.when(F.isnan("time") | infinite, F.lit(Reason.BAD_TIME.value))
        detail = detail.when(
            F.isnan("time") | infinite, F.format_string("time %s is not a finite number", shown)
        )
    if isinstance(time_type, T.LongType):  # as Intake: the greatest long is kept for time_after
        outside = F.col("time") == F.lit(INT64_MAX)
        reason = reason.when(outside, F.lit(Reason.BAD_TIME.value))
        detail = detail.when(
            outside, F.format_string(f"time %s is outside the 64-bit integer range {INT64_RANGE}", F.col("time"))
        )
    greatest = greatest_time(time_type)
    if greatest is not None:  # as Intake: no time comes after it
        at = F.col("time") == greatest[0]
        reason = reason.when(at, F.lit(Reason.BAD_TIME.value))
        detail = detail.when(at, F.lit(greatest[1]))
    if lower is not None:
        bound = F.lit(lower).cast(time_type)
        reason = reason.when(F.col("time") < bound, F.lit(Reason.LATE.value))
        detail = detail.when(
            F.col("time") < bound,
            F.format_string("time %s is below the processed frontier %s", F.col("time"), bound),
        )
    symbol_type = prepared.schema["symbol"].dataType
    order_type = prepared.schema["order"].dataType
    beyond = beyond_python(F.col("order"), order_type)
    if beyond is not None:  # as Intake: an order, then a key or a symbol, holding what Python cannot
        reason = reason.when(beyond, F.lit(Reason.BAD_ORDER.value))
        detail = detail.when(beyond, F.lit(beyond_python_detail("order")))
    if isinstance(order_type, T.FloatType | T.DoubleType):  # as Intake: NaN orders compare with nothing
        unordered = F.isnan("order")
        reason = reason.when(unordered, F.lit(Reason.BAD_ORDER.value))
        detail = detail.when(unordered, F.lit("order nan of type float cannot be compared"))
    elif isinstance(order_type, T.StructType | T.ArrayType):  # as Intake: a tuple holding NaN or None
        unordered = F.col("order").isNotNull() & _unordered_inside(F.col("order"), order_type)
        reason = reason.when(unordered, F.lit(Reason.BAD_ORDER.value))
        detail = detail.when(
            unordered,
            F.format_string(
                f"order %s of type {order_type.typeName()} cannot be compared (it holds NaN or null)",
                F.col("order").cast("string"),
            ),
        )
    key_type = prepared.schema["key"].dataType
    for name, why, kind in (("key", Reason.BAD_KEY, key_type), ("symbol", Reason.INVALID_SYMBOL, symbol_type)):
        beyond = beyond_python(F.col(name), kind)
        if beyond is not None:
            reason = reason.when(beyond, F.lit(why.value))
            detail = detail.when(beyond, F.lit(beyond_python_detail(name)))
    checked = prepared.withColumn("reason", reason).withColumn("detail", detail)

    # One pass: every row goes through one exchange by key. Per key, rows sort as
    # the prior value (row 0), the valid commands by (time, rank) (row 1), then the
    # rejected events (row 2); the last valid command of each time is applied.
    # A row carries its symbol once through the exchange: as the value of a valid
    # command, as the symbol of a rejected event.
    valid = F.col("reason").isNull()
    rows = checked.select(
        "key", "time", "order", F.when(~valid, F.col("symbol")).alias("symbol"), "reason", "detail",
        F.when(valid, F.col("symbol").cast(value_type)).alias("value"),
        F.when(valid, 1).otherwise(2).alias("row"),
    )
    if state is not None:
        rows = rows.unionByName(
            state.join(prepared.select("key").distinct(), "key", "left_semi").select(
                "key", F.lit(None).cast(time_type).alias("time"),
                F.lit(None).cast(order_type).alias("order"),
                F.lit(None).cast(symbol_type).alias("symbol"),
                F.lit(None).cast("string").alias("reason"), F.lit(None).cast("string").alias("detail"),
                F.col("value").cast(value_type).alias("value"), F.lit(0).alias("row"),
            )
        )
    by_rank = Window.partitionBy("key").orderBy(
        "row", "time", F.col("order").asc_nulls_first(), F.col("value").asc_nulls_first()
    )
    superseded = (F.lead("row").over(by_rank) == 1) & (F.lead("time").over(by_rank) == F.col("time"))
    kept = rows.withColumn("superseded", F.coalesce(superseded, F.lit(False))).where(
        ~((F.col("row") == 1) & F.col("superseded"))
    )
    by_time = Window.partitionBy("key").orderBy("row", "time")
    steps = kept.withColumn("before", F.lag("value").over(by_time))

    def out(kind, value, diff, symbol, order, reason, detail):
        return F.struct(
            F.lit(kind).cast("byte").alias("kind"), value.alias("value"),
            F.lit(diff).cast("long").alias("diff"), symbol.alias("symbol"),
            order.alias("order"), reason.alias("reason"), detail.alias("detail"),
        )

    none = F.lit(None)
    changed = (F.col("row") == 1) & ~F.col("before").eqNullSafe(F.col("value"))
    emitted = F.array(
        F.when(changed & F.col("before").isNotNull(),
               out(0, F.col("before"), -1, none.cast(symbol_type), none.cast(order_type),
                   none.cast("string"), none.cast("string"))),
        F.when(changed & F.col("value").isNotNull(),
               out(0, F.col("value"), 1, none.cast(symbol_type), none.cast(order_type),
                   none.cast("string"), none.cast("string"))),
        F.when(F.col("row") == 2,
               out(1, none.cast(value_type), None, F.col("symbol"), F.col("order"),
                   F.col("reason"), F.col("detail"))),
    )
    return (
        steps.select("key", "time", F.explode(emitted).alias("o"))
        .where(F.col("o").isNotNull())  # a plain filter: a lambda (filter()) would not be compiled
        .select(
            "o.kind", "key", "o.value", "time", "o.diff", "o.symbol", "o.order", "o.reason", "o.detail"
        )
    )


_FLOATS = (T.FloatType, T.DoubleType)


def canonical_zeros(column: Any, data_type: Any) -> Any:
    """``column`` with every ``-0.0`` in it, at any depth of structs and arrays, made
    ``0.0``, as :func:`~statemachines.updates.canonical` makes a key or symbol
    (Spark groups the two as one, Arrow does not); ``column`` itself if its values
    hold no float."""
    if isinstance(data_type, _FLOATS):
        return F.when(column == 0, F.lit(0.0).cast(data_type)).otherwise(column)
    if isinstance(data_type, T.ArrayType) and _holds(data_type, _FLOATS):
        return F.transform(column, lambda item: canonical_zeros(item, data_type.elementType))
    if isinstance(data_type, T.StructType) and _holds(data_type, _FLOATS):
        fields = (canonical_zeros(column[f.name], f.dataType).alias(f.name) for f in data_type.fields)
        return F.when(column.isNull(), F.lit(None).cast(data_type)).otherwise(F.struct(*fields))
    return column


def _unordered_inside(column: Any, data_type: Any) -> Any:
    """Whether a struct's fields or an array's items hold a NaN or a null at any depth,
    which make the order compare with nothing locally (a tuple holding them)."""
    if isinstance(data_type, T.ArrayType):
        return F.exists(column, lambda x: x.isNull() | _unordered_item(x, data_type.elementType))
    found = F.lit(False)
    for field in data_type.fields:
        part = column[field.name]
        found = found | part.isNull() | _unordered_item(part, field.dataType)
    return found


def _unordered_item(column: Any, data_type: Any) -> Any:
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return F.coalesce(F.isnan(column), F.lit(False))
    if isinstance(data_type, T.StructType | T.ArrayType):
        return F.coalesce(_unordered_inside(column, data_type), F.lit(False))
    return F.lit(False)
