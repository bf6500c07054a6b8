"""Checking a batch of events in bulk (``Intake.sound_in_bulk``) passes only columns
whose every event the one-by-one check would take as it is.

A Spark task checks each Arrow batch of events at once; when the batch passes, its
events skip the per-event checks but the machine's own ``validate_symbol``. A batch
holding anything the per-event checks would reject or change must not pass.
"""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import Intake
from statemachines.intake import INT64_MAX
from statemachines.spark.batch import key_runs
from tests.machines import Fragile

KEYS = {
    "text": (pa.string(), st.one_of(st.sampled_from(["a", "b"]), st.none())),
    "long": (pa.int64(), st.integers(-3, 3)),
    "large text": (pa.large_string(), st.sampled_from(["a", "b"])),  # Spark's with useLargeVarTypes
    "double": (pa.float64(), st.sampled_from([1.0, -0.0, 0.0, math.nan])),
}
SYMBOLS = {
    "text": (pa.string(), st.one_of(st.sampled_from(["x", "!no", "boom"]), st.none())),
    "struct": (pa.struct([("kind", pa.string()), ("n", pa.int32())]), st.tuples(st.sampled_from(["x", "y"]), st.integers(0, 2))),
    "struct with a double": (pa.struct([("n", pa.float64())]), st.tuples(st.sampled_from([1.5, math.nan]))),
}
TIMES = {
    "long": (pa.int64(), st.one_of(st.integers(-2, 5), st.sampled_from([INT64_MAX, -(2**63)]), st.none())),
    "double": (pa.float64(), st.sampled_from([0.5, 2.0, math.inf, math.nan])),
    "date": (pa.date32(), st.dates()),
}
ORDERS = {
    "long": (pa.int64(), st.one_of(st.integers(0, 3), st.none())),
    "text": (pa.string(), st.sampled_from(["a", "b"])),
    "null": (pa.int64(), st.none()),
}


@st.composite
def columns(draw):
    """Typed columns of events, mostly clean, and their rows as Python reads them."""
    kinds = [draw(st.sampled_from(sorted(options))) for options in (KEYS, SYMBOLS, TIMES, ORDERS)]
    n = draw(st.integers(1, 8))
    arrays, rows = [], []
    for kind, options in zip(kinds, (KEYS, SYMBOLS, TIMES, ORDERS), strict=True):
        arrow_type, values = options[kind]
        column = draw(st.lists(values, min_size=n, max_size=n))
        if isinstance(arrow_type, pa.StructType):
            arrays.append(pa.array([dict(zip(arrow_type.names, v, strict=True)) for v in column], arrow_type))
        else:
            arrays.append(pa.array(column, arrow_type))
        rows.append(column)
    return arrays, list(zip(*rows, strict=True))


@settings(max_examples=400, deadline=None)
@given(columns(), st.sampled_from([None, 0, 2]))
def test_columns_that_pass_in_bulk_hold_only_events_the_per_event_check_takes_as_they_are(given_columns, frontier):
    arrays, rows = given_columns
    if not Intake(Fragile(), kind="number").sound_in_bulk(*arrays, frontier):
        return
    one_by_one, in_bulk = Intake(Fragile(), kind="number"), Intake(Fragile(), kind="number")
    for raw in rows:  # the same event, or the same rejection (a symbol Fragile refuses)
        checked, bulk = one_by_one.check(raw, frontier), in_bulk.check_symbol(raw)
        assert (type(bulk), bulk) == (type(checked), checked)


def test_clean_columns_pass_and_each_flaw_alone_fails():
    clean = [pa.array(["a", "b"]), pa.array(["x", "y"]), pa.array([1, 2], pa.int64()), pa.array([None, None], pa.int64())]
    intake = Intake(Fragile(), kind="number")
    assert intake.sound_in_bulk(*clean)
    assert intake.sound_in_bulk(*clean, 1)
    flaws = {
        0: pa.array(["a", None]),  # a null key
        1: pa.array([1.5, math.nan]),  # symbols that may hold NaN
        2: pa.array([1, INT64_MAX], pa.int64()),  # the greatest long
        3: pa.array([0, None], pa.int64()),  # orders some null
    }
    for position, flaw in flaws.items():
        flawed = list(clean)
        flawed[position] = flaw
        assert not intake.sound_in_bulk(*flawed)
    assert not intake.sound_in_bulk(*clean, 2)  # an event below the frontier
    assert not intake.sound_in_bulk(*clean[:2], pa.array([0.5, math.nan]), clean[3])
    assert not Intake(Fragile(), kind="date").sound_in_bulk(*clean)  # times of another kind


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(KEYS)).flatmap(
    lambda kind: st.lists(KEYS[kind][1], max_size=12).map(lambda keys: (kind, keys))
))
def test_key_runs_cover_the_batch_and_hold_one_key_each(given_keys):
    kind, keys = given_keys
    keys = sorted(keys, key=lambda k: (k is not None, 0 if k is None or k != k else k))
    runs = list(key_runs(pa.array(keys, KEYS[kind][0]), keys))
    assert [i for start, end in runs for i in range(start, end)] == list(range(len(keys)))
    for start, end in runs:
        assert start < end
        assert all(keys[i] is keys[start] or keys[i] == keys[start] for i in range(start + 1, end))  # NaN: one key
        if end < len(keys) and keys[end] is not None:  # runs are whole (null keys the caller joins)
            assert keys[end] is not keys[end - 1] and keys[end] != keys[end - 1]
