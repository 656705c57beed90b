"""DataFusion tables that live on flight-select storage servers, with exact pushdown.

    ctx = SessionContext()
    table = register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815",
                                  "sales/orders/2024-01.csv")
    ctx.sql("SELECT region, count(*) FROM orders WHERE status = 'shipped' GROUP BY region")
    table.last_scan.query   # 'SELECT region FROM "sales"."orders/2024-01.csv" WHERE status = ...'

How DataFusion reaches us (datafusion-python 55; ``tests/compute_client/
test_datafusion_pushdown.py`` pins every point): a registered ``pyarrow.dataset.Dataset`` is
duck-typed. While planning a scan DataFusion calls ``dataset.scanner(columns=, filter=)`` and
then ``dataset.get_fragments(filter)`` with the same filter; each fragment becomes one partition
and is read, lazily and in parallel, through ``fragment.scanner(schema, columns=, filter=,
batch_size=).to_batches()``. The filter is a ``pyarrow.compute.Expression`` made of the WHERE
conjuncts DataFusion could convert, and DataFusion treats it as *Exact*: it never re-checks it.
The projection leaves out columns only the filter uses. The LIMIT is never passed.

So a scan here:

1. parses the Expression back into a tree (:func:`parse_expression`) and proves the parse by
   rebuilding the Expression and checking it ``equals`` the one received; anything unproven is
   applied locally, never dropped;
2. pushes each top-level conjunct whose s3-select rendering means exactly what DataFusion means
   on the same Arrow values (:data:`_KINDS`: per column type, how the server must read the
   column and which literals compare the same way), and keeps the others as a local residual;
3. sends ``SELECT <projection + residual columns> FROM "bucket"."key" WHERE <pushed>`` and makes
   one fragment per Flight endpoint, each read from the server the endpoint names;
4. casts what arrives to the table's declared schema, applies the residual, projects.

CSV columns are strings on the server. Declare their types with ``schema=`` and the client casts
them; a comparison on such a column is pushed with the server-side conversion that gives the
same answer (``CAST(q AS INT) < 24``), or, for dates, as a string comparison, which is exact
because pyarrow accepts only ``YYYY-MM-DD`` dates. Every scan is recorded in
:attr:`FlightDataset.scans` (pushed SQL, local residual, rows and bytes received) and logged at
INFO on the ``compute_client.datafusion`` logger.

LIMIT: :func:`collect` inspects the optimized logical plan (``TableScan.fetch``) and pushes the
limit when it is safe (see :func:`collect`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from datafusion.catalog import CatalogProvider, SchemaProvider, Table

from compute_client import pushdown
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient, QueryPlan

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Expression parsing: str(pc.Expression) -> tree, proven by rebuilding.


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Literal:
    text: str
    quoted: bool


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class _IsIn:
    """``is_in(column, {value_set=...})``: how DataFusion hands over a longer IN list."""

    column: _Field
    values: tuple[_Literal, ...]


_Node = _Field | _Literal | _Call | _IsIn

_INFIX: dict[str, str] = {
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
    "and": "and_kleene",
    "or": "or_kleene",
}
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
# Function calls printed as ``name(arg, {options})``: name -> options to rebuild them with.
_CALLS: dict[str, Callable[[], pc.FunctionOptions | None]] = {
    "invert": lambda: None,
    "is_valid": lambda: None,
    "is_null": lambda: pc.NullOptions(nan_is_null=False),
}
_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<punct>[(),])|(?P<options>\{[^{}]*\})'
    r"|(?P<op>==|!=|<=|>=|<|>)|(?P<word>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?Z?"
    r"|[^\s(),\"{}]+))",
    re.S,
)
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = re.compile(r"\s*")
_NAME_END = frozenset(" ),")


class _Unparsed(ValueError):
    """The Expression's text is not in the subset this module reads back."""


def _tokens(text: str, names: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Split an Expression's text; ``names`` are column names to read as one ``field`` token.

    pyarrow prints a field name as is (``(order region == "x")``), so a name that is not an
    identifier is found by trying the table's names, longest first; the rebuild check in
    :func:`parse_expression` rejects any wrong split.
    """
    special = sorted((n for n in names if not _IDENTIFIER.fullmatch(n)), key=len, reverse=True)
    out: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        start = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        name = next((n for n in special if text.startswith(n, start)
                     and (start + len(n) == len(text) or text[start + len(n)] in _NAME_END)),
                    None)
        if name is not None:
            out.append(("field", name))
            position = start + len(name)
            continue
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise _Unparsed(f"unexpected text at {position}: {text[position:position + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


class _Parser:
    def __init__(self, text: str, names: Sequence[str] = ()) -> None:
        self.tokens = _tokens(text, names)
        self.position = 0

    def _next(self) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise _Unparsed("unexpected end")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _expect(self, value: str) -> None:
        if self._next()[1] != value:
            raise _Unparsed(f"expected {value!r}")

    def parse(self) -> _Node:
        node = self._expression()
        if self.position != len(self.tokens):
            raise _Unparsed("trailing text")
        return node

    def _expression(self) -> _Node:
        kind, value = self._next()
        if (kind, value) == ("punct", "("):
            left = self._expression()
            op_kind, op = self._next()
            if op not in _INFIX or op_kind not in ("op", "word"):
                raise _Unparsed(f"operator {op!r}")
            right = self._expression()
            self._expect(")")
            return _Call(_INFIX[op], (left, right))
        if kind == "string":
            return _Literal(_unescape(value[1:-1]), True)
        if kind == "field":
            return _Field(value)
        if kind != "word":
            raise _Unparsed(f"unexpected {value!r}")
        if self.position < len(self.tokens) and self.tokens[self.position] == ("punct", "("):
            return self._call(value)
        if _IDENTIFIER.fullmatch(value) and value not in ("true", "false", "nan", "inf"):
            return _Field(value)
        return _Literal(value, False)

    def _call(self, name: str) -> _Node:
        if name == "is_in":
            return self._is_in()
        if name not in _CALLS:
            raise _Unparsed(f"function {name}")
        self._expect("(")
        args = [self._expression()]
        while True:
            _kind, value = self._next()
            if value == ")":
                break
            if value != ",":
                raise _Unparsed(f"unexpected {value!r}")
            if self.tokens[self.position][0] == "options":
                self.position += 1  # options are rebuilt from _CALLS and proven by equals()
                continue
            args.append(self._expression())
        return _Call(name, tuple(args))


    def _is_in(self) -> _Node:
        self._expect("(")
        column = self._expression()
        self._expect(",")
        kind, options = self._next()
        self._expect(")")
        match = re.fullmatch(r"\{value_set=\w+:\[\n(.*)\n\], null_matching_behavior=MATCH\}",
                             options, re.S) if kind == "options" else None
        if not isinstance(column, _Field) or match is None:
            raise _Unparsed("is_in form")
        # One value per line, two-space indent, comma after all but the last. Strings are
        # printed without escapes; a value that breaks this layout fails the rebuild check.
        lines = match.group(1).split(",\n")
        values = []
        for line in lines:
            item = line.removeprefix("  ")
            quoted = len(item) >= 2 and item[0] == item[-1] == '"'
            values.append(_Literal(item[1:-1] if quoted else item, quoted))
        return _IsIn(column, tuple(values))


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch != "\\":
            out.append(ch)
            continue
        escaped = next(chars, "")
        if escaped not in _ESCAPES:
            raise _Unparsed(f"escape \\{escaped}")
        out.append(_ESCAPES[escaped])
    return "".join(out)


def _python_value(literal: _Literal, data_type: pa.DataType) -> Any:
    """The Python value a literal printed next to a column of ``data_type`` stands for."""
    text = literal.text
    if not literal.quoted and text.startswith("null"):
        return None
    for test, convert in _LITERAL_PARSERS:
        if test(data_type):
            if literal.quoted != (convert is str):
                raise _Unparsed(f"literal {text!r} for {data_type}")
            try:
                return convert(text)
            except (ValueError, decimal.InvalidOperation) as exc:
                raise _Unparsed(str(exc)) from None
    raise _Unparsed(f"literal of type {data_type}")


def _bool(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(f"not a boolean: {text}")
    return text == "true"


_LITERAL_PARSERS: tuple[tuple[Callable[[pa.DataType], bool], Callable[[str], Any]], ...] = (
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)
     or pa.types.is_string_view(t), str),
    (pa.types.is_integer, int),
    (pa.types.is_floating, float),
    (pa.types.is_decimal, decimal.Decimal),
    (pa.types.is_date32, dt.date.fromisoformat),
    (pa.types.is_boolean, _bool),
)


def _rebuild(node: _Node, schema: pa.Schema, hint: pa.DataType | None = None) -> pc.Expression:
    if isinstance(node, _Field):
        if schema.get_field_index(node.name) < 0:
            raise _Unparsed(f"unknown column {node.name}")
        return pc.field(node.name)
    if isinstance(node, _Literal):
        if hint is None:
            raise _Unparsed("literal without a column to type it")
        if pa.types.is_timestamp(hint) and not node.quoted:
            return pc.scalar(_timestamp_scalar(node.text, hint))
        return pc.scalar(pa.scalar(_python_value(node, hint), type=hint))
    if isinstance(node, _IsIn):
        column_type = _column_type(node.column, schema)
        if column_type is None:
            raise _Unparsed(f"unknown column {node.column.name}")
        values = pa.array([_python_value(v, column_type) for v in node.values], type=column_type)
        return pc.Expression._call("is_in", [_rebuild(node.column, schema)],
                                   pc.SetLookupOptions(values))
    if node.name in _CALLS:
        args = [_rebuild(a, schema) for a in node.args]
        return pc.Expression._call(node.name, args, _CALLS[node.name]())
    left, right = node.args
    left_hint = _column_type(right, schema)
    right_hint = _column_type(left, schema)
    return pc.Expression._call(
        node.name, [_rebuild(left, schema, left_hint), _rebuild(right, schema, right_hint)]
    )


def _timestamp_scalar(text: str, data_type: pa.DataType) -> pa.Scalar:
    try:
        return pa.array([text]).cast(data_type)[0]
    except pa.ArrowException as exc:
        raise _Unparsed(str(exc)) from None


def _column_type(node: _Node, schema: pa.Schema) -> pa.DataType | None:
    if isinstance(node, _Field) and schema.get_field_index(node.name) >= 0:
        return schema.field(node.name).type
    return None


def parse_expression(expression: pc.Expression, schema: pa.Schema) -> _Node:
    """Read a filter DataFusion handed over back into a tree, or raise ``ValueError``.

    The tree is returned only when rebuilding it gives an Expression ``equals`` to the one
    received (same functions, options, columns, literal values and types).
    """
    node = _Parser(str(expression), schema.names).parse()
    if not _rebuild(node, schema).equals(expression):
        raise _Unparsed(f"rebuilt expression differs from {expression}")
    return node


def _conjuncts(node: _Node) -> list[_Node]:
    if isinstance(node, _Call) and node.name == "and_kleene":
        return [c for arg in node.args for c in _conjuncts(arg)]
    return [node]


def _and(nodes: Sequence[pc.Expression]) -> pc.Expression | None:
    result: pc.Expression | None = None
    for node in nodes:
        result = node if result is None else result & node
    return result


# ---------------------------------------------------------------------------------------------
# Pushability: what each column type means on the server.


@dataclass(frozen=True)
class _Kind:
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
    # The server compares decimals as doubles. For precision <= 15 the unscaled value is below
    # 2**53 and two decimals of one scale are further apart than a double's spacing there, so
    # the (correctly rounded) conversion keeps order and equality.
    (lambda t: pa.types.is_decimal(t) and t.precision <= 15, "decimal"),
    (pa.types.is_date32, "date"),
    (pa.types.is_boolean, "bool"),
)

# (how the server holds the column, client category) -> kind. "native": the server has the
# column in the client's type; "text": the server has CSV text the client casts.
_KINDS: dict[tuple[str, str], _Kind] = {
    ("native", "string"): _Kind("string"),
    ("native", "int"): _Kind("int"),
    # Floats are not pushed: DataFusion orders NaN above every number, a pyarrow filter (the
    # server's Parquet scan) finds NaN > x false. Native dates are not pushed: the server
    # compares them as Timestamp(ns), which fails outside 1677..2262.
    ("native", "decimal"): _Kind("decimal"),
    ("native", "bool"): _Kind("bool"),
    ("text", "string"): _Kind("string"),
    ("text", "int"): _Kind("int", cast="INT"),
    # Text that cast to decimal(p, s) on the client parses to the double of that decimal.
    ("text", "decimal"): _Kind("decimal", cast="FLOAT"),
    # pyarrow casts only YYYY-MM-DD text to date32, so text order is date order.
    ("text", "date"): _Kind("text-date", value=lambda v: v.isoformat()),
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


def column_kinds(server: pa.Schema, client: pa.Schema) -> dict[str, _Kind]:
    """The pushable columns of a table: server schema as stored, client schema as declared."""
    kinds: dict[str, _Kind] = {}
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

    def __init__(self, kinds: Mapping[str, _Kind], schema: pa.Schema) -> None:
        self.kinds = kinds
        self.schema = schema
        # False below an odd number of NOTs. is_in answers false where SQL's IN answers NULL;
        # only where nothing negates the result do both drop the row alike.
        self.positive = True

    def filter(self, node: _Node) -> pushdown.Filter:
        if isinstance(node, _IsIn):
            return self._is_in(node)
        if not isinstance(node, _Call):
            return self._bare(node)
        handler = self._HANDLERS.get(node.name)
        if handler is None:
            raise pushdown.NotPushable(node.name)
        return handler(self, node)

    def _is_in(self, node: _IsIn) -> pushdown.Filter:
        if not self.positive:
            raise pushdown.NotPushable("is_in under NOT (NULL is false there, NULL in SQL)")
        kind = self._kind(node.column.name)
        column_type = self.schema.field(node.column.name).type
        values = [_python_value(v, column_type) for v in node.values]
        if any(v is None for v in values):
            raise pushdown.NotPushable("IN list with NULL")
        return pushdown.InList(self._ref(node.column.name), tuple(kind.value(v) for v in values))

    def _kind(self, name: str) -> _Kind:
        kind = self.kinds.get(name)
        if kind is None:
            raise pushdown.NotPushable(f"column {name} has no exact server comparison")
        return kind

    def _ref(self, name: str) -> str | pushdown.Field:
        kind = self._kind(name)
        return pushdown.Field(name, kind.cast) if kind.cast else name

    def _bare(self, node: _Node) -> pushdown.Filter:
        # A boolean column used as a predicate.
        if isinstance(node, _Field) and self._kind(node.name).group == "bool":
            return pushdown.Comparison(node.name, "=", True)
        raise pushdown.NotPushable("not a predicate")

    def _comparison(self, node: _Call) -> pushdown.Filter:
        left, right = node.args
        name = node.name
        if isinstance(left, _Literal):
            left, right, name = right, left, _MIRROR[name]
        if not isinstance(left, _Field):
            raise pushdown.NotPushable("comparison of expressions")
        kind = self._kind(left.name)
        op = _COMPARISON_SQL[name]
        if isinstance(right, _Field):
            other = self._kind(right.name)
            same_type = self.schema.field(left.name).type == self.schema.field(right.name).type
            if other.group != kind.group or not same_type:
                raise pushdown.NotPushable("columns of different types")
            ref = self._ref(right.name)
            return pushdown.Comparison(self._ref(left.name), op,
                                       ref if isinstance(ref, pushdown.Field)
                                       else pushdown.Field(ref))
        assert isinstance(right, _Literal)
        value = _python_value(right, self.schema.field(left.name).type)
        if value is None:
            raise pushdown.NotPushable("comparison with NULL")
        return pushdown.Comparison(self._ref(left.name), op, kind.value(value))

    def _null(self, node: _Call) -> pushdown.Filter:
        (arg,) = node.args
        if not isinstance(arg, _Field):
            raise pushdown.NotPushable("null test of an expression")
        self._kind(arg.name)
        return pushdown.NullTest(arg.name, node.name == "is_null")

    def _not(self, node: _Call) -> pushdown.Filter:
        self.positive = not self.positive
        try:
            return pushdown.Not(self.filter(node.args[0]))
        finally:
            self.positive = not self.positive

    def _and(self, node: _Call) -> pushdown.Filter:
        return pushdown.And(tuple(self.filter(a) for a in node.args))

    def _or(self, node: _Call) -> pushdown.Filter:
        children = tuple(self.filter(a) for a in _disjuncts(node))
        return _as_in_list(children) or pushdown.Or(children)

    _HANDLERS: Mapping[str, Callable[[_Pusher, _Call], pushdown.Filter]] = {
        **dict.fromkeys(_COMPARISON_SQL, _comparison),
        "is_null": _null,
        "is_valid": _null,
        "invert": _not,
        "and_kleene": _and,
        "or_kleene": _or,
    }


def _disjuncts(node: _Node) -> list[_Node]:
    if isinstance(node, _Call) and node.name == "or_kleene":
        return [d for arg in node.args for d in _disjuncts(arg)]
    return [node]


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


_NOT_CONSTANT: Any = object()
_CONSTANT_TEXT: dict[Any, str] = {False: "false", None: "null"}
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
    return _NOT_CONSTANT


def plan_pushdown(expression: pc.Expression | pa.Scalar | None, server: pa.Schema,
                  client: pa.Schema) -> PushdownPlan:
    """Split DataFusion's filter into pushed s3-select conjuncts and a local residual.

    A filter folded to a constant pushes nothing: TRUE keeps every row, FALSE or NULL none
    (``no_rows``: there is nothing to ask the server).

    Example:
        >>> s = pa.schema([("a", pa.string())])
        >>> plan_pushdown(pc.field("a") == "x", s, s).where
        "a = 'x'"
    """
    if expression is None:
        return PushdownPlan((), None)
    constant = constant_filter(expression)
    if constant is not _NOT_CONSTANT:
        # SQL's WHERE keeps a row only where the condition is TRUE.
        return PushdownPlan((), None, no_rows=constant is not True)
    try:
        tree = parse_expression(expression, client)
    except _Unparsed as exc:
        log.info("filter kept local (not read back: %s): %s", exc, expression)
        return PushdownPlan((), expression)
    pusher = _Pusher(column_kinds(server, client), client)
    pushed: list[pushdown.Filter] = []
    local: list[pc.Expression] = []
    for conjunct in _conjuncts(tree):
        try:
            node = pusher.filter(conjunct)
            pushdown.render_filter(node)
        except pushdown.NotPushable as exc:
            log.debug("conjunct kept local (%s)", exc)
            local.append(_rebuild(conjunct, client))
            continue
        pushed.append(node)
    return PushdownPlan(tuple(pushed), _and(local))


def _expression_columns(node: _Node) -> set[str]:
    if isinstance(node, _Field):
        return {node.name}
    if isinstance(node, _Call):
        return {c for arg in node.args for c in _expression_columns(arg)}
    if isinstance(node, _IsIn):
        return {node.column.name}
    return set()


def residual_columns(residual: pc.Expression | None, schema: pa.Schema) -> set[str]:
    """Columns the local residual reads (all of them when it cannot be read back)."""
    if residual is None:
        return set()
    try:
        return _expression_columns(_Parser(str(residual), schema.names).parse()) & set(
            schema.names
        )
    except _Unparsed:
        return set(schema.names)


# ---------------------------------------------------------------------------------------------
# Scanning.


@dataclass(frozen=True)
class RemoteTable:
    """Where a remote table lives: an object, or a key prefix (``orders/``) on servers that
    serve prefixes as tables."""

    connection: ConnectionOptions
    bucket: str
    key: str


@dataclass
class ScanStats:
    """One scan of a remote table: what was pushed and what came back.

    Attributes:
        query: the s3-select statement sent ('' when none was: the filter is constant FALSE
            or NULL, so the scan has no partitions).
        pushed: the pushed WHERE clause ('' when none).
        local: the filter applied locally, as text ('' when none).
        limit: the pushed LIMIT, if any.
        endpoints: Flight endpoints (DataFusion partitions).
        rows: rows received so far.
        bytes: Arrow bytes received so far (buffer sizes of the received batches).
    """

    query: str
    pushed: str
    local: str
    limit: int | None
    endpoints: int
    rows: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, batch: pa.RecordBatch) -> None:
        with self._lock:
            self.rows += batch.num_rows
            self.bytes += batch.nbytes


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Columns of ``schema`` by name, cast to its types (CSV text, decimals sent as double).

    Raises:
        RuntimeError: the batch has no column of that name, or several (index -1 would
            silently take the last column).
    """
    if not len(schema):
        return batch.select([])  # count(*): no columns, the row count still matters
    columns = []
    for target in schema:
        index = batch.schema.get_field_index(target.name)
        if index < 0:
            raise RuntimeError(f"server result has no single column {target.name!r}: "
                               f"{batch.schema.names}")
        column = batch.column(index)
        if column.type != target.type:
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Scan:
    """One planned scan: the remote plan, the residual, and where its batches go."""

    def __init__(self, table: RemoteTable, schema: pa.Schema, fetched: pa.Schema,
                 plan: QueryPlan, residual: pc.Expression | None, stats: ScanStats) -> None:
        self.table = table
        self.schema = schema
        self.fetched = fetched
        self.plan = plan
        self.residual = residual
        self.stats = stats

    def read(self, endpoint: Endpoint, columns: Sequence[str] | None,
             out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        with FlightSelectClient(self.table.connection) as client:
            for batch in client.read(endpoint):
                self.stats.add(batch)
                batch = _conform(batch, self.fetched)
                if self.residual is not None:
                    batch = batch.filter(self.residual)
                if columns is not None:
                    batch = batch.select(list(columns))
                if batch.num_rows:
                    yield _conform(batch, out_schema)
        log.info("endpoint done query=%s rows=%d bytes=%d", self.stats.query, self.stats.rows,
                 self.stats.bytes)


class _Scanner:
    """What ``scanner()`` returns: DataFusion reads ``projected_schema`` and the batches."""

    def __init__(self, projected_schema: pa.Schema,
                 batches: Callable[[], Iterator[pa.RecordBatch]]) -> None:
        self.projected_schema = projected_schema
        self._batches = batches

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches()

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)


class _EndpointFragment:
    """One Flight endpoint: one DataFusion partition, read when DataFusion pulls it."""

    def __init__(self, scan: _Scan, endpoint: Endpoint) -> None:
        self._scan = scan
        self._endpoint = endpoint

    def scanner(self, schema: pa.Schema | None = None, columns: Sequence[str] | None = None,
                filter: pc.Expression | None = None, **_: Any) -> _Scanner:
        projected = _project(self._scan.schema, columns)
        missing = set(projected.names) - set(self._scan.fetched.names)
        if missing:
            raise RuntimeError(f"scan planned without columns {sorted(missing)}")
        return _Scanner(projected,
                        lambda: self._scan.read(self._endpoint, columns, projected))


def _project(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


class FlightDataset(ds.Dataset):
    """A remote table as a pyarrow Dataset whose fragments are the server's endpoints.

    Attributes:
        table: where the table lives.
        schema: the table's schema as DataFusion sees it (declared types applied).
        server_schema: the schema the server sends for ``SELECT *``.
        scans: every scan so far, newest last.
    """

    def __init__(self, table: RemoteTable, schema: pa.Schema | None = None) -> None:
        self.table = table
        with FlightSelectClient(table.connection) as client:
            plan = client.execute(pushdown.build_query(table.bucket, table.key, None, (), 0))
        self.server_schema = plan.schema
        self._schema = _declared_schema(plan.schema, schema)
        self.scans: list[ScanStats] = []
        self._pending: dict[str, Sequence[str] | None] = {}
        self._fetch_hint: int | None = None
        self._lock = threading.Lock()

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._schema

    @property
    def last_scan(self) -> ScanStats | None:
        """The most recent scan, or None."""
        return self.scans[-1] if self.scans else None


    def scanner(self, schema: pa.Schema | None = None,  # type: ignore[override]
                columns: Sequence[str] | None = None, filter: pc.Expression | None = None,
                **_: Any) -> _Scanner:
        # DataFusion calls this right before get_fragments(filter) to learn the projected
        # schema; remember the projection, which get_fragments does not receive.
        with self._lock:
            self._pending[str(filter)] = list(columns) if columns is not None else None
        projected = _project(self._schema, columns)
        return _Scanner(projected, lambda: self._read_all(columns, filter, projected))

    def _read_all(self, columns: Sequence[str] | None, filter: pc.Expression | None,
                  projected: pa.Schema) -> Iterator[pa.RecordBatch]:
        for fragment in self._plan_scan(columns, filter):
            yield from fragment.scanner(columns=columns, filter=filter).to_batches()

    def get_fragments(self, filter: pc.Expression | None = None  # type: ignore[override]
                      ) -> Iterator[_EndpointFragment]:
        with self._lock:
            columns = self._pending.pop(str(filter), None)
        return iter(self._plan_scan(columns, filter))

    def _plan_scan(self, columns: Sequence[str] | None,
                   filter: pc.Expression | pa.Scalar | None) -> list[_EndpointFragment]:
        split = plan_pushdown(filter, self.server_schema, self._schema)
        limit = self._take_fetch_hint(split)
        if split.no_rows:
            return self._no_rows(filter)
        needed = _needed_columns(self._schema, columns, split.residual)
        fetched = _project(self._schema, needed)
        query = pushdown.build_query(
            self.table.bucket, self.table.key, _server_projection(self, needed),
            split.filters, limit,
        )
        with FlightSelectClient(self.table.connection) as client:
            plan = client.execute(query)
        stats = ScanStats(query, split.where, "" if split.residual is None else
                          str(split.residual), limit, len(plan.endpoints))
        with self._lock:
            self.scans.append(stats)
        log.info("flight scan table=%s/%s query=%s pushed=%r local=%r limit=%s endpoints=%d",
                 self.table.bucket, self.table.key, query, stats.pushed, stats.local, limit,
                 len(plan.endpoints))
        scan = _Scan(self.table, self._schema, fetched, plan, split.residual, stats)
        return [_EndpointFragment(scan, e) for e in plan.endpoints]

    def _no_rows(self, filter: pc.Expression | pa.Scalar | None) -> list[_EndpointFragment]:
        """A filter that is constant FALSE or NULL: no partitions, no call to the server."""
        constant = constant_filter(filter) if filter is not None else None
        text = _CONSTANT_TEXT.get(constant, str(constant))
        with self._lock:
            self.scans.append(ScanStats("", "", text, None, 0))
        log.info("flight scan table=%s/%s skipped: the filter is constant %s",
                 self.table.bucket, self.table.key, text)
        return []

    def _take_fetch_hint(self, split: PushdownPlan) -> int | None:
        with self._lock:
            hint, self._fetch_hint = self._fetch_hint, None
        if hint is None or split.residual is not None:
            return None
        # Ceph's LIMIT counts scanned rows, so with a WHERE it would cut matching rows
        # (standard and aws count result rows).
        if split.filters and self.table.connection.flavor == "ceph":
            return None
        return hint


def _declared_schema(server: pa.Schema, declared: pa.Schema | Mapping[str, Any] | None
                     ) -> pa.Schema:
    """The server's schema with the declared column types (names must exist there)."""
    if declared is None:
        return server
    types = dict(zip(declared.names, declared.types, strict=True)) if isinstance(declared, pa.Schema) \
        else {name: _data_type(t) for name, t in declared.items()}
    unknown = set(types) - set(server.names)
    if unknown:
        raise ValueError(f"declared columns not in the table: {sorted(unknown)}")
    return pa.schema([f.with_type(types.get(f.name, f.type)) for f in server])


def _data_type(value: Any) -> pa.DataType:
    if isinstance(value, pa.DataType):
        return value
    return pa.type_for_alias(str(value))


def _needed_columns(schema: pa.Schema, columns: Sequence[str] | None,
                    residual: pc.Expression | None) -> list[str] | None:
    if columns is None:
        return None
    wanted = set(columns) | residual_columns(residual, schema)
    if not wanted:
        # count(*) and friends need rows, not values: fetch the first column.
        wanted = {schema.names[0]}
    return [name for name in schema.names if name in wanted]


def _server_projection(dataset: FlightDataset, needed: Sequence[str] | None
                       ) -> Sequence[str] | None:
    """The SELECT list; ``*`` when a named wide decimal would come back as a double, or when a
    column has no reference of its own (:func:`unreferable_columns`)."""
    if needed is None:
        return None
    server = dataset.server_schema
    unreferable = unreferable_columns(server)
    for name in needed:
        if name in unreferable:
            return None
        data_type = server.field(name).type
        if pa.types.is_decimal(data_type) and data_type.precision > 15:
            return None
    return needed


# ---------------------------------------------------------------------------------------------
# Registration and catalogs.


def connection_options(location: str, **options: Any) -> ConnectionOptions:
    """``ConnectionOptions`` from keyword options; PEM options may be file paths.

    Options: ``flavor``, ``username``, ``password``, ``tls_root_certs``, ``cert_chain``,
    ``private_key`` (bytes or a path), ``timeout_s``, ``headers``.
    """
    for name in ("tls_root_certs", "cert_chain", "private_key"):
        value = options.get(name)
        if isinstance(value, (str, Path)):
            options[name] = Path(value).read_bytes()
    return replace(ConnectionOptions(location), **options)


def register_flight_table(ctx: Any, name: str, location: str, table: str,
                          schema: pa.Schema | Mapping[str, Any] | None = None,
                          **options: Any) -> FlightDataset:
    """Register the remote object or prefix ``table`` (``bucket/key``) as ``name`` in ``ctx``.

    Args:
        ctx: a ``datafusion.SessionContext``.
        name: the table name in DataFusion SQL.
        location: the server, e.g. ``grpc://127.0.0.1:8815`` (``grpc+tls://`` for TLS).
        table: ``bucket/key`` of an object (or ``bucket/prefix/``).
        schema: declared column types (a schema or ``{column: type}``), cast on the client;
            CSV columns are strings on the server otherwise.
        **options: see :func:`connection_options` (auth, TLS, timeout, flavour).

    Returns:
        The dataset; its :attr:`FlightDataset.scans` tell what each query pushed and received.

    Example:
        >>> register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815",
        ...                       "sales/orders/2024-01.csv")  # doctest: +SKIP
        >>> ctx.sql("SELECT count(*) FROM orders").collect()  # doctest: +SKIP
    """
    bucket, _, key = table.partition("/")
    if not key:
        raise ValueError(f"table must be bucket/key, got {table!r}")
    dataset = FlightDataset(RemoteTable(connection_options(location, **options), bucket, key),
                            schema)
    ctx.register_dataset(name, dataset)
    return dataset


class FlightSchema(SchemaProvider):
    """One bucket as a DataFusion schema; tables (objects) are opened when a query names them.

    Attributes:
        datasets: the tables opened so far, by name.
    """

    def __init__(self, connection: ConnectionOptions, bucket: str,
                 schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None) -> None:
        self.connection = connection
        self.bucket = bucket
        self.schemas = dict(schemas or {})
        self.datasets: dict[str, FlightDataset] = {}

    def table_names(self) -> set[str]:
        with FlightSelectClient(self.connection) as client:
            return set(client.list_objects(self.bucket))

    def table(self, name: str) -> Table:
        dataset = self.datasets.get(name)
        if dataset is None:
            dataset = FlightDataset(RemoteTable(self.connection, self.bucket, name),
                                    self.schemas.get(name))
            self.datasets[name] = dataset
        return Table(dataset)

    def table_exist(self, name: str) -> bool:
        return name in self.table_names()


class FlightCatalog(CatalogProvider):
    """One or more storage servers as a DataFusion catalog whose schemas are buckets.

    A bucket found on several servers is read from the first that lists it.
    """

    def __init__(self, connections: Sequence[ConnectionOptions],
                 schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None) -> None:
        self.connections = list(connections)
        self.schemas = dict(schemas or {})
        self._buckets: dict[str, FlightSchema] | None = None

    def _bucket_map(self) -> dict[str, FlightSchema]:
        if self._buckets is None:
            found: dict[str, FlightSchema] = {}
            for connection in self.connections:
                with FlightSelectClient(connection) as client:
                    for bucket in client.list_buckets():
                        if bucket not in found:
                            prefix = f"{bucket}/"
                            declared = {k[len(prefix):]: v for k, v in self.schemas.items()
                                        if k.startswith(prefix)}
                            found[bucket] = FlightSchema(connection, bucket, declared)
            self._buckets = found
        return self._buckets

    def schema_names(self) -> set[str]:
        return set(self._bucket_map())

    def schema(self, name: str) -> Any:
        return self._bucket_map().get(name)

    def dataset(self, bucket: str, key: str) -> FlightDataset | None:
        """The dataset of ``bucket/key`` once a query has opened it."""
        schema = self._bucket_map().get(bucket)
        return schema.datasets.get(key) if schema is not None else None


def register_flight_catalog(ctx: Any, name: str, locations: str | Sequence[str],
                            schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None,
                            **options: Any) -> FlightCatalog:
    """Register one or more servers as catalog ``name``: ``name.bucket."key"`` in SQL.

    Args:
        ctx: a ``datafusion.SessionContext``.
        name: the catalog name.
        locations: one server location or several.
        schemas: declared types per table, keyed ``bucket/key``.
        **options: see :func:`connection_options` (shared by every server).

    Example:
        >>> register_flight_catalog(ctx, "store", "grpc://127.0.0.1:8815")  # doctest: +SKIP
        >>> ctx.sql('SELECT count(*) FROM store.sales."orders/2024-01.csv"')  # doctest: +SKIP
    """
    if isinstance(locations, str):
        locations = [locations]
    catalog = FlightCatalog([connection_options(loc, **dict(options)) for loc in locations],
                            schemas)
    ctx.register_catalog_provider(name, catalog)
    return catalog


# ---------------------------------------------------------------------------------------------
# LIMIT through plan inspection.


def _walk(plan: Any) -> Iterable[Any]:
    yield plan
    for child in plan.inputs():
        yield from _walk(child)


def scan_fetches(logical_plan: Any) -> dict[str, list[int | None]]:
    """``TableScan`` name -> the fetch of each scan of it in an optimized logical plan."""
    found: dict[str, list[int | None]] = {}
    for node in _walk(logical_plan):
        variant = node.to_variant()
        if type(variant).__name__ == "TableScan":
            found.setdefault(variant.table_name(), []).append(variant.fetch())
    return found


def collect(ctx: Any, query: str, tables: Mapping[str, FlightDataset]) -> pa.Table:
    """Run ``query`` and return its result, pushing a LIMIT to the server where it is safe.

    DataFusion never passes the limit to a dataset, but its optimizer records it on the
    ``TableScan`` (``fetch``) when nothing between the scan and the LIMIT drops rows. For each
    of ``tables`` (name as registered -> dataset) scanned exactly once with a fetch, the scan
    sends ``LIMIT fetch`` too, unless a filter stays local (it could drop fetched rows) or the
    flavour is Ceph's and a WHERE is pushed (Ceph's LIMIT counts scanned rows). DataFusion's
    own LIMIT still applies on top.
    """
    frame = ctx.sql(query)
    fetches = scan_fetches(frame.optimized_logical_plan())
    hinted: list[FlightDataset] = []
    for name, dataset in tables.items():
        found = fetches.get(name, [])
        if len(found) == 1 and found[0] is not None:
            with dataset._lock:
                dataset._fetch_hint = int(found[0])
            hinted.append(dataset)
    try:
        return frame.to_arrow_table()
    finally:
        for dataset in hinted:
            with dataset._lock:
                dataset._fetch_hint = None
