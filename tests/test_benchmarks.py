"""The benchmark runner itself: it runs on small data, and a wrong output fails the run.

The scripts run in processes of their own, the longer ones as background jobs
(``tests/background.py``) while the other tests run."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tests import background

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))


def run_script(name, *args):
    """The standard output of ``benchmarks/<name> args``, which must succeed."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True, timeout=600,
        env=background.environment(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def script_job(name, script, *args):
    """The background job ``name``: the output of ``run_script(script, *args)``."""
    background.job(name)(lambda work: run_script(script, *args))


SMALL = ("--n", "3000", "--k", "30", "--runs", "1", "--skip-spark")
script_job("bench-run", "run.py", "local", "tags", "cdc", "--n", "3000", "--k", "300", "--runs", "1")
script_job("bench-cep", "cep.py", *SMALL, "--into", "--hot")
script_job("bench-sql", "cep_expressions.py", *SMALL, "--raising")
script_job("bench-sql-many", "cep_expressions.py", *SMALL, "--many-amounts")
script_job("bench-rules", "cep_rules.py", "--n", "3000", "--k", "30", "--rules", "1,4", "--skip-spark", "--event-by-event")


@pytest.mark.background("bench-run")
def test_the_runner_checks_and_prints_a_table():
    out = background.result("bench-run")
    lines = out.splitlines()
    assert "outputs checked against run_local" in lines[0]
    names = [line.split("  ")[0] for line in lines[2:]]
    assert names == [
        "local floor: bare dict loop", "local: run_local(Upsert())",
        "tags floor: hand-written dict loop", "tags: run_local(TagSet())",
        "cdc floor: dict of delivered updates", "cdc: CdcReader, 2x duplicated, shuffled",
    ]


def test_a_mismatch_fails_the_run():
    import run

    good = run.digest([(("k", "v"), 1, 1)])
    run.verify("same", good, run.digest([(("k", "v"), 1, 1)]))
    with pytest.raises(SystemExit, match="differs from the local reference"):
        run.verify("one diff off", run.digest([(("k", "v"), 1, 2)]), good)


def test_the_hand_written_detector_finds_what_the_detector_finds():
    """The CEP benchmark's floor is only a floor if it does the same work: same
    matches and timeouts (key, time, events) as run_local on the same logins."""
    import cep

    from statemachines import run_local
    from statemachines.library import Detector

    for window in (3, 10):
        events = cep.logins(3000, 30, window)
        reference = run_local(Detector(cep.pattern(window)), events).updates
        digest = cep.findings_digest(reference)
        assert digest[0] and digest[1]  # the logins give matches and timeouts
        assert cep.findings_digest(cep.hand_detector(events, window)) == digest


@pytest.mark.background("bench-cep")
def test_the_cep_benchmark_prints_its_table():
    out = background.result("bench-cep")
    assert "run_local(Detector)" in out and "hand-written detector (floor)" in out
    assert "run_local into a persisted arrangement" in out
    assert "one key of 750 events, run whole" in out and "run in parts of" in out


@pytest.mark.background("bench-sql")
@pytest.mark.background("bench-sql-many")
def test_the_sql_conditions_benchmark_checks_and_prints_its_table():
    out = background.result("bench-sql")
    assert "run_local, SQL" in out and "run_local, functions" in out and "4 amounts" in out
    assert "run_local, SQL, 1 raising" in out  # checked against the reference as the others
    assert "run_local, SQL, relevant events only" in out  # checked against run_local over those events
    many = background.result("bench-sql-many")
    assert "1,000 amounts" in many and "run_local, SQL" in many


@pytest.mark.background("bench-rules")
def test_the_rules_benchmark_checks_and_prints_a_row_per_rule_count():
    out = background.result("bench-rules")
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [row[0] for row in rows] == ["1", "4"]
    assert out.count("local, one by one:") == 2  # checked against run_local as each run is
    assert int(rows[1][-1].replace(",", "")) > int(rows[0][-1].replace(",", ""))  # more rules, more matches


def test_the_lateness_benchmark_checks_both_first_guesses_and_counts_their_runs():
    out = run_script("lateness.py", "--n", "3000", "--k", "300", "--runs", "1", "--skip-spark")
    runs = {line[:26].strip(): int(line[47:53]) for line in out.splitlines() if line.startswith("run_local")}
    assert runs == {"run_local, not guessed": 2, "run_local, guessed": 1}  # no command refused at this lateness


@pytest.mark.spark
def test_the_spark_sql_scd2_floor_gives_the_scd2_table_of_the_model(spark, tmp_path):
    """The feeds benchmark's floor is only a floor if it computes the same table."""
    import feeds
    import pyarrow.parquet as pq

    from tests.feed_models import scd2

    rows = feeds.feed_rows(3000, 200)
    feeds.scd2_floor_sql(spark, spark.createDataFrame(rows, "id long, name string, city string, lsn long, op string"), str(tmp_path / "floor"))
    found = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "floor").to_pylist())
    assert found == sorted(scd2(rows))


def test_the_feeds_benchmark_checks_and_prints_its_table():
    out = run_script("feeds.py", "--n", "5000", "--k", "500", "--runs", "1", "--skip-spark")
    assert "checked: every SCD type 2 table equals" in out
    assert "run_feed local + SCD2" in out
