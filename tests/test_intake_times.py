"""Times that are not finite (NaN, infinities) are rejected as ``bad_time`` on every runtime."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import consolidate, run_local
from statemachines.library import Upsert
from tests.machines import Tags

NOT_FINITE = [math.nan, math.inf, -math.inf]

events = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["x", "y", "z"]),
        st.one_of(st.integers(0, 20).map(float), st.sampled_from(NOT_FINITE)),
    ),
    max_size=30,
)


def split(rows):
    finite = [r for r in rows if math.isfinite(r[2])]
    return finite, len(rows) - len(finite)


@pytest.mark.parametrize("machine", [Upsert(), Tags()], ids=["upsert", "user machine"])
@given(rows=events)
def test_a_not_finite_time_is_rejected_and_changes_nothing_else(machine, rows):
    if isinstance(machine, Tags):
        rows = [(k, ("add", s), t) for k, s, t in rows]
    finite, bad = split(rows)
    result = run_local(machine, rows)
    assert [r.reason.value for r in result.rejected] == ["bad_time"] * bad
    assert result.updates == run_local(machine, finite).updates
    assert all(math.isfinite(u.time) for u in result.updates)


@pytest.mark.spark
@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_spark_batch_rejects_not_finite_times_as_the_local_runtime_does(spark, native):
    from statemachines.spark import run_batch

    rows = [("a", "x", 1.0), ("a", "y", math.nan), ("b", "z", math.inf), ("a", "w", 2.0), ("c", "v", -math.inf)]
    frame = spark.createDataFrame(rows, "key string, symbol string, time double")
    result = run_batch(Upsert(), frame, native=native)
    updates = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    local = run_local(Upsert(), rows)
    assert updates == local.updates
    assert sorted((r.key, r.reason, r.detail) for r in result.rejected.collect()) == sorted(
        (r.event.key, r.reason.value, r.detail) for r in local.rejected
    )
