"""Ready-made machines: upserts, upserts with lateness, pattern detectors, change feeds."""

from statemachines.library.cep import Detector, Found, matches, timeouts
from statemachines.library.expressions import Expression
from statemachines.library.feeds import ChangeFeed, FeedResult, run_feed
from statemachines.library.lateness import Late, UpsertWithLateness
from statemachines.library.pattern import Contiguity, Pattern, Skip, WithinType
from statemachines.library.rules import RuleBook, RuleDetector, ended
from statemachines.library.upsert import Upsert

__all__ = [
    "ChangeFeed",
    "Contiguity",
    "Detector",
    "Expression",
    "FeedResult",
    "Found",
    "Late",
    "Pattern",
    "RuleBook",
    "RuleDetector",
    "Skip",
    "Upsert",
    "UpsertWithLateness",
    "WithinType",
    "ended",
    "matches",
    "run_feed",
    "timeouts",
]
