"""Hostile and unlucky clients (issue #14): each gets the full answer or a clean S3 error, in
bounded time and memory, and leaves the server as it found it.

Slow, vanishing and many concurrent readers; an object deleted mid-stream; kill -9 of the server
mid-stream; a huge statement parameter. Stalled readers, the open-stream limit and the query
timeout are in ``test_server_security.py``, objects truncated or replaced mid-stream in
``test_server_integrity.py``, SIGTERM mid-stream in ``test_server_operations.py``, bombs and
planning limits in ``test_server_bounds.py`` (all marked ``reliability`` too).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pytest
from pyarrow import flight

from tests.conftest import ServerProcess, start_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    error_document,
    statement_descriptor,
)

pytestmark = pytest.mark.reliability

ROWS = 300_000
SQL = 'SELECT _1 FROM "b"."rows.csv"'


def _write_rows(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{i},{i % 7},padding padding {i:08d}\n" for i in range(ROWS)))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("reliability")
    _write_rows(root / "b" / "rows.csv")
    process = start_server(root, "--partition-mb", "2", "--idle-timeout", "2")
    try:
        yield process
    finally:
        process.stop()


def _ids(server: ServerProcess, pause_s: float = 0.0) -> list[int]:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(SQL), PARTITIONED)
    ids: list[int] = []
    for endpoint in info.endpoints:
        reader = client.do_get(endpoint.ticket)
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            ids.extend(int(v) for v in chunk.data.column(0).to_pylist())
            time.sleep(pause_s)
    client.close()
    return ids


def _open_streams(server: ServerProcess) -> int:
    client = flight.connect(server.location)
    result = next(iter(client.do_action(flight.Action("health", b""))))
    client.close()
    return int(json.loads(result.body.to_pybytes())["open_streams"])


def _wait_until_idle(server: ServerProcess, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _open_streams(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _open_streams(server) == 0


def test_concurrent_clients_each_get_every_row(server: ServerProcess) -> None:
    results: list[list[int]] = [[] for _ in range(8)]
    errors: list[BaseException] = []

    def read(slot: int) -> None:
        try:
            results[slot] = _ids(server)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(results))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    for ids in results:
        assert ids == list(range(ROWS))  # every row, once, in object order
    _wait_until_idle(server)


def test_a_slow_reader_gets_every_row(server: ServerProcess) -> None:
    # Pauses shorter than --idle-timeout between reads, longer than it in all: slow is not
    # idle.
    started = time.monotonic()
    assert _ids(server, pause_s=0.1) == list(range(ROWS))
    assert time.monotonic() - started > 2


def test_a_vanishing_reader_frees_its_stream(tmp_path: Path, server: ServerProcess) -> None:
    # An endpoint whose answer (tens of MB of Arrow) cannot fit in the transport's flow-control
    # windows, so the stream is still open on the server when the client goes away. (A 0.5 MB
    # endpoint was sent whole into gRPC's buffers on a fast machine before the check.)
    big = tmp_path / "b" / "big.csv"
    big.parent.mkdir(parents=True)
    line = "padding padding padding padding"
    big.write_text("".join(f"{i},{i % 7},{line} {i:08d}\n" for i in range(1_000_000)))
    lone = start_server(tmp_path, "--idle-timeout", "2")
    try:
        client = flight.connect(lone.location)
        info = client.get_flight_info(statement_descriptor('SELECT * FROM "b"."big.csv"'))
        reader = client.do_get(info.endpoints[0].ticket)
        assert reader.read_chunk().data.num_rows > 0
        assert _open_streams(lone) == 1
        client.close()  # goes away mid-stream without a word
        _wait_until_idle(lone)
    finally:
        lone.stop()
    assert _ids(server) == list(range(ROWS))  # a server serves the next client whole


def test_an_object_deleted_mid_stream_gives_a_clean_error_or_every_row(tmp_path: Path) -> None:
    path = tmp_path / "b" / "rows.csv"
    _write_rows(path)
    server = start_server(tmp_path)
    try:
        client = flight.connect(server.location)
        info = client.get_flight_info(statement_descriptor(SQL + " LIMIT 300000"))
        reader = client.do_get(info.endpoints[0].ticket)
        ids = [int(v) for v in reader.read_chunk().data.column(0).to_pylist()]
        os.remove(path)
        try:
            while True:
                ids.extend(int(v) for v in reader.read_chunk().data.column(0).to_pylist())
        except StopIteration:
            assert ids == list(range(ROWS))  # an open file outlives its name
        except pa.ArrowException as exc:
            assert error_document(exc)["code"] in ("PreconditionFailed", "NoSuchKey")
    finally:
        server.stop()


def test_kill_9_mid_stream_ends_the_client_read_with_an_error(tmp_path: Path) -> None:
    _write_rows(tmp_path / "b" / "rows.csv")
    server = start_server(tmp_path)
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(SQL + " LIMIT 300000"))
    options = flight.FlightCallOptions(timeout=30)
    reader = client.do_get(info.endpoints[0].ticket, options)
    assert reader.read_chunk().data.num_rows > 0
    server.process.kill()
    server.process.wait(10)
    started = time.monotonic()
    with pytest.raises(pa.ArrowException):  # UNAVAILABLE: never a silently short answer
        while True:
            reader.read_chunk()
    assert time.monotonic() - started < 30
    again = start_server(tmp_path)  # the port and the data are free for the next process
    try:
        assert _ids(again) == list(range(ROWS))
    finally:
        again.stop()


def test_a_huge_parameter_is_refused_with_bounded_memory(server: ServerProcess) -> None:
    status = Path(f"/proc/{server.process.pid}/status")
    Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")
    before = _rss_mib(status, "VmRSS")
    sql = 'SELECT count(*) FROM "b"."rows.csv" WHERE _3 = ?'
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        with pytest.raises(Exception) as refused:  # the driver's own error type
            # 8 MiB: over --max-parameter-bytes, under the driver's own 16 MiB message cap
            cursor.execute(sql, parameters=("x" * (8 << 20),))
        assert "EntityTooLarge" in str(refused.value)
        cursor.execute(sql, parameters=("padding padding 00000007",))
        assert cursor.fetchall() == [(1,)]
    # the 200 MB parameter took the server from 0.5 to 3.4 GB
    assert _rss_mib(status, "VmHWM") < before + 100


def _rss_mib(status: Path, field: str) -> float:
    line = next(line for line in status.read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) / 1024
