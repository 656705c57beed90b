"""Pure: (table, columns, filters, limit) -> the s3-select statement sent to the server.

Filters arrive as a small neutral tree (:class:`Comparison`, :class:`InList`, :class:`NullTest`,
:class:`StringMatch`, :class:`Not`, :class:`And`, :class:`Or`) so the DataFusion and Spark
front ends share one renderer: every statement either client sends is written here (column
names, literals, LIKE patterns, the clauses). Only what renders exactly is pushed; callers keep
the rest.

A column is named by a plain string (rendered by :func:`quote_identifier`:
``s3object."name"``, bare only for a positional ``_N``), or by a :class:`Field` when the
server must convert it before comparing (``Field("l_quantity", "INT")`` renders
``CAST(s3object."l_quantity" AS INT)``: a CSV field the client reads as an integer). A :class:`Comparison` whose value is a :class:`Field`
compares two columns. Deciding *whether* a comparison means on the server what it means on the
client is the caller's job (it knows the column types); this module only renders.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flight_storage.protocol import literals
from flight_storage.protocol.literals import string_literal as _string_literal

# Filters on decimals wider than this stay on the client (DataFusion and Spark alike). The
# server reads decimals as decimals and compares them with number literals exactly, but a
# literal whose scale is larger than the column's meets it in DataFusion's common decimal
# type, which is capped at 38 digits, and a wide value then overflows the cast (a strict xfail
# in tests/select_dialect/test_decimal_kind.py); up to 15 digits no common type reaches it.
MAX_EXACT_DECIMAL_PRECISION = 15

_OPERATORS = {"=": "=", "!=": "!=", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_LIKE_ESCAPE = "!"
_POSITIONAL = re.compile(r"_[0-9]+")


class NotPushable(ValueError):
    """A filter or value that has no exact s3-select rendering."""


_CAST_TYPES = frozenset({"INT", "INTEGER", "FLOAT", "DECIMAL", "STRING", "BOOL", "TIMESTAMP"})


@dataclass(frozen=True)
class Field:
    """A column reference, optionally converted on the server (``CAST(name AS cast)``)."""

    name: str
    cast: str | None = None


@dataclass(frozen=True)
class Comparison:
    """``column op value``; ``value`` is a literal or another column (:class:`Field`)."""

    column: str | Field
    op: str
    value: Any


@dataclass(frozen=True)
class InList:
    """``column IN (values...)``."""

    column: str | Field
    values: tuple[Any, ...]


@dataclass(frozen=True)
class NullTest:
    column: str | Field
    is_null: bool


@dataclass(frozen=True)
class StringMatch:
    column: str | Field
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


Filter = Comparison | InList | NullTest | StringMatch | Not | And | Or


def quote_identifier(name: str) -> str:
    """A column reference as s3-select reads it: a quoted step under the row.

    ``s3object."order region"`` names exactly that column in every flavour (CSV header,
    Parquet column or JSON key): the server's own spelling, quoted, cannot be taken for a
    keyword, for Ceph's string literal (a bare ``"x"``), or for several columns under AWS's
    rule that an unquoted name matching names which differ only in case is an
    ``AmbiguousFieldName``. A positional name ``_N`` stays bare: it is the N-th field of a CSV
    object however it is written, so callers must not use it for a column named ``_N``
    elsewhere (:func:`column_name`).

    Example:
        >>> quote_identifier("region"), quote_identifier("order region"), quote_identifier("_2")
        ('s3object."region"', 's3object."order region"', '_2')
    """
    if _POSITIONAL.fullmatch(name):
        return name
    return 's3object."' + name.replace('"', '""') + '"'


def column_name(name: str, position: int) -> str:
    """The name a statement gives the server column ``name`` at 0-based ``position``: the name
    itself, except that a name which looks positional (``_1``) is read by the server as the
    N-th field, so it goes by its own position instead (``_8`` for a column ``_1`` at 7).

    Example:
        >>> column_name("unit price", 3), column_name("_1", 7)
        ('unit price', '_8')
    """
    return f"_{position + 1}" if _POSITIONAL.fullmatch(name) else name


def render_column(column: str | Field) -> str:
    """A column operand: the quoted name, wrapped in ``CAST`` when the field asks for one."""
    if isinstance(column, str):
        return quote_identifier(column)
    if column.cast is None:
        return quote_identifier(column.name)
    if column.cast.upper() not in _CAST_TYPES:
        raise NotPushable(f"cast to {column.cast}")
    return f"CAST({quote_identifier(column.name)} AS {column.cast.upper()})"


def quote_table(bucket: str, key: str) -> str:
    """``"bucket"."key"`` for the FROM clause."""
    return '"' + bucket.replace('"', '""') + '"."' + key.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """Render a Python value as an s3-select literal (the renderer the server binds
    parameters with, :mod:`flight_storage.protocol.literals`), or raise :class:`NotPushable`."""
    if value is None:
        raise NotPushable("NULL")
    try:
        return literals.sql_literal(value)
    except literals.LiteralError as exc:
        raise NotPushable(str(exc)) from None


def like_pattern(kind: str, value: str) -> str:
    """A LIKE pattern (escape ``!``) matching text that starts with, ends with or contains
    ``value`` literally: every wildcard is escaped.

    Example:
        >>> like_pattern("contains", "5%_[!]")
        '%5!%!_![!!!]%'
    """
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
    right = render_column(node.value) if isinstance(node.value, Field) else literal(node.value)
    return f"{render_column(node.column)} {_OPERATORS[node.op]} {right}"


def _render_in(node: InList) -> str:
    values = [v for v in node.values if v is not None]
    if not values:
        raise NotPushable("IN without non-null values")
    if len(values) != len(node.values):
        raise NotPushable("IN list with NULL")
    return f"{render_column(node.column)} IN ({', '.join(literal(v) for v in values)})"


def _render_null(node: NullTest) -> str:
    return f"{render_column(node.column)} IS {'' if node.is_null else 'NOT '}NULL"


def _render_match(node: StringMatch) -> str:
    pattern = like_pattern(node.kind, node.value)
    return f"{render_column(node.column)} LIKE {_string_literal(pattern)} ESCAPE '{_LIKE_ESCAPE}'"


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

    ``key`` may also name a prefix (``orders/``) once the server serves prefixes as tables.

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


def build_grouped_query(bucket: str, key: str, group_by: Sequence[str], aggregates: str) -> str:
    """The standard-flavour statement that groups an object by ``group_by`` on the server.

    ``aggregates`` is SQL text the server parses (``count(*) AS n, sum(CAST(q AS INT)) AS s``);
    with no ``group_by`` it is one aggregate row over the whole object.

    Example:
        >>> print(build_grouped_query("sales", "a.csv", ["region"], "count(*) AS n"))
        SELECT s3object."region", count(*) AS n FROM "sales"."a.csv" GROUP BY s3object."region"
    """
    groups = ", ".join(quote_identifier(c) for c in group_by)
    items = ", ".join(part for part in (groups, aggregates.strip()) if part)
    if not items:
        raise ValueError("a grouped query needs group_by columns or aggregates")
    sql = f"SELECT {items} FROM {quote_table(bucket, key)}"
    return sql + f" GROUP BY {groups}" if groups else sql
