"""Every example runs, and prints what the reference runtime computes."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest

from statemachines import format_table, run_local
from statemachines.library import Upsert
from tests import background

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))


def run_example(name, *args):
    """Run an example in an empty directory with an empty TMPDIR; it must leave both empty."""
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=600,
            cwd=cwd, env={**background.environment(), "TMPDIR": scratch},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert os.listdir(cwd) == [], f"{name} left files in the working directory"
        assert os.listdir(scratch) == [], f"{name} left temporary files behind"
    return done.stdout


# The examples that start a Spark session run as background jobs (tests/background.py).
background.job("customers_cdc")(lambda work: run_example("customers_cdc.py"))
background.job("login_fraud")(lambda work: run_example("login_fraud.py", "--users", "100"))
background.job("upsert_batch_and_stream")(
    lambda work: (work, run_example("upsert_batch_and_stream.py", "--out", str(work)))
)


def test_quickstart_prints_the_update_tables():
    import quickstart

    out = run_example("quickstart.py")
    assert format_table(run_local(Upsert(), quickstart.COMMANDS).updates) in out
    assert format_table(run_local(quickstart.Tags(), quickstart.TAG_EVENTS).updates) in out


@pytest.mark.spark
@pytest.mark.background("customers_cdc")
def test_customers_cdc_main_job_matches_the_local_runtime(tmp_path):
    import customers_cdc

    from statemachines.library import run_feed

    out = background.result("customers_cdc")  # the README's main job: leaves nothing behind
    columns = ["id", "name", "city", "lsn", "offset", "op"]
    rows = [dict(zip(columns, row, strict=True)) for row in customers_cdc.ROWS]
    expected = run_feed(customers_cdc.FEED, rows, into=tmp_path / "arr", scd2=tmp_path / "scd2")
    assert format_table(expected.result.updates) in out
    for rejected in expected.result.rejected:
        assert f"lsn={rejected.event.time} reason={rejected.reason.value}: {rejected.detail}" in out
    history = expected.scd2.read()
    assert customers_cdc.show_rows(history.column_names, [tuple(r.values()) for r in history.to_pylist()]) in out


@pytest.mark.spark
@pytest.mark.background("login_fraud")
def test_login_fraud_prints_the_matches_the_local_runtime_finds():
    import login_fraud

    from statemachines.library import Detector, matches, timeouts

    out = background.result("login_fraud")
    local = run_local(Detector(login_fraud.fraud_pattern()), login_fraud.login_events(100)).updates
    found = matches(local)
    assert found, "the generated data should hold attacks"
    assert f"{len(found)} suspicious successes" in out
    for match in found:
        assert f"{match.key:<10} {match.time:%Y-%m-%d %H:%M:%S}" in out
    assert f"{len(timeouts(local))} partial matches timed out" in out


def test_order_lifecycle_prints_its_updates_and_its_diagram():
    import order_lifecycle

    from statemachines import diagram

    out = run_example("order_lifecycle.py")
    assert format_table(run_local(order_lifecycle.OrderLifecycle(), order_lifecycle.EVENTS).updates) in out
    assert diagram(order_lifecycle.OrderLifecycle()).to_mermaid() in out


def test_diagrams_example_draws_the_four_machines(tmp_path):
    import shutil

    import diagrams

    from statemachines import diagram

    printed = run_example("diagrams.py")  # writes nothing without --out
    for machine in diagrams.MACHINES.values():
        assert diagram(machine).to_mermaid() in printed
    out = run_example("diagrams.py", "--out", str(tmp_path))
    for name, machine in diagrams.MACHINES.items():
        assert (tmp_path / f"{name}.mmd").read_text() == diagram(machine).to_mermaid()
        assert (tmp_path / f"{name}.dot").read_text() == diagram(machine).to_dot()
        if shutil.which("dot"):
            assert "<svg" in (tmp_path / f"{name}.svg").read_text()
        else:
            assert f"no SVG for {name}" in out


def test_iot_lateness_reports_every_refused_reading():
    from collections import Counter
    from operator import itemgetter

    import iot_lateness

    from statemachines.library import UpsertWithLateness

    out = run_example("iot_lateness.py")
    events = iot_lateness.readings()
    result = run_local(UpsertWithLateness(iot_lateness.LATENESS, value_time=itemgetter(0)), events)
    assert result.rejected, "the generated data should hold late readings"
    assert f"{len(events)} readings, {len(result.updates)} updates, {len(result.rejected)} rejected" in out
    for reason, n in Counter(r.reason.value for r in result.rejected).items():
        assert f"  {reason}: {n}" in out


@pytest.mark.spark
@pytest.mark.background("upsert_batch_and_stream")
def test_upsert_batch_and_stream_agree():
    import upsert_batch_and_stream

    out_dir, out = background.result("upsert_batch_and_stream")  # kept where asked
    assert (out_dir / "batch" / "_delta_log").is_dir() and (out_dir / "stream" / "_delta_log").is_dir()
    assert "the same history in both arrangements: True" in out
    taken = [int(n) for n in re.findall(r"stream: batch \d+: (\d+) events in", out)]
    files = upsert_batch_and_stream.command_files()
    assert [n for n in taken if n] == [len(f) for f in files] + [1]  # one file per micro-batch, then the marker
