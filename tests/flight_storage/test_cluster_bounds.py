"""Calls between nodes are bounded: a node that accepts connections but never answers is
named in the error once the bound passes, and the planning node stays responsive."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator

import pytest

from compute_client.errors import ClientError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_server_support import free_port


@pytest.fixture(scope="module")
def hung_peer() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on: TCP connects, gRPC never gets an answer."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.4", 0))
        listener.listen(16)
        yield listener


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory,
         hung_peer: socket.socket) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("cluster-bounds")
    shutil.copytree(SAMPLES / "sales", root / "a" / "sales")
    secret = root / "secret"
    secret.write_text("a-third-shared-secret-0123456789")
    port = free_port("127.0.0.2")
    hung = f"grpc://127.0.0.4:{hung_peer.getsockname()[1]}"
    cluster_file = root / "cluster.json"
    cluster_file.write_text(json.dumps({
        "nodes": [{"name": "a", "location": f"grpc://127.0.0.2:{port}"},
                  {"name": "h", "location": hung}],
        "holdings": [{"bucket": "sales", "nodes": ["a"]}, {"bucket": "stuck", "nodes": ["h"]}],
        "peer_timeout_s": 1,
    }))
    process = start_server(root / "a", "--cluster", str(cluster_file), "--node", "a",
                           "--port", str(port), "--ticket-secret-file", str(secret),
                           "--query-timeout", "2")
    yield process
    process.stop()


def test_a_peer_that_never_answers_is_named_after_the_bound(
        node: ServerProcess, hung_peer: socket.socket) -> None:
    # the client waits up to 60 s: it gets NodeUnavailable, not its own deadline, because
    # the node's bound (query timeout 2 s + peer timeout 1 s) passes first
    with FlightSelectClient(ConnectionOptions(node.location, timeout_s=60)) as client, \
            pytest.raises(ClientError) as failed:
        client.read_all('SELECT * FROM "stuck"."x.csv"')
    message = str(failed.value)
    assert "NodeUnavailable" in message and "stuck/x.csv" in message
    assert f"h (grpc://127.0.0.4:{hung_peer.getsockname()[1]})" in message


def test_the_planning_node_still_serves_its_own_data_and_catalog(node: ServerProcess) -> None:
    with FlightSelectClient(ConnectionOptions(node.location, timeout_s=60)) as client:
        assert client.read_all('SELECT count(*) FROM "sales"."orders/2024-01.csv"').num_rows == 1
        assert "sales" in client.list_buckets()
