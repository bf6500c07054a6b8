"""Times that are not finite (NaN, infinities), and the greatest datetime or date, are
rejected as ``bad_time`` on every runtime."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import Arrangement, Machine, PersistedArrangement, Reason, consolidate, run_local
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


GREATEST = {
    "datetime": dt.datetime.max,
    "utc datetime": dt.datetime.max.replace(tzinfo=dt.UTC),
    "date": dt.date.max,
}


@pytest.mark.parametrize("kind", sorted(GREATEST))
@pytest.mark.parametrize("output", ["memory", "arrangement", "persisted"])
def test_the_greatest_datetime_or_date_is_rejected_and_the_run_goes_on(kind, output, tmp_path):
    """No time comes after it, and a run into an arrangement needs one for its upper
    (as for the greatest long): it is ``bad_time``, not a crash."""
    greatest = GREATEST[kind]
    earlier = greatest - dt.timedelta(days=2)
    rows = [("a", "x", earlier), ("b", "y", greatest), ("a", "z", greatest)]
    into = {"memory": None, "arrangement": Arrangement(), "persisted": PersistedArrangement(tmp_path / "arr")}[output]
    result = run_local(Upsert(), rows, into=into)
    assert [(r.event.key, r.reason.value) for r in result.rejected] == [("b", "bad_time"), ("a", "bad_time")]
    assert "is the greatest" in result.rejected[0].detail
    assert result.updates == run_local(Upsert(), rows[:1]).updates
    if into is not None:
        assert into.upper > earlier


@pytest.mark.spark
@pytest.mark.parametrize("native", [False, True], ids=["generic", "native"])
@pytest.mark.parametrize(("column", "greatest"), [("timestamp", GREATEST["utc datetime"]), ("timestamp_ntz", GREATEST["datetime"]), ("date", GREATEST["date"])])
def test_spark_batch_rejects_the_greatest_time_as_the_local_runtime_does(spark, tmp_path, native, column, greatest):
    from statemachines.spark import run_batch

    earlier = greatest - dt.timedelta(days=2)
    rows = [("a", "x", earlier), ("b", "y", greatest), ("a", "z", greatest)]
    frame = spark.createDataFrame(rows, f"key string, symbol string, time {column}")
    result = run_batch(Upsert(), frame, native=native, into=tmp_path / "arr")
    local = run_local(Upsert(), rows)
    assert [(r.key, r.value) for r in result.updates.collect()] == [(u.data[0], u.data[1]) for u in local.updates]
    assert sorted((r.key, r.reason, r.detail) for r in result.rejected.collect()) == sorted(
        (r.event.key, r.reason.value, r.detail) for r in local.rejected
    )
    assert result.published and result.upper is not None


@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from("xyz"), st.integers(0, 4), st.integers(0, 2)), max_size=12))
def test_pandas_times_finer_than_a_microsecond_are_rejected_on_every_output(rows, tmp_path_factory):
    """A persisted arrangement, as Spark and Delta, keeps times to the microsecond:
    two pandas Timestamps a nanosecond apart would be one time there. Such a time is
    rejected as bad_time, in memory as into an arrangement; the other events run as if alone."""
    import pandas as pd

    events = [(k, v, pd.Timestamp("2024-01-01") + pd.Timedelta(microseconds=us, nanoseconds=ns)) for k, v, us, ns in rows]
    kept = [e for e, row in zip(events, rows, strict=True) if row[3] == 0]
    alone = run_local(Upsert(), kept).updates
    target = PersistedArrangement(tmp_path_factory.mktemp("ns"))
    for result in (run_local(Upsert(), events), run_local(Upsert(), events, into=target)):
        assert [tuple(r.event)[:3] for r in result.rejected] == [e for e in events if e not in kept]
        assert all(r.reason == Reason.BAD_TIME and "microsecond" in r.detail for r in result.rejected)
        assert result.updates == alone
    assert PersistedArrangement.open(target.path).updates() == alone


ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"]


@given(
    rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 5), st.sampled_from(ZONES)), max_size=12),
    value_zone=st.sampled_from(ZONES),
)
def test_times_and_values_of_any_zone_store_as_the_same_instants(rows, value_zone, tmp_path_factory):
    """Delta holds timestamps in UTC alone: times, keys and values zoned elsewhere
    (hours apart across a change of daylight saving time) are stored as the same
    instants and read back equal, where a run into an arrangement had failed."""
    from zoneinfo import ZoneInfo

    start = dt.datetime(2024, 10, 27, 0, 30, tzinfo=dt.UTC)  # Paris leaves summer time at 01:00 UTC
    events = [
        (key, (start + dt.timedelta(hours=v)).astimezone(ZoneInfo(value_zone)), (start + dt.timedelta(minutes=30 * t)).astimezone(ZoneInfo(zone)))
        for key, v, t, zone in rows
    ]
    target = PersistedArrangement(tmp_path_factory.mktemp("zones"))
    result = run_local(Upsert(), events, into=target)
    assert not result.rejected and in_utc(result.updates) == in_utc(run_local(Upsert(), events).updates)
    reopened = PersistedArrangement.open(target.path)
    assert in_utc(reopened.updates()) == in_utc(result.updates) and reopened.upper == target.upper


def in_utc(updates):
    """The updates, their zoned datetimes in UTC: Python finds a time in a repeated
    hour (02:30 in Paris as summer time ends) equal to no time of another zone."""
    def utc(moment):
        return moment.astimezone(dt.UTC)

    return [((k, utc(v)), utc(t), d) for (k, v), t, d in updates]


@given(
    rows=st.lists(st.tuples(st.sampled_from(["k", "j"]), st.sampled_from("ab"), st.integers(0, 16), st.sampled_from(ZONES)), max_size=14),
)
def test_a_window_counts_elapsed_time_whatever_zone_its_times_are_given_in(rows):
    """A pattern within an hour, over events a quarter of an hour apart around the
    night Paris and New York repeat an hour: given in any zones, the events find
    what they find given in UTC (a window had counted wall-clock time, an hour short
    or long across the change, and the repeated hour's times had compared equal)."""
    from zoneinfo import ZoneInfo

    from statemachines.library import Detector, Pattern

    pattern = Pattern.begin("a").where(lambda s: s == "a").followed_by("b").where(lambda s: s == "b").within(dt.timedelta(hours=1))
    start = dt.datetime(2024, 10, 27, 0, 0, tzinfo=dt.UTC)
    moments = {(q, zone): (start + dt.timedelta(minutes=15 * q)).astimezone(ZoneInfo(zone)) for _, _, q, zone in rows}
    given_in_utc = [(key, symbol, start + dt.timedelta(minutes=15 * q)) for key, symbol, q, _ in rows]
    given_zoned = [(key, symbol, moments[q, zone]) for key, symbol, q, zone in rows]
    assert run_local(Detector(pattern), given_zoned).updates == run_local(Detector(pattern), given_in_utc).updates


NUMPY_TIMES = {  # a NumPy time kind: the NumPy and the Python time of a whole number
    "int64": (lambda t: np.int64(t), lambda t: t),
    "float64": (lambda t: np.float64(t), float),
    "datetime64[s]": (
        lambda t: np.datetime64("2024-01-01T00:00:00") + np.timedelta64(t, "s"),
        lambda t: dt.datetime(2024, 1, 1) + dt.timedelta(seconds=t),
    ),
    "datetime64[D]": (lambda t: np.datetime64("2024-01-01") + np.timedelta64(t, "D"), lambda t: dt.date(2024, 1, 1) + dt.timedelta(t)),
}
NUMPY_VALUES = {  # a NumPy value kind: each of three readings as NumPy and as Python
    "float64": (np.float64, [1.5, 2.0, math.nan]),
    "int64": (np.int64, [1, 2, -3]),
    "bool": (np.bool_, [True, False, True]),
    "datetime64[s]": (np.datetime64, ["2024-01-01T00:00:00", "2024-01-02T03:04:05", "1970-01-01T00:00:00"]),
}


class Reading(Machine):
    """A key's value: the reading its symbol (0, 1 or 2) names, made a NumPy scalar
    by ``kind`` (with ``kind`` ``None``, the reading as it is)."""

    def __init__(self, kind, readings):
        self.kind, self.readings = kind, readings

    def transition(self, key, values, symbol, time):
        reading = self.readings[symbol]
        return {reading if self.kind is None else self.kind(reading)}


@given(
    rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 6)), max_size=15),
    value_kind=st.sampled_from(sorted(NUMPY_VALUES)),
)
def test_values_a_machine_computes_with_numpy_are_the_python_values_they_hold(rows, value_kind, tmp_path_factory):
    numpy_value, readings = NUMPY_VALUES[value_kind]
    computed = {
        "numpy": Reading(numpy_value, readings),
        "python": Reading(None, [numpy_value(r).item() for r in readings]),
    }
    found = {name: run_local(machine, rows).updates for name, machine in computed.items()}
    assert found["numpy"] == found["python"]
    assert not [u for u in found["numpy"] if type(u.data[1]).__module__ == "numpy"]
    stored = {}
    for name, machine in computed.items():
        target = PersistedArrangement(tmp_path_factory.mktemp(name))
        assert not run_local(machine, rows, into=target).rejected
        stored[name] = repr(PersistedArrangement.open(target.path).updates())
    assert stored["numpy"] == stored["python"]


@given(
    rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 6), st.integers(0, 2)), max_size=15),
    time_kind=st.sampled_from(sorted(NUMPY_TIMES)),
    value_kind=st.sampled_from(sorted(NUMPY_VALUES)),
)
def test_numpy_scalars_run_as_the_python_values_they_hold(rows, time_kind, value_kind, tmp_path_factory):
    """Events from NumPy arrays (``zip(*(df[c].to_numpy() for c in ...))``) hold NumPy
    scalars: int64, float64 or datetime64 times, int64 orders, readings of several
    kinds (NaN among them). They run as the Python values they hold, in memory and
    into a persisted arrangement, whose state must record its upper as a plain time."""
    numpy_time, python_time = NUMPY_TIMES[time_kind]
    numpy_value, readings = NUMPY_VALUES[value_kind]
    numpy_rows = [(k, numpy_value(readings[v]), numpy_time(t), np.int64(o)) for k, v, t, o in rows]
    python_rows = [(k, numpy_value(readings[v]).item(), python_time(t), o) for k, v, t, o in rows]
    from_numpy = run_local(Upsert(), numpy_rows).updates
    assert from_numpy == run_local(Upsert(), python_rows).updates
    assert not [x for u in from_numpy for x in (*u.data, u.time) if type(x).__module__ == "numpy"]  # a machine sees Python's
    stored = {}
    for name, events in (("numpy", numpy_rows), ("python", python_rows)):
        target = PersistedArrangement(tmp_path_factory.mktemp(name))
        assert not run_local(Upsert(), events, into=target).rejected
        reopened = PersistedArrangement.open(target.path)
        stored[name] = (repr(reopened.updates()), repr(reopened.upper))
    assert stored["numpy"] == stored["python"]


@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5), st.sampled_from(["naive", "utc", "nat"]), st.booleans()),
        max_size=12,
    )
)
def test_naive_and_zoned_datetimes_and_nat_are_sorted_out_not_compared(rows):
    """A naive and a zoned datetime are of one type (datetime, or pandas' Timestamp)
    and do not compare: the first valid time fixes the run's kind, and a time of the
    other kind is ``bad_time``, not a crash; pandas' NaT is a missing time
    (``null_time``), not a time the run waits on forever. The rest runs as alone."""
    import pandas as pd

    def at(day, how, pandas):
        if how == "nat":
            return pd.NaT
        moment = dt.datetime(2026, 1, 1 + day, tzinfo=dt.UTC if how == "utc" else None)
        return pd.Timestamp(moment) if pandas else moment

    events = [(key, f"v{i}", at(day, how, pandas)) for i, (key, day, how, pandas) in enumerate(rows)]
    hows = [how for *_, how, _ in rows]
    first = next((how for how in hows if how != "nat"), None)
    kept = [e for e, how in zip(events, hows, strict=True) if how == first]
    result = run_local(Upsert(), events)
    assert result.updates == run_local(Upsert(), kept).updates
    reasons = sorted(r.reason.value for r in result.rejected)
    assert reasons == sorted("null_time" if how == "nat" else "bad_time" for how in hows if how != first)


def nullable_frame(rows):
    """A pandas DataFrame of ``(key, symbol, time, order)`` rows in nullable columns,
    whose ``itertuples`` hands out ``pd.NA`` for a missing cell and NumPy numbers."""
    import pandas as pd

    columns = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    return pd.DataFrame({
        name: pd.array(list(cells), dtype=dtype)
        for name, cells, dtype in zip(("key", "symbol", "time", "order"), columns, ("string", "string", "Int64", "Int64"),
                                      strict=True)
    })


@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]) | st.none(),
            st.sampled_from(["x", "y"]) | st.none(),
            st.integers(0, 4) | st.none(),
            st.integers(0, 2) | st.none(),
        ),
        max_size=15,
    )
)
def test_pandas_missing_cells_run_as_none(rows):
    """Rows of a DataFrame with nullable columns hold pandas' NA where a cell is
    missing: a missing key is null_key, a missing time null_time, a missing order
    a missing order, a missing symbol None, exactly as the same rows with None."""
    frame_rows = list(nullable_frame(rows).itertuples(index=False, name=None))
    from_frame, from_python = run_local(Upsert(), frame_rows), run_local(Upsert(), rows)
    assert from_frame.updates == from_python.updates
    assert [r.reason for r in from_frame.rejected] == [r.reason for r in from_python.rejected]


@pytest.mark.spark
def test_spark_batch_over_a_nullable_pandas_frame_equals_the_local_run_of_its_rows(spark):
    import pandas as pd

    from statemachines.spark import run_batch

    rows = [("a", "x", 1, None), (None, "y", 1, 0), ("a", None, 2, 1), ("b", "z", None, 0), ("b", "w", 3, None),
            ("a", "v", 2, 0), ("b", None, 4, 2)]
    frame = nullable_frame(rows)
    result = run_batch(Upsert(), spark.createDataFrame(frame), order="order")
    local = run_local(Upsert(), list(frame.itertuples(index=False, name=None)))
    assert consolidate(((r.key, r.value), r.time, r.diff) for r in result.updates.collect()) == local.updates
    assert sorted((r.reason, r.time) for r in result.rejected.collect()) == sorted(
        (r.reason.value, None if r.event.time is pd.NA else r.event.time) for r in local.rejected
    )
    assert local.updates and local.rejected
