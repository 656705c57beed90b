"""Decoding of ``aws-chunked`` request bodies, incrementally and without I/O.

An SDK that streams an upload with a trailing checksum (boto3 >= 1.36 over https, the AWS
SDKs for C++ and Java) or signs it chunk by chunk sends the body framed as AWS documents it
("Signature Calculations for the Authorization Header: Transferring Payload in Multiple
Chunks"), inside whatever HTTP framing carries it::

    <hex size>[;chunk-signature=<64 hex>]\\r\\n<data>\\r\\n      (repeated)
    0[;chunk-signature=<64 hex>]\\r\\n                          (the last chunk)
    <name>:<value>\\r\\n ...                                     (trailing headers, if any)
    [x-amz-trailer-signature:<64 hex>\\r\\n]                     (signed trailers)
    \\r\\n

:class:`ChunkedDecoder` turns that framing into the object's bytes as they arrive, checks each
chunk's signature through a :class:`~flight_storage.rpc.s3_http.sigv4.ChunkChain` when the
server can, and hands back the trailing headers at the end; it never buffers more than one
framing line. Hand-written: botocore only encodes this framing (``AwsChunkedWrapper``), and no
maintained Python package decodes it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Final

from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.sigv4 import ChunkChain

MAX_LINE: Final = 4096
"""Longest framing line (a chunk size with its signature, a trailing header)."""
_CRLF: Final = b"\r\n"
_HEX_SIZE: Final = re.compile(rb"[0-9a-fA-F]{1,16}")
_SIGNATURE: Final = "chunk-signature"
_TRAILER_SIGNATURE: Final = "x-amz-trailer-signature"


def _malformed(what: str) -> S3HttpError:
    return S3HttpError("InvalidRequest", f"malformed aws-chunked body: {what}")


class ChunkedDecoder:
    """The object's bytes out of an ``aws-chunked`` body, fed piece by piece.

    Args:
        signed: the chunks carry signatures (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD...``).
        signed_trailer: the trailer carries its signature (``...-PAYLOAD-TRAILER``).
        chain: checks those signatures; None when the server has no users to check them with
            (the framing is still decoded and the signatures' form checked).
    """

    def __init__(self, *, signed: bool, chain: ChunkChain | None,
                 signed_trailer: bool = False) -> None:
        self._signed = signed
        self._chain = chain if signed else None
        self._trailer_unchecked = signed_trailer and self._chain is not None
        self._buffer = bytearray()
        self._state: Callable[[], bytes | None] = self._size_line
        self._left = 0
        self._signature = ""
        self._chunk_hash = hashlib.sha256()
        self._trailer_lines: list[bytes] = []
        self.trailers: dict[str, str] = {}
        """The trailing headers (lower-case names), complete once :meth:`finish` passed."""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Decode the next piece of the body; returns the object bytes it completes.

        Raises:
            S3HttpError: ``InvalidRequest`` (malformed framing, or bytes after the end),
                ``SignatureDoesNotMatch``, ``MalformedTrailerError``.
        """
        if self.done and data:
            raise _malformed("data after the final chunk")
        self._buffer += data
        out = bytearray()
        while self._buffer and not self.done:
            piece = self._state()
            if piece is None:
                break  # needs more bytes
            out += piece
        if self.done and self._buffer:
            raise _malformed("data after the final chunk")
        return bytes(out)

    def finish(self) -> dict[str, str]:
        """The trailing headers, once the whole body was fed.

        Raises:
            S3HttpError: ``IncompleteBody`` when the body ended before its final chunk.
        """
        if not self.done:
            raise S3HttpError("IncompleteBody", "the aws-chunked body ended before its final "
                              "chunk")
        return self.trailers

    # ------------------------------------------------------------------ states

    def _line(self) -> bytes | None:
        end = self._buffer.find(_CRLF)
        if end < 0:
            if len(self._buffer) > MAX_LINE:
                raise _malformed(f"a framing line longer than {MAX_LINE} bytes")
            return None
        if end > MAX_LINE:
            raise _malformed(f"a framing line longer than {MAX_LINE} bytes")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _size_line(self) -> bytes | None:
        line = self._line()
        if line is None:
            return None
        size_text, _, extension = line.partition(b";")
        if _HEX_SIZE.fullmatch(size_text) is None:
            raise _malformed(f"chunk size {size_text[:40]!r} is not hexadecimal")
        size = int(size_text, 16)
        self._signature = self._chunk_signature(extension.decode("latin-1"))
        self._left = size
        self._chunk_hash = hashlib.sha256()
        if size == 0:
            self._end_chunk()
            self._state = self._trailer_line
        else:
            self._state = self._data
        return b""

    def _chunk_signature(self, extension: str) -> str:
        name, _, value = extension.partition("=")
        if not self._signed:
            return ""
        if name.strip() != _SIGNATURE or len(value.strip()) != 64:
            raise _malformed("a chunk without its chunk-signature")
        return value.strip()

    def _data(self) -> bytes | None:
        piece = bytes(self._buffer[: self._left])
        del self._buffer[: len(piece)]
        self._left -= len(piece)
        if self._chain is not None:
            self._chunk_hash.update(piece)
        if self._left == 0:
            self._state = self._data_end
        return piece

    def _data_end(self) -> bytes | None:
        if len(self._buffer) < 2:
            return None
        if self._buffer[:2] != _CRLF:
            raise _malformed("a chunk longer than its size")
        del self._buffer[:2]
        self._end_chunk()
        self._state = self._size_line
        return b""

    def _end_chunk(self) -> None:
        if self._chain is not None:
            self._chain.check_chunk(self._chunk_hash.hexdigest(), self._signature)

    def _trailer_line(self) -> bytes | None:
        line = self._line()
        if line is None:
            return None
        if not line:
            if self._trailer_unchecked:
                raise S3HttpError("MalformedTrailerError", "the trailer of the aws-chunked "
                                  "body carries no x-amz-trailer-signature")
            self.done = True
            return b""
        name, colon, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        if not colon or not name:
            raise S3HttpError("MalformedTrailerError",
                              "a trailing header of the aws-chunked body is not name:value")
        if name == _TRAILER_SIGNATURE:
            if self._chain is not None:
                self._chain.check_trailer(b"".join(self._trailer_lines), value.strip())
                self._trailer_unchecked = False
            return b""
        self._trailer_lines.append(f"{name}:{value.strip()}\n".encode("latin-1"))
        self.trailers[name] = value.strip()
        return b""
