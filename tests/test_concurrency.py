"""Readers never see a torn arrangement while a writer appends and compacts.

Threads share one arrangement (readers hold ``since`` with handles); processes open
the persisted table over and over while the writer commits; Spark reads pinned
versions beside a writer in another process; writers are killed (SIGKILL) at random
moments. Every read is compared with the collection the model says it must be; the
tests print how many reads they compared.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time

import pytest
from deltalake import DeltaTable

from statemachines import (
    InvalidArgument,
    PersistedArrangement,
    collection_at,
    consolidate,
    run_local,
)
from statemachines.library import Upsert
from tests import background

STEPS = 80


def history(seed=3):
    rnd = random.Random(seed)
    events = [(f"k{rnd.randrange(30)}", rnd.choice(["a", "b", "c", None]), t) for t in range(STEPS) for _ in range(5)]
    return run_local(Upsert(), events).updates


def write(arrangement, updates, compact_every=6, keep=5, pause=0.002):
    for t in range(STEPS):
        arrangement.append([u for u in updates if u.time == t], lower=t if t else None, upper=t + 1)
        if t % compact_every == compact_every - 1:
            arrangement.compact(t + 1 - keep)
        time.sleep(pause)


def test_reader_threads_holding_since_see_exact_collections(tmp_path):
    updates = history()
    arrangement = PersistedArrangement(tmp_path)
    done = threading.Event()
    compared, refused, failures = [0], [0], []

    def read(seed):
        try:
            read_until_done(seed)
        except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in a thread
            failures.append(exc)

    def read_until_done(seed):
        rnd = random.Random(seed)
        while not done.is_set() or compared[0] < 50:
            upper = arrangement.upper
            if upper is None:
                continue
            hold = rnd.randrange(max(arrangement.since or 0, upper - 8), upper)
            try:
                handle = arrangement.reader(hold)
            except InvalidArgument:  # compaction passed ``hold`` meanwhile: pick again
                refused[0] += 1
                continue
            with handle:
                as_of = rnd.randrange(hold, arrangement.upper)
                got = dict(arrangement.snapshot(as_of))
                time.sleep(0.001)  # hold across a write or two
                again = dict(arrangement.snapshot(as_of))
            expected = collection_at(updates, as_of)
            if got != expected or again != expected:
                failures.append(as_of)
            compared[0] += 1

    readers = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for r in readers:
        r.start()
    write(arrangement, updates)
    done.set()
    for r in readers:
        r.join(timeout=60)
    print(f"{compared[0]} snapshots compared by 3 reader threads ({refused[0]} holds refused), {STEPS} appends")
    assert not failures
    assert compared[0] >= 50
    assert arrangement.since is not None  # compaction did happen while readers held


def reopen_and_check(path, ready, done, results):
    """Open the table over and over until the writer is done, then once more: each
    opened table must hold the collection the model says for its latest time."""
    updates = history()
    compared = 0
    ready.put(True)
    while True:
        last = done.is_set()
        opened = PersistedArrangement(path)
        if opened.upper is not None:
            as_of = opened.upper - 1
            if dict(opened.snapshot(as_of)) != collection_at(updates, as_of):
                results.put(("torn", as_of))
                return
            compared += 1
        if last:
            break
    results.put(("ok", compared))


def test_reader_processes_opening_during_writes_see_published_states(tmp_path):
    PersistedArrangement(tmp_path)
    context = multiprocessing.get_context("spawn")
    ready, results, done = context.Queue(), context.Queue(), context.Event()
    readers = [context.Process(target=reopen_and_check, args=(str(tmp_path), ready, done, results)) for _ in range(2)]
    for r in readers:
        r.start()
    for _ in readers:  # their interpreters started and imported the project, however slow
        ready.get(timeout=120)
    write(PersistedArrangement(tmp_path), history(), compact_every=3, pause=0.01)
    done.set()
    outcomes = [results.get(timeout=60) for _ in readers]
    for r in readers:
        r.join(timeout=30)
    print(f"reader processes: {outcomes}")
    assert all(kind == "ok" and compared > 0 for kind, compared in outcomes)


def test_a_cursor_reads_one_version_however_long_it_runs():
    from statemachines import Arrangement

    arrangement = Arrangement()
    arrangement.append([(("a", 1), 0, 1), (("c", 1), 0, 1)], lower=None, upper=1)
    version_1 = arrangement.snapshot()
    cursor = arrangement.cursor()
    first = next(cursor)
    arrangement.append([(("a", 1), 1, -1), (("c", 1), 1, -1), (("b", 1), 1, 1)], lower=1, upper=2)
    read = [(key, value) for key, entries in [first, *cursor] for value, times in entries.items() if sum(d for _, d in times)]
    assert read == [data for data, _ in version_1]
    assert arrangement.snapshot() == [(("b", 1), 1)]  # a new read sees version 2


def test_latest_snapshots_read_by_threads_during_appends_are_whole_versions():
    import sys

    from statemachines import Arrangement

    rnd = random.Random(11)
    arrangement = Arrangement()
    versions = {repr(arrangement.snapshot())}
    done = threading.Event()
    reads, torn = [0], []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: reads get interrupted mid-way

    def reader():
        while not done.is_set():
            seen = repr(arrangement.snapshot())
            reads[0] += 1
            if seen not in versions:
                torn.append(seen)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        live: set[str] = set()
        for t in range(150):
            gone = rnd.sample(sorted(live), min(len(live), 40))
            new = {f"k{rnd.randrange(400)}" for _ in range(40)} - live
            updates = [((k, 1), t, -1) for k in gone] + [((k, 1), t, 1) for k in new]
            # each version is recorded before it is published: a reader can only see
            # a version the test knows, unless it reads a mix of two
            live = (live - set(gone)) | new
            versions.add(repr(sorted(((k, 1), 1) for k in live)))
            arrangement.append(updates, lower=t if t else None, upper=t + 1)
    finally:
        done.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(switch)
    print(f"{reads[0]} snapshots read during 150 appends, {len(torn)} torn")
    assert reads[0] > 100 and torn == []


# -- a writer in another process: killed at random moments, read by Spark ---------------------


def expected_at(updates, upper, since):
    """The arrangement a writer of ``updates`` published up to ``upper``, compacted to ``since``."""
    return consolidate(
        (data, t if since is None or t >= since else since, diff) for data, t, diff in updates if t < upper
    )


def start_writer(path, steps, pause=0.0):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "tests.arrangement_writer", str(path), str(steps), str(pause)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=background.environment(),
    )


@background.job("killed-writers")
def killed_writers(tmp_path):
    """Kill writer processes (SIGKILL) at random moments, checking the table after each
    kill, then let one finish; what happened, to print."""
    import signal

    from statemachines.persisted import check
    from tests.arrangement_writer import history

    steps, kills = 600, 0  # more steps than 30 kills can interrupt, however fast the writer
    updates = history(steps)
    rnd = random.Random(23)
    uppers = []
    while kills < 30:
        writer = start_writer(tmp_path, steps)
        # past the interpreter's start, then at a random moment of appends and compactions
        first = writer.stdout.readline()
        if not first:  # it finished: every step is published
            writer.wait(timeout=60)
            break
        time.sleep(rnd.uniform(0, 0.08))
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=60)
        kills += 1
        reopened = PersistedArrangement.open(tmp_path)
        uppers.append(reopened.upper)
        assert reopened.updates() == expected_at(updates, reopened.upper, reopened.since)
        assert check(tmp_path) == []
    finish = start_writer(tmp_path, steps)
    _, errors = finish.communicate(timeout=120)
    assert finish.returncode == 0, errors[-2000:]
    final = PersistedArrangement.open(tmp_path)
    assert kills >= 25
    assert final.upper == steps
    assert final.snapshot() == sorted(collection_at(updates, steps).items())
    assert final.updates() == expected_at(updates, steps, final.since)
    return f"{kills} writers killed (SIGKILL) at uppers {uppers}; final upper {final.upper}"


@pytest.mark.background("killed-writers")
def test_a_writer_killed_at_random_moments_leaves_published_versions_and_retries_apply_once():
    print(background.result("killed-writers"))


def test_spark_reads_beside_a_writer_that_appends_and_compacts_never_fail_or_tear(spark, tmp_path):
    from statemachines.persisted import read_state
    from statemachines.spark import read_updates
    from statemachines.times import decode_time
    from tests.arrangement_writer import history

    steps = 200
    updates = history(steps)
    writer = start_writer(tmp_path, steps, pause=0.05)
    writer.stdout.readline()  # the first version is committed
    reads, failed, torn = 0, [], []
    try:
        while writer.poll() is None or reads < 10:
            version = DeltaTable(str(tmp_path)).version()
            state = read_state(tmp_path, version)
            try:
                frame = read_updates(spark, tmp_path, version=version)
                time.sleep(0.1)  # planned; the writer appends and compacts before the rows are read
                rows = frame.collect()
            except Exception as exc:  # noqa: BLE001 - counted and reported
                failed.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            reads += 1
            got = consolidate(((r.key, r.value), r.time, r.diff) for r in rows)
            upper, since = decode_time(state["upper"]), decode_time(state["since"])
            if got != expected_at(updates, upper, since):
                torn.append(version)
    finally:
        writer.kill()
        writer.communicate(timeout=60)
    print(f"{reads} Spark reads beside the writer: {len(failed)} failed, {len(torn)} torn")
    assert failed == [] and torn == []
    assert reads >= 10
