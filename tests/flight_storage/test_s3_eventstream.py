"""The event-stream encoder and the mapping of a partition's messages to events, decoded by
botocore's parser (which checks the prelude and message CRCs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from flight_storage.errors import QueryExecutionError
from flight_storage.request.s3_request import RECORDS_SCHEMA
from flight_storage.rpc.s3_http import eventstream, select_stream
from flight_storage.rpc.streams import Item


def _decode(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def test_messages_round_trip_through_botocore() -> None:
    data = b"".join([*eventstream.records(b"a,b\n" * 10, 16), eventstream.cont(),
                     eventstream.progress(1, 2, 3), eventstream.stats(4, 5, 6),
                     eventstream.end()])
    messages = _decode(data)
    kinds = [h[":event-type"] for h, _ in messages]
    assert kinds == ["Records", "Records", "Records", "Cont", "Progress", "Stats", "End"]
    assert b"".join(p for h, p in messages if h[":event-type"] == "Records") == b"a,b\n" * 10
    assert max(len(p) for h, p in messages if h[":event-type"] == "Records") == 16
    assert messages[5][1] == (b"<Stats><BytesScanned>4</BytesScanned><BytesProcessed>5"
                              b"</BytesProcessed><BytesReturned>6</BytesReturned></Stats>")


def test_a_corrupted_message_is_refused_by_botocore() -> None:
    data = bytearray(eventstream.end())
    data[-1] ^= 0xFF
    with pytest.raises(ChecksumMismatch):
        _decode(bytes(data))


def test_error_message() -> None:
    [(headers, payload)] = _decode(eventstream.error("NoSuchKey", "no such key: b/k"))
    assert headers == {":message-type": "error", ":error-code": "NoSuchKey",
                       ":error-message": "no such key: b/k"}
    assert payload == b""


def _item(data: bytes | None, meta: dict[str, Any] | None) -> Item:
    """One message of a partition, as the query service hands it to the door."""
    rows = [data] if data is not None else []
    batch = pa.record_batch([pa.array(rows, pa.binary())], schema=RECORDS_SCHEMA)
    return (batch, json.dumps(meta).encode()) if meta else batch


def _counts(kind: str, scanned: int, returned: int) -> dict[str, Any]:
    return {kind: {"BytesScanned": scanned, "BytesProcessed": scanned,
                   "BytesReturned": returned}}


def test_partition_messages_become_events_across_endpoints() -> None:
    partitions = [
        iter([_item(b"1\n", _counts("Progress", 10, 2)), _item(None, None),
              _item(None, _counts("Stats", 50, 2))]),
        iter([_item(b"2\n", _counts("Progress", 5, 2)), _item(None, _counts("Stats", 40, 2))]),
    ]
    messages = _decode(b"".join(select_stream.events(partitions, max_event_payload=1024)))
    kinds = [h[":event-type"] for h, _ in messages]
    assert kinds == ["Records", "Progress", "Cont", "Records", "Progress", "Stats", "End"]
    # progress of the second endpoint counts the first one's total
    assert b"<BytesScanned>55</BytesScanned>" in messages[4][1]
    assert b"<BytesScanned>90</BytesScanned>" in messages[5][1]
    assert b"<BytesReturned>4</BytesReturned>" in messages[5][1]


def _failing(error: Exception) -> Iterator[Item]:
    yield _item(b"1\n", None)
    raise error


def test_a_storage_error_is_the_last_event_with_its_code() -> None:
    error = QueryExecutionError("cannot cast 'x'", code="CastFailed", line=1, column=8)
    messages = _decode(b"".join(select_stream.events([_failing(error)], 1024)))
    assert [h.get(":event-type") for h, _ in messages] == ["Records", None]
    assert messages[-1][0][":error-code"] == "CastFailed"
    assert messages[-1][0][":error-message"] == "cannot cast 'x' (line 1, column 8)"


def test_an_unexpected_error_is_named_by_an_incident_id_only() -> None:
    messages = _decode(b"".join(select_stream.events([_failing(RuntimeError("/secret/path"))],
                                                     1024)))
    headers = messages[-1][0]
    assert headers[":error-code"] == "InternalError"
    assert headers[":error-message"].startswith("internal error, id=")
    assert "secret" not in headers[":error-message"]


def test_closing_the_events_closes_the_partition_being_read() -> None:
    closed: list[bool] = []

    def partition() -> Iterator[Item]:
        try:
            while True:
                yield _item(b"row\n", None)
        finally:
            closed.append(True)

    events = select_stream.events([partition()], 1024)
    next(events)
    events.close()  # the HTTP client left
    assert closed == [True]
