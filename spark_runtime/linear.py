"""Applying a linear operator to a Spark DataFrame of updates, in one pass.

A chain whose every step carries Spark SQL (``map(..., sql=)``, ``filter(..., sql=)``,
``temporal_filter(..., sql=)``) becomes column expressions that Spark fuses into one
stage; any other chain runs as one Python pass per partition (``mapInArrow``) over
the fused logic. Neither adds a shuffle. The output is not consolidated: call
``consolidated(frame)`` if you need one row per ``(key, value, time)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from statemachines import InvalidArgument, Linear
from statemachines.columns import python_rows
from statemachines.spark.shipping import ship_code

__all__ = ["apply_linear", "consolidated", "is_vectorised"]

COLUMNS = ("key", "value", "time", "diff")


def is_vectorised(op: Linear) -> bool:
    """True when every step of ``op`` has a Spark SQL form."""
    return all(step.sql is not None for step in op.steps)


def apply_linear(op: Linear, updates: Any, *, schema: str | None = None) -> Any:
    """``op`` applied to a DataFrame ``key, value, time, diff``.

    Args:
        op: the (possibly fused) linear operator; its records are ``(key, value)``.
        updates: the DataFrame of updates.
        schema: for a Python pass whose output types differ from the input, the
            output ``key`` and ``value`` types as DDL (``"key string, value int"``).
    """
    missing = [c for c in COLUMNS if c not in updates.columns]
    if missing:
        raise InvalidArgument(f"an updates DataFrame needs columns {COLUMNS}; missing {missing}")
    updates = updates.select(*COLUMNS)
    if is_vectorised(op):
        return _vectorised(op, updates)
    ship_code(updates.sparkSession, op)
    return _python_pass(op, updates, schema)


def consolidated(frame: Any) -> Any:
    """One row per ``(key, value, time)`` with the summed diff; zero diffs dropped."""

    return (
        frame.groupBy("key", "value", "time").agg(F.sum("diff").alias("diff")).where("diff != 0")
    )


def _vectorised(op: Linear, frame: Any) -> Any:
    for step in op.steps:
        if step.kind == "map":
            frame = frame.select(*(F.expr(e).alias(c) for c, e in step.sql), "time", "diff")
        elif step.kind == "filter":
            frame = frame.where(F.expr(step.sql[0]))
        elif step.kind == "temporal_filter":
            time_type = frame.schema["time"].dataType
            lower, upper = (
                _no_nan(F.expr(e).cast(time_type), time_type) if e else F.lit(None).cast(time_type) for e in step.sql
            )
            bounds = F.array(
                F.struct(lower.alias("at"), F.lit(1).alias("sign")),
                F.struct(upper.alias("at"), F.lit(-1).alias("sign")),
            )
            frame = (
                frame.where(lower.isNull() | upper.isNull() | (lower < upper))
                .select("key", "value", "time", "diff", F.explode(bounds).alias("b"))
                .where(~((F.col("b.sign") == -1) & F.col("b.at").isNull()))
                .select(
                    "key", "value", F.greatest("time", "b.at").alias("time"),
                    (F.col("diff") * F.col("b.sign")).alias("diff"),
                )
            )
        else:  # pragma: no cover - is_vectorised admits only the kinds above
            raise InvalidArgument(f"{step} has no Spark SQL form")
    return frame


def _no_nan(bound: Any, time_type: Any) -> Any:
    """``bound``, failing the job on a NaN as locally (Spark would order NaN above every
    time, making the interval empty and dropping the record silently)."""
    if not isinstance(time_type, T.FloatType | T.DoubleType):
        return bound
    record = F.concat(F.lit("("), F.col("key").cast("string"), F.lit(", "), F.col("value").cast("string"), F.lit(")"))
    message = F.concat(F.lit("temporal_filter's bounds are times or None; got nan for "), record)
    return F.when(F.isnan(bound), F.raise_error(message)).otherwise(bound)


def _python_pass(op: Linear, frame: Any, schema: str | None) -> Any:
    spark = frame.sparkSession
    out_schema = frame.schema
    if schema is not None:
        given = T._parse_datatype_string(schema)
        out_schema = T.StructType(
            [given["key"], given["value"], frame.schema["time"], frame.schema["diff"]]
        )
    arrow_schema = to_arrow_schema(out_schema, timezone=spark.conf.get("spark.sql.session.timeZone"))

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = (((key, value), time, diff) for key, value, time, diff in python_rows(batch))
            columns: list[list[Any]] = [[], [], [], []]
            for data, time, diff in op.updates(rows):
                if not (isinstance(data, tuple) and len(data) == 2):
                    raise InvalidArgument(
                        f"a linear operator on Spark must produce (key, value) records; got {data!r}"
                    )
                for column, item in zip(columns, (data[0], data[1], time, diff), strict=True):
                    column.append(item)
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(columns, arrow_schema, strict=True)],
                schema=arrow_schema,
            )

    return frame.mapInArrow(run, out_schema)
