"""A persisted arrangement at scale: opening, point reads, a long stream of micro-batches.

Usage:
    python benchmarks/persisted.py scale [N_UPDATES] [N_KEYS]     (default 10000000 1000000)
    python benchmarks/persisted.py stream [N_BATCHES] [BATCH_ROWS] (default 10000 1000)

``scale`` publishes N updates over K keys as 10 batches (Parquet files written by
pyarrow, sorted by key, as a Spark job writes them), then, in a fresh process each
time, opens the arrangement and reads ``values(key)`` of 2,000 random keys: open
seconds, resident memory after opening (VmRSS) and the read latencies (median, p99).
Every read is checked against the updates written.

``stream`` publishes N micro-batches of R updates each the way a streaming sink does
(``publish_batch`` with the micro-batch id), with the arrangement's own merging, then
compares the arrangement as the stream left it with the same data fully compacted
(``compact()``): open seconds and ``values(key)`` latencies, measured interleaved
(A B A B) in one process, warm, each read checked against the other.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from statemachines.persisted import PersistedArrangement, publish_batch

PROBES = 2_000
ROW_GROUP_ROWS = 1024  # as the arrangement writes its own files (statemachines.stored)


def key_name(i: int) -> str:
    return f"k{i:07d}"


def updates_table(keys: np.ndarray, times: np.ndarray, values: np.ndarray) -> pa.Table:
    """Rows ``key, value, time, diff`` sorted by key, one insert per (key, value, time)."""
    order = np.lexsort((times, keys))
    keys, times, values = keys[order], times[order], values[order]
    return pa.table(
        {
            "key": pa.array([key_name(int(k)) for k in keys]),
            "value": pa.array([f"v{int(v)}" for v in values]),
            "time": pa.array(times, pa.int64()),
            "diff": pa.array(np.ones(len(keys), dtype=np.int64)),
        }
    )


def write_batch(path: str, name: str, table: pa.Table) -> None:
    os.makedirs(os.path.join(path, name), exist_ok=True)
    pq.write_table(table, os.path.join(path, name, "part-00000.parquet"), row_group_size=ROW_GROUP_ROWS)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def probe(arrangement: PersistedArrangement, keys: list[str]) -> tuple[list[float], list[frozenset]]:
    latencies, found = [], []
    for key in keys:
        start = time.perf_counter()
        values = arrangement.values(key)
        latencies.append(time.perf_counter() - start)
        found.append(values)
    return latencies, found


def quantiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    median, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    return f"median {median * 1e6:,.0f} us, p99 {p99 * 1e6:,.0f} us"


def open_and_read(path: str, n_keys: int, expected: str) -> None:
    """In a fresh process: open, measure, read, check; print one JSON line."""
    base = rss_mb()
    start = time.perf_counter()
    arrangement = PersistedArrangement(path)
    opened = time.perf_counter() - start
    after_open = rss_mb()
    rnd = random.Random(7)
    keys = [key_name(rnd.randrange(n_keys)) for _ in range(PROBES)]
    probe(arrangement, keys[:50])  # warm: file footers
    latencies, found = probe(arrangement, keys)
    with open(expected) as f:
        truth = json.load(f)
    wrong = sum(1 for key, values in zip(keys, found, strict=True) if sorted(values) != truth.get(key, []))
    print(json.dumps({
        "open_s": opened, "rss_before_mb": base, "rss_after_open_mb": after_open, "rss_after_reads_mb": rss_mb(),
        "latencies": latencies, "wrong": wrong,
    }))


def scale(n_updates: int, n_keys: int) -> None:
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as path:
        PersistedArrangement(path)
        per_batch = n_updates // 10
        started = time.perf_counter()
        for b in range(10):
            keys = rng.integers(0, n_keys, per_batch)
            values = rng.integers(0, 1_000_000, per_batch)
            times = np.full(per_batch, b, dtype=np.int64)
            table = updates_table(keys, times, values)
            name = f"batch-{b}"
            write_batch(path, name, table)
            publish_batch(path, name, b or None, b + 1, table.num_rows)
        written = time.perf_counter() - started
        # the truth of every key probed: read back with pyarrow, independently of the arrangement
        rnd = random.Random(7)
        probed = {key_name(rnd.randrange(n_keys)) for _ in range(PROBES)}
        truth: dict[str, list[str]] = {k: [] for k in probed}
        for b in range(10):
            table = pq.read_table(os.path.join(path, f"batch-{b}"), filters=[("key", "in", list(probed))])
            for k, v in zip(table["key"].to_pylist(), table["value"].to_pylist(), strict=True):
                truth[k].append(v)
        truth = {k: sorted(set(v)) for k, v in truth.items()}  # values: every insert is live
        expected = os.path.join(path, "..", f"expected-{os.getpid()}.json")
        with open(expected, "w") as f:
            json.dump(truth, f)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs if f.endswith(".parquet"))
        print(f"scale: {n_updates:,} updates over {n_keys:,} keys in 10 batches ({size / 2**20:,.0f} MiB of Parquet), "
              f"written and published in {written:.1f} s")
        for attempt in range(2):
            done = subprocess.run(
                [sys.executable, __file__, "open-and-read", path, str(n_keys), expected],
                capture_output=True, text=True, check=True,
            )
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"  fresh process {attempt + 1}: open {result['open_s']:.3f} s; RSS {result['rss_before_mb']:.0f} MB "
                  f"before, {result['rss_after_open_mb']:.0f} MB after open, {result['rss_after_reads_mb']:.0f} MB "
                  f"after {PROBES:,} reads; values(key): {quantiles(result['latencies'])}; wrong reads: {result['wrong']}")
        os.remove(expected)


def stream(n_batches: int, rows: int) -> None:
    rng = np.random.default_rng(5)
    n_keys = max(1000, n_batches * rows // 10)
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "stream")
        PersistedArrangement(path)
        started = time.perf_counter()
        for b in range(n_batches):
            table = updates_table(rng.integers(0, n_keys, rows), np.full(rows, b, dtype=np.int64), rng.integers(0, 1000, rows))
            name = f"batch-{b}"
            write_batch(path, name, table)
            publish_batch(path, name, b or None, b + 1, rows, stream={"batch_id": b})
        published = time.perf_counter() - started
        streamed = PersistedArrangement(path)
        print(f"stream: {n_batches:,} micro-batches of {rows:,} updates published in {published:.1f} s "
              f"({n_batches / published:,.0f} micro-batches/s); the spine holds {len(streamed.batches)} batches")
        compacted_path = os.path.join(root, "compacted")
        subprocess.run(["cp", "-r", path, compacted_path], check=True)
        compact_start = time.perf_counter()
        PersistedArrangement(compacted_path).compact()
        print(f"  full compaction of a copy: {time.perf_counter() - compact_start:.1f} s")
        rnd = random.Random(9)
        keys = [key_name(rnd.randrange(n_keys)) for _ in range(PROBES)]
        figures: dict[str, dict[str, list[float]]] = {"stream": {"open": [], "reads": []}, "compacted": {"open": [], "reads": []}}
        answers: dict[str, list] = {}
        for _ in range(2):  # A B A B
            for label, where in (("stream", path), ("compacted", compacted_path)):
                start = time.perf_counter()
                arrangement = PersistedArrangement(where)
                figures[label]["open"].append(time.perf_counter() - start)
                probe(arrangement, keys[:50])  # warm
                latencies, found = probe(arrangement, keys)
                figures[label]["reads"] = latencies
                answers[label] = found
        assert answers["stream"] == answers["compacted"], "the two arrangements disagree"
        for label in ("stream", "compacted"):
            opens = figures[label]["open"]
            print(f"  {label:<10} open {min(opens):.3f} s; values(key): {quantiles(figures[label]['reads'])}")
        p99 = {label: sorted(figures[label]["reads"])[int(PROBES * 0.99)] for label in figures}
        print(f"  stream / compacted: open {min(figures['stream']['open']) / min(figures['compacted']['open']):.2f}x, "
              f"values p99 {p99['stream'] / p99['compacted']:.2f}x")


def main(argv: list[str]) -> None:
    what = argv[0] if argv else "scale"
    if what == "open-and-read":
        open_and_read(argv[1], int(argv[2]), argv[3])
    elif what == "scale":
        scale(int(argv[1]) if len(argv) > 1 else 10_000_000, int(argv[2]) if len(argv) > 2 else 1_000_000)
    elif what == "stream":
        stream(int(argv[1]) if len(argv) > 1 else 10_000, int(argv[2]) if len(argv) > 2 else 1000)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
