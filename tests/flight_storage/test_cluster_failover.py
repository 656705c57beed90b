"""A node of a real cluster killed mid-query: the reader falls over to the replica and the
answer equals one server's (issue #15's "Done when").

Nodes a (owner) and b (replica) hold bucket ``big``; node c holds nothing of it and plans.
The object is large enough (tens of MB of Arrow per endpoint) that its streams are still
open on node a when a is killed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from compute_client.errors import ClientError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import ServerProcess, start_server
from tests.flight_storage.test_server_support import free_port, partition_do_gets

ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4"}
ROWS = 1_000_000
SQL = 'SELECT * FROM "big"."rows.csv"'


@dataclass
class Nodes:
    processes: dict[str, ServerProcess]
    locations: dict[str, str]
    reference: ServerProcess


@pytest.fixture()
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    data = tmp_path / "all" / "big"
    data.mkdir(parents=True)
    (data / "rows.csv").write_text(
        "".join(f"{i},{i % 7},padding padding padding padding {i:08d}\n" for i in range(ROWS)))
    for node in ("a", "b"):
        shutil.copytree(tmp_path / "all", tmp_path / node)
    (tmp_path / "c").mkdir()
    locations = {n: f"grpc://{a}:{free_port(a)}" for n, a in ADDRESSES.items()}
    cluster_file = tmp_path / "cluster.json"
    cluster_file.write_text(json.dumps({
        "nodes": [{"name": n, "location": loc} for n, loc in locations.items()],
        "holdings": [{"bucket": "big", "nodes": ["a", "b"]}],
        "peer_timeout_s": 5, "peer_check_s": 1}))
    secret = tmp_path / "secret"
    secret.write_text("a-shared-secret-of-32-characters")
    common = ("--ticket-secret-file", str(secret))
    processes: dict[str, ServerProcess] = {}
    reference = start_server(tmp_path / "all", *common)
    try:
        for name, location in locations.items():
            processes[name] = start_server(
                tmp_path / name, "--cluster", str(cluster_file), "--node", name,
                "--port", location.rsplit(":", 1)[1], *common)
        yield Nodes(processes, locations, reference)
    finally:
        for process in processes.values():
            if process.process.poll() is None:
                process.stop()
        reference.stop()


def _ids(batches: list[pa.RecordBatch]) -> list[int]:
    return [int(v) for b in batches for v in b.column(0).to_pylist()]


def test_killing_the_owner_mid_query_falls_over_to_the_replica(nodes: Nodes) -> None:
    with FlightSelectClient(ConnectionOptions(nodes.reference.location, timeout_s=120)) as one:
        expected = _ids(one.read_all(SQL).to_batches())
    assert expected == list(range(ROWS))
    options = ConnectionOptions(nodes.locations["c"], timeout_s=120, stall_timeout_s=10)
    with FlightSelectClient(options) as client:
        plan = client.execute(SQL)
        assert all(e.locations[:2] == (nodes.locations["a"], nodes.locations["b"])
                   for e in plan.endpoints)
        first = client.read(plan.endpoints[0])
        batches = [next(first)]
        nodes.processes["a"].process.kill()  # the owner dies with its stream open
        nodes.processes["a"].process.wait(10)
        batches.extend(first)
        for endpoint in plan.endpoints[1:]:
            batches.extend(client.read(endpoint))
    assert _ids(batches) == expected  # every row once, in order: the replica resumed
    assert partition_do_gets(nodes.processes["b"], "big/rows.csv") >= 1  # the replica served it


def test_without_a_live_holder_the_error_names_the_endpoint_and_the_nodes(nodes: Nodes) -> None:
    options = ConnectionOptions(nodes.locations["c"], timeout_s=60, stall_timeout_s=10)
    with FlightSelectClient(options) as client:
        plan = client.execute(SQL)
        for node in ("a", "b"):
            nodes.processes[node].process.kill()
            nodes.processes[node].process.wait(10)
        with pytest.raises(ClientError) as info:
            list(client.read(plan.endpoints[0]))
    message = str(info.value)
    assert "endpoint #0" in message, message
    assert nodes.locations["a"] in message and nodes.locations["b"] in message, message


def test_a_replica_whose_copy_differs_is_refused_naming_both_nodes(nodes: Nodes,
                                                                   tmp_path: Path) -> None:
    """Replica b's copy has other bytes but the owner's size and modification time (what
    ``cp -p`` or ``rsync -t`` of a divergent file leaves): a stream resumed there must fail
    with PreconditionFailed naming both nodes, never continue with b's rows."""
    copy = tmp_path / "b" / "big" / "rows.csv"
    before = copy.stat()
    data = bytearray(copy.read_bytes())
    middle = len(data) // 2
    data[middle:middle + (4 << 20)] = bytes(
        b if b in b",\n" else ord("9") for b in data[middle:middle + (4 << 20)])
    copy.write_bytes(bytes(data))
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    options = ConnectionOptions(nodes.locations["c"], timeout_s=120, stall_timeout_s=10)
    with FlightSelectClient(options) as client:
        plan = client.execute(SQL)
        first = client.read(plan.endpoints[0])
        batches = [next(first)]
        nodes.processes["a"].process.kill()
        nodes.processes["a"].process.wait(10)
        with pytest.raises(ClientError) as info:
            batches.extend(first)
            for endpoint in plan.endpoints[1:]:
                batches.extend(client.read(endpoint))
    message = str(info.value)
    assert "PreconditionFailed" in message, message
    assert "node b" in message and "node a" in message, message
