"""``serve --workers N``: N processes on one host as one fleet over the same folder."""

from __future__ import annotations

import time
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import psutil
import pyarrow.flight as flight

from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import running_server
from tests.flight_storage.test_operations import _operations_url, _scrape, _value
from tests.flight_storage.test_server_support import statement_descriptor

ROWS = 300_000


def _server_workers(pid: int) -> list[psutil.Process]:
    """The ``serve`` processes ``--workers`` started (not the engine's worker processes,
    which are children too: ``execution/engine_workers.py``)."""
    return [child for child in psutil.Process(pid).children()
            if "serve" in child.cmdline() and "--node" in child.cmdline()]


def test_endpoints_are_spread_over_the_worker_processes(tmp_path: Path) -> None:
    bucket = tmp_path / "b"
    bucket.mkdir()
    (bucket / "rows.csv").write_text("".join(f"{i},{i % 7},row {i}\n" for i in range(ROWS)))
    with running_server(tmp_path, "--workers", "3", "--partition-mb", "1") as server:
        workers = _server_workers(server.process.pid)
        assert len(workers) == 2
        sql = 'SELECT * FROM "b"."rows.csv"'
        options = flight.FlightCallOptions(
            headers=[(b"x-flight-select-endpoints", b"partitioned")])
        info = flight.connect(server.location).get_flight_info(statement_descriptor(sql),
                                                               options)
        orders = [[loc.uri.decode() for loc in e.locations] for e in info.endpoints]
        assert all(len(set(o)) == 3 for o in orders)
        assert len({o[0] for o in orders}) > 1  # the first choices differ: several processes
        with FlightSelectClient(ConnectionOptions(server.location)) as client:
            ids = [int(v) for b in client.read_all(sql).to_batches()
                   for v in b.column(0).to_pylist()]
        assert ids == list(range(ROWS))
        with flightsql.connect(server.location, autocommit=True) as conn, \
                conn.cursor() as cursor:
            cursor.execute('SELECT count(*) FROM "b"."rows.csv" WHERE _2 = \'3\'')
            assert cursor.fetchall() == [(len(range(3, ROWS, 7)),)]
    for worker in workers:  # the workers stop with the first process
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE


def test_the_first_process_metrics_show_every_worker(tmp_path: Path) -> None:
    """Issue #38: with ``--workers`` the one ``/metrics`` has each process's figures, labelled
    ``worker`` (``w0`` the first process), summing to what the calls did; a worker that has
    stopped is ``flight_select_worker_up 0`` and the scrape still answers."""
    bucket = tmp_path / "b"
    bucket.mkdir()
    (bucket / "rows.csv").write_text("".join(f"{i},{i % 7}\n" for i in range(ROWS)))
    with running_server(tmp_path, "--workers", "3", "--partition-mb", "1",
                        "--metrics-port", "0") as server:
        url = _operations_url(server)
        sql = 'SELECT * FROM "b"."rows.csv" WHERE _2 = \'3\''
        options = flight.FlightCallOptions(
            headers=[(b"x-flight-select-endpoints", b"partitioned")])
        client = flight.connect(server.location)
        info = client.get_flight_info(statement_descriptor(sql), options)
        rows = 0
        for endpoint in info.endpoints:  # each endpoint where its first choice says
            with flight.connect(endpoint.locations[0].uri.decode()) as served:
                rows += served.do_get(endpoint.ticket).read_all().num_rows
        assert rows == len(range(3, ROWS, 7))
        time.sleep(0.5)
        samples = _scrape(url)
        assert {_value(samples, "flight_select_worker_up", worker=w)
                for w in ("w0", "w1", "w2")} == {1.0}
        done = {w: _value(samples, "flight_select_calls_total", method="DoGet", code="ok",
                          worker=w) for w in ("w0", "w1", "w2")}
        assert sum(done.values()) == len(info.endpoints)
        assert sum(v > 0 for v in done.values()) > 1  # served by several processes
        assert sum(_value(samples, "flight_select_sent_rows_total", worker=w)
                   for w in ("w0", "w1", "w2")) == rows
        worker = _server_workers(server.process.pid)[0]
        worker.kill()  # a zombie until the first process reaps it: its port closes at once
        deadline = time.monotonic() + 10
        while 0.0 not in {_value(_scrape(url), "flight_select_worker_up", worker=w)
                          for w in ("w1", "w2")} and time.monotonic() < deadline:
            time.sleep(0.2)
        samples = _scrape(url)
        assert sorted(_value(samples, "flight_select_worker_up", worker=w)
                      for w in ("w0", "w1", "w2")) == [0.0, 1.0, 1.0]
