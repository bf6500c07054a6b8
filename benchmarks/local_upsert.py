"""Local runtime vs a bare Python dict loop on the U1 upsert workload.

Usage: python benchmarks/local_upsert.py [N] [K] [RUNS]   (default 1000000 100000 3)

Both sides start from the same list of (key, value, time, offset) tuples and must
produce the same consolidated updates sorted by (time, data); the script checks that,
then prints the median of RUNS timings and the ratio (framework / bare loop).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from operator import itemgetter

from workloads import upsert_workload

from library import Upsert
from statemachines import run_local


def bare_dict_loop(commands):
    """The same upsert without the framework: sort, keep the last per (key, time), diff."""
    ordered = sorted(commands, key=itemgetter(0, 2, 3))
    current = {}
    out = []
    last = len(ordered) - 1
    for i, (key, value, t, _) in enumerate(ordered):
        if i < last and ordered[i + 1][0] == key and ordered[i + 1][2] == t:
            continue
        old = current.get(key)
        if old == value:
            continue
        if old is not None:
            out.append(((key, old), t, -1))
        if value is None:
            del current[key]
        else:
            out.append(((key, value), t, 1))
            current[key] = value
    out.sort(key=itemgetter(1, 0))
    return out


def median_seconds(fn, runs):
    """Median wall time of ``fn()``; results are dropped so runs do not weigh on each other."""
    timings = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    table = upsert_workload(n, k)
    columns = [table.column(c).to_pylist() for c in ("key", "value", "time", "offset")]
    commands = list(zip(*columns, strict=True))

    ours = run_local(Upsert(), commands)
    bare = bare_dict_loop(commands)
    if [tuple(u) for u in ours.updates] != bare or ours.rejected:
        raise SystemExit("the framework and the bare loop disagree; the benchmark is void")
    n_updates = len(bare)
    del ours, bare

    bare_s = median_seconds(lambda: bare_dict_loop(commands), runs)
    ours_s = median_seconds(lambda: run_local(Upsert(), commands), runs)
    print(f"U1 upsert, local: N={n:,} commands, K={k:,} keys, {n_updates:,} updates, median of {runs}")
    print(f"{'approach':<22}{'seconds':>10}{'commands/s':>14}{'ratio':>8}")
    for name, secs in (("bare dict loop", bare_s), ("run_local(Upsert())", ours_s)):
        print(f"{name:<22}{secs:>10.3f}{n / secs:>14,.0f}{secs / bare_s:>8.2f}")


if __name__ == "__main__":
    main()
