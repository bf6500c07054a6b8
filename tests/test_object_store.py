"""Arrangements and SCD tables on an object store: a real S3-compatible server (moto's,
from the pip package, on 127.0.0.1; ``tests/servers.py``), reached with the settings
delta-rs reads, given as ``storage_options`` or as ``AWS_*`` environment variables.
Everything read back must equal the same work done on a local disk."""

from __future__ import annotations

import random
import tempfile
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import InvalidArgument, PersistedArrangement, collection_at, run_local
from statemachines.library import ChangeFeed, Upsert, run_feed
from statemachines.scd import ScdTable
from tests import servers


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with servers.s3_server(tmp_path_factory.mktemp("s3")) as options:
        yield options


def fresh(scheme: str = "s3") -> str:
    """A new location in the server's bucket."""
    return f"{scheme}://lake/{uuid.uuid4().hex}"


def with_environment(monkeypatch, options: dict[str, str]) -> None:
    for name, value in options.items():
        monkeypatch.setenv(name, value)


def upsert_history(seed: int, steps: int) -> list:
    rnd = random.Random(seed)
    events = [(f"k{rnd.randrange(6)}", rnd.choice(["a", "b", None]), t) for t in range(steps) for _ in range(3)]
    return run_local(Upsert(), events).updates


def write(arrangement: PersistedArrangement, updates: list, cuts: list[int], compact_at: int | None) -> None:
    """``updates`` appended in batches ending at ``cuts``, compacted to ``compact_at``
    after the batch that passes it."""
    lower = None
    for upper in cuts:
        arrangement.append([u for u in updates if (lower is None or u.time >= lower) and u.time < upper], lower, upper)
        if compact_at is not None and (lower or 0) <= compact_at < upper:
            arrangement.compact(compact_at)
        lower = upper


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.sets(st.integers(1, 11), min_size=1, max_size=4), st.none() | st.integers(0, 11))
def test_an_arrangement_on_s3_reads_as_the_same_work_on_a_local_disk(s3, seed, cuts, compact_at):
    updates = upsert_history(seed, 12)
    cuts = sorted(cuts | {12})
    uri = fresh()
    with tempfile.TemporaryDirectory() as local_dir:
        local = PersistedArrangement(local_dir)
        write(local, updates, cuts, compact_at)
        write(PersistedArrangement(uri, storage_options=s3), updates, cuts, compact_at)
        remote = PersistedArrangement.open(uri, storage_options=s3)
        assert (remote.upper, remote.since, remote.version) == (local.upper, local.since, local.version)
        assert sorted(remote.updates(), key=repr) == sorted(local.updates(), key=repr)
        for t in range(remote.since or 0, 12):
            assert dict(remote.snapshot(t)) == dict(local.snapshot(t)) == collection_at(updates, t)
        for version in range(local.version + 1):  # time travel: each version as it was
            then = PersistedArrangement.open(uri, version=version, storage_options=s3)
            local_then = PersistedArrangement.open(local_dir, version=version)
            assert (then.upper, then.since) == (local_then.upper, local_then.since)
            assert sorted(then.updates(), key=repr) == sorted(local_then.updates(), key=repr)


@pytest.mark.parametrize("scheme", ["s3", "s3a"])  # s3a: as Spark's hadoop-aws names S3
def test_the_store_settings_may_come_from_the_environment(s3, monkeypatch, scheme):
    """As delta-rs reads them: the ``AWS_*`` variables, for the log and the files alike."""
    from deltalake import DeltaTable

    with_environment(monkeypatch, s3)
    updates = upsert_history(1, 6)
    uri = fresh(scheme)
    write(PersistedArrangement(uri), updates, [3, 6], compact_at=None)
    reopened = PersistedArrangement(uri)
    assert reopened.upper == 6 and dict(reopened.snapshot(5)) == collection_at(updates, 5)
    assert DeltaTable(uri).version() == reopened.version


def test_storage_options_override_the_environment(s3, monkeypatch):
    """A wrong endpoint in the environment; the right one, with the keys spelt as
    object_store also takes them (lower case, no prefix), in ``storage_options``."""
    with_environment(monkeypatch, {**s3, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{servers.free_port()}"})
    options = {"endpoint_url": s3["AWS_ENDPOINT_URL"], "allow_http": "true"}
    uri = fresh()
    write(PersistedArrangement(uri, storage_options=options), upsert_history(2, 4), [4], compact_at=None)
    assert PersistedArrangement.open(uri, storage_options=options).upper == 4


def test_readers_opening_during_writes_on_s3_see_published_states(s3):
    updates = upsert_history(3, 20)
    uri = fresh()
    writer = PersistedArrangement(uri, storage_options=s3)
    done, compared, failures = threading.Event(), [0], []

    def read() -> None:
        try:
            while not done.is_set():
                opened = PersistedArrangement.open(uri, storage_options=s3)
                if opened.upper is not None:
                    assert dict(opened.snapshot(opened.upper - 1)) == collection_at(updates, opened.upper - 1)
                    compared[0] += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in a thread
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for t in range(20):
            writer.append([u for u in updates if u.time == t], t or None, t + 1)
            if t % 5 == 4:
                writer.compact(t - 2)
    finally:
        done.set()
        reader.join(60)
    assert not failures, failures
    print(f"reads compared: {compared[0]}")
    assert compared[0] > 0


def test_a_state_file_replaced_while_a_reader_reads_it_is_read_again(s3):
    """pyarrow reads an object in ranges of the size it found when it opened it: the
    first commit, rewriting state-0 (longer) between a reader's open and its read,
    tears that read. The reader reads it again, and gets the snapshot the commit
    published."""
    import attrs

    from statemachines import delta

    uri = fresh()
    writer = PersistedArrangement(uri, storage_options=s3)  # state-0 alone, no commit yet
    opened: list[str] = []

    class CommitWhileOpen:
        """The store's file system, the first commit made just after state-0 is opened."""

        def __init__(self, filesystem):
            self.filesystem = filesystem

        def __getattr__(self, name):
            return getattr(self.filesystem, name)

        def open_input_stream(self, path):
            stream = self.filesystem.open_input_stream(path)
            opened.append(path.rsplit("/", 1)[1])
            if len(opened) == 1:
                writer.append([(("k", "v"), 0, 1)], None, 1)
            return stream

    store = delta.location(uri, s3)
    racing = attrs.evolve(store, filesystem=CommitWhileOpen(store.filesystem))
    snapshot = delta.read_snapshot(racing)
    assert opened[:2] == [delta.state_name(0).rsplit("/", 1)[1]] * 2  # torn, then read again
    assert (snapshot.version, snapshot.state) == (writer.version, delta.read_snapshot(store).state)
    assert PersistedArrangement.open(uri, storage_options=s3).updates() == [(("k", "v"), 0, 1)]


def test_a_second_writer_on_s3_losing_the_race_is_refused_and_vacuum_removes_its_state(s3):
    """As on a local disk: the second commit from one version is refused (S3's
    conditional writes), the arrangement opens as the winner left it, and a vacuum
    deletes the loser's state file and the superseded one, not what versions need."""
    from pyarrow import fs

    uri = fresh()
    PersistedArrangement(uri, storage_options=s3).append([(("k", "v"), 0, 1)], None, 1)
    first, second = (PersistedArrangement.open(uri, storage_options=s3) for _ in range(2))
    first.append([(("k", "w"), 1, 1)], 1, 2)
    with pytest.raises(InvalidArgument, match="another writer committed"):
        second.append([(("k", "z"), 1, 1)], 1, 2)
    reopened = PersistedArrangement.open(uri, storage_options=s3)
    assert reopened.updates() == first.updates() and reopened.version == first.version
    store = reopened.location

    def states() -> int:
        return len(store.filesystem.get_file_info(fs.FileSelector(store.path("_statemachines"))))

    before = states()
    reopened.vacuum(retention_hours=0, enforce_retention_duration=False)
    assert states() == before - 2
    assert PersistedArrangement.open(uri, storage_options=s3).updates() == first.updates()


@pytest.mark.parametrize("settings_in", ["environment", "storage_options"])
def test_a_change_feed_keeps_its_scd_tables_on_s3_as_on_a_local_disk(s3, monkeypatch, tmp_path, settings_in):
    options = None
    if settings_in == "environment":
        with_environment(monkeypatch, s3)
    else:
        options = s3
    feed = ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})
    rows = [
        {"id": 1, "name": "Ada", "lsn": 1, "op": "c"}, {"id": 2, "name": "Bo", "lsn": 2, "op": "c"},
        {"id": 1, "name": "Ada L.", "lsn": 3, "op": "u"}, {"id": 2, "name": None, "lsn": 4, "op": "d"},
    ]
    base = fresh()
    remote = run_feed(feed, rows, into=f"{base}/arr", scd1=f"{base}/scd1", scd2=f"{base}/scd2", storage_options=options)
    local = run_feed(feed, rows, into=tmp_path / "arr", scd1=tmp_path / "scd1", scd2=tmp_path / "scd2")
    for kind in ("scd1", "scd2"):
        assert getattr(remote, kind).read().to_pylist() == getattr(local, kind).read().to_pylist()
    again = ScdTable(f"{base}/scd2", ["id"], ["name"], storage_options=s3)
    assert again.read().to_pylist() == local.scd2.read().to_pylist()
    assert not again.refresh(f"{base}/arr")  # it already shows the arrangement's latest version
    assert remote.arrangement.updates() == PersistedArrangement(f"{base}/arr", storage_options=s3).updates()


def test_storage_options_of_a_store_whose_files_would_not_see_them_are_refused():
    with pytest.raises(InvalidArgument, match=r"storage_options are read for s3:// locations; for gs://"):
        PersistedArrangement("gs://bucket/arrangement", storage_options={"google_service_account": "key.json"})


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_spark_without_a_file_system_for_the_store_is_refused_before_anything_is_written(spark, s3, monkeypatch, tmp_path, mode):
    """Spark's jobs read and write an arrangement's files themselves; this session has
    no S3 file system (no hadoop-aws), so the run is refused naming the fix, and the
    location stays empty."""
    from pyarrow import fs

    from statemachines import delta
    from statemachines.spark import run_batch, run_stream

    with_environment(monkeypatch, s3)
    uri = fresh()
    schema = "key string, symbol string, time long, order long"
    says = r"Spark has no file system for s3:// .*s3a:// URI with hadoop-aws"
    with pytest.raises(InvalidArgument, match=says):
        if mode == "batch":
            run_batch(Upsert(), spark.createDataFrame([("k", "a", 1, 0)], schema), into=uri, order="order")
        else:
            events = spark.readStream.schema(schema).parquet(str(tmp_path))
            run_stream(Upsert(), events, into=uri, checkpoint=tmp_path / "ckpt", order="order", progress=None)
    store = delta.location(uri)
    assert store.filesystem.get_file_info(store.root).type == fs.FileType.NotFound
