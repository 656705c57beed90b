"""A zstd decoder whose every call has an output bound and that knows where a frame ends.

Hand-written because ``zstandard`` 0.25 offers neither: ``decompressobj().decompress`` has no
output limit (one 64 KiB feed of run-length blocks expands to ~2 GiB), and
``stream_reader().read(n)`` is bounded but ends a truncated frame quietly (a short answer,
no error). The standard library gains a bounded zstd decoder only in Python 3.14.

What this module does by hand is only the framing of RFC 8878 (frame header, block headers,
checksum, skippable frames): it cuts the compressed bytes at block boundaries and hands
``zstandard`` at most :data:`BLOCKS_PER_CALL` whole blocks per call. A block regenerates at
most 128 KiB (``Block_Maximum_Size``), so a call returns at most ``BLOCKS_PER_CALL * 128 KiB``.
A frame is complete only when its last block (and checksum, if declared) has arrived, so a
stream that ends earlier is known to be truncated. Decoding and checksum verification stay
``zstandard``'s.
"""

from __future__ import annotations

import zstandard

BLOCK_MAXIMUM_SIZE = 128 * 1024
"""RFC 8878 ``Block_Maximum_Size``: the most one block regenerates."""

BLOCKS_PER_CALL = 64
"""Whole blocks handed to ``zstandard`` per call: at most 8 MiB of output."""

_MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE_MAGIC_LOW = 0x184D2A50  # skippable frames use 0x184D2A50..0x184D2A5F
_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # flag 0 means 1 byte when the frame is single-segment
_BLOCK_RLE = 1
_BLOCK_RESERVED = 3


class ZstdFrameError(ValueError):
    """Bytes that are not a zstd frame (bad magic, reserved block type)."""


class BoundedZstdDecoder:
    """Decode one zstd frame (or skip one skippable frame), at most 8 MiB per call.

    The same shape as ``bz2.BZ2Decompressor``: ``decompress(data, max_length)``, ``eof``,
    ``unused_data`` and ``needs_input``. ``max_length`` is honoured at block granularity
    (rounded up to one whole block).
    """

    def __init__(self) -> None:
        self._decoder = zstandard.ZstdDecompressor().decompressobj()
        self._buffer = bytearray()  # input received and not yet handed on
        self._header_done = False
        self._skippable_left = -1  # bytes of a skippable frame still to drop; -1: not one
        self._checksum = False  # a declared checksum not yet received
        self._last_block_seen = False
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    def decompress(
        self, data: bytes, max_length: int = BLOCKS_PER_CALL * BLOCK_MAXIMUM_SIZE
    ) -> bytes:
        """Take ``data``; return the output of the whole blocks now available, bounded."""
        if self.eof:
            raise EOFError("end of zstd frame already reached")
        self._buffer += data
        budget = max(1, max_length // BLOCK_MAXIMUM_SIZE)
        end = self._take_units(budget)
        if self._skippable_left >= 0:  # a skippable frame: its bytes are dropped, not decoded
            del self._buffer[:end]
            if self._skippable_left == 0:
                self._finish()
            return b""
        out = self._decoder.decompress(bytes(self._buffer[:end])) if end else b""
        del self._buffer[:end]
        if self._last_block_seen and not self._checksum:
            self._finish()
            if not self._decoder.eof:
                raise ZstdFrameError("zstd frame ended but the decoder did not")
        return out

    def _finish(self) -> None:
        self.eof = True
        self.needs_input = False
        self.unused_data = bytes(self._buffer)
        self._buffer.clear()

    def _take_units(self, budget: int) -> int:
        """How many buffered bytes form whole units (header, blocks, checksum), ≤ budget blocks."""
        buf = self._buffer
        pos = 0
        if not self._header_done:
            size = self._header_size()
            if size is None or len(buf) < size:
                self.needs_input = True
                return 0
            self._header_done = True
            pos = size
        if self._skippable_left >= 0:
            drop = min(self._skippable_left, len(buf) - pos)
            self._skippable_left -= drop
            self.needs_input = self._skippable_left > 0
            return pos + drop
        blocks = 0
        while not self._last_block_seen and blocks < budget:
            if len(buf) < pos + 3:
                break
            header = int.from_bytes(buf[pos : pos + 3], "little")
            kind = (header >> 1) & 3
            if kind == _BLOCK_RESERVED:
                raise ZstdFrameError(f"reserved zstd block type at byte {pos}")
            length = 3 + (1 if kind == _BLOCK_RLE else header >> 3)
            if len(buf) < pos + length:
                break
            pos += length
            blocks += 1
            self._last_block_seen = bool(header & 1)
        if self._last_block_seen and self._checksum and len(buf) >= pos + 4:
            pos += 4
            self._checksum = False
        self.needs_input = blocks < budget and not (self._last_block_seen and not self._checksum)
        return pos

    def _header_size(self) -> int | None:
        """The frame header's length once enough of it is buffered, else ``None``."""
        buf = self._buffer
        if len(buf) < 5:
            return None
        magic = int.from_bytes(buf[:4], "little")
        if magic & 0xFFFFFFF0 == _SKIPPABLE_MAGIC_LOW:
            if len(buf) < 8:
                return None
            self._skippable_left = int.from_bytes(buf[4:8], "little")
            return 8
        if bytes(buf[:4]) != _MAGIC:
            raise ZstdFrameError("not a zstd frame (bad magic number)")
        descriptor = buf[4]
        single_segment = (descriptor >> 5) & 1
        self._checksum = bool((descriptor >> 2) & 1)
        content_size = _CONTENT_SIZE_BYTES[descriptor >> 6] or single_segment
        return 5 + (1 - single_segment) + _DICTIONARY_ID_BYTES[descriptor & 3] + content_size
