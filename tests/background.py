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
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

_JOBS: dict[str, Callable[[Path], Any]] = {}
_started: dict[str, Future] = {}
_executor: ThreadPoolExecutor | None = None
_root: Path | None = None
_environment: dict[str, str] | None = None  # os.environ when the jobs started


def job(name: str) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    """Declare ``function(work_directory)`` as the background job ``name``."""
    def register(function: Callable[[Path], Any]) -> Callable[[Path], Any]:
        _JOBS[name] = function
        return function

    return register


def _directory(name: str) -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="statemachines-background-"))
    work = _root / name
    work.mkdir()
    return work


def start(names: Iterable[str]) -> None:
    """Run the jobs ``names``, in this order, one at a time in a background thread."""
    global _executor, _environment
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
        _started[name] = _executor.submit(_JOBS[name], _directory(name))


def environment() -> dict[str, str]:
    """The environment for the processes a job starts: ``os.environ`` as it was when
    the jobs started (before any test ran), as the tests running meanwhile may change
    it (``monkeypatch.setenv("PATH", ...)``); ``os.environ`` if no job started."""
    return dict(os.environ if _environment is None else _environment)


def result(name: str) -> Any:
    """What the job ``name`` returned (waiting for it); raises what it raised."""
    if name not in _started:
        future: Future = Future()
        try:
            future.set_result(_JOBS[name](_directory(name)))
        except BaseException as exc:  # noqa: BLE001 - kept, raised by every caller
            future.set_exception(exc)
        _started[name] = future
    return _started[name].result()


def stop() -> None:
    """Drop the jobs not begun, wait for the running one, remove their directories."""
    if _executor is not None:
        _executor.shutdown(wait=True, cancel_futures=True)
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)
