"""A cluster with authentication: calls between nodes carry the caller's identity.

Two nodes share the ticket secret and the users file; ``logs`` lives on node c only, so a
query through node a is planned on c with the caller's identity (a bearer token node a
issues for that user, which c accepts because the secret is shared): alice may read logs,
bob may not, and c's log names the user and the forwarding node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import adbc_driver_flightsql.dbapi as flightsql
import pytest

from compute_client.errors import ClientError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from flight_storage.rpc.auth import hash_password
from tests.conftest import ROOT, SAMPLES, ServerProcess, start_server
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
        "peer_check_s": 1,
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


def _log(process: ServerProcess) -> list[dict[str, object]]:
    return [json.loads(x) for x in list(process.log_lines) if x.startswith("{")]


def test_peer_health_checks_authenticate(nodes: dict[str, ServerProcess]) -> None:
    """Each node checks its peers' health at start and every peer_check_s: as a node of the
    cluster (a token only holders of the shared secret can make), never as an
    unauthenticated call in the peer's log."""
    def up_checks(process: ServerProcess) -> list[dict[str, object]]:
        return [x for x in _log(process) if x.get("event") == "peer_check" and x["up"]]

    deadline = time.monotonic() + 30  # the first check may find the peer not started yet
    while time.monotonic() < deadline and not all(len(up_checks(p)) >= 2
                                                  for p in nodes.values()):
        time.sleep(0.2)
    time.sleep(1)  # the checked node writes its call line as the call completes
    for name, process in nodes.items():
        checks = up_checks(process)
        assert len(checks) >= 2 and all(x["detail"] == "ok" for x in checks), checks
        calls = [x for x in _log(process) if x.get("event") == "call"]
        assert not [x for x in calls if x.get("status") == "unauthenticated"], name
        other = "c" if name == "a" else "a"
        assert any(x.get("action") == "health" and x.get("user") == f"node {other}"
                   for x in calls), name


def _status(nodes: dict[str, ServerProcess], *user: str,
            password: str = "") -> subprocess.CompletedProcess[str]:
    cluster_file = nodes["a"].process.args[nodes["a"].process.args.index("--cluster") + 1]
    return subprocess.run(
        [sys.executable, "-m", "flight_storage", "cluster", "status", "--cluster",
         cluster_file, "--json", *user], capture_output=True, text=True, cwd=ROOT,
        timeout=120, env={**os.environ, "FLIGHT_SELECT_PASSWORD": password})


def test_cluster_status_without_a_user_reports_nodes_up_and_names_the_option(
        nodes: dict[str, ServerProcess]) -> None:
    result = _status(nodes)
    assert result.returncode == 2, result.stderr  # incomplete, not a node down
    states = {n["node"]: n for n in json.loads(result.stdout)}
    assert all(s["up"] and "--user" in s["error"] and s["objects"] is None
               for s in states.values()), states
    wrong = {n["node"]: n for n in json.loads(
        _status(nodes, "--user", "alice", password="not-hers").stdout)}
    assert all(s["up"] and "FLIGHT_SELECT_PASSWORD" in s["error"] for s in wrong.values())
    right = {n["node"]: n for n in json.loads(
        _status(nodes, "--user", "alice", password="alice-pw").stdout)}
    assert right["c"]["objects"] == 1 and "error" not in right["c"], right
