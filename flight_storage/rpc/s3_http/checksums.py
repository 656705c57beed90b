"""The digests an upload declares (``Content-MD5``, ``x-amz-checksum-*`` as a header or a
trailer), computed over the object's bytes as they stream and checked at the end.

The checksums are botocore's own (``botocore.httpchecksum``): CRC32 through zlib, SHA-1 and
SHA-256 through hashlib, and CRC32C and CRC64NVME through awscrt where it is installed
(``botocore[crt]``). An algorithm S3 defines that this process cannot compute is refused with
``NotImplemented`` naming it, never stored unchecked. Only the table of S3's names, sizes and
error answers is written here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Any, Final

from botocore.compat import HAS_CRT
from botocore.httpchecksum import (
    Crc32Checksum,
    CrtCrc32cChecksum,
    CrtCrc64NvmeChecksum,
    Sha1Checksum,
    Sha256Checksum,
)

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

CHECKSUM_PREFIX: Final = "x-amz-checksum-"
DIGEST_BYTES: Final[dict[str, int]] = {
    "crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}
"""The algorithms S3 defines for ``x-amz-checksum-<name>``, and their digest sizes."""

COMPUTABLE: Final[dict[str, Callable[[], Any]]] = {
    "crc32": Crc32Checksum,
    "sha1": Sha1Checksum,
    "sha256": Sha256Checksum,
    **({"crc32c": CrtCrc32cChecksum, "crc64nvme": CrtCrc64NvmeChecksum} if HAS_CRT else {}),
}
"""The algorithms this process computes (botocore's classes: ``update``, ``digest``)."""
_NOT_DIGESTS: Final = frozenset({CHECKSUM_PREFIX + "type", CHECKSUM_PREFIX + "algorithm"})
"""Headers of the same prefix that name no digest (``FULL_OBJECT``, ``CRC32``)."""


class BodyDigests:
    """Running digests of a body and the values the client declared for them.

    Build it with :func:`declared_digests`; feed it the object's bytes with :meth:`update`;
    :meth:`verify` checks every declared value once the body (and its trailer) has arrived.
    """

    def __init__(self) -> None:
        self._running: dict[str, Any] = {}
        self._expected: dict[str, bytes] = {}
        self._trailer: str | None = None

    def expect(self, algorithm: str, value: bytes) -> None:
        """Check the body against ``value`` (a raw digest) at the end."""
        self._track(algorithm)
        self._expected[algorithm] = value

    def expect_trailer(self, header: str) -> None:
        """The body's trailer will carry ``header`` (``x-amz-checksum-<name>``): compute it."""
        self._trailer = header.lower()
        self._track(_algorithm_of(self._trailer))

    def update(self, data: bytes) -> None:
        """Add the next bytes of the object."""
        for digest in self._running.values():
            digest.update(data)

    def verify(self, trailers: Mapping[str, str] | None = None) -> None:
        """Check every declared digest.

        Args:
            trailers: the trailing headers of an aws-chunked body (lower-case names).

        Raises:
            S3HttpError: ``BadDigest`` on a mismatch, ``MalformedTrailerError`` when the
                announced trailer is missing, ``InvalidRequest`` when its value is malformed.
        """
        if self._trailer is not None:
            sent = (trailers or {}).get(self._trailer)
            if sent is None:
                raise S3HttpError("MalformedTrailerError",
                                  f"the body's trailer does not carry {self._trailer}, which "
                                  "x-amz-trailer announced")
            self._expected[_algorithm_of(self._trailer)] = _decoded(self._trailer, sent)
        for algorithm, value in self._expected.items():
            if not hmac.compare_digest(self._running[algorithm].digest(), value):
                raise S3HttpError("BadDigest", _MISMATCH.get(
                    algorithm, f"The {algorithm.upper()} you specified did not match the "
                    "calculated checksum."))

    def checked(self) -> dict[str, str]:
        """``x-amz-checksum-<name>`` -> base64 value of each checksum :meth:`verify` checked
        (what S3 echoes for a part and keeps for CompleteMultipartUpload)."""
        return {CHECKSUM_PREFIX + a: base64.b64encode(v).decode()
                for a, v in self._expected.items() if a != "md5"}

    def _track(self, algorithm: str) -> None:
        if algorithm not in self._running:
            self._running[algorithm] = _FACTORIES[algorithm]()


_FACTORIES: Final[dict[str, Callable[[], Any]]] = {
    "md5": lambda: hashlib.md5(usedforsecurity=False), **COMPUTABLE}
_MISMATCH: Final = {"md5": "The Content-MD5 you specified did not match what we received."}


def declared_digests(headers: Mapping[str, str]) -> BodyDigests:
    """The digests a request's headers declare for its object's bytes.

    Args:
        headers: the request headers, lower-case names.

    Raises:
        S3HttpError: ``InvalidDigest`` (a malformed ``Content-MD5``), ``InvalidRequest`` (a
            malformed or unknown checksum header, or more than one), ``NotImplemented`` (an
            algorithm this process cannot compute).
    """
    digests = BodyDigests()
    md5 = headers.get("content-md5")
    if md5 is not None:
        value = _b64(md5)
        if value is None or len(value) != 16:
            raise S3HttpError("InvalidDigest", "The Content-MD5 you specified was invalid.")
        digests.expect("md5", value)
    named = [name for name in headers if name.startswith(CHECKSUM_PREFIX)
             and name not in _NOT_DIGESTS]
    trailer = headers.get("x-amz-trailer")
    if len(named) + (trailer is not None) > 1:
        raise S3HttpError("InvalidRequest", "Expecting a single x-amz-checksum- header. "
                          "Multiple checksum Types are not allowed.")
    for name in named:
        digests.expect(_algorithm_of(name), _decoded(name, headers[name]))
    if trailer is not None:
        digests.expect_trailer(trailer.strip())
    return digests


def _algorithm_of(header: str) -> str:
    """The algorithm a checksum header names, if this process computes it."""
    algorithm = header[len(CHECKSUM_PREFIX):] if header.startswith(CHECKSUM_PREFIX) else ""
    if algorithm not in DIGEST_BYTES:
        raise S3HttpError("InvalidRequest", f"{header} is not a checksum S3 defines (one of "
                          f"{', '.join(CHECKSUM_PREFIX + a for a in DIGEST_BYTES)})")
    if algorithm not in COMPUTABLE:
        raise S3HttpError("NotImplemented",
                          f"this server cannot verify {header} (awscrt is not installed: "
                          f"send one of {', '.join(CHECKSUM_PREFIX + a for a in COMPUTABLE)})",
                          status=501)
    return algorithm


def _decoded(header: str, text: str) -> bytes:
    value = _b64(text.strip())
    if value is None or len(value) != DIGEST_BYTES[_algorithm_of(header)]:
        raise S3HttpError("InvalidRequest", f"Value for {header} header is invalid.")
    return value


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
