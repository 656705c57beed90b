"""Streaming decompression of S3 Select input (``CompressionType``).

``open_decompressed`` wraps a raw binary stream in a read-only stream of the decompressed
bytes. Every codec is driven through an incremental decompressor object, so:

* memory stays bounded: one step reads at most 64 KiB of compressed input and produces at
  most :data:`OUTPUT_BOUND` bytes, whatever the expansion ratio (a decompression bomb is
  decoded piece by piece like any other input);
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
from flight_storage.formats.zstd_frames import BoundedZstdDecoder

# Compressed bytes read from the object per step.
_FEED_SIZE = 64 * 1024
# Decompressed bytes one step may produce, whatever the codec and the input: the decoders
# keep the rest of their input for the next step instead of expanding it all at once.
OUTPUT_BOUND = 8 * 1024 * 1024


class _Decompressor(Protocol):
    """The shape of ``bz2.BZ2Decompressor``: bounded output, leftover input kept inside."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    @property
    def needs_input(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int) -> bytes: ...


class _GzipDecompressor:
    """``zlib``'s deflate decoder behind the ``BZ2Decompressor`` shape."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        self.needs_input = True

    @property
    def eof(self) -> bool:
        return self._zlib.eof

    @property
    def unused_data(self) -> bytes:
        return self._zlib.unused_data

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._zlib.decompress(self._zlib.unconsumed_tail + data, max_length)
        # A full output may leave decoded bytes inside zlib even with no input left.
        self.needs_input = not self._zlib.unconsumed_tail and len(out) < max_length
        return out


_CODECS: dict[str, Callable[[], _Decompressor]] = {
    "GZIP": _GzipDecompressor,
    "BZIP2": bz2.BZ2Decompressor,
    "ZSTD": BoundedZstdDecoder,
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

    def __init__(self, raw: BinaryIO, factory: Callable[[], _Decompressor], name: str,
                 counter: list[int] | None = None) -> None:
        super().__init__()
        self._raw = raw
        self._counter = counter
        self._factory = factory
        self._name = name
        self._decoder: _Decompressor | None = None
        self._pending = b""  # decoded bytes of the last step
        self._taken = 0  # how many of them were returned
        self._consumed = 0  # compressed bytes fed so far
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
        if self._counter is not None:
            self._counter[0] += n
        return n

    def _finished(self) -> bool:
        return self._raw_eof and self._decoder is None

    def _step(self) -> None:
        if self._decoder is None:
            data, self._carry = (self._carry or self._raw.read(_FEED_SIZE)), b""
            if not data:
                self._raw_eof = True
                return
            self._decoder = self._factory()
        elif self._decoder.needs_input:
            data = self._raw.read(_FEED_SIZE)
            if not data:
                self._raw_eof = True
                self._decoder = None
                raise InputFormatError(
                    f"{self._name} stream is truncated: it ends inside a compressed member "
                    f"at compressed byte offset {self._consumed}",
                    code="TruncatedInput",
                    offset=self._consumed,
                )
        else:  # the decoder still holds input from an earlier step
            data = b""
        try:
            self._pending = self._decoder.decompress(data, OUTPUT_BOUND)
        except _CODEC_ERRORS as exc:
            raise InputFormatError(
                f"{self._name} stream is corrupt near compressed byte offset "
                f"{self._consumed}: {exc}",
                code="InvalidCompressionFormat",
                offset=self._consumed,
            ) from exc
        self._consumed += len(data)
        if self._decoder.eof:
            unused = self._decoder.unused_data
            self._consumed -= len(unused)
            self._carry = unused
            self._decoder = None


def open_decompressed(raw: BinaryIO, compression: str,
                      counter: list[int] | None = None) -> BinaryIO:
    """Open a decompressing view of ``raw``.

    Args:
        raw: the object's bytes, read sequentially.
        compression: the request's ``CompressionType``: ``NONE``, ``GZIP``, ``BZIP2`` or
            ``ZSTD`` (case-insensitive; empty means ``NONE``).
        counter: when given, ``counter[0]`` grows by every decompressed byte read (S3's
            ``BytesProcessed`` of compressed input); not touched for ``NONE``.

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
    reader = _DecompressedReader(raw, factory, name, counter)
    return io.BufferedReader(reader, buffer_size=1 << 20)  # type: ignore[return-value]
