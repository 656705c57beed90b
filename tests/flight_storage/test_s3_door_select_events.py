"""SelectObjectContent's events as S3 sends them (issue 27, item 2): Progress while the scan
runs (increasing, never past the Stats totals, also when DataFusion's own reader scans),
Cont keep-alives before the first record also when progress is asked for, End last, and
ScanRange on CSV and JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.flight_storage.test_s3_door import _records, s3_client, start_door

ROWS = 1_500_000  # about 30 MB of CSV: DataFusion reads it in several byte ranges
SKEWED_HALF = 24 << 20


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("events") / "data"
    (data / "big").mkdir(parents=True)
    with (data / "big" / "rows.csv").open("w") as out:
        for start in range(0, ROWS, 100_000):
            out.write("".join(f"{i},name {i % 97},{i * 7 % 1000}\n"
                              for i in range(start, start + 100_000)))
    with (data / "big" / "skewed.csv").open("w") as out:
        # the same bytes in each half; the second half has 50 times the records, so the
        # byte range DataFusion reads first (in parallel) ends long before the other
        out.write(("1," + "x" * 197 + "\n") * (SKEWED_HALF // 200))
        out.write("1,x\n" * (SKEWED_HALF // 4))
    with (data / "big" / "quoted.csv").open("w") as out:
        # a quote holding a line break: the reference tokenizer reads it (DataFusion's reader
        # cannot split such a file), slowly enough to need keep-alives
        out.write('0,"two\nlines",0\n')
        for start in range(0, 200_000, 100_000):
            out.write("".join(f"{i},name {i % 97},{i * 7 % 1000}\n"
                              for i in range(start, start + 100_000)))
    with (data / "big" / "rows.ndjson").open("w") as out:
        out.write("".join(json.dumps({"id": i, "name": f"n{i % 13}"}) + "\n"
                          for i in range(20_000)))
    server: ServerProcess
    server, url = start_door(data, "--keepalive", "0.05")  # a keep-alive at every idle poll
    yield data, url
    server.stop()


def _events(url: str, key: str, expression: str, **request: Any) -> list[dict[str, Any]]:
    request.setdefault("InputSerialization", {"CSV": {}})
    answer = s3_client(url).select_object_content(
        Bucket="big", Key=key, Expression=expression, ExpressionType="SQL",
        OutputSerialization={"CSV": {}}, RequestProgress={"Enabled": True}, **request)
    return list(answer["Payload"])


def _check_progress(events: list[dict[str, Any]]) -> list[dict[str, int]]:
    kinds = [next(iter(e)) for e in events]
    assert kinds[-2:] == ["Stats", "End"] and kinds.count("End") == 1
    stats = events[-2]["Stats"]["Details"]
    progress = [e["Progress"]["Details"] for e in events if "Progress" in e]
    assert progress, "progress was asked for"
    for name in ("BytesScanned", "BytesProcessed", "BytesReturned"):
        values = [p[name] for p in progress]
        assert values == sorted(values), f"{name} went back: {values}"
        assert values[-1] <= stats[name]
    return progress


def test_progress_of_an_aggregate_that_datafusion_scans(door: tuple[Path, str]) -> None:
    """The issue's case: an aggregate over a large CSV read by DataFusion's own reader (its
    one record comes after the whole scan) said ``BytesScanned: 0`` in every Progress while
    Stats said the object's size. Now each byte range counts once DataFusion has read it:
    while the long second range is read, Progress counts the first."""
    data, url = door
    events = _events(url, "skewed.csv", "SELECT sum(cast(s._1 as int)) FROM s3object s")
    size = (data / "big" / "skewed.csv").stat().st_size
    assert _records(events) == f"{SKEWED_HALF // 200 + SKEWED_HALF // 4}\n".encode()
    progress = _check_progress(events)
    assert events[-2]["Stats"]["Details"]["BytesScanned"] == size
    kinds = [next(iter(e)) for e in events]
    during = [e["Progress"]["Details"]["BytesScanned"]
              for e in events[:kinds.index("Records")] if "Progress" in e]
    # a Progress while the second range is read counts the first; one sent after the scan
    # ends but before the record is written may say the whole size (as S3's may)
    assert any(0 < scanned < size for scanned in during), during
    assert progress[-1]["BytesScanned"] == size


def test_progress_across_endpoints(door: tuple[Path, str]) -> None:
    data, url = door
    events = _events(url, "rows.csv", "SELECT s._1 FROM s3object s WHERE s._3 = '5'")
    progress = _check_progress(events)
    assert progress[-1]["BytesScanned"] == (data / "big" / "rows.csv").stat().st_size
    assert progress[-1]["BytesReturned"] == len(_records(events))


def test_cont_keep_alives_before_the_first_record_with_progress(
        door: tuple[Path, str]) -> None:
    """A scan that finds its one row at the end and takes longer than the keep-alive: Cont
    messages keep the connection alive, with Progress beside them. A quoted line break makes
    the reference tokenizer read it (about 1 s for 2 MiB; DataFusion counts the whole object
    in tens of milliseconds, faster than a keep-alive, so its answer may have none)."""
    _data, url = door
    events = _events(url, "quoted.csv", "SELECT count(*) FROM s3object s",
                     InputSerialization={"CSV": {"AllowQuotedRecordDelimiter": True}},
                     ScanRange={"Start": 0, "End": (2 << 20) - 1})
    kinds = [next(iter(e)) for e in events]
    first = kinds.index("Records")
    assert "Cont" in kinds[:first]
    assert "Progress" in kinds[:first]
    _check_progress(events)
    scanned = [e["Progress"]["Details"]["BytesScanned"] for e in events[:first]
               if "Progress" in e]
    assert scanned[-1] > 0  # counted while it read, not only at the end


@pytest.mark.parametrize(("key", "input_serialization", "expression"), [
    ("rows.csv", {"CSV": {}}, "SELECT s._1 FROM s3object s WHERE s._2 = 'name 5'"),
    ("rows.ndjson", {"JSON": {"Type": "LINES"}}, "SELECT s.id FROM s3object s "
                                                  "WHERE s.name = 'n5'"),
])
def test_scan_ranges_cover_the_object_once(door: tuple[Path, str], key: str,
                                           input_serialization: dict[str, Any],
                                           expression: str) -> None:
    data, url = door
    size = (data / "big" / key).stat().st_size
    whole = _records(_events(url, key, expression, InputSerialization=input_serialization))
    step = size // 3 + 1
    parts = b"".join(_records(_events(url, key, expression,
                                      InputSerialization=input_serialization,
                                      ScanRange={"Start": start, "End": start + step - 1}))
                     for start in range(0, size, step))
    assert parts == whole and whole
