"""Keys and values as typed Arrow columns: tuples built field by field equal tuples
converted one by one, and both read back as they were."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from statemachines.columns import arrow_array, column_to_python, storage_problem, to_arrow_python

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
