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
    """``(file, module)`` for every import in the core's files, functions included.

    ``from statemachines import x`` counts as importing ``statemachines.x`` when that is
    a module; imports under ``if TYPE_CHECKING:`` are annotations, never run.
    """
    import ast
    import pathlib

    core = pathlib.Path(__file__).resolve().parents[1] / "statemachines"
    modules = {path.stem for path in core.glob("*.py")}
    for path in sorted(core.glob("*.py")):
        tree = ast.parse(path.read_text())
        for block in [n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]:
            block.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from ((path.stem, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module == "statemachines":
                    yield from ((path.stem, f"statemachines.{a.name}") for a in node.names if a.name in modules)
                yield path.stem, node.module


def test_the_core_has_no_import_cycles():
    graph = {}
    for name, module in core_imports():
        if module.startswith("statemachines.") and module.count(".") == 1 and name != "__init__":
            graph.setdefault(name, set()).add(module.removeprefix("statemachines."))
    assert graph["core"] >= {"intake", "machine"}  # the walk sees the core's own imports

    def reaches(start, goal, seen):
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(name for name in graph if reaches(name, name, {name}))
    assert cycles == []


def test_the_core_imports_neither_the_library_nor_the_spark_adapter():
    outside = ("statemachines.library", "statemachines.spark", "library", "spark_runtime", "pyspark", "py4j")
    found = [(name, module) for name, module in core_imports() if module.startswith(outside)]
    assert found == []
    assert sum(1 for _ in core_imports()) > 50  # the walk saw the core's imports
