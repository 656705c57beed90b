"""The cluster file: what it says, and the errors naming the field that is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flight_storage.storage.cluster import ClusterDescription, ClusterFileError

ROOT = Path(__file__).resolve().parents[2]


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "nodes": [
            {"name": "a", "location": "grpc://127.0.0.2:7001", "host": "worker-1"},
            {"name": "b", "location": "grpc://127.0.0.3:7001"},
            {"name": "c", "location": "grpc+tls://127.0.0.4:7001"},
        ],
        "holdings": [
            {"bucket": "sales", "nodes": ["a", "b"]},
            {"bucket": "metrics", "prefix": "2024/", "nodes": ["a"]},
            {"bucket": "metrics", "prefix": "2025/", "nodes": ["c", "b"]},
        ],
    }
    document.update(changes)
    return document


def _parse(document: Any) -> ClusterDescription:
    return ClusterDescription.parse(json.dumps(document), "cluster.json")


def test_a_valid_file_says_who_holds_what() -> None:
    cluster = _parse(_document(peer_timeout_s=2))
    assert list(cluster.nodes) == ["a", "b", "c"]
    assert cluster.nodes["a"].host == "worker-1"
    assert (cluster.nodes["c"].bind_host, cluster.nodes["c"].port) == ("127.0.0.4", 7001)
    assert cluster.peer_timeout_s == 2.0
    sales = cluster.holding("sales", "orders/2024-01.csv")
    assert sales is not None and sales.owner == "a" and sales.nodes == ("a", "b")
    assert cluster.holding("metrics", "2025/x.csv") == cluster.holdings[2]
    assert cluster.holding("metrics", "2023/x.csv") is None
    assert cluster.holding("nobody", "k") is None
    assert cluster.holdings_under("metrics", "") == list(cluster.holdings[1:])
    assert cluster.holdings_under("metrics", "2024/01/") == [cluster.holdings[1]]
    assert cluster.buckets() == ["metrics", "sales"]
    assert cluster.locations(cluster.holdings[2]) == ["grpc+tls://127.0.0.4:7001",
                                                      "grpc://127.0.0.3:7001"]
    assert [h.describe() for h in cluster.holdings_of("b")] == ["sales", "metrics/2025/"]


BAD_FILES: list[tuple[str, Any, str]] = [
    ("not an object", [], "expected a JSON object"),
    ("unknown top field", _document(replicas=2), "unknown field 'replicas'"),
    ("no nodes", _document(nodes=[]), "nodes: expected a non-empty list"),
    ("no holdings", _document(holdings=None), "holdings: expected a non-empty list"),
    ("duplicate node", _document(nodes=[{"name": "a", "location": "grpc://h:1"},
                                        {"name": "a", "location": "grpc://h:2"}]),
     "nodes[1].name: duplicate node name 'a'"),
    ("duplicate location", _document(nodes=[{"name": "a", "location": "grpc://h:1"},
                                            {"name": "b", "location": "grpc://h:1"}]),
     "nodes[1].location: grpc://h:1 is also node 'a'"),
    ("port 0", _document(nodes=[{"name": "a", "location": "grpc://h:0"}]),
     "nodes[0].location: 'grpc://h:0' is not"),
    ("http location", _document(nodes=[{"name": "a", "location": "http://h:1"}]),
     "nodes[0].location"),
    ("node without name", _document(nodes=[{"location": "grpc://h:1"}]),
     "nodes[0].name: expected a non-empty string"),
    ("unknown node field", _document(nodes=[{"name": "a", "location": "grpc://h:1",
                                             "rack": 3}]), "nodes[0]: unknown field 'rack'"),
    ("unknown node in holding", _document(holdings=[{"bucket": "s", "nodes": ["a", "z"]}]),
     "holdings[0].nodes[1]: unknown node 'z' (nodes: a, b, c)"),
    ("bucket held by nobody", _document(holdings=[{"bucket": "s", "nodes": []}]),
     "holdings[0].nodes: bucket 's' is held by nobody"),
    ("node listed twice", _document(holdings=[{"bucket": "s", "nodes": ["a", "a"]}]),
     "holdings[0].nodes: a node is listed twice"),
    ("bad bucket", _document(holdings=[{"bucket": "s/t", "nodes": ["a"]}]),
     "holdings[0].bucket: 's/t' is not a bucket name"),
    ("overlapping holdings", _document(holdings=[{"bucket": "s", "nodes": ["a"]},
                                                 {"bucket": "s", "prefix": "x/",
                                                  "nodes": ["b"]}]),
     "holdings[1]: 's/x/' overlaps 's'"),
    ("same holding twice", _document(holdings=[{"bucket": "s", "nodes": ["a"]},
                                               {"bucket": "s", "nodes": ["b"]}]),
     "holdings[1]: 's' overlaps 's'"),
    ("bad timeout", _document(peer_timeout_s=0), "peer_timeout_s: expected a positive"),
]


@pytest.mark.parametrize(("document", "message"), [(d, m) for _, d, m in BAD_FILES],
                         ids=[name for name, _, _ in BAD_FILES])
def test_a_bad_file_is_refused_naming_the_field(document: Any, message: str) -> None:
    with pytest.raises(ClusterFileError) as error:
        _parse(document)
    assert message in str(error.value)
    assert str(error.value).startswith("cluster.json")


def test_not_json_and_unreadable_files() -> None:
    with pytest.raises(ClusterFileError, match=r"cluster\.json: not JSON"):
        ClusterDescription.parse("{nodes", "cluster.json")
    with pytest.raises(ClusterFileError, match="cannot read the cluster file"):
        ClusterDescription.load(Path("/nonexistent/cluster.json"))


def test_unknown_node_name_lists_the_nodes() -> None:
    with pytest.raises(ClusterFileError, match=r"--node 'd' is not in the cluster file "
                       r"\(nodes: a, b, c\)"):
        _parse(_document()).node("d")


def _serve(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flight_storage", "serve", *arguments],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_serve_refuses_a_cluster_node_without_a_shared_secret(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(_document()))
    result = _serve("--data", str(tmp_path), "--cluster", str(cluster), "--node", "a")
    assert result.returncode == 2
    assert "--ticket-secret-file" in result.stderr
    assert "listening" not in result.stdout


def test_serve_refuses_an_unknown_node_and_a_bad_file(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps(_document()))
    result = _serve("--data", str(tmp_path), "--cluster", str(cluster), "--node", "z")
    assert result.returncode == 2 and "--node 'z' is not in the cluster file" in result.stderr
    cluster.write_text(json.dumps(_document(holdings=[{"bucket": "s", "nodes": ["q"]}])))
    result = _serve("--data", str(tmp_path), "--cluster", str(cluster), "--node", "a")
    assert result.returncode == 2 and "unknown node 'q'" in result.stderr
    result = _serve("--data", str(tmp_path), "--node", "a")
    assert result.returncode == 2 and "--node needs --cluster" in result.stderr


def test_serve_help_says_nodes_share_the_secret_and_users() -> None:
    result = _serve("--help")
    text = " ".join(result.stdout.split())
    assert "same --ticket-secret-file and the same --auth users file" in text


def test_a_file_without_holdings_is_a_fleet_with_rendezvous_assignment() -> None:
    fleet = _parse({"nodes": _document()["nodes"]})
    assert fleet.is_fleet and not _parse(_document()).is_fleet
    keys = [f"sales/orders/{i}.csv#{r}" for i in range(300) for r in range(3)]
    orders = {k: fleet.rendezvous(k) for k in keys}
    assert all(sorted(o) == ["a", "b", "c"] for o in orders.values())
    assert orders == {k: fleet.rendezvous(k) for k in keys}  # the same on every node
    firsts = [o[0] for o in orders.values()]
    assert all(firsts.count(n) > len(keys) / 6 for n in "abc")  # spread over every node
    # without node c, only c's keys move, each to the node next in its own order
    smaller = _parse({"nodes": _document()["nodes"][:2]})
    for key, order in orders.items():
        assert smaller.rendezvous(key) == [n for n in order if n != "c"]
