"""Progress of a Spark batch run, drawn while it runs.

    with StageProgress(spark, label="upsert", total=events.count()) as progress:
        result = run_batch(machine, events, progress=progress)

    upsert: 40%|####      | 800k/2.00M events [00:06<00:09, 131k events/s, stage 7: 2/4 tasks]

The bar counts the events the machine has processed: an accumulator that Spark
updates on the driver as each task of the machine's stage ends (so it moves once per
finished task), beside the running stages' task counts, polled from Spark's status
tracker. The bar is a :class:`statemachines.library.progress.ProgressBar`, quiet when standard
error is not a terminal unless told otherwise. A Spark Connect client has neither
accumulators nor a status tracker: there the server's progress messages for the
client's own operations give the task counts (``registerProgressHandler``) and the
events show when the run ends.
"""

from __future__ import annotations

import threading
from typing import Any, TextIO

from statemachines.library.progress import ProgressBar
from statemachines.spark.shipping import is_connect

__all__ = ["StageProgress"]


class StageProgress:
    """A context manager drawing a Spark run's progress every ``every`` seconds.

    Args:
        spark: the session the run uses.
        label: shown before the bar.
        total: how many events the run has, if known.
        every: seconds between polls.
        out: where to draw (default: standard error).
        enabled: ``None`` draws only on a terminal; True or False decide.

    Attributes:
        counter: the accumulator the machine's partitions add their events to
            (``None`` with Spark Connect).
    """

    def __init__(
        self,
        spark: Any,
        *,
        label: str = "spark",
        total: int | None = None,
        every: float = 0.5,
        out: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.bar = ProgressBar(label, total=total, out=out, enabled=enabled)
        self.every = every
        self._spark = spark
        self._connect_stages: dict[int, Any] = {}
        connect = is_connect(spark)
        self._tracker = None if connect else spark.sparkContext.statusTracker()
        self.counter = None if connect else spark.sparkContext.accumulator(0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stage-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        if self._tracker is None:
            self._spark.registerProgressHandler(self._on_connect_progress)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tracker is None:
            self._spark.removeProgressHandler(self._on_connect_progress)
        self._halt()
        self.bar.close()

    def finish(self, events: int, **counts: Any) -> None:
        """Show the run's final counts (events processed, updates, rejected ...).

        The polling stops first: a poll after this would move the bar back to the
        events counted so far (none, on a native path).
        """
        self._halt()
        self.bar.show(events, stages=None, **counts)

    def _halt(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            done = self.counter.value if self.counter is not None else self.bar.position
            self.bar.show(done, stages=", ".join(self.stages()) or None)

    def _on_connect_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        self._connect_stages = {} if done else {s.stage_id: s for s in stages or () if not s.done}

    def stages(self) -> list[str]:
        """One entry per running stage: ``stage 7: 2/4 tasks``."""
        if self._tracker is None:
            return [
                f"stage {s.stage_id}: {s.num_completed_tasks}/{s.num_tasks} tasks"
                for s in sorted(dict(self._connect_stages).values(), key=lambda s: s.stage_id)
            ]
        found = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                found.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        return found
