"""pyarrow filter Expressions read back into a tree, each read proven by rebuilding.

DataFusion hands a registered dataset its filter as a ``pyarrow.compute.Expression``, and
pyarrow offers no way to walk one: only its printed text (``str(expression)``) and ``equals``.
So this module parses the printed subset DataFusion produces (comparisons, AND/OR/NOT, null
tests, ``is_in``) and accepts a tree only when rebuilding it gives an Expression ``equals`` to
the one received. Hand-written because no library reads that text back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Field:
    """A column reference."""

    name: str


@dataclass(frozen=True)
class Literal:
    """A literal as printed; its value is read once the column beside it gives the type."""

    text: str
    quoted: bool


@dataclass(frozen=True)
class Call:
    """A pyarrow function call (``equal``, ``and_kleene``, ``invert``, ``is_null``, ...)."""

    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class IsIn:
    """``is_in(column, {value_set=...})``: how DataFusion hands over a longer IN list."""

    column: Field
    values: tuple[Literal, ...]


Node = Field | Literal | Call | IsIn


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


class Unparsed(ValueError):
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
            raise Unparsed(f"unexpected text at {position}: {text[position:position + 20]!r}")
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
            raise Unparsed("unexpected end")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _expect(self, value: str) -> None:
        if self._next()[1] != value:
            raise Unparsed(f"expected {value!r}")

    def parse(self) -> Node:
        node = self._expression()
        if self.position != len(self.tokens):
            raise Unparsed("trailing text")
        return node

    def _expression(self) -> Node:
        kind, value = self._next()
        if (kind, value) == ("punct", "("):
            left = self._expression()
            op_kind, op = self._next()
            if op not in _INFIX or op_kind not in ("op", "word"):
                raise Unparsed(f"operator {op!r}")
            right = self._expression()
            self._expect(")")
            return Call(_INFIX[op], (left, right))
        if kind == "string":
            return Literal(_unescape(value[1:-1]), True)
        if kind == "field":
            return Field(value)
        if kind != "word":
            raise Unparsed(f"unexpected {value!r}")
        if self.position < len(self.tokens) and self.tokens[self.position] == ("punct", "("):
            return self._call(value)
        if _IDENTIFIER.fullmatch(value) and value not in ("true", "false", "nan", "inf"):
            return Field(value)
        return Literal(value, False)

    def _call(self, name: str) -> Node:
        if name == "is_in":
            return self._is_in()
        if name not in _CALLS:
            raise Unparsed(f"function {name}")
        self._expect("(")
        args = [self._expression()]
        while True:
            _kind, value = self._next()
            if value == ")":
                break
            if value != ",":
                raise Unparsed(f"unexpected {value!r}")
            if self.tokens[self.position][0] == "options":
                self.position += 1  # options are rebuilt from _CALLS and proven by equals()
                continue
            args.append(self._expression())
        return Call(name, tuple(args))


    def _is_in(self) -> Node:
        self._expect("(")
        column = self._expression()
        self._expect(",")
        kind, options = self._next()
        self._expect(")")
        match = re.fullmatch(r"\{value_set=\w+:\[\n(.*)\n\], null_matching_behavior=MATCH\}",
                             options, re.S) if kind == "options" else None
        if not isinstance(column, Field) or match is None:
            raise Unparsed("is_in form")
        # One value per line, two-space indent, comma after all but the last. Strings are
        # printed without escapes; a value that breaks this layout fails the rebuild check.
        lines = match.group(1).split(",\n")
        values = []
        for line in lines:
            item = line.removeprefix("  ")
            quoted = len(item) >= 2 and item[0] == item[-1] == '"'
            values.append(Literal(item[1:-1] if quoted else item, quoted))
        return IsIn(column, tuple(values))


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for ch in chars:
        if ch != "\\":
            out.append(ch)
            continue
        escaped = next(chars, "")
        if escaped not in _ESCAPES:
            raise Unparsed(f"escape \\{escaped}")
        out.append(_ESCAPES[escaped])
    return "".join(out)


def python_value(literal: Literal, data_type: pa.DataType) -> Any:
    """The Python value a literal printed next to a column of ``data_type`` stands for."""
    text = literal.text
    if not literal.quoted and text.startswith("null"):
        return None
    for test, convert in _LITERAL_PARSERS:
        if test(data_type):
            if literal.quoted != (convert is str):
                raise Unparsed(f"literal {text!r} for {data_type}")
            try:
                return convert(text)
            except (ValueError, decimal.InvalidOperation) as exc:
                raise Unparsed(str(exc)) from None
    raise Unparsed(f"literal of type {data_type}")


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


def rebuild(node: Node, schema: pa.Schema, hint: pa.DataType | None = None) -> pc.Expression:
    """The pyarrow Expression a tree stands for; ``hint`` types a bare literal."""
    if isinstance(node, Field):
        if schema.get_field_index(node.name) < 0:
            raise Unparsed(f"unknown column {node.name}")
        return pc.field(node.name)
    if isinstance(node, Literal):
        if hint is None:
            raise Unparsed("literal without a column to type it")
        if pa.types.is_timestamp(hint) and not node.quoted:
            return pc.scalar(_timestamp_scalar(node.text, hint))
        return pc.scalar(pa.scalar(python_value(node, hint), type=hint))
    if isinstance(node, IsIn):
        column_type = _column_type(node.column, schema)
        if column_type is None:
            raise Unparsed(f"unknown column {node.column.name}")
        values = pa.array([python_value(v, column_type) for v in node.values], type=column_type)
        return pc.Expression._call("is_in", [rebuild(node.column, schema)],
                                   pc.SetLookupOptions(values))
    if node.name in _CALLS:
        args = [rebuild(a, schema) for a in node.args]
        return pc.Expression._call(node.name, args, _CALLS[node.name]())
    left, right = node.args
    left_hint = _column_type(right, schema)
    right_hint = _column_type(left, schema)
    return pc.Expression._call(
        node.name, [rebuild(left, schema, left_hint), rebuild(right, schema, right_hint)]
    )


def _timestamp_scalar(text: str, data_type: pa.DataType) -> pa.Scalar:
    try:
        return pa.array([text]).cast(data_type)[0]
    except pa.ArrowException as exc:
        raise Unparsed(str(exc)) from None


def _column_type(node: Node, schema: pa.Schema) -> pa.DataType | None:
    if isinstance(node, Field) and schema.get_field_index(node.name) >= 0:
        return schema.field(node.name).type
    return None


def parse_expression(expression: pc.Expression, schema: pa.Schema) -> Node:
    """Read a filter DataFusion handed over back into a tree, or raise ``ValueError``.

    The tree is returned only when rebuilding it gives an Expression ``equals`` to the one
    received (same functions, options, columns, literal values and types).
    """
    node = _Parser(str(expression), schema.names).parse()
    if not rebuild(node, schema).equals(expression):
        raise Unparsed(f"rebuilt expression differs from {expression}")
    return node


def conjuncts(node: Node) -> list[Node]:
    """The operands of a top-level AND chain (the node itself when it is no AND)."""
    if isinstance(node, Call) and node.name == "and_kleene":
        return [c for arg in node.args for c in conjuncts(arg)]
    return [node]


def and_all(nodes: Sequence[pc.Expression]) -> pc.Expression | None:
    """The AND of ``nodes``, or None when there are none."""
    result: pc.Expression | None = None
    for node in nodes:
        result = node if result is None else result & node
    return result


def disjuncts(node: Node) -> list[Node]:
    """The operands of a top-level OR chain (the node itself when it is no OR)."""
    if isinstance(node, Call) and node.name == "or_kleene":
        return [d for arg in node.args for d in disjuncts(arg)]
    return [node]


def _expression_columns(node: Node) -> set[str]:
    if isinstance(node, Field):
        return {node.name}
    if isinstance(node, Call):
        return {c for arg in node.args for c in _expression_columns(arg)}
    if isinstance(node, IsIn):
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
    except Unparsed:
        return set(schema.names)
