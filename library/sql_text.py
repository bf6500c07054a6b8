"""Text functions and regular expressions over Arrow arrays, as Spark SQL gives
them (a regular expression is RE2's, which Java's simple ones are)::

    expression                               gives
    upper(kind)                              'FAIL'
    substring('statemachines', 6, 3)         'mac'
    regexp_extract('a-12', '([a-z])-(\\d+)', 2)    '12'
    split('a,b', ',')                        ['a', 'b']
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from statemachines.library.sql_values import (
    as_array,
    each_distinct,
    is_null_type,
    one_by_one,
    whole_literal,
)

__all__ = [
    "case_mapped",
    "in_text",
    "looked_for",
    "numbered_groups",
    "of_text",
    "regexp_extract",
    "split",
    "text_tests",
]


@functools.cache
def text_tests() -> dict[type, Callable[[Any, str], Any]]:
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


def numbered_groups(pattern: str) -> tuple[str, int]:
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


def split(node: Any, text: Any) -> Any:
    """``split(s, 'pattern'[, limit])``: the text between the pattern's matches, as an
    array (empty pieces kept, at the ends too); with a limit above 0, at most that
    many pieces, the last holding the rest, as Spark SQL splits::

        s         split(s, ',')      split(s, ',', 2)
        'a,b,,'   ['a', 'b', '', '']  ['a', 'b,,']
        ''        ['']               ['']
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if is_null_type(text):
        return text
    limit = whole_literal(node.args.get("limit")) or 0  # none, or 0 or below: every piece
    splits = limit - 1 if limit > 0 else None
    return pc.split_pattern_regex(pc.cast(text, pa.string()), node.expression.this, max_splits=splits)


def regexp_extract(node: Any, text: Any, rows: int) -> Any:
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

    if is_null_type(text):
        return text
    text = as_array(text, rows)
    pattern, groups = numbered_groups(node.expression.this)
    group = whole_literal(node.args.get("group"))
    if not 0 <= group <= groups:
        if pc.any(pc.match_substring_regex(text, node.expression.this)).as_py():
            raise ValueError(f"{node.sql(dialect='spark')!r}: the pattern has {groups} groups, so no group {group}")
        taken = pa.nulls(len(text), pa.string())
    else:
        taken = pc.struct_field(pc.extract_regex(pc.cast(text, pa.string()), pattern), f"_g{group}")
    return pc.if_else(pc.is_null(text), pa.scalar(None, pa.string()), pc.coalesce(taken, ""))


def of_text(node: Any, text: Any) -> Any:
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

    if is_null_type(text):
        return text
    kind = type(node)
    convert: Callable[[str], Any]
    arrow_type = pa.string()
    if kind is exp.Pad:
        width = whole_literal(node.expression) or 0
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
        times = max(whole_literal(node.args["times"]) or 0, 0)
        convert = lambda v: v * times  # noqa: E731
    elif kind is exp.Ascii:
        convert, arrow_type = (lambda v: ord(v[0]) if v else 0), pa.int32()
    else:  # octet_length, bit_length
        bits = 8 if kind is exp.BitLength else 1
        return pc.multiply(pc.cast(pc.binary_length(pc.cast(text, pa.string())), pa.int32()), bits)
    return one_by_one(text, convert, arrow_type)


def case_mapped(mapping: Callable[[str], str], text: Any) -> Any:
    """``lower`` / ``upper`` of text with Unicode's full case mappings, as Java's (and
    so Spark SQL's): ``upper('straße')`` is ``'STRASSE'``, ``lower('ΣΑΣ')`` is
    ``'σας'``, where Arrow maps one character to one. ASCII text goes through Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(text, pa.Scalar):
        return pa.scalar(None if not text.is_valid else mapping(text.as_py()), pa.string())
    if pc.all(pc.string_is_ascii(text)).as_py() is not False:
        return (pc.utf8_lower if mapping is str.lower else pc.utf8_upper)(text)
    return each_distinct(text, mapping, pa.string())


def looked_for(node: Any) -> list[Any]:
    """The parts of ``instr`` / ``locate`` or ``replace`` that are the text it looks
    for and puts (string literals, checked when built): ``[x]`` or ``[x, y]``, ``y``
    empty when not given."""
    from sqlglot import exp

    if type(node) is exp.StrPosition:
        return [node.args["substr"]]
    return [node.expression, node.args.get("replacement") or exp.Literal.string("")]


def in_text(node: Any, text: Any) -> Any:
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

    if is_null_type(text):
        return text
    kind = type(node)
    convert: Callable[[str], Any]
    if kind is exp.StrPosition:
        wanted, arrow_type = looked_for(node)[0].this, pa.int32()
        convert = lambda v: v.find(wanted) + 1  # noqa: E731
    elif kind is exp.Replace:
        old, new = (part.this for part in looked_for(node))
        arrow_type = pa.string()
        convert = (lambda v: v.replace(old, new)) if old else (lambda v: v)  # noqa: E731
    else:
        count, arrow_type = max(whole_literal(node.expression) or 0, 0), pa.string()
        convert = (lambda v: v[:count]) if kind is exp.Left else (lambda v: v[max(len(v) - count, 0):] if count else "")  # noqa: E731
    return one_by_one(text, convert, arrow_type)
