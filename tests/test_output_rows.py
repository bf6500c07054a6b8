"""A Spark task's output rows (``OutputRows``) as Arrow, against a row-by-row model."""

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statemachines import InvalidArgument
from statemachines.events import Reason, Rejected
from statemachines.spark.output import REJECTED, UPDATE, OutputRows

SCHEMA = pa.schema([
    pa.field("kind", pa.int8(), nullable=False), ("key", pa.string()),
    ("value", pa.struct([("name", pa.string()), ("seen", pa.list_(pa.int64()))])),
    ("time", pa.int64()), ("diff", pa.int64()), ("symbol", pa.string()), ("order", pa.int64()),
    ("reason", pa.string()), ("detail", pa.string()),
])
keys = st.sampled_from(["a", "b", "ü"])
values = st.tuples(st.text(max_size=3), st.lists(st.integers(-5, 5), max_size=3).map(tuple))
times = st.integers(-(2**40), 2**40)
updates = st.tuples(st.tuples(keys, values), times, st.sampled_from([1, -1, 2]))
rejections = st.builds(
    Rejected, st.tuples(keys, st.text(max_size=3), times, st.none() | st.integers(0, 9)),
    st.sampled_from(list(Reason)), st.text(max_size=5),
)


def model_rows(updates, rejected):
    """The rows ``take`` gives, one dict each: updates first, then rejections."""
    empty = dict.fromkeys(SCHEMA.names)
    rows = [{**empty, "kind": UPDATE, "key": k, "value": {"name": v[0], "seen": list(v[1])}, "time": t, "diff": d}
            for (k, v), t, d in updates]
    rows += [{**empty, "kind": REJECTED, "key": x.event[0], "symbol": x.event[1], "time": x.event[2],
              "order": x.event[3], "reason": str(x.reason), "detail": x.detail} for x in rejected]
    return rows


@given(st.lists(updates, max_size=6), st.lists(rejections, max_size=3))
def test_taken_rows_are_the_updates_then_the_rejections(given_updates, given_rejected):
    out = OutputRows(SCHEMA)
    out.add(given_updates, given_rejected)
    batch = out.take()
    assert batch.schema == SCHEMA
    assert batch.to_pylist() == model_rows(given_updates, given_rejected)
    assert len(out) == 0 and out.take().num_rows == 0


@pytest.mark.parametrize("with_rejection", [False, True])
def test_a_value_that_does_not_fit_the_value_type_is_named(with_rejection):
    out = OutputRows(SCHEMA)
    rejected = [Rejected(("a", "s", 1, None), Reason.LATE, "")] if with_rejection else []
    out.add([(("a", ("x", ("not a number",))), 1, 1)], rejected)
    with pytest.raises(InvalidArgument, match="value that does not fit"):
        out.take()
