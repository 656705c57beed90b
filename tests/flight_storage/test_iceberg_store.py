"""Iceberg tables in a real object store (SeaweedFS): pyiceberg's SQL catalog with its warehouse
in a store bucket, and SeaweedFS's own Iceberg REST catalog, served with pruning: a one-day
filter fetches a small part of the bytes a full scan fetches (counted by a proxy in front of the
store), and answers equal pyiceberg's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.protocol import ENDPOINTS_HEADER, ENDPOINTS_PARTITIONED
from tests.conftest import SAMPLES, ServerProcess, running_server
from tests.flight_storage.test_server_support import statement_descriptor
from tests.iceberg_corpus import NAMESPACE, Corpus, sql_catalog, write_corpus
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import SeaweedFS


@pytest.fixture(scope="module")
def store_corpus(seaweedfs: SeaweedFS, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Corpus, Path]:
    bucket = seaweedfs.new_bucket("lakehouse")
    database = tmp_path_factory.mktemp("iceberg-store") / "catalog.db"
    catalog = sql_catalog("lake", str(database), f"s3://{bucket}/warehouse",
                          seaweedfs.iceberg_properties())
    return write_corpus(catalog), database


@pytest.fixture(scope="module")
def proxy(seaweedfs: SeaweedFS) -> Iterator[S3Proxy]:
    proxied = S3Proxy(seaweedfs.endpoint)
    try:
        yield proxied
    finally:
        proxied.close()


@pytest.fixture(scope="module")
def server(seaweedfs: SeaweedFS, store_corpus: tuple[Corpus, Path], proxy: S3Proxy
           ) -> Iterator[ServerProcess]:
    _, database = store_corpus
    flag = f"lake=sql:sqlite:///{database}?warehouse=s3://lakehouse/warehouse"
    env = {**seaweedfs.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}
    with running_server(SAMPLES, "--iceberg", flag, env=env) as process:
        yield process


def _rows(location: str, sql: str) -> list[dict[str, Any]]:
    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        table: pa.Table = cursor.fetch_arrow_table()
    return sorted(table.to_pylist(), key=lambda row: json.dumps(row, default=str))


def _expected(table: Any, row_filter: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    answer = table.scan(row_filter=row_filter, selected_fields=columns).to_arrow()
    return sorted(answer.to_pylist(), key=lambda row: json.dumps(row, default=str))


@pytest.mark.parametrize(("name", "where", "row_filter", "columns"), [
    ("events", "", "True", ("id", "ts", "user_name", "score", "ratio", "note")),
    ("events", "WHERE ts >= TIMESTAMP '2024-01-20T00:00:00'", "ts >= '2024-01-20T00:00:00'",
     ("id", "user_name", "note")),
    ("parts", "WHERE region = 'west' AND id < 100", "region = 'west' and id < 100",
     ("id", "name", "d", "amount")),
    ("big", "WHERE k < 30000", "k < 30000", ("k", "v")),
])
def test_store_tables_answer_as_pyiceberg(server: ServerProcess,
                                          store_corpus: tuple[Corpus, Path], name: str,
                                          where: str, row_filter: str,
                                          columns: tuple[str, ...]) -> None:
    corpus, _ = store_corpus
    selected = ", ".join(f'"{c}"' for c in columns)
    answer = _rows(server.location, f'SELECT {selected} FROM "lake"."{NAMESPACE}"."{name}" '
                                    f"{where}")
    expected = _expected(corpus.table(name), row_filter, columns)
    assert expected and answer == expected


def _fetched(server: ServerProcess, proxy: S3Proxy, sql: str) -> tuple[int, int]:
    """Bytes the server fetched from the store to plan and serve ``sql``, and the rows."""
    client = flight.connect(server.location)
    options = flight.FlightCallOptions(
        headers=[(ENDPOINTS_HEADER.encode(), ENDPOINTS_PARTITIONED.encode())])
    client.get_flight_info(statement_descriptor(sql), options)  # warm: the metadata files
    proxy.reset()
    info = client.get_flight_info(statement_descriptor(sql), options)
    rows = sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)
    return proxy.counters.body_bytes, rows


def test_a_day_filter_fetches_a_fraction_of_a_full_scan(server: ServerProcess,
                                                        proxy: S3Proxy) -> None:
    table = f'"lake"."{NAMESPACE}"."events"'
    everything, all_rows = _fetched(server, proxy, f"SELECT * FROM {table}")
    one_day, day_rows = _fetched(
        server, proxy, f"SELECT * FROM {table} WHERE ts >= TIMESTAMP '2024-01-10T00:00:00' "
        "AND ts < TIMESTAMP '2024-01-11T00:00:00'")
    assert all_rows == 220 and day_rows == 4
    assert one_day * 10 <= everything


def test_seaweedfs_rest_catalog(seaweedfs: SeaweedFS) -> None:
    """SeaweedFS's built-in Iceberg REST catalog (a table bucket; SigV4 signed for
    ``s3tables``) serves a table pyiceberg wrote through it."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    seaweedfs.new_table_bucket("restlake")
    rest = {"rest.sigv4-enabled": "true", "rest.signing-region": "us-east-1",
            "rest.signing-name": "s3tables"}
    catalog = load_catalog("sw", type="rest", uri=seaweedfs.iceberg_endpoint,
                           warehouse="s3://restlake/", **rest,
                           **seaweedfs.iceberg_properties())
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.people", Schema(NestedField(1, "id", LongType()),
                                                     NestedField(2, "name", StringType())))
    table.append(pa.table({"id": pa.array(range(50), pa.int64()),
                           "name": [f"p{i}" for i in range(50)]}))
    query = "&".join(f"{k}={v}" for k, v in rest.items())
    flag = f"sw=rest:{seaweedfs.iceberg_endpoint}?warehouse=s3://restlake/&{query}"
    with running_server(SAMPLES, "--iceberg", flag, env=seaweedfs.env()) as server:
        rows = _rows(server.location, 'SELECT id, name FROM "sw"."ns"."people" WHERE id >= 45')
        with flightsql.connect(server.location, autocommit=True) as conn:
            objects: Any = conn.adbc_get_objects(depth="tables", catalog_filter="sw"
                                                 ).read_all().to_pylist()
    assert rows == [{"id": i, "name": f"p{i}"} for i in range(45, 50)]
    [sw] = [c for c in objects if c["catalog_name"] == "sw"]
    assert [t["table_name"] for s in sw["catalog_db_schemas"]
            for t in s["db_schema_tables"]] == ["people"]


def test_a_missing_data_file_is_an_error_on_a_warm_server(seaweedfs: SeaweedFS,
                                                          tmp_path: Path) -> None:
    """A data file deleted from the store while the server holds the table's footers and
    metadata from queries before is ``NoSuchKey`` naming it on every query, never the other
    files' rows alone (issue 35: 3,000 of 4,000)."""
    from tests.iceberg_corpus import write_files_table

    bucket = seaweedfs.new_bucket("lostfile")
    catalog = sql_catalog("lost", str(tmp_path / "c.db"), f"s3://{bucket}/wh",
                          seaweedfs.iceberg_properties())
    paths = write_files_table(catalog, "t", files=4)
    table = f'"lost"."{NAMESPACE}"."t"'
    queries = (f"SELECT count(*) AS n FROM {table}", f"SELECT * FROM {table}",
               f"SELECT k FROM {table} WHERE k > 10")
    flag = f"lost=sql:sqlite:///{tmp_path / 'c.db'}?warehouse=s3://{bucket}/wh"
    with running_server(SAMPLES, "--iceberg", flag, env=seaweedfs.env()) as server:
        assert [len(_rows(server.location, sql)) for sql in queries] == [1, 4000, 3989]
        lost = paths[1].removeprefix(f"s3://{bucket}/")
        seaweedfs.client().delete_object(Bucket=bucket, Key=lost)
        for sql in queries:
            with pytest.raises(flightsql.Error) as caught:
                _rows(server.location, sql)
            assert "NoSuchKey" in str(caught.value), sql
            assert paths[1] in str(caught.value), sql
