"""Small user-written machines used by the tests (module level, so they pickle)."""

from __future__ import annotations

from statemachines import Machine
from statemachines.library import Upsert


class Tags(Machine):
    """A set of tags per key: ("add", tag) / ("del", tag)."""

    def transition(self, key, values, symbol, time):
        op, tag = symbol
        return values | {tag} if op == "add" else values - {tag}


class TabulatedTags(Machine):
    """:class:`Tags` declared tabulated (its transition reads only values and symbol),
    which fails on the op "boom"."""

    tabulated = True

    def transition(self, key, values, symbol, time):
        op, tag = symbol
        if op == "boom":
            raise ValueError("cannot handle boom")
        return values | {tag} if op == "add" else values - {tag}


class Light(Machine):
    """A finite machine with an initial state: toggles between "off" and "on"."""

    def initial_values(self, key):
        return frozenset({"off"})

    def transition(self, key, values, symbol, time):
        (state,) = values
        return {"on" if state == "off" else "off"}


class Fragile(Machine):
    """Fails on the symbol "boom"; otherwise keeps the last symbol (a string)."""

    def validate_symbol(self, symbol):
        if not isinstance(symbol, str):
            raise TypeError(f"a symbol is a string, not {symbol!r}")
        if symbol.startswith("!"):
            raise ValueError(f"a symbol may not start with '!': {symbol!r}")

    def transition(self, key, values, symbol, time):
        if symbol == "boom":
            raise ValueError("cannot handle boom")
        return {symbol}


class Session(Machine):
    """A value that expires ``ttl`` after it was last set (a deadline per key).

    values: {(value, set_at)}; deadline: set_at + ttl; on the deadline: empty.
    """

    def __init__(self, ttl=3):
        self.ttl = ttl

    def transition(self, key, values, symbol, time):
        return {(symbol, time)}

    def deadline(self, key, values):
        ((_, set_at),) = values
        return set_at + self.ttl

    def on_deadline(self, key, values, time):
        return frozenset()


class RaisingDeadline(Session):
    """A :class:`Session` whose deadline fails for the key ``"bad"``."""

    def deadline(self, key, values):
        if key == "bad":
            raise ValueError("no clock")
        return super().deadline(key, values)


class Measure(Machine):
    """Keeps the last reading: ``int(symbol)`` for digits, else the symbol as it is."""

    def transition(self, key, values, symbol, time):
        return {int(symbol) if symbol.isdigit() else symbol}


class Unpicklable:
    """A hashable value that refuses to be pickled (so it cannot be stored)."""

    def __reduce__(self):
        raise TypeError("this object cannot be pickled")


class SubclassedUpsert(Upsert):
    """Upsert as a user's subclass: the Spark stream runs it through the runtime
    (its Arrow step takes ``Upsert`` itself only)."""


class Decoded(Machine):
    """Keeps the last reading decoded as a careless JSON reader would: ``"u+d800"``
    becomes a lone surrogate, which no UTF-8 column holds."""

    def transition(self, key, values, symbol, time):
        return {symbol.replace("u+d800", "\ud800")}
