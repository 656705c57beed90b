"""The standard flavour over Flight SQL, through the ADBC driver (issue #12).

Flight SQL statements are standard SQL unless the client names a flavour: LIMIT counts result
rows, double quotes name columns, GROUP BY / HAVING / ORDER BY / DISTINCT run, and ``SELECT 1``
answers without an object. ``ceph`` and ``aws`` stay selectable per connection and per
statement. A query that needs every row at once is one endpoint over all partitions: its
answer equals pandas over the whole file even when the object has several endpoints.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pandas as pd
import pytest

from flight_storage import protocol
from tests.conftest import ROOT, SAMPLES, ServerProcess, start_server

FLAVOR_OPTION = f"adbc.flight.sql.rpc.call_header.{protocol.FLAVOR_HEADER}"
ORDERS = '"sales"."orders/2024-01.csv"'
ROWS = 60_000
BIG = "\"big\".\"rows.csv\" WITH (FileHeaderInfo = 'USE')"


def _orders() -> list[dict[str, str]]:
    with (SAMPLES / "sales" / "orders" / "2024-01.csv").open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A ~2.9 MB CSV served in 1 MiB partitions: several endpoints for a plain SELECT."""
    root = tmp_path_factory.mktemp("standard-data")
    (root / "big").mkdir()
    with (root / "big" / "rows.csv").open("w") as out:
        out.write("id,k,v,pad\n")
        for i in range(ROWS):
            # v is a permutation of 0..ROWS-1 (7919 is prime to ROWS): ORDER BY v has no ties
            out.write(f"{i},key-{i % 13},{i * 7919 % ROWS},padding text for row {i:08d}\n")
    assert (root / "big" / "rows.csv").stat().st_size > 2_500_000  # three 1 MiB ranges
    server = start_server(root, "--partition-mb", "1")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def big_frame(big_server: ServerProcess) -> pd.DataFrame:
    del big_server
    return pd.DataFrame({"id": range(ROWS), "k": [f"key-{i % 13}" for i in range(ROWS)],
                         "v": [i * 7919 % ROWS for i in range(ROWS)]})


def _rows(location: str, sql: str, flavor: str | None = None) -> list[tuple[Any, ...]]:
    options = {} if flavor is None else {FLAVOR_OPTION: flavor}
    with flightsql.connect(location, db_kwargs=options) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]


def _endpoints(location: str, sql: str) -> int:
    with flightsql.connect(location) as conn, conn.cursor() as cur:
        partitions, _ = cur.adbc_execute_partitions(sql)
        return len(partitions)


def _error(location: str, sql: str, flavor: str | None = None) -> dict[str, Any]:
    options = {} if flavor is None else {FLAVOR_OPTION: flavor}
    with flightsql.connect(location, db_kwargs=options) as conn, conn.cursor() as cur, \
            pytest.raises(adbc_driver_manager.Error) as info:
        cur.execute(sql)
        cur.fetchall()
    text = str(info.value)
    assert "Traceback" not in text and "<class" not in text and "sqlglot" not in text
    detail: dict[str, Any] = json.loads(text[text.index("{"): text.rindex("}") + 1])
    return detail


# ------------------------------------------------------------------ the default and the header


def test_limit_counts_result_rows_by_default(sample_server: ServerProcess) -> None:
    got = _rows(sample_server.location,
                f"SELECT order_id FROM {ORDERS} WHERE status = 'delivered' LIMIT 5")
    assert got == [(r["order_id"],) for r in _orders() if r["status"] == "delivered"][:5]


def test_ceph_flavour_keeps_its_limit_per_connection_and_per_statement(
        sample_server: ServerProcess) -> None:
    sql = f"SELECT order_id FROM {ORDERS} WHERE status = 'delivered' LIMIT 5"
    # Ceph's LIMIT counts scanned records: the delivered ones among the first five.
    ceph = [(r["order_id"],) for r in _orders()[:5] if r["status"] == "delivered"]
    assert len(ceph) < 5
    assert _rows(sample_server.location, sql, "ceph") == ceph
    with flightsql.connect(sample_server.location) as conn, conn.cursor() as cur:
        cur.adbc_statement.set_options(**{FLAVOR_OPTION: "ceph"})
        cur.execute(sql)
        assert [tuple(r) for r in cur.fetchall()] == ceph


def test_double_quotes_name_a_column_by_default(sample_server: ServerProcess) -> None:
    sql = f'SELECT "order_id" FROM {ORDERS} WHERE "status" = \'shipped\' LIMIT 2'
    expected = [(r["order_id"],) for r in _orders() if r["status"] == "shipped"][:2]
    assert _rows(sample_server.location, sql) == expected
    # In Ceph's dialect double quotes make a string: the WHERE compares two strings.
    assert _rows(sample_server.location, sql, "ceph") == []


def test_empty_csv_field_is_the_empty_string_by_default(sample_server: ServerProcess) -> None:
    # AWS's reading rules: an empty field is "", as it is in the file.
    got = _rows(sample_server.location, f"SELECT count(*) FROM {ORDERS} WHERE region = ''")
    assert got == [(sum(1 for r in _orders() if r["region"] == ""),)] and got[0][0] > 0


def test_select_without_from_is_answered(sample_server: ServerProcess) -> None:
    assert _rows(sample_server.location, "SELECT 1") == [(1,)]
    assert _rows(sample_server.location, "SELECT 1 + 2 AS three, upper('x')") == [(3, "X")]
    detail = _error(sample_server.location, "SELECT 1", "aws")
    assert detail["code"] == "ParseSelectMissingFrom"


def test_unknown_flavour_lists_the_flavours(sample_server: ServerProcess) -> None:
    detail = _error(sample_server.location, "SELECT 1", "oracle")
    assert "standard, ceph, aws" in detail["message"]


# ------------------------------------------------------------------ beyond S3 Select


def test_group_by_over_several_endpoints_equals_pandas(big_server: ServerProcess,
                                                        big_frame: pd.DataFrame) -> None:
    assert _endpoints(big_server.location, f"SELECT id FROM {BIG}") > 1
    sql = (f"SELECT k, count(*) AS n, sum(cast(v AS int)) AS total FROM {BIG} "
           "GROUP BY k ORDER BY k")
    assert _endpoints(big_server.location, sql) == 1
    grouped = big_frame.groupby("k").agg(n=("v", "size"), total=("v", "sum")).sort_index()
    expected = [(k, int(n), int(t)) for k, n, t in grouped.itertuples()]
    assert _rows(big_server.location, sql) == expected


def test_having_filters_groups(big_server: ServerProcess, big_frame: pd.DataFrame) -> None:
    sql = (f"SELECT k, max(cast(v AS int)) AS top FROM {BIG} GROUP BY k "
           "HAVING count(*) > 4615 ORDER BY top DESC")
    sizes = big_frame.groupby("k")["v"].agg(["size", "max"])
    kept = sizes[sizes["size"] > 4615].sort_values("max", ascending=False)
    assert 0 < len(kept) < 13
    assert _rows(big_server.location, sql) == [(k, int(m)) for k, m in kept["max"].items()]


def test_order_by_with_limit_sees_every_partition(big_server: ServerProcess,
                                                  big_frame: pd.DataFrame) -> None:
    sql = f"SELECT id, v FROM {BIG} ORDER BY cast(v AS int) DESC LIMIT 7"
    assert _endpoints(big_server.location, sql) == 1
    top = big_frame.sort_values("v", ascending=False).head(7)
    assert _rows(big_server.location, sql) == [(str(i), str(v)) for i, v in
                                                zip(top["id"], top["v"], strict=True)]


def test_distinct_over_several_endpoints(big_server: ServerProcess,
                                         big_frame: pd.DataFrame) -> None:
    sql = f"SELECT DISTINCT k FROM {BIG} ORDER BY 1"
    assert _endpoints(big_server.location, sql) == 1
    assert _rows(big_server.location, sql) == [(k,) for k in sorted(big_frame["k"].unique())]


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_s3_select_flavours_refuse_group_by_naming_standard(sample_server: ServerProcess,
                                                            flavor: str) -> None:
    detail = _error(sample_server.location,
                    f"SELECT region, count(*) FROM {ORDERS} GROUP BY region", flavor)
    assert "GROUP BY" in detail["message"] and "standard" in detail["message"]


# ------------------------------------------------------------------ errors a user can act on


@pytest.mark.parametrize(("sql", "code", "fragment"), [
    ("SELEC order_id FROM \"sales\".\"orders/2024-01.csv\"", "ParseUnexpectedToken", "'SELEC'"),
    (f"SELECT order_id FROM {ORDERS} WHERE", "ParseUnexpectedToken", "'WHERE'"),
    (f"SELECT order_id FROM {ORDERS} LIMIT", "ParseUnexpectedToken", "'LIMIT'"),
    (f"SELECT nope FROM {ORDERS}", "MissingHeaderName", "order_id, customer_id, region"),
    ('SELECT nope FROM "sales"."orders_noheader.csv"', "MissingHeaderName", "FileHeaderInfo"),
    (f"INSERT INTO {ORDERS} VALUES (1)", "UnsupportedSyntax", "read-only"),
    ('UPDATE "sales"."orders/2024-01.csv" SET region = 1', "UnsupportedSyntax", "read-only"),
    ("CREATE TABLE t (a int)", "UnsupportedSyntax", "read-only"),
    ('DROP TABLE "sales"."orders/2024-01.csv"', "UnsupportedSyntax", "read-only"),
    (f"SELECT * FROM {ORDERS} LIMIT 99999999999999999999", "IntegerOverflow", "out of range"),
])
def test_errors_name_what_to_fix(sample_server: ServerProcess, sql: str, code: str,
                                 fragment: str) -> None:
    detail = _error(sample_server.location, sql)
    assert detail["code"] == code
    assert fragment.lower() in detail["message"].lower()


def test_unknown_column_hint_in_the_ceph_flavour_keeps_cephs_text(
        sample_server: ServerProcess) -> None:
    detail = _error(sample_server.location, f"SELECT nope FROM {ORDERS}", "ceph")
    assert detail["message"].startswith("alias {nope} or column not exist in schema; ")


# ------------------------------------------------------------------ the CLI


def test_cli_help_names_its_default_flavour() -> None:
    result = subprocess.run([sys.executable, "-m", "flight_storage", "query", "--help"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    text = " ".join(result.stdout.split())
    assert "(default: aws)" in text and "standard" in text and "ceph" in text


def test_cli_standard_flavour_groups(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "flight_storage", "query",
         str(SAMPLES / "sales" / "orders" / "2024-01.csv"), "--flavor", "standard",
         "--input-serialization", '{"CSV": {"FileHeaderInfo": "USE"}}',
         "--output-serialization", '{"JSON": {}}',
         "--expression",
         "SELECT status, count(*) AS n FROM s3object GROUP BY status ORDER BY status"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    got = [json.loads(line) for line in result.stdout.splitlines()]
    counts = pd.Series([r["status"] for r in _orders()]).value_counts().sort_index()
    assert got == [{"status": s, "n": int(n)} for s, n in counts.items()]
