"""IoT readings with late data: the latest reading per sensor, late ones refused and reported.

Sensors report (measured_at, celsius); the network delivers most readings within a
few seconds, some much later. ``UpsertWithLateness`` keeps each sensor's most recently delivered
reading and refuses any reading measured more than 60 s behind the newest one seen
(and any change to a reading that old), reporting each with its reason. Run:

    python examples/iot_lateness.py
"""

from __future__ import annotations

import random
from collections import Counter
from operator import itemgetter

from statemachines import format_table, run_local
from statemachines.library import UpsertWithLateness

LATENESS = 60  # seconds


def readings(sensors: int = 5, per_sensor: int = 40, seed: int = 4) -> list[tuple[str, tuple[int, float], int]]:
    """(sensor, (measured_at, celsius), arrived_at): 10% arrive 2-5 minutes late."""
    rnd = random.Random(seed)
    events = []
    for s in range(sensors):
        for i in range(per_sensor):
            measured = i * 10 + rnd.randrange(10)
            delay = rnd.randrange(120, 300) if rnd.random() < 0.1 else rnd.randrange(5)
            events.append((f"sensor-{s}", (measured, round(20 + rnd.gauss(0, 2), 1)), measured + delay))
    return events


def main() -> None:
    events = readings()
    machine = UpsertWithLateness(LATENESS, value_time=itemgetter(0))
    result = run_local(machine, events)
    latest = {}
    for (sensor, reading), _, diff in result.updates:
        if diff > 0:
            latest[sensor] = reading
    print(f"{len(events)} readings, {len(result.updates)} updates, {len(result.rejected)} rejected")
    print("\nLatest reading per sensor (measured_at, celsius):")
    for sensor in sorted(latest):
        print(f"  {sensor}: {latest[sensor]}")
    print("\nRejected readings by reason:")
    for reason, n in sorted(Counter(r.reason.value for r in result.rejected).items()):
        print(f"  {reason}: {n}")
    print("\nFirst rejections:")
    for r in sorted(result.rejected, key=lambda r: r.event.time)[:5]:
        print(f"  {r.event.key} arrived {r.event.time}: {r.reason.value}: {r.detail}")
    print("\nThe first updates:")
    print(format_table(result.updates[:8]))


if __name__ == "__main__":
    main()
