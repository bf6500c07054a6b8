"""Streaming reports relayed to a Spark Connect client.

With Spark Connect a query's ``foreachBatch`` sink runs in a Python process on the
server, so a ``progress`` callback given on the client cannot be called there. The
sink publishes each micro-batch's report into the arrangement with the micro-batch
(:func:`statemachines.spark.streaming.with_report`); a :class:`ReportRelay` on the client
reads them back and calls ``progress`` here.

It polls the arrangement from a daemon thread rather than listening to the query's
events: removing a client-side ``StreamingQueryListener`` can deadlock in PySpark
4.3 when an event arrives at the same time (``removeListener`` holds the listener
bus lock while it joins the event thread, which waits for that lock to post).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from statemachines.persisted import read_state
from statemachines.spark.streaming import MicroBatchReport

__all__ = ["ReportRelay"]

POLL_SECONDS = 0.5
ACTIVE_EVERY = 4  # polls between asking the server whether the query still runs


class ReportRelay:
    """Calls ``progress`` on this client with the reports a server-side sink published."""

    def __init__(self, into: str, progress: Callable[[MicroBatchReport], None]) -> None:
        self.into = into
        self.progress = progress
        self.seen = (read_state(into).get("stream") or {}).get("batch_id", -1)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, query: Any) -> None:
        """Relay the reports while ``query`` runs."""
        self.thread = threading.Thread(target=self._poll, args=(query,), name="report-relay", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop polling and relay what is left."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
        self.relay()

    def relay(self) -> None:
        with self.lock:
            stream = read_state(self.into).get("stream") or {}
            for data in stream.get("reports", []):
                if data["batch_id"] > self.seen:
                    self.seen = data["batch_id"]
                    self.progress(MicroBatchReport.from_json(data))

    def _poll(self, query: Any) -> None:
        polls = 0
        while not self.stopped.wait(POLL_SECONDS):
            self.relay()
            polls += 1
            if polls % ACTIVE_EVERY == 0 and not query.isActive:
                self.relay()
                return
