"""One contract, every runtime: the local runtime, Spark batch (generic and native)."""

from __future__ import annotations

import pytest

from statemachines import LocalRuntime, PersistedArrangement, consolidate, run_local
from statemachines.library import Upsert
from tests.contract import CASES

ARROW_TYPES = {"string": "string", "bigint": "int64"}  # the cases' plain value types


def run_local_case(case, tmp_path):
    if case.before:
        arr = PersistedArrangement(tmp_path / "arr")
        run_local(case.machine, case.before, into=arr)
        result = run_local(case.machine, case.events, into=arr)
    elif case.value_type in ARROW_TYPES:  # an output column of that type
        import pyarrow as pa

        from statemachines.columns import value_check_for

        runtime = LocalRuntime(case.machine, value_check=value_check_for(pa.type_for_alias(ARROW_TYPES[case.value_type])))
        runtime.feed(case.events)
        result = runtime.finish()
    else:
        result = run_local(case.machine, case.events)
    rejected = [(r.event.key, r.event.time, r.reason) for r in result.rejected]
    return result.updates, rejected


def spark_runner(native):
    def run(case, tmp_path, spark):
        from statemachines.spark import run_batch

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


FLUSH_KEY, FLUSH_TIME = "~flush", 10**6


def stream_runner(case, tmp_path, spark, batches=1, rules=None, rules_schema="rule_id string, pattern_json string, valid_from long"):
    """Streaming, one file per micro-batch: the earlier run, the events (in ``batches``
    micro-batches of consecutive times), then a flush; ``rules``, if given, is a rule
    detector's rules stream, one list of rows per micro-batch.

    The flush event, far in the future, moves the frontier past every time, so all
    events are final and every deadline fires (it stays pending itself, or a machine
    refuses its symbol).
    """
    from statemachines.spark import read_rejected, run_stream

    source = tmp_path / "in"
    files = [case.before] if case.before else []
    if batches > 1:
        by_time = sorted(case.events, key=lambda e: e[2])
        size = -(-len(by_time) // batches)
        files += [by_time[i : i + size] for i in range(0, len(by_time), size)]
    else:
        files += [case.events]
    files += [[(FLUSH_KEY, None, FLUSH_TIME, None)]]
    frame = file_stream(spark, files, case.schema, source)
    arrangement = tmp_path / "arr"
    if rules is not None:
        rules = file_stream(spark, rules, rules_schema, tmp_path / "rules")
    run_stream(
        case.machine, frame, into=arrangement, checkpoint=tmp_path / "ckpt", order="order",
        value_type=case.value_type, trigger={"availableNow": True}, progress=None, rules=rules,
    ).awaitTermination()
    earlier = run_local(case.machine, case.before).updates if case.before else []
    published = PersistedArrangement(arrangement).updates()
    updates = consolidate([*published, *((d, t, -n) for d, t, n in earlier)])
    rejected_frame = read_rejected(spark, arrangement)
    rows = [] if rejected_frame is None else rejected_frame.collect()
    # the flush event is this runner's device, not the case's (a machine may refuse it)
    rejected = [(r.key, r.time, r.reason) for r in rows if r.key != FLUSH_KEY]
    return updates, rejected


def file_stream(spark, files, schema, source):
    """A stream reading the row lists ``files`` as parquet files in ``source``, one
    file per micro-batch, in order. The files are written with pyarrow in the Arrow
    schema Spark gives ``schema`` (a Spark job per file would cost more than the
    micro-batch that reads it)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from tests.remote_job import write_files

    arrow_schema = to_arrow_schema(
        spark.createDataFrame([], schema).schema, timezone=spark.conf.get("spark.sql.session.timeZone")
    )
    write_files(files, str(source), {f.name: f.type for f in arrow_schema})
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))


@pytest.fixture(
    params=[
        "local",
        pytest.param("spark", marks=pytest.mark.spark),
        pytest.param("spark-native", marks=pytest.mark.spark),
        pytest.param("spark-stream", marks=pytest.mark.spark),
    ]
)
def runtime(request):
    if request.param == "local":
        return lambda case, tmp_path: run_local_case(case, tmp_path)
    spark = request.getfixturevalue("spark")
    if request.param == "spark-stream":
        return lambda case, tmp_path: stream_runner(case, tmp_path, spark)
    run = spark_runner(native=request.param == "spark-native")
    return lambda case, tmp_path: run(case, tmp_path, spark)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_contract(runtime, case, tmp_path, request):
    if "native" in request.node.callspec.id and type(case.machine) is not Upsert:
        pytest.skip("no native path for this machine")
    updates, rejected = runtime(case, tmp_path)
    assert updates == case.expected
    assert sorted(rejected, key=repr) == sorted(case.rejected, key=repr)
