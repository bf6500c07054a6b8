"""CDC reader throughput on mangled input: 2x duplication, full shuffle (the C1 workload).

Usage: python benchmarks/cdc_reader.py [N_UPDATES] [BATCH]   (default 1000000 100)

Writes N updates (over 100k keys, ~10 updates per time) as CDC messages of BATCH
updates each with a progress message every 1000 times, duplicates every message,
shuffles them all, then reads them back with CdcReader. Prints updates/s, the peak
resident items the reader held and the process's peak memory, and checks the
history read back equals the one written. ``benchmarks/run.py cdc`` runs the same
workload beside its floor.
"""

from __future__ import annotations

import random
import resource
import sys
import time

from statemachines import Update, consolidate
from statemachines.cdc import CdcReader, CdcWriter


def mangled_messages(n, rnd, batch=100):
    """C1: a consolidated history of about ``n`` updates, and its messages 2x and shuffled."""
    history = consolidate(
        Update((rnd.randrange(100_000), rnd.randrange(1000)), i // 10, rnd.choice((-1, 1)))
        for i in range(n)
    )
    writer, messages = CdcWriter(batch_size=batch), []
    last = history[-1].time + 1
    for lower in range(0, last, 1000):
        step = [u for u in history[lower * 10 : (lower + 1000) * 10 + 10] if lower <= u.time < lower + 1000]
        messages += writer.advance(step, lower + 1000 if lower + 1000 < last else None)
    messages = messages * 2
    rnd.shuffle(messages)
    return history, messages


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    history, messages = mangled_messages(n, random.Random(3), batch)
    reader, peak, released = CdcReader(), 0, []
    start = time.perf_counter()
    for message in messages:
        for _, updates in reader.push(message):
            released.extend(updates)
        peak = max(peak, reader.resident())
    seconds = time.perf_counter() - start
    if released != history or not reader.complete:
        raise SystemExit("the reader did not recover the history; the benchmark is void")
    delivered = sum(len(m.updates) for m in messages if hasattr(m, "updates"))
    print(f"CDC reader: {len(history):,} updates, delivered as {delivered:,} (2x duplicated, shuffled), "
          f"{len(messages):,} messages")
    print(f"{'seconds':>9}{'updates/s delivered':>22}{'peak resident items':>22}{'peak RSS MB':>13}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{seconds:>9.2f}{delivered / seconds:>22,.0f}{peak:>22,}{rss:>13,.0f}")


if __name__ == "__main__":
    main()
