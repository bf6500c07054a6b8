"""Bad times and orders on every runtime, as properties: every input event is either
applied or rejected (with the naive model's reason), nothing hangs, and the
arrangement's ``upper`` stays finite."""

from __future__ import annotations

import concurrent.futures
import math
import tempfile

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from statemachines import PersistedArrangement, Reason, consolidate, run_local
from statemachines.library import Upsert

SCHEMA = "key string, symbol string, time double, order double"
BOUND_SECONDS = 240  # a run that takes longer counts as a hang

rows_of = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["x", "y", None]),
        st.one_of(st.integers(0, 12).map(float), st.sampled_from([math.nan, math.inf, -math.inf])),
        st.sampled_from([None, 0.0, 1.0, math.nan]),
    ),
    min_size=1,
    max_size=25,
)


def naive_reason(row):
    """Why a row must be rejected, decided apart from the runtimes (``None``: it applies)."""
    _, _, time, order = row
    if not math.isfinite(time):
        return Reason.BAD_TIME
    if order is not None and math.isnan(order):
        return Reason.BAD_ORDER
    return None


def bounded(run, *args):
    """``run(*args)``, failing the test if it does not end within the bound."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(run, *args).result(timeout=BOUND_SECONDS)
    finally:
        pool.shutdown(wait=False)


def local_run(rows, path, spark):
    arrangement = PersistedArrangement(path)
    result = run_local(Upsert(), rows, into=arrangement)
    return arrangement.updates(), [r.reason for r in result.rejected]


def spark_batch(native):
    def run(rows, path, spark):
        from statemachines.spark import run_batch

        frame = spark.createDataFrame(rows, SCHEMA)
        result = run_batch(Upsert(), frame, order="order", into=path, native=native)
        rejected = [r.reason for r in result.rejected.collect()]
        result.unpersist()
        return PersistedArrangement(path).updates(), rejected

    return run


def spark_stream(rows, path, spark):
    """The rows as one file, then a far-future event that makes every time final."""
    import pathlib

    from statemachines.spark import read_rejected, run_stream

    source = pathlib.Path(path + "-in")
    flush = ("~flush", None, 1e9, None)
    for i, part in enumerate([rows, [flush]]):
        spark.createDataFrame(part, SCHEMA).coalesce(1).write.parquet(str(source / f"{i:02d}"))
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).option(
        "recursiveFileLookup", "true"
    ).parquet(str(source))
    run_stream(
        Upsert(), frame, into=path, checkpoint=path + "-ckpt", order="order",
        trigger={"availableNow": True}, progress=None,
    ).awaitTermination()
    found = read_rejected(spark, path)
    rejected = [] if found is None else [r.reason for r in found.collect()]
    return [u for u in PersistedArrangement(path).updates() if u[0][0] != "~flush"], rejected


RUNTIMES = {
    "local": (local_run, 40),
    "spark generic": (spark_batch(False), 6),
    "spark native": (spark_batch(True), 6),
    "spark stream": (spark_stream, 2),  # besides the explicit example; each a streaming query
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=[] if name == "local" else [pytest.mark.spark]) for name in RUNTIMES],
)
def test_every_event_is_applied_or_rejected_nothing_hangs_and_upper_stays_finite(name, request, tmp_path):
    run, examples = RUNTIMES[name]
    spark = None if name == "local" else request.getfixturevalue("spark")

    phases = list(Phase) if name == "local" else [Phase.explicit, Phase.generate]  # Spark: no shrinking
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), phases=phases)
    @given(rows=rows_of)
    @example(rows=[("a", "x", 1.0, None), ("b", "y", math.nan, None), ("a", None, math.inf, 0.0)])
    def check(rows):
        path = tempfile.mkdtemp(prefix="intake-", dir=tmp_path) + "/arr"
        updates, rejected = bounded(run, rows, path, spark)
        expected = [naive_reason(r) for r in rows]
        assert sorted(rejected) == sorted(r for r in expected if r is not None)
        good = [row for row, reason in zip(rows, expected, strict=True) if reason is None]
        assert len(good) + len(rejected) == len(rows)
        assert consolidate(updates) == run_local(Upsert(), good).updates
        upper = PersistedArrangement.open(path).upper if good else None
        assert upper is None or math.isfinite(upper)

    check()
