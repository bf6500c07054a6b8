"""Running machines on Apache Spark (everything that imports pyspark lives here)."""

from spark_runtime.arrangement import compact, read_history, read_snapshot, read_updates
from spark_runtime.batch import BatchResult, EventColumns, run_batch
from spark_runtime.cdc import CdcRead, read_cdc, write_cdc
from spark_runtime.linear import apply_linear, consolidated, is_vectorised
from spark_runtime.progress import StageProgress
from spark_runtime.session import JavaNotFound, ensure_java, local_session, session
from spark_runtime.streaming import (
    BucketSink,
    MicroBatchReport,
    MicroBatchRunner,
    flush_progress,
    read_rejected,
    run_stream,
)

__all__ = [
    "StageProgress",
    "BatchResult",
    "CdcRead",
    "EventColumns",
    "MicroBatchReport",
    "BucketSink",
    "MicroBatchRunner",
    "JavaNotFound",
    "apply_linear",
    "consolidated",
    "ensure_java",
    "flush_progress",
    "is_vectorised",
    "local_session",
    "read_cdc",
    "compact",
    "read_history",
    "read_rejected",
    "read_snapshot",
    "read_updates",
    "run_batch",
    "run_stream",
    "session",
    "write_cdc",
]
