"""The S3 door of a holdings cluster serves every object of the cluster (issue 27, item 3):
node a (127.0.0.2) holds ``sales``, node b (127.0.0.3) holds ``logs``; b's door lists, reads
and selects ``sales`` as a's door does (listings through the merged ListObjects action, GET
and HEAD forwarded to a's door, Select planned on a and read from a's endpoints)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from flight_storage.rpc.auth import hash_password
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_s3_door import ORDERS_KEY, _all_keys, _records, s3_client
from tests.flight_storage.test_server_support import free_port

ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3"}
HOLDINGS = [{"bucket": "sales", "nodes": ["a"]}, {"bucket": "logs", "nodes": ["b"]}]


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("door-cluster")
    shutil.copytree(SAMPLES / "sales", root / "a" / "sales")
    (root / "b" / "logs").mkdir(parents=True)
    (root / "b" / "logs" / "app.csv").write_text("".join(f"{i},x\n" for i in range(100)))
    (root / "secret").write_text("a-shared-secret-of-32-characters")
    users = root / "users.json"
    users.write_text(json.dumps({"users": {
        "alice": {"password": hash_password("pw"), "buckets": ["sales", "logs"],
                  "access_keys": {"AKIAALICE": "alice-secret"}},
        "bob": {"password": hash_password("pw"), "buckets": ["logs"],
                "access_keys": {"AKIABOB": "bob-secret"}},
    }}))
    doors = {n: f"http://{a}:{free_port(a)}" for n, a in ADDRESSES.items()}
    document = {"nodes": [{"name": n, "location": f"grpc://{a}:{free_port(a)}",
                           "s3": doors[n]} for n, a in ADDRESSES.items()],
                "holdings": HOLDINGS, "peer_timeout_s": 5, "peer_check_s": 1}
    (root / "cluster.json").write_text(json.dumps(document))
    nodes: list[ServerProcess] = []
    try:
        for entry in document["nodes"]:
            name = entry["name"]
            host, port = entry["s3"].rsplit("/", 1)[1].split(":")
            nodes.append(start_server(
                root / name, "--cluster", str(root / "cluster.json"), "--node", name,
                "--port", entry["location"].rsplit(":", 1)[1], "--ticket-secret-file",
                str(root / "secret"), "--auth", str(users), "--s3-port", port,
                "--s3-host", host))
            # the door opens after the Flight port: wait for it, not only for the node
            stdout = nodes[-1].process.stdout
            assert stdout is not None
            assert stdout.readline().startswith("s3 listening on ")
        yield doors
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture(scope="module")
def clients(doors: dict[str, str]) -> dict[str, Any]:
    return {n: s3_client(url, "AKIAALICE", "alice-secret") for n, url in doors.items()}


def test_every_node_lists_every_bucket(clients: dict[str, Any]) -> None:
    for client in clients.values():
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["logs", "sales"]
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket="sales", PaginationConfig={"PageSize": 3})
        assert [o["Key"] for p in pages for o in p.get("Contents", [])] == \
            _all_keys(SAMPLES / "sales")
        top = client.list_objects(Bucket="sales", Delimiter="/")
        assert "orders/" in [p["Prefix"] for p in top["CommonPrefixes"]]
    assert [o["Key"] for o in clients["a"].list_objects_v2(Bucket="logs")["Contents"]] == \
        ["app.csv"]


def test_get_and_head_are_forwarded_to_the_holding_node(clients: dict[str, Any]) -> None:
    data = (SAMPLES / "sales" / ORDERS_KEY).read_bytes()
    b = clients["b"]
    head = b.head_object(Bucket="sales", Key=ORDERS_KEY)
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == clients["a"].head_object(Bucket="sales", Key=ORDERS_KEY)["ETag"]
    assert b.get_object(Bucket="sales", Key=ORDERS_KEY)["Body"].read() == data
    part = b.get_object(Bucket="sales", Key=ORDERS_KEY, Range="bytes=5-24")
    assert part["Body"].read() == data[5:25]
    assert part["ResponseMetadata"]["HTTPStatusCode"] == 206
    with pytest.raises(ClientError) as unchanged:
        b.get_object(Bucket="sales", Key=ORDERS_KEY, IfNoneMatch=head["ETag"])
    assert unchanged.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as missing:
        b.get_object(Bucket="sales", Key="nope.csv")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    assert clients["a"].get_object(Bucket="logs", Key="app.csv")["Body"].read().startswith(
        b"0,x\n1,x\n")


def test_select_on_another_node(clients: dict[str, Any]) -> None:
    request = {"Bucket": "sales", "Key": ORDERS_KEY, "ExpressionType": "SQL",
               "Expression": "SELECT s.order_id FROM s3object s WHERE s.status = 'shipped'",
               "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
               "OutputSerialization": {"CSV": {}}}
    here = _records(list(clients["a"].select_object_content(**request)["Payload"]))
    there = _records(list(clients["b"].select_object_content(**request)["Payload"]))
    assert there == here and here


def test_rights_are_the_callers_on_every_node(doors: dict[str, str]) -> None:
    bob = s3_client(doors["b"], "AKIABOB", "bob-secret")
    for call in (lambda: bob.get_object(Bucket="sales", Key=ORDERS_KEY),
                 lambda: bob.list_objects_v2(Bucket="sales")):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"


@pytest.mark.parametrize(("change", "code"), [
    ({"Key": "orders/nothing.csv"}, "NoSuchKey"),
    ({"Expression": "SELECT s.order_id FROM s3object s WHERE"}, None),
])
def test_errors_of_a_select_on_another_node_are_the_holding_nodes(
        clients: dict[str, Any], change: dict[str, str], code: str | None) -> None:
    """Planned on the node holding the object (its answer comes back over Flight): the
    caller gets the error that node's own door gives, code and message."""
    request = {"Bucket": "sales", "Key": ORDERS_KEY, "ExpressionType": "SQL",
               "Expression": "SELECT s.order_id FROM s3object s",
               "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
               "OutputSerialization": {"CSV": {}}, **change}
    errors = []
    for node in ("a", "b"):
        with pytest.raises(ClientError) as refused:
            clients[node].select_object_content(**request)
        errors.append(refused.value.response["Error"])
    assert errors[0]["Code"] == (code or errors[0]["Code"]) != "InternalError"
    assert [(e["Code"], e["Message"]) for e in errors[1:]] == \
        [(errors[0]["Code"], errors[0]["Message"])]


def test_a_select_on_another_node_is_refused_without_the_right(doors: dict[str, str]) -> None:
    bob = s3_client(doors["b"], "AKIABOB", "bob-secret")
    with pytest.raises(ClientError) as refused:
        bob.select_object_content(
            Bucket="sales", Key=ORDERS_KEY, ExpressionType="SQL",
            Expression="SELECT * FROM s3object s", InputSerialization={"CSV": {}},
            OutputSerialization={"CSV": {}})
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
