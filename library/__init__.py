"""Ready-made machines."""

from library.lateness import UpsertWithLateness
from library.upsert import Upsert

__all__ = ["Upsert", "UpsertWithLateness"]
