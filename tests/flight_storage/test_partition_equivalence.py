"""Whatever the split, partitions give every record exactly once (property tests)."""

from __future__ import annotations

import io
import json
from itertools import pairwise

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.protocol import ByteRange, Partition, WholeObject
from flight_storage.storage.sources import BytesSource

_TEXT = st.text(alphabet=st.sampled_from(list("ab ,\"xé東😀\\")), max_size=8)


def _csv_field(value: str) -> str:
    if any(ch in value for ch in ',"\\'):
        return '"' + value.replace("\\", "").replace('"', '""') + '"'
    return value


def _rows_of(engine: SelectEngine, plan, partitions) -> list[tuple]:
    rows: list[tuple] = []
    for partition in partitions:
        for batch in engine.execute_arrow(plan, [partition]):
            rows.extend(tuple(r.values()) for r in batch.to_pylist())
    return rows


def _cuts(size: int, fractions: list[float]) -> list[Partition]:
    points = sorted({int(f * size) for f in fractions} | {0, size})
    return [ByteRange(lo, hi) for lo, hi in pairwise(points)
            if hi > lo]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.integers(0, 999), _TEXT, _TEXT), min_size=1, max_size=30),
       fractions=st.lists(st.floats(0, 1), max_size=6),
       flavor=st.sampled_from(["ceph", "aws"]))
def test_csv_byte_ranges_tile_the_object(rows, fractions, flavor) -> None:
    text = "".join(f"{a},{_csv_field(b)},{_csv_field(c)}\n" for a, b, c in rows)
    data = text.encode()
    engine = SelectEngine(EngineConfig())
    options = {"QuoteEscapeCharacter": '"'} if flavor == "aws" else {}
    plan = engine.plan("select _1, _2, _3 from s3object", BytesSource(data),
                       InputSpec("csv", options=options), flavor=flavor)
    whole = _rows_of(engine, plan, [WholeObject()])
    split = _rows_of(engine, plan, _cuts(len(data), fractions))
    assert split == whole
    assert len(whole) == len(rows)
    assert [int(r[0]) for r in whole] == [a for a, _, _ in rows]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(st.fixed_dictionaries({"id": st.integers(0, 999), "s": _TEXT}),
                     min_size=1, max_size=30),
       fractions=st.lists(st.floats(0, 1), max_size=6))
def test_ndjson_byte_ranges_tile_the_object(docs, fractions) -> None:
    data = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode()
    engine = SelectEngine(EngineConfig())
    plan = engine.plan("select s.id, s.s from s3object s", BytesSource(data),
                       InputSpec("json", options={"Type": "LINES"}), flavor="aws")
    whole = _rows_of(engine, plan, [WholeObject()])
    split = _rows_of(engine, plan, _cuts(len(data), fractions))
    assert split == whole
    assert len(whole) == len(docs)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 400), group_rows=st.integers(1, 64), per_partition=st.integers(1, 5))
def test_parquet_row_group_partitions_tile_the_object(n, group_rows, per_partition) -> None:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"a": list(range(n)), "b": [f"v{i}" for i in range(n)]}), buffer,
                   row_group_size=group_rows)
    engine = SelectEngine(EngineConfig(row_groups_per_partition=per_partition))
    plan = engine.plan("select a, b from s3object where a % 3 = 0", BytesSource(buffer.getvalue()),
                       InputSpec("parquet"))
    split = _rows_of(engine, plan, [p.partition for p in plan.partitions])
    assert [r[0] for r in split] == [i for i in range(n) if i % 3 == 0]
    assert sum(p.rows or 0 for p in plan.partitions) == n


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.integers(-999, 999), min_size=1, max_size=200),
       partition_bytes=st.integers(8, 400))
def test_aggregates_read_in_parallel_equal_one_pass(values, partition_bytes) -> None:
    data = "".join(f"{v},{v % 5}\n" for v in values).encode()
    sql = "select count(*), sum(cast(_1 as int)), min(cast(_1 as int)) from s3object where _2 = '1'"
    results = []
    for size in (1 << 30, partition_bytes):
        engine = SelectEngine(EngineConfig(partition_bytes=size))
        plan = engine.plan(sql, BytesSource(data), InputSpec("csv"))
        results.append([r for b in engine.execute_arrow(plan) for r in b.to_pylist()])
    assert results[0] == results[1]
    matching = [v for v in values if v % 5 == 1]
    assert next(iter(results[0][0].values())) == len(matching)


def test_parquet_partitions_read_concurrently_from_one_file(tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from flight_storage.storage.sources import FileSource

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": list(range(20000)), "b": [f"v{i}" for i in range(20000)]}),
                   path, row_group_size=500)
    source = FileSource(path, "b/t.parquet", path.stat().st_size)
    engine = SelectEngine(EngineConfig(row_groups_per_partition=2))
    plan = engine.plan("select a from s3object where a % 7 = 0", source, InputSpec("parquet"))

    def read(partition):
        return [r["a"] for b in engine.execute_arrow(plan, [partition]) for r in b.to_pylist()]

    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(read, [p.partition for p in plan.partitions] * 3))
    expected = [i for i in range(20000) if i % 7 == 0]
    assert [a for part in parts[: len(plan.partitions)] for a in part] == expected
    assert sum(len(p) for p in parts) == 3 * len(expected)
