"""Buckets of a real S3-compatible object store (SeaweedFS) answer as the same objects in a
folder do: every format and compression, bucket configurations, prefix tables, the catalog,
through the ADBC driver (``docs/storage.md``)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import boto3
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from botocore.config import Config

from tests.conftest import SAMPLES, ServerProcess, running_server, start_server
from tests.flight_storage.test_server_support import (
    PARTITIONED_HEADERS,
    error_document,
    free_port,
    statement_descriptor,
)
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import ADMIN, SeaweedFS

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
    client = flight.connect(store_server.location)
    body = json.dumps({"bucket": "sales", "prefix": "orders/"}).encode()
    [result] = list(client.do_action(flight.Action("ListObjects", body)))
    keys = [o["key"] for o in json.loads(result.body.to_pybytes())["objects"]]
    assert keys == ["orders/2024-01.csv", "orders/2024-02.csv", "orders/2024-03.csv"]


# ----------------------------------------------------------------------------- planning reads


def _csv(rows: int) -> bytes:
    return "".join(f"{i},{i % 7},padding padding padding {i:08d}\n"
                   for i in range(rows)).encode()


@pytest.fixture()
def proxied(seaweedfs: SeaweedFS) -> Iterator[S3Proxy]:
    """A counting, fault-injecting proxy in front of the store (``tests/s3_proxy.py``)."""
    proxy = S3Proxy(seaweedfs.endpoint)
    try:
        yield proxy
    finally:
        proxy.close()


def _through(store: SeaweedFS, proxy: S3Proxy, keys: tuple[str, str] = ADMIN
             ) -> dict[str, str]:
    return {**store.env(keys), "AWS_ENDPOINT_URL_S3": proxy.endpoint}


def test_planning_reads_a_sample_not_the_object(seaweedfs: SeaweedFS,
                                               proxied: S3Proxy) -> None:
    """GetFlightInfo of a 64 MB CSV and a Parquet object fetches a few small ranges (the
    header, the footer), not the object; each range is surveyed when it is read."""
    bucket = seaweedfs.new_bucket("planning")
    big = _csv(1_500_000)
    table = pa.table({"a": pa.array(range(2_000_000)), "f": pa.array(range(2_000_000)) * 0.5})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=200_000)
    client = seaweedfs.client()
    client.put_object(Bucket=bucket, Key="rows.csv", Body=big)
    client.put_object(Bucket=bucket, Key="t.parquet", Body=sink.getvalue())
    with running_server(f"s3://{bucket}", env=_through(seaweedfs, proxied)) as server:
        flight_client = flight.connect(server.location)
        for sql, size in [(f'SELECT * FROM "{bucket}"."rows.csv" WHERE _2 = \'3\'', len(big)),
                          (f'SELECT a FROM "{bucket}"."t.parquet" WHERE f > 10',
                           len(sink.getvalue()))]:
            proxied.reset()
            info = flight_client.get_flight_info(statement_descriptor(sql))
            planned = proxied.counters.body_bytes
            assert planned <= size // 50, (sql, planned, size)  # 2% here; 0.1% of 1 GB
            rows = sum(flight_client.do_get(e.ticket).read_all().num_rows
                       for e in info.endpoints)
            assert rows == (big.count(b"\n") + 6) // 7 if "rows.csv" in sql else rows > 0


def test_a_range_its_survey_refuses_is_read_by_the_reference_reader(
        seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    """An empty line in the second half: Ceph counts it as a record, DataFusion skips it; the
    range holding it is read by the reference reader, the other by DataFusion, and the answer
    equals the folder's."""
    lines = _csv(60_000).split(b"\n")
    lines.insert(45_000, b"")
    data = b"\n".join(lines)
    bucket = seaweedfs.new_bucket("ranges")
    seaweedfs.client().put_object(Bucket=bucket, Key="rows.csv", Body=data)
    (tmp_path / bucket).mkdir()
    (tmp_path / bucket / "rows.csv").write_bytes(data)
    sql = f'SELECT * FROM "{bucket}"."rows.csv"'
    with running_server(f"s3://{bucket}", "--partition-mb", "1",
                        env=seaweedfs.env()) as store, \
            running_server(tmp_path, "--partition-mb", "1") as folder:
        for flavor in ("ceph", "standard"):
            options = [(b"x-flight-select-flavor", flavor.encode())]
            got, want = (_read_endpoints(s.location, sql, options) for s in (store, folder))
            assert got.num_rows > 60_000 - 1
            assert got.equals(want), flavor


def _read_endpoints(location: str, sql: str,
                    headers: list[tuple[bytes, bytes]] | None = None) -> pa.Table:
    client = flight.connect(location)
    call = flight.FlightCallOptions(headers=[*(headers or []), *PARTITIONED_HEADERS])
    info = client.get_flight_info(statement_descriptor(sql), call)
    return pa.concat_tables(client.do_get(e.ticket, call).read_all() for e in info.endpoints)


# ----------------------------------------------------------------------------- versions


@pytest.mark.parametrize("change", ["rewrite", "delete"])
def test_an_object_changed_after_planning_is_refused(seaweedfs: SeaweedFS,
                                                     change: str) -> None:
    bucket = seaweedfs.new_bucket(f"changed-{change}")
    client = seaweedfs.client()
    client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(1000))
    with running_server(f"s3://{bucket}", env=seaweedfs.env()) as server:
        flight_client = flight.connect(server.location)
        info = flight_client.get_flight_info(
            statement_descriptor(f'SELECT * FROM "{bucket}"."rows.csv"'))
        if change == "rewrite":  # same size, other bytes: another ETag
            client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(1000).replace(b"1", b"2"))
        else:
            client.delete_object(Bucket=bucket, Key="rows.csv")
        with pytest.raises(pa.ArrowException) as failed:
            flight_client.do_get(info.endpoints[0].ticket).read_all()
    expected = {"rewrite": "PreconditionFailed", "delete": "NoSuchKey"}[change]
    assert error_document(failed.value)["code"] == expected


# ----------------------------------------------------------------------------- faults


def test_missing_bucket_and_key_are_named(store_server: ServerProcess) -> None:
    flight_client = flight.connect(store_server.location)
    for sql, code in [('SELECT * FROM "sales"."nope.csv"', "NoSuchKey"),
                      ('SELECT * FROM "nosuchbucket"."a.csv"', "NoSuchBucket")]:
        with pytest.raises(pa.ArrowException) as failed:
            flight_client.get_flight_info(statement_descriptor(sql))
        assert error_document(failed.value)["code"] == code


def test_wrong_credentials_are_access_denied_without_a_retry_storm(
        seaweedfs: SeaweedFS, proxied: S3Proxy) -> None:
    wrong = (ADMIN[0], "not-the-secret-key-000000000000000000000")
    with running_server("s3://sales", env=_through(seaweedfs, proxied, wrong)) as server:
        flight_client = flight.connect(server.location)
        proxied.reset()
        with pytest.raises(pa.ArrowException) as failed:
            flight_client.get_flight_info(
                statement_descriptor('SELECT * FROM "sales"."orders/2024-01.csv"'))
        document = error_document(failed.value)
        assert document["code"] == "AccessDenied"
        assert "refused the credentials" in document["message"]
        assert wrong[1] not in document["message"]
        assert proxied.counters.requests <= 2  # one refusal, not retried
        assert wrong[1] not in "".join(server.log_lines)


def test_an_unreachable_store_is_named_and_the_server_stays_up(seaweedfs: SeaweedFS) -> None:
    closed = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    env = {**seaweedfs.env(), "AWS_ENDPOINT_URL_S3": closed}
    with running_server("s3://sales", "--query-timeout", "60", env=env) as server:
        flight_client = flight.connect(server.location)
        started = time.monotonic()
        with pytest.raises(pa.ArrowException) as failed:
            flight_client.get_flight_info(
                statement_descriptor('SELECT * FROM "sales"."orders/2024-01.csv"'))
        assert time.monotonic() - started < 60
        document = error_document(failed.value)
        assert document["code"] == "ServiceUnavailable"
        assert closed in document["message"]
        health = list(flight_client.do_action(flight.Action("health", b"")))
        assert json.loads(health[0].body.to_pybytes())["status"] == "ok"


def test_throttling_is_retried_with_back_off_and_bounded(seaweedfs: SeaweedFS,
                                                         proxied: S3Proxy) -> None:
    sql = 'SELECT count(*) AS n FROM "sales"."orders/2024-01.csv"'
    with running_server("s3://sales", env=_through(seaweedfs, proxied)) as server:
        expected = _read_endpoints(server.location, sql)
        proxied.throttle = 2  # two 503 SlowDown answers, then the store answers again
        assert _read_endpoints(server.location, sql).equals(expected)
        assert proxied.counters.throttled == 2
        proxied.refuse = True  # a store that keeps throttling: a bounded number of tries
        proxied.reset()
        with pytest.raises(pa.ArrowException) as failed:
            _read_endpoints(server.location, sql)
        assert error_document(failed.value)["code"] in ("SlowDown", "ServiceUnavailable")
        assert proxied.counters.throttled <= 4 * 3  # max_attempts per request, few requests


# ----------------------------------------------------------------------------- the S3 door


def test_the_s3_door_serves_a_store_bucket_and_writes_through(seaweedfs: SeaweedFS) -> None:
    """Select, Get (with a range), Head and List over a store bucket; in writable mode a
    PutObject lands in the store (visible to the store's own clients) and DeleteObject
    removes it there."""
    bucket = seaweedfs.new_bucket("door")
    seaweedfs.upload_folder(SAMPLES / "sales" / "orders", bucket, "orders/")
    server = start_server(f"s3://{bucket}", "--s3-port", "0", "--s3-writable",
                          env=seaweedfs.env())
    try:
        assert server.process.stdout is not None
        door = server.process.stdout.readline().split("on ", 1)[1].strip()
        s3 = boto3.client("s3", endpoint_url=door, aws_access_key_id="any",
                          aws_secret_access_key="any", region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
        key = "orders/2024-01.csv"
        original = (SAMPLES / "sales" / key).read_bytes()
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="orders/")["Contents"]
        assert [o["Key"] for o in listed] == [f"orders/2024-0{m}.csv" for m in (1, 2, 3)]
        assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(original)
        assert s3.get_object(Bucket=bucket, Key=key, Range="bytes=5-24")["Body"].read() == (
            original[5:25])
        answer = s3.select_object_content(
            Bucket=bucket, Key=key, ExpressionType="SQL",
            Expression="SELECT count(*) FROM s3object",
            InputSerialization={"CSV": {"FileHeaderInfo": "USE"}},
            OutputSerialization={"CSV": {}})
        records = b"".join(e["Records"]["Payload"] for e in answer["Payload"] if "Records" in e)
        assert int(records) == original.count(b"\n") - 1
        # ScanRange: the records whose first byte lies in the range, read with ranged GETs
        ranged = s3.select_object_content(
            Bucket=bucket, Key=key, ExpressionType="SQL", Expression="SELECT * FROM s3object",
            InputSerialization={"CSV": {}}, OutputSerialization={"CSV": {}},
            ScanRange={"Start": 1000, "End": 3000})
        got = b"".join(e["Records"]["Payload"] for e in ranged["Payload"] if "Records" in e)
        starts = [0] + [i + 1 for i, b in enumerate(original) if b == ord("\n")]
        inside = [i for i in starts if 1000 <= i <= 3000 and i < len(original)]
        assert got.count(b"\n") == len(inside) > 0
        s3.put_object(Bucket=bucket, Key="new/a.csv", Body=b"x,y\n1,2\n3,4\n")
        stored = seaweedfs.client().get_object(Bucket=bucket, Key="new/a.csv")["Body"].read()
        assert stored == b"x,y\n1,2\n3,4\n"
        with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{bucket}"."new/a.csv"')
            assert cur.fetchall() == [(2,)]  # sniffed: "x,y" is the header line
        s3.delete_object(Bucket=bucket, Key="new/a.csv")
        remaining = seaweedfs.client().list_objects_v2(Bucket=bucket, Prefix="new/")
        assert remaining.get("KeyCount", 0) == 0
    finally:
        server.stop()


# ----------------------------------------------------------------------------- local copies


def test_a_local_copy_serves_repeated_queries_and_a_new_version_is_read_again(
        seaweedfs: SeaweedFS, proxied: S3Proxy, tmp_path: Path) -> None:
    """With --store-cache-mb the first query of an object reads it from the store and a copy
    is kept (in the background); the next ones fetch no byte of it, only its version (HEAD),
    and a rewritten object (another ETag) is read from the store again, never the old copy."""
    bucket = seaweedfs.new_bucket("cached")
    client = seaweedfs.client()
    client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(200_000))
    sql = f'SELECT count(*) AS n FROM "{bucket}"."rows.csv" WHERE _2 = \'3\''
    object_path = f"/{bucket}/rows.csv"

    def fetched_object() -> bool:
        return any(m == "GET" and p.startswith(object_path) for m, p in proxied.counters.calls)

    with running_server(f"s3://{bucket}", "--store-cache-mb", "256", "--store-cache-dir",
                        str(tmp_path), env=_through(seaweedfs, proxied)) as server:
        proxied.reset()
        assert _read_endpoints(server.location, sql).column(0).to_pylist() == [
            len(range(3, 200_000, 7))]
        assert fetched_object()
        deadline = time.monotonic() + 30
        while True:  # the copy is made in the background after the first query
            proxied.reset()
            assert _read_endpoints(server.location, sql).column(0).to_pylist() == [
                len(range(3, 200_000, 7))]
            if not fetched_object() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not fetched_object(), proxied.counters.calls
        assert ("HEAD", object_path) in proxied.counters.calls  # the version is still checked
        client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(1000))
        proxied.reset()
        assert _read_endpoints(server.location, sql).column(0).to_pylist() == [
            len(range(3, 1000, 7))]
        assert fetched_object()  # the new version came from the store


@pytest.mark.parametrize("change", ["rewrite", "delete"])
def test_an_object_changed_mid_stream_fails_the_stream(seaweedfs: SeaweedFS,
                                                       change: str) -> None:
    """A store object rewritten or deleted while its stream runs: the rest of the answer
    fails (PreconditionFailed or NoSuchKey), never rows of two versions passed as whole."""
    bucket = seaweedfs.new_bucket(f"midstream-{change}")
    client = seaweedfs.client()
    client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(1_000_000))
    sql = f'SELECT * FROM "{bucket}"."rows.csv" LIMIT 1000000'  # one ordered endpoint
    with running_server(f"s3://{bucket}", env=seaweedfs.env()) as server:
        flight_client = flight.connect(server.location)
        info = flight_client.get_flight_info(statement_descriptor(sql))
        assert len(info.endpoints) == 1
        reader = flight_client.do_get(info.endpoints[0].ticket)
        assert reader.read_chunk().data.num_rows > 0
        if change == "rewrite":
            client.put_object(Bucket=bucket, Key="rows.csv", Body=_csv(1_000_000).replace(
                b"padding", b"PADDING"))
        else:
            client.delete_object(Bucket=bucket, Key="rows.csv")
        with pytest.raises(pa.ArrowException) as failed:
            while True:
                try:
                    reader.read_chunk()
                except StopIteration:
                    break
    assert error_document(failed.value)["code"] in ("PreconditionFailed", "NoSuchKey")


# ----------------------------------------------------------------------------- locations


def test_every_listed_bucket_and_a_folder_in_one_server(seaweedfs: SeaweedFS,
                                                        tmp_path: Path) -> None:
    """--data s3:// serves every bucket the credentials list, beside a folder bucket named
    with NAME=DIR; a bucket name served twice is refused at start naming both."""
    bucket = seaweedfs.new_bucket("listed-one")
    seaweedfs.client().put_object(Bucket=bucket, Key="a.csv", Body=b"1\n2\n")
    local = tmp_path / "here"
    local.mkdir()
    (local / "b.csv").write_text("x\ny\nz\n")
    with running_server("s3://", "--data", f"mine={local}", env=seaweedfs.env()) as server:
        with flightsql.connect(server.location, autocommit=True) as conn, \
                conn.cursor() as cursor:
            cursor.execute(f'SELECT count(*) FROM "{bucket}"."a.csv"')
            assert cursor.fetchall() == [(2,)]
            cursor.execute('SELECT count(*) FROM "mine"."b.csv"')
            assert cursor.fetchall() == [(3,)]
            objects: Any = conn.adbc_get_objects(depth="db_schemas").read_all().to_pylist()
        schemas = {s["db_schema_name"] for c in objects for s in c["catalog_db_schemas"]}
        assert {bucket, "mine"} <= schemas
    clash = start_server_failure(["--data", f"{bucket}={local}", "--data", f"s3://{bucket}"],
                                 seaweedfs.env())
    assert f"bucket '{bucket}' is served by both" in clash


def start_server_failure(arguments: list[str], env: dict[str, str]) -> str:
    """What ``serve`` prints when it refuses to start (its exit status must be 2)."""
    import os
    import subprocess
    import sys

    finished = subprocess.run([sys.executable, "-m", "flight_storage", "serve", "--port", "0",
                               *arguments], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env})
    assert finished.returncode == 2, finished
    return finished.stderr
