"""Three storage nodes on 127.0.0.2-4, each with its own data: every answer equals one server's.

Layout (``sales`` is replicated, the rest is not):

    node a (127.0.0.2): sales (owner), metrics/daily/2024/ (owner, no replica)
    node b (127.0.0.3): sales (replica)
    node c (127.0.0.4): logs (owner, no replica), metrics/daily/2025/ (owner, no replica)

A fourth server over all the data is the reference. Clients: the real ADBC Flight SQL driver
and ``compute_client.FlightSelectClient``. The tests that kill node a come last.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from compute_client.errors import ClientError
from compute_client.flight import ConnectionOptions, FlightSelectClient
from flight_storage.protocol import pb
from tests.conftest import SAMPLES, ServerProcess, start_server
from tests.flight_storage.test_server_support import (
    PARTITIONED,
    error_document,
    free_port,
    json_descriptor,
    partition_do_gets,
    statement_descriptor,
)

ADDRESSES = {"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4"}
HOLDINGS = [
    {"bucket": "sales", "nodes": ["a", "b"]},
    {"bucket": "metrics", "prefix": "daily/2024/", "nodes": ["a"]},
    {"bucket": "logs", "nodes": ["c"]},
    {"bucket": "metrics", "prefix": "daily/2025/", "nodes": ["c"]},
]
NODE_DATA = {"a": ["sales", "metrics/daily/2024"], "b": ["sales"],
             "c": ["logs", "metrics/daily/2025"]}

QUERIES = {
    "object": 'SELECT * FROM "sales"."orders/2024-01.csv"',
    "prefix table": 'SELECT order_id, region FROM "sales"."orders/" WHERE region = \'north\'',
    "parquet aggregate": 'SELECT count(*) FROM "sales"."parquet/orders.parquet"',
    "two endpoints": "SELECT _1, _2, _3 FROM \"logs\".\"app.csv\" WHERE _2 = 'ERROR'",
    "aggregate elsewhere": 'SELECT _2, count(*) FROM "logs"."app.csv" GROUP BY _2',
    "spread prefix": 'SELECT _1, _2 FROM "metrics"."daily/"',
    "constant": "SELECT 1 + 1",
}


@dataclass
class Cluster:
    nodes: dict[str, ServerProcess]
    reference: ServerProcess
    file: Path


def _make_data(root: Path) -> Path:
    everything = root / "all"
    shutil.copytree(SAMPLES / "sales", everything / "sales")
    logs = everything / "logs"
    logs.mkdir()
    levels = ("INFO", "WARN", "ERROR", "DEBUG")
    with (logs / "app.csv").open("w") as out:
        for i in range(60_000):
            out.write(f"{i},{levels[i % 7 % 4]},message number {i} from the application\n")
    for year, months in (("2024", ("01", "02")), ("2025", ("03",))):
        folder = everything / "metrics" / "daily" / year
        folder.mkdir(parents=True)
        for month in months:
            (folder / f"{month}.csv").write_text(
                "".join(f"{year}-{month}-{d:02},{d * int(month)}\n" for d in range(1, 29)))
    for node, parts in NODE_DATA.items():
        for part in parts:
            shutil.copytree(everything / part, root / node / part)
    return everything


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("cluster")
    everything = _make_data(root)
    secret = root / "secret"
    secret.write_text("a-shared-secret-of-32-characters")
    document = {
        "nodes": [{"name": n, "location": f"grpc://{a}:{free_port(a)}", "host": f"host-{n}"}
                  for n, a in ADDRESSES.items()],
        "holdings": HOLDINGS,
        "peer_timeout_s": 5,
        "peer_check_s": 1,
    }
    cluster_file = root / "cluster.json"
    cluster_file.write_text(json.dumps(document))
    common = ("--ticket-secret-file", str(secret), "--partition-mb", "1")
    nodes: dict[str, ServerProcess] = {}
    try:
        for entry in document["nodes"]:
            name, port = entry["name"], entry["location"].rsplit(":", 1)[1]
            nodes[name] = start_server(root / name, "--cluster", str(cluster_file), "--node",
                                       name, "--port", port, *common)
        reference = start_server(everything, *common)
        yield Cluster(nodes, reference, cluster_file)
    finally:
        for process in nodes.values():
            if process.process.poll() is None:
                process.stop()
        if "reference" in locals():
            reference.stop()


def _sorted(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _adbc(location: str, sql: str) -> pa.Table:
    with flightsql.connect(location) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _client(location: str, sql: str) -> pa.Table:
    with FlightSelectClient(ConnectionOptions(location, timeout_s=30)) as client:
        return client.read_all(sql)


def test_loopback_addresses_bind() -> None:
    for address in ADDRESSES.values():
        assert free_port(address) > 0


def test_nodes_listen_where_the_cluster_file_says(cluster: Cluster) -> None:
    document = json.loads(cluster.file.read_text())
    assert {n: p.location for n, p in cluster.nodes.items()} == {
        e["name"]: e["location"] for e in document["nodes"]}


@pytest.mark.parametrize("query", list(QUERIES), ids=list(QUERIES))
@pytest.mark.parametrize("node", list(ADDRESSES))
def test_every_node_answers_like_one_server(cluster: Cluster, node: str, query: str) -> None:
    sql = QUERIES[query]
    expected = _client(cluster.reference.location, sql)
    assert expected.num_rows > 0
    location = cluster.nodes[node].location
    assert _sorted(_client(location, sql)) == _sorted(expected)
    # the ADBC driver reads each endpoint where the FlightInfo says (a node not holding the
    # data would answer WrongNode if the driver sent the DoGet back to ``location``)
    assert _sorted(_adbc(location, sql)) == _sorted(expected)


def test_adbc_reads_each_endpoint_at_its_location(cluster: Cluster) -> None:
    """Measured: the driver sends every DoGet to the endpoint's location (node c), none to
    the node it is connected to (b)."""
    b, c = cluster.nodes["b"], cluster.nodes["c"]
    before_b, before_c = partition_do_gets(b), partition_do_gets(c, "logs/app.csv")
    with flightsql.connect(b.location) as conn, conn.cursor() as cursor:
        cursor.execute(QUERIES["two endpoints"])
        cursor.fetch_arrow_table()
        endpoints = len(_info(b.location, QUERIES["two endpoints"]).endpoints)
    deadline = time.monotonic() + 10  # log lines arrive through a pipe
    while partition_do_gets(c, "logs/app.csv") - before_c < endpoints and time.monotonic() < deadline:
        time.sleep(0.1)
    assert partition_do_gets(c, "logs/app.csv") - before_c == endpoints >= 2
    assert partition_do_gets(b) == before_b


def _info(location: str, sql: str,
          options: flight.FlightCallOptions = PARTITIONED) -> flight.FlightInfo:
    """The FlightInfo a client that reads every endpoint gets (or one with ``options``)."""
    return flight.connect(location).get_flight_info(statement_descriptor(sql), options)


def _locations(info: flight.FlightInfo) -> list[list[str]]:
    return [[loc.uri.decode() for loc in e.locations] for e in info.endpoints]


def test_endpoints_name_the_owner_then_its_replicas(cluster: Cluster) -> None:
    where = {n: p.location for n, p in cluster.nodes.items()}
    for node in ADDRESSES:
        sales = _info(where[node], QUERIES["object"])
        assert _locations(sales) == [[where["a"], where["b"]]] * len(sales.endpoints)
        logs = _info(where[node], QUERIES["two endpoints"])
        assert len(logs.endpoints) >= 2
        assert _locations(logs) == [[where["c"]]] * len(logs.endpoints)
        spread = _info(where[node], QUERIES["spread prefix"])
        assert sorted({loc for e in _locations(spread) for loc in e}) == [where["a"], where["c"]]
        # each endpoint's app_metadata names its nodes' hosts (for compute-side locality)
        holders = [json.loads(e.app_metadata) for e in spread.endpoints]
        assert sorted(n["host"] for h in holders for n in h["nodes"]) == ["host-a", "host-c"]
        assert json.loads(sales.endpoints[0].app_metadata)["nodes"] == [
            {"name": "a", "location": where["a"], "host": "host-a"},
            {"name": "b", "location": where["b"], "host": "host-b"}]


def test_the_endpoint_choice_travels_with_forwarded_planning(cluster: Cluster) -> None:
    """Node b plans logs on c. c sees b's user agent, not the client's, so b's choice for the
    client travels with the call: ADBC gets partitions, a first-endpoint client gets one
    endpoint holding every row."""
    b = cluster.nodes["b"].location
    with flightsql.connect(b) as conn, conn.cursor() as cursor:
        partitions, _ = cursor.adbc_execute_partitions(QUERIES["two endpoints"])
    assert len(partitions) >= 2
    expected = _client(cluster.reference.location, QUERIES["two endpoints"])
    info = _info(b, QUERIES["two endpoints"], flight.FlightCallOptions())
    assert len(info.endpoints) == 1
    where = info.endpoints[0].locations[0].uri.decode()
    first = flight.connect(where).do_get(info.endpoints[0].ticket).read_all()
    assert _sorted(first) == _sorted(expected)


def test_a_spread_prefix_is_refused_to_a_client_that_gets_one_endpoint(cluster: Cluster) -> None:
    """Its rows live on two nodes: one endpoint cannot carry them, so a client that would
    read only the first is told so rather than given part of the rows."""
    for node in ("a", "b"):
        with pytest.raises(pa.ArrowInvalid) as refused:
            _info(cluster.nodes[node].location, QUERIES["spread prefix"],
                  flight.FlightCallOptions())
        document = error_document(refused.value)
        assert document["code"] == "NotImplemented"
        assert "x-flight-select-endpoints: partitioned" in document["message"]
        assert "metrics/daily/" in document["message"]


def test_planning_is_forwarded_to_the_owner(cluster: Cluster) -> None:
    """A node that does not hold the object forwards planning; the owner's log names it."""
    where = {n: p.location for n, p in cluster.nodes.items()}
    _info(where["b"], 'SELECT _1 FROM "logs"."app.csv" LIMIT 3')
    lines = [json.loads(line) for line in cluster.nodes["c"].log_lines if line.startswith("{")]
    assert any(line.get("forwarded_by") == "b" and line.get("object") == "logs/app.csv"
               for line in lines)


def test_a_spread_aggregate_is_refused_clearly(cluster: Cluster) -> None:
    with pytest.raises(pa.ArrowInvalid) as refused:
        _info(cluster.nodes["b"].location, 'SELECT count(*) FROM "metrics"."daily/"')
    document = error_document(refused.value)
    assert document["code"] == "NotImplemented"
    assert "spread over several nodes" in document["message"]


def test_a_partition_asked_of_the_wrong_node_redirects(cluster: Cluster) -> None:
    where = {n: p.location for n, p in cluster.nodes.items()}
    info = _info(where["a"], QUERIES["two endpoints"])  # planned on c, the owner of logs
    with pytest.raises(pa.ArrowInvalid) as refused:
        flight.connect(where["a"]).do_get(info.endpoints[0].ticket).read_all()
    document = error_document(refused.value)
    assert document["code"] == "WrongNode"
    assert document["locations"] == [where["c"]] and document["nodes"] == ["c"]
    assert "node a does not hold logs/app.csv" in document["message"]


def test_catalog_calls_show_the_whole_cluster(cluster: Cluster) -> None:
    expected_objects = cluster.reference
    for node, process in cluster.nodes.items():
        with FlightSelectClient(ConnectionOptions(process.location)) as client, \
                FlightSelectClient(ConnectionOptions(expected_objects.location)) as one:
            assert client.list_buckets() == one.list_buckets() == ["logs", "metrics", "sales"]
            for bucket in ("sales", "logs", "metrics"):
                assert client.list_objects(bucket) == one.list_objects(bucket), (node, bucket)
                page = client.list_objects_page(bucket, max_keys=2)
                reference = one.list_objects_page(bucket, max_keys=2)
                assert page.objects == reference.objects
                assert bool(page.next_start_after) == bool(reference.next_start_after)
        with flightsql.connect(process.location) as conn:
            objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        schemas = sorted(s["db_schema_name"] for c in objects for s in c["catalog_db_schemas"])
        assert schemas == ["logs", "metrics", "sales"], node


def test_metrics_prefix_pages_merge_across_nodes(cluster: Cluster) -> None:
    with FlightSelectClient(ConnectionOptions(cluster.nodes["b"].location)) as client:
        first = client.list_objects_page("metrics", "daily/", max_keys=2)
        assert [o.key for o in first.objects] == ["daily/2024/01.csv", "daily/2024/02.csv"]
        assert first.next_start_after == "daily/2024/02.csv"
        rest = client.list_objects_page("metrics", "daily/", start_after=first.next_start_after)
        assert [o.key for o in rest.objects] == ["daily/2025/03.csv"]
        assert rest.next_start_after is None


def test_cancel_reaches_every_node_of_the_query(cluster: Cluster) -> None:
    where = {n: p.location for n, p in cluster.nodes.items()}
    client = flight.connect(where["b"])
    info = client.get_flight_info(statement_descriptor(QUERIES["two endpoints"]), PARTITIONED)
    request = pb.CancelFlightInfoRequest(info=info.serialize())
    results = list(client.do_action(flight.Action("CancelFlightInfo",
                                                  request.SerializeToString())))
    status = pb.CancelFlightInfoResult.FromString(results[0].body.to_pybytes()).status
    assert status == pb.CANCEL_STATUS_CANCELLED
    with pytest.raises(pa.ArrowInvalid) as refused:  # c serves logs: it got the cancel
        flight.connect(where["c"]).do_get(info.endpoints[0].ticket).read_all()
    assert error_document(refused.value)["code"] == "QueryCancelled"


def test_prepared_statements_plan_on_the_owner(cluster: Cluster) -> None:
    with flightsql.connect(cluster.nodes["a"].location) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT _1 FROM \"logs\".\"app.csv\" WHERE _1 = ?", parameters=("42",))
        assert cursor.fetchall() == [("42",)]
        schema = cursor.adbc_execute_schema('SELECT _1, _2 FROM "logs"."app.csv"')
        assert schema.names == ["_1", "_2"]


def test_peer_checks_are_logged(cluster: Cluster) -> None:
    """One line per check of a peer; the first ones may precede the peers' start."""
    deadline = time.monotonic() + 30
    while True:
        lines = [json.loads(x) for x in cluster.nodes["a"].log_lines if x.startswith("{")]
        latest = {x["peer"]: x for x in lines if x.get("event") == "peer_check"}
        if all(x["up"] for x in latest.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(latest) == {"b", "c"}
    assert all(line["up"] and line["location"] == cluster.nodes[peer].location
               for peer, line in latest.items()), json.dumps(latest)


def _s3_records(location: str, request: dict[str, object]) -> bytes:
    info = flight.connect(location).get_flight_info(json_descriptor(request))
    out = b""
    for endpoint in info.endpoints:
        where = endpoint.locations[0].uri.decode() if endpoint.locations else location
        table = flight.connect(where).do_get(endpoint.ticket).read_all()
        out += b"".join(table.column("records").to_pylist())
    return out


def test_s3_requests_over_flight_are_planned_where_the_object_is(cluster: Cluster) -> None:
    request = {"Bucket": "logs", "Key": "app.csv", "ExpressionType": "SQL",
               "Expression": "SELECT s._1, s._3 FROM s3object s WHERE s._2 = 'WARN'",
               "InputSerialization": {"CSV": {}}, "OutputSerialization": {"CSV": {}}}
    expected = _s3_records(cluster.reference.location, request)
    assert expected.count(b"\n") > 1000
    for process in cluster.nodes.values():
        assert _s3_records(process.location, request) == expected


# ----------------------------------------------------------------------------- node a dies


def test_after_a_node_dies_replicas_answer_and_the_rest_is_named(cluster: Cluster) -> None:
    where = {n: p.location for n, p in cluster.nodes.items()}
    expected_sales = _client(cluster.reference.location, QUERIES["object"])
    cluster.nodes["a"].process.kill()
    cluster.nodes["a"].process.wait()
    for node in ("b", "c"):
        info = _info(where[node], QUERIES["object"])
        assert [e[0] for e in _locations(info)] == [where["b"]] * len(info.endpoints), node
        assert _sorted(_client(where[node], QUERIES["object"])) == _sorted(expected_sales)
        assert _sorted(_adbc(where[node], QUERIES["object"])) == _sorted(expected_sales)
        with pytest.raises(ClientError) as failed:
            _client(where[node], 'SELECT * FROM "metrics"."daily/2024/01.csv"')
        message = str(failed.value)
        assert "NodeUnavailable" in message
        assert "metrics/daily/2024/01.csv" in message and "a (" + where["a"] in message
        # logs live on c only, and c is up
        assert _client(where[node], QUERIES["two endpoints"]).num_rows > 0


def test_cluster_status_reports_nodes_up_and_down(cluster: Cluster) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    result = subprocess.run(
        [sys.executable, "-m", "flight_storage", "cluster", "status", "--cluster",
         str(cluster.file), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 1, result.stderr  # a node is down
    nodes = {n["node"]: n for n in json.loads(result.stdout)}
    assert nodes["a"]["up"] is False and "error" in nodes["a"]
    assert nodes["b"]["up"] and nodes["c"]["up"]
    sales = sum(p.stat().st_size for p in (SAMPLES / "sales").rglob("*") if p.is_file()
                and not p.name.startswith("."))
    assert nodes["b"]["bytes"] == sales
    assert nodes["c"]["objects"] == 2  # logs/app.csv, metrics/daily/2025/03.csv
