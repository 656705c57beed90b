"""The typed lowering of a parsed s3-select statement onto a DataFusion AST.

s3-select is dynamically typed (a CSV field is text that becomes a number next to a number,
``1 + '2'`` is an error, ``5 = 'hello'`` is simply false); DataFusion is statically typed. The
:class:`Lowering` walks the sqlglot tree once, infers a static *kind* for every expression and
rewrites it into nodes whose DataFusion meaning is exact:

* references: positional ``_N``, header names, Parquet columns, table-alias prefixes and JSON
  paths become quoted column references (JSON paths are registered as extra input columns);
* aliases are expanded where used (each alias is lowered once and the lowered tree reused;
  DataFusion's common-subexpression elimination then computes it once per row within a
  projection); aliases the WHERE clause reads are instead computed once per row in subqueries
  below the filter and read as columns (``Lowering.materialize``); cyclic references are
  rejected;
* operators get the flavour's coercions (CSV text vs numbers, JSON text, timestamps); two
  numbers meet by one table, :data:`NUMBER_COERCION` (a decimal column stays decimal next to
  an integer and becomes a double next to a float), and a number literal next to a decimal is
  an exact decimal;
* functions map onto DataFusion builtins when their semantics are exact, else onto the UDFs of
  :mod:`select_dialect.udf_names`.

Anything not in the dispatch tables is rejected with :class:`UnsupportedFeatureError`; the
output tree is built only from nodes created here, never from user text.

The lowering is three layers, one module each: :class:`~select_dialect.lowering_base.LoweringBase`
(state, entry points, coercions, references), :class:`~select_dialect.lowering_operators.OperatorLowering`
(operators) and :class:`Lowering` here (the dispatch tables and the functions); the kinds and
their tables are :mod:`select_dialect.kinds`, the nodes they build :mod:`select_dialect.sql_nodes`,
:mod:`select_dialect.timestamp_nodes` and :mod:`select_dialect.like_patterns`.

Hand-written because the kinds are s3-select's, not SQL types (CSV field text that is a number
next to a number, JSON values, the S3_TIMESTAMP struct), and each coercion must name the
DataFusion expression that gives s3-select's answer; sqlglot's type annotation knows neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.errors import QuerySemanticError, UnsupportedFeatureError
from select_dialect.kinds import (
    AGGREGATE_KINDS,
    BOOL,
    DECIMAL,
    FLOAT,
    INT,
    JSON,
    MAX_DECIMAL_PRECISION,
    NATIVE_TS,
    NULL,
    NUMERIC,
    SQL_NUMBERS,
    SQL_ORDERED,
    STRING,
    TS,
    Kind,
    Typed,
)
from select_dialect.lowering_operators import OperatorLowering
from select_dialect.s3select import Missing
from select_dialect.sql_nodes import (
    INT_RE,
    boolean_constant,
    cast,
    describe,
    fn,
    is_aggregate,
    lit_str,
    paren,
    typed_null,
    without_json_null,
)
from select_dialect.timestamp_format import strftime_for
from select_dialect.timestamp_nodes import (
    DATE_PART_PRECISION,
    DURATION_NS,
    EXTRACT_LOCAL_PARTS,
    YEAR_BARRIER,
    local_time,
    utc_instant,
    whole_months_between,
)

# What Ceph's ``version()`` returns: the ceph/s3select release whose dialect is followed.
CEPH_S3SELECT_VERSION = "41.a"


class Lowering(OperatorLowering):
    """Typed lowering of one statement (state lives only as long as one translation): the
    tables of nodes and functions over the operators; its arguments are
    :class:`~select_dialect.lowering_base.LoweringBase`'s."""

    def _dispatch_table(self) -> dict[type[exp.Expression], Callable[[Any], Typed]]:
        return {
            exp.Literal: self._literal,
            exp.Boolean: lambda node: (exp.Boolean(this=bool(node.this)), BOOL),
            exp.Null: lambda _node: (exp.Null(), NULL),
            Missing: lambda _node: (exp.Null(), NULL),
            exp.Column: self._reference,
            exp.Dot: self._reference,
            exp.Bracket: self._reference,
            exp.Paren: self._paren,
            exp.Neg: self._neg,
            exp.Add: self._arithmetic,
            exp.Sub: self._arithmetic,
            exp.Mul: self._arithmetic,
            exp.Div: self._arithmetic,
            exp.Mod: self._arithmetic,
            exp.Pow: self._arithmetic,
            exp.EQ: self._comparison,
            exp.NEQ: self._comparison,
            exp.GT: self._comparison,
            exp.GTE: self._comparison,
            exp.LT: self._comparison,
            exp.LTE: self._comparison,
            exp.And: self._connective,
            exp.Or: self._connective,
            exp.Not: self._not,
            exp.Is: self._is,
            exp.Between: self._between,
            exp.In: self._in,
            exp.Like: self._like,
            exp.Escape: self._like,
            exp.Case: self._case,
            exp.If: self._case,
            exp.Cast: self._cast_node,
            exp.TryCast: self._cast_node,
            exp.Substring: self._substring,
            exp.Trim: self._trim,
            exp.Extract: self._extract,
            exp.Count: self._count,
            exp.Sum: self._sum_avg,
            exp.Avg: self._sum_avg,
            exp.Min: self._min_max,
            exp.Max: self._min_max,
            exp.Anonymous: self._anonymous,
            exp.Lower: self._case_fold,
            exp.Upper: self._case_fold,
            exp.Length: self._char_length,
            exp.Coalesce: self._coalesce_node,
            exp.Nullif: self._nullif_node,
            exp.Tuple: self._json_array,
            exp.Array: self._json_array,
            exp.DPipe: self._concat,
        }

    def _function_table(self) -> dict[str, Callable[[list[exp.Expression]], Typed]]:
        return {
            "INT": lambda args: self._cast(self._one(args, "int"), "int"),
            "FLOAT": lambda args: self._cast(self._one(args, "float"), "float"),
            "TO_TIMESTAMP": lambda args: (self.as_ts(self._one(args, "to_timestamp")), TS),
            "TIMESTAMP": lambda args: (self.as_ts(self._one(args, "timestamp")), TS),
            "LOWER": lambda args: (fn("lower", self.as_string(self._one(args, "lower"))), STRING),
            "UPPER": lambda args: (fn("upper", self.as_string(self._one(args, "upper"))), STRING),
            "CHAR_LENGTH": lambda args: self._length(self._one(args, "char_length")),
            "CHARACTER_LENGTH": lambda args: self._length(self._one(args, "character_length")),
            "COALESCE": self._coalesce,
            "NULLIF": self._nullif,
            "DATE_ADD": self._date_add,
            "DATE_DIFF": self._date_diff,
            "UTCNOW": self._utcnow,
            "TO_STRING": self._to_string,
            "ADD": self._add,
            "VERSION": self._version,
        }

    # ------------------------------------------------------------------ functions

    def _one(self, args: list[exp.Expression], name: str) -> Typed:
        if len(args) != 1:
            raise QuerySemanticError(f"{name} takes exactly one argument")
        return self.lower(args[0])

    def _anonymous(self, node: exp.Anonymous) -> Typed:
        name = str(node.this).upper()
        handler = self._functions.get(name)
        if handler is None:
            raise UnsupportedFeatureError(f"unsupported function: {name.lower()}")
        return handler(list(node.expressions))

    def _cast_node(self, node: exp.Cast) -> Typed:
        to: exp.DataType = node.args["to"]
        target = _CAST_TARGETS.get(to.this)
        if target is None:
            raise UnsupportedFeatureError(f"unsupported cast target: {to.sql()}")
        typed = self.lower(node.this)
        if target == "decimal":
            return self._cast_to_decimal(typed, to)
        if self.flavor.sql_types and to.this == exp.DataType.Type.TIMESTAMP:
            return self.as_native_ts(typed), NATIVE_TS
        return self._cast(typed, target)

    def _cast_to_decimal(self, typed: Typed, to: exp.DataType) -> Typed:
        """``CAST(x AS DECIMAL(p,s))``: s3-select's cast to a float (``cast(1.123456789 as
        decimal(9,1))`` is 1.123456789 in Ceph), except that a decimal stays a decimal, of the
        written precision and scale when they are given (DataFusion rounds half away from
        zero, and a value too wide for ``p`` is an error)."""
        if typed[1] != DECIMAL:
            return self._cast(typed, "float")
        params = [p.this for p in to.expressions if isinstance(p, exp.DataTypeParam)]
        if not params:
            return typed
        if len(params) > 2 or not all(
                isinstance(p, exp.Literal) and INT_RE.match(p.this) for p in params):
            raise QuerySemanticError(f"invalid decimal type: {to.sql()}")
        precision, scale = int(params[0].this), int(params[1].this) if len(params) == 2 else 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise QuerySemanticError(f"invalid decimal type: {to.sql()}")
        return cast(paren(typed[0]), f"DECIMAL({precision}, {scale})"), DECIMAL

    def _substring(self, node: exp.Substring) -> Typed:
        subject = self.as_string(self.lower(node.this))
        start_node = node.args.get("start")
        length_node = node.args.get("length")
        if start_node is None:
            raise QuerySemanticError("substring needs a start position")
        start = self._integer(self.lower(start_node))
        if self.flavor.substring_start_clamped:
            start = fn("greatest", start, exp.Literal.number(1))
        args = [subject, start]
        if length_node is not None:
            args.append(self._integer(self.lower(length_node)))
        return fn("substr", *args), STRING

    def _integer(self, typed: Typed) -> exp.Expression:
        if typed[1] == INT:
            return typed[0]
        return cast(paren(self.as_number(typed)), "BIGINT")

    def _trim(self, node: exp.Trim) -> Typed:
        subject = self.as_string(self.lower(node.this))
        chars_node = node.args.get("expression")
        chars = self.as_string(self.lower(chars_node)) if chars_node is not None else lit_str(" ")
        position = str(node.args.get("position") or "BOTH").upper()
        name = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}[position]
        return fn(name, subject, chars), STRING

    def _extract(self, node: exp.Extract) -> Typed:
        part = _part_name(node.this)
        ts = self.as_ts(self.lower(node.expression))
        if part in EXTRACT_LOCAL_PARTS:
            # through DOUBLE: DataFusion 55 rewrites `date_part('year', t) <op> n` into a range
            # of timestamps, NULL when year n is outside nanosecond range (1677..2262), so
            # `extract(year …) <> 13` was NULL; it does not see through this double cast.
            # :meth:`compare` lifts it where the rewrite is exact (see _YEARS_AS_RANGES).
            part_value = cast(fn("date_part", lit_str(part), local_time(ts)), "DOUBLE")
            if part == "year":
                part_value.meta[YEAR_BARRIER] = True
            return cast(part_value, "BIGINT"), INT
        offset = cast(fn("get_field", ts, lit_str("offset_minutes")), "BIGINT")
        if part == "timezone_hour":
            return exp.Paren(this=exp.Div(this=offset, expression=exp.Literal.number(60))), INT
        if part == "timezone_minute":
            return exp.Paren(this=exp.Mod(this=offset, expression=exp.Literal.number(60))), INT
        raise QuerySemanticError(f"unsupported date part in extract: {part}")

    def _count(self, node: exp.Count) -> Typed:
        arg = node.this
        if arg is None or isinstance(arg, (exp.Star, exp.Literal)):
            return fn("count", exp.Star()), INT
        typed = self.lower(arg)
        if typed[1] == NULL or boolean_constant(typed[0]) is None:  # no row has a value
            return fn("count", exp.Null()), INT
        self._no_nested_aggregate(arg)
        if typed[1] == JSON:  # a JSON null is not counted
            return fn("count", without_json_null(typed[0])), INT
        return fn("count", typed[0]), INT

    def _sum_avg(self, node: exp.Expression) -> Typed:
        self._no_nested_aggregate(node.this)
        typed = self.lower(node.this)
        name = "sum" if isinstance(node, exp.Sum) else "avg"
        if self.flavor.sql_types and typed[1] not in SQL_NUMBERS:
            raise self._sql_argument_error(name, node.this, typed[1])
        kind = AGGREGATE_KINDS.get((name, typed[1]), FLOAT)
        if boolean_constant(typed[0]) is None:
            return self._aggregate_of_null(kind), kind
        return fn(name, self.as_number(typed)), kind

    def _min_max(self, node: exp.Expression) -> Typed:
        if node.expressions:
            raise QuerySemanticError("min/max take one argument")
        self._no_nested_aggregate(node.this)
        typed = self.lower(node.this)
        name = "min" if isinstance(node, exp.Min) else "max"
        ordered = SQL_ORDERED if self.flavor.sql_types else NUMERIC | {STRING}
        if typed[1] == NULL or boolean_constant(typed[0]) is None:
            kind = typed[1] if typed[1] in ordered else NULL
            return self._aggregate_of_null(kind), kind  # still an aggregate: one row
        if typed[1] in ordered:  # SQL orders text as text, timestamps as instants
            return fn(name, typed[0]), typed[1]
        number = self.as_number(typed)
        return fn(name, number), FLOAT

    def _aggregate_of_null(self, kind: Kind) -> exp.Expression:
        """SUM/AVG/MIN/MAX of a NULL constant: a NULL of ``kind``, still an aggregate (one row
        per group), written ``max(NULL)`` under the cast. DataFusion names an aggregate of
        ``CAST(NULL AS T)`` after the NULL alone, so two of them of different types in one
        query collided ("duplicate unqualified field name")."""
        null = (typed_null(FLOAT) if kind == NULL else self.null_of(kind)).copy()
        inner = null.find(exp.Null)
        assert inner is not None  # every typed NULL holds one
        inner.replace(fn("max", exp.Null()))
        return null

    def _no_nested_aggregate(self, node: exp.Expression | None) -> None:
        if node is not None and is_aggregate(node):
            raise QuerySemanticError("aggregate functions cannot be nested")

    def _case_fold(self, node: exp.Expression) -> Typed:
        name = "lower" if isinstance(node, exp.Lower) else "upper"
        return fn(name, self.as_string(self.lower(node.this))), STRING

    def _char_length(self, node: exp.Length) -> Typed:
        return self._length(self.lower(node.this))

    def _length(self, typed: Typed) -> Typed:
        return fn("character_length", self.as_string(typed)), INT

    def _coalesce_node(self, node: exp.Coalesce) -> Typed:
        return self._coalesce([node.this, *node.expressions])

    def _coalesce(self, args: list[exp.Expression]) -> Typed:
        if not args:
            raise QuerySemanticError("coalesce needs at least one argument")
        values = [self.lower(arg) for arg in args]
        unified, kind = self.unify(values)
        if kind == NULL:
            return exp.Null(), NULL
        if kind == JSON:  # a JSON null is passed over like a NULL (the last stays as it is)
            unified = [without_json_null(v) for v in unified[:-1]] + unified[-1:]
        return exp.Coalesce(this=unified[0], expressions=unified[1:]), kind

    def _nullif_node(self, node: exp.Nullif) -> Typed:
        return self._nullif([node.this, node.expression])

    def _nullif(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 2:
            raise QuerySemanticError("nullif takes two arguments")
        first = self.lower(args[0])
        second = self.lower(args[1])
        if first[1] == NULL:
            return exp.Null(), NULL
        equal = self.compare(exp.EQ, first, second)
        return exp.Case(ifs=[exp.If(this=equal, true=self.null_of(first[1]))], default=first[0].copy()), first[1]

    def _date_part_arg(self, node: exp.Expression, function: str) -> str:
        part = _part_name(node)
        if part not in DATE_PART_PRECISION:
            raise QuerySemanticError(f"{function}: unsupported date part {part}")
        return part

    def _date_add(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 3:
            raise QuerySemanticError("date_add takes three arguments")
        part = self._date_part_arg(args[0], "date_add")
        amount = self._integer(self.lower(args[1]))
        ts = self.as_ts(self.lower(args[2]))
        if part == "year" and self.flavor.year_keeps_month_end:
            part = U.CEPH_YEAR  # boost's years: the last day of a month stays the last
        return fn(U.DATE_ADD, lit_str(part), amount, ts), TS

    def _date_diff(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 3:
            raise QuerySemanticError("date_diff takes three arguments")
        part = self._date_part_arg(args[0], "date_diff")
        first = self.as_ts(self.lower(args[1]))
        second = self.as_ts(self.lower(args[2]))
        unit_ns = DURATION_NS.get(part)
        if unit_ns is not None:
            # whole units between the instants, truncated toward zero (integer division)
            delta = exp.Sub(this=cast(utc_instant(second), "BIGINT"),
                            expression=cast(utc_instant(first), "BIGINT"))
            return exp.Paren(this=exp.Div(this=exp.Paren(this=delta),
                                          expression=exp.Literal.number(unit_ns))), INT
        months = whole_months_between(utc_instant(first), utc_instant(second))
        if part == "year":
            return exp.Paren(this=exp.Div(this=months, expression=exp.Literal.number(12))), INT
        return months, INT

    def _utcnow(self, args: list[exp.Expression]) -> Typed:
        if args:
            raise QuerySemanticError("utcnow takes no arguments")
        now = fn("date_trunc", lit_str("second"), fn("now"))
        # Ceph prints utcnow() with "+00:00" (no zone written); AWS writes "Z".
        convert = U.TIMESTAMP_Z if self.flavor.utcnow_in_z else U.TIMESTAMP_FROM_UTC
        return fn(convert, now, exp.Literal.number(4)), TS

    def _add(self, args: list[exp.Expression]) -> Typed:
        """Ceph's ``add(a, b)``: the ``+`` operator as a function."""
        if len(args) != 2:
            raise QuerySemanticError("add takes two arguments")
        return self._arithmetic(exp.Add(this=args[0], expression=args[1]))

    def _version(self, args: list[exp.Expression]) -> Typed:
        """Ceph's ``version()``: the s3select engine version whose dialect this follows."""
        if args:
            raise QuerySemanticError("version takes no arguments")
        if not self.flavor.version_function:
            raise UnsupportedFeatureError("unsupported function: version")
        return lit_str(CEPH_S3SELECT_VERSION), STRING

    def _to_string(self, args: list[exp.Expression]) -> Typed:
        if len(args) != 2:
            raise QuerySemanticError("to_string takes two arguments")
        ts = self.as_ts(self.lower(args[0]))
        pattern = self.as_string(self.lower(args[1]))
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            # Every S3_TIMESTAMP is a nanosecond timestamp, so its year has four digits.
            strftime = strftime_for(pattern.this)
            if strftime is not None:
                return fn("to_char", local_time(ts), lit_str(strftime)), STRING
        return fn(U.TO_STRING, ts, pattern), STRING


_CAST_TARGETS: dict[Any, str] = {
    exp.DataType.Type.INT: "int",
    exp.DataType.Type.BIGINT: "int",
    exp.DataType.Type.SMALLINT: "int",
    exp.DataType.Type.TINYINT: "int",
    exp.DataType.Type.FLOAT: "float",
    exp.DataType.Type.DOUBLE: "float",
    exp.DataType.Type.DECIMAL: "decimal",
    exp.DataType.Type.TEXT: "string",
    exp.DataType.Type.VARCHAR: "string",
    exp.DataType.Type.CHAR: "string",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamp",
}


def _part_name(node: exp.Expression) -> str:
    if isinstance(node, (exp.Var, exp.Identifier)):
        return str(node.this).lower()
    if isinstance(node, exp.Column) and not node.table:
        return node.name.lower()
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this).lower()
    raise QuerySemanticError(f"expected a date part, got {describe(node)}")
