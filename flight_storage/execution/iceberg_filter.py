"""An Iceberg table's row filter from a statement's WHERE, exactly or not at all.

DataFusion optimizes the translated statement over an empty table of the snapshot's schema; the
filter it leaves directly above the table scan (constants folded, casts of literals unwrapped)
is converted conjunct by conjunct into a pyiceberg expression, which ``plan_files`` uses to
prune files (``iceberg_scan.py``). A conversion must never keep fewer rows than the SQL: a
column compared with a literal of its own type (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``),
``IN``, ``IS [NOT] NULL``, ``LIKE 'prefix%'``, a date or microsecond timestamp widened to
nanoseconds and compared with a time (the bound rounded the exact way), and ``AND``, ``OR``,
``NOT`` of those; a conjunct that does not convert is left out (a superset), ``NOT`` only of an
exact conversion, floats only as float64 (a float32 bound would round), NaN never.

Hand-written: no library turns DataFusion's expressions into pyiceberg's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.plan_types import TABLE, SelectPlan
from flight_storage.execution.session import READ_ONLY, new_session


def iceberg_row_filter(engine: SelectEngine, plan: SelectPlan) -> Any:
    """The Iceberg row filter of the plan's WHERE (None: nothing converts exactly).

    DataFusion optimizes the translated statement over an empty table of the plan's schema;
    the filter it leaves directly above the table scan (its predicate already simplified,
    casts of literals unwrapped) is converted conjunct by conjunct."""
    ctx = new_session(engine.config, plan.translation, partitions=1)
    empty = pa.RecordBatch.from_pylist([], schema=plan.input_schema)
    ctx.register_record_batches(TABLE, [[empty]])
    try:
        logical = ctx.sql_with_options(plan.translation.sql, READ_ONLY).optimized_logical_plan()
    except Exception:  # DataFusion raises plain exceptions; execution reports them
        return None
    predicate = _scan_filter(logical)
    if predicate is None:
        return None
    schema = plan.input_schema
    converted = [c for c in (_convert(e, schema) for e in _conjuncts(predicate)) if c is not None]
    return functools.reduce(_expressions().And, converted) if converted else None


def _scan_filter(node: Any) -> Any:
    """The predicate of a Filter whose input is the table scan, anywhere in the plan."""
    variant = node.to_variant()
    inputs = node.inputs()
    if type(variant).__name__ == "Filter" and len(inputs) == 1 \
            and type(inputs[0].to_variant()).__name__ == "TableScan":
        return variant.predicate()
    for child in inputs:
        found = _scan_filter(child)
        if found is not None:
            return found
    return None


def _kind(expr: Any) -> str:
    return str(expr.variant_name())


def _conjuncts(expr: Any) -> list[Any]:
    variant = expr.to_variant()
    if _kind(expr) == "BinaryExpr" and variant.op() == "AND":
        return _conjuncts(variant.left()) + _conjuncts(variant.right())
    return [expr]


_COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _convert(expr: Any, schema: pa.Schema) -> Any:
    """One DataFusion expression as an equivalent Iceberg expression, or None."""
    kind = _kind(expr)
    converter = _CONVERTERS.get(kind)
    return converter(expr.to_variant(), schema) if converter is not None else None


def _binary(variant: Any, schema: pa.Schema) -> Any:
    e = _expressions()
    op = variant.op()
    if op in ("AND", "OR"):
        left, right = _convert(variant.left(), schema), _convert(variant.right(), schema)
        if op == "AND":  # a conjunct that does not convert is left out: still a superset
            if left is None or right is None:
                return left if right is None else right
            return e.And(left, right)
        return e.Or(left, right) if left is not None and right is not None else None
    if op not in _COMPARISONS:
        return None
    left, right = variant.left(), variant.right()
    if _literal(left) is not None:
        left, right, op = right, left, _FLIPPED[op]
    value = _literal(right)
    if value is None:
        return None
    widened = _widened(left, schema)
    if widened is not None:
        return _widened_comparison(op, widened[0], widened[1], value)
    column = _column(left, schema)
    if column is None:
        return None
    converted = _value(schema.field(column).type, value)
    if converted is None:
        return None
    return _comparison(op)(column, converted)


def _expressions() -> Any:
    """pyiceberg's expression classes (untyped here: their pydantic signatures take terms,
    and a column name is what they are given)."""
    import pyiceberg.expressions

    return pyiceberg.expressions


_DAY_NS = 86_400_000_000_000


def _widened(expr: Any, schema: pa.Schema) -> tuple[str, int] | None:
    """``CAST(column AS Timestamp(ns))`` of a date or microsecond-timestamp column (how the
    s3-select lowering compares them with times): the column and its unit in nanoseconds."""
    if _kind(expr) != "Cast":
        return None
    column = _column(expr.to_variant().expr(), schema)
    if column is None:
        return None
    column_type = schema.field(column).type
    if pa.types.is_date32(column_type):
        return column, _DAY_NS
    if pa.types.is_timestamp(column_type) and column_type.unit == "us" and not column_type.tz:
        return column, 1000
    return None


def _widened_comparison(op: str, column: str, unit_ns: int, value: pa.Scalar) -> Any:
    """``CAST(column) op value`` in the column's own unit, exactly: the cast multiplies by
    ``unit_ns``, so ``>=`` and ``<`` round the bound up, ``>`` and ``<=`` down, and ``=``
    holds only for a whole number of units."""
    if not (pa.types.is_timestamp(value.type) and value.type.unit == "ns" and not value.type.tz):
        return None
    ns = int(value.cast(pa.int64()).as_py())
    floor, remainder = divmod(ns, unit_ns)
    ceiling = floor + (1 if remainder else 0)
    bound = {">=": ceiling, "<": ceiling, ">": floor, "<=": floor}.get(op)
    if bound is None:
        if remainder:  # = or != a value between two units: nothing (everything) matches
            return None
        bound = floor
    return _comparison(op)(column, bound)


def _comparison(op: str) -> Callable[[str, Any], Any]:
    e = _expressions()
    # pyiceberg's comparison classes are built as Class(term, literal).
    by_op: dict[str, Callable[[str, Any], Any]] = {
        "=": e.EqualTo, "!=": e.NotEqualTo, "<": e.LessThan, "<=": e.LessThanOrEqual,
        ">": e.GreaterThan, ">=": e.GreaterThanOrEqual}
    return by_op[op]


def _in_list(variant: Any, schema: pa.Schema) -> Any:
    e = _expressions()
    column = _column(variant.expr(), schema)
    if column is None:
        return None
    values = []
    for item in variant.list():
        scalar = _literal(item)
        converted = _value(schema.field(column).type, scalar) if scalar is not None else None
        if converted is None:
            return None
        values.append(converted)
    return (e.NotIn if variant.negated() else e.In)(column, values)


def _null_test(negated: bool) -> Callable[[Any, pa.Schema], Any]:
    def convert(variant: Any, schema: pa.Schema) -> Any:
        e = _expressions()
        column = _column(variant.expr(), schema)
        if column is None:
            return None
        return (e.NotNull if negated else e.IsNull)(column)

    return convert


def _not(variant: Any, schema: pa.Schema) -> Any:
    inner = _convert(variant.expr(), schema)
    # NOT of a superset is not a superset: only an exact inner conversion may be negated, and
    # every conversion here is exact except an AND that dropped a conjunct
    if inner is None or not _exact(variant.expr(), schema):
        return None
    return _expressions().Not(inner)


def _exact(expr: Any, schema: pa.Schema) -> bool:
    """True when every part of ``expr`` converts (no conjunct was left out)."""
    if _kind(expr) == "BinaryExpr" and expr.to_variant().op() in ("AND", "OR"):
        variant = expr.to_variant()
        return _exact(variant.left(), schema) and _exact(variant.right(), schema)
    return _convert(expr, schema) is not None


def _like(variant: Any, schema: pa.Schema) -> Any:
    """``col LIKE 'prefix%'`` (no other wildcard, no escape) is StartsWith."""
    if variant.negated() or variant.escape_char() is not None:
        return None
    column = _column(variant.expr(), schema)
    pattern = _literal(variant.pattern())
    if column is None or pattern is None or not pa.types.is_string(schema.field(column).type):
        return None
    text = pattern.as_py()
    if not isinstance(text, str) or not text.endswith("%"):
        return None
    prefix = text[:-1]
    if any(ch in prefix for ch in "%_\\") or not prefix:
        return None
    return _expressions().StartsWith(column, prefix)


_CONVERTERS: dict[str, Callable[[Any, pa.Schema], Any]] = {
    "BinaryExpr": _binary,
    "InList": _in_list,
    "IsNull": _null_test(False),
    "IsNotNull": _null_test(True),
    "Not": _not,
    "Like": _like,
}


def _column(expr: Any, schema: pa.Schema) -> str | None:
    """The column ``expr`` is, when it is a bare column of the table."""
    if _kind(expr) != "Column":
        return None
    name = str(expr.to_variant().name())
    return name if schema.get_field_index(name) >= 0 else None


def _literal(expr: Any) -> pa.Scalar | None:
    if _kind(expr) != "Literal":
        return None
    try:
        value = expr.python_value()
    except Exception:  # a literal datafusion-python cannot hand over
        return None
    return value if isinstance(value, pa.Scalar) and value.is_valid else None


def _value(column_type: pa.DataType, scalar: pa.Scalar) -> Any:
    """The literal for an Iceberg predicate on a column of ``column_type``, or None when the
    comparison would not mean the same there (another type, a unit or zone that differs)."""
    literal_type = scalar.type
    if pa.types.is_integer(column_type) and pa.types.is_integer(literal_type):
        return int(scalar.as_py())
    if pa.types.is_string(column_type) and (pa.types.is_string(literal_type)
                                            or pa.types.is_large_string(literal_type)
                                            or pa.types.is_string_view(literal_type)):
        return str(scalar.as_py())
    if column_type != literal_type:
        return None
    if pa.types.is_boolean(column_type):
        return bool(scalar.as_py())
    if pa.types.is_float64(column_type):
        value = scalar.as_py()
        return float(value) if value == value else None  # NaN: never pushed
    if pa.types.is_decimal(column_type):
        return Decimal(scalar.as_py())
    if pa.types.is_date32(column_type):
        return scalar.as_py()
    if pa.types.is_timestamp(column_type) and column_type.unit == "us":
        return int(scalar.cast(pa.int64()).as_py())
    return None
