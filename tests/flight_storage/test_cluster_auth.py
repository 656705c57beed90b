"""A cluster with authentication: calls between nodes carry the caller's identity.

Two nodes share the ticket secret and the users file; ``logs`` lives on node c only, so a
query through node a is planned on c with the caller's identity (a bearer token node a
issues for that user, which c accepts because the secret is shared): alice may read logs,
bob may not, and c's log names the user and the forwarding node.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import adbc_driver_flightsql.dbapi as flightsql
import pytest

from compute_client.errors import ClientError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from flight_storage.rpc.auth import hash_password
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_server_support import free_port

QUERY = 'SELECT count(*) FROM "logs"."app.csv"'


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    root = tmp_path_factory.mktemp("cluster-auth")
    shutil.copytree(SAMPLES / "sales", root / "a" / "sales")
    (root / "c" / "logs").mkdir(parents=True)
    (root / "c" / "logs" / "app.csv").write_text("".join(f"{i},x\n" for i in range(100)))
    users = root / "users.json"
    users.write_text(json.dumps({"users": {
        "alice": {"password": hash_password("alice-pw"), "buckets": ["sales", "logs"]},
        "bob": {"password": hash_password("bob-pw"), "buckets": ["sales"]},
    }}))
    secret = root / "secret"
    secret.write_text("another-shared-secret-0123456789")
    addresses = {"a": "127.0.0.2", "c": "127.0.0.4"}
    document = {
        "nodes": [{"name": n, "location": f"grpc://{a}:{free_port(a)}"}
                  for n, a in addresses.items()],
        "holdings": [{"bucket": "sales", "nodes": ["a"]}, {"bucket": "logs", "nodes": ["c"]}],
    }
    cluster_file = root / "cluster.json"
    cluster_file.write_text(json.dumps(document))
    started: dict[str, ServerProcess] = {}
    try:
        for entry in document["nodes"]:
            name = entry["name"]
            started[name] = start_server(
                root / name, "--cluster", str(cluster_file), "--node", name, "--port",
                entry["location"].rsplit(":", 1)[1], "--ticket-secret-file", str(secret),
                "--auth", str(users))
        yield started
    finally:
        for process in started.values():
            process.stop()


def _client(location: str, user: str) -> FlightSelectClient:
    return FlightSelectClient(ConnectionOptions(location, username=user,
                                                password=f"{user}-pw", timeout_s=30))


def test_forwarded_planning_carries_the_callers_identity(
        nodes: dict[str, ServerProcess]) -> None:
    with _client(nodes["a"].location, "alice") as client:
        assert client.read_all(QUERY).column(0).to_pylist() == [100]
    lines = [json.loads(x) for x in nodes["c"].log_lines if x.startswith("{")]
    assert any(x.get("forwarded_by") == "a" and x.get("user") == "alice"
               and x.get("object") == "logs/app.csv" for x in lines)


def test_a_user_refused_by_the_owner_is_refused_through_any_node(
        nodes: dict[str, ServerProcess]) -> None:
    with _client(nodes["a"].location, "bob") as client, pytest.raises(ClientError) as refused:
        client.read_all(QUERY)
    assert "AccessDenied" in str(refused.value) and "bob" in str(refused.value)


def test_catalog_merges_only_what_the_user_may_read(nodes: dict[str, ServerProcess]) -> None:
    with _client(nodes["a"].location, "alice") as alice, \
            _client(nodes["a"].location, "bob") as bob:
        assert alice.list_buckets() == ["logs", "sales"]
        assert bob.list_buckets() == ["sales"]
        assert [o.key for o in alice.list_objects_page("logs").objects] == ["app.csv"]


def test_adbc_with_a_password_reads_endpoints_on_other_nodes(
        nodes: dict[str, ServerProcess]) -> None:
    """The driver logs in at the node it connects to, then reads each endpoint at its
    location (node c) with the same token: nodes sharing the secret accept it."""
    with flightsql.connect(nodes["a"].location, db_kwargs={
            "username": "alice", "password": "alice-pw"}) as conn, conn.cursor() as cursor:
        cursor.execute(QUERY)
        assert cursor.fetchall() == [(100,)]
