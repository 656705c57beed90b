"""Every filter class Spark offers, rendered for the server, against Spark evaluating it.

The server side runs the rendered predicate over the typed test objects; the Spark side
evaluates the same filter as a Spark expression over the same values (``spark.read.parquet`` of
the same file, or the server's unfiltered CSV rows). Each case must select the same row ids,
and the cases that must be pushed are checked to be pushed.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from compute_client import pushdown, spark_filters
from compute_client.flight import ConnectionOptions, FlightSelectClient
from compute_client.spark_filters import ColumnRef, NotPushable, render
from tests.conftest import ServerProcess

D = decimal.Decimal
UTC = dt.UTC


def _string_cases(column: str) -> list[Filter]:
    a = (column,)
    cases: list[Filter] = [
        EqualTo(a, "plain"), EqualTo(a, "O'Brien"), EqualTo(a, 'say "hi"'), EqualTo(a, "東京"),
        EqualTo(a, "café"), EqualTo(a, "cafe\u0301"), EqualTo(a, ""), EqualTo(a, "abc"),
        LessThan(a, "a"), LessThanOrEqual(a, "ab"), GreaterThan(a, "Z"),
        GreaterThanOrEqual(a, "é"), GreaterThan(a, "10"), LessThan(a, "9"),
        In(a, ["plain", "东京", "東京", "it''s"]), In(a, ["%"]),
        IsNull(a), IsNotNull(a),
        EqualNullSafe(a, None), EqualNullSafe(a, "abc"), Not(EqualNullSafe(a, "abc")),
        Not(EqualNullSafe(a, None)),
        Not(EqualTo(a, "abc")), Not(In(a, ["abc", "ab"])), Not(LessThan(a, "b")),
        Not(IsNull(a)), Not(StringStartsWith(a, "a")),
    ]
    for value in ("a", "%", "_", "a_", "a%b", "!", "[x", "]", "\\", "'", '"', "😀", "é",
                  "", "a.c", "x*", "(", "$", "^", "?", "+", "{", "|", " ", "\t", "ü"):
        cases += [StringStartsWith(a, value), StringEndsWith(a, value),
                  StringContains(a, value)]
    return cases


NUMERIC_CASES: list[Filter] = [
    EqualTo(("i",), 2**53 + 1), EqualTo(("i",), 2**53), LessThan(("i",), 0),
    GreaterThan(("i",), 2**53), GreaterThanOrEqual(("i",), 2**63 - 1),
    LessThanOrEqual(("i",), -(2**63) + 1), In(("i",), [0, 7, 2**53 + 1]),
    Not(In(("i",), [0, 1])), EqualNullSafe(("i",), 42), Not(EqualNullSafe(("i",), 42)),
    IsNull(("i",)),
    EqualTo(("f",), 0.0), EqualTo(("f",), -0.0), GreaterThan(("f",), 1.0),
    GreaterThanOrEqual(("f",), 0.0), GreaterThan(("f",), -0.0), LessThan(("f",), 0.0),
    LessThanOrEqual(("f",), -0.0), LessThan(("f",), 1e300), GreaterThan(("f",), 1e299),
    GreaterThan(("f",), 5e-324), LessThan(("f",), 1e-7), EqualTo(("f",), 0.1),
    EqualTo(("f",), 2.0**53 + 2), In(("f",), [0.0, 1.5]), In(("f",), [-0.0]),
    Not(In(("f",), [1.5])), Not(GreaterThan(("f",), 1.0)), Not(LessThan(("f",), 0.0)),
    EqualNullSafe(("f",), 1.5), Not(EqualNullSafe(("f",), 0.0)), IsNotNull(("f",)),
    Not(GreaterThanOrEqual(("f",), 1.5)), Not(EqualTo(("f",), 0.0)), Not(In(("f",), [-0.0])),
    Not(Not(LessThan(("f",), 1.5))), Not(Not(GreaterThan(("f",), 1.5))),
    Not(LessThanOrEqual(("f",), 1.5)),
    EqualTo(("d",), D("12.34")), GreaterThan(("d",), D("12.34")), LessThan(("d",), D("0")),
    LessThanOrEqual(("d",), D("-0.01")), GreaterThanOrEqual(("d",), D("99999999.99")),
    In(("d",), [D("1.00"), D("12.35")]), Not(EqualTo(("d",), D("1"))),
    EqualNullSafe(("d",), None),
    EqualTo(("b",), True), EqualTo(("b",), False), LessThan(("b",), True),
    GreaterThan(("b",), False), Not(EqualTo(("b",), True)), In(("b",), [False]),
    EqualNullSafe(("b",), False), Not(EqualNullSafe(("b",), True)),
    IsNull(("dt",)), IsNotNull(("ts",)), Not(IsNull(("dt",))),
]
PARQUET_CASES = _string_cases("s") + NUMERIC_CASES
# NaN is above every number in Spark; the server is not consistent about NaN for these.
PARQUET_REFUSED: list[Filter] = [
    GreaterThan(("f",), 1.0), GreaterThanOrEqual(("f",), 0.0), GreaterThan(("f",), -0.0),
    GreaterThan(("f",), 1e299), GreaterThan(("f",), 5e-324), Not(LessThan(("f",), 0.0)),
    Not(Not(GreaterThan(("f",), 1.5))), Not(LessThanOrEqual(("f",), 1.5)),
]
CSV_CASES = [*_string_cases("s"), EqualTo(("id",), "10"), GreaterThan(("id",), "3")]


def _spark_expr(f: Filter) -> Any:
    from pyspark.sql import functions as F

    if isinstance(f, Not):
        return ~_spark_expr(f.child)
    column = F.col(f.attribute[0])
    unary: dict[type, Callable[[], Any]] = {
        IsNull: column.isNull, IsNotNull: column.isNotNull,
    }
    if type(f) in unary:
        return unary[type(f)]()
    if isinstance(f, In):
        return column.isin(list(f.value))
    binary: dict[type, Callable[[Any], Any]] = {
        EqualTo: lambda v: column == F.lit(v),
        EqualNullSafe: lambda v: column.eqNullSafe(F.lit(v)),
        GreaterThan: lambda v: column > F.lit(v),
        GreaterThanOrEqual: lambda v: column >= F.lit(v),
        LessThan: lambda v: column < F.lit(v),
        LessThanOrEqual: lambda v: column <= F.lit(v),
        StringStartsWith: column.startswith,
        StringEndsWith: column.endswith,
        StringContains: column.contains,
    }
    return binary[type(f)](f.value)


def _spark_ids(frame: Any, cases: list[Filter]) -> list[set[Any]]:
    """One Spark job: a boolean column per case, then the ids where each is TRUE."""
    rows = frame.select("id", *[_spark_expr(f).alias(f"c{k}") for k, f in enumerate(cases)])
    collected = rows.collect()
    return [{r["id"] for r in collected if r[f"c{k}"] is True} for k in range(len(cases))]


def _server_ids(client: FlightSelectClient, table: str, where: str) -> set[Any]:
    result = client.read_all(f'SELECT id FROM "t"."{table}" WHERE {where}')
    return set(result.column(0).to_pylist())


def _refs(client: FlightSelectClient, table: str, schema: StructType) -> dict[str, ColumnRef]:
    server = client.execute(f'SELECT * FROM "t"."{table}"').schema
    return spark_filters.column_refs(server, schema)


PARQUET_SCHEMA = StructType([
    StructField("id", LongType()), StructField("s", StringType()),
    StructField("s2", StringType()), StructField("i", LongType()),
    StructField("f", DoubleType()), StructField("d", DecimalType(10, 2)),
    StructField("b", BooleanType()), StructField("dt", DateType()),
    StructField("ts", TimestampType()),
])


def _check_cases(
    client: FlightSelectClient, table: str, cases: list[Filter], refs: dict[str, ColumnRef],
    expected: list[set[Any]], refused: list[Filter],
) -> None:
    """Every pushed case selects Spark's rows; exactly ``refused`` are not pushed."""
    not_pushed = []
    pushed = []
    for f, want in zip(cases, expected, strict=True):
        try:
            pushed.append((f, render(f, refs), want))
        except NotPushable:
            not_pushed.append(f)
    answers = [_server_ids(client, table, predicate) for _, predicate, _ in pushed]
    mismatches = [
        (f, predicate, sorted(got ^ want))
        for (f, predicate, want), got in zip(pushed, answers, strict=True)
        if got != want
    ]
    assert not_pushed == refused
    assert mismatches == [], "\n".join(map(str, mismatches))


@pytest.mark.spark
def test_parquet_filters_match_spark(spark, typed_server: ServerProcess, typed_data: Path) -> None:
    frame = spark.read.parquet(str(typed_data / "t" / "typed.parquet"))
    assert frame.schema == PARQUET_SCHEMA
    expected = _spark_ids(frame, PARQUET_CASES)
    with FlightSelectClient(ConnectionOptions(typed_server.location)) as client:
        refs = _refs(client, "typed.parquet", PARQUET_SCHEMA)
        _check_cases(client, "typed.parquet", PARQUET_CASES, refs, expected, PARQUET_REFUSED)
    assert sum(map(len, expected)) > 200  # the cases select rows, not nothing


@pytest.mark.spark
def test_csv_filters_match_spark_on_the_servers_values(
    spark, typed_server: ServerProcess
) -> None:
    with FlightSelectClient(ConnectionOptions(typed_server.location)) as client:
        values = client.read_all('SELECT * FROM "t"."typed.csv"')
        assert values.schema.names == ["id", "s", "s2"]
        schema = StructType([StructField(n, StringType()) for n in values.schema.names])
        frame = spark.createDataFrame(values.to_pylist(), schema)
        expected = _spark_ids(frame, CSV_CASES)
        refs = _refs(client, "typed.csv", schema)
        _check_cases(client, "typed.csv", CSV_CASES, refs, expected, [])


# ---------------------------------------------------------------------------- refusals
CSV_REFS = {"s": ColumnRef("s", "s", "string"), "n": ColumnRef("n", "n", "other")}
TYPED_REFS = {
    "i": ColumnRef("i", "i", "integer"), "f": ColumnRef("f", "f", "float"),
    "d": ColumnRef("d", "d", "decimal"), "dt": ColumnRef("dt", "dt", "other"),
    "ts": ColumnRef("ts", "ts", "other"), "s": ColumnRef("s", "s", "string"),
}


@pytest.mark.parametrize("f", [
    EqualTo(("dt",), dt.date(2024, 1, 1)),          # server casts dates to ns: may fail
    GreaterThan(("ts",), dt.datetime(2024, 1, 1, tzinfo=UTC)),
    EqualTo(("f",), float("nan")), LessThan(("f",), float("inf")),
    EqualTo(("i",), -(2**63)),                        # no int64 literal for the minimum
    EqualTo(("i",), 2**63),
    EqualTo(("i",), "7"), EqualTo(("s",), 7),          # literal of another type
    EqualTo(("d",), D("1234567890.1234567")),          # more than 15 digits
    In(("s",), ["a", None]), In(("s",), []),
    StringStartsWith(("i",), "1"),                     # match on a non-string column
    EqualTo(("s", "x"), "a"),                          # nested column
    EqualTo(("missing",), "a"),
    EqualTo(("n",), "a"),                              # a string the reader converts
    Not(EqualTo(("dt",), dt.date(2024, 1, 1))),
])
def test_not_pushable(f: Filter) -> None:
    with pytest.raises(NotPushable):
        render(f, {**TYPED_REFS, **CSV_REFS})


def test_convert_all_returns_the_rest() -> None:
    keep = EqualTo(("dt",), dt.date(2024, 1, 1))
    pushed, rest = spark_filters.convert_all([EqualTo(("s",), "x"), keep], TYPED_REFS)
    assert pushed == [pushdown.Comparison("s", "=", "x")]
    assert rest == [keep]


def test_filters_render_through_the_shared_renderer() -> None:
    """Spark's filters are written by compute_client.pushdown, as the DataFusion client's are."""
    refs = {**TYPED_REFS, "unit price": ColumnRef("unit price", "unit price", "float")}
    assert render(EqualNullSafe(("i",), 7), refs) == (
        '(s3object."i" IS NOT NULL AND s3object."i" = 7)')
    assert render(Not(In(("f",), [1.5, 2.0])), refs) == (
        '(s3object."f" <> 1.5 AND s3object."f" <> 2.0)')
    assert render(LessThan(("unit price",), 1e-7), refs) == 's3object."unit price" < 1e-07'
    assert render(Not(StringContains(("s",), "a%")), refs) == (
        """NOT (s3object."s" LIKE '%a!%%' ESCAPE '!')"""
    )


def test_references_and_kinds() -> None:
    server = pa.schema([
        ("id", pa.int64()), ("Region", pa.string()), ("from", pa.string()),
        ("unit price", pa.float64()), ("x", pa.int32()), ("X", pa.int32()),
        ("big", pa.decimal128(20, 2)), ("_1", pa.string()),
    ])
    spark_schema = StructType([
        StructField("id", LongType()), StructField("Region", StringType()),
        StructField("from", StringType()), StructField("unit price", DoubleType()),
        StructField("x", StringType()), StructField("big", DecimalType(20, 2)),
        StructField("_1", StringType()),
    ])
    refs = spark_filters.column_refs(server, spark_schema)
    assert {n: (r.ref, r.kind) for n, r in refs.items()} == {
        "id": ("id", "integer"),
        "Region": ("Region", "string"),   # the server looks the exact name up first
        "from": ("from", "string"),       # a keyword: pushdown quotes it
        "unit price": ("unit price", "float"),
        "x": ("x", "other"),              # x and X: exact name first; Spark string over int32
        "big": ("big", "other"),          # decimal(20,2) is not exact as double
        "_1": ("_8", "string"),           # a name that looks positional goes by position
    }
    with pytest.raises(ValueError, match="nope"):
        spark_filters.column_refs(server, StructType([StructField("nope", StringType())]))


def test_keyword_columns_are_quoted_in_the_statement() -> None:
    """A bare ``missing`` (or ``union``, ``join``) is not a column to the parser: every name
    goes quoted, a positional one bare."""
    for word in ("missing", "union", "join", "with", "status"):
        refs = {word: ColumnRef(word, word, "string")}
        assert render(IsNull((word,)), refs) == f's3object."{word}" IS NULL'
    assert render(IsNull(("_1",)), {"_1": ColumnRef("_1", "_8", "string")}) == "_8 IS NULL"
