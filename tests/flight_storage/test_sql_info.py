"""GetSqlInfo tells the truth: each claim is checked against what the server does, through the
real ADBC driver; and every metadata command's FlightInfo schema is its stream's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from flight_storage import protocol
from flight_storage.protocol import SqlInfo, pb
from flight_storage.rpc.metadata import METADATA_COMMANDS
from tests.conftest import SAMPLES, ServerProcess, running_server

MAX_CHARS = 4000
TABLE = '"sales"."orders/2024-01.csv"'
# One example per function GetSqlInfo lists: a name listed without an example fails the test
# below, and so does an example the server refuses.
FUNCTION_EXAMPLES = {
    "INT": "INT('3')", "FLOAT": "FLOAT('2.5')",
    "CHAR_LENGTH": "CHAR_LENGTH('abc')", "CHARACTER_LENGTH": "CHARACTER_LENGTH('abc')",
    "LOWER": "LOWER('A')", "UPPER": "UPPER('a')", "SUBSTRING": "SUBSTRING('abc', 2, 1)",
    "TRIM": "TRIM('  a ')", "COALESCE": "COALESCE(NULL, 'x')", "NULLIF": "NULLIF('a', 'b')",
    "DATE_ADD": "DATE_ADD(day, 1, TO_TIMESTAMP('2024-01-01T00:00:00Z'))",
    "DATE_DIFF": "DATE_DIFF(day, TO_TIMESTAMP('2024-01-01T00:00:00Z'), "
                 "TO_TIMESTAMP('2024-01-03T00:00:00Z'))",
    "EXTRACT": "EXTRACT(YEAR FROM TO_TIMESTAMP('2024-01-01T00:00:00Z'))",
    "TO_STRING": "TO_STRING(TO_TIMESTAMP('2024-01-01T00:00:00Z'), 'yyyy')",
    "TO_TIMESTAMP": "TO_TIMESTAMP('2024-01-01T00:00:00Z')", "UTCNOW": "UTCNOW()",
}
FUNCTION_LISTS = (SqlInfo.SQL_NUMERIC_FUNCTIONS, SqlInfo.SQL_STRING_FUNCTIONS,
                  SqlInfo.SQL_SYSTEM_FUNCTIONS, SqlInfo.SQL_DATETIME_FUNCTIONS)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    shutil.copytree(SAMPLES / "sales" / "orders", root / "sales" / "orders")
    (root / "t").mkdir()
    pq.write_table(pa.table({"x": [2, None, 1]}), root / "t" / "nulls.parquet")
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--max-query-chars", str(MAX_CHARS)) as process:
        yield process


def _info(server: ServerProcess, flavor: str | None = None) -> dict[int, Any]:
    client = flight.connect(server.location)
    options = flight.FlightCallOptions(
        headers=[(protocol.FLAVOR_HEADER.encode(), flavor.encode())] if flavor else [])
    info = client.get_flight_info(flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandGetSqlInfo())), options)
    table = client.do_get(info.endpoints[0].ticket, options).read_all()
    return dict(zip(table.column("info_name").to_pylist(), table.column("value").to_pylist(),
                    strict=True))


def _rows(server: ServerProcess, sql: str, flavor: str | None = None) -> list[tuple[Any, ...]]:
    options = ({f"adbc.flight.sql.rpc.call_header.{protocol.FLAVOR_HEADER}": flavor}
               if flavor else {})
    with flightsql.connect(server.location, db_kwargs=options) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def test_read_only_and_bulk_ingest_follow_writable(server: ServerProcess, data: Path) -> None:
    info = _info(server)
    assert info[SqlInfo.FLIGHT_SQL_SERVER_READ_ONLY] is True
    assert info[SqlInfo.FLIGHT_SQL_SERVER_BULK_INGESTION] is False
    with running_server(data, "--writable") as writable:
        info = _info(writable)
    assert info[SqlInfo.FLIGHT_SQL_SERVER_READ_ONLY] is False
    assert info[SqlInfo.FLIGHT_SQL_SERVER_BULK_INGESTION] is True
    assert info[SqlInfo.FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED] is False


def test_every_listed_function_runs(server: ServerProcess) -> None:
    info = _info(server)
    listed = {name for ids in FUNCTION_LISTS for name in info[ids]}
    assert listed == set(FUNCTION_EXAMPLES)
    for name in sorted(listed):
        for flavor in ("standard", "ceph", "aws"):
            with flightsql.connect(server.location, db_kwargs={
                    f"adbc.flight.sql.rpc.call_header.{protocol.FLAVOR_HEADER}": flavor}) as conn, \
                    conn.cursor() as cursor:
                cursor.execute(f"SELECT {FUNCTION_EXAMPLES[name]} FROM {TABLE} LIMIT 1")
                assert len(cursor.fetchall()) == 1, (name, flavor)


def test_null_ordering_and_null_arithmetic(server: ServerProcess) -> None:
    info = _info(server)
    assert info[SqlInfo.SQL_NULL_ORDERING] == 0  # sorted high: last ascending, first descending
    assert _rows(server, 'SELECT x FROM "t"."nulls.parquet" ORDER BY x') == [(1,), (2,), (None,)]
    assert _rows(server, 'SELECT x FROM "t"."nulls.parquet" ORDER BY x DESC')[0] == (None,)
    assert info[SqlInfo.SQL_NULL_PLUS_NULL_IS_NULL] is True
    assert _rows(server, 'SELECT x + x AS y FROM "t"."nulls.parquet" WHERE x IS NULL') == [
        (None,)]


_BEYOND_ONE_TABLE = (f'SELECT * FROM {TABLE} a JOIN "t"."nulls.parquet" b ON a._1 = b.x',
                     f"SELECT * FROM {TABLE} UNION SELECT * FROM {TABLE}",
                     f"SELECT * FROM (SELECT * FROM {TABLE})")


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_s3_select_grammar_limits_are_what_the_server_refuses(server: ServerProcess,
                                                              flavor: str) -> None:
    info = _info(server, flavor)
    assert info[SqlInfo.SQL_SUPPORTED_GRAMMAR] == 1
    assert info[SqlInfo.SQL_OUTER_JOINS_SUPPORT_LEVEL] == 0
    assert info[SqlInfo.SQL_MAX_TABLES_IN_SELECT] == 1
    assert info[SqlInfo.SQL_SUPPORTED_UNIONS] == 0 and info[SqlInfo.SQL_SUPPORTED_SUBQUERIES] == 0
    assert info[SqlInfo.SQL_CORRELATED_SUBQUERIES_SUPPORTED] is False
    for sql in _BEYOND_ONE_TABLE:
        with pytest.raises(adbc_driver_manager.Error):
            _rows(server, sql, flavor)


def test_standard_grammar_is_datafusions(server: ServerProcess) -> None:
    info = _info(server)  # the standard surface, every SQL client's default
    assert info[SqlInfo.SQL_SUPPORTED_GRAMMAR] == 3
    assert info[SqlInfo.SQL_OUTER_JOINS_SUPPORT_LEVEL] == 2
    assert info[SqlInfo.SQL_MAX_TABLES_IN_SELECT] == 0
    assert info[SqlInfo.SQL_SUPPORTED_UNIONS] == 3 and info[SqlInfo.SQL_SUPPORTED_SUBQUERIES] == 7
    assert info[SqlInfo.SQL_CORRELATED_SUBQUERIES_SUPPORTED] is True
    whole = len(_rows(server, f"SELECT * FROM {TABLE}"))
    assert whole > 0
    nulls = '"t"."nulls.parquet"'
    assert len(_rows(server, f"SELECT * FROM {TABLE} UNION ALL SELECT * FROM {TABLE}")) == (
        2 * whole)
    assert len(_rows(server, f"SELECT * FROM (SELECT * FROM {TABLE}) s")) == whole
    # x = 1 and 2 meet orders 1 and 2; the NULL meets none and is a row of its own
    assert _rows(server, f"SELECT count(*) FROM {TABLE} a FULL OUTER JOIN {nulls} b "
                         "ON a.order_id = b.x") == [(whole + 1,)]
    correlated = (f"SELECT x FROM {nulls} n WHERE EXISTS (SELECT 1 FROM {nulls} m "
                  "WHERE m.x = n.x) AND x IN (SELECT x FROM {nulls} WHERE x > 1) "
                  "AND x = (SELECT max(x) FROM {nulls})")
    assert _rows(server, correlated.replace("{nulls}", nulls)) == [(2,)]
    assert info[SqlInfo.SQL_MAX_STATEMENT_LENGTH] == MAX_CHARS
    long = f"SELECT * FROM {TABLE} WHERE _1 = '{'x' * MAX_CHARS}'"
    with pytest.raises(adbc_driver_manager.Error, match="ExpressionTooLong"):
        _rows(server, long)
    # the minimum grammar does run: aliases, correlation names, LIKE ... ESCAPE, quoting
    assert info[SqlInfo.SQL_IDENTIFIER_QUOTE_CHAR] == '"'
    rows = _rows(server, f"SELECT o._1 AS \"first\" FROM {TABLE} o "
                 "WHERE o._1 LIKE '%!_%' ESCAPE '!' OR o._1 IS NOT NULL LIMIT 1")
    assert len(rows) == 1


def test_transactions_are_read_committed_and_work(server: ServerProcess) -> None:
    info = _info(server)
    assert info[SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION] == 1
    assert info[SqlInfo.SQL_DEFAULT_TRANSACTION_ISOLATION] == 2
    assert info[SqlInfo.SQL_SAVEPOINTS_SUPPORTED] is False
    with flightsql.connect(server.location, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() is not None
        conn.commit()
        conn.rollback()


_COMMANDS: dict[str, list[Any]] = {
    "CommandGetSqlInfo": [pb.CommandGetSqlInfo(), pb.CommandGetSqlInfo(info=[0, 8, 509])],
    "CommandGetCatalogs": [pb.CommandGetCatalogs()],
    "CommandGetDbSchemas": [pb.CommandGetDbSchemas()],
    "CommandGetTables": [pb.CommandGetTables(), pb.CommandGetTables(include_schema=True)],
    "CommandGetTableTypes": [pb.CommandGetTableTypes()],
    "CommandGetXdbcTypeInfo": [pb.CommandGetXdbcTypeInfo()],
    "CommandGetPrimaryKeys": [pb.CommandGetPrimaryKeys(table="nulls.parquet")],
    "CommandGetExportedKeys": [pb.CommandGetExportedKeys(table="nulls.parquet")],
    "CommandGetImportedKeys": [pb.CommandGetImportedKeys(table="nulls.parquet")],
    "CommandGetCrossReference": [pb.CommandGetCrossReference(pk_table="a", fk_table="b")],
}


def test_every_metadata_commands_flight_info_schema_is_its_streams(
        server: ServerProcess) -> None:
    assert set(_COMMANDS) == set(METADATA_COMMANDS)
    client = flight.connect(server.location)
    for name, messages in _COMMANDS.items():
        for message in messages:
            descriptor = flight.FlightDescriptor.for_command(protocol.pack_any(message))
            info = client.get_flight_info(descriptor)
            streamed = client.do_get(info.endpoints[0].ticket).read_all()
            assert streamed.num_rows > 0 or name.startswith(("CommandGetPrimary",
                                                             "CommandGetExported",
                                                             "CommandGetImported",
                                                             "CommandGetCross",
                                                             "CommandGetCatalogs")), name
            assert info.schema.equals(streamed.schema, check_metadata=True), name
            assert client.get_schema(descriptor).schema.equals(streamed.schema), name
