"""The compute clients, unchanged, over a server whose bucket is an object store's
(SeaweedFS): the DataFusion remote table and the Spark source, pushdown included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from datafusion import SessionContext

from compute_client.datafusion_source import register_flight_table
from tests.conftest import SAMPLES, ServerProcess, running_server
from tests.seaweedfs import SeaweedFS

TABLE = "shop/orders/2024-02.csv"


@pytest.fixture(scope="module")
def store_server(seaweedfs: SeaweedFS) -> Iterator[ServerProcess]:
    bucket = seaweedfs.new_bucket("clients")
    seaweedfs.upload_folder(SAMPLES / "sales", bucket)
    with running_server(f"shop=s3://{bucket}", env=seaweedfs.env()) as server:
        yield server


def _query(location: str, table: str) -> list[tuple[object, ...]]:
    ctx = SessionContext()
    register_flight_table(ctx, "orders", location, table)
    frame = ctx.sql("SELECT order_id, region, unit_price FROM orders "
                    "WHERE status = 'delivered' AND region <> 'west' ORDER BY order_id")
    return [tuple(r.values()) for r in frame.to_pylist()]


def _lines(path: Path) -> int:
    """The number of lines of a text file (its header included)."""
    with path.open() as text:
        return sum(1 for _ in text)


def test_a_datafusion_remote_table_over_a_store_bucket(store_server: ServerProcess,
                                                       sample_server: ServerProcess) -> None:
    got = _query(store_server.location, TABLE)
    assert got == _query(sample_server.location, "sales/orders/2024-02.csv")
    assert 0 < len(got) < _lines(SAMPLES / "sales/orders/2024-02.csv") // 2


@pytest.mark.spark
def test_spark_reads_a_store_bucket_with_pushdown(spark, store_server: ServerProcess,
                                                  sample_server: ServerProcess) -> None:
    def rows(location: str, table: str) -> list[tuple[object, ...]]:
        frame = (spark.read.format("flight-select").option("location", location)
                 .option("table", table).load()
                 .where("status = 'delivered' AND quantity > '2'")
                 .select("order_id", "region"))
        return sorted(tuple(r) for r in frame.collect())

    got = rows(store_server.location, TABLE)
    assert got == rows(sample_server.location, "sales/orders/2024-02.csv")
    assert 0 < len(got) < _lines(SAMPLES / "sales/orders/2024-02.csv") // 2
