"""One name per table (issue #39 item 6): a table written by ``adbc_ingest`` reads by the names
users and SQL tools write for it, is listed once, and appends say what differs.

A real server in a subprocess, the real ADBC driver; SQLAlchemy (sqlalchemy-adbc) runs in the
clients' venv in a subprocess, as in ``test_sqlalchemy_adbc_client.py``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pytest

from tests.conftest import ServerProcess, running_server

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
REFLECT = Path(__file__).resolve().parent / "clients" / "sqlalchemy_reflect_table.py"
COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
EVENTS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "path": ["/a", "/b", None],
                   "ts": pa.array([0, 10**9, 2 * 10**9], pa.timestamp("ns"))})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "weblogs").mkdir()
    with running_server(tmp_path, "--writable") as process:
        yield process


def _ingest(server: ServerProcess, table: str, data: pa.Table, mode: str = "create",
            **target: str) -> int:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        count = cursor.adbc_ingest(table, data, mode=mode, catalog_name="weblogs", **target)
        conn.commit()
        return count


def _read(server: ServerProcess, sql: str, catalog: str | None = None) -> pa.Table:
    with flightsql.connect(server.location, db_kwargs=COOKIES) as conn, \
            conn.cursor() as cursor:
        if catalog is not None:
            conn.adbc_connection.set_options(**{"adbc.connection.catalog": catalog})
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def test_an_ingested_table_reads_by_every_name_of_it(server: ServerProcess) -> None:
    _ingest(server, "events", EVENTS)
    _ingest(server, "daily", EVENTS, db_schema_name="analytics")
    expected = EVENTS.column("id").to_pylist()
    for sql, catalog in [('SELECT id FROM "weblogs"."events" ORDER BY id', None),
                         ('SELECT id FROM "weblogs"."events/" ORDER BY id', None),
                         ("SELECT id FROM events ORDER BY id", "weblogs"),
                         ('SELECT id FROM "weblogs"."analytics"."daily" ORDER BY id', None),
                         ('SELECT id FROM "weblogs"."analytics/daily" ORDER BY id', None)]:
        assert _read(server, sql, catalog).column(0).to_pylist() == expected, sql
    # and in a statement DataFusion plans over both names
    joined = _read(server, 'SELECT count(*) AS n FROM "weblogs"."events" e '
                           'JOIN "weblogs"."analytics"."daily" d ON e.id = d.id')
    assert joined.column(0).to_pylist() == [3]
    # keys are case-sensitive, quoted or not, in such a statement too (DataFusion lower-cases
    # an unquoted name; the key is the name as written)
    _ingest(server, "Hourly", EVENTS)
    joined = _read(server, "SELECT count(*) AS n FROM Hourly h JOIN events e ON h.id = e.id",
                   "weblogs")
    assert joined.column(0).to_pylist() == [3]


def test_a_name_that_is_neither_object_nor_table_says_both(server: ServerProcess) -> None:
    _ingest(server, "events", EVENTS)
    with pytest.raises(adbc_driver_manager.Error,
                       match=r"NoSuchKey.*no such key: weblogs/event, and no table event/"):
        _read(server, 'SELECT * FROM "weblogs"."event"')


def test_get_objects_lists_an_ingested_table_once(server: ServerProcess) -> None:
    _ingest(server, "events", EVENTS)
    _ingest(server, "events", EVENTS, mode="append")  # two part files now
    with flightsql.connect(server.location) as conn:
        objects = conn.adbc_get_objects(catalog_filter=None).read_all().to_pylist()
    tables = [t["table_name"] for catalog in objects
              for schema in catalog["catalog_db_schemas"] or []
              if schema["db_schema_name"] == "weblogs"
              for t in schema["db_schema_tables"] or []]
    assert tables == ["events"]


def test_sqlalchemy_reflects_and_reads_the_ingested_table(server: ServerProcess) -> None:
    if not CLIENTS_PYTHON.exists():
        pytest.fail(f"{CLIENTS_PYTHON} is missing: run scripts/setup.sh to create the clients' "
                    "venv")
    _ingest(server, "events", EVENTS)
    _ingest(server, "events", EVENTS.slice(0, 1), mode="append")
    host, port = server.location.removeprefix("grpc://").rsplit(":", 1)
    done = subprocess.run([str(CLIENTS_PYTHON), str(REFLECT), host, port, "weblogs", "events"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["tables"] == ["events"]
    assert [c[0] for c in answer["columns"]] == ["id", "path", "ts"]
    assert [row[0] for row in answer["rows"]] == [1, 1, 2, 3]
    assert 'FROM weblogs.events' in answer["sql"]


def test_an_append_lacking_columns_says_so(server: ServerProcess) -> None:
    _ingest(server, "events", EVENTS)
    with pytest.raises(adbc_driver_manager.Error,
                       match=r"SchemaMismatch.*lacks the table's columns \[path: string, ts:"):
        _ingest(server, "events", EVENTS.select(["id"]), mode="append")
    with pytest.raises(adbc_driver_manager.Error,
                       match=r"SchemaMismatch.*the same columns in another order"):
        _ingest(server, "events", EVENTS.select(["path", "id", "ts"]), mode="append")


def test_a_coarser_timestamp_appends_where_the_cast_is_lossless(server: ServerProcess) -> None:
    _ingest(server, "events", EVENTS)  # timestamp[ns]
    micro = EVENTS.set_column(2, "ts", EVENTS.column("ts").cast(pa.timestamp("us")))
    assert _ingest(server, "events", micro, mode="append") == 3
    table = _read(server, 'SELECT ts FROM "weblogs"."events" ORDER BY ts')
    assert table.column(0).to_pylist() == sorted(EVENTS.column("ts").to_pylist() * 2)
    # a value the table's unit cannot hold is refused, not wrapped
    far = pa.table({"id": pa.array([4], pa.int64()), "path": ["/c"],
                    "ts": pa.array([10**16], pa.timestamp("us"))})  # year 2286
    with pytest.raises(adbc_driver_manager.Error, match="SchemaMismatch"):
        _ingest(server, "events", far, mode="append")
    # a finer unit into a coarser table loses digits: refused
    _ingest(server, "coarse", micro)
    with pytest.raises(adbc_driver_manager.Error, match=r"SchemaMismatch.*ts: timestamp\[ns\]"):
        _ingest(server, "coarse", EVENTS, mode="append")
