"""SQLAlchemy through flightsql-dbapi's dialect (``datafusion://``): reflection and selects.

The dialect runs in its own process, as in ``test_foreign_clients.py``: flightsql-dbapi's
generated Flight SQL messages and ours cannot share one protobuf descriptor pool.

``sqlalchemy-adbc`` (0.3.0 on PyPI) needs SQLAlchemy >= 2.0 while flightsql-dbapi 0.2.2 pins
SQLAlchemy < 2.0, so it runs in the clients' venv: ``test_sqlalchemy_adbc_client.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import run_client_script, write_orders

ROWS = 6000

_SCRIPT = """
import json, sys
import sqlalchemy as sa
host, port, step = json.loads(sys.argv[1])
engine = sa.create_engine(
    f"datafusion://{host}:{port}?insecure=true&x-flight-select-endpoints=single")
try:
    if step == "reflect":
        inspector = sa.inspect(engine)
        answer = {"schemas": inspector.get_schema_names(),
                  "tables": inspector.get_table_names(schema="shop"),
                  "columns": [c["name"] for c in inspector.get_columns("orders.csv", "shop")]}
    elif step == "ping":
        with engine.connect() as connection:
            answer = {"rows": [list(map(str, r)) for r in connection.execute(sa.text("SELECT 1"))]}
    elif step == "text":
        with engine.connect() as connection:
            rows = connection.execute(sa.text(
                "SELECT order_id, region FROM \\"shop\\".\\"orders.csv\\" WHERE region = 'r1'"))
            answer = {"rows": [list(map(str, r)) for r in rows]}
    else:
        table = sa.Table("orders.csv", sa.MetaData(), schema="shop", autoload_with=engine)
        query = sa.select(table.c.order_id, table.c.region).where(table.c.region == "r1")
        with engine.connect() as connection:
            answer = {"sql": str(query.compile(engine)),
                      "rows": [list(map(str, r)) for r in connection.execute(query)]}
except Exception as exc:
    answer = {"error": str(exc)}
print(json.dumps(answer))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("sqlalchemy")
    write_orders(root, ROWS, lambda i: f"note {i}")
    with running_server(root) as process:
        yield process


def _run(server: ServerProcess, step: str) -> dict[str, Any]:
    host, port = server.address
    return run_client_script(_SCRIPT, [host, port, step])


def _expected_r1() -> list[list[str]]:
    return [[str(i), "r1"] for i in range(ROWS) if i % 5 == 1]


def test_sqlalchemy_reflects_buckets_objects_and_columns(server: ServerProcess) -> None:
    answer = _run(server, "reflect")
    assert "error" not in answer, answer
    assert answer["schemas"] == ["shop"]
    assert "orders.csv" in answer["tables"]
    assert answer["columns"] == ["order_id", "region", "note"]


def test_sqlalchemy_select_1(server: ServerProcess) -> None:
    assert _run(server, "ping") == {"rows": [["1"]]}


def test_sqlalchemy_text_select_reads_every_row(server: ServerProcess) -> None:
    answer = _run(server, "text")
    assert "error" not in answer, answer
    assert sorted(answer["rows"], key=lambda r: int(r[0])) == _expected_r1()


def test_sqlalchemy_core_select_on_a_reflected_table(server: ServerProcess) -> None:
    answer = _run(server, "core")
    assert "error" not in answer, answer
    # SQLAlchemy qualifies every column with its table; the server reads that as the table.
    assert 'shop."orders.csv".order_id' in answer["sql"]
    assert sorted(answer["rows"], key=lambda r: int(r[0])) == _expected_r1()
