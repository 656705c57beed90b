"""The Flight SQL surface through the real ADBC driver and pyarrow.flight (server in a subprocess)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage import protocol
from flight_storage.protocol import pb
from tests.conftest import SAMPLES, ServerProcess, running_server, start_server
from tests.flight_storage.test_server_support import (
    MEDIUM_ROWS,
    PARTITIONED,
    error_document,
    events,
    make_data,
    statement_descriptor,
    wait_for_event,
)

NOHEADER = SAMPLES / "sales" / "orders_noheader.csv"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_data(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def server(data_root: Path) -> Iterator[ServerProcess]:
    process = start_server(data_root, "--partition-mb", "1")
    yield process
    process.stop()


_FLAVOR_OPTION = f"adbc.flight.sql.rpc.call_header.{protocol.FLAVOR_HEADER}"


def _noheader_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(NOHEADER.read_text(encoding="utf-8"))))


def test_get_info_reports_server_and_capabilities(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn:
        info = conn.adbc_get_info()
    assert info["vendor_name"] == "flight-select"
    assert info["vendor_version"] == "0.1.0"
    assert info["vendor_arrow_version"] == pa.__version__
    client = flight.connect(server.location)
    descriptor = flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandGetSqlInfo(info=[3, 4, 5, 8, 9, 504]))
    )
    flight_info = client.get_flight_info(descriptor)
    table = client.do_get(flight_info.endpoints[0].ticket).read_all()
    assert table.schema.equals(protocol.SQL_INFO_SCHEMA)
    values = dict(zip(table.column("info_name").to_pylist(), table.column("value").to_pylist(),
                      strict=True))
    assert values == {3: True, 4: True, 5: False, 8: 1, 9: True, 504: '"'}


def test_get_objects_lists_buckets_tables_and_columns(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn:
        objects = conn.adbc_get_objects(depth="all", db_schema_filter="sales",
                                        table_name_filter="orders/%").read_all().to_pylist()
        types = conn.adbc_get_table_types()
    schemas = {s["db_schema_name"]: s for c in objects for s in c["catalog_db_schemas"]}
    assert list(schemas) == ["sales"]
    tables = {t["table_name"]: t for t in schemas["sales"]["db_schema_tables"]}
    # the configured prefix is a table of its own, beside each object under it
    assert sorted(tables) == ["orders/", "orders/2024-01.csv", "orders/2024-02.csv",
                              "orders/2024-03.csv"]
    # an object is a base table; a configured prefix, the union of its objects, a view
    assert tables["orders/"]["table_type"] == "view"
    assert tables["orders/2024-01.csv"]["table_type"] == "table"
    header = (SAMPLES / "sales/orders/2024-01.csv").read_text().splitlines()[0].split(",")
    for name in ("orders/2024-01.csv", "orders/"):
        assert [c["column_name"] for c in tables[name]["table_columns"]] == header
    assert types == ["table", "view"]


@pytest.mark.parametrize(("wanted", "expected"), [
    (["table"], ["orders/2024-01.csv", "orders/2024-02.csv", "orders/2024-03.csv"]),
    (["TABLE"], ["orders/2024-01.csv", "orders/2024-02.csv", "orders/2024-03.csv"]),
    (["VIEW"], ["orders/"]),
    (["SYSTEM TABLE"], []),
])
def test_get_objects_table_type_filter_ignores_case(server: ServerProcess, wanted: list[str],
                                                    expected: list[str]) -> None:
    # JDBC tools ask for the spec's upper-case examples; ADBC's vocabulary is lower case
    with flightsql.connect(server.location) as conn:
        objects = conn.adbc_get_objects(depth="tables", db_schema_filter="sales",
                                        table_name_filter="orders/%",
                                        table_types_filter=wanted).read_all().to_pylist()
    names = [t["table_name"] for c in objects for s in c["catalog_db_schemas"]
             for t in s["db_schema_tables"] or []]
    assert sorted(names) == expected


def test_get_objects_columns_carry_sql_type_names(server: ServerProcess) -> None:
    # The driver fills xdbc_type_name from the ARROW:FLIGHT:SQL:TYPE_NAME field metadata only.
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        objects = conn.adbc_get_objects(depth="all", db_schema_filter="sales",
                                        table_name_filter="parquet/orders.parquet"
                                        ).read_all().to_pylist()
        cursor.execute('SELECT * FROM "sales"."parquet/orders.parquet" LIMIT 1')
        result_types = cursor.fetch_arrow_table().schema.types
    (table,) = [t for c in objects for s in c["catalog_db_schemas"]
                for t in s["db_schema_tables"]]
    names = [c["xdbc_type_name"] for c in table["table_columns"]]
    expected = {pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}
    for name, arrow_type in zip(names, result_types, strict=True):
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            assert name == "VARCHAR"
        elif pa.types.is_timestamp(arrow_type):
            assert name == ("TIMESTAMP" if arrow_type.tz is None else "TIMESTAMP WITH TIME ZONE")
        else:
            assert name == expected[arrow_type], (name, arrow_type)
    assert [c["xdbc_is_autoincrement"] for c in table["table_columns"]] == [False] * len(names)


def test_prefix_table_reads_every_object(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute('SELECT count(*) FROM "sales"."orders/"')
        (count,) = cursor.fetchone()
        cursor.execute('SELECT order_id FROM "sales"."orders/" WHERE region = \'north\'')
        ids = [int(r[0]) for r in cursor.fetchall()]
    expected = [int(r[0]) for month in ("01", "02", "03")
                for r in csv.reader(io.StringIO(
                    (SAMPLES / f"sales/orders/2024-{month}.csv").read_text()))
                if r[2] == "north"]
    assert int(count) == 6000
    assert sorted(ids) == expected and ids


def test_parameters_on_a_prefix_table(server: ServerProcess) -> None:
    # CreatePreparedStatement checks a parameterised statement's table: a prefix such as
    # "orders/" is a table name, not an object key (it was refused as an invalid key)
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute('SELECT count(*) FROM "sales"."orders/" WHERE region = ?',
                       parameters=("north",))
        (count,) = cursor.fetchone()
    expected = sum(1 for month in ("01", "02", "03")
                   for r in csv.reader(io.StringIO(
                       (SAMPLES / f"sales/orders/2024-{month}.csv").read_text()))
                   if r[2] == "north")
    assert int(count) == expected > 0


def test_with_options_in_the_statement(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT _1 FROM \"sales\".\"orders_noheader.csv\" "
                       "WITH (FileHeaderInfo = 'IGNORE') LIMIT 2")
        rows = cursor.fetchall()
    first_two = [r[0] for r in _noheader_rows()[1:3]]  # IGNORE skips the first line
    assert [r[0] for r in rows] == first_two


def test_get_table_schema_matches_query_schema(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        schema = conn.adbc_get_table_schema("parquet/orders.parquet", db_schema_filter="sales")
        cursor.execute('SELECT * FROM "sales"."parquet/orders.parquet" LIMIT 1')
        table = cursor.fetch_arrow_table()
    assert schema.names == table.schema.names
    assert len(schema) > 3


@pytest.mark.parametrize(("flavor", "empty"), [("ceph", None), ("aws", ""), (None, "")])
def test_execute_filters_at_the_server(server: ServerProcess, flavor: str | None,
                                       empty: str | None) -> None:
    # An empty CSV field is NULL in Ceph's rules, the empty string in AWS's (and standard's).
    options = {} if flavor is None else {_FLAVOR_OPTION: flavor}
    with flightsql.connect(server.location, db_kwargs=options) as conn, \
            conn.cursor() as cursor:
        cursor.execute('SELECT _1, _3 FROM "sales"."orders_noheader.csv" WHERE _8 = \'shipped\'')
        got = [tuple(r) for r in cursor.fetchall()]
    expected = [(r[0] or empty, r[2] or empty) for r in _noheader_rows() if r[7] == "shipped"]
    assert got == expected and got


def test_parameters_bound_through_do_put(server: ServerProcess) -> None:
    sql = 'SELECT _1 FROM "sales"."orders_noheader.csv" WHERE _8 = ? AND _3 = ?'
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute(sql, parameters=("delivered", "west"))
        got = [r[0] for r in cursor.fetchall()]
        cursor.execute(sql, parameters=("shipped", "east"))
        again = [r[0] for r in cursor.fetchall()]
    rows = _noheader_rows()
    assert got == [r[0] for r in rows if r[7] == "delivered" and r[2] == "west"] and got
    assert again == [r[0] for r in rows if r[7] == "shipped" and r[2] == "east"] and again


def test_parameter_values_stay_literals(server: ServerProcess) -> None:
    sql = 'SELECT count(*) FROM "sales"."orders_noheader.csv" WHERE _8 = ?'
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute(sql, parameters=("x' OR '1'='1",))
        assert cursor.fetchall() == [(0,)]


def test_prepared_statement_result_carries_dataset_schema(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    body = protocol.pack_any(pb.ActionCreatePreparedStatementRequest(
        query='SELECT _1 AS id FROM "sales"."orders_noheader.csv"'))
    results = list(client.do_action(flight.Action("CreatePreparedStatement", body)))
    _, result = protocol.unpack_any(results[0].body.to_pybytes())
    schema = pa.ipc.read_schema(pa.py_buffer(result.dataset_schema))
    assert schema.names == ["id"]
    close = protocol.pack_any(pb.ActionClosePreparedStatementRequest(
        prepared_statement_handle=result.prepared_statement_handle))
    assert list(client.do_action(flight.Action("ClosePreparedStatement", close))) == []


def test_partitions_one_endpoint_each_read_separately(server: ServerProcess) -> None:
    sql = 'SELECT _1 FROM "big"."medium.csv" WHERE _3 = \'7\''
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        partitions, schema = cursor.adbc_execute_partitions(sql)
        ids: list[int] = []
        for partition in partitions:
            cursor.adbc_read_partition(partition)
            ids.extend(int(v) for v in cursor.fetch_arrow_table().column(0).to_pylist())
    assert len(partitions) >= 2
    assert schema.names == ["_1"]
    assert sorted(ids) == [i for i in range(MEDIUM_ROWS) if i % 1000 == 7]


def test_flight_info_endpoints_totals_and_schema(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor('SELECT _1, _2, _3 FROM "big"."medium.csv"'),
                                  PARTITIONED)
    size = (Path(server.process.args[5]) / "big" / "medium.csv").stat().st_size
    assert len(info.endpoints) >= 2
    assert info.total_bytes == size
    assert all(e.expiration_time is not None for e in info.endpoints)
    assert all(e.ticket.ticket != info.endpoints[0].ticket.ticket for e in info.endpoints[1:])
    parquet = client.get_flight_info(
        statement_descriptor('SELECT * FROM "sales"."parquet/orders.parquet"'))
    rows = sum(client.do_get(e.ticket).read_all().num_rows for e in parquet.endpoints)
    assert parquet.total_records == rows > 0
    for endpoint in info.endpoints[:1]:
        table = client.do_get(endpoint.ticket).read_all()
        assert table.schema.equals(info.schema)  # nullability included


def test_get_schema(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    result = client.get_schema(
        statement_descriptor('SELECT _1 AS a, _2 FROM "sales"."orders_noheader.csv"'))
    assert result.schema.names == ["a", "_2"]


def test_unsupported_commands_are_unimplemented_by_name(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    descriptor = flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandStatementSubstraitPlan()))
    with pytest.raises(NotImplementedError) as info:  # UNIMPLEMENTED
        client.get_flight_info(descriptor)
    assert "CommandStatementSubstraitPlan" in str(info.value)
    assert "Traceback" not in str(info.value)
    with pytest.raises(NotImplementedError) as action:
        list(client.do_action(flight.Action("DropEverything", b"")))
    assert "DropEverything" in str(action.value)


def test_transactions_are_accepted_and_change_nothing(server: ServerProcess) -> None:
    """DB-API over ADBC turns autocommit off (BeginTransaction); commit and rollback work
    and the same statement answers the same rows before and after (nothing is written)."""
    sql = 'SELECT _1 FROM "sales"."orders_noheader.csv" LIMIT 3'
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        before = cursor.fetchall()
        conn.commit()
        conn.rollback()
        cursor.execute(sql)
        assert cursor.fetchall() == before and len(before) == 3
    client = flight.connect(server.location)
    begin = protocol.pack_any(pb.ActionBeginTransactionRequest())
    result = next(iter(client.do_action(flight.Action("BeginTransaction", begin))))
    _, started = protocol.unpack_any(result.body.to_pybytes())
    assert len(started.transaction_id) == 16
    end = pb.ActionEndTransactionRequest(transaction_id=started.transaction_id)  # no action
    with pytest.raises(pa.ArrowInvalid) as refused:
        list(client.do_action(flight.Action("EndTransaction", protocol.pack_any(end))))
    assert "END_TRANSACTION_COMMIT" in error_document(refused.value)["message"]


def test_close_session_is_accepted(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    results = list(client.do_action(flight.Action("CloseSession", b"")))
    assert pb.CloseSessionResult.FromString(results[0].body.to_pybytes()).status == (
        pb.CloseSessionResult.CLOSED)


def test_cancel_flight_info_stops_its_endpoints(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    info = client.get_flight_info(statement_descriptor('SELECT _1, _2, _3 FROM "big"."medium.csv"'),
                                  PARTITIONED)
    request = pb.CancelFlightInfoRequest(info=info.serialize())
    results = list(client.do_action(flight.Action("CancelFlightInfo",
                                                  request.SerializeToString())))
    status = pb.CancelFlightInfoResult.FromString(results[0].body.to_pybytes()).status
    assert status == pb.CANCEL_STATUS_CANCELLED
    with pytest.raises(pa.ArrowInvalid) as refused:
        client.do_get(info.endpoints[0].ticket).read_all()
    assert error_document(refused.value)["code"] == "QueryCancelled"


def test_adbc_cancel_stops_the_server_stream(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn:
        cursor = conn.cursor()
        # LIMIT makes it one endpoint (one stream) over the whole object
        cursor.execute('SELECT _1, _2, _3 FROM "big"."huge.csv" LIMIT 999999')
        reader = cursor.fetch_record_batch()
        first = reader.read_next_batch()
        assert first.num_rows > 0
        cursor.adbc_cancel()
        # The ADBC driver reports the cancelled stream through the C stream as an OSError
        # ("[FlightSQL] context canceled (Canceled; DoGet: ...)").
        with pytest.raises(OSError, match="cancel"):
            reader.read_all()
        cursor.close()
    record = wait_for_event(server, event="call", method="DO_GET", object="big/huge.csv")
    assert record["status"] in ("cancelled", "disconnected")
    assert record["rows"] < 1_000_000


def test_call_log_lines_are_json_with_query_fields(server: ServerProcess) -> None:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute('SELECT _1 FROM "sales"."orders_noheader.csv" LIMIT 7')
        assert len(cursor.fetchall()) == 7
    plan = wait_for_event(server, event="call", method="GET_FLIGHT_INFO",
                          object="sales/orders_noheader.csv")
    get = wait_for_event(server, event="call", method="DO_GET", query_id=plan["query_id"])
    assert get["rows"] == 7 and get["bytes"] > 0 and get["status"] == "ok"
    assert get["peer"].startswith("ipv4:127.0.0.1")
    assert isinstance(get["duration_ms"], float)


def test_health_action(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    results = list(client.do_action(flight.Action("health", b"")))
    status = json.loads(results[0].body.to_pybytes())
    assert status["status"] == "ok" and status["buckets"] == 3 and status["auth"] is False


def test_flavor_header_selects_the_dialect(server: ServerProcess) -> None:
    sql = 'SELECT _1 FROM "sales"."orders_noheader.csv" LIMIT 1'
    with flightsql.connect(server.location, db_kwargs={
            "adbc.flight.sql.rpc.call_header.x-flight-select-flavor": "aws"}) as conn:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            assert len(cursor.fetchall()) == 1
    assert events(server, event="call", method="GET_FLIGHT_INFO", flavor="aws")
    with flightsql.connect(server.location, db_kwargs={
            "adbc.flight.sql.rpc.call_header.x-flight-select-flavor": "oracle"}) as conn:
        with conn.cursor() as cursor, pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute(sql)
    assert "flavor" in str(info.value)


def test_tickets_survive_a_restart_with_the_same_secret(data_root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    first = start_server(data_root, "--ticket-secret-file", str(secret))
    try:
        client = flight.connect(first.location)
        info = client.get_flight_info(
            statement_descriptor('SELECT _1 FROM "sales"."orders_noheader.csv" LIMIT 5'))
        expected = client.do_get(info.endpoints[0].ticket).read_all()
    finally:
        first.stop()
    second = start_server(data_root, "--ticket-secret-file", str(secret))
    other = start_server(data_root)
    try:
        got = flight.connect(second.location).do_get(info.endpoints[0].ticket).read_all()
        assert got.equals(expected) and got.num_rows == 5
        with pytest.raises(flight.FlightUnauthorizedError) as refused:
            flight.connect(other.location).do_get(info.endpoints[0].ticket).read_all()
        assert error_document(refused.value)["code"] == "InvalidTicket"
    finally:
        second.stop()
        other.stop()


def test_altered_ticket_is_refused(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    info = client.get_flight_info(
        statement_descriptor('SELECT _1 FROM "sales"."orders_noheader.csv"'))
    _, message = protocol.unpack_any(info.endpoints[0].ticket.ticket)
    handle = bytearray(message.statement_handle)
    handle[10] ^= 1
    forged = protocol.pack_any(pb.TicketStatementQuery(statement_handle=bytes(handle)))
    with pytest.raises(flight.FlightUnauthorizedError) as refused:
        client.do_get(flight.Ticket(forged)).read_all()
    assert error_document(refused.value)["code"] == "InvalidTicket"


def test_ticket_of_an_object_rewritten_since_planning_is_refused(tmp_path: Path) -> None:
    bucket = tmp_path / "b"
    bucket.mkdir()
    obj = bucket / "t.csv"
    obj.write_text("1,a\n2,b\n")
    server = start_server(tmp_path)
    try:
        client = flight.connect(server.location)
        info = client.get_flight_info(statement_descriptor('SELECT _2 FROM "b"."t.csv"'))
        assert client.do_get(info.endpoints[0].ticket).read_all().num_rows == 2
        obj.write_text("1,a\n2,b\n3,c\n")  # a byte range planned before would now be wrong
        with pytest.raises(pa.ArrowInvalid) as refused:
            client.do_get(info.endpoints[0].ticket).read_all()
        assert error_document(refused.value)["code"] == "PreconditionFailed"
        again = client.get_flight_info(statement_descriptor('SELECT _2 FROM "b"."t.csv"'))
        assert client.do_get(again.endpoints[0].ticket).read_all().num_rows == 3
    finally:
        server.stop()


def test_bound_parameters_render_as_the_clients_literals(tmp_path: Path) -> None:
    """Bound parameters are rendered by the one renderer the clients' pushdown uses
    (flight_storage/protocol/literals.py; issue #29's four drifts): a tiny decimal compares as
    the decimal it is (it was the float literal 1E-7), and values with no exact literal are
    refused naming the parameter (NaN/infinity were printed as bare names, the int64 minimum
    overflowed, a naive timestamp was taken as UTC)."""
    import datetime as dt
    import decimal

    bucket = tmp_path / "p"
    bucket.mkdir()
    (bucket / "t.csv").write_text("a\n0.0000001\n0.0000002\n")
    with running_server(tmp_path) as server, \
            flightsql.connect(server.location, autocommit=True) as conn, \
            conn.cursor() as cursor:
        sql = 'SELECT count(*) FROM "p"."t.csv" WHERE CAST(_1 AS DECIMAL(10, 7)) = ?'
        cursor.execute(sql, parameters=(decimal.Decimal("0.0000001"),))
        assert cursor.fetchall() == [(1,)]
        refused = [float("inf"), float("nan"), -(2**63),
                   dt.datetime(2024, 8, 16, 20, 29, 54)]
        for value in refused:
            with pytest.raises(adbc_driver_manager.Error) as info:
                cursor.execute('SELECT count(*) FROM "p"."t.csv" WHERE _1 = ?',
                               parameters=(value,))
                cursor.fetchall()
            assert "parameter:" in str(info.value), (value, str(info.value))
