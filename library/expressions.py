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

This module holds the condition and the tables it reads; the language is in
``sql_grammar`` (what a condition may say, checked when it is built) and
``sql_evaluator`` (a condition over a table of events, a column at a time), which
evaluates with ``sql_values``, ``sql_numbers``, ``sql_times`` and ``sql_text``.
"""

from __future__ import annotations

import datetime
import decimal
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

import attrs

from statemachines.errors import DefinitionError
from statemachines.library.sql_evaluator import Evaluator
from statemachines.library.sql_grammar import (
    check,
    check_nesting,
    dialect,
    nesting,
    normalised,
    shortened,
)
from statemachines.library.sql_values import field_named, plain_text

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Expression", "records_table"]


@attrs.frozen(eq=False)
class Expression:
    """A SQL condition over an event's fields; equal to another of the same text."""

    sql: str
    fields: tuple[str, ...] = attrs.field(init=False)  # the top-level fields it reads, in the order written
    _tree: Any = attrs.field(init=False, repr=False)
    _depth: int = attrs.field(init=False, repr=False)  # how deep its parts nest (sql_grammar.nesting)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip():
            raise DefinitionError(f"an expression condition needs SQL text, got {self.sql!r}")
        self._set(*_parsed(self.sql))

    def _set(self, tree: Any, fields: tuple[str, ...], depth: int) -> None:
        for name, value in [("fields", fields), ("_tree", tree), ("_depth", depth)]:
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        return type(other) is Expression and other.sql == self.sql

    def __hash__(self) -> int:
        return hash((Expression, self.sql))

    def __getstate__(self) -> dict[str, str]:
        return {"sql": self.sql}

    def __setstate__(self, state: dict[str, str]) -> None:
        object.__setattr__(self, "sql", state["sql"])
        self.__attrs_post_init__()

    def joined(self, other: Expression, how: str) -> Expression:
        """This condition and ``other`` joined by ``how`` (``AND`` or ``OR``), each in
        parentheses, but this one not again where it is already a chain of ``how``:
        conditions joined one by one make a flat chain, which parses and runs at any
        length, not a condition nested a level deeper per join::

            this              how   other           joined
            kind = 'a'        AND   amount > 1      (kind = 'a') AND (amount > 1)
            (x) AND (y)       AND   z               (x) AND (y) AND (z)
            (x) AND (y)       OR    z               ((x) AND (y)) OR (z)
        """
        from sqlglot import exp

        chain = exp.And if how == "AND" else exp.Or
        if type(self._tree) is not chain:  # a level deeper: parsed and checked whole, as it may nest too deeply
            return Expression(f"({self.sql}) {how} ({other.sql})")
        # a chain continued: its tree made of the two checked trees, not by parsing the
        # whole text again (n where()s would read n² terms); the parser reads a chain's
        # terms one after another, each as deep as it reads the term alone
        _parsed(f"({other.sql})")
        depth = max(self._depth, other._depth + 2)
        sql = f"{self.sql} {how} ({other.sql})"
        check_nesting(depth, sql)
        joined = object.__new__(Expression)
        object.__setattr__(joined, "sql", sql)
        joined._set(chain(this=self._tree, expression=exp.Paren(this=other._tree)),
                    tuple(dict.fromkeys(self.fields + other.fields)), depth)
        return joined

    def evaluate(self, table: pa.Table) -> pa.BooleanArray:
        """Whether each row meets the condition (NULL counts as not met)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for name in self.fields:
            field_named(table.column_names, name, f"the condition {self.sql!r} reads {name!r}", "the events")
        plain = pa.schema([field.with_type(plain_text(field.type)) for field in table.schema])
        result = Evaluator(table if plain == table.schema else table.cast(plain)).value(self._tree)
        if isinstance(result, pa.Scalar):
            result = pa.repeat(result, table.num_rows)
        if pa.types.is_null(result.type):
            result = result.cast(pa.bool_())
        if not pa.types.is_boolean(result.type):
            raise TypeError(f"the condition {self.sql!r} gives {result.type} values, not TRUE or FALSE")
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        return pc.fill_null(result, False)


@functools.lru_cache(maxsize=4096)
def _parsed(sql: str) -> tuple[Any, tuple[str, ...], int]:
    """The checked tree of the condition ``sql``, the top-level fields it reads and
    how deep its parts nest:
    made once per process for each text, as a pattern's conditions are made again
    each time it is unpickled (in each Spark task, for a stream in each micro-batch).

    Raises:
        DefinitionError: the text does not parse, or says what conditions cannot.
    """
    try:
        import sqlglot
        from sqlglot import exp
    except ImportError:
        raise DefinitionError("SQL conditions need sqlglot and pyarrow: pip install 'statemachines[sql]'") from None
    try:
        tree = normalised(sqlglot.parse_one(sql, read=dialect()))
    except sqlglot.errors.ParseError as error:
        why = error.errors[0].get("description") if error.errors else str(error)
        raise DefinitionError(f"cannot parse the condition {sql!r}: {why}") from None
    except RecursionError:  # the parser descends a few dozen calls per level
        raise DefinitionError(
            f"cannot parse the condition {shortened(sql)!r}: its parentheses, NOTs or function calls nest too deeply "
            f"for the parser; write a long chain as one of AND or OR terms, or IN (...)"
        ) from None
    depth = nesting(tree)
    check_nesting(depth, sql)
    check(tree, sql)
    names = [c.parts[0].name for c in tree.find_all(exp.Column, bfs=False)]  # as written
    return tree, tuple(dict.fromkeys(names)), depth


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
