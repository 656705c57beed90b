"""A stateless fleet over one real object store (SeaweedFS): any node plans, every endpoint
names every node in rendezvous order, any node serves any ticket, and a node killed mid-stream
costs one retry: every row once (docs/cluster.md, "A fleet")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import ServerProcess, start_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    free_port,
    statement_descriptor,
    wait_for_event,
)
from tests.seaweedfs import SeaweedFS

pytestmark = pytest.mark.reliability

ROWS = 1_000_000
ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4"}


@dataclass
class Fleet:
    bucket: str
    processes: dict[str, ServerProcess]
    locations: dict[str, str]

    @property
    def sql(self) -> str:
        return f'SELECT * FROM "{self.bucket}"."rows.csv"'


@pytest.fixture(scope="module")
def fleet_bucket(seaweedfs: SeaweedFS) -> str:
    bucket = seaweedfs.new_bucket("fleet")
    seaweedfs.client().put_object(Bucket=bucket, Key="rows.csv", Body="".join(
        f"{i},{i % 7},padding padding padding padding {i:08d}\n" for i in range(ROWS)).encode())
    return bucket


def _start(seaweedfs: SeaweedFS, bucket: str, tmp_path: Path, names: list[str]) -> Fleet:
    locations = {n: f"grpc://{ADDRESSES[n]}:{free_port(ADDRESSES[n])}" for n in names}
    fleet_file = tmp_path / "fleet.json"
    fleet_file.write_text(json.dumps({
        "nodes": [{"name": n, "location": loc} for n, loc in locations.items()],
        "peer_timeout_s": 5, "peer_check_s": 1}))
    secret = tmp_path / "secret"
    secret.write_text("a-shared-secret-of-32-characters")
    processes: dict[str, ServerProcess] = {}
    try:
        for name, location in locations.items():
            processes[name] = start_server(
                f"s3://{bucket}", "--cluster", str(fleet_file), "--node", name,
                "--port", location.rsplit(":", 1)[1], "--ticket-secret-file", str(secret),
                "--partition-mb", "8", env=seaweedfs.env())
        for name, process in processes.items():  # each node has seen the others up
            for other in processes:
                if other != name:
                    wait_for_event(process, event="peer_check", peer=other, up=True)
    except BaseException:
        for process in processes.values():
            process.stop()
        raise
    return Fleet(bucket, processes, locations)


@pytest.fixture()
def fleet(seaweedfs: SeaweedFS, fleet_bucket: str, tmp_path: Path) -> Iterator[Fleet]:
    started = _start(seaweedfs, fleet_bucket, tmp_path, ["a", "b", "c"])
    try:
        yield started
    finally:
        for process in started.processes.values():
            if process.process.poll() is None:
                process.stop()


def _ids(batches: list[pa.RecordBatch]) -> list[int]:
    return [int(v) for b in batches for v in b.column(0).to_pylist()]


def test_every_endpoint_names_every_node_in_rendezvous_order(fleet: Fleet) -> None:
    client = flight.connect(fleet.locations["c"])
    info = client.get_flight_info(statement_descriptor(fleet.sql), PARTITIONED)
    assert len(info.endpoints) >= 4
    orders = [[loc.uri.decode() for loc in e.locations] for e in info.endpoints]
    assert all(sorted(o) == sorted(fleet.locations.values()) for o in orders)
    assert len({o[0] for o in orders}) > 1  # the endpoints are spread over the nodes
    again = flight.connect(fleet.locations["a"]).get_flight_info(
        statement_descriptor(fleet.sql), PARTITIONED)
    assert [[loc.uri.decode() for loc in e.locations] for e in again.endpoints] == orders
    # any node serves any ticket
    rows = 0
    for endpoint in info.endpoints:
        for location in endpoint.locations:
            rows_here = flight.connect(location).do_get(endpoint.ticket).read_all().num_rows
            assert rows_here > 0
        rows += rows_here
    assert rows == ROWS


def test_adbc_reads_a_fleet_at_each_endpoints_node(fleet: Fleet) -> None:
    with flightsql.connect(fleet.locations["b"], autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute(f"SELECT count(*) AS n, max(CAST(_1 AS INT)) AS m "
                    f"FROM \"{fleet.bucket}\".\"rows.csv\"")
        assert cur.fetchall() == [(ROWS, ROWS - 1)]
        cur.execute(f"{fleet.sql} WHERE _2 = '3'")
        assert cur.fetch_arrow_table().num_rows == (ROWS + 3) // 7


def test_killing_a_node_mid_stream_reads_every_row_once(fleet: Fleet) -> None:
    options = ConnectionOptions(fleet.locations["a"], timeout_s=120, stall_timeout_s=10)
    with FlightSelectClient(options) as client:
        plan = client.execute(fleet.sql)
        first_node = plan.endpoints[0].locations[0]
        victim = next(n for n, loc in fleet.locations.items() if loc == first_node)
        stream = client.read(plan.endpoints[0])
        batches = [next(stream)]
        fleet.processes[victim].process.kill()  # its stream is open
        fleet.processes[victim].process.wait(10)
        batches.extend(stream)
        for endpoint in plan.endpoints[1:]:
            batches.extend(client.read(endpoint))
    assert _ids(batches) == list(range(ROWS))


@pytest.mark.parametrize("size", [1, 2])
def test_fleets_of_any_size_give_equal_answers(seaweedfs: SeaweedFS, fleet_bucket: str,
                                               tmp_path: Path, size: int) -> None:
    smaller = _start(seaweedfs, fleet_bucket, tmp_path, ["a", "b", "c"][:size])
    try:
        sql = (f'SELECT _2, count(*) AS n FROM "{fleet_bucket}"."rows.csv" GROUP BY _2 '
               "ORDER BY _2")
        with flightsql.connect(next(iter(smaller.locations.values())), autocommit=True) as conn, \
                conn.cursor() as cur:
            cur.execute(sql)
            assert cur.fetchall() == [(str(k), len(range(k, ROWS, 7))) for k in range(7)]
    finally:
        for process in smaller.processes.values():
            process.stop()


def test_cluster_status_covers_a_fleet(fleet: Fleet, tmp_path: Path) -> None:
    import subprocess
    import sys

    fleet_file = tmp_path / "fleet.json"
    shown = subprocess.run([sys.executable, "-m", "flight_storage", "cluster", "status",
                            "--cluster", str(fleet_file), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    nodes = json.loads(shown.stdout)
    assert [n["node"] for n in nodes] == ["a", "b", "c"]
    assert all(n["up"] and n["serves"] == "the shared store" and n["buckets"] == 1
               for n in nodes), nodes
    fleet.processes["b"].process.kill()
    fleet.processes["b"].process.wait(10)
    table = subprocess.run([sys.executable, "-m", "flight_storage", "cluster", "status",
                            "--cluster", str(fleet_file)], capture_output=True, text=True,
                           timeout=120)
    assert table.returncode == 1  # a node is down
    lines = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert "DOWN" in lines["b"] and "shared" in lines["a"], table.stdout
