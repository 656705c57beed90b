"""Pure tests: rendering of pushed filters, and the split of DataFusion's pyarrow filter."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from compute_client import pushdown
from compute_client.datafusion_source import parse_expression, plan_pushdown
from compute_client.pushdown import Comparison, Field, InList, NotPushable, build_query

PARQUET = pa.schema([
    ("s", pa.string()), ("t", pa.string()), ("i", pa.int64()), ("j", pa.int32()),
    ("f", pa.float64()), ("d", pa.decimal128(15, 2)), ("w", pa.decimal128(38, 2)),
    ("day", pa.date32()), ("b", pa.bool_()), ("ts", pa.timestamp("us", tz="UTC")),
    ("f32", pa.float32()),
])
# The same table as CSV text on the server, with the types declared on the client.
CSV_SERVER = pa.schema([(name, pa.string()) for name in PARQUET.names])


def S(value: object, data_type: pa.DataType) -> pc.Expression:
    return pc.scalar(pa.scalar(value, type=data_type))


def where(expression: pc.Expression, server: pa.Schema = PARQUET) -> tuple[str, str]:
    plan = plan_pushdown(expression, server, PARQUET)
    return plan.where, "" if plan.residual is None else str(plan.residual)


# ------------------------------------------------------------------ rendering


def test_render_field_casts_and_column_comparisons() -> None:
    sql = build_query("b", "k.csv", ["a"], [
        Comparison(Field("q", "INT"), "<", 24),
        Comparison("x", "<", Field("y")),
        InList(Field("p", "FLOAT"), (1.5, 2.0)),
    ])
    assert sql == ('SELECT s3object."a" FROM "b"."k.csv" WHERE CAST(s3object."q" AS INT) < 24 '
                   'AND s3object."x" < s3object."y" AND CAST(s3object."p" AS FLOAT) IN (1.5, 2.0)')


def test_render_literals() -> None:
    assert pushdown.literal(dt.date(1994, 1, 1)) == "CAST('1994-01-01T' AS TIMESTAMP)"
    assert pushdown.literal(decimal.Decimal("1E+2")) == "100"
    assert pushdown.literal(decimal.Decimal("-0.05")) == "-0.05"
    assert pushdown.literal(1e20) == "1e+20"
    assert pushdown.literal(-(2**63) + 1) == "-9223372036854775807"
    for refused in (-(2**63), 2**63, float("nan"), float("inf"), "a\x00b"):
        with pytest.raises(NotPushable):
            pushdown.literal(refused)
    with pytest.raises(NotPushable):
        pushdown.render_column(Field("a", "DROP TABLE"))


@pytest.mark.parametrize("value", [1e20, 1e-20, 1e-07, 5e-324, 1e300, -2.5e-10, 0.1,
                                   1.7976931348623157e308, 2.0**53 + 2])
def test_float_literals_read_back_as_the_same_double(value: float) -> None:
    """The server's dialect reads every rendered float, exponent form too, as the same double
    (translated by select_dialect, evaluated by DataFusion)."""
    from datafusion import SessionContext

    from select_dialect.translate import translate

    context = SessionContext()
    context.register_record_batches("s3object", [[pa.record_batch({"_1": ["1"]})]])
    for flavor in ("ceph", "aws", "standard"):
        sql = f"SELECT {pushdown.literal(value)} FROM s3object"
        column = context.sql(translate(sql, input_format="csv", flavor=flavor).sql)
        result = column.to_arrow_table().column(0)
        assert pa.types.is_float64(result.type), flavor
        assert result[0].as_py() == value, flavor


def test_like_pattern_escapes_every_wildcard() -> None:
    assert pushdown.like_pattern("contains", "5%_[!]") == "%5!%!_![!!!]%"


def test_a_positional_looking_name_goes_by_its_own_position() -> None:
    assert pushdown.column_name("_1", 7) == "_8"
    assert pushdown.column_name("_1", 0) == "_1"
    assert pushdown.column_name("from", 2) == "from"


def test_quoting_of_names_and_strings() -> None:
    # A bare "two words" is a string literal in the Ceph flavour: the name goes under the row.
    assert pushdown.render_filter(Comparison("two words", "=", "O'Brien")) == (
        "s3object.\"two words\" = 'O''Brien'"
    )


# ------------------------------------------------------------------ reading filters back


@pytest.mark.parametrize("expression", [
    (pc.field("s") == 'say "hi"\\ \n'),
    (pc.field("i") > 3) & ~(pc.field("j") == S(7, pa.int32())),
    pc.field("s").isin(["a", "b c", "d"]),
    pc.field("d") <= S(decimal.Decimal("-0.05"), pa.decimal128(15, 2)),
    pc.field("day").is_null() | pc.field("b").is_valid(),
])
def test_parse_expression_is_proven_by_rebuilding(expression: pc.Expression) -> None:
    parse_expression(expression, PARQUET)


def test_an_ambiguous_print_is_not_trusted() -> None:
    # is_in prints strings without escapes: this value breaks the layout and must not parse.
    expression = pc.field("s").isin(['x",\n  "y'])
    with pytest.raises(ValueError, match="rebuilt expression differs"):
        parse_expression(expression, PARQUET)
    plan = plan_pushdown(expression, PARQUET, PARQUET)
    assert plan.filters == ()
    assert plan.residual is not None
    assert plan.residual.equals(expression)


# ------------------------------------------------------------------ what is pushed


def test_native_columns_push_with_their_own_types() -> None:
    expression = (
        (pc.field("i") > 3) & (pc.field("d") >= S(decimal.Decimal("0.05"), pa.decimal128(15, 2)))
        & (pc.field("day") < S(dt.date(1995, 1, 1), pa.date32())) & (pc.field("s") == "x")
        & (pc.field("f") < 1.5) & (pc.field("b") == True)  # noqa: E712
    )
    pushed, local = where(expression)
    assert pushed == ("""s3object."i" > 3 AND s3object."d" >= 0.05 AND s3object."s" = 'x' """
                      """AND s3object."b" = true""")
    # Native dates go through Timestamp(ns) on the server (fails outside 1677..2262); floats
    # order NaN differently there: both stay local.
    assert local == "((day < 1995-01-01) and (f < 1.5))"


def test_csv_text_columns_push_with_server_conversions() -> None:
    expression = (
        (pc.field("i") > 3) & (pc.field("d") >= S(decimal.Decimal("0.05"), pa.decimal128(15, 2)))
        & (pc.field("day") < S(dt.date(1995, 1, 1), pa.date32())) & (pc.field("s") == "x")
        & (pc.field("f") < 1.5) & (pc.field("b") == True)  # noqa: E712
    )
    pushed, local = where(expression, CSV_SERVER)
    assert pushed == ("""CAST(s3object."i" AS INT) > 3 AND CAST(s3object."d" AS FLOAT) >= 0.05 """
                      """AND s3object."day" < '1995-01-01' AND s3object."s" = 'x'""")
    # Float text: NaN orders differently; bool text ("true"/"1"/"yes"): no exact comparison.
    assert local == "((f < 1.5) and (b == true))"


@pytest.mark.parametrize("expression", [
    pc.field("ts") < S(dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
                       pa.timestamp("us", tz="UTC")),
    pc.field("w") > S(decimal.Decimal("1.00"), pa.decimal128(38, 2)),  # beyond double
    pc.field("f32") > S(1.5, pa.float32()),
    pc.field("i") == pc.field("j"),  # different types
    pc.field("f") > S(float("nan"), pa.float64()),
    ~pc.field("s").isin(["a", "b", "c"]),  # is_in is false where SQL IN is NULL
])
def test_inexact_comparisons_stay_local(expression: pc.Expression) -> None:
    plan = plan_pushdown(expression, PARQUET, PARQUET)
    assert plan.filters == ()
    assert plan.residual is not None
    assert plan.residual.equals(expression)


def test_conjuncts_split_between_server_and_client() -> None:
    expression = (pc.field("i") > 3) & (pc.field("f32") > S(1.5, pa.float32())) & (
        (pc.field("s") == "a") | (pc.field("s") == "b"))
    assert where(expression) == ("""s3object."i" > 3 AND s3object."s" IN ('a', 'b')""",
                                 "(f32 > 1.5)")


def test_an_or_with_one_local_branch_stays_local_whole() -> None:
    expression = (pc.field("i") > 3) | (pc.field("f32") > S(1.5, pa.float32()))
    assert where(expression) == ("", str(expression))


def test_column_comparisons_and_negations() -> None:
    expression = (pc.field("s") < pc.field("t")) & ~(pc.field("i") <= 5) & pc.field("j").is_valid()
    assert where(expression) == (
        's3object."s" < s3object."t" AND NOT (s3object."i" <= 5) AND s3object."j" IS NOT NULL', "")
    assert where(pc.field("s").isin(["a", "b", "c"])) == (
        """s3object."s" IN ('a', 'b', 'c')""", "")


def test_grouped_query_quotes_groups_and_needs_something_to_select() -> None:
    assert pushdown.build_grouped_query("b", "k.csv", ["region", "select"], "count(*) AS n") == (
        'SELECT s3object."region", s3object."select", count(*) AS n FROM "b"."k.csv" '
        'GROUP BY s3object."region", s3object."select"')
    assert pushdown.build_grouped_query("b", "k.csv", [], "count(*)") == (
        'SELECT count(*) FROM "b"."k.csv"')
    with pytest.raises(ValueError, match="group_by"):
        pushdown.build_grouped_query("b", "k.csv", [], " ")
