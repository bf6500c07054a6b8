"""Slow work in other processes, run in a background thread while the other tests run.

A Spark server or a driver process of its own keeps a JVM busy for tens of seconds,
mostly on one core, while most tests leave the other core idle. A test module
declares such work as a job: a function of a fresh directory that runs the processes
and returns what the test checks. When the session starts, the jobs of the collected
tests run one after another in one background thread, and the modules that wait for
them run last (``conftest.py``), so the jobs have the rest of the run to finish::

    @background.job("standalone")
    def standalone_job(work: Path) -> dict: ...

    @pytest.mark.background("standalone")
    def test_standalone(...):
        outcome = background.result("standalone")  # waits; raises what the job raised

A job is plain Python with subprocesses: it must not touch the tests' Spark session,
which the foreground tests use meanwhile. A job no collected test named (a test run
alone with ``-k``) runs in the foreground when its result is asked for.

Under pytest-xdist every worker collects the same tests, and the first to start the
jobs runs them all (its claim is a file in the folder the run shares, which the
controller names and removes); it writes each job's outcome there, pickled, where the
other workers read it, and waits for every job before it ends. The jobs' directories
are there too, so that the files a job left outlive the worker that ran it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

_JOBS: dict[str, Callable[[Path], Any]] = {}
_started: dict[str, Future] = {}
_executor: ThreadPoolExecutor | None = None
_root: Path | None = None
_environment: dict[str, str] | None = None  # os.environ when the jobs started
_elsewhere: set[str] = set()  # jobs another xdist worker runs
_OUTCOME_WAIT = 3600  # seconds a worker waits for another's job before giving up


def job(name: str) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    """Declare ``function(work_directory)`` as the background job ``name``."""
    def register(function: Callable[[Path], Any]) -> Callable[[Path], Any]:
        _JOBS[name] = function
        return function

    return register


def _directory(name: str) -> Path:
    """A fresh directory for the job ``name``. Under xdist it is in the folder the run
    shares, which the controller removes once every worker has ended: a worker that
    ran the jobs may end while another still reads a job's files."""
    global _root
    if _root is None:
        folder = shared()
        if folder is None:
            _root = Path(tempfile.mkdtemp(prefix="statemachines-background-"))
        else:
            _root = folder / f"jobs-{os.getpid()}"
            _root.mkdir(parents=True)
    work = _root / name
    work.mkdir()
    return work


def shared(run: str | None = None) -> Path | None:
    """The folder an xdist run's controller and workers share (``run``: the run's
    id; by default this worker's), or ``None`` outside xdist."""
    run = run or os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return Path(tempfile.gettempdir()) / f"statemachines-test-run-{run}" if run else None


def _claimed(folder: Path) -> bool:
    """Whether this worker is the first to claim the run's jobs."""
    folder.mkdir(exist_ok=True)
    try:
        os.close(os.open(folder / "host", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _published(name: str, folder: Path) -> Callable[[Path], Any]:
    """The job ``name``, writing its outcome to ``folder`` for the other workers."""
    def run(work: Path) -> Any:
        try:
            value = _JOBS[name](work)
        except BaseException as exc:
            _write(folder / f"{name}.pickle", (False, exc))
            raise
        _write(folder / f"{name}.pickle", (True, value))
        return value

    return run


def _write(path: Path, outcome: tuple[bool, Any]) -> None:
    """Write a job's ``(succeeded, value or exception)`` at once (readers poll for it)."""
    try:
        data = pickle.dumps(outcome)
    except Exception:  # noqa: BLE001 - what pickle cannot hold, as text
        text = repr(outcome[1]) if outcome[0] else "".join(traceback.format_exception(outcome[1]))
        data = pickle.dumps((False, RuntimeError(f"{path.stem}'s outcome does not pickle: {text}")))
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _outcome(name: str, folder: Path) -> Any:
    """What the job ``name`` that another worker runs returned (waiting for it)."""
    path = folder / f"{name}.pickle"
    deadline = time.monotonic() + _OUTCOME_WAIT
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker running the background jobs wrote no outcome of {name} in {path.parent}")
        time.sleep(0.5)
    succeeded, value = pickle.loads(path.read_bytes())
    if not succeeded:
        raise value
    return value


def start(names: Iterable[str]) -> None:
    """Run the jobs ``names``, in this order, one at a time in a background thread
    (under xdist: unless another worker claimed them first)."""
    global _executor, _environment
    names = list(names)
    folder = shared()
    if names and folder is not None and not _claimed(folder):
        _elsewhere.update(names)
        return
    if _environment is None:
        _environment = dict(os.environ)
    for name in names:
        if name in _started:
            continue
        if _executor is None:
            # A vfork()ed child shares this process's memory until it execs, and with
            # no env given it execs with the C environment, which a test in the other
            # thread may be changing (os.environ): the exec then failed with EFAULT
            # ("[Errno 14] Bad address"). fork() gives the child its own copy.
            subprocess._USE_VFORK = False  # type: ignore[misc]  # CPython's off switch for vfork
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-job")
        job = _JOBS[name] if folder is None else _published(name, folder)
        _started[name] = _executor.submit(job, _directory(name))


def environment() -> dict[str, str]:
    """The environment for the processes a job starts: ``os.environ`` as it was when
    the jobs started (before any test ran), as the tests running meanwhile may change
    it (``monkeypatch.setenv("PATH", ...)``); ``os.environ`` if no job started."""
    return dict(os.environ if _environment is None else _environment)


def update_environment(**values: str) -> None:
    """Set ``values`` in the environment of the processes the later jobs start (a
    job's finding for them, such as a file it made)."""
    if _environment is not None:
        _environment.update(values)


def result(name: str) -> Any:
    """What the job ``name`` returned (waiting for it); raises what it raised."""
    folder = shared()
    if name in _elsewhere and folder is not None:
        return _outcome(name, folder)
    if name not in _started:
        future: Future = Future()
        try:
            future.set_result(_JOBS[name](_directory(name)))
        except BaseException as exc:  # noqa: BLE001 - kept, raised by every caller
            future.set_exception(exc)
        _started[name] = future
    return _started[name].result()


def stop() -> None:
    """Drop the jobs not begun (under xdist, where other workers may wait for them:
    run them all), wait for the running one, remove their directories (under xdist
    the controller does, see :func:`_directory`)."""
    if _executor is not None:
        _executor.shutdown(wait=True, cancel_futures=shared() is None)
    if _root is not None and shared() is None:
        shutil.rmtree(_root, ignore_errors=True)
