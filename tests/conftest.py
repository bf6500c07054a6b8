"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import compileall
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import settings

from tests import background
from tests.servers import JVM_OPTIONS, jvm_options

# every Spark driver the tests start (see tests/servers.py); the class archive is
# added once tests that start Spark are collected (pytest_collection_finish)
_OWN_JVM_OPTIONS = "SPARK_SUBMIT_OPTS" not in os.environ
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)

settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (2 cores, few partitions)."""
    from statemachines.spark import local_session

    # PySpark records each DataFrame call's Python call site for error messages: JVM
    # calls that were 60% of a small run's; the drivers the tests start elsewhere keep it
    no_call_sites = {"spark.python.sql.dataFrameDebugging.enabled": "false"}
    session = local_session(master="local[2]", shuffle_partitions=2, extra=no_call_sites)
    yield session
    session.stop()


def pytest_configure(config):
    """Name the run for its xdist workers (the folder they share for the background
    jobs is named after it, see tests/background.py).

    Compile the project's sources once where the environment says not to write
    bytecode (``PYTHONDONTWRITEBYTECODE``): the processes the tests start (the
    command line's, Spark's Python workers, the examples and benchmarks) would each
    compile them anew, about 0.35 s of CPU apiece. Python still reads bytecode that
    exists; nothing but the project's own ``__pycache__`` folders is written."""
    if _xdist_controller(config) and config.getoption("testrunuid") is None:
        config.option.testrunuid = uuid.uuid4().hex
    if sys.dont_write_bytecode:
        root = Path(__file__).resolve().parent.parent
        for folder in ("statemachines", "library", "spark_runtime", "tests", "benchmarks", "examples"):
            compileall.compile_dir(root / folder, quiet=1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The modules whose tests wait for background jobs run last, in their order."""
    waiting = {item.path for item in items if item.get_closest_marker("background")}
    items.sort(key=lambda item: item.path in waiting)


def pytest_collection_finish(session):
    """Give Spark's JVMs their class archive if tests that start Spark will run (a
    run of local tests alone does not make it), then start the background jobs of
    the tests that will run, in the tests' order."""
    if _OWN_JVM_OPTIONS and any(_starts_spark(item) for item in session.items):
        os.environ["SPARK_SUBMIT_OPTS"] = jvm_options(Path(tempfile.gettempdir()) / "statemachines-tests")
    names = [marker.args[0] for item in session.items for marker in item.iter_markers("background")]
    background.start(dict.fromkeys(names))


def pytest_sessionfinish(session):
    background.stop()
    if _xdist_controller(session.config):
        shutil.rmtree(background.shared(session.config.getoption("testrunuid")), ignore_errors=True)


def _xdist_controller(config) -> bool:
    """Whether this process hands the tests out to xdist workers."""
    return not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))


def _starts_spark(item) -> bool:
    """Whether a test runs Spark: marked so (as a test waiting for a job that starts
    Spark is), or using the session (a test missed here only starts its JVMs
    without the archive)."""
    return any(item.iter_markers("spark")) or "spark" in getattr(item, "fixturenames", ())
