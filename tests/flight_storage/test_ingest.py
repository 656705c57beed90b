"""Bulk ingest through the real ADBC driver: ``cursor.adbc_ingest`` writes Parquet objects into
a prefix table, in each mode, with the rights, the schema check and the bound."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flight_storage.rpc.auth import add_user
from tests.conftest import ServerProcess, running_server

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "lake").mkdir(parents=True)
    (root / "lake" / "old.csv").write_text("x\n1\n")
    return root


@pytest.fixture
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--writable", "--max-ingest-mb", "1") as process:
        yield process


def _ingest(server: ServerProcess, table: str, data: pa.Table, mode: str,
            **kwargs: str) -> int:
    with flightsql.connect(server.location, db_kwargs={**COOKIES, **kwargs}) as conn, \
            conn.cursor() as cursor:
        conn.adbc_connection.set_options(**{"adbc.connection.catalog": "lake"})
        count = cursor.adbc_ingest(table, data, mode=mode)
        conn.commit()
        return count


def _read(server: ServerProcess, sql: str) -> pa.Table:
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def test_create_writes_one_parquet_object_that_queries_read(server: ServerProcess,
                                                            data: Path) -> None:
    assert _ingest(server, "people", DATA, "create") == 3
    (obj,) = (data / "lake" / "people").iterdir()
    assert obj.suffix == ".parquet" and pq.read_table(obj).equals(DATA)
    result = _read(server, 'SELECT id, name FROM "lake"."people/"')
    assert result.to_pylist() == DATA.to_pylist()
    # nothing else was left behind (no temporary file in the bucket), but the table's one
    # commit record in the bucket's hidden commits folder (storage/table_commits.py)
    assert sorted(p.name for p in (data / "lake").iterdir()) == [
        ".flight-select-commits", "old.csv", "people"]
    (records,) = (data / "lake" / ".flight-select-commits").iterdir()
    assert [p.name for p in records.iterdir()] == ["00000000000000000001.json"]


def test_append_adds_an_object_and_replace_keeps_only_the_new_one(server: ServerProcess,
                                                                  data: Path) -> None:
    _ingest(server, "t", DATA, "create")
    _ingest(server, "t", DATA.slice(0, 1), "append")
    assert _read(server, 'SELECT count(*) AS n FROM "lake"."t/"').column(0)[0].as_py() == 4
    _ingest(server, "t", DATA.slice(1, 1), "replace")
    assert _read(server, 'SELECT id FROM "lake"."t/"').column(0).to_pylist() == [2]
    assert len(list((data / "lake" / "t").iterdir())) == 1
    _ingest(server, "t", DATA, "create_append")
    _ingest(server, "u", DATA, "create_append")
    assert _read(server, 'SELECT count(*) FROM "lake"."u/"').column(0)[0].as_py() == 3


def test_modes_refuse_what_they_must(server: ServerProcess) -> None:
    _ingest(server, "t", DATA, "create")
    with pytest.raises(adbc_driver_manager.Error, match="TableAlreadyExists"):
        _ingest(server, "t", DATA, "create")
    with pytest.raises(adbc_driver_manager.Error, match="NoSuchTable"):
        _ingest(server, "absent", DATA, "append")
    other = pa.table({"id": pa.array(["x"]), "name": ["a"]})
    with pytest.raises(adbc_driver_manager.Error,
                       match=r"SchemaMismatch.*id: string.*id: int64"):
        _ingest(server, "t", other, "append")


def test_ingest_is_bounded(server: ServerProcess, data: Path) -> None:
    big = pa.table({"v": pa.array(range(300_000), pa.int64())})  # 2.4 MB > 1 MiB
    with pytest.raises(adbc_driver_manager.Error, match=r"EntityTooLarge.*--max-ingest-mb"):
        _ingest(server, "big", big, "create")
    assert not (data / "lake" / "big").exists()
    assert [p.name for p in (data / "lake").iterdir() if p.name.startswith(".")] == []


def test_a_read_only_server_refuses_ingest(data: Path) -> None:
    with running_server(data) as server, \
            pytest.raises(adbc_driver_manager.Error, match=r"ReadOnly.*--writable"):
        _ingest(server, "t", DATA, "create")


def test_ingest_needs_the_buckets_write_right(data: Path, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    add_user(users, "reader", "pw-reader", ["lake"])
    add_user(users, "writer", "pw-writer", ["lake"], write=["lake"])
    with running_server(data, "--writable", "--auth", str(users)) as server:
        with pytest.raises(adbc_driver_manager.Error,
                           match="user reader may not write bucket lake"):
            _ingest(server, "t", DATA, "create", username="reader", password="pw-reader")
        assert _ingest(server, "t", DATA, "create", username="writer",
                       password="pw-writer") == 3
    assert json.loads(users.read_text())["users"]["writer"]["write"] == ["lake"]


def test_ingested_table_reads_by_its_name_in_the_session(server: ServerProcess) -> None:
    _ingest(server, "people", DATA, "create")
    with flightsql.connect(server.location, db_kwargs=COOKIES) as conn, \
            conn.cursor() as cursor:
        conn.adbc_connection.set_options(**{"adbc.connection.catalog": "lake"})
        cursor.execute("SELECT id FROM people WHERE name IS NOT NULL")
        assert cursor.fetchall() == [(1,), (2,)]
