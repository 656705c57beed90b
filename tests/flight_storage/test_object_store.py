"""Buckets of a real S3-compatible object store (SeaweedFS) answer as the same objects in a
folder do: every format and compression, bucket configurations, prefix tables, the catalog,
through the ADBC driver (``docs/storage.md``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pytest

from tests.conftest import SAMPLES, ServerProcess, running_server
from tests.seaweedfs import SeaweedFS

QUERIES = [
    'SELECT * FROM "sales"."orders/2024-01.csv"',
    'SELECT order_id, region FROM "sales"."orders/2024-01.csv" WHERE status = \'delivered\'',
    'SELECT count(*) AS n, max(order_id) AS m FROM "sales"."orders/"',
    'SELECT region, count(*) AS n FROM "sales"."orders/" GROUP BY region ORDER BY region',
    'SELECT * FROM "sales"."orders_noheader.csv" LIMIT 7',
    'SELECT count(*) AS n FROM "sales"."compressed/orders-2024-01.csv.gz"',
    'SELECT * FROM "sales"."compressed/orders-2024-01.csv.bz2"',
    'SELECT * FROM "sales"."compressed/orders-2024-01.csv.zst" WHERE region = \'west\'',
    'SELECT * FROM "sales"."events/2024-01.ndjson"',
    'SELECT * FROM "sales"."events/catalog.json"',
    'SELECT * FROM "sales"."parquet/orders.parquet"',
    'SELECT count(*) AS n, sum(quantity) AS q FROM "sales"."parquet/orders.parquet" '
    'WHERE unit_price > 100',
    'SELECT order_id FROM "sales"."parquet/orders.parquet" WHERE quantity > 3 LIMIT 5',
]


@pytest.fixture(scope="module")
def store_server(seaweedfs: SeaweedFS) -> Iterator[ServerProcess]:
    """A server whose bucket ``sales`` is the store's bucket holding data/samples/sales."""
    seaweedfs.new_bucket("sales")
    seaweedfs.upload_folder(SAMPLES / "sales", "sales")
    with running_server("s3://sales", env=seaweedfs.env()) as server:
        yield server


def _rows(location: str, sql: str) -> pa.Table:
    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


@pytest.mark.parametrize("sql", QUERIES)
def test_a_store_bucket_answers_as_the_folder(store_server: ServerProcess,
                                              sample_server: ServerProcess, sql: str) -> None:
    expected = _rows(sample_server.location, sql)
    assert expected.num_rows > 0
    assert _rows(store_server.location, sql).equals(expected)


def test_the_catalog_lists_the_store_bucket(store_server: ServerProcess) -> None:
    with flightsql.connect(store_server.location, autocommit=True) as conn:
        objects: Any = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    # a bucket is a schema (of the one unnamed catalog), as over a folder
    schemas = {s["db_schema_name"]: s for c in objects for s in c["catalog_db_schemas"]}
    assert set(schemas) == {"sales"}
    tables = {t["table_name"]: t["table_type"] for t in schemas["sales"]["db_schema_tables"]}
    assert tables["orders/2024-01.csv"] == "table"
    assert tables["orders/"] == "view"  # the configured prefix of .flight-select.json
    assert ".flight-select.json" not in tables


def test_list_objects_action_lists_store_keys(store_server: ServerProcess) -> None:
    from pyarrow import flight

    client = flight.connect(store_server.location)
    body = json.dumps({"bucket": "sales", "prefix": "orders/"}).encode()
    [result] = list(client.do_action(flight.Action("ListObjects", body)))
    keys = [o["key"] for o in json.loads(result.body.to_pybytes())["objects"]]
    assert keys == ["orders/2024-01.csv", "orders/2024-02.csv", "orders/2024-03.csv"]
