"""Ready-made machines: upserts, upserts with lateness, pattern detectors."""

from library.cep import Detector, Found, matches, timeouts
from library.lateness import UpsertWithLateness
from library.pattern import Contiguity, Pattern, Skip
from library.upsert import Upsert

__all__ = [
    "Contiguity",
    "Detector",
    "Found",
    "Pattern",
    "Skip",
    "Upsert",
    "UpsertWithLateness",
    "matches",
    "timeouts",
]
