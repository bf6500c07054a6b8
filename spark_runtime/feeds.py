"""Change feeds on Spark: the rules of :mod:`statemachines.library.feeds` as column expressions.

:func:`feed_events` turns a DataFrame of feed rows (flat, Debezium envelopes as Spark
reads Kafka Connect's JSON, or Delta's change data feed) into ``key, symbol, time,
order, refusal`` columns, exactly as :meth:`ChangeFeed.reader` does row by row
locally; the runtime passes refused rows to its rejected output
(``EventColumns.refusal``). :func:`run_feed_batch` and :func:`run_feed_stream` run them through ``Upsert`` into
an arrangement and keep the feed's SCD tables (:class:`~statemachines.scd.ScdTable`)
up to date: after the batch, and after each micro-batch.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from statemachines import InvalidArgument, Reason
from statemachines.library import Upsert
from statemachines.library.feeds import (
    DEBEZIUM_DELETE,
    DEBEZIUM_TRUNCATE,
    DEBEZIUM_UPSERTS,
    DELTA_CHANGES,
    DELTA_DELETES,
    TOMBSTONE,
    TRUNCATE,
    UNAVAILABLE_FORMS,
    ChangeFeed,
    FeedColumns,
    FeedResult,
    scd_tables,
    unavailable_detail,
)
from statemachines.scd import END_AT, START_AT, ScdTable
from statemachines.spark.arrangement import read_files
from statemachines.spark.batch import refusal, require_frame, run_batch
from statemachines.spark.streaming import run_stream

__all__ = ["feed_events", "read_scd", "run_feed_batch", "run_feed_stream"]

EVENT_COLUMNS = {"key": "key", "symbol": "symbol", "time": "time", "order": "order", "refusal": "refusal"}


def feed_events(feed: ChangeFeed, frame: Any) -> tuple[Any, FeedColumns]:
    """The feed's rows as events (``key, symbol, time, order, refusal``), and its columns.

    Raises:
        InvalidArgument: a column the feed names is missing (nothing runs).
    """
    if feed.envelope == "debezium":
        wrapper = "op" not in frame.columns and "payload" in frame.columns  # Kafka Connect's schema wrapper
        if wrapper and isinstance(frame.schema["payload"].dataType, T.StructType):
            frame, wrapper = frame.select("payload.*"), False
        missing = [c for c in ("op", "before", "after") if c not in frame.columns]
        if missing:
            if wrapper:
                has = (
                    f"{', '.join(frame.columns)}; its payload is a {frame.schema['payload'].dataType.simpleString()}, "
                    f"not a record: null in every row, as in a file of only Kafka tombstones (which change "
                    f"nothing), or JSON text in some rows at least (an envelope encoded twice; Spark then reads "
                    f"every row's payload as text), to decode first with F.from_json"
                )
            else:
                has = ", ".join(frame.columns) or "no columns: a file of only Kafka tombstones ({} lines), which change nothing"
            raise InvalidArgument(
                f"a Debezium feed has columns op, before and after; this one lacks {', '.join(missing)} (it has {has})"
            )
        # the row image's fields: after's, or before's in a feed of deletes only (JSON
        # read by Spark types an image that is null in every row as a string)
        images = {side: frame.schema[side].dataType for side in ("after", "before")}
        records = [side for side, kind in images.items() if isinstance(kind, T.StructType)]
        if not records:
            raise InvalidArgument("a Debezium feed's before or after is a record (a struct); here neither is")
        image = images[records[0]]
        columns = feed.columns(image.fieldNames())
        op = F.col("op")
        delete = F.coalesce(op == F.lit(DEBEZIUM_DELETE), F.lit(False))
        has = {side: F.col(side).isNotNull() if side in records else F.lit(False) for side in ("before", "after")}

        def field(side: str, name: str) -> Any:
            if side in records and name in images[side].fieldNames():
                return F.col(side)[name].cast(image[name].dataType)
            return F.lit(None).cast(image[name].dataType)

        def cell(name: str) -> Any:
            return F.when(delete, field("before", name)).otherwise(field("after", name))

        rules = [
            (op.isNull() & F.col("before").isNull() & F.col("after").isNull(), refusal(Reason.MISSING_FIELD, TOMBSTONE)),
            (op.isNull(), refusal(Reason.MISSING_FIELD, "the envelope has no op")),
            (op == DEBEZIUM_TRUNCATE, refusal(Reason.BAD_OPERATION, TRUNCATE)),
            (
                ~op.isin(*DEBEZIUM_UPSERTS, DEBEZIUM_DELETE),
                refusal(Reason.BAD_OPERATION, F.format_string("op '%s' is not applied (c, u, r upsert; d deletes)", op)),
            ),
            (delete & ~has["before"], refusal(Reason.MISSING_FIELD, "op 'd' without before")),
            (~delete & ~has["after"], refusal(Reason.MISSING_FIELD, F.format_string("op '%s' without after", op))),
        ]
        texts = [v for v in columns.values if isinstance(image[v].dataType, T.StringType)]
        unsent = [F.when(field("after", v).isin(*UNAVAILABLE_FORMS), F.lit(v)) for v in texts]
        if unsent:
            names = F.concat_ws(", ", *unsent)
            rules.append(
                (~delete & (names != ""), refusal(Reason.MISSING_FIELD, F.format_string(unavailable_detail("%s"), names)))
            )
        sequence = [_path(frame, path) for path in columns.sequence_by]
    elif feed.envelope == "delta":
        columns = feed.columns(frame.columns)
        change = F.col("_change_type")
        cell = F.col
        delete = F.coalesce(change.isin(*DELTA_DELETES), F.lit(False))
        rules = [
            (change.isNull(), refusal(Reason.MISSING_FIELD, "the row has no _change_type")),
            (
                ~change.isin(*DELTA_CHANGES),
                refusal(
                    Reason.BAD_OPERATION,
                    F.format_string(
                        "_change_type '%s' is not applied (insert, update_postimage upsert; delete, update_preimage delete)",
                        change,
                    ),
                ),
            ),
        ]
        sequence = [F.col(c) for c in columns.sequence_by]
    else:
        columns = feed.columns(frame.columns)
        cell = F.col
        marked = [F.col(column).isin(*marks) for column, marks in columns.markers]
        delete = F.coalesce(_all(marked), F.lit(False)) if marked else F.lit(False)
        rules = [
            (F.col(column).isNull(), refusal(Reason.MISSING_FIELD, f"delete marker {column} is null"))
            for column, _ in columns.markers
        ]
        sequence = [F.col(c) for c in columns.sequence_by]
    rules += [(cell(k).isNull(), refusal(Reason.NULL_KEY, f"key column {k} is null")) for k in columns.keys]
    rules += [
        (column.isNull(), refusal(Reason.NULL_TIME, f"sequence column {name} is null"))
        for name, column in zip(columns.sequence_by, sequence, strict=True)
    ]
    refused = F.when(*rules[0])
    for condition, value in rules[1:]:
        refused = refused.when(condition, value)
    keys = [cell(k).alias(k) for k in columns.keys]
    rest = sequence[1:]
    if feed.envelope == "delta":  # within a commit, deletes first
        ranks = F.create_map(*(F.lit(part) for change_rank in DELTA_CHANGES.items() for part in change_rank))
        rest.append(ranks[F.col("_change_type")].cast("long"))
    order = F.lit(None).cast("long") if not rest else rest[0] if len(rest) == 1 else F.struct(*rest)
    key = keys[0] if len(keys) == 1 else F.struct(*keys)
    symbol = F.when(~delete, F.struct(*(cell(v).alias(v) for v in columns.values)))
    event = F.struct(key.alias("key"), symbol.alias("symbol"), sequence[0].alias("time"), order.alias("order"))
    if feed.envelope != "debezium":
        return frame.select(event.alias("e"), refused.alias("refusal")).select("e.*", "refusal"), columns
    # an update that moved its row to another key also deletes the key it had
    old = [field("before", k).alias(k) for k in columns.keys]
    moved = (op == "u") & has["before"] & _all([c.isNotNull() for c in old]) & refused.isNull()
    old_key = old[0] if len(old) == 1 else F.struct(*old)
    moved = moved & ~old_key.eqNullSafe(key)
    delete_old = F.struct(
        old_key.alias("key"), F.when(F.lit(False), symbol).alias("symbol"), sequence[0].alias("time"), order.alias("order"),
    )
    both = F.array(
        F.struct(F.when(moved, delete_old).alias("e"), F.when(F.lit(False), refused).alias("refusal")),
        F.struct(event.alias("e"), refused.alias("refusal")),
    )
    changes = frame.select(F.explode(F.filter(both, lambda change: change["e"].isNotNull())).alias("c"))
    return changes.select("c.e.*", "c.refusal"), columns


def _all(conditions: list[Any]) -> Any:
    both = conditions[0]
    for condition in conditions[1:]:
        both = both & condition
    return both


def _path(frame: Any, path: str) -> Any:
    """The column at ``path`` (``source.lsn``) of a Debezium frame, or a clear error."""
    try:
        frame.select(F.col(path)).schema  # noqa: B018 - resolves the path now
    except Exception as exc:  # noqa: BLE001 - Spark's analysis errors differ by version
        raise InvalidArgument(f"the Debezium feed has no field {path} (sequence_by)") from exc
    return F.col(path)


def run_feed_batch(
    feed: ChangeFeed,
    frame: Any,
    *,
    into: str | os.PathLike[str] | None = None,
    scd1: str | os.PathLike[str] | None = None,
    scd2: str | os.PathLike[str] | None = None,
    start: str = START_AT,
    end: str = END_AT,
    progress: Any = False,
) -> FeedResult:
    """Run a DataFrame of feed rows through ``Upsert`` (``run_batch``), then refresh the
    SCD tables; the arguments are those of :func:`~statemachines.library.feeds.run_feed`.

    Returns:
        A :class:`FeedResult` whose ``result`` is the run's
        :class:`~statemachines.spark.BatchResult`.
    """
    if (scd1 is not None or scd2 is not None) and into is None:
        raise InvalidArgument("SCD tables are kept from an arrangement: give into=...")
    require_frame(frame, "run_feed_batch")
    events, columns = feed_events(feed, frame)
    result = run_batch(Upsert(), events, into=into, progress=progress, **EVENT_COLUMNS)
    one, two = scd_tables(columns, scd1, scd2, start, end)
    for table in (one, two):
        if table is not None:
            table.refresh(os.fspath(into))
    return FeedResult(result, columns, one, two)


def run_feed_stream(
    feed: ChangeFeed,
    frame: Any,
    *,
    into: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str],
    scd1: str | os.PathLike[str] | None = None,
    scd2: str | os.PathLike[str] | None = None,
    start: str = START_AT,
    end: str = END_AT,
    **options: Any,
) -> tuple[Any, FeedResult]:
    """Start a streaming query of feed rows through ``Upsert`` (``run_stream``, with its
    ``options``: ``delay``, ``trigger``, ``progress``...) that refreshes the SCD tables
    after each micro-batch.

    Returns:
        The started ``StreamingQuery``, and a :class:`FeedResult` (``result`` is
        ``None``) naming the feed's columns and SCD tables.
    """
    from statemachines.spark.streaming import absolute

    require_frame(frame, "run_feed_stream")
    events, columns = feed_events(feed, frame)
    one, two = scd_tables(
        columns, absolute(scd1) if scd1 else None, absolute(scd2) if scd2 else None, start, end
    )
    tables = tuple(t for t in (one, two) if t is not None)
    query = run_stream(
        Upsert(), events, into=into, checkpoint=checkpoint,
        after_publish=_Refresh(tables) if tables else None, **EVENT_COLUMNS, **options,
    )
    return query, FeedResult(None, columns, one, two)


class _Refresh:
    """After a micro-batch: bring each SCD table up to the arrangement (picklable)."""

    def __init__(self, tables: tuple[ScdTable, ...]) -> None:
        self.tables = tables

    def __call__(self, into: str) -> None:
        for table in self.tables:
            table.refresh(into)


def read_scd(spark: Any, table: ScdTable, version: int | None = None) -> Any:
    """An SCD table as a Spark DataFrame (its files at ``version``, default: the latest)."""
    from deltalake import DeltaTable

    files = DeltaTable(table.path, version=version, storage_options=table.storage_options).file_uris()
    if not files:
        return spark.createDataFrame(table.read(version))
    return read_files(spark, files).select(*table.columns)
