"""Wide CSVs (issue #37 item 3): planning costs the width linearly, and ``--max-columns`` is
checked before anything costs the width.

Feature tables and exports of thousands of columns are ordinary data. Each statement here is
the first over its object (nothing cached), through the real server in a subprocess: the
standard surface sniffs the header and types, DataFusion's reader serves the typed table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.csv_sniff import sniff_csv
from flight_storage.protocol import FLAVOR_HEADER
from select_dialect.flavors import FLAVORS
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import statement_descriptor

RUNS = 5
WIDTHS = (1000, 4000)
STANDARD = CsvInputOptions.from_request({}, FLAVORS["standard"].reading)


def _wide(width: int, *, header: bool = True, rows: int = 1) -> str:
    lines = [",".join(f"c{i}" for i in range(width))] if header else []
    lines += [",".join(str(i + r) for i in range(width)) for r in range(rows)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("wide")
    bucket = root / "wide"
    bucket.mkdir()
    for width in WIDTHS:
        for run in range(RUNS + 1):  # a fresh object per run: the first plan of each
            (bucket / f"w{width}_{run}.csv").write_text(_wide(width))
    (bucket / "answers.csv").write_text(_wide(3000, rows=3))
    (bucket / "one_line.csv").write_text(_wide(8000, header=False))
    (bucket / "headed.csv").write_text(_wide(5000))
    with running_server(root) as process:
        yield process


def _server_cpu_s(server: ServerProcess) -> float:
    """CPU-seconds of the server process, every thread: the kernel's per-process CPU clock
    (``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)``), in nanoseconds where psutil's ticks
    move in 10 ms steps."""
    return time.clock_gettime(((~server.process.pid) << 3) | 2)


def _plan_cpu_s(server: ServerProcess, key: str) -> float:
    """The server's CPU-seconds for the first plan of ``key`` (GetFlightInfo): CPU, not wall
    time, so that other processes on a loaded machine do not count."""
    client = flight.FlightClient(server.location)
    try:
        before = _server_cpu_s(server)
        client.get_flight_info(statement_descriptor(f'SELECT count(*) FROM "wide"."{key}"'))
        return _server_cpu_s(server) - before
    finally:
        client.close()


def _query(server: ServerProcess, sql: str, flavor: str | None = None) -> pa.Table:
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi as flightsql

    kwargs: dict[str, Any] = {}
    if flavor is not None:
        header = adbc_driver_flightsql.DatabaseOptions.RPC_CALL_HEADER_PREFIX.value
        kwargs["db_kwargs"] = {header + FLAVOR_HEADER: flavor}
    with flightsql.connect(server.location, autocommit=True, **kwargs) as conn, \
            conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


@pytest.mark.skipif(sys.platform != "linux", reason="reads Linux's per-process CPU clock")
def test_planning_cost_grows_linearly_with_the_width(server: ServerProcess) -> None:
    """The server's CPU for the first plan of 4,000 columns against 1,000, best of five each,
    the widths interleaved: 4 is linear, 16 quadratic (it took about 10x: 1.16 s and 11.5 s)."""
    _plan_cpu_s(server, f"w{WIDTHS[0]}_{RUNS}.csv")  # the server's first statement warms it up
    best = {width: float("inf") for width in WIDTHS}
    for run in range(RUNS):
        for width in WIDTHS:
            best[width] = min(best[width], _plan_cpu_s(server, f"w{width}_{run}.csv"))
    ratio = best[4000] / best[1000]
    assert ratio <= 6, f"4,000 columns cost {ratio:.1f}x the CPU of 1,000 ({best})"


def test_a_wide_sniffed_table_answers_by_name(server: ServerProcess) -> None:
    table = _query(server, 'SELECT count(*) AS n, sum(c2999) AS s, max(c0) AS m '
                           'FROM "wide"."answers.csv"')
    assert table.to_pylist() == [{"n": 3, "s": 2999 * 3 + 3, "m": 2}]


def test_select_star_of_a_wide_sniffed_table_keeps_every_column(server: ServerProcess) -> None:
    table = _query(server, 'SELECT * FROM "wide"."answers.csv"')
    assert (table.num_columns, table.column_names[-1], table.num_rows) == (3000, "c2999", 3)
    assert table.column("c1234").to_pylist() == [1234, 1235, 1236]


def test_a_record_wider_than_max_columns_is_refused(server: ServerProcess) -> None:
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT * FROM "wide"."one_line.csv"')
    assert "TooManyColumns" in str(info.value)
    assert "8000 columns" in str(info.value)


def test_a_header_wider_than_max_columns_is_read_as_s3_select_reads_it(
        server: ServerProcess) -> None:
    """Not sniffed (its width is over ``--max-columns``): positional strings, the header a
    record, the fields a statement names read."""
    table = _query(server, 'SELECT count(*) AS n, max(_5000) AS m FROM "wide"."headed.csv"')
    assert table.to_pylist() == [{"n": 2, "m": "c4999"}]


def test_a_wide_header_is_told_from_data_past_the_first_typed_columns() -> None:
    """The header rule over every typed column: only the 40th breaks its type here."""
    header = ",".join([str(i) for i in range(39)] + ["total"])
    data = ",".join(str(i) for i in range(40))
    sniffed = sniff_csv(f"{header}\n{data}\n{data}\n".encode(), STANDARD)
    assert sniffed.has_header
    assert sniffed.names[-1] == "total"
    assert set(sniffed.types) == {"int64"}


def test_no_header_keeps_the_first_record_among_the_types() -> None:
    """Without a header the first record is data: a column empty after it is typed by it."""
    sniffed = sniff_csv(b"1,2.5,x\n2,,y\n3,,z\n", STANDARD)
    assert not sniffed.has_header
    assert sniffed.types == ("int64", "float64", "string")
    assert sniffed.sample_records == 3


def test_wide_types_datafusion_cannot_read_stay_strings() -> None:
    """pyarrow types ``2024-08-16 20:29`` (minutes only) as a timestamp, DataFusion's reader
    does not: that column stays text, its neighbours keep their types, in a wide table."""
    width = 2000
    header = ",".join(f"c{i}" for i in range(width))
    values = [str(i) for i in range(width)]
    values[1500] = "2024-08-16 20:29"
    values[1501] = "2024-08-16 20:29:54"
    sniffed = sniff_csv(f"{header}\n{','.join(values)}\n".encode(), STANDARD)
    assert sniffed.types[1500] == "string"
    assert sniffed.types[1501] == "timestamp"
    assert sniffed.types.count("int64") == width - 2


def test_the_first_record_names_carry_quotes_and_empties() -> None:
    sniffed = sniff_csv(b'"a,b",,"c""d"\n1,2,3\n', STANDARD)
    assert sniffed.names == ("a,b", "_2", 'c"d')
