"""The AWS event-stream encoder for SelectObjectContent answers.

Hand-written because no maintained Python package encodes event-stream messages for a server:
botocore only *decodes* them (``botocore.eventstream``), and awscrt's encoder lives inside its
RPC client connection. The format is small and fixed (a length-prefixed message with typed
headers and two CRC32s); botocore's decoder, which checks both CRCs, is the test of this file.

One message::

    total length (u32 BE) | headers length (u32 BE) | CRC32 of the 8 bytes before
    headers: name length (u8), name, type 7 (string), value length (u16 BE), value
    payload | CRC32 of everything before
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from typing import Final

CONTENT_TYPE: Final = "application/vnd.amazon.eventstream"
_STRING: Final = 7
_PRELUDE: Final = struct.Struct(">II")
_CRC: Final = struct.Struct(">I")


def _headers(headers: Mapping[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def message(headers: Mapping[str, str], payload: bytes = b"") -> bytes:
    """One encoded event-stream message."""
    encoded = _headers(headers)
    total = _PRELUDE.size + _CRC.size + len(encoded) + len(payload) + _CRC.size
    prelude = _PRELUDE.pack(total, len(encoded))
    body = prelude + _CRC.pack(zlib.crc32(prelude)) + encoded + payload
    return body + _CRC.pack(zlib.crc32(body))


def _event(event_type: str, payload: bytes = b"", content_type: str | None = None) -> bytes:
    headers = {":message-type": "event", ":event-type": event_type}
    if content_type is not None:
        headers[":content-type"] = content_type
    return message(headers, payload)


def records(data: bytes, max_payload: int) -> Iterator[bytes]:
    """``Records`` events carrying ``data``, each payload at most ``max_payload`` bytes."""
    for start in range(0, len(data), max_payload):
        yield _event("Records", data[start:start + max_payload], "application/octet-stream")


def _counts_xml(kind: str, scanned: int, processed: int, returned: int) -> bytes:
    return (
        f"<{kind}><BytesScanned>{scanned}</BytesScanned>"
        f"<BytesProcessed>{processed}</BytesProcessed>"
        f"<BytesReturned>{returned}</BytesReturned></{kind}>"
    ).encode()


def stats(scanned: int, processed: int, returned: int) -> bytes:
    """The ``Stats`` event that precedes ``End``."""
    return _event("Stats", _counts_xml("Stats", scanned, processed, returned), "text/xml")


def progress(scanned: int, processed: int, returned: int) -> bytes:
    """A ``Progress`` event (sent only when the request enabled ``RequestProgress``)."""
    return _event("Progress", _counts_xml("Progress", scanned, processed, returned), "text/xml")


def cont() -> bytes:
    """A ``Cont`` keep-alive event."""
    return _event("Cont")


def end() -> bytes:
    """The ``End`` event: the answer is complete."""
    return _event("End")


def error(code: str, text: str) -> bytes:
    """The error message that ends a stream which already answered HTTP 200."""
    return message({":message-type": "error", ":error-code": code, ":error-message": text})
