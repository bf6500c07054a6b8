"""CDC: any duplication, reordering and re-batching reads back the exact history."""

from __future__ import annotations

import datetime
import math
import re

import pytest
from hypothesis import given, target
from hypothesis import strategies as st

from statemachines import Arrangement, InvalidArgument, PersistedArrangement, consolidate, run_local
from statemachines.cdc import (
    CdcConflict,
    CdcReader,
    CdcWriter,
    Progress,
    Updates,
    messages_from_arrangement,
    read_into,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
)
from statemachines.library import Upsert
from tests import strategies as sst


def write(history, cuts, batch_size):
    """One writer: the history cut at ``cuts``, then declared complete."""
    writer, messages, lower = CdcWriter(batch_size=batch_size), [], None
    for upper in [*cuts, None]:
        step = [u for u in history if (lower is None or u.time >= lower) and (upper is None or u.time < upper)]
        messages += writer.advance(step, upper)
        lower = upper
    return messages


@st.composite
def mangled(draw):
    history = consolidate(draw(sst.update_batches))
    messages = []
    for _ in range(draw(st.integers(1, 2))):  # one or two writers, cut differently
        cuts = sorted(set(draw(st.lists(st.integers(0, 13), max_size=4))))
        messages += write(history, cuts, draw(st.integers(1, 4)))
    messages = [m for m in messages for _ in range(draw(st.integers(1, 3)))]
    return history, draw(st.permutations(messages))


@given(mangled())
def test_the_reader_recovers_the_history_time_by_time(case):
    history, messages = case
    reader = CdcReader()
    released, peak = [], 0
    for message in messages:
        for time, updates in reader.push(message):
            assert all(u.time == time for u in updates)
            released.append((time, updates))
        peak = max(peak, reader.resident())
    times = [t for t, _ in released]
    assert times == sorted(set(times))  # never a time twice, always in order
    assert [u for _, ups in released for u in ups] == history
    assert reader.complete and reader.resident() == 0
    # duplicates never add to what is held: at most each update, count and interval once
    intervals = {(m.lower, m.upper) for m in messages if isinstance(m, Progress)}
    assert peak <= len(history) + len({u.time for u in history}) + len(intervals)
    target(float(peak), label="peak resident items")  # --hypothesis-show-statistics


@given(mangled(), st.data())
def test_any_prefix_of_the_messages_yields_a_prefix_of_the_history(case, data):
    history, messages = case
    cut = data.draw(st.integers(0, len(messages)))
    reader = CdcReader()
    got = [u for m in messages[:cut] for _, ups in reader.push(m) for u in ups]
    assert got == history[: len(got)]
    if reader.frontier is not None and not reader.complete:
        assert got == [u for u in history if u.time < reader.frontier]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([Updates(((("a", 1), 0, 1),)), Updates(((("a", 1), 0, 2),))], "diff 1 and with diff 2"),
        ([Progress(None, 5, ((1, 2),)), Progress(None, 3, ((1, 1),))], "2 updates by one message and 1"),
        ([Progress(None, 5, ((1, 2),)), Progress(0, 3, ())], "2 updates by one message and 0"),
        ([Progress(0, 3, ()), Progress(None, 5, ((1, 2),))], "0 updates by one message and 2"),
        ([Progress(None, 5, ((1, 1),)), Updates(((("a", 1), 1, 1), (("b", 1), 1, 1)))], "more than its 1"),
        ([Progress(3, 5, ()), Updates(((("a", 1), 4, 1),))], "progress says has none"),
        ([Updates(((("a", 1), 2, 1),)), Progress(None, 5, ())], "progress says it has none"),
        ([Progress(None, 5, ((7, 1),))], "outside it"),
    ],
)
def test_contradictory_messages_are_refused(messages, match):
    reader = CdcReader()
    with pytest.raises(CdcConflict, match=match):
        for message in messages:
            reader.push(message)


MALFORMED = [
    (Updates(((("a", 1), 0, 0),)), "a diff is a non-zero integer"),
    (Updates(((("a", 1), 0, 1.5),)), "a diff is a non-zero integer"),
    (Updates(((("a", 1), 0, True),)), "a diff is a non-zero integer"),
    (Updates(((("a", 1), math.nan, 1),)), "nan is not a finite time"),
    (Updates(((("a", 1), math.inf, 1),)), "inf is not a finite time"),
    (Updates(((("a", 1), "noon", 1),)), "'noon' is not a finite time"),
    (Updates(((("a", 1), datetime.date(2024, 1, 1), 1),)), "is a date time; the history's are number times"),
    (Progress(math.nan, 5, ()), "nan is not a finite time"),
    (Progress(None, 5, ((1, 0),)), "a time's count is a positive integer, not 0"),
    (Progress(None, 5, ((1, 1.0),)), "a time's count is a positive integer, not 1.0"),
    (Progress(5, 3, ()), "its upper is below its lower"),
    ("updates", "not a CDC message"),
]


@pytest.mark.parametrize(("message", "match"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_message_is_refused_and_the_reader_reads_on(message, match):
    """A NaN time would sit unordered among the held times, a zero or fractional
    diff is no accumulated diff: each is refused, naming what is wrong, and the
    reader recovers the history from the well-formed messages around it."""
    history = consolidate([(("a", 1), 1, 1), (("b", 2), 1, 1), (("a", 1), 3, -1)])
    messages = write(history, [2], batch_size=1)
    reader, released = CdcReader(), []
    for at, good in enumerate(messages):
        if at == 1:
            with pytest.raises(InvalidArgument, match=re.escape(match)):
                reader.push(message)
        released += [u for _, ups in reader.push(good) for u in ups]
    assert released == history and reader.complete


@pytest.mark.parametrize("start", [math.nan, math.inf, "0"], ids=repr)
def test_a_reader_starts_at_a_finite_time(start):
    with pytest.raises(InvalidArgument, match=re.escape(f"start is a finite time or None, not {start!r}")):
        CdcReader(start=start)


def test_a_malformed_file_message_names_its_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"updates": [[["a", 1], 0, 1]]}\n{"updates": [[["a", 1], 1, 0.5]]}\n')
    with pytest.raises(InvalidArgument, match="bad.jsonl:2: .*a diff is a non-zero integer"):
        list(read_jsonl(path))


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_files_round_trip_the_messages(tmp_path, fmt):
    arr = Arrangement()
    run_local(Upsert(), [(("k", 1), "v", 0), ("j", "w", 1), (("k", 1), None, 2)], into=arr)
    messages = messages_from_arrangement(arr, batch_size=1)
    path = tmp_path / f"cdc.{fmt}"
    (write_jsonl if fmt == "jsonl" else write_parquet)(messages, path)
    back = list((read_jsonl if fmt == "jsonl" else read_parquet)(path))
    assert back == messages
    reader = CdcReader()
    assert [u for m in back for _, ups in reader.push(m) for u in ups] == arr.updates()


def test_a_malformed_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"updates": []}\n{"nonsense": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        list(read_jsonl(path))


def test_reader_into_an_arrangement_equals_the_original(tmp_path):
    original = PersistedArrangement(tmp_path / "a")
    run_local(Upsert(), [(k, f"v{t}", t) for t in range(20) for k in "abc"], into=original)
    messages = messages_from_arrangement(original, batch_size=7)
    rebuilt = PersistedArrangement(tmp_path / "b")
    assert read_into(reversed(messages * 2), rebuilt) == original.upper
    assert rebuilt.updates() == original.updates()
    # more history later: only what lies beyond the rebuilt upper is appended
    run_local(Upsert(), [("a", "late", 25)], into=original)
    assert read_into(messages_from_arrangement(original), rebuilt) == original.upper
    assert PersistedArrangement(tmp_path / "b").updates() == original.updates()
