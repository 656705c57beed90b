"""A streaming partition (``SELECT *`` of a CSV: batches at the pace the reader reads) ends
cleanly however it ends: its compute slot comes back when the client goes away mid-stream, a
cancel or the query timeout ends it with its own error (never a traceback, never a short
answer), and the engine stops within a second. ``test_cancellation.py`` shows the same for an
aggregate's first batch; these are the streams an Arrow C stream served from C++ would carry
(issue 37 item 2), kept on the producer thread for now (``benchmarks/results/FINDINGS.md``).
CPU is read from ``/proc`` as in ``test_cancellation.py``.
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
from flight_storage.protocol import pb
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import (
    error_document,
    events,
    tree_cpu_rate,
    wait_for_event,
    write_rows,
)

BIG_ROWS = 6_000_000
"""About 120 MB of CSV: seconds of streaming, far more than gRPC's windows hold."""
SMALL_ROWS = 50_000
BIG = 'SELECT * FROM "b"."big.csv"'
SMALL = 'SELECT * FROM "b"."small.csv"'
PAUSE_S = 0.01
"""A client's pause after each batch: the stream lasts seconds (unpaused it takes ~1 s)."""
IDLE_CORE_SHARE = 0.15
"""Most CPU seconds per second the server may spend once the stream ended (idle ~0.01)."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("endings")
    write_rows(root / "b" / "big.csv", BIG_ROWS)
    write_rows(root / "b" / "small.csv", SMALL_ROWS)
    return root


@pytest.fixture
def one_slot(data: Path) -> Iterator[ServerProcess]:
    """One compute slot: a stream that kept its slot would make the next query wait, then
    fail with SlowDown after the queue wait."""
    with running_server(data, "--max-concurrent-queries", "1", "--queue-wait", "3",
                        "--engine-workers", "0") as process:
        yield process




def _assert_engine_stopped(server: ServerProcess) -> None:
    time.sleep(1.0)  # the second allowed
    rate = tree_cpu_rate(server.process.pid, 1.0)
    assert rate < IDLE_CORE_SHARE, f"server still computing: {rate:.2f} cores"


def _info(client: flight.FlightClient, sql: str) -> flight.FlightInfo:
    command = protocol.pack_any(pb.CommandStatementQuery(query=sql))
    return client.get_flight_info(flight.FlightDescriptor.for_command(command))


def _planned(client: flight.FlightClient, sql: str, wait_s: float = 60.0) -> flight.FlightInfo:
    """``sql``'s FlightInfo once planning fits the query timeout: the first planning surveys
    the object, and finishes (caching the survey) after its call timed out."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _info(client, sql)
        except flight.FlightTimedOutError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _rows(server: ServerProcess, sql: str) -> int:
    client = flight.connect(server.location)
    info = _info(client, sql)
    return sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)


def _slow_reader(client: flight.FlightClient, info: flight.FlightInfo,
                 outcome: list[BaseException | None], pause_s: float = 0.0) -> threading.Thread:
    """Read the first endpoint in the background, pausing ``pause_s`` after each batch; the
    error that ended it (None: it ended complete) goes to ``outcome``."""
    def read() -> None:
        try:
            reader = client.do_get(info.endpoints[0].ticket)
            while True:
                try:
                    reader.read_chunk()
                except StopIteration:
                    break
                time.sleep(pause_s)
            outcome.append(None)
        except (flight.FlightError, pa.ArrowInvalid) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_a_stream_gives_its_slot_back_when_the_client_disconnects(
        one_slot: ServerProcess) -> None:
    script = (
        "import sys, time, pyarrow.flight as f\n"
        "from flight_storage import protocol\n"
        "from flight_storage.protocol import pb\n"
        "c = f.connect(sys.argv[1])\n"
        "i = c.get_flight_info(f.FlightDescriptor.for_command(protocol.pack_any("
        "pb.CommandStatementQuery(query=sys.argv[2]))))\n"
        "r = c.do_get(i.endpoints[0].ticket)\n"
        "while True:\n"
        "    r.read_chunk()\n"
        "    time.sleep(float(sys.argv[3]))\n")
    reader = subprocess.Popen([sys.executable, "-c", script, one_slot.location, BIG, str(PAUSE_S)],
                              env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    try:
        wait_for_event(one_slot, method="GET_FLIGHT_INFO")
        time.sleep(2.0)
        assert tree_cpu_rate(one_slot.process.pid, 0.5) > 0.05  # the stream is at work
    finally:
        reader.kill()
        reader.wait()
    _assert_engine_stopped(one_slot)
    line = wait_for_event(one_slot, method="DO_GET", object="b/big.csv")
    assert line["status"] in ("disconnected", "cancelled")
    assert 0 < line["rows"] < BIG_ROWS
    # the one slot is free again: the next query is served at once, complete
    started = time.monotonic()
    assert _rows(one_slot, SMALL) == SMALL_ROWS
    assert time.monotonic() - started < 3.0  # not after the queue wait
    done = wait_for_event(one_slot, method="DO_GET", object="b/small.csv")
    assert done["status"] == "ok" and done["rows"] == SMALL_ROWS


def test_cancel_flight_info_ends_a_stream_with_its_error(one_slot: ServerProcess) -> None:
    client = flight.connect(one_slot.location)
    info = _info(client, BIG)
    outcome: list[BaseException | None] = []
    thread = _slow_reader(client, info, outcome, PAUSE_S)
    time.sleep(1.5)
    request = pb.CancelFlightInfoRequest(info=info.serialize())
    list(client.do_action(flight.Action("CancelFlightInfo", request.SerializeToString())))
    thread.join(30)
    assert outcome and outcome[0] is not None, "the cancelled stream ended as if complete"
    assert "Traceback" not in str(outcome[0])
    assert error_document(outcome[0])["code"] == "QueryCancelled"
    _assert_engine_stopped(one_slot)
    assert _rows(one_slot, SMALL) == SMALL_ROWS


def test_the_query_timeout_ends_a_stream_with_its_error(data: Path) -> None:
    with running_server(data, "--query-timeout", "3") as server:
        client = flight.connect(server.location)
        info = _planned(client, BIG)
        outcome: list[BaseException | None] = []
        thread = _slow_reader(client, info, outcome, PAUSE_S)
        thread.join(60)
        assert outcome and outcome[0] is not None, "the timed-out stream ended as if complete"
        assert "Traceback" not in str(outcome[0])
        assert error_document(outcome[0])["code"] == "QueryTimeout"
        _assert_engine_stopped(server)
        line = events(server, method="DO_GET", object="b/big.csv")[-1]
        assert line["status"] == "timeout"
