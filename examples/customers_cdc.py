"""The main job: a customers change feed -> Upsert on a local Spark session -> an
arrangement and its SCD type 2 table.

The feed has the shape a database's change feed has (``id, name, city, lsn, offset,
op``): inserts, updates, deletes, a duplicated message, a message that arrives out
of order, one with no customer id and one with no operation. Run:

    python examples/customers_cdc.py [--out DIR] [--master URL | --remote sc://HOST:PORT]

It prints the differential updates, the rejected rows with their reasons, and the
customers' SCD type 2 table (``__START_AT`` included, ``__END_AT`` excluded).
"""

from __future__ import annotations

import argparse
import os
import tempfile

from statemachines import Update, format_table
from statemachines.library import ChangeFeed
from statemachines.spark import read_scd, run_feed_batch, session

# (id, name, city, lsn, offset, op) in arrival order
ROWS = [
    (1, "Ada", "London", 100, 0, "c"),
    (2, "Grace", "Arlington", 101, 1, "c"),
    (3, "Edsger", "Zurich", 103, 2, "u"),
    (1, "Ada", "Paris", 104, 3, "u"),
    (3, "Edsger", "Austin", 102, 4, "c"),  # arrives late: lsn 102 sorts before 103
    (2, "Grace", "Arlington", 101, 1, "c"),  # duplicated message
    (2, None, None, 106, 5, "d"),  # Grace deleted
    (None, "Nobody", "Nowhere", 106, 6, "c"),  # no key: rejected, not dropped
    (1, "Ada", "Rome", 107, 7, "u"),
    (1, "Ada", "Turin", 107, 8, "u"),  # same lsn, higher offset: this one wins
    (3, "Edsger", "Oslo", 108, 9, None),  # no operation: rejected, never a delete
    (2, "Grace", "Baltimore", 109, 10, "c"),  # Grace is back
]
SCHEMA = "id long, name string, city string, lsn long, offset long, op string"
FEED = ChangeFeed(keys=["id"], sequence_by=["lsn", "offset"], delete_when={"op": "d"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="directory to keep the arrangement and SCD table in (default: a temporary one, removed)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="Spark master URL (default: local[*])")
    where.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="customers-") as scratch:
        run(args.out or scratch, args.master, args.remote)


def run(out: str, master: str | None, remote: str | None) -> None:
    spark = session(master=master, remote=remote, app_name="customers-cdc")
    feed = spark.createDataFrame(ROWS, SCHEMA)
    run = run_feed_batch(
        FEED, feed, into=os.path.join(out, "customers"), scd2=os.path.join(out, "customers_scd2")
    )
    result = run.result
    updates = [Update((r.key, tuple(r.value)), r.time, r.diff) for r in result.updates.collect()]
    print("Differential updates ((id, (name, city)), lsn, diff):")
    print(format_table(sorted(updates, key=lambda u: (u.time, u.data))))
    print(f"\n{result.summary()}")
    print("\nRejected rows:")
    for r in sorted(result.rejected.collect(), key=lambda r: r.time):
        print(f"  id={r.key} lsn={r.time} reason={r.reason}: {r.detail}")
    print("\nSCD type 2 table (customers_scd2):")
    table = read_scd(spark, run.scd2).orderBy("id", "__START_AT")
    print(show_rows(table.columns, [tuple(r) for r in table.collect()]))
    spark.stop()


def show_rows(header: list[str], rows: list[tuple]) -> str:
    """Rows as an aligned text table; a null cell shows as ``-``."""
    cells = [header] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


if __name__ == "__main__":
    main()
