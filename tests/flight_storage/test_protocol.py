"""Tests for flight_storage.protocol: Any packing, signed tickets and handles, result schemas,
and what the real ADBC Flight SQL driver puts on the wire."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import tomllib
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from google.protobuf import any_pb2

from flight_storage import protocol as P
from flight_storage.protocol import pb

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"0123456789abcdef0123456789abcdef"
OTHER_SECRET = b"fedcba9876543210fedcba9876543210"


def _ticket(**changes: object) -> P.PartitionTicket:
    base = P.StatementTicket(
        query="SELECT s._1, count(*) FROM s3object s WHERE _2 = 'é' GROUP BY _1",
        flavor="ceph",
        bucket="bucket",
        key="dir/data.csv.gz",
        partition=P.ByteRange(1024, 4096),
        input_serialization={"CSV": {"FileHeaderInfo": "USE"}, "CompressionType": "GZIP"},
        output_serialization={"JSON": {"RecordDelimiter": "\n"}},
        user="alice",
        issued_at=1_700_000_000.5,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- generated module


def test_generated_module_matches_the_proto_file() -> None:
    proto = (ROOT / "flight_storage" / "proto" / "flight_sql.proto").read_text()
    for name in [m for m in dir(pb) if m[:1].isupper() and hasattr(getattr(pb, m), "DESCRIPTOR")]:
        cls = getattr(pb, name)
        if hasattr(cls, "SerializeToString"):
            assert f"message {name} " in proto, name
    assert pb.DESCRIPTOR.package == "arrow.flight.protocol.sql"


def test_generated_module_runs_on_every_protobuf_the_pin_allows() -> None:
    # The generated module refuses a runtime older than the protoc that made it, or of
    # another major: its version must not exceed the pin's lower bound.
    header = (ROOT / "flight_storage" / "_flight_sql_pb2.py").read_text().splitlines()[:6]
    line = next(h for h in header if h.startswith("# Protobuf Python Version:"))
    gencode = tuple(int(x) for x in line.split(":")[1].strip().split("."))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("protobuf"))
    match = re.fullmatch(r"protobuf>=(\d+)\.(\d+),<(\d+)", pin)
    assert match, pin
    low = (int(match[1]), int(match[2]), 0)
    assert gencode[0] == low[0] == int(match[3]) - 1
    assert gencode <= low


@pytest.mark.parametrize(
    ("cls", "field", "number"),
    [
        (pb.CommandGetSqlInfo, "info", 1),
        (pb.CommandGetTables, "include_schema", 5),
        (pb.CommandGetTables, "table_types", 4),
        (pb.CommandGetCrossReference, "fk_table", 6),
        (pb.ActionCreatePreparedStatementResult, "parameter_schema", 3),
        (pb.CommandStatementQuery, "transaction_id", 2),
        (pb.CommandStatementIngest, "options", 1000),
        (pb.CommandStatementIngest, "transaction_id", 6),
        (pb.DoPutPreparedStatementResult, "prepared_statement_handle", 1),
        (pb.TicketStatementQuery, "statement_handle", 1),
    ],
)
def test_field_numbers_follow_the_protocol(cls: type, field: str, number: int) -> None:
    assert cls.DESCRIPTOR.fields_by_name[field].number == number


# ----------------------------------------------------------------------------- Any


def test_pack_any_uses_the_flight_sql_type_url() -> None:
    wrapped = any_pb2.Any()
    wrapped.ParseFromString(P.pack_any(pb.CommandStatementQuery(query="SELECT 1")))
    assert wrapped.type_url == "type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"


@pytest.mark.parametrize(
    "message",
    [
        pb.CommandGetSqlInfo(info=[0, 1, 8]),
        pb.CommandGetTables(catalog="", table_name_filter_pattern="t%", include_schema=True),
        pb.CommandGetDbSchemas(db_schema_filter_pattern="%"),
        pb.CommandGetCatalogs(),
        pb.CommandGetTableTypes(),
        pb.ActionCreatePreparedStatementRequest(query="SELECT ?"),
        pb.ActionCreatePreparedStatementResult(prepared_statement_handle=b"h\x00", dataset_schema=b"s"),
        pb.CommandPreparedStatementQuery(prepared_statement_handle=b"\xff" * 3),
        pb.CommandStatementIngest(table="t", options={"a": "b"}),
        pb.DoPutPreparedStatementResult(prepared_statement_handle=b""),
    ],
    ids=lambda m: m.DESCRIPTOR.name,
)
def test_any_round_trip(message: object) -> None:
    name, decoded = P.unpack_any(P.pack_any(message))  # type: ignore[arg-type]
    assert name == message.DESCRIPTOR.name  # type: ignore[attr-defined]
    assert decoded == message


def test_optional_fields_keep_presence() -> None:
    _, decoded = P.unpack_any(P.pack_any(pb.CommandGetTables(catalog="")))
    assert decoded.HasField("catalog") and not decoded.HasField("db_schema_filter_pattern")


def test_unknown_flight_sql_command_is_named() -> None:
    data = any_pb2.Any(
        type_url=P.TYPE_URL_PREFIX + "CommandGetFancyThing", value=b""
    ).SerializeToString()
    with pytest.raises(P.UnknownCommandError) as info:
        P.unpack_any(data)
    assert info.value.name == "CommandGetFancyThing"
    assert "CommandGetFancyThing" in str(info.value)


def test_foreign_type_url_is_named() -> None:
    data = any_pb2.Any(type_url="type.googleapis.com/other.Thing", value=b"").SerializeToString()
    with pytest.raises(P.UnknownCommandError) as info:
        P.unpack_any(data)
    assert info.value.name == "type.googleapis.com/other.Thing"


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xff\xff", b"SELECT 1", pb.CommandStatementQuery(query="x").SerializeToString()],
    ids=["empty", "garbage", "text", "bare-message"],
)
def test_garbled_input_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(P.ProtocolError):
        P.unpack_any(data)


def test_garbled_value_inside_a_valid_any() -> None:
    data = any_pb2.Any(
        type_url=P.TYPE_URL_PREFIX + "CommandStatementQuery", value=b"\x0a\xff"
    ).SerializeToString()
    with pytest.raises(P.ProtocolError, match="garbled"):
        P.unpack_any(data)


def test_pack_any_refuses_foreign_messages() -> None:
    with pytest.raises(P.ProtocolError):
        P.pack_any(any_pb2.Any())
    with pytest.raises(P.ProtocolError):
        P.pack_any(pb.CloseSessionRequest())


def test_decode_action_wrapped_and_plain_bodies() -> None:
    request = pb.ActionCreatePreparedStatementRequest(query="SELECT 1")
    assert P.decode_action("CreatePreparedStatement", P.pack_any(request)) == request
    info = flight.FlightInfo(
        pa.schema([("a", pa.int64())]),
        flight.FlightDescriptor.for_command(b"x"),
        [flight.FlightEndpoint(b"t", [])],
        -1,
        -1,
    )
    body = pb.CancelFlightInfoRequest(info=info.serialize()).SerializeToString()
    decoded = P.decode_action("CancelFlightInfo", body)
    assert flight.FlightInfo.deserialize(decoded.info).endpoints[0].ticket.ticket == b"t"
    assert P.decode_action("CloseSession", b"") == pb.CloseSessionRequest()


def test_decode_action_refuses_unknown_and_mismatched() -> None:
    with pytest.raises(P.UnknownCommandError) as info:
        P.decode_action("BeginSavepoint", b"")
    assert info.value.name == "BeginSavepoint"
    wrong = P.pack_any(pb.CommandStatementQuery(query="x"))
    with pytest.raises(P.ProtocolError, match="expected ActionCreatePreparedStatementRequest"):
        P.decode_action("CreatePreparedStatement", wrong)


# ----------------------------------------------------------------------------- tickets


@pytest.mark.parametrize(
    "partition",
    [
        P.WholeObject(),
        P.ByteRange(0, 0),
        P.ByteRange(10, 2**40),
        P.RowGroups((0, 3, 7)),
        P.ObjectGroup(("a/1.parquet", "a/ü 2.parquet")),
        P.IcebergFiles(("s3://w/a.parquet",), snapshot=7, split=(1, 4), row_groups=(2, 3)),
        P.IcebergFiles(("s3://w/a.parquet", "s3://w/b.parquet"), snapshot=0,
                       deletes=((1, "s3://w/b-deletes.parquet"),)),
    ],
    ids=lambda p: p.KIND,
)
def test_ticket_round_trip(partition: P.Partition) -> None:
    ticket = _ticket(partition=partition)
    assert P.decode_ticket(P.encode_ticket(ticket, SECRET), SECRET) == ticket


def test_ticket_round_trip_minimal_and_with_parameters() -> None:
    ticket = _ticket(output_serialization=None, user=None, input_serialization={})
    assert P.decode_ticket(P.encode_ticket(ticket, SECRET), SECRET) == ticket
    bound = _ticket(parameters=b"\x00\x01ipc")
    assert P.decode_ticket(P.encode_ticket(bound, SECRET), SECRET).parameters == b"\x00\x01ipc"


def test_ticket_through_flight_wrapping() -> None:
    ticket = _ticket()
    data = P.ticket_to_flight(ticket, SECRET)
    name, message = P.unpack_any(data)
    assert name == "TicketStatementQuery"
    assert P.decode_ticket(message.statement_handle, SECRET) == ticket
    assert P.ticket_from_flight(data, SECRET) == ticket


def test_ticket_is_compact_for_long_queries() -> None:
    query = "SELECT " + ", ".join(f"_{i}" for i in range(1, 400)) + " FROM s3object"
    data = P.encode_ticket(_ticket(query=query), SECRET)
    assert len(data) < len(query) // 2


def test_forged_ticket_is_refused() -> None:
    data = P.encode_ticket(_ticket(), OTHER_SECRET)
    with pytest.raises(P.TicketError, match="signature"):
        P.decode_ticket(data, SECRET)


def test_every_altered_byte_is_refused() -> None:
    data = P.encode_ticket(_ticket(partition=P.WholeObject()), SECRET)
    for i in range(len(data)):
        altered = bytearray(data)
        altered[i] ^= 0x01
        with pytest.raises(P.TicketError):
            P.decode_ticket(bytes(altered), SECRET)
    with pytest.raises(P.TicketError):
        P.decode_ticket(data[:-1], SECRET)
    with pytest.raises(P.TicketError):
        P.decode_ticket(data + b"\x00", SECRET)


def test_ticket_with_rewritten_payload_and_old_mac_is_refused() -> None:
    data = P.encode_ticket(_ticket(output_serialization=None, user=None), SECRET)
    head, mac = data[:-32], data[-32:]
    payload = zlib.decompress(head[5:]) if head[4] & 1 else head[5:]
    body = json.loads(payload)
    body["k"] = "secret/other-object.csv"
    # Re-emitted uncompressed (flags 0), with the MAC of the original ticket.
    forged = head[:4] + b"\x00" + json.dumps(body, separators=(",", ":")).encode() + mac
    with pytest.raises(P.TicketError, match="signature"):
        P.decode_ticket(forged, SECRET)


def test_expired_ticket_is_refused() -> None:
    data = P.encode_ticket(_ticket(issued_at=1000.0), SECRET)
    assert P.decode_ticket(data, SECRET, max_age=60, now=1059.0).issued_at == 1000.0
    with pytest.raises(P.TicketError, match="expired"):
        P.decode_ticket(data, SECRET, max_age=60, now=1061.0)
    with pytest.raises(P.TicketError, match="future"):
        P.decode_ticket(data, SECRET, max_age=60, now=500.0)


def test_default_issue_time_is_now() -> None:
    ticket = P.ConstantTicket("SELECT 1", "ceph", "", "", P.WholeObject())
    assert abs(ticket.issued_at - time.time()) < 5
    assert P.decode_ticket(P.encode_ticket(ticket, SECRET), SECRET, max_age=60) == ticket


def test_unsupported_version_is_refused() -> None:
    data = P.encode_ticket(_ticket(), SECRET)
    signed = data[:3] + bytes([P.TICKET_VERSION + 1]) + data[4:-32]
    import hashlib
    import hmac

    resigned = signed + hmac.new(SECRET, signed, hashlib.sha256).digest()
    with pytest.raises(P.TicketError, match="version"):
        P.decode_ticket(resigned, SECRET)
    with pytest.raises(ValueError):
        P.encode_ticket(_ticket(version=P.TICKET_VERSION + 1), SECRET)


TICKET_TYPES = [P.StatementTicket, P.ConstantTicket, P.IcebergTicket, P.SelectObjectTicket,
                P.SqlTicket]


@pytest.mark.parametrize("kind", TICKET_TYPES, ids=lambda k: k.__name__)
def test_ticket_type_round_trips(kind: type[P.PartitionTicket]) -> None:
    base = _ticket()
    ticket = kind(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    decoded = P.decode_ticket(P.encode_ticket(ticket, SECRET), SECRET)
    assert type(decoded) is kind and decoded == ticket
    assert decoded != base or kind is P.StatementTicket  # the type is part of the ticket


def test_ticket_types_cover_every_request_kind() -> None:
    assert sorted(k.REQUEST for k in TICKET_TYPES) == sorted(P.REQUEST_KINDS)
    assert len(set(P.REQUEST_KINDS)) == len(P.REQUEST_KINDS)


def _signed_ticket(payload: dict[str, object]) -> bytes:
    """A ticket of the wire format with this payload, signed with SECRET (uncompressed)."""
    import hashlib
    import hmac

    signed = b"FST" + bytes([P.TICKET_VERSION, 0]) + json.dumps(payload).encode()
    return signed + hmac.new(SECRET, signed, hashlib.sha256).digest()


def test_wire_format_is_the_tagged_json_older_nodes_read() -> None:
    # The type travels as the "r" tag and the partition as {"kind": ...}: a ticket written
    # by a node from before the typed tickets decodes into its type, and the other way round.
    older = {"q": "SELECT * FROM s3object", "f": "ceph", "b": "bucket", "k": "a.csv",
             "p": {"kind": "byte_range", "start": 3, "end": 9}, "t": 1_700_000_000.0,
             "r": "select_object", "i": {"CSV": {}}}
    ticket = P.decode_ticket(_signed_ticket(older), SECRET)
    assert ticket == P.SelectObjectTicket("SELECT * FROM s3object", "ceph", "bucket", "a.csv",
                                          P.ByteRange(3, 9), input_serialization={"CSV": {}},
                                          issued_at=1_700_000_000.0)
    data = P.encode_ticket(ticket, SECRET)
    body = data[5:-32]
    payload = json.loads(zlib.decompress(body) if data[4] & 1 else body)
    assert payload == older


@pytest.mark.parametrize("tag", ["drop_table", None, 7, ["sql"]])
def test_unknown_request_kind_is_refused(tag: object) -> None:
    payload = {"q": "SELECT 1", "f": "ceph", "b": "", "k": "", "p": {"kind": "object"},
               "t": time.time(), "r": tag}
    with pytest.raises(P.TicketError, match="unknown request kind"):
        P.decode_ticket(_signed_ticket(payload), SECRET)


def test_asked_parallelism_round_trips_and_is_positive() -> None:
    """A statement's ticket carries the endpoints its client asked for, so its DoGet cuts the
    object as its GetFlightInfo did; a ticket without it is sized by work."""
    for wanted in (None, 1, 64):
        ticket = _ticket(parallelism=wanted)
        assert P.decode_ticket(P.encode_ticket(ticket, SECRET), SECRET) == ticket
    with pytest.raises(ValueError, match="parallelism"):
        _ticket(parallelism=0)


def test_key_rotation() -> None:
    old = P.encode_ticket(_ticket(), OTHER_SECRET)
    new = P.encode_ticket(_ticket(), [SECRET, OTHER_SECRET])
    assert P.decode_ticket(old, [SECRET, OTHER_SECRET]) == _ticket()
    assert P.decode_ticket(new, SECRET) == _ticket()
    with pytest.raises(P.TicketError):
        P.decode_ticket(new, OTHER_SECRET)


def test_short_secret_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        P.encode_ticket(_ticket(), b"short")


def test_ticket_from_flight_refuses_other_messages() -> None:
    with pytest.raises(P.TicketError, match="TicketStatementQuery"):
        P.ticket_from_flight(P.pack_any(pb.CommandGetCatalogs()), SECRET)
    with pytest.raises(P.TicketError):
        P.ticket_from_flight(b"\x00garbage", SECRET)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "stripes"}, "unknown partition kind"),
        ({"start": 1, "end": 2}, "unknown partition kind"),
        ({"kind": "byte_range", "start": 5}, "needs"),
        ({"kind": "byte_range", "start": 9, "end": 5}, "bad byte range"),
        ({"kind": "object", "keys": ("a",)}, "takes no"),
        ({"kind": "row_groups"}, "needs"),
        ({"kind": "row_groups", "row_groups": [1], "start": 0}, "takes no"),
        ({"kind": "objects", "keys": []}, "needs"),
        ({"kind": "files", "keys": ["a"]}, "needs"),
        ({"kind": "files", "keys": ["a", "b"], "snapshot": 1, "split": [0, 2]}, "split"),
        ({"kind": "files", "keys": ["a"], "snapshot": 1, "deletes": [[1, "d"]]}, "delete"),
    ],
)
def test_invalid_partitions(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        P.partition_from_dict(kwargs)


@pytest.mark.parametrize("partition", [
    P.WholeObject(), P.ByteRange(0, 7), P.RowGroups((4,)), P.ObjectGroup(("k",)),
    P.IcebergFiles(("f",), snapshot=3, split=(0, 2)),
])
def test_partitions_decode_into_their_type(partition: P.Partition) -> None:
    assert P.partition_from_dict(partition.to_dict()) == partition
    assert json.loads(json.dumps(partition.to_dict()))["kind"] == partition.KIND


# ----------------------------------------------------------------------------- handles


def test_handle_round_trip_and_parameters() -> None:
    handle = P.PreparedHandle(query="SELECT * FROM s3object WHERE _1 = ?", flavor="aws", user="bob")
    decoded = P.decode_handle(P.encode_handle(handle, SECRET), SECRET, max_age=3600)
    assert decoded == handle and decoded.parameters is None

    batch = pa.record_batch({"0": pa.array(["x'y"]), "1": pa.array([3], pa.int64())})
    bound = P.bind_parameters(decoded, batch)
    again = P.decode_handle(P.encode_handle(bound, SECRET), SECRET)
    params = P.handle_parameters(again.parameters)
    assert params is not None and params.equals(batch)
    assert P.bind_parameters(again, None).parameters is None
    assert P.handle_parameters(None) is None


def test_handle_with_empty_parameter_batch_keeps_schema() -> None:
    empty = pa.record_batch({"0": pa.array([], pa.int32())})
    bound = P.bind_parameters(P.PreparedHandle("SELECT ?", "ceph"), empty)
    params = P.handle_parameters(bound.parameters)
    assert params is not None and params.schema == empty.schema and params.num_rows == 0


def test_handle_and_ticket_are_not_interchangeable() -> None:
    handle = P.encode_handle(P.PreparedHandle("SELECT 1", "ceph"), SECRET)
    ticket = P.encode_ticket(_ticket(), SECRET)
    with pytest.raises(P.TicketError):
        P.decode_ticket(handle, SECRET)
    with pytest.raises(P.TicketError):
        P.decode_handle(ticket, SECRET)


def test_altered_or_expired_handle_is_refused() -> None:
    data = P.encode_handle(P.PreparedHandle("SELECT 1", "ceph", issued_at=100.0), SECRET)
    with pytest.raises(P.TicketError, match="signature"):
        P.decode_handle(data[:-1] + bytes([data[-1] ^ 1]), SECRET)
    with pytest.raises(P.TicketError, match="expired"):
        P.decode_handle(data, SECRET, max_age=10, now=200.0)


def test_bad_parameter_bytes() -> None:
    with pytest.raises(P.ProtocolError):
        P.handle_parameters(b"not arrow")


# ----------------------------------------------------------------------------- schemas


def test_result_schemas() -> None:
    assert P.CATALOGS_SCHEMA == pa.schema([pa.field("catalog_name", pa.utf8(), False)])
    assert [f.nullable for f in P.DB_SCHEMAS_SCHEMA] == [True, False]
    assert P.TABLES_SCHEMA.names == ["catalog_name", "db_schema_name", "table_name", "table_type"]
    assert [f.nullable for f in P.TABLES_SCHEMA] == [True, True, False, False]
    assert P.TABLES_SCHEMA_WITH_SCHEMA.field("table_schema").type == pa.binary()
    assert P.TABLE_TYPES_SCHEMA.names == ["table_type"]
    value = P.SQL_INFO_SCHEMA.field("value").type
    assert value.mode == "dense" and list(value.type_codes) == [0, 1, 2, 3, 4, 5]
    assert [f.name for f in value] == [
        "string_value",
        "bool_value",
        "bigint_value",
        "int32_bitmask",
        "string_list",
        "int32_to_int32_list_map",
    ]


def test_build_sql_info() -> None:
    batch = P.build_sql_info(
        {
            P.SqlInfo.FLIGHT_SQL_SERVER_NAME: "flight-select",
            P.SqlInfo.FLIGHT_SQL_SERVER_READ_ONLY: True,
            P.SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION: 0,
            10_000: 7,
            508: ["SELECT", "FROM"],
            517: {4: [5, 6]},
        }
    )
    batch.validate(full=True)
    assert batch.schema.equals(P.SQL_INFO_SCHEMA)
    union = batch.column("value")
    assert union.type_codes.to_pylist() == [0, 1, 3, 2, 4, 5]
    assert batch.to_pylist() == [
        {"info_name": 0, "value": "flight-select"},
        {"info_name": 3, "value": True},
        {"info_name": 8, "value": 0},
        {"info_name": 10_000, "value": 7},
        {"info_name": 508, "value": ["SELECT", "FROM"]},
        {"info_name": 517, "value": [(4, [5, 6])]},
    ]


def test_client_import_stays_light() -> None:
    code = (
        "import sys, flight_storage.protocol\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('datafusion', 'select_dialect', 'sqlglot', 'grpc', 'grpc_tools')]\n"
        "ours = sorted(m for m in sys.modules if m.startswith('flight_storage'))\n"
        "print(bad, ours)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == (
        "[] ['flight_storage', 'flight_storage._flight_sql_pb2', 'flight_storage.protocol', "
        "'flight_storage.protocol.messages', 'flight_storage.protocol.plan_description', "
        "'flight_storage.protocol.schemas', "
        "'flight_storage.protocol.signing', 'flight_storage.protocol.tickets']"
    )


# ----------------------------------------------------------------------------- the ADBC driver

# A tiny Flight server run in its own process (never mix a Flight server and blocking Flight
# clients in one process). It prints "PORT <n>" then one JSON line per call received.
# Mode "unimplemented" answers UNIMPLEMENTED to everything; mode "stateless" serves SQL
# info, stateless prepared statements and two ticketed partitions per query.
_SERVER = textwrap.dedent(
    r'''
    import base64, json, sys
    import pyarrow as pa
    import pyarrow.flight as flight
    from flight_storage import protocol as P

    MODE, SECRET = sys.argv[1], sys.argv[2].encode()
    RESULT = pa.schema([pa.field("one", pa.int64(), nullable=False)])

    def log(rpc, kind, data):
        print(json.dumps({"rpc": rpc, "kind": kind, "data": base64.b64encode(data).decode()}),
              flush=True)

    class Server(flight.FlightServerBase):
        def get_flight_info(self, context, descriptor):
            log("GetFlightInfo", "command", descriptor.command)
            if MODE == "unimplemented":
                raise NotImplementedError("recording server")
            name, cmd = P.unpack_any(descriptor.command)
            if name == "CommandGetSqlInfo":
                return flight.FlightInfo(P.SQL_INFO_SCHEMA, descriptor,
                                         [flight.FlightEndpoint(descriptor.command, [])], -1, -1)
            if name == "CommandPreparedStatementQuery":
                query = P.decode_handle(cmd.prepared_statement_handle, SECRET).query
            elif name == "CommandStatementQuery":
                query = cmd.query
            else:
                raise NotImplementedError(name)
            endpoints = [
                flight.FlightEndpoint(P.ticket_to_flight(P.StatementTicket(
                    query, "ceph", "bucket", "key",
                    P.ByteRange(start, start + 10)), SECRET), [])
                for start in (0, 10)
            ]
            return flight.FlightInfo(RESULT, descriptor, endpoints, -1, -1)

        def get_schema(self, context, descriptor):
            log("GetSchema", "command", descriptor.command)
            raise NotImplementedError("recording server")

        def do_get(self, context, ticket):
            log("DoGet", "ticket", ticket.ticket)
            name, cmd = P.unpack_any(ticket.ticket)
            if name == "CommandGetSqlInfo":
                values = {0: "recording", 1: "0", 2: "1.5.0", 8: 0}
                batch = P.build_sql_info({i: values[i] for i in cmd.info if i in values})
                return flight.RecordBatchStream(pa.Table.from_batches([batch]))
            t = P.ticket_from_flight(ticket.ticket, SECRET, max_age=60)
            return flight.RecordBatchStream(
                pa.table({"one": pa.array([t.partition.start], pa.int64())}, schema=RESULT))

        def do_put(self, context, descriptor, reader, writer):
            log("DoPut", "command", descriptor.command)
            raise NotImplementedError("recording server")

        def do_action(self, context, action):
            log("DoAction:" + action.type, "body", action.body.to_pybytes())
            if MODE == "unimplemented":
                raise NotImplementedError("recording server")
            request = P.decode_action(action.type, action.body.to_pybytes())
            if action.type == "CreatePreparedStatement":
                handle = P.encode_handle(P.PreparedHandle(request.query, "ceph"), SECRET)
                result = P.pb.ActionCreatePreparedStatementResult(
                    prepared_statement_handle=handle,
                    dataset_schema=RESULT.serialize().to_pybytes())
                return [flight.Result(P.pack_any(result))]
            if action.type == "ClosePreparedStatement":
                P.decode_handle(request.prepared_statement_handle, SECRET)
                return []
            if action.type == "CloseSession":
                closed = P.pb.CloseSessionResult(status=P.pb.CloseSessionResult.CLOSED)
                return [flight.Result(closed.SerializeToString())]
            raise NotImplementedError(action.type)

        def list_actions(self, context):
            log("ListActions", "none", b"")
            return []

    server = Server("grpc://127.0.0.1:0")
    print("PORT", server.port, flush=True)
    server.serve()
    '''
)


@pytest.fixture
def recording_server(request: pytest.FixtureRequest) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, request.param, SECRET.decode()],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[:1] == ["PORT"], proc.stderr.read() if proc.stderr else ""
        yield int(first[1]), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)


def _calls(proc: subprocess.Popen[str]) -> list[tuple[str, str, object]]:
    """Stop the server; return (rpc, decoded message name, message) per call received."""
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    calls: list[tuple[str, str, object]] = []
    for line in out.splitlines():
        event = json.loads(line)
        data = base64.b64decode(event["data"])
        rpc = event["rpc"]
        if rpc.startswith("DoAction:"):
            message = P.decode_action(rpc.split(":", 1)[1], data)
            calls.append((rpc, message.DESCRIPTOR.name, message))
        elif event["kind"] == "none":
            calls.append((rpc, "", None))
        else:
            name, message = P.unpack_any(data)
            calls.append((rpc, name, message))
    return calls


@pytest.mark.parametrize("recording_server", ["unimplemented"], indirect=True)
def test_adbc_driver_falls_back_to_statement_query(
    recording_server: tuple[int, subprocess.Popen[str]],
) -> None:
    adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")
    port, proc = recording_server
    with adbc.connect(f"grpc://127.0.0.1:{port}") as conn:
        with conn.cursor() as cur:
            with pytest.raises(Exception, match="recording server"):
                cur.execute("SELECT 1")
    calls = _calls(proc)
    sequence = [(rpc, name) for rpc, name, _ in calls]
    assert sequence == [
        ("GetFlightInfo", "CommandGetSqlInfo"),
        ("DoAction:CreatePreparedStatement", "ActionCreatePreparedStatementRequest"),
        ("GetFlightInfo", "CommandStatementQuery"),
        ("DoAction:CloseSession", "CloseSessionRequest"),
    ]
    assert list(calls[0][2].info) == [P.SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION]  # type: ignore[attr-defined]
    assert calls[1][2].query == "SELECT 1"  # type: ignore[attr-defined]
    assert calls[2][2].query == "SELECT 1"  # type: ignore[attr-defined]


@pytest.mark.parametrize("recording_server", ["stateless"], indirect=True)
def test_adbc_driver_with_stateless_handles_and_tickets(
    recording_server: tuple[int, subprocess.Popen[str]],
) -> None:
    adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")
    port, proc = recording_server
    with adbc.connect(f"grpc://127.0.0.1:{port}") as conn:
        info = conn.adbc_get_info()
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            rows = sorted(cur.fetchall())
    assert rows == [(0,), (10,)]
    assert info["vendor_name"] == "recording"
    calls = _calls(proc)
    sequence = [(rpc, name) for rpc, name, _ in calls]
    # The two partition DoGets run in parallel; their order varies.
    assert sequence[:2] == [
        ("GetFlightInfo", "CommandGetSqlInfo"),
        ("DoGet", "CommandGetSqlInfo"),
    ]
    assert sequence[2:] == [
        ("GetFlightInfo", "CommandGetSqlInfo"),
        ("DoGet", "CommandGetSqlInfo"),
        ("DoAction:CreatePreparedStatement", "ActionCreatePreparedStatementRequest"),
        ("GetFlightInfo", "CommandPreparedStatementQuery"),
        ("DoGet", "TicketStatementQuery"),
        ("DoGet", "TicketStatementQuery"),
        ("DoAction:ClosePreparedStatement", "ActionClosePreparedStatementRequest"),
        ("DoAction:CloseSession", "CloseSessionRequest"),
    ]
    prepared = calls[5][2]
    handle = P.decode_handle(prepared.prepared_statement_handle, SECRET)  # type: ignore[attr-defined]
    assert handle.query == "SELECT 1"
    starts = sorted(
        P.decode_ticket(c[2].statement_handle, SECRET).partition.start  # type: ignore[attr-defined]
        for c in calls[6:8]
    )
    assert starts == [0, 10]
