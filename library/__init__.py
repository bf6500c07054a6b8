"""Ready-made machines."""

from library.upsert import Upsert

__all__ = ["Upsert"]
