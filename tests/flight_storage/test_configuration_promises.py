"""What a bucket's ``.flight-select.json`` promises, checked through the ADBC driver.

Typed CSV columns keep their declared types (decimals included), a bad field fails the query
that reads its column naming the object, line and column (or, with ``"bad_values": "null"``,
reads as NULL with a warning the client sees), ``columns`` type JSON Lines too, and on a
Parquet object they are refused with a message rather than ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ServerProcess, start_server

_TYPED = [{"name": "id", "type": "int64"}, {"name": "price", "type": "decimal(10,2)"},
          {"name": "region", "type": "string"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("configured")
    bucket = root / "shop"
    (bucket / "typed").mkdir(parents=True)
    (bucket / "typed" / "orders.csv").write_text(
        "id,price,region\n1,1.50,east\n2,2.25,west\n3,10.05,east\n")
    (bucket / "typed" / "bad.csv").write_text(
        "id,price,region\n1,1.50,east\nn/a,oops,west\n3,10.05,east\n")
    (bucket / "lenient").mkdir()
    (bucket / "lenient" / "bad.csv").write_text(
        "id,price,region\n1,1.50,east\nn/a,oops,west\n3,10.05,east\n")
    (bucket / "events").mkdir()
    (bucket / "events" / "a.ndjson").write_text('{"id": 1}\n')
    pq.write_table(pa.table({"id": [1]}), bucket / "events" / "b.parquet")
    (bucket / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "typed/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
         "columns": _TYPED},
        {"prefix": "lenient/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
         "columns": _TYPED, "bad_values": "null"},
        {"prefix": "events/", "columns": [{"name": "id", "type": "int64"}]}]}))
    (root / "typo").mkdir()
    (root / "typo" / "orders.csv").write_text("id\n1\n")
    (root / "typo" / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "", "colums": [{"name": "id", "type": "int64"}]}]}))
    process = start_server(root)
    try:
        yield process
    finally:
        process.stop()


def _query(server: ServerProcess, sql: str) -> pa.Table:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def test_typed_columns_are_typed(server: ServerProcess) -> None:
    table = _query(server, 'SELECT id, region FROM "shop"."typed/orders.csv" WHERE id > 1')
    assert table.schema.types == [pa.int64(), pa.string()]
    assert table.to_pylist() == [{"id": 2, "region": "west"}, {"id": 3, "region": "east"}]


@pytest.mark.parametrize("sql, expected", [
    ("SELECT price FROM \"shop\".\"typed/orders.csv\"",
     [Decimal("1.50"), Decimal("2.25"), Decimal("10.05")]),
    ("SELECT sum(price) FROM \"shop\".\"typed/orders.csv\"", [Decimal("13.80")]),
    ("SELECT max(price) FROM \"shop\".\"typed/orders.csv\"", [Decimal("10.05")]),
])
def test_a_configured_decimal_stays_decimal(server: ServerProcess, sql: str,
                                            expected: list[Decimal]) -> None:
    table = _query(server, sql)
    column = table.column(0)
    assert pa.types.is_decimal(column.type), column.type
    assert column.to_pylist() == expected


@pytest.mark.parametrize("sql, data_type, expected", [
    ("SELECT avg(price) FROM \"shop\".\"typed/orders.csv\"", pa.decimal128(14, 6),
     [Decimal("4.600000")]),
    ("SELECT price * id FROM \"shop\".\"typed/orders.csv\" WHERE price >= 2.249",
     pa.decimal128(31, 2), [Decimal("4.50"), Decimal("30.15")]),
    ("SELECT id FROM \"shop\".\"typed/orders.csv\" WHERE price = 10.0500000000000001",
     pa.int64(), []),
    ("SELECT price * 2.0 FROM \"shop\".\"typed/orders.csv\" WHERE id = 1", pa.float64(),
     [3.0]),
])
def test_a_configured_decimal_computes_exactly(server: ServerProcess, sql: str,
                                               data_type: pa.DataType, expected: list[Any]
                                               ) -> None:
    """Decimal with an integer stays decimal, with a float is a double; a literal compares
    exactly (as a double, 10.0500000000000001 would equal 10.05)."""
    column = _query(server, sql).column(0)
    assert column.type == data_type
    assert column.to_pylist() == expected


def test_a_bad_field_fails_the_queries_reading_its_column_naming_it(
        server: ServerProcess) -> None:
    import adbc_driver_manager

    regions = _query(server, 'SELECT region FROM "shop"."typed/bad.csv"')
    assert regions.column(0).to_pylist() == ["east", "west", "east"]
    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT count(*) FROM "shop"."typed/bad.csv" WHERE id > 0')
    message = str(info.value)
    assert "CastFailed" in message and "Traceback" not in message
    assert "shop/typed/bad.csv: line 3, column 1 (id): 'n/a' is not a valid int64" in message


def test_bad_values_null_reads_null_and_warns_the_client(server: ServerProcess) -> None:
    """``"bad_values": "null"``: the fields read as NULL and the client sees why, in the
    result schema's metadata (what ADBC hands over) and the FlightInfo's app_metadata."""
    import adbc_driver_flightsql.dbapi as flightsql
    import pyarrow.flight as flight

    sql = 'SELECT id, price, region FROM "shop"."lenient/bad.csv" WHERE id IS NULL'
    typed = _query(server, sql)
    assert typed.to_pylist() == [{"id": None, "price": None, "region": "west"}]
    warnings = json.loads(typed.schema.metadata[b"flight-select.warnings"])
    assert warnings == [
        "shop/lenient/bad.csv: 1 value of column 1 (id) is not a valid int64 (e.g. 'n/a'); "
        "read as NULL",
        "shop/lenient/bad.csv: 1 value of column 2 (price) is not a valid decimal(10,2) "
        "(e.g. 'oops'); read as NULL"]
    client = flight.FlightClient(server.location)
    from flight_storage import protocol

    info = client.get_flight_info(flight.FlightDescriptor.for_command(
        protocol.pack_any(protocol.pb.CommandStatementQuery(query=sql))))
    assert json.loads(info.app_metadata)["warnings"] == warnings
    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute('SELECT count(*) FROM "shop"."typed/orders.csv"')
        assert cursor.fetch_arrow_table().schema.metadata is None  # no warning, no metadata


def test_columns_on_a_parquet_object_are_refused(server: ServerProcess) -> None:
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT * FROM "shop"."events/b.parquet"')
    message = str(info.value)
    assert "InvalidRequest" in message and "shop/events/b.parquet is PARQUET" in message
    assert "applies to CSV and JSON Lines only" in message and "Traceback" not in message


def test_columns_on_json_lines_type_them(server: ServerProcess) -> None:
    table = _query(server, 'SELECT * FROM "shop"."events/a.ndjson"')
    assert table.schema.types == [pa.int64()]
    assert table.to_pylist() == [{"id": 1}]


def test_a_misspelt_configuration_key_is_refused_naming_it(server: ServerProcess) -> None:
    """``colums`` would otherwise leave the table untyped without a word."""
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT id FROM "typo"."orders.csv"')
    message = str(info.value)
    assert "typo/.flight-select.json" in message and "unknown key 'colums'" in message
    assert "Traceback" not in message


def test_serve_options_default_to_the_config_classes() -> None:
    """One owner per default (issue #29): every serve option's default is its config field's
    (ServerConfig, EngineConfig, StreamLimits), so the CLI, the server built in code and the
    stream pool agree (max concurrent queries was 2x cores in the CLI, 16 in the config, 4 in
    the streams)."""
    from flight_storage.cli import _build_parser
    from flight_storage.execution.plan_types import EngineConfig
    from flight_storage.rpc.config import ServerConfig
    from flight_storage.rpc.streams import StreamLimits

    args = _build_parser().parse_args(["serve", "--data", "."])
    config, engine, streams = ServerConfig((".",)), EngineConfig(), StreamLimits()
    assert args.max_concurrent_queries == config.max_concurrent_queries == streams.max_running
    assert (args.queue_wait, args.max_open_streams, args.idle_timeout, args.query_timeout,
            args.keepalive) == (config.queue_wait_s, config.max_open_streams,
                                config.idle_timeout_s, config.query_timeout_s,
                                config.keepalive_s) == (
        streams.queue_wait_s, streams.max_open, streams.idle_timeout_s,
        streams.query_timeout_s, streams.keepalive_s)
    assert (args.ticket_max_age, args.token_ttl, args.max_parameter_bytes,
            args.max_ingest_mb << 20, args.shutdown_grace) == (
        config.ticket_max_age_s, config.token_ttl_s, config.max_parameter_bytes,
        config.max_ingest_bytes, config.shutdown_grace_s)
    assert (args.partition_mb << 20, args.memory_limit_mb << 20, args.max_query_chars,
            args.max_record_kb << 10, args.max_columns) == (
        engine.partition_bytes, engine.memory_limit_bytes, engine.max_query_chars,
        engine.max_record_bytes, engine.max_columns)
