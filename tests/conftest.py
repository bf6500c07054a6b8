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
from tests.servers import JVM_OPTIONS, jvm_options, make_class_archive

# every Spark driver the tests start (see tests/servers.py), with the class archive
# once it is made (pytest_collection_finish); xdist's workers inherit the options
# their controller set here
_OWN_JVM_OPTIONS = os.environ.get("SPARK_SUBMIT_OPTS", JVM_OPTIONS) == JVM_OPTIONS
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)
CLASS_CACHE = Path(tempfile.gettempdir()) / "statemachines-tests"

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
    if _OWN_JVM_OPTIONS:  # the class archive, if the background job has made it by now
        os.environ["SPARK_SUBMIT_OPTS"] = jvm_options(CLASS_CACHE)
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
    """Start the background jobs of the tests that will run, in the tests' order.

    If tests that start Spark will run (a run of local tests alone does not make
    it), Spark's JVMs get their class archive: at once if an earlier run made it,
    else the first background job makes it (about a minute on one core, while the
    tests run) and the JVMs started after it get it."""
    names = [marker.args[0] for item in session.items for marker in item.iter_markers("background")]
    if _OWN_JVM_OPTIONS and any(_starts_spark(item) for item in session.items):
        os.environ["SPARK_SUBMIT_OPTS"] = jvm_options(CLASS_CACHE)
        if os.environ["SPARK_SUBMIT_OPTS"] == JVM_OPTIONS:
            names.insert(0, "class archive")
    background.start(dict.fromkeys(names))


@background.job("class archive")
def class_archive_job(work: Path) -> None:
    """Make Spark's class archive; the jobs after this one start their JVMs with it."""
    make_class_archive(CLASS_CACHE)
    background.update_environment(SPARK_SUBMIT_OPTS=jvm_options(CLASS_CACHE))


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
