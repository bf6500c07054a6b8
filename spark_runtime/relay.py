"""Streaming reports: what each micro-batch did, relayed to a Spark Connect client.

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

import attrs

from statemachines.display import pending_note, show_time
from statemachines.persisted import read_state
from statemachines.times import decode_time, encode_time

__all__ = ["MicroBatchReport", "ReportRelay"]

POLL_SECONDS = 0.5
ACTIVE_EVERY = 4  # polls between asking the server whether the query still runs


@attrs.frozen
class MicroBatchReport:
    """What one micro-batch did (passed to the ``progress`` callback)."""

    batch_id: int
    events: int
    updates: int
    rejected: int
    pending: int | None  # events waiting for the frontier after this micro-batch
    frontier: Any
    seconds: float
    replayed: bool = False
    waiting_for: Any = None  # the earliest time a waiting event has
    # seconds from the arrival of the earliest event this micro-batch applied (when the
    # micro-batch that took it started) to this micro-batch's publication
    latency: float | None = None

    def __str__(self) -> str:
        if self.replayed:
            return f"batch {self.batch_id}: already published, skipped"
        return (
            f"batch {self.batch_id}: {self.events:,} events in, {self.updates:,} updates out, "
            f"{self.rejected:,} rejected, "
            + ("" if self.pending is None else f"{pending_note(self.pending, self.waiting_for)}, ")
            + f"frontier {show_time(self.frontier)}, "
            + ("" if self.latency is None else f"applied within {self.latency:.1f}s of arrival, ")
            + f"{self.seconds:.1f}s"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **attrs.asdict(self),
            "frontier": encode_time(self.frontier),
            "waiting_for": encode_time(self.waiting_for),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MicroBatchReport:
        return cls(
            **{
                **data,
                "frontier": decode_time(data["frontier"]),
                "waiting_for": decode_time(data.get("waiting_for")),
            }
        )


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
