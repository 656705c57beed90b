"""Flight SQL clients we did not write read every row (flightsql-dbapi, pyarrow, ADBC and
pandas/polars on it), and the clients known to read every endpoint get one per partition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow.flight as flight
import pytest

from flight_storage import protocol
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    events,
    run_client_script,
    statement_descriptor,
    write_orders,
)

ROWS = 60_000
ALL_ROWS = 'SELECT order_id, region FROM "shop"."orders.csv"'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("foreign")
    write_orders(root, ROWS, lambda i: f"a note long enough to pad the row {i:07d}")
    # about 3.5 MB in byte ranges of at most 1 MiB: 4 partitions whatever the cores
    with running_server(root, "--partition-mb", "1") as process:
        yield process


_DBAPI_SCRIPT = """
import json, sys
from flightsql import FlightSQLClient, connect
host, port, header, query, params = json.loads(sys.argv[1])
metadata = {"x-flight-select-endpoints": header} if header else {}
cursor = connect(FlightSQLClient(host=host, port=port, insecure=True, metadata=metadata)).cursor()
try:
    cursor.execute(query, params)
except Exception as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"rows": [list(map(str, r)) for r in cursor.fetchall()]}))
"""


def _dbapi(server: ServerProcess, query: str, params: list[str] | None = None,
           endpoints: str | None = None) -> dict[str, Any]:
    """Run flightsql-dbapi in its own process (see :func:`run_client_script`)."""
    host, port = server.address
    return run_client_script(_DBAPI_SCRIPT, [host, port, endpoints, query, params])


def _statement_plans(server: ServerProcess) -> list[tuple[int, str]]:
    """(endpoints, why) of every statement GetFlightInfo in the server's log."""
    return [(e["endpoints"], e["endpoints_for"])
            for e in events(server, event="call", method="GET_FLIGHT_INFO")
            if "endpoints_for" in e]


def _plans_after(server: ServerProcess, before: int, count: int) -> list[tuple[int, str]]:
    """The ``count`` statement plans logged after the first ``before`` (a call's line is
    written as it completes, maybe after its client has the answer)."""
    deadline = time.monotonic() + 10
    while len(_statement_plans(server)) < before + count and time.monotonic() < deadline:
        time.sleep(0.05)
    return _statement_plans(server)[before:]


def test_clients_that_read_every_endpoint_get_several(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(ALL_ROWS), PARTITIONED)
    assert len(info.endpoints) >= 4  # what makes a first-endpoint-only client lose rows
    rows = [r for e in info.endpoints for r in client.do_get(e.ticket).read_all().to_pylist()]
    assert [int(r["order_id"]) for r in rows] == list(range(ROWS))


def test_pyarrow_first_endpoint_reads_every_row(server: ServerProcess) -> None:
    """pyarrow's FlightClient used the obvious way: the first endpoint is the whole answer."""
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor(ALL_ROWS))
    table = client.do_get(info.endpoints[0].ticket).read_all()
    assert table.num_rows == ROWS and len(info.endpoints) == 1
    assert [int(x) for x in table.column("order_id").to_pylist()] == list(range(ROWS))


def test_flightsql_dbapi_reads_every_row(server: ServerProcess) -> None:
    """flightsql-dbapi reads only the first endpoint; without any option it gets every row."""
    before = len(_statement_plans(server))
    rows = _dbapi(server, ALL_ROWS)["rows"]
    assert len(rows) == ROWS
    assert [int(r[0]) for r in rows] == list(range(ROWS))
    assert _plans_after(server, before, 1) == [(1, "not known to read every endpoint")]


def test_flightsql_dbapi_single_endpoint_option_reads_every_row(server: ServerProcess) -> None:
    rows = _dbapi(server, ALL_ROWS, endpoints="single")["rows"]
    assert [int(r[0]) for r in rows] == list(range(ROWS))


def test_a_single_endpoint_keeps_record_order(server: ServerProcess) -> None:
    """One endpoint reads its ranges on every core and still answers in record order;
    ORDER BY is honoured, and a LIMIT sees the object's first records."""
    ordered = _dbapi(server, ALL_ROWS + " ORDER BY CAST(order_id AS INT)")["rows"]
    assert [int(r[0]) for r in ordered] == list(range(ROWS))
    limited = _dbapi(server, ALL_ROWS + " LIMIT 20000")["rows"]
    assert [int(r[0]) for r in limited] == list(range(20000))


def test_adbc_gets_partitions_and_every_row(server: ServerProcess) -> None:
    """The ADBC driver reads every endpoint (in parallel): it is recognised by its user agent
    and gets one endpoint per partition."""
    import adbc_driver_flightsql.dbapi as flightsql

    before = len(_statement_plans(server))
    with flightsql.connect(server.location) as conn, conn.cursor() as cur:
        partitions, _ = cur.adbc_execute_partitions(ALL_ROWS)
        cur.execute(ALL_ROWS)
        table = cur.fetch_arrow_table()
    assert len(partitions) >= 4
    assert sorted(int(x) for x in table.column("order_id").to_pylist()) == list(range(ROWS))
    logged = _plans_after(server, before, 2)
    assert len(logged) == 2 and all(n >= 4 and why == "ADBC Flight SQL driver"
                                    for n, why in logged)


def test_adbc_single_endpoint_option(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    header = f"adbc.flight.sql.rpc.call_header.{protocol.ENDPOINTS_HEADER}"
    with flightsql.connect(server.location, db_kwargs={header: "single"}) as conn, \
            conn.cursor() as cur:
        partitions, _ = cur.adbc_execute_partitions(ALL_ROWS)
    assert len(partitions) == 1


def test_our_client_gets_partitions(server: ServerProcess) -> None:
    """compute_client (the DataFusion client and both Spark sources) asks for partitions."""
    from compute_client.flight import ConnectionOptions, FlightSelectClient

    with FlightSelectClient(ConnectionOptions(server.location)) as client:
        plan = client.execute(ALL_ROWS)
        rows = [r for e in plan.endpoints for b in client.read(e) for r in b.to_pylist()]
    assert len(plan.endpoints) >= 4
    assert [int(r["order_id"]) for r in rows] == list(range(ROWS))
    with FlightSelectClient(ConnectionOptions(
            server.location, headers={protocol.ENDPOINTS_HEADER: "single"})) as client:
        assert len(client.execute(ALL_ROWS).endpoints) == 1  # the caller's header wins


def test_flightsql_dbapi_parameters_with_the_first_handle(server: ServerProcess) -> None:
    rows = _dbapi(server, 'SELECT order_id FROM "shop"."orders.csv" WHERE region = ? '
                  "AND cast(order_id as int) < 100", ["r3"])["rows"]
    assert sorted(int(r[0]) for r in rows) == [i for i in range(100) if i % 5 == 3]


@pytest.mark.parametrize("endpoints", [None, "single", "partitioned"])
def test_flightsql_dbapi_select_1_health_check(server: ServerProcess,
                                               endpoints: str | None) -> None:
    # What connection pools and BI tools send before anything else; no option needed.
    assert _dbapi(server, "SELECT 1", endpoints=endpoints) == {"rows": [["1"]]}


def test_flightsql_dbapi_parameters_without_a_table(server: ServerProcess) -> None:
    answer = _dbapi(server, "SELECT ? || '-' || ?, upper(?)", ["a", "b", "c"], endpoints=None)
    assert answer == {"rows": [["a-b", "C"]]}


def test_flightsql_dbapi_grouped_query_in_one_endpoint(server: ServerProcess) -> None:
    # GROUP BY runs on the server as one endpoint, so a first-endpoint-only client sees it all.
    rows = _dbapi(server, 'SELECT region, count(*) AS n FROM "shop"."orders.csv" '
                  "GROUP BY region ORDER BY region", endpoints=None)["rows"]
    assert rows == [[f"r{i}", str(ROWS // 5)] for i in range(5)]


def test_an_unknown_endpoints_option_is_refused(server: ServerProcess) -> None:
    result = _dbapi(server, 'SELECT order_id FROM "shop"."orders.csv"', endpoints="some")
    assert "single or partitioned" in result["error"] and "Traceback" not in result["error"]


def test_pandas_and_polars_through_adbc_read_every_row(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql
    import pandas as pd

    with flightsql.connect(server.location) as conn:
        frame = pd.read_sql('SELECT order_id, note FROM "shop"."orders.csv"', conn)
    assert len(frame) == ROWS and frame["order_id"].astype(int).tolist() == list(range(ROWS))
    polars = pytest.importorskip("polars")
    with flightsql.connect(server.location) as conn, conn.cursor() as cur:
        cur.execute('SELECT order_id FROM "shop"."orders.csv" WHERE region = \'r1\'')
        table = polars.from_arrow(cur.fetch_arrow_table())
    assert table.height == ROWS // 5


@pytest.mark.parametrize("command, rows", [
    ("CommandGetXdbcTypeInfo", 18),
    ("CommandGetPrimaryKeys", 0),
    ("CommandGetExportedKeys", 0),
    ("CommandGetImportedKeys", 0),
    ("CommandGetCrossReference", 0),
])
def test_catalog_answers_what_bi_clients_ask(server: ServerProcess, command: str,
                                             rows: int) -> None:
    """XDBC type info lists the result types; objects have no primary or foreign keys."""
    import pyarrow.flight as flight

    from flight_storage import protocol

    message = getattr(protocol.pb, command)()
    if command != "CommandGetXdbcTypeInfo":
        for field in ("table", "pk_table", "fk_table"):
            if field in message.DESCRIPTOR.fields_by_name:
                setattr(message, field, "orders.csv")
    client = flight.connect(server.location)
    info = client.get_flight_info(flight.FlightDescriptor.for_command(protocol.pack_any(message)))
    table = client.do_get(info.endpoints[0].ticket).read_all()
    assert table.schema.equals(info.schema) and table.num_rows == rows
    if rows:
        assert "VARCHAR" in table.column("type_name").to_pylist()
        one = protocol.pb.CommandGetXdbcTypeInfo(data_type=12)
        info = client.get_flight_info(flight.FlightDescriptor.for_command(protocol.pack_any(one)))
        assert client.do_get(info.endpoints[0].ticket).read_all().column(
            "type_name").to_pylist() == ["VARCHAR"]
