"""Deterministic benchmark workloads, generated once and cached as Parquet.

U1 (upsert): N commands over K int64 keys. Columns: key int64, value string (nullable,
"v" + 7 digits), time int64, offset int64 (arrival order). Per generated command: 10%
delete (null), 10% repeat of the key's current value, 80% a new value; times increase
with generation order and are unique; N/100 extra commands repeat an existing
(key, time) with another value and a higher offset; arrival order is shuffled inside
windows of 1000 commands. ``split`` files cut the arrival order at window boundaries.
"""

from __future__ import annotations

import pathlib

CACHE = pathlib.Path(__file__).resolve().parent / ".cache"
T0 = 1_700_000_000_000
WINDOW = 1000


def upsert_workload(n: int, k: int, *, seed: int = 7):
    """The U1 table (pyarrow), cached under ``benchmarks/.cache``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = CACHE / f"u1_n{n}_k{k}_s{seed}.parquet"
    if path.exists():
        return pq.read_table(path)
    rng = np.random.default_rng(seed)
    n_dup = n // 100
    n_base = n - n_dup
    keys = rng.integers(0, k, n_base, dtype=np.int64)
    draw = rng.random(n_base)
    fresh = rng.integers(1_000_000, 10_000_000, n_base)
    values: list[str | None] = []
    current: dict[int, str] = {}
    for g in range(n_base):
        key = int(keys[g])
        if draw[g] < 0.1:
            value = None
            current.pop(key, None)
        elif draw[g] < 0.2:
            value = current.get(key)
        else:
            value = f"v{fresh[g]}"
            current[key] = value
        values.append(value)
    times = T0 + np.arange(n_base, dtype=np.int64)

    # repeats of an existing (key, time) with another value, arriving later in its window
    src = np.sort(rng.choice(n_base, n_dup, replace=False))
    other = [f"v{x}" for x in rng.integers(1_000_000, 10_000_000, n_dup)]
    other = [v if v != values[s] else v + "x" for v, s in zip(other, src, strict=True)]

    window = np.arange(n_base) // WINDOW
    arrival = window * WINDOW + rng.random(n_base) * (WINDOW - 1)
    dup_arrival = arrival[src] + rng.random(n_dup) * ((window[src] + 1) * WINDOW - 1 - arrival[src])
    dup_arrival = np.maximum(dup_arrival, np.nextafter(arrival[src], np.inf))
    order = np.argsort(np.concatenate([arrival, dup_arrival]), kind="stable")

    all_values = pa.array(values + other, type=pa.string())
    table = pa.table(
        {
            "key": pa.array(np.concatenate([keys, keys[src]])[order]),
            "value": all_values.take(pa.array(order)),
            "time": pa.array(np.concatenate([times, times[src]])[order]),
            "offset": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return table


def tag_symbol(value, time):
    """The tag-set command T1 derives from one U1 command: a value adds one of 8 tags,
    a delete removes the tag its time picks."""
    return ("del", f"t{time % 8}") if value is None else ("add", f"t{int(value[1:]) % 8}")


def tag_workload(n: int, k: int, *, seed: int = 7):
    """T1 (tag set): U1's keys, times and arrival order with ``symbol`` a struct
    ``(op, tag)`` from :func:`tag_symbol`, cached under ``benchmarks/.cache``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = CACHE / f"t1_n{n}_k{k}_s{seed}.parquet"
    if path.exists():
        return pq.read_table(path)
    u1 = upsert_workload(n, k, seed=seed)
    symbols = [tag_symbol(v, t) for v, t in zip(u1["value"].to_pylist(), u1["time"].to_pylist(), strict=True)]
    ops, tags = zip(*symbols, strict=True)
    symbol = pa.StructArray.from_arrays([pa.array(ops), pa.array(tags)], names=["op", "tag"])
    table = pa.table({"key": u1["key"], "symbol": symbol, "time": u1["time"], "offset": u1["offset"]})
    pq.write_table(table, path)
    return table
