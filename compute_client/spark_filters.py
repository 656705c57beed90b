"""Pure: Spark data-source filters -> s3-select predicates that give exactly Spark's answer.

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
(an error, where Spark answers) for values outside 1677-2262. Every rendered predicate is fully
parenthesised because the s3-select parser binds ``a = false AND b`` as ``a = (false AND b)``.
"""

from __future__ import annotations

import decimal
import math
import re
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

from compute_client.pushdown import MAX_EXACT_DECIMAL_PRECISION, RESERVED_WORDS, NotPushable

__all__ = ["ColumnRef", "NotPushable", "column_refs", "render", "render_all"]

_PLAIN = re.compile(r"[a-z][a-z0-9_]*")
# Words the s3-select grammar reads as keywords or functions; such columns go by position.
_RESERVED = frozenset(
    "all and as asc avg between bool by case cast coalesce count date day desc distinct else "
    "end escape exists extract false float from group having hour ilike in int integer is like "
    "limit lower max min minute month not null nullif or order second select string substring "
    "sum then timestamp to_string to_timestamp trim true upper utcnow when where year "
    "timezone_hour timezone_minute char_length character_length date_add date_diff".split()
) | RESERVED_WORDS  # the parser's keywords, measured and pinned by pushdown.py's tests
_LIKE_ESCAPE = "!"
_LIKE_SPECIAL = frozenset("%_[]" + _LIKE_ESCAPE)
_MAX_DECIMAL_DIGITS = MAX_EXACT_DECIMAL_PRECISION
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ColumnRef:
    """How a Spark column is named on the server and what kind of values it holds.

    Attributes:
        name: the Spark column name.
        ref: the s3-select reference (a bare name, or ``_N`` by position).
        kind: ``string``, ``integer``, ``float``, ``decimal``, ``boolean`` or ``other`` (only
            NULL tests are pushed for ``other``).
    """

    name: str
    ref: str
    kind: str


_INTEGER_SPARK = (ByteType, ShortType, IntegerType, LongType)


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
        lambda t: pa.types.is_decimal(t) and t.precision <= _MAX_DECIMAL_DIGITS,
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


def reference(name: str, position: int, all_names: Sequence[str]) -> str:
    """The s3-select reference of a server column: its bare name when that is unambiguous,
    else ``_N`` (1-based position), which CSV and Parquet objects both accept."""
    lowered = name.lower()
    unique = sum(1 for n in all_names if n.lower() == lowered) == 1
    if name == lowered and _PLAIN.fullmatch(name) and unique and lowered not in _RESERVED:
        return name
    return f"_{position + 1}"


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
            reference(names[position], position, names),
            _kind(server_schema.field(position).type, spark_field.dataType),
        )
    return refs


# ---------------------------------------------------------------------------- literals
def _string_literal(value: Any) -> str:
    if not isinstance(value, str) or "\x00" in value:
        raise NotPushable("not a string literal")
    return "'" + value.replace("'", "''") + "'"


def _integer_literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotPushable("not an integer literal")
    if not _INT64_MIN < value <= _INT64_MAX:
        raise NotPushable("integer literal out of range")
    return str(value)


def _float_literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NotPushable("not a float literal")
    value = float(value)
    if not math.isfinite(value):
        raise NotPushable("non-finite float literal")
    return repr(value)


def _decimal_literal(value: Any) -> str:
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        raise NotPushable("not a decimal literal")
    normal = value.normalize()
    if len(normal.as_tuple().digits) > _MAX_DECIMAL_DIGITS:
        raise NotPushable("decimal literal with more than 15 digits")
    return format(normal, "f")


def _boolean_literal(value: Any) -> str:
    if not isinstance(value, bool):
        raise NotPushable("not a boolean literal")
    return "true" if value else "false"


_LITERALS: Mapping[str, Callable[[Any], str]] = {
    "string": _string_literal,
    "integer": _integer_literal,
    "float": _float_literal,
    "decimal": _decimal_literal,
    "boolean": _boolean_literal,
}


def _literal(column: ColumnRef, value: Any) -> str:
    render_value = _LITERALS.get(column.kind)
    if render_value is None:
        raise NotPushable(f"no exact comparison for column {column.name!r}")
    return render_value(value)


# ---------------------------------------------------------------------------- filters
_Render = Callable[[Any, Mapping[str, ColumnRef]], str]


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


def _comparison(op: str) -> _Render:
    def render_comparison(f: Any, columns: Mapping[str, ColumnRef]) -> str:
        return _render_comparison(f, columns, op)

    return render_comparison


def _render_comparison(f: Any, columns: Mapping[str, ColumnRef], op: str) -> str:
    column = _column(f.attribute, columns)
    literal = _literal(column, f.value)
    if column.kind == "float" and op not in _FLOAT_SAFE_OPS:
        raise NotPushable(f"float {op} is NaN-sensitive on the server")
    return f"({column.ref} {op} {literal})"


def _equal_null_safe(f: Any, columns: Mapping[str, ColumnRef]) -> str:
    column = _column(f.attribute, columns)
    if f.value is None:
        return f"({column.ref} IS NULL)"
    return f"(({column.ref} IS NOT NULL) AND ({column.ref} = {_literal(column, f.value)}))"


def _in(f: Any, columns: Mapping[str, ColumnRef]) -> str:
    column = _column(f.attribute, columns)
    values = list(f.value)
    if not values or any(v is None for v in values):
        raise NotPushable("IN list that is empty or holds NULL")
    literals = [_literal(column, v) for v in values]
    if column.kind == "float":
        # equality, not a hash lookup: -0.0 must match 0.0 as in Spark
        return "(" + " OR ".join(f"({column.ref} = {lit})" for lit in literals) + ")"
    return f"({column.ref} IN ({', '.join(literals)}))"


def _negated_float(f: Any, columns: Mapping[str, ColumnRef]) -> str | None:
    """NOT over a float comparison, rendered without NOT (see ``_FLOAT_SAFE_OPS``); None when
    ``f`` is not a comparison on a float column."""
    if len(getattr(f, "attribute", ())) != 1 or getattr(f, "value", None) is None:
        return None
    column = columns.get(f.attribute[0])
    if column is None or column.kind != "float":
        return None
    if isinstance(f, In):
        literals = [_literal(column, v) for v in f.value if v is not None]
        if not literals or len(literals) != len(f.value):
            raise NotPushable("IN list that is empty or holds NULL")
        return "(" + " AND ".join(f"({column.ref} <> {lit})" for lit in literals) + ")"
    if isinstance(f, EqualNullSafe):
        return f"(({column.ref} IS NULL) OR ({column.ref} <> {_literal(column, f.value)}))"
    op = _COMPARISON_OPS.get(type(f))
    if op is None:
        return None
    return _render_comparison(f, columns, _NEGATED_OP[op])


def _null_test(negated: bool) -> _Render:
    def render_null(f: Any, columns: Mapping[str, ColumnRef]) -> str:
        column = _column(f.attribute, columns)
        return f"({column.ref} IS {'NOT ' if negated else ''}NULL)"

    return render_null


def like_pattern(kind: str, value: str) -> str:
    """A LIKE pattern (escape ``!``) matching strings that start with, end with or contain
    ``value`` literally."""
    escaped = "".join(_LIKE_ESCAPE + c if c in _LIKE_SPECIAL else c for c in value)
    return {"starts": f"{escaped}%", "ends": f"%{escaped}", "contains": f"%{escaped}%"}[kind]


def _match(kind: str) -> _Render:
    def render_match(f: Any, columns: Mapping[str, ColumnRef]) -> str:
        column = _column(f.attribute, columns)
        if column.kind != "string":
            raise NotPushable(f"string match on non-string column {column.name!r}")
        pattern = _string_literal(like_pattern(kind, f.value))
        return f"({column.ref} LIKE {pattern} ESCAPE '{_LIKE_ESCAPE}')"

    return render_match


def _not(f: Any, columns: Mapping[str, ColumnRef]) -> str:
    if isinstance(f.child, Not):  # NOT NOT x is x in three-valued logic
        return render(f.child.child, columns)
    negated = _negated_float(f.child, columns)
    if negated is not None:
        return negated
    return f"(NOT {render(f.child, columns)})"


_COMPARISON_OPS: Mapping[type, str] = {
    EqualTo: "=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
}


_RENDERERS: Mapping[type, _Render] = {
    EqualTo: _comparison("="),
    EqualNullSafe: _equal_null_safe,
    LessThan: _comparison("<"),
    LessThanOrEqual: _comparison("<="),
    GreaterThan: _comparison(">"),
    GreaterThanOrEqual: _comparison(">="),
    In: _in,
    IsNull: _null_test(False),
    IsNotNull: _null_test(True),
    StringStartsWith: _match("starts"),
    StringEndsWith: _match("ends"),
    StringContains: _match("contains"),
    Not: _not,
}


def render(f: Filter, columns: Mapping[str, ColumnRef]) -> str:
    """Render one Spark filter as an exact s3-select predicate.

    Args:
        f: a filter Spark offered to ``pushFilters``.
        columns: :func:`column_refs` of the reader's schema.

    Raises:
        NotPushable: no rendering gives exactly Spark's result.

    Example:
        >>> cols = {"s": ColumnRef("s", "s", "string")}
        >>> render(StringStartsWith(("s",), "50%"), cols)
        "(s LIKE '50!%%' ESCAPE '!')"
    """
    renderer = _RENDERERS.get(type(f))
    if renderer is None:
        raise NotPushable(type(f).__name__)
    return renderer(f, columns)


def render_all(
    filters: Sequence[Filter], columns: Mapping[str, ColumnRef]
) -> tuple[list[str], list[Filter]]:
    """Split ``filters`` into rendered predicates and the filters Spark must keep."""
    pushed: list[str] = []
    rest: list[Filter] = []
    for f in filters:
        try:
            pushed.append(render(f, columns))
        except NotPushable:
            rest.append(f)
    return pushed, rest
