"""The command line on small files: results, summaries, and clear errors on bad input."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import pathlib
import subprocess
import sys

import pytest

from statemachines import LocalRuntime, PersistedArrangement, explore, format_table, run_local
from statemachines.cdc import read_jsonl
from statemachines.library import Upsert
from statemachines.library.cli import main

ROWS = [
    {"id": "frank", "email": "f@mcsherry", "lsn": 0, "offset": 0},
    {"id": "frank", "email": "f@zappa", "lsn": 1, "offset": 1},
    {"id": "ada", "email": "a@lovelace", "lsn": 1, "offset": 2},
    {"id": "frank", "email": None, "lsn": 2, "offset": 3},
    {"id": None, "email": "x@nowhere", "lsn": 2, "offset": 4},
]
COLUMNS = ["--key", "id", "--symbol", "email", "--time", "lsn", "--order", "offset"]


def events():
    return [(r["id"], r["email"], r["lsn"], r["offset"]) for r in ROWS]


@pytest.fixture
def feed(tmp_path):
    path = tmp_path / "feed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_run_then_show_history_changes_and_snapshot(feed, tmp_path, capsys):
    into = tmp_path / "arr"
    assert main(["run", "upsert", str(feed), "--into", str(into), *COLUMNS]) == 0
    summary = capsys.readouterr().out
    assert "5 events in, 5 updates out, 1 rejected (1 null_key)" in summary
    expected = run_local(Upsert(), events())
    assert PersistedArrangement(into).updates() == expected.updates

    assert main(["show", str(into), "--changes", "0:"]) == 0
    assert capsys.readouterr().out.strip() == format_table(expected.updates)
    assert main(["show", str(into), "--history", "--output", "json", "--key", "frank"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        {"key": "frank", "value": "f@mcsherry", "start": 0, "end": 1},
        {"key": "frank", "value": "f@zappa", "start": 1, "end": 2},
    ]
    assert main(["show", str(into), "--as-of", "1", "--output", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["ada,a@lovelace,1", "frank,f@zappa,1"]


def test_compact_and_cdc_round_trip(feed, tmp_path, capsys):
    into, copy, out = tmp_path / "arr", tmp_path / "copy", tmp_path / "cdc.jsonl"
    main(["run", "upsert", str(feed), "--into", str(into), *COLUMNS])
    assert main(["cdc", "export", str(into), str(out), "--batch-size", "1"]) == 0
    assert len(list(read_jsonl(out))) >= 2
    assert main(["cdc", "import", str(out), str(copy)]) == 0
    assert PersistedArrangement(copy).updates() == PersistedArrangement(into).updates()
    assert main(["compact", str(into), "--since", "3"]) == 0
    assert PersistedArrangement(into).stored_updates() == len(PersistedArrangement(into).snapshot())


@pytest.mark.parametrize(("suffix", "opener"), [(".jsonl.gz", gzip.open), (".jsonl.bz2", bz2.open)])
def test_a_cdc_export_named_compressed_is_compressed_and_imports_equal(feed, tmp_path, capsys, suffix, opener):
    into, out = tmp_path / "arr", tmp_path / f"cdc{suffix}"
    main(["run", "upsert", str(feed), "--into", str(into), *COLUMNS])
    assert main(["cdc", "export", str(into), str(out), "--batch-size", "1"]) == 0
    with opener(out, "rt") as text:  # compressed as named, a message a line
        assert len([json.loads(line) for line in text]) >= 2
    assert main(["cdc", "import", str(out), str(tmp_path / "copy")]) == 0
    assert PersistedArrangement(tmp_path / "copy").updates() == PersistedArrangement(into).updates()
    broken = tmp_path / f"broken{suffix}"
    broken.write_bytes(b"not compressed at all\n")
    capsys.readouterr()
    assert main(["cdc", "import", str(broken), str(tmp_path / "none")]) == 2
    assert "cannot read" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_vacuum_keeps_the_tables_retention_unless_told_and_lists_on_a_dry_run(feed, tmp_path, capsys):
    into = tmp_path / "arr"
    main(["run", "upsert", str(feed), "--into", str(into), *COLUMNS])
    main(["compact", str(into), "--since", "3"])
    versions = PersistedArrangement(into).version
    assert main(["check", str(into), "--version", "0"]) == 0
    assert "intact (version 0," in capsys.readouterr().out
    assert main(["vacuum", str(into), "--retention-hours", "0"]) == 2
    assert "below the table's delta.deletedFileRetentionDuration" in capsys.readouterr().err
    assert main(["vacuum", str(into), "--retention-hours", "0", "--no-retention-check", "--dry-run"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1].endswith(f"{len(listed) - 1} files would be deleted") and len(listed) > 1
    for version in range(versions + 1):  # every version still reads: nothing went
        PersistedArrangement.open(into, version=version).updates()
    assert main(["vacuum", str(into), "--retention-hours", "0", "--no-retention-check"]) == 0
    assert capsys.readouterr().out.endswith(f"{len(listed) - 1} files deleted\n")
    assert all(not (into / name).exists() for name in listed[:-1])
    assert main(["check", str(into), "--version", "0"]) == 2  # its files are gone
    assert "a vacuum deleted it" in capsys.readouterr().err
    assert main(["check", str(into), "--version", str(versions)]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "upsert", "{feed}", "--into", "{arr}", "--key", "nope"], "no column(s) nope"),
        (["run", "teleport", "{feed}", "--into", "{arr}"], "unknown machine 'teleport'"),
        (["run", "upsert", "{bad}", "--into", "{arr}", "--format", "jsonl"], "cannot read"),
        (["run", "upsert", "{missing}", "--into", "{arr}"], "no such input"),
        (["show", "{arr}"], "holds no arrangement"),
        (["feed", "{feed}", "--into", "{arr}", "--keys", "id,", "--sequence-by", "lsn"], "--keys takes column names"),
        (["feed", "{feed}", "--into", "{arr}", "--keys", "id", "--sequence-by", "lsn,,offset"], "--sequence-by takes"),
        (["run", "upsert", "{feed}", "--into", "{arr}", "--runtime", "spark", "--rejected", "{bad}"], "show INTO --rejected"),
        (["feed", "{feed}", "--into", "{arr}", "--keys", "id", "--runtime", "spark", "--rejected", "{bad}"], "show INTO --rejected"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(feed, tmp_path, argv, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n{not json\n')
    names = {"feed": feed, "arr": tmp_path / "arr", "bad": bad, "missing": tmp_path / "none.csv"}
    done = subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", *(a.format(**names) for a in argv)],
        capture_output=True, text=True,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert not (tmp_path / "arr").exists()


def test_every_command_has_help():
    for argv in (["--help"], ["run", "--help"], ["show", "--help"], ["compact", "--help"], ["cdc", "export", "--help"], ["cdc", "import", "--help"], ["diagram", "--help"]):
        done = subprocess.run([sys.executable, "-m", "statemachines.library.cli", *argv], capture_output=True, text=True)
        assert done.returncode == 0 and "usage:" in done.stdout


@pytest.mark.spark
def test_run_on_spark_matches_the_local_runtime(feed, tmp_path, spark, capsys):
    csv_path = tmp_path / "feed.csv"
    csv_path.write_text("id,email,lsn,offset\n" + "".join(
        f"{r['id'] or ''},{r['email'] or ''},{r['lsn']},{r['offset']}\n" for r in ROWS
    ))
    into = tmp_path / "arr"
    assert main(["run", "upsert", str(csv_path), "--into", str(into), "--runtime", "spark", *COLUMNS]) == 0
    assert "1 null_key" in capsys.readouterr().out
    assert PersistedArrangement(into).updates() == run_local(Upsert(), events()).updates
    # a local run keeps its rejected rows where Spark's does: each reads the other's
    assert main(["run", "upsert", str(csv_path), "--into", str(tmp_path / "local"), *COLUMNS]) == 0
    from statemachines.spark import read_rejected

    on_spark, local = (PersistedArrangement(tmp_path / name).rejected().to_pylist() for name in ("arr", "local"))
    assert on_spark == local and [r["reason"] for r in local] == ["null_key"]
    assert [r.asDict() for r in read_rejected(spark, tmp_path / "local").collect()] == on_spark


def test_a_replayed_cdc_file_set_imports_exactly_once(feed, tmp_path, capsys):
    into, copy = tmp_path / "arr", tmp_path / "copy"
    main(["run", "upsert", str(feed), "--into", str(into), *COLUMNS])
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    main(["cdc", "export", str(into), str(first), "--batch-size", "1"])
    lines = first.read_text().splitlines(keepends=True)
    second.write_text("".join(reversed(lines * 2)))  # every message twice, backwards
    for _ in range(2):
        assert main(["cdc", "import", str(second), str(first), str(second), str(copy)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].endswith(f"now complete up to {PersistedArrangement(into).upper}")
    assert out[-1].endswith("nothing new")
    assert PersistedArrangement(copy).updates() == PersistedArrangement(into).updates()
    print(f"{len(lines) * 5} messages (each 5 times, reordered) imported twice: one history")


def test_every_kind_of_bad_row_is_reported_and_the_rest_applied(tmp_path, capsys):
    valid = [("a", "x", 1), ("b", "y", 2), ("a", "z", 3)]
    bad = {
        "null_key": [(None, "x", 1)],
        "null_time": [("a", "x", None)],
        "transition_failed": [("a", "boom", 2)],
    }
    rows = valid + [r for rows in bad.values() for r in rows]
    feed = tmp_path / "mixed.jsonl"
    feed.write_text("".join(json.dumps({"key": k, "symbol": s, "time": t}) + "\n" for k, s, t in rows))
    report = tmp_path / "rejected.jsonl"
    argv = ["run", "tests.machines:Fragile", str(feed), "--into", str(tmp_path / "arr"), "--rejected", str(report)]
    assert main(argv) == 0
    got = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["reason"] for r in got) == sorted(reason for reason, rows in bad.items() for _ in rows)
    assert "cannot handle boom" in next(r["detail"] for r in got if r["reason"] == "transition_failed")
    assert len(rows) == len(valid) + len(got)  # input = applied + rejected
    from tests.machines import Fragile

    assert PersistedArrangement(tmp_path / "arr").updates() == run_local(Fragile(), valid).updates
    assert f"{len(rows)} events in" in capsys.readouterr().out
    # the arrangement keeps them too, whether or not a file was asked for
    assert main(["show", str(tmp_path / "arr"), "--rejected", "--output", "json"]) == 0
    kept = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[r["key"], r["symbol"], r["time"], r["order"]] for r in kept] == [r["event"] for r in got]
    assert [(r["reason"], r["detail"]) for r in kept] == [(r["reason"], r["detail"]) for r in got]
    print({reason: len(rows) for reason, rows in bad.items()})


def test_a_local_run_draws_progress_whose_counts_match_the_result(feed, tmp_path, capsys, monkeypatch):
    import statemachines.library.cli as cli

    monkeypatch.setattr(cli, "CHUNK", 2)
    argv = ["run", "upsert", str(feed), "--into", str(tmp_path / "arr"), *COLUMNS, "--progress", "always"]
    assert main(argv) == 0
    drawn = [line.strip() for line in capsys.readouterr().err.split("\r") if line.strip()]
    expected = run_local(Upsert(), events())
    assert PersistedArrangement(tmp_path / "arr").updates() == expected.updates
    done = [line for line in drawn if f"{len(ROWS)}/{len(ROWS)}" in line]
    assert done, drawn
    assert f"updates={len(expected.updates)}, rejected={len(expected.rejected)}" in done[-1]
    positions = [int(line.split("|")[2].split("/")[0]) for line in drawn if line.count("|") >= 2]
    assert positions == sorted(positions) and positions[0] < len(ROWS)  # it moved, forward only


def test_progress_is_quiet_off_a_terminal_unless_asked(feed, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("STATEMACHINES_PROGRESS", raising=False)
    assert main(["run", "upsert", str(feed), "--into", str(tmp_path / "a"), *COLUMNS]) == 0
    assert capsys.readouterr().err == ""  # captured output is not a terminal
    monkeypatch.setenv("STATEMACHINES_PROGRESS", "always")
    assert main(["run", "upsert", str(feed), "--into", str(tmp_path / "b"), *COLUMNS]) == 0
    assert "run Upsert" in capsys.readouterr().err


@pytest.mark.spark
def test_stream_a_directory_of_files(tmp_path, spark, capsys):
    from tests.test_spark_streaming import DELAY, local_reference, make_files

    source = tmp_path / "incoming"
    source.mkdir()
    files = make_files(source, n_files=3)
    into = tmp_path / "arr"
    argv = ["run", "upsert", str(source), "--into", str(into), "--runtime", "spark", "--stream", "--order", "order", "--delay", str(DELAY)]
    assert main(argv) == 0
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.startswith("batch")]
    assert [line.split(":")[0] for line in lines[:3]] == ["batch 0", "batch 1", "batch 2"]
    assert all(" 0 events in" in line for line in lines[3:])  # the watermark's own micro-batches
    # (the buckets keep one command per key and time waiting, as the local runtime does)
    reference = LocalRuntime(Upsert())
    updates, rejected = local_reference(files, runtime=reference)
    assert PersistedArrangement(into).updates() == updates
    assert f"{sum(len(f) for f in files):,} events in" in out.out and f"{len(rejected)} rejected" in out.out
    waiting, earliest = reference.waiting()
    assert waiting, "the last times wait for a watermark that never comes"
    assert f"; {waiting} events wait for time {earliest} (frontier {reference.frontier})" in out.out
    assert (tmp_path / "arr.checkpoint").is_dir()
    assert main(argv) == 0  # nothing new: the checkpoint remembers the files
    assert "0 events in" in capsys.readouterr().out

    # a batch run into the streamed arrangement would leave the waiting events behind
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps({"key": "a", "symbol": "z", "time": 1000, "order": 0}) + "\n")
    batch = ["run", "upsert", str(later), "--into", str(into), "--runtime", "spark", "--order", "order"]
    assert main(batch) == 2
    assert f"holds {waiting} events not yet final" in capsys.readouterr().err
    assert main([*batch, "--abandon-waiting"]) == 0
    assert PersistedArrangement(into).values("a") == {"z"}


@pytest.mark.spark
def test_stage_progress_reports_running_stages(spark):
    import io
    import time as clock

    from statemachines.spark import StageProgress

    def slow(batches):
        for batch in batches:
            clock.sleep(0.4)
            yield batch

    out = io.StringIO()
    with StageProgress(spark, label="job", every=0.2, out=out, enabled=True) as shown:
        spark.range(0, 8, numPartitions=4).mapInArrow(slow, "id long").collect()
    drawn = out.getvalue()
    assert "job:" in drawn and "/4 tasks" in drawn and "stage " in drawn
    assert shown.counter is not None and shown.counter.value == 0  # nothing added to it here


def test_upsert_with_lateness_by_name_on_json_readings(tmp_path, capsys):
    rows = [("s1", [100, 20.5], 1), ("s1", [130, 21.0], 2), ("s2", [20, 19.0], 3), ("s1", [131, 21.5], 4)]
    feed = tmp_path / "readings.jsonl"
    feed.write_text("".join(json.dumps({"key": k, "symbol": s, "time": t}) + "\n" for k, s, t in rows))
    argv = ["run", "upsert_with_lateness", str(feed), "--into", str(tmp_path / "arr"), "--param", "lateness=60"]
    assert main(argv) == 0
    assert "4 events in, 5 updates out, 1 rejected (1 value_below_waterline)" in capsys.readouterr().out
    assert PersistedArrangement(tmp_path / "arr").values("s1") == {(131, 21.5)}


def cli(*argv, cwd=None, prelude=""):
    """The command line in a fresh interpreter; ``prelude`` runs first (e.g. to block an import)."""
    code = f"{prelude}\nimport sys\nfrom statemachines.library.cli import main\nsys.exit(main(sys.argv[1:]))"
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=cwd, env=env)


def test_version_is_the_installed_one():
    from importlib.metadata import version

    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"statemachines {version('statemachines')}"


def test_help_is_plain_text_and_every_option_says_what_it_does_and_its_default():
    top = cli("--help").stdout
    assert "``" not in top and ":func:" not in top and "examples:" in top
    run_help = " ".join(cli("run", "--help").stdout.split("options:", 1)[1].split())  # argparse wraps lines
    for option, default in [("--key", "key"), ("--symbol", "symbol"), ("--time", "time"), ("--runtime", "local"), ("--delay", "0")]:
        described = run_help.split(f" {option} ", 1)[1].split(" --", 1)[0]
        assert len(described.split()) > 4 and f"(default: {default})" in described, (option, described)
    from statemachines.library.cli import parser

    def actions(command):
        for action in command._actions:
            yield action
            if isinstance(action.choices, dict):  # subcommands
                for sub in action.choices.values():
                    yield from actions(sub)

    seen = list(actions(parser()))
    assert len(seen) > 40
    for action in seen:
        assert action.help, f"{action.option_strings or action.dest} has no help"


def test_a_module_in_the_current_directory_is_found_by_run_and_diagram(tmp_path):
    (tmp_path / "mymachines.py").write_text(
        "from statemachines import Machine\n"
        "class Tags(Machine):\n"
        "    def transition(self, key, values, symbol, time):\n"
        "        op, tag = symbol\n"
        "        return values | {tag} if op == 'add' else values - {tag}\n"
    )
    (tmp_path / "tags.jsonl").write_text(
        "".join(json.dumps({"key": "doc", "symbol": s, "time": t}) + "\n" for t, s in enumerate([["add", "x"], ["add", "y"], ["del", "x"]]))
    )
    done = cli("run", "mymachines:Tags", "tags.jsonl", "--into", "arr", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert PersistedArrangement(tmp_path / "arr").values("doc") == {"y"}
    done = cli("diagram", "mymachines:Tags", "tags.mmd", "--alphabet", '[["add", "x"], ["del", "x"]]', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    drawn = (tmp_path / "tags.mmd").read_text()
    assert "('add', 'x')" in drawn and "('del', 'x')" in drawn and "rejected" not in drawn


@pytest.mark.parametrize(
    "alphabet",
    ['[["add", "x"], ["del", "x"]]', '["add", "x"], ["del", "x"]', '["add","x"],["del","x"]'],
)
def test_the_alphabet_is_read_as_json_with_commas_inside_symbols(tmp_path, capsys, alphabet):
    from tests.machines import Tags

    assert main(["diagram", "tests.machines:Tags", str(tmp_path / "t.mmd"), "--alphabet", alphabet]) == 0
    expected = explore(Tags(), [("add", "x"), ("del", "x")]).to_mermaid()
    assert (tmp_path / "t.mmd").read_text() == expected


def test_an_alphabet_the_machine_rejects_entirely_is_an_error_not_a_junk_diagram(tmp_path, capsys):
    assert main(["diagram", "tests.machines:Tags", str(tmp_path / "t.mmd"), "--alphabet", "add,x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "every one was rejected" in err
    assert not (tmp_path / "t.mmd").exists()


BLOCK = "import sys\nfor name in {names!r}: sys.modules[name] = None  # as if not installed"


@pytest.mark.parametrize(
    ("blocked", "argv", "hint"),
    [
        (["pyspark"], ["run", "upsert", "{feed}", "--into", "{arr}", "--runtime", "spark", *COLUMNS], "pip install 'statemachines[spark]'"),
        (["pyarrow"], ["run", "upsert", "{feed}", "--into", "{arr}", *COLUMNS], "pip install 'statemachines[persist]'"),
        (["pyarrow"], ["run", "upsert", "{parquet}", "--into", "{arr}"], "pip install 'statemachines[persist]'"),
        (["tqdm"], ["run", "upsert", "{feed}", "--into", "{arr}", *COLUMNS], "pip install tqdm"),
        (["graphviz"], ["diagram", "upsert", "{arr}.svg"], "pip install graphviz"),
    ],
)
def test_a_missing_extra_is_one_line_with_the_install_command_and_exit_2(feed, tmp_path, blocked, argv, hint):
    parquet = tmp_path / "feed.parquet"
    parquet.write_bytes(b"PAR1")  # never read: the reader is missing
    names = {"feed": feed, "arr": tmp_path / "arr", "parquet": parquet}
    done = cli(*(a.format(**names) for a in argv), prelude=BLOCK.format(names=blocked))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and hint in done.stderr, done.stderr
    assert not (tmp_path / "arr").exists()


def test_a_local_run_needs_no_pyspark(feed, tmp_path):
    done = cli(
        "run", "upsert", str(feed), "--into", str(tmp_path / "arr"), *COLUMNS,
        prelude=BLOCK.format(names=["pyspark", "py4j"]) + "\nimport statemachines.library.cli",
    )
    assert done.returncode == 0, done.stderr
    assert PersistedArrangement(tmp_path / "arr").updates() == run_local(Upsert(), events()).updates


def test_run_into_a_directory_that_is_not_an_arrangement_is_refused_and_untouched(feed, tmp_path):
    target = tmp_path / "reports"
    target.mkdir()
    (target / "batch-2024.csv").write_text("someone's file\n")
    done = cli("run", "upsert", str(feed), "--into", str(target), *COLUMNS)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "holds no arrangement and is not empty" in done.stderr
    assert sorted(p.name for p in target.iterdir()) == ["batch-2024.csv"]
