"""Pausing Python's cyclic garbage collector around bulk building."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while a bulk operation allocates retained objects.

    Building a batch allocates millions of tuples, lists and dicts that all stay
    alive; collections triggered meanwhile only re-scan them and free nothing. The
    collector is restored to its previous state afterwards (nesting is safe).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _age_young_objects()
            gc.enable()


def _age_young_objects() -> None:
    """Move every young object to the oldest generation without scanning it.

    Objects allocated while the collector was paused all sit in the youngest
    generation; the first allocation after it resumes would scan every one of them
    (seconds for a few million), only to find them alive. ``freeze`` then ``unfreeze``
    moves them to the oldest generation instead, which a full collection scans when
    it next runs, as it would have. Skipped when someone keeps objects frozen (their
    ``unfreeze`` is theirs to call).
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
