"""Streaming reports relayed to a Spark Connect client.

With Spark Connect a query's ``foreachBatch`` sink runs in a Python process on the
server, so a ``progress`` callback given on the client cannot be called there. The
sink publishes each micro-batch's report into the arrangement with the micro-batch
(:func:`spark_runtime.streaming.with_report`); this listener, registered on the
client, reads them back after each micro-batch and calls ``progress`` here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from spark_runtime.streaming import MicroBatchReport
from statemachines.persisted import read_manifest

__all__ = ["ReportRelay"]


class ReportRelay(StreamingQueryListener):
    """Calls ``progress`` on this client with the reports a server-side sink published."""

    def __init__(self, into: str, progress: Callable[[MicroBatchReport], None]) -> None:
        self.into = into
        self.progress = progress
        self.seen = (read_manifest(into).get("stream") or {}).get("batch_id", -1)
        self.lock = threading.Lock()

    def relay(self) -> None:
        with self.lock:
            stream = read_manifest(self.into).get("stream") or {}
            for data in stream.get("reports", []):
                if data["batch_id"] > self.seen:
                    self.seen = data["batch_id"]
                    self.progress(MicroBatchReport.from_json(data))

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.relay()

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.relay()
