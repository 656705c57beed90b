"""Prefix tables read object by object: each object DataFusion's reader qualifies for is read
by it, the others by the reference readers, and the answer is the reference readers' answer
over the whole table, in object order, for every partition the plan makes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flight_storage.execution.engine import EngineConfig, SelectEngine
from flight_storage.request.tables import resolve_table
from flight_storage.storage.catalog import Catalog
from tests.flight_storage.test_server_support import write_bucket

# Plain objects (DataFusion reads them), and ones its reader does not qualify for: a quoted
# field with a newline, a ragged record, an empty object.
_CSV = {
    "t/a.csv": "".join(f"{i},n{i % 3},{i * 1.5}\n" for i in range(2000)),
    "t/b.csv": '1,"two\nlines",3\n4,five,6\n',
    "t/c.csv": "".join(f"{i},x{i % 5},{i}\n" for i in range(2000, 4000)),
    "t/d.csv": "7\n8,9\n10,11,12\n",
    "t/e.csv": "",
}
_HEADED = {
    "h/a.csv": "id,name,price\n" + "".join(f"{i},n{i},{i}.5\n" for i in range(1500)),
    "h/b.csv": "id,name,price\n" + "".join(f"{i},m{i},{i}.25\n" for i in range(1500, 3000)),
    "h/c.csv": "price,id,name\n2000,5.5,swapped\n",  # another header order
}
_QUERIES = [
    "select _1, _2 from s3object",
    "select * from s3object",
    "select _1 from s3object where _2 = 'n1' or _2 like 'x%'",
    "select cast(_1 as int) * 2, upper(_2) from s3object where _3 like '%5'",
]
_HEADED_QUERIES = [
    "select id, price from s3object where cast(id as int) > 1490",
    "select * from s3object",
]


def _answers(catalog: Catalog, key: str, sql: str, flavor: str, native: bool,
             partition_bytes: int) -> list[list[dict]]:
    table = resolve_table(catalog, "b", key)
    engine = SelectEngine(EngineConfig(native_readers=native, partition_bytes=partition_bytes))
    plan = engine.plan(sql, table.sources, table.input, flavor=flavor)
    # what the server makes endpoints of (flight_storage.rpc.endpoints.endpoint_partitions)
    chosen = [[p.partition] for p in plan.partitions] if plan.parallel_safe else [None]
    return [[row for batch in engine.execute_arrow(plan, c) for row in batch.to_pylist()]
            for c in chosen]


@pytest.mark.parametrize("partition_bytes", [1 << 30, 16_000])
@pytest.mark.parametrize("flavor", ["ceph", "aws", "standard"])
@pytest.mark.parametrize("sql", _QUERIES)
def test_headerless_prefix_tables(tmp_path: Path, sql: str, flavor: str,
                                  partition_bytes: int) -> None:
    catalog = write_bucket(tmp_path, _CSV)
    got = _answers(catalog, "t/", sql, flavor, True, partition_bytes)
    assert got == _answers(catalog, "t/", sql, flavor, False, partition_bytes)
    assert sum(map(len, got)) > 0
    if flavor == "standard" and sql == "select _1, _2 from s3object":
        # RFC 4180: the line break inside quotes of t/b.csv is data (issue #39 item 5)
        assert ("1", "two\nlines") in {tuple(r.values()) for rows in got for r in rows}


@pytest.mark.parametrize("sql", _HEADED_QUERIES)
def test_prefix_tables_with_a_header(tmp_path: Path, sql: str) -> None:
    config = {"tables": [{"prefix": "", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]}
    catalog = write_bucket(tmp_path, _HEADED, config)
    got = _answers(catalog, "h/", sql, "standard", True, 1 << 30)
    assert got == _answers(catalog, "h/", sql, "standard", False, 1 << 30)


def test_parquet_prefix_tables(tmp_path: Path) -> None:
    bucket = tmp_path / "b" / "p"
    bucket.mkdir(parents=True)
    for i in range(3):
        pq.write_table(pa.table({"k": pa.array(range(i * 1000, (i + 1) * 1000)),
                                 "v": pa.array([float(x) for x in range(1000)])}),
                       bucket / f"{i}.parquet", row_group_size=300)
    catalog = Catalog(tmp_path)
    for sql in ("select k, v from s3object where v > 990", "select * from s3object"):
        got = _answers(catalog, "p/", sql, "standard", True, 1 << 30)
        assert got == _answers(catalog, "p/", sql, "standard", False, 1 << 30)


@pytest.mark.parametrize("sql", ["select count(*), count(_3), max(_1) from s3object",
                                 "select _1 from s3object limit 2500"])
def test_aggregates_and_limits_over_prefix_tables_are_one_query(tmp_path: Path,
                                                               sql: str) -> None:
    catalog = write_bucket(tmp_path, _CSV)
    got = _answers(catalog, "t/", sql, "aws", True, 16_000)
    assert len(got) == 1  # one partition: the whole table
    assert got == _answers(catalog, "t/", sql, "aws", False, 16_000)
