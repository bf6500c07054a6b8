"""Arrangements against a naive list-of-updates model, step by random step."""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from statemachines import (
    Arrangement,
    InvalidArgument,
    PersistedArrangement,
    collection_at,
    consolidate,
    total_order_key,
)

KEYS = st.sampled_from(["a", "b", "c", 1, 2])
VALUES = st.sampled_from(["x", "y", 0])


def model_history(updates, key, value):
    """Validity intervals of one (key, value) from the model's advanced updates."""
    rows, count, start = [], 0, None
    for (data, time, diff) in consolidate(updates):
        if data != (key, value):
            continue
        before, count = count, count + diff
        if before <= 0 < count:
            start = time
        elif count <= 0 < before:
            rows.append((start, time))
    if count > 0:
        rows.append((start, None))
    return rows


class ArrangementModel(RuleBasedStateMachine):
    """Appends, replays, compactions, reader holds and reads vs a naive model."""

    handles = Bundle("handles")

    def __init__(self):
        super().__init__()
        self.arr = self.make()
        self.updates = []  # every appended update, at its original time
        self.descriptions = []  # (lower, upper) of every appended batch
        self.held = {}  # id(handle) -> since
        self.open_handles = []

    def make(self):
        return Arrangement()

    @staticmethod
    def stored(key, value):
        """The pair as this arrangement stores it (any hashables, in memory)."""
        return key, value

    @property
    def upper(self):
        return self.arr.upper

    def advanced(self):
        """The model's updates with times below since advanced to since."""
        since = self.arr.since
        if since is None:
            return list(self.updates)
        return [(d, max(t, since), n) for d, t, n in self.updates]

    @rule(
        width=st.integers(1, 4),
        rows=st.lists(st.tuples(KEYS, VALUES, st.integers(0, 3), st.sampled_from([-1, 1, 2])), max_size=8),
    )
    def append(self, width, rows):
        lower = self.upper
        start = 0 if lower is None else lower
        upper = start + width
        updates = [(self.stored(k, v), start + (dt % width), d) for k, v, dt, d in rows]
        assert self.arr.append(updates, lower=lower, upper=upper) is True
        self.updates.extend(updates)
        self.descriptions.append((lower, upper))

    @precondition(lambda self: self.descriptions)
    @rule(data=st.data())
    def replay_is_ignored(self, data):
        lower, upper = data.draw(st.sampled_from(self.descriptions))
        before = self.arr.stored_updates()
        assert self.arr.append([(("z", "z"), upper - 1, 1)], lower=lower, upper=upper) is False
        assert self.arr.stored_updates() == before

    @precondition(lambda self: self.upper is not None and self.upper >= 2)
    @rule()
    def misaligned_or_overlapping_append_is_refused(self):
        with pytest.raises(InvalidArgument):
            self.arr.append([], lower=self.upper - 1, upper=self.upper + 1)
        with pytest.raises(InvalidArgument):
            self.arr.append([], lower=self.upper + 1, upper=self.upper + 2)

    @precondition(lambda self: self.upper is not None)
    @rule(ahead=st.integers(0, 8))
    def update_outside_its_batch_is_refused(self, ahead):
        with pytest.raises(InvalidArgument, match="outside its batch"):
            self.arr.append([(("a", "x"), self.upper + 1 + ahead, 1)], lower=self.upper, upper=self.upper + 1)

    @rule(to=st.integers(0, 30), full=st.booleans())
    def compact(self, to, full):
        before = self.arr.since
        reached = self.arr.compact(to) if full else self.arr.advance_since(to)
        assert reached == self.arr.since
        if reached != before:
            assert before is None or reached > before
            assert reached <= to and reached <= self.upper
            assert all(s is not None and reached <= s for s in self.held.values())
        if full:
            assert len(self.arr.batches) <= 1

    @precondition(lambda self: self.upper is not None)
    @rule(target=handles, offset=st.integers(0, 5))
    def hold(self, offset):
        floor = self.arr.since if self.arr.since is not None else 0
        handle = self.arr.reader(since=floor + offset)
        self.held[id(handle)] = handle.since
        self.open_handles.append(handle)
        return handle

    @rule(handle=handles, step=st.integers(0, 5))
    def downgrade(self, handle, step):
        if handle.released:
            return
        handle.downgrade(handle.since + step)
        self.held[id(handle)] = handle.since

    @rule(handle=consumes(handles))
    def release(self, handle):
        handle.release()
        self.held.pop(id(handle), None)

    @rule(key=KEYS, delta=st.integers(0, 6))
    def read_a_key(self, key, delta):
        as_of = (self.arr.since or 0) + delta
        expected = {
            v: n for (k, v), n in collection_at(self.advanced(), as_of).items() if k == key
        }
        assert self.arr.get(key, as_of) == expected
        assert self.arr.values(key, as_of) == {v for v, n in expected.items() if n > 0}

    @rule(delta=st.integers(0, 6))
    def snapshot(self, delta):
        as_of = (self.arr.since or 0) + delta
        expected = collection_at(self.advanced(), as_of)
        got = self.arr.snapshot(as_of)
        assert dict(got) == expected
        assert [total_order_key(d[0]) for d, _ in got] == sorted(total_order_key(d[0]) for d, _ in got)

    @rule(delta=st.integers(0, 6), width=st.integers(1, 6))
    def changes(self, delta, width):
        lower = (self.arr.since or 0) + delta
        expected = [u for u in consolidate(self.advanced()) if lower <= u.time < lower + width]
        assert self.arr.changes(lower, lower + width) == expected

    @rule(start=st.none() | KEYS)
    def cursor_walks_keys_in_order(self, start):
        keys = [key for key, _ in self.arr.cursor(start)]
        live = {d[0] for d, _, _ in consolidate(self.advanced())}
        expected = sorted(live, key=total_order_key)
        if start is not None:
            expected = [k for k in expected if total_order_key(k) >= total_order_key(start)]
        assert keys == expected

    @precondition(lambda self: self.arr.since is not None)
    @rule(before=st.integers(1, 3))
    def reads_below_since_are_refused(self, before):
        with pytest.raises(InvalidArgument, match="compacted"):
            self.arr.get("a", self.arr.since - before)

    @rule()
    def history(self):
        rows = list(self.arr.history())
        expected = []
        for key, value in sorted({d for d, _, _ in self.updates}, key=total_order_key):
            expected.extend((key, value, s, e) for s, e in model_history(self.advanced(), key, value))
        assert sorted(rows, key=total_order_key) == sorted(expected, key=total_order_key)

    @invariant()
    def structure_holds(self):
        self.arr._check()
        assert sorted(self.arr._holds.values()) == sorted(self.held.values())


class PersistedArrangementModel(ArrangementModel):
    """The same, against the Delta-table arrangement, reopened from disk at times."""

    @staticmethod
    def stored(key, value):
        """Its columns are typed: one type of key, one type of value."""
        return str(key), str(value)

    def make(self):
        self.directory = tempfile.mkdtemp(prefix="arrangement-")
        return PersistedArrangement(self.directory)

    @rule()
    def reopen(self):
        """A new process: read holds belong to the old instance and end with it."""
        for handle in self.open_handles:
            handle.release()
        self.held.clear()
        self.arr = PersistedArrangement(self.directory)

    def teardown(self):
        shutil.rmtree(self.directory, ignore_errors=True)


TestArrangement = ArrangementModel.TestCase
TestPersistedArrangement = PersistedArrangementModel.TestCase

