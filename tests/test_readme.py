"""The README's Python blocks that are not doctests run, on files made for them."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import shlex

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def plain_blocks():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return [b for b in blocks if ">>>" not in b]


def test_every_python_block_is_either_a_doctest_or_run_here():
    assert len(plain_blocks()) == 2  # the two Spark blocks below


@pytest.mark.spark
def test_the_spark_blocks_run(spark, tmp_path):
    from statemachines.library import Upsert

    rows = [(1, "a", 1, 0), (1, "b", 2, 1), (2, "c", 2, 2), (None, "d", 3, 3)]
    spark.createDataFrame(rows, "id long, value string, ts long, offset long").write.parquet(str(tmp_path / "commands.parquet"))
    spark.createDataFrame(rows[:2], "id long, value string, ts long, offset long").write.parquet(str(tmp_path / "incoming"))
    # the blocks' relative paths, placed under tmp_path
    batch, stream = (
        re.sub(r'"(commands.parquet|incoming/|customers_arrangement|ckpt/)"', lambda m: repr(str(tmp_path / m[1])), b)
        for b in plain_blocks()
    )
    scope = {"Upsert": Upsert, "print": lambda *a, **k: None}
    exec(batch.replace("result.updates.show()", "shown = result.updates.collect()"), scope)
    assert len(scope["shown"]) == 4 and scope["result"].rejected.count() == 1
    exec(stream, scope)
    query = scope["query"]
    query.processAllAvailable()
    query.stop()
    assert (tmp_path / "customers_arrangement" / "_delta_log").is_dir()


def command_lines():
    """Every ``statemachines ...`` command the README shows, as argument lists."""
    text = README.read_text().replace("\\\n", " ")  # continued lines joined
    found = re.findall(r"(?:^|`)\s*(?:[A-Z_]+=\S+\s+)*statemachines\s([^`\n]*)", text, flags=re.M)
    parts = [re.sub(r"^\s*statemachines\s", "", part) for line in found for part in line.split("&&")]
    return [shlex.split(part, comments=True) for part in parts]


def test_every_command_line_the_readme_shows_is_one_the_command_takes():
    from statemachines.library.cli import parser

    commands = command_lines()
    assert len(commands) >= 20 and {c[0] for c in commands} >= {"run", "feed", "show", "diagram", "cdc"}
    for argv in commands:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as errors:
            try:
                parser().parse_args(argv)
            except SystemExit as exit:
                assert exit.code == 0, f"statemachines {shlex.join(argv)}: {errors.getvalue().strip()}"
