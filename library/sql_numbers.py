"""Arithmetic and number functions over Arrow arrays, as Spark SQL's ANSI mode
gives them: overflow and division by zero are errors (NULL in the ``try_`` forms),
decimals keep the precision and scale Spark's rules give, ``%`` takes the
dividend's sign::

    expression        gives
    7 / 0.3           23.333333
    -7 % 3            -1
    pmod(-7, 3)       2
    10 / 0            an error
    try_divide(10, 0) NULL
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence
from typing import Any

from statemachines.library.sql_values import (
    as_array,
    as_type,
    contiguous,
    each_distinct,
    is_null_type,
    is_number,
    is_text_field,
    one_by_one,
    read_as,
    rows_not,
    rows_of,
    shaped_as,
    tried,
)

__all__ = [
    "beside_null",
    "decimals_or",
    "divide",
    "floor_or_ceil",
    "fractions_beside_fractions",
    "integer_divide",
    "numbers_of_text",
    "numbers_only",
    "of_one_number",
    "of_two_numbers",
    "or_null",
    "positive_remainder",
    "remainder_of",
    "rounded_values",
    "sqrt_or_sign",
]


def divide(left: Any, right: Any) -> Any:
    """Spark SQL's ``/``: a fraction (double) of whole or floating numbers, a decimal of
    decimals; dividing by zero is an error, as under ANSI SQL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type):
        return _decimal_arithmetic("/", left, right)
    return pc.divide_checked(pc.cast(left, pa.float64()), pc.cast(right, pa.float64()))


def decimals_or(operator: str, op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``op`` (Arrow's checked ``+``, ``-`` or ``*``), or :func:`_decimal_arithmetic`
    where a side is a decimal (and none a floating number, read as a DOUBLE before)."""
    import pyarrow as pa

    def run(left: Any, right: Any) -> Any:
        if pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type):
            return _decimal_arithmetic(operator, left, right)
        return op(left, right)

    return run


def _decimal_arithmetic(operator: str, left: Any, right: Any) -> Any:
    """``+ - * /`` of decimals (or a decimal and a whole number) as Spark SQL gives
    them: of the type its rules make of the sides' precisions and scales (a whole
    number field as ``DECIMAL(10, 0)`` for an INT, ``(20, 0)`` for a BIGINT; a whole
    number literal as its digits), at most 38 digits, keeping at least 6 of the
    scale; rounded half up to that scale; a value beyond the type an error, as
    under ANSI SQL::

        a (DECIMAL(6,3))   b     a / b      a * b    a + b
        1.250              3     0.416667   3.750    4.250
        99.995             0.3   333.316667 29.9985  100.295
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    (p1, s1), (p2, s2) = _decimal_shape(left), _decimal_shape(right)
    if operator in "+-":
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    elif operator == "*":
        precision, scale = p1 + p2 + 1, s1 + s2
    else:
        scale = max(6, s1 + p2 + 1)
        precision = p1 - s1 + s2 + scale
    if precision > 38:  # Spark's precision loss: whole digits kept, at least 6 of the scale
        scale = max(38 - (precision - scale), min(scale, 6))
        precision = 38
    elif operator in "+-*":  # exact in Arrow, at the scale Spark keeps: no rounding
        arrow_op = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}[operator]
        try:
            exact = arrow_op(pc.cast(left, pa.decimal128(p1, s1)), pc.cast(right, pa.decimal128(p2, s2)))
            return pc.cast(exact, pa.decimal128(precision, scale))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # beyond Arrow's decimals: below
            pass
    step, bound = decimal.Decimal(1).scaleb(-scale), decimal.Decimal(10) ** (precision - scale)

    def one(a: Any, b: Any) -> Any:
        value = a + b if operator == "+" else a - b if operator == "-" else a * b if operator == "*" else a / b
        value = value.quantize(step, rounding=decimal.ROUND_HALF_UP)
        if abs(value) >= bound:
            raise ArithmeticError(f"{value} does not fit DECIMAL({precision}, {scale})")
        return value

    return _exactly(left, right, one, pa.decimal128(precision, scale), divides=operator == "/")


def _decimal_shape(value: Any) -> tuple[int, int]:
    """The precision and scale Spark SQL gives a decimal or a whole number in decimal
    arithmetic: a literal's (an Arrow scalar here) digits, a field's type's width."""
    import pyarrow as pa

    kind = value.type
    if pa.types.is_decimal(kind):
        return kind.precision, kind.scale
    if isinstance(value, pa.Scalar) and value.is_valid:
        return max(len(str(abs(value.as_py()))), 1), 0
    return {8: 3, 16: 5, 32: 10}.get(kind.bit_width, 20), 0


def integer_divide(left: Any, right: Any) -> Any:
    """Spark SQL's ``div``: the quotient of whole numbers or decimals truncated toward
    zero, a whole number (``-7 div 2`` is -3); floating numbers are refused, as Spark
    refuses them; by zero an error, as under ANSI SQL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_integer(left.type) or pa.types.is_decimal(left.type)) or not (
        pa.types.is_integer(right.type) or pa.types.is_decimal(right.type)
    ):
        raise TypeError(f"div takes whole numbers or decimals, not {left.type} and {right.type}")
    if pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type):
        return _exactly(left, right, lambda a, b: int(a / b), pa.int64())
    return pc.divide_checked(pc.cast(left, pa.int64()), pc.cast(right, pa.int64()))  # a BIGINT, toward zero


def remainder_of(left: Any, right: Any) -> Any:
    """Spark SQL's ``%`` (Java's): the sign of the dividend, ``-7 % 2`` being -1; whole
    numbers of whole numbers, exact decimals of decimals, else fractions; by zero an
    error, as under ANSI SQL."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    floating = pa.types.is_floating(left.type) or pa.types.is_floating(right.type)
    if not floating and (pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type)):
        return _exactly(left, right, lambda a, b: a % b, None)  # Decimal's %: the dividend's sign
    if pa.types.is_integer(left.type) and pa.types.is_integer(right.type):  # in 64 bits (INT_MIN % -1 is 0)
        wider = max(left.type, right.type, key=lambda t: t.bit_width)
        left, right = pc.cast(left, pa.int64()), pc.cast(right, pa.int64())
        return pc.cast(pc.subtract_checked(left, pc.multiply_checked(right, pc.divide_checked(left, right))), wider)
    # fractions: IEEE's exact fmod, as Java's % (1e300 % 7 is 3.0, not the 0.0 that a - n * trunc(a / n) gives)
    rows = rows_of(left, right)
    lefts, rights = (contiguous(as_array(as_type(side, pa.float64()), rows)) for side in (left, right))
    if pc.any(pc.and_(pc.equal(rights, 0.0), pc.is_valid(lefts))).as_py():  # NULL % 0 is NULL
        raise ArithmeticError("remainder by zero")
    missing = pc.or_(pc.is_null(lefts), pc.is_null(rights)).to_numpy(zero_copy_only=False)
    with np.errstate(all="ignore"):  # NaN for an infinite dividend, as Java's
        result = np.fmod(lefts.fill_null(0.0).to_numpy(zero_copy_only=False), rights.fill_null(1.0).to_numpy(zero_copy_only=False))
    return shaped_as(pa.array(result, pa.float64(), mask=missing), left, right)


def numbers_only(node: Any, sides: Sequence[Any]) -> None:
    """Refuses the operator ``node`` over ``sides`` that are not all numbers (text is
    read as a number only beside one, before)."""
    if not all(is_number(side.type) for side in sides):
        raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {' and '.join(str(side.type) for side in sides)}")


def beside_null(node: Any, sides: Sequence[Any]) -> None:
    """Refuses the arithmetic ``node`` of a bare NULL and text or a boolean, a date or
    timestamp other than by ``+`` and ``-``, or a floating number by ``div``, as Spark
    SQL refuses them; it gives NULL beside a number, a NULL, or a date or timestamp
    added to::

        kind + NULL   flag * NULL   day * NULL   NULL + NULL   day - NULL
        refused       refused       refused      NULL          NULL
    """
    import pyarrow as pa
    from sqlglot import exp

    operator = tried().get(type(node), type(node))
    for side in sides:
        kind = side.type
        in_time = pa.types.is_date32(kind) or pa.types.is_timestamp(kind)
        number = is_number(kind) and not (operator is exp.IntDiv and pa.types.is_floating(kind))
        if not (pa.types.is_null(kind) or number or in_time and operator in (exp.Add, exp.Sub)):
            raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {kind} beside NULL")


def or_null(op: Callable[[Any, Any], Any], left: Any, right: Any, divides: bool) -> Any:
    """``op(left, right)``, NULL where it overflows or (``divides``) ``right`` is zero,
    as Spark SQL's ``try_add``, ``try_divide`` and the like give it::

        left          right   try_add   try_divide
        2147483647    1       NULL      2147483647.0
        7             0       7         NULL
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if divides:
        right = pc.if_else(pc.equal(right, 0), pa.scalar(None, right.type), right)
    try:
        return op(left, right)
    except (ArithmeticError, pa.ArrowInvalid):  # an overflow somewhere: row by row
        pass
    rows = rows_of(left, right)
    lefts, rights = contiguous(as_array(left, rows)), contiguous(as_array(right, rows))
    kind = op(lefts.slice(0, 0), rights.slice(0, 0)).type
    answers = []
    for i in range(rows):
        try:
            answers.append(op(lefts.slice(i, 1), rights.slice(i, 1)).cast(kind))
        except (ArithmeticError, pa.ArrowInvalid):
            answers.append(pa.nulls(1, kind))
    return shaped_as(pa.concat_arrays(answers), left, right)


def positive_remainder(left: Any, right: Any) -> Any:
    """Spark SQL's ``pmod(a, n)``: ``a % n`` (:func:`remainder_of`), or where that is
    below zero ``(a % n + n) % n``, whole numbers wrapping around as Java's do::

        a     n                a % n   pmod(a, n)
        -7    3                -1      2
        7     -3               1       1
        -7    -3               -1      -1
        -1    INT_MIN (INTs)   -1      INT_MAX (-1 + INT_MIN wraps)
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    remainder = remainder_of(left, right)
    if pa.types.is_decimal(remainder.type):
        return _exactly(remainder, right, lambda r, n: (r + n) % n if r < 0 else r, remainder.type)
    rows = rows_of(remainder, right)
    values = contiguous(as_array(remainder, rows))
    missing = pc.or_(pc.is_null(values), pc.is_null(as_array(right, rows)))
    kind = values.type.to_pandas_dtype()
    r = values.fill_null(0).to_numpy(zero_copy_only=False).astype(kind)
    n = as_array(pc.cast(right, values.type), rows).fill_null(1).to_numpy(zero_copy_only=False).astype(kind)
    with np.errstate(all="ignore"):  # Java's whole numbers wrap
        result = np.where(r < 0, np.fmod(r + n, n), r)
    return shaped_as(pa.array(result, values.type, mask=missing.to_numpy(zero_copy_only=False)), remainder, right)


def _exactly(left: Any, right: Any, op: Callable[[Any, Any], Any], arrow_type: Any, divides: bool = True) -> Any:
    """``op`` of each row's decimals (or a decimal and a whole number) in Python's
    exact decimal arithmetic, wide enough for any of Spark's (38 digits); NULL where
    either is NULL; by zero an error where ``op`` ``divides``."""
    import pyarrow as pa

    rows = rows_of(left, right)

    def values(side: Any) -> list[Any]:
        return [side.as_py()] * rows if isinstance(side, pa.Scalar) else side.to_pylist()

    with decimal.localcontext(prec=80):
        out = []
        for a, b in zip(values(left), values(right), strict=True):
            if a is None or b is None:
                out.append(None)
            elif divides and b == 0:
                raise ArithmeticError("division by zero")
            else:
                out.append(op(decimal.Decimal(a), decimal.Decimal(b)))
    return shaped_as(pa.array(out, arrow_type), left, right)


def rounded_values(node: Any, value: Any, scale: int, half_even: bool = False) -> Any:
    """``round(x, d)``: ``x`` rounded half away from zero (``bround(x, d)``,
    ``half_even``: half to the even neighbour, 2.5 to 2.0) to ``d`` decimal places
    (``d`` < 0: to tens, hundreds...), of ``x``'s type, as Spark SQL rounds it: a
    fraction as the decimal it is written as (``round(2.675, 2)`` is 2.68), NaN and
    infinities as they are; whole numbers that no longer fit their type are an
    error, as under ANSI SQL; a decimal's scale becomes at most ``d``::

        x        round(x, 2)   round(x, -1)
        2.675    2.68          0.0
        -125     -125          -130
        NaN      NaN           NaN
    """
    import pyarrow as pa

    if is_null_type(value):
        return value
    kind = value.type
    mode = decimal.ROUND_HALF_EVEN if half_even else decimal.ROUND_HALF_UP
    if pa.types.is_integer(kind):
        if scale >= 0:
            return value
        width = kind.bit_width
        low, high = (-(2 ** (width - 1)), 2 ** (width - 1) - 1) if pa.types.is_signed_integer(kind) else (0, 2**width - 1)

        def whole(v: int) -> int:
            rounded = int(decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-scale), mode))
            if not low <= rounded <= high:
                raise ArithmeticError(f"{node.sql(dialect='spark')!r}: {v} rounded is {rounded}, which {kind} cannot hold")
            return rounded

        return one_by_one(value, whole, kind)
    if pa.types.is_decimal(kind):
        new_scale = min(kind.scale, max(scale, 0))
        whole_digits = kind.precision - kind.scale + 1
        precision = max(whole_digits, -scale + 1) if scale < 0 else whole_digits + new_scale
        exponent = decimal.Decimal(1).scaleb(-scale)
        with decimal.localcontext(prec=80):
            return one_by_one(value, lambda v: v.quantize(exponent, mode),
                               pa.decimal128(min(precision, 38), new_scale))

    def fraction(v: float) -> float:
        import numpy as np

        if not math.isfinite(v):
            return v
        written = decimal.Decimal(repr(v) if kind == pa.float64() else str(np.float32(v)))  # Java's shortest text
        if written.as_tuple().exponent >= -scale:  # no digit to drop
            return v
        with decimal.localcontext(prec=max(28, written.adjusted() + scale + 3)):
            return float(written.quantize(decimal.Decimal(1).scaleb(-scale), mode)) + 0.0  # no -0.0

    return one_by_one(value, fraction, kind)


def sqrt_or_sign(value: Any, sign: bool) -> Any:
    """``sqrt(x)`` / ``sign(x)`` (``signum``): fractions (DOUBLE), as Java's ``Math``
    gives them: the square root of a negative number is NaN; the sign is -1.0, 0.0
    or 1.0, a zero's (-0.0 too) itself, NaN's NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return value
    value = as_type(value, pa.float64())
    if not sign:
        return pc.sqrt(value)
    return pc.if_else(pc.equal(value, 0.0), value, pc.sign(value))


def of_one_number(name: str, value: Any) -> Any:
    """``exp``, ``ln``, ``log10``, ``log2`` and ``cbrt`` of ``x``: fractions (DOUBLE),
    as Spark SQL gives them: a logarithm of zero or less is NULL, of NaN NaN;
    ``log2(x)`` is ``ln(x) / ln(2)``, as Spark divides::

        x       ln(x)     log10(x)   log2(x)   exp(x)   cbrt(x)
        1000    6.907..   3.0        9.965..   inf      10.0
        0       NULL      NULL       NULL      1.0      0.0
        -8      NULL      NULL       NULL      0.0003.. -2.0
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return value
    value = as_type(value, pa.float64())
    if name == "EXP":
        return pc.exp(value)
    if name == "CBRT":
        given = as_array(value, 1) if isinstance(value, pa.Scalar) else value
        missing = given.is_null().to_numpy(zero_copy_only=False)
        roots = pa.array(np.cbrt(given.fill_null(0.0).to_numpy(zero_copy_only=False)), mask=missing)
        return shaped_as(roots, value)
    logarithm = {"LN": pc.ln, "LOG10": pc.log10, "LOG2": lambda v: pc.divide(pc.ln(v), math.log(2.0))}[name]
    return pc.if_else(pc.less_equal(value, 0.0), pa.scalar(None, pa.float64()), logarithm(value))


def of_two_numbers(power: bool, first: Any, second: Any) -> Any:
    """``pow(x, y)`` (``power``) or ``log(b, x)``, fractions (DOUBLE), as Spark SQL
    gives them: ``pow`` as Java's ``Math.pow``, which is NaN where ``y`` is NaN, or
    ``x`` is 1 or -1 and ``y`` infinite (C's gives 1.0 there); ``log(b, x)`` is
    ``ln(x) / ln(b)``, NULL where ``b`` or ``x`` is zero or less."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(first) or is_null_type(second):
        return pa.scalar(None, pa.null())
    first, second = as_type(first, pa.float64()), as_type(second, pa.float64())
    if power:
        javas_nan = pc.or_(pc.is_nan(second), pc.and_(pc.equal(pc.abs(first), 1.0), pc.is_inf(second)))
        return pc.if_else(javas_nan, math.nan, pc.power(first, second))
    undefined = pc.or_(pc.less_equal(first, 0.0), pc.less_equal(second, 0.0))
    return pc.if_else(undefined, pa.scalar(None, pa.float64()), pc.divide(pc.ln(second), pc.ln(first)))


def floor_or_ceil(node: Any, value: Any, up: bool) -> Any:
    """``floor(x)`` / ``ceil(x)``: the whole number at or below (above) ``x``, a
    BIGINT (a decimal of scale 0 for decimals), as Spark SQL gives it: NaN gives 0
    (as Java casts it), and a fraction whose floor no BIGINT holds (infinities,
    1e300) is an error, as under ANSI SQL::

        x       floor(x)   ceil(x)
        2.5     2          3
        -0.5    -1         0
        NaN     0          0
        inf     error      error
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):
        return value
    kind = value.type
    if pa.types.is_integer(kind):
        return pc.cast(value, pa.int64())
    if pa.types.is_decimal(kind):
        rounding = decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR
        with decimal.localcontext(prec=80):
            return one_by_one(value, lambda v: v.to_integral_value(rounding),
                               pa.decimal128(min(kind.precision - kind.scale + 1, 38), 0))
    whole = as_array((pc.ceil if up else pc.floor)(value), 1)
    nan = pc.is_nan(whole)
    fits = pc.or_(pc.and_(pc.greater_equal(whole, -(2.0**63)), pc.less(whole, 2.0**63)), nan)
    if pc.any(pc.invert(fits)).as_py():  # NULLs skipped
        beyond = pc.filter(as_array(value, 1), pc.invert(fits))[0].as_py()
        raise ArithmeticError(f"{node.sql(dialect='spark')!r}: the {'ceiling' if up else 'floor'} of {beyond!r} is no BIGINT")
    result = pc.cast(pc.if_else(nan, 0.0, whole), pa.int64())  # NaN is 0, as Java casts it
    return shaped_as(result, value)


def fractions_beside_fractions(left: Any, right: Any) -> tuple[Any, Any]:
    """A decimal beside a floating number as a DOUBLE, as Spark SQL widens the two
    (``score + 0.1 = 7.6`` adds and compares DOUBLEs); anything else as it is."""
    import pyarrow as pa

    floating = pa.types.is_floating(left.type) or pa.types.is_floating(right.type)
    if not floating:
        return left, right
    return tuple(as_type(v, pa.float64()) if pa.types.is_decimal(v.type) else v for v in (left, right))  # type: ignore[return-value]


def numbers_of_text(node: Any, first: Any, second: Any, try_: bool = False) -> tuple[Any, Any]:
    """Operands of ``node`` read in this order, a text field beside a number read as
    that number's type, as Spark SQL casts it (whole numbers as int64, others and
    decimals as float64; trimmed): ``code > 10`` compares ``' 20 '`` as 20. Text
    that is no such number is an error (``ValueError``) where it is read: the first
    operand in every row, the second where the first is not NULL (with ``try_``,
    NULL). Text literals are :func:`literal_like`'s."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def number_type(value: Any) -> Any:
        kind = value.type
        return pa.int64() if pa.types.is_integer(kind) else pa.float64() if is_number(kind) else None

    def number(text: str, arrow_type: Any) -> Any:
        try:
            return read_as(text, arrow_type).as_py()
        except ValueError:
            if try_:
                return None
            raise

    def read(text: Any, arrow_type: Any) -> Any:
        try:
            return each_distinct(text, lambda v: number(v, arrow_type), arrow_type)
        except ValueError as error:
            raise ValueError(f"{node.sql(dialect='spark')!r}: {error}") from None

    def decimal_as_float(value: Any) -> Any:
        return as_type(value, pa.float64()) if pa.types.is_decimal(value.type) else value

    if is_text_field(first) and (kind := number_type(second)) is not None:
        return read(contiguous(first), kind), decimal_as_float(second)
    if is_text_field(second) and (kind := number_type(first)) is not None:
        second = pc.if_else(rows_not(first, None)(len(second)), contiguous(second), pa.scalar(None, second.type))
        return decimal_as_float(first), read(second, kind)
    return first, second
