"""Sizes far from the usual: one key with very many events at one time, a very large
value, a key whose value set grows large. Each runtime handles them exactly (the
checks compare with answers computed independently) or names the limit it hit."""

from __future__ import annotations

import pytest

from statemachines import PersistedArrangement, event_rank, run_local
from statemachines.library import Upsert
from tests.machines import Tags

SAME_TIME = 100_000
BIG_VALUE = 20 * 2**20  # 20 MiB
# A transition returns the key's whole next set, so each event costs O(set size):
# a key growing to n values costs O(n^2) in all (50,000 values: ~20 s). Kept modest.
MANY_VALUES = 10_000


def same_time_events():
    return [("hot", f"v{i % 977}", 7, i % 1013) for i in range(SAME_TIME)]


def last_by_rank(events):
    return max(events, key=lambda e: event_rank(e[3], e[1]))[1]


def tag_events():
    return [("doc", ("add", f"t{i}"), i % 3, None) for i in range(MANY_VALUES)]


def test_local_runtime_handles_every_size(tmp_path):
    events = same_time_events()
    result = run_local(Upsert(), events)
    assert [(u.data, u.diff) for u in result.updates] == [(("hot", last_by_rank(events)), 1)]

    big = "x" * BIG_VALUE
    arrangement = PersistedArrangement(tmp_path)
    run_local(Upsert(), [("k", big, 1), ("k", big + "y", 2)], into=arrangement)
    assert PersistedArrangement(tmp_path).values("k") == {big + "y"}

    tags = run_local(Tags(), tag_events())
    assert len(tags.updates) == MANY_VALUES
    assert {u.data[1] for u in tags.updates} == {f"t{i}" for i in range(MANY_VALUES)}


@pytest.mark.spark
def test_spark_handles_every_size(spark, tmp_path):
    from statemachines.spark import run_batch

    events = same_time_events()
    frame = spark.createDataFrame(events, "key string, symbol string, time long, order long")
    for native in (False, True):
        rows = run_batch(Upsert(), frame, order="order", native=native).updates.collect()
        assert [((r.key, r.value), r.diff) for r in rows] == [(("hot", last_by_rank(events)), 1)]

    big = "x" * BIG_VALUE
    frame = spark.createDataFrame([("k", big, 1), ("k", big + "y", 2)], "key string, symbol string, time long")
    run_batch(Upsert(), frame, into=tmp_path / "big", native=False)
    assert PersistedArrangement(tmp_path / "big").values("k") == {big + "y"}

    schema = "key string, symbol struct<op: string, tag: string>, time long, order long"
    tags = run_batch(Tags(), spark.createDataFrame(tag_events(), schema), order="order", value_type="string")
    values = [r.value for r in tags.updates.collect()]
    assert sorted(values) == sorted(f"t{i}" for i in range(MANY_VALUES))
