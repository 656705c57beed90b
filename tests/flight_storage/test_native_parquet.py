"""DataFusion's Parquet reader serves a Parquet object where it reads the reference's types.

Every test compares the engine with native readers on against the reference reader (native
readers off) over the same file, whole and endpoint by endpoint. The first test pins the
DataFusion behaviour the endpoints rely on: which row groups each of its partitions reads.
"""

from __future__ import annotations

import datetime
import decimal
import gzip
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datafusion import SessionConfig, SessionContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flight_storage.cores import usable_cores
from flight_storage.errors import StorageError
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.execution.native_csv import native_ranges
from flight_storage.execution.native_parquet import (
    NativeParquetTable,
    row_group_split,
    row_group_starts,
)
from flight_storage.storage.sources import FileSource
from select_dialect.errors import SelectDialectError
from tests.conftest import ServerProcess, start_server


def _write(path: Path, table: pa.Table, **options: Any) -> FileSource:
    pq.write_table(table, path, **options)
    return FileSource(path, "bkt/object.parquet", path.stat().st_size)


def _run(source: FileSource, query: str, *, native: bool, partitions: str = "whole",
         partition_bytes: int = 128 << 20, monkeypatch: pytest.MonkeyPatch | None = None,
         ) -> tuple[str, Any]:
    """(reader, rows or the error code) of ``query``; with ``monkeypatch``, a native plan
    must not hand any endpoint to the reference reader."""
    engine = SelectEngine(EngineConfig(native_readers=native, partition_bytes=partition_bytes))
    if monkeypatch is not None and native:
        def refuse(*args: Any) -> Any:
            raise AssertionError("the reference reader served a native plan")
        monkeypatch.setattr(engine, "_reference_stream", refuse)
    try:
        plan = engine.plan(query, source, InputSpec("parquet"))
        if partitions == "whole" or not plan.parallel_safe:  # the server's one endpoint
            rows = [r for b in engine.execute_arrow(plan) for r in b.to_pylist()]
        else:
            rows = [r for p in plan.partitions for b in engine.execute_arrow(plan, [p.partition])
                    for r in b.to_pylist()]
    except (StorageError, SelectDialectError) as exc:
        return "error", exc.code
    return plan.reader, rows


def _same(source: FileSource, query: str, **kw: Any) -> str:
    reader, native_rows = _run(source, query, native=True, **kw)
    kw.pop("monkeypatch", None)
    _, reference_rows = _run(source, query, native=False, **kw)
    assert repr(native_rows) == repr(reference_rows), reader  # repr: NaN equals NaN
    return reader


# --------------------------------------------------------------------------- the split


@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_datafusion_reads_the_row_groups_whose_first_page_is_in_its_range(
    tmp_path: Path, count: int
) -> None:
    """The rule is the first page's offset, not the row group's midpoint: cut in two, this
    file has a row group that straddles the cut, so the two rules give different splits."""
    path = tmp_path / "object.parquet"
    rows = 100_000
    pq.write_table(pa.table({"a": range(rows), "s": [f"x{i % 97}" for i in range(rows)]}),
                   path, row_group_size=7000)
    metadata = pq.ParquetFile(path).metadata
    size = path.stat().st_size
    expected = row_group_split(row_group_starts(metadata), size, count)
    sizes = [sum(group.column(c).total_compressed_size for c in range(group.num_columns))
             for group in map(metadata.row_group, range(metadata.num_row_groups))]
    mids = [s + n // 2 for s, n in zip(row_group_starts(metadata), sizes, strict=True)]
    by_midpoint = row_group_split(mids, size, count)
    if count == 2:  # the file tells the rules apart (row group 7 straddles the cut)
        assert expected != by_midpoint

    config = (SessionConfig().with_target_partitions(count).with_repartition_file_scans(True)
              .with_repartition_file_min_size(0)
              .set("datafusion.execution.enable_file_stream_work_stealing", "false"))
    ctx = SessionContext(config)
    ctx.register_parquet("t", str(path))
    plan = ctx.sql("select a from t").execution_plan()
    shown = plan.display_indent()
    ranges = [(int(a), int(b)) for a, b in re.findall(r"object\.parquet:(\d+)\.\.(\d+)", shown)]
    # the display lists at most five groups; the rest are checked by the rows they read
    assert plan.partition_count == count and ranges == native_ranges(size, count)[:5]
    first_rows = [sum(metadata.row_group(g).num_rows for g in range(i)) for i in
                  range(metadata.num_row_groups)]
    for index, groups in enumerate(expected):
        got = [v for b in ctx.execute(plan, index) for v in b.to_pyarrow().column(0).to_pylist()]
        want = [v for g in groups
                for v in range(first_rows[g], first_rows[g] + metadata.row_group(g).num_rows)]
        assert got == want, (index, groups)


def test_partition_count_spreads_row_groups_that_equal_cuts_would_bunch() -> None:
    """tpchgen's sf 0.02 lineitem: two row groups, both starting in the first half."""
    table = NativeParquetTable(Path("lineitem.parquet"), 3_921_486, (4, 1_952_367))
    assert table.split(2) == [(0, 1), ()]
    assert table.partition_count(2) == 3 and table.split(3) == [(0,), (1,), ()]
    assert table.partition_count(1) == 1
    evenly = NativeParquetTable(Path("t.parquet"), 1000, (4, 250, 500, 750))
    assert evenly.partition_count(4) == 4  # already one row group per cut: kept
    # many row groups (a decoded-cache entry's): as many partitions as wanted, not twice
    many = NativeParquetTable(Path("m.parquet"), 40_000, tuple(4 + 1000 * i for i in range(40)))
    assert many.partition_count(8) == 8 and all(many.split(8))


# --------------------------------------------------------------------------- equivalence

QUERIES = (
    "select * from s3object",
    "select a, s from s3object where a % 3 = 1",
    "select s from s3object where s like 'x1%'",
    "select count(*), sum(a), max(s) from s3object",
    "select a from s3object limit 5",
    "select a from s3object where s is null",
)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(0, 2000), group_rows=st.integers(20, 700),
       partition_bytes=st.integers(2 << 10, 32 << 10), query=st.sampled_from(QUERIES),
       nulls=st.booleans(), dictionary=st.booleans())
def test_native_endpoints_give_every_record_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int, group_rows: int,
    partition_bytes: int, query: str, nulls: bool, dictionary: bool
) -> None:
    strings = [None if nulls and i % 5 == 0 else f"x{i * 7919 % 1000}" for i in range(rows)]
    source = _write(tmp_path / "object.parquet",
                    pa.table({"a": pa.array(range(rows), pa.int64()), "s": strings}),
                    row_group_size=group_rows, use_dictionary=dictionary)
    for partitions in ("whole", "each"):
        assert _same(source, query, partitions=partitions, partition_bytes=partition_bytes,
                     monkeypatch=monkeypatch) == "datafusion"


def test_endpoints_are_datafusion_partitions(tmp_path: Path) -> None:
    source = _write(tmp_path / "object.parquet",
                    pa.table({"a": range(50_000), "s": [str(i) for i in range(50_000)]}),
                    row_group_size=2000)
    engine = SelectEngine(EngineConfig(partition_bytes=64 << 10))
    plan = engine.plan("select a from s3object where a > 10", source, InputSpec("parquet"))
    groups = [p.partition.row_groups for p in plan.partitions]
    assert plan.reader == "datafusion" and len(groups) > 2
    assert [g for part in groups for g in part] == list(range(25))  # each once, in order


def _typed_table() -> pa.Table:
    return pa.table({
        "b": pa.array([True, None, False]),
        "i": pa.array([1, 2, None], pa.int32()),
        "f": pa.array([1.5, None, -0.0], pa.float32()),
        "d": pa.array([decimal.Decimal("1.20"), None, decimal.Decimal("-3.05")],
                      pa.decimal128(9, 2)),
        "ts": pa.array([1, 2, None], pa.timestamp("ms", tz="UTC")),
        "dt": pa.array([datetime.date(2020, 1, 1), None, datetime.date(1969, 12, 31)]),
        "s": ["a", None, "é"],
    })


@pytest.mark.parametrize("query", [
    "select * from s3object",
    "select d, ts, dt from s3object where i is not null",
    "select cast(d as float), f from s3object where b",
    "select count(*), sum(d), max(i), min(f) from s3object",
    "select avg(d), min(d), max(d) from s3object",
    "select d * i, d + 1, d + f, cast(d as decimal(4,1)) from s3object",
    "select s from s3object where d > 1.199 or d = -3.05",
    "select s from s3object where d between -3.051 and 1.2",
])
def test_typed_columns_read_the_same(tmp_path: Path, query: str) -> None:
    source = _write(tmp_path / "object.parquet", _typed_table())
    assert _same(source, query) == "datafusion"


def test_view_columns_are_read_natively_as_plain_strings(tmp_path: Path) -> None:
    """tpchgen writes string_view columns: DataFusion is told the plain types and casts."""
    table = pa.table({"a": range(100), "s": pa.array([f"v{i}" for i in range(100)],
                                                     pa.string_view())})
    source = _write(tmp_path / "object.parquet", table, row_group_size=10)
    assert pq.ParquetFile(source.path).schema_arrow.field("s").type == pa.string_view()
    for query in ("select * from s3object", "select a from s3object where s like 'v1%'",
                  "select count(*), max(s) from s3object"):
        assert _same(source, query) == "datafusion"


def test_other_types_in_datafusion_keep_the_reference_reader(tmp_path: Path) -> None:
    """INT96 timestamps: pyarrow reads nanoseconds, DataFusion the file's Arrow type."""
    source = _write(tmp_path / "object.parquet", _typed_table(),
                    use_deprecated_int96_timestamps=True)
    engine = SelectEngine(EngineConfig())
    plan = engine.plan("select ts from s3object", source, InputSpec("parquet"))
    assert plan.reader == "reference" and "ts (timestamp" in plan.native_reason
    assert _same(source, "select ts from s3object") == "reference"


@pytest.mark.parametrize("query", [
    "select s from s3object where f > 1.5",
    "select max(f), min(f) from s3object",
    "select s from s3object where f = f",
])
def test_nan_keeps_the_reference_reader(tmp_path: Path, query: str) -> None:
    """NaN > 1.5 is false to the reference (pyarrow) and true to DataFusion, and DataFusion's
    max from the footer leaves NaN out: a column holding NaN is not read natively."""
    floats = [1.0, float("nan"), 2.0, None, -0.0]
    source = _write(tmp_path / "object.parquet",
                    pa.table({"f": floats, "s": list("abcde")}))
    engine = SelectEngine(EngineConfig())
    plan = engine.plan(query, source, InputSpec("parquet"))
    assert plan.reader == "reference" and "f holds NaN" in plan.native_reason
    assert _same(source, query) == "reference"
    clean = _write(tmp_path / "clean.parquet",
                   pa.table({"f": [x for x in floats if x is None or not math.isnan(x)],
                             "s": list("abcd")}))
    assert _same(clean, query) == "datafusion"
    for _ in range(2):
        engine.plan(query + " limit 1", source, InputSpec("parquet"))
    assert engine.nan_surveys.surveys == 1  # once per object version


def test_limit_is_pushed_into_datafusions_parquet_scan(tmp_path: Path) -> None:
    """A LIMIT stops reading: the scan itself carries it (the row groups after it are never
    opened), and no sort or repartition sits above the scan."""
    source = _write(tmp_path / "object.parquet", pa.table({"a": range(10_000)}),
                    row_group_size=100)
    engine = SelectEngine(EngineConfig())
    plan = engine.plan("select a from s3object limit 3", source, InputSpec("parquet"))
    assert plan.native is not None
    ctx = SessionContext()
    plan.native.register(ctx, "s3object")
    shown = ctx.sql(plan.translation.sql).execution_plan().display_indent()
    assert re.search(r"DataSourceExec: .*limit=3", shown), shown
    assert _same(source, "select a from s3object limit 3") == "datafusion"


# --------------------------------------------------------------------------- through the server


@pytest.fixture(scope="module")
def native_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("native-data")
    (root / "bkt").mkdir()
    rows = 400_000
    pq.write_table(pa.table({"a": range(rows), "s": [f"x{i % 1013}" for i in range(rows)]}),
                   root / "bkt" / "rows.parquet", row_group_size=10_000)
    (root / "bkt" / "rows.csv.gz").write_bytes(
        gzip.compress(b"".join(b"%d,x%d\n" % (i, i % 1013) for i in range(rows))))
    server = start_server(root, "--partition-mb", "1")
    try:
        yield server
    finally:
        server.stop()


def test_server_endpoints_read_in_any_order_give_every_row_once(
    native_server: ServerProcess,
) -> None:
    from pyarrow import flight

    from tests.flight_storage.test_server_support import PARTITIONED, statement_descriptor

    client = flight.connect(native_server.location)
    info = client.get_flight_info(statement_descriptor(
        "SELECT a FROM \"bkt\".\"rows.parquet\" WHERE s <> 'x5'"), PARTITIONED)
    about = json.loads(info.app_metadata)
    assert about["reader"] == "datafusion" and about["endpoints"] == len(info.endpoints) > 2
    parts = {i: client.do_get(e.ticket).read_all()
             for i, e in reversed(list(enumerate(info.endpoints)))}
    got = [v for i in sorted(parts) for v in parts[i].column(0).to_pylist()]
    assert got == [i for i in range(400_000) if i % 1013 != 5]


def test_server_reads_gzip_csv_natively(native_server: ServerProcess) -> None:
    from pyarrow import flight

    from tests.flight_storage.test_server_support import statement_descriptor

    client = flight.connect(native_server.location)
    info = client.get_flight_info(statement_descriptor(
        "SELECT count(*) AS n, max(CAST(_1 AS INT)) AS m FROM \"bkt\".\"rows.csv.gz\" "
        "WHERE _2 = 'x7'"))
    # the server computes on every core it may use (no --cores given); the standard
    # flavour's LIMIT counts result rows
    assert json.loads(info.app_metadata) == {"reader": "datafusion", "endpoints": 1,
                                             "cores": usable_cores(),
                                             "limit_counts_input": False}
    result = client.do_get(info.endpoints[0].ticket).read_all().to_pylist()
    assert result == [{"n": len(range(7, 400_000, 1013)), "m": max(range(7, 400_000, 1013))}]


# --------------------------------------------------------------------------- late materialisation


def _bytes_read(pid: int) -> int:
    """Bytes process ``pid`` has read through system calls so far (``rchar``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/io has no rchar")


@pytest.fixture(scope="module")
def wide_server(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[ServerProcess, Path]]:
    """``needle.parquet``: one row group whose ``s`` matches ``'%needle%'`` on one row of
    200,000, beside a wide ``payload`` (a page index, 64 KiB pages, uncompressed);
    ``sorted.parquet``: ``t`` ascending over 20 row groups, beside a wide ``payload``."""
    if not Path("/proc/self/io").exists():
        pytest.skip("reads the server's I/O counters from /proc")
    root = tmp_path_factory.mktemp("wide-data")
    (root / "bkt").mkdir()
    rows = 200_000
    keys = [f"k{i % 997}" for i in range(rows)]
    keys[123_456] = "a needle here"
    pq.write_table(pa.table({"s": keys, "n": range(rows),
                             "payload": [f"x{i:07d}" * 12 for i in range(rows)]}),
                   root / "bkt" / "needle.parquet", row_group_size=rows, write_page_index=True,
                   data_page_size=64 << 10, compression="none")
    pq.write_table(pa.table({"t": range(rows),
                             "payload": [f"y{i:07d}" * 12 for i in range(rows)]}),
                   root / "bkt" / "sorted.parquet", row_group_size=rows // 20,
                   compression="none")
    server = start_server(root)
    try:
        yield server, root / "bkt"
    finally:
        server.stop()


def _read_twice(server: ServerProcess, statement: str) -> tuple[list[dict[str, Any]], int]:
    """The answer and the bytes the server read for the second of two runs (the first plans
    and fills the caches)."""
    from pyarrow import flight

    from tests.flight_storage.test_server_support import statement_descriptor

    client = flight.connect(server.location)
    try:
        for _ in range(2):
            before = _bytes_read(server.process.pid)
            info = client.get_flight_info(statement_descriptor(statement))
            assert json.loads(info.app_metadata)["reader"] == "datafusion"
            rows = [r for e in info.endpoints
                    for r in client.do_get(e.ticket).read_all().to_pylist()]
            read = _bytes_read(server.process.pid) - before
    finally:
        client.close()
    return rows, read


def test_server_filters_parquet_rows_while_decoding(
    wide_server: tuple[ServerProcess, Path],
) -> None:
    """Late materialisation (``pushdown_filters``): the server decodes the filter's column,
    then reads only the pages of the other columns that hold a matching row, not the 22 MB
    of ``payload``."""
    server, bucket = wide_server
    rows, read = _read_twice(server, 'SELECT n, payload FROM "bkt"."needle.parquet" '
                                     "WHERE s LIKE '%needle%'")
    assert rows == [{"n": 123_456, "payload": "x0123456" * 12}]
    size = (bucket / "needle.parquet").stat().st_size
    assert read < size / 4, (read, size)


def test_server_order_by_limit_is_a_topk_that_skips_row_groups(
    wide_server: tuple[ServerProcess, Path],
) -> None:
    """``ORDER BY … LIMIT`` on the standard surface runs as DataFusion's TopK, whose bound,
    pushed into the Parquet scan, skips the row groups that cannot hold a top row: the server
    reads about one row group of twenty, not the file (a full sort would read it all)."""
    server, bucket = wide_server
    rows, read = _read_twice(server, 'SELECT t, payload FROM "bkt"."sorted.parquet" '
                                     "ORDER BY t DESC LIMIT 10")
    assert [r["t"] for r in rows] == list(range(199_999, 199_989, -1))
    size = (bucket / "sorted.parquet").stat().st_size
    assert read < size / 4, (read, size)
