"""The pure core stays pure: importing it loads no heavy dependency."""

from __future__ import annotations

import subprocess
import sys


def test_core_and_library_import_neither_spark_nor_graphviz():
    code = (
        "import sys, statemachines, statemachines.library; "
        "print(sorted(m for m in ('pyspark', 'graphviz', 'pandas', 'pyarrow') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def core_imports():
    """Every module the core's files import, anywhere in them (functions included)."""
    import ast
    import pathlib

    core = pathlib.Path(__file__).resolve().parents[1] / "statemachines"
    for path in sorted(core.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                yield from ((path.name, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                yield path.name, node.module


def test_the_core_imports_neither_the_library_nor_the_spark_adapter():
    outside = ("statemachines.library", "statemachines.spark", "library", "spark_runtime", "pyspark", "py4j")
    found = [(name, module) for name, module in core_imports() if module.startswith(outside)]
    assert found == []
    assert sum(1 for _ in core_imports()) > 50  # the walk saw the core's imports
