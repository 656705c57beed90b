"""The operations port (issue 38): Prometheus metrics that move by the right amounts, bounded
label sets, and the /healthz and /readyz probes a load balancer routes on (draining after
SIGTERM while a stream still completes; an unreachable store)."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_s3_door import s3_client
from tests.flight_storage.test_server_support import statement_descriptor
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import SeaweedFS

ROWS = 5_000
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _operations_url(server: ServerProcess) -> str:
    assert server.process.stdout is not None
    line = server.process.stdout.readline()
    assert line.startswith("metrics listening on http://127.0.0.1:"), line
    return line.split("metrics listening on ", 1)[1].strip()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _scrape(url: str) -> Samples:
    status, text = _get(f"{url}/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return _value(after, name, **labels) - _value(before, name, **labels)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("operations")
    (root / "shop").mkdir()
    (root / "shop" / "orders.csv").write_text(
        "id,region\n" + "".join(f"{i},r{i % 5}\n" for i in range(ROWS)))
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[tuple[ServerProcess, str]]:
    with running_server(data, "--metrics-port", "0") as process:
        yield process, _operations_url(process)


def test_s3_door_requests_by_operation_and_status(data: Path) -> None:
    with running_server(data, "--metrics-port", "0", "--s3-port", "0") as process:
        url = _operations_url(process)
        assert process.process.stdout is not None
        door = process.process.stdout.readline().split("s3 listening on ", 1)[1].strip()
        s3 = s3_client(door)
        before = _scrape(url)
        assert s3.get_object(Bucket="shop", Key="orders.csv")["Body"].read().startswith(b"id,")
        with pytest.raises(ClientError):
            s3.head_object(Bucket="shop", Key="nothing.csv")
        s3.list_objects_v2(Bucket="shop")
        after = _scrape(url)
    assert _moved(before, after, "flight_select_s3_requests_total",
                  operation="GetObject", status="200") == 1
    assert _moved(before, after, "flight_select_s3_requests_total",
                  operation="HeadObject", status="404") == 1
    assert _moved(before, after, "flight_select_s3_requests_total",
                  operation="ListObjectsV2", status="200") == 1


def test_metrics_move_by_what_the_calls_did(server: tuple[ServerProcess, str]) -> None:
    process, url = server
    client = flight.connect(process.location)
    before = _scrape(url)
    info = client.get_flight_info(statement_descriptor(
        "SELECT id FROM \"shop\".\"orders.csv\" WHERE region = 'r1'"))
    rows = sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)
    with pytest.raises(KeyError, match="NoSuchKey"):  # pyarrow's NotFound
        client.get_flight_info(statement_descriptor('SELECT * FROM "shop"."missing.csv"'))
    time.sleep(0.3)  # a call's record is written as it completes, maybe after the client has it
    after = _scrape(url)
    assert rows == ROWS // 5
    assert _moved(before, after, "flight_select_calls_total",
                  method="GetFlightInfo", code="ok") == 1
    assert _moved(before, after, "flight_select_calls_total",
                  method="GetFlightInfo", code="NoSuchKey") == 1
    assert _moved(before, after, "flight_select_calls_total",
                  method="DoGet", code="ok") == len(info.endpoints)
    assert _moved(before, after, "flight_select_sent_rows_total") == rows
    assert _moved(before, after, "flight_select_sent_bytes_total") > 0
    assert _moved(before, after, "flight_select_stream_seconds_count", status="ok") == len(
        info.endpoints)
    # the plans made (the refused statement is counted by its code above)
    assert _moved(before, after, "flight_select_statement_plan_seconds_count") == 1
    assert _value(after, "flight_select_open_streams") == 0
    assert _value(after, "flight_select_compute_slots_in_use") == 0


def test_labels_stay_bounded_under_distinct_statements(
        server: tuple[ServerProcess, str]) -> None:
    """1,000 distinct statements, half of them errors naming what they got wrong: the number
    of series does not grow with them (no statement text, key or message becomes a label)."""
    process, url = server
    client = flight.connect(process.location)
    client.get_flight_info(statement_descriptor("SELECT 1"))
    series_before = len(_scrape(url))
    for i in range(1_000):
        sql = (f"SELECT {i} AS n" if i % 2 else
               f'SELECT nosuch_{i} FROM "shop"."orders.csv"')
        try:
            client.get_flight_info(statement_descriptor(sql))
        except (flight.FlightError, pa.ArrowException):
            pass
    after = _scrape(url)
    assert len(after) - series_before < 40  # a few new codes' series, not one per statement
    assert all(len(dict(labels).get("code", "")) <= 64 for _, labels in after)


def test_healthz_and_an_unknown_path(server: tuple[ServerProcess, str]) -> None:
    _, url = server
    assert _get(f"{url}/healthz") == (200, "ok\n")
    assert _get(f"{url}/readyz") == (200, "ready\n")
    status, text = _get(f"{url}/nothing")
    assert status == 404 and "/metrics" in text


def test_readyz_drains_at_sigterm_while_a_stream_completes(tmp_path: Path) -> None:
    """SIGTERM: /readyz says 503 within a second, and the stream being read still ends with
    every row (the server drains for --shutdown-grace)."""
    (tmp_path / "big").mkdir()
    rows = 1_500_000  # tens of MB: more than gRPC's windows swallow (the stream stays open)
    (tmp_path / "big" / "rows.csv").write_text("".join(f"{i},{'x' * 20}\n" for i in range(rows)))
    with running_server(tmp_path, "--metrics-port", "0", "--shutdown-grace", "60") as process:
        url = _operations_url(process)
        client = flight.connect(process.location)
        info = client.get_flight_info(statement_descriptor('SELECT * FROM "big"."rows.csv"'))
        assert len(info.endpoints) == 1
        reader = client.do_get(info.endpoints[0].ticket)
        read = reader.read_chunk().data.num_rows
        assert _get(f"{url}/readyz")[0] == 200
        process.process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        while _get(f"{url}/readyz")[0] != 503:
            assert time.monotonic() - sent < 1.0, "/readyz still ready a second after SIGTERM"
            time.sleep(0.05)
        status, text = _get(f"{url}/readyz")
        assert status == 503 and "draining" in text
        for chunk in reader:
            read += chunk.data.num_rows
        assert read == rows
        assert process.process.wait(timeout=30) == 0


def test_readyz_follows_the_object_store(seaweedfs: SeaweedFS) -> None:
    bucket = seaweedfs.new_bucket("ready")
    seaweedfs.client().put_object(Bucket=bucket, Key="a.csv", Body=b"1,2\n")
    proxy = S3Proxy(seaweedfs.endpoint)
    try:
        env = {**seaweedfs.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint}
        with running_server(f"s3://{bucket}", "--metrics-port", "0", env=env) as process:
            url = _operations_url(process)
            assert _get(f"{url}/readyz")[0] == 200
            proxy.refuse = True  # the store answers nothing but 503
            time.sleep(1.1)  # the last check's answer is kept a second
            status, text = _get(f"{url}/readyz")
            assert status == 503 and bucket in text
            proxy.refuse = False
            deadline = time.monotonic() + 10
            while _get(f"{url}/readyz")[0] != 200:
                assert time.monotonic() < deadline, "/readyz did not come back with the store"
                time.sleep(0.2)
            requests = _scrape(url)
            assert _value(requests, "flight_select_store_requests_total",
                          operation="ListObjectsV2", result="server_error") > 0
    finally:
        proxy.close()


def test_decoded_cache_figures(data: Path, tmp_path: Path) -> None:
    """The decoded cache's entries, hits and misses on /metrics (a miss fills in the
    background after the first answer; the next query over the object is a hit)."""
    with running_server(data, "--metrics-port", "0", "--cache-dir",
                        str(tmp_path / "cache")) as process:
        url = _operations_url(process)
        client = flight.connect(process.location)
        query = statement_descriptor('SELECT count(*) FROM "shop"."orders.csv"')

        def run() -> None:
            info = client.get_flight_info(query)
            for endpoint in info.endpoints:
                client.do_get(endpoint.ticket).read_all()

        before = _scrape(url)
        run()
        deadline = time.monotonic() + 20
        while _value(_scrape(url), "flight_select_decoded_cache_entries") < 1:
            assert time.monotonic() < deadline, "no entry was filled"
            time.sleep(0.2)
        run()
        after = _scrape(url)
    assert _moved(before, after, "flight_select_decoded_cache_misses_total") >= 1
    assert _moved(before, after, "flight_select_decoded_cache_hits_total") >= 1
    assert _moved(before, after, "flight_select_decoded_cache_fills_total") == 1
    assert _value(after, "flight_select_decoded_cache_bytes") > 0
