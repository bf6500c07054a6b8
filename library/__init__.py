"""Ready-made machines: upserts, upserts with lateness, pattern detectors."""

from statemachines.library.cep import Detector, Found, matches, timeouts
from statemachines.library.lateness import Late, UpsertWithLateness
from statemachines.library.pattern import Contiguity, Pattern, Skip
from statemachines.library.upsert import Upsert

__all__ = [
    "Contiguity",
    "Detector",
    "Found",
    "Late",
    "Pattern",
    "Skip",
    "Upsert",
    "UpsertWithLateness",
    "matches",
    "timeouts",
]
