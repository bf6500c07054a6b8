"""The evaluator of :mod:`statemachines.library.expressions`: a condition's
parsed tree over a table of events, a column at a time.

Each part is read only in the rows Spark SQL reads it in, so that an error there (a
division by zero) is none elsewhere; a condition that is NULL is not met::

    amount    amount <> 0 AND 10 % amount = 0    met
    5         TRUE                               yes
    0         FALSE (10 % 0 never read)          no
    NULL      NULL                               no
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from statemachines.library.sql_grammar import scale_of
from statemachines.library.sql_numbers import (
    beside_null,
    decimals_or,
    divide,
    floor_or_ceil,
    fractions_beside_fractions,
    integer_divide,
    numbers_of_text,
    numbers_only,
    of_one_number,
    of_two_numbers,
    or_null,
    positive_remainder,
    remainder_of,
    rounded_values,
    sqrt_or_sign,
)
from statemachines.library.sql_text import (
    case_mapped,
    in_text,
    of_text,
    regexp_extract,
    split,
    text_tests,
)
from statemachines.library.sql_times import (
    date_part,
    date_parts,
    days_added,
    days_since_epoch,
    of_date,
    one_clock,
    truncated_time,
    unix_seconds,
)
from statemachines.library.sql_values import (
    arrow_type_of,
    as_array,
    as_type,
    cast_values,
    contiguous,
    field_named,
    is_null_type,
    is_number,
    is_number_literal,
    is_string_literal,
    is_text,
    literal_as,
    literal_like,
    none_null,
    nulls,
    number_literal,
    read_as,
    rows_not,
    spread,
    to_date,
    tried,
    typed_literal,
    whole_literal,
    wide_decimal,
    widened_for_text,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Evaluator"]


class Evaluator:
    """Evaluates a parsed expression over a table's columns."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.rows = table.num_rows

    def value(self, node: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc
        from sqlglot import exp

        kind = type(node)
        if kind is exp.Paren:
            return self.value(node.this)
        if kind is exp.Column:
            return self._column(node)
        if kind is exp.Dot:  # a field of a struct reached through more parts than a Column holds
            return _struct_field(node, self.value(node.this), node.name, node.this.sql(dialect="spark"))
        if kind is exp.Literal:
            return pa.scalar(node.this) if node.is_string else number_literal(node.this)
        if kind is exp.Boolean:
            return pa.scalar(bool(node.this))
        if kind in (exp.Cast, exp.TryCast) and isinstance(node.this, exp.Literal):  # a typed literal (checked when built)
            return typed_literal(node)
        if kind in (exp.Cast, exp.TryCast):
            return cast_values(node, self.value(node.this), arrow_type_of(node.to), bool(node.args.get("safe")))  # TRY_CAST
        if kind is exp.Null:
            return pa.scalar(None, pa.null())
        if (compare := _comparison_operators().get(kind)) is not None:
            left = self.value(node.this)
            return _compare(node, compare, left, self._unless_null(node.expression, left), self.rows)
        if kind in (exp.NullSafeEQ, exp.NullSafeNEQ):  # <=> / IS [NOT] DISTINCT FROM: never NULL
            left, right = self.value(node.this), self.value(node.expression)
            both_null = pc.and_(_is_null(left, self.rows), _is_null(right, self.rows))
            equal = pc.or_(both_null, pc.fill_null(_compare(node, pc.equal, left, right, self.rows), False))
            return equal if kind is exp.NullSafeEQ else pc.invert(equal)
        if kind is exp.And or kind is exp.Or:
            return self._chain(node)
        if kind is exp.Not:
            return pc.invert(self._boolean(node.this, "NOT"))
        if kind is exp.Is and isinstance(node.expression, exp.Boolean):  # IS TRUE / FALSE: never NULL
            test = self._boolean(node.this, "IS")
            return pc.fill_null(test if node.expression.this else pc.invert(test), False)
        if kind is exp.Is:  # IS NULL (checked when built)
            return _is_null(self.value(node.this), self.rows)
        if kind is exp.In:
            return self._in(node)
        if kind is exp.Between:  # x >= low AND x <= high, the second read where the first is not FALSE
            low = self._side(node, pc.greater_equal, "low")
            return pc.and_kleene(low, self._where(lambda e: e._side(node, pc.less_equal, "high"), rows_not(low, False)))
        if kind in text_tests():
            left = self._text(node, node.this)
            if is_null_type(left):
                return nulls(self.rows)
            return text_tests()[kind](as_array(left, self.rows), node.expression.this)  # a literal (checked when built)
        if (compute := _arithmetic_operators().get(kind)) is not None:
            return self._arithmetic(node, compute, node.this, node.expression, divides=kind in (exp.Div, exp.IntDiv, exp.Mod))
        if kind is exp.Anonymous and node.name.upper() == "PMOD":  # read as % reads its sides
            return self._arithmetic(node, positive_remainder, *node.expressions, divides=True)
        if kind in tried() or kind is exp.Anonymous and node.name.upper() == "TRY_MOD":
            op = remainder_of if kind is exp.Anonymous else _arithmetic_operators()[tried()[kind]]
            left, right = node.expressions if kind is exp.Anonymous else (node.this, node.expression)
            return self._arithmetic(node, op, left, right, divides=op in (remainder_of, divide), try_=True)
        if kind in (exp.Neg, exp.Negative) or kind is exp.Anonymous and node.name.upper() == "POSITIVE":
            operand = self._number(node, node.expressions[0] if kind is exp.Anonymous else node.this)
            return operand if kind is exp.Anonymous or is_null_type(operand) else pc.negate_checked(operand)
        if (function := _one_call_functions().get(kind)) is not None:
            operand = self._number(node, node.this) if kind is exp.Abs else self._text(node, node.this)
            if is_null_type(operand):  # a field that is NULL in every event
                return operand
            return function(operand)
        if kind is exp.Pi or kind is exp.Anonymous and node.name.upper() == "E":
            return pa.scalar(math.pi if kind is exp.Pi else math.e)
        if kind is exp.Case or kind is exp.If:
            return self._case(node)
        if kind is exp.IsNan:
            return self._is_nan(node)
        if kind is exp.Nanvl:
            return self._nanvl(node)
        if kind is exp.Greatest or kind is exp.Least:
            return self._extreme(node, greatest=kind is exp.Greatest)
        if kind is exp.Round:
            return rounded_values(node, self._number(node, node.this), whole_literal(node.args.get("decimals")))
        if kind is exp.Floor or kind is exp.Ceil:
            return floor_or_ceil(node, self._number(node, node.this), up=kind is exp.Ceil)
        if kind in date_parts():
            return date_part(node, self.value(node.this))
        if kind is exp.TsOrDsToDate:
            return to_date(node, self.value(node.this))
        if kind is exp.StrToUnix:
            return unix_seconds(node, self.value(node.this))
        if kind is exp.TimestampTrunc:
            return truncated_time(node, self.value(node.this))
        if kind in (exp.DateTrunc, exp.AddMonths, exp.LastDay):
            return of_date(node, to_date(node, self.value(node.this)))
        if kind is exp.DateDiff:  # its sides are TO_DATE(...), as sqlglot parses it
            end, start = (days_since_epoch(self.value(side)) for side in (node.this, node.expression))
            return pa.scalar(None, pa.null()) if is_null_type(end) or is_null_type(start) else pc.subtract_checked(end, start)
        if kind is exp.TsOrDsAdd:
            return self._add_days(node)
        if kind is exp.Sqrt or kind is exp.Sign:
            return sqrt_or_sign(self._number(node, node.this), sign=kind is exp.Sign)
        if kind is exp.Anonymous and node.name.upper() == "BROUND":
            return rounded_values(node, self._number(node, node.expressions[0]), whole_literal(scale_of(node)), half_even=True)
        if kind in (exp.Exp, exp.Ln, exp.Cbrt) or kind is exp.Anonymous and node.name.upper() in ("LOG10", "LOG2"):
            return of_one_number(node.name.upper() if kind is exp.Anonymous else kind.__name__.upper(),
                                  self._number(node, node.expressions[0] if kind is exp.Anonymous else node.this))
        if kind is exp.Log or kind is exp.Pow:  # read as an arithmetic operator's sides are
            first = self._number(node, node.this)
            second = self._where(lambda e: e._number(node, node.expression), rows_not(first, None))
            return of_two_numbers(kind is exp.Pow, first, second)
        if kind is exp.Nullif:  # CASE WHEN a = b THEN NULL ELSE a END, as Spark SQL writes it
            equal = exp.EQ(this=node.this, expression=node.expression)
            return self._case(exp.If(this=equal, true=exp.Null(), false=node.this))
        if kind is exp.Nvl2:  # CASE WHEN a IS NOT NULL THEN b ELSE c END
            given = exp.Not(this=exp.Is(this=node.this, expression=exp.Null()))
            return self._case(exp.If(this=given, true=node.args["true"], false=node.args.get("false")))
        if kind is exp.RegexpExtract:
            return regexp_extract(node, self._text(node, node.this), self.rows)
        if kind is exp.RegexpSplit:
            return split(node, self._text(node, node.this))
        if kind is exp.ArrayContains:
            lists = self._list(node, node.this)
            return _array_contains(node, lists, self._unless_null(node.expression, lists), self.rows)
        if kind is exp.ArraySize:  # an INT, NULL for NULL (as under ANSI SQL)
            lists = self._list(node, node.this, maps=True)
            return lists if is_null_type(lists) else pc.cast(pc.list_value_length(lists), pa.int32())
        if kind is exp.MapContainsKey:
            keys = self._list(node, node.this, maps=True)
            return _array_contains(node, keys, literal_as(node.args["key"], keys), self.rows)
        if kind is exp.Bracket:
            held = self.value(node.this)
            key = node.expressions[0]
            if is_null_type(held):
                return held
            if pa.types.is_map(held.type) or pa.types.is_struct(held.type):  # a map's key or a struct's field
                return _struct_field(node, held, key.this if is_string_literal(key) else key.sql(), node.this.sql(dialect="spark"))
            if is_string_literal(key):
                raise TypeError(f"{node.sql(dialect='spark')!r} reads a map or a struct with a text key; "
                                f"{node.this.sql(dialect='spark')!r} gives {held.type} values")
            return _element(node, self._list(node, node.this), whole_literal(key), self.rows)
        if kind in (exp.Pad, exp.Initcap, exp.Reverse, exp.Translate, exp.Repeat, exp.Ascii, exp.BitLength) or (
            kind is exp.Anonymous and node.name.upper() == "OCTET_LENGTH"
        ):
            return of_text(node, self._text(node, node.expressions[0] if kind is exp.Anonymous else node.this))
        if kind in (exp.StrPosition, exp.Left, exp.Right, exp.Replace):
            return in_text(node, self._text(node, node.this))
        if kind is exp.Trim:
            return self._trim(node)
        if kind is exp.Substring:
            return self._substring(node)
        if kind is exp.Concat or kind is exp.DPipe:  # NULL if any part is NULL; a part read where none before is
            parts: list[Any] = []
            for part in node.expressions if kind is exp.Concat else (node.this, node.expression):
                parts.append(self._where(lambda e, part=part: e._text(node, part), none_null(parts)))
            if any(is_null_type(part) for part in parts):
                return pa.scalar(None, pa.null())
            return pc.binary_join_element_wise(*(as_array(part, self.rows) for part in parts), "")
        if kind is exp.Coalesce:  # CASE WHEN a IS NOT NULL THEN a ... ELSE last END: read as lazily, widened alike
            *firsts, last = (node.this, *node.expressions)
            ifs = [exp.If(this=exp.Not(this=exp.Is(this=e, expression=exp.Null())), true=e) for e in firsts]
            return self._case(exp.Case(ifs=ifs, default=last)) if ifs else self.value(last)
        raise AssertionError(f"not checked when built: {node.sql(dialect='spark')!r}")  # pragma: no cover

    def _arithmetic(self, node: Any, op: Callable[[Any, Any], Any], left: Any, right: Any, divides: bool,
                    try_: bool = False) -> Any:
        """``op`` of the values of ``left`` and ``right``, read as Spark SQL reads an
        arithmetic operator's sides: a divisor (``divides``) first, the other side
        where the one read first is not NULL, text beside a number as that number
        (with ``try_``, NULL where it is no such number, and where ``op`` overflows
        or divides by zero: Spark SQL's ``try_add`` and the like), a date and days as
        :func:`days_added`. Sides that are not numbers then are refused, as Spark
        SQL refuses them: text beside text, booleans, timestamps; beside a bare NULL
        as :func:`beside_null`."""
        import pyarrow as pa

        def in_order(first: Any, second: Any) -> tuple[Any, Any]:
            return (second, first) if divides else (first, second)

        first_node, second_node = in_order(left, right)
        first = self.value(first_node)
        second = self._unless_null(second_node, first)
        if is_null_type(first) or is_null_type(second):
            beside_null(node, in_order(first, second))
            return pa.scalar(None, pa.null())
        if any(pa.types.is_date32(side.type) for side in (first, second)):
            return days_added(node, *in_order(first, second))
        first, second = fractions_beside_fractions(*numbers_of_text(node, first, second, try_))
        operands = in_order(first, second)
        numbers_only(node, operands)
        return or_null(op, *operands, divides=divides) if try_ else op(*operands)

    def _column(self, node: Any) -> Any:
        """A field of the events, or a field of a struct field at any depth
        (``a.b.c``: the field ``c`` of the struct field ``b`` of the struct ``a``)."""
        first, *rest = node.parts
        value = self.table.column(field_named(self.table.column_names, first.name))
        for depth, part in enumerate(rest, 1):
            value = _struct_field(node, value, part.name, ".".join(p.name for p in node.parts[:depth]))
        return value

    def _case(self, node: Any) -> Any:
        """``CASE [x] WHEN .. THEN .. [ELSE ..] END`` or ``IF(test, then, else)``: the
        value of the first branch whose test is TRUE, else the ELSE value (NULL if
        none). Each branch is read in every row first, and only if that raises in
        the rows it decides alone, as Spark SQL reads it (``CASE WHEN amount <> 0
        THEN 10 % amount END`` divides by zero nowhere)."""
        from sqlglot import exp

        subject = node.this if type(node) is exp.Case else None
        if type(node) is exp.If:
            branches, default = [(node.this, node.args["true"])], node.args.get("false")
        else:
            branches, default = [(w.this, w.args["true"]) for w in node.args["ifs"]], node.args.get("default")
        try:
            tests = [self._when(subject, test) for test, _ in branches]
            values = [self.value(v) for _, v in branches]
            otherwise = None if default is None else self.value(default)
        except (ArithmeticError, ValueError):  # maybe in rows a branch does not decide
            return self._case_by_rows(subject, branches, default)
        return _chosen(node, tests, values, otherwise, self.rows)

    def _case_by_rows(self, subject: Any, branches: list[tuple[Any, Any]], default: Any) -> Any:
        """:meth:`_case`, each test read only in the rows no branch before it took,
        each value only in the rows its test takes."""
        import pyarrow as pa
        import pyarrow.compute as pc

        open_rows = pa.repeat(pa.scalar(True), self.rows)
        tests, values = [], []
        for test, value in branches:
            taken = pc.fill_null(spread(self._within(open_rows)._when(subject, test), open_rows), False)
            tests.append(taken)
            values.append(spread(self._within(taken).value(value), taken))
            open_rows = pc.and_(open_rows, pc.invert(taken))
        otherwise = None if default is None else spread(self._within(open_rows).value(default), open_rows)
        return _chosen(None, tests, values, otherwise, self.rows)

    def _number(self, node: Any, part: Any) -> Any:
        """The numbers ``part`` of ``node`` gives, text read as ``CAST(x AS DOUBLE)``
        as Spark SQL casts it for a function of numbers; NULL of no type passes."""
        import pyarrow as pa

        value = self.value(part)
        if is_text(value.type):
            value = cast_values(node, value, pa.float64(), False)
        if not (is_null_type(value) or is_number(value.type)):
            raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {value.type} values")
        return value

    def _is_nan(self, node: Any) -> Any:
        """``isnan(x)``: TRUE where ``x`` is NaN, else FALSE (never NULL: FALSE for
        NULL, and for whole numbers and decimals, which are never NaN); text is read
        as ``CAST(x AS DOUBLE)``, as Spark SQL casts it."""
        import pyarrow as pa
        import pyarrow.compute as pc

        value = self._number(node, node.this)
        if is_null_type(value) or not pa.types.is_floating(value.type):
            return pa.repeat(pa.scalar(False), self.rows)
        return pc.fill_null(pc.is_nan(as_array(value, self.rows)), False)

    def _nanvl(self, node: Any) -> Any:
        """``nanvl(x, y)``: ``x``, or ``y`` where ``x`` is NaN (read there only), as
        fractions (DOUBLE; FLOAT if both are); NULL where ``x`` is NULL::

            x      y      nanvl(x, y)
            2.5    0      2.5
            NaN    0      0.0
            NaN    NULL   NULL
            NULL   0      NULL
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        first = self._number(node, node.this)
        if is_null_type(first):
            return first
        first = contiguous(as_array(first, self.rows))
        floating = pa.types.is_floating(first.type)
        nan = contiguous(pc.fill_null(pc.is_nan(first), False)) if floating else pa.repeat(pa.scalar(False), self.rows)
        second = self._where(lambda e: e._number(node, node.expression), lambda rows: nan)
        kind = pa.float32() if first.type == second.type == pa.float32() else pa.float64()
        return pc.if_else(nan, as_type(as_array(second, self.rows), kind), as_type(first, kind))

    def _add_days(self, node: Any) -> Any:
        """``date_add(x, n)`` / ``date_sub(x, n)``: the date ``n`` days after (before)
        ``x``'s (:func:`to_date`); ``n`` an INT or smaller (text read as one), as
        Spark SQL takes it::

            x                        n     date_add(x, n)
            DATE 2024-02-28          1     2024-02-29
            2024-01-01 23:30 (UTC)   1     2024-01-02
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        days = self.value(node.expression)
        if is_text(days.type):
            days = cast_values(node, days, pa.int32(), False)
        if not (is_null_type(days) or pa.types.is_integer(days.type) and days.type.bit_width <= 32):
            raise TypeError(f"{node.sql(dialect='spark')!r} adds INT days, not {days.type} values")
        start = to_date(node, self.value(node.this))
        if is_null_type(start) or is_null_type(days):
            return pa.scalar(None, pa.date32())
        return pc.add_checked(days_since_epoch(start), pc.cast(days, pa.int32())).cast(pa.date32())

    def _extreme(self, node: Any, greatest: bool) -> Any:
        """``greatest(a, b, ...)`` / ``least``: the greatest (least) value that is not
        NULL, in Spark SQL's order (NaN above every number; of equal values the
        first); NULL if all are. Every value is read. Numbers are widened to one
        type, as Spark SQL widens them; text beside numbers is refused, as there::

            a      b      greatest(a, b)   least(a, b)
            1      2.5    2.5              1.0
            NULL   2      2                2
            NaN    2.5    NaN              2.5
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        values = [v for v in (self.value(p) for p in (node.this, *node.expressions)) if not is_null_type(v)]
        if not values:
            return pa.scalar(None, pa.null())
        kind = _widest(node, {v.type for v in values})
        floating = pa.types.is_floating(kind)
        result = None
        for value in values:
            value = as_type(contiguous(as_array(value, self.rows)), kind)
            if result is None:
                result = value
                continue
            beyond = (pc.greater if greatest else pc.less)(value, result)
            if floating:  # NaN is above every number: the greatest, never the least
                nan, was_nan = pc.is_nan(value), pc.is_nan(result)
                beyond = pc.or_(beyond, pc.and_(nan, pc.invert(was_nan)) if greatest else pc.and_(was_nan, pc.invert(nan)))
            result = pc.if_else(pc.or_(pc.is_null(result), pc.fill_null(beyond, False)), value, result)
        return result

    def _within(self, rows: Any) -> Evaluator:
        """An evaluator over the ``rows`` (a mask) of this one's table."""
        return Evaluator(self.table.filter(rows))

    def _when(self, subject: Any, test: Any) -> Any:
        """A branch's test: ``test`` itself, or ``subject = test`` (``CASE x WHEN ...``)."""
        import pyarrow.compute as pc

        if subject is None:
            return self._boolean(test, "WHEN")
        return _compare(test, pc.equal, self.value(subject), self.value(test), self.rows)

    def _trim(self, node: Any) -> Any:
        """``trim`` / ``ltrim`` / ``rtrim`` and ``TRIM([BOTH | LEADING | TRAILING] 'cs' FROM
        text)``: spaces (Spark SQL's default, not tabs) or the given characters."""
        import pyarrow.compute as pc

        text = self._text(node, node.this)
        if is_null_type(text):
            return text
        characters = node.expression.this if node.expression is not None else " "
        trim = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(str(node.args.get("position") or ""), pc.utf8_trim)
        return trim(text, characters)

    def _substring(self, node: Any) -> Any:
        """``substring(text, pos[, len])`` as Spark SQL counts: from 1, a negative
        position from the end, position 0 as 1, a length below 1 giving ''."""
        import pyarrow as pa

        text = self._text(node, node.this)
        if is_null_type(text):
            return text
        start = int(node.args["start"].sql())
        length = int(node.args["length"].sql()) if node.args.get("length") is not None else None

        def cut(value: str) -> str:
            first = start - 1 if start > 0 else len(value) + start if start < 0 else 0
            end = len(value) if length is None else first + length
            first = max(first, 0)
            return value[first:end] if first < end else ""

        return pa.array([None if v is None else cut(v) for v in as_array(text, self.rows).to_pylist()], pa.string())

    def _list(self, node: Any, part: Any, maps: bool = False) -> Any:
        """The arrays ``part`` of ``node`` gives (as one Arrow list array), or with
        ``maps`` the keys of the maps it gives; NULL of no type passes; anything else
        is refused."""
        import pyarrow as pa

        value = self.value(part)
        if is_null_type(value):
            return value
        if maps and pa.types.is_map(value.type):
            value = contiguous(as_array(value, self.rows))
            return pa.ListArray.from_arrays(value.offsets, value.keys, mask=value.is_null())
        if not (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)
                or pa.types.is_fixed_size_list(value.type) or pa.types.is_list_view(value.type)):
            raise TypeError(f"{node.sql(dialect='spark')!r} reads arrays; {part.sql(dialect='spark')!r} gives "
                            f"{value.type} values")
        value = as_array(value, self.rows)
        value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
        return value if pa.types.is_list(value.type) else value.cast(pa.list_(value.type.value_type))

    def _text(self, node: Any, part: Any) -> Any:
        """The text ``part`` of ``node`` gives: text as it is; whole numbers, booleans
        and dates as Spark SQL casts them to text (``12``, ``true``, ``2024-01-31``);
        NULL of no type passes. Other values (fractions, whose text Spark writes
        as Java does, timestamps) are refused."""
        import pyarrow as pa
        import pyarrow.compute as pc

        value = self.value(part)
        kind = value.type
        if is_null_type(value) or is_text(kind):
            return value
        if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_date32(kind):
            return pc.cast(value, pa.string())
        raise TypeError(f"{node.sql(dialect='spark')!r} reads text; {part.sql(dialect='spark')!r} gives {kind} values")

    def _chain(self, node: Any) -> Any:
        """``a AND b AND c ...`` (or ``OR``, Kleene's): each operand read where those
        before it do not decide (FALSE for ``AND``, TRUE for ``OR``), one after
        another. A chain parses as a tree as deep as it is long (``(a OR b) OR c``),
        so it is read as a list, not by recursion, and a rule of thousands of terms
        runs::

            a       b       a OR b    b read
            TRUE    -       TRUE      no
            FALSE   NULL    NULL      yes
            NULL    TRUE    TRUE      yes
        """
        import pyarrow.compute as pc
        from sqlglot import exp

        kind = type(node)
        operator, decided, join = ("AND", False, pc.and_kleene) if kind is exp.And else ("OR", True, pc.or_kleene)
        operands = []
        while type(node) is kind:
            operands.append(node.expression)
            node = node.this
        result = self._boolean(node, operator)
        for operand in reversed(operands):
            result = join(result, self._where_open(operand, operator, result, decided))
        return result

    def _where_open(self, node: Any, operator: str, left: Any, decided: bool) -> Any:
        """The test ``node``, the right side of ``AND`` (``decided`` FALSE) or ``OR``
        (TRUE) whose left side gives ``left``: read where ``left`` is not ``decided``."""
        return self._where(lambda e: e._boolean(node, operator), rows_not(left, decided))

    def _unless_null(self, node: Any, first: Any) -> Any:
        """The value of ``node``, an operand of an operator whose other operand, read
        first, gives ``first``: read where ``first`` is not NULL (elsewhere the
        answer is NULL), as Spark SQL skips it (``score > 10 div amount`` divides
        by zero in no row where ``score`` is NULL)."""
        return self._where(lambda e: e.value(node), rows_not(first, None))

    def _where(self, read: Callable[[Evaluator], Any], open_rows: Callable[[int], Any]) -> Any:
        """``read(evaluator)`` of a part Spark SQL reads only in some rows, the
        ``open_rows(rows)`` (a mask): as a division by zero in a row it skips is no
        error there, read in every row first (the others' values then go unused),
        and only if that raises in the open rows alone (NULL elsewhere), over none
        if none is open, so that a part of the wrong type is refused whatever the
        rows."""
        try:
            return read(self)
        except (ArithmeticError, ValueError):  # maybe in rows that are not open
            rows = open_rows(self.rows)
        return spread(read(self._within(rows)), rows)

    def _in(self, node: Any) -> Any:
        """``x IN (a, b, ...)``: TRUE where ``x`` equals an item, else NULL where ``x``
        or an item is NULL, else FALSE. As Spark SQL reads it, an item is read only
        where ``x`` is not NULL and equals no item before it (``amount IN (0, 10 div
        amount)`` divides by zero nowhere); in every row first, as :meth:`_where`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        numbers = [self.value(i) for i in node.expressions if is_number_literal(i)]  # the same in every row
        left = widened_for_text(self.value(node.this), numbers)
        try:
            result: Any = pa.scalar(False)
            for item in node.expressions:  # an OR of equalities: SQL's NULL rules for IN
                result = pc.or_kleene(result, _compare(node, pc.equal, left, self.value(item), self.rows))
            return result
        except (ArithmeticError, ValueError):  # maybe in rows an item before decides
            pass
        rows = rows_not(left, None)(self.rows)
        result = pc.if_else(rows, pa.scalar(False), pa.scalar(None, pa.bool_()))
        for item in node.expressions:
            within = self._within(rows)
            value = widened_for_text(within.value(node.this), numbers)
            equal = spread(_compare(node, pc.equal, value, within.value(item), within.rows), rows)
            result = pc.or_kleene(result, equal)  # NULL where not read: there TRUE or NULL already
            rows = pc.and_(rows, pc.invert(pc.fill_null(equal, False)))
        return result

    def _side(self, node: Any, op: Callable[..., Any], bound: str) -> Any:
        """``x op bound`` of ``x BETWEEN low AND high`` (``bound`` "low" or "high")."""
        left = self.value(node.this)
        return _compare(node, op, left, self._unless_null(node.args[bound], left), self.rows)

    def _boolean(self, node: Any, operator: str) -> Any:
        import pyarrow as pa

        value = self.value(node)
        if is_null_type(value):
            return nulls(self.rows)
        if not pa.types.is_boolean(value.type):
            raise TypeError(f"{operator} needs TRUE or FALSE: {node.sql(dialect='spark')!r} gives {value.type} values")
        return value


@functools.cache
def _comparison_operators() -> dict[type, Callable[..., Any]]:
    """The comparison operators, and how Arrow compares (NULL beside NULL)."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
        exp.GT: pc.greater, exp.GTE: pc.greater_equal,
    }


@functools.cache
def _arithmetic_operators() -> dict[type, Callable[..., Any]]:
    """The arithmetic operators, and how each is computed (:mod:`~statemachines.library.sql_numbers`)."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.Add: decimals_or("+", pc.add_checked), exp.Sub: decimals_or("-", pc.subtract_checked),
        exp.Mul: decimals_or("*", pc.multiply_checked), exp.Div: divide,
        exp.IntDiv: integer_divide, exp.Mod: remainder_of,
    }


@functools.cache
def _one_call_functions() -> dict[type, Callable[..., Any]]:
    """The functions of one argument computed by one call."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.Lower: functools.partial(case_mapped, str.lower), exp.Upper: functools.partial(case_mapped, str.upper),
        exp.Abs: pc.abs_checked, exp.Length: pc.utf8_length,
    }


def _struct_field(node: Any, value: Any, name: str, holder: str) -> Any:
    """The field ``name`` of the struct values ``value`` (of the part ``holder`` of
    ``node``), matched as Spark matches field names; of map values, the value of the
    key ``name`` (as the map's key type; NULL where a map lacks it, as Spark SQL
    reads ``attrs['country']`` and ``attrs.country``)::

        attrs                  attrs['country']
        {country: NO, x: 1}    NO
        {}                     NULL
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(value):  # NULL in every row, of no type
        return value
    if pa.types.is_map(value.type):
        return pc.map_lookup(value, read_as(name, value.type.key_type), "first")
    if not pa.types.is_struct(value.type):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads a field of {holder!r}, which gives "
                        f"{value.type} values, not structs")
    names = [f.name for f in value.type]
    return pc.struct_field(value, field_named(names, name, f"{node.sql(dialect='spark')!r}", holder))


def _chosen(node: Any, tests: list[Any], values: list[Any], otherwise: Any, rows: int) -> Any:
    """Each row's value of the first of ``values`` whose test is TRUE, else of
    ``otherwise`` (NULL if None): of one type, whole numbers of several widths as
    int64, with floating numbers as float64, else with decimals as a decimal that
    holds each (as Spark SQL widens them). Text beside whole or floating numbers is
    read as their number, as Spark SQL casts it, in the rows its branch is chosen
    only (``CASE WHEN amount > 0 THEN 1 ELSE kind END``: text that is no number is
    an error where the ELSE is chosen)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    given = [*values, *([] if otherwise is None else [otherwise])]
    kinds = {v.type for v in given if not is_null_type(v)}
    if not kinds:
        return pa.scalar(None, pa.null())
    numbers = {k for k in kinds if not is_text(k)}
    if len(kinds) == 1:
        kind = next(iter(kinds))
    elif numbers and all(pa.types.is_integer(k) for k in numbers):
        kind = pa.int64()
    elif numbers and all(is_number(k) for k in numbers) and any(pa.types.is_floating(k) for k in numbers):
        kind = pa.float64()  # decimals too, as Spark SQL widens them beside a DOUBLE
    elif numbers == kinds and all(pa.types.is_decimal(k) or pa.types.is_integer(k) for k in kinds):
        kind = wide_decimal(kinds)
    else:
        shown = "" if node is None else f"{node.sql(dialect='spark')!r}: "
        raise TypeError(f"{shown}its branches give {', '.join(sorted(map(str, kinds)))} values, not one type")
    conditions = [pc.fill_null(contiguous(as_array(t, rows)), False) for t in tests]
    taken = pa.repeat(pa.scalar(False), rows)
    chosen = []  # each branch's rows: its test TRUE, none before it TRUE
    for test in conditions:
        chosen.append(pc.and_(test, pc.invert(taken)))
        taken = pc.or_(taken, test)
    chosen.append(pc.invert(taken))

    def typed(value: Any, rows_chosen: Any) -> Any:
        if is_null_type(value):
            return pa.nulls(rows, kind)
        value = as_array(value, rows)
        if value.type not in numbers and kind not in kinds - numbers:  # text read as numbers where chosen
            value = pc.utf8_trim_whitespace(pc.if_else(rows_chosen, value, pa.scalar(None, value.type)))
        return contiguous(as_type(value, kind))

    struct = pc.make_struct(*conditions, field_names=[f"_{i}" for i in range(len(conditions))])
    return pc.case_when(struct, *(typed(v, c) for v, c in zip(given, chosen, strict=False)))


def _widest(node: Any, kinds: set[Any]) -> Any:
    """The one type values of ``kinds`` are compared in, as Spark SQL widens them for
    ``greatest`` / ``least``: the widest whole numbers, fractions (FLOAT if all are),
    or a decimal that holds each; else all of one type (text, booleans, dates)."""
    import pyarrow as pa

    if len(kinds) == 1:
        return next(iter(kinds))
    if all(is_number(k) for k in kinds):
        floats = {k for k in kinds if pa.types.is_floating(k)}
        if floats:
            return pa.float32() if floats == {pa.float32()} and not any(pa.types.is_decimal(k) for k in kinds) else (
                pa.float64()
            )
        if all(pa.types.is_integer(k) for k in kinds):
            return max(kinds, key=lambda k: (k.bit_width, pa.types.is_signed_integer(k)))
        return wide_decimal(kinds)
    raise TypeError(f"{node.sql(dialect='spark')!r} takes values of one type, not {', '.join(sorted(map(str, kinds)))}")


def _array_contains(node: Any, lists: Any, item: Any, rows: int) -> Any:
    """``array_contains(a, x)``: TRUE where an element of ``a`` equals ``x`` (compared
    as ``=`` compares them), else NULL where one is NULL, else FALSE; NULL where ``a``
    or ``x`` is NULL, as Spark SQL gives it (text beside numbers refused, as there)::

        a              array_contains(a, 'x')
        ['x', NULL]    TRUE
        ['y', NULL]    NULL
        []             FALSE
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(lists) or is_null_type(item):
        return nulls(rows)
    elements = lists.type.value_type
    if not pa.types.is_null(elements) and is_text(elements) != is_text(item.type):  # Spark refuses the query
        raise TypeError(f"{node.sql(dialect='spark')!r}: the arrays hold {elements} values, the item is {item.type}")
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    item = as_array(item, rows)
    equal = _compare(node, pc.equal, pc.list_flatten(lists), item.take(pa.array(parents, pa.int64())), len(parents))
    equal = as_array(equal, len(parents))
    yes = equal.fill_null(False).to_numpy(zero_copy_only=False)
    unknown = equal.is_null().to_numpy(zero_copy_only=False)
    found = np.bincount(parents[yes], minlength=rows) > 0
    maybe = np.bincount(parents[unknown], minlength=rows) > 0
    answer = pa.array(found, mask=~found & maybe)
    return pc.if_else(pc.or_(pc.is_null(lists), pc.is_null(item)), pa.scalar(None, pa.bool_()), answer)


def _element(node: Any, lists: Any, index: int, rows: int) -> Any:
    """``a[i]`` (counted from 0) or ``element_at(a, i)`` (from 1, from the end if
    negative): the element, NULL for NULL ``a``; an index beyond an array is an error
    in its row, as under ANSI SQL (``try_element_at``: NULL), and so is ``element_at``'s 0."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(lists):
        return lists
    shown = node.sql(dialect="spark")
    from_one, safe = node.args.get("offset") == 1, bool(node.args.get("safe"))
    given = pc.is_valid(lists).to_numpy(zero_copy_only=False)
    if from_one and index == 0 and given.any():
        raise ValueError(f"{shown}: element_at counts from 1 (or from -1 at the end), not from 0")
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
    position = (index - 1 if index > 0 else lengths + index) if from_one else np.full(len(lists), index)
    inside = given & (position >= 0) & (position < lengths)
    if not safe and (given & ~inside).any():
        shortest = int(lengths[given & ~inside].min())
        raise ValueError(f"{shown}: index {index} is beyond an array of {shortest} elements")
    starts = lists.offsets.to_numpy(zero_copy_only=False)[:-1]
    return lists.values.take(pa.array(np.where(inside, starts + position, 0), pa.int64(), mask=~inside))


def _is_null(value: Any, rows: int) -> Any:
    import pyarrow.compute as pc

    return pc.is_null(as_array(value, rows))


def _compare(node: Any, op: Callable[..., Any], left: Any, right: Any, rows: int) -> Any:
    """``op`` of two values of the comparison ``node``; NULL (of no type) on either
    side gives NULL."""
    if is_null_type(left) or is_null_type(right):
        return nulls(rows)
    import pyarrow as pa

    left, right = fractions_beside_fractions(*numbers_of_text(node, left, right))
    left, right = literal_like(node, left, right), literal_like(node, right, left)
    left, right = one_clock(left, right)
    try:
        return op(left, right)
    except pa.ArrowNotImplementedError:
        raise TypeError(f"{node.sql(dialect='spark')!r} cannot compare {left.type} with {right.type}") from None
