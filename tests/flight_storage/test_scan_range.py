"""Scan ranges: records belong to the range holding their first byte (AWS rule)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from flight_storage.formats.scan_range import iter_range_bytes

MINIO_CSV = (
    b"id,time,num,num2,text\n"
    b'1,2010-01-01T,7867786,4565.908123,"a text, with comma"\n'
    b"2,2017-01-02T03:04Z,-5, 0.765111,\n"
)


def _span(
    data: bytes, start: int, end: int, delimiter: bytes = b"\n", quote: bytes | None = None
) -> bytes:
    """The records of S3's ``ScanRange`` Start..End (End inclusive, as the MinIO and AWS
    cases below are written); the reader takes ``[start, stop)``."""
    source = io.BytesIO(data)
    return b"".join(iter_range_bytes(source, delimiter, start, end + 1, quote=quote,
                                     block_size=5))


def test_record_starting_in_range_is_read_past_end() -> None:
    # MinIO TestCSVRanges/select-all: bytes 76..109; record "2,..." starts at 77
    assert _span(MINIO_CSV, 76, 109) == b"2,2017-01-02T03:04Z,-5, 0.765111,\n"
    # a range holding only the first byte of a record still yields the whole record
    assert _span(MINIO_CSV, 77, 77) == b"2,2017-01-02T03:04Z,-5, 0.765111,\n"


def test_range_inside_a_record_yields_nothing() -> None:
    # Start 56 / End 76 lie inside record 1 (starts at 22); record 2 starts at 77. MinIO's
    # select-middle case instead restarts parsing at byte 56; AWS's rule gives no record.
    assert _span(MINIO_CSV, 56, 76) == b""


def test_range_from_zero_includes_first_record() -> None:
    assert _span(MINIO_CSV, 0, 0) == b"id,time,num,num2,text\n"
    assert _span(MINIO_CSV, 0, 21) == b"id,time,num,num2,text\n"
    assert _span(MINIO_CSV, 0, 22) == MINIO_CSV[:77]


def test_multi_byte_delimiter_and_last_record_without_delimiter() -> None:
    data = b"a,b,c%!a2,b2,c2%"
    assert _span(data, 0, 3, b"%!") == b"a,b,c%!"
    assert _span(data, 4, 7, b"%!") == b"a2,b2,c2%"
    # a range starting inside the delimiter: the next record starts at 7
    assert _span(data, 6, 6, b"%!") == b""
    assert _span(data, 6, 7, b"%!") == b"a2,b2,c2%"


def test_quote_aware_mode_skips_delimiters_inside_quotes() -> None:
    data = b'1,"x\ny"\n2,z\n'
    # plain mode: the newline inside quotes starts a record at byte 5
    assert _span(data, 4, 6) == b'y"\n'
    # quote-aware: bytes 4..6 hold no record start, the next record starts at 8
    assert _span(data, 4, 6, quote=b'"') == b""
    assert _span(data, 4, 8, quote=b'"') == b"2,z\n"


# ----------------------------------------------------------------- property: no loss, no dup

_TEXT = st.text(alphabet=st.sampled_from(list("ab,é€😀 ")), max_size=6)


@st.composite
def _csv_objects(draw: st.DrawFn, quoted_newlines: bool) -> bytes:
    records = []
    for _ in range(draw(st.integers(0, 12))):
        fields = []
        for _ in range(draw(st.integers(1, 4))):
            value = draw(_TEXT)
            if draw(st.booleans()):
                inner = value + ("\n" if quoted_newlines and draw(st.booleans()) else "")
                value = '"' + inner.replace('"', '""') + '"'
            fields.append(value)
        record = "" if draw(st.integers(0, 5)) == 0 else ",".join(fields)  # empty lines too
        records.append(record)
    text = "\n".join(records)
    if records and draw(st.booleans()):
        text += "\n"
    return text.encode("utf-8")


def _cuts(draw: st.DrawFn, size: int) -> list[tuple[int, int]]:
    points = sorted(set(draw(st.lists(st.integers(1, max(size - 1, 1)), max_size=6))))
    bounds = [0, *[p for p in points if 0 < p < size], size]
    return [
        (bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1) if bounds[i] < bounds[i + 1]
    ]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), quoted_newlines=st.booleans())
def test_ranges_tile_the_object(data: st.DataObject, quoted_newlines: bool) -> None:
    obj = data.draw(_csv_objects(quoted_newlines))
    ranges = _cuts(data.draw, len(obj))
    quote = b'"' if quoted_newlines else None
    block = data.draw(st.integers(1, 9))
    pieces = [
        b"".join(iter_range_bytes(io.BytesIO(obj), b"\n", s, e, quote=quote, block_size=block))
        for s, e in ranges
    ]
    # every piece is whole records, and together they are the object exactly once
    assert b"".join(pieces) == obj
    position = 0
    for (start, stop), piece in zip(ranges, pieces, strict=False):
        if piece:  # its first record starts inside the range
            assert start <= position < stop
        position += len(piece)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_records_of_ranges_equal_records_of_object(data: st.DataObject) -> None:
    obj = data.draw(_csv_objects(False))
    ranges = _cuts(data.draw, len(obj))
    from_ranges: list[bytes] = []
    for s, e in ranges:
        from_ranges += _records(
            b"".join(iter_range_bytes(io.BytesIO(obj), b"\n", s, e)), b"\n"
        )
    assert from_ranges == _records(obj, b"\n")


def _records(data: bytes, record_delimiter: bytes) -> list[bytes]:
    """Whole records of ``data`` (a trailing delimiter starts no new record): the oracle."""
    parts = data.split(record_delimiter) if data else []
    if parts and parts[-1] == b"":
        parts.pop()
    return parts
