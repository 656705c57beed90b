"""The S3 door (``serve --s3-port``) against real S3 clients: boto3 and the AWS CLI.

botocore parses the event stream and checks both CRCs of every message, so the select tests
also prove the framing. Each answer is compared with the same request sent over Flight: one
engine, the same bytes whichever door.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError
from pyarrow import flight

from flight_storage.protocol import FLAVOR_HEADER
from flight_storage.rpc.auth import hash_password
from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_server_support import json_descriptor

ORDERS_KEY = "orders/2024-01.csv"
CSV_USE = {"CSV": {"FileHeaderInfo": "USE"}}


def start_door(data: Path | str, *extra: str,
               env: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
    """A server with its S3 door; returns it and the door's URL."""
    server = start_server(data, "--s3-port", "0", *extra, env=env)
    assert server.process.stdout is not None
    line = server.process.stdout.readline()
    assert line.startswith("s3 listening on "), line
    return server, line.split("on ", 1)[1].strip()


def s3_client(url: str, key: str = "anything", secret: str = "anything",
              **config: Any) -> Any:
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=key,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, **config))


@pytest.fixture(scope="module")
def door() -> Iterator[tuple[ServerProcess, str]]:
    server, url = start_door(SAMPLES)
    yield server, url
    server.stop()


@pytest.fixture(scope="module")
def s3(door: tuple[ServerProcess, str]) -> Any:
    return s3_client(door[1])


def _select(s3: Any, key: str = ORDERS_KEY, bucket: str = "sales",
            **request: Any) -> list[dict[str, Any]]:
    request.setdefault("ExpressionType", "SQL")
    request.setdefault("InputSerialization", CSV_USE)
    request.setdefault("OutputSerialization", {"CSV": {}})
    answer = s3.select_object_content(Bucket=bucket, Key=key, **request)
    return list(answer["Payload"])


def _records(events: list[dict[str, Any]]) -> bytes:
    return b"".join(e["Records"]["Payload"] for e in events if "Records" in e)


def _over_flight(location: str, request: dict[str, Any],
                 flavor: str = S3DoorConfig.flavor) -> tuple[bytes, dict[str, int]]:
    """The same request over Flight, in the door's default flavour unless told."""
    client = flight.connect(location)
    options = flight.FlightCallOptions(headers=[(FLAVOR_HEADER.encode(), flavor.encode())])
    info = client.get_flight_info(json_descriptor(request), options)
    records, stats = bytearray(), dict.fromkeys(("BytesScanned", "BytesProcessed",
                                                 "BytesReturned"), 0)
    for endpoint in info.endpoints:
        reader = client.do_get(endpoint.ticket, options)
        for chunk in iter(reader.read_chunk, None):
            records += b"".join(chunk.data.column(0).to_pylist())
            meta = json.loads(chunk.app_metadata.to_pybytes()) if chunk.app_metadata else {}
            for name, value in meta.get("Stats", {}).items():
                stats[name] += value
    return bytes(records), stats


def _read_all(reader: flight.FlightStreamReader) -> Iterator[Any]:
    while True:
        try:
            yield reader.read_chunk()
        except StopIteration:
            return


@pytest.mark.parametrize(
    ("key", "expression", "input_serialization", "output_serialization"),
    [
        (ORDERS_KEY, ("SELECT s.order_id, upper(s.region) FROM s3object s "
                      "WHERE s.status = 'shipped'"), CSV_USE, {"CSV": {}}),
        (ORDERS_KEY, "SELECT count(*), sum(cast(s.quantity as int)) FROM s3object s",
         CSV_USE, {"JSON": {}}),
        ("events/2024-01.ndjson", "SELECT * FROM s3object s LIMIT 5",
         {"JSON": {"Type": "LINES"}}, {"JSON": {}}),
        ("parquet/orders.parquet", "SELECT * FROM s3object s LIMIT 7", {"Parquet": {}},
         {"CSV": {}}),
        ("compressed/orders-2024-01.csv.gz", "SELECT s._1 FROM s3object s LIMIT 4",
         {"CSV": {}, "CompressionType": "GZIP"}, {"CSV": {}}),
    ],
)
def test_select_answers_as_the_flight_door(door: tuple[ServerProcess, str], s3: Any, key: str,
                                           expression: str,
                                           input_serialization: dict[str, Any],
                                           output_serialization: dict[str, Any]) -> None:
    events = _select(s3, key=key, Expression=expression,
                     InputSerialization=input_serialization,
                     OutputSerialization=output_serialization)
    records, stats = _over_flight(door[0].location, {
        "Bucket": "sales", "Key": key, "Expression": expression,
        "InputSerialization": input_serialization,
        "OutputSerialization": output_serialization})
    assert records  # each case selects something
    assert _records(events) == records
    assert [next(iter(e)) for e in events[-2:]] == ["Stats", "End"]
    assert events[-2]["Stats"]["Details"] == stats


def test_select_is_served_in_process_without_a_flight_call(door: tuple[ServerProcess, str],
                                                          s3: Any) -> None:
    """Issue 40: the door plans and reads a request through the query service in its own
    process: the server logs the door's call and each partition it read (returning the
    records the client got), and no Flight call at all."""
    server = door[0]
    before = len(server.log_lines)
    events = _select(s3, Expression="SELECT s.order_id FROM s3object s")

    def logged() -> list[dict[str, Any]]:
        return [json.loads(line) for line in server.log_lines[before:] if line.startswith("{")]

    def partitions() -> list[dict[str, Any]]:
        return [line for line in logged() if line.get("event") == "select_partition"]

    deadline = time.monotonic() + 10  # every line is written before End; read by a thread
    while (time.monotonic() < deadline
           and sum(p["returned"] for p in partitions()) < len(_records(events))):
        time.sleep(0.05)
    assert [line for line in logged() if line.get("event") == "call" and "door" not in line] \
        == []
    assert partitions() and {p["status"] for p in partitions()} == {"ok"}
    assert sum(p["returned"] for p in partitions()) == len(_records(events))


def test_progress_events_when_asked_and_records_bounded(s3: Any) -> None:
    events = _select(s3, Expression="SELECT * FROM s3object s", RequestProgress={"Enabled": True})
    kinds = {next(iter(e)) for e in events}
    assert {"Records", "Progress", "Stats", "End"} <= kinds
    assert max(len(e["Records"]["Payload"]) for e in events if "Records" in e) <= 256 * 1024
    progress = [e["Progress"]["Details"]["BytesReturned"] for e in events if "Progress" in e]
    assert progress == sorted(progress)
    assert events[-2]["Stats"]["Details"]["BytesReturned"] == len(_records(events))
    without = _select(s3, Expression="SELECT * FROM s3object s")
    assert "Progress" not in {next(iter(e)) for e in without}


def test_scan_range_is_passed_on(s3: Any) -> None:
    whole = _records(_select(s3, Expression="SELECT s._1 FROM s3object s",
                             InputSerialization={"CSV": {}}))
    parts = b"".join(
        _records(_select(s3, Expression="SELECT s._1 FROM s3object s",
                         InputSerialization={"CSV": {}},
                         ScanRange={"Start": start, "End": start + 9999}))
        for start in range(0, (SAMPLES / "sales" / ORDERS_KEY).stat().st_size, 10000)
    )
    assert parts == whole


@pytest.mark.parametrize(
    ("request_fields", "code", "status"),
    [
        ({"Key": "compressed/orders-2024-01.csv.gz", "ScanRange": {"Start": 0, "End": 99},
          "InputSerialization": {"CSV": {}, "CompressionType": "GZIP"}},
         "UnsupportedScanRangeInput", 400),
        ({"Key": "nope.csv"}, "NoSuchKey", 404),
        ({"Bucket": "nobucket"}, "NoSuchBucket", 404),
        ({"Expression": "SELEC * FROM s3object"}, "ParseUnexpectedToken", 400),  # AWS code
        ({"InputSerialization": {"CSV": {"FileHeaderInfo": "MAYBE"}}}, None, 400),
    ],
)
def test_request_errors_are_s3_error_answers(s3: Any, request_fields: dict[str, Any],
                                             code: str | None, status: int) -> None:
    fields = {"Bucket": "sales", "Key": ORDERS_KEY, "Expression": "SELECT * FROM s3object",
              **request_fields}
    with pytest.raises(ClientError) as caught:
        _select(s3, bucket=fields.pop("Bucket"), key=fields.pop("Key"), **fields)
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    if code is not None:
        assert error["Error"]["Code"] == code
    assert "Traceback" not in json.dumps(error, default=str)


def test_error_during_the_scan_is_an_error_event(s3: Any) -> None:
    with pytest.raises(EventStreamError) as caught:
        _select(s3, Expression="SELECT CAST(s.region AS INT) FROM s3object s")
    assert caught.value.response["Error"]["Code"] not in ("", "InternalError")


def _raw(url: str, method: str, path: str, body: bytes = b"",
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request(method, path, body=body, headers=headers or {})
    answer = connection.getresponse()
    return answer.status, answer.read()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"<SelectObjectContentRequest><Expression>", "MalformedXML"),
        (b"not xml", "MalformedXML"),
        (b"<Other/>", "MalformedXML"),
        ((b"<SelectObjectContentRequest><Expression>SELECT 1 FROM s3object</Expression>"
          b"<InputSerialization><CSV/></InputSerialization></SelectObjectContentRequest>"),
         "MissingRequiredParameter"),
        (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>', "MalformedXML"),
        (b"<x>" + b"a" * (300 * 1024) + b"</x>", "MaxMessageLengthExceeded"),
    ],
)
def test_bad_request_bodies(door: tuple[ServerProcess, str], body: bytes, code: str) -> None:
    status, answer = _raw(door[1], "POST", f"/sales/{ORDERS_KEY}?select&select-type=2", body)
    assert status == 400
    assert f"<Code>{code}</Code>".encode() in answer


def test_aws_cli_select(door: tuple[ServerProcess, str], tmp_path: Path) -> None:
    aws = Path(sys.executable).with_name("aws")
    out = tmp_path / "out.csv"
    expression = "SELECT s.order_id FROM s3object s WHERE s.status = 'shipped'"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    subprocess.run(
        [str(aws), "s3api", "select-object-content", "--endpoint-url", door[1],
         "--bucket", "sales", "--key", ORDERS_KEY, "--expression", expression,
         "--expression-type", "SQL",
         "--input-serialization", json.dumps(CSV_USE),
         "--output-serialization", json.dumps({"CSV": {}}), str(out)],
        check=True, env=env, capture_output=True, timeout=120,
    )
    expected, _ = _over_flight(door[0].location, {
        "Bucket": "sales", "Key": ORDERS_KEY, "Expression": expression,
        "InputSerialization": CSV_USE, "OutputSerialization": {"CSV": {}}})
    assert out.read_bytes() == expected


# ----------------------------------------------------------------------------- object calls


def test_head_get_and_range(s3: Any) -> None:
    data = (SAMPLES / "sales" / ORDERS_KEY).read_bytes()
    head = s3.head_object(Bucket="sales", Key=ORDERS_KEY)
    assert head["ContentLength"] == len(data)
    assert s3.get_object(Bucket="sales", Key=ORDERS_KEY)["Body"].read() == data
    for spec, expected in [("bytes=10-99", data[10:100]), ("bytes=-50", data[-50:]),
                           ("bytes=100-", data[100:])]:
        part = s3.get_object(Bucket="sales", Key=ORDERS_KEY, Range=spec)
        assert part["Body"].read() == expected
        assert part["ResponseMetadata"]["HTTPStatusCode"] == 206
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket="sales", Key=ORDERS_KEY, Range=f"bytes={len(data) + 5}-")
    assert caught.value.response["Error"]["Code"] == "InvalidRange"
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket="sales", Key="nope.csv")
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def _all_keys(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".")
                                             for part in p.relative_to(root).parts))


def test_list_buckets_and_objects(s3: Any) -> None:
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert names == sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())
    expected = _all_keys(SAMPLES / "sales")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="sales",
                                                          PaginationConfig={"PageSize": 2})
    keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
    assert keys == expected
    top = s3.list_objects_v2(Bucket="sales", Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == sorted(
        {k.split("/")[0] + "/" for k in expected if "/" in k})
    assert [o["Key"] for o in top["Contents"]] == [k for k in expected if "/" not in k]
    delimited = s3.get_paginator("list_objects_v2").paginate(
        Bucket="sales", Delimiter="/", PaginationConfig={"PageSize": 1})
    rolled = [p["Prefix"] for page in delimited for p in page.get("CommonPrefixes", [])]
    assert rolled == [p["Prefix"] for p in top["CommonPrefixes"]]
    orders = s3.list_objects_v2(Bucket="sales", Prefix="orders/")
    assert [o["Key"] for o in orders["Contents"]] == [k for k in expected
                                                      if k.startswith("orders/")]


def test_read_only_door_refuses_writes(s3: Any) -> None:
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket="sales", Key="new.csv", Body=b"a,b\n")
    assert caught.value.response["Error"]["Code"] == "AccessDenied"
    assert not (SAMPLES / "sales" / "new.csv").exists()


def test_writable_door(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(SAMPLES / "sales" / "orders", data / "sales" / "orders")
    server, url = start_door(data, "--s3-writable")
    try:
        s3 = s3_client(url)
        s3.create_bucket(Bucket="fresh")
        s3.put_object(Bucket="fresh", Key="dir/a.csv", Body=b"x,y\n1,2\n3,4\n")
        assert (data / "fresh" / "dir" / "a.csv").read_bytes() == b"x,y\n1,2\n3,4\n"
        events = _select(s3, bucket="fresh", key="dir/a.csv",
                         Expression="SELECT s.y FROM s3object s")
        assert _records(events) == b"2\n4\n"
        with pytest.raises(ClientError) as escape:
            s3.put_object(Bucket="fresh", Key="../sales/evil.csv", Body=b"x")
        assert escape.value.response["Error"]["Code"] == "AccessDenied"
        assert not (data / "sales" / "evil.csv").exists()
        with pytest.raises(ClientError) as busy:
            s3.delete_bucket(Bucket="fresh")
        assert busy.value.response["Error"]["Code"] == "BucketNotEmpty"
        s3.delete_object(Bucket="fresh", Key="dir/a.csv")
        assert not (data / "fresh" / "dir").exists()
        s3.delete_bucket(Bucket="fresh")
        assert not (data / "fresh").exists()
    finally:
        server.stop()


# ----------------------------------------------------------------------------- SigV4


@pytest.fixture(scope="module")
def signed_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    users = tmp_path_factory.mktemp("auth") / "users.json"
    users.write_text(json.dumps({"users": {
        "alice": {"password": hash_password("pw"), "buckets": ["sales"],
                  "access_keys": {"AKIAALICE": "alice-secret"}},
    }}))
    server, url = start_door(SAMPLES, "--auth", str(users))
    yield url
    server.stop()


def test_signed_requests_are_verified(signed_door: str) -> None:
    alice = s3_client(signed_door, "AKIAALICE", "alice-secret")
    assert _records(_select(alice, Expression="SELECT s.order_id FROM s3object s LIMIT 2")) \
        == b"1\n2\n"
    assert [b["Name"] for b in alice.list_buckets()["Buckets"]] == ["sales"]
    with pytest.raises(ClientError) as other_bucket:
        alice.list_objects_v2(Bucket="tpch")
    assert other_bucket.value.response["Error"]["Code"] == "AccessDenied"
    wrong = s3_client(signed_door, "AKIAALICE", "not-the-secret")
    with pytest.raises(ClientError) as bad_signature:
        wrong.head_object(Bucket="sales", Key=ORDERS_KEY)
    assert bad_signature.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as unknown_key:
        s3_client(signed_door, "AKIANOBODY", "x").list_buckets()
    assert unknown_key.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    unsigned = s3_client(signed_door, signature_version=botocore.UNSIGNED)
    with pytest.raises(ClientError) as anonymous:
        unsigned.list_buckets()
    assert anonymous.value.response["Error"]["Code"] == "AccessDenied"


def test_readme_boto3_snippet(door: tuple[ServerProcess, str]) -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    [code] = [m for m in re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
              if "select_object_content" in m]
    scope: dict[str, Any] = {}
    exec(compile(code.replace("http://127.0.0.1:9000", door[1]), "README.md", "exec"),  # noqa: S102
         scope)
    with (SAMPLES / "sales" / ORDERS_KEY).open(newline="") as handle:
        shipped = [r["order_id"] for r in csv.DictReader(handle) if r["status"] == "shipped"]
    assert scope["records"] == "".join(f"{i}\n" for i in shipped).encode()


@pytest.mark.parametrize(("suffix", "compression", "decompress"), [
    (".gz", "GZIP", "gzip"), (".bz2", "BZIP2", "bz2"), (".zst", "ZSTD", "zstandard")])
def test_stats_of_compressed_input_count_as_aws(s3: Any, suffix: str, compression: str,
                                                decompress: str) -> None:
    """AWS: BytesScanned is the object's (compressed) bytes, BytesProcessed the bytes after
    decompression."""
    import importlib

    path = SAMPLES / "sales" / "compressed" / f"orders-2024-01.csv{suffix}"
    module = importlib.import_module(decompress)
    plain = (module.ZstdDecompressor().stream_reader(path.read_bytes()).read()
             if decompress == "zstandard" else module.decompress(path.read_bytes()))
    events = _select(s3, key=f"compressed/{path.name}", Expression="SELECT count(*) FROM s3object",
                     InputSerialization={"CSV": {}, "CompressionType": compression})
    stats = events[-2]["Stats"]["Details"]
    assert stats["BytesScanned"] == path.stat().st_size
    assert stats["BytesProcessed"] == len(plain) > path.stat().st_size


def test_a_body_that_never_arrives_is_refused() -> None:
    import socket
    from urllib.parse import urlsplit

    server, url = start_door(SAMPLES, "--s3-body-timeout", "0.5")
    try:
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            sock.sendall(f"POST /sales/{ORDERS_KEY}?select&select-type=2 HTTP/1.1\r\n"
                         f"Host: {parts.netloc}\r\nContent-Length: 100\r\n\r\n<x>".encode())
            answer = b""
            while b"</Error>" not in answer:  # headers and body may come in separate packets
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400")
        assert b"<Code>RequestTimeout</Code>" in answer
    finally:
        server.stop()


def test_a_public_door_needs_authentication() -> None:
    command = [sys.executable, "-m", "flight_storage", "serve", "--data", str(SAMPLES),
               "--port", "0", "--s3-port", "0", "--s3-host", "0.0.0.0"]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 2
    assert "without authentication" in result.stderr
