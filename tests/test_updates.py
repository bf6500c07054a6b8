"""Updates, consolidation and update tables."""

from __future__ import annotations

from hypothesis import given

from statemachines import (
    Update,
    collection_at,
    consolidate,
    format_table,
    is_consolidated,
    parse_table,
)
from tests import strategies as sst


@given(sst.update_batches)
def test_consolidation_keeps_every_collection_and_is_canonical(updates):
    merged = consolidate(updates)
    assert is_consolidated(merged)
    assert all(u.diff != 0 for u in merged)
    assert len({(u.data, u.time) for u in merged}) == len(merged)
    assert merged == sorted(merged, key=lambda u: (u.time, u.data))
    for time in range(-1, 14):
        assert collection_at(merged, time) == collection_at(updates, time)


@given(sst.update_batches, sst.update_batches)
def test_consolidation_does_not_depend_on_how_the_stream_was_split(a, b):
    assert consolidate(a + b) == consolidate(consolidate(b) + consolidate(a))


@given(sst.update_batches)
def test_tables_round_trip(updates):
    merged = consolidate(updates)
    assert parse_table(format_table(merged)) == merged


def test_tables_parse_none_and_quoted_numbers():
    assert parse_table(
        """
        key | value | time | diff
        k   | None  | 3    | -1
        k   | '7'   | 3    | +1
        """
    ) == [Update(("k", None), 3, -1), Update(("k", "7"), 3, 1)]
