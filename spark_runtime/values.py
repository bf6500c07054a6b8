"""Which Python values fit an output column: the Spark runtime's value check.

A machine may produce a value its output column cannot hold (a string where the
column is a number, a struct with too many fields, an integer beyond 64 bits). The
runtime asks :func:`value_check_for` before accepting such a value, so the event
that produced it is rejected (``unserialisable_value``) and the run continues,
instead of the whole job failing when the output batch is built.

    column type              fits                      does not fit
    bigint                   3                         "3", True, 2**70
    struct<at:bigint,v:str>  (1, "x"), {"at": 1}       (1, "x", "extra")
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Callable
from typing import Any

__all__ = ["value_check_for"]

Fits = Callable[[Any], bool]


def value_check_for(arrow_type: Any) -> Callable[[Any], str | None]:
    """A check: ``None`` if a value fits ``arrow_type``, else why not."""
    fits = _fits(arrow_type)

    def check(value: Any) -> str | None:
        if fits(value):
            return None
        return f"the value {value!r} does not fit the output column type {arrow_type}"

    return check


def _fits(t: Any) -> Fits:
    import pyarrow as pa

    types = pa.types
    nullable = _nullable
    if types.is_string(t) or types.is_large_string(t):
        return nullable(lambda v: isinstance(v, str))
    if types.is_boolean(t):
        return nullable(lambda v: isinstance(v, bool))
    if types.is_integer(t):
        low, high = _int_range(t)
        return nullable(lambda v: type(v) is not bool and isinstance(v, int) and low <= v <= high)
    if types.is_floating(t):
        return nullable(lambda v: type(v) is not bool and isinstance(v, int | float))
    if types.is_timestamp(t):
        return nullable(lambda v: isinstance(v, _dt.datetime))
    if types.is_date(t):
        return nullable(lambda v: isinstance(v, _dt.date))
    if types.is_binary(t) or types.is_large_binary(t):
        return nullable(lambda v: isinstance(v, bytes | bytearray))
    if types.is_decimal(t):
        return nullable(lambda v: type(v) is not bool and isinstance(v, decimal.Decimal | int))
    if types.is_struct(t):
        return nullable(_struct_fits(t))
    if types.is_list(t) or types.is_large_list(t):
        item = _fits(t.value_type)
        return nullable(lambda v: isinstance(v, list | tuple) and all(item(x) for x in v))
    return nullable(_converts(t))  # anything rarer: ask Arrow itself


def _nullable(fits: Fits) -> Fits:
    return lambda v: v is None or fits(v)


def _int_range(t: Any) -> tuple[int, int]:
    import pyarrow as pa

    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _struct_fits(t: Any) -> Fits:
    names = [t.field(i).name for i in range(t.num_fields)]
    fields = [_fits(t.field(i).type) for i in range(t.num_fields)]

    def fits(v: Any) -> bool:
        if isinstance(v, dict):
            return set(v) <= set(names) and all(
                f(v.get(name)) for name, f in zip(names, fields, strict=True)
            )
        if isinstance(v, tuple | list):
            return len(v) == len(fields) and all(f(x) for f, x in zip(fields, v, strict=True))
        return False

    return fits


def _converts(t: Any) -> Fits:
    import pyarrow as pa

    def fits(v: Any) -> bool:
        try:
            pa.scalar(v, type=t)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return False
        return True

    return fits
