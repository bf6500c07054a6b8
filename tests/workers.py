"""How a run's two pytest-xdist workers share the tests: those that use Spark in one.

A test that uses Spark runs in the tests' one Spark session, whose JVM takes a minute
of CPU to start and warm; two workers each running Spark tests would start two, and
were slower than one process. So the tests that use Spark (``conftest._starts_spark``)
form one unit of work, run in one worker one after another as without xdist, while
the other worker runs the rest. Each worker writes the ids of the Spark tests it
collected to the folder the run shares (:func:`shared`), where the controller's
scheduler, which collects nothing itself, reads them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

SPARK = "spark"  # the unit of work of the tests that use Spark


def shared(run: str | None = None) -> Path | None:
    """The folder an xdist run's controller and workers share (``run``: the run's
    id; by default this worker's), or ``None`` outside xdist."""
    run = run or os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return Path(tempfile.gettempdir()) / f"statemachines-test-run-{run}" if run else None


def write_spark_tests(ids: list[str]) -> None:
    """Record, for the controller, which of this worker's tests use Spark."""
    folder = shared()
    if folder is None:
        return
    folder.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "worker")
    partial = folder / f"spark-tests.{worker}.partial"
    partial.write_text("\n".join(ids))
    os.replace(partial, folder / f"spark-tests.{worker}")


class SparkTestsTogether(LoadScopeScheduling):
    """xdist's scheduling by units of work, the tests that use Spark one unit (the
    largest, so it is handed out first) and every other test a unit of its own."""

    def __init__(self, config, log=None) -> None:
        super().__init__(config, log)
        self._folder = shared(config.getoption("testrunuid"))
        self._spark: set[str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._spark is None:  # read once the workers collected (scheduling starts then)
            self._spark = set()
            for path in self._folder.glob("spark-tests.*") if self._folder else ():
                if not path.name.endswith(".partial"):
                    self._spark.update(path.read_text().splitlines())
        return SPARK if nodeid in self._spark else nodeid
