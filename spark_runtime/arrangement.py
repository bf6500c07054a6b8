"""Reading persisted arrangements with Spark: updates, snapshots, SCD2 history.

A read pins one version of the arrangement's Delta table and reads exactly the
files that version names (never a directory listing), so it sees one whole
version however long it runs: later appends and compactions commit new versions,
and the files of this one stay until a vacuum past its retention. Give ``version``
to read an older one.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from statemachines.delta import VersionSpec
from statemachines.errors import InvalidArgument
from statemachines.persisted import PersistedArrangement, table_files
from statemachines.spark.output import ROW_GROUP_BYTES, count_rows
from statemachines.times import decode_time

__all__ = ["compact", "read_history", "read_snapshot", "read_updates"]

UPDATE_COLUMNS = ("key", "value", "time", "diff")


def _published_files(path: str | os.PathLike[str], version: VersionSpec | None) -> tuple[list[str], Any]:
    files, state = table_files(path, version)
    return files, decode_time(state["since"])


def read_updates(spark, path: str | os.PathLike[str], version: VersionSpec | None = None):
    """The arrangement's updates as a DataFrame ``key, value, time, diff``.

    Consolidated: one row per ``(key, value, time)``, no zero diffs; times below the
    arrangement's ``since`` read as ``since``.

    Raises:
        InvalidArgument: no arrangement at ``path``, or it is empty.
    """

    files, since = _published_files(path, version)
    if not files:
        raise InvalidArgument(f"the arrangement at {path} holds no updates yet")
    frame = spark.read.parquet(*files).select(*UPDATE_COLUMNS)
    if since is not None:
        frame = frame.withColumn("time", F.greatest(F.col("time"), F.lit(since)))
    return (
        frame.groupBy("key", "value", "time")
        .agg(F.sum("diff").alias("diff"))
        .where(F.col("diff") != 0)
    )


def read_snapshot(spark, path: str | os.PathLike[str], as_of: Any = None, version: VersionSpec | None = None):
    """The collection as of ``as_of`` (default: latest): ``key, value, count``.

    Raises:
        InvalidArgument: ``as_of`` is below the arrangement's ``since``.
    """

    files, since = _published_files(path, version)
    if as_of is not None and since is not None and as_of < since:
        raise InvalidArgument(f"cannot read at {as_of!r}: compacted up to since={since!r}")
    if not files:
        raise InvalidArgument(f"the arrangement at {path} holds no updates yet")
    updates = spark.read.parquet(*files)
    if as_of is not None:  # times below since read as since, which is <= as_of
        updates = updates.where(F.col("time") <= F.lit(as_of))
    return (
        updates.groupBy("key", "value")
        .agg(F.sum("diff").alias("count"))
        .where(F.col("count") != 0)
    )


def read_history(spark, path: str | os.PathLike[str], version: VersionSpec | None = None):
    """Validity intervals ``key, value, start, end`` (SCD type 2; ``end`` null if current).

    A row starts where the running multiplicity of ``(key, value)`` turns positive and
    ends where it returns to zero, as ``Arrangement.history`` does.
    """

    by_time = Window.partitionBy("key", "value").orderBy("time")
    running = read_updates(spark, path, version).withColumn(
        "count", F.sum("diff").over(by_time.rowsBetween(Window.unboundedPreceding, 0))
    )
    running = running.withColumn("before", F.col("count") - F.col("diff"))
    edges = running.where(
        ((F.col("before") <= 0) & (F.col("count") > 0))
        | ((F.col("count") <= 0) & (F.col("before") > 0))
    ).withColumn("starts", F.col("count") > 0)
    paired = edges.withColumn("end", F.lead("time").over(by_time))
    return paired.where("starts").select(
        "key", "value", F.col("time").alias("start"), "end"
    )


def compact(spark, path: str | os.PathLike[str], since: Any = None) -> Any:
    """Compact the arrangement at ``path`` on Spark: one batch, one Delta commit.

    What :meth:`PersistedArrangement.compact` does in one process, for an
    arrangement too large for one: Spark reads the files of the current version,
    advances times below ``since`` to it (default: leave times as they are),
    consolidates, and writes key ranges (one file per range, sorted by key, so a
    point read opens one file). The commit replaces every batch with the new one;
    the old files stay for readers of older versions until a vacuum.

    Returns:
        The ``since`` reached (clamped to ``upper``, never moved back).

    Raises:
        InvalidArgument: another writer committed meanwhile (the compaction is lost,
            nothing else).
    """

    arrangement = PersistedArrangement.open(path)
    files = arrangement.files()
    if not files:
        return arrangement.advance_since(since) if since is not None else arrangement.since
    target = arrangement.since
    if since is not None and arrangement.upper is not None:
        reached = min(since, arrangement.upper)
        target = reached if target is None or reached > target else target
    updates = spark.read.parquet(*files).select(*UPDATE_COLUMNS)
    if target is not None:
        updates = updates.withColumn("time", F.greatest(F.col("time"), F.lit(target).cast(updates.schema["time"].dataType)))
    consolidated = (
        updates.groupBy("key", "value", "time").agg(F.sum("diff").alias("diff")).where(F.col("diff") != 0)
        .repartitionByRange("key").sortWithinPartitions("key", "time")
    )
    name = f"batch-{uuid.uuid4().hex}"
    loc = arrangement.location
    consolidated.write.option(*ROW_GROUP_BYTES).parquet(loc.uri_of(name))
    arrangement.replace_all(name, count_rows(loc, name), target)
    return arrangement.since
