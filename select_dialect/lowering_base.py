"""The core of the typed lowering: its per-statement state, the entry points, the coercions of
one kind to another, literals, and references (positional ``_N``, header names, Parquet
columns, JSON paths, aliases).

:class:`LoweringBase` is the first of three layers; operators
(:mod:`select_dialect.lowering_operators`) and functions with the dispatch tables
(:mod:`select_dialect.lowering`) build on it. The flavour's rules are the flags of its
:class:`~select_dialect.flavors.Flavor` record; nothing here names a flavour.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.errors import QuerySemanticError, UnsupportedFeatureError
from select_dialect.flavors import Flavor
from select_dialect.kinds import (
    BOOL,
    COLUMN_KINDS,
    DECIMAL,
    FIELD,
    FLOAT,
    INT,
    JSON,
    NATIVE_TS,
    NULL,
    NUMBER_CASTS,
    NUMERIC,
    SQL_NUMBERS,
    SQL_TYPE_NAMES,
    STRING,
    TEXTUAL,
    TS,
    Column,
    Kind,
    Typed,
)
from select_dialect.sql_nodes import (
    INT64_MAX,
    INT_RE,
    NUMBER_TEXT_RE,
    OPERATOR_SIGNS,
    POSITIONAL_RE,
    cast,
    col,
    describe,
    fn,
    guarded_cast_float,
    guarded_cast_int,
    listing,
    lit_str,
    null_as_false,
    paren,
    typed_null,
)
from select_dialect.timestamp_nodes import (
    is_native_timestamp,
    native_timestamp,
    utc_instant,
)

_CYCLE_MESSAGE = "number of calls exceed maximum size, probably a cyclic reference to alias"


@dataclass
class LoweringState:
    """Per-statement facts collected while lowering (read by :mod:`select_dialect.translate`)."""

    json_paths: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)
    max_positional: int = 0
    positions: set[int] = field(default_factory=set)
    """Every CSV field position the statement reads (``_N``, or a header name's)."""


class LoweringBase:
    """The core of the typed lowering of one statement (its state lasts one translation).

    Args:
        input_format: ``csv``, ``json`` or ``parquet``.
        flavor: the flavour whose rules apply (its flags; never its name).
        columns: Parquet columns (name, type) in file order.
        header: CSV header names (``FileHeaderInfo USE``), in file order.
        table_names: names that may prefix a column (``s3object``, the FROM alias, ...).
        aliases: projection aliases (lower-case name -> parsed expression).
        empty_fields_are_null: the reader gives CSV empty fields as ``''``; each field
            reference reads one as NULL (``NULLIF(field, '')``), as the ceph flavour does.
    """

    def __init__(
        self,
        *,
        input_format: str,
        flavor: Flavor,
        columns: Sequence[Column] | None,
        header: Sequence[str] | None,
        table_names: Iterable[str],
        aliases: dict[str, exp.Expression],
        empty_fields_are_null: bool = False,
    ) -> None:
        self.input_format = input_format
        self.empty_fields_are_null = empty_fields_are_null
        self.flavor = flavor
        self.columns = list(columns or [])
        self.header = list(header or [])
        self.table_names = {name.lower() for name in table_names}
        self.aliases = aliases
        self.state = LoweringState()
        self._alias_done: dict[str, Typed] = {}
        self._alias_stack: list[str] = []
        # Aliases computed once per row in a subquery below the WHERE clause (see translate):
        # name -> (column name, lowered expression).
        self.materialize: set[str] = set()
        # name -> (column name, lowered expression, subquery level: 1 + the deepest level of
        # the materialized aliases it reads)
        self.materialized: dict[str, tuple[str, exp.Expression, int]] = {}
        self._reads: list[set[str]] = []
        self._json_by_steps: dict[tuple[tuple[Any, ...], ...], str] = {}
        self._dispatch = self._dispatch_table()
        self._functions = self._function_table()

    def _dispatch_table(self) -> dict[type[exp.Expression], Callable[[Any], Typed]]:
        """How each kind of node lowers (the subclass that lowers whole statements says)."""
        return {}

    def _function_table(self) -> dict[str, Callable[[list[exp.Expression]], Typed]]:
        """How each s3-select function by name lowers (as :meth:`_dispatch_table`)."""
        return {}

    # ------------------------------------------------------------------ entry points

    def lower(self, node: exp.Expression) -> Typed:
        """Lower one expression; returns the DataFusion node and its kind."""
        handler = self._dispatch.get(type(node))
        if handler is None:
            raise UnsupportedFeatureError(f"unsupported expression: {describe(node)}")
        return handler(node)

    def lower_alias(self, name: str) -> Typed:
        """Lower the projection defined ``AS name`` (once; later uses get a copy)."""
        return self._alias(name.lower())

    def lower_condition(self, node: exp.Expression) -> exp.Expression:
        """Lower a WHERE condition to a boolean expression."""
        return null_as_false(self.as_bool(self.lower(node)))

    def output_name(self, node: exp.Expression) -> str | None:
        """Display name of a bare reference (last path step / column name), else None."""
        if isinstance(node, exp.Paren):
            return None
        steps = self._steps(node)
        if steps is None:
            return None
        if self.flavor.double_quotes_are_strings and len(steps) == 1 and isinstance(steps[0], _Quoted):
            return None  # a Ceph string literal
        names = [s for s in steps if isinstance(s, str) and s is not _ANY_INDEX]
        if not names:
            return None
        if self.flavor.unnamed_index_paths and names[-1] is not steps[-1]:
            return None  # MinIO names a path that ends in an index `_N`, like an expression
        last = names[-1]
        if self.input_format == "json" and len(names) == 1 and names[0].lower() in self.table_names | {"_1"}:
            return None
        return last

    # ------------------------------------------------------------------ coercions

    def as_number(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind in NUMERIC:
            return node
        if kind == NULL:
            return typed_null(FLOAT)
        if kind == FIELD:
            return exp.TryCast(this=fn("btrim", node), to=exp.DataType.build("DOUBLE"))
        if kind == JSON:
            return fn(U.JSON_TO_DOUBLE, node)
        if kind == BOOL:
            return cast(paren(node), "BIGINT")
        if kind == STRING:
            if isinstance(node, exp.Literal):
                raise QuerySemanticError("illegal binary operation with string")
            return exp.TryCast(this=fn("btrim", node), to=exp.DataType.build("DOUBLE"))
        raise QuerySemanticError(f"a {kind} value cannot be used as a number")

    def as_kind(self, typed: Typed, target: Kind) -> exp.Expression:
        """A number brought to ``target`` (a kind of :data:`NUMBER_COERCION`)."""
        node = self.as_number(typed)
        source = typed[1] if typed[1] in NUMERIC else FLOAT
        to = NUMBER_CASTS.get((source, target))
        return cast(paren(node), to) if to is not None else node

    def as_string(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind in TEXTUAL:
            return node
        if kind == JSON:
            return fn(U.JSON_TO_STRING, node)
        if kind == TS:
            return fn(U.TIMESTAMP_TO_STRING, node)
        if kind == NATIVE_TS and self.flavor.sql_types:  # DataFusion's text: no zone
            return cast(paren(node), "VARCHAR")
        if kind == NATIVE_TS:
            return fn(U.TIMESTAMP_TO_STRING, self.as_ts(typed))
        if kind == NULL:
            return typed_null(STRING)
        return cast(node, "VARCHAR")

    def as_bool(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind == BOOL:
            return node
        if kind == NULL:
            return typed_null(BOOL)
        if kind in NUMERIC:
            return exp.NEQ(this=paren(node), expression=exp.Literal.number(0))
        if kind in TEXTUAL:
            return fn(U.STRING_TO_BOOL, node)
        if kind == JSON:
            return fn(U.STRING_TO_BOOL, fn(U.JSON_TO_STRING, node))
        raise QuerySemanticError(f"a {kind} value cannot be used as a boolean")

    def as_logical(self, typed: Typed) -> exp.Expression:
        """An operand of AND/OR/NOT: a non-boolean string counts as true (Ceph:
        ``not 'any_string'`` is false) unless it spells a boolean or a number."""
        node, kind = typed
        if kind == STRING and isinstance(node, exp.Literal):
            lowered = node.this.strip().lower()
            if lowered not in ("true", "false") and not NUMBER_TEXT_RE.match(lowered):
                return exp.Boolean(this=True)
        return self.as_bool(typed)

    def as_ts(self, typed: Typed) -> exp.Expression:
        node, kind = typed
        if kind == TS:
            return node
        if kind == NATIVE_TS:
            # precision -1: never written as text, so the aws flavour prints it shortest
            return fn(
                U.TIMESTAMP_FROM_UTC,
                cast(node, "TIMESTAMP"),
                exp.Literal.number(-1),
            )
        if kind == NULL:
            return typed_null(TS)
        if kind in TEXTUAL:
            return fn(U.TO_TIMESTAMP, node)
        if kind == JSON:
            return fn(U.TO_TIMESTAMP, fn(U.JSON_TO_STRING, node))
        raise QuerySemanticError(f"a {kind} value cannot be used as a timestamp")

    def as_native_ts(self, typed: Typed) -> exp.Expression:
        """SQL's ``CAST(x AS TIMESTAMP)`` (standard flavour): DataFusion's zone-less timestamp.
        Text is read by DataFusion's cast (an offset is converted to UTC; text that is no
        timestamp fails the query, naming it); an s3-select timestamp gives its instant."""
        node, kind = typed
        if kind == NATIVE_TS and is_native_timestamp(node):
            return node
        if kind in TEXTUAL or kind == NATIVE_TS:
            return native_timestamp(node)
        if kind == TS:
            return native_timestamp(utc_instant(node))
        if kind == JSON:
            return native_timestamp(fn(U.JSON_TO_STRING, node))
        if kind == NULL:
            return native_timestamp(exp.Null())
        raise QuerySemanticError(f"cannot cast {SQL_TYPE_NAMES[kind]} to TIMESTAMP",
                                 code="InvalidCast")

    def null_of(self, kind: Kind) -> exp.Expression:
        """A NULL of ``kind`` (:func:`typed_null`); in standard SQL a timestamp's NULL is a
        TIMESTAMP, so NULLIF and COALESCE of timestamps stay timestamps. (The s3-select flavours
        keep their VARCHAR NULL here: NULLIF of a Parquet timestamp there is text.)"""
        if kind == NATIVE_TS and self.flavor.sql_types:
            return native_timestamp(exp.Null())
        return typed_null(kind)

    def _sql_numbers(self, node: exp.Expression, *operands: tuple[exp.Expression, Typed]
                     ) -> None:
        """Standard SQL: arithmetic takes numbers only (no text read as a number)."""
        kinds = [typed[1] for _, typed in operands]
        wrong = [(source, typed[1]) for source, typed in operands if typed[1] not in SQL_NUMBERS]
        if not wrong:
            return
        sign = OPERATOR_SIGNS.get(type(node), "-")
        types = f" {sign} ".join(SQL_TYPE_NAMES[k] for k in kinds)
        source, kind = wrong[0]
        raise QuerySemanticError(
            f"{types if len(kinds) > 1 else sign + types} is not defined: {describe(source)} "
            f"is {SQL_TYPE_NAMES[kind]}{_cast_hint(source, kind, '{}')}",
            code="InvalidDataType")

    def _sql_argument_error(self, name: str, source: exp.Expression, kind: Kind
                            ) -> QuerySemanticError:
        """Standard SQL: ``sum``/``avg`` of something that is not a number."""
        return QuerySemanticError(
            f"{name}({SQL_TYPE_NAMES[kind]}) is not defined: {name} takes a number and "
            f"{describe(source)} is {SQL_TYPE_NAMES[kind]}"
            f"{_cast_hint(source, kind, name + '({})')}",
            code="IncorrectSqlFunctionArgumentType")

    def _cast(self, typed: Typed, target: str) -> Typed:
        node, kind = typed
        number = _NUMBER_CAST_TARGETS.get(target)
        if number is not None:
            result, sql_type, from_text = number
            if kind == result:
                return node, result
            if kind == NULL:
                return typed_null(result), result
            if kind in NUMERIC or kind == BOOL:  # a number to int: toward zero, as s3-select
                return cast(paren(node), sql_type), result
            if kind in TEXTUAL or kind == JSON:
                return from_text(self.as_string(typed)), result
            raise QuerySemanticError(f"cannot cast a {kind} value to {target}")
        converters: dict[str, tuple[Callable[[Typed], exp.Expression], Kind]] = {
            "string": (self.as_string, STRING),
            "bool": (self.as_bool, BOOL),
            "timestamp": (self.as_ts, TS),
        }
        convert, result = converters[target]
        return convert(typed), result

    # ------------------------------------------------------------------ leaves

    def _literal(self, node: exp.Literal) -> Typed:
        text = node.this
        if node.is_string:
            return lit_str(text), STRING
        if INT_RE.match(text) and int(text) <= INT64_MAX:
            return exp.Literal.number(int(text)), INT
        try:
            value = float(text)
        except ValueError as exc:
            raise QuerySemanticError(f"invalid number {text}") from exc
        if value != value or value in (float("inf"), float("-inf")):
            raise QuerySemanticError(f"invalid number {text}")
        return exp.Literal.number(text), FLOAT

    def _paren(self, node: exp.Paren) -> Typed:
        inner, kind = self.lower(node.this)
        return exp.Paren(this=inner), kind

    def _neg(self, node: exp.Neg) -> Typed:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string and INT_RE.match(inner.this):
            value = int(inner.this)
            if value == INT64_MAX + 1:
                return exp.Paren(this=exp.Sub(this=exp.Neg(this=exp.Literal.number(INT64_MAX)), expression=exp.Literal.number(1))), INT
        typed = self.lower(inner)
        if typed[1] == NULL:
            return typed
        if self.flavor.sql_types:
            self._sql_numbers(node, (inner, typed))
        number = self.as_number(typed)
        return exp.Neg(this=paren(number)), (typed[1] if typed[1] in NUMERIC else FLOAT)

    # ------------------------------------------------------------------ references

    def _steps(self, node: exp.Expression) -> list[Any] | None:
        """Flatten a column / dot / bracket chain into steps (str key, int index, '*')."""
        if isinstance(node, exp.Column):
            parts = [p for p in node.parts if isinstance(p, exp.Identifier)]
            return [p.this if not p.quoted else _Quoted(p.this) for p in parts] if len(
                parts
            ) == len(node.parts) else None
        if isinstance(node, exp.Dot):
            left = self._steps(node.this)
            right = node.expression
            if left is None or not isinstance(right, exp.Identifier):
                return None
            return [*left, right.this if not right.quoted else _Quoted(right.this)]
        if isinstance(node, exp.Bracket):
            left = self._steps(node.this)
            if left is None or len(node.expressions) != 1:
                return None
            key = node.expressions[0]
            if isinstance(key, exp.Star):
                return [*left, _ANY_INDEX]
            if isinstance(key, exp.Literal) and key.is_string:
                return [*left, _Quoted(key.this)]
            if isinstance(key, exp.Literal) and INT_RE.match(key.this):
                return [*left, int(key.this)]
            return None
        return None

    def _reference(self, node: exp.Expression) -> Typed:
        steps = self._steps(node)
        if steps is None:
            raise UnsupportedFeatureError(f"unsupported reference: {describe(node)}")
        first = steps[0]
        # Ceph: a bare double-quoted name is a string literal.
        if self.flavor.double_quotes_are_strings and len(steps) == 1 and isinstance(first, _Quoted):
            return lit_str(str(first)), STRING
        if (len(steps) == 1 and isinstance(first, str) and not isinstance(first, _Quoted)
                and first.lower() == "missing"):
            return exp.Null(), NULL
        if len(steps) > 1 and isinstance(first, str) and first.lower() in self.table_names:
            steps = steps[1:]
        elif len(steps) == 1 and isinstance(first, str) and self.input_format == "json" and first.lower() in self.table_names and first.lower() not in self.aliases:
            return self._json_path(()), JSON
        if self.input_format == "json":
            return self._json_reference(steps)
        if len(steps) != 1 or not isinstance(steps[0], str):
            raise UnsupportedFeatureError(
                f"nested paths need JSON input: {describe(node)}"
            )
        return self._name(steps[0])

    def _name(self, name: str) -> Typed:
        quoted = isinstance(name, _Quoted)
        key = name.lower()
        if key in self.aliases and (not quoted or self.flavor.aws_names):
            if key not in self._alias_stack:
                return self._alias(key)
            if not self._is_column(name):
                raise QuerySemanticError(_CYCLE_MESSAGE)
        positional = POSITIONAL_RE.match(name)
        if self.input_format == "parquet":
            return self._parquet_column(name, positional)
        if positional:
            position = int(positional.group(1))
            if position < 1:
                raise QuerySemanticError(f"invalid column {name}")
            self.state.max_positional = max(self.state.max_positional, position)
            self.state.positions.add(position)
            return self._field(position), FIELD
        if not quoted:
            self._check_unambiguous(name, self.header)
        index = self._header_index(name, quoted)
        if index is None:
            raise self._unknown_column(name)
        self.state.max_positional = max(self.state.max_positional, index)
        self.state.positions.add(index)
        return self._field(index), FIELD

    def _field(self, position: int) -> exp.Expression:
        """CSV field ``position`` as the statement reads it."""
        field = col(f"_{position}")
        if self.empty_fields_are_null:
            return fn("nullif", field, lit_str(""))
        return field

    def _check_unambiguous(self, name: str, names: Sequence[str]) -> None:
        """AWS: an unquoted name matching several names that differ in case is an error (a
        quoted name picks one; Ceph takes the exact match, else the first)."""
        if not self.flavor.aws_names:
            return
        spellings = sorted({n for n in names if n.lower() == name.lower()})
        if len(spellings) > 1:
            example = spellings[0].replace('"', '""')
            raise QuerySemanticError(
                f"{name} is ambiguous: it matches {listing(spellings)}, which differ in case; "
                f'quote the one you mean (a quoted name matches its own case), e.g. '
                f's3object."{example}"',
                code="AmbiguousFieldName",
            )

    def _unknown_column(self, name: str) -> QuerySemanticError:
        """Ceph's text (the corpus matches it), then what the user can write instead."""
        if self.input_format == "parquet":
            hint = f"; the columns are: {listing([c.name for c in self.columns]) or 'none'}"
        elif self.header:
            hint = f"; the header (FileHeaderInfo USE) names: {listing(self.header)}"
        else:
            hint = ("; without a header the columns are _1, _2, ...: set FileHeaderInfo "
                    "to USE to name them by the first line")
        return QuerySemanticError(
            f"alias {{{name}}} or column not exist in schema{hint}",
            code=self.flavor.missing_column_code,
        )

    def _is_column(self, name: str) -> bool:
        if self.input_format == "parquet":
            return any(c.name.lower() == name.lower() for c in self.columns)
        return POSITIONAL_RE.match(name) is not None or self._header_index(name, False) is not None

    def _header_index(self, name: str, quoted: bool) -> int | None:
        for i, header_name in enumerate(self.header):
            if header_name == name:
                return i + 1
        if not quoted or not self.flavor.aws_names:
            for i, header_name in enumerate(self.header):
                if header_name.lower() == name.lower():
                    return i + 1
        return None

    def _parquet_column(self, name: str, positional: re.Match[str] | None) -> Typed:
        if not isinstance(name, _Quoted):
            self._check_unambiguous(name, [c.name for c in self.columns])
        match = next((c for c in self.columns if c.name == name), None)
        if match is None and (not self.flavor.aws_names or not isinstance(name, _Quoted)):
            match = next((c for c in self.columns if c.name.lower() == name.lower()), None)
        if match is None and positional:
            index = int(positional.group(1))
            if 1 <= index <= len(self.columns):
                match = self.columns[index - 1]
        if match is None:
            raise self._unknown_column(name)
        kind = DECIMAL if match.decimal_scale is not None else COLUMN_KINDS.get(match.type, STRING)
        return col(match.name), kind

    def _json_reference(self, steps: list[Any]) -> Typed:
        first = steps[0]
        if isinstance(first, str) and not isinstance(first, _Quoted) and first.lower() in self.aliases and first.lower() not in self._alias_stack and len(steps) == 1:
            return self._alias(first.lower())
        if isinstance(first, str) and first.lower() == "_1":
            steps = steps[1:]
        path: list[tuple[Any, ...]] = []
        for step in steps:
            if step is _ANY_INDEX:
                path.append(("any_index",))
            elif isinstance(step, int):
                path.append(("index", step))
            else:
                path.append((self._key_step_kind(step), str(step)))
        return self._json_path(tuple(path)), JSON

    def _key_step_kind(self, step: str) -> str:
        """How a JSON key step matches (the reader's step kinds, json_input's docstring).

        AWS's rules: a quoted key matches its own case only; an unquoted one matches any case,
        and several keys of one object matching it is an AmbiguousFieldName. Ceph matches
        every key case-insensitively, the last of several winning."""
        if not self.flavor.aws_names:
            return "key"
        return "exact_key" if isinstance(step, _Quoted) else "only_key"

    def _json_path(self, path: tuple[tuple[Any, ...], ...]) -> exp.Expression:
        name = self._json_by_steps.get(path)
        if name is None:
            name = f"j{len(self._json_by_steps)}"
            self._json_by_steps[path] = name
            self.state.json_paths[name] = path
        return col(name)

    def _alias(self, key: str) -> Typed:
        done = self._alias_done.get(key)
        if done is None:
            done = self._lower_alias_once(key)
        if key in self.materialized and self._reads:
            self._reads[-1].add(key)
        return done[0].copy(), done[1]

    def _lower_alias_once(self, key: str) -> Typed:
        if len(self._alias_stack) > 64:
            raise QuerySemanticError(_CYCLE_MESSAGE)
        self._alias_stack.append(key)
        self._reads.append(set())
        try:
            typed = self.lower(self.aliases[key])
        finally:
            self._alias_stack.pop()
            reads = self._reads.pop()
        if key in self.materialize:
            name = f"__alias_{len(self.materialized)}"
            level = 1 + max((self.materialized[r][2] for r in reads), default=0)
            self.materialized[key] = (name, typed[0], level)
            typed = (col(name), typed[1])
        self._alias_done[key] = typed
        return typed


class _Quoted(str):
    """A name that was written in double quotes."""


_ANY_INDEX = _Quoted("[*]")


# Cast targets that are numbers: (kind, DataFusion type for a number or boolean, the guarded
# cast for text, which answers what s3-select answers or raises its error).
_NUMBER_CAST_TARGETS: dict[str, tuple[Kind, str, Callable[[exp.Expression], exp.Expression]]] = {
    "int": (INT, "BIGINT", guarded_cast_int),
    "float": (FLOAT, "DOUBLE", guarded_cast_float),
}


def _cast_hint(source: exp.Expression, kind: Kind, shape: str) -> str:
    """For text: how to ask for a number (``; cast it: sum(CAST(_1 AS DOUBLE))``)."""
    if kind not in TEXTUAL:
        return ""
    return "; cast it to a number: " + shape.format(f"CAST({describe(source)} AS DOUBLE)")
