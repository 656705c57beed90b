"""Pure: (table, columns, filters, limit) -> the s3-select statement sent to the server.

Filters arrive as a small neutral tree (:class:`Comparison`, :class:`InList`, :class:`NullTest`,
:class:`StringMatch`, :class:`Not`, :class:`And`, :class:`Or`) so the DataFusion and Spark
front ends share one renderer. Only what renders exactly is pushed; callers keep the rest.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_LIKE_ESCAPE = "!"


class NotPushable(ValueError):
    """A filter or value that has no exact s3-select rendering."""


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class NullTest:
    column: str
    is_null: bool


@dataclass(frozen=True)
class StringMatch:
    column: str
    kind: str  # "starts" | "ends" | "contains"
    value: str


@dataclass(frozen=True)
class Not:
    child: Filter


@dataclass(frozen=True)
class And:
    children: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Filter, ...]


Filter = Union[Comparison, InList, NullTest, StringMatch, Not, And, Or]


def quote_identifier(name: str) -> str:
    """An identifier as s3-select reads it (plain names stay bare)."""
    if _PLAIN_IDENTIFIER.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_table(bucket: str, key: str) -> str:
    """``"bucket"."key"`` for the FROM clause."""
    return '"' + bucket.replace('"', '""') + '"."' + key.replace('"', '""') + '"'


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _timestamp(value: dt.datetime) -> str:
    if value.tzinfo is None:
        raise NotPushable("timestamp without a zone")
    return f"to_timestamp({_string(value.isoformat())})"


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        raise NotPushable("non-finite float")
    return repr(value)


_LITERALS: tuple[tuple[type, Callable[[Any], str]], ...] = (
    (bool, lambda v: "true" if v else "false"),
    (int, str),
    (float, _float),
    (decimal.Decimal, str),
    (str, _string),
    (dt.datetime, _timestamp),
)


def literal(value: Any) -> str:
    """Render a Python value as an s3-select literal, or raise :class:`NotPushable`."""
    for kind, render in _LITERALS:
        if isinstance(value, kind):
            return render(value)
    raise NotPushable(f"no literal for {type(value).__name__}")


def _like_pattern(kind: str, value: str) -> str:
    escaped = "".join(_LIKE_ESCAPE + ch if ch in "%_[]" + _LIKE_ESCAPE else ch for ch in value)
    return {"starts": f"{escaped}%", "ends": f"%{escaped}", "contains": f"%{escaped}%"}[kind]


def render_filter(node: Filter) -> str:
    """Render one filter as an s3-select predicate, or raise :class:`NotPushable`."""
    return _RENDERERS[type(node)](node)


def _render_comparison(node: Comparison) -> str:
    if node.op not in _OPERATORS:
        raise NotPushable(f"operator {node.op}")
    if node.value is None:
        raise NotPushable("comparison with NULL")
    return f"{quote_identifier(node.column)} {_OPERATORS[node.op]} {literal(node.value)}"


def _render_in(node: InList) -> str:
    values = [v for v in node.values if v is not None]
    if not values:
        raise NotPushable("IN without non-null values")
    if len(values) != len(node.values):
        raise NotPushable("IN list with NULL")
    return f"{quote_identifier(node.column)} IN ({', '.join(literal(v) for v in values)})"


def _render_null(node: NullTest) -> str:
    return f"{quote_identifier(node.column)} IS {'' if node.is_null else 'NOT '}NULL"


def _render_match(node: StringMatch) -> str:
    pattern = _like_pattern(node.kind, node.value)
    return f"{quote_identifier(node.column)} LIKE {_string(pattern)} ESCAPE '{_LIKE_ESCAPE}'"


def _render_not(node: Not) -> str:
    return f"NOT ({render_filter(node.child)})"


def _render_and(node: And) -> str:
    return "(" + " AND ".join(render_filter(c) for c in node.children) + ")"


def _render_or(node: Or) -> str:
    return "(" + " OR ".join(render_filter(c) for c in node.children) + ")"


_RENDERERS: dict[type, Callable[[Any], str]] = {
    Comparison: _render_comparison,
    InList: _render_in,
    NullTest: _render_null,
    StringMatch: _render_match,
    Not: _render_not,
    And: _render_and,
    Or: _render_or,
}


def build_query(
    bucket: str,
    key: str,
    columns: Sequence[str] | None,
    filters: Sequence[Filter] = (),
    limit: int | None = None,
) -> str:
    """The statement that reads ``columns`` of an object where every filter holds.

    Example:
        >>> build_query("sales", "a.csv", ["_1"], [Comparison("_2", "=", "x")], 5)
        'SELECT _1 FROM "sales"."a.csv" WHERE _2 = \\'x\\' LIMIT 5'
    """
    projection = ", ".join(quote_identifier(c) for c in columns) if columns else "*"
    sql = f"SELECT {projection} FROM {quote_table(bucket, key)}"
    if filters:
        sql += " WHERE " + " AND ".join(render_filter(f) for f in filters)
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql
