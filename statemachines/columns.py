"""Keys and values as typed Arrow columns, and back: no pickles.

A persisted arrangement and the Spark runtime store keys and values in typed
columns that any engine reads. Python values map to Arrow as follows, and read back
as the value on the right (keys and values must be hashable, so structs and lists
read back as tuples, a struct's with its field names: :mod:`statemachines.records`):

    Python value                 Arrow type                       reads back as
    3, 2.5, "a", b"x", True      int64, double, string, binary, bool   the same
    float("nan")                 double                           math.nan (NaN is one value)
    -0.0                         double                           0.0 (zero is one value)
    datetime, date               timestamp[us], date32                  the same
    (1, "x")                     struct<_1: int64, _2: string>          (1, "x")
    Point(x=1, y=2) (NamedTuple) struct<x: int64, y: int64>             Record(x=1, y=2), equal
    frozenset, dataclass, object no type                                refused

A value whose round trip is not equal to itself (a frozenset, a dataclass, a custom
object) cannot be stored; :func:`storage_problem` says why, so runtimes reject the
event that produced it (``unserialisable_value``) instead of storing something else.

A column of a fixed type (an arrangement's, or Spark's output column) also refuses
values that do not fit it (:func:`value_check_for`):

    column type              fits                      does not fit
    bigint                   3                         "3", True, 2**70
    struct<at:bigint,v:str>  (1, "x"), {"at": 1}       (1, "x", "extra")
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import math
import reprlib
import struct
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from statemachines.errors import InvalidArgument
from statemachines.intake import INT64_MAX, INT64_MIN
from statemachines.records import record_type
from statemachines.updates import Unreadable, canonical, hashable, holds_unreadable, python_scalar

__all__ = [
    "BEYOND_STORED",
    "MAX_TYPE_NESTING",
    "PYTHON_DAYS",
    "arrow_array",
    "beyond_python",
    "column_to_python",
    "columns_of",
    "fixed_type",
    "nesting_problem",
    "python_rows",
    "same_items",
    "shape_of",
    "storage_problem",
    "to_arrow_python",
    "type_fixed_by",
    "typed_array",
    "type_nesting",
    "unified_shape",
    "value_check_for",
]

Fits = Callable[[Any], bool]


def value_check_for(arrow_type: Any) -> Callable[[Any], str | None]:
    """A check: ``None`` if a value fits ``arrow_type``, else why not."""
    fits = _fits(arrow_type)
    exact = _exact_type(arrow_type)  # values of this Python type always fit

    def check(value: Any) -> str | None:
        if type(value) is exact or fits(value):
            return None
        return f"the value {value!r} does not fit the output column type {arrow_type}"

    return check


def _exact_type(t: Any) -> type | None:
    import pyarrow as pa

    types = pa.types
    if types.is_float64(t):  # (not strings: a lone surrogate does not fit a UTF-8 column; nor 0.1 a float32 one)
        return float
    if types.is_boolean(t):
        return bool
    return None


@functools.lru_cache(maxsize=64)  # a column's check is asked for each value it takes
def _fits(t: Any) -> Fits:
    import pyarrow as pa

    types = pa.types
    nullable = _nullable
    if types.is_string(t) or types.is_large_string(t):
        return nullable(lambda v: isinstance(v, str) and (v.isascii() or _utf8(v)))
    if types.is_boolean(t):
        return nullable(lambda v: isinstance(v, bool))
    if types.is_integer(t):
        low, high = _int_range(t)
        return nullable(lambda v: type(v) is not bool and isinstance(v, int) and low <= v <= high)
    if types.is_floating(t):
        return nullable(functools.partial(_fits_floating, t.bit_width))
    if types.is_timestamp(t):  # a zone, or none, as the column: Arrow would shift or drop it
        zoned = t.tz is not None
        return nullable(lambda v: isinstance(v, _dt.datetime) and (v.tzinfo is not None) == zoned)
    if types.is_date(t):  # not a datetime, whose time of day the column would drop
        return nullable(lambda v: isinstance(v, _dt.date) and not isinstance(v, _dt.datetime))
    if types.is_binary(t) or types.is_large_binary(t):
        return nullable(lambda v: isinstance(v, bytes | bytearray))
    if types.is_decimal(t):
        return nullable(functools.partial(_fits_decimal, t.precision, t.scale))
    if types.is_struct(t):
        return nullable(_struct_fits(t))
    if types.is_list(t) or types.is_large_list(t):
        item = _fits(t.value_type)
        if types.is_struct(t.value_type):  # values share items: a partial match extends another's events
            item = _remembered(item)
        return nullable(lambda v: isinstance(v, list | tuple) and all(item(x) for x in v))
    return nullable(_converts(t))  # anything rarer: ask Arrow itself


def _fits_floating(bits: int, value: Any) -> bool:
    """Whether ``value`` is a number a floating column of ``bits`` holds exactly (a
    whole number beyond 2**53 would read back as another in 64 bits, and Arrow
    refuses it; 0.1 reads back as another in 32)."""
    if type(value) is bool or not isinstance(value, int | float):
        return False
    if isinstance(value, int) and not -(2**53) <= value <= 2**53:
        return False
    number = float(value)
    if number != number:  # NaN
        return True
    if bits == 64 or math.isinf(number):
        return True
    narrow = "<e" if bits == 16 else "<f"
    try:
        return struct.unpack(narrow, struct.pack(narrow, number))[0] == number
    except OverflowError:  # beyond the narrow float's range
        return False


def _fits_decimal(precision: int, scale: int, value: Any) -> bool:
    """Whether ``value`` is a number a ``decimal(precision, scale)`` column holds
    exactly: no more digits after the point than ``scale`` (but zeros), nor before
    it than ``precision - scale`` (``10`` does not fit ``decimal(38, 37)``)."""
    if type(value) is bool or not isinstance(value, decimal.Decimal | int):
        return False
    if isinstance(value, int):
        return abs(value) < 10 ** (precision - scale)
    if not value.is_finite():
        return False
    if value.is_zero():
        return True
    _, denominator = value.as_integer_ratio()  # 2**a * 5**b: it has no more than max(a, b) places
    return value.adjusted() < precision - scale and 10**scale % denominator == 0


_fits_by_identity: dict[int, tuple[Any, Fits]] = {}  # id -> (type, check): no hashing of the type


def _fits_of(t: Any) -> Fits:
    """:func:`_fits` of ``t``, found by the type's identity (hashing an Arrow type of
    nested structs costs more than checking a value against it): a caller checking
    many values hands the same type object each time."""
    found = _fits_by_identity.get(id(t))
    if found is not None and found[0] is t:
        return found[1]
    if len(_fits_by_identity) >= 64:
        _fits_by_identity.clear()
    fits = _fits(t)
    _fits_by_identity[id(t)] = (t, fits)  # the type held here: its identity is not reused
    return fits


def _utf8(text: str) -> bool:
    """Whether ``text`` is valid Unicode, as Arrow's UTF-8 strings hold it (a lone
    surrogate, e.g. from ``json.loads('"\\ud800"')``, is not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _nullable(fits: Fits) -> Fits:
    def check(v: Any) -> bool:
        if v is None or fits(v):
            return True
        plain = python_scalar(v)  # numpy's scalars: as the Python values they equal
        return plain is not v and fits(plain)

    return check


REMEMBERED = 65_536
"""How many tuples a check remembers having passed (by identity), before it starts over."""


def _remembered(fits: Fits) -> Fits:
    """``fits``, remembering the hashable tuples it passed by identity: one that comes
    again (the same object, held here so its identity is not reused) passes at once."""
    passed: dict[int, Any] = {}

    def check(v: Any) -> bool:
        if passed.get(id(v)) is v:
            return True
        if not fits(v):
            return False
        if type(v) is tuple and _hashable(v):  # immutable all through: it fits for good
            if len(passed) >= REMEMBERED:
                passed.clear()
            passed[id(v)] = v
        return True

    return check


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _int_range(t: Any) -> tuple[int, int]:
    import pyarrow as pa

    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _struct_fits(t: Any) -> Fits:
    names = [t.field(i).name for i in range(t.num_fields)]
    fields = [_fits(t.field(i).type) for i in range(t.num_fields)]
    exact = [_exact_type(t.field(i).type) for i in range(t.num_fields)]
    width = len(fields)

    def fits(v: Any) -> bool:
        if type(v) is tuple and len(v) == width:  # the common case: one look at a plain field
            for x, k, f in zip(v, exact, fields, strict=True):
                if x is not None and type(x) is not k and not f(x):
                    return False
            return True
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


def to_arrow_python(item: Any, arrow_type: Any = None) -> Any:
    """``item`` as Arrow converts it: tuples become structs (lists, for a list type), recursively.

    A struct's fields are named by ``arrow_type`` where given (a column that
    exists, say one Spark wrote), else by a NamedTuple's fields, else ``_1, _2, ...``.

    >>> to_arrow_python(("a", (1, 2)))
    {'_1': 'a', '_2': {'_1': 1, '_2': 2}}
    """
    import pyarrow as pa

    if item is not None and arrow_type is not None and pa.types.is_map(arrow_type):  # (key, value) pairs
        return [(to_arrow_python(k, arrow_type.key_type), to_arrow_python(v, arrow_type.item_type)) for k, v in item]
    listed = arrow_type is not None and (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type))
    if isinstance(item, tuple) and not listed:  # a list column's items read back as tuples
        if arrow_type is not None and pa.types.is_struct(arrow_type):
            if len(item) != arrow_type.num_fields:
                raise TypeError(f"{len(item)} fields for a struct of {arrow_type.num_fields}")
            fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
            return {f.name: to_arrow_python(x, f.type) for f, x in zip(fields, item, strict=True)}
        names = getattr(item, "_fields", None) or [f"_{i}" for i in range(1, len(item) + 1)]
        return {name: to_arrow_python(x) for name, x in zip(names, item, strict=True)}
    if isinstance(item, list | tuple):
        inner = arrow_type.value_type if listed else None
        return [to_arrow_python(x, inner) for x in item]
    return python_scalar(item)


def _without_nulls(t: Any) -> Any:
    """``t`` with every null-typed leaf (a field only ever ``None``) made a string."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_without_nulls(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_without_nulls(t.value_type))
    return t


def _widened(t: Any) -> Any:
    """``t`` with every decimal leaf made Spark's default decimal, ``decimal(38, 18)``
    (more digits after the point if it has them): a column's first decimals, ``2``
    say, must not fix it to ``decimal(1, 0)`` and refuse a later ``1.5``. A
    timestamp of a zone other than UTC is one in UTC, Delta's one zone: the same
    instants (it reads back in UTC, equal)."""
    import pyarrow as pa

    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        return pa.timestamp(t.unit, "UTC")
    if pa.types.is_decimal(t):
        scale = max(t.scale, 18)
        return pa.decimal128(38, scale) if t.precision - t.scale <= 38 - scale else t
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_widened(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_widened(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(_widened(t.key_type), _widened(t.item_type))
    return t


def type_fixed_by(value: Any) -> Any:
    """The Arrow type ``value`` gives its column, or ``None`` while a field of it is
    ``None``; decimals are ``decimal(38, 18)``, as Spark types a Python decimal.

    >>> type_fixed_by(("x", 1)), type_fixed_by(("x", None))
    (StructType(struct<_1: string, _2: int64>), None)
    >>> type_fixed_by(decimal.Decimal("2"))
    Decimal128Type(decimal128(38, 18))
    """
    return fixed_type(shape_of(value))


def shape_of(value: Any) -> Any:
    """The Arrow type Arrow infers for ``value``, a ``None`` field's type null."""
    import pyarrow as pa

    return pa.array([to_arrow_python(value)]).type


def fixed_type(shape: Any) -> Any:
    """The column type a shape (:func:`shape_of`) fixes, widened as
    :func:`type_fixed_by` says, or ``None`` while it has a null field."""
    return _widened(shape) if _without_nulls(shape) == shape else None


def unified_shape(first: Any, second: Any) -> Any:
    """The shape of a column holding values of both shapes (a null field takes the
    other's type), or ``None`` if no column holds both.

    >>> import pyarrow as pa
    >>> unified_shape(pa.struct([("a", pa.null())]), pa.struct([("a", pa.int64())]))
    StructType(struct<a: int64>)
    >>> unified_shape(pa.struct([("a", pa.null())]), pa.int64()) is None
    True
    """
    import pyarrow as pa

    if first is None or pa.types.is_null(first) or first == second:
        return second
    if pa.types.is_null(second):
        return first
    if pa.types.is_struct(first) and pa.types.is_struct(second) and first.names == second.names:
        fields = [unified_shape(first.field(i).type, second.field(i).type) for i in range(first.num_fields)]
        return None if None in fields else pa.struct(list(zip(first.names, fields, strict=True)))
    if pa.types.is_list(first) and pa.types.is_list(second):
        item = unified_shape(first.value_type, second.value_type)
        return None if item is None else pa.list_(item)
    if pa.types.is_map(first) and pa.types.is_map(second):
        key, item = unified_shape(first.key_type, second.key_type), unified_shape(first.item_type, second.item_type)
        return None if key is None or item is None else pa.map_(key, item)
    return None


def arrow_array(items: list[Any], arrow_type: Any = None) -> Any:
    """``items`` as one Arrow array, of ``arrow_type`` if given, else inferred.

    An inferred type never holds the null type (Spark and Delta readers refuse it):
    a struct field that is ``None`` in every item is typed as a string.

    Raises:
        InvalidArgument: the items have no common Arrow type, or do not fit ``arrow_type``.
    """
    import pyarrow as pa

    if arrow_type is not None:  # Arrow reads tuples as structs (by position) and lists
        try:
            return typed_array(items, arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass  # dicts among tuples, say: converted one by one below, or refused saying why
    try:
        present = set(map(type, items))
        if any(kind.__module__ == "numpy" for kind in present):  # as the Python values they equal
            items = [python_scalar(x) for x in items]
            present = set(map(type, items))
        if arrow_type is None and tuple in present and present <= {tuple, type(None)}:
            struct = _struct_array(items)
            if struct is not None:
                return struct
        nested = any(issubclass(kind, tuple | list) for kind in present)
        converted = [to_arrow_python(x, arrow_type) for x in items] if nested else items
        if arrow_type is None:
            array = pa.array(converted)
            typed = _widened(_without_nulls(array.type))
            return array if typed == array.type else array.cast(typed)
        return pa.array(converted, type=arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        kinds = sorted({type(x).__name__ for x in items})
        wanted = f"the column type {arrow_type}" if arrow_type is not None else "one Arrow type"
        raise InvalidArgument(
            f"{len(items):,} items of type {', '.join(kinds)} do not fit {wanted}: {exc}"
        ) from exc


def typed_array(items: list[Any], arrow_type: Any) -> Any:
    """``pyarrow.array(items, type=arrow_type)``, each :class:`~statemachines.updates.Unreadable`
    in them the Arrow value it was read from; raises as ``pyarrow.array`` does."""
    import pyarrow as pa

    try:
        return pa.array(items, type=arrow_type)
    except (pa.ArrowException, TypeError):
        if not any(map(holds_unreadable, items)):
            raise
    return pa.array([_as_scalars(x) for x in items], type=arrow_type)


def _as_scalars(item: Any) -> Any:
    """``item`` with each :class:`~statemachines.updates.Unreadable` in it (at any depth
    of tuples) its Arrow scalar, which ``pyarrow.array`` takes as the value it is."""
    if type(item) is Unreadable:
        return item.scalar
    if isinstance(item, tuple) and holds_unreadable(item):
        return tuple(_as_scalars(part) for part in item)
    return item


def _struct_array(items: list[Any]) -> Any:
    """Plain tuples (or ``None``) of one length as a struct array built field by field
    (named and typed as :func:`to_arrow_python` would have Arrow infer them), or
    ``None`` where their lengths differ."""
    import pyarrow as pa

    width = len(next(x for x in items if x is not None))
    if any(x is not None and len(x) != width for x in items) or width == 0:
        return None
    missing = [x is None for x in items]
    rows = [((None,) * width) if x is None else x for x in items] if any(missing) else items
    arrays = [arrow_array(list(map(itemgetter(i), rows))) for i in range(width)]
    mask = pa.array(missing) if any(missing) else None
    return pa.StructArray.from_arrays(arrays, names=[f"_{i}" for i in range(1, width + 1)], mask=mask)


def column_to_python(column: Any) -> list[Any]:
    """An Arrow column as hashable Python values: structs become records (tuples
    whose fields have names, :mod:`statemachines.records`), lists tuples and maps
    tuples of their ``(key, value)`` pairs.

    Keys and values must be hashable; a struct column (a Spark struct) therefore
    reads as tuples of its fields, in field order, with their names.
    """
    import pyarrow as pa

    kind = column.type
    if pa.types.is_struct(kind):  # field by field: much faster than dicts made tuples
        fields = column.flatten()
        named = record_type(tuple(f.name for f in kind))  # a plain tuple's (or no) names: tuple
        if not fields:
            rows: list[Any] = [()] * len(column)
        else:  # a record made of each row as zip yields it: no list of tuples in between
            tuples = zip(*(column_to_python(f) for f in fields), strict=True)
            rows = list(tuples if named is tuple else map(named._make, tuples))
        if column.null_count:
            rows = [row if valid else None for row, valid in zip(rows, column.is_valid().to_pylist(), strict=True)]
        return rows
    try:
        items = column.to_pylist()
    except (OverflowError, ValueError):  # a date or time beyond Python's years
        items = _items_beyond_python(column)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):  # a map: its (key, value) pairs
        items = [hashable(x) if x else None if x is None else () for x in items]
        return [canonical(x) for x in items] if _holds_floats(kind) else items
    if pa.types.is_floating(kind) and len(column) > column.null_count and _holds_odd_floats(column):
        return [canonical(x) for x in items]  # NaN is one value, math.nan; -0.0 is 0.0
    return items


def _items_beyond_python(column: Any) -> list[Any]:
    """The items of a column some of which Python cannot hold (dates or times beyond
    the years 1 to 9999), each such one an :class:`~statemachines.updates.Unreadable`;
    lists and maps item by item within, as ``to_pylist`` gives them."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = column.offsets.to_pylist()
        start, end = offsets[0], offsets[-1]
        if pa.types.is_map(kind):
            keys, values = column.keys.slice(start, end - start), column.items.slice(start, end - start)
            inner = list(zip(column_to_python(keys), column_to_python(values), strict=True))
        else:
            inner = column_to_python(column.values.slice(start, end - start))
        return [inner[a - start : b - start] if valid else None
                for a, b, valid in zip(offsets[:-1], offsets[1:], column.is_valid().to_pylist(), strict=True)]
    outside = beyond_python(column)  # those only: any other error is raised as it is
    return [
        Unreadable(column[i], column.slice(i, 1).cast(pa.string())[0].as_py()) if outside[i] else column[i].as_py()
        for i in range(len(column))
    ]


PYTHON_DAYS = (-719_162, 2_932_896)
"""Python's first and last dates, 0001-01-01 and 9999-12-31, in days from 1970."""
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def beyond_python(column: Any) -> Any:
    """For each item of an Arrow column (a numpy array), whether it is or holds, in
    structs, lists and maps, a date or time beyond the years 1 to 9999, which
    :func:`column_to_python` reads as an :class:`~statemachines.updates.Unreadable`
    (the intake refuses its event); false for a null.

    >>> import pyarrow as pa
    >>> beyond_python(pa.array([0, 2_932_897, None], pa.date32())).tolist()
    [False, True, False]
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if pa.types.is_date(kind) or pa.types.is_timestamp(kind):
        per_day = 1 if pa.types.is_date32(kind) else _PER_DAY["ms" if pa.types.is_date64(kind) else kind.unit]
        count = column.cast(pa.int32() if pa.types.is_date32(kind) else pa.int64()).cast(pa.int64())
        first, last = PYTHON_DAYS[0] * per_day, (PYTHON_DAYS[1] + 1) * per_day - 1
        outside = pc.fill_null(pc.or_(pc.less(count, first), pc.greater(count, last)), False).to_numpy(zero_copy_only=False)
    elif pa.types.is_struct(kind):
        outside = np.zeros(len(column), bool)
        for field in column.flatten():
            outside |= beyond_python(field)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        offsets = column.offsets.to_numpy()
        start, size = offsets[0], offsets[-1] - offsets[0]
        parts = [column.keys, column.items] if pa.types.is_map(kind) else [column.values]
        found = np.zeros(size, bool)
        for part in parts:
            found |= beyond_python(part.slice(start, size))
        counts = np.r_[0, np.cumsum(found)]  # items found before each offset
        outside = counts[offsets[1:] - start] > counts[offsets[:-1] - start]
    else:
        return np.zeros(len(column), bool)
    return outside & column.is_valid().to_numpy(zero_copy_only=False)


def _holds_odd_floats(column: Any) -> bool:
    """Whether a float column holds a NaN or a ``-0.0`` (``1 / -0.0`` is ``-inf``)."""
    import pyarrow.compute as pc

    negative_zero = pc.and_(pc.equal(column, 0.0), pc.less(pc.divide(1.0, column), 0.0))
    return bool(pc.any(pc.or_(pc.is_nan(column), negative_zero)).as_py())


@functools.cache
def _holds_floats(arrow_type: Any) -> bool:
    """Whether values of ``arrow_type`` may hold a float (a NaN) anywhere."""
    import pyarrow as pa

    if pa.types.is_floating(arrow_type):
        return True
    return any(_holds_floats(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


@functools.cache
def _delta_lacks(arrow_type: Any) -> str | None:
    """What values of ``arrow_type`` hold that Delta Lake has no type for (``None``:
    nothing), saying how to store it instead."""
    import pyarrow as pa

    if pa.types.is_duration(arrow_type) or pa.types.is_interval(arrow_type) or pa.types.is_time(arrow_type):
        return "duration or time of day (a timedelta or a time); store it as a number (of seconds, say) or as text"
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns":
        return "time finer than microseconds (a numpy datetime64 of nanoseconds); store it as a number or as text"
    if pa.types.is_decimal(arrow_type) and arrow_type.precision > 38:
        return "decimal of more than 38 digits; store it as a float or as text"
    inner = (_delta_lacks(arrow_type.field(i).type) for i in range(arrow_type.num_fields))  # a map's: its entries
    return next(filter(None, inner), None)


@functools.cache
def _holds_empty_struct(arrow_type: Any) -> bool:
    """Whether values of ``arrow_type`` hold a struct without fields (an empty tuple)."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type) and arrow_type.num_fields == 0:
        return True
    return any(_holds_empty_struct(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def same_items(left: Any, right: Any) -> Any:
    """Arrow: whether each item of ``left`` is the same value as ``right``'s (an array
    or a scalar): equal, or both NaN (NaN is one value). Null where either is null,
    as ``pyarrow.compute.equal``.

    >>> import pyarrow as pa
    >>> same_items(pa.array([1.0, float("nan"), None]), float("nan")).to_pylist()
    [False, True, None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    same = pc.equal(left, right)
    if pa.types.is_floating(left.type):
        right = right if isinstance(right, pa.Array | pa.ChunkedArray) else pa.scalar(right, left.type)
        same = pc.or_kleene(same, pc.and_kleene(pc.is_nan(left), pc.is_nan(right)))
    return same


def columns_of(rows: list[Any], width: int) -> list[list[Any]]:
    """The ``width`` columns of ``rows`` (tuples) as lists, a comprehension per column:
    ``zip(*rows)`` over 500k rows took 6-9x as long."""
    return [[row[i] for row in rows] for i in range(width)]


def python_rows(batch: Any) -> Iterator[tuple[Any, ...]]:
    """The rows of an Arrow record batch or table as tuples of hashable Python values
    (each column read by :func:`column_to_python`)."""
    return zip(*(column_to_python(c) for c in batch.columns), strict=True)


def storage_problem(value: Any, arrow_type: Any = None) -> str | None:
    """``None`` if ``value`` can be stored in a typed column and read back equal, else why not.

    With ``arrow_type`` (the column's fixed type) the value must also fit it.

    >>> storage_problem(("x", 1)) is None, storage_problem(frozenset({1})) is not None
    (True, True)
    """
    if arrow_type is not None and not _fits_of(arrow_type)(value):
        return f"the value {value!r} cannot be stored: it does not fit the column type {arrow_type}"
    kinds, seen = (_PLAIN, _plain_seen) if arrow_type is None else (_FITTED, _fitted_seen)
    if _plain(value, kinds, seen):
        return None
    try:
        array = arrow_array([value], arrow_type)
    except InvalidArgument as exc:
        return f"the value {_shown(value)} cannot be stored as a typed column: {exc}"
    except RecursionError:
        return nesting_problem(value, None)
    if _holds_empty_struct(array.type):
        return f"the value {value!r} cannot be stored: Parquet holds no empty tuple (a struct without fields)"
    lacking = _delta_lacks(array.type)
    if lacking is not None:
        return f"the value {value!r} cannot be stored: a Delta table holds no {lacking}"
    try:
        back = column_to_python(array)[0]
    except (OverflowError, ValueError) as exc:  # a numpy date of the year 0, say
        return f"the value {value!r} would read back as no Python value ({exc}); store it as a number or as text"
    plain = python_scalar(value)  # (numpy's do not compare with every Python number: np.int8(0) == Decimal(0) raises)
    if (back,) != (canonical(plain),) or type(back) is bool and type(plain) is not bool:  # a NaN reads back as math.nan, -0.0 as 0.0
        return (
            f"the value {value!r} would read back as {back!r}; store a tuple, NamedTuple "
            f"or a plain value instead"
        )
    return None


MAX_TYPE_NESTING = 30
"""How deep a stored value's type may nest (:func:`type_nesting`: a struct, as a
tuple is stored, or a list a level, a map two): Delta's schema, read by delta-rs,
holds 41 levels of structs; Parquet's schema 49 of lists; Arrow's C interface 31
of maps. Deeper values are rejected, as a table holding one could be written but
not read again."""

BEYOND_STORED = f"more than the {MAX_TYPE_NESTING} a Delta table's schema and its Parquet files are sure to hold"
"""How a refusal of a type nested deeper than :data:`MAX_TYPE_NESTING` ends."""


@functools.cache
def type_nesting(arrow_type: Any) -> int:
    """How many levels of structs, lists and maps ``arrow_type`` nests (0: none)::

        int64                        0
        struct<_1: int64>            1
        struct<_1: list<int64>>      2
        map<string, int64>           2 (a list of key-value structs)
    """
    if not arrow_type.num_fields:
        return 0
    return 1 + max(type_nesting(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def nesting_problem(value: Any, arrow_type: Any) -> str | None:
    """Why ``value``, of ``arrow_type`` (``None``: too deep for Arrow to infer), nests
    too deeply to be stored (``None``: it does not), see :data:`MAX_TYPE_NESTING`."""
    if arrow_type is None:
        return f"the value {_shown(value)} cannot be stored: it nests tuples within tuples too deeply to read"
    depth = type_nesting(arrow_type)
    if depth <= MAX_TYPE_NESTING:
        return None
    return f"the value {_shown(value)} cannot be stored: it nests {depth} levels deep (tuples, lists or maps), {BEYOND_STORED}"


def _shown(value: Any) -> str:
    """``repr(value)``, or an abridged one where it nests too deeply for ``repr``."""
    try:
        return repr(value)
    except RecursionError:
        return reprlib.repr(value)


_PLAIN = (str, int, float, bytes, _dt.datetime, _dt.date)
_FITTED = (*_PLAIN, decimal.Decimal, bool)
"""Plain once a value fits a column's type: a decimal that fits its precision and
scale, a boolean its boolean column (never an integer one), read back equal."""


_named_tuples: dict[type, bool] = {}  # a class -> whether it is a NamedTuple


def _is_named_tuple(kind: type) -> bool:
    """Whether ``kind`` is a NamedTuple class (a record), no other tuple subclass."""
    found = _named_tuples.get(kind)
    if found is None:
        found = _named_tuples[kind] = issubclass(kind, tuple) and hasattr(kind, "_fields") and hasattr(kind, "_make")
    return found


_plain_seen: dict[int, tuple[Any, ...]] = {}  # tuples found plain, by identity (see _remembered)
_fitted_seen: dict[int, tuple[Any, ...]] = {}  # tuples found plain once they fit a column


def _plain(value: Any, kinds: tuple[type, ...] = _PLAIN, seen: dict[int, Any] = _plain_seen) -> bool:
    """A value that surely reads back equal: a plain scalar (an integer within 64
    bits; one of ``kinds``), or a non-empty tuple or NamedTuple of them (a NaN reads
    back as ``math.nan``, a -0.0 as 0.0, equal under :func:`canonical`; a
    NamedTuple as a record of its fields). Tuples found plain are kept in ``seen``."""
    if type(value) is tuple or _is_named_tuple(type(value)):
        if seen.get(id(value)) is value:
            return True
        if not value:
            return False
        for item in value:  # one call per tuple, not per item
            kind = type(item)
            if kind is int:
                if not INT64_MIN <= item <= INT64_MAX:
                    return False
            elif kind is str:
                if not item.isascii() and not _utf8(item):
                    return False
            elif kind is tuple or _is_named_tuple(kind):
                if not _plain(item, kinds, seen):
                    return False
            elif item is not None and kind not in kinds:
                return False
        if len(seen) >= REMEMBERED:
            seen.clear()
        seen[id(value)] = value  # plain items only: immutable all through
        return True
    if type(value) is int:
        return INT64_MIN <= value <= INT64_MAX
    if type(value) is str:
        return value.isascii() or _utf8(value)
    return value is None or type(value) in kinds
