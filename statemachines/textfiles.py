"""Text files compressed whole, as exports often are, named by their suffix.

    name                  opened with
    changes.jsonl.gz      gzip
    changes.jsonl.bz2     bz2
    changes.jsonl         open
"""

from __future__ import annotations

import bz2
import gzip
import os
from typing import Any

__all__ = ["COMPRESSED", "open_text"]

COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open}


def open_text(path: str | os.PathLike[str], mode: str = "r", errors: str = "strict") -> Any:
    """``path`` as UTF-8 text (``mode`` ``"r"`` or ``"w"``), compressed if its name
    ends ``.gz`` or ``.bz2``."""
    opener: Any = COMPRESSED.get(os.path.splitext(os.fspath(path))[1].lower(), open)
    return opener(path, mode + "t", encoding="utf-8", errors=errors)
