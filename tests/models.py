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


def upsert_with_lateness(events, lateness, *, value_time=None, key_time=None):
    """The lateness rules applied literally, one time after another across all keys.

    Returns ``(updates, rejected)``: updates as ``((key, value), time, diff)``
    and rejected as ``(event, reason)`` pairs.
    """
    from collections import defaultdict

    by_time = defaultdict(list)
    for event in events:
        by_time[event.time].append(event)
    state, high_value, high_key = {}, None, None
    updates, rejected = [], []
    for time in sorted(by_time):
        value_line = None if high_value is None else high_value - lateness
        key_line = None if high_key is None else high_key - lateness
        before = {}
        for e in sorted(by_time[time], key=lambda e: event_rank(e.order, e.symbol)):
            before.setdefault(e.key, state.get(e.key))
            current = state.get(e.key)
            if key_line is not None and key_time(e.key) < key_line:
                rejected.append((e, "key_below_waterline"))
            elif value_line is not None and e.symbol is not None and value_time(e.symbol) < value_line:
                rejected.append((e, "value_below_waterline"))
            elif value_line is not None and current is not None and value_time(current) < value_line:
                rejected.append((e, "overwrites_below_waterline"))
            elif e.symbol is None:
                state.pop(e.key, None)
            else:
                state[e.key] = e.symbol
        for key, old in before.items():
            new = state.get(key)
            if old == new:
                continue
            if old is not None:
                updates.append(((key, old), time, -1))
            if new is not None:
                updates.append(((key, new), time, 1))
                if value_time is not None:
                    high_value = max(high_value, value_time(new)) if high_value is not None else value_time(new)
                if key_time is not None:
                    high_key = max(high_key, key_time(key)) if high_key is not None else key_time(key)
    return updates, rejected
