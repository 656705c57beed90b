"""S3 SelectObjectContent requests sent as JSON over Flight (pyarrow.flight client)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.execution.select_local import run_select
from flight_storage.request.s3_request import RECORDS_SCHEMA, parse_request
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_server_support import (
    error_document,
    json_descriptor,
    statement_descriptor,
    write_bucket,
)

ORDERS = SAMPLES / "sales" / "orders" / "2024-01.csv"
EVENTS = SAMPLES / "sales" / "events" / "2024-01.ndjson"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = start_server(SAMPLES)
    yield process
    process.stop()


def _read(server: ServerProcess, request: dict[str, Any],
          headers: list[tuple[bytes, bytes]] | None = None,
          ) -> tuple[flight.FlightInfo, list[tuple[pa.RecordBatch, dict[str, Any] | None]]]:
    client = flight.connect(server.location)
    options = flight.FlightCallOptions(headers=headers or [])
    info = client.get_flight_info(json_descriptor(request), options)
    messages = []
    for endpoint in info.endpoints:
        reader = client.do_get(endpoint.ticket, options)
        assert reader.schema.equals(info.schema)
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            meta = json.loads(chunk.app_metadata.to_pybytes()) if chunk.app_metadata else None
            messages.append((chunk.data, meta))
    return info, messages


def _records(messages: list[tuple[pa.RecordBatch, dict[str, Any] | None]]) -> bytes:
    return b"".join(v for batch, _ in messages for v in batch.column("records").to_pylist())


REQUEST = {
    "Bucket": "sales",
    "Key": "orders/2024-01.csv",
    "Expression": "SELECT s.order_id, upper(s.region) AS r FROM s3object s "
                  "WHERE s.status = 'shipped'",
    "ExpressionType": "SQL",
    "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}, "CompressionType": "NONE"},
}


@pytest.mark.parametrize("output", [{"CSV": {}}, {"JSON": {"RecordDelimiter": "\n"}},
                                    {"CSV": {"FieldDelimiter": "|", "QuoteFields": "ALWAYS"}}])
def test_serialized_records_are_what_s3_select_returns(server: ServerProcess,
                                                       output: dict[str, Any]) -> None:
    info, messages = _read(server, {**REQUEST, "OutputSerialization": output})
    expected = run_select(ORDERS.read_bytes(), REQUEST["Expression"],
                          input_serialization=REQUEST["InputSerialization"],
                          output_serialization=output)
    assert info.schema.equals(RECORDS_SCHEMA)
    assert _records(messages) == expected.records
    assert expected.records.count(b"\n") > 10
    last_batch, last_meta = messages[-1]
    assert last_batch.num_rows == 0
    assert last_meta == {"Stats": {**expected.stats, "BytesReturned": len(expected.records)}}
    assert all(meta is None for _, meta in messages[:-1])  # no Progress unless asked


def test_request_progress_adds_progress_messages(server: ServerProcess) -> None:
    request = {**REQUEST, "OutputSerialization": {"JSON": {}},
               "RequestProgress": {"Enabled": True}}
    _, messages = _read(server, request)
    progress = [m["Progress"] for _, m in messages[:-1] if m is not None]
    stats = messages[-1][1]["Stats"]
    assert len(progress) == len(messages) - 1 >= 1
    returned = [p["BytesReturned"] for p in progress]
    assert returned == sorted(returned) and returned[-1] == stats["BytesReturned"]
    assert all(p["BytesScanned"] <= stats["BytesScanned"] for p in progress)


def test_arrow_records_by_default(server: ServerProcess) -> None:
    info, messages = _read(server, REQUEST)
    table = pa.Table.from_batches([b for b, _ in messages], schema=info.schema)
    assert table.schema.names == ["order_id", "r"]
    with ORDERS.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = [(r["order_id"] or None, r["region"].upper() or None)
                for r in rows if r["status"] == "shipped"]
    assert list(zip(*table.to_pydict().values(), strict=True)) == expected and expected
    assert "Stats" in messages[-1][1]


def test_scan_range_reads_records_starting_in_the_range(server: ServerProcess) -> None:
    data = EVENTS.read_bytes()
    request = {"Bucket": "sales", "Key": "events/2024-01.ndjson",
               "Expression": "SELECT * FROM s3object s",
               "InputSerialization": {"JSON": {"Type": "LINES"}},
               "OutputSerialization": {"JSON": {}},
               "ScanRange": {"Start": 100, "End": 900}}
    _, messages = _read(server, request)
    expected = run_select(data, request["Expression"],
                          input_serialization=request["InputSerialization"],
                          output_serialization={"JSON": {}}, scan_range=(100, 900))
    whole = run_select(data, request["Expression"],
                       input_serialization=request["InputSerialization"],
                       output_serialization={"JSON": {}})
    assert _records(messages) == expected.records
    assert 0 < len(expected.records) < len(whole.records)
    assert messages[-1][1]["Stats"]["BytesScanned"] == 801


def test_flavor_header_applies_to_json_requests(server: ServerProcess) -> None:
    request = {**REQUEST, "Expression": "SELECT count(*) FROM s3object",
               "OutputSerialization": {"CSV": {}}}
    _, ceph = _read(server, request)
    _, aws = _read(server, request, headers=[(b"x-flight-select-flavor", b"aws")])
    for flavor, messages in (("ceph", ceph), ("aws", aws)):
        expected = run_select(ORDERS.read_bytes(), request["Expression"],
                              input_serialization=REQUEST["InputSerialization"],
                              output_serialization={"CSV": {}}, flavor=flavor)
        assert _records(messages) == expected.records


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"ExpressionType": "XPATH"}, "InvalidExpressionType"),
        ({"Expression": None}, "MissingRequiredParameter"),
        ({"ScanRange": {"Start": 9, "End": 3}}, "InvalidScanRange"),
        ({"Colour": "blue"}, "InvalidRequestParameter"),
        ({"Expression": "SELECT _1 FROM s3object WHERE ("}, "UnsupportedSyntax"),
        ({"OutputSerialization": {"CSV": {}, "JSON": {}}}, "InvalidRequest"),
    ],
)
def test_bad_requests_are_invalid_argument_with_a_code(
    server: ServerProcess, change: dict[str, Any], code: str | None
) -> None:
    request = {k: v for k, v in {**REQUEST, **change}.items() if v is not None}
    with pytest.raises(pa.ArrowInvalid) as info:  # gRPC INVALID_ARGUMENT
        _read(server, request)
    document = error_document(info.value)
    assert document["code"] == code
    assert "Traceback" not in str(info.value)


def test_missing_object_is_not_found(server: ServerProcess) -> None:
    with pytest.raises(KeyError) as info:  # gRPC NOT_FOUND
        _read(server, {**REQUEST, "Key": "orders/1999-01.csv"})
    assert error_document(info.value)["code"] == "NoSuchKey"


def test_parse_request_scan_range_rules() -> None:
    start_only = parse_request(b'{"Bucket":"b","Key":"k","Expression":"x","ScanRange":{"Start":5}}')
    end_only = parse_request(b'{"Bucket":"b","Key":"k","Expression":"x","ScanRange":{"End":5}}')
    assert start_only.scan_range(100) == (5, 99)
    assert end_only.scan_range(100) == (95, 99)  # S3: End alone means the last End bytes
    with pytest.raises(InvalidRequestError):
        parse_request(b"[1, 2]")
    with pytest.raises(InvalidRequestError) as info:
        parse_request(b'{"Bucket":"b","Key":"k","Expression":"x","SSECustomerKey":"k"}')
    assert info.value.code == "NotImplemented"


def test_keys_never_leave_the_data_root(server: ServerProcess, tmp_path: Path) -> None:
    for key in ("../sales/orders/2024-01.csv", "/etc/passwd", "orders/\u0000.csv",
                "orders/../../../etc/passwd"):
        with pytest.raises(flight.FlightUnauthorizedError) as info:
            _read(server, {**REQUEST, "Key": key})
        assert error_document(info.value)["code"] == "AccessDenied"
    with pytest.raises(flight.FlightUnauthorizedError):
        _read(server, {**REQUEST, "Bucket": ".."})


def test_an_s3_request_reads_text_where_a_statement_reads_typed_columns(
        tmp_path: Path) -> None:
    """A bucket's typed ``columns`` make a Flight SQL table; an S3 request keeps S3 Select's
    reading (every CSV field is text, as written; a comparison needs a CAST), taking only the
    bucket's InputSerialization when it sends none (issue #29: decided and pinned here)."""
    config = {"tables": [{"prefix": "t/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
                          "columns": [{"name": "id", "type": "int64"},
                                      {"name": "price", "type": "decimal(10,2)"}]}]}
    write_bucket(tmp_path, {"t/a.csv": "id,price\n2,1.5\n10,09.50\n"}, config)
    process = start_server(tmp_path)
    try:
        client = flight.connect(process.location)
        info = client.get_flight_info(statement_descriptor(
            'SELECT id, price FROM "b"."t/a.csv" WHERE price > 2'))
        typed = client.do_get(info.endpoints[0].ticket).read_all()
        assert typed.schema.field("price").type == pa.decimal128(10, 2)
        assert typed.to_pylist() == [{"id": 10, "price": Decimal("9.50")}]
        request = {"Bucket": "b", "Key": "t/a.csv", "ExpressionType": "SQL",
                   "Expression": "SELECT s.id, s.price FROM s3object s "
                                 "WHERE CAST(s.price AS FLOAT) > 2"}
        _, messages = _read(process, request)
        assert messages[0][0].schema.field("price").type == pa.string()
        assert [row for batch, _ in messages for row in batch.to_pylist()] == [
            {"id": "10", "price": "09.50"}]
        request["OutputSerialization"] = {"CSV": {}}
        _, messages = _read(process, request)
        assert _records(messages) == b"10,09.50\n"
    finally:
        process.stop()
