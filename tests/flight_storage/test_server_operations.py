"""Graceful shutdown on SIGTERM (server in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.flight as flight
import pytest

from tests.conftest import start_server
from tests.flight_storage.test_server_support import (
    error_document,
    statement_descriptor,
    wait_for_event,
    write_rows,
)

pytestmark = pytest.mark.reliability

ROWS = 1_000_000
SQL = f'SELECT _1, _2, _3 FROM "big"."huge.csv" LIMIT {ROWS}'


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_rows(root / "big" / "huge.csv", ROWS)
    return root


def _open_stream(location: str) -> tuple[flight.FlightStreamReader, int]:
    client = flight.connect(location)
    info = client.get_flight_info(statement_descriptor(SQL))
    reader = client.do_get(info.endpoints[0].ticket)
    return reader, reader.read_chunk().data.num_rows


def test_sigterm_lets_running_streams_finish(data_root: Path) -> None:
    server = start_server(data_root)
    reader, first = _open_stream(server.location)
    server.process.terminate()
    wait_for_event(server, event="shutdown")
    assert first + reader.read_all().num_rows == ROWS
    assert server.process.wait(timeout=60) == 0
    assert wait_for_event(server, event="call", method="DO_GET")["status"] == "ok"


def test_sigterm_cancels_streams_after_the_grace_period(data_root: Path) -> None:
    server = start_server(data_root, "--shutdown-grace", "0")
    reader, _first = _open_stream(server.location)
    server.process.terminate()
    wait_for_event(server, event="shutdown", cancelling=1)
    with pytest.raises(flight.FlightUnavailableError) as info:
        reader.read_all()
    assert error_document(info.value)["code"] == "ServiceUnavailable"
    assert server.process.wait(timeout=60) == 0
    assert wait_for_event(server, event="call", method="DO_GET")["status"] == "shutdown"
