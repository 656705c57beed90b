"""Exactness rules: which filters the server answers exactly as DataFusion would.

A conjunct is pushed only when its s3-select rendering, evaluated by the server on the values
it holds, gives for every row the answer DataFusion gives on the client's values. That depends
on how the server holds the column (its own Arrow type, or CSV text the client casts) and on
the client's declared type: :data:`_KINDS` is that table. Everything else stays local.
Hand-written because the rules are facts about our server's SQL dialect, which no library
knows; the same facts for Spark's filters live in :mod:`compute_client.spark_filters`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from compute_client import pushdown
from compute_client.datafusion_table.expressions import (
    Call,
    Field,
    IsIn,
    Literal,
    Node,
    Unparsed,
    and_all,
    conjuncts,
    disjuncts,
    parse_expression,
    python_value,
    rebuild,
)

log = logging.getLogger(__name__)

MAX_EXACT_DECIMAL_PRECISION = pushdown.MAX_EXACT_DECIMAL_PRECISION


_COMPARISON_SQL: dict[str, str] = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_MIRROR: dict[str, str] = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
}


@dataclass(frozen=True)
class ColumnKind:
    """How one column compares on the server so that the answer equals DataFusion's.

    Attributes:
        group: columns compare with each other only within one group and one Arrow type.
        cast: the server-side conversion (``CAST(c AS cast)``), for CSV text the client casts.
        value: turns a literal of the column's Arrow type into the Python value to render.
    """

    group: str
    cast: str | None = None
    value: Callable[[Any], Any] = lambda v: v


def _category(data_type: pa.DataType) -> str | None:
    for test, name in _CATEGORIES:
        if test(data_type):
            return name
    return None


_CATEGORIES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)
     or pa.types.is_string_view(t), "string"),
    (pa.types.is_integer, "int"),
    (pa.types.is_float64, "float"),
    (lambda t: pa.types.is_decimal(t) and t.precision <= MAX_EXACT_DECIMAL_PRECISION,
     "decimal"),
    (pa.types.is_date32, "date"),
    (pa.types.is_boolean, "bool"),
)

# (how the server holds the column, client category) -> kind. "native": the server has the
# column in the client's type; "text": the server has CSV text the client casts.
_KINDS: dict[tuple[str, str], ColumnKind] = {
    ("native", "string"): ColumnKind("string"),
    ("native", "int"): ColumnKind("int"),
    # Floats are not pushed: DataFusion orders NaN above every number, a pyarrow filter (the
    # server's Parquet scan) finds NaN > x false. Native dates are not pushed: the server
    # compares them as Timestamp(ns), which fails outside 1677..2262.
    ("native", "decimal"): ColumnKind("decimal"),
    ("native", "bool"): ColumnKind("bool"),
    ("text", "string"): ColumnKind("string"),
    ("text", "int"): ColumnKind("int", cast="INT"),
    # Text that cast to decimal(p, s) on the client parses to the double of that decimal.
    ("text", "decimal"): ColumnKind("decimal", cast="FLOAT"),
    # pyarrow casts only YYYY-MM-DD text to date32, so text order is date order.
    ("text", "date"): ColumnKind("text-date", value=lambda v: v.isoformat()),
}


_POSITIONAL = re.compile(r"_(\d+)")


def unreferable_columns(server: pa.Schema) -> frozenset[str]:
    """Server columns that no s3-select reference names in every object format.

    A name twice in the schema has no reference of its own. A name ``_N`` at another position
    than N is the N-th field in a CSV object but the column of that name in a Parquet object,
    quoted or not. Such columns are fetched with ``SELECT *`` and filtered locally.

    Example:
        >>> sorted(unreferable_columns(pa.schema([("_2", pa.string()), ("_2x", pa.string())])))
        ['_2']
    """
    seen: set[str] = set()
    out: set[str] = set()
    for position, name in enumerate(server.names):
        positional = _POSITIONAL.fullmatch(name)
        if name in seen or (positional is not None and int(positional.group(1)) != position + 1):
            out.add(name)
        seen.add(name)
    return frozenset(out)


def column_kinds(server: pa.Schema, client: pa.Schema) -> dict[str, ColumnKind]:
    """The pushable columns of a table: server schema as stored, client schema as declared."""
    kinds: dict[str, ColumnKind] = {}
    unreferable = unreferable_columns(server)
    for column in client:
        index = server.get_field_index(column.name)
        if index < 0 or column.name in unreferable:
            continue
        server_type = server.field(index).type
        category = _category(column.type)
        if category is None:
            continue
        if _category(server_type) == category and (
            category != "decimal" or server_type == column.type
        ):
            origin = "native"
        elif _category(server_type) == "string":
            origin = "text"
        else:
            continue
        kind = _KINDS.get((origin, category))
        if kind is not None:
            kinds[column.name] = kind
    return kinds


class _Pusher:
    """Turns proven conjuncts into :mod:`pushdown` filters when they mean the same there."""

    def __init__(self, kinds: Mapping[str, ColumnKind], schema: pa.Schema) -> None:
        self.kinds = kinds
        self.schema = schema
        # False below an odd number of NOTs. is_in answers false where SQL's IN answers NULL;
        # only where nothing negates the result do both drop the row alike.
        self.positive = True

    def filter(self, node: Node) -> pushdown.Filter:
        if isinstance(node, IsIn):
            return self._is_in(node)
        if not isinstance(node, Call):
            return self._bare(node)
        handler = self._HANDLERS.get(node.name)
        if handler is None:
            raise pushdown.NotPushable(node.name)
        return handler(self, node)

    def _is_in(self, node: IsIn) -> pushdown.Filter:
        if not self.positive:
            raise pushdown.NotPushable("is_in under NOT (NULL is false there, NULL in SQL)")
        kind = self._kind(node.column.name)
        column_type = self.schema.field(node.column.name).type
        values = [python_value(v, column_type) for v in node.values]
        if any(v is None for v in values):
            raise pushdown.NotPushable("IN list with NULL")
        return pushdown.InList(self._ref(node.column.name), tuple(kind.value(v) for v in values))

    def _kind(self, name: str) -> ColumnKind:
        kind = self.kinds.get(name)
        if kind is None:
            raise pushdown.NotPushable(f"column {name} has no exact server comparison")
        return kind

    def _ref(self, name: str) -> str | pushdown.Field:
        kind = self._kind(name)
        return pushdown.Field(name, kind.cast) if kind.cast else name

    def _bare(self, node: Node) -> pushdown.Filter:
        # A boolean column used as a predicate.
        if isinstance(node, Field) and self._kind(node.name).group == "bool":
            return pushdown.Comparison(node.name, "=", True)
        raise pushdown.NotPushable("not a predicate")

    def _comparison(self, node: Call) -> pushdown.Filter:
        left, right = node.args
        name = node.name
        if isinstance(left, Literal):
            left, right, name = right, left, _MIRROR[name]
        if not isinstance(left, Field):
            raise pushdown.NotPushable("comparison of expressions")
        kind = self._kind(left.name)
        op = _COMPARISON_SQL[name]
        if isinstance(right, Field):
            other = self._kind(right.name)
            same_type = self.schema.field(left.name).type == self.schema.field(right.name).type
            if other.group != kind.group or not same_type:
                raise pushdown.NotPushable("columns of different types")
            ref = self._ref(right.name)
            return pushdown.Comparison(self._ref(left.name), op,
                                       ref if isinstance(ref, pushdown.Field)
                                       else pushdown.Field(ref))
        assert isinstance(right, Literal)
        value = python_value(right, self.schema.field(left.name).type)
        if value is None:
            raise pushdown.NotPushable("comparison with NULL")
        return pushdown.Comparison(self._ref(left.name), op, kind.value(value))

    def _null(self, node: Call) -> pushdown.Filter:
        (arg,) = node.args
        if not isinstance(arg, Field):
            raise pushdown.NotPushable("null test of an expression")
        self._kind(arg.name)
        return pushdown.NullTest(arg.name, node.name == "is_null")

    def _not(self, node: Call) -> pushdown.Filter:
        self.positive = not self.positive
        try:
            return pushdown.Not(self.filter(node.args[0]))
        finally:
            self.positive = not self.positive

    def _and(self, node: Call) -> pushdown.Filter:
        return pushdown.And(tuple(self.filter(a) for a in node.args))

    def _or(self, node: Call) -> pushdown.Filter:
        children = tuple(self.filter(a) for a in disjuncts(node))
        return _as_in_list(children) or pushdown.Or(children)

    _HANDLERS: Mapping[str, Callable[[_Pusher, Call], pushdown.Filter]] = {
        **dict.fromkeys(_COMPARISON_SQL, _comparison),
        "is_null": _null,
        "is_valid": _null,
        "invert": _not,
        "and_kleene": _and,
        "or_kleene": _or,
    }


def _as_in_list(children: Sequence[pushdown.Filter]) -> pushdown.InList | None:
    """``a = 1 OR a = 2`` (how DataFusion hands over ``a IN (1, 2)``) as an IN list."""
    if len(children) < 2:
        return None
    first = children[0]
    if not all(isinstance(c, pushdown.Comparison) and c.op == "=" and c.column == first.column  # type: ignore[union-attr]
               and not isinstance(c.value, pushdown.Field) for c in children):
        return None
    return pushdown.InList(first.column, tuple(c.value for c in children))  # type: ignore[union-attr]


@dataclass(frozen=True)
class PushdownPlan:
    """What one scan sends to the server and what it keeps.

    Attributes:
        filters: the pushed conjuncts.
        residual: the conjuncts applied locally (a pyarrow Expression), or None.
        where: the pushed WHERE clause text ('' when nothing is pushed).
    """

    filters: tuple[pushdown.Filter, ...]
    residual: pc.Expression | None
    no_rows: bool = False

    @property
    def where(self) -> str:
        return " AND ".join(pushdown.render_filter(f) for f in self.filters)


NOT_CONSTANT: Any = object()
CONSTANT_TEXT: dict[Any, str] = {False: "false", None: "null"}
_BOOLEAN_CONSTANTS = tuple(
    (pc.scalar(pa.scalar(value, pa.bool_())), value) for value in (True, False, None)
)


def constant_filter(expression: pc.Expression | pa.Scalar) -> Any:
    """``True``, ``False`` or ``None`` (NULL) when DataFusion folded the filter to a constant.

    ``WHERE a = 'x' AND a = 'y'`` reaches the dataset as the scalar ``false``, which
    ``RecordBatch.filter`` rejects ("Filter should be array-like"); a literal Expression is
    recognised too. Anything else returns a private sentinel.
    """
    if isinstance(expression, pa.Scalar):
        return expression.as_py()
    for constant, value in _BOOLEAN_CONSTANTS:
        if expression.equals(constant):
            return value
    return NOT_CONSTANT


def plan_pushdown(expression: pc.Expression | pa.Scalar | None, server: pa.Schema,
                  client: pa.Schema) -> PushdownPlan:
    """Split DataFusion's filter into pushed s3-select conjuncts and a local residual.

    A filter folded to a constant pushes nothing: TRUE keeps every row, FALSE or NULL none
    (``no_rows``: there is nothing to ask the server).

    Example:
        >>> s = pa.schema([("a", pa.string())])
        >>> print(plan_pushdown(pc.field("a") == "x", s, s).where)
        s3object."a" = 'x'
    """
    if expression is None:
        return PushdownPlan((), None)
    constant = constant_filter(expression)
    if constant is not NOT_CONSTANT:
        # SQL's WHERE keeps a row only where the condition is TRUE.
        return PushdownPlan((), None, no_rows=constant is not True)
    try:
        tree = parse_expression(expression, client)
    except Unparsed as exc:
        log.info("filter kept local (not read back: %s): %s", exc, expression)
        return PushdownPlan((), expression)
    pusher = _Pusher(column_kinds(server, client), client)
    pushed: list[pushdown.Filter] = []
    local: list[pc.Expression] = []
    for conjunct in conjuncts(tree):
        try:
            node = pusher.filter(conjunct)
            pushdown.render_filter(node)
        except pushdown.NotPushable as exc:
            log.debug("conjunct kept local (%s)", exc)
            local.append(rebuild(conjunct, client))
            continue
        pushed.append(node)
    return PushdownPlan(tuple(pushed), and_all(local))
