"""Progress bars people read: events in, updates out, rejected, rate and time left.

Built on ``tqdm``, which draws the bar, the rate and the time left and is quiet when
its output is not a terminal (unless told otherwise). One bar serves every runtime:

    run_local(Upsert(), events, progress=ProgressBar("upsert", total=len(events)))

a local run calls it with :class:`~statemachines.RunProgress`; a Spark stream's
micro-batch reports (``run_stream(progress=bar.micro_batch)``) and a Spark batch
run's stage polling (``statemachines.spark.StageProgress``) move it through
:meth:`ProgressBar.show`.

    upsert:  60%|██████    | 1.20M/2.00M events [00:04<00:02, 291k events/s, updates=1,350,020, rejected=12]
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from statemachines.display import pending_note, show_time
from statemachines.errors import InvalidArgument, MissingDependency
from statemachines.results import RunProgress

__all__ = ["CHOICES", "ENVIRONMENT", "ProgressBar"]


def _tqdm() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        raise MissingDependency("progress bars need tqdm: pip install tqdm") from None
    return tqdm


class ProgressBar:
    """A progress bar over events, with the counts a run has produced as it goes.

    Args:
        label: shown before the bar.
        total: how many events the run will see, if known (for the time left).
        unit: what the bar counts.
        out: where to draw (default: standard error).
        enabled: True or False decide; ``None`` (default) follows the environment
            variable ``STATEMACHINES_PROGRESS`` (``always`` or ``never``), and
            without it draws only when ``out`` is a terminal.
    """

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "events",
        out: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.out = out or sys.stderr
        self.counts: dict[str, Any] = {}
        shown = enabled if enabled is not None else _wanted(self.out)
        self._bar = _tqdm()(
            total=total,
            desc=label,
            unit=f" {unit}",
            unit_scale=total is None or total >= 10_000,  # 1.2M events, but 12 events
            file=self.out,
            disable=not shown,
            dynamic_ncols=True,
            mininterval=0.5,
            smoothing=0.1,
        )

    @property
    def enabled(self) -> bool:
        return not self._bar.disable

    @property
    def position(self) -> int:
        """Where the bar stands (events done so far)."""
        return int(self._bar.n)

    def show(self, position: int, **counts: Any) -> None:
        """Move the bar to ``position`` and show ``counts`` beside it (``None``: hidden)."""
        self.counts.update(counts)
        bar = self._bar
        if bar.total is not None and position > bar.total:
            bar.total = position  # more than announced (a retried task counted twice)
        bar.set_postfix_str(_postfix(self.counts), refresh=False)
        bar.update(position - bar.n)  # redraws at most every 0.5 s; close() draws the last state

    def __call__(self, progress: RunProgress) -> None:
        """The ``progress`` callback of a local run."""
        self.show(
            progress.events_done,
            updates=progress.updates_out,
            rejected=progress.rejected,
            waiting=progress.waiting,
        )

    def micro_batch(self, report: Any) -> None:
        """The ``progress`` callback of ``run_stream``: one :class:`MicroBatchReport` more."""
        if report.replayed:
            return
        done = self.position + report.events
        totals = self.counts
        self.show(
            done,
            updates=totals.get("updates", 0) + report.updates,
            rejected=totals.get("rejected", 0) + report.rejected,
            waiting=report.pending,
            waiting_for=report.waiting_for,
            frontier=report.frontier,
        )

    def close(self) -> None:
        """Draw the final state and leave the bar on screen."""
        self._bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


ENVIRONMENT = "STATEMACHINES_PROGRESS"
CHOICES = ("auto", "always", "never")


def _wanted(out: TextIO) -> bool:
    """Whether to draw: as ``STATEMACHINES_PROGRESS`` says, else on a terminal only."""
    choice = os.environ.get(ENVIRONMENT, "auto").strip().lower()
    if choice not in CHOICES:
        raise InvalidArgument(f"{ENVIRONMENT}={choice!r}; use one of {', '.join(CHOICES)}")
    if choice != "auto":
        return choice == "always"
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def _postfix(counts: dict[str, Any]) -> str:
    parts = []
    for name, value in counts.items():
        if value is None:
            continue
        if name == "waiting":
            parts.append(pending_note(value, counts.get("waiting_for")) if value else "")
        elif name == "frontier":
            parts.append(f"frontier {show_time(value)}")
        elif name == "stages":
            parts.append(value)
        elif name != "waiting_for":
            parts.append(f"{name}={value:,}" if isinstance(value, int) else f"{name}={value}")
    return ", ".join(p for p in parts if p)
