"""Naive models: the obviously-correct, slow replays the runtimes are checked against."""

from __future__ import annotations

from collections import defaultdict

from statemachines import event_rank


def replay(machine, events, *, until=None):
    """Each key's values after every time at which it had events, by plain replay.

    Follows the definition directly: per key, events sorted by (time, rank) are
    applied one by one (an empty set reads as the machine's initial values; an event
    whose transition raises is skipped). Deadlines are not modelled here.

    Returns ``{key: [(time, values after that time), ...]}``.
    """
    by_key = defaultdict(list)
    for event in events:
        if until is None or event.time < until:
            by_key[event.key].append(event)
    history = {}
    for key, key_events in by_key.items():
        key_events.sort(key=lambda e: (e.time, event_rank(e.order, e.symbol)))
        values, steps = frozenset(), []
        for event in key_events:
            seen = values or machine.initial_values(key)
            try:
                values = frozenset(machine.transition(key, seen, event.symbol, event.time))
            except Exception:  # noqa: BLE001 - the runtime rejects these
                continue
            if steps and steps[-1][0] == event.time:
                steps[-1] = (event.time, values)
            else:
                steps.append((event.time, values))
        history[key] = steps
    return history


def collection_from_replay(history, time):
    """The set of (key, value) pairs present at ``time`` according to a replay."""
    present = set()
    for key, steps in history.items():
        values = frozenset()
        for t, after in steps:
            if t <= time:
                values = after
        present.update((key, v) for v in values)
    return present
