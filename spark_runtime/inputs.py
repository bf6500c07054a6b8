"""Input files on Spark, read with the schema the local runtime reads them with
(:mod:`statemachines.library.inputs`): the same columns and types on both."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

__all__ = ["read_frame", "spark_schema"]


def spark_schema(schema: Any) -> Any:
    """The Spark schema of an Arrow schema."""
    return T.StructType([T.StructField(f.name, from_arrow_type(f.type), True) for f in schema])


def read_frame(spark: Any, path: str, fmt: str, schema: Any, streaming: bool = False) -> Any:
    """The files at ``path`` as a DataFrame with ``schema`` (an Arrow schema); a row
    that does not fit it fails the job (``FAILFAST``) rather than reading as nulls."""
    reader = (spark.readStream if streaming else spark.read).schema(spark_schema(schema))
    if fmt == "csv":
        reader = reader.option("header", True)
    if fmt != "parquet":
        reader = reader.option("mode", "FAILFAST")
    if streaming:
        reader = reader.option("maxFilesPerTrigger", 1)
    return reader.format({"jsonl": "json"}.get(fmt, fmt)).load(path)
