"""The timestamp text pieces the output writer and the UDF kernels share."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from flight_storage.formats.timestamp_text import (
    nanos_of_second,
    offset_text,
    wall_clock,
    zero_pad,
)

OFFSETS = [-765, -465, -60, 0, 30, 60, 345, 840]


def _python_offset(minutes: int, colon: bool, hours_only_when_whole: bool) -> str:
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    if hours_only_when_whole and rest == 0:
        return f"{sign}{hours:02d}"
    return f"{sign}{hours:02d}{':' if colon else ''}{rest:02d}"


@pytest.mark.parametrize("colon", [True, False])
@pytest.mark.parametrize("hours_only_when_whole", [True, False])
def test_offset_text_matches_the_written_form(colon: bool, hours_only_when_whole: bool) -> None:
    got = offset_text(pa.array(OFFSETS, pa.int16()), colon=colon,
                      hours_only_when_whole=hours_only_when_whole).to_pylist()
    assert got == [_python_offset(m, colon, hours_only_when_whole) for m in OFFSETS]


def test_offset_text_keeps_nulls() -> None:
    assert offset_text(pa.array([None, 60], pa.int64())).to_pylist() == [None, "+01:00"]


def test_zero_pad_pads_and_never_truncates() -> None:
    assert zero_pad(pa.array([0, 5, 12, 12345]), 4).to_pylist() == ["0000", "0005", "0012",
                                                                       "12345"]


def test_wall_clock_and_nanos_at_each_offset() -> None:
    instants = [dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
                dt.datetime(2024, 2, 29, 0, 30, 0, 123456, tzinfo=dt.UTC)]
    utc = pa.array(instants, pa.timestamp("us", tz="UTC")).cast(
        pa.timestamp("ns", tz="UTC")).cast(pa.int64())
    for minutes in OFFSETS:
        local = wall_clock(utc, pa.array([minutes] * 2, pa.int16()))
        expected = [(i + dt.timedelta(minutes=minutes)).replace(tzinfo=None) for i in instants]
        assert local.type == pa.timestamp("ns")
        assert local.to_pylist() == expected
        assert nanos_of_second(local).to_pylist() == [999_999_000, 123_456_000]
    assert wall_clock(utc, None).to_pylist() == [i.replace(tzinfo=None) for i in instants]
