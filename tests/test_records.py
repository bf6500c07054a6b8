"""Structs read as records: tuples equal to what was written, whose fields are also
attributes, that pickle and write back as the same struct."""

from __future__ import annotations

import pickle
from typing import NamedTuple

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from statemachines import run_local
from statemachines.columns import arrow_array, column_to_python
from statemachines.library import Detector, Pattern
from statemachines.records import Record, record
from statemachines.updates import hashable

# field names as databases and JSON have them: keywords, leading underscores, spaces,
# and names of a tuple's methods among them
names = st.lists(
    st.one_of(st.sampled_from(["from", "count", "_id", "index", "kind", "a b", "_fields", "__len__"]), st.text(min_size=1, max_size=4)),
    min_size=1, max_size=4, unique=True,
)
cells = st.one_of(st.none(), st.integers(-3, 3))


@st.composite
def struct_columns(draw):
    fields = draw(names)
    rows = draw(st.lists(st.one_of(st.none(), st.tuples(*(cells for _ in fields))), min_size=1, max_size=5))
    kind = pa.struct([(name, pa.int64()) for name in fields])
    return fields, rows, pa.array([None if r is None else dict(zip(fields, r, strict=True)) for r in rows], kind)


@given(struct_columns())
def test_a_struct_column_reads_as_records_equal_to_its_tuples_with_fields_by_name(column):
    fields, rows, array = column
    read = column_to_python(array)
    assert read == rows
    assert [hash(r) for r in read] == [hash(r) for r in rows]
    for got, written in zip(read, rows, strict=True):
        if written is None:
            continue
        assert isinstance(got, Record) and got._fields == tuple(fields)
        assert got._asdict() == dict(zip(fields, written, strict=True))
        for name, value in zip(fields, written, strict=True):
            if name not in ("_fields", "__len__"):  # the record's own: read by position
                assert getattr(got, name) == value
        back = pickle.loads(pickle.dumps(got))
        assert back == got and back._fields == got._fields
    assert arrow_array(read, array.type).equals(array)
    if any(r is not None for r in rows):  # written back under its names
        assert [f.name for f in arrow_array(read).type] == fields


@given(st.lists(st.tuples(cells, cells), min_size=1, max_size=4))
def test_a_plain_tuples_struct_reads_as_plain_tuples(rows):
    read = column_to_python(arrow_array(rows))
    assert read == rows and all(type(r) is tuple for r in read)


def test_a_dict_is_a_record_unless_its_keys_are_not_names():
    assert hashable({"kind": "fail", "tags": ["x"]}).kind == "fail"
    assert type(hashable({1: "a", 2: "b"})) is tuple
    assert type(record(("_1", "_2"), (1, 2))) is tuple


class Login(NamedTuple):
    kind: str
    amount: int | None


@given(st.lists(st.tuples(st.sampled_from(["fail", "ok", "view"]), st.sampled_from([None, 5, 50])), max_size=30))
def test_a_table_of_struct_events_runs_as_its_named_tuples_do(logins):
    """A table's struct symbols reach SQL conditions and functions by field name, as
    NamedTuples do."""
    pattern = (
        Pattern.begin("fail").where("kind = 'fail'").times(2)
        .followed_by("ok").where(lambda e: e.kind == "ok" and (e.amount or 0) > 10).within(5)
    )
    events = [("u", Login(*login), t) for t, login in enumerate(logins)]
    table = pa.table({
        "key": [e[0] for e in events],
        "symbol": pa.array([e[1]._asdict() for e in events], pa.struct([("kind", pa.string()), ("amount", pa.int64())])),
        "time": [e[2] for e in events],
    })
    from_table = run_local(Detector(pattern), table)
    assert from_table.updates == run_local(Detector(pattern), events).updates
    assert from_table.rejected == []
