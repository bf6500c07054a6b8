"""Keys and values as typed Arrow columns: tuples built field by field equal tuples
converted one by one, and both read back as they were."""

from __future__ import annotations

import decimal

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from statemachines.columns import arrow_array, column_to_python, storage_problem, to_arrow_python
from statemachines.updates import canonical

pairs = st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.one_of(st.none(), st.integers(-5, 5)))
nested = st.tuples(st.text(max_size=2), st.one_of(st.none(), st.tuples(st.integers(0, 3), st.text(max_size=2))))


@given(st.lists(st.one_of(st.none(), pairs), min_size=1).filter(lambda xs: any(x is not None for x in xs)))
def test_tuples_built_field_by_field_equal_tuples_converted_one_by_one(items):
    typed = pa.struct([("name", pa.string()), ("n", pa.int64())])
    assert arrow_array(items, typed) == pa.array([to_arrow_python(x, typed) for x in items], typed)
    inferred = arrow_array(items)
    assert column_to_python(inferred) == items
    assert [f.name for f in inferred.type] == ["_1", "_2"]


@given(st.lists(nested, min_size=1))
def test_nested_tuples_read_back_as_they_were(items):
    assert column_to_python(arrow_array(items)) == items


@given(pairs)
def test_a_pair_of_plain_cells_is_stored_in_its_struct_column(value):
    assert storage_problem(value, pa.struct([("name", pa.string()), ("n", pa.int64())])) is None
    wrong = storage_problem(value, pa.struct([("name", pa.int64()), ("n", pa.int64())]))
    assert (wrong is None) == (value[0] is None)  # a text name does not fit an integer field


event_type = pa.struct([("step", pa.string()), ("time", pa.int64()), ("seq", pa.int64()), ("symbol", pa.float64())])
found_type = pa.struct([("kind", pa.string()), ("events", pa.list_(event_type))])
events = st.tuples(
    st.sampled_from(["a", "b"]),
    st.one_of(st.none(), st.integers(-(2**64), 2**64)),  # some beyond int64
    st.integers(0, 3),
    st.one_of(st.none(), st.floats(allow_infinity=False)),  # NaN reads back as math.nan
)
found = st.tuples(st.sampled_from(["partial", "match"]), st.one_of(st.none(), st.lists(events, max_size=3).map(tuple)))


def _stores(value, arrow_type):
    """What storage_problem must say, asked of Arrow itself: the value converts one
    by one into the column and reads back equal (NaN being one value: ``canonical``)."""
    try:
        array = pa.array([to_arrow_python(value, arrow_type)], arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return False
    return column_to_python(array)[0] == canonical(value)


@given(st.lists(found, min_size=1, max_size=6), st.data())
def test_a_value_is_storable_exactly_when_arrow_stores_it_and_reads_it_back_equal(values, data):
    """Values that share their events (as a partial match shares its predecessor's) are
    judged the same as fresh ones: a shared event that was stored before does not let
    a value with a bad one through."""
    shared = [e for v in values for e in (v[1] or ())]
    if shared:  # later values reuse earlier events, the same objects
        values += [("partial", tuple(data.draw(st.sampled_from(shared)) for _ in range(2)))]
    for value in values:
        assert (storage_problem(value, found_type) is None) == _stores(value, found_type), value
    storable = [v for v in values if _stores(v, found_type)]
    if storable:  # built as lists of structs field by field, equal to one by one
        built = arrow_array(storable, found_type)
        one_by_one = pa.array([to_arrow_python(v, found_type) for v in storable], found_type)
        assert repr(built.to_pylist()) == repr(one_by_one.to_pylist())  # as text: Arrow's equality takes NaN as unequal
        assert column_to_python(arrow_array(storable, found_type)) == [canonical(v) for v in storable]


decimal_numbers = st.one_of(
    st.integers(-(10**40), 10**40),
    st.decimals(allow_nan=True, places=None),
    st.tuples(st.integers(-(10**45), 10**45), st.integers(-50, 5)).map(lambda ce: decimal.Decimal(ce[0]).scaleb(ce[1])),
)


@given(st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p))), st.lists(decimal_numbers, max_size=8))
def test_a_number_fits_a_decimal_column_exactly_when_arrow_stores_it_and_reads_it_back_equal(precision_scale, numbers):
    """Digits beyond the scale (not zeros) or before the point beyond precision - scale
    do not fit: 10 fits no decimal(38, 37) column, 1.50 any of scale 1 or more."""
    column = pa.decimal128(*precision_scale)
    for number in numbers:
        assert (storage_problem(number, column) is None) == _stores(number, column), number


@given(st.lists(st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=2), st.integers(-3, 3)), max_size=3)), min_size=1),
       st.sampled_from([pa.list_, pa.large_list]))
def test_lists_of_structs_built_at_once_equal_lists_converted_one_by_one(items, kind):
    typed = kind(pa.struct([("name", pa.string()), ("n", pa.int64())]))
    assert arrow_array(items, typed) == pa.array([to_arrow_python(x, typed) for x in items], typed)


@given(st.lists(st.one_of(st.none(), pairs, pairs.map(lambda p: {"name": p[0], "n": p[1]})), min_size=1))
def test_tuples_and_dicts_mixed_in_one_struct_column_equal_items_converted_one_by_one(items):
    typed = pa.struct([("name", pa.string()), ("n", pa.int64())])
    assert arrow_array(items, typed) == pa.array([to_arrow_python(x, typed) for x in items], typed)


maps = st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.lists(st.integers(-5, 5), max_size=3)), max_size=3))


@given(st.lists(st.tuples(st.sampled_from("ab"), maps), max_size=8))
def test_maps_read_as_hashable_pairs_and_write_back_as_the_maps(rows):
    """A map (of lists, in a struct) reads as the tuple of its (key, value) pairs, the
    lists tuples, hashable; written back with its column's type it is the map again."""
    kind = pa.struct([("name", pa.string()), ("m", pa.map_(pa.string(), pa.list_(pa.int64())))])
    column = pa.array([{"name": name, "m": None if m is None else list(m.items())} for name, m in rows], kind)
    read = column_to_python(column)
    assert read == [(name, None if m is None else tuple((k, None if v is None else tuple(v)) for k, v in m.items()))
                    for name, m in rows]
    assert len({hash(r) for r in read}) <= len(read)  # every one hashes
    assert pa.array([to_arrow_python(r, kind) for r in read], kind) == column


def test_durations_and_times_of_day_cannot_be_stored_saying_so():
    import datetime
    import decimal

    for value in (datetime.timedelta(seconds=5), ("x", datetime.time(9)), (("k", datetime.timedelta(1)),)):
        assert "a Delta table holds no duration or time of day" in storage_problem(value)
    assert "a Delta table holds no decimal of more than 38 digits" in storage_problem(("x", decimal.Decimal("1e50")))
    assert storage_problem(("x", datetime.datetime(2024, 1, 1))) is None
