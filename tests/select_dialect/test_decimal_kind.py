"""The DECIMAL kind: a decimal column stays decimal, and its coercions are the table's.

Each statement is translated and run by DataFusion over an in-memory table (the server's UDFs
registered), so the tables in :mod:`select_dialect.lowering` are checked against what
DataFusion 55 really returns, and exact comparisons against Python's ``decimal`` module.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import datafusion
import pyarrow as pa
import pytest

from flight_storage.execution.udfs import register_udfs
from select_dialect import translate
from select_dialect.errors import QuerySemanticError
from select_dialect.kinds import (
    AGGREGATE_KINDS,
    DECIMAL,
    FLOAT,
    INT,
    NUMBER_COERCION,
    NUMERIC,
    Column,
    Kind,
)
from select_dialect.sql_nodes import exact_decimal_literal

_PRICES = [Decimal("1.50"), Decimal("2.25"), Decimal("10.05"), Decimal("-3.01"), None]
_COLUMNS = [Column("p", "decimal(10,2)"), Column("i", "int64"), Column("f", "float64"),
            Column("s", "string")]
# A column of each number kind, for the coercion table.
_OF_KIND = {INT: "i", FLOAT: "f", DECIMAL: "p"}


@pytest.fixture(scope="module")
def ctx() -> datafusion.SessionContext:
    session = datafusion.SessionContext()
    register_udfs(session)
    session.register_record_batches("s3object", [[pa.record_batch({
        "p": pa.array(_PRICES, pa.decimal128(10, 2)),
        "i": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "f": pa.array([0.5, 1.5, 2.5, 3.5, None]),
        "s": pa.array(["1.5", "x", "10.05", None, "2"]),
    })]])
    return session


def _run(ctx: datafusion.SessionContext, query: str, flavor: str = "standard") -> pa.Table:
    sql = translate(query, input_format="parquet", columns=_COLUMNS, flavor=flavor).sql
    return ctx.sql(sql).to_arrow_table()


def _kind_of(data_type: pa.DataType) -> Kind:
    if pa.types.is_decimal(data_type):
        return DECIMAL
    return INT if pa.types.is_integer(data_type) else FLOAT


def test_a_decimal_column_projects_as_its_own_type(ctx: datafusion.SessionContext) -> None:
    table = _run(ctx, "select p from s3object")
    assert table.schema.field(0).type == pa.decimal128(10, 2)
    assert table.column(0).to_pylist() == _PRICES


def test_the_coercion_table_covers_every_pair_of_number_kinds() -> None:
    assert set(NUMBER_COERCION) == {frozenset(p) for p in itertools.product(NUMERIC, NUMERIC)}


@pytest.mark.parametrize(("left", "right"), list(itertools.product(sorted(NUMERIC), repeat=2)))
@pytest.mark.parametrize("operator_text", ["+", "-", "*", "/", "%"])
def test_arithmetic_gives_the_kind_of_the_coercion_table(
    ctx: datafusion.SessionContext, left: Kind, right: Kind, operator_text: str
) -> None:
    query = f"select {_OF_KIND[left]} {operator_text} {_OF_KIND[right]} from s3object"
    result = _run(ctx, query).schema.field(0).type
    assert _kind_of(result) == NUMBER_COERCION[frozenset({left, right})], result


@pytest.mark.parametrize(("function", "kind"), list(AGGREGATE_KINDS))
def test_sum_and_avg_give_the_kind_of_the_aggregate_table(
    ctx: datafusion.SessionContext, function: str, kind: Kind
) -> None:
    result = _run(ctx, f"select {function}({_OF_KIND[kind]}) from s3object").schema.field(0)
    assert _kind_of(result.type) == AGGREGATE_KINDS[(function, kind)], result.type


def test_decimal_aggregates_follow_datafusion_55s_rules(ctx: datafusion.SessionContext) -> None:
    """SUM widens the precision by 10, AVG the precision and the scale by 4; MIN and MAX keep
    the type. Pinned: the README states these types."""
    table = _run(ctx, "select sum(p), avg(p), min(p), max(p), count(p) from s3object")
    assert [f.type for f in table.schema][:4] == [
        pa.decimal128(20, 2), pa.decimal128(14, 6), pa.decimal128(10, 2), pa.decimal128(10, 2)]
    assert table.to_pylist() == [{"c0": Decimal("10.79"), "c1": Decimal("2.697500"),
                                  "c2": Decimal("-3.01"), "c3": Decimal("10.05"), "c4": 4}]


def test_decimal_with_int_is_exact_and_with_float_is_double(
    ctx: datafusion.SessionContext,
) -> None:
    table = _run(ctx, "select p * i, p + 1, -p, p * 1.5, p + f from s3object")
    assert [_kind_of(f.type) for f in table.schema] == [DECIMAL, DECIMAL, DECIMAL, FLOAT, FLOAT]
    assert table.column(0).to_pylist()[:4] == [Decimal("1.50"), Decimal("4.50"),
                                               Decimal("30.15"), Decimal("-12.04")]


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}
# Literals next to the prices: equal to one, between two at a finer scale, written with an
# exponent, one whose double is not its value (10.0500000000000001 reads as the double of
# 10.05, which DataFusion would round back to 10.05), beyond 38 digits.
_LITERALS = ["2.25", "1.505", "10.0500000000000001", "10.049999999999999", "-3.01", "1e1",
             "-30.1e-1", "3", "0", "1e50", "123456789012345678901234567890123456789.5"]


@pytest.mark.parametrize("literal", _LITERALS)
@pytest.mark.parametrize("symbol", list(_OPERATORS))
def test_comparisons_with_number_literals_are_exact(
    ctx: datafusion.SessionContext, literal: str, symbol: str
) -> None:
    compare = _OPERATORS[symbol]
    expected = [p for p in _PRICES if p is not None and compare(p, Decimal(literal))]
    for query in (f"select p from s3object where p {symbol} {literal}",
                  f"select p from s3object where {literal} {_mirrored(symbol)} p"):
        assert _run(ctx, query).column(0).to_pylist() == expected, query


def _mirrored(symbol: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(symbol, symbol)


@pytest.mark.parametrize(("condition", "expected"), [
    ("p in (1.5, 10.0500000000000001, -3.01)", [Decimal("1.50"), Decimal("-3.01")]),
    ("p between 1.505 and 10.05", [Decimal("2.25"), Decimal("10.05")]),
    ("p > i", [Decimal("1.50"), Decimal("2.25"), Decimal("10.05")]),
    ("p * 2 > i * 3", [Decimal("10.05")]),
    ("p > f * 1.5", [Decimal("1.50"), Decimal("10.05")]),  # as doubles
    ("p > i + 0.5", [Decimal("10.05")]),
    ("p = s", [Decimal("1.50"), Decimal("10.05")]),  # text read as a number
    ("p = '2.25'", [Decimal("2.25")]),  # standard SQL: the literal is cast to the number
    ("nullif(p, 2.25) is null", [Decimal("2.25")]),
])  # fmt: skip
def test_other_comparisons_with_a_decimal(
    ctx: datafusion.SessionContext, condition: str, expected: list[Decimal]
) -> None:
    rows = _run(ctx, f"select p from s3object where {condition}").column(0).to_pylist()
    assert [r for r in rows if r is not None] == expected


def test_a_string_literal_beside_a_decimal_by_flavour(ctx: datafusion.SessionContext) -> None:
    """S3 Select: a string literal is never equal to a number; standard SQL casts it, and
    one that spells no number is an error naming it."""
    rows = _run(ctx, "select p from s3object where p = 'x' or p = '2.25'", "aws")
    assert [r for r in rows.column(0).to_pylist() if r is not None] == []
    with pytest.raises(QuerySemanticError, match="cannot cast the string 'x' to DECIMAL"):
        _run(ctx, "select p from s3object where p = 'x'")


def test_casts_of_a_decimal(ctx: datafusion.SessionContext) -> None:
    """int truncates toward zero, float is the double, string the exact digits, a decimal
    type keeps the value decimal (DataFusion rounds half away from zero)."""
    table = _run(ctx, "select cast(p as int), cast(p as float), cast(p as string), "
                      "cast(p as decimal(3,1)), cast(p as decimal) from s3object")
    assert [f.type for f in table.schema][3:] == [pa.decimal128(3, 1), pa.decimal128(10, 2)]
    assert [list(r.values()) for r in table.to_pylist()][:4] == [
        [1, 1.5, "1.50", Decimal("1.5"), Decimal("1.50")],
        [2, 2.25, "2.25", Decimal("2.3"), Decimal("2.25")],
        [10, 10.05, "10.05", Decimal("10.1"), Decimal("10.05")],
        [-3, -3.01, "-3.01", Decimal("-3.0"), Decimal("-3.01")],
    ]


@pytest.mark.parametrize("flavor", ["ceph", "standard"])
def test_a_cast_to_decimal_of_a_number_keeps_s3_selects_float(
    ctx: datafusion.SessionContext, flavor: str
) -> None:
    table = _run(ctx, "select cast(1.123456789 as decimal(9,1)) from s3object limit 1", flavor)
    assert table.column(0).to_pylist() == [1.123456789]


def test_case_and_coalesce_unify_by_the_table(ctx: datafusion.SessionContext) -> None:
    table = _run(ctx, "select coalesce(p, i), coalesce(p, f), case when i > 2 then p else 0 end "
                      "from s3object")
    assert [_kind_of(f.type) for f in table.schema] == [DECIMAL, FLOAT, DECIMAL]
    assert table.column(0).to_pylist()[4] == Decimal("5.00")


@pytest.mark.parametrize(("text", "sql"), [
    ("1.50", "CAST('1.50' AS DECIMAL(3, 2))"),
    ("0.05", "CAST('0.05' AS DECIMAL(2, 2))"),
    ("1e3", "CAST('1000' AS DECIMAL(4, 0))"),
    ("25e-3", "CAST('0.025' AS DECIMAL(3, 3))"),
])  # fmt: skip
def test_exact_decimal_literal(text: str, sql: str) -> None:
    from sqlglot import exp

    literal = exact_decimal_literal(exp.Literal.number(text))
    assert literal is not None
    assert literal.sql() == sql
    negated = exact_decimal_literal(exp.Neg(this=exp.Literal.number(text)))
    assert negated is not None
    assert negated.sql() == sql.replace("'", "'-", 1)


def test_exact_decimal_literal_of_zero_and_none_past_38_digits_or_for_text() -> None:
    from sqlglot import exp

    zero = exact_decimal_literal(exp.Neg(this=exp.Literal.number("0")))
    assert zero is not None
    assert zero.sql() == "CAST('0' AS DECIMAL(1, 0))"
    assert exact_decimal_literal(exp.Literal.number("1" * 39)) is None
    assert exact_decimal_literal(exp.Literal.string("1.5")) is None


def test_a_wide_decimal_against_a_literal_of_a_larger_scale() -> None:
    session = datafusion.SessionContext()
    wide = pa.array([Decimal("12345678901234567890123456.1234567890"), Decimal("1")],
                    pa.decimal128(38, 10))
    session.register_record_batches("s3object", [[pa.record_batch({"w": wide})]])
    sql = translate("select w from s3object where w > 1.123456789012345", input_format="parquet",
                    columns=[Column("w", "decimal(38,10)")]).sql
    assert session.sql(sql).to_arrow_table().column(0).to_pylist() == [wide[0].as_py()]


_GRID = [Decimal("-1.1234567891"), Decimal("-1.1234567890"), Decimal("1.1234567890"),
         Decimal("1.1234567891"), Decimal("12345678901234567890123456.1234567890"), None]


@pytest.mark.parametrize("op", ["<", "<=", "=", "<>", ">=", ">"])
@pytest.mark.parametrize("literal", ["1.123456789012345", "-1.123456789012345", "1.12345678905"])
@pytest.mark.parametrize("literal_first", [False, True])
def test_a_decimal_column_against_a_finer_literal_answers_as_python(
        op: str, literal: str, literal_first: bool) -> None:
    """Every comparison of a decimal(38,10) column with a literal of more fraction digits,
    either way round, gives Python's Decimal answer (NULL for a NULL value), values on both
    sides of the literal included."""
    session = datafusion.SessionContext()
    column = pa.array(_GRID, pa.decimal128(38, 10))
    session.register_record_batches("s3object", [[pa.record_batch({"w": column})]])
    condition = f"{literal} {op} w" if literal_first else f"w {op} {literal}"
    sql = translate(f"select {condition} from s3object", input_format="parquet",
                    columns=[Column("w", "decimal(38,10)")]).sql
    got = session.sql(sql).to_arrow_table().column(0).to_pylist()
    compare = {"<": operator.lt, "<=": operator.le, "=": operator.eq, "<>": operator.ne,
               ">=": operator.ge, ">": operator.gt}[op]
    value = Decimal(literal)
    want = [None if w is None else (compare(value, w) if literal_first else compare(w, value))
            for w in _GRID]
    assert got == want
