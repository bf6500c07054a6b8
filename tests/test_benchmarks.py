"""The benchmark runner itself: it runs on small data, and a wrong output fails the run."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))


def test_the_runner_checks_and_prints_a_table():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "local", "tags", "cdc", "--n", "3000", "--k", "300", "--runs", "1"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
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
