"""The checks every runtime applies to an input event before it is buffered.

One :class:`Intake` per run turns raw input into :class:`~statemachines.events.Event`
or into :class:`~statemachines.events.Rejected` with a reason, so the local and the
Spark runtimes reject exactly the same events for exactly the same reasons.

Checks, in order: the shape ``(key, symbol, time[, order])``; a non-null key; a
non-null time of the run's clock kind (the first valid time fixes it), finite if a
float (NaN and infinities are ``bad_time``), within the 64-bit range if an integer
(as Parquet and Spark store it, leaving room for the time after it), not the
greatest datetime or date (no time comes after it); the time not
below the frontier already processed (late); an order that compares with the run's
other orders (the first order fixes its kind; NaN never compares: ``bad_order``);
the machine's ``validate_symbol``. A NaN in the key or symbol becomes ``math.nan``,
a ``-0.0`` becomes ``0.0`` and a zoned datetime its instant in UTC
(:func:`~statemachines.updates.canonical`: NaN is one value, and so is zero); a
zoned time is its instant in UTC too; a decimal NaN there is
refused (``bad_key``, ``invalid_symbol``): it orders with nothing and stores nowhere.
So is a date or time beyond the years 1 to 9999 read from Arrow (an
:class:`~statemachines.updates.Unreadable`) in a key, symbol, time or order: Python holds
no such value (``bad_key``, ``invalid_symbol``, ``bad_time``, ``bad_order``).
NumPy scalars (events zipped from arrays) are taken as the Python values they equal.
Typed columns can be checked in bulk (:meth:`Intake.sound_in_bulk`): a Spark task
checks each Arrow batch so, and asks only ``validate_symbol`` per event of a batch that passes.
An input already refused (a :class:`Rejected`, e.g. a change-feed row that cannot be
read) passes through as it is.

>>> from statemachines.library import Upsert
>>> intake = Intake(Upsert())
>>> intake.check(("k", "a", 1, 0)).order, intake.check(("k", "b", 1, "x")).reason.value
(0, 'bad_order')
>>> intake.check(("k", "c", 2**63, 0)).detail
'time 9223372036854775808 is outside the 64-bit integer range [-2**63, 2**63 - 1)'
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from math import isfinite, isnan
from typing import TYPE_CHECKING, Any

from statemachines.events import Event, Reason, Rejected
from statemachines.updates import (
    Unreadable,
    canonical,
    holds_decimal_nan,
    holds_unreadable,
    python_scalar,
)

if TYPE_CHECKING:
    from statemachines.machine import Machine
from statemachines.times import time_kind

__all__ = [
    "INT64_MAX", "INT64_MIN", "INT64_RANGE", "Intake", "beyond_python_detail", "greatest_detail", "is_greatest", "order_kind",
    "plain_key_type",
]

_NEW = tuple.__new__
_SHAPE = "an event is a (key, symbol, time) or (key, symbol, time, order) tuple"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1  # reserved: the least time after the greatest valid time
INT64_RANGE = "[-2**63, 2**63 - 1)"
_NO_NAN = frozenset({str, int, bytes})  # types that never hold a NaN
_LOOKED_INTO = frozenset({Decimal, Unreadable})  # refused where they stand as the key or symbol itself


def beyond_python_detail(where: str) -> str:
    """Why an event whose ``where`` (key, symbol, time or order) is or holds a date or
    time beyond Python's years is refused (the Spark runtime says it alike)."""
    verb = "is" if where == "time" else "holds"
    return f"the {where} {verb} a date or time beyond the years 1 to 9999, which Python's dates and times cannot hold"


def order_kind(order: Any) -> str | None:
    """What an order compares with: orders of one kind are totally ordered.

    ``None`` for an order that compares with nothing reliably (NaN, a bool, an
    object without an order).

    >>> order_kind(3), order_kind(2.5), order_kind("0/16B3748"), order_kind((1, "a"))
    ('number', 'number', 'text', 'tuple(number,text)')
    >>> order_kind(float("nan")) is None, order_kind([1]) is None
    (True, True)
    """
    if isinstance(order, float) and isnan(order):
        return None
    kind = time_kind(order)
    if kind is not None:
        return kind
    if isinstance(order, str):
        return "text"
    if isinstance(order, bytes):
        return "bytes"
    if isinstance(order, tuple):
        kinds = [order_kind(item) for item in order]
        if None in kinds:
            return None
        return f"tuple({','.join(kinds)})"  # type: ignore[arg-type]
    return None


def _is_pandas_missing(item: Any) -> bool:
    """Whether ``item`` is pandas' missing value, ``pd.NA`` or ``pd.NaT`` (rows of a
    DataFrame with nullable columns hold them), without importing pandas. The intake
    takes either as ``None``, as Spark reads such a cell: a null.

    =============================  ============================
    in the event                   taken as
    =============================  ============================
    key ``pd.NA`` / ``pd.NaT``     ``None``: rejected, null_key
    time ``pd.NA`` / ``pd.NaT``    ``None``: rejected, null_time
    order ``pd.NA``                ``None``: a missing order
    symbol ``pd.NA``               ``None``
    =============================  ============================
    """
    kind = type(item)
    return kind.__name__ in ("NAType", "NaTType") and kind.__module__.startswith("pandas")


def _decimal_nan(event: Event) -> Rejected:
    """Why an event whose key or symbol holds a decimal NaN is refused."""
    where = "key" if holds_decimal_nan(event[0]) else "symbol"
    reason = Reason.BAD_KEY if where == "key" else Reason.INVALID_SYMBOL
    return Rejected(
        event, reason,
        f"the {where} holds a decimal NaN, which no runtime can order or store (decimals have no NaN "
        f"in Parquet or Spark); give float('nan') for a missing number",
    )


def _too_deep(event: Event) -> Rejected:
    """Why an event whose key or symbol nests tuples too deeply to read is refused."""
    try:
        canonical(event[0])
    except RecursionError:
        where, reason = "key", Reason.BAD_KEY
    else:
        where, reason = "symbol", Reason.INVALID_SYMBOL
    return Rejected(event, reason, f"the {where} nests tuples within tuples too deeply to read")


def is_greatest(time: _dt.date) -> bool:
    """Whether ``time`` is the greatest datetime (its wall-clock time, whatever its
    zone) or date: no time comes after it, and a run's upper must come after every
    event's time (so it is refused, as the greatest long is)."""
    if isinstance(time, _dt.datetime):
        return time.replace(tzinfo=None) == _dt.datetime.max
    return time == _dt.date.max


def greatest_detail(time: _dt.date) -> str:
    """Why the greatest datetime or date is refused (``bad_time``)."""
    kind = "datetime" if isinstance(time, _dt.datetime) else "date"
    return f"time {time.isoformat()} is the greatest {kind}: no time comes after it for the run's upper"


class Intake:
    """Checks raw events for one run of one machine."""

    def __init__(
        self, machine: Machine, *, kind: str | None = None, value_check: Any = None
    ) -> None:
        self.kind = kind
        self.value_check = value_check  # the output's test of new values (see core.ValueCheck)
        self._time_type: type | None = None
        self._zoned: bool | None = None  # datetimes: whether the run's have a zone (one type, two kinds)
        self.order_kind: str | None = None  # fixed by the first order seen
        self._order_type: type | None = None
        self.use(machine)

    def use(self, machine: Machine) -> None:
        """Check symbols with ``machine`` from now on (see :meth:`LocalRuntime.reconfigure`)."""
        self._validate = machine.validate_symbol if machine.spec.validates_symbols else None

    def check(self, raw: Any, frontier: Any = None) -> Event | Rejected:
        """The event ``raw`` stands for, or why it cannot be applied.

        Args:
            raw: an :class:`Event`, a 3- or 4-tuple (or list), or a :class:`Rejected`.
            frontier: times below it were already processed (``None``: none were).
        """
        kind = type(raw)
        if kind is Event:
            event = raw
        elif kind is tuple and len(raw) == 4:
            event = _NEW(Event, raw)
        elif kind is Rejected:
            return raw
        elif isinstance(raw, tuple | list) and len(raw) in (3, 4):
            event = _NEW(Event, (*raw, None) if len(raw) == 3 else tuple(raw))
        else:
            return Rejected(raw, Reason.MALFORMED, _SHAPE)
        key = event[0]
        if key is None:
            return Rejected(event, Reason.NULL_KEY, "the key is None")
        plain_key = type(key) in _NO_NAN
        if not plain_key and _is_pandas_missing(key):
            return Rejected(event, Reason.NULL_KEY, f"the key is pandas' {key!r} (a missing key)")
        time = event[2]
        zoned = self._zoned  # a naive and a zoned datetime are of one type, and do not compare
        if type(time) is not self._time_type or (
            zoned is not None and (getattr(time, "tzinfo", None) is not None) is not zoned
        ):
            plain = python_scalar(time)  # from a NumPy array: as Python's
            if plain is not time:
                time = plain
                event = _NEW(Event, (event[0], event[1], time, event[3]))
            problem = self._time_problem(event)
            if problem is not None:
                return problem
        if self._zoned and time.tzinfo is not _dt.UTC:  # a zone's wall clock repeats and skips hours:
            time = canonical(time)  # windows and deadlines count elapsed time in UTC
            event = _NEW(Event, (event[0], event[1], time, event[3]))
        if type(time) is int:
            if not INT64_MIN <= time < INT64_MAX:
                return Rejected(
                    event, Reason.BAD_TIME, f"time {time!r} is outside the 64-bit integer range {INT64_RANGE}"
                )
        elif type(time) is float:
            if not isfinite(time):  # NaN compares false with every time
                return Rejected(event, Reason.BAD_TIME, f"time {time!r} is not a finite number")
        elif isinstance(time, _dt.date) and time.year == _dt.MAXYEAR and is_greatest(time):
            return Rejected(event, Reason.BAD_TIME, greatest_detail(time))
        elif type(time) is not _dt.datetime and getattr(time, "nanosecond", None):  # pandas' Timestamp
            return Rejected(
                event, Reason.BAD_TIME, f"time {time!r} is finer than a microsecond: times are kept to the "
                f"microsecond, as Spark's timestamps and Delta tables hold them (round it, or use a number)"
            )
        if frontier is not None and time < frontier:
            return Rejected(
                event, Reason.LATE, f"time {time!r} is below the processed frontier {frontier!r}"
            )
        order = event[3]
        if order is not None and (type(order) is not self._order_type or isinstance(order, float | tuple)):  # a record too
            plain = python_scalar(order)  # from a NumPy array: as Python's
            if plain is not order:
                event = _NEW(Event, (event[0], event[1], event[2], plain))
            elif _is_pandas_missing(order):
                event = _NEW(Event, (event[0], event[1], event[2], None))
            problem = None if event[3] is None else self._order_problem(event)
            if problem is not None:
                return problem
        symbol = event[1]
        if type(symbol) not in _NO_NAN or not plain_key:  # NaN is one value, so is zero
            if _is_pandas_missing(symbol):
                symbol = None
            try:
                same_key, same_symbol = canonical(key), canonical(symbol)  # themselves unless NaN, -0.0 or zoned
            except RecursionError:
                return _too_deep(event)
            if same_key is not key or same_symbol is not event[1] or type(key) in _LOOKED_INTO or type(symbol) in _LOOKED_INTO:
                if holds_decimal_nan(key) or holds_decimal_nan(symbol):
                    return _decimal_nan(event)
                if holds_unreadable(key):
                    return Rejected(event, Reason.BAD_KEY, beyond_python_detail("key"))
                if holds_unreadable(symbol):
                    return Rejected(event, Reason.INVALID_SYMBOL, beyond_python_detail("symbol"))
                event = _NEW(Event, (same_key, same_symbol, event[2], event[3]))
        return self._validated(event)

    def sound_in_bulk(self, keys: Any, symbols: Any, times: Any, orders: Any, frontier: Any = None) -> bool:
        """Whether every event of these Arrow columns passes :meth:`check` as it
        is, but for the machine's ``validate_symbol`` (see :meth:`check_symbol`):
        keys of text, integers or bytes and none null; symbols with no float or
        decimal anywhere in them (nothing that could hold a NaN); finite number
        times of this run's kind, none null, none the greatest long, none below
        ``frontier``; orders all null, or integers none null. A column of any other
        type, or holding any such value, answers false: check its events one by one.

        ==================  ==================  ===========================
        keys                times               sound_in_bulk
        ==================  ==================  ===========================
        ``["a", "b"]``      ``[1, 2]``          true
        ``["a", None]``     ``[1, 2]``          false (a null key)
        ``["a", "b"]``      ``[1, 2**63-1]``    false (the greatest long)
        ==================  ==================  ===========================
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if not len(keys):
            return True
        if keys.null_count or not plain_key_type(keys.type):
            return False
        if not _plain(symbols.type) or self.kind not in (None, "number") or times.null_count:
            return False
        if _plain_integer(times.type):
            low, high = pc.min_max(times).values()
            if high.as_py() >= INT64_MAX:
                return False
        elif pa.types.is_floating(times.type):
            if not pc.all(pc.is_finite(times)).as_py():
                return False
            low = pc.min(times)
        else:
            return False
        if frontier is not None and low.as_py() < frontier:
            return False
        if orders.null_count == len(orders):
            return True
        return not orders.null_count and _plain_integer(orders.type) and self.order_kind in (None, "number")

    def check_symbol(self, raw: tuple[Any, Any, Any, Any]) -> Event | Rejected:
        """The event ``raw`` stands for, of columns :meth:`sound_in_bulk` passed:
        only the machine's ``validate_symbol`` is left to ask."""
        return self._validated(_NEW(Event, raw))

    def _validated(self, event: Event) -> Event | Rejected:
        """``event``, or its rejection by the machine's ``validate_symbol``."""
        if self._validate is not None:
            try:
                self._validate(event[1])
            except (ValueError, TypeError) as exc:
                return Rejected(event, Reason.INVALID_SYMBOL, str(exc))
        return event

    def _order_problem(self, event: Event) -> Rejected | None:
        order = event.order
        kind = order_kind(order)
        if kind is None and holds_unreadable(order):
            return Rejected(event, Reason.BAD_ORDER, beyond_python_detail("order"))
        if kind is None:
            return Rejected(
                event, Reason.BAD_ORDER, f"order {order!r} of type {type(order).__name__} cannot be compared"
            )
        if self.order_kind is not None and kind != self.order_kind:
            return Rejected(
                event,
                Reason.BAD_ORDER,
                f"order {order!r} is a {kind} order; this run's orders are {self.order_kind}",
            )
        self.order_kind = kind
        self._order_type = type(order)
        return None

    def _time_problem(self, event: Event) -> Rejected | None:
        time = event.time
        if time is None:
            return Rejected(event, Reason.NULL_TIME, "the time is None")
        if _is_pandas_missing(time):
            return Rejected(event, Reason.NULL_TIME, f"the time is pandas' {time!r} (a missing time)")
        if type(time) is Unreadable:
            return Rejected(event, Reason.BAD_TIME, beyond_python_detail("time"))
        kind = time_kind(time)
        if kind is None or (self.kind is not None and kind != self.kind):
            expected = self.kind or "number, datetime or date"
            return Rejected(
                event,
                Reason.BAD_TIME,
                f"time {time!r} of type {type(time).__name__} is not a {expected} time",
            )
        self.kind = kind
        self._time_type = type(time)
        self._zoned = kind == "datetime_tz" if kind in ("datetime", "datetime_tz") else None
        return None


def plain_key_type(arrow_type: Any) -> bool:
    """Whether keys of ``arrow_type`` read as text, bytes or integers: values Arrow
    and Python compare alike (no NaN, no nesting)."""
    import pyarrow as pa

    return (
        pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type) or _plain_integer(arrow_type)
    )


def _plain_integer(arrow_type: Any) -> bool:
    """An Arrow integer type whose values all fit a 64-bit signed integer."""
    import pyarrow as pa

    return pa.types.is_integer(arrow_type) and not pa.types.is_uint64(arrow_type)


def _plain(arrow_type: Any) -> bool:
    """Whether values of ``arrow_type`` read as Python values that never hold a NaN
    (no float, no decimal at any depth), so a symbol of it is its own ``canonical``."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return all(_plain(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _plain(arrow_type.value_type)
    return (
        plain_key_type(arrow_type) or pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type)
        or pa.types.is_null(arrow_type)
    )
