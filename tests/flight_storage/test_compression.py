"""Streaming decompression: round trips, multi-member streams, damaged input."""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Callable

import pytest
import zstandard

from flight_storage.errors import InputFormatError
from flight_storage.formats.compression import open_decompressed
from flight_storage.formats.csv_input import CsvInputOptions, iter_csv_batches

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
    options = CsvInputOptions.from_request({}, "aws")
    rows = sum(b.num_rows for b in iter_csv_batches(stream, options, num_columns=None))
    assert rows == 4
