"""Streaming decompression of S3 Select input (``CompressionType``).

``open_decompressed`` wraps a raw binary stream in a read-only stream of the decompressed
bytes. Every codec is driven through an incremental decompressor object, so:

* memory stays bounded (compressed input is fed in small pieces);
* concatenated members / frames are decoded one after the other (``cat a.gz b.gz``);
* a stream that ends inside a member is reported as ``TruncatedInput`` and undecodable
  bytes as ``InvalidCompressionFormat`` -- both :class:`InputFormatError` raised from
  ``read`` with the compressed byte offset, never a silent short read or a hang.
"""

from __future__ import annotations

import bz2
import io
import zlib
from collections.abc import Callable
from typing import BinaryIO, Protocol

import zstandard

from flight_storage.errors import InputFormatError

# Compressed bytes handed to a decompressor per step. Small enough that one step of a
# highly compressible stream (zstd offers no output bound) stays a few hundred MiB at worst.
_FEED_SIZE = 64 * 1024


class _Decompressor(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: bytes) -> bytes: ...


def _gzip() -> _Decompressor:
    return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # type: ignore[return-value]


def _bzip2() -> _Decompressor:
    return bz2.BZ2Decompressor()  # type: ignore[return-value]


def _zstd() -> _Decompressor:
    return zstandard.ZstdDecompressor().decompressobj()  # type: ignore[return-value]


_CODECS: dict[str, Callable[[], _Decompressor]] = {
    "GZIP": _gzip,
    "BZIP2": _bzip2,
    "ZSTD": _zstd,
}

# Exceptions the codecs raise on bytes they cannot decode.
_CODEC_ERRORS: tuple[type[BaseException], ...] = (
    zlib.error,
    OSError,
    EOFError,
    ValueError,
    zstandard.ZstdError,
)


class _DecompressedReader(io.RawIOBase):
    """A readable stream that decodes ``raw`` with decompressors made by ``factory``."""

    def __init__(self, raw: BinaryIO, factory: Callable[[], _Decompressor], name: str) -> None:
        super().__init__()
        self._raw = raw
        self._factory = factory
        self._name = name
        self._decoder: _Decompressor | None = None
        self._pending = b""  # decoded bytes of the last step
        self._taken = 0  # how many of them were returned
        self._consumed = 0  # compressed bytes fed so far
        self._member_fed = False  # the current member has received input but not ended
        self._raw_eof = False
        self._carry = b""  # bytes after the end of a member: the start of the next one

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        while self._taken == len(self._pending) and not self._finished():
            self._pending, self._taken = b"", 0
            self._step()
        n = min(len(view), len(self._pending) - self._taken)
        view[:n] = memoryview(self._pending)[self._taken : self._taken + n]
        self._taken += n
        return n

    def _finished(self) -> bool:
        return self._raw_eof and self._decoder is None

    def _step(self) -> None:
        data, self._carry = (self._carry or self._raw.read(_FEED_SIZE)), b""
        if not data:
            self._raw_eof = True
            if self._member_fed:
                raise InputFormatError(
                    f"{self._name} stream is truncated: it ends inside a compressed member "
                    f"at compressed byte offset {self._consumed}",
                    code="TruncatedInput",
                    offset=self._consumed,
                )
            self._decoder = None
            return
        if self._decoder is None:
            self._decoder = self._factory()
        try:
            out = self._decoder.decompress(data)
        except _CODEC_ERRORS as exc:
            raise InputFormatError(
                f"{self._name} stream is corrupt near compressed byte offset "
                f"{self._consumed}: {exc}",
                code="InvalidCompressionFormat",
                offset=self._consumed,
            ) from exc
        self._member_fed = True
        self._consumed += len(data)
        if self._decoder.eof:
            unused = self._decoder.unused_data
            self._consumed -= len(unused)
            self._carry = unused
            self._decoder = None
            self._member_fed = False
        self._pending += out


def open_decompressed(raw: BinaryIO, compression: str) -> BinaryIO:
    """Open a decompressing view of ``raw``.

    Args:
        raw: the object's bytes, read sequentially.
        compression: the request's ``CompressionType``: ``NONE``, ``GZIP``, ``BZIP2`` or
            ``ZSTD`` (case-insensitive; empty means ``NONE``).

    Returns:
        ``raw`` itself for ``NONE``, else a buffered stream of the decompressed bytes whose
        ``read`` raises :class:`InputFormatError` (``TruncatedInput`` or
        ``InvalidCompressionFormat``) when the compressed data is damaged.

    Raises:
        InputFormatError: ``InvalidCompressionFormat`` for an unknown compression type.

    Example:
        >>> import gzip, io
        >>> open_decompressed(io.BytesIO(gzip.compress(b"a,b\\n")), "GZIP").read()
        b'a,b\\n'
    """
    name = (compression or "NONE").upper()
    if name == "NONE":
        return raw
    factory = _CODECS.get(name)
    if factory is None:
        raise InputFormatError(
            f"unsupported CompressionType {compression!r}; expected one of "
            f"NONE, {', '.join(sorted(_CODECS))}",
            code="InvalidCompressionFormat",
        )
    reader = _DecompressedReader(raw, factory, name)
    return io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[return-value]
