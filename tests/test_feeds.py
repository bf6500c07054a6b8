"""Change feeds, locally: each rule of ChangeFeed, Debezium envelopes, SCD tables,
against the independent models of tests/feed_models.py."""

from __future__ import annotations

import datetime as dt
import json
import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import InvalidArgument, Reason, collection_at
from statemachines.library import ChangeFeed, run_feed
from statemachines.library.feeds import ENCODED_TWICE, TOMBSTONE, UNAVAILABLE_FORMS
from statemachines.scd import ScdTable
from tests.delta_reader import delta_rs_rows
from tests.feed_models import (
    debezium,
    debezium_envelope,
    flat_feed,
    last_write_wins,
    refusal,
    scd2,
    with_tombstones,
)

FEED = ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})
DEBEZIUM = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name", "city"], envelope="debezium")


def _collection(result) -> dict:
    return {k: v for (k, v), n in collection_at(result.updates, float("inf")).items() if n}


def _scd_rows(table: ScdTable) -> list[tuple]:
    return [tuple(r.values()) for r in table.read().to_pylist()]


@settings(max_examples=20)
@given(st.integers(0, 10_000))
def test_a_shuffled_feed_gives_last_write_wins_and_the_scd2_history(tmp_path_factory, seed):
    rows = flat_feed(seed)
    out = tmp_path_factory.mktemp("feed")
    run = run_feed(FEED, rows, into=out / "arr", scd1=out / "scd1", scd2=out / "scd2")
    assert _collection(run.result) == last_write_wins(rows)
    assert _scd_rows(run.scd2) == scd2(rows)
    assert {r[0]: r[1:] for r in _scd_rows(run.scd1)} == last_write_wins(rows)
    assert sorted(r.reason.value for r in run.result.rejected) == sorted(
        reason for reason in map(refusal, rows) if reason is not None
    )


@settings(max_examples=20)
@given(st.integers(0, 10_000), st.integers(1, 4))
def test_scd_tables_kept_run_after_run_equal_one_run_over_the_whole_feed(tmp_path_factory, seed, parts):
    """Each run takes a later stretch of the log (shuffled within it); the SCD tables
    are refreshed after each, reading only what the run added."""
    rows = sorted(flat_feed(seed, bad=False), key=lambda r: r["lsn"])
    out = tmp_path_factory.mktemp("feed")
    size = -(-len(rows) // parts)
    for start in range(0, len(rows), size):
        stretch = rows[start : start + size][::-1]
        run = run_feed(FEED, stretch, into=out / "arr", scd1=out / "scd1", scd2=out / "scd2")
        assert not run.result.rejected
    assert _scd_rows(run.scd2) == scd2(rows)
    assert {r[0]: r[1:] for r in _scd_rows(run.scd1)} == last_write_wins(rows)


def test_a_refresh_repeated_changes_nothing(tmp_path):
    rows = flat_feed(1, bad=False)
    run = run_feed(FEED, rows, into=tmp_path / "arr", scd2=tmp_path / "scd2")
    before = run.scd2.read()
    assert run.scd2.refresh(tmp_path / "arr") is False
    assert run.scd2.read().equals(before)
    assert run.scd2.reflects() == 0


def test_an_scd_table_reads_at_a_commit_time_as_at_the_version_committed_then(tmp_path):
    """As Delta's timestampAsOf, over the SCD table's own commits."""
    from tests.delta_reader import commit_times

    rows = sorted(flat_feed(3, bad=False), key=lambda r: r["lsn"])
    for part in (rows[: len(rows) // 2], rows[len(rows) // 2 :]):
        run = run_feed(FEED, part, into=tmp_path / "arr", scd2=tmp_path / "scd2")
        time.sleep(0.01)  # commits a few milliseconds apart: each time names one version
    commits = sorted(commit_times(tmp_path / "scd2").items())
    assert not run.scd2.read(commits[0][0]).equals(run.scd2.read(commits[-1][0]))
    for version, committed_ms in commits:
        moment = dt.datetime.fromtimestamp(committed_ms / 1000, dt.UTC)
        assert run.scd2.read(moment).equals(run.scd2.read(version))
        assert run.scd2.read(moment.isoformat()).equals(run.scd2.read(version))
    with pytest.raises(InvalidArgument, match="no version committed at or before"):
        run.scd2.read(dt.datetime.fromtimestamp(commits[0][1] / 1000 - 60, dt.UTC))


def test_several_key_values_and_sequence_columns():
    rows = [
        {"region": "eu", "id": 1, "name": "Ada", "city": "London", "lsn": 5, "offset": 0},
        {"region": "eu", "id": 1, "name": "Ada", "city": "Paris", "lsn": 5, "offset": 1},  # same lsn, later offset
        {"region": "us", "id": 1, "name": "Bo", "city": "Oslo", "lsn": 4, "offset": 0},
    ]
    feed = ChangeFeed(keys=["region", "id"], sequence_by=["lsn", "offset"], except_columns=["city"])
    run = run_feed(feed, list(reversed(rows)))
    assert run.columns.values == ("name",)
    assert _collection(run.result) == {("eu", 1): ("Ada",), ("us", 1): ("Bo",)}
    events = ChangeFeed(keys=["id"], sequence_by=["lsn", "offset"], values=["name", "city"]).events(rows)
    assert [e.order for e in events] == [0, 1, 0]
    three = ChangeFeed(keys=["id"], sequence_by=["lsn", "offset", "region"]).events(rows)
    assert three[0].order == (0, "eu")


def test_only_delete_when_deletes_and_a_row_without_a_field_is_refused():
    feed = ChangeFeed(keys=["id"], sequence_by=["lsn"], values=["name"], delete_when={"op": ["d", "D"]})
    rows = [
        {"id": 1, "name": "Ada", "lsn": 1, "op": "c"},
        {"id": 1, "lsn": 2, "op": "u"},  # no name: refused, not a delete
        {"id": 1, "name": None, "lsn": 3, "op": "u"},  # a null name is a value
        {"id": 2, "name": "Bo", "lsn": 1, "op": "c"},
        {"id": 2, "name": "Bo", "lsn": 2, "op": "D"},
        {"id": 3, "name": "Cy", "lsn": 1},  # no op: refused
    ]
    run = run_feed(feed, rows)
    assert _collection(run.result) == {1: (None,)}
    assert [(r.event.key, r.reason, r.detail) for r in run.result.rejected] == [
        (1, Reason.MISSING_FIELD, "the row has no field(s) name"),
        (3, Reason.MISSING_FIELD, "the row has no field(s) op"),
    ]


def test_several_delete_markers_must_all_hold():
    feed = ChangeFeed(keys=["id"], sequence_by=["lsn"], values=["name"], delete_when={"op": "d", "soft": True})
    events = feed.events([
        {"id": 1, "name": "A", "lsn": 1, "op": "d", "soft": False},
        {"id": 1, "name": "A", "lsn": 2, "op": "d", "soft": True},
    ])
    assert [e.symbol for e in events] == [("A",), None]


@pytest.mark.parametrize(
    ("feed", "problem"),
    [
        (dict(keys=[], sequence_by=["lsn"]), "key column"),
        (dict(keys=["id"], sequence_by=[]), "sequence column"),
        (dict(keys=["id"], sequence_by=["lsn"], values=["a"], except_columns=["b"]), "not both"),
        (dict(keys=["id"], sequence_by=["lsn"], envelope="avro"), "envelope"),
        (dict(keys=["id"], sequence_by=["lsn"], envelope="debezium", delete_when={"op": "d"}), "op says"),
        (dict(keys=["id"], sequence_by=["lsn"], delete_when="op"), "delete_when maps"),
        (dict(keys=["id", "id"], sequence_by=["lsn"]), r"keys names id more than once"),
        (dict(keys=["id"], sequence_by=["lsn", "lsn"]), r"sequence_by names lsn more than once"),
        (dict(keys=["id"], sequence_by=["lsn"], values=["a", "b", "a"]), r"values names a more than once"),
    ],
)
def test_a_feed_declared_wrongly_is_an_error(feed, problem):
    with pytest.raises(InvalidArgument, match=problem):
        ChangeFeed(**feed)


def test_a_column_the_feed_names_must_exist_even_with_no_rows():
    feed = ChangeFeed(keys=["id"], sequence_by=["lsm"])
    with pytest.raises(InvalidArgument, match="no column.*lsm"):
        run_feed(feed, pa.table({"id": pa.array([], pa.int64()), "lsn": pa.array([], pa.int64())}))
    with pytest.raises(InvalidArgument, match="no column.*lsm"):
        run_feed(feed, [{"id": 1, "lsn": 2, "name": "x"}])


@settings(max_examples=20)
@given(st.integers(0, 10_000), st.sampled_from([False, True, "payload only"]))
def test_debezium_envelopes_give_what_the_flat_feed_gives(tmp_path_factory, seed, wrapped):
    """Bare or wrapped, with the tombstone Kafka holds after each delete (and one
    first): each tombstone is rejected as such, and changes nothing."""
    rows = flat_feed(seed)
    lines = with_tombstones(rows, [json.loads(json.dumps(debezium(r, wrapped))) for r in rows], wrapped)
    out = tmp_path_factory.mktemp("dbz")
    run = run_feed(DEBEZIUM, lines, into=out / "arr", scd2=out / "scd2")
    assert _collection(run.result) == last_write_wins(rows)
    assert _scd_rows(run.scd2) == scd2(rows)
    tombstones = [r for r in run.result.rejected if r.detail == TOMBSTONE]
    assert len(tombstones) == len(lines) - len(rows)
    rest = [r.reason.value for r in run.result.rejected if r.detail != TOMBSTONE]
    assert sorted(rest) == sorted(filter(None, map(refusal, rows)))


def moved_keys_feed():
    """Debezium updates of a users table keyed here by email (not the table's primary
    key): ``(envelope, expected updates at its lsn)``."""
    def user(email, name):
        return {"id": 1, "email": email, "name": name}

    return [
        (debezium_envelope("c", 1, None, user("a@x", "Ada")), [(("a@x", ("Ada",)), 1)]),
        # the row moves to another key: the old one is deleted
        (debezium_envelope("u", 2, user("a@x", "Ada"), user("ada@y", "Ada")), [(("a@x", ("Ada",)), -1), (("ada@y", ("Ada",)), 1)]),
        # the same key: its value changes
        (debezium_envelope("u", 3, user("ada@y", "Ada"), user("ada@y", "Ada L")), [(("ada@y", ("Ada",)), -1), (("ada@y", ("Ada L",)), 1)]),
        # no before (Postgres without REPLICA IDENTITY FULL), or one without the key: an upsert only
        (debezium_envelope("u", 4, None, user("b@x", "Bob")), [(("b@x", ("Bob",)), 1)]),
        (debezium_envelope("u", 5, user(None, "Bob"), user("b@x", "Bo")), [(("b@x", ("Bob",)), -1), (("b@x", ("Bo",)), 1)]),
    ]


MOVED = ChangeFeed(keys=["email"], sequence_by=["source.lsn"], values=["name"], envelope="debezium")


def test_a_debezium_update_that_moves_a_row_to_another_key_deletes_the_old_key():
    feed = moved_keys_feed()
    expected = sorted((data, envelope["source"]["lsn"], diff) for envelope, changes in feed for data, diff in changes)
    for rows in ([envelope for envelope, _ in feed], [envelope for envelope, _ in feed][::-1]):
        run = run_feed(MOVED, rows)
        assert run.result.rejected == []
        assert sorted(run.result.updates) == expected
    assert _collection(run.result) == {"ada@y": ("Ada L",), "b@x": ("Bo",)}


def toasted_feed():
    """Debezium changes of a table whose ``bio`` (text) and ``photo`` (bytes, base64 in
    JSON) are TOASTed: an update that leaves them unchanged sends placeholders."""
    return [
        debezium_envelope("c", 1, None, {"id": 1, "name": "Ada", "bio": "long text", "photo": "AAEC"}),
        debezium_envelope("u", 2, None, {"id": 1, "name": "Ada L", "bio": UNAVAILABLE_FORMS[0], "photo": "AAEC"}),
        debezium_envelope("u", 3, None, {"id": 1, "name": "Ada M", "bio": "new text", "photo": UNAVAILABLE_FORMS[1]}),
        debezium_envelope("u", 4, None, {"id": 1, "name": "Ada N", "bio": "newer", "photo": "AAED"}),
        debezium_envelope("d", 5, {"id": 1, "name": None, "bio": UNAVAILABLE_FORMS[0], "photo": None}, None),
    ]


TOASTED = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name", "bio", "photo"], envelope="debezium")


def test_a_debezium_value_it_did_not_send_is_refused_not_stored():
    """PostgreSQL's unchanged TOASTed columns arrive as Debezium's placeholder: the
    row is rejected, naming them, and the placeholder is never a value; a delete,
    which reads only the key, applies."""
    run = run_feed(TOASTED, toasted_feed())
    assert [(r.event.time, r.reason, r.detail.split(" hold ")[0]) for r in run.result.rejected] == [
        (2, Reason.MISSING_FIELD, "column(s) bio"), (3, Reason.MISSING_FIELD, "column(s) photo"),
    ]
    assert "REPLICA IDENTITY FULL" in run.result.rejected[0].detail
    values = {v for (_, v), _, _ in run.result.updates}
    assert values == {("Ada", "long text", "AAEC"), ("Ada N", "newer", "AAED")}
    assert _collection(run.result) == {}


def test_a_feed_row_that_is_no_mapping_is_rejected_as_malformed_even_when_no_row_names_a_column():
    run = run_feed(FEED, [[1, "x"], {"id": 1, "lsn": 1, "op": "c", "name": "a", "city": "b"}, "text"])
    assert [(r.reason, r.detail.split(";")[0]) for r in run.result.rejected] == [
        (Reason.MALFORMED, "a feed row maps column names to cells"),
    ] * 2
    assert _collection(run.result) == {1: ("a", "b")}
    unnamed = [None, {"schema": {}, "payload": None}, 7]  # nothing names a column
    only = run_feed(DEBEZIUM, unnamed)
    assert [(r.reason, r.detail == TOMBSTONE) for r in only.result.rejected] == [
        (Reason.MISSING_FIELD, True), (Reason.MISSING_FIELD, True), (Reason.MALFORMED, False),
    ]
    assert DEBEZIUM.events(unnamed) == only.result.rejected  # the feed's own reading says the same


def test_a_debezium_message_whose_payload_is_json_text_is_rejected_as_encoded_twice_not_as_a_tombstone():
    """A topic whose producer encoded each envelope as a JSON string: each message
    is malformed (its change would be lost), never taken for a harmless tombstone."""
    envelope = {"op": "c", "before": None, "after": {"id": 1, "name": "a", "city": "b"}, "source": {"lsn": 1}}
    rows = [{"schema": {}, "payload": json.dumps(envelope)}, {"schema": {}, "payload": {**envelope, "source": {"lsn": 2}}}]
    run = run_feed(DEBEZIUM, rows)
    assert [(r.reason, r.detail) for r in run.result.rejected] == [(Reason.MALFORMED, ENCODED_TWICE)]
    assert _collection(run.result) == {1: ("a", "b")}


@pytest.mark.parametrize(
    ("envelope", "reason", "detail"),
    [
        ({"op": "t", "before": None, "after": None, "source": {"lsn": 3}}, "bad_operation", "op 't' is a TRUNCATE"),
        ({"op": "m", "before": None, "after": None, "source": {"lsn": 3}}, "bad_operation", "op 'm' is not applied"),
        ({"op": "u", "before": None, "after": None, "source": {"lsn": 3}}, "missing_field", "op 'u' without after"),
        ({"op": "d", "before": None, "after": None, "source": {"lsn": 3}}, "missing_field", "op 'd' without before"),
        ({"before": None, "after": {"id": 1}, "source": {"lsn": 3}}, "missing_field", "no op"),
        ({"op": "c", "before": None, "after": {"id": 1, "name": "A", "city": "B"}, "source": {}}, "missing_field", "source.lsn"),
    ],
)
def test_a_debezium_envelope_that_cannot_be_applied_is_refused(envelope, reason, detail):
    (found,) = DEBEZIUM.events([envelope], DEBEZIUM.columns(["id", "name", "city"]))
    assert found.reason == reason and detail in found.detail


def test_scd_tables_of_several_key_and_value_columns(tmp_path):
    rows = [
        {"region": "eu", "id": 1, "name": "Ada", "lsn": 3, "op": "u"},
        {"region": "eu", "id": 1, "name": "Ada L.", "lsn": 1, "op": "c"},
        {"region": "us", "id": 1, "name": "Bo", "lsn": 2, "op": "c"},
        {"region": "eu", "id": 1, "name": None, "lsn": 5, "op": "d"},
    ]
    feed = ChangeFeed(keys=["region", "id"], sequence_by=["lsn"], delete_when={"op": "d"})
    run = run_feed(feed, rows, into=tmp_path / "arr", scd1=tmp_path / "s1", scd2=tmp_path / "s2")
    assert _scd_rows(run.scd2) == [("eu", 1, "Ada L.", 1, 3), ("eu", 1, "Ada", 3, 5), ("us", 1, "Bo", 2, None)]
    assert _scd_rows(run.scd1) == [("us", 1, "Bo")]


def test_an_scd_table_is_of_a_collection_with_one_value_per_key(tmp_path):
    from statemachines import LocalRuntime, PersistedArrangement
    from tests.machines import Tags

    runtime = LocalRuntime(Tags(), into=PersistedArrangement(tmp_path / "arr"))
    runtime.feed([("doc", ("add", "x"), 1), ("doc", ("add", "y"), 2)])
    runtime.finish()
    with pytest.raises(InvalidArgument, match="several values at once"):
        ScdTable(tmp_path / "s2", ["doc"], ["tag"]).refresh(tmp_path / "arr")


def test_a_local_scd_table_is_read_without_delta_rs_file_system(tmp_path, monkeypatch):
    """Through delta-rs's file system (``to_pyarrow_table()``), which pyarrow's threads
    call back into, a process that read a table could abort at exit ("terminate
    called without an active exception"; 5-80% of runs, by script). A local table is
    read through pyarrow's own file system: the same rows, that one never asked."""
    from deltalake import DeltaTable, fs

    rows = [{"id": 1, "name": "Ada", "lsn": 1}, {"id": 2, "name": "Bo", "lsn": 2}, {"id": 1, "name": "Ada L.", "lsn": 3}]
    run = run_feed(ChangeFeed(keys=["id"], sequence_by=["lsn"]), rows, into=tmp_path / "arr", scd2=tmp_path / "s2")
    as_delta_rs_reads = delta_rs_rows(DeltaTable(str(tmp_path / "s2")))
    assert as_delta_rs_reads.num_rows == 3

    def refused(*args, **kwargs):
        raise AssertionError("read through delta-rs's file system")

    monkeypatch.setattr(fs.DeltaStorageHandler, "from_table", refused)
    got = run.scd2.read()
    assert got.schema == as_delta_rs_reads.select(got.column_names).schema
    assert sorted(got.to_pylist(), key=repr) == sorted(as_delta_rs_reads.select(got.column_names).to_pylist(), key=repr)


DELTA = ChangeFeed(keys=["id"], envelope="delta")


@settings(max_examples=12)  # each example writes a Delta table of seven commits
@given(st.integers(0, 10_000), st.booleans())
def test_a_delta_change_feed_gives_the_table_at_every_version(tmp_path_factory, seed, shuffled):
    """A Delta table's change data feed (delta-rs ``load_cdf``: inserts, update pre-
    and postimages, deletes; an overwrite deletes and inserts the same ids in one
    commit), in any row order, read with ``envelope="delta"``: the arrangement at each
    commit version is the table at that version, and the SCD2 table its history."""
    import random

    from tests.feed_models import delta_change_feed, delta_changes

    out = tmp_path_factory.mktemp("delta")
    versions = delta_change_feed(out / "source", seed)
    rows = delta_changes(out / "source").to_pylist()
    if shuffled:
        random.Random(seed).shuffle(rows)
    run = run_feed(DELTA, rows, into=out / "arr", scd2=out / "scd2")
    assert run.result.rejected == []
    assert run.columns.values == ("name", "city")
    for version, content in enumerate(versions):
        at = {k: v for (k, v), n in collection_at(run.result.updates, version).items() if n}
        assert at == content, version
    history = sorted(_scd_rows(run.scd2), key=repr)
    expected = []
    for key in sorted({k for content in versions for k in content}):
        held = [content.get(key) for content in versions]
        for version, value in enumerate(held):
            if value is not None and (version == 0 or held[version - 1] != value):
                ends = next((v for v in range(version + 1, len(held)) if held[v] != value), None)
                expected.append((key, *value, version, ends))
    assert history == sorted(expected, key=repr)


@pytest.mark.parametrize(
    ("change", "reason", "detail"),
    [
        (None, "missing_field", "the row has no _change_type"),
        (
            "upsert", "bad_operation",
            "_change_type 'upsert' is not applied (insert, update_postimage upsert; delete, update_preimage delete)",
        ),
    ],
)
def test_a_delta_change_that_cannot_be_applied_is_refused(change, reason, detail):
    rows = [
        {"id": 1, "name": "Ada", "_change_type": "insert", "_commit_version": 0},
        {"id": 1, "name": "Ada", "_change_type": change, "_commit_version": 1},
    ]
    run = run_feed(DELTA, rows)
    assert [(r.reason.value, r.detail) for r in run.result.rejected] == [(reason, detail)]
    assert _collection(run.result) == {1: ("Ada",)}


def test_a_delta_change_feed_refuses_delete_markers_of_its_own():
    with pytest.raises(InvalidArgument, match="_change_type says what is a delete"):
        ChangeFeed(keys=["id"], envelope="delta", delete_when={"op": "d"})


def test_a_delta_update_of_the_key_deletes_the_old_key():
    """Delta writes an update as its preimage (old cells) and postimage (new cells):
    an update that changed the key leaves the old key deleted, one that kept it only
    changes its value, whatever the order of the commit's rows."""
    rows = [
        {"id": 1, "name": "Ada", "_change_type": "insert", "_commit_version": 0},
        {"id": 2, "name": "Bob", "_change_type": "insert", "_commit_version": 0},
        {"id": 7, "name": "Ada", "_change_type": "update_postimage", "_commit_version": 1},
        {"id": 1, "name": "Ada", "_change_type": "update_preimage", "_commit_version": 1},
        {"id": 2, "name": "Bob", "_change_type": "update_preimage", "_commit_version": 1},
        {"id": 2, "name": "Bo", "_change_type": "update_postimage", "_commit_version": 1},
    ]
    for order in (rows, rows[::-1]):
        run = run_feed(DELTA, order)
        assert run.result.rejected == []
        assert _collection(run.result) == {7: ("Ada",), 2: ("Bo",)}
        assert sorted(u for u in run.result.updates if u.time == 1) == sorted([
            ((1, ("Ada",)), 1, -1), ((7, ("Ada",)), 1, 1), ((2, ("Bob",)), 1, -1), ((2, ("Bo",)), 1, 1),
        ])


@pytest.mark.parametrize("sequence_by", [["updated_at"], ["_commit_timestamp"], ["updated_at", "_commit_version"]])
def test_a_delta_change_feed_is_ordered_by_its_commits(sequence_by):
    """A delete or preimage row holds the old row's cells: ordered by a column of the
    row, it would come before the change it undoes; such a feed is refused."""
    with pytest.raises(InvalidArgument, match="ordered by its commits"):
        ChangeFeed(keys=["id"], envelope="delta", sequence_by=sequence_by)
    for ordered in (["_commit_version", "updated_at"], ["_commit_timestamp", "_commit_version"]):
        assert ChangeFeed(keys=["id"], envelope="delta", sequence_by=ordered).sequence_by == tuple(ordered)


@settings(max_examples=20)
@given(st.integers(0, 10_000))
def test_a_pandas_frame_of_the_feed_runs_as_its_rows(seed):
    """A DataFrame (nullable dtypes, as ``convert_dtypes`` or a Parquet read gives)
    runs as the mappings of its rows: missing cells are nulls."""
    import pandas as pd

    rows = flat_feed(seed)
    frame = pd.DataFrame(rows).convert_dtypes()
    by_rows, by_frame = run_feed(FEED, rows), run_feed(FEED, frame)
    assert by_frame.result.updates == by_rows.result.updates
    assert [(r.reason, r.detail) for r in by_frame.result.rejected] == [
        (r.reason, r.detail) for r in by_rows.result.rejected
    ]
