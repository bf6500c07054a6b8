"""Progress of a long Spark job, printed while it runs.

    with StageProgress(spark, label="upsert"):
        result = run_batch(...)
    # stderr, every 2 s:  upsert: stage 4 (mapInArrow) 37/200 tasks, 12.0s

Polls Spark's status tracker from a background thread. A Spark Connect client has
no status tracker: there the server's progress messages for the client's own
operations are shown instead (``SparkSession.registerProgressHandler``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from spark_runtime.shipping import is_connect

__all__ = ["StageProgress"]


class StageProgress:
    """A context manager that prints the active stages' task counts every ``every`` seconds."""

    def __init__(self, spark: Any, *, label: str = "spark", every: float = 2.0, out: TextIO | None = None) -> None:
        self.label = label
        self.every = every
        self.out = out or sys.stderr
        self.lines = 0
        self._spark = spark
        self._connect_stages: dict[int, Any] = {}
        self._tracker = None if is_connect(spark) else spark.sparkContext.statusTracker()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        self._started = time.perf_counter()
        if self._tracker is None:
            self._spark.registerProgressHandler(self._on_connect_progress)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tracker is None:
            self._spark.removeProgressHandler(self._on_connect_progress)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for line in self.snapshot():
                print(line, file=self.out, flush=True)
                self.lines += 1

    def _on_connect_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        self._connect_stages = {} if done else {s.stage_id: s for s in stages or () if not s.done}

    def snapshot(self) -> list[str]:
        """One line per active stage: its id, name, and tasks done of total."""
        elapsed = time.perf_counter() - self._started
        if self._tracker is None:
            return [
                f"{self.label}: stage {s.stage_id} {s.num_completed_tasks}/{s.num_tasks} tasks, {elapsed:.1f}s"
                for s in sorted(dict(self._connect_stages).values(), key=lambda s: s.stage_id)
            ]
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
