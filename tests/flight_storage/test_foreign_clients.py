"""Flight SQL clients we did not write read every row (flightsql-dbapi, pandas/polars on ADBC)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import run_client_script, write_orders

ROWS = 60_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("foreign")
    write_orders(root, ROWS, lambda i: f"a note long enough to pad the row {i:07d}")
    with running_server(root) as process:
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
           endpoints: str | None = "single") -> dict[str, Any]:
    """Run flightsql-dbapi in its own process (see :func:`run_client_script`)."""
    host, port = server.address
    return run_client_script(_DBAPI_SCRIPT, [host, port, endpoints, query, params])


def test_object_has_several_endpoints(server: ServerProcess) -> None:
    import pyarrow.flight as flight

    from tests.flight_storage.test_server_support import statement_descriptor

    info = flight.connect(server.location).get_flight_info(
        statement_descriptor('SELECT * FROM "shop"."orders.csv"'))
    assert len(info.endpoints) >= 2  # what makes a first-endpoint-only client lose rows


def test_flightsql_dbapi_single_endpoint_option_reads_every_row(server: ServerProcess) -> None:
    rows = _dbapi(server, 'SELECT order_id, region FROM "shop"."orders.csv"')["rows"]
    assert len(rows) == ROWS
    assert [int(r[0]) for r in rows] == list(range(ROWS))


def test_flightsql_dbapi_parameters_with_the_first_handle(server: ServerProcess) -> None:
    rows = _dbapi(server, 'SELECT order_id FROM "shop"."orders.csv" WHERE region = ? '
                  "AND cast(order_id as int) < 100", ["r3"])["rows"]
    assert sorted(int(r[0]) for r in rows) == [i for i in range(100) if i % 5 == 3]


@pytest.mark.parametrize("endpoints", [None, "single"])
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
