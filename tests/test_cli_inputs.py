"""The command line reads files one way on both runtimes: the feed command's results
equal the models, and every bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statemachines import PersistedArrangement
from statemachines.library import ChangeFeed, run_feed
from statemachines.scd import ScdTable
from tests.feed_models import debezium, flat_feed, last_write_wins, scd2

FEED_ARGS = ["--keys", "id", "--sequence-by", "lsn", "--delete-when", "op=d"]


def cli(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", *map(str, argv)],
        capture_output=True, text=True, cwd=cwd, timeout=600,
    )


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def scd_rows(path, scd_type=2):
    return [tuple(r.values()) for r in ScdTable(path, ["id"], ["name", "city"], scd_type=scd_type).read().to_pylist()]


def test_the_feed_command_keeps_the_scd_tables_of_the_models(tmp_path):
    rows = flat_feed(5)
    source = write_jsonl(tmp_path / "feed.jsonl", rows)
    done = cli("feed", source, "--into", tmp_path / "arr", *FEED_ARGS, "--scd1", tmp_path / "s1", "--scd2", tmp_path / "s2")
    assert done.returncode == 0, done.stderr
    rejected = sum(r["id"] is None or r["lsn"] is None or r["op"] is None for r in rows)
    assert done.stdout.startswith(f"{len(rows)} rows in") and f"{rejected} rejected" in done.stdout
    assert scd_rows(tmp_path / "s2") == scd2(rows)
    assert {r[0]: r[1:] for r in scd_rows(tmp_path / "s1", 1)} == last_write_wins(rows)


def test_the_feed_command_writes_its_rejected_rows_where_asked(tmp_path):
    rows = [*flat_feed(5), {"id": 9, "name": "n", "city": "c", "lsn": float("nan"), "op": "c"}]
    source = write_jsonl(tmp_path / "feed.jsonl", rows)
    report = tmp_path / "rejected.jsonl"
    done = cli("feed", source, "--into", tmp_path / "arr", *FEED_ARGS, "--rejected", report)
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in report.read_text().splitlines()]  # strict JSON: NaN as text
    feed = ChangeFeed(keys=["id"], sequence_by=["lsn"], delete_when={"op": "d"})
    expected = run_feed(feed, pa.Table.from_pylist(rows)).result.rejected
    assert sorted((r["reason"], r["detail"]) for r in got) == sorted((r.reason.value, r.detail) for r in expected)
    assert any(r["event"][2] == "nan" for r in got)
    kept = PersistedArrangement(tmp_path / "arr").rejected().to_pylist()  # kept with the arrangement too
    assert sorted((r["reason"], r["detail"]) for r in kept) == sorted((r["reason"], r["detail"]) for r in got)


def test_the_feed_command_reads_debezium_envelopes(tmp_path):
    rows = flat_feed(6)
    source = write_jsonl(tmp_path / "dbz.jsonl", [debezium(r, wrapped=True) for r in rows])
    done = cli(
        "feed", source, "--into", tmp_path / "arr", "--keys", "id", "--sequence-by", "source.lsn",
        "--values", "name,city", "--envelope", "debezium", "--scd2", tmp_path / "s2",
    )
    assert done.returncode == 0, done.stderr
    assert scd_rows(tmp_path / "s2") == scd2(rows)


def test_the_feed_command_reads_a_delta_change_data_feed(tmp_path):
    """A Delta table's change data feed saved as Parquet, read with ``--envelope delta``
    and no ``--sequence-by`` (``_commit_version``): the SCD1 table is the Delta table now."""
    from tests.feed_models import delta_change_feed, delta_changes

    versions = delta_change_feed(tmp_path / "source", seed=3, commits=8)
    changes = delta_changes(tmp_path / "source")
    pq.write_table(changes, tmp_path / "cdf.parquet")
    done = cli("feed", tmp_path / "cdf.parquet", "--into", tmp_path / "arr", "--keys", "id", "--envelope", "delta",
               "--scd1", tmp_path / "s1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{changes.num_rows} rows in") and " 0 rejected" in done.stdout
    assert {r[0]: r[1:] for r in scd_rows(tmp_path / "s1", 1)} == versions[-1]


@pytest.mark.spark
def test_unsigned_parquet_columns_read_alike_on_both_runtimes(spark, tmp_path):
    """Spark has no unsigned integers (its Parquet reader gives a uint64 column as
    decimal(20,0)): both runtimes read them as the signed type that holds them. Here
    the change data feed delta-rs writes (``_commit_version`` uint64), and a ``run``
    over uint8 symbols and uint64 times."""
    from statemachines.library.cli import main
    from tests.feed_models import delta_change_feed, delta_changes

    versions = delta_change_feed(tmp_path / "source", seed=3, commits=5)
    pq.write_table(delta_changes(tmp_path / "source"), tmp_path / "cdf.parquet")
    argv = ["feed", str(tmp_path / "cdf.parquet"), "--keys", "id", "--envelope", "delta", "--runtime", "spark"]
    assert main([*argv, "--into", str(tmp_path / "arr"), "--scd1", str(tmp_path / "s1")]) == 0
    assert {r[0]: r[1:] for r in scd_rows(tmp_path / "s1", 1)} == versions[-1]

    commands = pa.table({
        "key": ["a", "b", "a", "b"],
        "symbol": pa.array([1, 2, 255, None], pa.uint8()),
        "time": pa.array([1, 2, 3, 2**40], pa.uint64()),
    })
    pq.write_table(commands, tmp_path / "commands.parquet")
    for runtime in ("local", "spark"):
        into = str(tmp_path / f"run-{runtime}")
        assert main(["run", "upsert", str(tmp_path / "commands.parquet"), "--into", into, "--runtime", runtime]) == 0
    assert PersistedArrangement(tmp_path / "run-spark").updates() == PersistedArrangement(tmp_path / "run-local").updates()
    assert len(PersistedArrangement(tmp_path / "run-local").updates()) == 5


@pytest.mark.spark
def test_the_feed_command_on_spark_batch_and_stream(spark, tmp_path, capsys):
    """In this process, on the tests' session (the command takes the active one)."""
    from statemachines.library.cli import main
    from statemachines.persisted import read_state

    rows = flat_feed(8, bad=False)
    source = tmp_path / "in"
    source.mkdir()
    ordered = sorted(rows, key=lambda r: r["lsn"])
    for i in range(3):  # files in log order, each shuffled within
        path = write_jsonl(source / f"{i}.jsonl", ordered[i * 20 : (i + 1) * 20][::-1])
        os.utime(path, (1_700_000_000 + i,) * 2)
    argv = [str(source), *FEED_ARGS, "--runtime", "spark"]
    assert main(["feed", *argv, "--into", str(tmp_path / "arr"), "--scd2", str(tmp_path / "s2")]) == 0
    assert scd_rows(tmp_path / "s2") == scd2(rows)
    assert main(["feed", *argv, "--into", str(tmp_path / "sarr"), "--scd2", str(tmp_path / "ss2"), "--stream"]) == 0
    frontier = read_state(tmp_path / "sarr")["upper"]
    assert scd_rows(tmp_path / "ss2") == scd2([r for r in rows if r["lsn"] < frontier])
    assert f"{len(rows)} rows in" in capsys.readouterr().out
    envelopes = write_jsonl(tmp_path / "dbz.jsonl", [debezium(r, wrapped=True) for r in rows])
    assert main([
        "feed", str(envelopes), "--into", str(tmp_path / "darr"), "--keys", "id", "--sequence-by", "source.lsn",
        "--values", "name,city", "--envelope", "debezium", "--scd2", str(tmp_path / "ds2"), "--runtime", "spark",
    ]) == 0
    assert scd_rows(tmp_path / "ds2") == scd2(rows)


@pytest.mark.spark
def test_compressed_text_inputs_read_as_their_text_on_both_runtimes(spark, tmp_path):
    """JSON Lines and CSV files compressed whole (``.gz``, ``.bz2``), as exports often
    are, read by their suffix, in a directory beside plain ones too."""
    from statemachines.library.cli import main

    rows = flat_feed(9, bad=False)
    source = tmp_path / "in"
    source.mkdir()
    text = [json.dumps(r) + "\n" for r in rows]
    third = len(text) // 3
    for opener, name, part in ((gzip.open, "0.jsonl.gz", text[:third]), (bz2.open, "1.jsonl.bz2", text[third : 2 * third]), (open, "2.jsonl", text[2 * third :])):
        with opener(source / name, "wt") as out:
            out.write("".join(part))
    commands = tmp_path / "commands.csv.gz"
    with gzip.open(commands, "wt") as out:
        out.write("key,symbol,time\n1,a,1\n2,b,1\n1,c,2\n")
    for runtime in ("local", "spark"):
        into = tmp_path / f"{runtime}-arr"
        assert main(["feed", str(source), *FEED_ARGS, "--runtime", runtime, "--into", str(into), "--scd2", str(tmp_path / f"{runtime}-s2")]) == 0
        assert scd_rows(tmp_path / f"{runtime}-s2") == scd2(rows)
        assert main(["run", "upsert", str(commands), "--runtime", runtime, "--into", str(tmp_path / f"{runtime}-run")]) == 0
        assert PersistedArrangement(tmp_path / f"{runtime}-run").snapshot() == [((1, "c"), 1), ((2, "b"), 1)]


def _logins_and_pattern(tmp_path):
    """Random logins as CSV (an empty amount is null), and a fraud pattern over the
    record ``(kind, amount)`` stored as JSON: ``(csv, pattern file, pattern, rows)``."""
    import random

    from statemachines.library import Pattern

    rnd = random.Random(4)
    rows = [
        (f"u{rnd.randrange(5)}", rnd.choice(["fail", "fail", "ok", "view"]), rnd.choice([None, 1, 7, 12]), t // 3)
        for t in range(150)
    ]
    source = tmp_path / "logins.csv"
    source.write_text("user,kind,amount,ts\n" + "".join(f"{u},{k},{'' if a is None else a},{t}\n" for u, k, a, t in rows))
    pattern = (
        Pattern.begin("fail").where("kind = 'fail' AND amount > 5").times(2)
        .followed_by("ok").where("kind = 'ok'").within(10)
    )
    (tmp_path / "fraud.json").write_text(pattern.to_json())
    return source, tmp_path / "fraud.json", pattern, rows


@pytest.mark.spark
def test_a_pattern_file_runs_over_record_symbols_alike_on_both_runtimes(spark, tmp_path):
    """``run fraud.json logins.csv --symbol kind,amount``: the stored pattern, its SQL
    reading the named columns as one record, finds on both runtimes what the pattern
    finds over the same records in Python."""
    from collections import namedtuple

    from statemachines import run_local
    from statemachines.library import Detector, matches, timeouts
    from statemachines.library.cli import main

    source, pattern_file, pattern, rows = _logins_and_pattern(tmp_path)
    login = namedtuple("Login", ["kind", "amount"])
    expected = run_local(Detector(pattern), [(u, login(k, a), t) for u, k, a, t in rows]).updates
    assert matches(expected) and timeouts(expected)
    found = {}
    for runtime in ("local", "spark"):
        argv = ["run", str(pattern_file), str(source), "--into", str(tmp_path / runtime), "--runtime", runtime]
        assert main([*argv, "--key", "user", "--symbol", "kind,amount", "--time", "ts"]) == 0
        found[runtime] = PersistedArrangement(tmp_path / runtime).updates()
    assert found["spark"] == found["local"]
    stream_input = tmp_path / "stream-in"
    stream_input.mkdir()
    (stream_input / "logins.csv").write_text(source.read_text())
    argv = ["run", str(pattern_file), str(stream_input), "--into", str(tmp_path / "stream"), "--runtime", "spark"]
    assert main([*argv, "--key", "user", "--symbol", "kind,amount", "--time", "ts", "--stream"]) == 0
    streamed = PersistedArrangement(tmp_path / "stream")
    assert streamed.updates() == [u for u in found["local"] if u[1] < streamed.upper]  # what became final
    assert matches(streamed.updates())
    as_events = lambda rows_: sorted((r.key, r.time, tuple(e[3] for e in r.events)) for r in rows_)  # noqa: E731
    assert as_events(matches(found["local"])) == as_events(matches(expected))


@pytest.mark.parametrize(
    ("pattern_text", "extra", "message"),
    [
        ("{not json", [], "is not a pattern: a pattern document must be JSON"),
        ('{"format": "statemachines.pattern/9"}', [], "is not a pattern"),
        (None, [], "cannot read the pattern"),
        ("", ["--param", "x=1"], "takes no --param"),
        ("", ["--symbol", "kind,,amount"], "--symbol takes column names separated by commas, none empty"),
        ("", ["--symbol", "kind,kind"], "--symbol takes a column, or distinct columns"),
    ],
)
def test_a_pattern_file_given_wrongly_is_one_line_and_nothing_written(tmp_path, capsys, pattern_text, extra, message):
    from statemachines.library.cli import main

    source, pattern_file, _, _ = _logins_and_pattern(tmp_path)
    if pattern_text is None:
        pattern_file = tmp_path / "missing.json"
    elif pattern_text:
        pattern_file.write_text(pattern_text)
    argv = ["run", str(pattern_file), str(source), "--into", str(tmp_path / "arr"), "--key", "user", "--time", "ts"]
    assert main([*argv, "--symbol", "kind,amount", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "arr").exists()


def test_a_pattern_file_draws_as_its_detector(tmp_path):
    from statemachines.library import Detector
    from statemachines.library.diagrams import render

    _, pattern_file, pattern, _ = _logins_and_pattern(tmp_path)
    done = cli("diagram", pattern_file, tmp_path / "fraud.mmd")
    assert done.returncode == 0, done.stderr
    render(Detector(pattern).diagram(), str(tmp_path / "expected.mmd"))
    assert (tmp_path / "fraud.mmd").read_text() == (tmp_path / "expected.mmd").read_text()


def _bad_inputs(tmp_path):
    """name -> (file, extra arguments, what the one line says)."""
    cases = {}

    def case(name, path, message, *extra):
        cases[name] = (path, list(extra), message)

    case("no such file", tmp_path / "none.jsonl", "no such input")
    (tmp_path / "empty.parquet").write_bytes(b"")
    case("empty Parquet", tmp_path / "empty.parquet", "cannot read")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 not really")
    case("corrupt Parquet", tmp_path / "corrupt.parquet", "cannot read")
    (tmp_path / "header.csv").write_text("key,symbol,tme\n")
    case("header-only CSV, misspelt column", tmp_path / "header.csv", "no column(s) time")
    pq.write_table(pa.table({"key": pa.array([], pa.int64()), "symbol": pa.array([], pa.string()), "tme": pa.array([], pa.int64())}), tmp_path / "zero.parquet")
    case("zero-row Parquet, misspelt column", tmp_path / "zero.parquet", "no column(s) time")
    write_jsonl(tmp_path / "array.jsonl", [{"key": 1, "symbol": "a", "time": 1}, [1, 2]])
    case("a JSON line that is not an object", tmp_path / "array.jsonl", "line 2 is not a JSON object")
    write_jsonl(tmp_path / "mixed.jsonl", [{"key": 1, "symbol": "a", "time": 1}, {"key": 2, "symbol": "b", "time": "noon"}])
    case("mixed times in JSON Lines", tmp_path / "mixed.jsonl", "cannot read")
    write_jsonl(tmp_path / "words.jsonl", [{"key": 1, "symbol": "a", "time": "noon"}])
    case("text times", tmp_path / "words.jsonl", "times are numbers, dates or timestamps")
    write_jsonl(tmp_path / "nosymbol.jsonl", [{"key": 1, "symbol": "a", "time": 1}, {"key": 1, "time": 2}])
    case("a JSON line without the symbol", tmp_path / "nosymbol.jsonl", "line 2 has no field symbol")
    write_jsonl(tmp_path / "big.jsonl", [{"key": 1, "symbol": "a", "time": 1}, {"key": 2, "symbol": "b", "time": 2**64}])
    case("a time above int64", tmp_path / "big.jsonl", "outside the 64-bit integer range")
    (tmp_path / "half.csv").write_text("key,symbol,time\n1,a,2.5\n")
    case("a time not of --schema's type", tmp_path / "half.csv", "cannot read", "--schema", "key:int64,symbol:string,time:int64")
    case("a --schema that is not one", tmp_path / "half.csv", "--schema takes", "--schema", "key:int64,symbol")
    (tmp_path / "broken.jsonl.gz").write_bytes(b"\x1f\x8b not gzip at all")
    case("a file that is not the gzip its name says", tmp_path / "broken.jsonl.gz", "cannot read")
    with gzip.open(tmp_path / "nosymbol.jsonl.gz", "wt") as out:
        out.write('{"key": 1, "symbol": "a", "time": 1}\n{"key": 1, "time": 2}\n')
    case("a compressed JSON line without the symbol", tmp_path / "nosymbol.jsonl.gz", "line 2 has no field symbol")
    return cases


@pytest.mark.parametrize("runtime", ["local", "spark"])
@pytest.mark.parametrize(
    "name",
    [
        "no such file", "empty Parquet", "corrupt Parquet", "header-only CSV, misspelt column",
        "zero-row Parquet, misspelt column", "a JSON line that is not an object", "mixed times in JSON Lines",
        "text times", "a JSON line without the symbol", "a time above int64", "a time not of --schema's type", "a --schema that is not one",
        "a file that is not the gzip its name says", "a compressed JSON line without the symbol",
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written_on_both_runtimes(tmp_path, capsys, runtime, name):
    """Each bad input is refused before a Spark session starts; in this process."""
    from statemachines.library.cli import main

    path, extra, message = _bad_inputs(tmp_path)[name]
    assert main(["run", "upsert", str(path), "--into", str(tmp_path / "arr"), "--runtime", runtime, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "arr").exists()


@pytest.mark.spark
def test_a_row_spark_cannot_read_with_the_schema_is_one_line_and_nothing_written(tmp_path):
    """The schema comes from the first file; a later file's row does not fit it."""
    source = tmp_path / "in"
    source.mkdir()
    write_jsonl(source / "a.jsonl", [{"key": 1, "symbol": "a", "time": 1}])
    write_jsonl(source / "b.jsonl", [{"key": 2, "symbol": "b", "time": "noon"}])
    for runtime in ("local", "spark"):
        done = cli("run", "upsert", source, "--into", tmp_path / "arr", "--runtime", runtime, "--format", "jsonl")
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")]
        assert len(lines) == 1, lines
        assert "b.jsonl" in lines[0] or "does not fit its schema" in lines[0], lines
        assert not (tmp_path / "arr").exists()


def test_show_and_compact_take_float_times_but_not_nan(tmp_path, capsys):
    """An arrangement of float times is read at a float time, as its API reads it."""
    from statemachines.library.cli import main

    write_jsonl(tmp_path / "f.jsonl", [{"key": k, "symbol": s, "time": t} for k, s, t in EVENTS_AT_FLOATS])
    assert main(["run", "upsert", str(tmp_path / "f.jsonl"), "--into", str(tmp_path / "arr")]) == 0
    arrangement = PersistedArrangement(tmp_path / "arr")
    capsys.readouterr()
    for at in ("0.5", "1.5", "2.25"):
        assert main(["show", str(tmp_path / "arr"), "--as-of", at, "--output", "json"]) == 0
        shown = sorted((row["key"], row["value"]) for row in map(json.loads, capsys.readouterr().out.splitlines()))
        assert shown == sorted(data for data, _ in arrangement.snapshot(float(at)))
    assert main(["show", str(tmp_path / "arr"), "--as-of", "nan"]) == 2
    assert "'nan' is not a time" in capsys.readouterr().err
    assert main(["compact", str(tmp_path / "arr"), "--since", "1.5"]) == 0
    assert PersistedArrangement(tmp_path / "arr").snapshot(2.25) == arrangement.snapshot(2.25)


def test_changes_between_two_iso_datetimes_split_at_the_colon_between_them(tmp_path, capsys):
    import datetime as dt

    from statemachines.library.cli import main

    at = [dt.datetime(2024, 1, 1, h, m) for h, m in ((9, 0), (10, 30), (11, 15), (12, 45))]
    table = pa.table({"key": ["a", "b", "a", "b"], "symbol": ["w", "x", "y", "z"], "time": pa.array(at, pa.timestamp("us"))})
    pq.write_table(table, tmp_path / "f.parquet")
    assert main(["run", "upsert", str(tmp_path / "f.parquet"), "--into", str(tmp_path / "arr")]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "arr"), "--changes", "2024-01-01T10:00:2024-01-01T12:00", "--output", "json"]) == 0
    shown = [(row["key"], row["value"], row["diff"]) for row in map(json.loads, capsys.readouterr().out.splitlines())]
    expected = PersistedArrangement(tmp_path / "arr").changes(at[0].replace(hour=10), at[0].replace(hour=12))
    assert sorted(shown) == sorted((k, v, n) for (k, v), _, n in expected) and shown


EVENTS_AT_FLOATS = [("a", "x", 0.25), ("b", "y", 1.0), ("a", "z", 1.75), ("b", "w", 2.5)]


def test_show_at_a_time_of_another_kind_is_one_line(tmp_path):
    write_jsonl(tmp_path / "f.jsonl", [{"key": 1, "symbol": "a", "time": 1}])
    assert cli("run", "upsert", tmp_path / "f.jsonl", "--into", tmp_path / "arr").returncode == 0
    done = cli("show", tmp_path / "arr", "--as-of", "2024-01-01")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "are number times" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--keys", "id", "--sequence-by", "lsm"], "no column(s) lsm"),
        (["--keys", "id", "--sequence-by", "lsn", "--delete-when", "op"], "--delete-when takes"),
        (["--keys", "id", "--sequence-by", "lsn", "--values", "name", "--except-columns", "city"], "not both"),
        (["--keys", "id", "--sequence-by", "source.lsn", "--envelope", "debezium"], "no Debezium envelopes"),
    ],
)
def test_a_feed_command_given_wrongly_is_one_line_and_nothing_written(tmp_path, argv, message):
    source = write_jsonl(tmp_path / "feed.jsonl", flat_feed(1, n=5, bad=False))
    done = cli("feed", source, "--into", tmp_path / "arr", "--scd2", tmp_path / "s2", *argv)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "arr").exists() and not (tmp_path / "s2").exists()


def test_dates_round_trip_through_cdc_export_and_import(tmp_path):
    (tmp_path / "f.csv").write_text("key,symbol,time\n1,a,2024-01-01\n1,b,2024-01-03\n")
    assert cli("run", "upsert", tmp_path / "f.csv", "--into", tmp_path / "arr").returncode == 0
    assert cli("cdc", "export", tmp_path / "arr", tmp_path / "out.jsonl").returncode == 0
    assert cli("cdc", "import", tmp_path / "out.jsonl", tmp_path / "copy").returncode == 0
    from statemachines import PersistedArrangement

    assert PersistedArrangement(tmp_path / "copy").updates() == PersistedArrangement(tmp_path / "arr").updates()


@pytest.mark.spark
def test_a_csv_file_reads_alike_on_both_runtimes_only_an_empty_field_is_null(spark, tmp_path):
    """Text such as NA, NULL or NaN is a value (a double column's NaN is NaN), as Spark
    reads CSV: read as null, an upsert of the string "NA" would delete its key."""
    from statemachines.library.inputs import infer_schema, read_table
    from statemachines.spark.inputs import read_frame

    source = tmp_path / "cmds.csv"
    source.write_text(
        'k,s,d,i\nr1,NA,1.5,1\nr2,NULL,NaN,2\nr3,,,3\nr4,"",Infinity,4\nr5,null,Inf,5\n'
        "r6,N/A,-Inf,6\nr7,#N/A,-Infinity,7\nr8,NaN,1e3,8\n"
    )
    schema = infer_schema(str(source), "csv")
    local = read_table(str(source), "csv", schema).to_pylist()
    on_spark = [r.asDict() for r in read_frame(spark, str(source), "csv", schema).collect()]
    assert repr(local) == repr(on_spark)
    assert [r["s"] for r in local] == ["NA", "NULL", None, None, "null", "N/A", "#N/A", "NaN"]
