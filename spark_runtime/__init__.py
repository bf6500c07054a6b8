"""Running machines on Apache Spark (everything that imports pyspark lives here)."""

from statemachines.errors import MissingDependency

try:
    import pyspark  # noqa: F401 - every module of this package imports it at its top
except ImportError:
    raise MissingDependency("running on Spark needs PySpark: pip install 'statemachines[spark]'") from None


from statemachines.spark.arrangement import compact, read_history, read_snapshot, read_updates
from statemachines.spark.batch import BatchResult, EventColumns, run_batch
from statemachines.spark.cdc import CdcRead, read_cdc, write_cdc
from statemachines.spark.feeds import feed_events, read_scd, run_feed_batch, run_feed_stream
from statemachines.spark.linear import apply_linear, consolidated, is_vectorised
from statemachines.spark.progress import StageProgress
from statemachines.spark.rule_stream import read_rejected_rules
from statemachines.spark.session import JavaNotFound, ensure_java, local_session, session
from statemachines.spark.streaming import (
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
    "feed_events",
    "flush_progress",
    "is_vectorised",
    "local_session",
    "read_cdc",
    "compact",
    "read_history",
    "read_rejected",
    "read_rejected_rules",
    "read_scd",
    "read_snapshot",
    "read_updates",
    "run_batch",
    "run_feed_batch",
    "run_feed_stream",
    "run_stream",
    "session",
    "write_cdc",
]
