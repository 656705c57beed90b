"""Endpoints sized by work (issue 37): an object is cut into one byte range per core only while
each range keeps ``endpoint_min_bytes``, so a range's fixed cost (a DoGet, a plan, a stream)
stays small beside the engine's work on it; a smaller object is one endpoint, read on every core
when its statement asks for no order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compute_client.errors import RemoteQueryError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from flight_storage import protocol
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.protocol import ByteRange
from flight_storage.storage.sources import FileSource
from tests.conftest import ServerProcess, running_server

MIB = 1 << 20


@pytest.mark.parametrize(("size", "cores", "ranges"), [
    (100 * MIB, 16, 1),      # 16 ranges of 6 MiB would cost more than they save
    (130 * MIB, 16, 2),      # two ranges of 65 MiB; the 128 MiB cap alone would also make 2
    (1024 * MIB, 16, 16),    # 16 ranges of 64 MiB: one per core
    (1024 * MIB, 64, 16),    # 64 cores: still no range under 64 MiB
    (4096 * MIB, 16, 32),    # over partition_bytes: full waves of 16
    (215 * MIB, 2, 2),
    (30 * MIB, 2, 1),
])
def test_ranges_keep_enough_work(size: int, cores: int, ranges: int) -> None:
    assert SelectEngine(EngineConfig(cores=cores)).range_count(size) == ranges


def test_endpoint_minimum_is_a_setting() -> None:
    engine = SelectEngine(EngineConfig(cores=16, endpoint_min_bytes=4 * MIB))
    assert engine.range_count(100 * MIB) == 16


def test_one_endpoint_reads_its_ranges_at_once_in_record_order(tmp_path: Path) -> None:
    """One endpoint over a CSV of several DataFusion ranges (four cores): every record once,
    in the object's order, whether the ranges run one by one or at once."""
    path = tmp_path / "rows.csv"
    path.write_text("".join(f"{i},{'x' * (i % 7)}\n" for i in range(600_000)))
    source = FileSource(path, path.name, path.stat().st_size)
    expected = [str(i) for i in range(600_000) if i % 7 != 3]
    for cores in (1, 4):
        engine = SelectEngine(EngineConfig(cores=cores))
        plan = engine.plan("SELECT _1 FROM s3object WHERE _2 <> 'xxx'", source,
                           InputSpec("csv"), flavor="standard")
        assert [v for b in engine.execute(plan) for v in b.column(0).to_pylist()] == expected


def test_in_order_stops_its_producers_and_raises_in_turn() -> None:
    from flight_storage.execution.in_order import in_order

    def failing() -> Iterator[int]:
        yield 10
        raise ValueError("third range broke")

    merged = in_order([lambda: iter(range(5)), failing, lambda: iter(range(100, 200))])
    assert [next(merged) for _ in range(6)] == [0, 1, 2, 3, 4, 10]
    with pytest.raises(ValueError, match="third range"):
        next(merged)
    endless = in_order([lambda: iter(range(10**9)), lambda: iter(range(10**9))], depth=2)
    assert next(endless) == 0
    endless.close()  # the producers see the stop and end (daemon threads, bounded queues)


# ------------------------------------------------------------------ asked-for parallelism
# A client with more workers than the data justifies (Spark with many executors) asks for N
# endpoints with ``x-flight-select-parallelism``: ranges of at least the 1 MiB split floor, up
# to N (capped by --max-parallelism), never fewer than without it.


@pytest.mark.parametrize(("size", "cores", "wanted", "ranges"), [
    (12 * MIB, 2, None, 1),       # by work: under --endpoint-min-mb, one endpoint
    (12 * MIB, 2, 4, 4),
    (12 * MIB, 2, 100, 12),       # no range under the 1 MiB floor
    (MIB + MIB // 2, 2, 8, 1),    # too small to cut at all
    (1024 * MIB, 16, 4, 16),      # asking for fewer never merges what work would cut
    (1024 * MIB, 16, 64, 64),
    (100 * MIB, 16, 1000, 100),   # the floor again, under the default cap
])
def test_asked_parallelism_cuts_down_to_the_split_floor(size: int, cores: int,
                                                        wanted: int | None, ranges: int) -> None:
    assert SelectEngine(EngineConfig(cores=cores)).range_count(size, wanted) == ranges


def test_asked_parallelism_is_capped_by_the_server() -> None:
    engine = SelectEngine(EngineConfig(cores=2, max_parallelism=8))
    assert engine.range_count(100 * MIB, 64) == 8


def _rows_csv(path: Path, rows: int) -> FileSource:
    from tests.flight_storage.test_server_support import write_rows

    write_rows(path, rows)  # ids 0..rows-1 in order, about 20 bytes a record
    return FileSource(path, path.name, path.stat().st_size)


def test_asked_ranges_are_datafusions_partitions_and_keep_every_row_once(tmp_path: Path
                                                                          ) -> None:
    """Planned with a wish of 4 (as GetFlightInfo plans it, and DoGet again from the ticket):
    four byte ranges, each served by DataFusion's one physical plan of four partitions (not
    the reference reader), whose rows in endpoint order are the object's rows, each once."""
    source = _rows_csv(tmp_path / "rows.csv", 400_000)
    engine = SelectEngine(EngineConfig(cores=2))
    query = "SELECT _1 FROM s3object WHERE _2 <> 'name3'"
    whole = engine.plan(query, source, InputSpec("csv"), flavor="standard")
    asked = engine.plan(query, source, InputSpec("csv"), flavor="standard", parallelism=4)
    assert len(whole.partitions) == 1
    assert all(isinstance(p.partition, ByteRange) for p in asked.partitions)
    assert len(asked.partitions) == 4
    assert asked.reader == "datafusion"
    expected = [v for b in engine.execute(whole) for v in b.column(0).to_pylist()]
    assert expected == [str(i) for i in range(400_000) if i % 97 != 3]
    made = engine.partition_plans_made
    got = []
    for planned in asked.partitions:
        again = engine.plan(query, source, InputSpec("csv"), flavor="standard", parallelism=4)
        got += [v for b in engine.execute(again, [planned.partition])
                for v in b.column(0).to_pylist()]
    assert got == expected
    assert engine.partition_plans_made == made + 1


def _write_parquet(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [str(i) for i in range(rows)],
                             "name": [f"name{i % 97}" for i in range(rows)]}),
                   path, row_group_size=rows // 16, compression="none", use_dictionary=False)


def _write_json_lines(path: Path, rows: int) -> None:
    path.write_text("".join(f'{{"id": {i}, "name": "name{i % 97}"}}\n' for i in range(rows)))


@pytest.mark.parametrize(("write", "input", "wanted", "endpoints"), [
    (_write_parquet, InputSpec("parquet"), 3, 3),     # groups of its 16 row groups
    (_write_json_lines, InputSpec("json", options={"Type": "LINES"}), 6, 6),
], ids=["parquet", "json-lines"])
def test_asked_endpoints_of_parquet_and_json_lines(tmp_path: Path, write: Any,
                                                   input: InputSpec, wanted: int,
                                                   endpoints: int) -> None:
    path = tmp_path / "rows"
    write(path, 200_000)
    source = FileSource(path, path.name, path.stat().st_size)
    assert source.size > wanted * MIB
    engine = SelectEngine(EngineConfig(cores=2))
    query = "SELECT s.id FROM s3object s WHERE s.name <> 'name3'"
    assert len(engine.plan(query, source, input, flavor="standard").partitions) == 1
    asked = engine.plan(query, source, input, flavor="standard", parallelism=wanted)
    assert len(asked.partitions) == endpoints
    got = [v for p in asked.partitions
           for b in engine.execute(engine.plan(query, source, input, flavor="standard",
                                               parallelism=wanted), [p.partition])
           for v in b.column(0).to_pylist()]
    assert got == [str(i) for i in range(200_000) if i % 97 != 3]


@pytest.fixture(scope="module")
def rows_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server (default --endpoint-min-mb) over ``b/rows.csv``: 600,000 records, about
    12 MiB, under the 64 MiB an endpoint keeps by default."""
    root = tmp_path_factory.mktemp("parallelism")
    _rows_csv(root / "b" / "rows.csv", ROWS)
    with running_server(root) as server:
        yield server


ROWS = 600_000
QUERY = "SELECT _1, _3 FROM \"b\".\"rows.csv\" WHERE _2 <> 'name3'"


def _read(server: ServerProcess, **options: Any) -> tuple[int, list[tuple[str, str]]]:
    """The endpoints of QUERY and its rows, endpoint after endpoint (each read through its
    own ticket, with no parallelism header on the DoGet)."""
    with FlightSelectClient(ConnectionOptions(server.location, **options)) as client:
        plan = client.execute(QUERY)
    rows: list[tuple[str, str]] = []
    with FlightSelectClient(ConnectionOptions(server.location)) as reader:
        for endpoint in plan.endpoints:
            for batch in reader.read(endpoint):
                rows += zip(*(c.to_pylist() for c in batch.columns), strict=True)
    return len(plan.endpoints), rows


def test_a_client_gets_the_endpoints_it_asks_for(rows_server: ServerProcess) -> None:
    """By default the 12 MiB object is one endpoint; asking for 4 (5, 7) makes that many,
    whose rows in endpoint order are the single endpoint's answer; a single endpoint ignores
    the wish."""
    endpoints, single = _read(rows_server)
    assert endpoints == 1
    assert [int(i) for i, _ in single] == [i for i in range(ROWS) if i % 97 != 3]
    for wanted in (4, 5, 7):
        endpoints, rows = _read(rows_server, parallelism=wanted)
        assert endpoints == wanted
        assert rows == single
    alone = {protocol.ENDPOINTS_HEADER: protocol.ENDPOINTS_SINGLE}
    assert _read(rows_server, parallelism=4, headers=alone) == (1, single)


@pytest.mark.parametrize("bad", ["0", "-3", "two", "2.5", "1e3", ""])
def test_a_bad_parallelism_is_refused_by_name(rows_server: ServerProcess, bad: str) -> None:
    headers = {protocol.PARALLELISM_HEADER: bad}
    with FlightSelectClient(ConnectionOptions(rows_server.location, headers=headers)) as client:
        with pytest.raises(RemoteQueryError) as caught:
            client.execute(QUERY)
    assert caught.value.code == "InvalidRequest"
    assert protocol.PARALLELISM_HEADER in caught.value.message
    assert "whole number >= 1" in caught.value.message


def test_the_client_refuses_a_parallelism_under_one() -> None:
    with pytest.raises(ValueError, match="parallelism"):
        ConnectionOptions("grpc://127.0.0.1:1", parallelism=0)


def test_the_wish_counts_only_where_each_partition_is_an_endpoint() -> None:
    from flight_storage.rpc.endpoint_readers import choose_endpoints

    wish = {protocol.PARALLELISM_HEADER: [" 12 "]}
    adbc = {"user-agent": ["ADBC Flight SQL Driver v1.13.0 grpc-go/1.84.0"], **wish}
    assert choose_endpoints(adbc).parallelism == 12
    partitioned = {protocol.ENDPOINTS_HEADER: [protocol.ENDPOINTS_PARTITIONED], **wish}
    assert choose_endpoints(partitioned).parallelism == 12
    single = {protocol.ENDPOINTS_HEADER: [protocol.ENDPOINTS_SINGLE], **wish}
    assert choose_endpoints(single).parallelism is None
    assert choose_endpoints({"user-agent": ["grpc-c++/1.81.1"], **wish}).parallelism is None
    huge = {**partitioned, protocol.PARALLELISM_HEADER: ["9" * 40]}
    assert choose_endpoints(huge).parallelism == 10**18  # the engine caps it


def test_adbc_asks_with_a_call_header(rows_server: ServerProcess) -> None:
    """ADBC, which reads every endpoint (known by its user agent), asks through its call-header
    option: its prepared statement gets the endpoints asked for, each partition readable on
    its own, and ``cursor.execute`` reads them all (every record once)."""
    import adbc_driver_flightsql.dbapi as flightsql

    header = f"adbc.flight.sql.rpc.call_header.{protocol.PARALLELISM_HEADER}"
    with flightsql.connect(rows_server.location, db_kwargs={header: "3"}) as conn, \
            conn.cursor() as cur:
        partitions, _ = cur.adbc_execute_partitions(QUERY)
        cur.execute(QUERY)
        table = cur.fetch_arrow_table()
    assert len(partitions) == 3
    ids = sorted(int(i) for i in table.column(0).to_pylist())
    assert ids == [i for i in range(ROWS) if i % 97 != 3]
