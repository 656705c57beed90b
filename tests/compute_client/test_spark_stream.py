"""The streaming source: list step, admission control, offsets, deletions, exactly once."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles
from pyspark.sql.types import LongType, StringType, StructField, StructType

from compute_client.spark_stream import FlightSelectStreamReader
from tests.conftest import ServerProcess, start_server

SCHEMA = StructType([StructField("id", StringType()), StructField("word", StringType())])
ROWS_PER_OBJECT = 4


def add_object(root: Path, prefix: str, number: int) -> str:
    """Write ``s/<prefix>part-NNN.csv`` with ids number*100 .. number*100+3."""
    key = f"{prefix}part-{number:03d}.csv"
    path = root / "s" / key
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["id,word"] + [
        f"{number * 100 + i},w{'x' * (i + number % 3)}" for i in range(ROWS_PER_OBJECT)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return key


def ids_of(numbers) -> list[int]:
    return sorted(n * 100 + i for n in numbers for i in range(ROWS_PER_OBJECT))


@pytest.fixture(scope="module")
def stream_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stream")
    (root / "s").mkdir()
    (root / "s" / ".flight-select.json").write_text(json.dumps(
        {"tables": [{"prefix": "", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]}
    ))
    return root


@pytest.fixture(scope="module")
def stream_server(stream_root: Path) -> Iterator[ServerProcess]:
    server = start_server(stream_root)
    yield server
    server.stop()


def _reader(server: ServerProcess, prefix: str, **options: str) -> FlightSelectStreamReader:
    return FlightSelectStreamReader(
        {"location": server.location, "prefix": f"s/{prefix}", "listPageSize": "2", **options},
        SCHEMA,
    )


def _read_batch(reader: FlightSelectStreamReader, start: dict, end: dict) -> list[int]:
    ids = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            assert batch.schema == pa.schema([("id", pa.string()), ("word", pa.string())])
            ids += [int(v) for v in batch.column(0).to_pylist()]
    return sorted(ids)


def test_admission_by_files_and_resume_from_offsets(
    stream_root: Path, stream_server: ServerProcess
) -> None:
    for n in range(5):
        add_object(stream_root, "files/", n)
    first = _reader(stream_server, "files/", maxFilesPerTrigger="2")
    assert first.getDefaultReadLimit() == ReadMaxFiles(2)
    start = first.initialOffset()
    end = first.latestOffset(start, ReadMaxFiles(2))
    assert [k for k, _ in end["batch"]] == ["files/part-000.csv", "files/part-001.csv"]
    assert _read_batch(first, start, end) == ids_of([0, 1])
    # a restarted query: a new reader with only the checkpointed offset (JSON)
    restarted = _reader(stream_server, "files/", maxFilesPerTrigger="2")
    start = json.loads(json.dumps(end))
    end = restarted.latestOffset(start, ReadMaxFiles(2))
    assert end["after"] == "files/part-003.csv"
    assert _read_batch(restarted, start, end) == ids_of([2, 3])
    add_object(stream_root, "files/", 5)
    following = restarted.latestOffset(end, ReadMaxFiles(2))
    assert [k for k, _ in following["batch"]] == ["files/part-004.csv", "files/part-005.csv"]
    assert restarted.latestOffset(following, ReadMaxFiles(2)) == following  # nothing new


def test_admission_by_bytes(stream_root: Path, stream_server: ServerProcess) -> None:
    sizes = []
    for n in range(4):
        key = add_object(stream_root, "bytes/", n)
        sizes.append((stream_root / "s" / key).stat().st_size)
    limit = sizes[0] + sizes[1]
    reader = _reader(stream_server, "bytes/", maxBytesPerTrigger=str(limit))
    assert reader.getDefaultReadLimit() == ReadMaxBytes(limit)
    end = reader.latestOffset(reader.initialOffset(), ReadMaxBytes(limit))
    assert end["batch"] == [["bytes/part-000.csv", sizes[0]], ["bytes/part-001.csv", sizes[1]]]
    end = reader.latestOffset(end, ReadMaxBytes(1))  # always at least one object
    assert [k for k, _ in end["batch"]] == ["bytes/part-002.csv"]
    end = reader.latestOffset(end, ReadAllAvailable())  # e.g. Trigger.Once: no limit
    assert [k for k, _ in end["batch"]] == ["bytes/part-003.csv"]


def test_available_now_stops_at_what_existed(
    stream_root: Path, stream_server: ServerProcess
) -> None:
    for n in range(3):
        add_object(stream_root, "now/", n)
    reader = _reader(stream_server, "now/", maxFilesPerTrigger="1")
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset(reader.initialOffset(), ReadMaxFiles(1))
    add_object(stream_root, "now/", 3)  # arrives after the query started
    end = reader.latestOffset(end, ReadMaxFiles(1))
    end = reader.latestOffset(end, ReadMaxFiles(1))
    assert end["after"] == "now/part-002.csv"
    assert reader.latestOffset(end, ReadMaxFiles(1)) == end


def test_deleted_object_is_skipped_with_a_log_line(
    stream_root: Path, stream_server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    keys = [add_object(stream_root, "gone/", n) for n in range(3)]
    reader = _reader(stream_server, "gone/", where="id <> '101'")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert len(end["batch"]) == 3
    (stream_root / "s" / keys[1]).unlink()
    with caplog.at_level(logging.WARNING, logger="compute_client.spark_stream"):
        ids = _read_batch(reader, start, end)
    assert ids == ids_of([0, 2])
    assert any("gone/part-001.csv" in r.getMessage() and "deleted" in r.getMessage()
               for r in caplog.records)


def test_a_batch_reads_in_a_task_per_server_core_and_skips_only_what_was_deleted(
    stream_root: Path, stream_server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    keys = [add_object(stream_root, "packed/", n) for n in range(5)]
    reader = _reader(stream_server, "packed/")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert len(end["batch"]) == 5
    parts = reader.partitions(start, end)
    assert 1 <= len(parts) <= min(5, os.cpu_count() or 1)
    assert sorted(k for p in parts for k in p.keys) == sorted(keys)  # each object once
    (stream_root / "s" / keys[1]).unlink()  # after planning: its task reads the others
    ids = []
    with caplog.at_level(logging.WARNING, logger="compute_client.spark_stream"):
        for partition in parts:
            for batch in reader.read(partition):
                ids += [int(v) for v in batch.column(0).to_pylist()]
    assert sorted(ids) == ids_of([0, 2, 3, 4])
    assert sum("packed/part-001.csv" in r.getMessage() for r in caplog.records) == 1


def test_parallelism_option_asks_each_object_for_endpoints_and_packs_that_many_tasks(
    stream_root: Path, stream_server: ServerProcess
) -> None:
    """``parallelism``: every object of a batch (about 3.5 MiB, one endpoint by work) is cut
    into 3 endpoints, the batch's 6 endpoints are read as 3 tasks, every record once."""
    rows = 300_000
    for n in range(2):
        path = stream_root / "s" / "wide" / f"part-{n}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("id,word\n" + "".join(f"{n * rows + i},wxyz\n" for i in range(rows)))
    for options, endpoints, tasks in (({}, 2, None), ({"parallelism": "3"}, 6, 3)):
        reader = _reader(stream_server, "wide/", **options)
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        parts = reader.partitions(start, end)
        assert sum(len(p.endpoints()) for p in parts) == endpoints
        if tasks is not None:
            assert len(parts) == tasks
            assert _read_batch(reader, start, end) == list(range(2 * rows))


def test_fetch_statement_pushes_columns_and_where(
    stream_root: Path, stream_server: ServerProcess
) -> None:
    add_object(stream_root, "stmt/", 7)
    reader = FlightSelectStreamReader(
        {"location": stream_server.location, "prefix": "s/stmt/", "where": "word LIKE 'wx%'"},
        StructType([StructField("word", StringType())]),
    )
    from compute_client.flight import FlightSelectClient

    with FlightSelectClient(reader.options.connection) as client:
        assert reader.statement(client, "stmt/part-007.csv") == (
            """SELECT s3object."word" FROM "s"."stmt/part-007.csv" WHERE (word LIKE 'wx%')"""
        )


@pytest.mark.spark
def test_exactly_once_across_a_restart(spark, tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "s").mkdir(parents=True)
    (root / "s" / ".flight-select.json").write_text(json.dumps(
        {"tables": [{"prefix": "", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]}
    ))
    for n in range(4):
        add_object(root, "in/", n)
    server = start_server(root)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    try:
        def start(trigger: dict[str, bool] | None):
            stream = (
                spark.readStream.format("flight-select")
                .option("location", server.location).option("prefix", "s/in/")
                .option("maxFilesPerTrigger", "1").option("listPageSize", "2")
                .schema("id string, word string").load()
                .selectExpr("CAST(id AS BIGINT) AS id", "word")
                .writeStream.format("parquet")
                .option("checkpointLocation", str(checkpoint)).option("path", str(out))
            )
            return stream.trigger(**trigger).start() if trigger else stream.start()

        query = start(None)
        deadline = time.monotonic() + 300  # a guard against hanging, not a timing assertion
        while sum(p["numInputRows"] > 0 for p in query.recentProgress) < 2:
            assert query.exception() is None
            assert time.monotonic() < deadline, "the stream made no progress"
            time.sleep(0.2)
        query.stop()  # mid-stream: 4 objects, one per trigger
        for n in range(4, 7):
            add_object(root, "in/", n)
        query = start({"availableNow": True})
        query.awaitTermination()
        assert query.exception() is None
        ids = [r["id"] for r in spark.read.parquet(str(out)).collect()]
        assert sorted(ids) == ids_of(range(7))
        assert spark.read.parquet(str(out)).schema["id"].dataType == LongType()
    finally:
        server.stop()
