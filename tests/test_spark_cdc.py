"""CDC files from Spark and back: machine -> arrangement -> CDC files -> reader -> arrangement."""

from __future__ import annotations

import re
import shutil

import pyarrow.parquet as pq
import pytest

from statemachines import Arrangement, PersistedArrangement, consolidate, run_local
from statemachines.cdc import CdcConflict, CdcReader, Progress, Updates, read_parquet, write_parquet
from statemachines.library import Upsert
from statemachines.spark import read_cdc, run_batch, write_cdc

pytestmark = pytest.mark.spark

SCHEMA = "key string, value string, time long"


@pytest.fixture
def original(spark, tmp_path):
    path = tmp_path / "arr"
    events = [(k, f"v{t % 4}" if t % 5 else None, t, None) for t in range(30) for k in "abcd"]
    frame = spark.createDataFrame(events, "key string, symbol string, time long, order long")
    run_batch(Upsert(), frame.where("time < 12"), into=path)
    run_batch(Upsert(), frame.where("time >= 12"), into=path)
    return PersistedArrangement(path)


def test_round_trip_through_cdc_files_read_in_python(spark, original, tmp_path):
    write_cdc(spark, original.path, tmp_path / "cdc", times_per_progress=7)
    reader = CdcReader()
    updates = [u for m in read_parquet(tmp_path / "cdc") for _, ups in reader.push(m) for u in ups]
    assert reader.frontier == original.upper  # the arrangement may go on: not complete
    rebuilt = Arrangement()
    rebuilt.append(updates, lower=None, upper=original.upper)
    assert rebuilt.updates() == original.updates()


def test_duplicated_cdc_files_read_back_in_spark(spark, original, tmp_path):
    write_cdc(spark, original.path, tmp_path / "one", times_per_progress=5)
    write_cdc(spark, original.path, tmp_path / "two", times_per_progress=11)
    read = read_cdc(spark, tmp_path / "one", tmp_path / "two", schema=SCHEMA)
    assert read.frontier == original.upper and not read.complete
    got = consolidate(((r.key, r.value), r.time, r.diff) for r in read.updates.collect())
    assert got == original.updates()


def test_missing_files_leave_a_frontier_not_a_wrong_history(spark, original, tmp_path):
    write_cdc(spark, original.path, tmp_path / "cdc", times_per_progress=5)
    parts = sorted((tmp_path / "cdc").glob("part-*.parquet"))
    statements = [p for p in parts if pq.read_table(p).column("progress").null_count < pq.read_metadata(p).num_rows]
    update_files = [p for p in parts if p not in statements and pq.read_metadata(p).num_rows]
    (tmp_path / "partial").mkdir()
    for part in statements + update_files[1:]:  # one file of updates is lost
        shutil.copy(part, tmp_path / "partial" / part.name)
    read = read_cdc(spark, tmp_path / "partial", schema=SCHEMA)
    assert read.frontier is not None and read.frontier < original.upper
    got = consolidate(((r.key, r.value), r.time, r.diff) for r in read.updates.collect())
    assert got == [u for u in original.updates() if u.time < read.frontier]


def test_contradicting_files_are_refused(spark, original, tmp_path):
    write_cdc(spark, original.path, tmp_path / "good")
    other = PersistedArrangement(tmp_path / "other")
    run_local(Upsert(), [("a", "different", 1)], into=other, frontier=original.upper)
    write_cdc(spark, other.path, tmp_path / "bad")
    with pytest.raises(CdcConflict):
        read_cdc(spark, tmp_path / "good", tmp_path / "bad", schema=SCHEMA)


@pytest.mark.parametrize(
    "message, says",
    [
        (Updates(((("a", "x"), 1, 0.5),)), "a diff is a non-zero integer"),
        (Progress(None, float("nan"), ()), "nan is not a finite time"),
    ],
    ids=["update", "progress"],
)
def test_a_malformed_message_is_refused_naming_what_is_wrong(spark, tmp_path, message, says):
    """Checked as the local reader checks it: progress on the driver, updates in the tasks."""
    folder = tmp_path / "cdc"
    folder.mkdir()
    write_parquet([Updates(((("a", "x"), 0, 1),)), Progress(None, 1, ((0, 1),)), message], folder / "m.parquet")
    with pytest.raises(Exception, match=re.escape(says)):
        read_cdc(spark, folder, schema=SCHEMA)
