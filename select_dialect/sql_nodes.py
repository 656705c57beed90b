"""Building blocks of the DataFusion expressions the lowering emits: allow-listed calls,
quoted column references, casts, literals, balanced connectives, folded boolean constants, exact
decimal literals and the guarded casts of text to numbers (a builtin where it is exact, the UDF
for the other rows).

Every node here is built from values, never from user text; :func:`fn` refuses a function that
is neither a builtin nor a UDF of :mod:`select_dialect.udf_names`.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Sequence

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.errors import UnsupportedFeatureError
from select_dialect.kinds import (
    BOOL,
    DECIMAL,
    FIELD,
    FLOAT,
    INT,
    JSON,
    MAX_DECIMAL_PRECISION,
    STRING,
    TS,
    Kind,
)

OPERATOR_SIGNS: dict[type[exp.Expression], str] = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.Pow: "^",
}


INT_RE = re.compile(r"^\d+$")


SIGNED_INT_RE = re.compile(r"^[+-]?\d+$")
"""Text that casts to a BIGINT (within its range)."""


NUMBER_TEXT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


POSITIONAL_RE = re.compile(r"^_(\d+)$")


INT64_MAX = 2**63 - 1


_FLOAT64_MAX = "1.7976931348623157e308"


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


def columns_first(operands: list[exp.Expression]) -> list[exp.Expression]:
    """Operands of AND/OR with the constant ones (no column) last.

    datafusion-python turns a filter pushed into a pyarrow dataset into a pyarrow expression,
    where ``NULL AND x`` fails (``BooleanScalar & Expression``) while ``x AND NULL`` works;
    AND and OR are commutative in three-valued logic, so the order is free.
    """
    return sorted(operands, key=lambda operand: operand.find(exp.Column) is None)


def without_json_null(node: exp.Expression) -> exp.Expression:
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


def boolean_constant(node: exp.Expression) -> bool | str | None:
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


def fold_constants(operands: list[exp.Expression],
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
        constant = boolean_constant(operand)
        if constant == absorbing and constant is not None:
            return [exp.Boolean(this=absorbing)]
        if constant is None:
            nulls.append(operand)
        elif constant != identity:
            kept.append(operand)
    folded = kept + nulls[:1]
    return folded or [exp.Boolean(this=identity)]


def null_as_false(node: exp.Expression) -> exp.Expression:
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
        operands = [null_as_false(operand) for operand in flatten(inner, klass)]
        folded = columns_first(fold_constants([paren(o) for o in operands], klass))
        return paren(balanced(folded, klass)) if len(folded) > 1 else folded[0]
    if boolean_constant(inner) is None:
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


def listing(names: Sequence[str], most: int = 40) -> str:
    """``names`` for an error message, cut after ``most`` (a header may have thousands)."""
    shown = ", ".join(names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


WIDE_CONTEXT = decimal.Context(prec=2 * MAX_DECIMAL_PRECISION + 2)


FLIPPED_COMPARISONS: dict[type[exp.Expression], type[exp.Expression]] = {
    exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE,
}


def number_literal_value(node: exp.Expression) -> decimal.Decimal | None:
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
    value = number_literal_value(node)
    if value is None:
        return None
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite
    scale = max(0, -exponent)
    precision = max(1, max(0, len(digits) + exponent) + scale)
    if precision > MAX_DECIMAL_PRECISION:
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


def is_aggregate(node: exp.Expression) -> bool:
    """True when ``node`` contains an aggregate call."""
    return any(isinstance(n, exp.AggFunc) for n in node.walk())


def flatten(node: exp.Expression, klass: type[exp.Expression]) -> list[exp.Expression]:
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


def describe(node: exp.Expression) -> str:
    try:
        text = node.sql()
    except Exception:  # noqa: BLE001 - describing must never fail; fall back to the type
        text = type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."
