"""A driver script run by the cluster and Spark Connect tests, in its own process.

    python tests/remote_job.py (--master URL | --remote URL) [--runs RUNS] EVENTS.json WORKDIR

Runs machines over the events (a JSON list of ``[key, symbol, time, order]``) on the
given Spark, then writes ``WORKDIR/result.json``: per run, the updates, the rejected
rows and the streaming reports. A run is ``MACHINE-MODE``: machine ``main`` is
:class:`Tags` below, defined in this script's ``__main__`` as a user's script or
notebook would; ``module`` is ``tests.machines.Fragile``, from a module the
cluster's Python cannot import; mode ``batch`` or ``stream``.
Streaming writes the events as two files (a micro-batch each) and a flush event far
in the future, so every event is final when the run ends.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from statemachines import Machine, PersistedArrangement  # noqa: E402
from statemachines.spark import flush_progress, read_rejected, run_batch, run_stream, session  # noqa: E402

SCHEMA = "key string, symbol string, time long, order long"
FLUSH_KEY, FLUSH_TIME = "~flush", 10**6


class Tags(Machine):
    """Tags per key from symbols ``add:tag`` / ``del:tag`` (anything else fails)."""

    def transition(self, key, values, symbol, time):
        op, tag = symbol.split(":")
        return values | {tag} if op == "add" else values - {tag}


def machine_named(name: str) -> Machine:
    if name == "main":
        return Tags()
    from tests.machines import Fragile

    return Fragile()


def write_files(events: list[list], source: str) -> None:
    os.makedirs(source)
    half = len(events) // 2
    for i, rows in enumerate([events[:half], events[half:], [[FLUSH_KEY, "flush", FLUSH_TIME, None]]]):
        columns = list(zip(*rows, strict=True))
        table = pa.table(
            {
                "key": pa.array(columns[0], pa.string()),
                "symbol": pa.array(columns[1], pa.string()),
                "time": pa.array(columns[2], pa.int64()),
                "order": pa.array(columns[3], pa.int64()),
            }
        )
        path = os.path.join(source, f"{i:02d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i,) * 2)


def run(spark, machine: Machine, mode: str, events: list[list], workdir: str) -> dict:
    """One run: its updates, rejected rows and (streaming) the micro-batch reports."""
    reports: list = []
    if mode == "batch":
        frame = spark.createDataFrame([tuple(e) for e in events], SCHEMA)
        result = run_batch(machine, frame, order="order", value_type="string")
        updates = [[r.key, r.value, r.time, r.diff] for r in result.updates.collect()]
        rejected = [[r.key, r.time, r.reason] for r in result.rejected.collect()]
    else:
        source = os.path.join(workdir, "in")
        write_files(events, source)
        into = os.path.join(workdir, "arr")
        frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
        query = run_stream(
            machine, frame, into=into, checkpoint=os.path.join(workdir, "ckpt"),
            order="order", value_type="string", trigger={"availableNow": True},
            progress=reports.append,
        )
        query.awaitTermination()
        flush_progress(query)
        updates = [[k, v, t, d] for (k, v), t, d in PersistedArrangement(into).updates()]
        frame = read_rejected(spark, into)
        rows = [] if frame is None else frame.collect()
        rejected = [[r.key, r.time, r.reason] for r in rows if r.key != FLUSH_KEY]
    return {
        "updates": updates,
        "rejected": rejected,
        "reports": [[r.batch_id, r.events, r.updates, r.rejected] for r in reports],
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master")
    parser.add_argument("--remote")
    parser.add_argument("--runs", default="main-batch,main-stream,module-batch,module-stream")
    parser.add_argument("events")
    parser.add_argument("workdir")
    args = parser.parse_args(argv)
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
        results[name] = run(spark, machine_named(machine), mode, events, os.path.join(args.workdir, name))
    with open(os.path.join(args.workdir, "result.json"), "w") as out:
        json.dump(results, out)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
