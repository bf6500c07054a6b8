"""Native Spark paths for library machines: the same updates without per-row Python.

A native path takes the prepared events (``key, symbol, time, order``) and the prior
state (``key, value`` or ``None``) and returns rows in the batch runtime's output
shape. Each must produce exactly the updates and rejected events of the generic path;
``tests/test_spark_contract.py`` checks that.
"""

from __future__ import annotations

from typing import Any

from library import Upsert
from statemachines import Machine, Reason

__all__ = ["for_machine", "upsert"]


def for_machine(machine: Machine):
    """The native path for ``machine``, or ``None`` if it has none."""
    return upsert if type(machine) is Upsert else None


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
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    time_type = prepared.schema["time"].dataType
    reason = (
        F.when(F.col("key").isNull(), F.lit(Reason.NULL_KEY.value))
        .when(F.col("time").isNull(), F.lit(Reason.NULL_TIME.value))
    )
    detail = (
        F.when(F.col("key").isNull(), F.lit("the key is None"))
        .when(F.col("time").isNull(), F.lit("the time is None"))
    )
    if lower is not None:
        bound = F.lit(lower).cast(time_type)
        reason = reason.when(F.col("time") < bound, F.lit(Reason.LATE.value))
        detail = detail.when(
            F.col("time") < bound,
            F.format_string("time %s is below the processed frontier %s", F.col("time"), bound),
        )
    checked = prepared.withColumn("reason", reason).withColumn("detail", detail)

    rejected = checked.where(F.col("reason").isNotNull()).select(
        F.lit(1).cast("byte").alias("kind"), "key", F.lit(None).cast(value_type).alias("value"),
        "time", F.lit(None).cast("long").alias("diff"), "symbol", "order", "reason", "detail",
    )

    # One window over each key (one shuffle): prior value first (row 0), then the
    # commands by (time, rank); the last command of each time is the one applied.
    commands = checked.where(F.col("reason").isNull()).select(
        "key", "time", "order", F.col("symbol").cast(value_type).alias("value"), F.lit(1).alias("row")
    )
    if state is not None:
        prior = state.join(commands.select("key").distinct(), "key", "left_semi")
        commands = commands.unionByName(
            prior.select(
                "key", F.lit(None).cast(time_type).alias("time"),
                F.lit(None).cast(prepared.schema["order"].dataType).alias("order"),
                F.col("value").cast(value_type).alias("value"), F.lit(0).alias("row"),
            )
        )
    by_rank = Window.partitionBy("key").orderBy(
        "row", "time", F.col("order").asc_nulls_first(), F.col("value").asc_nulls_first()
    )
    applied = commands.withColumn("next_time", F.lead("time").over(by_rank)).where(
        (F.col("row") == 0) | F.col("next_time").isNull() | (F.col("next_time") != F.col("time"))
    )
    by_time = Window.partitionBy("key").orderBy("row", "time")
    steps = applied.withColumn("before", F.lag("value").over(by_time)).where(F.col("row") == 1)
    changed = steps.where(~F.col("before").eqNullSafe(F.col("value")))
    pairs = F.array(
        F.struct(F.col("before").alias("value"), F.lit(-1).cast("long").alias("diff")),
        F.struct(F.col("value").alias("value"), F.lit(1).cast("long").alias("diff")),
    )
    updates = (
        changed.select("key", "time", F.explode(pairs).alias("u"))
        .where(F.col("u.value").isNotNull())
        .select(
            F.lit(0).cast("byte").alias("kind"), "key", F.col("u.value").alias("value"), "time",
            F.col("u.diff").alias("diff"),
            F.lit(None).cast(prepared.schema["symbol"].dataType).alias("symbol"),
            F.lit(None).cast(prepared.schema["order"].dataType).alias("order"),
            F.lit(None).cast("string").alias("reason"), F.lit(None).cast("string").alias("detail"),
        )
    )
    return updates.unionByName(rejected)
