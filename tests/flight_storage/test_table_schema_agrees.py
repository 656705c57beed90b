"""GetTables' ``table_schema`` is the schema a statement over the table answers with, in the
caller's flavour: a sniffed CSV with a header on the standard surface, a headerless CSV (and
the same CSV read as S3 Select reads it) under ``ceph`` and ``aws``, and a configured prefix. Both come from one code path
(``rpc/metadata.py``'s ``_table_schema`` plans the statement ``SELECT * FROM "b"."k"``).

Real server in a subprocess, the real ADBC driver for GetTables, a pyarrow Flight client for the
statement's FlightInfo.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from flight_storage.protocol import FLAVOR_HEADER
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import statement_descriptor


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("schemas")
    bucket = root / "b"
    (bucket / "p").mkdir(parents=True)
    rows = "\n".join(f"{i},u{i % 3},{i * 0.5},2024-08-16 0{i % 9}:00:07,{'true' if i % 2 else ''}"
                     for i in range(1, 50))
    (bucket / "header.csv").write_text("id,user,amount,ts,ok\n" + rows + "\n")
    (bucket / "noheader.csv").write_text(rows + "\n")
    (bucket / "p" / "a.csv").write_text("id,name\n1,x\n2,y\n")
    (bucket / "p" / "b.csv").write_text("id,name\n3,z\n")
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()),
                             "at": pa.array([0, 86_400_000_000], pa.timestamp("us")),
                             "day": pa.array([0, 1], pa.date32()),
                             "price": pa.array([1.5, None], pa.float32())}),
                   bucket / "t.parquet")
    (bucket / "e.jsonl").write_text('{"a": 1, "b": {"c": "x"}}\n{"a": 2, "b": {"c": "y"}}\n')
    (bucket / ".flight-select.json").write_text(json.dumps({"tables": [{"prefix": "p/"}]}))
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data) as process:
        yield process


def _get_tables_schema(server: ServerProcess, key: str, flavor: str | None) -> pa.Schema:
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi as flightsql

    kwargs: dict[str, Any] = {}
    if flavor is not None:
        header = adbc_driver_flightsql.DatabaseOptions.RPC_CALL_HEADER_PREFIX.value
        kwargs["db_kwargs"] = {header + FLAVOR_HEADER: flavor}
    with flightsql.connect(server.location, autocommit=True, **kwargs) as conn:
        schema: pa.Schema = conn.adbc_get_table_schema(key, db_schema_filter="b")
    return schema


def _statement_schema(server: ServerProcess, key: str, flavor: str | None) -> pa.Schema:
    headers = [] if flavor is None else [(FLAVOR_HEADER.encode(), flavor.encode())]
    client = flight.FlightClient(server.location)
    try:
        info = client.get_flight_info(statement_descriptor(f'SELECT * FROM "b"."{key}"'),
                                      flight.FlightCallOptions(headers=headers))
    finally:
        client.close()
    return info.schema


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


@pytest.mark.parametrize(("key", "flavor"), [
    # the header's names, typed (standard: sniffed); S3 Select's reading, _1.._5 strings
    *[(key, flavor) for key in ("header.csv", "noheader.csv", "p/", "t.parquet", "e.jsonl")
      for flavor in (None, "standard", "ceph", "aws", "minio")],
])
def test_get_tables_schema_is_the_statements(server: ServerProcess, key: str,
                                             flavor: str | None) -> None:
    listed = _get_tables_schema(server, key, flavor)
    planned = _statement_schema(server, key, flavor)
    assert len(planned) >= 1
    assert _columns(listed) == _columns(planned)


def test_the_flavours_see_different_columns_of_one_csv(server: ServerProcess) -> None:
    """The check above compares like with like: the standard surface's sniffed header and
    S3 Select's ``_1`` columns differ for the same object."""
    standard = _columns(_get_tables_schema(server, "header.csv", None))
    ceph = _columns(_get_tables_schema(server, "header.csv", "ceph"))
    assert [name for name, _ in standard] == ["id", "user", "amount", "ts", "ok"]
    assert [name for name, _ in ceph] == ["_1", "_2", "_3", "_4", "_5"]
    assert standard[0][1] == pa.int64()
