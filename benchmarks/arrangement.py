"""Arrangement throughput: appends, point reads, compaction, vs a sorted Parquet write.

Usage: python benchmarks/arrangement.py [N_COMMANDS] [K] (default 700000 100000,
which the upsert turns into 1,022,729 updates over 100k keys).

The updates are those of the U1 upsert workload; they are appended in 10 batches
(consecutive time ranges). Printed: append throughput of the in-memory and the
persisted arrangement, point-read latency, compaction time, and the time of a plain
pyarrow sort-and-write of the same updates to one Parquet file (the floor), with
ratios to it.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
from workloads import upsert_workload

from statemachines import Arrangement, PersistedArrangement, run_local
from statemachines.library import Upsert


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def append_all(arr, batches):
    for lower, upper, batch in batches:
        arr.append(batch, lower=lower, upper=upper)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 700_000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    table = upsert_workload(n, k)
    commands = list(zip(*(table.column(c).to_pylist() for c in ("key", "value", "time", "offset")), strict=True))
    updates = run_local(Upsert(), commands).updates
    times = [u.time for u in updates]
    lo, hi = min(times), max(times) + 1
    cuts = [lo + (hi - lo) * i // 10 for i in range(11)]
    batches = [
        (None if i == 0 else cuts[i], cuts[i + 1], [u for u in updates if cuts[i] <= u.time < cuts[i + 1]])
        for i in range(10)
    ]
    m = len(updates)
    print(f"arrangement: {m:,} updates over {k:,} keys, appended in 10 batches")

    def floor():
        with tempfile.TemporaryDirectory() as d:
            tbl = pa.table(
                {
                    "key": [u.data[0] for u in updates],
                    "value": [u.data[1] for u in updates],
                    "time": times,
                    "diff": [u.diff for u in updates],
                }
            ).sort_by([("key", "ascending"), ("value", "ascending"), ("time", "ascending")])
            pq.write_table(tbl, f"{d}/updates.parquet")

    floor_s, _ = timed(floor)
    memory = Arrangement()
    mem_s, _ = timed(lambda: append_all(memory, batches))
    with tempfile.TemporaryDirectory() as d:
        persisted = PersistedArrangement(d)
        disk_s, _ = timed(lambda: append_all(persisted, batches))
        reopen_s, _ = timed(lambda: PersistedArrangement(d))
        compact_s, _ = timed(lambda: persisted.compact(persisted.upper))
        live = persisted.stored_updates()

    rng = random.Random(1)
    probes = [rng.randrange(k) for _ in range(20_000)]
    read_s, _ = timed(lambda: [memory.values(key) for key in probes])
    mem_compact_s, _ = timed(lambda: memory.compact(memory.upper))
    read_after_s, _ = timed(lambda: [memory.values(key) for key in probes])

    print(f"{'operation':<44}{'seconds':>9}{'updates/s':>13}{'vs floor':>10}")
    for name, secs in (
        ("floor: pyarrow sort + write one Parquet file", floor_s),
        ("append 10 batches, in memory", mem_s),
        ("append 10 batches, persisted (Delta)", disk_s),
        ("reopen persisted (log only)", reopen_s),
        ("compact to upper, in memory", mem_compact_s),
        ("compact to upper, persisted", compact_s),
    ):
        print(f"{name:<44}{secs:>9.3f}{m / secs:>13,.0f}{secs / floor_s:>10.2f}")
    print(f"point read (values of a key), {len(memory.batches)} batch(es) after compaction: "
          f"{read_after_s / len(probes) * 1e6:.1f} us; before compaction: {read_s / len(probes) * 1e6:.1f} us")
    print(f"stored updates after compaction to upper: {live:,} (live pairs), from {m:,}")


if __name__ == "__main__":
    main()
