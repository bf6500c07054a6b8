"""Benchmark: the fraud pattern over N login events of K users, against a hand-written detector.

Usage:
    python benchmarks/cep.py [--n N] [--k K] [--window W] [--runs R] [--warmup W] [--skip-spark] [--grow] [--into] [--hot]

Pattern: three ``fail`` then an ``ok`` (``begin("fail").times(3).followed_by("ok")``,
relaxed, no skip), within W (10). Events: user ``rnd(K)``, ``fail`` / ``ok`` / ``view``
(50/20/30 %), times spread so a user has about 10 events per window.

Approaches, measured warm (after ``--warmup`` untimed rounds, default 4: Spark's JVM
compiles for about that long) and interleaved (A B C A B C ...), each checked against
``run_local``'s matches and timeouts (key, time and events of each):

- hand-written: a plain-Python detector for this one pattern, the floor;
- ``run_local(Detector(...))``;
- ``run_batch`` on a local Spark session (Parquet in, four files; its tasks write the
  output as Parquet files in a scratch folder that the result reads);
- ``run_batch`` into an arrangement (its tasks write the output files themselves),
  checked against ``run_local`` into an arrangement: timeouts after its upper wait.

With ``--into``, also ``run_local`` into an arrangement in memory and into a
``PersistedArrangement`` (partial matches stored as nested Arrow values), checked
against ``run_local`` into an arrangement.

Also printed: the CPU seconds of a ``run_batch`` in Spark's JVM and in its Python
workers (Linux ``/proc``, median of the timed runs), and the bound they set on two
cores (``run_local``'s seconds over half their sum); the peak number of live partial
matches (from the output); and with ``--grow`` the peak memory of a process
streaming N, then 4N events (same users, four times the time) into a
``LocalRuntime`` window by window, its output dropped: the state is bounded by the
window, so memory stays flat as the input grows.

With ``--hot``, the peak memory of a fresh process running one Spark task's Python
(``partition_runner``, in-process) over a partition holding one key with N/4 of the
events, run whole and in parts of ``KEY_CHUNK`` events (the runtime's way), each
output checked against the other.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from statemachines import Arrangement, LocalRuntime, PersistedArrangement, run_local  # noqa: E402
from statemachines.library import Detector, Pattern, matches, timeouts  # noqa: E402


def pattern(window: int) -> Pattern:
    return (
        Pattern.begin("fail").where(lambda s: s == "fail").times(3)
        .followed_by("ok").where(lambda s: s == "ok")
        .within(window)
    )


def logins(n: int, k: int, window: int, seed: int = 5) -> list[tuple[str, str, int]]:
    """``(user, kind, time)``: a user has about 10 events per window."""
    return list(login_stream(n, k, window, seed))


def login_stream(n: int, k: int, window: int, seed: int = 5):
    rnd = random.Random(seed)
    kinds = ["fail"] * 5 + ["ok"] * 2 + ["view"] * 3
    span = max(1, n * window // (10 * k))
    for i in range(n):
        yield f"u{rnd.randrange(k)}", rnd.choice(kinds), i * span // n


def hand_detector(events, window: int) -> list:
    """The pattern by hand: per user, partial matches as ``[start, events, fails]``.

    Each ``fail`` begins one and is taken by every partial match with fewer than three
    (relaxed: other kinds are skipped); an ``ok`` completes those with three. A partial
    match times out at its start + ``window``, before any event at that time. Events
    at one time are applied in symbol order (as the runtimes rank them) and numbered.
    """
    by_user: dict = {}
    for user, kind, t in events:
        by_user.setdefault(user, []).append((t, kind))
    found = []
    for user, evs in by_user.items():
        evs.sort()
        partials: list = []
        last, seq = None, 0
        for t, kind in evs:
            seq = seq + 1 if t == last else 0
            last = t
            if partials and partials[0][0] + window <= t:
                for p in partials:
                    if p[0] + window <= t:
                        found.append(((user, ("timeout", "", tuple(p[1]))), p[0] + window, 1))
                partials = [p for p in partials if p[0] + window > t]
            if kind == "fail":
                for p in partials:
                    if p[2] < 3:
                        p[1].append(("fail", t, seq, kind))
                        p[2] += 1
                partials.append([t, [("fail", t, seq, kind)], 1])
            elif kind == "ok":
                for p in partials:
                    if p[2] == 3:
                        found.append(((user, ("match", "", (*p[1], ("ok", t, seq, kind)))), t, 1))
                partials = [p for p in partials if p[2] < 3]
        for p in partials:
            found.append(((user, ("timeout", "", tuple(p[1]))), p[0] + window, 1))
    return found


def findings_digest(rows) -> tuple[int, int, str]:
    """Counts of matches and timeouts, and a hash of their keys, times and events."""
    found = matches(rows), timeouts(rows)
    text = "\n".join(repr((f.key, f.time, f.events)) for group in found for f in group)
    return len(found[0]), len(found[1]), hashlib.sha256(text.encode()).hexdigest()[:16]


def peak_partials(deltas) -> int:
    """The most partial matches alive at once, over all keys, from ``(time, diff)`` of
    the output's partial-match rows."""
    by_time: dict = {}
    for at, diff in deltas:
        by_time[at] = by_time.get(at, 0) + diff
    live = peak = 0
    for at in sorted(by_time):
        live += by_time[at]
        peak = max(peak, live)
    return peak


def stepped_peak_mb(n: int, k: int, window: int) -> float:
    """Peak resident memory of a fresh process that streams ``n`` events into a
    ``LocalRuntime`` in frontier steps of one window, dropping each step's output."""
    return child_peak_mb(f"import cep; cep.stepped_run({n}, {k}, {window})")


def child_peak_mb(statements: str, with_output: bool = False) -> Any:
    """Peak resident memory of a fresh process running ``statements`` (with the
    benchmarks importable); ``with_output``: and the last word they printed."""
    code = (  # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak
        f"import sys; sys.path.insert(0, {HERE!r}); {statements}; "
        "print([line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM')][0])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    peak = int(done.stdout.split()[-1]) / 1024
    return (peak, done.stdout.split()[-2]) if with_output else peak


def stepped_run(n: int, k: int, window: int) -> None:
    runtime, chunk = LocalRuntime(Detector(pattern(window))), []
    for event in login_stream(n, k, window):
        if chunk and event[2] >= chunk[0][2] + window:
            runtime.feed(chunk)
            runtime.advance_to(event[2])
            chunk = []
        chunk.append(event)
    runtime.feed(chunk)
    runtime.finish()


def hot_key_task(n: int, window: int, key_chunk: int) -> None:
    """One task's Python over ``n`` events of one key (see ``--hot``): prints a digest
    of its output rows, whatever their order."""
    import pyarrow as pa

    from statemachines.spark.batch import partition_runner

    detector = Detector(pattern(window))
    events = sorted((t, kind) for _, kind, t in login_stream(n, 1, window))
    table = pa.table({
        "key": ["hot"] * len(events), "symbol": [kind for _, kind in events],
        "time": pa.array([t for t, _ in events], pa.int64()), "order": pa.array(range(len(events)), pa.int64()),
    })
    schema = pa.schema([  # the output rows a task yields (statemachines.spark.output)
        ("kind", pa.int8(), False), ("key", pa.string()), ("value", detector.value_type(pa.string(), pa.int64())),
        ("time", pa.int64()), ("diff", pa.int64()), ("symbol", pa.string()), ("order", pa.int64()),
        ("reason", pa.string()), ("detail", pa.string()),
    ])
    run = partition_runner(detector, "number", None, None, schema, key_chunk=key_chunk)
    digest = 0  # of the rows in any order: the sum of their hashes
    for batch in run(iter(table.to_batches(max_chunksize=10_000))):
        for row in batch.to_pylist():
            digest += int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest())
    print(f"{digest % 2**64:016x}")


def persisted_run(detector: Detector, events, work: str) -> list:
    """``run_local`` into a new ``PersistedArrangement`` under ``work``: its updates."""
    target = f"{work}/persisted"
    shutil.rmtree(target, ignore_errors=True)
    return run_local(detector, events, into=PersistedArrangement(target)).updates


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds (user and system) used so far by process ``pid``, and by every
    process below it (with their reaped children), such as Spark's Python workers
    below its JVM: read from Linux's ``/proc``."""
    stats = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a process that ended meanwhile
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:13]), sum(int(x) for x in fields[13:15]))
    below = {pid}
    while more := {p for p, (parent, _, _) in stats.items() if parent in below} - below:
        below |= more
    tick = os.sysconf("SC_CLK_TCK")
    return stats[pid][1] / tick, sum(stats[p][1] + stats[p][2] for p in below - {pid}) / tick


class BatchRuns:
    """``run_batch(detector)`` over the Parquet events at ``source``, run again and
    again: each run first deletes the output files of the one before (its tasks write
    them into a scratch folder that its result reads); ``last`` is the latest result."""

    def __init__(self, spark: Any, detector: Any, source: str) -> None:
        self.spark, self.detector, self.source = spark, detector, source
        self.last: Any = None
        self.jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        self.cpu: list[tuple[float, float]] = []  # (JVM, Python workers) CPU seconds of each run

    def __call__(self) -> Any:
        from statemachines.spark import run_batch

        if self.last is not None:
            self.last.unpersist()
        jvm, workers = cpu_seconds(self.jvm)
        self.last = run_batch(self.detector, self.spark.read.parquet(self.source))
        jvm_after, workers_after = cpu_seconds(self.jvm)
        self.cpu.append((jvm_after - jvm, workers_after - workers))
        if self.last.scratch is None:
            raise SystemExit("run_batch cached its output instead of writing it as files")
        return self.last


SOURCE_FILES = 4


def write_source(table: Any, folder: str, files: int = SOURCE_FILES) -> str:
    """``table`` as a Parquet dataset of ``files`` files in ``folder``, as a Spark job
    with that many tasks writes one: Spark reads such a dataset with one task per file
    (a single small file is read by one task, on one core, however many there are)."""
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), f"{folder}/part-{i:05d}.parquet")
    return folder


def spark_batch(detector: Detector, events, work: str):
    """``(run, digest of its findings, peak partials)``: run_batch over Parquet."""
    import pyarrow as pa

    from statemachines.spark import local_session, read_updates, run_batch

    columns = ("key", "symbol", "time")
    source = write_source(pa.table({c: [e[i] for e in events] for i, c in enumerate(columns)}), f"{work}/logins")
    spark = local_session()

    run = BatchRuns(spark, detector, source)

    def run_into():
        shutil.rmtree(f"{work}/arr", ignore_errors=True)
        run_batch(detector, spark.read.parquet(source), into=f"{work}/arr")

    def check(into=False):
        out = read_updates(spark, f"{work}/arr") if into else run.last.updates
        found = out.where("value.kind != 'partial'").collect()
        per_time = out.where("value.kind = 'partial'").groupBy("time").sum("diff").collect()

        def plain(v):
            return tuple(plain(x) for x in v) if isinstance(v, list | tuple) else v

        rows = [((r.key, plain(r.value)), r.time, r.diff) for r in found]
        return findings_digest(rows), peak_partials((r[0], r[1]) for r in per_time)

    return spark, run, run_into, check


def interleaved(approaches: dict, runs: int, expected, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of ``runs`` rounds of the approaches in turn (A B A B ...), after
    ``warmup`` untimed rounds; each ``(run, digest)``'s output is checked against
    ``expected`` (or ``(run, digest, its own expected)``'s against its own) in the
    first and last rounds."""
    seconds: dict[str, list[float]] = {name: [] for name in approaches}
    last = warmup + runs - 1
    for round_ in range(warmup + runs):
        for name, (run, digest, *own) in approaches.items():
            wanted = own[0] if own else expected
            gc.collect()
            started = time.perf_counter()
            out = run()
            elapsed = time.perf_counter() - started
            if round_ in (0, last) and digest(out) != wanted:
                raise SystemExit(f"{name} found {digest(out)}, the reference {wanted}")
            del out
            if round_ >= warmup:
                seconds[name].append(elapsed)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=4, help="untimed rounds first (Spark's JVM compiles over about four)")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--grow", action="store_true", help="also trace memory at N and 4N events")
    parser.add_argument("--into", action="store_true", help="also run_local into arrangements, in memory and persisted")
    parser.add_argument("--hot", action="store_true", help="also the memory of a task running one key of N/4 events")
    args = parser.parse_args()
    detector = Detector(pattern(args.window))
    events = logins(args.n, args.k, args.window)

    reference = run_local(detector, events).updates
    expected = findings_digest(reference)
    peak = peak_partials((u.time, u.diff) for u in reference if u.data[1][0] == "partial")
    del reference
    work = tempfile.mkdtemp(prefix="bench-cep-")

    # into an arrangement the input is not complete: the timeouts after its upper wait
    # (the reference runs into one in memory, which a persisted one equals: tests/test_cep.py)
    expected_into = findings_digest(run_local(detector, events, into=Arrangement()).updates)
    approaches = {
        "hand-written detector (floor)": (lambda: hand_detector(events, args.window), findings_digest),
        "run_local(Detector)": (lambda: run_local(detector, events).updates, findings_digest),
    }
    if args.into:
        approaches["run_local into an arrangement"] = (
            lambda: run_local(detector, events, into=Arrangement()).updates, findings_digest, expected_into
        )
        approaches["run_local into a persisted arrangement"] = (
            lambda: persisted_run(detector, events, work), findings_digest, expected_into
        )
    if not args.skip_spark:
        _, run, run_into, check = spark_batch(detector, events, work)
        approaches["run_batch(Detector), 2 cores"] = (run, lambda _: check()[0])
        approaches["run_batch into an arrangement"] = (run_into, lambda _: check(into=True)[0], expected_into)
    try:
        seconds = interleaved(approaches, args.runs, expected, args.warmup)
        if not args.skip_spark and check()[1] != peak:
            raise SystemExit("Spark's output holds a different peak of partial matches")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"N={args.n:,} events, K={args.k:,} users, within {args.window}; {os.cpu_count()} cores; "
          f"median of {args.runs} interleaved runs after {args.warmup} untimed, each checked against run_local")
    print(f"{expected[0]:,} matches, {expected[1]:,} timeouts; peak live partial matches {peak:,}")
    print(f"{'approach':<40}{'seconds':>9}{'events/s':>12}{'vs floor':>10}  each run's seconds")
    floor = statistics.median(seconds["hand-written detector (floor)"])
    local = statistics.median(seconds["run_local(Detector)"])
    for name, times in seconds.items():
        median = statistics.median(times)
        each = " ".join(f"{s:.2f}" for s in times)
        print(f"{name:<40}{median:>9.2f}{args.n / median:>12,.0f}{floor / median:>9.2f}x  {each}")
    if not args.skip_spark:
        batch = statistics.median(seconds["run_batch(Detector), 2 cores"])
        print(f"run_batch throughput / run_local: {local / batch:.2f}x")
        jvm, workers = (statistics.median(c[i] for c in run.cpu[args.warmup:]) for i in (0, 1))
        print(f"run_batch CPU seconds: JVM {jvm:.2f}, Python workers {workers:.2f}; two cores' bound from "
              f"these and run_local: {local / ((jvm + workers) / 2):.2f}x")
        into = statistics.median(seconds["run_batch into an arrangement"])
        print(f"run_batch into an arrangement throughput / run_local: {local / into:.2f}x")
    if args.hot:
        from statemachines.spark.batch import KEY_CHUNK

        n, digests = args.n // 4, set()
        for label, chunk in (("whole", n + 1), (f"in parts of {KEY_CHUNK:,}", KEY_CHUNK)) * 2:
            started = time.perf_counter()
            peak, digest = child_peak_mb(f"import cep; cep.hot_key_task({n}, {args.window}, {chunk})", with_output=True)
            digests.add(digest)
            print(f"one task, one key of {n:,} events, run {label}: peak {peak:,.0f} MB, "
                  f"{time.perf_counter() - started:.1f} s (process included)")
        assert len(digests) == 1, "the parts gave other rows than the whole key"
    if args.grow:
        small = stepped_peak_mb(args.n, args.k, args.window)
        large = stepped_peak_mb(4 * args.n, args.k, args.window)
        print(f"peak memory of a LocalRuntime fed window by window, output dropped: {small:,.0f} MB "
              f"at {args.n:,} events, {large:,.0f} MB at {4 * args.n:,} events (same users, 4x the time)")


if __name__ == "__main__":
    main()
