"""The thin end-to-end path: a real server in a subprocess, the real ADBC driver."""

from __future__ import annotations

import csv
import io

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pytest

from tests.conftest import SAMPLES, ServerProcess

NOHEADER = SAMPLES / "sales" / "orders_noheader.csv"


def _expected_rows(predicate) -> list[tuple[str | None, str | None]]:
    """Order id and region of the rows whose fields satisfy ``predicate`` (Python's csv);
    an empty field is NULL (Ceph's S3 Select)."""
    rows = csv.reader(io.StringIO(NOHEADER.read_text(encoding="utf-8")))
    return [(r[0] or None, r[2] or None) for r in rows if predicate(r)]


@pytest.mark.parametrize("flavor", ["ceph", None])
def test_adbc_select_with_filter(sample_server: ServerProcess, flavor: str | None) -> None:
    # An empty field is NULL in Ceph's rules and '' in the default (standard: AWS's rules).
    options = {} if flavor is None else {
        "adbc.flight.sql.rpc.call_header.x-flight-select-flavor": flavor}
    with flightsql.connect(sample_server.location, db_kwargs=options) as conn, \
            conn.cursor() as cursor:
        cursor.execute(
            "SELECT _1, _3 FROM \"sales\".\"orders_noheader.csv\" WHERE _8 = 'delivered'"
        )
        got = [tuple(row) for row in cursor.fetchall()]
    expected = _expected_rows(lambda r: r[7] == "delivered")
    if flavor is None:
        expected = [(i or "", region or "") for i, region in expected]
    assert got == expected
    assert 0 < len(got) < 300


def test_adbc_result_schema_is_advertised_schema(sample_server: ServerProcess) -> None:
    with flightsql.connect(sample_server.location) as conn, conn.cursor() as cursor:
        schema = cursor.adbc_execute_schema('SELECT _1 AS id, _3 FROM "sales"."orders_noheader.csv"')
        cursor.execute('SELECT _1 AS id, _3 FROM "sales"."orders_noheader.csv"')
        table = cursor.fetch_arrow_table()
    assert table.schema.names == ["id", "_3"]
    assert table.schema.equals(schema)
    assert table.num_rows == 300


def test_adbc_syntax_error_names_line_and_column(sample_server: ServerProcess) -> None:
    with flightsql.connect(sample_server.location) as conn, conn.cursor() as cursor:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute('SELECT _1,\n  _2 FORM "sales"."orders_noheader.csv"')
    message = str(info.value)
    assert '"line": 2' in message
    assert '"column":' in message
    assert "Traceback" not in message and ".py" not in message


def test_adbc_missing_object_is_not_found(sample_server: ServerProcess) -> None:
    with flightsql.connect(sample_server.location) as conn, conn.cursor() as cursor:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute('SELECT _1 FROM "sales"."no/such.csv"')
    assert "NoSuchKey" in str(info.value)
    assert "Traceback" not in str(info.value)
