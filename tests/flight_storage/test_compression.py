"""Streaming decompression: round trips, multi-member streams, damaged input."""

from __future__ import annotations

import bz2
import gzip
import io
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
import zstandard

from flight_storage.errors import InputFormatError
from flight_storage.formats.compression import OUTPUT_BOUND, open_decompressed
from flight_storage.formats.csv_input import iter_csv_batches
from flight_storage.formats.csv_options import CsvInputOptions
from select_dialect.flavors import FLAVORS

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "GZIP": gzip.compress,
    "BZIP2": bz2.compress,
    "ZSTD": lambda data: zstandard.ZstdCompressor().compress(data),
}
DATA = b"".join(b"%d,name%d,%d.5\n" % (i, i, i) for i in range(50_000))


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_round_trip_in_small_reads(name: str) -> None:
    stream = open_decompressed(io.BytesIO(COMPRESSORS[name](DATA)), name)
    chunks = []
    while chunk := stream.read(1000):
        chunks.append(chunk)
    assert b"".join(chunks) == DATA


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_concatenated_members(name: str) -> None:
    compress = COMPRESSORS[name]
    raw = compress(b"a,b\n") + compress(b"c,d\n")
    assert open_decompressed(io.BytesIO(raw), name.lower()).read() == b"a,b\nc,d\n"


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_truncated_stream_is_an_error(name: str) -> None:
    raw = COMPRESSORS[name](DATA)
    stream = open_decompressed(io.BytesIO(raw[: len(raw) // 2]), name)
    with pytest.raises(InputFormatError) as info:
        stream.read()
    assert info.value.code == "TruncatedInput"
    assert info.value.offset is not None and 0 < info.value.offset <= len(raw) // 2


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_corrupt_stream_is_an_error(name: str) -> None:
    raw = bytearray(COMPRESSORS[name](DATA))
    raw[4:64] = b"\xa5" * 60
    with pytest.raises(InputFormatError) as info:
        open_decompressed(io.BytesIO(bytes(raw)), name).read()
    assert info.value.code in ("InvalidCompressionFormat", "TruncatedInput")


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_not_compressed_at_all(name: str) -> None:
    with pytest.raises(InputFormatError) as info:
        open_decompressed(io.BytesIO(b"plain,csv,text\n" * 10), name).read()
    assert info.value.code == "InvalidCompressionFormat"


def test_none_and_empty() -> None:
    raw = io.BytesIO(b"x")
    assert open_decompressed(raw, "NONE") is raw
    assert open_decompressed(raw, "") is raw
    assert open_decompressed(io.BytesIO(b""), "GZIP").read() == b""


def test_unknown_compression() -> None:
    with pytest.raises(InputFormatError) as info:
        open_decompressed(io.BytesIO(b""), "LZMA")
    assert info.value.code == "InvalidCompressionFormat"


def test_bzip2_csv_counts_four_records() -> None:
    # moto test_bzipped_csv_to_csv: 'a,b,c\ne,r,f\ny,u,i\nq,w,y' compressed with BZIP2
    raw = bz2.compress(b"a,b,c\ne,r,f\ny,u,i\nq,w,y")
    stream = open_decompressed(io.BytesIO(raw), "BZIP2")
    options = CsvInputOptions.from_request({}, FLAVORS["aws"].reading)
    rows = sum(b.num_rows for b in iter_csv_batches(stream, options, num_columns=None))
    assert rows == 4


def _bomb(name: str, mebibytes: int) -> bytes:
    """``mebibytes`` MiB of zeros compressed as hard as the codec goes (a few KiB on disk)."""
    zeros = bytes(1 << 20)
    if name == "ZSTD":
        zstd = zstandard.ZstdCompressor(level=19).compressobj()
        return b"".join(zstd.compress(zeros) for _ in range(mebibytes)) + zstd.flush()
    if name == "GZIP":
        deflate = zlib.compressobj(9, wbits=31)
        return b"".join(deflate.compress(zeros) for _ in range(mebibytes)) + deflate.flush()
    bzip = bz2.BZ2Compressor(9)
    return b"".join(bzip.compress(zeros) for _ in range(mebibytes)) + bzip.flush()


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_a_bomb_is_decoded_with_bounded_memory(name: str) -> None:
    raw = _bomb(name, 256)
    assert len(raw) < 1 << 20
    tracemalloc.start()
    try:
        stream = open_decompressed(io.BytesIO(raw), name)
        total = 0
        while chunk := stream.read(1 << 20):
            total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 256 << 20
    # One step yields at most OUTPUT_BOUND; the buffered reader and one chunk add a little.
    assert peak < 4 * OUTPUT_BOUND


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_a_truncated_bomb_is_an_error(name: str) -> None:
    raw = _bomb(name, 64)
    stream = open_decompressed(io.BytesIO(raw[:-5]), name)
    with pytest.raises(InputFormatError) as info:
        while stream.read(1 << 20):
            pass
    assert info.value.code == "TruncatedInput"


def _zstd_frame(data: bytes, **options: object) -> bytes:
    return zstandard.ZstdCompressor(**options).compress(data)  # type: ignore[arg-type]


def _zstd_streamed(data: bytes) -> bytes:
    """A frame written piece by piece: no content size, many blocks."""
    writer = zstandard.ZstdCompressor().compressobj()
    return b"".join(writer.compress(data[i : i + 1000]) for i in range(0, len(data), 1000)) + (
        writer.flush()
    )


ZSTD_FRAMES = {
    "checksum": lambda data: _zstd_frame(data, write_checksum=True),
    "no content size": lambda data: _zstd_frame(data, write_content_size=False),
    "streamed": lambda data: _zstd_streamed(data),
    "tiny single segment": lambda data: _zstd_frame(data[:10]),
}


@pytest.mark.parametrize("kind", sorted(ZSTD_FRAMES))
def test_zstd_frame_header_variants(kind: str) -> None:
    raw = ZSTD_FRAMES[kind](DATA)
    expected = DATA[:10] if kind == "tiny single segment" else DATA
    assert open_decompressed(io.BytesIO(raw), "ZSTD").read() == expected
    for cut in (len(raw) - 1, len(raw) // 2, 6):
        with pytest.raises(InputFormatError) as info:
            open_decompressed(io.BytesIO(raw[:cut]), "ZSTD").read()
        assert info.value.code == "TruncatedInput", cut


def test_zstd_skippable_frames_are_skipped() -> None:
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"hello"
    raw = skippable + _zstd_frame(b"a,b\n") + skippable + _zstd_frame(b"c,d\n") + skippable
    assert open_decompressed(io.BytesIO(raw), "ZSTD").read() == b"a,b\nc,d\n"
    with pytest.raises(InputFormatError) as info:
        open_decompressed(io.BytesIO(raw[:-2]), "ZSTD").read()
    assert info.value.code == "TruncatedInput"


def test_zstd_frames_fed_byte_by_byte() -> None:
    raw = _zstd_frame(DATA, write_checksum=True) + _zstd_frame(b"tail\n")
    decoded = []
    stream = open_decompressed(_OneByteReads(raw), "ZSTD")
    while chunk := stream.read(4096):
        decoded.append(chunk)
    assert b"".join(decoded) == DATA + b"tail\n"


def test_zstd_checksum_is_verified() -> None:
    raw = bytearray(_zstd_frame(DATA, write_checksum=True))
    raw[-1] ^= 0xFF
    with pytest.raises(InputFormatError) as info:
        open_decompressed(io.BytesIO(bytes(raw)), "ZSTD").read()
    assert info.value.code == "InvalidCompressionFormat"


class _OneByteReads(io.RawIOBase):
    """A raw stream that hands out one byte per read, to cut frames everywhere."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._data.read(1)
