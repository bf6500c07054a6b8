"""A writer that appends and compacts a persisted arrangement until it is killed.

    python -m tests.arrangement_writer PATH [STEPS] [PAUSE_SECONDS]

Each step appends the updates of one time (deterministic: :func:`history`) and every
few steps compacts. A restarted writer first retries the batch it may have been
writing when it died (a replay if that one was committed), then goes on from the
arrangement's upper. Tests kill it (SIGKILL) at random moments, or read beside it.
"""

from __future__ import annotations

import random
import sys
import time

from statemachines import PersistedArrangement, run_local
from statemachines.library import Upsert

STEPS = 400
COMPACT_EVERY = 5
KEEP = 3  # compaction keeps the last times exact


def history(steps: int = STEPS, seed: int = 5) -> list:
    """The updates every writer appends, time by time."""
    rnd = random.Random(seed)
    events = [(f"k{rnd.randrange(40)}", rnd.choice(["a", "b", "c", None]), t) for t in range(steps) for _ in range(6)]
    return run_local(Upsert(), events).updates


def main(argv: list[str]) -> None:
    path = argv[0]
    steps = int(argv[1]) if len(argv) > 1 else STEPS
    pause = float(argv[2]) if len(argv) > 2 else 0.0
    by_time: dict[int, list] = {}
    for update in history(steps):
        by_time.setdefault(update.time, []).append(update)
    arrangement = PersistedArrangement(path)
    start = arrangement.upper or 0
    if start:  # the batch that may have been in flight when a writer died: applies once
        arrangement.append(by_time.get(start - 1, []), lower=start - 1 or None, upper=start)
    for t in range(start, steps):
        arrangement.append(by_time.get(t, []), lower=t or None, upper=t + 1)
        if t % COMPACT_EVERY == COMPACT_EVERY - 1:
            arrangement.compact(t + 1 - KEEP)
        print(t + 1, flush=True)
        if pause:
            time.sleep(pause)


if __name__ == "__main__":
    main(sys.argv[1:])
