"""The typed lowering of a parsed s3-select statement onto a DataFusion AST.

s3-select is dynamically typed (a CSV field is text that becomes a number next to a number,
``1 + '2'`` is an error, ``5 = 'hello'`` is simply false); DataFusion is statically typed. The
:class:`Lowering` walks the sqlglot tree once, infers a static *kind* for every expression and
rewrites it into nodes whose DataFusion meaning is exact:

* references: positional ``_N``, header names, Parquet columns, table-alias prefixes and JSON
  paths become quoted column references (JSON paths are registered as extra input columns);
* aliases are expanded where used (each alias is lowered once and the lowered tree reused;
  DataFusion's common-subexpression elimination then computes it once per row within a
  projection); aliases the WHERE clause reads are instead computed once per row in subqueries
  below the filter and read as columns (``Lowering.materialize``); cyclic references are
  rejected;
* operators get the flavour's coercions (CSV text vs numbers, JSON text, timestamps); two
  numbers meet by one table, :data:`NUMBER_COERCION` (a decimal column stays decimal next to
  an integer and becomes a double next to a float), and a number literal next to a decimal is
  an exact decimal;
* functions map onto DataFusion builtins when their semantics are exact, else onto the UDFs of
  :mod:`select_dialect.udf_names`.

Anything not in the dispatch tables is rejected with :class:`UnsupportedFeatureError`; the
output tree is built only from nodes created here, never from user text.

Hand-written because the kinds are s3-select's, not SQL types (CSV field text that is a number
next to a number, JSON values, the S3_TIMESTAMP struct), and each coercion must name the
DataFusion expression that gives s3-select's answer; sqlglot's type annotation knows neither.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.errors import QuerySemanticError, UnsupportedFeatureError
from select_dialect.flavors import Flavor
from select_dialect.s3select import Missing
from select_dialect.timestamp_format import strftime_for


class Kind(StrEnum):
    """The static kind of a lowered expression (what DataFusion type it has, and how s3-select
    coerces it next to other kinds)."""

    INT = "int"
    FLOAT = "float"
    DECIMAL = "decimal"  # an Arrow decimal128(p, s): exact, DataFusion carries p and s
    STRING = "string"  # text that is a string (literal, string function result, Parquet string)
    FIELD = "field"  # CSV field text: compares with numbers as a number
    BOOL = "bool"
    TS = "ts"  # the S3_TIMESTAMP struct
    NATIVE_TS = "native_ts"  # an Arrow timestamp/date column (Parquet)
    NULL = "null"
    JSON = "json"  # compact JSON text of a JSON value


INT, FLOAT, DECIMAL = Kind.INT, Kind.FLOAT, Kind.DECIMAL
STRING, FIELD, BOOL, JSON = Kind.STRING, Kind.FIELD, Kind.BOOL, Kind.JSON
TS, NATIVE_TS, NULL = Kind.TS, Kind.NATIVE_TS, Kind.NULL

NUMERIC = frozenset({INT, FLOAT, DECIMAL})
TEXTUAL = frozenset({STRING, FIELD})

# Parquet/Arrow column type names (Column.type) -> kind; ``decimal(p,s)`` is DECIMAL.
COLUMN_KINDS: dict[str, Kind] = {
    "string": STRING,
    "int64": INT,
    "float64": FLOAT,
    "bool": BOOL,
    "timestamp": NATIVE_TS,
    "date": NATIVE_TS,
}

# The coercion of two numbers, one table for arithmetic (+ - * / %), comparisons, CASE and
# COALESCE: the kind both sides are brought to. A decimal next to an integer stays exact
# (DataFusion widens the precision: decimal(10,2) + int64 is decimal(23,2)); a decimal next
# to a float is a float, the usual SQL rule (the decimal side is cast to DOUBLE, see
# _NUMBER_CASTS; left to itself DataFusion would cast both to decimal(30,15), which overflows
# past 10**15). An operand that is not a number is read as FLOAT first (as_number).
NUMBER_COERCION: dict[frozenset[Kind], Kind] = {
    frozenset({INT}): INT,
    frozenset({FLOAT}): FLOAT,
    frozenset({DECIMAL}): DECIMAL,
    frozenset({INT, FLOAT}): FLOAT,
    frozenset({INT, DECIMAL}): DECIMAL,
    frozenset({FLOAT, DECIMAL}): FLOAT,
}

# The explicit cast a number of one kind needs to reach another; pairs not listed are left to
# DataFusion's own coercion, which is exact for them (int64 -> double, int64 -> decimal).
_NUMBER_CASTS: dict[tuple[Kind, Kind], str] = {
    (DECIMAL, FLOAT): "DOUBLE",
}

# The kind SUM and AVG give per argument kind (DataFusion 55: sum(decimal(p,s)) is
# decimal(min(p+10, 38), s), avg(decimal(p,s)) is decimal(min(p+4, 38), min(s+4, 38)),
# avg(int64) is double). Other arguments are read as numbers (FLOAT) first.
AGGREGATE_KINDS: dict[tuple[str, Kind], Kind] = {
    ("sum", INT): INT,
    ("sum", FLOAT): FLOAT,
    ("sum", DECIMAL): DECIMAL,
    ("avg", INT): FLOAT,
    ("avg", FLOAT): FLOAT,
    ("avg", DECIMAL): DECIMAL,
}

# Standard SQL (Flavor.sql_types): the SQL type a kind is, for error messages, and which kinds
# SUM/AVG and arithmetic take and MIN/MAX order as themselves (DataFusion 55, DuckDB 1.x and
# PostgreSQL refuse sum(VARCHAR), sum(BOOLEAN), VARCHAR + INTEGER; they order text as text).
SQL_TYPE_NAMES: dict[Kind, str] = {
    INT: "BIGINT", FLOAT: "DOUBLE", DECIMAL: "DECIMAL", STRING: "VARCHAR", FIELD: "VARCHAR",
    BOOL: "BOOLEAN", TS: "TIMESTAMP", NATIVE_TS: "TIMESTAMP", NULL: "NULL", JSON: "JSON",
}
_SQL_NUMBERS = NUMERIC | {NULL, JSON}  # a JSON value is typed by its text: numbers are numbers
_SQL_ORDERED = NUMERIC | TEXTUAL | {BOOL, TS, NATIVE_TS}
_OPERATOR_SIGNS: dict[type[exp.Expression], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.Pow: "^",
}

_INT_RE = re.compile(r"^\d+$")
_NUMBER_TEXT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_POSITIONAL_RE = re.compile(r"^_(\d+)$")
_INT64_MAX = 2**63 - 1
_MAX_DECIMAL_PRECISION = 38  # Arrow's decimal128
_DECIMAL_TYPE = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_FLOAT64_MAX = "1.7976931348623157e308"

# Characters escaped when a LIKE pattern becomes a regular expression (valid in Rust regex,
# RE2 and Python re alike).
_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~")

_DATE_PART_PRECISION: dict[str, int] = {
    "year": 0,
    "month": 1,
    "day": 2,
    "hour": 3,
    "minute": 3,
    "second": 4,
}

_EXTRACT_LOCAL_PARTS = frozenset({"year", "month", "day", "hour", "minute", "second", "week"})

_YEAR_BARRIER = "year_range_barrier"
"""Marks the DOUBLE cast that keeps DataFusion from rewriting ``extract(year …) <op> n``."""

_YEARS_AS_RANGES = range(1678, 2262)
"""Years n whose January 1st and the next one are both nanosecond timestamps: DataFusion's
rewrite of ``date_part('year', t) <op> n`` into ``t`` against those two instants is exact
for them (``t`` itself always is one), and skips computing the year of every row (extract
of the year compared with 2024 over 623k timestamps: 52 ms with the barrier, 44 ms
without)."""

# The layout almost every timestamp in data is written in: a full date and time to the
# second, an optional fraction of up to 9 digits, and an optional ``Z`` or ``±HH:MM`` zone.
# On text of this layout DataFusion's string -> timestamp cast reads exactly what
# ``s3_to_timestamp`` reads (the instant; a missing zone is UTC, as s3-select's offset 0),
# and the first 19 characters are the wall-clock time at the written offset. The pattern
# keeps out what the cast reads differently (leap second ``:60``, offsets like ``+05:70``,
# ``+0500``, a space or ``t`` before the time, over 9 fraction digits); digits it lets through
# that make no date or time (month 13, day 32, hour 24, offset hour 24 and up, ``02-30``)
# make the cast NULL, and that row goes to the UDF, which raises the s3-select error. Loose
# digit classes keep the regex cheap: it costs about what the cast does.
_LAYOUT_DATE_TIME = r"^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]"
_COMMON_TIMESTAMP = _LAYOUT_DATE_TIME + r"(\.[0-9]{1,9})?(Z|[+-][0-2][0-9]:[0-5][0-9])?$"
_WALL_CLOCK_CHARS = 19  # len("YYYY-MM-DDTHH:MM:SS")

# Date parts that are exact durations (the others are calendar arithmetic), in nanoseconds.
_DURATION_NS: dict[str, int] = {
    "second": 10**9,
    "minute": 60 * 10**9,
    "hour": 3600 * 10**9,
    "day": 86400 * 10**9,
}

# What Ceph's ``version()`` returns: the ceph/s3select release whose dialect is followed.
CEPH_S3SELECT_VERSION = "41.a"

_CYCLE_MESSAGE = "number of calls exceed maximum size, probably a cyclic reference to alias"


Typed = tuple[exp.Expression, Kind]


@dataclass(frozen=True)
class Column:
    """A column of a typed input (Parquet): ``name`` and a type name (see ``COLUMN_KINDS``)."""

    name: str
    type: str = "string"

    @property
    def decimal_scale(self) -> int | None:
        """The scale ``s`` of a ``decimal(p,s)`` column, else None."""
        found = _DECIMAL_TYPE.fullmatch(self.type)
        return int(found.group(2)) if found else None


@dataclass
class LoweringState:
    """Per-statement facts collected while lowering (read by :mod:`select_dialect.translate`)."""

    json_paths: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)
    max_positional: int = 0


def like_to_regex(pattern: str, escape: str | None) -> str:
    """Translate an s3-select LIKE pattern into an anchored regular expression.

    ``%`` is any run, ``_`` one character, ``[a-c]``/``[^a-c]`` character classes, and the
    escape character (any single character) makes the next character literal.

    Args:
        pattern: the LIKE pattern.
        escape: the escape character, or ``None``.

    Returns:
        A regex matching the whole string (``.`` matches newlines).

    Example:
        >>> like_to_regex("a%[b-c]_", None)
        '^(?s:a.*[b-c].)$'
    """
    out: list[str] = []
    for kind, text in _like_tokens(pattern, escape):
        if kind == "class":
            negate = text.startswith("^")
            body = text[1:] if negate else text
            escaped = "".join("\\" + c if c in "\\[]^" else c for c in body)
            out.append("[" + ("^" if negate else "") + escaped + "]")
        else:
            out.append(_REGEX_PIECES.get(kind) or _regex_literal(text))
    return "^(?s:" + "".join(out) + ")$"


def like_to_builtin_pattern(pattern: str, escape: str | None) -> str | None:
    r"""The same LIKE pattern for DataFusion's LIKE, or None when it has no equivalent.

    DataFusion's LIKE (arrow-rs) has ``%`` (newlines included) and ``_`` (one character) and
    always reads a backslash as its escape; s3-select's escape is any character and its
    ``[a-c]`` classes have no LIKE form (those patterns keep :func:`like_to_regex`).

    Example:
        >>> like_to_builtin_pattern("50#%_\\", "#")
        '50\\%_\\\\'
        >>> like_to_builtin_pattern("[ab]%", None) is None
        True
    """
    out: list[str] = []
    for kind, text in _like_tokens(pattern, escape):
        if kind == "class":
            return None
        escaped = kind == "literal" and text in "%_\\"  # DataFusion's LIKE escapes with a backslash
        out.append("\\" + text if escaped else text)
    return "".join(out)


_REGEX_PIECES: Final = {"any": ".*", "one": "."}


def _like_tokens(pattern: str, escape: str | None) -> Iterator[tuple[str, str]]:
    """A LIKE pattern as ``(kind, text)`` tokens: ``any`` (``%``), ``one`` (``_``), ``class``
    (the body of ``[...]``, a leading ``^`` negating it) and ``literal`` (one character, an
    escaped one included). The one reading of s3-select's LIKE syntax both renderers share."""
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if escape and ch == escape and i + 1 < n:
            yield "literal", pattern[i + 1]
            i += 2
            continue
        if ch == "[" and (close := _class_end(pattern, i)) > 0:
            yield "class", pattern[i + 1 : close]
            i = close + 1
            continue
        yield {"%": ("any", ch), "_": ("one", ch)}.get(ch, ("literal", ch))
        i += 1


def _class_end(pattern: str, start: int) -> int:
    close = pattern.find("]", start + 2 if pattern[start + 1 : start + 2] == "^" else start + 1)
    return close if close > start + 1 else -1


def _regex_literal(ch: str) -> str:
    return "\\" + ch if ch in _REGEX_META else ch


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of an allow-listed builtin or UDF (lower-case name, emitted verbatim)."""
    if name not in U.BUILTIN_FUNCTIONS and name not in U.UDF_NAMES:
        raise UnsupportedFeatureError(f"function {name} is not allowed")
    return exp.Anonymous(this=name, expressions=list(args))


def col(name: str) -> exp.Column:
    """A quoted reference to an input column."""
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def lit_str(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def cast(node: exp.Expression, to: str) -> exp.Cast:
    return exp.Cast(this=node, to=exp.DataType.build(to))


def _columns_first(operands: list[exp.Expression]) -> list[exp.Expression]:
    """Operands of AND/OR with the constant ones (no column) last.

    datafusion-python turns a filter pushed into a pyarrow dataset into a pyarrow expression,
    where ``NULL AND x`` fails (``BooleanScalar & Expression``) while ``x AND NULL`` works;
    AND and OR are commutative in three-valued logic, so the order is free.
    """
    return sorted(operands, key=lambda operand: operand.find(exp.Column) is None)


def _without_json_null(node: exp.Expression) -> exp.Expression:
    """A JSON path value with a JSON ``null`` (the text ``null`` in its column) as SQL NULL."""
    is_null = exp.EQ(this=paren(node.copy()), expression=lit_str("null"))
    return exp.Case(ifs=[exp.If(this=is_null, true=typed_null(JSON))], default=node)


def typed_null(kind: Kind) -> exp.Expression:
    """A NULL of the DataFusion type of ``kind`` (a DECIMAL NULL is decimal(1,0), which widens
    no decimal it meets: DataFusion's common type keeps the larger integer part and scale)."""
    table = {
        INT: "BIGINT",
        FLOAT: "DOUBLE",
        DECIMAL: "DECIMAL(1, 0)",
        STRING: "VARCHAR",
        FIELD: "VARCHAR",
        JSON: "VARCHAR",
        BOOL: "BOOLEAN",
    }
    if kind == TS:
        return fn(U.TO_TIMESTAMP, cast(exp.Null(), "VARCHAR"))
    return cast(exp.Null(), table.get(kind, "VARCHAR"))


def _boolean_constant(node: exp.Expression) -> bool | str | None:
    """``True``/``False``/``None`` for a TRUE, FALSE or boolean NULL literal, else ``"other"``."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Null):
        return None
    if isinstance(node, exp.Null):
        return None
    return "other"


def _fold_constants(operands: list[exp.Expression],
                    klass: type[exp.Expression]) -> list[exp.Expression]:
    """The operands of an AND/OR chain with its boolean constants folded (three-valued logic).

    The identity (TRUE for AND, FALSE for OR) goes; the absorbing value (FALSE for AND, TRUE for
    OR) is the whole answer; a NULL constant moves to the end. Why: DataFusion hands a filter to
    the reference readers' dataset as a pyarrow expression built with ``&``/``|``, and a literal
    on the left of one (``pa.BooleanScalar & Expression``) fails the query with a TypeError.
    """
    identity, absorbing = (True, False) if klass is exp.And else (False, True)
    kept: list[exp.Expression] = []
    nulls: list[exp.Expression] = []
    for operand in operands:
        constant = _boolean_constant(operand)
        if constant == absorbing and constant is not None:
            return [exp.Boolean(this=absorbing)]
        if constant is None:
            nulls.append(operand)
        elif constant != identity:
            kept.append(operand)
    folded = kept + nulls[:1]
    return folded or [exp.Boolean(this=identity)]


def _null_as_false(node: exp.Expression) -> exp.Expression:
    """A WHERE condition with each NULL constant reached through AND/OR alone made FALSE.

    A row passes a filter only when its condition is TRUE, and AND/OR are monotone, so a NULL
    there filters exactly as FALSE would, which then folds away (``x OR FALSE`` is ``x``,
    ``x AND FALSE`` is FALSE). Why it matters: DataFusion keeps the conjuncts it can hand to the
    reference readers' dataset and drops the others, so a NULL conjunct can end up first in the
    pyarrow expression it builds, where ``pa.BooleanScalar & Expression`` fails the query.
    """
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, (exp.And, exp.Or)):
        klass = type(inner)
        operands = [_null_as_false(operand) for operand in _flatten(inner, klass)]
        folded = _columns_first(_fold_constants([paren(o) for o in operands], klass))
        return paren(balanced(folded, klass)) if len(folded) > 1 else folded[0]
    if _boolean_constant(inner) is None:
        return exp.Boolean(this=False)
    return node


def paren(node: exp.Expression) -> exp.Expression:
    return node if isinstance(node, (exp.Paren, exp.Column, exp.Literal, exp.Anonymous)) else exp.Paren(this=node)


def balanced(nodes: Sequence[exp.Expression], klass: type[exp.Expression]) -> exp.Expression:
    """Combine ``nodes`` with a binary connective as a balanced tree (bounded depth)."""
    if len(nodes) == 1:
        return nodes[0]
    mid = len(nodes) // 2
    return klass(this=paren(balanced(nodes[:mid], klass)), expression=paren(balanced(nodes[mid:], klass)))


def _listing(names: Sequence[str], most: int = 40) -> str:
    """``names`` for an error message, cut after ``most`` (a header may have thousands)."""
    shown = ", ".join(names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


_WIDE_CONTEXT = decimal.Context(prec=2 * _MAX_DECIMAL_PRECISION + 2)
_FLIPPED_COMPARISONS: dict[type[exp.Expression], type[exp.Expression]] = {
    exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE,
}


def _number_literal_value(node: exp.Expression) -> decimal.Decimal | None:
    """The exact value of a (possibly negated, parenthesised) number literal, else None."""
    negative = False
    while isinstance(node, (exp.Paren, exp.Neg)):
        negative ^= isinstance(node, exp.Neg)
        node = node.this
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    try:
        value = decimal.Decimal(node.this)
    except decimal.InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return -value if negative else value


def exact_decimal_literal(node: exp.Expression) -> exp.Expression | None:
    """A number literal (``1.505``, ``-2``, ``1e3``) as a DataFusion decimal of exactly its
    digits, else None (not a literal, or more than 38 digits).

    DataFusion reads ``1.505`` as a double and, next to a decimal column, casts that double to
    decimal(30, 15): the literal is rounded twice and ``price = 10.049999999999999`` compares
    with 10.049999999999998. A decimal literal of the text's own digits is compared exactly.

    Example:
        >>> exact_decimal_literal(exp.Literal.number("1.50")).sql()
        "CAST('1.50' AS DECIMAL(3, 2))"
    """
    value = _number_literal_value(node)
    if value is None:
        return None
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite
    scale = max(0, -exponent)
    precision = max(1, max(0, len(digits) + exponent) + scale)
    if precision > _MAX_DECIMAL_PRECISION:
        return None
    return cast(lit_str(format(value, "f")), f"DECIMAL({precision}, {scale})")


def guarded_cast_int(text: exp.Expression) -> exp.Expression:
    """``int(text)``: DataFusion's cast where it succeeds, ``s3_cast_int`` for the other rows.

    Arrow's string -> Int64 cast accepts a subset of what s3-select accepts (``[+-]digits``
    inside ASCII spaces, tabs and line breaks, which s3-select trims too) and gives the same
    value; whatever it rejects (other whitespace, overflow, bad text) goes to the UDF, which
    answers it or raises the s3-select error. DataFusion turns ``coalesce`` into a CASE that
    runs the UDF only on the rows where the cast gave NULL (NULL input included).
    """
    return exp.Coalesce(this=exp.TryCast(this=text, to=exp.DataType.build("BIGINT")),
                        expressions=[fn(U.CAST_INT, text.copy())])


def guarded_cast_float(text: exp.Expression) -> exp.Expression:
    """``float(text)``: DataFusion's cast for the rows it reads as a finite number, else
    ``s3_cast_float``. Arrow also reads ``inf``/``NaN``/``1e400`` (s3-select: an error), so
    only finite results take the builtin branch (NaN and infinities fail the BETWEEN)."""
    value = exp.TryCast(this=text, to=exp.DataType.build("DOUBLE"))
    finite = exp.Between(this=value, low=exp.Neg(this=exp.Literal.number(_FLOAT64_MAX)),
                         high=exp.Literal.number(_FLOAT64_MAX))
    return exp.Case(ifs=[exp.If(this=finite, true=value.copy())],
                    default=fn(U.CAST_FLOAT, text.copy()))


def _written_text(ts: exp.Expression) -> exp.Expression | None:
    """The text of ``s3_to_timestamp(text)``, else None."""
    if isinstance(ts, exp.Anonymous) and ts.this == U.TO_TIMESTAMP and len(ts.expressions) == 1:
        return ts.expressions[0]
    return None


def _year_as_range(side: exp.Expression, other: exp.Expression) -> exp.Expression:
    """``side`` without its year barrier when ``other`` is an integer literal of
    :data:`_YEARS_AS_RANGES` (DataFusion then compares timestamps), else ``side``."""
    inner = side.this if isinstance(side, exp.Cast) else None
    if not (isinstance(inner, exp.Cast) and inner.meta.get(_YEAR_BARRIER)):
        return side
    if not (isinstance(other, exp.Literal) and other.is_int
            and int(other.this) in _YEARS_AS_RANGES):
        return side
    return cast(inner.this.copy(), "BIGINT")


def _zone_free_instant(ts: exp.Expression) -> exp.Expression | None:
    """The Arrow instant of ``s3_timestamp_from_utc(instant, p)`` / ``s3_timestamp_z(...)``
    (offset 0, so its wall clock is the instant itself), else None."""
    if isinstance(ts, exp.Anonymous) and ts.this in (U.TIMESTAMP_FROM_UTC, U.TIMESTAMP_Z):
        return ts.expressions[0]
    return None


def _duration_added(ts: exp.Expression) -> tuple[int, exp.Expression, exp.Expression] | None:
    """``(unit ns, amount, inner)`` of ``s3_date_add('<duration part>', amount, inner)``."""
    if not (isinstance(ts, exp.Anonymous) and ts.this == U.DATE_ADD and len(ts.expressions) == 3):
        return None
    part, amount, inner = ts.expressions
    if isinstance(part, exp.Literal) and part.is_string and part.this in _DURATION_NS:
        return _DURATION_NS[part.this], amount, inner
    return None


def _on_common_layout(text: exp.Expression, fast: exp.Expression, slow: exp.Expression
                      ) -> exp.Expression:
    """``fast`` for rows whose text has the common layout, ``slow`` for the others. ``fast``
    must be NULL exactly when the date is impossible; DataFusion evaluates each CASE branch
    only on the rows that reach it, so the UDF in ``slow`` sees only the rows the builtins
    cannot answer (and the NULL rows)."""
    layout = fn("regexp_like", text.copy(), lit_str(_COMMON_TIMESTAMP))
    return exp.Coalesce(this=exp.Case(ifs=[exp.If(this=layout, true=fast)]), expressions=[slow])


def _plus_duration(instant: exp.Expression, amount: exp.Expression, unit_ns: int
                   ) -> exp.Expression:
    """``instant + amount * unit`` on naive nanosecond timestamps."""
    moved = exp.Add(this=cast(instant, "BIGINT"),
                    expression=exp.Mul(this=paren(amount), expression=exp.Literal.number(unit_ns)))
    return fn("to_timestamp_nanos", moved)


def whole_months_between(first: exp.Expression, second: exp.Expression) -> exp.Expression:
    """Calendar months from ``first`` to ``second`` (naive UTC timestamps), truncated toward
    zero: the month count, less one when the later end has not reached the earlier end's
    position in its month (what ``s3_date_diff`` computes)."""

    def month_index(ts: exp.Expression) -> exp.Expression:
        year = cast(fn("date_part", lit_str("year"), ts), "BIGINT")
        month = cast(fn("date_part", lit_str("month"), ts.copy()), "BIGINT")
        return exp.Add(this=exp.Mul(this=year, expression=exp.Literal.number(12)),
                       expression=month)

    def into_month(ts: exp.Expression) -> exp.Expression:
        start = fn("date_trunc", lit_str("month"), ts.copy())
        return exp.Paren(this=exp.Sub(this=cast(ts, "BIGINT"), expression=cast(start, "BIGINT")))

    months = exp.Paren(this=exp.Sub(this=exp.Paren(this=month_index(second)),
                                    expression=exp.Paren(this=month_index(first))))

    def one_if(condition: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=condition, true=exp.Literal.number(1))],
                        default=exp.Literal.number(0))

    zero = exp.Literal.number(0)
    back = one_if(exp.And(this=exp.GT(this=months.copy(), expression=zero),
                          expression=exp.LT(this=into_month(second.copy()),
                                            expression=into_month(first.copy()))))
    forward = one_if(exp.And(this=exp.LT(this=months.copy(), expression=zero.copy()),
                             expression=exp.GT(this=into_month(second.copy()),
                                               expression=into_month(first.copy()))))
    return exp.Paren(this=exp.Add(this=exp.Sub(this=months, expression=back),
                                  expression=forward))


def utc_instant(ts: exp.Expression) -> exp.Expression:
    """The instant of an S3_TIMESTAMP expression as a naive (UTC) nanosecond timestamp,
    composed from builtins where the timestamp comes from text of the common layout."""

    def from_text(text: exp.Expression) -> exp.Expression:
        return exp.TryCast(this=text.copy(), to=exp.DataType.build("TIMESTAMP"))

    slow = cast(fn("get_field", ts, lit_str("utc")), "TIMESTAMP")
    return _through_builtins(ts, from_text, slow, utc_instant)


def local_time(ts: exp.Expression) -> exp.Expression:
    """The wall-clock time at the written offset (naive timestamp) for date parts from year to
    second: on the builtin path the fraction of a second is dropped, which no such part
    reads."""

    def from_text(text: exp.Expression) -> exp.Expression:
        # Written in ``Z`` the instant is the wall clock (no string to cut); otherwise the
        # first 19 characters are (a fraction, which no caller reads, is dropped).
        written_in_z = exp.Like(this=text.copy(), expression=lit_str("%Z"))
        wall_clock = fn("left", text.copy(), exp.Literal.number(_WALL_CLOCK_CHARS))
        clock_text = exp.Case(ifs=[exp.If(this=written_in_z, true=text.copy())],
                              default=wall_clock)
        return exp.TryCast(this=clock_text, to=exp.DataType.build("TIMESTAMP"))

    return _through_builtins(ts, from_text, fn(U.LOCAL_TIME, ts), local_time)


def _through_builtins(ts: exp.Expression,
                      from_text: Callable[[exp.Expression], exp.Expression],
                      slow: exp.Expression,
                      reading: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """A reading of ``ts`` (``reading`` itself, for the recursion) from builtins where its
    origin allows: a zone-free instant is its own wall clock; text of the common layout goes
    through ``from_text`` (``slow``, the UDF, for the other rows); a duration added moves the
    inner reading; anything else is ``slow``."""
    instant = _zone_free_instant(ts)
    if instant is not None:
        return cast(instant.copy(), "TIMESTAMP")
    text = _written_text(ts)
    if text is not None:
        return _on_common_layout(text, from_text(text), slow)
    added = _duration_added(ts)
    if added is not None:
        unit_ns, amount, inner = added
        return _plus_duration(reading(inner), amount.copy(), unit_ns)
    return slow


def native_timestamp(node: exp.Expression) -> exp.Expression:
    """SQL's ``CAST(node AS TIMESTAMP)`` (DataFusion's timestamp of nanoseconds, no zone)."""
    return cast(paren(node), "TIMESTAMP")


def _is_native_timestamp(node: exp.Expression) -> bool:
    return type(node) is exp.Cast and node.to.is_type(exp.DataType.Type.TIMESTAMP)


def is_aggregate(node: exp.Expression) -> bool:
    """True when ``node`` contains an aggregate call."""
    return any(isinstance(n, exp.AggFunc) for n in node.walk())


class Lowering:
    """Typed lowering of one statement (state lives only as long as one translation).

    Args:
        input_format: ``csv``, ``json`` or ``parquet``.
        flavor: the flavour whose rules apply (its flags; never its name).
        columns: Parquet columns (name, type) in file order.
        header: CSV header names (``FileHeaderInfo USE``), in file order.
        table_names: names that may prefix a column (``s3object``, the FROM alias, ...).
        aliases: projection aliases (lower-case name -> parsed expression).
        empty_fields_are_null: the reader gives CSV empty fields as ``''``; each field
            reference reads one as NULL (``NULLIF(field, '')``), as the ceph flavour does.
    """

    def __init__(
        self,
        *,
        input_format: str,
        flavor: Flavor,
        columns: Sequence[Column] | None,
        header: Sequence[str] | None,
        table_names: Iterable[str],
        aliases: dict[str, exp.Expression],
        empty_fields_are_null: bool = False,
    ) -> None:
        self.input_format = input_format
        self.empty_fields_are_null = empty_fields_are_null
        self.flavor = flavor
        self.columns = list(columns or [])
        self.header = list(header or [])
        self.table_names = {name.lower() for name in table_names}
        self.aliases = aliases
        self.state = LoweringState()
        self._alias_done: dict[str, Typed] = {}
        self._alias_stack: list[str] = []
        # Aliases computed once per row in a subquery below the WHERE clause (see translate):
        # name -> (column name, lowered expression).
        self.materialize: set[str] = set()
        # name -> (column name, lowered expression, subquery level: 1 + the deepest level of
        # the materialized aliases it reads)
        self.materialized: dict[str, tuple[str, exp.Expression, int]] = {}
        self._reads: list[set[str]] = []
        self._json_by_steps: dict[tuple[tuple[Any, ...], ...], str] = {}
        self._dispatch: dict[type[exp.Expression], Callable[[Any], Typed]] = {
            exp.Literal: self._literal,
            exp.Boolean: lambda node: (exp.Boolean(this=bool(node.this)), BOOL),
            exp.Null: lambda node: (exp.Null(), NULL),
            Missing: lambda node: (exp.Null(), NULL),
            exp.Column: self._reference,
            exp.Dot: self._reference,
            exp.Bracket: self._reference,
            exp.Paren: self._paren,
            exp.Neg: self._neg,
            exp.Add: self._arithmetic,
            exp.Sub: self._arithmetic,
            exp.Mul: self._arithmetic,
            exp.Div: self._arithmetic,
            exp.Mod: self._arithmetic,
            exp.Pow: self._arithmetic,
            exp.EQ: self._comparison,
            exp.NEQ: self._comparison,
            exp.GT: self._comparison,
            exp.GTE: self._comparison,
            exp.LT: self._comparison,
            exp.LTE: self._comparison,
            exp.And: self._connective,
            exp.Or: self._connective,
            exp.Not: self._not,
            exp.Is: self._is,
            exp.Between: self._between,
            exp.In: self._in,
            exp.Like: self._like,
            exp.Escape: self._like,
            exp.Case: self._case,
            exp.If: self._case,
            exp.Cast: self._cast_node,
            exp.TryCast: self._cast_node,
            exp.Substring: self._substring,
            exp.Trim: self._trim,
            exp.Extract: self._extract,
            exp.Count: self._count,
            exp.Sum: self._sum_avg,
            exp.Avg: self._sum_avg,
            exp.Min: self._min_max,
            exp.Max: self._min_max,
            exp.Anonymous: self._anonymous,
            exp.Lower: self._case_fold,
            exp.Upper: self._case_fold,
            exp.Length: self._char_length,
            exp.Coalesce: self._coalesce_node,
            exp.Nullif: self._nullif_node,
            exp.Tuple: self._json_array,
            exp.Array: self._json_array,
            exp.DPipe: self._concat,
        }
        self._functions: dict[str, Callable[[list[exp.Expression]], Typed]] = {
            "INT": lambda args: self._cast(self._one(args, "int"), "int"),
            "FLOAT": lambda args: self._cast(self._one(args, "float"), "float"),
            "TO_TIMESTAMP": lambda args: (self.as_ts(self._one(args, "to_timestamp")), TS),
            "TIMESTAMP": lambda args: (self.as_ts(self._one(args, "timestamp")), TS),
            "LOWER": lambda args: (fn("lower", self.as_string(self._one(args, "lower"))), STRING),
            "UPPER": lambda args: (fn("upper", self.as_string(self._one(args, "upper"))), STRING),
            "CHAR_LENGTH": lambda args: self._length(self._one(args, "char_length")),
            "CHARACTER_LENGTH": lambda args: self._length(self._one(args, "character_length")),
            "COALESCE": self._coalesce,
            "NULLIF": self._nullif,
            "DATE_ADD": self._date_add,
            "DATE_DIFF": self._date_diff,
            "UTCNOW": self._utcnow,
            "TO_STRING": self._to_string,
            "ADD": self._add,
            "VERSION": self._version,
        }

    # ------------------------------------------------------------------ entry points

    def lower(self, node: exp.Expression) -> Typed:
        """Lower one expression; returns the DataFusion node and its kind."""
        handler = self._dispatch.get(type(node))
        if handler is None:
            raise UnsupportedFeatureError(f"unsupported expression: {_describe(node)}")
        return handler(node)

    def lower_alias(self, name: str) -> Typed:
        """Lower the projection defined ``AS name`` (once; later uses get a copy)."""
        return self._alias(name.lower())

    def lower_condition(self, node: exp.Expression) -> exp.Expression:
        """Lower a WHERE condition to a boolean expression."""
        return _null_as_false(self.as_bool(self.lower(node)))

    def output_name(self, node: exp.Expression) -> str | None:
        """Display name of a bare reference (last path step / column name), else None."""
        if isinstance(node, exp.Paren):
            return None
        steps = self._steps(node)
        if steps is None:
            return None
        if self.flavor.double_quotes_are_strings and len(steps) == 1 and isinstance(steps[0], _Quoted):
            return None  # a Ceph string literal
        names = [s for s in steps if isinstance(s, str) and s is not _ANY_INDEX]
        if not names:
            return None
        if self.flavor.unnamed_index_paths and names[-1] is not steps[-1]:
            return None  # MinIO names a path that ends in an index `_N`, like an expression
        last = names[-1]
        if self.input_format == "json" and len(names) == 1 and names[0].lower() in self.table_names | {"_1"}:
            return None
        return last

    # ------------------------------------------------------------------ coercions

    def as_number(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind in NUMERIC:
            return node
        if kind == NULL:
            return typed_null(FLOAT)
        if kind == FIELD:
            return exp.TryCast(this=fn("btrim", node), to=exp.DataType.build("DOUBLE"))
        if kind == JSON:
            return fn(U.JSON_TO_DOUBLE, node)
        if kind == BOOL:
            return cast(paren(node), "BIGINT")
        if kind == STRING:
            if isinstance(node, exp.Literal):
                raise QuerySemanticError("illegal binary operation with string")
            return exp.TryCast(this=fn("btrim", node), to=exp.DataType.build("DOUBLE"))
        raise QuerySemanticError(f"a {kind} value cannot be used as a number")

    def as_kind(self, typed: Typed, target: Kind) -> exp.Expression:
        """A number brought to ``target`` (a kind of :data:`NUMBER_COERCION`)."""
        node = self.as_number(typed)
        source = typed[1] if typed[1] in NUMERIC else FLOAT
        to = _NUMBER_CASTS.get((source, target))
        return cast(paren(node), to) if to is not None else node

    def as_string(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind in TEXTUAL:
            return node
        if kind == JSON:
            return fn(U.JSON_TO_STRING, node)
        if kind == TS:
            return fn(U.TIMESTAMP_TO_STRING, node)
        if kind == NATIVE_TS and self.flavor.sql_types:  # DataFusion's text: no zone
            return cast(paren(node), "VARCHAR")
        if kind == NATIVE_TS:
            return fn(U.TIMESTAMP_TO_STRING, self.as_ts(typed))
        if kind == NULL:
            return typed_null(STRING)
        return cast(node, "VARCHAR")

    def as_bool(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind == BOOL:
            return node
        if kind == NULL:
            return typed_null(BOOL)
        if kind in NUMERIC:
            return exp.NEQ(this=paren(node), expression=exp.Literal.number(0))
        if kind in TEXTUAL:
            return fn(U.STRING_TO_BOOL, node)
        if kind == JSON:
            return fn(U.STRING_TO_BOOL, fn(U.JSON_TO_STRING, node))
        raise QuerySemanticError(f"a {kind} value cannot be used as a boolean")

    def as_logical(self, typed: Typed) -> exp.Expression:
        """An operand of AND/OR/NOT: a non-boolean string counts as true (Ceph:
        ``not 'any_string'`` is false) unless it spells a boolean or a number."""
        node, kind = typed
        if kind == STRING and isinstance(node, exp.Literal):
            lowered = node.this.strip().lower()
            if lowered not in ("true", "false") and not _NUMBER_TEXT_RE.match(lowered):
                return exp.Boolean(this=True)
        return self.as_bool(typed)

    def as_ts(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind == TS:
            return node
        if kind == NATIVE_TS:
            # precision -1: never written as text, so the aws flavour prints it shortest
            return fn(
                U.TIMESTAMP_FROM_UTC,
                cast(node, "TIMESTAMP"),
                exp.Literal.number(-1),
            )
        if kind == NULL:
            return typed_null(TS)
        if kind in TEXTUAL:
            return fn(U.TO_TIMESTAMP, node)
        if kind == JSON:
            return fn(U.TO_TIMESTAMP, fn(U.JSON_TO_STRING, node))
        raise QuerySemanticError(f"a {kind} value cannot be used as a timestamp")

    def as_native_ts(self, typed: Typed) -> exp.Expression:
        """SQL's ``CAST(x AS TIMESTAMP)`` (standard flavour): DataFusion's zone-less timestamp.
        Text is read by DataFusion's cast (an offset is converted to UTC; text that is no
        timestamp fails the query, naming it); an s3-select timestamp gives its instant."""
        node, kind = typed
        if kind == NATIVE_TS and _is_native_timestamp(node):
            return node
        if kind in TEXTUAL or kind == NATIVE_TS:
            return native_timestamp(node)
        if kind == TS:
            return native_timestamp(utc_instant(node))
        if kind == JSON:
            return native_timestamp(fn(U.JSON_TO_STRING, node))
        if kind == NULL:
            return native_timestamp(exp.Null())
        raise QuerySemanticError(f"cannot cast {SQL_TYPE_NAMES[kind]} to TIMESTAMP",
                                 code="InvalidCast")

    def null_of(self, kind: Kind) -> exp.Expression:
        """A NULL of ``kind`` (:func:`typed_null`); in standard SQL a timestamp's NULL is a
        TIMESTAMP, so NULLIF and COALESCE of timestamps stay timestamps. (The s3-select flavours
        keep their VARCHAR NULL here: NULLIF of a Parquet timestamp there is text.)"""
        if kind == NATIVE_TS and self.flavor.sql_types:
            return native_timestamp(exp.Null())
        return typed_null(kind)

    def _sql_numbers(self, node: exp.Expression, *operands: tuple[exp.Expression, Typed]
                     ) -> None:
        """Standard SQL: arithmetic takes numbers only (no text read as a number)."""
        kinds = [typed[1] for _, typed in operands]
        wrong = [(source, typed[1]) for source, typed in operands if typed[1] not in _SQL_NUMBERS]
        if not wrong:
            return
        sign = _OPERATOR_SIGNS.get(type(node), "-")
        types = f" {sign} ".join(SQL_TYPE_NAMES[k] for k in kinds)
        source, kind = wrong[0]
        raise QuerySemanticError(
            f"{types if len(kinds) > 1 else sign + types} is not defined: {_describe(source)} "
            f"is {SQL_TYPE_NAMES[kind]}{_cast_hint(source, kind, '{}')}",
            code="InvalidDataType")

    def _sql_argument_error(self, name: str, source: exp.Expression, kind: Kind
                            ) -> QuerySemanticError:
        """Standard SQL: ``sum``/``avg`` of something that is not a number."""
        return QuerySemanticError(
            f"{name}({SQL_TYPE_NAMES[kind]}) is not defined: {name} takes a number and "
            f"{_describe(source)} is {SQL_TYPE_NAMES[kind]}"
            f"{_cast_hint(source, kind, name + '({})')}",
            code="IncorrectSqlFunctionArgumentType")

    def _cast(self, typed: Typed, target: str) -> Typed:
        node, kind = typed
        number = _NUMBER_CAST_TARGETS.get(target)
        if number is not None:
            result, sql_type, from_text = number
            if kind == result:
                return node, result
            if kind == NULL:
                return typed_null(result), result
            if kind in NUMERIC or kind == BOOL:  # a number to int: toward zero, as s3-select
                return cast(paren(node), sql_type), result
            if kind in TEXTUAL or kind == JSON:
                return from_text(self.as_string(typed)), result
            raise QuerySemanticError(f"cannot cast a {kind} value to {target}")
        converters: dict[str, tuple[Callable[[Typed], exp.Expression], Kind]] = {
            "string": (self.as_string, STRING),
            "bool": (self.as_bool, BOOL),
            "timestamp": (self.as_ts, TS),
        }
        convert, result = converters[target]
        return convert(typed), result

    # ------------------------------------------------------------------ leaves

    def _literal(self, node: exp.Literal) -> Typed:
        text = node.this
        if node.is_string:
            return lit_str(text), STRING
        if _INT_RE.match(text) and int(text) <= _INT64_MAX:
            return exp.Literal.number(int(text)), INT
        try:
            value = float(text)
        except ValueError as exc:
            raise QuerySemanticError(f"invalid number {text}") from exc
        if value != value or value in (float("inf"), float("-inf")):
            raise QuerySemanticError(f"invalid number {text}")
        return exp.Literal.number(text), FLOAT

    def _paren(self, node: exp.Paren) -> Typed:
        inner, kind = self.lower(node.this)
        return exp.Paren(this=inner), kind

    def _neg(self, node: exp.Neg) -> Typed:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string and _INT_RE.match(inner.this):
            value = int(inner.this)
            if value == _INT64_MAX + 1:
                return exp.Paren(this=exp.Sub(this=exp.Neg(this=exp.Literal.number(_INT64_MAX)), expression=exp.Literal.number(1))), INT
        typed = self.lower(inner)
        if typed[1] == NULL:
            return typed
        if self.flavor.sql_types:
            self._sql_numbers(node, (inner, typed))
        number = self.as_number(typed)
        return exp.Neg(this=paren(number)), (typed[1] if typed[1] in NUMERIC else FLOAT)

    # ------------------------------------------------------------------ references

    def _steps(self, node: exp.Expression) -> list[Any] | None:
        """Flatten a column / dot / bracket chain into steps (str key, int index, '*')."""
        if isinstance(node, exp.Column):
            parts = [p for p in node.parts if isinstance(p, exp.Identifier)]
            return [p.this if not p.quoted else _Quoted(p.this) for p in parts] if len(
                parts
            ) == len(node.parts) else None
        if isinstance(node, exp.Dot):
            left = self._steps(node.this)
            right = node.expression
            if left is None or not isinstance(right, exp.Identifier):
                return None
            return [*left, right.this if not right.quoted else _Quoted(right.this)]
        if isinstance(node, exp.Bracket):
            left = self._steps(node.this)
            if left is None or len(node.expressions) != 1:
                return None
            key = node.expressions[0]
            if isinstance(key, exp.Star):
                return [*left, _ANY_INDEX]
            if isinstance(key, exp.Literal) and key.is_string:
                return [*left, _Quoted(key.this)]
            if isinstance(key, exp.Literal) and _INT_RE.match(key.this):
                return [*left, int(key.this)]
            return None
        return None

    def _reference(self, node: exp.Expression) -> Typed:
        steps = self._steps(node)
        if steps is None:
            raise UnsupportedFeatureError(f"unsupported reference: {_describe(node)}")
        first = steps[0]
        # Ceph: a bare double-quoted name is a string literal.
        if self.flavor.double_quotes_are_strings and len(steps) == 1 and isinstance(first, _Quoted):
            return lit_str(str(first)), STRING
        if len(steps) == 1 and isinstance(first, str) and not isinstance(first, _Quoted):
            if first.lower() == "missing":
                return exp.Null(), NULL
        if len(steps) > 1 and isinstance(first, str) and first.lower() in self.table_names:
            steps = steps[1:]
        elif len(steps) == 1 and isinstance(first, str) and self.input_format == "json" and first.lower() in self.table_names and first.lower() not in self.aliases:
            return self._json_path(()), JSON
        if self.input_format == "json":
            return self._json_reference(steps)
        if len(steps) != 1 or not isinstance(steps[0], str):
            raise UnsupportedFeatureError(
                f"nested paths need JSON input: {_describe(node)}"
            )
        return self._name(steps[0])

    def _name(self, name: str) -> Typed:
        quoted = isinstance(name, _Quoted)
        key = name.lower()
        if key in self.aliases and (not quoted or self.flavor.aws_names):
            if key not in self._alias_stack:
                return self._alias(key)
            if not self._is_column(name):
                raise QuerySemanticError(_CYCLE_MESSAGE)
        positional = _POSITIONAL_RE.match(name)
        if self.input_format == "parquet":
            return self._parquet_column(name, positional)
        if positional:
            position = int(positional.group(1))
            if position < 1:
                raise QuerySemanticError(f"invalid column {name}")
            self.state.max_positional = max(self.state.max_positional, position)
            return self._field(position), FIELD
        if not quoted:
            self._check_unambiguous(name, self.header)
        index = self._header_index(name, quoted)
        if index is None:
            raise self._unknown_column(name)
        self.state.max_positional = max(self.state.max_positional, index)
        return self._field(index), FIELD

    def _field(self, position: int) -> exp.Expression:
        """CSV field ``position`` as the statement reads it."""
        field = col(f"_{position}")
        if self.empty_fields_are_null:
            return fn("nullif", field, lit_str(""))
        return field

    def _check_unambiguous(self, name: str, names: Sequence[str]) -> None:
        """AWS: an unquoted name matching several names that differ in case is an error (a
        quoted name picks one; Ceph takes the exact match, else the first)."""
        if not self.flavor.aws_names:
            return
        spellings = sorted({n for n in names if n.lower() == name.lower()})
        if len(spellings) > 1:
            example = spellings[0].replace('"', '""')
            raise QuerySemanticError(
                f"{name} is ambiguous: it matches {_listing(spellings)}, which differ in case; "
                f'quote the one you mean (a quoted name matches its own case), e.g. '
                f's3object."{example}"',
                code="AmbiguousFieldName",
            )

    def _unknown_column(self, name: str) -> QuerySemanticError:
        """Ceph's text (the corpus matches it), then what the user can write instead."""
        if self.input_format == "parquet":
            hint = f"; the columns are: {_listing([c.name for c in self.columns]) or 'none'}"
        elif self.header:
            hint = f"; the header (FileHeaderInfo USE) names: {_listing(self.header)}"
        else:
            hint = ("; without a header the columns are _1, _2, ...: set FileHeaderInfo "
                    "to USE to name them by the first line")
        return QuerySemanticError(
            f"alias {{{name}}} or column not exist in schema{hint}",
            code=self.flavor.missing_column_code,
        )

    def _is_column(self, name: str) -> bool:
        if self.input_format == "parquet":
            return any(c.name.lower() == name.lower() for c in self.columns)
        return _POSITIONAL_RE.match(name) is not None or self._header_index(name, False) is not None

    def _header_index(self, name: str, quoted: bool) -> int | None:
        for i, header_name in enumerate(self.header):
            if header_name == name:
                return i + 1
        if not quoted or not self.flavor.aws_names:
            for i, header_name in enumerate(self.header):
                if header_name.lower() == name.lower():
                    return i + 1
        return None

    def _parquet_column(self, name: str, positional: re.Match[str] | None) -> Typed:
        if not isinstance(name, _Quoted):
            self._check_unambiguous(name, [c.name for c in self.columns])
        match = next((c for c in self.columns if c.name == name), None)
        if match is None and (not self.flavor.aws_names or not isinstance(name, _Quoted)):
            match = next((c for c in self.columns if c.name.lower() == name.lower()), None)
        if match is None and positional:
            index = int(positional.group(1))
            if 1 <= index <= len(self.columns):
                match = self.columns[index - 1]
        if match is None:
            raise self._unknown_column(name)
        kind = DECIMAL if match.decimal_scale is not None else COLUMN_KINDS.get(match.type, STRING)
        return col(match.name), kind

    def _json_reference(self, steps: list[Any]) -> Typed:
        first = steps[0]
        if isinstance(first, str) and not isinstance(first, _Quoted) and first.lower() in self.aliases and first.lower() not in self._alias_stack and len(steps) == 1:
            return self._alias(first.lower())
        if isinstance(first, str) and first.lower() == "_1":
            steps = steps[1:]
        path: list[tuple[Any, ...]] = []
        for step in steps:
            if step is _ANY_INDEX:
                path.append(("any_index",))
            elif isinstance(step, int):
                path.append(("index", step))
            else:
                path.append((self._key_step_kind(step), str(step)))
        return self._json_path(tuple(path)), JSON

    def _key_step_kind(self, step: str) -> str:
        """How a JSON key step matches (the reader's step kinds, json_input's docstring).

        AWS's rules: a quoted key matches its own case only; an unquoted one matches any case,
        and several keys of one object matching it is an AmbiguousFieldName. Ceph matches
        every key case-insensitively, the last of several winning."""
        if not self.flavor.aws_names:
            return "key"
        return "exact_key" if isinstance(step, _Quoted) else "only_key"

    def _json_path(self, path: tuple[tuple[Any, ...], ...]) -> exp.Expression:
        name = self._json_by_steps.get(path)
        if name is None:
            name = f"j{len(self._json_by_steps)}"
            self._json_by_steps[path] = name
            self.state.json_paths[name] = path
        return col(name)

    def _alias(self, key: str) -> Typed:
        done = self._alias_done.get(key)
        if done is None:
            done = self._lower_alias_once(key)
        if key in self.materialized and self._reads:
            self._reads[-1].add(key)
        return done[0].copy(), done[1]

    def _lower_alias_once(self, key: str) -> Typed:
        if len(self._alias_stack) > 64:
            raise QuerySemanticError(_CYCLE_MESSAGE)
        self._alias_stack.append(key)
        self._reads.append(set())
        try:
            typed = self.lower(self.aliases[key])
        finally:
            self._alias_stack.pop()
            reads = self._reads.pop()
        if key in self.materialize:
            name = f"__alias_{len(self.materialized)}"
            level = 1 + max((self.materialized[r][2] for r in reads), default=0)
            self.materialized[key] = (name, typed[0], level)
            typed = (col(name), typed[1])
        self._alias_done[key] = typed
        return typed

    # ------------------------------------------------------------------ operators

    def _arithmetic(self, node: exp.Expression) -> Typed:
        left = self.lower(node.this)
        right = self.lower(node.expression)
        if self.flavor.sql_types:
            self._sql_numbers(node, (node.this, left), (node.expression, right))
        for side in (left, right):
            if side[1] == STRING and isinstance(side[0], exp.Literal):
                raise QuerySemanticError("illegal binary operation with string")
        if NULL in (left[1], right[1]):
            return exp.Null(), NULL
        if isinstance(node, exp.Pow):
            a, b = paren(self.as_number(left)), paren(self.as_number(right))
            return fn("power", a, b), FLOAT
        kind = NUMBER_COERCION[frozenset({_number_kind(left[1]), _number_kind(right[1])})]
        a = paren(self.as_kind(left, kind))
        b = paren(self.as_kind(right, kind))
        klass: type[exp.Expression] = type(node)
        return klass(this=a, expression=b), kind

    def _comparison(self, node: exp.Expression) -> Typed:
        if isinstance(node.this, _ARRAY_NODES) or isinstance(node.expression, _ARRAY_NODES):
            return self._json_equality(type(node), node.this, node.expression), BOOL
        return self.compare(type(node), self.lower(node.this), self.lower(node.expression)), BOOL

    def compare(self, klass: type[exp.Expression], left: Typed, right: Typed) -> exp.Expression:
        """A typed comparison ``left <klass> right`` with the flavour's coercions."""
        lk, rk = left[1], right[1]
        if NULL in (lk, rk):
            return typed_null(BOOL)
        pair = {lk, rk}
        if DECIMAL in pair and pair <= NUMERIC:
            on_grid = self._decimal_column_beside_finer_literal(klass, left, right)
            if on_grid is not None:
                return on_grid
            a, b = self._decimal_operands(left, right)
        elif pair <= NUMERIC:
            a, b = _year_as_range(left[0], right[0]), _year_as_range(right[0], left[0])
        elif pair <= TEXTUAL or pair == {BOOL}:
            a, b = left[0], right[0]
        elif self.flavor.sql_types and NATIVE_TS in pair and pair <= TEXTUAL | {NATIVE_TS}:
            a, b = self.as_native_ts(left), self.as_native_ts(right)  # SQL: text is cast
        elif TS in pair or NATIVE_TS in pair:
            a = utc_instant(self.as_ts(left))
            b = utc_instant(self.as_ts(right))
        elif pair == {JSON}:
            if klass in (exp.EQ, exp.NEQ):
                a, b = fn(U.JSON_TO_STRING, left[0]), fn(U.JSON_TO_STRING, right[0])
            else:
                return self._json_ordering(klass, left, right)
        elif JSON in pair and pair & NUMERIC:
            a, b = self.as_kind(left, FLOAT), self.as_kind(right, FLOAT)
        elif JSON in pair and pair & TEXTUAL:
            a, b = self.as_string(left), self.as_string(right)
        elif (pair == {JSON, BOOL} and self.flavor.json_bool_typed_equality
              and klass in (exp.EQ, exp.NEQ)):
            # AWS/MinIO: values of different types are unequal (42 != true, "true" != true);
            # a JSON boolean's text is exactly true/false.
            json_side, bool_side = (left, right) if lk == JSON else (right, left)
            a, b = json_side[0], exp.If(
                this=paren(bool_side[0]), true=lit_str("true"), false=lit_str("false")
            )
            a, b = (a, b) if lk == JSON else (b, a)
        elif BOOL in pair:
            a, b = self.as_bool(left), self.as_bool(right)
        elif FIELD in pair and pair & NUMERIC:
            a, b = self.as_kind(left, FLOAT), self.as_kind(right, FLOAT)
        elif STRING in pair and pair & NUMERIC:
            string_side = left if lk == STRING else right
            if isinstance(string_side[0], exp.Literal):
                return self._mismatch(klass, left[0], right[0])
            a, b = self.as_kind(left, FLOAT), self.as_kind(right, FLOAT)
        else:
            raise QuerySemanticError(f"cannot compare a {lk} value with a {rk} value")
        return klass(this=paren(a), expression=paren(b))

    def _decimal_operands(self, left: Typed, right: Typed) -> tuple[exp.Expression, exp.Expression]:
        """The two sides of a comparison of a decimal with a number. A number literal becomes
        a decimal of its own digits (exact: ``price = 2.25`` is true for 2.25, ``price >
        1.505`` false for 1.50); other sides follow :data:`NUMBER_COERCION`."""
        literal = self._exact_beside_decimal(left, right)
        if literal is not None:
            return literal, right[0]
        literal = self._exact_beside_decimal(right, left)
        if literal is not None:
            return left[0], literal
        kind = NUMBER_COERCION[frozenset({left[1], right[1]})]
        return self.as_kind(left, kind), self.as_kind(right, kind)

    def _decimal_column_beside_finer_literal(
        self, klass: type[exp.Expression], left: Typed, right: Typed
    ) -> exp.Expression | None:
        """A decimal column of scale s compared with a number literal of more fraction digits,
        as the same comparison with a literal on the column's grid, or None.

        DataFusion would compare both in their common decimal type, which takes the literal's
        scale and the column's integer digits: decimal(38,10) against 1.123456789012345 is
        compared in decimal(38,15), too narrow for the column's values of 26 integer digits
        (an overflow error). A value ``w`` of scale s lies on a grid of step 10^-s, so with
        ``lo``/``hi`` the grid points below/above a literal ``v`` off the grid: ``w > v`` is
        ``w > lo``, ``w >= v`` is ``w >= hi``, ``w < v`` is ``w < hi``, ``w <= v`` is ``w <= lo``,
        ``w = v`` is FALSE and ``w <> v`` TRUE (NULL for a NULL ``w``)."""
        for column_side, literal_side, flipped in ((left, right, False), (right, left, True)):
            scale = self._decimal_column_scale(column_side[0])
            value = _number_literal_value(literal_side[0])
            if scale is None or value is None or literal_side[1] not in (INT, FLOAT):
                continue
            if value.adjusted() >= _MAX_DECIMAL_PRECISION:
                return None  # beyond any decimal128: the usual path decides
            step = decimal.Decimal(1).scaleb(-scale)
            low = value.quantize(step, rounding=decimal.ROUND_FLOOR, context=_WIDE_CONTEXT)
            if low == value:
                return None  # on the grid: the usual exact literal is as narrow as the column
            high = low + step
            op = _FLIPPED_COMPARISONS.get(klass, klass) if flipped else klass
            column = column_side[0]
            if op in (exp.EQ, exp.NEQ):
                return exp.Case(
                    ifs=[exp.If(this=exp.Is(this=paren(column.copy()), expression=exp.Null()),
                                true=typed_null(BOOL))],
                    default=exp.Boolean(this=op is exp.NEQ))
            bound = low if op in (exp.GT, exp.LTE) else high
            literal = exact_decimal_literal(exp.Literal.number(format(bound, "f")))
            if literal is None:
                return None
            return op(this=paren(column.copy()), expression=literal)
        return None

    def _decimal_column_scale(self, node: exp.Expression) -> int | None:
        """The scale of a Parquet/typed decimal column the expression is, else None."""
        if not isinstance(node, exp.Column):
            return None
        match = next((c for c in self.columns if c.name == node.name), None)
        return match.decimal_scale if match is not None else None

    @staticmethod
    def _exact_beside_decimal(this: Typed, other: Typed) -> exp.Expression | None:
        if other[1] != DECIMAL or this[1] not in (INT, FLOAT):
            return None
        return exact_decimal_literal(this[0])

    def _json_ordering(
        self, klass: type[exp.Expression], left: Typed, right: Typed
    ) -> exp.Expression:
        """``<``, ``>``, … between two JSON values: as numbers when both read as numbers,
        else as text (two JSON strings ``"2004T" <= "2004T"`` is true, not NULL)."""
        a, b = self.as_number(left), self.as_number(right)
        both_numbers = exp.And(
            this=exp.Not(this=exp.Is(this=paren(a), expression=exp.Null())),
            expression=exp.Not(this=exp.Is(this=paren(b), expression=exp.Null())),
        )
        text_a, text_b = fn(U.JSON_TO_STRING, left[0]), fn(U.JSON_TO_STRING, right[0])
        return exp.Case(
            ifs=[exp.If(this=both_numbers, true=klass(this=paren(a), expression=paren(b)))],
            default=klass(this=paren(text_a), expression=paren(text_b)),
        )

    def _mismatch(self, klass: type[exp.Expression], a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """Values of different types: never equal (NULL when either side is NULL)."""
        either_null = exp.Or(
            this=exp.Is(this=paren(a), expression=exp.Null()),
            expression=exp.Is(this=paren(b), expression=exp.Null()),
        )
        answer = exp.Boolean(this=klass is exp.NEQ)
        return exp.Case(ifs=[exp.If(this=either_null, true=typed_null(BOOL))], default=answer)

    def _connective(self, node: exp.Expression) -> Typed:
        klass: type[exp.Expression] = type(node)
        operands = _flatten(node, klass)
        lowered = [paren(self.as_logical(self.lower(operand))) for operand in operands]
        return balanced(_columns_first(_fold_constants(lowered, klass)), klass), BOOL

    def _not(self, node: exp.Not) -> Typed:
        operand = self.as_logical(self.lower(node.this))
        constant = _boolean_constant(operand)
        if constant is None:  # NOT NULL is NULL; folded for the reason _fold_constants gives
            return typed_null(BOOL), BOOL
        if constant != "other":
            return exp.Boolean(this=not constant), BOOL
        return exp.Not(this=paren(operand)), BOOL

    def _is(self, node: exp.Is) -> Typed:
        target = node.expression
        typed = self.lower(node.this)
        subject = paren(typed[0])
        if isinstance(target, Missing):
            return exp.Is(this=subject, expression=exp.Null()), BOOL
        if isinstance(target, exp.Null):
            if typed[1] == JSON:
                return exp.Paren(
                    this=exp.Or(
                        this=exp.Is(this=subject, expression=exp.Null()),
                        expression=exp.EQ(this=subject.copy(), expression=lit_str("null")),
                    )
                ), BOOL
            return exp.Is(this=subject, expression=exp.Null()), BOOL
        if isinstance(target, exp.Boolean):
            value = self.as_bool(typed)
            return exp.Is(this=paren(value), expression=exp.Boolean(this=bool(target.this))), BOOL
        raise UnsupportedFeatureError(f"unsupported IS predicate: {_describe(node)}")

    def _between(self, node: exp.Between) -> Typed:
        subject = self.lower(node.this)
        low = self.lower(node.args["low"])
        high = self.lower(node.args["high"])
        first, second = _columns_first(
            [self.compare(exp.GTE, subject, low), self.compare(exp.LTE, subject, high)]
        )
        return exp.Paren(this=exp.And(this=first, expression=second)), BOOL

    def _in(self, node: exp.In) -> Typed:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise UnsupportedFeatureError("subqueries are not supported")
        field = node.args.get("field")
        if field is not None:
            return self._in_json(node.this, field)
        if not node.expressions:
            raise QuerySemanticError("IN needs at least one value")
        if any(isinstance(n, _ARRAY_NODES) for n in (node.this, *node.expressions)):
            comparisons = [
                paren(self._json_equality(exp.EQ, node.this, item)) for item in node.expressions
            ]
            return exp.Paren(this=balanced(comparisons, exp.Or)), BOOL
        subject = self.lower(node.this)
        items = [self.lower(item) for item in node.expressions]
        kinds = {kind for _, kind in items}
        # A decimal side takes the comparisons below, whose literals are exact decimals.
        numbers = kinds | {subject[1]} <= NUMERIC and DECIMAL not in kinds | {subject[1]}
        if numbers or (subject[1] in TEXTUAL and kinds <= TEXTUAL):
            return exp.In(this=paren(subject[0]), expressions=[i[0] for i in items]), BOOL
        comparisons = [paren(self.compare(exp.EQ, subject, item)) for item in items]
        return exp.Paren(this=balanced(comparisons, exp.Or)), BOOL

    def _in_json(self, subject: exp.Expression, field: exp.Expression) -> Typed:
        """``x IN s.arr[*]`` / ``x IN s.arr``: membership in a JSON array of the row."""
        haystack = self.lower(field)
        if haystack[1] != JSON:
            raise UnsupportedFeatureError(
                f"IN over a path needs a JSON array of the row: {_describe(field)}"
            )
        needle = self.as_json_text(self.lower(subject))
        return fn(U.JSON_IN, needle, haystack[0]), BOOL

    def _json_equality(
        self, klass: type[exp.Expression], left: exp.Expression, right: exp.Expression
    ) -> exp.Expression:
        """``=`` / ``!=`` with an array or tuple side: structural JSON equality. A MISSING
        side is unequal to any array (``!=`` is true), as in MinIO."""
        if klass not in (exp.EQ, exp.NEQ):
            raise QuerySemanticError("arrays can only be compared with = or !=")
        a = self.as_json_text(self.lower(left))
        b = self.as_json_text(self.lower(right))
        equal = exp.Coalesce(this=fn(U.JSON_EQUAL, a, b), expressions=[exp.Boolean(this=False)])
        return equal if klass is exp.EQ else exp.Not(this=equal)

    def as_json_text(self, typed: Typed) -> exp.Expression:
        """The value as JSON text (what a JSON path column holds); NULL stays NULL."""
        node, kind = typed
        static = _static_json(node, kind)
        if static is not None:
            return lit_str(static)
        if kind == JSON:
            return node
        if kind in NUMERIC or kind == BOOL:
            return cast(paren(node), "VARCHAR")
        if kind == NULL:
            return typed_null(JSON)
        return fn(U.JSON_QUOTE, self.as_string(typed))

    def _concat(self, node: exp.DPipe) -> Typed:
        """``a || b`` (AWS documents it): both sides as text; NULL if either is NULL."""
        left = self.as_string(self.lower(node.this))
        right = self.as_string(self.lower(node.expression))
        return exp.DPipe(this=paren(left), expression=paren(right)), STRING

    def _json_array(self, node: exp.Expression) -> Typed:
        """A tuple ``(1, 'a')`` or array ``[1, 'a']`` literal, as JSON array text."""
        texts = [self.as_json_text(self.lower(item)) for item in node.expressions]
        if all(isinstance(t, exp.Literal) for t in texts):
            return lit_str("[" + ",".join(t.this for t in texts) + "]"), JSON
        parts: list[exp.Expression] = [lit_str("[")]
        for i, text in enumerate(texts):
            if i:
                parts.append(lit_str(","))
            parts.append(exp.Coalesce(this=text, expressions=[lit_str("null")]))
        parts.append(lit_str("]"))
        return fn("concat", *parts), JSON

    def _like(self, node: exp.Expression) -> Typed:
        escape_typed: Typed | None = None
        if isinstance(node, exp.Escape):
            escape_typed = self.lower(node.expression)
            node = node.this
        negate = False
        if isinstance(node, exp.Not):
            negate = True
            node = node.this
        if not isinstance(node, exp.Like):
            raise UnsupportedFeatureError(f"unsupported ESCAPE use: {_describe(node)}")
        if node.args.get("negate"):  # sqlglot 30 parses ``x NOT LIKE p`` as Like(negate=True)
            negate = not negate
        subject = self.as_string(self.lower(node.this))
        pattern_typed = self.lower(node.expression)
        pattern = pattern_typed[0]
        escape_literal: str | None = None
        if escape_typed is not None and isinstance(escape_typed[0], exp.Literal) and escape_typed[0].is_string:
            escape_literal = escape_typed[0].this
            if len(escape_literal) != 1:
                raise QuerySemanticError("the ESCAPE argument must be a single character")
        static_escape = escape_typed is None or escape_literal is not None
        builtin = (
            like_to_builtin_pattern(pattern.this, escape_literal)
            if isinstance(pattern, exp.Literal) and pattern.is_string and static_escape
            else None
        )
        result: exp.Expression
        if builtin is not None:
            result = exp.Like(this=paren(subject), expression=lit_str(builtin))
        elif isinstance(pattern, exp.Literal) and pattern.is_string and static_escape:
            regex = like_to_regex(pattern.this, escape_literal)
            result = fn("regexp_like", subject, lit_str(regex))
        else:
            escape_node = self.as_string(escape_typed) if escape_typed is not None else lit_str("")
            result = fn(U.LIKE, subject, self.as_string(pattern_typed), escape_node)
        return (exp.Not(this=result) if negate else result), BOOL

    def _case(self, node: exp.Expression) -> Typed:
        if isinstance(node, exp.If):
            raise UnsupportedFeatureError("IF is not supported")
        subject = node.this
        conditions: list[exp.Expression] = []
        results: list[Typed] = []
        for branch in node.args.get("ifs") or []:
            if subject is not None:
                condition = self.compare(exp.EQ, self.lower(subject), self.lower(branch.this))
            else:
                condition = self.as_bool(self.lower(branch.this))
            conditions.append(condition)
            results.append(self.lower(branch.args["true"]))
        default = node.args.get("default")
        if default is not None:
            results.append(self.lower(default))
        unified, kind = self.unify(results)
        # unified ends with the ELSE result when there is one: one more than the conditions.
        ifs = [exp.If(this=c, true=r) for c, r in zip(conditions, unified, strict=False)]
        out = exp.Case(ifs=ifs, default=unified[len(conditions)] if default is not None else None)
        return out, kind

    def unify(self, values: Sequence[Typed]) -> tuple[list[exp.Expression], Kind]:
        """Bring values to one kind (for CASE, COALESCE)."""
        kinds = {kind for _, kind in values if kind != NULL}
        if not kinds:
            return [node for node, _ in values], NULL
        if len(kinds) == 1:
            kind = kinds.pop()
            return [node if k != NULL else self.null_of(kind) for node, k in values], kind
        if kinds <= NUMERIC | {JSON, FIELD}:
            target = NUMBER_COERCION[frozenset(_number_kind(k) for k in kinds)]
            return [self._unified_number((n, k), target) for n, k in values], target
        if self.flavor.sql_types and NATIVE_TS in kinds and kinds <= TEXTUAL | {NATIVE_TS}:
            return [self.as_native_ts(v) for v in values], NATIVE_TS
        if kinds <= {TS, NATIVE_TS} | TEXTUAL:
            if kinds & {TS, NATIVE_TS}:
                return [self.as_ts(v) for v in values], TS
        return [self.as_string(v) for v in values], STRING

    def _unified_number(self, typed: Typed, target: Kind) -> exp.Expression:
        """One value of a CASE or COALESCE brought to the numeric ``target`` kind: an integer
        among floats is cast explicitly, as are decimals (DataFusion's own common type of a
        decimal and a double is decimal(30, 15))."""
        if typed[1] == NULL:
            return typed_null(target)
        if typed[1] == INT and target == FLOAT:
            return cast(paren(typed[0]), "DOUBLE")
        return self.as_kind(typed, target)

    # ------------------------------------------------------------------ functions

    def _one(self, args: list[exp.Expression], name: str) -> Typed:
        if len(args) != 1:
            raise QuerySemanticError(f"{name} takes exactly one argument")
        return self.lower(args[0])

    def _anonymous(self, node: exp.Anonymous) -> Typed:
        name = str(node.this).upper()
        handler = self._functions.get(name)
        if handler is None:
            raise UnsupportedFeatureError(f"unsupported function: {name.lower()}")
        return handler(list(node.expressions))

    def _cast_node(self, node: exp.Cast) -> Typed:
        to: exp.DataType = node.args["to"]
        target = _CAST_TARGETS.get(to.this)
        if target is None:
            raise UnsupportedFeatureError(f"unsupported cast target: {to.sql()}")
        typed = self.lower(node.this)
        if target == "decimal":
            return self._cast_to_decimal(typed, to)
        if self.flavor.sql_types and to.this == exp.DataType.Type.TIMESTAMP:
            return self.as_native_ts(typed), NATIVE_TS
        return self._cast(typed, target)

    def _cast_to_decimal(self, typed: Typed, to: exp.DataType) -> Typed:
        """``CAST(x AS DECIMAL(p,s))``: s3-select's cast to a float (``cast(1.123456789 as
        decimal(9,1))`` is 1.123456789 in Ceph), except that a decimal stays a decimal, of the
        written precision and scale when they are given (DataFusion rounds half away from
        zero, and a value too wide for ``p`` is an error)."""
        if typed[1] != DECIMAL:
            return self._cast(typed, "float")
        params = [p.this for p in to.expressions if isinstance(p, exp.DataTypeParam)]
        if not params:
            return typed
        if len(params) > 2 or not all(
                isinstance(p, exp.Literal) and _INT_RE.match(p.this) for p in params):
            raise QuerySemanticError(f"invalid decimal type: {to.sql()}")
        precision, scale = int(params[0].this), int(params[1].this) if len(params) == 2 else 0
        if not 1 <= precision <= _MAX_DECIMAL_PRECISION or scale > precision:
            raise QuerySemanticError(f"invalid decimal type: {to.sql()}")
        return cast(paren(typed[0]), f"DECIMAL({precision}, {scale})"), DECIMAL

    def _substring(self, node: exp.Substring) -> Typed:
        subject = self.as_string(self.lower(node.this))
        start_node = node.args.get("start")
        length_node = node.args.get("length")
        if start_node is None:
            raise QuerySemanticError("substring needs a start position")
        start = self._integer(self.lower(start_node))
        if self.flavor.substring_start_clamped:
            start = fn("greatest", start, exp.Literal.number(1))
        args = [subject, start]
        if length_node is not None:
            args.append(self._integer(self.lower(length_node)))
        return fn("substr", *args), STRING

    def _integer(self, typed: Typed) -> exp.Expression:
        if typed[1] == INT:
            return typed[0]
        return cast(paren(self.as_number(typed)), "BIGINT")

    def _trim(self, node: exp.Trim) -> Typed:
        subject = self.as_string(self.lower(node.this))
        chars_node = node.args.get("expression")
        chars = self.as_string(self.lower(chars_node)) if chars_node is not None else lit_str(" ")
        position = str(node.args.get("position") or "BOTH").upper()
        name = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}[position]
        return fn(name, subject, chars), STRING

    def _extract(self, node: exp.Extract) -> Typed:
        part = _part_name(node.this)
        ts = self.as_ts(self.lower(node.expression))
        if part in _EXTRACT_LOCAL_PARTS:
            # through DOUBLE: DataFusion 55 rewrites `date_part('year', t) <op> n` into a range
            # of timestamps, NULL when year n is outside nanosecond range (1677..2262), so
            # `extract(year …) <> 13` was NULL; it does not see through this double cast.
            # :meth:`compare` lifts it where the rewrite is exact (see _YEARS_AS_RANGES).
            part_value = cast(fn("date_part", lit_str(part), local_time(ts)), "DOUBLE")
            if part == "year":
                part_value.meta[_YEAR_BARRIER] = True
            return cast(part_value, "BIGINT"), INT
        offset = cast(fn("get_field", ts, lit_str("offset_minutes")), "BIGINT")
        if part == "timezone_hour":
            return exp.Paren(this=exp.Div(this=offset, expression=exp.Literal.number(60))), INT
        if part == "timezone_minute":
            return exp.Paren(this=exp.Mod(this=offset, expression=exp.Literal.number(60))), INT
        raise QuerySemanticError(f"unsupported date part in extract: {part}")

    def _count(self, node: exp.Count) -> Typed:
        arg = node.this
        if arg is None or isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal)):
            return fn("count", exp.Star()), INT
        typed = self.lower(arg)
        if typed[1] == NULL or _boolean_constant(typed[0]) is None:  # no row has a value
            return fn("count", exp.Null()), INT
        self._no_nested_aggregate(arg)
        if typed[1] == JSON:  # a JSON null is not counted
            return fn("count", _without_json_null(typed[0])), INT
        return fn("count", typed[0]), INT

    def _sum_avg(self, node: exp.Expression) -> Typed:
        self._no_nested_aggregate(node.this)
        typed = self.lower(node.this)
        name = "sum" if isinstance(node, exp.Sum) else "avg"
        if self.flavor.sql_types and typed[1] not in _SQL_NUMBERS:
            raise self._sql_argument_error(name, node.this, typed[1])
        kind = AGGREGATE_KINDS.get((name, typed[1]), FLOAT)
        if _boolean_constant(typed[0]) is None:
            return self._aggregate_of_null(kind), kind
        return fn(name, self.as_number(typed)), kind

    def _min_max(self, node: exp.Expression) -> Typed:
        if node.expressions:
            raise QuerySemanticError("min/max take one argument")
        self._no_nested_aggregate(node.this)
        typed = self.lower(node.this)
        name = "min" if isinstance(node, exp.Min) else "max"
        ordered = _SQL_ORDERED if self.flavor.sql_types else NUMERIC | {STRING}
        if typed[1] == NULL or _boolean_constant(typed[0]) is None:
            kind = typed[1] if typed[1] in ordered else NULL
            return self._aggregate_of_null(kind), kind  # still an aggregate: one row
        if typed[1] in ordered:  # SQL orders text as text, timestamps as instants
            return fn(name, typed[0]), typed[1]
        number = self.as_number(typed)
        return fn(name, number), FLOAT

    def _aggregate_of_null(self, kind: Kind) -> exp.Expression:
        """SUM/AVG/MIN/MAX of a NULL constant: a NULL of ``kind``, still an aggregate (one row
        per group), written ``max(NULL)`` under the cast. DataFusion names an aggregate of
        ``CAST(NULL AS T)`` after the NULL alone, so two of them of different types in one
        query collided ("duplicate unqualified field name")."""
        null = (typed_null(FLOAT) if kind == NULL else self.null_of(kind)).copy()
        inner = null.find(exp.Null)
        assert inner is not None  # every typed NULL holds one
        inner.replace(fn("max", exp.Null()))
        return null

    def _no_nested_aggregate(self, node: exp.Expression | None) -> None:
        if node is not None and is_aggregate(node):
            raise QuerySemanticError("aggregate functions cannot be nested")

    def _case_fold(self, node: exp.Expression) -> Typed:
        name = "lower" if isinstance(node, exp.Lower) else "upper"
        return fn(name, self.as_string(self.lower(node.this))), STRING

    def _char_length(self, node: exp.Length) -> Typed:
        return self._length(self.lower(node.this))

    def _length(self, typed: Typed) -> Typed:
        return fn("character_length", self.as_string(typed)), INT

    def _coalesce_node(self, node: exp.Coalesce) -> Typed:
        return self._coalesce([node.this, *node.expressions])

    def _coalesce(self, args: list[exp.Expression]) -> Typed:
        if not args:
            raise QuerySemanticError("coalesce needs at least one argument")
        values = [self.lower(arg) for arg in args]
        unified, kind = self.unify(values)
        if kind == NULL:
            return exp.Null(), NULL
        if kind == JSON:  # a JSON null is passed over like a NULL (the last stays as it is)
            unified = [_without_json_null(v) for v in unified[:-1]] + unified[-1:]
        return exp.Coalesce(this=unified[0], expressions=unified[1:]), kind

    def _nullif_node(self, node: exp.Nullif) -> Typed:
        return self._nullif([node.this, node.expression])

    def _nullif(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 2:
            raise QuerySemanticError("nullif takes two arguments")
        first = self.lower(args[0])
        second = self.lower(args[1])
        if first[1] == NULL:
            return exp.Null(), NULL
        equal = self.compare(exp.EQ, first, second)
        return exp.Case(ifs=[exp.If(this=equal, true=self.null_of(first[1]))], default=first[0].copy()), first[1]

    def _date_part_arg(self, node: exp.Expression, function: str) -> str:
        part = _part_name(node)
        if part not in _DATE_PART_PRECISION:
            raise QuerySemanticError(f"{function}: unsupported date part {part}")
        return part

    def _date_add(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 3:
            raise QuerySemanticError("date_add takes three arguments")
        part = self._date_part_arg(args[0], "date_add")
        amount = self._integer(self.lower(args[1]))
        ts = self.as_ts(self.lower(args[2]))
        if part == "year" and self.flavor.year_keeps_month_end:
            part = U.CEPH_YEAR  # boost's years: the last day of a month stays the last
        return fn(U.DATE_ADD, lit_str(part), amount, ts), TS

    def _date_diff(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 3:
            raise QuerySemanticError("date_diff takes three arguments")
        part = self._date_part_arg(args[0], "date_diff")
        first = self.as_ts(self.lower(args[1]))
        second = self.as_ts(self.lower(args[2]))
        unit_ns = _DURATION_NS.get(part)
        if unit_ns is not None:
            # whole units between the instants, truncated toward zero (integer division)
            delta = exp.Sub(this=cast(utc_instant(second), "BIGINT"),
                            expression=cast(utc_instant(first), "BIGINT"))
            return exp.Paren(this=exp.Div(this=exp.Paren(this=delta),
                                          expression=exp.Literal.number(unit_ns))), INT
        months = whole_months_between(utc_instant(first), utc_instant(second))
        if part == "year":
            return exp.Paren(this=exp.Div(this=months, expression=exp.Literal.number(12))), INT
        return months, INT

    def _utcnow(self, args: list[exp.Expression]) -> Typed:
        if args:
            raise QuerySemanticError("utcnow takes no arguments")
        now = fn("date_trunc", lit_str("second"), fn("now"))
        # Ceph prints utcnow() with "+00:00" (no zone written); AWS writes "Z".
        convert = U.TIMESTAMP_Z if self.flavor.utcnow_in_z else U.TIMESTAMP_FROM_UTC
        return fn(convert, now, exp.Literal.number(4)), TS

    def _add(self, args: list[exp.Expression]) -> Typed:
        """Ceph's ``add(a, b)``: the ``+`` operator as a function."""
        if len(args) != 2:
            raise QuerySemanticError("add takes two arguments")
        return self._arithmetic(exp.Add(this=args[0], expression=args[1]))

    def _version(self, args: list[exp.Expression]) -> Typed:
        """Ceph's ``version()``: the s3select engine version whose dialect this follows."""
        if args:
            raise QuerySemanticError("version takes no arguments")
        if not self.flavor.version_function:
            raise UnsupportedFeatureError("unsupported function: version")
        return lit_str(CEPH_S3SELECT_VERSION), STRING

    def _to_string(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 2:
            raise QuerySemanticError("to_string takes two arguments")
        ts = self.as_ts(self.lower(args[0]))
        pattern = self.as_string(self.lower(args[1]))
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            # Every S3_TIMESTAMP is a nanosecond timestamp, so its year has four digits.
            strftime = strftime_for(pattern.this)
            if strftime is not None:
                return fn("to_char", local_time(ts), lit_str(strftime)), STRING
        return fn(U.TO_STRING, ts, pattern), STRING


class _Quoted(str):
    """A name that was written in double quotes."""


_ANY_INDEX = _Quoted("[*]")

_ARRAY_NODES = (exp.Tuple, exp.Array)


def _static_json(node: exp.Expression, kind: str) -> str | None:
    """JSON text of a literal known while translating (else None)."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return json.dumps(node.this) if kind in TEXTUAL else node.this
        return node.this
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Null):
        return "null"
    return None

# Cast targets that are numbers: (kind, DataFusion type for a number or boolean, the guarded
# cast for text, which answers what s3-select answers or raises its error).
_NUMBER_CAST_TARGETS: dict[str, tuple[Kind, str, Callable[[exp.Expression], exp.Expression]]] = {
    "int": (INT, "BIGINT", guarded_cast_int),
    "float": (FLOAT, "DOUBLE", guarded_cast_float),
}

_CAST_TARGETS: dict[Any, str] = {
    exp.DataType.Type.INT: "int",
    exp.DataType.Type.BIGINT: "int",
    exp.DataType.Type.SMALLINT: "int",
    exp.DataType.Type.TINYINT: "int",
    exp.DataType.Type.FLOAT: "float",
    exp.DataType.Type.DOUBLE: "float",
    exp.DataType.Type.DECIMAL: "decimal",
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.VARCHAR: "string",
    exp.DataType.Type.CHAR: "string",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamp",
}


def _part_name(node: exp.Expression) -> str:
    if isinstance(node, (exp.Var, exp.Identifier)):
        return str(node.this).lower()
    if isinstance(node, exp.Column) and not node.table:
        return node.name.lower()
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this.lower()
    raise QuerySemanticError(f"expected a date part, got {_describe(node)}")


def _cast_hint(source: exp.Expression, kind: Kind, shape: str) -> str:
    """For text: how to ask for a number (``; cast it: sum(CAST(_1 AS DOUBLE))``)."""
    if kind not in TEXTUAL:
        return ""
    return "; cast it to a number: " + shape.format(f"CAST({_describe(source)} AS DOUBLE)")


def _number_kind(kind: Kind) -> Kind:
    """The kind an operand has as a number (what :meth:`Lowering.as_number` gives)."""
    return kind if kind in NUMERIC else FLOAT


def _flatten(node: exp.Expression, klass: type[exp.Expression]) -> list[exp.Expression]:
    """Operands of a chain of one connective, iteratively (long AND/OR chains)."""
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is klass:
            stack.append(current.expression)
            stack.append(current.this)
        else:
            out.append(current)
    return out


def _describe(node: exp.Expression) -> str:
    try:
        text = node.sql()
    except Exception:  # noqa: BLE001 - describing must never fail; fall back to the type
        text = type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."
