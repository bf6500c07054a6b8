"""Pausing the cyclic garbage collector around bulk work."""

from __future__ import annotations

import gc

from statemachines._gc import gc_paused


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_objects_made_while_paused_go_to_the_oldest_generation_unscanned():
    gc.collect()
    with gc_paused():
        assert not gc.isenabled()
        made = [Node() for _ in range(1000)]
    assert gc.isenabled()
    oldest = {id(x) for x in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in made)
    # nothing made while paused is left young for the next collection to scan (other
    # threads, such as Spark's, may have allocated a few objects since)
    assert gc.get_count()[0] < len(made)
    del made
    assert gc.collect() >= 1000  # cycles made while paused are still collected


def test_a_pause_leaves_objects_someone_froze_frozen_and_a_disabled_collector_disabled():
    gc.collect()
    kept = Node()
    gc.freeze()
    try:
        with gc_paused():
            [Node() for _ in range(10)]
        assert gc.get_freeze_count() > 0
        assert not any(x is kept for x in gc.get_objects())  # still frozen, in no generation
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
