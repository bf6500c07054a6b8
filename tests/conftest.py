"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

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
