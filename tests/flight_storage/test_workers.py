"""``serve --workers N``: N processes on one host as one fleet over the same folder."""

from __future__ import annotations

from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import psutil
import pyarrow.flight as flight

from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import running_server
from tests.flight_storage.test_server_support import statement_descriptor

ROWS = 300_000


def test_endpoints_are_spread_over_the_worker_processes(tmp_path: Path) -> None:
    bucket = tmp_path / "b"
    bucket.mkdir()
    (bucket / "rows.csv").write_text("".join(f"{i},{i % 7},row {i}\n" for i in range(ROWS)))
    with running_server(tmp_path, "--workers", "3", "--partition-mb", "1") as server:
        workers = psutil.Process(server.process.pid).children()
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
