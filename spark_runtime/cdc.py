"""CDC files from and to Spark, in the format of :mod:`statemachines.cdc`.

``write_cdc`` writes an arrangement's history as Parquet CDC messages: one
``Updates`` message per update row (written by the executors) and ``Progress``
messages covering the arrangement's times. ``read_cdc`` reads any number of such
files, duplicated and re-batched by any writers, back into a DataFrame of the
updates whose times are complete, checking them against the progress statements.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from statemachines.cdc import CdcConflict, CdcReader, Progress, Updates, _decode, _encode
from statemachines.columns import python_rows
from statemachines.persisted import read_state
from statemachines.spark.arrangement import read_updates
from statemachines.times import decode_time
from statemachines.updates import Update

__all__ = ["CdcRead", "read_cdc", "write_cdc"]

MESSAGE_SCHEMA = "updates string, progress string"


def _updates_as_messages(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        encoded = [json.dumps(_encode(Updates((Update((k, v), t, d),)))["updates"]) for k, v, t, d in python_rows(batch)]
        yield pa.RecordBatch.from_arrays(
            [pa.array(encoded, pa.string()), pa.nulls(len(encoded), pa.string())],
            names=["updates", "progress"],
        )


def write_cdc(
    spark: Any, arrangement: str | os.PathLike[str], out: str | os.PathLike[str], *, times_per_progress: int = 10_000
) -> None:
    """Write the history of a persisted arrangement as Parquet CDC files in ``out``.

    Raises:
        InvalidArgument: the arrangement is empty or stores pickled columns.
    """

    state = read_state(arrangement)
    first, upper = decode_time(state["first"]), decode_time(state["upper"])
    updates = read_updates(spark, arrangement).select("key", "value", "time", "diff")
    rows = updates.mapInArrow(_updates_as_messages, MESSAGE_SCHEMA)

    counts = updates.groupBy("time").count().orderBy("time").toArrow()
    pairs = list(zip(counts.column(0).to_pylist(), counts.column(1).to_pylist(), strict=True))
    progress = []
    for i in range(0, max(len(pairs), 1), times_per_progress):
        chunk = pairs[i : i + times_per_progress]
        lower = first if i == 0 else chunk[0][0]
        nxt = i + times_per_progress
        until = pairs[nxt][0] if nxt < len(pairs) else upper
        message = Progress(lower, until, tuple(chunk))
        progress.append((None, json.dumps(_encode(message)["progress"])))
    statements = spark.createDataFrame(progress, MESSAGE_SCHEMA)
    rows.unionByName(statements).write.parquet(os.fspath(out))


@attrs.frozen
class CdcRead:
    """What ``read_cdc`` recovered: the complete updates and how far they reach.

    Attributes:
        updates: DataFrame ``key, value, time, diff`` of the times below ``frontier``.
        frontier: every time below it is complete (``None``: none is).
        complete: the files hold the whole history.
    """

    updates: Any
    frontier: Any
    complete: bool


def _parse_updates(schema: Any, timezone: str):
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        arrow = to_arrow_schema(schema, timezone=timezone)
        for batch in batches:
            columns: list[list[Any]] = [[], [], [], []]
            for text in batch.column(0).to_pylist():
                for (key, value), time, diff in _decode({"updates": json.loads(text)}).updates:
                    for column, item in zip(columns, (key, value, time, diff), strict=True):
                        column.append(item)
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow
            )

    return run


def read_cdc(spark: Any, *paths: str | os.PathLike[str], schema: str) -> CdcRead:
    """Read Parquet CDC files back into the updates of their complete times.

    Args:
        paths: files or folders of CDC messages (duplicates and overlaps welcome).
        schema: the types of ``key``, ``value`` and ``time`` as DDL, e.g.
            ``"key string, value string, time long"``.

    Raises:
        CdcConflict: messages contradict each other (an update with two diffs,
            progress statements that disagree, more updates than counted).
        InvalidArgument: a message is malformed (:func:`statemachines.cdc.check_message`;
            an update message's error comes from a task, wrapped by Spark).
    """

    given = T._parse_datatype_string(schema)
    out_schema = T.StructType([given["key"], given["value"], given["time"], T.StructField("diff", T.LongType())])
    messages = spark.read.parquet(*(os.fspath(p) for p in paths))

    # progress statements are few: check them against each other on the driver
    judge = CdcReader()
    statements = messages.where(F.col("progress").isNotNull()).select("progress").toArrow()
    for text in statements.column(0).to_pylist():
        judge.push(_decode({"progress": json.loads(text)}))
    expected = judge.expected_counts()

    timezone = spark.conf.get("spark.sql.session.timeZone")
    updates = (
        messages.where(F.col("updates").isNotNull())
        .select("updates")
        .mapInArrow(_parse_updates(out_schema, timezone), out_schema)
        .dropDuplicates()
    )
    clash = updates.groupBy("key", "value", "time").count().where("count > 1").limit(1).collect()
    if clash:
        key, value, time, _ = clash[0]
        raise CdcConflict(f"({key!r}, {value!r}) at {time!r} arrived with two different diffs")

    # complete times: from the start, while every covered time has all its updates
    table = updates.groupBy("time").count().toArrow()
    actual = dict(zip(table.column(0).to_pylist(), table.column(1).to_pylist(), strict=True))
    for time, count in actual.items():
        want = expected.get(time)
        if judge.is_released(time) or (want is None and judge.is_covered(time)):
            raise CdcConflict(f"updates arrived at time {time!r}, progress says it has none")
        if want is not None and count > want:
            raise CdcConflict(f"time {time!r} has {count} updates, progress says {want}")
    known, end = judge.reach()
    if not known:
        return CdcRead(updates.limit(0), None, False)
    missing = [t for t, want in expected.items() if actual.get(t, 0) < want and (end is None or t < end)]
    frontier = min(missing) if missing else end
    if frontier is not None:
        updates = updates.where(F.col("time") < F.lit(frontier).cast(given["time"].dataType))
    return CdcRead(updates, frontier, frontier is None)
