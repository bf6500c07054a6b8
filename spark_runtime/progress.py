"""Progress of a long Spark job, printed while it runs.

    with StageProgress(spark, label="upsert"):
        result = run_batch(...)
    # stderr, every 2 s:  upsert: stage 4 (mapInArrow) 37/200 tasks, 12.0s

Polls Spark's status tracker from a background thread; with Spark Connect (no
status tracker on the client) it prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["StageProgress"]


class StageProgress:
    """A context manager that prints the active stages' task counts every ``every`` seconds."""

    def __init__(self, spark: Any, *, label: str = "spark", every: float = 2.0, out: TextIO | None = None) -> None:
        self.label = label
        self.every = every
        self.out = out or sys.stderr
        self.lines = 0
        try:
            self._tracker = spark.sparkContext.statusTracker()
        except Exception:  # noqa: BLE001 - Spark Connect: no status tracker, no progress
            self._tracker = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        self._started = time.perf_counter()
        if self._tracker is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for line in self.snapshot():
                print(line, file=self.out, flush=True)
                self.lines += 1

    def snapshot(self) -> list[str]:
        """One line per active stage: its id, name, and tasks done of total."""
        if self._tracker is None:
            return []
        elapsed = time.perf_counter() - self._started
        lines = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is None:
                continue
            name = info.name.split(" at ")[0]
            lines.append(
                f"{self.label}: stage {stage_id} ({name}) {info.numCompletedTasks}/{info.numTasks} tasks, "
                f"{elapsed:.1f}s"
            )
        return lines
