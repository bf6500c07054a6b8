"""Benchmark: an upsert with lateness whose first waterline is guessed from the events, or not.

Usage:
    python benchmarks/lateness.py [--n N] [--k K] [--lateness L] [--runs R] [--skip-spark]

Commands: N upserts of K keys at times 0..N-1, the value ``(event time, payload)``
with the event time up to 50 away from the command's time, a tenth deletes.
``UpsertWithLateness(L, value_time=...)`` judges each command against the waterline
of what every key inserted before; the runtimes run the keys in parallel and settle
the waterline by running again until guess and truth agree
(:func:`statemachines.waterline.settle`). Two approaches, warm and interleaved
(A B A B), each checked against ``run_local`` of the machine without a guess:

- *guessed*: ``UpsertWithLateness`` as it is: the first guess is what the commands
  would insert if all were accepted (``guess_marks``);
- *not guessed*: the same machine with ``guess_marks`` answering ``None``: the first
  guess is that the run inserts nothing.

Printed per approach: seconds, commands per second, and the runs a settle took.
Locally a run after the first re-runs only the keys whose commands see other high
marks; on Spark each run is a job over every key.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import sys
import tempfile
from operator import itemgetter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from cep import interleaved, write_source  # noqa: E402

import statemachines.local as local_module  # noqa: E402
from statemachines import run_local  # noqa: E402
from statemachines.library import UpsertWithLateness  # noqa: E402

RUNS: list[int] = []  # one item per run of the latest settle


def counting_runs(settle):
    """``settle``, noting each run it makes in ``RUNS`` (the runtimes import it by name)."""

    def counted(machine, base, run, marks_of, **options):
        RUNS.clear()

        def noted(bound, line):
            RUNS.append(1)
            return run(bound, line)

        return settle(machine, base, noted, marks_of, **options)

    return counted


class NotGuessed(UpsertWithLateness):
    """``UpsertWithLateness`` without a first guess: a run starts from what came before."""

    def guess_marks(self, key, symbol):
        return None


def commands(n: int, k: int, seed: int = 3) -> list[tuple[str, tuple[int, str] | None, int]]:
    rnd = random.Random(seed)
    return [
        (f"k{rnd.randrange(k)}", None if rnd.random() < 0.1 else (i + rnd.randrange(-50, 51), f"v{i}"), i)
        for i in range(n)
    ]


def digest(updates, rejected) -> tuple[int, int, str]:
    rows = sorted(repr(u) for u in updates)
    return len(rows), len(rejected), hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def plain(value):
    return tuple(value) if isinstance(value, list | tuple) else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--lateness", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    local_module.settle = counting_runs(local_module.settle)
    events = commands(args.n, args.k)
    machines = {
        name: cls(args.lateness, value_time=itemgetter(0))
        for name, cls in (("guessed", UpsertWithLateness), ("not guessed", NotGuessed))
    }
    reference = run_local(machines["not guessed"], events)
    expected = digest([((k, plain(v)), t, d) for (k, v), t, d in reference.updates], reference.rejected)

    runs_taken: dict[str, int] = {}  # approach -> the runs its last settle took

    def local(name, machine):
        def run():
            result = run_local(machine, events)
            runs_taken[f"run_local, {name}"] = len(RUNS)
            return result
        return run

    def local_digest(result):
        return digest([((k, plain(v)), t, d) for (k, v), t, d in result.updates], result.rejected)

    approaches = {f"run_local, {name}": (local(name, m), local_digest) for name, m in machines.items()}
    work = tempfile.mkdtemp(prefix="bench-lateness-")
    if not args.skip_spark:
        import pyarrow as pa

        import statemachines.spark.waterline as spark_waterline
        from statemachines.spark import local_session, run_batch

        spark_waterline.settle = counting_runs(spark_waterline.settle)

        spark = local_session()
        symbol = pa.array([e[1] for e in events], pa.struct([("at", pa.int64()), ("payload", pa.string())]))
        source = write_source(
            pa.table({"key": [e[0] for e in events], "symbol": symbol, "time": [e[2] for e in events]}), f"{work}/in"
        )

        def batch(name, machine):
            def run():  # the output collected: runs settle before, the rows are read after
                result = run_batch(machine, spark.read.parquet(source))
                runs_taken[f"run_batch, {name}"] = len(RUNS)
                updates = [((r.key, plain(r.value)), r.time, r.diff) for r in result.updates.collect()]
                return updates, [None] * result.rejected.count()
            return run

        for name, m in machines.items():
            approaches[f"run_batch, {name}"] = (batch(name, m), lambda out: digest(*out))
    try:
        seconds = interleaved(approaches, args.runs, expected)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"N={args.n:,} commands, K={args.k:,} keys, lateness {args.lateness:,}; {os.cpu_count()} cores; "
          f"median of {args.runs} interleaved runs after a warm-up, each checked against run_local not guessed")
    print(f"{len(reference.updates):,} updates, {len(reference.rejected):,} rejected")
    print(f"{'approach':<26}{'seconds':>9}{'commands/s':>12}{'runs':>6}{'not guessed / guessed':>23}")
    for runtime in ("run_local", "run_batch"):
        if f"{runtime}, guessed" not in seconds:
            continue
        guessed, unguessed = (statistics.median(seconds[f"{runtime}, {n}"]) for n in ("guessed", "not guessed"))
        for name, s in (("not guessed", unguessed), ("guessed", guessed)):
            ratio = f"{unguessed / guessed:>22.2f}x" if name == "guessed" else ""
            print(f"{runtime + ', ' + name:<26}{s:>9.2f}{args.n / s:>12,.0f}{runs_taken[f'{runtime}, {name}']:>6}{ratio}")


if __name__ == "__main__":
    main()
