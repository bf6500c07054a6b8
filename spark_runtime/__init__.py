"""Running machines on Apache Spark (everything that imports pyspark lives here)."""

from spark_runtime.arrangement import read_history, read_snapshot, read_updates
from spark_runtime.batch import BatchResult, EventColumns, run_batch
from spark_runtime.linear import apply_linear, consolidated, is_vectorised
from spark_runtime.session import JavaNotFound, ensure_java, local_session, session

__all__ = [
    "BatchResult",
    "EventColumns",
    "JavaNotFound",
    "apply_linear",
    "consolidated",
    "ensure_java",
    "is_vectorised",
    "local_session",
    "read_history",
    "read_snapshot",
    "read_updates",
    "run_batch",
    "session",
]
