"""Pure: Spark data-source filters -> s3-select predicates that give exactly Spark's answer.

This module decides *what* is pushed and converts it to :mod:`compute_client.pushdown`'s
neutral filter tree; pushdown renders it, as it does for the DataFusion client.

A filter is pushed only when the server, evaluating s3-select semantics on the values it holds,
provably returns for every row the same three-valued result (TRUE, FALSE or NULL) that Spark
returns on the same values. That is decided per column from the server's Arrow type and the
Spark type the reader delivers; anything else raises :class:`NotPushable` and stays in Spark.

Why each rule holds (server = DataFusion behind the s3-select translator):

* string (Spark UTF8_BINARY): ``= < <= > >= IN``, starts/ends/contains, ``<=>``. Both
  compare UTF-8 bytes; LIKE with every wildcard (``% _ [ ]``) escaped is a literal match.
* integer: ``= < <= > >= IN``, ``<=>``. int64 against an int64 literal (the minimum int64 has
  no literal and is refused).
* float64 (Spark double): ``= < <= <>``, ``IN`` as ORs, and NOT of ``= > >= IN`` rewritten to
  those. Spark puts NaN above every number; the server evaluates some comparisons in pyarrow
  (IEEE: NaN compares false) and others in DataFusion, and rewrites ``NOT (a < b)`` as
  ``a >= b``. Only the forms listed agree on NaN and -0.0 whichever evaluates them.
* decimal of precision <= 15: ``= < <= > >= IN``, ``<=>``. The server compares decimals with
  number literals exactly; wider ones stay in Spark for the reason
  ``compute_client.pushdown.MAX_EXACT_DECIMAL_PRECISION`` gives (one rule, shared with
  the DataFusion client).
* boolean: ``= < <= > >= IN``, ``<=>`` (false < true on both sides).
* any column: ``IS NULL``, ``IS NOT NULL`` (no conversion involved).

Dates and timestamps are not compared on the server: it casts them to nanoseconds, which fails
(an error, where Spark answers) for values outside 1677-2262.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from compute_client import pushdown
from compute_client.pushdown import MAX_EXACT_DECIMAL_PRECISION, NotPushable

__all__ = ["ColumnRef", "NotPushable", "column_refs", "convert", "convert_all", "render"]

_INTEGER_SPARK = (ByteType, ShortType, IntegerType, LongType)


@dataclass(frozen=True)
class ColumnRef:
    """How a Spark column is named on the server and what kind of values it holds.

    Attributes:
        name: the Spark column name.
        ref: the server column's name in a statement (:func:`pushdown.column_name`);
            :mod:`compute_client.pushdown` quotes it.
        kind: ``string``, ``integer``, ``float``, ``decimal``, ``boolean`` or ``other`` (only
            NULL tests are pushed for ``other``).
    """

    name: str
    ref: str
    kind: str


def _is_binary_string(spark_type: DataType) -> bool:
    return isinstance(spark_type, StringType) and getattr(
        spark_type, "collation", "UTF8_BINARY"
    ) in ("UTF8_BINARY", None)


# (server Arrow type test, Spark type test, kind); the first match wins.
_KINDS: tuple[tuple[Callable[[pa.DataType], bool], Callable[[DataType], bool], str], ...] = (
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), _is_binary_string, "string"),
    (pa.types.is_integer, lambda s: isinstance(s, _INTEGER_SPARK), "integer"),
    (lambda t: pa.types.is_float64(t), lambda s: isinstance(s, DoubleType), "float"),
    (
        lambda t: pa.types.is_decimal(t) and t.precision <= MAX_EXACT_DECIMAL_PRECISION,
        lambda s: isinstance(s, DecimalType),
        "decimal",
    ),
    (pa.types.is_boolean, lambda s: isinstance(s, BooleanType), "boolean"),
)


def _kind(server_type: pa.DataType, spark_type: DataType) -> str:
    for server_test, spark_test, kind in _KINDS:
        if server_test(server_type) and spark_test(spark_type):
            return kind
    return "other"


def column_refs(server_schema: pa.Schema, spark_schema: StructType) -> dict[str, ColumnRef]:
    """Match the Spark columns to the server's columns by name (exact, then case-insensitive).

    Raises:
        ValueError: a Spark column the server does not have.
    """
    names = server_schema.names
    exact = {n: i for i, n in enumerate(names)}
    folded: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        folded.setdefault(n.lower(), []).append(i)
    refs: dict[str, ColumnRef] = {}
    for spark_field in spark_schema.fields:
        position = exact.get(spark_field.name)
        if position is None:
            candidates = folded.get(spark_field.name.lower(), [])
            if len(candidates) != 1:
                raise ValueError(
                    f"flight-select: column {spark_field.name!r} is not in the server's schema "
                    f"({', '.join(names)})"
                )
            position = candidates[0]
        refs[spark_field.name] = ColumnRef(
            spark_field.name,
            pushdown.column_name(names[position], position),
            _kind(server_schema.field(position).type, spark_field.dataType),
        )
    return refs


# ---------------------------------------------------------------------------- literals
# Which Python values compare exactly with each kind of column, as the value pushdown renders.
def _string_value(value: Any) -> str:
    if not isinstance(value, str):
        raise NotPushable("not a string literal")
    return value


def _integer_value(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotPushable("not an integer literal")
    return value


def _float_value(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NotPushable("not a float literal")
    return float(value)


def _decimal_value(value: Any) -> decimal.Decimal:
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise NotPushable("not a decimal literal")
    normal = value.normalize()
    if len(normal.as_tuple().digits) > MAX_EXACT_DECIMAL_PRECISION:
        raise NotPushable(f"decimal literal with more than {MAX_EXACT_DECIMAL_PRECISION} digits")
    return normal


def _boolean_value(value: Any) -> bool:
    if not isinstance(value, bool):
        raise NotPushable("not a boolean literal")
    return value


_VALUES: Mapping[str, Callable[[Any], Any]] = {
    "string": _string_value,
    "integer": _integer_value,
    "float": _float_value,
    "decimal": _decimal_value,
    "boolean": _boolean_value,
}


def _value(column: ColumnRef, value: Any) -> Any:
    """``value`` as the literal compared with ``column``, checked renderable now (so a refusal
    is raised while converting, never later while rendering the statement)."""
    check = _VALUES.get(column.kind)
    if check is None:
        raise NotPushable(f"no exact comparison for column {column.name!r}")
    checked = check(value)
    pushdown.literal(checked)
    return checked


# ---------------------------------------------------------------------------- filters
_Convert = Callable[[Any, Mapping[str, ColumnRef]], pushdown.Filter]


def _column(attribute: Sequence[str], columns: Mapping[str, ColumnRef]) -> ColumnRef:
    if len(attribute) != 1:
        raise NotPushable("nested column")
    column = columns.get(attribute[0])
    if column is None:
        raise NotPushable(f"unknown column {attribute[0]!r}")
    return column


_NEGATED_OP = {"=": "<>", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
# Float predicates the server answers like Spark whatever evaluates them: the server runs some
# comparisons in pyarrow (IEEE: NaN compares false, NaN <> x true) and others in DataFusion
# (NaN above everything), and rewrites NOT (a < b) as a >= b. With NaN above everything in
# Spark, only =, <>, < and <= agree on NaN under both; > and >= never reach the server.
_FLOAT_SAFE_OPS = frozenset({"=", "<>", "<", "<="})


def _comparison(op: str) -> _Convert:
    def convert_comparison(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
        return _compare(f, columns, op)

    return convert_comparison


def _compare(f: Any, columns: Mapping[str, ColumnRef], op: str) -> pushdown.Comparison:
    column = _column(f.attribute, columns)
    value = _value(column, f.value)
    if column.kind == "float" and op not in _FLOAT_SAFE_OPS:
        raise NotPushable(f"float {op} is NaN-sensitive on the server")
    return pushdown.Comparison(column.ref, op, value)


def _equal_null_safe(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
    column = _column(f.attribute, columns)
    if f.value is None:
        return pushdown.NullTest(column.ref, is_null=True)
    return pushdown.And((pushdown.NullTest(column.ref, is_null=False),
                         pushdown.Comparison(column.ref, "=", _value(column, f.value))))


def _in_values(f: Any, column: ColumnRef) -> tuple[Any, ...]:
    values = list(f.value)
    if not values or any(v is None for v in values):
        raise NotPushable("IN list that is empty or holds NULL")
    return tuple(_value(column, v) for v in values)


def _in(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
    column = _column(f.attribute, columns)
    values = _in_values(f, column)
    if column.kind == "float":
        # equality, not a hash lookup: -0.0 must match 0.0 as in Spark
        return pushdown.Or(tuple(pushdown.Comparison(column.ref, "=", v) for v in values))
    return pushdown.InList(column.ref, values)


def _negated_float(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter | None:
    """NOT over a float comparison, converted without NOT (see ``_FLOAT_SAFE_OPS``); None when
    ``f`` is not a comparison on a float column."""
    if len(getattr(f, "attribute", ())) != 1 or getattr(f, "value", None) is None:
        return None
    column = columns.get(f.attribute[0])
    if column is None or column.kind != "float":
        return None
    if isinstance(f, In):
        values = _in_values(f, column)
        return pushdown.And(tuple(pushdown.Comparison(column.ref, "<>", v) for v in values))
    if isinstance(f, EqualNullSafe):
        return pushdown.Or((pushdown.NullTest(column.ref, is_null=True),
                            pushdown.Comparison(column.ref, "<>", _value(column, f.value))))
    op = _COMPARISON_OPS.get(type(f))
    if op is None:
        return None
    return _compare(f, columns, _NEGATED_OP[op])


def _null_test(is_null: bool) -> _Convert:
    def convert_null(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
        return pushdown.NullTest(_column(f.attribute, columns).ref, is_null)

    return convert_null


def _match(kind: str) -> _Convert:
    def convert_match(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
        column = _column(f.attribute, columns)
        if column.kind != "string":
            raise NotPushable(f"string match on non-string column {column.name!r}")
        pushdown.literal(pushdown.like_pattern(kind, _string_value(f.value)))
        return pushdown.StringMatch(column.ref, kind, f.value)

    return convert_match


def _not(f: Any, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
    if isinstance(f.child, Not):  # NOT NOT x is x in three-valued logic
        return convert(f.child.child, columns)
    negated = _negated_float(f.child, columns)
    if negated is not None:
        return negated
    return pushdown.Not(convert(f.child, columns))


_COMPARISON_OPS: Mapping[type, str] = {
    EqualTo: "=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
}


_CONVERTERS: Mapping[type, _Convert] = {
    EqualTo: _comparison("="),
    EqualNullSafe: _equal_null_safe,
    LessThan: _comparison("<"),
    LessThanOrEqual: _comparison("<="),
    GreaterThan: _comparison(">"),
    GreaterThanOrEqual: _comparison(">="),
    In: _in,
    IsNull: _null_test(True),
    IsNotNull: _null_test(False),
    StringStartsWith: _match("starts"),
    StringEndsWith: _match("ends"),
    StringContains: _match("contains"),
    Not: _not,
}


def convert(f: Filter, columns: Mapping[str, ColumnRef]) -> pushdown.Filter:
    """One Spark filter as a pushdown filter that gives exactly Spark's result.

    Args:
        f: a filter Spark offered to ``pushFilters``.
        columns: :func:`column_refs` of the reader's schema.

    Raises:
        NotPushable: no rendering gives exactly Spark's result.
    """
    converter = _CONVERTERS.get(type(f))
    if converter is None:
        raise NotPushable(type(f).__name__)
    return converter(f, columns)


def render(f: Filter, columns: Mapping[str, ColumnRef]) -> str:
    """One Spark filter as the s3-select predicate the server is sent.

    Raises:
        NotPushable: no rendering gives exactly Spark's result.

    Example:
        >>> cols = {"s": ColumnRef("s", "s", "string")}
        >>> print(render(StringStartsWith(("s",), "50%"), cols))
        s3object."s" LIKE '50!%%' ESCAPE '!'
    """
    return pushdown.render_filter(convert(f, columns))


def convert_all(
    filters: Sequence[Filter], columns: Mapping[str, ColumnRef]
) -> tuple[list[pushdown.Filter], list[Filter]]:
    """Split ``filters`` into converted filters and the filters Spark must keep."""
    pushed: list[pushdown.Filter] = []
    rest: list[Filter] = []
    for f in filters:
        try:
            pushed.append(convert(f, columns))
        except NotPushable:
            rest.append(f)
    return pushed, rest
