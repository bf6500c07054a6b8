"""Benchmark: the fraud pattern with SQL conditions against the same pattern with functions.

Usage:
    python benchmarks/cep_expressions.py [--n N] [--k K] [--runs R] [--many-amounts] [--raising]
                                         [--skip-spark | --skip-local]

Events are records ``Login(kind, amount)`` (a NamedTuple locally, a struct on Spark),
``amount`` NULL in a fifth of them (with ``--many-amounts``, one in a thousand, the
others spread over 1,000 values: about as many distinct logins as events in a Spark
chunk, where the default's 15 let a function be called once per distinct login); the
pattern is three ``kind = 'fail'`` then
``kind = 'ok' AND amount > 10`` within 10, its conditions given once as SQL text
(evaluated for a batch of events at once) and once as Python functions (per event).
Measured warm and interleaved (A B A B ...) in one process, run_local and run_batch
(Parquet in, output written as Parquet by its tasks), every output checked against run_local
with functions. Beside them, ``SQL, relevant events only`` runs the SQL pattern over only
the events one of its conditions holds for (checked against ``run_local`` over those
events): the most that dropping the others before the runtime (say, by a filter
pushed into Spark's scan) could gain. ``--raising`` adds the SQL rule with ``1000 % amount >= 0`` (true
wherever it is read, before ``amount > 10``) over the same events and one more, an ``ok`` whose amount is 0:
the condition raises on that event alone, which is rejected; the findings are the same.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from cep import BatchRuns, findings_digest, interleaved, write_source  # noqa: E402

from statemachines import run_local  # noqa: E402
from statemachines.library import Detector, Pattern  # noqa: E402


class Login(NamedTuple):
    kind: str
    amount: int | None


RAISING = "SQL, 1 raising"  # the SQL rule over the events and one it raises on
READ_ONLY = "SQL, relevant events only"  # the SQL rule over the events a condition holds for


def read_by_a_condition(login: Login) -> bool:
    """Whether one of the pattern's conditions holds for the login."""
    return login.kind == "fail" or (login.kind == "ok" and login.amount is not None and login.amount > 10)


def patterns(window: int) -> dict[str, Pattern]:
    return {
        RAISING: (
            Pattern.begin("fail").where("kind = 'fail'").times(3)
            .followed_by("ok").where("kind = 'ok' AND 1000 % amount >= 0 AND amount > 10")
            .within(window)
        ),
        "functions": (
            Pattern.begin("fail").where(lambda e: e.kind == "fail").times(3)
            .followed_by("ok").where(lambda e: e.kind == "ok" and e.amount is not None and e.amount > 10)
            .within(window)
        ),
        "SQL": (
            Pattern.begin("fail").where("kind = 'fail'").times(3)
            .followed_by("ok").where("kind = 'ok' AND amount > 10")
            .within(window)
        ),
    }


def logins(n: int, k: int, window: int, seed: int = 5, many_amounts: bool = False) -> list[tuple[str, Login, int]]:
    """``(user, Login, time)``: a user has about 10 events per window."""
    rnd = random.Random(seed)
    kinds = ["fail"] * 5 + ["ok"] * 2 + ["view"] * 3
    amounts = [None, *range(1000)] if many_amounts else [None, 5, 20, 50, 500]
    span = max(1, n * window // (10 * k))
    return [(f"u{rnd.randrange(k)}", Login(rnd.choice(kinds), rnd.choice(amounts)), i * span // n) for i in range(n)]


def plain(value):
    """Lists, tuples and NamedTuples as plain tuples (as Spark gives them back)."""
    return tuple(plain(x) for x in value) if isinstance(value, list | tuple) else value


def local_digest(updates):
    """The digest of a run's matches and timeouts, their values as plain tuples: the
    partial matches (most of the updates) left out first, as the Spark digest does."""
    return findings_digest([((k, plain(v)), t, d) for (k, v), t, d in updates if v[0] != "partial"])


def write_logins(events, work: str) -> str:
    """The logins as a Parquet dataset under ``work`` (``symbol`` a struct): its folder."""
    import pyarrow as pa

    symbol = pa.array([e[1] for e in events], pa.struct([("kind", pa.string()), ("amount", pa.int64())]))
    table = pa.table({"key": [e[0] for e in events], "symbol": symbol, "time": [e[2] for e in events]})
    return write_source(table, f"{work}/logins")


def with_one_raising(events):
    """The events and, in their middle, an ``ok`` of amount 0 (of the key and time there)."""
    middle = len(events) // 2
    return [*events[:middle], (events[middle][0], Login("ok", 0), events[middle][2]), *events[middle:]]


def spark_runs(detectors: dict[str, Detector], sources: dict[str, list], work: str):
    """Each detector's ``run_batch`` over its events (``sources[name]``) as Parquet."""
    from statemachines.spark import local_session

    spark = local_session()

    def digest(result):
        found = result.updates.where("value.kind != 'partial'").collect()
        return findings_digest([((r.key, plain(r.value)), r.time, r.diff) for r in found])

    return {
        name: (BatchRuns(spark, d, write_logins(sources[name], f"{work}/{i}")), digest)
        for i, (name, d) in enumerate(detectors.items())
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--many-amounts", action="store_true", help="1,000 distinct amounts, not 4")
    parser.add_argument("--raising", action="store_true", help="add the SQL rule over events one of which it raises on")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-local", action="store_true", help="time run_batch only (still checked against run_local)")
    args = parser.parse_args()
    events = logins(args.n, args.k, args.window, many_amounts=args.many_amounts)
    detectors = {name: Detector(p) for name, p in patterns(args.window).items() if args.raising or name != RAISING}
    detectors[READ_ONLY] = detectors["SQL"]
    read_only = [e for e in events if read_by_a_condition(e[1])]
    sources = {name: events for name in detectors} | {RAISING: with_one_raising(events), READ_ONLY: read_only}
    expected = local_digest(run_local(detectors["functions"], events).updates)
    own = {READ_ONLY: [local_digest(run_local(detectors["functions"], read_only).updates)]}

    approaches = {} if args.skip_local else {
        f"run_local, {name}": (lambda d=d, e=sources[name]: run_local(d, e).updates, local_digest, *own.get(name, []))
        for name, d in detectors.items()
    }
    work = tempfile.mkdtemp(prefix="bench-cep-sql-")
    batch_runs = {} if args.skip_spark else spark_runs(detectors, sources, work)
    for name, (runner, digest) in batch_runs.items():
        approaches[f"run_batch, {name}"] = (runner, digest, *own.get(name, []))
    try:
        seconds = interleaved(approaches, args.runs, expected)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    amounts = "1,000 amounts" if args.many_amounts else "4 amounts"
    print(f"N={args.n:,} events, K={args.k:,} users, {amounts}, within {args.window}; {os.cpu_count()} cores; "
          f"median of {args.runs} interleaved runs, each checked against run_local with functions")
    print(f"{expected[0]:,} matches, {expected[1]:,} timeouts; a condition holds for {len(read_only):,} events, "
          f"over which the SQL pattern finds {own[READ_ONLY][0][0]:,} matches, {own[READ_ONLY][0][1]:,} timeouts")
    print(f"{'approach':<36}{'seconds':>9}{'events/s':>12}{'SQL vs functions':>18}")
    for runtime in ("run_local", "run_batch"):
        if f"{runtime}, SQL" not in seconds:
            continue
        functions = statistics.median(seconds[f"{runtime}, functions"])
        sql = statistics.median(seconds[f"{runtime}, SQL"])
        print(f"{runtime + ', functions':<36}{functions:>9.2f}{args.n / functions:>12,.0f}")
        print(f"{runtime + ', SQL':<36}{sql:>9.2f}{args.n / sql:>12,.0f}{functions / sql:>17.2f}x")
        if f"{runtime}, {RAISING}" in seconds:
            raised = statistics.median(seconds[f"{runtime}, {RAISING}"])
            print(f"{runtime + ', ' + RAISING:<36}{raised:>9.2f}{args.n / raised:>12,.0f}   {raised / sql:.2f}x the SQL run's time")
        bound = statistics.median(seconds[f"{runtime}, {READ_ONLY}"])
        print(f"{runtime + ', ' + READ_ONLY:<36}{bound:>9.2f}{args.n / bound:>12,.0f}{functions / bound:>17.2f}x")
    for name, (runs, _) in batch_runs.items():  # the timed runs' CPU, the warm-up's left out
        jvm, workers = (statistics.median(c[i] for c in runs.cpu[1:]) for i in (0, 1))
        print(f"run_batch, {name}: CPU seconds, JVM {jvm:.2f}, Python workers {workers:.2f}")


if __name__ == "__main__":
    main()
