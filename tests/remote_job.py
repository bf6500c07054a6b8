"""A driver script run by the cluster and Spark Connect tests, in its own process.

    python tests/remote_job.py (--master URL | --remote URL) [--runs RUNS] EVENTS.json WORKDIR

Runs machines over the events (a JSON list of ``[key, symbol, time, order]``) on the
given Spark, then writes ``WORKDIR/result.json``: per run, the updates, the rejected
rows and the streaming reports. A run is ``MACHINE-MODE``: machine ``main`` is
:class:`Tags` below, defined in this script's ``__main__`` as a user's script or
notebook would; ``module`` is ``tests.machines.Fragile``, from a module the
cluster's Python cannot import; ``rules`` is a RuleDetector whose rules also
arrive as a stream (:func:`rules_case`); mode ``batch`` or ``stream``.
Streaming writes the events as two files (a micro-batch each) and a flush event far
in the future, so every event is final when the run ends. Through Spark Connect, it
also reads a version a vacuum emptied (``vacuumed``: what the local read and Spark's say).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from statemachines import Machine, PersistedArrangement  # noqa: E402
from statemachines.library import Pattern, RuleDetector  # noqa: E402
from statemachines.spark import (  # noqa: E402
    flush_progress,
    read_rejected,
    read_rejected_rules,
    run_batch,
    run_stream,
    session,
)
from statemachines.spark.buckets import declared_state_variables  # noqa: E402

SCHEMA = "key string, symbol string, time long, order long"
FLUSH_KEY, FLUSH_TIME = "~flush", 10**6


class Tags(Machine):
    """Tags per key from symbols ``add:tag`` / ``del:tag`` (anything else fails)."""

    def transition(self, key, values, symbol, time):
        op, tag = symbol.split(":")
        return values | {tag} if op == "add" else values - {tag}


class Act(NamedTuple):
    """A symbol ``op:tag`` as a record, for the rules' SQL conditions."""

    op: str
    tag: str | None


ACT = pa.struct([("op", pa.string()), ("tag", pa.string())])


def rules_case(events: list[list]) -> tuple[list, list[list], list[list]]:
    """The rule detector's first rules, the rule rows arriving with each of the two
    micro-batches of events (the second at a frontier near time 20: a row from time
    1 is late), and the events with :class:`Act` symbols."""

    def twice(op: str) -> str:
        step = f"op = '{op}'"
        return Pattern.begin("first").where(step).followed_by("again").where(step).within(6).to_json()

    first = [("adds", twice("add"), 0)]
    arriving = [[("dels", twice("del"), 10)], [("adds", None, 25), ("late", twice("add"), 1)]]
    acts = [[k, Act(*s.split(":")) if ":" in s else Act(s, None), t, o] for k, s, t, o in events]
    return first, arriving, acts


def machine_named(name: str, events: list[list]) -> Machine:
    if name == "main":
        return Tags()
    if name == "rules":
        return RuleDetector(rules_case(events)[0])
    from tests.machines import Fragile

    return Fragile()


def write_files(files: list[list], source: str, schema: dict[str, pa.DataType]) -> None:
    """Each of ``files`` (lists of rows) as a parquet file of ``schema`` in ``source``,
    in order of modification time."""
    os.makedirs(source)
    for i, rows in enumerate(files):
        columns = list(zip(*rows, strict=True)) or [()] * len(schema)  # a file may hold no rows
        table = pa.table({name: pa.array(c, t) for (name, t), c in zip(schema.items(), columns, strict=True)})
        path = os.path.join(source, f"{i:02d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i,) * 2)


def rows_of(result) -> tuple[list, list]:
    """A batch result's updates and rejected rows, as JSON lists."""
    updates = [[r.key, r.value, r.time, r.diff] for r in result.updates.collect()]
    return updates, [[r.key, r.time, r.reason] for r in result.rejected.collect()]


def run(spark, machine: Machine, mode: str, events: list[list], workdir: str) -> dict:
    """One run: its updates, rejected rows and (streaming) the micro-batch reports."""
    reports: list = []
    rules, scratch, declared = None, None, None
    schema, symbol = SCHEMA, "string"
    if isinstance(machine, RuleDetector):
        _, arriving, events = rules_case(events)
        schema, symbol = SCHEMA.replace("symbol string", "symbol struct<op string, tag string>"), ACT
        rule_files = os.path.join(workdir, "rules")
        write_files(arriving, rule_files, {"rule_id": pa.string(), "pattern_json": pa.string(), "valid_from": pa.int64()})
        rules = spark.readStream.schema("rule_id string, pattern_json string, valid_from long")
        rules = rules.option("maxFilesPerTrigger", 1).parquet(rule_files)
    if mode == "batch":
        frame = spark.createDataFrame([tuple(e) for e in events], schema)
        result = run_batch(machine, frame, order="order", value_type="string")
        updates, rejected = rows_of(result)
        # again with the output written by the tasks into a folder they and this driver share
        shared = run_batch(machine, frame, order="order", value_type="string", scratch=os.path.join(workdir, "scratch"))
        scratch = dict(zip(("updates", "rejected"), rows_of(shared), strict=True), folder=shared.scratch)
        shared.unpersist()
        scratch["left"] = os.path.exists(scratch["folder"] or "")
    else:
        source = os.path.join(workdir, "in")
        half = len(events) // 2
        flush = [FLUSH_KEY, "flush" if symbol == "string" else Act("flush", None), FLUSH_TIME, None]
        files = [events[:half], events[half:], [flush]]
        write_files(files, source, {"key": pa.string(), "symbol": symbol, "time": pa.int64(), "order": pa.int64()})
        into = os.path.join(workdir, "arr")
        frame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
        query = run_stream(
            machine, frame, into=into, checkpoint=os.path.join(workdir, "ckpt"),
            order="order", value_type=None if rules else "string", trigger={"availableNow": True},
            progress=reports.append, rules=rules,
        )
        query.awaitTermination()
        flush_progress(query)
        declared = sorted(declared_state_variables(spark, os.path.join(workdir, "ckpt")) or ())
        updates = [[k, v, t, d] for (k, v), t, d in PersistedArrangement(into).updates()]
        frame = read_rejected(spark, into)
        rows = [] if frame is None else frame.collect()
        rejected = [[r.key, r.time, r.reason] for r in rows if r.key != FLUSH_KEY]
    return {
        "updates": updates,
        "rejected": rejected,
        "scratch": scratch,
        "reports": [[r.batch_id, r.events, r.updates, r.rejected] for r in reports],
        "declared": declared,  # a stream's state variables
        "rules_rejected": [[*r.row, r.reason.value] for r in read_rejected_rules(into)] if rules else [],
    }


def vacuumed_read(spark, workdir: str) -> dict:
    """Reading a version of an arrangement whose files a compaction and a vacuum
    deleted, locally and on ``spark``: each error's class, text and the file it names."""
    from deltalake import DeltaTable

    from statemachines import run_local
    from statemachines.library import Upsert
    from statemachines.spark import read_updates

    path = os.path.join(workdir, "vacuumed")
    arrangement = PersistedArrangement(path)
    run_local(Upsert(), [("a", "x", 1), ("b", "y", 2)], into=arrangement)
    before = arrangement.version
    run_local(Upsert(), [("a", "z", 3)], into=arrangement)
    arrangement.compact(5)
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    said = {}
    for where, read in (
        ("local", lambda: PersistedArrangement.open(path, version=before).updates()),
        ("spark", lambda: read_updates(spark, path, version=before).collect()),
    ):
        try:
            read()
            said[where] = None
        except Exception as exc:  # noqa: BLE001 - what the reader says is the result
            said[where] = [type(exc).__name__, str(exc), getattr(exc, "path", None)]
    return said


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master")
    parser.add_argument("--remote")
    parser.add_argument("--runs", default="main-batch,main-stream,module-batch,module-stream")
    parser.add_argument("events")
    parser.add_argument("workdir")
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the tests ask for stacks of a job that hangs
    with open(args.events) as f:
        events = json.load(f)
    spark = session(master=args.master, remote=args.remote)
    results: dict = {}
    if not args.remote:  # what session() chose for this master
        results["session"] = {
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "ui": spark.sparkContext.getConf().get("spark.ui.enabled", "true"),
            "cores": spark.sparkContext.defaultParallelism,
        }
    for name in args.runs.split(","):
        machine, mode = name.split("-")
        results[name] = run(spark, machine_named(machine, events), mode, events, os.path.join(args.workdir, name))
    if args.remote:
        results["vacuumed"] = vacuumed_read(spark, args.workdir)
    with open(os.path.join(args.workdir, "result.json"), "w") as out:
        json.dump(results, out)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
