"""The event-stream encoder and the Flight-to-event mapping, decoded by botocore's parser
(which checks the prelude and message CRCs)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from flight_storage.request.s3_request import RECORDS_SCHEMA
from flight_storage.rpc.s3_http import eventstream
from flight_storage.rpc.s3_http.select_stream import SelectBridge


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


class _Chunk:
    def __init__(self, data: bytes | None, meta: dict[str, Any] | None) -> None:
        rows = [data] if data is not None else []
        self.data = pa.record_batch([pa.array(rows, pa.binary())], schema=RECORDS_SCHEMA)
        self.app_metadata = pa.py_buffer(json.dumps(meta).encode()) if meta else None


class _Reader:
    def __init__(self, chunks: list[_Chunk]) -> None:
        self.chunks = iter(chunks)

    def read_chunk(self) -> _Chunk:
        return next(self.chunks)

    def cancel(self) -> None:
        raise AssertionError("a finished stream is not cancelled")


class _Client:
    def __init__(self, streams: list[list[_Chunk]]) -> None:
        self.streams = iter(streams)

    def do_get(self, ticket: Any, options: Any) -> _Reader:
        return _Reader(next(self.streams))


class _Info:
    def __init__(self, count: int) -> None:
        # endpoints naming no location: the bridge reads them from its own server
        self.endpoints = [type("Endpoint", (), {"ticket": i, "locations": []})()
                          for i in range(count)]


def _counts(kind: str, scanned: int, returned: int) -> dict[str, Any]:
    return {kind: {"BytesScanned": scanned, "BytesProcessed": scanned,
                   "BytesReturned": returned}}


def test_flight_messages_become_events_across_endpoints() -> None:
    streams = [
        [_Chunk(b"1\n", _counts("Progress", 10, 2)), _Chunk(None, None),
         _Chunk(None, _counts("Stats", 50, 2))],
        [_Chunk(b"2\n", _counts("Progress", 5, 2)), _Chunk(None, _counts("Stats", 40, 2))],
    ]
    bridge = SelectBridge(_Client(streams), max_event_payload=1024)  # type: ignore[arg-type]
    messages = _decode(b"".join(bridge.events(_Info(2), None)))  # type: ignore[arg-type]
    kinds = [h[":event-type"] for h, _ in messages]
    assert kinds == ["Records", "Progress", "Cont", "Records", "Progress", "Stats", "End"]
    # progress of the second endpoint counts the first one's total
    assert b"<BytesScanned>55</BytesScanned>" in messages[4][1]
    assert b"<BytesScanned>90</BytesScanned>" in messages[5][1]
    assert b"<BytesReturned>4</BytesReturned>" in messages[5][1]
