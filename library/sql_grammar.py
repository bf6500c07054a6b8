"""What a condition may say, for :mod:`statemachines.library.expressions`.

Spark SQL's syntax as sqlglot parses it (a few functions read as Spark SQL reads
them: ``isnull(x)`` as ``x IS NULL``, ``regexp(s, r)`` as ``s RLIKE r``), the parsed
tree brought to one shape, and the checks made when a pattern is built: a condition
that could not run is refused then, naming what is not supported::

    condition                     built
    kind = 'fail'                 yes
    kind LIKE ANY ('f%', 'x%')    yes, read as (kind LIKE 'f%') OR (kind LIKE 'x%')
    amount + 1                    refused: not a test (it gives numbers)
    md5(kind) = 'x'               refused: md5 is not supported
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from statemachines.errors import DefinitionError
from statemachines.library.sql_text import looked_for, numbered_groups, text_tests
from statemachines.library.sql_times import DATE_UNITS, TIME_UNITS, date_parts, time_unit
from statemachines.library.sql_values import (
    arrow_type_of,
    castable,
    is_string_literal,
    typed_literal,
    whole_literal,
)

__all__ = ["MAX_NESTING", "check", "check_nesting", "dialect", "nesting", "normalised", "scale_of", "shortened"]


@functools.cache
def _supported() -> frozenset[type]:
    from sqlglot import exp

    return frozenset({
        exp.Column, exp.Identifier, exp.Dot, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
        exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ,
        exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, *text_tests(),
        exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg,
        exp.Lower, exp.Upper, exp.Abs, exp.Length, exp.Coalesce, exp.Case, exp.If,
        exp.Trim, exp.Substring, exp.Concat, exp.DPipe, exp.IsNan, exp.Nanvl,
        exp.Greatest, exp.Least, exp.Round, exp.Floor, exp.Ceil, *date_parts(),
        exp.TsOrDsToDate, exp.TsOrDsAdd, exp.DateDiff, exp.Var,  # a unit, checked in check
        exp.Sqrt, exp.Sign, exp.Exp, exp.Ln, exp.Log, exp.Pow, exp.Cbrt, exp.Anonymous,  # named in check
        exp.Nullif, exp.Nvl2, exp.StrPosition, exp.Left, exp.Right, exp.Replace, exp.RegexpExtract,
        exp.ArrayContains, exp.ArraySize, exp.Bracket, exp.MapContainsKey, exp.RegexpSplit, exp.Pad, exp.Initcap, exp.Reverse, exp.Translate,
        exp.Repeat, exp.Ascii, exp.BitLength, exp.StrToUnix, exp.TimestampTrunc, exp.DateTrunc, exp.AddMonths, exp.LastDay,
        exp.Cast, exp.TryCast, exp.DataType, exp.DataTypeParam,  # the types checked in check
        exp.Negative, exp.Pi, exp.SafeAdd, exp.SafeSubtract, exp.SafeMultiply, exp.SafeDivide,
    })


MAX_NESTING = 200
"""How deep a condition's parts may nest (a chain of ``AND`` or of ``OR`` counting
as one level): the evaluator reads a part by reading its parts first, so a
condition deeper than this is refused when it is built rather than failing on
the events."""


def nesting(tree: Any) -> int:
    """How deep ``tree``'s parts nest, a chain of one ``AND`` or ``OR`` after another
    one level, as the evaluator reads it::

        condition                        nesting
        a = 1                            3 (the comparison, the field, its name)
        a = 1 OR a = 2 OR a = 3          4
        a + 1 + 1 > 0                    5
    """
    from sqlglot import exp

    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for part in node.iter_expressions():
            chained = isinstance(node, exp.And | exp.Or) and type(part) is type(node) and part is node.this
            stack.append((part, depth if chained else depth + 1))
    return deepest


def check_nesting(depth: int, sql: str) -> None:
    """Refuse a condition whose parts nest ``depth`` levels deep, more than
    :data:`MAX_NESTING`; before :func:`check`, which reads the parts."""
    if depth > MAX_NESTING:
        raise DefinitionError(
            f"the condition {shortened(sql)!r} nests {depth} levels deep, more than the {MAX_NESTING} expression "
            f"conditions read: write a long chain as one of AND or OR terms, or IN (...), not nested parts"
        )


def check(tree: Any, sql: str) -> None:
    """Refuse a condition that says what expression conditions cannot (its nesting
    checked before, by :func:`check_nesting`)."""
    from sqlglot import exp

    supported = _supported()
    for cast in tree.find_all(exp.Cast):  # TryCast too
        if not isinstance(cast.this, exp.Literal):
            if not castable(arrow_type_of(cast.to)):
                raise DefinitionError(
                    f"the condition {sql!r} uses {cast.sql(dialect='spark')!r}: expression conditions cast "
                    f"values to numbers, text, booleans, dates or timestamps only; write it as a function condition instead"
                )
            continue
        try:
            typed_literal(cast)
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
        if kind in text_tests():
            _check_text_test(node, sql)
        if kind is exp.Trim and node.expression is not None and not is_string_literal(node.expression):
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
        if kind is exp.Anonymous and node.name.upper() == "BROUND" and whole_literal(scale_of(node)) is None:
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its scale")
        if kind in (exp.RegexpLike, exp.RegexpExtract, exp.RegexpSplit) and is_string_literal(node.expression) and (
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
        if kind is exp.Bracket and (len(node.expressions) != 1 or whole_literal(node.expressions[0]) is None
                                    and not is_string_literal(node.expressions[0])):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a whole-number "
                                  f"literal as its index, or a text literal as a map's key or a struct's field")
        if kind is exp.MapContainsKey and not isinstance(node.args.get("key"), exp.Literal):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes a literal as its key")
        if kind is exp.Round and whole_literal(node.args.get("decimals")) is None:
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
            not all(is_string_literal(part) for part in looked_for(node))
            or node.args.get("position") is not None
        ):
            raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} takes string literals as "
                                  f"what it looks for and puts (and no start position)")
        if kind in (exp.Left, exp.Right) and whole_literal(node.expression) is None:
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
                  | exp.Ascii | exp.BitLength | exp.StrToUnix) or type(node) in date_parts():
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


def _check_text_test(node: Any, sql: str) -> None:
    """A text test's pattern is a string literal, and a regular expression one RE2 runs."""

    shown = node.sql(dialect="spark")
    if not is_string_literal(node.expression):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} needs a string literal as its pattern")
    _over_empty_text(node, sql, lambda text: text_tests()[type(node)](text, node.expression.this))


def _over_empty_text(node: Any, sql: str, run: Callable[[Any], Any]) -> Any:
    """``run`` of a function's pattern over one empty text, checking that Arrow runs
    the pattern when the pattern is built; its result."""
    import pyarrow as pa

    try:
        return run(pa.array([""]))
    except pa.ArrowInvalid as error:
        raise DefinitionError(f"the condition {sql!r}: {node.sql(dialect='spark')!r} has a pattern Arrow cannot run: "
                              f"{error}") from None


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
        isinstance(node.args.get("unit"), exp.Var | exp.Literal) and time_unit(node)
    ):
        units = ", ".join(u for u, arrow in TIME_UNITS.items() if kind is exp.TimestampTrunc or arrow in DATE_UNITS)
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes one of the units {units}, as a literal")
    if kind is exp.AddMonths and whole_literal(node.expression) is None:
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a whole-number literal as its months")


@functools.cache
def _default_unix_format() -> Any:
    """The format sqlglot gives ``unix_timestamp(x)`` (Spark's default, yyyy-MM-dd HH:mm:ss)."""
    import sqlglot

    return sqlglot.parse_one("unix_timestamp(x)", read=dialect()).args["format"]


_NAMED = {"LOG10": (1,), "LOG2": (1,), "BROUND": (1, 2), "ISNULL": (1,), "ISNOTNULL": (1,), "REGEXP": (2,),
          "CARDINALITY": (1,), "BTRIM": (1, 2), "OCTET_LENGTH": (1,), "EQUAL_NULL": (2,), "NULLIFZERO": (1,),
          "ZEROIFNULL": (1,), "POSITIVE": (1,), "PMOD": (2,), "E": (0,), "TRY_MOD": (2,)}  # functions sqlglot leaves unnamed here: their arguments


@functools.cache
def dialect() -> Any:
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
        arguments; else (or without ``build``) left named, for ``check`` to read."""
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


def normalised(tree: Any) -> Any:
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


def scale_of(node: Any) -> Any:
    """``bround(x, d)``'s ``d`` (None for ``bround(x)``)."""
    return node.expressions[1] if len(node.expressions) > 1 else None


def _check_extract(node: Any, sql: str) -> None:
    """``regexp_extract(s, 'pattern'[, n])`` takes a pattern RE2 runs and a whole number."""
    import pyarrow.compute as pc

    shown = node.sql(dialect="spark")
    pattern = node.expression
    if not is_string_literal(pattern) or whole_literal(node.args.get("group")) is None:
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a string literal as its pattern and a "
                              f"whole-number literal as its group")
    _over_empty_text(node, sql, lambda text: pc.extract_regex(text, numbered_groups(pattern.this)[0]))


def _check_split(node: Any, sql: str) -> None:
    """``split(s, 'pattern'[, limit])`` takes a pattern RE2 runs that never matches
    empty text (where Java's splitting has rules of its own), and a whole number."""
    import pyarrow.compute as pc

    shown = node.sql(dialect="spark")
    pattern = node.expression
    limit = node.args.get("limit")
    if not is_string_literal(pattern) or (limit is not None and whole_literal(limit) is None):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes a string literal as its pattern and a "
                              f"whole-number literal as its limit")
    if _over_empty_text(node, sql, lambda text: pc.match_substring_regex(text, pattern.this))[0].as_py():
        raise DefinitionError(f"the condition {sql!r}: {shown!r} has a pattern that matches empty text; "
                              f"write it as a function condition instead")


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
    if any(whole_literal(n) is None for n in numbers) or not all(
        t is None or is_string_literal(t) for t in texts
    ):
        raise DefinitionError(f"the condition {sql!r}: {shown!r} takes whole-number literals as lengths and "
                              f"counts, string literals as the text it puts")


def shortened(sql: str, most: int = 120) -> str:
    """``sql`` as an error message quotes it: at most ``most`` characters."""
    return sql if len(sql) <= most else f"{sql[:most - 20]} ... {sql[-15:]}"
