"""Arrow values as the expression evaluator reads them.

NULLs and scalars spread over a batch's rows, Arrow types grouped as Spark SQL
groups them (text, numbers), typed literals, casts as Spark's ANSI cast, and text
read as a value of a type as Spark SQL's cast reads it::

    text               read as      gives
    ' 20 '             int64        20
    'yes'              bool         True
    '2024-1-5 9:30'    timestamp    2024-01-05 09:30:00
    '1.5'              int64        an error: '1.5' is no int64
"""

from __future__ import annotations

import datetime
import decimal
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "arrow_type_of",
    "as_array",
    "as_type",
    "cast_values",
    "castable",
    "contiguous",
    "each_distinct",
    "field_named",
    "is_null_type",
    "is_number",
    "is_number_literal",
    "is_string_literal",
    "is_text",
    "is_text_field",
    "literal_as",
    "literal_like",
    "none_null",
    "nulls",
    "number_literal",
    "one_by_one",
    "plain_text",
    "read_as",
    "rows_not",
    "rows_of",
    "shaped_as",
    "spread",
    "to_date",
    "tried",
    "typed_literal",
    "whole_literal",
    "wide_decimal",
    "widened_for_text",
]


def rows_of(*sides: Any) -> int:
    """The rows of the arrays among ``sides`` (1 if all are scalars)."""
    import pyarrow as pa

    return next((len(side) for side in sides if not isinstance(side, pa.Scalar)), 1)


def shaped_as(result: Any, *sides: Any) -> Any:
    """``result`` (an array), as its one scalar if all ``sides`` were scalars."""
    import pyarrow as pa

    return result[0] if all(isinstance(side, pa.Scalar) for side in sides) else result


def literal_as(node: Any, keys: Any) -> Any:
    """The literal ``node`` as a key of the map keys ``keys`` (a list array): text
    for text keys, a number for number keys, as Spark SQL takes them (no other)."""
    import pyarrow as pa

    if is_null_type(keys):
        return pa.scalar(None, pa.null())
    kind = keys.type.value_type
    if not (node.is_string and is_text(kind) or not node.is_string and is_number(kind)):
        raise TypeError(f"{node.parent.sql(dialect='spark')!r}: the maps' keys are {kind}, the key is {node.sql(dialect='spark')}")
    return read_as(node.this, kind)


@functools.cache
def tried() -> dict[type, type]:
    """``try_add`` and the like: the operator each tries (``try_mod``, which sqlglot
    leaves unnamed, is read apart)."""
    from sqlglot import exp

    return {exp.SafeAdd: exp.Add, exp.SafeSubtract: exp.Sub, exp.SafeMultiply: exp.Mul, exp.SafeDivide: exp.Div}


def is_null_type(value: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_null(value.type)


def nulls(rows: int) -> pa.Array:
    import pyarrow as pa

    return pa.nulls(rows, pa.bool_())


def as_array(value: Any, rows: int) -> Any:
    import pyarrow as pa

    return pa.repeat(value, rows) if isinstance(value, pa.Scalar) else value


def rows_not(value: Any, given: bool | None) -> Callable[[int], Any]:
    """The rows (a mask of ``count`` rows, given later) where ``value`` is not
    ``given``: not NULL for None; else not TRUE / not FALSE, NULL being neither."""

    def rows(count: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        values = as_array(value, count)
        if given is None:
            return contiguous(pc.is_valid(values))
        return contiguous(pc.fill_null(pc.not_equal(values, pa.scalar(given)), True))

    return rows


def none_null(values: list[Any]) -> Callable[[int], Any]:
    """The rows (a mask) where none of ``values`` is NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return lambda count: functools.reduce(
        pc.and_, (rows_not(v, None)(count) for v in values), pa.repeat(pa.scalar(True), count)
    )


def spread(value: Any, rows: Any) -> Any:
    """``value``, read over the ``rows`` (a mask) of a table, at those rows of a
    column of the table's length (NULL elsewhere)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    taken = pc.sum(rows).as_py() or 0
    return pc.replace_with_mask(pa.nulls(len(rows), value.type), rows, contiguous(as_array(value, taken)))


def whole_literal(node: Any) -> int | None:
    """The whole number a literal (``2``, ``-1``) gives; 0 for none; None for anything else."""
    from sqlglot import exp

    if node is None:
        return 0
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return sign * int(node.this)
    return None


def to_date(node: Any, value: Any) -> Any:
    """``to_date(x)``: the date of ``x``, as Spark SQL casts it to one: an instant's
    in UTC (this project's sessions' time zone), a wall clock's, text read as
    :func:`_date_of_text` reads it (text that is none an error for its event)."""
    import pyarrow as pa

    kind = value.type
    if is_null_type(value) or pa.types.is_date32(kind):
        return value
    if is_text(kind):
        return cast_values(node, value, pa.date32(), False)
    if pa.types.is_timestamp(kind):
        return value.cast(pa.timestamp(kind.unit, "UTC")).cast(pa.date32()) if kind.tz else value.cast(pa.date32())
    raise TypeError(f"{node.sql(dialect='spark')!r} reads dates, timestamps or text, not {kind} values")


def one_by_one(value: Any, convert: Callable[[Any], Any], arrow_type: Any) -> Any:
    """:func:`each_distinct` of an array or of a scalar."""

    result = each_distinct(as_array(value, 1), convert, arrow_type)
    return shaped_as(result, value)


def is_number_literal(node: Any) -> bool:
    from sqlglot import exp

    node = node.this if isinstance(node, exp.Neg) else node
    return isinstance(node, exp.Literal) and not node.is_string


def is_string_literal(node: Any) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Literal) and node.is_string


def widened_for_text(value: Any, numbers: list[Any]) -> Any:
    """A number ``value`` of ``x IN (...)`` widened to hold the number literals among
    the items as well, as Spark SQL types the whole list (so text items are read as
    that type: ``amount IN ('1.5', 2.5)`` reads '1.5' as a decimal, not a BIGINT)."""
    import pyarrow as pa

    if is_null_type(value) or not is_number(value.type) or not numbers:
        return value
    kinds = {value.type, *(n.type for n in numbers)}
    if any(pa.types.is_floating(k) for k in kinds):
        wide = pa.float64()
    elif any(pa.types.is_decimal(k) for k in kinds):
        wide = wide_decimal(kinds)
    else:
        return value
    return value if value.type == wide else value.cast(wide)


def wide_decimal(kinds: set[Any]) -> Any:
    """A decimal type holding every value of ``kinds`` (decimals and whole numbers,
    which hold up to 19 digits), as Spark SQL widens them (at most 38 digits)."""
    import pyarrow as pa

    scale = max((k.scale for k in kinds if pa.types.is_decimal(k)), default=0)
    whole = max(k.precision - k.scale if pa.types.is_decimal(k) else 19 for k in kinds)
    return pa.decimal128(min(38, whole + scale), scale)


def contiguous(array: Any) -> Any:
    """A table's column (chunks) as one array."""
    import pyarrow as pa

    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def as_type(value: Any, kind: Any) -> Any:
    """``value`` cast to the number type ``kind``; a decimal to a floating number
    through its text, correctly rounded as Spark SQL (Java's ``BigDecimal``) rounds
    it, where Arrow's direct cast is not (7.6 would be 7.6000000000000005)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_decimal(value.type) and pa.types.is_floating(kind):
        value = pc.cast(value, pa.string())
    return pc.cast(value, kind)


def each_distinct(values: Any, convert: Callable[[Any], Any], arrow_type: Any) -> Any:
    """``convert`` of each of ``values`` (an array), as ``arrow_type`` values: called
    once per distinct value; NULL stays NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = contiguous(values)
    distinct = pc.unique(values).drop_null()
    converted = pa.array([convert(v) for v in distinct.to_pylist()], arrow_type)
    return pc.take(converted, pc.index_in(values, distinct, skip_nulls=True))


def is_text_field(value: Any) -> bool:
    import pyarrow as pa

    return not isinstance(value, pa.Scalar) and is_text(value.type)


def plain_text(arrow_type: Any) -> Any:
    """``arrow_type`` with text in Arrow's other layouts (``large_string``: Spark's
    batches with ``spark.sql.execution.arrow.useLargeVarTypes``; ``string_view``:
    Polars) as plain ``string``, at any depth of structs, which the evaluator reads."""
    import pyarrow as pa

    if pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return pa.string()
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(plain_text(field.type)) for field in arrow_type])
    return arrow_type


def is_text(arrow_type: Any) -> bool:
    """Whether values of ``arrow_type`` are text: plain ``string``, the one layout the
    evaluator meets (:meth:`Expression.evaluate` reads the others as it, :func:`plain_text`)."""
    import pyarrow as pa

    return pa.types.is_string(arrow_type)


def is_number(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)


def field_named(names: Sequence[str], name: str, what: str | None = None, holder: str = "the events") -> str:
    """The one of ``names`` that ``name`` means, matched as Spark matches field names
    (ignoring case, an exact match first); a name none or two of them match is an
    error: ``ValueError`` saying ``what`` read it."""
    if name in names:
        return name
    found = [n for n in names if n.casefold() == name.casefold()]
    if len(found) == 1:
        return found[0]
    what = what or f"the condition reads {name!r}"
    if found:
        raise ValueError(f"{what}, which is ambiguous: {holder} have {', '.join(map(repr, found))}")
    raise ValueError(f"{what}, which {holder} do not have (their fields: {', '.join(names)})")


def castable(arrow_type: Any) -> bool:
    """Whether a condition casts values of any type to ``arrow_type``."""
    import pyarrow as pa

    return arrow_type is not None and (
        is_number(arrow_type) or pa.types.is_string(arrow_type) or pa.types.is_boolean(arrow_type)
        or pa.types.is_date32(arrow_type) or pa.types.is_timestamp(arrow_type)
    )


def cast_values(node: Any, value: Any, arrow_type: Any, try_: bool) -> Any:
    """``CAST(x AS type)`` of a value, as Spark SQL's ANSI cast: text read as
    :func:`read_as` reads it, fractions to whole numbers truncated toward zero,
    numbers to decimals rounded half up, numbers to booleans TRUE unless 0, booleans
    to numbers 1 or 0, whole numbers, booleans and dates to text, dates and
    timestamps to one another (:func:`_cast_in_time`); a value the type cannot hold
    is an error (``TRY_CAST``: NULL). Each distinct value is cast once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return pa.scalar(None, arrow_type)
    source = value.type
    if source == arrow_type:
        return value
    temporal = pa.types.is_date32(source) or pa.types.is_timestamp(source)
    if pa.types.is_date32(arrow_type) or pa.types.is_timestamp(arrow_type):
        if temporal or pa.types.is_integer(source) and arrow_type.equals(pa.timestamp("us", "UTC")):
            return _cast_in_time(node, value, arrow_type)
        readable = False  # text alone, read one by one below
    elif pa.types.is_string(arrow_type):  # fractions' and timestamps' text is the JVM's
        readable = pa.types.is_integer(source) or pa.types.is_boolean(source) or pa.types.is_date32(source)
    else:
        readable = is_number(source) or pa.types.is_boolean(source)
    if not (readable or pa.types.is_string(source)):
        raise TypeError(f"{node.sql(dialect='spark')!r}: expression conditions cast no {source} values to {arrow_type}")
    numbers = pa.types.is_integer(source) or pa.types.is_boolean(source) or pa.types.is_floating(source)
    if numbers and (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)):  # decimals aside
        whole = pa.types.is_floating(source) and pa.types.is_integer(arrow_type)
        try:  # Arrow's cast where it is exact (fractions truncated first)
            return pc.cast(pc.trunc(value) if whole else value, arrow_type)
        except (pa.ArrowInvalid, OverflowError):  # a value it would change or cannot hold: one by one
            pass

    def one(v: Any) -> Any:
        try:
            return _cast_one(v, arrow_type)
        except (ValueError, ArithmeticError) as error:
            if try_:
                return None
            raise ValueError(f"{node.sql(dialect='spark')!r}: {error}") from None

    return one_by_one(value, one, arrow_type)


def _cast_in_time(node: Any, value: Any, arrow_type: Any) -> Any:
    """A date or a timestamp cast to a date or a timestamp as Spark SQL casts it in a
    UTC session (an instant's date and wall clock are UTC's, a wall clock read as a
    UTC instant, a date is its midnight), and whole numbers to a ``TIMESTAMP`` as
    seconds since 1970-01-01 UTC::

        x                             CAST(x AS TIMESTAMP_NTZ)   CAST(x AS DATE)
        2023-01-01 00:00+05:00        2022-12-31 19:00           2022-12-31
        DATE 2024-02-29               2024-02-29 00:00           2024-02-29
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    source = value.type
    if pa.types.is_date32(arrow_type):
        return to_date(node, value)
    if pa.types.is_integer(source):  # to an instant: seconds, in microseconds (an error beyond 64 bits)
        return pc.multiply_checked(pc.cast(value, pa.int64()), 1_000_000).cast(arrow_type)
    if pa.types.is_timestamp(source) and source.tz is not None:
        value = pc.cast(value, pa.timestamp("us", "UTC"), safe=False)
    return pc.cast(value, arrow_type, safe=False)  # a finer unit than microseconds truncated, as Spark keeps them


def _cast_one(value: Any, arrow_type: Any) -> Any:
    """One non-NULL value cast as :func:`cast_values` says."""
    import pyarrow as pa

    if isinstance(value, str):
        if pa.types.is_string(arrow_type):
            return value
        if pa.types.is_decimal(arrow_type):
            if "_" in value:
                raise ValueError(f"{value!r} is no decimal")
            value = decimal.Decimal(value.strip())  # then rounded as a number
        else:
            return read_as(value, arrow_type).as_py()
    if pa.types.is_string(arrow_type):
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if pa.types.is_boolean(arrow_type):
        return value != 0
    if isinstance(value, bool):
        value = int(value)
    if pa.types.is_integer(arrow_type):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value} is no whole number")
        whole = int(value)  # toward zero
        pa.scalar(whole, arrow_type)  # an OverflowError / ArrowInvalid if it does not fit
        return whole
    if pa.types.is_floating(arrow_type):
        return float(value)
    number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(repr(value) if isinstance(value, float) else value)
    if not number.is_finite():
        raise ValueError(f"{value} is no decimal")
    rounded = number.quantize(decimal.Decimal(1).scaleb(-arrow_type.scale), rounding=decimal.ROUND_HALF_UP)
    if len(rounded.as_tuple().digits) > arrow_type.precision and rounded != 0:
        raise ValueError(f"{value} does not fit {arrow_type}")
    return rounded


def typed_literal(node: Any) -> pa.Scalar:
    """The value of a typed literal (``DATE '2024-01-31'``, ``10L``, ``CAST('7' AS
    INT)``) as an Arrow scalar; ``ValueError`` if its type is not one a condition
    compares or its text does not read as that type (checked when the pattern is
    built), but NULL for ``TRY_CAST``."""
    import pyarrow as pa

    arrow_type = arrow_type_of(node.to)
    if arrow_type is None:
        raise ValueError(f"expression conditions have no {node.to.sql(dialect='spark')} values; "
                         f"write it as a function condition instead")
    if not node.this.is_string:  # a number, cast as a value is
        try:
            return cast_values(node, number_literal(node.this.this), arrow_type, bool(node.args.get("safe")))
        except (TypeError, ArithmeticError) as error:
            raise ValueError(str(error)) from None
    try:
        return read_as(str(node.this.this), arrow_type)
    except ValueError:
        if node.args.get("safe"):
            return pa.scalar(None, arrow_type)
        raise


def number_literal(text: str) -> pa.Scalar:
    """A number literal's value, typed as Spark SQL types it: a DOUBLE with an
    exponent, a DECIMAL of its digits with a point (``0.1 + 0.2 = 0.3`` holds), else
    an INT if it fits (its arithmetic overflows there), else a BIGINT::

        literal   type
        1e3       DOUBLE
        2.50      DECIMAL(3, 2)
        .5        DECIMAL(1, 1)
        7         INT
    """
    import pyarrow as pa

    if any(c in text for c in "eE"):
        return pa.scalar(float(text))
    if "." in text:
        value = decimal.Decimal(text)
        _, digits, exponent = value.as_tuple()
        scale = max(-int(exponent), 0)
        precision = max(len(digits), scale, 1)
        return pa.scalar(value, pa.decimal128(precision, scale)) if precision <= 38 else pa.scalar(float(text))
    whole = int(text)
    return pa.scalar(whole, pa.int32() if -(2**31) <= whole < 2**31 else pa.int64())


def arrow_type_of(to: Any) -> pa.DataType | None:
    """The Arrow type of a SQL type a literal may be given (None: not one of them)."""
    import pyarrow as pa
    from sqlglot import exp

    kinds = exp.DataType.Type
    if to.this == kinds.DECIMAL:
        precision, scale = ([int(p.this.this) for p in to.expressions] + [10, 0])[:2] if to.expressions else (10, 0)
        return pa.decimal128(precision, scale)
    return {
        kinds.TINYINT: pa.int8(), kinds.SMALLINT: pa.int16(), kinds.INT: pa.int32(), kinds.BIGINT: pa.int64(),
        kinds.FLOAT: pa.float32(), kinds.DOUBLE: pa.float64(), kinds.BOOLEAN: pa.bool_(),
        kinds.TEXT: pa.string(), kinds.VARCHAR: pa.string(), kinds.DATE: pa.date32(),
        kinds.TIMESTAMP: pa.timestamp("us", "UTC"), kinds.TIMESTAMPTZ: pa.timestamp("us", "UTC"),
        kinds.TIMESTAMPLTZ: pa.timestamp("us", "UTC"), kinds.TIMESTAMPNTZ: pa.timestamp("us"),
    }.get(to.this)


def literal_like(node: Any, value: Any, other: Any) -> Any:
    """``value`` as Spark SQL reads a literal compared with ``other``: a string literal
    as ``other``'s type (a number, a date, a timestamp, a boolean), a timestamp
    literal in ``other``'s time zone or none (a literal without a zone being UTC);
    anything else as it is. ``TypeError`` if the text does not read so."""
    import pyarrow as pa

    if not isinstance(value, pa.Scalar) or isinstance(other, pa.Scalar) or not value.is_valid:
        return value
    wanted = other.type
    if pa.types.is_string(value.type) and _readable(wanted):
        try:
            return read_as(value.as_py(), wanted)
        except ValueError as error:
            raise TypeError(f"{node.sql(dialect='spark')!r}: {error}") from None
    if pa.types.is_timestamp(value.type) and pa.types.is_timestamp(wanted) and value.type.tz != wanted.tz:
        moment = value.as_py()
        moment = moment.replace(tzinfo=moment.tzinfo or datetime.UTC)
        if wanted.tz is None:
            moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
        return pa.scalar(moment, pa.timestamp(value.type.unit, wanted.tz))
    return value


def _readable(arrow_type: Any) -> bool:
    import pyarrow as pa

    return any(test(arrow_type) for test in (
        pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_date, pa.types.is_timestamp,
        pa.types.is_boolean,
    ))


_WHOLE = re.compile(r"[+-]?[0-9]+")
_TRUE, _FALSE = frozenset({"t", "true", "y", "yes", "1"}), frozenset({"f", "false", "n", "no", "0"})
_BOOLEAN_TEXT = _TRUE | _FALSE


# Spark's text of a date: a year of 4 to 7 digits, then a month and a day of 1 or 2;
# the month and day may go, and whatever follows a space or a T is not read
_DATE_TEXT = re.compile(r"\+?(\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?:[ T].*)?", re.DOTALL)
# and of a timestamp: a whole date, then a time of 1- or 2-digit parts (minutes and
# seconds may go), a fraction of up to 9 digits, and a zone, a space before it or not
_MOMENT_TEXT = re.compile(
    r"\+?(\d{4,7})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?"
    r" ?([A-Za-z][A-Za-z0-9_/+\-:]*|[+-][0-9:]+)?)?)?)?"
)
_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


def _date_of_text(text: str) -> datetime.date:
    """The date ``text`` (trimmed) is as Spark casts text to a date (``2024``,
    ``2024-1-5``, ``2024-01-05 09:30``...); ``ValueError`` if none."""
    found = _DATE_TEXT.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is no date")
    year, month, day = found.groups()
    return datetime.date(int(year), int(month or 1), int(day or 1))


def _moment_of_text(text: str) -> datetime.datetime:
    """The timestamp ``text`` (trimmed) is as Spark casts text to one (``2024-1-5
    9:30``, ``2024-01-05T09:30:00.5+01:00``, ``2024-01-05 09:30 America/New_York``...):
    with the zone it names, else without one; a fraction beyond microseconds is
    dropped. ``ValueError`` if none (a time alone, which Spark puts on the current
    date, too)."""
    found = _MOMENT_TEXT.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is no timestamp")
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    moment = datetime.datetime(
        int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0), int(second or 0), micros
    )
    return moment if zone is None else moment.replace(tzinfo=_zone(zone, text))


def _zone(name: str, text: str) -> datetime.tzinfo:
    """The time zone of a timestamp's text: ``Z``, ``UTC``, an offset (``+01:00``,
    ``+0100``, ``GMT+1``) or a region (``America/New_York``)."""
    import zoneinfo

    if name in ("Z", "UTC", "GMT", "UT"):
        return datetime.UTC
    offset = _OFFSET.fullmatch(name)
    if offset is not None:
        sign, hours, minutes, seconds = offset.groups()
        delta = datetime.timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
        return datetime.timezone(-delta if sign == "-" else delta)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{text!r} names no time zone Python knows ({name!r})") from None


def read_as(text: str, arrow_type: Any) -> pa.Scalar:
    """``text`` read as a value of ``arrow_type``, as Spark's cast of a string reads it;
    ``ValueError`` naming the text and the type if it does not."""
    import pyarrow as pa

    clean = text.strip()
    try:
        if pa.types.is_integer(arrow_type) and _WHOLE.fullmatch(clean):
            return pa.scalar(int(clean), arrow_type)
        if pa.types.is_floating(arrow_type) and "_" not in clean:
            return pa.scalar(float(clean), arrow_type)
        if pa.types.is_decimal(arrow_type) and clean:
            return pa.scalar(decimal.Decimal(clean))
        if pa.types.is_boolean(arrow_type) and clean.lower() in _BOOLEAN_TEXT:
            return pa.scalar(clean.lower() in _TRUE)
        if pa.types.is_date(arrow_type):
            return pa.scalar(_date_of_text(clean), arrow_type)
        if pa.types.is_timestamp(arrow_type):
            moment = _moment_of_text(clean)  # without a zone: the wall clock, else UTC
            moment = moment.replace(tzinfo=moment.tzinfo or datetime.UTC) if arrow_type.tz else moment.replace(tzinfo=None)
            return pa.scalar(moment, pa.timestamp("us", arrow_type.tz))
        if pa.types.is_string(arrow_type):
            return pa.scalar(text)
    except (ValueError, decimal.InvalidOperation, OverflowError, pa.ArrowInvalid):
        pass
    raise ValueError(f"{text!r} is no {arrow_type}")
