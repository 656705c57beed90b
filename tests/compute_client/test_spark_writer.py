"""The Spark writer through a real server: ``df.write.format("flight-select")`` stores every
task's Parquet object when the job commits, and nothing when a task fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import ServerProcess, running_server

pytestmark = pytest.mark.spark


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    (tmp_path / "lake").mkdir()
    with running_server(tmp_path, "--writable") as server:
        yield server, tmp_path / "lake"


def _save(frame, location: str, mode: str) -> None:  # noqa: ANN001 - Spark types
    (frame.write.format("flight-select").option("location", location)
     .option("table", "lake/events").mode(mode).save())


def test_job_writes_a_parquet_object_per_task_on_commit(spark, lake) -> None:  # noqa: ANN001
    server, folder = lake
    frame = spark.range(0, 1000, numPartitions=3).selectExpr("id", "id % 7 AS bucket")
    _save(frame, server.location, "append")
    objects = sorted(p.name for p in (folder / "events").iterdir())
    assert len(objects) == 3
    assert all(n.endswith(".parquet") for n in objects)
    # none staged: the one hidden entry is the commit records' folder (CommitIngest's commit)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == [
        ".flight-select-commits"]
    with FlightSelectClient(ConnectionOptions(server.location)) as client:
        table = client.read_all('SELECT count(*) AS n, sum(id) AS s FROM "lake"."events/"')
    assert table.to_pylist() == [{"n": 1000, "s": sum(range(1000))}]
    _save(spark.range(5, numPartitions=1), server.location, "overwrite")
    with FlightSelectClient(ConnectionOptions(server.location)) as client:
        rows = client.read_all('SELECT id FROM "lake"."events/"').column(0).to_pylist()
    assert sorted(rows) == [0, 1, 2, 3, 4]


def test_a_failed_task_leaves_nothing(spark, lake) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    server, folder = lake
    fail_late = F.udf(lambda i: i if i < 900 else 1 // 0, "long")  # the last task fails
    frame = spark.range(0, 1000, numPartitions=4).select(fail_late("id").alias("id"))
    with pytest.raises(Exception, match="ZeroDivisionError"):
        _save(frame, server.location, "append")
    # tasks Spark did not wait for may still be staging: they find the job aborted
    deadline = time.monotonic() + 30
    while _left(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _left(folder) == []  # no object, and no staged file left behind


def _left(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if not p.name.startswith(".ingest-aborted-")]
