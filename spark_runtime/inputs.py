"""Input files on Spark, read with the schema the local runtime reads them with
(:mod:`statemachines.library.inputs`): the same columns and types on both."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

__all__ = ["read_frame", "spark_schema"]

# how Spark's Parquet reader reads an unsigned column (it has no unsigned types)
PARQUET_UNSIGNED = {
    "uint8": T.ShortType(), "uint16": T.IntegerType(), "uint32": T.LongType(), "uint64": T.DecimalType(20, 0),
}


def spark_schema(schema: Any) -> Any:
    """The Spark schema of an Arrow schema."""
    return T.StructType([T.StructField(f.name, from_arrow_type(f.type), True) for f in schema])


def read_frame(spark: Any, path: str, fmt: str, schema: Any, streaming: bool = False) -> Any:
    """The files at ``path`` as a DataFrame with ``schema`` (an Arrow schema); a row
    that does not fit it fails the job (``FAILFAST``) rather than reading as nulls.
    A Parquet column of an unsigned type is read as Spark reads it, then cast (the
    local reader checked every value fits: ``require_readable``)."""
    target = spark_schema(schema)
    read_as = _parquet_types(path, target) if fmt == "parquet" else target
    reader = (spark.readStream if streaming else spark.read).schema(read_as)
    if fmt == "csv":
        reader = reader.option("header", True)
    if fmt != "parquet":
        reader = reader.option("mode", "FAILFAST")
    if streaming:
        reader = reader.option("maxFilesPerTrigger", 1)
    frame = reader.format({"jsonl": "json"}.get(fmt, fmt)).load(path)
    if read_as == target:
        return frame
    return frame.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in target.fields))


def _parquet_types(path: str, target: Any) -> Any:
    """``target`` with each column the first Parquet file holds unsigned in the type
    Spark's Parquet reader gives it."""
    import pyarrow.parquet as pq

    from statemachines.library.inputs import files_of

    held = {f.name: str(f.type) for f in pq.read_schema(files_of(path, "parquet")[0])}
    return T.StructType([
        T.StructField(f.name, PARQUET_UNSIGNED.get(held.get(f.name, ""), f.dataType), True) for f in target.fields
    ])
