"""SQLAlchemy through sqlalchemy-adbc (``adbc+flightsql://``): reflection and Core selects.

sqlalchemy-adbc needs SQLAlchemy >= 2 while flightsql-dbapi (tested in
``test_sqlalchemy_clients.py``, in the project's venv) pins SQLAlchemy < 2, so it lives in the
clients' venv (``.venv-clients/``, made by ``scripts/setup.sh`` from ``clients/requirements.txt``)
and runs ``clients/sqlalchemy_adbc_session.py`` in a subprocess that reaches the server through
the ADBC Flight SQL driver, as any foreign client does. Every answer is compared with reading
the CSV files themselves.

What it needs of the server (``flight_storage/rpc/metadata.py``): GetTables' ``table_type`` in
ADBC's lower-case vocabulary (it lists ``"table"`` and ``"view"`` exactly) and the
``ARROW:FLIGHT:SQL:TYPE_NAME`` field metadata, from which the driver fills ``xdbc_type_name``
and the dialect reflects a column's type.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
SESSION = Path(__file__).resolve().parent / "clients" / "sqlalchemy_adbc_session.py"
BIG_ROWS = 60_000  # about 2.4 MB: three 1 MB endpoints with --partition-mb 1
SMALL_ROWS = 3_000
COLUMNS = [{"name": "order_id", "type": "int64"}, {"name": "region", "type": "string"},
           {"name": "amount", "type": "float64"}, {"name": "placed", "type": "date"},
           {"name": "paid", "type": "bool"}]
REFLECTED = [["order_id", "BigInteger"], ["region", "String"], ["amount", "Float"],
             ["placed", "Date"], ["paid", "Boolean"]]


def _write_month(path: Path, month: int, rows: int) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([c["name"] for c in COLUMNS])
        for i in range(rows):
            placed = datetime.date(2024, month, 1) + datetime.timedelta(days=i % 28)
            writer.writerow([month * 100_000 + i, f"r{i % 5}", f"{i * 37 % 1000}.{i % 100:02d}",
                             placed.isoformat(), "true" if i % 3 else "false"])


def _read_month(path: Path) -> list[list[Any]]:
    with path.open(newline="") as handle:
        return [[int(r["order_id"]), r["region"], float(r["amount"]), r["placed"],
                 r["paid"] == "true"] for r in csv.DictReader(handle)]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sqlalchemy_adbc")
    orders = root / "shop" / "orders"
    orders.mkdir(parents=True)
    _write_month(orders / "2024-01.csv", 1, BIG_ROWS)
    _write_month(orders / "2024-02.csv", 2, SMALL_ROWS)
    (root / "shop" / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "orders/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
         "columns": COLUMNS}]}))
    return root


@pytest.fixture(scope="module")
def answers(shop: Path) -> Iterator[dict[str, Any]]:
    if not CLIENTS_PYTHON.exists():
        pytest.fail(f"{CLIENTS_PYTHON} is missing: run scripts/setup.sh to create the clients' "
                    "venv (sqlalchemy-adbc needs SQLAlchemy>=2, flightsql-dbapi <2)")
    server: ServerProcess = start_server(shop, "--partition-mb", "1")
    try:
        host, port = server.location.removeprefix("grpc://").rsplit(":", 1)
        done = subprocess.run(
            [str(CLIENTS_PYTHON), str(SESSION), host, port, "shop", "orders/",
             "orders/2024-01.csv"],
            capture_output=True, text=True, timeout=300, check=False)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    yield json.loads(done.stdout)


def _step(answers: dict[str, Any], name: str) -> dict[str, Any]:
    answer = answers[name]
    assert "error" not in answer, answer["error"]
    return answer


def test_inspector_lists_objects_as_tables_and_prefixes_as_views(
        answers: dict[str, Any]) -> None:
    reflected = _step(answers, "reflect")
    assert reflected["schemas"] == ["shop"]
    assert reflected["tables"] == ["orders/2024-01.csv", "orders/2024-02.csv"]
    assert reflected["views"] == ["orders/"]
    assert reflected["has_table"] == [True, False]


def test_inspector_reflects_column_types(answers: dict[str, Any]) -> None:
    columns = _step(answers, "reflect")["columns"]
    assert columns == {"orders/": REFLECTED, "orders/2024-01.csv": REFLECTED}


def test_metadata_reflect_finds_every_table_and_view(answers: dict[str, Any]) -> None:
    assert _step(answers, "metadata_reflect")["tables"] == [
        "shop.orders/", "shop.orders/2024-01.csv", "shop.orders/2024-02.csv"]


def test_core_select_on_a_reflected_view_reads_every_row(answers: dict[str, Any],
                                                         shop: Path) -> None:
    answer = _step(answers, "core_select")
    # table-qualified columns and bound values (DoPut), not literals in the text
    assert 'shop."orders/".region = ?' in answer["sql"]
    assert 'shop."orders/".amount > ?' in answer["sql"]
    whole = [row for month in ("01", "02")
             for row in _read_month(shop / "shop" / "orders" / f"2024-{month}.csv")]
    expected = [row for row in whole if row[1] == "r1" and row[2] > 500.0]
    assert len(expected) > SMALL_ROWS  # both objects, every endpoint of the big one
    assert sorted(answer["rows"]) == sorted(expected)
    assert answer["python_types"] == ["0:int", "1:str", "2:float", "3:date", "4:bool"]


def test_core_aggregate_on_a_reflected_table(answers: dict[str, Any], shop: Path) -> None:
    answer = _step(answers, "core_aggregate")
    whole = _read_month(shop / "shop" / "orders" / "2024-01.csv")
    regions = sorted({row[1] for row in whole})
    assert [row[:2] for row in answer["rows"]] == [
        [region, sum(1 for row in whole if row[1] == region)] for region in regions]
    for (region, _, total) in answer["rows"]:
        # a float sum's last bits depend on the order it adds in
        exact = math.fsum(row[2] for row in whole if row[1] == region)
        assert total == pytest.approx(exact, rel=1e-12)


def test_select_1_ping(answers: dict[str, Any]) -> None:
    assert _step(answers, "ping")["rows"] == [[1]]
