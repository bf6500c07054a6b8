"""The main job: a customers CDC feed -> Upsert on a local Spark session -> arrangement.

The feed has inserts, updates, deletes, a duplicated message, a message that arrives
out of order and one with no customer id. Run:

    python examples/customers_cdc.py [--out DIR] [--master URL | --remote sc://HOST:PORT]

It prints the differential updates, the rejected rows with their reasons, and the
customers' history (SCD type 2) read back from the persisted arrangement.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from statemachines import Update, format_table
from statemachines.library import Upsert
from statemachines.spark import read_history, run_batch, session

# (customer_id, (name, city) or None for a delete, lsn, offset) in arrival order
FEED = [
    (1, ("Ada", "London"), 100, 0),
    (2, ("Grace", "Arlington"), 101, 1),
    (3, ("Edsger", "Austin"), 103, 2),
    (1, ("Ada", "Paris"), 104, 3),
    (3, ("Edsger", "Austin"), 102, 4),  # arrives late: lsn 102 sorts before 103
    (2, ("Grace", "Arlington"), 101, 1),  # duplicated message
    (2, None, 106, 5),  # Grace deleted
    (None, ("Nobody", "Nowhere"), 106, 6),  # no key: rejected, not dropped
    (1, ("Ada", "Rome"), 107, 7),
    (1, ("Ada", "Turin"), 107, 8),  # same lsn, higher offset: this one wins
    (2, ("Grace", "Baltimore"), 109, 9),  # Grace is back
]
SCHEMA = "customer_id long, customer struct<name: string, city: string>, lsn long, offset long"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="arrangement directory to keep (default: a temporary one, removed)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: local[*])")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="customers-") as scratch:
        run(args.out or os.path.join(scratch, "customers"), args.master, args.remote)


def run(out: str, master: str | None, remote: str | None) -> None:
    spark = session(master=master, remote=remote, app_name="customers-cdc")
    feed = spark.createDataFrame(FEED, SCHEMA)
    result = run_batch(
        Upsert(), feed, key="customer_id", symbol="customer", time="lsn", order="offset", into=out
    )

    updates = [
        Update((r.key, tuple(r.value)), r.time, r.diff)
        for r in result.updates.collect()
    ]
    print("Differential updates ((customer_id, (name, city)), lsn, diff):")
    print(format_table(sorted(updates, key=lambda u: (u.time, u.data))))
    print(f"\n{result.summary()}")
    print("\nRejected rows:")
    for r in result.rejected.collect():
        print(f"  customer_id={r.key} lsn={r.time} reason={r.reason}: {r.detail}")
    print("\nHistory (SCD type 2) read back from the arrangement:")
    read_history(spark, out).orderBy("key", "start").show(truncate=False)
    spark.stop()

if __name__ == "__main__":
    main()
