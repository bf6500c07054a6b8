"""Records: a struct read into Python as a tuple whose fields also have names.

A struct (a Spark or Arrow struct column, a JSON object, a dict cell of a table)
reads as a :class:`Record`: the tuple of its fields in order, equal to and hashing
as the plain tuple or NamedTuple it was written from, whose fields are also
attributes. A machine or a pattern condition that reads ``symbol.kind`` from a
NamedTuple locally therefore reads it from the same event on Spark, and from the
values Spark's state gives back:

    ==============================  =====================================  ===============
    struct                          reads as                               equal to
    ==============================  =====================================  ===============
    ``{kind: 'fail', amount: 5}``   ``Record(kind='fail', amount=5)``      ``('fail', 5)``
    ``{_1: 'a', _2: 1}``            ``('a', 1)`` (a tuple's field names)   ``('a', 1)``
    ==============================  =====================================  ===============

A struct whose fields are named ``_1, _2, ...`` (as Arrow and Spark name a plain
tuple's) reads as a plain tuple, as it was written. A record pickles, and writes
back as a struct with its field names (:func:`statemachines.columns.to_arrow_python`).

>>> event = record(("kind", "amount"), ("fail", 5))
>>> event.kind, event[1], event == ("fail", 5), isinstance(event, Record)
('fail', 5, True, True)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

__all__ = ["Record", "record", "record_type"]


class Record(tuple):
    """The base class of every record type: a tuple with named fields (``_fields``)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    @classmethod
    def _make(cls, values: Iterable[Any]) -> Record:
        """A record of this type holding ``values`` (as a NamedTuple's ``_make``)."""
        return tuple.__new__(cls, values)

    def _asdict(self) -> dict[str, Any]:
        """The fields by name."""
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        return f"Record({', '.join(f'{name}={value!r}' for name, value in zip(self._fields, self, strict=True))})"

    def __reduce__(self) -> tuple[Any, ...]:
        return record, (self._fields, tuple(self))


def record(names: Sequence[str], values: Iterable[Any]) -> Any:
    """The struct with fields ``names`` holding ``values``, as Python reads it: a
    :class:`Record`, or a plain tuple when the names are a tuple's (``_1, _2, ...``)."""
    kind = record_type(tuple(names))
    return tuple(values) if kind is tuple else kind._make(values)


_OWN = {"_fields", "_make", "_asdict", *(name for name in dir(Record) if name.startswith("__"))}


@functools.cache
def record_type(names: tuple[str, ...]) -> Any:
    """The type of a struct with fields ``names``: one :class:`Record` subclass per
    names, or ``tuple`` for a plain tuple's names (``_1, _2, ...``), no names, or
    names that repeat (which no attribute could tell apart)."""
    if names == tuple(f"_{i}" for i in range(1, len(names) + 1)) or len(set(names)) < len(names):
        return tuple
    namespace: dict[str, Any] = {"__slots__": (), "_fields": names}
    for i, name in enumerate(names):
        if name not in _OWN:  # one named like them is read by position only
            namespace[name] = property(itemgetter(i), doc=f"field {i}")
    return type("Record", (Record,), namespace)
