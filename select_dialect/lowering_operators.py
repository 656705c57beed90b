"""Operators of the typed lowering: arithmetic, comparisons (numbers, decimals, text, JSON
values, timestamps), AND/OR/NOT, IS, BETWEEN, IN, LIKE, CASE and ``||``, each with the
flavour's coercions; :meth:`OperatorLowering.unify` brings several values to one kind (CASE,
COALESCE).
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Sequence

from sqlglot import exp

from select_dialect import udf_names as U
from select_dialect.errors import QuerySemanticError, UnsupportedFeatureError
from select_dialect.kinds import (
    BOOL,
    DECIMAL,
    FIELD,
    FLOAT,
    INT,
    JSON,
    MAX_DECIMAL_PRECISION,
    NATIVE_TS,
    NULL,
    NUMBER_COERCION,
    NUMERIC,
    SQL_TYPE_NAMES,
    STRING,
    TEXTUAL,
    TS,
    Kind,
    Typed,
)
from select_dialect.like_patterns import (
    like_to_builtin_pattern,
    like_to_regex,
)
from select_dialect.lowering_base import LoweringBase
from select_dialect.s3select import Missing
from select_dialect.sql_nodes import (
    FLIPPED_COMPARISONS,
    INT64_MAX,
    NUMBER_TEXT_RE,
    SIGNED_INT_RE,
    WIDE_CONTEXT,
    balanced,
    boolean_constant,
    cast,
    columns_first,
    describe,
    exact_decimal_literal,
    flatten,
    fn,
    fold_constants,
    lit_str,
    number_literal_value,
    paren,
    typed_null,
)
from select_dialect.timestamp_nodes import (
    utc_instant,
    year_as_range,
)

_ARRAY_NODES = (exp.Tuple, exp.Array)


def _static_json(node: exp.Expression, kind: str) -> str | None:
    """JSON text of a literal known while translating (else None)."""
    if isinstance(node, exp.Literal):
        text = str(node.this)
        return json.dumps(text) if node.is_string and kind in TEXTUAL else text
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Null):
        return "null"
    return None


def _number_kind(kind: Kind) -> Kind:
    """The kind an operand has as a number (what :meth:`Lowering.as_number` gives)."""
    return kind if kind in NUMERIC else FLOAT


class OperatorLowering(LoweringBase):
    """Operators on top of :class:`~select_dialect.lowering_base.LoweringBase`."""

    # ------------------------------------------------------------------ operators

    def _arithmetic(self, node: exp.Expression) -> Typed:
        left = self.lower(node.this)
        right = self.lower(node.expression)
        if self.flavor.sql_types:
            self._sql_numbers(node, (node.this, left), (node.expression, right))
        for side in (left, right):
            if side[1] == STRING and isinstance(side[0], exp.Literal):
                raise QuerySemanticError("illegal binary operation with string")
        if NULL in (left[1], right[1]):
            return exp.Null(), NULL
        if isinstance(node, exp.Pow):
            a, b = paren(self.as_number(left)), paren(self.as_number(right))
            return fn("power", a, b), FLOAT
        kind = NUMBER_COERCION[frozenset({_number_kind(left[1]), _number_kind(right[1])})]
        a = paren(self.as_kind(left, kind))
        b = paren(self.as_kind(right, kind))
        klass: type[exp.Expression] = type(node)
        return klass(this=a, expression=b), kind

    def _comparison(self, node: exp.Expression) -> Typed:
        if isinstance(node.this, _ARRAY_NODES) or isinstance(node.expression, _ARRAY_NODES):
            return self._json_equality(type(node), node.this, node.expression), BOOL
        return self.compare(type(node), self.lower(node.this), self.lower(node.expression)), BOOL

    def compare(self, klass: type[exp.Expression], left: Typed, right: Typed) -> exp.Expression:
        """A typed comparison ``left <klass> right`` with the flavour's coercions."""
        lk, rk = left[1], right[1]
        if NULL in (lk, rk):
            return typed_null(BOOL)
        pair = {lk, rk}
        operands: tuple[exp.Expression, exp.Expression] | exp.Expression
        if pair <= NUMERIC:
            operands = self._number_operands(klass, left, right)
        elif pair <= TEXTUAL or pair == {BOOL}:
            operands = left[0], right[0]
        elif self.flavor.sql_types and NATIVE_TS in pair and pair <= TEXTUAL | {NATIVE_TS}:
            operands = self.as_native_ts(left), self.as_native_ts(right)  # SQL: text is cast
        elif TS in pair or NATIVE_TS in pair:
            operands = utc_instant(self.as_ts(left)), utc_instant(self.as_ts(right))
        elif JSON in pair:
            operands = self._json_operands(klass, left, right)
        elif BOOL in pair:
            operands = self.as_bool(left), self.as_bool(right)
        elif pair & NUMERIC and pair & TEXTUAL:
            operands = self._text_number_operands(klass, left, right)
        else:
            raise QuerySemanticError(f"cannot compare a {lk} value with a {rk} value")
        if isinstance(operands, exp.Expression):
            return operands  # the whole comparison
        a, b = operands
        return klass(this=paren(a), expression=paren(b))

    def _number_operands(self, klass: type[exp.Expression], left: Typed, right: Typed
                         ) -> tuple[exp.Expression, exp.Expression] | exp.Expression:
        """The two sides of a comparison of two numbers (or the whole comparison, for a
        decimal column beside a literal finer than its scale)."""
        if DECIMAL in {left[1], right[1]}:
            on_grid = self._decimal_column_beside_finer_literal(klass, left, right)
            if on_grid is not None:
                return on_grid
            return self._decimal_operands(left, right)
        return year_as_range(left[0], right[0]), year_as_range(right[0], left[0])

    def _text_number_operands(self, klass: type[exp.Expression], left: Typed, right: Typed
                              ) -> tuple[exp.Expression, exp.Expression] | exp.Expression:
        """The two sides of a comparison of text with a number: both read as numbers, except
        that a string literal beside a number is a mismatch (the whole comparison) in the
        s3-select flavours, and in standard SQL the number its text spells, in the other
        side's type (DataFusion, DuckDB and PostgreSQL: ``id = '2'`` is ``id = 2``)."""
        if STRING in {left[1], right[1]}:
            string_left = left[1] == STRING
            string_side, number_side = (left, right) if string_left else (right, left)
            if isinstance(string_side[0], exp.Literal):
                if not self.flavor.sql_types or number_side[1] not in NUMERIC:
                    return self._mismatch(klass, left[0], right[0])
                number = self._literal_as(string_side[0].this, number_side[1])
                pair = (number, number_side) if string_left else (number_side, number)
                return self._number_operands(klass, *pair)
        return self.as_kind(left, FLOAT), self.as_kind(right, FLOAT)

    def _literal_as(self, text: str, kind: Kind) -> Typed:
        """A string literal compared with a number of ``kind``, cast to it as SQL casts an
        untyped literal: its text must spell such a number (else CastFailed, naming it)."""
        spelled = text.strip()
        if kind == INT:
            if SIGNED_INT_RE.fullmatch(spelled) and -INT64_MAX - 1 <= int(spelled) <= INT64_MAX:
                return exp.Literal.number(int(spelled)), INT
        elif NUMBER_TEXT_RE.fullmatch(spelled) and math.isfinite(float(spelled)):
            return exp.Literal.number(spelled), FLOAT
        raise QuerySemanticError(
            f"cannot cast the string {text!r} to {SQL_TYPE_NAMES[kind]} to compare it with a "
            f"{SQL_TYPE_NAMES[kind]} value: write a number, or CAST the other side to VARCHAR",
            code="CastFailed")

    def _json_operands(self, klass: type[exp.Expression], left: Typed, right: Typed
                       ) -> tuple[exp.Expression, exp.Expression] | exp.Expression:
        """The two sides of a comparison of a JSON value with a value that is no timestamp (or
        the whole comparison, for an ordering of two JSON values)."""
        lk, pair = left[1], {left[1], right[1]}
        equality = klass in (exp.EQ, exp.NEQ)
        if pair == {JSON}:
            if not equality:
                return self._json_ordering(klass, left, right)
            return fn(U.JSON_TO_STRING, left[0]), fn(U.JSON_TO_STRING, right[0])
        if pair & NUMERIC:
            return self.as_kind(left, FLOAT), self.as_kind(right, FLOAT)
        if pair & TEXTUAL:
            return self.as_string(left), self.as_string(right)
        if pair == {JSON, BOOL} and self.flavor.json_bool_typed_equality and equality:
            # AWS/MinIO: values of different types are unequal (42 != true, "true" != true);
            # a JSON boolean's text is exactly true/false.
            json_side, bool_side = (left, right) if lk == JSON else (right, left)
            a, b = json_side[0], exp.If(
                this=paren(bool_side[0]), true=lit_str("true"), false=lit_str("false")
            )
            return (a, b) if lk == JSON else (b, a)
        return self.as_bool(left), self.as_bool(right)  # a JSON value beside a boolean

    def _decimal_operands(self, left: Typed, right: Typed) -> tuple[exp.Expression, exp.Expression]:
        """The two sides of a comparison of a decimal with a number. A number literal becomes
        a decimal of its own digits (exact: ``price = 2.25`` is true for 2.25, ``price >
        1.505`` false for 1.50); other sides follow :data:`NUMBER_COERCION`."""
        literal = self._exact_beside_decimal(left, right)
        if literal is not None:
            return literal, right[0]
        literal = self._exact_beside_decimal(right, left)
        if literal is not None:
            return left[0], literal
        kind = NUMBER_COERCION[frozenset({left[1], right[1]})]
        return self.as_kind(left, kind), self.as_kind(right, kind)

    def _decimal_column_beside_finer_literal(
        self, klass: type[exp.Expression], left: Typed, right: Typed
    ) -> exp.Expression | None:
        """A decimal column of scale s compared with a number literal of more fraction digits,
        as the same comparison with a literal on the column's grid, or None.

        DataFusion would compare both in their common decimal type, which takes the literal's
        scale and the column's integer digits: decimal(38,10) against 1.123456789012345 is
        compared in decimal(38,15), too narrow for the column's values of 26 integer digits
        (an overflow error). A value ``w`` of scale s lies on a grid of step 10^-s, so with
        ``lo``/``hi`` the grid points below/above a literal ``v`` off the grid: ``w > v`` is
        ``w > lo``, ``w >= v`` is ``w >= hi``, ``w < v`` is ``w < hi``, ``w <= v`` is ``w <= lo``,
        ``w = v`` is FALSE and ``w <> v`` TRUE (NULL for a NULL ``w``)."""
        for column_side, literal_side, flipped in ((left, right, False), (right, left, True)):
            scale = self._decimal_column_scale(column_side[0])
            value = number_literal_value(literal_side[0])
            if scale is None or value is None or literal_side[1] not in (INT, FLOAT):
                continue
            if value.adjusted() >= MAX_DECIMAL_PRECISION:
                return None  # beyond any decimal128: the usual path decides
            step = decimal.Decimal(1).scaleb(-scale)
            low = value.quantize(step, rounding=decimal.ROUND_FLOOR, context=WIDE_CONTEXT)
            if low == value:
                return None  # on the grid: the usual exact literal is as narrow as the column
            high = low + step
            op = FLIPPED_COMPARISONS.get(klass, klass) if flipped else klass
            column = column_side[0]
            if op in (exp.EQ, exp.NEQ):
                return exp.Case(
                    ifs=[exp.If(this=exp.Is(this=paren(column.copy()), expression=exp.Null()),
                                true=typed_null(BOOL))],
                    default=exp.Boolean(this=op is exp.NEQ))
            bound = low if op in (exp.GT, exp.LTE) else high
            literal = exact_decimal_literal(exp.Literal.number(format(bound, "f")))
            if literal is None:
                return None
            return op(this=paren(column.copy()), expression=literal)
        return None

    def _decimal_column_scale(self, node: exp.Expression) -> int | None:
        """The scale of a Parquet/typed decimal column the expression is, else None."""
        if not isinstance(node, exp.Column):
            return None
        match = next((c for c in self.columns if c.name == node.name), None)
        return match.decimal_scale if match is not None else None

    @staticmethod
    def _exact_beside_decimal(this: Typed, other: Typed) -> exp.Expression | None:
        if other[1] != DECIMAL or this[1] not in (INT, FLOAT):
            return None
        return exact_decimal_literal(this[0])

    def _json_ordering(
        self, klass: type[exp.Expression], left: Typed, right: Typed
    ) -> exp.Expression:
        """``<``, ``>``, … between two JSON values: as numbers when both read as numbers,
        else as text (two JSON strings ``"2004T" <= "2004T"`` is true, not NULL)."""
        a, b = self.as_number(left), self.as_number(right)
        both_numbers = exp.And(
            this=exp.Not(this=exp.Is(this=paren(a), expression=exp.Null())),
            expression=exp.Not(this=exp.Is(this=paren(b), expression=exp.Null())),
        )
        text_a, text_b = fn(U.JSON_TO_STRING, left[0]), fn(U.JSON_TO_STRING, right[0])
        return exp.Case(
            ifs=[exp.If(this=both_numbers, true=klass(this=paren(a), expression=paren(b)))],
            default=klass(this=paren(text_a), expression=paren(text_b)),
        )

    def _mismatch(self, klass: type[exp.Expression], a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """Values of different types: never equal (NULL when either side is NULL)."""
        either_null = exp.Or(
            this=exp.Is(this=paren(a), expression=exp.Null()),
            expression=exp.Is(this=paren(b), expression=exp.Null()),
        )
        answer = exp.Boolean(this=klass is exp.NEQ)
        return exp.Case(ifs=[exp.If(this=either_null, true=typed_null(BOOL))], default=answer)

    def _connective(self, node: exp.Expression) -> Typed:
        klass: type[exp.Expression] = type(node)
        operands = flatten(node, klass)
        lowered = [paren(self.as_logical(self.lower(operand))) for operand in operands]
        return balanced(columns_first(fold_constants(lowered, klass)), klass), BOOL

    def _not(self, node: exp.Not) -> Typed:
        operand = self.as_logical(self.lower(node.this))
        constant = boolean_constant(operand)
        if constant is None:  # NOT NULL is NULL; folded for the reason fold_constants gives
            return typed_null(BOOL), BOOL
        if constant != "other":
            return exp.Boolean(this=not constant), BOOL
        return exp.Not(this=paren(operand)), BOOL

    def _is(self, node: exp.Is) -> Typed:
        target = node.expression
        typed = self.lower(node.this)
        subject = paren(typed[0])
        if isinstance(target, Missing):
            return exp.Is(this=subject, expression=exp.Null()), BOOL
        if isinstance(target, exp.Null):
            if typed[1] == JSON:
                return exp.Paren(
                    this=exp.Or(
                        this=exp.Is(this=subject, expression=exp.Null()),
                        expression=exp.EQ(this=subject.copy(), expression=lit_str("null")),
                    )
                ), BOOL
            return exp.Is(this=subject, expression=exp.Null()), BOOL
        if isinstance(target, exp.Boolean):
            value = self.as_bool(typed)
            return exp.Is(this=paren(value), expression=exp.Boolean(this=bool(target.this))), BOOL
        raise UnsupportedFeatureError(f"unsupported IS predicate: {describe(node)}")

    def _between(self, node: exp.Between) -> Typed:
        subject = self.lower(node.this)
        low = self.lower(node.args["low"])
        high = self.lower(node.args["high"])
        first, second = columns_first(
            [self.compare(exp.GTE, subject, low), self.compare(exp.LTE, subject, high)]
        )
        return exp.Paren(this=exp.And(this=first, expression=second)), BOOL

    def _in(self, node: exp.In) -> Typed:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise UnsupportedFeatureError("subqueries are not supported")
        field = node.args.get("field")
        if field is not None:
            return self._in_json(node.this, field)
        if not node.expressions:
            raise QuerySemanticError("IN needs at least one value")
        if any(isinstance(n, _ARRAY_NODES) for n in (node.this, *node.expressions)):
            comparisons = [
                paren(self._json_equality(exp.EQ, node.this, item)) for item in node.expressions
            ]
            return exp.Paren(this=balanced(comparisons, exp.Or)), BOOL
        subject = self.lower(node.this)
        items = [self.lower(item) for item in node.expressions]
        kinds = {kind for _, kind in items}
        # A decimal side takes the comparisons below, whose literals are exact decimals.
        numbers = kinds | {subject[1]} <= NUMERIC and DECIMAL not in kinds | {subject[1]}
        if numbers or (subject[1] in TEXTUAL and kinds <= TEXTUAL):
            return exp.In(this=paren(subject[0]), expressions=[i[0] for i in items]), BOOL
        comparisons = [paren(self.compare(exp.EQ, subject, item)) for item in items]
        return exp.Paren(this=balanced(comparisons, exp.Or)), BOOL

    def _in_json(self, subject: exp.Expression, field: exp.Expression) -> Typed:
        """``x IN s.arr[*]`` / ``x IN s.arr``: membership in a JSON array of the row."""
        haystack = self.lower(field)
        if haystack[1] != JSON:
            raise UnsupportedFeatureError(
                f"IN over a path needs a JSON array of the row: {describe(field)}"
            )
        needle = self.as_json_text(self.lower(subject))
        return fn(U.JSON_IN, needle, haystack[0]), BOOL

    def _json_equality(
        self, klass: type[exp.Expression], left: exp.Expression, right: exp.Expression
    ) -> exp.Expression:
        """``=`` / ``!=`` with an array or tuple side: structural JSON equality. A MISSING
        side is unequal to any array (``!=`` is true), as in MinIO."""
        if klass not in (exp.EQ, exp.NEQ):
            raise QuerySemanticError("arrays can only be compared with = or !=")
        a = self.as_json_text(self.lower(left))
        b = self.as_json_text(self.lower(right))
        equal = exp.Coalesce(this=fn(U.JSON_EQUAL, a, b), expressions=[exp.Boolean(this=False)])
        return equal if klass is exp.EQ else exp.Not(this=equal)

    def as_json_text(self, typed: Typed) -> exp.Expression:
        """The value as JSON text (what a JSON path column holds); NULL stays NULL."""
        node, kind = typed
        static = _static_json(node, kind)
        if static is not None:
            return lit_str(static)
        if kind == JSON:
            return node
        if kind in NUMERIC or kind == BOOL:
            return cast(paren(node), "VARCHAR")
        if kind == NULL:
            return typed_null(JSON)
        return fn(U.JSON_QUOTE, self.as_string(typed))

    def _concat(self, node: exp.DPipe) -> Typed:
        """``a || b`` (AWS documents it): both sides as text; NULL if either is NULL."""
        left = self.as_string(self.lower(node.this))
        right = self.as_string(self.lower(node.expression))
        return exp.DPipe(this=paren(left), expression=paren(right)), STRING

    def _json_array(self, node: exp.Expression) -> Typed:
        """A tuple ``(1, 'a')`` or array ``[1, 'a']`` literal, as JSON array text."""
        texts = [self.as_json_text(self.lower(item)) for item in node.expressions]
        if all(isinstance(t, exp.Literal) for t in texts):
            return lit_str("[" + ",".join(t.this for t in texts) + "]"), JSON
        parts: list[exp.Expression] = [lit_str("[")]
        for i, text in enumerate(texts):
            if i:
                parts.append(lit_str(","))
            parts.append(exp.Coalesce(this=text, expressions=[lit_str("null")]))
        parts.append(lit_str("]"))
        return fn("concat", *parts), JSON

    def _like(self, node: exp.Expression) -> Typed:
        escape_typed: Typed | None = None
        if isinstance(node, exp.Escape):
            escape_typed = self.lower(node.expression)
            node = node.this
        negate = False
        if isinstance(node, exp.Not):
            negate = True
            node = node.this
        if not isinstance(node, exp.Like):
            raise UnsupportedFeatureError(f"unsupported ESCAPE use: {describe(node)}")
        if node.args.get("negate"):  # sqlglot 30 parses ``x NOT LIKE p`` as Like(negate=True)
            negate = not negate
        subject = self.as_string(self.lower(node.this))
        pattern_typed = self.lower(node.expression)
        pattern = pattern_typed[0]
        escape_literal: str | None = None
        if escape_typed is not None and isinstance(escape_typed[0], exp.Literal) and escape_typed[0].is_string:
            escape_literal = escape_typed[0].this
            if len(escape_literal) != 1:
                raise QuerySemanticError("the ESCAPE argument must be a single character")
        static_escape = escape_typed is None or escape_literal is not None
        builtin = (
            like_to_builtin_pattern(pattern.this, escape_literal)
            if isinstance(pattern, exp.Literal) and pattern.is_string and static_escape
            else None
        )
        result: exp.Expression
        if builtin is not None:
            result = exp.Like(this=paren(subject), expression=lit_str(builtin))
        elif isinstance(pattern, exp.Literal) and pattern.is_string and static_escape:
            regex = like_to_regex(pattern.this, escape_literal)
            result = fn("regexp_like", subject, lit_str(regex))
        else:
            escape_node = self.as_string(escape_typed) if escape_typed is not None else lit_str("")
            result = fn(U.LIKE, subject, self.as_string(pattern_typed), escape_node)
        return (exp.Not(this=result) if negate else result), BOOL

    def _case(self, node: exp.Expression) -> Typed:
        if isinstance(node, exp.If):
            raise UnsupportedFeatureError("IF is not supported")
        subject = node.this
        conditions: list[exp.Expression] = []
        results: list[Typed] = []
        for branch in node.args.get("ifs") or []:
            if subject is not None:
                condition = self.compare(exp.EQ, self.lower(subject), self.lower(branch.this))
            else:
                condition = self.as_bool(self.lower(branch.this))
            conditions.append(condition)
            results.append(self.lower(branch.args["true"]))
        default = node.args.get("default")
        if default is not None:
            results.append(self.lower(default))
        unified, kind = self.unify(results)
        # unified ends with the ELSE result when there is one: one more than the conditions.
        ifs = [exp.If(this=c, true=r) for c, r in zip(conditions, unified, strict=False)]
        out = exp.Case(ifs=ifs, default=unified[len(conditions)] if default is not None else None)
        return out, kind

    def unify(self, values: Sequence[Typed]) -> tuple[list[exp.Expression], Kind]:
        """Bring values to one kind (for CASE, COALESCE)."""
        kinds = {kind for _, kind in values if kind != NULL}
        if not kinds:
            return [node for node, _ in values], NULL
        if len(kinds) == 1:
            kind = kinds.pop()
            return [node if k != NULL else self.null_of(kind) for node, k in values], kind
        if kinds <= NUMERIC | {JSON, FIELD}:
            target = NUMBER_COERCION[frozenset(_number_kind(k) for k in kinds)]
            return [self._unified_number((n, k), target) for n, k in values], target
        if self.flavor.sql_types and NATIVE_TS in kinds and kinds <= TEXTUAL | {NATIVE_TS}:
            return [self.as_native_ts(v) for v in values], NATIVE_TS
        if kinds <= {TS, NATIVE_TS} | TEXTUAL and kinds & {TS, NATIVE_TS}:
            return [self.as_ts(v) for v in values], TS
        return [self.as_string(v) for v in values], STRING

    def _unified_number(self, typed: Typed, target: Kind) -> exp.Expression:
        """One value of a CASE or COALESCE brought to the numeric ``target`` kind: an integer
        among floats is cast explicitly, as are decimals (DataFusion's own common type of a
        decimal and a double is decimal(30, 15))."""
        if typed[1] == NULL:
            return typed_null(target)
        if typed[1] == INT and target == FLOAT:
            return cast(paren(typed[0]), "DOUBLE")
        return self.as_kind(typed, target)
