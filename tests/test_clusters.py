"""Machines defined anywhere, on a real standalone cluster and a real Spark Connect server.

Both servers start from the pip package on 127.0.0.1 (``tests/servers.py``) and run
their Python through an interpreter that can import neither this project nor the
tests, so everything a job needs must be shipped. The driver of each run is its own
process (``tests/remote_job.py``), as a user's script: one machine defined in its
``__main__``, one in a test module, each in batch and in streaming, and a rule
detector whose rules also arrive as a stream. Every result must equal
``run_local`` on the same events.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from statemachines import consolidate, run_local
from statemachines.library import RuleDetector
from tests import background, servers
from tests.machines import Fragile
from tests.remote_job import Tags, rules_case

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
RUNS = ["main-batch", "main-stream", "module-batch", "module-stream", "rules-stream"]
JOB_TIMEOUT = 480  # seconds for one driver process and its four runs


def make_events(seed: int = 7, n: int = 120) -> list[list]:
    """Events over a few keys, sorted by time (no event is late in streaming), with
    null keys and symbols each machine refuses in its own way."""
    rng = random.Random(seed)
    symbols = ["add:a", "add:b", "del:a", "del:b", "add:c", "boom", "!x", "bogus"]
    events = []
    for i in range(n):
        key = None if rng.random() < 0.05 else f"k{rng.randrange(8)}"
        events.append([key, rng.choice(symbols), rng.randrange(40), i])
    return sorted(events, key=lambda e: e[2])


def expected(machine_name: str, events: list[list]) -> tuple[list, list]:
    if machine_name == "rules":  # the rule book of the rows that arrive in time, from the start
        first, arriving, events = rules_case(events)
        machine: Any = RuleDetector([*first, *arriving[0], arriving[1][0]])
    else:
        machine = Tags() if machine_name == "main" else Fragile()
    result = run_local(machine, [tuple(e) for e in events])
    rejected = sorted(([r.event.key, r.event.time, r.reason.value] for r in result.rejected), key=repr)
    return [((k, as_json(v)), t, d) for (k, v), t, d in result.updates], rejected


def as_json(value: Any) -> Any:
    """A value as it comes back through JSON, with tuples for lists (hashable)."""
    def tuples(x: Any) -> Any:
        return tuple(tuples(y) for y in x) if isinstance(x, list) else x

    return tuples(json.loads(json.dumps(value)))


def driver_env(python: str) -> dict[str, str]:
    """A user's driver environment: the cluster's interpreter named, no extra import path."""
    env = {k: v for k, v in background.environment().items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = python
    return env


def run_job(tmp: Path, flag: str, url: str, python: str, runs: list[str] = RUNS, server_log: Path | None = None) -> dict:
    """Run ``tests/remote_job.py`` against ``url``; its results per run. A job that
    does not end in time is asked for its threads' stacks, then killed: the error
    shows them with the end of ``server_log``."""
    tmp.mkdir(exist_ok=True)
    events = make_events()
    (tmp / "events.json").write_text(json.dumps(events))
    with open(tmp / "job.err", "wb") as err:
        job = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "remote_job.py"), flag, url, "--runs", ",".join(runs),
             str(tmp / "events.json"), str(tmp)],
            stdout=subprocess.DEVNULL, stderr=err, env=driver_env(python), cwd=tmp, start_new_session=True,
        )
        try:
            code = job.wait(JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            job.send_signal(signal.SIGUSR1)  # remote_job writes its stacks to stderr
            time.sleep(2)
            servers.stop(job)
            raise AssertionError(
                f"the job did not end within {JOB_TIMEOUT} s; its stderr ends:\n{tail(tmp / 'job.err')}\n"
                f"the server's log ends:\n{tail(server_log)}"
            ) from None
    assert code == 0, tail(tmp / "job.err")
    return json.loads((tmp / "result.json").read_text())


def tail(path: Path | None, size: int = 6000) -> str:
    return path.read_text(errors="replace")[-size:] if path is not None and path.exists() else ""


# The driver processes and servers run as background jobs (tests/background.py): each
# server starts, takes the remote job and the command line's run, and stops.


@background.job("cluster-local")
def local_job(work: Path) -> dict:
    """The script's own machine on the embedded local session (its default Python)."""
    return run_job(work, "--master", "local[2]", sys.executable, RUNS[:2])


@background.job("standalone")
def standalone_job(work: Path) -> dict:
    with servers.standalone(work / "server") as url:
        python = servers.bare_python(work / "server")
        return {"job": run_job(work / "job", "--master", url, python, server_log=work / "server" / "cluster.log"), "cli": cli_ships_py_files(work, url, python)}


@background.job("connect")
def connect_job(work: Path) -> dict:
    with servers.connect_server(work / "server") as url:
        python = servers.bare_python(work / "server")
        return {"job": run_job(work / "job", "--remote", url, python, server_log=work / "server" / "connect.log"), "cli": cli_streams(work, url, python)}


@pytest.fixture(scope="module")
def local_results():
    return background.result("cluster-local")


@pytest.fixture(scope="module")
def standalone_results():
    return background.result("standalone")["job"]


@pytest.fixture(scope="module")
def connect_results():
    return background.result("connect")["job"]


def check(result: dict, run: str) -> None:
    machine_name, mode = run.split("-")
    updates, rejected = expected(machine_name, make_events())
    assert consolidate(((d[0], as_json(d[1])), d[2], d[3]) for d in result["updates"]) == updates
    assert sorted(result["rejected"], key=repr) == rejected
    assert updates and rejected  # the events exercise both
    if machine_name == "rules":
        _, arriving, _ = rules_case(make_events())
        assert result["rules_rejected"] == [[*arriving[1][1], "late"]]
        assert any(value[0] == "retired" for (_, value), _, _ in updates)
    if mode == "batch":  # run again with a shared scratch folder: the tasks wrote the rows, now deleted
        scratch = result["scratch"]
        assert scratch["folder"] and not scratch["left"]
        assert consolidate(((d[0], as_json(d[1])), d[2], d[3]) for d in scratch["updates"]) == updates
        assert sorted(scratch["rejected"], key=repr) == rejected
    if mode == "stream":  # reports reach the driver, with the counts of the published batches
        reports = result["reports"]
        assert [r[0] for r in reports] == list(range(len(reports)))
        assert sum(r[2] for r in reports) == len(result["updates"])
        assert result["declared"] == ["base", "bucket"]  # today's state variables alone


@pytest.mark.background("cluster-local")
@pytest.mark.parametrize("run", RUNS[:2])
def test_a_local_session_runs_a_machine_from_a_scripts_main(local_results, run):
    check(local_results[run], run)


@pytest.mark.background("standalone")
@pytest.mark.parametrize("run", RUNS)
def test_standalone_cluster_runs_machines_defined_anywhere(standalone_results, run):
    check(standalone_results[run], run)


@pytest.mark.background("cluster-local")
@pytest.mark.background("standalone")
def test_the_session_fits_its_master(local_results, standalone_results):
    """Local: a few partitions, no UI. Cluster: partitions from its cores, the UI on."""
    local, cluster = local_results["session"], standalone_results["session"]
    assert (local["shuffle_partitions"], local["ui"]) == ("4", "false")
    assert cluster["cores"] == 2  # the test cluster's one worker has 2 cores
    assert (cluster["shuffle_partitions"], cluster["ui"]) == ("2", "true")


def test_connect_without_its_client_is_one_clear_error(monkeypatch):
    from statemachines import InvalidArgument
    from statemachines.spark import session

    monkeypatch.setitem(sys.modules, "grpc", None)  # as if grpcio were not installed
    with pytest.raises(InvalidArgument, match=r"pip install 'statemachines\[connect\]'"):
        session(remote="sc://127.0.0.1:1")


@pytest.mark.background("connect")
@pytest.mark.parametrize("run", RUNS)
def test_spark_connect_runs_machines_defined_anywhere(connect_results, run):
    check(connect_results[run], run)


@pytest.mark.background("connect")
def test_spark_connect_refuses_a_version_a_vacuum_emptied_as_locally(connect_results):
    """Through Spark Connect, whose reads are planned only when asked, reading a
    version whose files a vacuum deleted gives the local read's error when the read
    is made, not Spark's missing path at its first action."""
    local, remote = connect_results["vacuumed"]["local"], connect_results["vacuumed"]["spark"]
    assert local[0] == "DamagedArrangement" and "vacuum deleted it" in local[1]
    assert remote is not None and remote[0] == local[0], remote
    assert remote[1].replace(remote[2], local[2]) == local[1]  # it may name another of the version's files


def test_the_cluster_python_cannot_import_the_project(tmp_path):
    """The premise of the tests above: without shipping, the workers would fail."""
    python = servers.bare_python(tmp_path)
    for module in ("statemachines", "tests.machines"):
        probe = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr


MY_MACHINES = """
from statemachines import Machine


class Tags(Machine):
    def transition(self, key, values, symbol, time):
        op, tag = symbol.split(":")
        return values | {tag} if op == "add" else values - {tag}
"""


def cli(args: list[str], cwd: Path, python: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "statemachines.library.cli", *args],
        capture_output=True, text=True, timeout=JOB_TIMEOUT, env=driver_env(python), cwd=cwd,
    )


def cli_ships_py_files(work: Path, url: str, python: str) -> dict:
    """The command line on the standalone cluster: a missing ``--py-files`` file, then a
    run whose machine comes from a shipped file."""
    work = work / "cli"
    work.mkdir()
    (work / "mymachines.py").write_text(MY_MACHINES)
    rows = [[k or "", s, t] for k, s, t, _ in make_events() if k is not None]
    (work / "events.csv").write_text("key,symbol,time\n" + "".join(f"{k},{s},{t}\n" for k, s, t in rows))
    bad = cli(["run", "mymachines:Tags", "events.csv", "--into", "bad", "--runtime", "spark",
               "--master", url, "--py-files", "nothere.py"], work, python)
    done = cli(["run", "mymachines:Tags", "events.csv", "--into", "tags", "--runtime", "spark",
                "--master", url, "--py-files", "mymachines.py", "--conf", "spark.sql.shuffle.partitions=3"],
               work, python)
    return {"work": work, "rows": rows, "bad": bad, "done": done}


@pytest.mark.background("standalone")
def test_the_cli_ships_py_files_to_the_standalone_cluster():
    ran = background.result("standalone")["cli"]
    bad, done, work, rows = ran["bad"], ran["done"], ran["work"], ran["rows"]
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["statemachines: error: --py-files: nothere.py does not exist"]
    assert not (work / "bad").exists()
    assert done.returncode == 0, done.stderr[-3000:]
    from statemachines import PersistedArrangement

    expected_updates = run_local(Tags(), [(k, s, t) for k, s, t in rows]).updates
    assert consolidate(PersistedArrangement(work / "tags").updates()) == expected_updates
    assert done.stdout.startswith(f"{len(rows):,} events in, {len(expected_updates):,} updates out")


def cli_streams(work: Path, url: str, python: str) -> dict:
    """The command line streaming two files through Spark Connect, from the client's
    directory."""
    work = work / "cli"
    work.mkdir()
    (work / "mymachines.py").write_text(MY_MACHINES)
    rows = [[k, s, t] for k, s, t, _ in make_events() if k is not None]
    (work / "in").mkdir()
    half = len(rows) // 2
    for i, part in enumerate([rows[:half], rows[half:]]):
        text = "key,symbol,time\n" + "".join(f"{k},{s},{t}\n" for k, s, t in part)
        (work / "in" / f"{i}.csv").write_text(text)
        os.utime(work / "in" / f"{i}.csv", (1_700_000_000 + i,) * 2)
    done = cli(["run", "mymachines:Tags", "in", "--into", "tags", "--runtime", "spark", "--stream",
                "--remote", url, "--py-files", "mymachines.py"], work, python)
    return {"work": work, "rows": rows, "done": done}


@pytest.mark.background("connect")
def test_the_cli_streams_through_spark_connect_and_reports_in_the_client():
    """Per-micro-batch lines and the summary are printed by the client, with true counts,
    and relative paths mean the client's directory, not the server's."""
    ran = background.result("connect")["cli"]
    done, work, rows = ran["done"], ran["work"], ran["rows"]
    assert done.returncode == 0, done.stderr[-3000:]
    from statemachines import LocalRuntime, PersistedArrangement

    published = PersistedArrangement(work / "tags").updates()
    runtime = LocalRuntime(Tags())
    runtime.feed([tuple(r) for r in rows])
    final = runtime.advance_to(max(t for _, _, t in rows))  # the watermark holds the last time
    assert consolidate(published) == consolidate(final.updates)
    lines = [line for line in done.stderr.splitlines() if line.startswith("batch ")]
    assert len(lines) >= 2
    assert done.stdout.startswith(f"{len(rows):,} events in, {len(published):,} updates out")
