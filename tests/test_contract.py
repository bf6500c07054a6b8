"""One contract, every runtime: the local runtime, Spark batch (generic and native)."""

from __future__ import annotations

import pytest

from library import Upsert
from statemachines import PersistedArrangement, consolidate, run_local
from tests.contract import CASES


def run_local_case(case, tmp_path):
    if case.before:
        arr = PersistedArrangement(tmp_path / "arr")
        run_local(case.machine, case.before, into=arr)
        result = run_local(case.machine, case.events, into=arr)
    else:
        result = run_local(case.machine, case.events)
    rejected = [(r.event.key, r.event.time, r.reason) for r in result.rejected]
    return result.updates, rejected


def spark_runner(native):
    def run(case, tmp_path, spark):
        from spark_runtime import run_batch

        into = None
        if case.before:
            into = tmp_path / "arr"
            first = spark.createDataFrame(case.before, case.schema)
            run_batch(case.machine, first, order="order", into=into, value_type=case.value_type, native=native)
        frame = spark.createDataFrame(case.events, case.schema)
        result = run_batch(
            case.machine, frame, order="order", into=into, value_type=case.value_type, native=native
        )
        updates = consolidate(
            ((r.key, tuple(r.value) if isinstance(r.value, tuple) else r.value), r.time, r.diff)
            for r in result.updates.collect()
        )
        rejected = [(r.key, r.time, r.reason) for r in result.rejected.collect()]
        return updates, rejected

    return run


@pytest.fixture(
    params=[
        "local",
        pytest.param("spark", marks=pytest.mark.spark),
        pytest.param("spark-native", marks=pytest.mark.spark),
    ]
)
def runtime(request):
    if request.param == "local":
        return lambda case, tmp_path: run_local_case(case, tmp_path)
    spark = request.getfixturevalue("spark")
    run = spark_runner(native=request.param == "spark-native")
    return lambda case, tmp_path: run(case, tmp_path, spark)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_contract(runtime, case, tmp_path, request):
    if "native" in request.node.callspec.id and type(case.machine) is not Upsert:
        pytest.skip("no native path for this machine")
    updates, rejected = runtime(case, tmp_path)
    assert updates == case.expected
    assert sorted(rejected, key=repr) == sorted(case.rejected, key=repr)
