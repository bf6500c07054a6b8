"""Conditions as SQL expressions over an event's fields, evaluated a column at a time.

``Expression("kind = 'fail' AND amount > 100")`` is a condition a pattern step can
use in place of a function. It reads the event's fields by name (a NamedTuple's
fields locally, a struct's on Spark) and is evaluated for a whole batch of events at
once with Arrow compute, the same evaluator on every runtime. SQL's three-valued
logic holds: a comparison with NULL is NULL, ``AND`` / ``OR`` are Kleene's, and a
condition that is NULL is not met::

    event (kind, amount)    kind = 'fail' AND amount > 100    met
    ('fail', 250.0)         TRUE                               yes
    ('fail', None)          NULL                               no
    ('ok', None)            FALSE                              no
    (None, 250.0)           NULL                               no

A part is read only in the rows Spark SQL reads it in, so that an error there (a
division by zero) is none elsewhere: ``AND`` / ``OR``'s right side where the left
does not decide (``amount <> 0 AND 10 % amount = 0``), a comparison's or an
arithmetic operator's second operand where the first is not NULL (a division reads
its divisor first), ``IN``'s items until one equals, ``BETWEEN``'s upper bound where
the lower holds, ``CASE`` / ``IF`` / ``coalesce``'s branches where chosen,
``concat``'s parts where none before is NULL.

A NaN compares as it does in Python (and unlike Spark SQL, where NaN equals NaN and
exceeds every number): ``amount > 100``, ``amount < 100`` and ``amount = amount``
are all false for it, so an expression condition and the same test written as a
function agree.

The language (Spark SQL's syntax, parsed by sqlglot): field names (``a.b`` reads the
field ``b`` of the struct ``a``), string, number, boolean and NULL literals,
``= == <> != < <= > >= <=>``, ``IS [NOT] DISTINCT FROM``, ``AND OR NOT``,
``IS [NOT] NULL`` (``isnull(x)``, ``isnotnull(x)``), ``IS [NOT] TRUE`` / ``FALSE``, ``[NOT] IN (...)``,
``[NOT] BETWEEN``, ``[NOT] LIKE`` / ``ILIKE`` (``ANY`` / ``SOME`` / ``ALL`` of several patterns too), ``RLIKE`` / ``regexp`` (RE2's regular expressions,
which Java's simple ones are), ``+ - * / div %`` (a whole-number literal an INT where it
fits, as Spark types it: an INT field's arithmetic with it overflows, an error, as
Spark's does; one with a point a DECIMAL of its digits, with an exponent a DOUBLE), unary minus, ``CASE [x] WHEN ..
THEN .. [ELSE ..] END`` and ``IF(test, then, else)`` (a branch read only in the rows
it decides, as ``AND`` / ``OR``; text beside numbers read as a number there), ``lower upper abs length coalesce startswith
endswith contains trim ltrim rtrim substring substr concat || isnan nanvl round floor
ceil greatest least year quarter month day dayofmonth dayofyear dayofweek weekofyear
hour minute second to_date datediff date_add date_sub sqrt sign nullif nvl2 instr
locate left right replace lpad rpad btrim initcap reverse translate repeat ascii
octet_length bit_length regexp_extract split array_contains size cardinality element_at
try_element_at unix_timestamp date_trunc trunc add_months last_day exp ln log log10
log2 pow power cbrt bround pmod positive negative e pi equal_null nullifzero zeroifnull
decode try_add try_subtract try_multiply try_divide try_mod`` (a logarithm of zero or less NULL, ``pow`` as Java's;
``TRIM([BOTH | LEADING | TRAILING] 'cs' FROM text)``; whole numbers, booleans and dates read as
text where text is needed, as Spark SQL casts them; fractions are refused there,
their text being the JVM's), and typed literals (``DATE '2024-01-31'``,
``TIMESTAMP '2024-01-31 09:00:00'``, ``TIMESTAMP_NTZ '...'``, ``10L``, ``1.5D``,
``CAST('7' AS INT)``), and ``CAST`` / ``TRY_CAST`` of values to numbers, text,
booleans, dates and timestamps, as Spark's ANSI cast (``CAST(code AS INT) > 10``: text that is
no whole number an error, NULL with ``TRY_CAST``; fractions truncated toward zero to
whole numbers, rounded half up to decimals; text of whole numbers, booleans and
dates only; dates and timestamps to one another as in a UTC session). Anything else is refused when the pattern is built, naming
what is not supported, and so is a test that can never be TRUE or
FALSE (a number, text or arithmetic as the condition or as a side of ``AND``, ``OR``,
``NOT``). A field is typed by the events (one NULL in all of them by its record
class's annotation): one that is not boolean where a test is needed rejects each
event it is read for (``condition_failed``), naming it::

    condition                  built     an event Login('ok', 1)
    amount + 1                 refused   -
    kind = 'ok' AND amount     yes       rejected: AND needs TRUE or FALSE: 'amount' gives int64 values
    kind = 'ok' AND amount > 0 yes       met

Field names are matched as Spark matches them by default, ignoring case (``KIND``
reads ``kind``; a name two fields share but for case is refused as ambiguous). A
string literal compared with a number, a date, a timestamp or a boolean is read as
that type, as Spark SQL casts it (``amount > '10'``, ``at >= '2024-01-31'``); one
that does not read as it (``amount = 'abc'``, ``amount > '1.5'`` for whole numbers)
rejects each event the condition is asked about, saying so. A text field beside a
number, compared or in arithmetic, is read as that number's type, whole numbers as
int64 and others as float64 (``code > 10`` reads ``' 20 '`` as 20), in the rows it is
read in; an event whose text is no such number is rejected. Text reads as a date or
a timestamp in the forms Spark's cast reads (``2024-1-5 9:30``, ``...T09:30:00.5+01:00``,
``... America/New_York``), a time alone not. Text read as a timestamp
without an offset is UTC where the field's timestamps have a zone (Spark's, in the
sessions this project makes); with one, where they have none, it is its wall clock,
the offset ignored (as Spark's cast to ``TIMESTAMP_NTZ``). A ``TIMESTAMP`` literal is
an instant, a ``TIMESTAMP_NTZ`` one a wall clock, and either compared with the other
kind of field reads the wall clock as UTC::

    event (amount, at)           condition                      met
    (20, 2024-01-31 10:00)       Amount > '10'                  yes
    (20, 2024-01-31 10:00)       at >= DATE '2024-02-01'        no
    (20, 2024-01-31 10:00)       at >= '2024-01-31 09:30'       yes
    (20, 2024-01-31 10:00)       amount > '1.5'                 rejected: '1.5' is no int64
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

import attrs

from statemachines.errors import DefinitionError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Expression", "records_table"]


@attrs.frozen(eq=False)
class Expression:
    """A SQL condition over an event's fields; equal to another of the same text."""

    sql: str
    fields: tuple[str, ...] = attrs.field(init=False)  # the top-level fields it reads
    _tree: Any = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        try:
            import sqlglot
            from sqlglot import exp
        except ImportError:
            raise DefinitionError(
                "SQL conditions need sqlglot and pyarrow: pip install 'statemachines[sql]'"
            ) from None

        if not isinstance(self.sql, str) or not self.sql.strip():
            raise DefinitionError(f"an expression condition needs SQL text, got {self.sql!r}")
        try:
            tree = _normalised(sqlglot.parse_one(self.sql, read=_dialect()))
        except sqlglot.errors.ParseError as error:
            why = error.errors[0].get("description") if error.errors else str(error)
            raise DefinitionError(f"cannot parse the condition {self.sql!r}: {why}") from None
        _check(tree, self.sql)
        names = [c.parts[0].name for c in tree.find_all(exp.Column)]
        object.__setattr__(self, "fields", tuple(dict.fromkeys(names)))
        object.__setattr__(self, "_tree", tree)

    def __eq__(self, other: object) -> bool:
        return type(other) is Expression and other.sql == self.sql

    def __hash__(self) -> int:
        return hash((Expression, self.sql))

    def __getstate__(self) -> dict[str, str]:
        return {"sql": self.sql}

    def __setstate__(self, state: dict[str, str]) -> None:
        object.__setattr__(self, "sql", state["sql"])
        self.__attrs_post_init__()

    def evaluate(self, table: pa.Table) -> pa.BooleanArray:
        """Whether each row meets the condition (NULL counts as not met)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for name in self.fields:
            _field(table.column_names, name, f"the condition {self.sql!r} reads {name!r}", "the events")
        plain = pa.schema([field.with_type(_plain_text(field.type)) for field in table.schema])
        result = _Evaluator(table if plain == table.schema else table.cast(plain)).value(self._tree)
        if isinstance(result, pa.Scalar):
            result = pa.repeat(result, table.num_rows)
        if pa.types.is_null(result.type):
            result = result.cast(pa.bool_())
        if not pa.types.is_boolean(result.type):
            raise TypeError(f"the condition {self.sql!r} gives {result.type} values, not TRUE or FALSE")
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        return pc.fill_null(result, False)


def records_table(symbols: Sequence[Any], names: Sequence[str], arrow_type: Any) -> pa.Table:
    """Records (tuples in field order) as a table of their fields; ``arrow_type`` (a
    struct) gives the fields' types, else Arrow infers them from the values, and a
    field that is NULL in every record has the type its class declares (``amount:
    int | None`` in a NamedTuple: int64), as a struct column's field has on Spark."""
    import pyarrow as pa

    if arrow_type is not None:
        struct = pa.array(symbols, type=arrow_type)
        return pa.Table.from_arrays(struct.flatten(), names=[f.name for f in arrow_type])
    columns = [pa.array(_field_values([s[i] for s in symbols])) for i in range(len(names))]
    if any(_holds_null_type(c.type) for c in columns) and symbols:
        declared = _declared_types(type(symbols[0]))
        columns = [c.cast(declared.get(name, c.type)) if _holds_null_type(c.type) else c
                   for name, c in zip(names, columns, strict=True)]
    return pa.Table.from_arrays(columns, names=list(names))


def _field_values(values: list[Any]) -> list[Any]:
    """A field's values as Arrow reads them: a record among them (a NamedTuple, as
    ``city: City``) as a mapping of its fields, at any depth, so that it is a struct
    as on Spark; a tuple of items (``tags: tuple[str, ...]``) stays a list."""
    def plain(value: Any) -> Any:
        if isinstance(value, tuple) and _is_record_class(type(value)):
            return {name: plain(v) for name, v in zip(type(value)._fields, value, strict=True)}
        return value

    if not any(isinstance(v, tuple) for v in values):
        return values
    return [plain(v) for v in values]


def _is_record_class(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")


def _holds_null_type(arrow_type: Any) -> bool:
    """Whether ``arrow_type`` is Arrow's type of NULLs alone, or a struct with such a field."""
    import pyarrow as pa

    return pa.types.is_null(arrow_type) or pa.types.is_struct(arrow_type) and any(
        _holds_null_type(f.type) for f in arrow_type
    )


@functools.cache
def _declared_types(record_class: type) -> dict[str, pa.DataType]:
    """The Arrow types of a record class's annotated fields (``x: int | None``: int64)
    that are one of Python's plain types, or a record class whose fields all are
    (``city: City``: a struct); the others are left out."""
    import pyarrow as pa

    plain = {
        int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_(), bytes: pa.binary(),
        datetime.datetime: pa.timestamp("us"), datetime.date: pa.date32(), decimal.Decimal: pa.decimal128(38, 18),
    }
    try:
        hints = get_type_hints(record_class)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve types nothing
        return {}
    declared = {}
    for name, hint in hints.items():
        kinds = [k for k in get_args(hint) if k is not type(None)] if get_args(hint) else [hint]
        if len(kinds) == 1 and kinds[0] in plain:
            declared[name] = plain[kinds[0]]
        elif len(kinds) == 1 and _is_record_class(kinds[0]) and kinds[0] is not record_class:
            inner = _declared_types(kinds[0])
            if set(inner) == set(kinds[0]._fields):
                declared[name] = pa.struct([(field, inner[field]) for field in kinds[0]._fields])
    return declared


# -- checking the tree -----------------------------------------------------------------------


def _supported() -> frozenset[type]:
    from sqlglot import exp

    return frozenset({
        exp.Column, exp.Identifier, exp.Dot, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
        exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ,
        exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, *_text_tests(),
        exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg,
        exp.Lower, exp.Upper, exp.Abs, exp.Length, exp.Coalesce, exp.Case, exp.If,
        exp.Trim, exp.Substring, exp.Concat, exp.DPipe, exp.IsNan, exp.Nanvl,
        exp.Greatest, exp.Least, exp.Round, exp.Floor, exp.Ceil, *_date_parts(),
        exp.TsOrDsToDate, exp.TsOrDsAdd, exp.DateDiff, exp.Var,  # a unit, checked in _check
        exp.Sqrt, exp.Sign, exp.Exp, exp.Ln, exp.Log, exp.Pow, exp.Cbrt, exp.Anonymous,  # named in _check
        exp.Nullif, exp.Nvl2, exp.StrPosition, exp.Left, exp.Right, exp.Replace, exp.RegexpExtract,
        exp.ArrayContains, exp.ArraySize, exp.Bracket, exp.MapContainsKey, exp.RegexpSplit, exp.Pad, exp.Initcap, exp.Reverse, exp.Translate,
        exp.Repeat, exp.Ascii, exp.BitLength, exp.StrToUnix, exp.TimestampTrunc, exp.DateTrunc, exp.AddMonths, exp.LastDay,
        exp.Cast, exp.TryCast, exp.DataType, exp.DataTypeParam,  # the types checked in _check
        exp.Negative, exp.Pi, exp.SafeAdd, exp.SafeSubtract, exp.SafeMultiply, exp.SafeDivide,
    })


def _check(tree: Any, sql: str) -> None:
    from sqlglot import exp

    supported = _supported()
    for cast in tree.find_all(exp.Cast):  # TryCast too
        if not isinstance(cast.this, exp.Literal):
            if not _castable(_arrow_type(cast.to)):
                raise DefinitionError(
                    f"the condition {sql!r} uses {cast.sql(dialect='spark')!r}: expression conditions cast "
                    f"values to numbers, text, booleans, dates or timestamps only; write it as a function condition instead"
                )
            continue
        try:
            _typed_literal(cast)
        except ValueError as error:
            raise DefinitionError(f"the condition {sql!r} uses {cast.sql(dialect='spark')!r}: {error}") from None
    for node in tree.walk():
        kind = type(node)
        if kind not in supported:
            raise DefinitionError(
                f"the condition {sql!r} uses {node.sql(dialect='spark')!r} ({kind.__name__}), which "
                f"expression conditions do not support; write it as a function condition instead"
            )
        if kind is exp.Is and not isinstance(node.expression, exp.Null | exp.Boolean):
            raise DefinitionError(f"the condition {sql!r}: IS takes NULL, TRUE or FALSE ({node.sql(dialect='spark')!r})")
        if kind in _text_tests():
            _check_text_test(node, sql)
        if kind is exp.Trim and node.expression is not None and not _is_string_literal(node.expression):
            raise DefinitionError(f"the condition {sql!r}: write {node.sql(dialect='spark')!r} as "
                                  f"TRIM([BOTH | LEADING | TRAILING] 'characters' FROM text)")
        if kind is exp.Substring and not all(
            isinstance(node.args.get(bound), exp.Literal | exp.Neg | type(None)) for bound in ("start", "length")
        ):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes whole-number "
                                  f"literals as its position and length")
        if kind is exp.In and not node.expressions:
            raise DefinitionError(f"the condition {sql!r}: IN takes one value or more")
        if kind is exp.Between and node.args.get("symmetric"):
            raise DefinitionError(f"the condition {sql!r}: Spark SQL has no BETWEEN SYMMETRIC; write "
                                  f"x BETWEEN least(a, b) AND greatest(a, b)")
        if kind in (exp.Greatest, exp.Least) and not node.expressions:
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes two values or more")
        if kind is exp.Anonymous and node.name.upper() not in _NAMED:
            raise DefinitionError(
                f"the condition {sql!r} uses {node.sql(dialect='spark')!r}, a function expression conditions do "
                f"not support; write it as a function condition instead"
            )
        if kind is exp.Anonymous and len(node.expressions) not in _NAMED[node.name.upper()]:
            counts = _NAMED[node.name.upper()]
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes "
                                  f"{' or '.join(map(str, counts))} argument{'' if counts == (1,) else 's'}")
        if kind is exp.Anonymous and node.name.upper() == "BROUND" and _whole_literal(_scale_of(node)) is None:
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its scale")
        if kind in (exp.RegexpLike, exp.RegexpExtract, exp.RegexpSplit) and _is_string_literal(node.expression) and (
            _POSIX_CLASS.search(node.expression.this)
        ):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} uses a POSIX class such as "
                                  f"[:alpha:], which Java's regular expressions (and so Spark SQL) read as the "
                                  f"characters it lists; write [a-zA-Z] or \\p{{L}} instead")
        if kind is exp.RegexpExtract:
            _check_extract(node, sql)
        if kind is exp.RegexpSplit:
            _check_split(node, sql)
        if kind in (exp.Pad, exp.Initcap, exp.Translate, exp.Repeat):
            _check_text_function(node, sql)
        if kind in (exp.StrToUnix, exp.TimestampTrunc, exp.DateTrunc, exp.AddMonths):
            _check_time_function(node, sql)
        if kind is exp.Bracket and (len(node.expressions) != 1 or _whole_literal(node.expressions[0]) is None
                                    and not _is_string_literal(node.expressions[0])):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its index, or a text literal as a map's key or a struct's field")
        if kind is exp.MapContainsKey and not isinstance(node.args.get("key"), exp.Literal):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a literal as its key")
        if kind is exp.Round and _whole_literal(node.args.get("decimals")) is None:
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its scale")
        if kind is exp.TsOrDsToDate and node.args.get("format"):
            raise DefinitionError(f"the condition {sql!r} uses {node.sql(dialect='spark')!r}: expression conditions "
                                  f"read text as dates as CAST does (no format); write it as a function condition instead")
        if kind is exp.Var and not (
            isinstance(node.parent, exp.TsOrDsAdd | exp.DateDiff) and node.name.upper() == "DAY"
            or isinstance(node.parent, exp.TimestampTrunc)
        ):
            raise DefinitionError(f"the condition {sql!r} uses {node.parent.sql(dialect='spark')!r}: expression "
                                  f"conditions add and count days only; write it as a function condition instead")
        if kind in (exp.StrPosition, exp.Replace) and (
            not all(_is_string_literal(part) for part in _looked_for(node))
            or node.args.get("position") is not None
        ):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes string literals as "
                                  f"what it looks for and puts (and no start position)")
        if kind in (exp.Left, exp.Right) and _whole_literal(node.expression) is None:
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its length")
        if kind in (exp.Floor, exp.Ceil) and (node.args.get("decimals") or node.args.get("to")):
            raise DefinitionError(f"the condition {sql!r} uses {node.sql(dialect='spark')!r}: expression conditions "
                                  f"take floor and ceil of one value (no scale); write it as a function condition instead")
    operands = (part for node in tree.find_all(exp.And, exp.Or, exp.Not) for part in node.iter_expressions())
    for test, name in [(tree, "it"), *((part, None) for part in operands)]:
        while isinstance(test, exp.Paren):
            test = test.this
        gives = _never_a_test(test)
        if gives:
            name = name or repr(test.sql(dialect="spark"))
            raise DefinitionError(f"the condition {sql!r} is not a test: {name} gives {gives}, not TRUE or FALSE")


_POSIX_CLASS = re.compile(r"\[:\^?[a-z]+:\]")  # [:alpha:] inside a bracket: RE2's class, Java's list of characters


def _never_a_test(node: Any) -> str | None:
    """What a node gives that is never TRUE or FALSE ("numbers", "text"), or None: a
    field or a function of fields may be boolean, known only when events come."""
    from sqlglot import exp

    if isinstance(node, exp.Literal):
        return "text" if node.is_string else "numbers"
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.IntDiv | exp.Mod | exp.Neg | exp.Negative | exp.Pi
                  | exp.SafeAdd | exp.SafeSubtract | exp.SafeMultiply | exp.SafeDivide
                  | exp.Abs | exp.Length
                  | exp.Round | exp.Floor | exp.Ceil | exp.Nanvl | exp.DateDiff | exp.Sqrt | exp.Sign
                  | exp.StrPosition | exp.Exp | exp.Ln | exp.Log | exp.Pow | exp.Cbrt | exp.Anonymous | exp.ArraySize
                  | exp.Ascii | exp.BitLength | exp.StrToUnix) or type(node) in _date_parts():
        return "numbers"
    if isinstance(node, exp.Lower | exp.Upper | exp.Trim | exp.Substring | exp.Concat | exp.DPipe | exp.Left | exp.Right
                  | exp.Replace | exp.RegexpExtract | exp.Pad | exp.Initcap | exp.Reverse | exp.Translate | exp.Repeat):
        return "text"
    if isinstance(node, exp.TsOrDsToDate | exp.TsOrDsAdd | exp.DateTrunc | exp.AddMonths | exp.LastDay):
        return "dates"
    if isinstance(node, exp.TimestampTrunc):
        return "timestamps"
    if isinstance(node, exp.RegexpSplit):
        return "arrays"
    if isinstance(node, exp.Cast) and node.to.this != exp.DataType.Type.BOOLEAN:
        return f"{node.to.sql(dialect='spark')} values"
    return None


# -- evaluating --------------------------------------------------------------------------------


class _Evaluator:
    """Evaluates a parsed expression over a table's columns."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.rows = table.num_rows
        if not _COMPARISONS:
            _tables()

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
            return pa.scalar(node.this) if node.is_string else _number_literal(node.this)
        if kind is exp.Boolean:
            return pa.scalar(bool(node.this))
        if kind in (exp.Cast, exp.TryCast) and isinstance(node.this, exp.Literal):  # a typed literal (checked when built)
            return _typed_literal(node)
        if kind in (exp.Cast, exp.TryCast):
            return _cast(node, self.value(node.this), _arrow_type(node.to), bool(node.args.get("safe")))  # TRY_CAST
        if kind is exp.Null:
            return pa.scalar(None, pa.null())
        if kind in _COMPARISONS:
            left = self.value(node.this)
            return _compare(node, _COMPARISONS[kind], left, self._unless_null(node.expression, left), self.rows)
        if kind in (exp.NullSafeEQ, exp.NullSafeNEQ):  # <=> / IS [NOT] DISTINCT FROM: never NULL
            left, right = self.value(node.this), self.value(node.expression)
            both_null = pc.and_(_is_null(left, self.rows), _is_null(right, self.rows))
            equal = pc.or_(both_null, pc.fill_null(_compare(node, pc.equal, left, right, self.rows), False))
            return equal if kind is exp.NullSafeEQ else pc.invert(equal)
        if kind is exp.And:
            left = self._boolean(node.this, "AND")
            return pc.and_kleene(left, self._where_open(node.expression, "AND", left, False))
        if kind is exp.Or:
            left = self._boolean(node.this, "OR")
            return pc.or_kleene(left, self._where_open(node.expression, "OR", left, True))
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
            return pc.and_kleene(low, self._where(lambda e: e._side(node, pc.less_equal, "high"), _not(low, False)))
        if kind in _text_tests():
            left = self._text(node, node.this)
            if _is_null_type(left):
                return _nulls(self.rows)
            return _text_tests()[kind](_array(left, self.rows), node.expression.this)  # a literal (checked when built)
        if kind in _ARITHMETIC:
            return self._arithmetic(node, _ARITHMETIC[kind], node.this, node.expression,
                                    divides=kind in (exp.Div, exp.IntDiv, exp.Mod))
        if kind is exp.Anonymous and node.name.upper() == "PMOD":  # read as % reads its sides
            return self._arithmetic(node, _positive_remainder, *node.expressions, divides=True)
        if kind in _TRIED or kind is exp.Anonymous and node.name.upper() == "TRY_MOD":
            op = _remainder if kind is exp.Anonymous else _ARITHMETIC[_TRIED[kind]]
            left, right = node.expressions if kind is exp.Anonymous else (node.this, node.expression)
            return self._arithmetic(node, op, left, right, divides=op in (_remainder, _divide), try_=True)
        if kind in (exp.Neg, exp.Negative) or kind is exp.Anonymous and node.name.upper() == "POSITIVE":
            operand = self._number(node, node.expressions[0] if kind is exp.Anonymous else node.this)
            return operand if kind is exp.Anonymous or _is_null_type(operand) else pc.negate_checked(operand)
        if kind in _FUNCTIONS:
            operand = self._number(node, node.this) if kind is exp.Abs else self._text(node, node.this)
            if _is_null_type(operand):  # a field that is NULL in every event
                return operand
            return _FUNCTIONS[kind](operand)
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
            return _round(node, self._number(node, node.this), _whole_literal(node.args.get("decimals")))
        if kind is exp.Floor or kind is exp.Ceil:
            return _floor_or_ceil(node, self._number(node, node.this), up=kind is exp.Ceil)
        if kind in _date_parts():
            return _date_part(node, self.value(node.this))
        if kind is exp.TsOrDsToDate:
            return _to_date(node, self.value(node.this))
        if kind is exp.StrToUnix:
            return _unix_seconds(node, self.value(node.this))
        if kind is exp.TimestampTrunc:
            return _truncated_time(node, self.value(node.this))
        if kind in (exp.DateTrunc, exp.AddMonths, exp.LastDay):
            return _of_date(node, _to_date(node, self.value(node.this)))
        if kind is exp.DateDiff:  # its sides are TO_DATE(...), as sqlglot parses it
            end, start = (_days(self.value(side)) for side in (node.this, node.expression))
            return pa.scalar(None, pa.null()) if _is_null_type(end) or _is_null_type(start) else pc.subtract_checked(end, start)
        if kind is exp.TsOrDsAdd:
            return self._add_days(node)
        if kind is exp.Sqrt or kind is exp.Sign:
            return _sqrt_or_sign(self._number(node, node.this), sign=kind is exp.Sign)
        if kind is exp.Anonymous and node.name.upper() == "BROUND":
            return _round(node, self._number(node, node.expressions[0]), _whole_literal(_scale_of(node)), half_even=True)
        if kind in (exp.Exp, exp.Ln, exp.Cbrt) or kind is exp.Anonymous and node.name.upper() in ("LOG10", "LOG2"):
            return _of_one_number(node.name.upper() if kind is exp.Anonymous else kind.__name__.upper(),
                                  self._number(node, node.expressions[0] if kind is exp.Anonymous else node.this))
        if kind is exp.Log or kind is exp.Pow:  # read as an arithmetic operator's sides are
            first = self._number(node, node.this)
            second = self._where(lambda e: e._number(node, node.expression), _not(first, None))
            return _of_two_numbers(kind is exp.Pow, first, second)
        if kind is exp.Nullif:  # CASE WHEN a = b THEN NULL ELSE a END, as Spark SQL writes it
            equal = exp.EQ(this=node.this, expression=node.expression)
            return self._case(exp.If(this=equal, true=exp.Null(), false=node.this))
        if kind is exp.Nvl2:  # CASE WHEN a IS NOT NULL THEN b ELSE c END
            given = exp.Not(this=exp.Is(this=node.this, expression=exp.Null()))
            return self._case(exp.If(this=given, true=node.args["true"], false=node.args.get("false")))
        if kind is exp.RegexpExtract:
            return _regexp_extract(node, self._text(node, node.this), self.rows)
        if kind is exp.RegexpSplit:
            return _split(node, self._text(node, node.this))
        if kind is exp.ArrayContains:
            lists = self._list(node, node.this)
            return _array_contains(node, lists, self._unless_null(node.expression, lists), self.rows)
        if kind is exp.ArraySize:  # an INT, NULL for NULL (as under ANSI SQL)
            lists = self._list(node, node.this, maps=True)
            return lists if _is_null_type(lists) else pc.cast(pc.list_value_length(lists), pa.int32())
        if kind is exp.MapContainsKey:
            keys = self._list(node, node.this, maps=True)
            return _array_contains(node, keys, _literal_as(node.args["key"], keys), self.rows)
        if kind is exp.Bracket:
            held = self.value(node.this)
            key = node.expressions[0]
            if _is_null_type(held):
                return held
            if pa.types.is_map(held.type) or pa.types.is_struct(held.type):  # a map's key or a struct's field
                return _struct_field(node, held, key.this if _is_string_literal(key) else key.sql(), node.this.sql(dialect="spark"))
            if _is_string_literal(key):
                raise TypeError(f"{node.sql(dialect='spark')!r} reads a map or a struct with a text key; "
                                f"{node.this.sql(dialect='spark')!r} gives {held.type} values")
            return _element(node, self._list(node, node.this), _whole_literal(key), self.rows)
        if kind in (exp.Pad, exp.Initcap, exp.Reverse, exp.Translate, exp.Repeat, exp.Ascii, exp.BitLength) or (
            kind is exp.Anonymous and node.name.upper() == "OCTET_LENGTH"
        ):
            return _of_text(node, self._text(node, node.expressions[0] if kind is exp.Anonymous else node.this))
        if kind in (exp.StrPosition, exp.Left, exp.Right, exp.Replace):
            return _in_text(node, self._text(node, node.this))
        if kind is exp.Trim:
            return self._trim(node)
        if kind is exp.Substring:
            return self._substring(node)
        if kind is exp.Concat or kind is exp.DPipe:  # NULL if any part is NULL; a part read where none before is
            parts: list[Any] = []
            for part in node.expressions if kind is exp.Concat else (node.this, node.expression):
                parts.append(self._where(lambda e, part=part: e._text(node, part), _none_null(parts)))
            if any(_is_null_type(part) for part in parts):
                return pa.scalar(None, pa.null())
            return pc.binary_join_element_wise(*(_array(part, self.rows) for part in parts), "")
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
        :func:`_days_added`. Sides that are not numbers then are refused, as Spark
        SQL refuses them: text beside text, booleans, timestamps; beside a bare NULL
        as :func:`_beside_null`."""
        import pyarrow as pa

        def in_order(first: Any, second: Any) -> tuple[Any, Any]:
            return (second, first) if divides else (first, second)

        first_node, second_node = in_order(left, right)
        first = self.value(first_node)
        second = self._unless_null(second_node, first)
        if _is_null_type(first) or _is_null_type(second):
            _beside_null(node, in_order(first, second))
            return pa.scalar(None, pa.null())
        if any(pa.types.is_date32(side.type) for side in (first, second)):
            return _days_added(node, *in_order(first, second))
        first, second = _fractions_beside_fractions(*_numbers_of_text(node, first, second, try_))
        operands = in_order(first, second)
        _numbers_only(node, operands)
        return _or_null(op, *operands, divides=divides) if try_ else op(*operands)

    def _column(self, node: Any) -> Any:
        """A field of the events, or a field of a struct field at any depth
        (``a.b.c``: the field ``c`` of the struct field ``b`` of the struct ``a``)."""
        first, *rest = node.parts
        value = self.table.column(_field(self.table.column_names, first.name))
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
            taken = pc.fill_null(_spread(self._within(open_rows)._when(subject, test), open_rows), False)
            tests.append(taken)
            values.append(_spread(self._within(taken).value(value), taken))
            open_rows = pc.and_(open_rows, pc.invert(taken))
        otherwise = None if default is None else _spread(self._within(open_rows).value(default), open_rows)
        return _chosen(None, tests, values, otherwise, self.rows)

    def _number(self, node: Any, part: Any) -> Any:
        """The numbers ``part`` of ``node`` gives, text read as ``CAST(x AS DOUBLE)``
        as Spark SQL casts it for a function of numbers; NULL of no type passes."""
        import pyarrow as pa

        value = self.value(part)
        if _is_text(value.type):
            value = _cast(node, value, pa.float64(), False)
        if not (_is_null_type(value) or _is_number(value.type)):
            raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {value.type} values")
        return value

    def _is_nan(self, node: Any) -> Any:
        """``isnan(x)``: TRUE where ``x`` is NaN, else FALSE (never NULL: FALSE for
        NULL, and for whole numbers and decimals, which are never NaN); text is read
        as ``CAST(x AS DOUBLE)``, as Spark SQL casts it."""
        import pyarrow as pa
        import pyarrow.compute as pc

        value = self._number(node, node.this)
        if _is_null_type(value) or not pa.types.is_floating(value.type):
            return pa.repeat(pa.scalar(False), self.rows)
        return pc.fill_null(pc.is_nan(_array(value, self.rows)), False)

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
        if _is_null_type(first):
            return first
        first = _contiguous(_array(first, self.rows))
        floating = pa.types.is_floating(first.type)
        nan = _contiguous(pc.fill_null(pc.is_nan(first), False)) if floating else pa.repeat(pa.scalar(False), self.rows)
        second = self._where(lambda e: e._number(node, node.expression), lambda rows: nan)
        kind = pa.float32() if first.type == second.type == pa.float32() else pa.float64()
        return pc.if_else(nan, _as_type(_array(second, self.rows), kind), _as_type(first, kind))

    def _add_days(self, node: Any) -> Any:
        """``date_add(x, n)`` / ``date_sub(x, n)``: the date ``n`` days after (before)
        ``x``'s (:func:`_to_date`); ``n`` an INT or smaller (text read as one), as
        Spark SQL takes it::

            x                        n     date_add(x, n)
            DATE 2024-02-28          1     2024-02-29
            2024-01-01 23:30 (UTC)   1     2024-01-02
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        days = self.value(node.expression)
        if _is_text(days.type):
            days = _cast(node, days, pa.int32(), False)
        if not (_is_null_type(days) or pa.types.is_integer(days.type) and days.type.bit_width <= 32):
            raise TypeError(f"{node.sql(dialect='spark')!r} adds INT days, not {days.type} values")
        start = _to_date(node, self.value(node.this))
        if _is_null_type(start) or _is_null_type(days):
            return pa.scalar(None, pa.date32())
        return pc.add_checked(_days(start), pc.cast(days, pa.int32())).cast(pa.date32())

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

        values = [v for v in (self.value(p) for p in (node.this, *node.expressions)) if not _is_null_type(v)]
        if not values:
            return pa.scalar(None, pa.null())
        kind = _widest(node, {v.type for v in values})
        floating = pa.types.is_floating(kind)
        result = None
        for value in values:
            value = _as_type(_contiguous(_array(value, self.rows)), kind)
            if result is None:
                result = value
                continue
            beyond = (pc.greater if greatest else pc.less)(value, result)
            if floating:  # NaN is above every number: the greatest, never the least
                nan, was_nan = pc.is_nan(value), pc.is_nan(result)
                beyond = pc.or_(beyond, pc.and_(nan, pc.invert(was_nan)) if greatest else pc.and_(was_nan, pc.invert(nan)))
            result = pc.if_else(pc.or_(pc.is_null(result), pc.fill_null(beyond, False)), value, result)
        return result

    def _within(self, rows: Any) -> _Evaluator:
        """An evaluator over the ``rows`` (a mask) of this one's table."""
        return _Evaluator(self.table.filter(rows))

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
        if _is_null_type(text):
            return text
        characters = node.expression.this if node.expression is not None else " "
        trim = {"LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}.get(str(node.args.get("position") or ""), pc.utf8_trim)
        return trim(text, characters)

    def _substring(self, node: Any) -> Any:
        """``substring(text, pos[, len])`` as Spark SQL counts: from 1, a negative
        position from the end, position 0 as 1, a length below 1 giving ''."""
        import pyarrow as pa

        text = self._text(node, node.this)
        if _is_null_type(text):
            return text
        start = int(node.args["start"].sql())
        length = int(node.args["length"].sql()) if node.args.get("length") is not None else None

        def cut(value: str) -> str:
            first = start - 1 if start > 0 else len(value) + start if start < 0 else 0
            end = len(value) if length is None else first + length
            first = max(first, 0)
            return value[first:end] if first < end else ""

        return pa.array([None if v is None else cut(v) for v in _array(text, self.rows).to_pylist()], pa.string())

    def _list(self, node: Any, part: Any, maps: bool = False) -> Any:
        """The arrays ``part`` of ``node`` gives (as one Arrow list array), or with
        ``maps`` the keys of the maps it gives; NULL of no type passes; anything else
        is refused."""
        import pyarrow as pa

        value = self.value(part)
        if _is_null_type(value):
            return value
        if maps and pa.types.is_map(value.type):
            value = _contiguous(_array(value, self.rows))
            return pa.ListArray.from_arrays(value.offsets, value.keys, mask=value.is_null())
        if not (pa.types.is_list(value.type) or pa.types.is_large_list(value.type)
                or pa.types.is_fixed_size_list(value.type) or pa.types.is_list_view(value.type)):
            raise TypeError(f"{node.sql(dialect='spark')!r} reads arrays; {part.sql(dialect='spark')!r} gives "
                            f"{value.type} values")
        value = _array(value, self.rows)
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
        if _is_null_type(value) or _is_text(kind):
            return value
        if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_date32(kind):
            return pc.cast(value, pa.string())
        raise TypeError(f"{node.sql(dialect='spark')!r} reads text; {part.sql(dialect='spark')!r} gives {kind} values")

    def _where_open(self, node: Any, operator: str, left: Any, decided: bool) -> Any:
        """The test ``node``, the right side of ``AND`` (``decided`` FALSE) or ``OR``
        (TRUE) whose left side gives ``left``: read where ``left`` is not ``decided``."""
        return self._where(lambda e: e._boolean(node, operator), _not(left, decided))

    def _unless_null(self, node: Any, first: Any) -> Any:
        """The value of ``node``, an operand of an operator whose other operand, read
        first, gives ``first``: read where ``first`` is not NULL (elsewhere the
        answer is NULL), as Spark SQL skips it (``score > 10 div amount`` divides
        by zero in no row where ``score`` is NULL)."""
        return self._where(lambda e: e.value(node), _not(first, None))

    def _where(self, read: Callable[[_Evaluator], Any], open_rows: Callable[[int], Any]) -> Any:
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
        return _spread(read(self._within(rows)), rows)

    def _in(self, node: Any) -> Any:
        """``x IN (a, b, ...)``: TRUE where ``x`` equals an item, else NULL where ``x``
        or an item is NULL, else FALSE. As Spark SQL reads it, an item is read only
        where ``x`` is not NULL and equals no item before it (``amount IN (0, 10 div
        amount)`` divides by zero nowhere); in every row first, as :meth:`_where`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        numbers = [self.value(i) for i in node.expressions if _is_number_literal(i)]  # the same in every row
        left = _widened_for_text(self.value(node.this), numbers)
        try:
            result: Any = pa.scalar(False)
            for item in node.expressions:  # an OR of equalities: SQL's NULL rules for IN
                result = pc.or_kleene(result, _compare(node, pc.equal, left, self.value(item), self.rows))
            return result
        except (ArithmeticError, ValueError):  # maybe in rows an item before decides
            pass
        rows = _not(left, None)(self.rows)
        result = pc.if_else(rows, pa.scalar(False), pa.scalar(None, pa.bool_()))
        for item in node.expressions:
            within = self._within(rows)
            value = _widened_for_text(within.value(node.this), numbers)
            equal = _spread(_compare(node, pc.equal, value, within.value(item), within.rows), rows)
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
        if _is_null_type(value):
            return _nulls(self.rows)
        if not pa.types.is_boolean(value.type):
            raise TypeError(f"{operator} needs TRUE or FALSE: {node.sql(dialect='spark')!r} gives {value.type} values")
        return value


_COMPARISONS: dict[type, Callable[..., Any]] = {}
_TRIED: dict[type, type] = {}  # try_add and the like: the operator each tries
_ARITHMETIC: dict[type, Callable[..., Any]] = {}
_FUNCTIONS: dict[type, Callable[..., Any]] = {}


def _tables() -> None:
    import pyarrow.compute as pc
    from sqlglot import exp

    _COMPARISONS.update({
        exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
        exp.GT: pc.greater, exp.GTE: pc.greater_equal,
    })
    _ARITHMETIC.update({
        exp.Add: _decimals_or("+", pc.add_checked), exp.Sub: _decimals_or("-", pc.subtract_checked),
        exp.Mul: _decimals_or("*", pc.multiply_checked), exp.Div: _divide,
        exp.IntDiv: _integer_divide, exp.Mod: _remainder,
    })
    _TRIED.update({exp.SafeAdd: exp.Add, exp.SafeSubtract: exp.Sub, exp.SafeMultiply: exp.Mul, exp.SafeDivide: exp.Div})
    _FUNCTIONS.update({
        exp.Lower: functools.partial(_case_mapped, str.lower), exp.Upper: functools.partial(_case_mapped, str.upper),
        exp.Abs: pc.abs_checked, exp.Length: pc.utf8_length,
    })



@functools.cache
def _text_tests() -> dict[type, Callable[[Any, str], Any]]:
    """The tests of text against a string literal, and how Arrow runs each (NULL
    text gives NULL; a regular expression is RE2's, which Java's simple ones are)."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.Like: lambda text, pattern: pc.match_like(text, pattern),
        exp.ILike: lambda text, pattern: pc.match_like(text, pattern, ignore_case=True),
        exp.RegexpLike: lambda text, pattern: pc.match_substring_regex(text, pattern),
        exp.StartsWith: lambda text, pattern: pc.starts_with(text, pattern),
        exp.EndsWith: lambda text, pattern: pc.ends_with(text, pattern),
        exp.Contains: lambda text, pattern: pc.match_substring(text, pattern),
    }


def _check_text_test(node: Any, sql: str) -> None:
    """A text test's pattern is a string literal, and a regular expression one RE2 runs."""

    shown = node.sql(dialect="spark")
    if not _is_string_literal(node.expression):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} needs a string literal as its pattern")
    _over_empty_text(node, sql, lambda text: _text_tests()[type(node)](text, node.expression.this))


def _over_empty_text(node: Any, sql: str, run: Callable[[Any], Any]) -> Any:
    """``run`` of a function's pattern over one empty text, checking that Arrow runs
    the pattern when the pattern is built; its result."""
    import pyarrow as pa

    try:
        return run(pa.array([""]))
    except pa.ArrowInvalid as error:
        raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} has a pattern Arrow cannot run: "
                              f"{error}") from None


def _divide(left: Any, right: Any) -> Any:
    """Spark SQL's ``/``: a fraction (double) of whole or floating numbers, a decimal of
    decimals; dividing by zero is an error, as under ANSI SQL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_decimal(left.type) or pa.types.is_decimal(right.type):
        return _decimal_arithmetic("/", left, right)
    return pc.divide_checked(pc.cast(left, pa.float64()), pc.cast(right, pa.float64()))


def _decimals_or(operator: str, op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
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


def _integer_divide(left: Any, right: Any) -> Any:
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


def _remainder(left: Any, right: Any) -> Any:
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
    rows = _rows_of(left, right)
    lefts, rights = (_contiguous(_array(_as_type(side, pa.float64()), rows)) for side in (left, right))
    if pc.any(pc.and_(pc.equal(rights, 0.0), pc.is_valid(lefts))).as_py():  # NULL % 0 is NULL
        raise ArithmeticError("remainder by zero")
    missing = pc.or_(pc.is_null(lefts), pc.is_null(rights)).to_numpy(zero_copy_only=False)
    with np.errstate(all="ignore"):  # NaN for an infinite dividend, as Java's
        result = np.fmod(lefts.fill_null(0.0).to_numpy(zero_copy_only=False), rights.fill_null(1.0).to_numpy(zero_copy_only=False))
    return _shaped_as(pa.array(result, pa.float64(), mask=missing), left, right)


def _numbers_only(node: Any, sides: Sequence[Any]) -> None:
    """Refuses the operator ``node`` over ``sides`` that are not all numbers (text is
    read as a number only beside one, before)."""
    if not all(_is_number(side.type) for side in sides):
        raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {' and '.join(str(side.type) for side in sides)}")


def _beside_null(node: Any, sides: Sequence[Any]) -> None:
    """Refuses the arithmetic ``node`` of a bare NULL and text or a boolean, a date or
    timestamp other than by ``+`` and ``-``, or a floating number by ``div``, as Spark
    SQL refuses them; it gives NULL beside a number, a NULL, or a date or timestamp
    added to::

        kind + NULL   flag * NULL   day * NULL   NULL + NULL   day - NULL
        refused       refused       refused      NULL          NULL
    """
    import pyarrow as pa
    from sqlglot import exp

    operator = _TRIED.get(type(node), type(node))
    for side in sides:
        kind = side.type
        in_time = pa.types.is_date32(kind) or pa.types.is_timestamp(kind)
        number = _is_number(kind) and not (operator is exp.IntDiv and pa.types.is_floating(kind))
        if not (pa.types.is_null(kind) or number or in_time and operator in (exp.Add, exp.Sub)):
            raise TypeError(f"{node.sql(dialect='spark')!r} takes numbers, not {kind} beside NULL")


def _or_null(op: Callable[[Any, Any], Any], left: Any, right: Any, divides: bool) -> Any:
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
    rows = _rows_of(left, right)
    lefts, rights = _contiguous(_array(left, rows)), _contiguous(_array(right, rows))
    kind = op(lefts.slice(0, 0), rights.slice(0, 0)).type
    answers = []
    for i in range(rows):
        try:
            answers.append(op(lefts.slice(i, 1), rights.slice(i, 1)).cast(kind))
        except (ArithmeticError, pa.ArrowInvalid):
            answers.append(pa.nulls(1, kind))
    return _shaped_as(pa.concat_arrays(answers), left, right)


def _positive_remainder(left: Any, right: Any) -> Any:
    """Spark SQL's ``pmod(a, n)``: ``a % n`` (:func:`_remainder`), or where that is
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

    remainder = _remainder(left, right)
    if pa.types.is_decimal(remainder.type):
        return _exactly(remainder, right, lambda r, n: (r + n) % n if r < 0 else r, remainder.type)
    rows = _rows_of(remainder, right)
    values = _contiguous(_array(remainder, rows))
    missing = pc.or_(pc.is_null(values), pc.is_null(_array(right, rows)))
    kind = values.type.to_pandas_dtype()
    r = values.fill_null(0).to_numpy(zero_copy_only=False).astype(kind)
    n = _array(pc.cast(right, values.type), rows).fill_null(1).to_numpy(zero_copy_only=False).astype(kind)
    with np.errstate(all="ignore"):  # Java's whole numbers wrap
        result = np.where(r < 0, np.fmod(r + n, n), r)
    return _shaped_as(pa.array(result, values.type, mask=missing.to_numpy(zero_copy_only=False)), remainder, right)


def _exactly(left: Any, right: Any, op: Callable[[Any, Any], Any], arrow_type: Any, divides: bool = True) -> Any:
    """``op`` of each row's decimals (or a decimal and a whole number) in Python's
    exact decimal arithmetic, wide enough for any of Spark's (38 digits); NULL where
    either is NULL; by zero an error where ``op`` ``divides``."""
    import pyarrow as pa

    rows = _rows_of(left, right)

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
    return _shaped_as(pa.array(out, arrow_type), left, right)


def _rows_of(*sides: Any) -> int:
    """The rows of the arrays among ``sides`` (1 if all are scalars)."""
    import pyarrow as pa

    return next((len(side) for side in sides if not isinstance(side, pa.Scalar)), 1)


def _shaped_as(result: Any, *sides: Any) -> Any:
    """``result`` (an array), as its one scalar if all ``sides`` were scalars."""
    import pyarrow as pa

    return result[0] if all(isinstance(side, pa.Scalar) for side in sides) else result


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

    if _is_null_type(value):  # NULL in every row, of no type
        return value
    if pa.types.is_map(value.type):
        return pc.map_lookup(value, _read_as(name, value.type.key_type), "first")
    if not pa.types.is_struct(value.type):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads a field of {holder!r}, which gives "
                        f"{value.type} values, not structs")
    names = [f.name for f in value.type]
    return pc.struct_field(value, _field(names, name, f"{node.sql(dialect='spark')!r}", holder))


def _literal_as(node: Any, keys: Any) -> Any:
    """The literal ``node`` as a key of the map keys ``keys`` (a list array): text
    for text keys, a number for number keys, as Spark SQL takes them (no other)."""
    import pyarrow as pa

    if _is_null_type(keys):
        return pa.scalar(None, pa.null())
    kind = keys.type.value_type
    if not (node.is_string and _is_text(kind) or not node.is_string and _is_number(kind)):
        raise TypeError(f"{node.parent.sql(dialect='spark')!r}: the maps' keys are {kind}, the key is {node.sql(dialect='spark')}")
    return _read_as(node.this, kind)


def _is_null_type(value: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_null(value.type)


def _nulls(rows: int) -> pa.Array:
    import pyarrow as pa

    return pa.nulls(rows, pa.bool_())


def _array(value: Any, rows: int) -> Any:
    import pyarrow as pa

    return pa.repeat(value, rows) if isinstance(value, pa.Scalar) else value


def _not(value: Any, given: bool | None) -> Callable[[int], Any]:
    """The rows (a mask of ``count`` rows, given later) where ``value`` is not
    ``given``: not NULL for None; else not TRUE / not FALSE, NULL being neither."""

    def rows(count: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        values = _array(value, count)
        if given is None:
            return _contiguous(pc.is_valid(values))
        return _contiguous(pc.fill_null(pc.not_equal(values, pa.scalar(given)), True))

    return rows


def _none_null(values: list[Any]) -> Callable[[int], Any]:
    """The rows (a mask) where none of ``values`` is NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return lambda count: functools.reduce(
        pc.and_, (_not(v, None)(count) for v in values), pa.repeat(pa.scalar(True), count)
    )


def _spread(value: Any, rows: Any) -> Any:
    """``value``, read over the ``rows`` (a mask) of a table, at those rows of a
    column of the table's length (NULL elsewhere)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    taken = pc.sum(rows).as_py() or 0
    return pc.replace_with_mask(pa.nulls(len(rows), value.type), rows, _contiguous(_array(value, taken)))


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
    kinds = {v.type for v in given if not _is_null_type(v)}
    if not kinds:
        return pa.scalar(None, pa.null())
    numbers = {k for k in kinds if not _is_text(k)}
    if len(kinds) == 1:
        kind = next(iter(kinds))
    elif numbers and all(pa.types.is_integer(k) for k in numbers):
        kind = pa.int64()
    elif numbers and all(_is_number(k) for k in numbers) and any(pa.types.is_floating(k) for k in numbers):
        kind = pa.float64()  # decimals too, as Spark SQL widens them beside a DOUBLE
    elif numbers == kinds and all(pa.types.is_decimal(k) or pa.types.is_integer(k) for k in kinds):
        kind = _wide_decimal(kinds)
    else:
        shown = "" if node is None else f"{node.sql(dialect='spark')!r}: "
        raise TypeError(f"{shown}its branches give {', '.join(sorted(map(str, kinds)))} values, not one type")
    conditions = [pc.fill_null(_contiguous(_array(t, rows)), False) for t in tests]
    taken = pa.repeat(pa.scalar(False), rows)
    chosen = []  # each branch's rows: its test TRUE, none before it TRUE
    for test in conditions:
        chosen.append(pc.and_(test, pc.invert(taken)))
        taken = pc.or_(taken, test)
    chosen.append(pc.invert(taken))

    def typed(value: Any, rows_chosen: Any) -> Any:
        if _is_null_type(value):
            return pa.nulls(rows, kind)
        value = _array(value, rows)
        if value.type not in numbers and kind not in kinds - numbers:  # text read as numbers where chosen
            value = pc.utf8_trim_whitespace(pc.if_else(rows_chosen, value, pa.scalar(None, value.type)))
        return _contiguous(_as_type(value, kind))

    struct = pc.make_struct(*conditions, field_names=[f"_{i}" for i in range(len(conditions))])
    return pc.case_when(struct, *(typed(v, c) for v, c in zip(given, chosen, strict=False)))


def _widest(node: Any, kinds: set[Any]) -> Any:
    """The one type values of ``kinds`` are compared in, as Spark SQL widens them for
    ``greatest`` / ``least``: the widest whole numbers, fractions (FLOAT if all are),
    or a decimal that holds each; else all of one type (text, booleans, dates)."""
    import pyarrow as pa

    if len(kinds) == 1:
        return next(iter(kinds))
    if all(_is_number(k) for k in kinds):
        floats = {k for k in kinds if pa.types.is_floating(k)}
        if floats:
            return pa.float32() if floats == {pa.float32()} and not any(pa.types.is_decimal(k) for k in kinds) else (
                pa.float64()
            )
        if all(pa.types.is_integer(k) for k in kinds):
            return max(kinds, key=lambda k: (k.bit_width, pa.types.is_signed_integer(k)))
        return _wide_decimal(kinds)
    raise TypeError(f"{node.sql(dialect='spark')!r} takes values of one type, not {', '.join(sorted(map(str, kinds)))}")


def _whole_literal(node: Any) -> int | None:
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


def _round(node: Any, value: Any, scale: int, half_even: bool = False) -> Any:
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

    if _is_null_type(value):
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

        return _one_by_one(value, whole, kind)
    if pa.types.is_decimal(kind):
        new_scale = min(kind.scale, max(scale, 0))
        whole_digits = kind.precision - kind.scale + 1
        precision = max(whole_digits, -scale + 1) if scale < 0 else whole_digits + new_scale
        exponent = decimal.Decimal(1).scaleb(-scale)
        with decimal.localcontext(prec=80):
            return _one_by_one(value, lambda v: v.quantize(exponent, mode),
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

    return _one_by_one(value, fraction, kind)


@functools.cache
def _date_parts() -> dict[type, tuple[Callable[[Any], Any], bool]]:
    """The functions giving a part of a date or a timestamp: how Arrow computes each,
    and whether it reads a time of day (text then read as a timestamp, not a date)."""
    import pyarrow.compute as pc
    from sqlglot import exp

    return {
        exp.Year: (pc.year, False), exp.Quarter: (pc.quarter, False), exp.Month: (pc.month, False),
        exp.Day: (pc.day, False), exp.DayOfMonth: (pc.day, False), exp.DayOfYear: (pc.day_of_year, False),
        exp.DayOfWeek: (lambda v: pc.day_of_week(v, count_from_zero=False, week_start=7), False),  # Sunday 1
        exp.WeekOfYear: (pc.iso_week, False), exp.Hour: (pc.hour, True), exp.Minute: (pc.minute, True),
        exp.Second: (pc.second, True),
    }


def _to_date(node: Any, value: Any) -> Any:
    """``to_date(x)``: the date of ``x``, as Spark SQL casts it to one: an instant's
    in UTC (this project's sessions' time zone), a wall clock's, text read as
    :func:`_date_of_text` reads it (text that is none an error for its event)."""
    import pyarrow as pa

    kind = value.type
    if _is_null_type(value) or pa.types.is_date32(kind):
        return value
    if _is_text(kind):
        return _cast(node, value, pa.date32(), False)
    if pa.types.is_timestamp(kind):
        return value.cast(pa.timestamp(kind.unit, "UTC")).cast(pa.date32()) if kind.tz else value.cast(pa.date32())
    raise TypeError(f"{node.sql(dialect='spark')!r} reads dates, timestamps or text, not {kind} values")


_TIME_UNITS = {  # date_trunc's units (trunc takes year to week), as Arrow's floor_temporal names them
    "YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
    "MON": "month", "WEEK": "week", "DAY": "day", "DD": "day", "HOUR": "hour", "MINUTE": "minute",
    "SECOND": "second", "MILLISECOND": "millisecond", "MICROSECOND": "microsecond",
}
_DATE_UNITS = ("year", "quarter", "month", "week")


def _time_unit(node: Any) -> str | None:
    """The unit of ``date_trunc`` / ``trunc`` as Arrow names it (None: none of theirs)."""
    from sqlglot import exp

    unit = _TIME_UNITS.get(node.args["unit"].name.upper())
    return unit if type(node) is exp.TimestampTrunc or unit in _DATE_UNITS else None


def _check_time_function(node: Any, sql: str) -> None:
    """``unix_timestamp(x)`` takes no format, ``date_trunc`` / ``trunc`` a unit of theirs
    as a literal, ``add_months`` a whole-number literal."""
    from sqlglot import exp

    shown = node.sql(dialect="spark")
    kind = type(node)
    if kind is exp.StrToUnix and (isinstance(node.this, exp.CurrentTimestamp) or (
        node.args.get("format") is not None and node.args["format"] != _default_unix_format()
    )):
        raise DefinitionError(f"the condition {sql!r} uses {shown!r}: expression conditions read the seconds of "
                              f"timestamps, dates and text as yyyy-MM-dd HH:mm:ss (no other format, no current time); "
                              f"write it as a function condition instead")
    if kind in (exp.TimestampTrunc, exp.DateTrunc) and not (
        isinstance(node.args.get("unit"), exp.Var | exp.Literal) and _time_unit(node)
    ):
        units = ", ".join(u for u, arrow in _TIME_UNITS.items() if kind is exp.TimestampTrunc or arrow in _DATE_UNITS)
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes one of the units {units}, as a literal")
    if kind is exp.AddMonths and _whole_literal(node.expression) is None:
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a whole-number literal as its months")


@functools.cache
def _default_unix_format() -> Any:
    """The format sqlglot gives ``unix_timestamp(x)`` (Spark's default, yyyy-MM-dd HH:mm:ss)."""
    import sqlglot

    return sqlglot.parse_one("unix_timestamp(x)", read=_dialect()).args["format"]


def _unix_seconds(node: Any, value: Any) -> Any:
    """``unix_timestamp(x)``: the whole seconds (a BIGINT, toward zero) since
    1970-01-01 00:00 UTC of a timestamp (a wall clock's read as UTC, this project's
    sessions' zone), a date's midnight or text written ``yyyy-MM-dd HH:mm:ss`` (other
    text an error for its event, as Spark's parser under ANSI SQL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(value):
        return value
    kind = value.type
    if pa.types.is_date32(kind):
        return pc.multiply(value.cast(pa.int32()).cast(pa.int64()), 86400)
    if _is_text(kind):  # as 'yyyy-MM-dd HH:mm:ss', in UTC

        def seconds(text: str) -> int:
            if not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text):
                raise ValueError(f"{node.sql(dialect='spark')!r}: {text!r} is not written as yyyy-MM-dd HH:mm:ss")
            return int(datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC).timestamp())

        return _one_by_one(value, seconds, pa.int64())
    if not pa.types.is_timestamp(kind):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads timestamps, dates or text, not {kind} values")
    micros = value.cast(pa.timestamp("us", kind.tz)).cast(pa.int64())
    return pc.divide(pc.subtract(micros, pc.remainder(micros, 1_000_000)), 1_000_000)  # as Java's / truncates


def _truncated_time(node: Any, value: Any) -> Any:
    """``date_trunc('unit', x)``: the timestamp ``x`` cut to the start of its year,
    quarter, month, week (from Monday), day, hour... in UTC; a date as its midnight
    UTC, text read as a timestamp (an error for its event where it is none)::

        x                      date_trunc('HOUR', x)   date_trunc('WEEK', x)
        2024-01-03 09:30 UTC   2024-01-03 09:00 UTC    2024-01-01 00:00 UTC
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(value):
        return value
    kind = value.type
    if _is_text(kind):
        value = _cast(node, value, pa.timestamp("us", "UTC"), False)
    elif pa.types.is_date32(kind):
        value = value.cast(pa.timestamp("us")).cast(pa.timestamp("us", "UTC"))
    elif not pa.types.is_timestamp(kind):
        raise TypeError(f"{node.sql(dialect='spark')!r} reads timestamps, dates or text, not {kind} values")
    elif kind.tz is not None:
        value = value.cast(pa.timestamp(kind.unit, "UTC"))
    return pc.floor_temporal(value, unit=_time_unit(node), week_starts_monday=True)


def _of_date(node: Any, dates: Any) -> Any:
    """``trunc(d, 'unit')`` (the first day of ``d``'s year, quarter, month or week,
    from Monday), ``add_months(d, n)`` (the same day ``n`` months on, or the last of
    a shorter month) and ``last_day(d)`` (the last of its month), dates as Spark SQL
    gives them; timestamps and text are read as dates first, as ``to_date`` reads them::

        d            trunc(d, 'MM')   add_months(d, 1)   last_day(d)
        2024-01-31   2024-01-01       2024-02-29         2024-01-31
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from sqlglot import exp

    if _is_null_type(dates):
        return dates
    kind = type(node)
    if kind is exp.DateTrunc:
        return pc.floor_temporal(dates, unit=_time_unit(node), week_starts_monday=True)
    months = _whole_literal(node.expression) if kind is exp.AddMonths else 0

    def shifted(day: datetime.date) -> datetime.date:
        year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
        last = calendar.monthrange(year, month + 1)[1]
        return datetime.date(year, month + 1, last if kind is exp.LastDay else min(day.day, last))

    return _one_by_one(dates, shifted, pa.date32())


def _days(dates: Any) -> Any:
    """Dates as INT days since 1970-01-01 (NULL of no type passes)."""
    import pyarrow as pa

    return dates if _is_null_type(dates) else dates.cast(pa.int32())


def _days_added(node: Any, left: Any, right: Any) -> Any:
    """``x + n``, ``n + x`` and ``x - n`` of a date ``x`` and an INT (or smaller)
    ``n`` (and ``try_add`` and ``try_subtract`` of them): the date ``n`` days after
    (before) ``x``, as Spark SQL reads them (``date_add``, ``date_sub``); other
    arithmetic with a date is refused::

        x                 n    x + n         x - n
        DATE 2024-02-28   1    2024-02-29    2024-02-27
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from sqlglot import exp

    date_first = pa.types.is_date32(left.type)
    start, days = (left, right) if date_first else (right, left)
    kind = _TRIED.get(type(node), type(node))  # try_add and try_subtract as + and -
    if not (kind is exp.Add or kind is exp.Sub and date_first) or not (
        pa.types.is_signed_integer(days.type) and days.type.bit_width <= 32
    ):
        raise TypeError(f"{node.sql(dialect='spark')!r}: a date takes + or - an INT number of days, "
                        f"not {left.type} and {right.type}")
    days = pc.cast(days, pa.int32())
    return pc.add_checked(_days(start), pc.negate_checked(days) if kind is exp.Sub else days).cast(pa.date32())


def _date_part(node: Any, value: Any) -> Any:
    """``year(x)``, ``hour(x)``...: a part of a date or a timestamp, an INT, as Spark
    SQL gives it in a UTC session: an instant's parts in UTC, a wall clock's
    (``TIMESTAMP_NTZ``) as they are, a date's time of day 0; ``dayofweek`` counts from
    Sunday (1), ``weekofyear`` is ISO's week. A date part's value comes as
    ``TO_DATE(x)`` (sqlglot parses ``year(x)`` so), :func:`_to_date`; text for a time
    of day is read as a timestamp, and text that is none is an error for its event::

        x                             hour(x)   dayofweek(x)   weekofyear(x)
        2024-01-01 23:59:58 (UTC)     23        2              1
        2023-01-01 00:00+05:00        19        7              52
        DATE 2024-02-29               0         5              9
    """
    import pyarrow as pa

    if _is_null_type(value):
        return value
    part, of_time = _date_parts()[type(node)]
    kind = value.type
    if _is_text(kind):
        value = _cast(node, value, pa.timestamp("us", "UTC") if of_time else pa.date32(), False)
    elif pa.types.is_timestamp(kind) and kind.tz is not None:
        value = value.cast(pa.timestamp(kind.unit, "UTC"))
    elif pa.types.is_date(kind) and of_time:
        value = value.cast(pa.timestamp("s"))
    elif not (pa.types.is_timestamp(kind) or pa.types.is_date(kind)):
        raise TypeError(f"{node.sql(dialect='spark')!r} takes dates or timestamps, not {kind} values")
    return part(value).cast(pa.int32())


def _sqrt_or_sign(value: Any, sign: bool) -> Any:
    """``sqrt(x)`` / ``sign(x)`` (``signum``): fractions (DOUBLE), as Java's ``Math``
    gives them: the square root of a negative number is NaN; the sign is -1.0, 0.0
    or 1.0, a zero's (-0.0 too) itself, NaN's NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(value):
        return value
    value = _as_type(value, pa.float64())
    if not sign:
        return pc.sqrt(value)
    return pc.if_else(pc.equal(value, 0.0), value, pc.sign(value))


_NAMED = {"LOG10": (1,), "LOG2": (1,), "BROUND": (1, 2), "ISNULL": (1,), "ISNOTNULL": (1,), "REGEXP": (2,),
          "CARDINALITY": (1,), "BTRIM": (1, 2), "OCTET_LENGTH": (1,), "EQUAL_NULL": (2,), "NULLIFZERO": (1,),
          "ZEROIFNULL": (1,), "POSITIVE": (1,), "PMOD": (2,), "E": (0,), "TRY_MOD": (2,)}  # functions sqlglot leaves unnamed here: their arguments


@functools.cache
def _dialect() -> Any:
    """Spark SQL's syntax, ``log10(x)`` and ``log2(x)`` kept apart from ``log(10, x)``
    (Spark computes them differently: ``log10(1000)`` is 3.0, ``log(10, 1000)``
    2.9999999999999996); ``isnull(x)`` / ``isnotnull(x)`` read as ``x IS [NOT] NULL``,
    ``regexp(s, r)`` as ``s RLIKE r``, ``equal_null(a, b)`` as ``a <=> b``,
    ``nullifzero(x)`` as ``nullif(x, 0)`` and ``zeroifnull(x)`` as ``coalesce(x, 0)``
    (Spark SQL's own readings of them); a quote written twice in a string literal as one
    (``'it''s'``), as Spark SQL reads it."""
    from sqlglot import exp
    from sqlglot.dialects.spark import Spark

    def named(name: str, build: Callable[[list[Any]], Any] | None = None) -> Callable[[list[Any]], Any]:
        """``name(args)`` as ``build`` makes it where ``_NAMED`` allows that many
        arguments; else (or without ``build``) left named, for ``_check`` to read."""
        def parse(args: list[Any]) -> Any:
            if build is not None and len(args) in _NAMED[name]:
                return build(args)
            return exp.Anonymous(this=name, expressions=args)

        return parse

    def is_null(args: list[Any]) -> Any:
        return exp.Is(this=args[0], expression=exp.Null())

    def zero() -> Any:
        return exp.Literal.number(0)

    class Conditions(Spark):
        class Tokenizer(Spark.Tokenizer):  # a quote doubled in a literal is one: 'it''s', "say ""hi"""
            STRING_ESCAPES = [*Spark.Tokenizer.STRING_ESCAPES, "'", '"']

        class Parser(Spark.Parser):
            FUNCTIONS = {
                **Spark.Parser.FUNCTIONS, "LOG10": named("LOG10"), "LOG2": named("LOG2"),
                "OCTET_LENGTH": named("OCTET_LENGTH"),
                "ISNULL": named("ISNULL", is_null),  # x IS NULL
                "ISNOTNULL": named("ISNOTNULL", lambda args: exp.Not(this=is_null(args))),  # NOT x IS NULL
                "REGEXP": named("REGEXP", lambda args: exp.RegexpLike(this=args[0], expression=args[1])),  # s RLIKE r
                "CARDINALITY": named("CARDINALITY", lambda args: exp.ArraySize(this=args[0])),  # size(a)
                "BTRIM": named("BTRIM", lambda args: exp.Trim(  # TRIM(BOTH 'cs' FROM s)
                    this=args[0], expression=args[1] if len(args) == 2 else None)),
                "EQUAL_NULL": named("EQUAL_NULL", lambda args: exp.NullSafeEQ(this=args[0], expression=args[1])),
                "NULLIFZERO": named("NULLIFZERO", lambda args: exp.Nullif(this=args[0], expression=zero())),
                "ZEROIFNULL": named("ZEROIFNULL", lambda args: exp.Coalesce(this=args[0], expressions=[zero()])),
                "POSITIVE": named("POSITIVE"), "PMOD": named("PMOD"), "E": named("E"), "TRY_MOD": named("TRY_MOD"),
            }

    return Conditions


def _normalised(tree: Any) -> Any:
    """The parsed tree in the one shape the checks and the evaluator read, whatever
    sqlglot's version: a negated ``LIKE`` / ``ILIKE`` / ``IS`` as ``NOT`` of it, and
    ``LIKE`` / ``ILIKE`` with ``ANY`` (``SOME``) or ``ALL`` as Spark SQL reads them, a
    test per pattern, ``NOT`` negating each::

        written                          read as
        x NOT LIKE 'a%'                  NOT (x LIKE 'a%')
        x LIKE ANY ('a%', 'b%')          (x LIKE 'a%') OR (x LIKE 'b%')
        x NOT LIKE ANY ('a%', 'b%')      NOT (x LIKE 'a%') OR NOT (x LIKE 'b%')
        x LIKE ALL ('a%', 'b%')          (x LIKE 'a%') AND (x LIKE 'b%')
        decode(x, 1, 'a', 'b')           CASE WHEN x <=> 1 THEN 'a' ELSE 'b' END
    """
    from sqlglot import exp

    def rewrite(node: Any) -> Any:
        if isinstance(node, exp.DecodeCase):  # NULL matches NULL, as in Spark SQL
            subject, *rest = node.expressions
            ifs = [exp.If(this=exp.NullSafeEQ(this=subject.copy(), expression=search.copy()), true=result.copy())
                   for search, result in zip(rest[0::2], rest[1::2], strict=False)]
            return exp.Case(ifs=ifs, default=rest[-1].copy() if len(rest) % 2 else None)
        if not isinstance(node, exp.Like | exp.ILike | exp.Is):
            return node
        negate = bool(node.args.get("negate"))
        quantified = node.expression if isinstance(node.expression, exp.Any | exp.All) else None
        if quantified is None and not negate:
            return node
        items = [node.expression]
        if quantified is not None:
            listed = quantified.this
            items = listed.expressions if isinstance(listed, exp.Tuple) else [listed.unnest()]
        tests = [type(node)(this=node.this.copy(), expression=item.copy()) for item in items]
        tests = [exp.Not(this=test) if negate else test for test in tests]
        join = exp.And if isinstance(quantified, exp.All) else exp.Or
        return functools.reduce(lambda left, right: join(this=left, expression=right), tests)

    return tree.transform(rewrite)


def _scale_of(node: Any) -> Any:
    """``bround(x, d)``'s ``d`` (None for ``bround(x)``)."""
    return node.expressions[1] if len(node.expressions) > 1 else None


def _of_one_number(name: str, value: Any) -> Any:
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

    if _is_null_type(value):
        return value
    value = _as_type(value, pa.float64())
    if name == "EXP":
        return pc.exp(value)
    if name == "CBRT":
        given = _array(value, 1) if isinstance(value, pa.Scalar) else value
        missing = given.is_null().to_numpy(zero_copy_only=False)
        roots = pa.array(np.cbrt(given.fill_null(0.0).to_numpy(zero_copy_only=False)), mask=missing)
        return _shaped_as(roots, value)
    logarithm = {"LN": pc.ln, "LOG10": pc.log10, "LOG2": lambda v: pc.divide(pc.ln(v), math.log(2.0))}[name]
    return pc.if_else(pc.less_equal(value, 0.0), pa.scalar(None, pa.float64()), logarithm(value))


def _of_two_numbers(power: bool, first: Any, second: Any) -> Any:
    """``pow(x, y)`` (``power``) or ``log(b, x)``, fractions (DOUBLE), as Spark SQL
    gives them: ``pow`` as Java's ``Math.pow``, which is NaN where ``y`` is NaN, or
    ``x`` is 1 or -1 and ``y`` infinite (C's gives 1.0 there); ``log(b, x)`` is
    ``ln(x) / ln(b)``, NULL where ``b`` or ``x`` is zero or less."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(first) or _is_null_type(second):
        return pa.scalar(None, pa.null())
    first, second = _as_type(first, pa.float64()), _as_type(second, pa.float64())
    if power:
        javas_nan = pc.or_(pc.is_nan(second), pc.and_(pc.equal(pc.abs(first), 1.0), pc.is_inf(second)))
        return pc.if_else(javas_nan, math.nan, pc.power(first, second))
    undefined = pc.or_(pc.less_equal(first, 0.0), pc.less_equal(second, 0.0))
    return pc.if_else(undefined, pa.scalar(None, pa.float64()), pc.divide(pc.ln(second), pc.ln(first)))


def _numbered_groups(pattern: str) -> tuple[str, int]:
    """``pattern`` with its capturing groups named ``_g1``, ``_g2``... in the order of
    their opening parentheses (named ones too, as Java numbers them) and the whole of
    it ``_g0``, so that Arrow (which extracts named groups only) can take group ``n``;
    and how many groups it has::

        a(b+)(?:c)(?<d>e)   ->   (?P<_g0>a(?P<_g1>b+)(?:c)(?P<_g2>e)), 2
    """
    out: list[str] = []
    groups, i, in_class = 0, 0, False
    while i < len(pattern):
        if pattern.startswith("\\Q", i):  # quoted up to \E: nothing in it counts
            end = pattern.find("\\E", i + 2)
            end = len(pattern) if end < 0 else end + 2
            out.append(pattern[i:end])
            i = end
        elif pattern[i] == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif in_class:
            in_class = pattern[i] != "]"
            out.append(pattern[i])
            i += 1
        elif pattern[i] == "[":  # a class; a ] first in it is one of its characters
            start = i + 1 + (pattern[i + 1 : i + 2] == "^")
            start += pattern[start : start + 1] == "]"
            out.append(pattern[i:start])
            in_class, i = True, start
        elif pattern[i] == "(" and (not pattern.startswith("(?", i) or re.match(r"\(\?P?<\w+>", pattern[i:])):
            groups += 1
            named = re.match(r"\(\?P?<\w+>", pattern[i:])
            out.append(f"(?P<_g{groups}>")
            i += named.end() if named else 1
        else:
            out.append(pattern[i])
            i += 1
    return f"(?P<_g0>{''.join(out)})", groups


def _check_extract(node: Any, sql: str) -> None:
    """``regexp_extract(s, 'pattern'[, n])`` takes a pattern RE2 runs and a whole number."""
    import pyarrow.compute as pc

    shown = node.sql(dialect="spark")
    pattern = node.expression
    if not _is_string_literal(pattern) or _whole_literal(node.args.get("group")) is None:
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a string literal as its pattern and a "
                              f"whole-number literal as its group")
    _over_empty_text(node, sql, lambda text: pc.extract_regex(text, _numbered_groups(pattern.this)[0]))


def _check_split(node: Any, sql: str) -> None:
    """``split(s, 'pattern'[, limit])`` takes a pattern RE2 runs that never matches
    empty text (where Java's splitting has rules of its own), and a whole number."""
    import pyarrow.compute as pc

    shown = node.sql(dialect="spark")
    pattern = node.expression
    limit = node.args.get("limit")
    if not _is_string_literal(pattern) or (limit is not None and _whole_literal(limit) is None):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a string literal as its pattern and a "
                              f"whole-number literal as its limit")
    if _over_empty_text(node, sql, lambda text: pc.match_substring_regex(text, pattern.this))[0].as_py():
        raise DefinitionError(f"the condition {sql!r}: {shown!r} has a pattern that matches empty text; "
                              f"write it as a function condition instead")


def _split(node: Any, text: Any) -> Any:
    """``split(s, 'pattern'[, limit])``: the text between the pattern's matches, as an
    array (empty pieces kept, at the ends too); with a limit above 0, at most that
    many pieces, the last holding the rest, as Spark SQL splits::

        s         split(s, ',')      split(s, ',', 2)
        'a,b,,'   ['a', 'b', '', '']  ['a', 'b,,']
        ''        ['']               ['']
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(text):
        return text
    limit = _whole_literal(node.args.get("limit")) or 0  # none, or 0 or below: every piece
    splits = limit - 1 if limit > 0 else None
    return pc.split_pattern_regex(pc.cast(text, pa.string()), node.expression.this, max_splits=splits)


def _regexp_extract(node: Any, text: Any, rows: int) -> Any:
    """``regexp_extract(s, 'pattern', n)``: the text group ``n`` (0: all of it) of the
    pattern's first match in ``s`` takes, as Spark SQL gives it: empty where the
    pattern finds nothing or the group takes no part; NULL for NULL text; a group
    the pattern does not have an error, in the rows the pattern finds a match in::

        s           regexp_extract(s, '(a+)(b)?', 2)   regexp_extract(s, 'a+', 1)
        'aab'       'b'                                 error: no group 1
        'xx'        ''                                  ''
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(text):
        return text
    text = _array(text, rows)
    pattern, groups = _numbered_groups(node.expression.this)
    group = _whole_literal(node.args.get("group"))
    if not 0 <= group <= groups:
        if pc.any(pc.match_substring_regex(text, node.expression.this)).as_py():
            raise ValueError(f"{node.sql(dialect='spark')!r}: the pattern has {groups} groups, so no group {group}")
        taken = pa.nulls(len(text), pa.string())
    else:
        taken = pc.struct_field(pc.extract_regex(pc.cast(text, pa.string()), pattern), f"_g{group}")
    return pc.if_else(pc.is_null(text), pa.scalar(None, pa.string()), pc.coalesce(taken, ""))


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

    if _is_null_type(lists) or _is_null_type(item):
        return _nulls(rows)
    elements = lists.type.value_type
    if not pa.types.is_null(elements) and _is_text(elements) != _is_text(item.type):  # Spark refuses the query
        raise TypeError(f"{node.sql(dialect='spark')!r}: the arrays hold {elements} values, the item is {item.type}")
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    item = _array(item, rows)
    equal = _compare(node, pc.equal, pc.list_flatten(lists), item.take(pa.array(parents, pa.int64())), len(parents))
    equal = _array(equal, len(parents))
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

    if _is_null_type(lists):
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


def _check_text_function(node: Any, sql: str) -> None:
    """``lpad`` / ``rpad``, ``repeat`` take whole-number literals as their lengths and
    counts, ``lpad`` / ``rpad``, ``translate`` string literals as what they put."""
    from sqlglot import exp

    if type(node) is exp.Initcap and not (node.expression is None or node.expression.this == " "):
        raise DefinitionError(f"the condition {sql!r}: initcap takes one argument")  # (sqlglot cannot write the second)
    shown = node.sql(dialect="spark")
    numbers = [node.expression] if type(node) is exp.Pad else [node.args.get("times")] if type(node) is exp.Repeat else []
    texts = {exp.Pad: [node.args.get("fill_pattern")], exp.Translate: [node.args.get("from_"), node.args.get("to")]}.get(
        type(node), [])
    if any(_whole_literal(n) is None for n in numbers) or not all(
        t is None or _is_string_literal(t) for t in texts
    ):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes whole-number literals as lengths and "
                              f"counts, string literals as the text it puts")


def _of_text(node: Any, text: Any) -> Any:
    """``lpad(s, n[, p])`` / ``rpad`` (``s`` padded with ``p``, a space by default, or
    cut to ``n`` characters; ``s`` cut alone if ``p`` is empty), ``initcap`` (each
    word's first character, after a space, in title case, the rest lower case;
    Unicode's full mappings, as Java's: ``initcap('ß')`` is ``'Ss'``), ``reverse``,
    ``translate(s, 'ab', 'x')`` (each ``a`` made ``x``, each ``b`` dropped),
    ``repeat(s, n)``, ``ascii`` (the first character's code point, 0 for ''),
    ``octet_length`` / ``bit_length`` (of its UTF-8 bytes), as Spark SQL gives them::

        s       lpad(s, 5, 'xy')   rpad(s, 2)   initcap(s)   translate(s, 'ab', 'x')   ascii(s)
        'abc'   'xyabc'            'ab'         'Abc'        'xc'                      97
        ''      'xyxyx'            '  '         ''           ''                        0
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from sqlglot import exp

    if _is_null_type(text):
        return text
    kind = type(node)
    convert: Callable[[str], Any]
    arrow_type = pa.string()
    if kind is exp.Pad:
        width = _whole_literal(node.expression) or 0
        fill = node.args["fill_pattern"].this if node.args.get("fill_pattern") is not None else " "

        def convert(v: str) -> str:
            short = width - len(v)
            if short <= 0 or not fill:
                return v[: max(width, 0)]
            padding = (fill * -(-short // len(fill)))[:short]
            return padding + v if node.args.get("is_left") else v + padding
    elif kind is exp.Initcap:
        convert = lambda v: " ".join(w[:1].title() + w[1:].lower() for w in v.split(" "))  # noqa: E731
    elif kind is exp.Reverse:
        convert = lambda v: v[::-1]  # noqa: E731
    elif kind is exp.Translate:
        table: dict[int, int | None] = {}
        to = node.args["to"].this
        for i, char in enumerate(node.args["from_"].this):
            table.setdefault(ord(char), ord(to[i]) if i < len(to) else None)
        convert = lambda v: v.translate(table)  # noqa: E731
    elif kind is exp.Repeat:
        times = max(_whole_literal(node.args["times"]) or 0, 0)
        convert = lambda v: v * times  # noqa: E731
    elif kind is exp.Ascii:
        convert, arrow_type = (lambda v: ord(v[0]) if v else 0), pa.int32()
    else:  # octet_length, bit_length
        bits = 8 if kind is exp.BitLength else 1
        return pc.multiply(pc.cast(pc.binary_length(pc.cast(text, pa.string())), pa.int32()), bits)
    return _one_by_one(text, convert, arrow_type)


def _case_mapped(mapping: Callable[[str], str], text: Any) -> Any:
    """``lower`` / ``upper`` of text with Unicode's full case mappings, as Java's (and
    so Spark SQL's): ``upper('straße')`` is ``'STRASSE'``, ``lower('ΣΑΣ')`` is
    ``'σας'``, where Arrow maps one character to one. ASCII text goes through Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(text, pa.Scalar):
        return pa.scalar(None if not text.is_valid else mapping(text.as_py()), pa.string())
    if pc.all(pc.string_is_ascii(text)).as_py() is not False:
        return (pc.utf8_lower if mapping is str.lower else pc.utf8_upper)(text)
    return _each_distinct(text, mapping, pa.string())


def _looked_for(node: Any) -> list[Any]:
    """The parts of ``instr`` / ``locate`` or ``replace`` that are the text it looks
    for and puts (string literals, checked when built): ``[x]`` or ``[x, y]``, ``y``
    empty when not given."""
    from sqlglot import exp

    if type(node) is exp.StrPosition:
        return [node.args["substr"]]
    return [node.expression, node.args.get("replacement") or exp.Literal.string("")]


def _in_text(node: Any, text: Any) -> Any:
    """``instr(s, 'x')`` (``locate('x', s)``: where ``'x'`` first begins in ``s``,
    counted from 1, 0 if nowhere), ``left(s, n)`` / ``right(s, n)`` (the first or last
    ``n`` characters; none for ``n`` <= 0) and ``replace(s, 'x'[, 'y'])`` (each ``'x'``
    made ``'y'``, or removed; an empty ``'x'`` changes nothing), as Spark SQL gives
    them, counting characters, not bytes::

        s          instr(s, 'an')   left(s, 2)   right(s, 2)   replace(s, 'a', 'o')
        'banana'   2                'ba'         'na'          'bonono'
        ''         0                ''           ''            ''
    """
    import pyarrow as pa
    from sqlglot import exp

    if _is_null_type(text):
        return text
    kind = type(node)
    convert: Callable[[str], Any]
    if kind is exp.StrPosition:
        wanted, arrow_type = _looked_for(node)[0].this, pa.int32()
        convert = lambda v: v.find(wanted) + 1  # noqa: E731
    elif kind is exp.Replace:
        old, new = (part.this for part in _looked_for(node))
        arrow_type = pa.string()
        convert = (lambda v: v.replace(old, new)) if old else (lambda v: v)  # noqa: E731
    else:
        count, arrow_type = max(_whole_literal(node.expression) or 0, 0), pa.string()
        convert = (lambda v: v[:count]) if kind is exp.Left else (lambda v: v[max(len(v) - count, 0):] if count else "")  # noqa: E731
    return _one_by_one(text, convert, arrow_type)


def _floor_or_ceil(node: Any, value: Any, up: bool) -> Any:
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

    if _is_null_type(value):
        return value
    kind = value.type
    if pa.types.is_integer(kind):
        return pc.cast(value, pa.int64())
    if pa.types.is_decimal(kind):
        rounding = decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR
        with decimal.localcontext(prec=80):
            return _one_by_one(value, lambda v: v.to_integral_value(rounding),
                               pa.decimal128(min(kind.precision - kind.scale + 1, 38), 0))
    whole = _array((pc.ceil if up else pc.floor)(value), 1)
    nan = pc.is_nan(whole)
    fits = pc.or_(pc.and_(pc.greater_equal(whole, -(2.0**63)), pc.less(whole, 2.0**63)), nan)
    if pc.any(pc.invert(fits)).as_py():  # NULLs skipped
        beyond = pc.filter(_array(value, 1), pc.invert(fits))[0].as_py()
        raise ArithmeticError(f"{node.sql(dialect='spark')!r}: the {'ceiling' if up else 'floor'} of {beyond!r} is no BIGINT")
    result = pc.cast(pc.if_else(nan, 0.0, whole), pa.int64())  # NaN is 0, as Java casts it
    return _shaped_as(result, value)


def _one_by_one(value: Any, convert: Callable[[Any], Any], arrow_type: Any) -> Any:
    """:func:`_each_distinct` of an array or of a scalar."""

    result = _each_distinct(_array(value, 1), convert, arrow_type)
    return _shaped_as(result, value)


def _is_number_literal(node: Any) -> bool:
    from sqlglot import exp

    node = node.this if isinstance(node, exp.Neg) else node
    return isinstance(node, exp.Literal) and not node.is_string


def _is_string_literal(node: Any) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Literal) and node.is_string


def _widened_for_text(value: Any, numbers: list[Any]) -> Any:
    """A number ``value`` of ``x IN (...)`` widened to hold the number literals among
    the items as well, as Spark SQL types the whole list (so text items are read as
    that type: ``amount IN ('1.5', 2.5)`` reads '1.5' as a decimal, not a BIGINT)."""
    import pyarrow as pa

    if _is_null_type(value) or not _is_number(value.type) or not numbers:
        return value
    kinds = {value.type, *(n.type for n in numbers)}
    if any(pa.types.is_floating(k) for k in kinds):
        wide = pa.float64()
    elif any(pa.types.is_decimal(k) for k in kinds):
        wide = _wide_decimal(kinds)
    else:
        return value
    return value if value.type == wide else value.cast(wide)


def _wide_decimal(kinds: set[Any]) -> Any:
    """A decimal type holding every value of ``kinds`` (decimals and whole numbers,
    which hold up to 19 digits), as Spark SQL widens them (at most 38 digits)."""
    import pyarrow as pa

    scale = max((k.scale for k in kinds if pa.types.is_decimal(k)), default=0)
    whole = max(k.precision - k.scale if pa.types.is_decimal(k) else 19 for k in kinds)
    return pa.decimal128(min(38, whole + scale), scale)


def _contiguous(array: Any) -> Any:
    """A table's column (chunks) as one array."""
    import pyarrow as pa

    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _is_null(value: Any, rows: int) -> Any:
    import pyarrow.compute as pc

    return pc.is_null(_array(value, rows))


def _compare(node: Any, op: Callable[..., Any], left: Any, right: Any, rows: int) -> Any:
    """``op`` of two values of the comparison ``node``; NULL (of no type) on either
    side gives NULL."""
    if _is_null_type(left) or _is_null_type(right):
        return _nulls(rows)
    import pyarrow as pa

    left, right = _fractions_beside_fractions(*_numbers_of_text(node, left, right))
    left, right = _literal_like(node, left, right), _literal_like(node, right, left)
    left, right = _one_clock(left, right)
    try:
        return op(left, right)
    except pa.ArrowNotImplementedError:
        raise TypeError(f"{node.sql(dialect='spark')!r} cannot compare {left.type} with {right.type}") from None


def _as_type(value: Any, kind: Any) -> Any:
    """``value`` cast to the number type ``kind``; a decimal to a floating number
    through its text, correctly rounded as Spark SQL (Java's ``BigDecimal``) rounds
    it, where Arrow's direct cast is not (7.6 would be 7.6000000000000005)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_decimal(value.type) and pa.types.is_floating(kind):
        value = pc.cast(value, pa.string())
    return pc.cast(value, kind)


def _fractions_beside_fractions(left: Any, right: Any) -> tuple[Any, Any]:
    """A decimal beside a floating number as a DOUBLE, as Spark SQL widens the two
    (``score + 0.1 = 7.6`` adds and compares DOUBLEs); anything else as it is."""
    import pyarrow as pa

    floating = pa.types.is_floating(left.type) or pa.types.is_floating(right.type)
    if not floating:
        return left, right
    return tuple(_as_type(v, pa.float64()) if pa.types.is_decimal(v.type) else v for v in (left, right))  # type: ignore[return-value]


def _one_clock(left: Any, right: Any) -> tuple[Any, Any]:
    """Two timestamps of different kinds as instants in microseconds, as Spark SQL
    compares a ``TIMESTAMP`` with a ``TIMESTAMP_NTZ`` (the wall clock read as UTC,
    the session's time zone); anything else as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_timestamp(left.type) and pa.types.is_timestamp(right.type)) or left.type == right.type:
        return left, right
    kind = pa.timestamp("us", "UTC" if left.type.tz or right.type.tz else None)
    return pc.cast(left, kind, safe=False), pc.cast(right, kind, safe=False)


def _numbers_of_text(node: Any, first: Any, second: Any, try_: bool = False) -> tuple[Any, Any]:
    """Operands of ``node`` read in this order, a text field beside a number read as
    that number's type, as Spark SQL casts it (whole numbers as int64, others and
    decimals as float64; trimmed): ``code > 10`` compares ``' 20 '`` as 20. Text
    that is no such number is an error (``ValueError``) where it is read: the first
    operand in every row, the second where the first is not NULL (with ``try_``,
    NULL). Text literals are :func:`_literal_like`'s."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def number_type(value: Any) -> Any:
        kind = value.type
        return pa.int64() if pa.types.is_integer(kind) else pa.float64() if _is_number(kind) else None

    def number(text: str, arrow_type: Any) -> Any:
        try:
            return _read_as(text, arrow_type).as_py()
        except ValueError:
            if try_:
                return None
            raise

    def read(text: Any, arrow_type: Any) -> Any:
        try:
            return _each_distinct(text, lambda v: number(v, arrow_type), arrow_type)
        except ValueError as error:
            raise ValueError(f"{node.sql(dialect='spark')!r}: {error}") from None

    def decimal_as_float(value: Any) -> Any:
        return _as_type(value, pa.float64()) if pa.types.is_decimal(value.type) else value

    if _is_text_field(first) and (kind := number_type(second)) is not None:
        return read(_contiguous(first), kind), decimal_as_float(second)
    if _is_text_field(second) and (kind := number_type(first)) is not None:
        second = pc.if_else(_not(first, None)(len(second)), _contiguous(second), pa.scalar(None, second.type))
        return decimal_as_float(first), read(second, kind)
    return first, second


def _each_distinct(values: Any, convert: Callable[[Any], Any], arrow_type: Any) -> Any:
    """``convert`` of each of ``values`` (an array), as ``arrow_type`` values: called
    once per distinct value; NULL stays NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = _contiguous(values)
    distinct = pc.unique(values).drop_null()
    converted = pa.array([convert(v) for v in distinct.to_pylist()], arrow_type)
    return pc.take(converted, pc.index_in(values, distinct, skip_nulls=True))


def _is_text_field(value: Any) -> bool:
    import pyarrow as pa

    return not isinstance(value, pa.Scalar) and _is_text(value.type)


def _plain_text(arrow_type: Any) -> Any:
    """``arrow_type`` with text in Arrow's other layouts (``large_string``: Spark's
    batches with ``spark.sql.execution.arrow.useLargeVarTypes``; ``string_view``:
    Polars) as plain ``string``, at any depth of structs, which the evaluator reads."""
    import pyarrow as pa

    if pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return pa.string()
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_plain_text(field.type)) for field in arrow_type])
    return arrow_type


def _is_text(arrow_type: Any) -> bool:
    """Whether values of ``arrow_type`` are text: plain ``string``, the one layout the
    evaluator meets (:meth:`Expression.evaluate` reads the others as it, :func:`_plain_text`)."""
    import pyarrow as pa

    return pa.types.is_string(arrow_type)


def _is_number(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)


def _field(names: Sequence[str], name: str, what: str | None = None, holder: str = "the events") -> str:
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


# -- literals of a type ---------------------------------------------------------------------------


def _castable(arrow_type: Any) -> bool:
    """Whether a condition casts values of any type to ``arrow_type``."""
    import pyarrow as pa

    return arrow_type is not None and (
        _is_number(arrow_type) or pa.types.is_string(arrow_type) or pa.types.is_boolean(arrow_type)
        or pa.types.is_date32(arrow_type) or pa.types.is_timestamp(arrow_type)
    )


def _cast(node: Any, value: Any, arrow_type: Any, try_: bool) -> Any:
    """``CAST(x AS type)`` of a value, as Spark SQL's ANSI cast: text read as
    :func:`_read_as` reads it, fractions to whole numbers truncated toward zero,
    numbers to decimals rounded half up, numbers to booleans TRUE unless 0, booleans
    to numbers 1 or 0, whole numbers, booleans and dates to text, dates and
    timestamps to one another (:func:`_cast_in_time`); a value the type cannot hold
    is an error (``TRY_CAST``: NULL). Each distinct value is cast once."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if _is_null_type(value):
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
        readable = _is_number(source) or pa.types.is_boolean(source)
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

    return _one_by_one(value, one, arrow_type)


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
        return _to_date(node, value)
    if pa.types.is_integer(source):  # to an instant: seconds, in microseconds (an error beyond 64 bits)
        return pc.multiply_checked(pc.cast(value, pa.int64()), 1_000_000).cast(arrow_type)
    if pa.types.is_timestamp(source) and source.tz is not None:
        value = pc.cast(value, pa.timestamp("us", "UTC"), safe=False)
    return pc.cast(value, arrow_type, safe=False)  # a finer unit than microseconds truncated, as Spark keeps them


def _cast_one(value: Any, arrow_type: Any) -> Any:
    """One non-NULL value cast as :func:`_cast` says."""
    import pyarrow as pa

    if isinstance(value, str):
        if pa.types.is_string(arrow_type):
            return value
        if pa.types.is_decimal(arrow_type):
            if "_" in value:
                raise ValueError(f"{value!r} is no decimal")
            value = decimal.Decimal(value.strip())  # then rounded as a number
        else:
            return _read_as(value, arrow_type).as_py()
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


def _typed_literal(node: Any) -> pa.Scalar:
    """The value of a typed literal (``DATE '2024-01-31'``, ``10L``, ``CAST('7' AS
    INT)``) as an Arrow scalar; ``ValueError`` if its type is not one a condition
    compares or its text does not read as that type (checked when the pattern is
    built), but NULL for ``TRY_CAST``."""
    import pyarrow as pa

    arrow_type = _arrow_type(node.to)
    if arrow_type is None:
        raise ValueError(f"expression conditions have no {node.to.sql(dialect='spark')} values; "
                         f"write it as a function condition instead")
    if not node.this.is_string:  # a number, cast as a value is
        try:
            return _cast(node, _number_literal(node.this.this), arrow_type, bool(node.args.get("safe")))
        except (TypeError, ArithmeticError) as error:
            raise ValueError(str(error)) from None
    try:
        return _read_as(str(node.this.this), arrow_type)
    except ValueError:
        if node.args.get("safe"):
            return pa.scalar(None, arrow_type)
        raise


def _number_literal(text: str) -> pa.Scalar:
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


def _arrow_type(to: Any) -> pa.DataType | None:
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


def _literal_like(node: Any, value: Any, other: Any) -> Any:
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
            return _read_as(value.as_py(), wanted)
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


def _read_as(text: str, arrow_type: Any) -> pa.Scalar:
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
