"""Pins the DataFusion behaviour the lazily-read tables rely on (see streaming_dataset.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from datafusion import SessionContext

from flight_storage.execution.drivers.parquet_format import pruned_fragments
from flight_storage.execution.streaming_dataset import StreamingDataset, generic_scan

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.string())])


def _batches(log: list[str]):
    def factory():
        for i in range(3):
            log.append(f"produce {i}")
            yield pa.record_batch({"a": list(range(i * 4, i * 4 + 4)), "b": ["x", "y"] * 2},
                                  schema=SCHEMA)
    return factory


def test_projection_and_exact_filter_reach_the_scan() -> None:
    seen: list[tuple[object, object]] = []
    log: list[str] = []
    inner = generic_scan(_batches(log), SCHEMA)

    def scan(columns, filter):
        seen.append((columns, str(filter)))
        return inner(columns, filter)

    ctx = SessionContext()
    ctx.register_dataset("t", StreamingDataset(SCHEMA, [scan]))
    got = ctx.sql("SELECT a FROM t WHERE b = 'y' AND a > 3").to_pydict()
    assert got == {"a": [5, 7, 9, 11]}
    columns, filter = seen[-1]
    assert list(columns) == ["a"]  # the filter-only column b is not projected
    assert "b" in filter and "a" in filter  # the filter is handed over (and not re-checked)


def test_batches_are_produced_only_when_pulled() -> None:
    log: list[str] = []
    ctx = SessionContext()
    ctx.register_dataset("t", StreamingDataset(SCHEMA, [generic_scan(_batches(log), SCHEMA)]))
    frame = ctx.sql("SELECT count(*) AS n FROM t")
    assert log == []
    assert frame.to_pydict() == {"n": [12]}
    assert log == ["produce 0", "produce 1", "produce 2"]


def test_parquet_row_groups_are_pruned_by_statistics(tmp_path: Path) -> None:
    table = pa.table({"a": list(range(1000)), "b": ["v"] * 1000})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=100)
    kept = pruned_fragments(ds.ParquetFileFormat(), pa.OSFile(str(path)), None, table.schema,
                            ds.field("a") >= 950)
    assert [f.row_groups[0].id for f in kept] == [9]
    whole = pruned_fragments(ds.ParquetFileFormat(), pa.OSFile(str(path)), [6, 7, 8],
                             table.schema, None)
    assert [f.row_groups[0].id for f in whole] == [6, 7, 8]  # file order, whatever pyarrow does


def test_parquet_string_view_columns_are_read_as_strings() -> None:
    import io

    from flight_storage.execution.engine import InputSpec, SelectEngine
    from flight_storage.storage.sources import BytesSource

    table = pa.table({"a": pa.array(["x", "y", "z"], pa.string_view()), "n": [1, 2, 3]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    engine = SelectEngine()
    plan = engine.plan("select a, n from s3object where a = 'y'", BytesSource(buffer.getvalue()),
                       InputSpec("parquet"))
    assert plan.arrow_schema.field("a").type == pa.string()
    assert [r for b in engine.execute_arrow(plan) for r in b.to_pylist()] == [{"a": "y", "n": 2}]


def test_filter_folded_to_a_constant_is_applied() -> None:
    batch = pa.record_batch({"a": [1, 2], "b": ["0", "1"]}, schema=SCHEMA)
    ctx = SessionContext()
    ctx.register_dataset("t", StreamingDataset(SCHEMA, [generic_scan(lambda: [batch], SCHEMA)]))
    assert ctx.sql("SELECT a FROM t WHERE b = '0' AND b = '1'").to_pydict() == {"a": []}
    assert ctx.sql("SELECT a FROM t WHERE b = '0' OR true").to_pydict() == {"a": [1, 2]}
