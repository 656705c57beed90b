"""Aggregates that DataFusion would name alike get names of their own.

DataFusion names ``CAST(x AS T)`` after ``x`` alone (and ``count(*)`` after ``count(1)``), and
an aggregation may not compute two different expressions of one name: ``SELECT
min(CAST(t AS BIGINT)), min(t)`` or ``count(CAST(1 AS VARCHAR)), count(*)`` fail with "Schema
contains duplicate unqualified field name". The output aliases (``c0``, ``c1``, …) come too late
to help: the names clash inside the aggregation. :func:`separate_aggregate_names` finds the
aggregate calls whose DataFusion names would clash and writes the casts inside the later ones
as ``arrow_cast`` (the same cast kernel, named with its type). Queries without a clash are left
exactly as they are.

Hand-written: the rule is DataFusion's naming, which no library exposes before planning.
"""

from __future__ import annotations

import re
from typing import Final

from sqlglot import exp

from select_dialect.datafusion import to_sql
from select_dialect.sql_nodes import fn, lit_str

_AGGREGATES: Final = frozenset({"count", "sum", "avg", "min", "max"})
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
# The Arrow type DataFusion's CAST gives for each SQL type the lowering casts to (DataFusion
# 55 reads VARCHAR as a string view).
_ARROW_TYPES: Final[dict[str, str]] = {
    "BIGINT": "Int64",
    "DOUBLE": "Float64",
    "BOOLEAN": "Boolean",
    "TIMESTAMP": "Timestamp(ns)",
    "VARCHAR": "Utf8View",
}


def separate_aggregate_names(query: exp.Expression) -> None:
    """Rewrite, in place, the casts inside the aggregate calls of ``query`` whose DataFusion
    name a different aggregate call has too.

    Example:
        >>> q = exp.select(fn("min", exp.cast(exp.column("t"), "BIGINT")), fn("min",
        ...                exp.column("t")))
        >>> separate_aggregate_names(q)
        >>> to_sql(q)
        'SELECT min(arrow_cast("t", \\'Int64\\')), min("t")'
    """
    by_name: dict[str, list[exp.Expression]] = {}
    for call in query.find_all(exp.Anonymous):
        if call.this in _AGGREGATES:
            by_name.setdefault(_datafusion_name(call), []).append(call)
    for calls in by_name.values():
        if len({to_sql(call) for call in calls}) > 1:
            for clashing in calls:  # the casts get their types into the names
                _name_casts(clashing)


def _datafusion_name(call: exp.Expression) -> str:
    """The name DataFusion gives ``call``: its SQL with every CAST reduced to its operand."""

    def unwrap(node: exp.Expression) -> exp.Expression:
        if type(node) is exp.Cast:
            operand: exp.Expression = node.this
            return operand
        if isinstance(node, exp.Star):
            return exp.Literal.number(1)
        return node

    return to_sql(call.copy().transform(unwrap))


def _name_casts(call: exp.Expression) -> None:
    for cast in list(call.find_all(exp.Cast)):
        if type(cast) is not exp.Cast:
            continue  # TRY_CAST is named with its type already
        arrow = _arrow_type(cast.to.sql().upper())
        if arrow is not None:
            cast.replace(fn("arrow_cast", cast.this, lit_str(arrow)))


def _arrow_type(sql_type: str) -> str | None:
    decimal = _DECIMAL.fullmatch(sql_type)
    if decimal is not None:
        return f"Decimal128({decimal.group(1)}, {decimal.group(2)})"
    return _ARROW_TYPES.get(sql_type)
