"""A Spark ``Column`` condition as the SQL text of a pattern step.

``Pattern.begin("fail").where(F.col("kind") == "fail")`` is the same step as
``.where("kind = 'fail'")``: the Column's expression tree (a classic session's, read
through the JVM, or a Spark Connect Column's, read in Python) is written back as SQL
text, which the pattern keeps, evaluates and serialises like any other::

    Column                                           SQL text
    (F.col("kind") == "fail") & (F.col("n") > 1)     ((kind = 'fail') AND (n > 1))
    F.col("amount").isNull() | ~F.col("k").isin(1)   ((amount IS NULL) OR (NOT (k IN (1))))
    F.lower("s.name").like("a%")                     (lower(s.name) LIKE 'a%')
    F.expr("kind = 'ok'")                            (kind = 'ok')
    F.col("at") >= F.lit(datetime(2024, 1, 31))      (at >= TIMESTAMP '2024-01-31T00:00:00+00:00')
    F.col("day") == F.lit(date(2024, 1, 31))         (day = DATE '2024-01-31')
    F.col("code").cast("int") > 10                   (CAST(code AS INT) > 10)
    F.when(F.col("n") > 1, "big").otherwise("small") (CASE WHEN (n > 1) THEN 'big' ELSE 'small' END)
    F.col("tags")[0] == "vip"                        (tags[0] = 'vip')
    F.col("login").getField("kind") == "fail"        (login.kind = 'fail')

What the expression language of :class:`~statemachines.library.expressions.Expression`
does not support (a cast to an interval, a user-defined function...) is
refused when the pattern is built, naming it. A timestamp literal is written as the instant it is (a
datetime without a zone is the driver's local time, as Spark reads it), a
``TIMESTAMP_NTZ`` one as its wall clock.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from typing import Any

from pyspark.sql import types as T

from statemachines.errors import DefinitionError

__all__ = ["column_sql"]

_INFIX = {
    "=": "=", "==": "=", "<=>": "<=>", "!=": "!=", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
    "and": "AND", "or": "OR", "+": "+", "-": "-", "*": "*", "/": "/", "%": "%",
    "like": "LIKE", "ilike": "ILIKE", "rlike": "RLIKE",
}
_POSTFIX = {"isnull": "IS NULL", "isnotnull": "IS NOT NULL"}
_PREFIX = {"!": "NOT", "not": "NOT", "negative": "-"}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# the types of Spark Connect literals whose Python value is written as it is
_PLAIN_TYPES = (
    T.StringType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
    T.NullType,
)


def column_sql(column: Any) -> str:
    """The SQL text of a Spark Column's expression.

    Raises:
        DefinitionError: the Column has a part SQL conditions cannot hold, or nests
            deeper than it can be read (a chain of ``&`` or of ``|`` is one level).
    """
    try:
        if type(column).__module__.startswith("pyspark.sql.connect."):  # its tree is Python objects
            return _sql(_ConnectNode(column._expr))
        return _sql(_ClassicNode(column._jc.node()))
    except RecursionError:
        raise DefinitionError(
            "a Column condition nests its parts too deeply to be read; build a long chain as c1 | c2 | c3 ... "
            "(or with &), or use isin(...)"
        ) from None


def _sql(node: Any) -> str:
    kind = node.kind
    if kind == "attribute":
        return node.name
    if kind == "literal":
        return _literal(node.value)
    if kind == "sql":
        return f"({node.text})"
    if kind == "cast":  # its name is the type's
        [value] = node.arguments
        return f"{'TRY_CAST' if node.tries else 'CAST'}({_sql(value)} AS {node.name})"
    if kind == "case":  # no otherwise: NULL, as in SQL
        branches, otherwise = node.branches
        whens = " ".join(f"WHEN {_sql(condition)} THEN {_sql(value)}" for condition, value in branches)
        return f"(CASE {whens}{'' if otherwise is None else ' ELSE ' + _sql(otherwise)} END)"
    if kind == "extract":  # a[i], an element of an array, or a['b'] (getField), the field b of a struct
        child, extraction = node.arguments
        if extraction.kind == "literal" and isinstance(extraction.value, str):
            return f"{_sql(child)}.{_identifier([extraction.value])}"
        return f"{_sql(child)}[{_sql(extraction)}]"
    if kind != "function":
        raise DefinitionError(
            f"a Column condition is written as SQL text, and {node.text} has no place in it; "
            f"write the condition as SQL text (see Pattern.where)"
        )
    low = node.name.lower()
    if low in ("and", "or") and len(node.arguments) == 2:  # a chain, a | b | c ...: one level, however long
        return f"({f' {_INFIX[low]} '.join(_sql(part) for part in _chained(node, low))})"
    name, args = node.name, [_sql(a) for a in node.arguments]
    if low in _INFIX and len(args) == 2:
        return f"({args[0]} {_INFIX[low]} {args[1]})"
    if low in _POSTFIX and len(args) == 1:
        return f"({args[0]} {_POSTFIX[low]})"
    if low in _PREFIX and len(args) == 1:
        return f"({_PREFIX[low]} {args[0]})"
    if low == "in" and args:
        return f"({args[0]} IN ({', '.join(args[1:])}))"
    return f"{name}({', '.join(args)})"


def _chained(node: Any, name: str) -> list[Any]:
    """The operands of a chain of the function ``name`` (``and`` or ``or``), first to
    last: a Column built as ``c1 | c2 | c3 ...`` nests a level per operator, to the
    left, and written as nested parentheses it would nest as deep in the SQL text,
    more than a parser reads::

        Column                  SQL text
        (a | b) | c             ((a) OR (b) OR (c))
        a | (b | c)             ((a) OR ((b) OR (c)))
    """
    operands = []
    while node.kind == "function" and node.name.lower() == name and len(node.arguments) == 2:
        node, last = node.arguments
        operands.append(last)
    operands.append(node)
    return operands[::-1]


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime.datetime):  # a zone: TIMESTAMP's instant; none: TIMESTAMP_NTZ's wall clock
        return f"{'TIMESTAMP' if value.tzinfo else 'TIMESTAMP_NTZ'} '{value.isoformat()}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return f"{value:f}BD"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return f"{value!r}D"  # a DOUBLE, as the Column's literal is (0.1 alone is a DECIMAL)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise DefinitionError(
        f"a Column condition's literal {value!r} has no SQL text here (strings, numbers, booleans, "
        f"dates, timestamps and NULL do); write the condition as SQL text"
    )


def _identifier(parts: list[str]) -> str:
    return ".".join(p if _PLAIN.fullmatch(p) else "`" + p.replace("`", "``") + "`" for p in parts)


class _ClassicNode:
    """A classic Column's node (``org.apache.spark.sql.internal.ColumnNode``), read
    through the JVM."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self.kind = {
            "UnresolvedAttribute": "attribute", "Literal": "literal", "SqlExpression": "sql",
            "UnresolvedFunction": "function", "Cast": "cast", "CaseWhenOtherwise": "case",
            "UnresolvedExtractValue": "extract",
        }.get(node.getClass().getSimpleName(), "other")

    @property
    def name(self) -> str:
        if self.kind == "attribute":
            return _identifier(_items(self._node.nameParts()))
        if self.kind == "cast":
            return str(self._node.dataType().sql())
        return str(self._node.functionName())

    @property
    def tries(self) -> bool:
        """Whether a cast is ``try_cast``'s (NULL where a value does not cast)."""
        mode = self._node.evalMode()
        return bool(mode.isDefined()) and str(mode.get().getClass().getSimpleName()).startswith("Try")

    @property
    def value(self) -> Any:
        value = self._node.value()
        if value is None or isinstance(value, bool | int | float | str | decimal.Decimal):
            return value
        if not hasattr(value, "getClass"):  # converted by py4j (bytes)
            return _Opaque(self._node.sql())
        kind, text = value.getClass().getSimpleName(), str(value.toString())
        if kind == "Timestamp":  # java.sql.Timestamp: an instant
            return datetime.datetime.fromisoformat(str(value.toInstant().toString()))
        if kind in ("Instant", "LocalDateTime"):
            return datetime.datetime.fromisoformat(text)
        if kind in ("Date", "LocalDate"):
            return datetime.date.fromisoformat(text)
        if kind == "BigDecimal":
            return decimal.Decimal(str(value.toPlainString()))
        return _Opaque(self._node.sql())

    @property
    def text(self) -> str:
        return str(self._node.expression()) if self.kind == "sql" else str(self._node.sql())

    @property
    def branches(self) -> tuple[list[tuple[_ClassicNode, _ClassicNode]], _ClassicNode | None]:
        """A ``when`` chain's ``(condition, value)`` pairs and its ``otherwise`` (or ``None``)."""
        pairs = [(_ClassicNode(b._1()), _ClassicNode(b._2())) for b in _items(self._node.branches())]
        otherwise = self._node.otherwise()
        return pairs, _ClassicNode(otherwise.get()) if otherwise.isDefined() else None

    @property
    def arguments(self) -> list[_ClassicNode]:
        if self.kind == "cast":
            return [_ClassicNode(self._node.child())]
        if self.kind == "extract":
            return [_ClassicNode(self._node.child()), _ClassicNode(self._node.extraction())]
        return [_ClassicNode(a) for a in _items(self._node.arguments())]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class _ConnectNode:
    """A Spark Connect Column's expression (``pyspark.sql.connect.expressions``)."""

    def __init__(self, expression: Any) -> None:
        self._expression = expression
        self.kind = {
            "ColumnReference": "attribute", "LiteralExpression": "literal", "SQLExpression": "sql",
            "UnresolvedFunction": "function", "CastExpression": "cast", "CaseWhen": "case",
            "UnresolvedExtractValue": "extract",
        }.get(type(expression).__name__, "other")

    @property
    def name(self) -> str:
        if self.kind == "attribute":
            return str(self._expression._unparsed_identifier)  # SQL identifier syntax already
        if self.kind == "cast":  # a type, or its name as the Column was given it
            data_type = self._expression._data_type
            return data_type if isinstance(data_type, str) else data_type.simpleString()
        return str(self._expression._name)

    @property
    def tries(self) -> bool:
        """Whether a cast is ``try_cast``'s (NULL where a value does not cast)."""
        return self._expression._eval_mode == "try"

    @property
    def value(self) -> Any:
        value, data_type = self._expression._value, self._expression._dataType
        if isinstance(data_type, (*_PLAIN_TYPES, T.DecimalType)):
            return value
        if isinstance(value, int) and isinstance(data_type, T.DateType):  # kept as days since 1970
            return _EPOCH.date() + datetime.timedelta(days=value)
        if isinstance(value, int) and isinstance(data_type, T.TimestampType | T.TimestampNTZType):  # microseconds
            moment = _EPOCH + datetime.timedelta(microseconds=value)
            return moment if isinstance(data_type, T.TimestampType) else moment.replace(tzinfo=None)
        return _Opaque(f"{value!r} (a {data_type.simpleString()})")

    @property
    def text(self) -> str:
        return str(self._expression._expr) if self.kind == "sql" else str(self._expression)

    @property
    def branches(self) -> tuple[list[tuple[_ConnectNode, _ConnectNode]], _ConnectNode | None]:
        """A ``when`` chain's ``(condition, value)`` pairs and its ``otherwise`` (or ``None``)."""
        pairs = [(_ConnectNode(c), _ConnectNode(v)) for c, v in self._expression._branches]
        otherwise = self._expression._else_value
        return pairs, None if otherwise is None else _ConnectNode(otherwise)

    @property
    def arguments(self) -> list[_ConnectNode]:
        if self.kind == "cast":
            return [_ConnectNode(self._expression._expr)]
        if self.kind == "extract":
            return [_ConnectNode(self._expression._child), _ConnectNode(self._expression._extraction)]
        return [_ConnectNode(a) for a in self._expression._args]


class _Opaque:
    """A literal of a type with no SQL text here (a date, a decimal...)."""

    def __init__(self, shown: str) -> None:
        self.shown = shown

    def __repr__(self) -> str:
        return self.shown


def _items(seq: Any) -> list[Any]:
    """The items of a Scala ``Seq`` seen through the JVM."""
    return [seq.apply(i) for i in range(seq.length())]
