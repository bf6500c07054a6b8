"""Differential updates: ``(data, time, diff)`` triples and what to do with them.

A stream of updates describes a collection that changes over time: the collection at
time ``t`` holds each ``data`` as many times as the diffs of its updates at times
``<= t`` add up to. A *consolidated* stream has at most one update per
``(data, time)``, no zero diffs, and is sorted by ``(time, data)``.

>>> from statemachines.tables import format_table
>>> ups = [Update(("frank", "oz"), 3, 1), Update(("frank", "oz"), 3, 1),
...        Update(("frank", "zappa"), 1, 1), Update(("frank", "zappa"), 1, -1)]
>>> print(format_table(consolidate(ups)))
key   | value | time | diff
frank | oz    | 3    | +2
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
import numbers
import operator
from collections.abc import Hashable, Iterable
from operator import itemgetter
from typing import Any, NamedTuple

from statemachines.records import record

__all__ = [
    "Unreadable",
    "Update",
    "canonical",
    "collection_at",
    "consolidate",
    "hashable",
    "holds_decimal_nan",
    "holds_unreadable",
    "is_consolidated",
    "is_diff",
    "python_scalar",
    "require_hashable",
    "sort_by_data",
    "sort_key_runs",
    "sort_updates",
    "sorted_any",
    "total_order_key",
]


class Update(NamedTuple):
    """One change to a collection: ``diff`` copies of ``data`` at ``time``.

    For a keyed collection ``data`` is a ``(key, value)`` pair. An update unpacks as
    ``data, time, diff = update``.
    """

    data: Any
    time: Any
    diff: int


def is_diff(value: Any) -> bool:
    """Whether ``value`` can be a diff: a signed integer (NumPy's too), not a bool.

    >>> is_diff(-2), is_diff(1.5), is_diff(True), is_diff(float("nan"))
    (True, False, False, False)
    """
    return type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool))


_TIME = itemgetter(1)
_DATA = itemgetter(0)


def hashable(item: Any) -> Any:
    """``item`` with lists and dicts made tuples, recursively (within tuples too), so it
    can be a key or value.

    A dict becomes the tuple of its values in order, with its keys as field names
    (a :class:`~statemachines.records.Record`), as a struct reads from Arrow, Spark
    or JSON; a list (or a NumPy array, as pandas holds a list cell) becomes a tuple
    (JSON has no tuples).

    >>> hashable({"name": "Ada", "tags": ["x", "y"]}), hashable([1, [2, 3]]), hashable("s")
    (Record(name='Ada', tags=('x', 'y')), (1, (2, 3)), 's')
    """
    kind = type(item)
    if kind is str or kind is int or kind is float or item is None:  # most cells: no test below
        return item
    if isinstance(item, dict):
        values = (hashable(v) for v in item.values())
        return record(tuple(item), values) if all(type(k) is str for k in item) else tuple(values)
    if isinstance(item, list) or kind is tuple:  # a tuple as Arrow gives a map's (key, value) pair
        return tuple(hashable(v) for v in item)
    if kind.__name__ == "ndarray" and kind.__module__ == "numpy":
        return hashable(item.tolist())
    return item


class Unreadable:
    """An Arrow value no Python value equals: a date or time outside the years 1 to
    9999, which Python's ``date`` and ``datetime`` hold and Arrow, Spark and Parquet
    go beyond (a time in milliseconds read as seconds lands in the year 50,000).

    :func:`~statemachines.columns.column_to_python` reads such a cell as one of these,
    holding the Arrow scalar and its text; the intake refuses an event whose key,
    symbol, time or order holds one (``bad_key``, ``invalid_symbol``, ``bad_time``,
    ``bad_order``), and written back to Arrow (a rejected row) it is the value it was::

        Arrow cell (date32)     column_to_python
        2024-05-01              datetime.date(2024, 5, 1)
        10000-01-11             Unreadable('10000-01-11', date32[day])
    """

    __slots__ = ("scalar", "text")

    def __init__(self, scalar: Any, text: str) -> None:
        self.scalar = scalar  # a pyarrow Scalar (its as_py raises)
        self.text = text

    def _identity(self) -> tuple[str, str]:
        return self.text, str(self.scalar.type)

    def __eq__(self, other: object) -> bool:
        return type(other) is Unreadable and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"Unreadable({self.text!r}, {self.scalar.type})"


def holds_unreadable(item: Any) -> bool:
    """Whether ``item`` is or holds, at any depth of tuples, an :class:`Unreadable`."""
    if type(item) is Unreadable:
        return True
    return isinstance(item, tuple) and any(holds_unreadable(part) for part in item)


def require_hashable(symbol: Any) -> None:
    """Raise ``TypeError`` if ``symbol`` cannot be hashed, as a symbol kept in a value
    must be, saying how to write it (the runtimes read an array column as a tuple
    and a map column as the tuple of its ``(key, value)`` pairs)."""
    try:
        hash(symbol)
    except TypeError as error:
        raise TypeError(f"{error}: a symbol kept in a value must be hashable; give a list as a tuple and a "
                        f"dict as the tuple of its (key, value) pairs, as array and map columns read") from None


_NAN_RANK = (1, math.inf, 1)  # after every number, infinity included


def canonical(item: Any) -> Any:
    """``item`` with every NaN float in it, at any depth of tuples, made ``math.nan``,
    every ``-0.0`` made ``0.0``, every zoned datetime made the same instant in UTC and
    every NumPy scalar the Python value it equals.

    NaN is one value, equal to itself, and so is zero, as in Spark SQL (which groups
    and joins them so): a key or value holding NaN equals another holding NaN in the
    same place. Python compares containers by identity first, so values holding the
    one ``math.nan`` compare and hash alike; ``-0.0`` already equals ``0.0``, but
    Arrow groups them apart, so the one that is stored is ``0.0``. A zoned datetime
    is its instant, as Spark's timestamps and Delta's: Python compares two of one
    zone by their wall clocks, so the two 02:30 of a night that repeats that hour
    would be one value. Every runtime passes keys and symbols, the values machines
    compute, and every value it reads back, through here. ``item`` itself is
    returned when it holds no other NaN, no ``-0.0``, no datetime zoned other than
    ``datetime.UTC`` and no NumPy scalar.

    ==============================  ==========================================
    item                            canonical(item)
    ==============================  ==========================================
    ``float("nan")``                ``math.nan``
    ``(1, float("nan"))``           ``(1, math.nan)`` (a NamedTuple stays one)
    ``-0.0``, ``("a", -0.0)``       ``0.0``, ``("a", 0.0)``
    02:30 in Paris (summer time)    00:30 in UTC
    ``np.float32(1.5)``             ``1.5`` (NumPy's, as :func:`python_scalar`)
    ``"a"``, ``(1, 2.5)``           itself
    ==============================  ==========================================

    >>> canonical((1, float("nan"))) == (1, float("nan")), canonical((1, float("nan"))) == (1, math.nan)
    (False, True)
    """
    kind = type(item)
    if kind is float:
        return _canonical_float(item)
    if kind is str or kind is int or item is None:
        return item
    if kind.__module__ == "numpy":  # NumPy's scalars: the Python values they equal
        plain = python_scalar(item)
        return item if plain is item else canonical(plain)
    if isinstance(item, float):
        return _canonical_float(item)
    if isinstance(item, _dt.datetime):
        return _in_utc(item)
    if not isinstance(item, tuple) or not _holds_odd(item):
        return item
    items = [canonical(part) for part in item]
    return item._make(items) if hasattr(item, "_make") else tuple(items)


def python_scalar(item: Any) -> Any:
    """A NumPy scalar (``df["t"].to_numpy()`` hands them out) as the Python value it
    equals: ``np.int64(5)`` as ``5``, a ``datetime64`` of seconds as a ``datetime``, of
    days as a ``date``; a ``datetime64`` no Python value equals (of nanoseconds, of
    the year 0, or ``NaT``) as it is. Anything else as it is; NumPy is not imported.

    >>> import numpy as np
    >>> python_scalar(np.int64(5)), python_scalar(np.datetime64("2024-01-02T03:04:05"))
    (5, datetime.datetime(2024, 1, 2, 3, 4, 5))
    """
    if type(item).__module__ != "numpy" or getattr(item, "ndim", None) != 0:
        return item
    plain = item.item()
    if item.dtype.kind not in "mM":
        return plain
    if isinstance(plain, int):  # a datetime64 or timedelta64 finer than Python's microseconds
        coarse = item.astype(item.dtype.name.split("[")[0] + "[us]")
        plain = coarse.item() if coarse == item else None
    return item if plain is None or isinstance(plain, int) else plain  # NaT, finer, or beyond Python's years


def _in_utc(moment: _dt.datetime) -> _dt.datetime:
    """A zoned datetime as the same instant in ``datetime.UTC``; a naive one as it is."""
    zone = moment.tzinfo
    return moment if zone is None or zone is _dt.UTC else moment.astimezone(_dt.UTC)


def _canonical_float(item: Any) -> Any:
    if item != item:  # noqa: PLR0124 - NaN
        return math.nan
    return 0.0 if item == 0.0 and math.copysign(1.0, item) < 0 else item


def _odd_float(item: float) -> bool:
    """A NaN or ``-0.0``."""
    return item != item or (item == 0.0 and math.copysign(1.0, item) < 0)  # noqa: PLR0124 - NaN


def _holds_odd(items: tuple[Any, ...]) -> bool:
    """Whether a NaN float (or decimal), a ``-0.0``, a datetime zoned other than
    ``datetime.UTC`` or an :class:`Unreadable` is among ``items``, at any depth
    of tuples (a loop that makes nothing: 0.1 us for a pair, where rebuilding it would
    take 1 us)."""
    for item in items:
        kind = type(item)
        if kind is float:
            if _odd_float(item):
                return True
        elif kind is str or kind is int or item is None:
            continue
        elif isinstance(item, tuple):
            if _holds_odd(item):
                return True
        elif kind is decimal.Decimal:
            if item.is_nan():
                return True
        elif kind is Unreadable:  # for the intake to find
            return True
        elif isinstance(item, _dt.datetime):
            if _in_utc(item) is not item:
                return True
        elif kind.__module__ == "numpy" or isinstance(item, float) and _odd_float(item):  # NumPy's: made Python's
            return True
    return False


def holds_decimal_nan(item: Any) -> bool:
    """Whether ``item`` is or holds, at any depth of tuples, a decimal NaN: no runtime
    can order one (comparing it raises) or store one (Parquet's and Spark's decimals
    have no NaN).

    >>> holds_decimal_nan(("a", decimal.Decimal("NaN"))), holds_decimal_nan(decimal.Decimal("1.5"))
    (True, False)
    """
    if type(item) is decimal.Decimal:
        return item.is_nan()
    return isinstance(item, tuple) and any(holds_decimal_nan(part) for part in item)


def total_order_key(value: Any) -> tuple[Any, ...]:
    """A sort key that orders any mix of values deterministically.

    Values of one comparable type keep their natural order; NaN comes after every
    number (as Spark sorts it); different types are ordered by a fixed rank (``None``
    first, then numbers, strings, bytes, times, tuples, frozensets, then anything
    else by type name and ``repr``). Used as the
    fallback whenever the natural order of keys or values raises ``TypeError``.

    >>> sorted([3, None, "a", (1, None), float("nan"), 1.5], key=total_order_key)
    [None, 1.5, 3, nan, 'a', (1, None)]
    """
    kind = type(value)
    if kind is int or kind is float:
        return (1, value) if value == value else _NAN_RANK  # noqa: PLR0124 - NaN
    if kind is str:
        return (2, value)
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float | decimal.Decimal):
        return (1, value) if value == value else _NAN_RANK  # noqa: PLR0124 - NaN
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, bytes):
        return (3, value)
    if isinstance(value, _dt.datetime):
        # Naive and aware datetimes do not compare; rank them apart.
        return (4, value.tzinfo is not None, value)
    if isinstance(value, _dt.date):
        return (5, value)
    if isinstance(value, tuple):
        return (6, tuple(total_order_key(v) for v in value))
    if isinstance(value, frozenset):
        return (7, tuple(sorted(total_order_key(v) for v in value)))
    return (8, type(value).__qualname__, repr(value))


def sorted_any(items: Iterable[Any]) -> list[Any]:
    """``sorted(items)``, falling back to :func:`total_order_key` for mixed types."""
    items = list(items)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=total_order_key)


def sort_updates(updates: list[Update]) -> list[Update]:
    """Sort ``updates`` in place by ``(time, data)`` and return the list.

    Uses the natural order of times and data when it exists, and
    :func:`total_order_key` of the data when it does not (mixed key types, ``None``
    inside values), so the order is deterministic either way.
    """
    try:  # by time alone first: a sort on plain times is several times faster
        updates.sort(key=_TIME)
        _order_equal_times(updates)
    except TypeError:
        updates.sort(key=lambda u: (u[1], total_order_key(u[0])))
    return updates


def sort_key_runs(runs: dict[Any, list[Update]]) -> list[Update]:
    """The updates of ``runs`` (key -> that key's updates) sorted by ``(time, data)``.

    Each run must already be in ``(time, value)`` order, as
    :func:`~statemachines.core.advance_key` emits a key's updates. The runs are joined
    in key order and sorted by time alone, which keeps that order among equal
    times: the same list as :func:`sort_updates` gives, without comparing the data of
    every two updates that share a time (O(n log keys) comparisons of times).
    """
    updates = [u for key in sorted_any(runs) for u in runs[key]]
    try:
        updates.sort(key=_TIME)
    except TypeError:
        return sort_updates(updates)
    return updates


def _order_equal_times(updates: list[Update]) -> None:
    """Order each run of updates at one time by data (the list is sorted by time)."""
    start, n = 0, len(updates)
    for i in range(1, n + 1):
        if i == n or updates[i][1] != updates[start][1]:
            if i - start > 1:
                run = updates[start:i]
                sort_by_data(run)
                updates[start:i] = run
            start = i


def sort_by_data(updates: list[Any]) -> None:
    """Sort ``updates`` (``(data, ...)`` tuples) in place by their data: in its natural
    order where that is a total order, else by :func:`total_order_key` (mixed types;
    a NaN, which is neither below nor above any number; sets, which order by inclusion),
    so that the same updates come in the same order whatever order they came in."""
    try:
        updates.sort(key=_DATA)
        data = list(map(_DATA, updates))
        if all(map(operator.le, data, itertools.islice(data, 1, None))):
            return
    except TypeError:
        pass
    updates.sort(key=lambda u: total_order_key(u[0]))


def consolidate(updates: Iterable[tuple[Any, Any, int]]) -> list[Update]:
    """Sum the diffs of each ``(data, time)``, drop zeros, sort by ``(time, data)``.

    Complexity: O(n log n) for n updates; memory O(distinct (data, time) pairs).

    Args:
        updates: any iterable of ``(data, time, diff)`` triples; ``data`` must be
            hashable.

    Returns:
        The consolidated updates, as :class:`Update` tuples.
    """
    sums: dict[tuple[Hashable, Any], int] = {}
    for data, time, diff in updates:
        slot = (data, time)
        sums[slot] = sums.get(slot, 0) + diff
    return sort_updates([Update(d, t, n) for (d, t), n in sums.items() if n != 0])


def is_consolidated(updates: list[Update]) -> bool:
    """True when ``updates`` is exactly what :func:`consolidate` would return."""
    return updates == consolidate(updates)


def collection_at(updates: Iterable[tuple[Any, Any, int]], time: Any) -> dict[Any, int]:
    """The collection described by ``updates`` as of ``time``.

    Returns a dict from data to its multiplicity: the sum of the diffs of its updates
    at times ``<= time``; data whose multiplicity is zero are left out.

    >>> collection_at([("a", 0, 1), ("a", 2, -1), ("b", 1, 1)], 1)
    {'a': 1, 'b': 1}
    >>> collection_at([("a", 0, 1), ("a", 2, -1), ("b", 1, 1)], 2)
    {'b': 1}
    """
    counts: dict[Any, int] = {}
    for data, t, diff in updates:
        if t <= time:
            counts[data] = counts.get(data, 0) + diff
    return {data: n for data, n in counts.items() if n != 0}
