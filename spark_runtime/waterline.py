"""Machines with waterlines on Spark: every key in parallel, the waterline settled.

A machine such as ``UpsertWithLateness`` judges each command against the high mark
of what *every* key inserted at earlier times. Spark runs the keys in parallel with a
guessed waterline, collects the inserts' marks per time (one small row per
partition), and runs again until guess and truth agree
(:func:`statemachines.waterline.settle`); usually the second run confirms the first.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F

from statemachines import Machine
from statemachines.columns import python_rows
from statemachines.persisted import read_state
from statemachines.spark.arrangement import read_updates
from statemachines.spark.output import UPDATE
from statemachines.waterline import (
    NOTE,
    Mark,
    Waterline,
    guessed_marks,
    highest,
    highs_by_time,
    mark_from_note,
    mark_note,
    settle,
)

__all__ = ["arrangement_high", "settled_output"]


def _collected_marks(frame: Any, marks_of: Callable[[Iterator[tuple[Any, ...]]], dict[Any, Mark]]) -> dict[Any, Mark]:
    """``marks_of`` over the rows of each partition of ``frame``, merged per time (one
    small row per partition is collected)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        found = marks_of(row for batch in batches for row in python_rows(batch))
        yield pa.RecordBatch.from_pydict({"marks": [pickle.dumps(found)]})

    rows = frame.mapInArrow(run, "marks binary").collect()
    return highs_by_time(item for row in rows for item in pickle.loads(row.marks).items())


def _insert_marks(updates: Any, machine: Machine) -> dict[Any, Mark]:
    """The high mark of the inserts at each time of an updates DataFrame."""

    inserts = updates.where(F.col("diff") > 0).select("key", "value", "time")
    return _collected_marks(inserts, lambda rows: highs_by_time((t, machine.insert_marks(k, v)) for k, v, t in rows))


def arrangement_high(spark: Any, path: str, machine: Machine) -> Mark | None:
    """The high mark of every insert an arrangement holds (``None`` if it holds none)."""

    state = read_state(path)
    if NOTE in state["notes"]:  # noted by the writer: compaction may have dropped inserts
        return mark_from_note(state["notes"][NOTE])
    if not any(b["files"] for b in state["batches"]):
        return None
    high = None
    for mark in _insert_marks(read_updates(spark, path), machine).values():
        high = highest(high, mark)
    return high


def settled_output(
    machine: Machine,
    prepared: Any,
    base: Mark | None,
    run: Callable[[Machine], Any],
    notes: dict[str, Any] | None = None,
) -> Any:
    """The output rows of ``run`` (a Spark run of one bound machine), settled.

    ``notes``, if given, receives the settled high mark as the arrangement note the
    writer publishes with the batch (see ``statemachines.waterline.NOTE``).

    Args:
        machine: the machine with waterlines.
        prepared: the events (for the number of distinct times, which bounds the rounds).
        base: the high mark of everything before these events.
        run: builds the output DataFrame (updates and rejections) of a bound machine.
    """

    def rounds() -> int:  # a job of its own: counted only if two runs do not settle
        return prepared.select("time").distinct().count() + 2

    outputs: list[Any] = []

    def run_cached(bound: Machine, line: Waterline) -> Any:
        output = run(bound).persist()
        outputs.append(output)
        return output

    def marks_of(output: Any) -> dict[Any, Mark]:
        return _insert_marks(output.where(F.col("kind") == UPDATE), machine)

    guess = None
    if machine.spec.guesses_marks:  # a job over the events that usually saves a run
        with contextlib.suppress(TypeError):  # partitions' marks that do not compare: no guess
            guess = _collected_marks(
                prepared.select("key", "symbol", "time"), lambda rows: guessed_marks(machine, rows)
            )
    output, waterline = settle(machine, base, run_cached, marks_of, max_rounds=rounds, guess=guess)
    if notes is not None:
        notes[NOTE] = mark_note(waterline.high)
    for earlier in outputs[:-1]:
        earlier.unpersist()
    return output
