"""An object store whose answers break off mid-body (issue 35, item 7): a proxy in front of a
real SeaweedFS (``tests/s3_proxy.py``) sends the status and the full Content-Length, half the
body, and closes the connection. Every read path of the server resumes or retries such a read,
bounded: boto3's ranged reads from the byte they broke at (``s3_store.RangedReader``), pyarrow's
and DataFusion's S3 clients by asking for the range again. Queries through a proxy that cuts 2%
of the bodies answer what the same objects in a folder answer; a store that cuts every body is
a clear ``ServiceUnavailable`` (gRPC UNAVAILABLE: retry later) after the bound."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.errors import StoreUnavailableError
from flight_storage.storage.s3_store import S3Buckets, S3Connection, S3Settings
from tests.conftest import SAMPLES, ServerProcess, running_server
from tests.flight_storage.test_object_store import QUERIES
from tests.flight_storage.test_server_support import error_document, statement_descriptor
from tests.iceberg_corpus import NAMESPACE, sql_catalog, write_files_table
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import SeaweedFS


@pytest.fixture()
def proxy(seaweedfs: SeaweedFS) -> Iterator[S3Proxy]:
    proxied = S3Proxy(seaweedfs.endpoint)
    try:
        yield proxied
    finally:
        proxied.close()


def _connection(seaweedfs: SeaweedFS, proxy: S3Proxy, monkeypatch: pytest.MonkeyPatch,
                **settings: int) -> S3Connection:
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    return S3Connection(S3Settings(endpoint_url=proxy.endpoint, **settings))


@pytest.fixture(scope="module")
def blob(seaweedfs: SeaweedFS) -> tuple[str, bytes]:
    bucket = seaweedfs.new_bucket("cutbodies")
    data = os.urandom(3 << 20)
    seaweedfs.client().put_object(Bucket=bucket, Key="blob.bin", Body=data)
    return bucket, data


def test_a_cut_body_is_read_on_from_where_it_broke(seaweedfs: SeaweedFS, proxy: S3Proxy,
                                                   blob: tuple[str, bytes],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The first window cut on three tries running (the fourth, the last, reads), then a third
    of the bodies cut: the object reads whole and right, and the store sends each byte once
    (a cut window is asked for again from its break, never from its start)."""
    bucket_name, data = blob
    bucket = S3Buckets(_connection(seaweedfs, proxy, monkeypatch)).bucket(bucket_name)
    assert bucket is not None
    stored = bucket.head("blob.bin")
    proxy.cut_next = 3
    proxy.cut_rate = 0.3
    with bucket.open(stored) as stream:
        read = stream.read()
    assert read == data
    assert proxy.counters.cut >= 4
    assert proxy.counters.body_bytes == len(data)


def test_a_store_that_keeps_cutting_fails_after_the_bound(
        seaweedfs: SeaweedFS, proxy: S3Proxy, blob: tuple[str, bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    bucket_name, _ = blob
    bucket = S3Buckets(_connection(seaweedfs, proxy, monkeypatch, max_attempts=3)
                       ).bucket(bucket_name)
    assert bucket is not None
    stored = bucket.head("blob.bin")
    proxy.reset()
    proxy.cut_next = 1000
    with bucket.open(stored, 1 << 20) as stream, \
            pytest.raises(StoreUnavailableError) as failed:
        stream.read(100_000)
    assert failed.value.code == "ServiceUnavailable"
    assert f"{bucket_name}/blob.bin" in failed.value.message
    assert "on each of 3 tries" in failed.value.message
    assert proxy.counters.methods.count("GET") == 3
    assert proxy.counters.cut == 3


# ----------------------------------------------------------------------------- a server


@pytest.fixture(scope="module")
def cut_store(seaweedfs: SeaweedFS, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[str, str, list[str]]:
    """Bucket ``sales`` as data/samples/sales, and an Iceberg catalog (its flag) of a table
    of five files in another bucket of the store."""
    bucket = seaweedfs.new_bucket("cutsales")
    seaweedfs.upload_folder(SAMPLES / "sales", bucket)
    lake = seaweedfs.new_bucket("cutlake")
    database = tmp_path_factory.mktemp("cut-iceberg") / "c.db"
    catalog = sql_catalog("cut", str(database), f"s3://{lake}/wh",
                          seaweedfs.iceberg_properties())
    paths = write_files_table(catalog, "t")
    return bucket, f"cut=sql:sqlite:///{database}?warehouse=s3://{lake}/wh", paths


@pytest.fixture()
def cut_server(seaweedfs: SeaweedFS, proxy: S3Proxy, cut_store: tuple[str, str, list[str]]
               ) -> Iterator[ServerProcess]:
    bucket, flag, _ = cut_store
    env = {**seaweedfs.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}
    with running_server(f"sales=s3://{bucket}", "--iceberg", flag, env=env) as server:
        yield server


ICEBERG_QUERIES = [f'SELECT count(*) AS n, sum(k) AS s FROM "cut"."{NAMESPACE}"."t"',
                   f'SELECT k FROM "cut"."{NAMESPACE}"."t" WHERE k % 97 = 3']


def _table(location: str, sql: str) -> pa.Table:
    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _sorted(table: pa.Table) -> list[str]:
    return sorted(json.dumps(row, default=str) for row in table.to_pylist())


def test_queries_through_a_proxy_that_cuts_2_percent_of_bodies_answer_whole(
        cut_server: ServerProcess, sample_server: ServerProcess, proxy: S3Proxy) -> None:
    """Three rounds of every format and path (DataFusion's readers, the reference readers,
    compressed objects, an Iceberg table): each answer equals the folder's (pyiceberg's
    arithmetic for the table), and bodies were cut on the way."""
    proxy.cut_rate = 0.02
    expected = {sql: _sorted(_table(sample_server.location, sql)) for sql in QUERIES}
    n = 5000
    expected[ICEBERG_QUERIES[0]] = [json.dumps({"n": n, "s": n * (n - 1) // 2})]
    expected[ICEBERG_QUERIES[1]] = sorted(json.dumps({"k": k}) for k in range(n)
                                          if k % 97 == 3)
    for _ in range(3):
        for sql, rows in expected.items():
            assert _sorted(_table(cut_server.location, sql)) == rows, sql
    assert proxy.counters.cut >= 3


@pytest.mark.parametrize(("sql", "cut", "warm"), [
    ('SELECT * FROM "sales"."events/2024-01.ndjson"', "/events/", False),  # boto3's reads
    ('SELECT * FROM "sales"."parquet/orders.parquet"', "/parquet/", False),  # footer: pyarrow
    ('SELECT * FROM "sales"."parquet/orders.parquet"', "/parquet/", True),  # DataFusion's
    ('SELECT * FROM "sales"."orders/2024-01.csv"', "/orders/", False),
    ('SELECT * FROM "sales"."orders/2024-01.csv"', "/.flight-select.json", False),  # whole
    (ICEBERG_QUERIES[0], "/metadata/", False),  # pyiceberg's reads (pyarrow)
    (ICEBERG_QUERIES[0], "/data/", False),  # footers (pyarrow)
    (ICEBERG_QUERIES[0], "/data/", True),  # footers kept: DataFusion's reads alone
])
def test_a_store_that_cuts_every_body_is_unavailable(cut_server: ServerProcess, proxy: S3Proxy,
                                                      sql: str, cut: str, warm: bool) -> None:
    """Cut on every try past each client's bound, on a fresh server (planning reads) and on
    a warm one (the footers kept: the engine's reads): UNAVAILABLE with the store's code,
    never INVALID_ARGUMENT (issue 35: ``ProcessingTimeError``, ``InvalidParquet``)."""
    if warm:
        assert _table(cut_server.location, sql).num_rows > 0
    proxy.cut_only = cut
    proxy.cut_rate = 1.0
    with pytest.raises(flightsql.OperationalError) as failed:  # gRPC UNAVAILABLE: ADBC's IO
        _table(cut_server.location, sql)
    assert "Detail: Unavailable" in str(failed.value), str(failed.value)
    assert error_document(failed.value)["code"] == "ServiceUnavailable"
    assert proxy.counters.cut >= 2


def test_the_bound_is_a_serve_flag(tmp_path: Path) -> None:
    from flight_storage.cli import main

    with pytest.raises(SystemExit) as refused:
        main(["serve", "--data", str(tmp_path), "--store-max-attempts", "0"])
    assert refused.value.code == 2


@pytest.mark.parametrize("sql", [
    'SELECT * FROM "sales"."events/2024-01.ndjson"',  # the reference reader: boto3
    'SELECT * FROM "sales"."parquet/orders.parquet"',  # DataFusion's reader
    'SELECT * FROM "sales"."orders/2024-01.csv"',
    ICEBERG_QUERIES[1],
])
def test_a_store_down_after_planning_is_unavailable(cut_server: ServerProcess, proxy: S3Proxy,
                                                    sql: str) -> None:
    """Planned while the store answered, read while it answers 503 to everything: the DoGet
    fails UNAVAILABLE (retry later) with the store's code, never INVALID_ARGUMENT (issue 35:
    ``ProcessingTimeError``)."""
    client = flight.connect(cut_server.location)
    info = client.get_flight_info(statement_descriptor(sql))
    proxy.refuse = True
    with pytest.raises(flight.FlightUnavailableError) as failed:
        for endpoint in info.endpoints:
            client.do_get(endpoint.ticket).read_all()
    assert error_document(failed.value)["code"] in ("ServiceUnavailable", "SlowDown")
