"""Quick start: upsert commands and a user-written machine, on the local runtime.

Run: python examples/quickstart.py
"""

from __future__ import annotations

from statemachines import Machine, format_table, run_local
from statemachines.library import Upsert


class Tags(Machine):
    """A user machine: each key holds a set of tags."""

    def transition(self, key, values, symbol, time):
        op, tag = symbol
        return values | {tag} if op == "add" else values - {tag}


# (key, symbol, time, order): arrival order does not matter, time and order do
COMMANDS = [
    ("frank", "oz", 4, 0),
    ("frank", "mcsherry", 0, 0),
    ("frank", "zappa", 1, 0),
    ("frank", None, 2, 0),
    ("frank", "oz", 3, 0),
    ("frank", None, 5, 0),
    ("grace", "hopper", 1, 0),
    ("grace", "brewster", 1, 1),  # same time, higher order: this one wins
]
TAG_EVENTS = [
    ("doc1", ("add", "draft"), 0),
    ("doc1", ("add", "urgent"), 0),
    ("doc1", ("del", "draft"), 2),
    ("doc1", ("add", "final"), 2),
]


def main() -> None:
    print("Upsert commands -> differential updates")
    print(format_table(run_local(Upsert(), COMMANDS).updates))
    print("\nTags (several values per key) -> differential updates")
    print(format_table(run_local(Tags(), TAG_EVENTS).updates))


if __name__ == "__main__":
    main()
