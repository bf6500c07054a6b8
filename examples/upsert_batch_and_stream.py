"""The same upsert job on Spark, in batch and as a stream, into two arrangements.

Writes a few files of upsert commands, runs them once with ``run_batch`` and once
with ``run_stream`` (one file per micro-batch, exactly once, restartable from its
checkpoint), and shows that both arrangements hold the same history. The stream's
frontier follows the newest time it has seen, so a last file carries one marker
event far in the future: it makes every real command final (it stays pending
itself). Run:

    python examples/upsert_batch_and_stream.py [--out DIR] [--master URL | --remote sc://HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile

from statemachines import PersistedArrangement, format_table
from statemachines.library import Upsert
from statemachines.spark import run_batch, run_stream, session

SCHEMA = "account string, balance long, ts long, seq long"
END = ("~end", None, 10**9, 0)


def command_files(n_files: int = 4, per_file: int = 25, seed: int = 2) -> list[list[tuple]]:
    """Upserts of account balances; times rise file by file, some arrive out of order."""
    rnd = random.Random(seed)
    files = []
    for f in range(n_files):
        rows = []
        for i in range(per_file):
            ts = f * 100 + rnd.randrange(100)
            balance = None if rnd.random() < 0.1 else rnd.randrange(1000)
            rows.append((rnd.choice(["acme", "globex", "initech", "umbrella"]), balance, ts, f * per_file + i))
        files.append(rows)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: local[*])")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    parser.add_argument("--out", help="directory to keep the files in (default: a temporary one, removed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upserts-") as scratch:
        run(args.out or scratch, args.master, args.remote)


def run(work: str, master: str | None, remote: str | None) -> None:
    spark = session(master=master, remote=remote, app_name="upsert-batch-and-stream")
    incoming = os.path.join(work, "incoming")

    files = command_files()
    for i, rows in enumerate([*files, [END]]):
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.parquet(os.path.join(work, f"staging-{i}"))
        (part,) = [p for p in os.listdir(os.path.join(work, f"staging-{i}")) if p.endswith(".parquet")]
        os.makedirs(incoming, exist_ok=True)
        target = os.path.join(incoming, f"{i:03d}.parquet")
        os.rename(os.path.join(work, f"staging-{i}", part), target)
        os.utime(target, (1_700_000_000 + i,) * 2)

    columns = {"key": "account", "symbol": "balance", "time": "ts", "order": "seq"}
    batch = run_batch(Upsert(), spark.read.parquet(incoming).where("account != '~end'"), into=f"{work}/batch", **columns)
    print(f"batch: {batch.summary()}")

    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(incoming)
    run_stream(
        Upsert(), frame, into=f"{work}/stream", checkpoint=f"{work}/checkpoint",
        trigger={"availableNow": True}, progress=lambda report: print(f"stream: {report}"), **columns,
    ).awaitTermination()

    from_batch = PersistedArrangement(f"{work}/batch").updates()
    from_stream = PersistedArrangement(f"{work}/stream").updates()
    print(f"\nthe same history in both arrangements: {from_batch == from_stream}")
    print(format_table(from_batch[:10]))
    print(f"... {len(from_batch)} updates in all")


if __name__ == "__main__":
    main()
