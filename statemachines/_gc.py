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
            gc.enable()
