"""Orders that cannot be compared, and integer times outside 64 bits, are rejected on every runtime.

Before, an order of another type (``"x"`` beside integers) crashed the run and lost
the other keys' events, a NaN order made the result depend on arrival order, and a
time above 2**63 crashed the Parquet writer of a persisted run.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import PersistedArrangement, consolidate, run_local
from statemachines.library import Upsert
from tests.machines import Tags

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # the greatest long is kept as the time after the greatest time

ORDERS = st.one_of(
    st.none(),
    st.integers(0, 3),
    st.sampled_from([0.5, 2.5, math.nan]),
    st.sampled_from(["a", "b"]),
    st.tuples(st.integers(0, 2), st.sampled_from(["a", "b"])),
    st.sampled_from([True, b"x", (1, None)]),
)


def comparable_kind(order):
    """A naive classification, written apart from the runtime's."""
    if isinstance(order, bool) or (isinstance(order, float) and math.isnan(order)):
        return None
    if isinstance(order, int | float):
        return "number"
    if isinstance(order, str | bytes):
        return type(order).__name__
    if isinstance(order, tuple) and len(order) == 2 and type(order[0]) is int and type(order[1]) is str:
        return "int-str tuple"
    return None


def accepted(rows):
    """The events a run accepts: the first comparable order fixes the kind the others must share."""
    kind, kept = None, []
    for row in rows:
        order = row[3]
        if order is not None:
            found = comparable_kind(order)
            if found is None or (kind is not None and found != kind):
                continue
            kind = found
        kept.append(row)
    return kept


events = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y", "z"]), st.integers(0, 4), ORDERS),
    max_size=30,
)


@pytest.mark.parametrize("machine", [Upsert(), Tags()], ids=["upsert", "user machine"])
@given(rows=events)
def test_an_order_that_cannot_be_compared_is_rejected_and_changes_nothing_else(machine, rows):
    if isinstance(machine, Tags):
        rows = [(k, ("add", s), t, o) for k, s, t, o in rows]
    kept = accepted(rows)
    result = run_local(machine, rows)  # never raises
    assert len(rows) == len(kept) + len(result.rejected)
    assert {r.reason.value for r in result.rejected} <= {"bad_order"}
    assert result.updates == run_local(machine, kept).updates


@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y", "z"]), st.integers(0, 3),
                  st.sampled_from([None, 0, 1, 2, math.nan])),
        max_size=20,
    ),
    data=st.data(),
)
def test_nan_orders_no_longer_make_the_result_depend_on_arrival_order(rows, data):
    shuffled = data.draw(st.permutations(rows))
    assert run_local(Upsert(), shuffled).updates == run_local(Upsert(), rows).updates


STRUCT_ORDER_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]), st.sampled_from(["x", "y", "z"]), st.integers(0, 3),
        st.none() | st.tuples(*[st.sampled_from([None, 0.0, 1.0, math.nan])] * 2),
    ),
    max_size=20,
)


@given(rows=STRUCT_ORDER_ROWS)
def test_struct_orders_holding_nan_or_null_are_rejected_as_tuples_holding_them_are(rows):
    """A table's struct order arrives as a record (a tuple with field names); one that
    holds a NaN or a null compares with nothing, whatever the records before it were."""
    import pyarrow as pa

    struct = pa.struct([("a", pa.float64()), ("b", pa.float64())])
    table = pa.table({
        "key": [r[0] for r in rows], "symbol": [r[1] for r in rows], "time": pa.array([r[2] for r in rows], pa.int64()),
        "order": pa.array([None if r[3] is None else dict(zip("ab", r[3], strict=True)) for r in rows], struct),
    })
    as_tuples = run_local(Upsert(), rows)
    as_records = run_local(Upsert(), table)
    assert as_records.updates == as_tuples.updates
    assert sorted((r.event.time, r.reason.value) for r in as_records.rejected) == sorted(
        (r.event.time, r.reason.value) for r in as_tuples.rejected
    )


times = st.one_of(
    st.integers(-5, 20),
    st.sampled_from([INT64_MIN, INT64_MAX - 1, INT64_MAX, INT64_MAX + 1, 2**70, INT64_MIN - 1]),
)


@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), times), max_size=20))
def test_integer_times_outside_64_bits_are_rejected_and_a_persisted_run_keeps_a_finite_upper(rows, tmp_path_factory):
    inside = [r for r in rows if INT64_MIN <= r[2] < INT64_MAX]
    result = run_local(Upsert(), rows)
    assert [r.reason.value for r in result.rejected] == ["bad_time"] * (len(rows) - len(inside))
    assert result.updates == run_local(Upsert(), inside).updates
    arrangement = PersistedArrangement(tmp_path_factory.mktemp("arr"))
    run_local(Upsert(), rows, into=arrangement)  # writes Parquet: every time fits int64
    assert arrangement.upper is None or INT64_MIN < arrangement.upper <= INT64_MAX
    assert PersistedArrangement(arrangement.path).updates() == arrangement.updates()


def test_a_checkpoint_keeps_the_order_kind():
    from statemachines import LocalRuntime

    runtime = LocalRuntime(Tags())
    runtime.feed([("k", ("add", "a"), 5, 1)])
    restored = LocalRuntime.restore(Tags(), runtime.checkpoint())
    restored.feed([("k", ("add", "b"), 5, "x")])  # would not compare with the buffered 1
    result = restored.finish()
    assert [r.reason.value for r in result.rejected] == ["bad_order"]
    assert result.updates == run_local(Tags(), [("k", ("add", "a"), 5, 1)]).updates


@pytest.mark.spark
@pytest.mark.parametrize("run", ["generic", "native", "stream"])
def test_spark_rejects_struct_orders_holding_nan_or_null_as_the_local_runtime_does(spark, tmp_path, run):
    """The native upsert checks the struct in SQL, the generic path and the streaming
    buckets in the intake (the stream failed on comparing a null with a number)."""
    from statemachines.spark import run_batch
    from tests.contract import Case
    from tests.test_contract import stream_runner

    rows = [
        ("a", "x", 1, (0.0, 1.0)), ("a", "y", 1, (0.0, math.nan)), ("a", "z", 1, (0.0, None)),
        ("b", "w", 2, (1.0, 2.0)), ("b", "v", 2, None), ("c", "u", 3, (math.nan, 0.0)),
    ]
    schema = "key string, symbol string, time long, order struct<a: double, b: double>"
    local = run_local(Upsert(), rows)
    assert {r.reason.value for r in local.rejected} == {"bad_order"} and len(local.rejected) == 3
    if run == "stream":
        updates, rejected = stream_runner(Case("struct orders", Upsert(), rows, [], schema=schema), tmp_path, spark)
        assert sorted(r[2] for r in rejected) == sorted(r.reason.value for r in local.rejected)
    else:
        result = run_batch(Upsert(), spark.createDataFrame(rows, schema), order="order", native=run == "native")
        updates = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
        refused = sorted((r.key, r.symbol, r.reason) for r in result.rejected.collect())
        assert refused == sorted((r.event.key, r.event.symbol, r.reason.value) for r in local.rejected)
    assert updates == local.updates


@pytest.mark.spark
@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
def test_spark_batch_rejects_nan_orders_and_the_greatest_long_as_the_local_runtime_does(spark, native):
    from statemachines.spark import run_batch

    rows = [
        ("a", "x", 1, 0.0), ("a", "y", 1, math.nan), ("b", "z", 2, 1.0), ("b", "w", 2, math.nan),
        ("c", "v", INT64_MAX, 0.0), ("c", "u", INT64_MAX - 1, 2.0),
    ]
    frame = spark.createDataFrame(rows, "key string, symbol string, time long, order double")
    result = run_batch(Upsert(), frame, order="order", native=native)
    updates = consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect())
    local = run_local(Upsert(), rows)
    assert updates == local.updates
    assert sorted((r.reason.value, r.detail) for r in local.rejected) == [
        ("bad_order", "order nan of type float cannot be compared")] * 2 + [
        ("bad_time", f"time {INT64_MAX} is outside the 64-bit integer range [-2**63, 2**63 - 1)")]
    assert sorted((r.key, r.reason, r.detail) for r in result.rejected.collect()) == sorted(
        (r.event.key, r.reason.value, r.detail) for r in local.rejected
    )


@pytest.mark.spark
def test_a_decimal_time_column_is_refused_before_anything_runs(spark, tmp_path):
    from statemachines import InvalidArgument
    from statemachines.spark import run_batch

    frame = spark.createDataFrame([("a", "x", 1)], "key string, symbol string, time long")
    decimal = frame.selectExpr("key", "symbol", "cast(time as decimal(20,0)) as time")
    with pytest.raises(InvalidArgument, match=r"decimal\(20,0\).*cast"):
        run_batch(Upsert(), decimal, into=tmp_path / "arr")
    assert not (tmp_path / "arr").exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("schema", "rows", "value_type"),
    [
        ("symbol string", ["3", "x", None, "4"], "bigint"),  # strings never fit a number column
        ("symbol bigint", [1, 2**40, None, 3], "int"),  # narrower: 2**40 does not fit
        ("symbol int", [1, 2, None, 3], "double"),  # wider: the native path applies
        ("symbol struct<a: bigint, b: string>", [(1, "x"), None, (2, "y"), (1, "x")], "struct<a: bigint, b: string, c: int>"),
    ],
    ids=["string into bigint", "bigint into int", "int into double", "struct into a wider struct"],
)
def test_the_native_upsert_gives_the_generic_results_when_symbol_and_value_types_differ(spark, schema, rows, value_type):
    from statemachines.spark import run_batch

    events = [("k" if i % 2 else "j", symbol, i, None) for i, symbol in enumerate(rows)]
    frame = spark.createDataFrame(events, f"key string, {schema}, time long, order long")
    results = {}
    for native in (False, True):
        result = run_batch(Upsert(), frame, value_type=value_type, native=native)
        results[native] = (
            sorted(map(tuple, result.updates.collect()), key=repr),
            sorted(((r.key, r.time, r.reason, r.detail) for r in result.rejected.collect()), key=repr),
        )
    assert results[True] == results[False]
