"""Clients that open every endpoint at once and read them in order finish on large objects.

ADBC's ``cursor.execute`` issues one DoGet per endpoint in parallel and hands rows back in
endpoint order; with a server that held a stream slot while a stream waited for its reader,
the endpoints after the one being read held every slot and the query hung (``SlowDown`` after
the queue wait). The server runs here with its defaults (a 2-core machine gives 4 compute
slots) except for 16 MiB partitions, so a CSV of over 100 MB has 7 endpoints, more than slots.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import ServerProcess, start_server

ROWS = 1_600_000
pytestmark = pytest.mark.slow


def _write_big_csv(path: Path) -> int:
    """A headerless CSV of ROWS records of ~66 bytes (about 105 MB); returns its size."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    ids = np.arange(ROWS)
    with path.open("w") as out:
        for lo in range(0, ROWS, 400_000):
            part = ids[lo : lo + 400_000]
            out.write("\n".join(
                f"{i},{i % 97},region-{i % 7},some padding text for the row number {i:09d}"
                for i in part.tolist()) + "\n")
    return path.stat().st_size


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("big-data")
    size = _write_big_csv(root / "big" / "rows.csv")
    assert size > 100_000_000
    server = start_server(root, "--partition-mb", "16")
    try:
        yield server
    finally:
        server.stop()


def test_adbc_execute_reads_every_endpoint_in_order(big_server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(big_server.location) as conn, conn.cursor() as cur:
        cur.execute('SELECT * FROM "big"."rows.csv"')
        table: pa.Table = cur.fetch_arrow_table()
    assert table.num_rows == ROWS
    ids = table.column(0).cast(pa.int64())
    assert ids.to_pylist()[:3] == [0, 1, 2]
    assert pa.compute.all(pa.compute.equal(ids, pa.array(range(ROWS)))).as_py()


def test_adbc_partitions_read_in_reverse_order(big_server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(big_server.location) as conn, conn.cursor() as cur:
        partitions, _ = cur.adbc_execute_partitions('SELECT _1 FROM "big"."rows.csv"')
        assert len(partitions) >= 7
        counts = []
        for partition in reversed(partitions):
            cur.adbc_read_partition(partition)
            counts.append(cur.fetch_arrow_table().num_rows)
    assert sum(counts) == ROWS


def test_every_endpoint_opened_at_once_then_read_in_order(big_server: ServerProcess) -> None:
    """The worst order for a server that holds slots while waiting: open the last endpoints
    first, read nothing from them, then read the first endpoint to the end, then the rest."""
    import pyarrow.flight as flight

    from tests.flight_storage.test_server_support import PARTITIONED, statement_descriptor

    client = flight.connect(big_server.location)
    info = client.get_flight_info(statement_descriptor('SELECT * FROM "big"."rows.csv"'),
                                  PARTITIONED)
    assert len(info.endpoints) >= 7
    readers = {i: client.do_get(e.ticket) for i, e in reversed(list(enumerate(info.endpoints)))}
    first_chunks = [readers[i].read_chunk().data for i in sorted(readers)[1:]]
    assert all(int(chunk.column(0)[0].as_py()) > 0 for chunk in first_chunks)
    rows = sum(readers[i].read_all().num_rows for i in sorted(readers))
    assert rows + sum(chunk.num_rows for chunk in first_chunks) == ROWS
