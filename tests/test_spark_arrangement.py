"""Spark reads a persisted arrangement exactly as Python does."""

from __future__ import annotations

import pytest

from library import Upsert
from spark_runtime import read_history, read_snapshot, read_updates
from statemachines import InvalidArgument, PersistedArrangement, run_local
from tests.machines import Tags

pytestmark = pytest.mark.spark


@pytest.fixture
def customers(tmp_path):
    arr = PersistedArrangement(tmp_path / "customers")
    commands = [
        ("c1", "ann@a.org", 1), ("c2", "bob@b.org", 1), ("c1", "ann@new.org", 3),
        ("c2", None, 4), ("c3", "cy@c.org", 4), ("c2", "bob@back.org", 6),
        ("c1", "ann@a.org", 7),
    ]
    run_local(Upsert(), commands[:4], into=arr, frontier=5)
    run_local(Upsert(), commands[4:], into=arr, frontier=8)
    return arr


def rows(frame, *columns):
    return sorted(tuple(r[c] for c in columns) for r in frame.collect())


def test_spark_reads_the_same_updates_snapshots_and_history(spark, customers):
    path = customers.path
    assert rows(read_updates(spark, path), "key", "value", "time", "diff") == sorted(
        (k, v, t, d) for (k, v), t, d in customers.updates()
    )
    for as_of in (1, 4, 6, None):
        assert rows(read_snapshot(spark, path, as_of), "key", "value", "count") == sorted(
            (k, v, n) for (k, v), n in customers.snapshot(as_of)
        )
    assert rows(read_history(spark, path), "key", "value", "start", "end") == sorted(
        tuple(r) for r in customers.history()
    )


def test_spark_reads_a_compacted_arrangement_at_its_since(spark, customers):
    customers.compact(5)
    path = customers.path
    assert rows(read_updates(spark, path), "key", "value", "time", "diff") == sorted(
        (k, v, t, d) for (k, v), t, d in customers.updates()
    )
    with pytest.raises(InvalidArgument, match="compacted"):
        read_snapshot(spark, path, as_of=4)


def test_pickled_columns_get_a_clear_error(spark, tmp_path):
    arr = PersistedArrangement(tmp_path)
    run_local(Tags(), [(("a", 1), ("add", "x"), 0)], into=arr)
    with pytest.raises(InvalidArgument, match="pickled"):
        read_updates(spark, tmp_path)
