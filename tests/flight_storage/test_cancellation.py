"""Cancellation reaches the engine: after CancelFlightInfo, a client that disconnects, or the
query timeout, the server's CPU falls to idle within a second and its memory is given back.

Measured from outside, as an operator would: the CPU time of the server and of the processes
it started (its engine workers, ``execution/engine_workers.py``) from ``/proc/<pid>/stat``
(user + system) over a window starting one second after the trigger, and their resident memory
from ``/proc/<pid>/status``. The query is a GROUP BY over 20M Parquet rows (12 s on this
machine) that keeps DataFusion busy on every core for many seconds (its first batch).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage import protocol
from flight_storage.execution.plan_types import EngineConfig
from flight_storage.protocol import pb
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import (
    process_tree,
    tree_cpu_rate,
    tree_status_mib,
    write_numbers_parquet,
)

ROWS = 20_000_000
QUERY = ('SELECT k, count(*) AS n FROM "big"."big.parquet" GROUP BY k ORDER BY n DESC LIMIT 3')
BUSY_S = 2.0
"""How long the engine works before the trigger (it needs far longer to finish)."""
IDLE_CORE_SHARE = 0.15
"""Most CPU seconds per second the server may spend once cancelled (idle is ~0.01)."""
WORKERS = EngineConfig().engine_workers
"""The server's engine worker processes by default (the query runs in one of them)."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "big").mkdir()
    write_numbers_parquet(root / "big" / "big.parquet", ROWS)
    return root



def _rss_mb(pid: int) -> float:
    return tree_status_mib(pid, "VmRSS")



def _assert_engine_stopped(server: ServerProcess, idle_rss_mb: float) -> None:
    pid = server.process.pid
    time.sleep(1.0)  # the second the issue allows
    rate = tree_cpu_rate(pid, 1.0)
    assert rate < IDLE_CORE_SHARE, f"server still computing: {rate:.2f} cores"
    assert _rss_mb(pid) < idle_rss_mb + 200, "the query's memory was not given back"


def _busy(server: ServerProcess) -> float:
    """Resident memory before the query, once the engine workers have started (the server
    starts them in the background: a resource tracker, a forkserver, the workers)."""
    deadline = time.monotonic() + 60
    while len(process_tree(server.process.pid)) < 3 + WORKERS and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    return _rss_mb(server.process.pid)


def _info(client: flight.FlightClient) -> flight.FlightInfo:
    command = protocol.pack_any(pb.CommandStatementQuery(query=QUERY))
    return client.get_flight_info(flight.FlightDescriptor.for_command(command))


def _read_in_background(client: flight.FlightClient, info: flight.FlightInfo) -> threading.Thread:
    def read() -> None:
        try:
            client.do_get(info.endpoints[0].ticket).read_all()
        except (flight.FlightError, pa.ArrowInvalid):
            pass  # the cancel (QueryCancelled is InvalidArgument) or timeout this test causes

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    time.sleep(BUSY_S)
    return thread


@pytest.fixture
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--query-timeout", "600") as process:
        yield process


def test_cancel_flight_info_stops_the_engine(server: ServerProcess) -> None:
    idle = _busy(server)
    client = flight.connect(server.location)
    info = _info(client)
    _read_in_background(client, info)
    assert tree_cpu_rate(server.process.pid, 0.5) > 0.5  # the engine is at work
    request = pb.CancelFlightInfoRequest(info=info.serialize())
    list(client.do_action(flight.Action("CancelFlightInfo", request.SerializeToString())))
    _assert_engine_stopped(server, idle)


def test_a_client_that_disconnects_stops_the_engine(server: ServerProcess) -> None:
    idle = _busy(server)
    script = (
        "import sys, pyarrow.flight as f\n"
        "from flight_storage import protocol\n"
        "from flight_storage.protocol import pb\n"
        "c = f.connect(sys.argv[1])\n"
        "i = c.get_flight_info(f.FlightDescriptor.for_command(protocol.pack_any("
        "pb.CommandStatementQuery(query=sys.argv[2]))))\n"
        "c.do_get(i.endpoints[0].ticket).read_all()\n")
    reader = subprocess.Popen([sys.executable, "-c", script, server.location, QUERY],
                              env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    try:
        time.sleep(BUSY_S + 1)
        assert tree_cpu_rate(server.process.pid, 0.5) > 0.5
    finally:
        reader.kill()
        reader.wait()
    _assert_engine_stopped(server, idle)


def test_the_query_timeout_stops_the_engine(data: Path) -> None:
    with running_server(data, "--query-timeout", "3") as server:
        idle = _busy(server)
        client = flight.connect(server.location)
        _read_in_background(client, _info(client))
        assert tree_cpu_rate(server.process.pid, 0.5) > 0.5
        time.sleep(1.0)  # past the 3 s timeout
        _assert_engine_stopped(server, idle)
