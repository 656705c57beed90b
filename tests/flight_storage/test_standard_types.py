"""Standard SQL types over an untyped CSV, through a real server and the ADBC driver (issue 31,
point 2).

A user points ADBC at a CSV of their own, with no bucket configuration: its fields are text.
In the standard flavour (every Flight SQL statement's default) text stays text, as in
DataFusion, DuckDB and PostgreSQL: ``max``/``min`` of a text column are its text extremes,
``sum``/``avg`` of text are refused naming the function and the type, and ``CAST(text AS
TIMESTAMP)`` is a zone-less timestamp. The ``ceph`` and ``aws`` flavours keep s3-select's
coercions (a field next to a number, or under an aggregate, is read as a number).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pytest

from flight_storage import protocol
from tests.conftest import ServerProcess, running_server

FLAVOR_OPTION = f"adbc.flight.sql.rpc.call_header.{protocol.FLAVOR_HEADER}"
TABLE = '"b"."t.csv"'
# id, fruit, city, when: the last two fields as a user's export writes them (no zone)
ROWS = [
    ("1", "pear", "Oslo", "2024-08-16 20:29:54"),
    ("2", "apple", "Zagreb", "2024-08-17 01:00:00"),
    ("10", "fig", "Bern", "2023-01-01 00:00:00"),
    ("3", "apple", "Lima", "2024-02-29 12:00:00.25"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("standard-types")
    (root / "b").mkdir()
    (root / "b" / "t.csv").write_text("".join(",".join(r) + "\n" for r in ROWS))
    with running_server(root) as running:
        yield running


def _rows(server: ServerProcess, sql: str, flavor: str | None = None) -> list[tuple[Any, ...]]:
    options = {} if flavor is None else {FLAVOR_OPTION: flavor}
    with flightsql.connect(server.location, db_kwargs=options, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def _error(server: ServerProcess, sql: str) -> dict[str, Any]:
    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cur, \
            pytest.raises(adbc_driver_manager.Error) as info:
        cur.execute(sql)
        cur.fetchall()
    text = str(info.value)
    assert "Traceback" not in text and "<class" not in text
    detail: dict[str, Any] = json.loads(text[text.index("{"): text.rindex("}") + 1])
    return detail


def test_max_and_min_of_text_columns_are_the_text_extremes(server: ServerProcess) -> None:
    got = _rows(server, f"SELECT max(_3), min(_2) FROM {TABLE}")
    assert got == [(max(r[2] for r in ROWS), min(r[1] for r in ROWS))] == [("Zagreb", "apple")]


def test_max_of_digits_as_text_is_text_order_and_a_cast_makes_it_a_number(
        server: ServerProcess) -> None:
    # "2" > "10" as text, the SQL answer for a VARCHAR column; a cast asks for numbers
    got = _rows(server, f"SELECT max(_1), min(_1), max(CAST(_1 AS INT)) FROM {TABLE}")
    assert got == [("3", "1", 10)]


def test_max_of_a_cast_to_timestamp_is_the_latest_timestamp(server: ServerProcess) -> None:
    got = _rows(server, f"SELECT max(CAST(_4 AS TIMESTAMP)), min(CAST(_4 AS TIMESTAMP)) "
                        f"FROM {TABLE}")
    assert got == [(dt.datetime(2024, 8, 17, 1, 0), dt.datetime(2023, 1, 1, 0, 0))]


def test_cast_to_timestamp_is_zone_less_and_compares_with_timestamp_text(
        server: ServerProcess) -> None:
    got = _rows(server, f"SELECT _2, CAST(_4 AS TIMESTAMP) AS t FROM {TABLE} "
                        "WHERE CAST(_4 AS TIMESTAMP) >= '2024-02-29 12:00:00.25' ORDER BY t")
    assert got == [("apple", dt.datetime(2024, 2, 29, 12, 0, 0, 250000)),
                   ("pear", dt.datetime(2024, 8, 16, 20, 29, 54)),
                   ("apple", dt.datetime(2024, 8, 17, 1, 0))]


def test_group_by_with_max_of_text_per_group(server: ServerProcess) -> None:
    got = _rows(server, f"SELECT _2, max(_3), count(*) FROM {TABLE} GROUP BY _2 ORDER BY _2")
    assert got == [("apple", "Zagreb", 2), ("fig", "Bern", 1), ("pear", "Oslo", 1)]


@pytest.mark.parametrize("function", ["sum", "avg"])
def test_sum_and_avg_of_text_are_refused_naming_the_function_and_the_type(
        server: ServerProcess, function: str) -> None:
    detail = _error(server, f"SELECT {function}(_1) FROM {TABLE}")
    assert detail["code"] == "IncorrectSqlFunctionArgumentType"
    message = detail["message"]
    assert f"{function}(VARCHAR)" in message and f"{function}(CAST(_1 AS DOUBLE))" in message


def test_arithmetic_on_text_is_refused_naming_the_operator(server: ServerProcess) -> None:
    detail = _error(server, f"SELECT _1 + 1 FROM {TABLE}")
    assert detail["code"] == "InvalidDataType"
    assert "VARCHAR + BIGINT" in detail["message"] and "CAST(_1 AS" in detail["message"]
    assert _rows(server, f"SELECT CAST(_1 AS INT) + 1 FROM {TABLE} ORDER BY 1") == [
        (2,), (3,), (4,), (11,)]


@pytest.mark.parametrize(("sql", "value"), [
    (f"SELECT CAST(_2 AS TIMESTAMP) FROM {TABLE}", "pear"),
    ("SELECT CAST('16/08/2024' AS TIMESTAMP)", "16/08/2024"),  # folded while planning
])
def test_text_that_is_no_timestamp_is_a_cast_error_naming_the_value(
        server: ServerProcess, sql: str, value: str) -> None:
    detail = _error(server, sql)
    assert detail["code"] == "CastFailed"
    assert f"timestamp from '{value}'" in detail["message"]


def test_a_timestamp_as_text_is_written_without_a_zone(server: ServerProcess) -> None:
    got = _rows(server, f"SELECT CAST(CAST(_4 AS TIMESTAMP) AS STRING) FROM {TABLE} "
                        "WHERE _2 = 'pear'")
    assert got == [("2024-08-16T20:29:54",)]


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_the_s3_select_flavours_keep_their_numeric_aggregates(server: ServerProcess,
                                                              flavor: str) -> None:
    # s3-select reads an aggregated field as a number: max is 10, a word is no number (NULL)
    got = _rows(server, f"SELECT max(_1), sum(_1), max(_3) FROM {TABLE}", flavor)
    assert got == [(10.0, 16.0, None)]
