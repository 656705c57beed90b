"""The error boundary: statuses, JSON documents, no tracebacks (in-process pyarrow server only,
no DataFusion)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    ResourceLimitError,
)
from flight_storage.protocol import TicketError, UnknownCommandError
from flight_storage.rpc.auth import AuthenticationError
from flight_storage.rpc.boundary import client_error, guarded, rpc_boundary
from select_dialect.errors import SelectDialectError

ERRORS: dict[str, BaseException] = {
    "invalid": InvalidRequestError("bad", code="InvalidScanRange"),
    "missing": ObjectNotFoundError("no such key: a/b"),
    "denied": AccessDeniedError("no"),
    "auth": AuthenticationError("who are you"),
    "busy": ResourceLimitError("busy", code="SlowDown"),
    "long": ResourceLimitError("long", code="ExpressionTooLong"),
    "slow": ResourceLimitError("slow", code="QueryTimeout"),
    "memory": ResourceLimitError("Resources exhausted", code="ResourceLimitExceeded"),
    "unknown": UnknownCommandError("CommandGetXdbcTypeInfo"),
    "ticket": TicketError("forged"),
    "bug": ZeroDivisionError("secret internals"),
}

EXPECTED: dict[str, tuple[type[BaseException], str]] = {
    "invalid": (pa.ArrowInvalid, "InvalidScanRange"),
    "missing": (KeyError, "NoSuchKey"),
    "denied": (flight.FlightUnauthorizedError, "AccessDenied"),
    "auth": (flight.FlightUnauthenticatedError, "InvalidAccessKeyId"),
    "busy": (flight.FlightUnavailableError, "SlowDown"),
    "long": (pa.ArrowInvalid, "ExpressionTooLong"),
    "slow": (flight.FlightTimedOutError, "QueryTimeout"),
    "memory": (flight.FlightUnavailableError, "ResourceLimitExceeded"),
    "unknown": (NotImplementedError, "NotImplemented"),
    "ticket": (flight.FlightUnauthorizedError, "InvalidTicket"),
    "bug": (flight.FlightInternalError, "InternalError"),
}


class _Raising(flight.FlightServerBase):
    @rpc_boundary
    def do_action(self, context: Any, action: flight.Action) -> Iterator[flight.Result]:
        raise ERRORS[action.type]

    @rpc_boundary
    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.FlightDataStream:
        schema = pa.schema([("a", pa.int64())])

        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.record_batch([pa.array([1])], schema=schema)
            raise ERRORS[ticket.ticket.decode()]

        return flight.GeneratorStream(schema, guarded(batches()))


@pytest.fixture(scope="module")
def client() -> Iterator[flight.FlightClient]:
    with _Raising("grpc://127.0.0.1:0") as server:
        yield flight.connect(f"grpc://127.0.0.1:{server.port}")


def _document(exc: BaseException) -> dict[str, Any]:
    text = str(exc)
    return json.JSONDecoder().raw_decode(text[text.index("{"):])[0]


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_status_and_document_of_rpc_errors(client: flight.FlightClient, name: str) -> None:
    expected_type, code = EXPECTED[name]
    with pytest.raises(expected_type) as info:
        list(client.do_action(flight.Action(name, b"")))
    assert _document(info.value)["code"] == code
    assert "Traceback" not in str(info.value) and "secret internals" not in str(info.value)


@pytest.mark.parametrize("name", ["invalid", "busy", "bug"])
def test_errors_raised_while_streaming_are_converted(client: flight.FlightClient,
                                                     name: str) -> None:
    expected_type, code = EXPECTED[name]
    with pytest.raises(expected_type) as info:
        client.do_get(flight.Ticket(name.encode())).read_all()
    assert _document(info.value)["code"] == code
    assert "Traceback" not in str(info.value)


def test_flight_errors_carry_the_document_as_extra_info() -> None:
    error = client_error(AccessDeniedError("no"))
    assert isinstance(error, flight.FlightUnauthorizedError)
    assert json.loads(error.extra_info) == {"code": "AccessDenied", "message": "no"}


def test_dialect_errors_keep_line_and_column() -> None:
    class _Syntax(SelectDialectError):
        code = "ParseUnexpectedToken"

    exc = _Syntax("unexpected FORM")
    exc.line, exc.column = 2, 5
    error = client_error(exc)
    assert isinstance(error, pa.ArrowInvalid)
    assert _document(error) == {"code": "ParseUnexpectedToken", "message": "unexpected FORM",
                                "line": 2, "column": 5}


class _Plain(flight.FlightServerBase):
    def do_action(self, context: Any, action: flight.Action) -> Iterator[flight.Result]:
        raise {"memory": MemoryError("m"), "capacity": pa.ArrowCapacityError("c"),
               "arrow_memory": pa.ArrowMemoryError("o")}[action.type]


@pytest.mark.parametrize("name", ["memory", "capacity", "arrow_memory"])
def test_pin_resource_exhausted_is_unreachable_from_pyarrow(name: str) -> None:
    """Why resource limits are sent as UNAVAILABLE: pyarrow has no path to RESOURCE_EXHAUSTED.
    If this fails, pyarrow learnt one; map ResourceLimitError onto it in boundary.py."""
    grpc = pytest.importorskip("grpc")
    with _Plain("grpc://127.0.0.1:0") as server:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        call = channel.unary_stream("/arrow.flight.protocol.FlightService/DoAction",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        body = name.encode()
        with pytest.raises(grpc.RpcError) as info:
            list(call(b"\x0a" + bytes([len(body)]) + body))
        channel.close()
    assert info.value.code() == grpc.StatusCode.UNKNOWN
