"""The fuzzer's own query AST and its rendering to s3-select text.

The generator builds these nodes, :func:`render_query` writes them as the SQL the engine
parses, and :mod:`tests.fuzz.oracle` interprets the same nodes row by row. Nothing here
imports ``select_dialect`` or ``flight_storage``: the oracle must not share the engine's
parser or its notion of the language. Every operator is written fully parenthesised so the
text means one tree in both flavours (Ceph's ``NOT`` takes a whole conjunction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

INT, FLOAT, STR, BOOL, TS = "int", "float", "str", "bool", "ts"
NUMERIC = (INT, FLOAT)


class Node:
    """An expression; ``kind`` is its s3-select type (one of INT FLOAT STR BOOL TS)."""

    kind: str


@dataclass(frozen=True)
class Lit(Node):
    value: Any  # None = NULL
    kind: str


@dataclass(frozen=True)
class Col(Node):
    """A column (CSV ``_N`` / header name, Parquet name) or a JSON path under the row alias.

    ``path`` holds the steps as the data has them: ``("key", "a")`` / ``("index", 1)``;
    ``spelling`` the key text as the query writes it (another letter case: key matching is
    case-insensitive)."""

    path: tuple[tuple[str, Any], ...]
    kind: str
    spelling: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cast(Node):
    operand: Node
    kind: str
    shorthand: bool = False  # Ceph's int(x) / float(x)


@dataclass(frozen=True)
class Neg(Node):
    operand: Node
    kind: str


@dataclass(frozen=True)
class Arith(Node):
    op: str  # + - * / %
    left: Node
    right: Node
    kind: str


@dataclass(frozen=True)
class Cmp(Node):
    op: str  # = <> != < <= > >=
    left: Node
    right: Node
    kind: str = BOOL


@dataclass(frozen=True)
class Logic(Node):
    op: str  # AND OR
    left: Node
    right: Node
    kind: str = BOOL


@dataclass(frozen=True)
class Not(Node):
    operand: Node
    kind: str = BOOL


@dataclass(frozen=True)
class IsTest(Node):
    operand: Node
    what: str  # NULL / MISSING
    negate: bool
    kind: str = BOOL


@dataclass(frozen=True)
class Between(Node):
    operand: Node
    low: Node
    high: Node
    negate: bool
    kind: str = BOOL


@dataclass(frozen=True)
class In(Node):
    operand: Node
    items: tuple[Node, ...]
    negate: bool
    kind: str = BOOL


@dataclass(frozen=True)
class Like(Node):
    operand: Node
    pattern: str
    escape: str | None
    negate: bool
    kind: str = BOOL


@dataclass(frozen=True)
class Case(Node):
    whens: tuple[tuple[Node, Node], ...]
    default: Node | None
    kind: str
    subject: Node | None = None  # simple CASE: compares subject = each WHEN value


@dataclass(frozen=True)
class Call(Node):
    """A scalar function: COALESCE NULLIF UPPER LOWER CHAR_LENGTH TRIM SUBSTRING TO_TIMESTAMP
    DATE_ADD DATE_DIFF EXTRACT TO_STRING; ``words`` are its keyword arguments (date parts,
    TRIM's side), ``args`` the expressions."""

    name: str
    args: tuple[Node, ...]
    kind: str
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class Agg(Node):
    name: str  # COUNT SUM MIN MAX AVG
    arg: Node | None  # None = COUNT(*)
    kind: str


@dataclass
class Query:
    select: list[Node]
    where: Node | None = None
    limit: int | None = None
    source: str = "csv"  # csv json parquet
    alias: str = "s"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_aggregate(self) -> bool:
        return any(isinstance(item, Agg) for item in self.select)


# --------------------------------------------------------------------------- rendering


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _literal(node: Lit) -> str:
    if node.value is None:
        return "NULL"
    if node.kind == BOOL:
        return "true" if node.value else "false"
    if node.kind == STR:
        return _quote(node.value)
    if node.kind == FLOAT:
        return repr(float(node.value))
    return str(node.value)


def _column(node: Col, query: Query) -> str:
    if query.source == "json":
        text = query.alias
        for (step, value), spelled in zip(node.path, node.spelling or [None] * len(node.path), strict=True):
            text += f".{spelled or value}" if step == "key" else f"[{value}]"
        return text
    return node.spelling[0]  # ``_N`` (CSV) or the Parquet column name


_CAST_TYPES = {INT: "INT", FLOAT: "FLOAT", STR: "STRING"}


Render = Callable[[Node], str]


def render(node: Node, query: Query) -> str:
    """The s3-select text of one expression."""
    if isinstance(node, Col):
        return _column(node, query)
    renderer = _RENDERERS.get(type(node))
    if renderer is None:
        raise TypeError(node)
    return renderer(node, lambda n: render(n, query))


def _cast(node: Cast, r: Render) -> str:
    if node.shorthand:
        return f"{node.kind}({r(node.operand)})"
    return f"CAST({r(node.operand)} AS {_CAST_TYPES[node.kind]})"


def _between(node: Between, r: Render) -> str:
    word = "NOT BETWEEN" if node.negate else "BETWEEN"
    return f"({r(node.operand)} {word} {r(node.low)} AND {r(node.high)})"


def _in(node: In, r: Render) -> str:
    word = "NOT IN" if node.negate else "IN"
    return f"({r(node.operand)} {word} ({', '.join(r(i) for i in node.items)}))"


def _like(node: Like, r: Render) -> str:
    word = "NOT LIKE" if node.negate else "LIKE"
    escape = f" ESCAPE {_quote(node.escape)}" if node.escape else ""
    return f"({r(node.operand)} {word} {_quote(node.pattern)}{escape})"


def _case(node: Case, r: Render) -> str:
    subject = f" {r(node.subject)}" if node.subject is not None else ""
    whens = " ".join(f"WHEN {r(c)} THEN {r(v)}" for c, v in node.whens)
    default = f" ELSE {r(node.default)}" if node.default is not None else ""
    return f"(CASE{subject} {whens}{default} END)"


def _binary(node: Arith | Cmp | Logic, r: Render) -> str:
    return f"({r(node.left)} {node.op} {r(node.right)})"


_RENDERERS: dict[type[Node], Callable[[Any, Render], str]] = {
    Lit: lambda node, _r: _literal(node),
    Cast: _cast,
    Neg: lambda node, r: f"(- {r(node.operand)})",  # a space: `--` opens a comment
    Arith: _binary,
    Cmp: _binary,
    Logic: _binary,
    Not: lambda node, r: f"(NOT {r(node.operand)})",
    IsTest: lambda node, r: f"({r(node.operand)} IS {'NOT ' if node.negate else ''}{node.what})",
    Between: _between,
    In: _in,
    Like: _like,
    Case: _case,
    Call: lambda node, r: _call(node, r),
    Agg: lambda node, r: f"{node.name}({'*' if node.arg is None else r(node.arg)})",
}
"""How each kind of node is written (columns need the query: :func:`render` asks it)."""


def _call(node: Call, r: Any) -> str:
    args = [r(a) for a in node.args]
    if node.name == "EXTRACT":
        return f"EXTRACT({node.words[0]} FROM {args[0]})"
    if node.name in ("DATE_ADD", "DATE_DIFF"):
        return f"{node.name}({node.words[0]}, {', '.join(args)})"
    if node.name == "TRIM" and node.words:
        return f"TRIM({node.words[0]} {args[1]} FROM {args[0]})"
    if node.name == "SUBSTRING" and node.words == ("FROM",):
        tail = f" FOR {args[2]}" if len(args) > 2 else ""
        return f"SUBSTRING({args[0]} FROM {args[1]}{tail})"
    return f"{node.name}({', '.join(args)})"


def render_query(query: Query) -> str:
    """The whole statement."""
    items = ", ".join(render(item, query) for item in query.select)
    source = f"S3Object[*] {query.alias}" if query.source == "json" else "S3Object"
    text = f"SELECT {items} FROM {source}"
    if query.where is not None:
        text += f" WHERE {render(query.where, query)}"
    if query.limit is not None:
        text += f" LIMIT {query.limit}"
    return text
