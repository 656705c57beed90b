"""A user points a Flight SQL client at their own CSV: a header line, zone-less timestamps, no
configuration. The standard surface reads it as its first records show it (columns named by the
header, typed), DataFusion's reader serves the typed table, a value that does not fit fails
naming its line and column (or reads as NULL with a warning, by option), and malformed input is
an error naming the line. The s3-select flavours and S3 requests keep S3 Select's reading.

Every test runs the real server in a subprocess and the real ADBC driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.protocol import FLAVOR_HEADER
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import json_descriptor, statement_descriptor

ROWS = 3000
EVENTS = '"shop"."events.csv"'


def _events(rows: int = ROWS, *, bad: dict[int, str] | None = None) -> str:
    """``id,user,amount,ts,ok`` and ``rows`` records; ``bad`` replaces a record's amount."""
    lines = ["id,user,amount,ts,ok"]
    for i in range(1, rows + 1):
        amount = (bad or {}).get(i, f"{i * 0.5}")
        lines.append(f"{i},u{i % 7},{amount},2024-08-16 {i % 24:02d}:{i % 60:02d}:07,"
                     f"{'true' if i % 2 else 'false'}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("own-data")
    shop = root / "shop"
    shop.mkdir()
    (shop / "events.csv").write_text(_events())
    # a value the first KiB does not show: sniffed as float64, then "n/a" on line 2001
    (shop / "late_bad.csv").write_text(_events(bad={2000: "n/a"}))
    (shop / "wide.csv").write_text(_events(5) + "6,u6,3.0,2024-08-16 06:06:07,true,extra\n")
    (shop / "parts").mkdir()
    (shop / "parts" / "a.csv").write_text(_events(3))
    (shop / "parts" / "b.csv").write_text(_events(2))
    (shop / "raw").mkdir()
    (shop / "raw" / "events.csv").write_text(_events(3))
    (shop / "typed").mkdir()
    (shop / "typed" / "events.csv").write_text(_events(3))
    (shop / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "raw/"},
        {"prefix": "typed/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
         "columns": [{"name": "id", "type": "int64"}, {"name": "user"},
                     {"name": "amount", "type": "float64"}, {"name": "ts", "type": "timestamp"},
                     {"name": "ok", "type": "bool"}]}]}))
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--sniff-kb", "1") as process:
        yield process


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


def _error(server: ServerProcess, sql: str) -> str:
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, sql)
    message = str(info.value)
    assert "Traceback" not in message
    return message


def _about(server: ServerProcess, sql: str) -> dict[str, Any]:
    """The FlightInfo's app_metadata (which reader, where the columns come from)."""
    client = flight.FlightClient(server.location)
    try:
        info = client.get_flight_info(statement_descriptor(sql))
    finally:
        client.close()
    about: dict[str, Any] = json.loads(info.app_metadata)
    return about


# ------------------------------------------------------------------ the user's CSV, no config


def test_a_csv_with_a_header_reads_as_its_header_and_types_say(server: ServerProcess) -> None:
    table = _query(server, f"SELECT * FROM {EVENTS} WHERE id <= 2")
    assert table.schema.names == ["id", "user", "amount", "ts", "ok"]
    assert table.schema.types == [pa.int64(), pa.string(), pa.float64(),
                                  pa.timestamp("us", tz="UTC"), pa.bool_()]
    assert table.to_pylist() == [
        {"id": 1, "user": "u1", "amount": 0.5,
         "ts": datetime(2024, 8, 16, 1, 1, 7, tzinfo=UTC), "ok": True},
        {"id": 2, "user": "u2", "amount": 1.0,
         "ts": datetime(2024, 8, 16, 2, 2, 7, tzinfo=UTC), "ok": False}]


def test_count_is_the_data_rows_and_no_timestamp_is_null(server: ServerProcess) -> None:
    counts = _query(server, f"SELECT count(*) AS n, count(ts) AS t, sum(amount) AS s "
                            f"FROM {EVENTS}").to_pylist()
    assert counts == [{"n": ROWS, "t": ROWS, "s": sum(i * 0.5 for i in range(1, ROWS + 1))}]


def test_filters_compare_numbers_and_timestamps(server: ServerProcess) -> None:
    numbers = _query(server, f"SELECT count(*) FROM {EVENTS} WHERE amount > 1400.25")
    assert numbers.column(0).to_pylist() == [ROWS - 2800]  # amount 1400.5 is id 2801
    after = _query(server, f"SELECT count(*) FROM {EVENTS} WHERE ts >= "
                           "CAST('2024-08-16T23:00:00Z' AS TIMESTAMP)")
    assert after.column(0).to_pylist() == [sum(1 for i in range(1, ROWS + 1) if i % 24 == 23)]


def test_datafusion_reads_the_sniffed_table(server: ServerProcess) -> None:
    about = _about(server, f"SELECT id, ts FROM {EVENTS} WHERE amount > 10")
    assert about["reader"] == "datafusion" and about["columns"] == "sniffed"


def test_get_tables_shows_the_sniffed_schema(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(server.location, autocommit=True) as conn:
        objects = conn.adbc_get_objects(depth="all", table_name_filter="events.csv")
        found = {(s["db_schema_name"], t["table_name"]): [
            (c["column_name"], c["xdbc_type_name"]) for c in t["table_columns"]]
            for catalog in objects.read_all().to_pylist()
            for s in catalog["catalog_db_schemas"] for t in s["db_schema_tables"]}
    assert found[("shop", "events.csv")] == [
        ("id", "BIGINT"), ("user", "VARCHAR"), ("amount", "DOUBLE"),
        ("ts", "TIMESTAMP WITH TIME ZONE"), ("ok", "BOOLEAN")]


def test_a_prefix_shares_its_first_objects_schema(server: ServerProcess) -> None:
    table = _query(server, 'SELECT id, amount FROM "shop"."parts/" ORDER BY id, amount')
    assert table.schema.types == [pa.int64(), pa.float64()]
    assert table.to_pylist() == [{"id": 1, "amount": 0.5}, {"id": 1, "amount": 0.5},
                                 {"id": 2, "amount": 1.0}, {"id": 2, "amount": 1.0},
                                 {"id": 3, "amount": 1.5}]


# ------------------------------------------------------------------ values the sample did not see


def test_a_later_value_that_does_not_fit_fails_naming_line_and_column(
        server: ServerProcess) -> None:
    message = _error(server, 'SELECT sum(amount) FROM "shop"."late_bad.csv"')
    assert "CastFailed" in message
    assert "shop/late_bad.csv: line 2001, column 3 (amount): 'n/a' is not a valid float64" \
        in message
    assert "inferred from the object's first records" in message
    # the other columns still read
    assert _query(server, 'SELECT count(id) FROM "shop"."late_bad.csv"'
                  ).column(0).to_pylist() == [ROWS]


def test_a_record_wider_than_the_header_fails_naming_its_line(server: ServerProcess) -> None:
    message = _error(server, 'SELECT count(*) FROM "shop"."wide.csv"')
    assert "CSVParsingError" in message
    assert "shop/wide.csv: line 7: a record has 6 fields; the table has 5 columns" in message


def test_bad_values_null_reads_null_and_warns(data: Path) -> None:
    with running_server(data, "--sniff-kb", "1", "--bad-values", "null") as process:
        table = _query(process, 'SELECT id, amount FROM "shop"."late_bad.csv" '
                                'WHERE amount IS NULL')
        about = _about(process, 'SELECT id FROM "shop"."late_bad.csv"')
    assert table.to_pylist() == [{"id": 2000, "amount": None}]
    warning = ("shop/late_bad.csv: 1 value of column 3 (amount) is not a valid float64 "
               "(e.g. 'n/a'); read as NULL")
    assert json.loads(table.schema.metadata[b"flight-select.warnings"]) == [warning]
    assert about["warnings"] == [warning]


# ------------------------------------------------------------------ configuration wins


def test_a_configured_typed_table_is_read_by_datafusion(server: ServerProcess) -> None:
    sql = 'SELECT id, ts FROM "shop"."typed/events.csv" WHERE amount > 1'
    about = _about(server, sql)
    assert about["reader"] == "datafusion" and about["columns"] == "configured"
    assert _query(server, sql).to_pylist() == [
        {"id": 3, "ts": datetime(2024, 8, 16, 3, 3, 7, tzinfo=UTC)}]


def test_a_configuration_entry_keeps_s3_selects_reading(server: ServerProcess) -> None:
    """``{"prefix": "raw/"}`` turns sniffing off for the prefix: the header is a record."""
    table = _query(server, 'SELECT count(*) FROM "shop"."raw/events.csv"')
    assert table.column(0).to_pylist() == [4]
    assert "columns" not in _about(server, 'SELECT _1 FROM "shop"."raw/events.csv"')


def test_no_sniff_keeps_s3_selects_reading(data: Path) -> None:
    with running_server(data, "--no-sniff") as process:
        table = _query(process, f"SELECT * FROM {EVENTS} LIMIT 1")
    assert table.schema.names == ["_1", "_2", "_3", "_4", "_5"]
    assert table.to_pylist() == [{"_1": "id", "_2": "user", "_3": "amount", "_4": "ts",
                                  "_5": "ok"}]


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_the_s3_select_flavours_read_the_header_as_data(server: ServerProcess,
                                                        flavor: str) -> None:
    assert _query(server, f"SELECT count(*) FROM {EVENTS}", flavor).column(0).to_pylist() == [
        ROWS + 1]


def test_file_header_info_in_the_statement_is_s3_selects_reading(server: ServerProcess) -> None:
    table = _query(server, f"SELECT s._1 FROM {EVENTS} WITH (FileHeaderInfo = 'NONE') s "
                           "LIMIT 1")
    assert table.to_pylist() == [{"_1": "id"}]


def test_a_string_literal_beside_a_typed_number_is_that_number(server: ServerProcess) -> None:
    """SQL casts an untyped literal to the other side's type (DataFusion, DuckDB, PostgreSQL):
    ``id = '2'`` over the sniffed BIGINT id is ``id = 2``, not an empty answer; a literal that
    spells no such number is an error naming it, never zero rows."""
    table = _query(server, f"SELECT id FROM {EVENTS} WHERE id = '2' OR amount > '1499.5' "
                           "OR id IN ('5', '6')")
    assert table.column("id").to_pylist() == [2, 5, 6, 3000]
    message = _error(server, f"SELECT id FROM {EVENTS} WHERE id = '2.5'")
    assert "CastFailed" in message and "'2.5' to BIGINT" in message
    message = _error(server, f"SELECT id FROM {EVENTS} WHERE amount < 'cheap'")
    assert "'cheap' to DOUBLE" in message


def test_an_s3_request_is_not_sniffed(server: ServerProcess) -> None:
    request = {"Bucket": "shop", "Key": "events.csv",
               "Expression": "SELECT count(*) FROM s3object", "ExpressionType": "SQL",
               "InputSerialization": {"CSV": {}}}
    client = flight.FlightClient(server.location)
    try:
        info = client.get_flight_info(json_descriptor(request))
        table = client.do_get(info.endpoints[0].ticket).read_all()
    finally:
        client.close()
    assert table.column(0).to_pylist() == [ROWS + 1]


# ------------------------------------------------------------------ malformed input


@pytest.fixture(scope="module")
def malformed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("malformed")
    shop = root / "shop"
    shop.mkdir()
    rows = [f"{i},name {i},{i % 100}" for i in range(1, 120_001)]
    middle = len(rows) // 2
    quoted = list(rows)
    quoted[middle] = f'{middle + 1},"name {middle + 1},7'  # the quote never closes
    (shop / "quote.csv").write_text("id,name,n\n" + "\n".join(quoted) + "\n")
    encoded = ("id,name,n\n" + "\n".join(rows[:10]) + "\n").encode() + b"11,caf\xe9,3\n"
    (shop / "latin1.csv").write_bytes(encoded)
    with running_server(root) as process:
        yield process


def test_an_unterminated_quote_mid_file_fails_naming_its_line(malformed: ServerProcess) -> None:
    """RFC 4180: a quoted field may hold line ends, so a quote that never closes reads on
    until its record is over the record-size limit (AWS's OverMaxRecordSize with
    AllowQuotedRecordDelimiter), naming the line it opened on (issue #39 item 5)."""
    line = 120_000 // 2 + 2  # the header is line 1
    message = _error(malformed, 'SELECT count(*) FROM "shop"."quote.csv"')
    assert "OverMaxRecordSize" in message
    assert f"shop/quote.csv: line {line}: record {line} is longer than" in message
    assert "a quoted field in it holds" in message and "unterminated quote" in message
    message = _error(malformed, 'SELECT name FROM "shop"."quote.csv" WHERE n = 7')
    assert f"shop/quote.csv: line {line}: record" in message


def test_cephs_rule_closes_an_unterminated_quote_at_the_line_end(
        malformed: ServerProcess) -> None:
    """Ceph documents it (a row delimiter closes an open quote): no error in its flavour."""
    table = _query(malformed, 'SELECT count(*) FROM "shop"."quote.csv"', "ceph")
    assert table.column(0).to_pylist() == [120_001]


def test_invalid_utf8_fails_naming_line_and_column(malformed: ServerProcess) -> None:
    for flavor in (None, "ceph"):
        import adbc_driver_manager

        with pytest.raises(adbc_driver_manager.Error) as info:
            _query(malformed, 'SELECT count(*) FROM "shop"."latin1.csv"', flavor)
        message = str(info.value)
        assert "InvalidTextEncoding" in message
        assert "shop/latin1.csv: line 12, column 2: invalid UTF-8" in message
