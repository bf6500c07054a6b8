"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from tests import background
from tests.servers import jvm_options

# every Spark driver the tests start (see tests/servers.py)
if "SPARK_SUBMIT_OPTS" not in os.environ:
    os.environ["SPARK_SUBMIT_OPTS"] = jvm_options(Path(tempfile.gettempdir()) / "statemachines-tests")

settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole test run (2 cores, few partitions)."""
    from statemachines.spark import local_session

    session = local_session(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The modules whose tests wait for background jobs run last, in their order."""
    waiting = {item.path for item in items if item.get_closest_marker("background")}
    items.sort(key=lambda item: item.path in waiting)


def pytest_collection_finish(session):
    """Start the background jobs of the tests that will run, in the tests' order."""
    names = [marker.args[0] for item in session.items for marker in item.iter_markers("background")]
    background.start(dict.fromkeys(names))


def pytest_sessionfinish(session):
    background.stop()
