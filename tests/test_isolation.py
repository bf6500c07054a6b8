"""The pure core stays pure: importing it loads no heavy dependency."""

from __future__ import annotations

import subprocess
import sys


def test_core_and_library_import_neither_spark_nor_graphviz():
    code = (
        "import sys, statemachines, library; "
        "print(sorted(m for m in ('pyspark', 'graphviz', 'pandas', 'pyarrow') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
