"""Engine workers (``execution/engine_workers.py``) through a real server: an aggregate over a
local file, or over an object store's object, runs in a worker process; a stopped query's worker is killed and replaced; a busy
pool answers ``SlowDown``; a worker's errors keep their codes; a worker that dies fails its
query with ``InternalError`` and the pool recovers; a worker grown by a large aggregate is
replaced, which gives its memory back."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import (
    error_document,
    process_tree,
    statement_descriptor,
    tree_status_mib,
    write_numbers_parquet,
)
from tests.seaweedfs import SeaweedFS

ROWS = 20_000_000
SLOW = 'SELECT k, count(*) AS n FROM "big"."big.parquet" GROUP BY k ORDER BY n DESC LIMIT 3'
"""An aggregate that keeps a worker busy for seconds (20M groups)."""
QUICK = 'SELECT count(*) AS n, sum(v) AS s FROM "big"."small.parquet"'


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "big").mkdir()
    write_numbers_parquet(root / "big" / "big.parquet", ROWS)
    pq.write_table(pa.table({"v": pa.array(range(1000), pa.int64())}),
                   root / "big" / "small.parquet")
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--engine-workers", "1", "--queue-wait", "3") as process:
        yield process


def _children(pid: int) -> dict[int, int]:
    """Every process below ``pid``, with its CPU ticks."""
    ticks: dict[int, int] = {}
    for member in process_tree(pid)[1:]:
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        ticks[member] = int(fields[11]) + int(fields[12])
    return ticks


def _busy_worker(pid: int) -> int:
    """The process below ``pid`` computing now (a worker running a query): the first to use
    a fifth of a core over half a second."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        before = _children(pid)
        time.sleep(0.5)
        after = _children(pid)
        busy = [p for p in after if after[p] - before.get(p, after[p]) >= 10]
        if busy:
            return busy[0]
    raise AssertionError("no process of the server is computing")


def _query(server: ServerProcess, sql: str, timeout: float | None = None) -> pa.Table:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(sql))
    options = flight.FlightCallOptions(timeout=timeout)
    return client.do_get(info.endpoints[0].ticket, options).read_all()


def _in_background(server: ServerProcess, sql: str, timeout: float | None = None
                   ) -> list[BaseException]:
    failures: list[BaseException] = []

    def read() -> None:
        try:
            _query(server, sql, timeout)
        except pa.ArrowException as exc:
            failures.append(exc)

    threading.Thread(target=read, daemon=True).start()
    return failures


def _wait_for(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.1)


def _warm(server: ServerProcess) -> None:
    """The pool has started (resource tracker, forkserver, the one worker)."""
    _wait_for(lambda: len(_children(server.process.pid)) >= 3)


def test_an_aggregate_runs_in_a_worker_process(server: ServerProcess) -> None:
    _warm(server)
    assert _query(server, QUICK).to_pylist() == [{"n": 1000, "s": sum(range(1000))}]


def test_a_busy_pool_answers_slow_down_naming_the_option(server: ServerProcess) -> None:
    _warm(server)
    slow = _in_background(server, SLOW)
    worker = _busy_worker(server.process.pid)
    with pytest.raises(pa.ArrowException) as refused:
        _query(server, QUICK)
    document = error_document(refused.value)
    assert document["code"] == "SlowDown"
    assert "--engine-workers 1" in document["message"]
    os.kill(worker, signal.SIGKILL)  # end the slow query (its error is the next test's)
    _wait_for(lambda: bool(slow))


def test_a_worker_that_dies_fails_its_query_and_is_replaced(server: ServerProcess) -> None:
    _warm(server)
    slow = _in_background(server, SLOW)
    worker = _busy_worker(server.process.pid)
    os.kill(worker, signal.SIGKILL)
    _wait_for(lambda: bool(slow), timeout=30)
    assert slow, "the query did not fail"
    document = error_document(slow[0])
    assert document["code"] == "InternalError"
    assert "engine worker ended unexpectedly" in document["message"]
    assert "Traceback" not in str(slow[0])
    _wait_for(lambda: worker not in _children(server.process.pid))
    assert _query(server, QUICK).to_pylist() == [{"n": 1000, "s": sum(range(1000))}]


def test_a_cancelled_query_frees_its_worker_for_the_next(server: ServerProcess) -> None:
    _warm(server)
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(SLOW))
    options = flight.FlightCallOptions(timeout=2)
    with pytest.raises(flight.FlightTimedOutError):
        client.do_get(info.endpoints[0].ticket, options).read_all()
    started = time.monotonic()
    assert _query(server, QUICK).to_pylist() == [{"n": 1000, "s": sum(range(1000))}]
    assert time.monotonic() - started < 30


def test_an_error_in_a_worker_keeps_its_code(server: ServerProcess) -> None:
    _warm(server)
    with pytest.raises(pa.ArrowException) as failed:
        _query(server, "SELECT sum(CAST(CAST(v AS VARCHAR) || 'x' AS INT)) "
                       'FROM "big"."small.parquet"')
    assert error_document(failed.value)["code"] == "CastFailed"
    assert "Traceback" not in str(failed.value)


def test_a_worker_grown_by_its_query_is_replaced_and_its_memory_given_back(
        server: ServerProcess) -> None:
    _warm(server)
    before = tree_status_mib(server.process.pid, "VmRSS")
    workers = set(_children(server.process.pid))
    assert len(_query(server, SLOW)) == 3  # 20M groups: past RECYCLE_GROWTH_BYTES
    _wait_for(lambda: set(_children(server.process.pid)) != workers, timeout=20)
    assert set(_children(server.process.pid)) != workers, "the grown worker was kept"
    _wait_for(lambda: len(_children(server.process.pid)) >= len(workers))
    assert tree_status_mib(server.process.pid, "VmRSS") < before + 200


@pytest.fixture(scope="module")
def store_server(seaweedfs: SeaweedFS, data: Path) -> Iterator[ServerProcess]:
    """A server whose bucket ``big`` is a SeaweedFS bucket holding the same two files."""
    bucket = seaweedfs.new_bucket("engine-workers")
    seaweedfs.upload_folder(data / "big", bucket)
    with running_server(f"s3://{bucket}", "--engine-workers", "1", "--queue-wait", "3",
                        env=seaweedfs.env()) as process:
        yield process


def test_an_aggregate_over_a_store_object_runs_in_a_worker_that_a_timeout_stops(
        store_server: ServerProcess) -> None:
    """The worker registers the object store itself (credentials handed over as values), so
    a timed-out aggregate over a store's object is killed with its worker, as over a file."""
    _warm(store_server)
    quick = QUICK.replace('"big"', '"engine-workers"')
    assert _query(store_server, quick).to_pylist() == [{"n": 1000, "s": sum(range(1000))}]
    slow = _in_background(store_server, SLOW.replace('"big"', '"engine-workers"'), timeout=4)
    worker = _busy_worker(store_server.process.pid)  # a child computes: the worker
    _wait_for(lambda: bool(slow), timeout=30)
    assert slow and isinstance(slow[0], flight.FlightTimedOutError), slow
    _wait_for(lambda: worker not in _children(store_server.process.pid), timeout=5)
    assert worker not in _children(store_server.process.pid), "the timed-out worker ran on"
    assert _query(store_server, quick).to_pylist() == [{"n": 1000, "s": sum(range(1000))}]
