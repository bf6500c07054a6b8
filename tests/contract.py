"""The behaviour every runtime must show, written once.

Each case names a machine, its input events (with the Spark schema of those events)
and the expected updates and rejected events. ``tests/test_contract.py`` runs every
case against every runtime.
"""

from __future__ import annotations

from operator import itemgetter

import attrs

from statemachines import Machine, Reason, Update, parse_table
from statemachines.library import Late, Upsert, UpsertWithLateness
from tests.machines import Fragile, Session, TabulatedTags, Tags


@attrs.frozen
class Case:
    name: str
    machine: Machine
    events: list[tuple]
    expected: list[Update]
    rejected: list[tuple] = []  # (key, time, reason)
    schema: str = "key string, symbol string, time long, order long"
    value_type: str | None = None
    # a first run that fills the arrangement before ``events`` arrive (late data)
    before: list[tuple] = []


SEED = ["mcsherry", "zappa", None, "oz", "oz", None]

# a tag set per key (Tags, and TabulatedTags with more rows)
TAG_SCHEMA = "key string, symbol struct<op: string, tag: string>, time long, order long"
TAG_EVENTS = [
    ("doc", ("add", "draft"), 0, None), ("doc", ("add", "x"), 0, None),
    ("doc", ("del", "draft"), 2, 0), ("doc", ("add", "draft"), 2, 1),
    ("doc", ("del", "x"), 3, None), ("memo", ("add", "x"), 3, None),
]
TAG_UPDATES = parse_table(
    """
    key  | value | time | diff
    doc  | draft | 0    | +1
    doc  | x     | 0    | +1
    doc  | x     | 3    | -1
    memo | x     | 3    | +1
    """
)

CASES = [
    Case(
        "upsert seed example",
        Upsert(),
        [("frank", value, time, None) for time, value in enumerate(SEED)],
        parse_table(
            """
            key   | value    | time | diff
            frank | mcsherry | 0    | +1
            frank | mcsherry | 1    | -1
            frank | zappa    | 1    | +1
            frank | zappa    | 2    | -1
            frank | oz       | 3    | +1
            frank | oz       | 5    | -1
            """
        ),
    ),
    Case(
        "same-time ties: highest order wins, missing orders first, then symbol order",
        Upsert(),
        [
            ("a", "x", 1, 2), ("a", "z", 1, 1), ("a", "y", 1, 2),
            ("b", "q", 1, None), ("b", "p", 1, None), ("b", "r", 1, 0),
            ("c", "m", 2, None), ("c", "n", 2, None), ("c", None, 2, None),
        ],
        parse_table(
            """
            key | value | time | diff
            a   | y     | 1    | +1
            b   | r     | 1    | +1
            c   | n     | 2    | +1
            """
        ),
    ),
    Case(
        "a user machine with several values per key",
        Tags(), TAG_EVENTS, TAG_UPDATES, schema=TAG_SCHEMA, value_type="string",
    ),
    Case(
        "a tabulated machine: keys with bad rows or failing transitions step one by one",
        TabulatedTags(),
        [
            *TAG_EVENTS, ("memo", ("boom", "x"), 4, 0),
            (None, ("add", "y"), 1, 0), ("note", ("add", "z"), None, 0), ("note", ("add", "q"), 5, 0),
        ],
        [*TAG_UPDATES, Update(("note", "q"), 5, 1)],
        rejected=[("memo", 4, Reason.TRANSITION_FAILED), (None, 1, Reason.NULL_KEY), ("note", None, Reason.NULL_TIME)],
        schema=TAG_SCHEMA,
        value_type="string",
    ),
    Case(
        "bad rows are rejected with a reason, the rest runs",
        Upsert(),
        [("k", "a", 1, None), (None, "b", 1, None), ("k", "c", None, None), ("j", "d", 2, None)],
        parse_table(
            """
            key | value | time | diff
            k   | a     | 1    | +1
            j   | d     | 2    | +1
            """
        ),
        rejected=[(None, 1, Reason.NULL_KEY), ("k", None, Reason.NULL_TIME)],
    ),
    Case(
        "a raising transition or a refused symbol rejects its event; the key keeps its value",
        Fragile(),
        [
            ("k", "a", 1, None), ("k", "boom", 2, None), ("j", "b", 2, None), ("k", "c", 3, None),
            ("j", "!refused", 3, None),
        ],
        parse_table(
            """
            key | value | time | diff
            k   | a     | 1    | +1
            j   | b     | 2    | +1
            k   | a     | 3    | -1
            k   | c     | 3    | +1
            """
        ),
        rejected=[("k", 2, Reason.TRANSITION_FAILED), ("j", 3, Reason.INVALID_SYMBOL)],
    ),
    Case(
        "a symbol the value column cannot hold is rejected; the rest runs",
        Upsert(),
        [("k", "x", 1, None), ("j", "y", 1, None), ("j", None, 2, None), ("k", None, 3, None)],
        [],
        rejected=[("k", 1, Reason.UNSERIALISABLE_VALUE), ("j", 1, Reason.UNSERIALISABLE_VALUE)],
        value_type="bigint",
    ),
    Case(
        "events below the arrangement's upper are late",
        Upsert(),
        [("k", "late", 3, None), ("k", "b", 5, None)],
        parse_table(
            """
            key | value | time | diff
            k   | a     | 5    | -1
            k   | b     | 5    | +1
            """
        ),
        rejected=[("k", 3, Reason.LATE)],
        before=[("k", "a", 4, None)],
    ),
    Case(
        "an order that compares with nothing (NaN) is rejected; the key's other events apply",
        Upsert(),
        [("a", "x", 1, 0.0), ("a", "y", 1, float("nan")), ("a", "z", 1, 1.0), ("b", "w", 2, float("nan"))],
        parse_table(
            """
            key | value | time | diff
            a   | z     | 1    | +1
            """
        ),
        rejected=[("a", 1, Reason.BAD_ORDER), ("b", 2, Reason.BAD_ORDER)],
        schema="key string, symbol string, time long, order double",
    ),
    Case(
        "deadlines fire before the events at their time",
        Session(ttl=3),
        [("k", "a", 0, None), ("k", "b", 3, None), ("j", "c", 1, None)],
        parse_table(
            """
            key | value  | time | diff
            k   | (a, 0) | 0    | +1
            j   | (c, 1) | 1    | +1
            k   | (a, 0) | 3    | -1
            k   | (b, 3) | 3    | +1
            j   | (c, 1) | 4    | -1
            k   | (b, 3) | 6    | -1
            """.replace("(a, 0)", "A").replace("(b, 3)", "B").replace("(c, 1)", "C")
        ),
        value_type="struct<value: string, set_at: long>",
    ),
]

# Table cells cannot hold tuples; the deadline case names them and maps them here.
_NAMED = {"A": ("a", 0), "B": ("b", 3), "C": ("c", 1)}
CASES[-1] = attrs.evolve(
    CASES[-1],
    expected=[Update((k, _NAMED[v]), t, d) for (k, v), t, d in CASES[-1].expected],
)

# Lateness 5 on the value's first field: one case with each rule (see library/lateness.py)
CASES.append(
    Case(
        "upsert with lateness rejects late values and overwrites of late values",
        UpsertWithLateness(5, value_time=itemgetter(0)),
        [
            ("a", (10, "x"), 1, None),
            ("a", (12, "y"), 2, 0), ("a", (3, "z"), 2, 1), ("d", (9, "old"), 2, None),
            ("b", (4, "w"), 3, None), ("a", None, 3, None), ("c", (20, "p"), 3, None),
            ("c", (2, "q"), 4, None), ("d", (30, "new"), 4, None),
        ],
        [
            Update(("a", (10, "x")), 1, 1),
            Update(("a", (10, "x")), 2, -1),
            Update(("a", (12, "y")), 2, 1),
            Update(("d", (9, "old")), 2, 1),
            Update(("a", (12, "y")), 3, -1),
            Update(("c", (20, "p")), 3, 1),
        ],
        rejected=[
            ("a", 2, Late.VALUE_BELOW_WATERLINE),
            ("b", 3, Late.VALUE_BELOW_WATERLINE),
            ("c", 4, Late.VALUE_BELOW_WATERLINE),
            ("d", 4, Late.OVERWRITES_BELOW_WATERLINE),
        ],
        schema="key string, symbol struct<at: long, reading: string>, time long, order long",
    )
)
