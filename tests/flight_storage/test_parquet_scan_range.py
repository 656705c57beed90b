"""Parquet ScanRange: a range reads the row groups whose start lies inside it (AWS's rule).

A row group's start is the offset of its first page (the dictionary page when there is one),
the lowest offset any of its column chunks holds. Ranges that split the file into consecutive
pieces therefore read every row group exactly once."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.execution.select_local import run_select
from tests.conftest import ServerProcess
from tests.flight_storage.test_s3_door import s3_client, start_door
from tests.flight_storage.test_server_s3_request import _read, _records

ROWS = 2000
ROWS_PER_GROUP = 50
KEY = "groups.parquet"
PARQUET: dict[str, Any] = {"Parquet": {}}
IDS = "SELECT s.id FROM s3object s"


def _write(path: Path) -> None:
    table = pa.table({
        "id": pa.array(range(ROWS), pa.int64()),
        "tag": pa.array([f"t{i % 7}" for i in range(ROWS)]),  # dictionary-encoded
    })
    pq.write_table(table, path, row_group_size=ROWS_PER_GROUP)


def _group_starts(path: Path) -> list[int]:
    """Each row group's lowest page offset over all its column chunks."""
    metadata = pq.ParquetFile(path).metadata
    starts = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        offsets = []
        for c in range(group.num_columns):
            chunk = group.column(c)
            offsets.append(chunk.data_page_offset)
            if chunk.has_dictionary_page:
                offsets.append(chunk.dictionary_page_offset)
        starts.append(min(offsets))
    return starts


def _expected_ids(starts: list[int], first: int, last: int) -> list[int]:
    """Ids of the row groups starting in ``first..last`` (inclusive)."""
    return [i for g, start in enumerate(starts) if first <= start <= last
            for i in range(g * ROWS_PER_GROUP, (g + 1) * ROWS_PER_GROUP)]


def _ids(records: bytes) -> list[int]:
    return [int(line) for line in records.decode().splitlines()]


def _consecutive_ranges(size: int) -> list[tuple[int, int]]:
    """Inclusive ranges covering ``0..size-1`` once, of uneven widths (some hold no start)."""
    ranges, start, widths = [], 0, [1, 300, 17, 911, 4, 1500]
    for i in range(size):
        if start >= size:
            break
        end = min(size - 1, start + widths[i % len(widths)] - 1)
        ranges.append((start, end))
        start = end + 1
    return ranges


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "bucket").mkdir()
    _write(root / "bucket" / KEY)
    return root


@pytest.fixture(scope="module")
def parquet(data_root: Path) -> Path:
    path = data_root / "bucket" / KEY
    assert pq.ParquetFile(path).metadata.num_row_groups == ROWS // ROWS_PER_GROUP
    return path


def _local(path: Path, expression: str, scan_range: tuple[int, int] | None) -> bytes:
    return run_select(path.read_bytes(), expression, input_serialization=PARQUET,
                      output_serialization={"CSV": {}}, scan_range=scan_range).records


def test_consecutive_ranges_read_each_row_group_once(parquet: Path) -> None:
    starts, size = _group_starts(parquet), parquet.stat().st_size
    ranges = _consecutive_ranges(size)
    seen: list[int] = []
    for first, last in ranges:
        ids = _ids(_local(parquet, IDS, (first, last)))
        assert ids == _expected_ids(starts, first, last), (first, last)
        seen += ids
    assert seen == list(range(ROWS))
    assert any(not _expected_ids(starts, a, b) for a, b in ranges)  # some ranges hold none


def test_filters_and_aggregates_see_only_the_range(parquet: Path) -> None:
    starts = _group_starts(parquet)
    first, last = starts[3], starts[9] - 1  # row groups 3..8
    wanted = _expected_ids(starts, first, last)
    assert wanted == list(range(3 * ROWS_PER_GROUP, 9 * ROWS_PER_GROUP))
    filtered = _local(parquet, "SELECT s.id FROM s3object s WHERE s.id % 2 = 0", (first, last))
    assert _ids(filtered) == [i for i in wanted if i % 2 == 0]
    count = _local(parquet, "SELECT count(*) FROM s3object", (first, last))
    assert _ids(count) == [len(wanted)]


def test_range_past_the_end_is_refused(parquet: Path) -> None:
    size = parquet.stat().st_size
    with pytest.raises(InvalidRequestError) as caught:
        _local(parquet, IDS, (size, size + 10))
    assert caught.value.code == "InvalidScanRange"


@pytest.mark.parametrize("compression", ["GZIP", "BZIP2"])
def test_compressed_input_is_refused_with_aws_code(parquet: Path, compression: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        run_select(parquet.read_bytes(), IDS,
                   input_serialization={**PARQUET, "CompressionType": compression},
                   output_serialization={"CSV": {}}, scan_range=(0, 99))
    assert caught.value.code == "UnsupportedScanRangeInput"


@pytest.fixture(scope="module")
def door(data_root: Path) -> Iterator[tuple[ServerProcess, str]]:
    server, url = start_door(data_root)
    yield server, url
    server.stop()


@pytest.fixture(scope="module")
def server(door: tuple[ServerProcess, str]) -> ServerProcess:
    return door[0]


def _flight_ids(server: ServerProcess, scan: dict[str, int]) -> list[int]:
    request: dict[str, Any] = {
        "Bucket": "bucket", "Key": KEY, "Expression": IDS, "ExpressionType": "SQL",
        "InputSerialization": PARQUET, "OutputSerialization": {"CSV": {}}, "ScanRange": scan}
    return _ids(_records(_read(server, request)[1]))


def test_over_flight_ranges_union_to_the_whole_file(server: ServerProcess, parquet: Path) -> None:
    starts, size = _group_starts(parquet), parquet.stat().st_size
    cuts = [0, starts[5] + 1, starts[20], size // 2, size]
    seen: list[int] = []
    for lo, hi in itertools.pairwise(cuts):
        ids = _flight_ids(server, {"Start": lo, "End": hi - 1})
        assert ids == _expected_ids(starts, lo, hi - 1)
        seen += ids
    assert seen == list(range(ROWS))
    # Start only: to the end of the object; End only: the last End bytes
    assert _flight_ids(server, {"Start": starts[37]}) == list(range(37 * ROWS_PER_GROUP, ROWS))
    assert _flight_ids(server, {"End": size - starts[38]}) == list(
        range(38 * ROWS_PER_GROUP, ROWS))


def test_through_boto3_at_the_s3_door(door: tuple[ServerProcess, str], parquet: Path) -> None:
    s3 = s3_client(door[1])
    starts, size = _group_starts(parquet), parquet.stat().st_size
    seen: list[int] = []
    for first in range(0, size, 4096):
        last = min(size, first + 4096) - 1
        answer = s3.select_object_content(
            Bucket="bucket", Key=KEY, Expression=IDS, ExpressionType="SQL",
            InputSerialization=PARQUET, OutputSerialization={"CSV": {}},
            ScanRange={"Start": first, "End": last})
        records = b"".join(e["Records"]["Payload"] for e in answer["Payload"] if "Records" in e)
        assert _ids(records) == _expected_ids(starts, first, last)
        seen += _ids(records)
    assert seen == list(range(ROWS))
