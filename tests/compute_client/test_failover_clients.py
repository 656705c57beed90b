"""Planned through a proxy that lists a dead node first in every endpoint, each client gives
the answer of reading the server directly: the DataFusion table and the Spark batch source
through ``FlightSelectClient.read``, the ADBC driver by its own failover (pinned here)."""

from __future__ import annotations

import socket

import adbc_driver_flightsql.dbapi as flightsql
import pytest
from datafusion import SessionContext

from compute_client.datafusion_source import register_flight_table
from tests.compute_client.replica_proxy import replica_proxy
from tests.conftest import ServerProcess

QUERY = "SELECT region, count(*) AS n FROM orders GROUP BY region ORDER BY region"


def _refusing_location() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"grpc://127.0.0.1:{probe.getsockname()[1]}"


def _datafusion_answer(location: str) -> list[dict[str, object]]:
    ctx = SessionContext()
    register_flight_table(ctx, "orders", location, "sales/orders/2024-01.csv")
    return ctx.sql(QUERY).to_arrow_table().to_pylist()


def test_datafusion_reads_past_a_dead_first_location(sample_server: ServerProcess) -> None:
    expected = _datafusion_answer(sample_server.location)
    with replica_proxy(sample_server.location,
                       [_refusing_location(), sample_server.location]) as proxy:
        assert _datafusion_answer(proxy) == expected
    assert sum(int(str(row["n"])) for row in expected) > 0


@pytest.mark.spark
def test_spark_batch_read_passes_a_dead_first_location(spark, typed_server: ServerProcess) -> None:
    def rows(location: str) -> list[tuple[object, ...]]:
        frame = (spark.read.format("flight-select").option("location", location)  # type: ignore[attr-defined]
                 .option("table", "t/typed.parquet").option("num_partitions", "64").load())
        assert frame.rdd.getNumPartitions() > 1  # a task per endpoint: each one fails over
        # As Spark renders them: year-1 timestamps do not survive collect() into Python.
        text = frame.selectExpr(*[f"CAST(`{c}` AS STRING)" for c in frame.columns])
        return sorted(tuple(str(v) for v in row) for row in text.collect())

    expected = rows(typed_server.location)
    with replica_proxy(typed_server.location,
                       [_refusing_location(), typed_server.location]) as proxy:
        assert rows(proxy) == expected
    assert expected


def test_the_adbc_driver_reads_each_partition_past_a_dead_first_location(
        sample_server: ServerProcess) -> None:
    # Pins the driver's own behaviour (adbc-driver-flightsql 1.13): it tries an endpoint's
    # locations in order, for execute and for adbc_read_partition alike.
    sql = 'SELECT * FROM "sales"."orders/2024-01.csv"'

    def read(location: str) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        with flightsql.connect(location) as conn, conn.cursor() as cursor:
            cursor.execute(sql)
            whole = cursor.fetch_arrow_table().to_pylist()
            partitions, _ = cursor.adbc_execute_partitions(sql)
            parts = []
            for partition in partitions:
                cursor.adbc_read_partition(partition)
                parts += cursor.fetch_arrow_table().to_pylist()
            return whole, parts

    expected = read(sample_server.location)
    with replica_proxy(sample_server.location,
                       [_refusing_location(), sample_server.location]) as proxy:
        assert read(proxy) == expected
    assert expected[0]
