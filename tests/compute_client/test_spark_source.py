"""PySpark reads through the storage server with a pushed-down filter."""

from __future__ import annotations

import pytest

from compute_client.spark_source import FlightSelectReader
from tests.conftest import SAMPLES, ServerProcess

pytestmark = pytest.mark.spark


def test_spark_reader_equals_spark_csv(spark, sample_server: ServerProcess) -> None:
    from pyspark.sql import functions as F

    remote = (
        spark.read.format("flight-select")
        .option("location", sample_server.location)
        .option("table", "sales/orders/2024-02.csv")
        .load()
        .where(F.col("status") == "delivered")
        .select("order_id", "region", "unit_price")
    )
    local = (
        spark.read.option("header", "true")
        .csv(str(SAMPLES / "sales/orders/2024-02.csv"))
        .where(F.col("status") == "delivered")
        .select("order_id", "region", "unit_price")
    )
    got = sorted(tuple(r) for r in remote.collect())
    expected = sorted(tuple(r) for r in local.collect())
    assert got == expected
    assert 0 < len(got) < 2000


def test_filter_is_pushed_into_the_statement(spark, sample_server: ServerProcess) -> None:
    from pyspark.sql.datasource import EqualTo

    reader = FlightSelectReader(
        {"location": sample_server.location, "table": "sales/orders/2024-02.csv"},
        spark.read.format("flight-select").option("location", sample_server.location)
        .option("table", "sales/orders/2024-02.csv").load().select("order_id").schema,
    )
    rest = list(reader.pushFilters([EqualTo(("status",), "delivered")]))
    assert rest == []
    assert reader.statement() == (
        'SELECT order_id FROM "sales"."orders/2024-02.csv" WHERE status = \'delivered\''
    )
