"""The rows a Spark run writes: one output schema for updates and rejections, the
Arrow batches Python builds of them, and key-sorted Parquet batches.

    kind      key  value  time  diff  symbol  order  reason  detail
    UPDATE    k    v      t     +1    -       -      -       -
    REJECTED  k    -      t     -     s       o      late    time 3 is below ...
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import types as T

from statemachines import InvalidArgument, delta
from statemachines.spark.session import scoped_conf

__all__ = ["OutputRows", "count_rows", "output_schema", "write_batch"]

UPDATE = 0
REJECTED = 1
STATE_ROW = 0
EVENT_ROW = 1


def output_schema(prepared: Any, value_type: Any) -> Any:
    fields = {f.name: f.dataType for f in prepared.schema.fields}
    return T.StructType(
        [
            T.StructField("kind", T.ByteType(), False),
            T.StructField("key", fields["key"], True),
            T.StructField("value", value_type, True),
            T.StructField("time", fields["time"], True),
            T.StructField("diff", T.LongType(), True),
            T.StructField("symbol", fields["symbol"], True),
            T.StructField("order", fields["order"], True),
            T.StructField("reason", T.StringType(), True),
            T.StructField("detail", T.StringType(), True),
        ]
    )


class OutputRows:
    """Columns of output rows for one Arrow record batch."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.columns: list[list[Any]] = [[] for _ in schema.names]

    def update(self, key: Any, value: Any, time: Any, diff: int) -> None:
        for column, item in zip(
            self.columns, (UPDATE, key, value, time, diff, None, None, None, None), strict=True
        ):
            column.append(item)

    def reject(self, event: Any, reason: str, detail: str) -> None:
        key, symbol, time, order = event
        for column, item in zip(
            self.columns,
            (REJECTED, key, None, time, None, symbol, order, reason, detail),
            strict=True,
        ):
            column.append(item)

    def take(self) -> Any:
        arrays = []
        for column, field in zip(self.columns, self.schema, strict=True):
            try:
                arrays.append(pa.array(column, type=field.type))
            except (pa.ArrowException, TypeError, ValueError) as exc:
                raise InvalidArgument(
                    f"the machine produced a {field.name} that does not fit the column type "
                    f"{field.type}: {exc}. Declare the value type with value_type=..."
                ) from exc
        self.columns = [[] for _ in self.schema.names]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


ROW_GROUP_BYTES = ("parquet.block.size", str(1 << 20))
"""Small row groups: a point read of the arrangement decodes one (Spark's default is 128 MiB)."""


def keyed(frame: Any, *first: str) -> Any:
    """``frame`` sorted by key within each file (after ``first``): row groups hold key ranges."""
    return frame.sortWithinPartitions(*first, "key")


def write_batch(frame: Any, path: str, prefix: str = "batch") -> tuple[str, int]:
    """Write ``frame`` as Parquet under ``path/<prefix>-<id>``; return the name and row count.

    The rows are counted from the written files' metadata (no second Spark job); an
    empty result leaves nothing behind. ``path`` may be a URI.
    """
    loc = delta.location(path)
    name = f"{prefix}-{uuid.uuid4().hex}"
    with scoped_conf(frame.sparkSession, {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
        keyed(frame).write.option(*ROW_GROUP_BYTES).parquet(loc.uri_of(name))
    count = count_rows(loc, name)
    if not count:
        loc.filesystem.delete_dir(loc.path(name))
    return name, count


def count_rows(loc: Any, relative: str) -> int:
    """The rows of the Parquet files under ``relative``, from their footers."""

    return int(ds.dataset(loc.path(relative), filesystem=loc.filesystem, format="parquet").count_rows())
