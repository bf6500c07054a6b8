"""Change feeds on Spark, batch and stream: the same events, rejections and SCD tables
as the local run, and as the independent models."""

from __future__ import annotations

import json
import os

import pytest

from statemachines import PersistedArrangement
from statemachines.library import ChangeFeed, run_feed
from statemachines.library.feeds import TOMBSTONE
from statemachines.persisted import read_state
from statemachines.scd import ScdTable
from tests.feed_models import (
    debezium,
    debezium_envelope,
    flat_feed,
    last_write_wins,
    scd2,
    with_tombstones,
    wrap,
)

pytest.importorskip("pyspark")

from pyspark.sql import types as T  # noqa: E402

from statemachines.spark import (  # noqa: E402 - after the skip
    feed_events,
    read_rejected,
    read_scd,
    run_feed_batch,
    run_feed_stream,
)

FEED = ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})
SCHEMA = "id long, name string, city string, lsn long, op string"


def _plain(cell):
    return tuple(_plain(c) for c in cell) if isinstance(cell, tuple) else cell


def _rejected_rows(rows) -> list[tuple]:
    found = [tuple(_plain(tuple(c) if hasattr(c, "__fields__") else c) for c in r) for r in rows]
    return sorted(found, key=repr)


def _local_rejected(result) -> list[tuple]:
    return sorted(((*r.event, str(r.reason), r.detail) for r in result.rejected), key=repr)


def _scd_rows(spark, table: ScdTable) -> list[tuple]:
    return sorted((tuple(r) for r in read_scd(spark, table).collect()), key=lambda r: (r[0], r[-2] if table.scd_type == 2 else 0))


def _model_rows(rows) -> list[tuple]:
    return sorted(scd2(rows), key=lambda r: (r[0], r[3]))


def test_a_flat_feed_in_batch_equals_the_local_run_and_the_models(spark, tmp_path):
    rows = flat_feed(7)
    frame = spark.createDataFrame([tuple(r.values()) for r in rows], SCHEMA)
    run = run_feed_batch(FEED, frame, into=str(tmp_path / "arr"), scd1=tmp_path / "scd1", scd2=tmp_path / "scd2")
    local = run_feed(FEED, rows)
    assert _rejected_rows(run.result.rejected.collect()) == _local_rejected(local.result)
    assert _scd_rows(spark, run.scd2) == _model_rows(rows)
    assert {r[0]: r[1:] for r in _scd_rows(spark, run.scd1)} == last_write_wins(rows)


def test_rows_refused_on_spark_are_the_rows_refused_locally(spark):
    rows = [
        {"region": "eu", "id": 1, "name": "A", "lsn": 5, "offset": 1, "op": None},
        {"region": None, "id": 1, "name": "A", "lsn": 5, "offset": 1, "op": "d"},
        {"region": "eu", "id": 2, "name": "B", "lsn": 5, "offset": None, "op": "c"},
        {"region": "eu", "id": 3, "name": "C", "lsn": 5, "offset": 2, "op": "c"},
    ]
    feed = ChangeFeed(keys=["region", "id"], sequence_by=["lsn", "offset"], delete_when={"op": "d"})
    frame = spark.createDataFrame(rows, "region string, id long, name string, lsn long, offset long, op string")
    events, _ = feed_events(feed, frame)
    found = sorted((tuple(_plain(tuple(c) if hasattr(c, "__fields__") else c) for c in r) for r in events.collect()), key=repr)
    expected = []
    for e in feed.events(rows):
        refusal = None if not hasattr(e, "reason") else (str(e.reason), e.detail)
        expected.append((*(e.event if refusal else e), refusal))
    assert found == sorted(expected, key=repr)


def test_a_feed_keyed_by_two_columns_in_batch_and_stream_equals_the_local_run(spark, tmp_path):
    """Keys of two columns step in Arrow as a single column's do: the same
    arrangement as locally, and the same rows refused (a region missing: null_key)."""
    rows = [dict(r, region=("eu", "us", "eu", "us", None)[i % 5]) for i, r in enumerate(flat_feed(17, n=40))]
    feed = ChangeFeed(keys=["region", "id"], sequence_by=["lsn"], delete_when={"op": "d"})
    schema = f"region string, {SCHEMA}"
    frame = spark.createDataFrame([{n: r[n] for n in ("region", "id", "name", "city", "lsn", "op")} for r in rows], schema)
    local = run_feed(feed, rows, into=tmp_path / "local")
    batch = run_feed_batch(feed, frame, into=str(tmp_path / "batch"))
    assert PersistedArrangement(tmp_path / "batch").updates() == PersistedArrangement(tmp_path / "local").updates()
    assert _rejected_rows(batch.result.rejected.collect()) == _local_rejected(local.result)

    source = tmp_path / "in"
    source.mkdir()
    ordered = sorted(rows, key=lambda r: (r["lsn"] is None, r["lsn"] or 0))
    for i in range(2):
        path = source / f"{i:02}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in ordered[i * 20 : (i + 1) * 20][::-1]))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    into = str(tmp_path / "stream")
    query, _ = run_feed_stream(feed, stream, into=into, checkpoint=str(tmp_path / "cp"), trigger={"availableNow": True}, progress=None)
    query.awaitTermination()
    frontier = read_state(into)["upper"]
    final = [r for r in rows if r["lsn"] is None or r["lsn"] < frontier]
    assert len(final) < len(rows)
    run_feed(feed, final, into=tmp_path / "local-final")
    assert PersistedArrangement(into).updates() == PersistedArrangement(tmp_path / "local-final").updates()
    assert _rejected_rows(read_rejected(spark, into).collect()) == _local_rejected(run_feed(feed, rows).result)


@pytest.mark.parametrize("wrapped", [False, True, "payload only"])
def test_a_debezium_json_feed_read_by_spark(spark, tmp_path, wrapped):
    rows = flat_feed(11)
    path = tmp_path / "feed.jsonl"
    lines = with_tombstones(rows, [debezium(r, wrapped) for r in rows], wrapped)
    lines += [wrap({"op": op, "source": {"lsn": 5000 + i}, "ts_ms": 1}, wrapped) for i, op in enumerate("tm")]  # a TRUNCATE, a message
    path.write_text("".join(json.dumps(line if line is not None else {}) + "\n" for line in lines))
    feed = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name", "city"], envelope="debezium")
    frame = spark.read.json(str(path))
    run = run_feed_batch(feed, frame, into=str(tmp_path / "arr"), scd2=tmp_path / "scd2")
    local = run_feed(feed, [json.loads(line) for line in path.read_text().splitlines()])
    assert _scd_rows(spark, run.scd2) == _model_rows(rows)
    assert _rejected_rows(run.result.rejected.collect()) == _local_rejected(local.result)


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "wrapped"])
def test_a_debezium_json_file_of_only_tombstones_is_refused_saying_so(spark, tmp_path, wrapped):
    """Spark infers no envelope from a file of tombstones alone (no columns, or a
    payload that is null in every row, typed as text): the run is refused, saying
    what the file holds, rather than failing inside Spark."""
    from statemachines import InvalidArgument

    path = tmp_path / "tombstones.jsonl"
    path.write_text("".join(json.dumps(wrap(None, wrapped) or {}) + "\n" for _ in range(3)))
    feed = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name"], envelope="debezium")
    assert all(r.detail == TOMBSTONE for r in run_feed(feed, [json.loads(line) for line in path.read_text().splitlines()]).result.rejected)
    with pytest.raises(InvalidArgument, match="lacks op, before, after .*only Kafka tombstones"):
        run_feed_batch(feed, spark.read.json(str(path)))


def test_a_debezium_json_file_with_a_payload_encoded_twice_is_refused_saying_to_decode_it(spark, tmp_path):
    """One message whose payload is JSON text among records: Spark reads every row's
    payload as text, records included, so the run is refused, saying so; locally that
    message alone is rejected as malformed and the others apply."""
    from statemachines import InvalidArgument, Reason

    envelopes = [{"op": "c", "before": None, "after": {"id": i, "name": f"n{i}"}, "source": {"lsn": 100 + i}} for i in range(3)]
    lines = [wrap(e, True) for e in envelopes]
    lines[1] = {**lines[1], "payload": json.dumps(envelopes[1])}
    path = tmp_path / "twice.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    feed = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name"], envelope="debezium")
    local = run_feed(feed, lines).result
    assert [r.reason for r in local.rejected] == [Reason.MALFORMED] and len(local.updates) == 2
    with pytest.raises(InvalidArgument, match="its payload is a string.*JSON text in some rows.*F.from_json"):
        run_feed_batch(feed, spark.read.json(str(path)))


def test_a_debezium_update_that_moves_a_row_to_another_key_on_spark(spark, tmp_path):
    """The old key is deleted, as locally (the stream reads with the same columns)."""
    from tests.test_feeds import MOVED, moved_keys_feed

    envelopes = [envelope for envelope, _ in moved_keys_feed()]
    run_feed(MOVED, envelopes, into=tmp_path / "local")
    (tmp_path / "feed.jsonl").write_text("".join(json.dumps(envelope) + "\n" for envelope in envelopes))
    run = run_feed_batch(MOVED, spark.read.json(str(tmp_path / "feed.jsonl")), into=str(tmp_path / "batch"))
    assert run.result.rejected.count() == 0
    assert PersistedArrangement(tmp_path / "batch").updates() == PersistedArrangement(tmp_path / "local").updates()


def test_a_debezium_value_it_did_not_send_is_refused_on_spark_as_locally(spark, tmp_path):
    from tests.test_feeds import TOASTED, toasted_feed

    envelopes = toasted_feed()
    local = run_feed(TOASTED, envelopes, into=tmp_path / "local")
    (tmp_path / "feed.jsonl").write_text("".join(json.dumps(envelope) + "\n" for envelope in envelopes))
    run = run_feed_batch(TOASTED, spark.read.json(str(tmp_path / "feed.jsonl")), into=str(tmp_path / "batch"))
    assert PersistedArrangement(tmp_path / "batch").updates() == PersistedArrangement(tmp_path / "local").updates()
    assert _rejected_rows(run.result.rejected.collect()) == _local_rejected(local.result)
    assert len(local.result.rejected) == 2


@pytest.mark.parametrize("only", ["upserts", "deletes"])
def test_a_debezium_json_feed_whose_before_or_after_is_null_in_every_row(spark, tmp_path, only):
    """Spark reads an image that is null in every row (before in a feed of upserts
    without REPLICA IDENTITY FULL, after in a feed of deletes, here of rows an earlier
    feed inserted) as a string: the feed still runs, as locally, and an image that is
    no record is refused as locally."""

    feed = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name"], envelope="debezium")
    inserts = [debezium_envelope("c", 1, None, {"id": 1, "name": "a"}), debezium_envelope("c", 2, None, {"id": 2, "name": "b"})]
    if only == "upserts":
        envelopes = [debezium_envelope("u", 3, None, {"id": 1, "name": "c"}), debezium_envelope("d", 4, "not a record", None)]
        refused = "op 'd' without before"
    else:
        envelopes = [debezium_envelope("d", 3, {"id": 1, "name": None}, None), debezium_envelope("u", 4, None, "not a record")]
        refused = "op 'u' without after"
    for i, part in enumerate((inserts, envelopes)):
        (tmp_path / f"{i}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in part))
        frame = spark.read.json(str(tmp_path / f"{i}.jsonl"))
        local = run_feed(feed, part, into=tmp_path / "local")
        run = run_feed_batch(feed, frame, into=str(tmp_path / "batch"))
    assert not isinstance(frame.schema["before" if only == "upserts" else "after"].dataType, T.StructType)
    assert PersistedArrangement(tmp_path / "batch").updates() == PersistedArrangement(tmp_path / "local").updates()
    assert PersistedArrangement(tmp_path / "local").values(1) == ({("c",)} if only == "upserts" else set())
    assert _rejected_rows(run.result.rejected.collect()) == _local_rejected(local.result)
    assert [r.detail for r in local.result.rejected] == [refused]


def test_a_feed_stream_keeps_its_scd_tables_micro_batch_by_micro_batch(spark, tmp_path):
    """Files in log order, each shuffled within; one file per micro-batch. The tables
    show the times the stream made final (below its frontier)."""
    rows = flat_feed(3, n=80)
    ordered = sorted((r for r in rows if r["lsn"] is not None), key=lambda r: r["lsn"])
    ordered += [r for r in rows if r["lsn"] is None]
    source = tmp_path / "in"
    source.mkdir()
    for i in range(4):
        part = ordered[i * 20 : (i + 1) * 20][::-1]
        path = source / f"{i:02}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the stream takes files by age
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    into = str(tmp_path / "arr")
    query, run = run_feed_stream(
        FEED, frame, into=into, checkpoint=str(tmp_path / "cp"), scd1=tmp_path / "scd1",
        scd2=tmp_path / "scd2", trigger={"availableNow": True}, progress=None,
    )
    query.awaitTermination()
    frontier = read_state(into)["upper"]
    final = [r for r in rows if r["lsn"] is None or r["lsn"] < frontier]
    assert len(final) < len(rows)  # some events wait for a later frontier
    assert _scd_rows(spark, run.scd2) == _model_rows(final)
    assert {r[0]: r[1:] for r in _scd_rows(spark, run.scd1)} == last_write_wins(final)
    assert _rejected_rows(read_rejected(spark, into).collect()) == _local_rejected(run_feed(FEED, rows).result)


def test_a_debezium_feed_stream_equals_the_models(spark, tmp_path):
    rows = flat_feed(13, n=60, bad=False)
    ordered = sorted(rows, key=lambda r: r["lsn"])
    source = tmp_path / "in"
    source.mkdir()
    for i in range(3):
        path = source / f"{i}.json"
        path.write_text("".join(json.dumps(debezium(r)) + "\n" for r in ordered[i * 20 : (i + 1) * 20][::-1]))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    schema = spark.read.json(str(source)).schema
    frame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    feed = ChangeFeed(keys=["id"], sequence_by=["source.lsn"], values=["name", "city"], envelope="debezium")
    into = str(tmp_path / "arr")
    query, run = run_feed_stream(
        feed, frame, into=into, checkpoint=str(tmp_path / "cp"), scd2=tmp_path / "scd2",
        trigger={"availableNow": True}, progress=None,
    )
    query.awaitTermination()
    frontier = read_state(into)["upper"]
    assert _scd_rows(spark, run.scd2) == _model_rows([r for r in rows if r["lsn"] < frontier])


def test_a_delta_change_feed_on_spark_equals_the_local_run(spark, tmp_path):
    """Delta's change data feed as a DataFrame (here from delta-rs; Spark with Delta
    reads it with ``readChangeFeed``), with a row of an unknown change type: the same
    arrangement, rejections and SCD2 table as the local run; an update of an id to a
    new one among its commits."""
    import pyarrow as pa

    from tests.feed_models import delta_change_feed, delta_changes

    feed = ChangeFeed(keys=["id"], envelope="delta")
    versions = delta_change_feed(tmp_path / "source", seed=12, commits=8)
    changes = delta_changes(tmp_path / "source")
    changes = changes.set_column(
        changes.schema.get_field_index("_commit_version"), "_commit_version", changes["_commit_version"].cast(pa.int64())
    )
    odd = {"id": 99, "name": "X", "city": "Y", "_change_type": "truncate", "_commit_version": 2, "_commit_timestamp": None}
    changes = pa.concat_tables([changes, pa.Table.from_pylist([odd], changes.schema)])
    run = run_feed_batch(feed, spark.createDataFrame(changes), into=str(tmp_path / "arr"), scd2=tmp_path / "scd2")
    local = run_feed(feed, changes.to_pylist(), into=tmp_path / "local", scd2=tmp_path / "local-scd2")
    assert PersistedArrangement(tmp_path / "arr").updates() == PersistedArrangement(tmp_path / "local").updates()
    assert _rejected_rows(run.result.rejected.collect()) == _local_rejected(local.result)
    assert [r.reason.value for r in local.result.rejected] == ["bad_operation"]
    assert _scd_rows(spark, run.scd2) == sorted(
        (tuple(r.values()) for r in local.scd2.read().to_pylist()), key=lambda r: (r[0], r[-2])
    )
    assert len(versions) == 9
    images = {kind: {(r["id"], r["_commit_version"]) for r in changes.to_pylist() if r["_change_type"] == kind}
              for kind in ("update_preimage", "update_postimage")}
    assert images["update_preimage"] - images["update_postimage"], "no update changed an id"


def test_a_delta_change_feed_stream_keeps_the_table_at_each_final_version(spark, tmp_path):
    """Delta's change data feed as a stream of one Parquet file per commit, two files a
    micro-batch: the SCD1 table is the Delta table at the last version the stream made
    final."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.feed_models import delta_change_feed, delta_changes

    versions = delta_change_feed(tmp_path / "source", seed=5, commits=5)
    changes = delta_changes(tmp_path / "source")
    changes = changes.set_column(
        changes.schema.get_field_index("_commit_version"), "_commit_version", changes["_commit_version"].cast(pa.int64())
    )
    source = tmp_path / "in"
    source.mkdir()
    for version in range(len(versions)):
        path = source / f"{version:02}.parquet"
        pq.write_table(changes.filter(pa.compute.equal(changes["_commit_version"], version)), path)
        os.utime(path, (1_700_000_000 + version,) * 2)  # the stream takes files by age
    schema = spark.read.parquet(str(source)).schema
    frame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).parquet(str(source))
    into = str(tmp_path / "arr")
    query, run = run_feed_stream(
        ChangeFeed(keys=["id"], envelope="delta"), frame, into=into, checkpoint=str(tmp_path / "cp"),
        scd1=tmp_path / "scd1", trigger={"availableNow": True}, progress=None,
    )
    query.awaitTermination()
    final = read_state(into)["upper"] - 1  # the stream's frontier holds the last version back
    assert final >= 1
    assert {r[0]: r[1:] for r in _scd_rows(spark, run.scd1)} == versions[final]
