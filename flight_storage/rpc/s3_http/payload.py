"""A request body as received -> the object's bytes, checked as they stream (no I/O here).

What the headers say about the body decides how it is read:

| ``x-amz-content-sha256`` | body | checked |
|---|---|---|
| a SHA-256 (hex) | the bytes | their SHA-256 (``XAmzContentSHA256Mismatch``) |
| ``UNSIGNED-PAYLOAD``, or none (unsigned) | the bytes | declared digests only |
| ``STREAMING-UNSIGNED-PAYLOAD-TRAILER`` | ``aws-chunked`` | framing, trailer checksum |
| ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`` | ``aws-chunked`` | each chunk's signature (when the server has users), trailer checksum |

Every body is also held to its ``Content-MD5`` and ``x-amz-checksum-*`` header or trailer
(``checksums.py``), an aws-chunked body to ``x-amz-decoded-content-length``, and every body to
the size bound of its call. Anything else that names aws-chunked (``Content-Encoding``) or a
payload kind this server cannot check (SigV4a's ECDSA) is refused before a byte is kept.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from flight_storage.rpc.s3_http.aws_chunked import ChunkedDecoder
from flight_storage.rpc.s3_http.checksums import BodyDigests, declared_digests
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.sigv4 import ChunkChain, is_payload_hash

UNSIGNED: Final = "UNSIGNED-PAYLOAD"
STREAMING_UNSIGNED_TRAILER: Final = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING_SIGNED: Final = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER: Final = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"

_CHUNKED: Final[dict[str, tuple[bool, bool]]] = {
    STREAMING_UNSIGNED_TRAILER: (False, False),
    STREAMING_SIGNED: (True, False),
    STREAMING_SIGNED_TRAILER: (True, True),
}
"""aws-chunked payload kinds: (chunks signed, trailer signed)."""
_NOT_HERE: Final = ("STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD",
                    "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER",
                    "STREAMING-AWS4-HMAC-SHA256-EVENTS")
FRAMING_ALLOWANCE: Final = 1 << 16
"""Bytes of aws-chunked framing allowed beyond twice the decoded bound."""


@dataclass(frozen=True)
class BodyKind:
    """How a request's body is framed and signed, read from its headers."""

    declared_sha256: str | None
    """The body's SHA-256 as ``x-amz-content-sha256`` states it, when it is a hash."""
    chunked: bool
    signed_chunks: bool = False
    signed_trailer: bool = False
    decoded_length: int | None = None


def body_kind(headers: Mapping[str, str]) -> BodyKind:
    """Read how the body is sent.

    Args:
        headers: the request headers, lower-case names.

    Raises:
        S3HttpError: ``InvalidArgument`` (an ``x-amz-content-sha256`` S3 does not know, or
            aws-chunked without a streaming one), ``NotImplemented`` (SigV4a, event streams),
            ``InvalidRequest`` (a malformed ``x-amz-decoded-content-length``).
    """
    declared = headers.get("x-amz-content-sha256", "").strip()
    encodings = {e.strip().lower() for e in headers.get("content-encoding", "").split(",")}
    if declared in _NOT_HERE:
        raise S3HttpError("NotImplemented", f"x-amz-content-sha256 {declared} is not "
                          "supported by this server", status=501)
    if declared in _CHUNKED:
        signed_chunks, signed_trailer = _CHUNKED[declared]
        return BodyKind(None, True, signed_chunks, signed_trailer, _decoded_length(headers))
    if declared and declared != UNSIGNED and not is_payload_hash(declared):
        raise S3HttpError("InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                          "STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-"
                          "PAYLOAD[-TRAILER] or a SHA-256 of the body")
    if "aws-chunked" in encodings:
        if declared:
            raise S3HttpError("InvalidArgument", "an aws-chunked body needs "
                              "x-amz-content-sha256: STREAMING-...")
        return BodyKind(None, True, decoded_length=_decoded_length(headers))
    return BodyKind(declared if is_payload_hash(declared) else None, False)


def _decoded_length(headers: Mapping[str, str]) -> int | None:
    text = headers.get("x-amz-decoded-content-length")
    if text is None:
        return None
    if not text.strip().isdigit():
        raise S3HttpError("InvalidRequest", "x-amz-decoded-content-length is not a number")
    return int(text)


class PayloadDecoder:
    """Feeds a body through its framing and checks; yields the object's bytes.

    Args:
        headers: the request headers, lower-case names.
        chain: the signature chain of a signed request (None: the server has no users).
        limit: most bytes the object may have.
        too_large: the S3 code for a body past ``limit``.

    Raises:
        S3HttpError: what :func:`body_kind` and
            :func:`~flight_storage.rpc.s3_http.checksums.declared_digests` raise, and
            ``too_large`` when ``Content-Length`` or ``x-amz-decoded-content-length`` says
            the body is past its bound.
    """

    def __init__(self, headers: Mapping[str, str], chain: ChunkChain | None, limit: int,
                 too_large: str) -> None:
        self.kind = body_kind(headers)
        self._digests: BodyDigests = declared_digests(headers)
        self._limit = limit
        self._too_large = too_large
        self._raw_hash = hashlib.sha256() if self.kind.declared_sha256 is not None else None
        self._decoder = ChunkedDecoder(signed=self.kind.signed_chunks, chain=chain,
                                       signed_trailer=self.kind.signed_trailer) \
            if self.kind.chunked else None
        self._raw_limit = 2 * limit + FRAMING_ALLOWANCE if self.kind.chunked else limit
        self._raw = 0
        self.size = 0
        """Object bytes decoded so far."""
        self.checksums: dict[str, str] = {}
        """After :meth:`finish`: the ``x-amz-checksum-*`` values the body was checked
        against."""
        length = headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > self._raw_limit:
            raise S3HttpError(too_large, f"the body is {length} bytes; the limit is {limit}")
        declared = self.kind.decoded_length
        if declared is not None and declared > limit:
            raise S3HttpError(too_large, f"the object is {declared} bytes; the limit is {limit}")

    def feed(self, data: bytes) -> bytes:
        """The object bytes in the next piece of the body.

        Raises:
            S3HttpError: ``too_large``, or what the aws-chunked decoder raises.
        """
        self._raw += len(data)
        if self._raw > self._raw_limit:
            raise S3HttpError(self._too_large,
                              f"the body is over the limit of {self._raw_limit} bytes")
        if self._raw_hash is not None:
            self._raw_hash.update(data)
        out = self._decoder.feed(data) if self._decoder is not None else data
        self.size += len(out)
        if self.size > self._limit:
            raise S3HttpError(self._too_large, f"the object is over the limit of {self._limit} "
                              "bytes")
        self._digests.update(out)
        return out

    def finish(self) -> None:
        """Check the whole body once it has arrived.

        Raises:
            S3HttpError: ``XAmzContentSHA256Mismatch``, ``IncompleteBody`` (fewer bytes than
                ``x-amz-decoded-content-length``, or no final chunk), ``InvalidRequest`` (more
                bytes than it), ``BadDigest``, ``MalformedTrailerError``.
        """
        if self._raw_hash is not None and not hmac.compare_digest(
                self._raw_hash.hexdigest(), self.kind.declared_sha256 or ""):
            raise S3HttpError("XAmzContentSHA256Mismatch",
                              "x-amz-content-sha256 does not match the body")
        trailers = self._decoder.finish() if self._decoder is not None else {}
        expected = self.kind.decoded_length
        if expected is not None and self.size != expected:
            code = "IncompleteBody" if self.size < expected else "InvalidRequest"
            raise S3HttpError(code, f"the body decodes to {self.size} bytes; "
                              f"x-amz-decoded-content-length says {expected}")
        self._digests.verify(trailers)
        self.checksums = self._digests.checked()
