"""Reading an endpoint from its locations in order: a dead, silent or redirecting location hands
over to the next one, a node killed mid-stream is resumed on its replica with every row exactly
once, and when no location answers the error names the endpoint and every location tried.

Replicas are two plain servers sharing a ticket secret over the same data directory (tickets
are stateless and signed, so either redeems the other's endpoints); nodes die by
``process.kill()``.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from compute_client.errors import EndpointUnavailableError, RemoteQueryError
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient
from compute_client.stalls import batches_within
from flight_storage.rpc.auth import add_user
from tests.compute_client.replica_proxy import replica_proxy
from tests.conftest import ServerProcess, start_server

BIG_ROWS = 1_000_000
BIG_SQL = 'SELECT _1 FROM "b"."big.csv"'
SMALL_SQL = 'SELECT _1, _2 FROM "b"."small.csv"'


def _write_objects(root: Path) -> None:
    (root / "b").mkdir(parents=True)
    # Tens of MB of Arrow: an endpoint's stream cannot fit in gRPC's flow-control windows, so
    # it is still open on the server when the test kills it.
    line = "padding padding padding padding"
    (root / "b" / "big.csv").write_text(
        "".join(f"{i},{i % 7},{line} {i:08d}\n" for i in range(BIG_ROWS)))
    (root / "b" / "small.csv").write_text("".join(f"{i},{i * i}\n" for i in range(1000)))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replicated")
    _write_objects(root)
    return root


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "ticket.key"
    path.write_text("a key every replica shares")
    return path


def _replica(data: Path, secret: Path) -> ServerProcess:
    # ranges of 8 MiB: the 50 MB object is one endpoint per core (at least two), so a
    # stream can break with endpoints still to read
    return start_server(data, "--ticket-secret-file", str(secret), "--idle-timeout", "5",
                        "--endpoint-min-mb", "8")


@pytest.fixture(scope="module")
def replica_a(data: Path, secret: Path) -> Iterator[ServerProcess]:
    server = _replica(data, secret)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def replica_b(data: Path, secret: Path) -> Iterator[ServerProcess]:
    server = _replica(data, secret)
    yield server
    server.stop()


def _refusing_location() -> str:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"grpc://127.0.0.1:{probe.getsockname()[1]}"


def _ids(batches: Iterator[pa.RecordBatch]) -> list[int]:
    return [int(v) for batch in batches for v in batch.column(0).to_pylist()]


def _open_streams(server: ServerProcess) -> int:
    client = flight.connect(server.location)
    result = next(iter(client.do_action(flight.Action("health", b""))))
    client.close()
    return int(json.loads(result.body.to_pybytes())["open_streams"])


def _rows_of(location: str, sql: str) -> list[list[int]]:
    """Each endpoint's first-column values, read plainly from one server."""
    with FlightSelectClient(ConnectionOptions(location)) as client:
        return [_ids(client.read(e)) for e in client.execute(sql).endpoints]


def test_a_dead_first_location_hands_over_to_the_next(replica_a: ServerProcess,
                                                      replica_b: ServerProcess) -> None:
    dead = _refusing_location()
    expected = _rows_of(replica_a.location, SMALL_SQL)
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
        plan = client.execute(SMALL_SQL)
        moved = [Endpoint(e.ticket, (dead, replica_b.location), e.index) for e in plan.endpoints]
        assert [_ids(client.read(e)) for e in moved] == expected


def test_a_silent_first_location_is_given_up_after_the_connect_timeout(
        replica_a: ServerProcess) -> None:
    # A host that accepts TCP but never speaks HTTP/2 (a hung node): gRPC alone would wait 20 s.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hung = f"grpc://127.0.0.1:{silent.getsockname()[1]}"
        options = ConnectionOptions(replica_a.location, connect_timeout_s=1.0)
        with FlightSelectClient(options) as client:
            plan = client.execute(SMALL_SQL)
            moved = [Endpoint(e.ticket, (hung, replica_a.location)) for e in plan.endpoints]
            assert [_ids(client.read(e)) for e in moved] == _rows_of(replica_a.location,
                                                                   SMALL_SQL)


def test_a_node_killed_mid_stream_is_resumed_on_its_replica_with_every_row_once(
        data: Path, secret: Path, replica_b: ServerProcess) -> None:
    doomed = _replica(data, secret)
    try:
        with FlightSelectClient(ConnectionOptions(doomed.location)) as client:
            plan = client.execute(BIG_SQL)
            endpoint = Endpoint(plan.endpoints[0].ticket, (doomed.location, replica_b.location))
            batches = client.read(endpoint)
            first = next(batches)
            assert first.num_rows > 0
            assert _open_streams(doomed) == 1  # the stream is really open on the doomed node
            doomed.process.kill()
            doomed.process.wait()
            ids = _ids(iter([first, *batches]))
    finally:
        doomed.stop()
    expected = _rows_of(replica_b.location, BIG_SQL)[0]
    assert len(ids) > first.num_rows
    assert ids == expected


def test_a_node_hung_mid_stream_is_given_up_after_the_stall_timeout(
        data: Path, secret: Path, replica_b: ServerProcess) -> None:
    # Stopped, not killed: its socket stays open and the kernel keeps acknowledging TCP, so
    # only the client's own clock can tell.
    hung = _replica(data, secret)
    try:
        options = ConnectionOptions(hung.location, stall_timeout_s=3.0)
        with FlightSelectClient(options) as client:
            plan = client.execute(BIG_SQL)
            endpoints = [Endpoint(e.ticket, (hung.location, replica_b.location))
                         for e in plan.endpoints]
            batches = client.read(endpoints[0])
            first = next(batches)
            hung.process.send_signal(signal.SIGSTOP)
            ids = [_ids(iter([first, *batches]))]
            # The next endpoint goes to the replica first: a DoGet to the stopped node would
            # wait for its schema for ever.
            assert client.locations(endpoints[1]) == (replica_b.location, hung.location)
            ids += [_ids(client.read(e)) for e in endpoints[1:]]
    finally:
        hung.process.send_signal(signal.SIGCONT)
        hung.stop()
    assert len(ids) > 1
    assert ids == _rows_of(replica_b.location, BIG_SQL)


def test_stall_watch_gives_every_message_and_ends(replica_a: ServerProcess) -> None:
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
        endpoint = client.execute(BIG_SQL).endpoints[0]
        with flight.connect(replica_a.location) as plain:
            direct = plain.do_get(flight.Ticket(endpoint.ticket)).read_all()
            watched = pa.Table.from_batches(list(batches_within(
                plain.do_get(flight.Ticket(endpoint.ticket)), stall_timeout_s=30.0)))
    assert watched.equals(direct)


def test_a_slow_caller_is_not_a_stalled_node(replica_a: ServerProcess) -> None:
    """Only the wait for the server counts: a caller that takes longer than the timeout
    between batches still gets every message."""
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
        endpoint = client.execute(BIG_SQL).endpoints[0]
        with flight.connect(replica_a.location) as plain:
            direct = plain.do_get(flight.Ticket(endpoint.ticket)).read_all()
            batches = []
            for batch in batches_within(plain.do_get(flight.Ticket(endpoint.ticket)),
                                        stall_timeout_s=0.3):
                if len(batches) < 3:
                    time.sleep(0.6)
                batches.append(batch)
    assert pa.Table.from_batches(batches).equals(direct)


def test_reads_in_progress_share_one_watch_thread(replica_a: ServerProcess) -> None:
    """Reading many endpoints at once starts no thread per read: one watch thread looks after
    every read in progress, and each still gets its whole stream."""
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client, \
            flight.connect(replica_a.location) as plain:
        ticket = flight.Ticket(client.execute(BIG_SQL).endpoints[0].ticket)
        readers = [batches_within(plain.do_get(ticket), stall_timeout_s=30.0) for _ in range(4)]
        firsts = [next(reader) for reader in readers]  # four reads in progress at once
        watchers = [t for t in threading.enumerate() if t.name == "flight-stream-watch"]
        rows = [first.num_rows + sum(b.num_rows for b in reader)
                for first, reader in zip(firsts, readers, strict=True)]
        whole = plain.do_get(ticket).read_all().num_rows
    assert len(watchers) == 1
    assert rows == [whole] * 4


def test_with_every_location_dead_the_error_names_the_endpoint_and_each_location(
        replica_a: ServerProcess) -> None:
    dead = [_refusing_location(), _refusing_location()]
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
        endpoint = client.execute(SMALL_SQL).endpoints[0]
        with pytest.raises(EndpointUnavailableError) as raised:
            list(client.read(Endpoint(endpoint.ticket, tuple(dead), endpoint.index)))
    assert [location for location, _ in raised.value.attempts] == dead
    assert all("refused" in why.lower() for _, why in raised.value.attempts)
    message = str(raised.value)
    assert "endpoint #0 (ticket " in message
    assert all(location in message for location in dead)


def test_a_killed_node_without_a_replica_fails_naming_it_after_the_rows_it_gave(
        data: Path, secret: Path) -> None:
    lone = _replica(data, secret)
    try:
        with FlightSelectClient(ConnectionOptions(lone.location)) as client:
            endpoint = client.execute(BIG_SQL).endpoints[0]
            batches = client.read(endpoint)
            first = next(batches)
            lone.process.kill()
            lone.process.wait()
            with pytest.raises(EndpointUnavailableError) as raised:
                list(batches)
    finally:
        lone.stop()
    assert raised.value.attempts[0][0] == lone.location
    assert raised.value.rows_delivered >= first.num_rows


def test_a_query_error_is_not_retried_on_other_locations(replica_a: ServerProcess,
                                                        replica_b: ServerProcess) -> None:
    forged = Endpoint(b"not a ticket", (replica_a.location, replica_b.location))
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client, \
            pytest.raises(RemoteQueryError):
        list(client.read(forged))


def test_the_number_of_locations_tried_is_bounded(replica_a: ServerProcess) -> None:
    dead = tuple(_refusing_location() for _ in range(6))
    options = ConnectionOptions(replica_a.location, max_attempts=3)
    with FlightSelectClient(options) as client:
        endpoint = client.execute(SMALL_SQL).endpoints[0]
        with pytest.raises(EndpointUnavailableError) as raised:
            list(client.read(Endpoint(endpoint.ticket, (*dead, replica_a.location))))
    assert [location for location, _ in raised.value.attempts] == list(dead[:3])


def test_empty_and_reuse_connection_locations_mean_the_planning_server(
        replica_a: ServerProcess) -> None:
    with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
        assert client.locations(Endpoint(b"t", ())) == (replica_a.location,)
        reuse = Endpoint(b"t", ("arrow-flight-reuse-connection://?", replica_a.location))
        assert client.locations(reuse) == (replica_a.location,)


class _Redirecting(flight.FlightServerBase):
    """A node that holds nothing: every DoGet answers the cluster's redirect error."""

    def do_get(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.do_get
               ticket: flight.Ticket,  # noqa: ARG002 - FlightServerBase.do_get
               ) -> flight.RecordBatchStream:
        document = {"code": "WrongNode", "message": "partition held by node-b"}
        raise flight.FlightServerError("WrongNode", extra_info=json.dumps(document).encode())


def test_a_wrong_node_redirect_hands_over_to_the_next_location(replica_a: ServerProcess) -> None:
    with _Redirecting("grpc://127.0.0.1:0") as wrong:
        wrong_location = f"grpc://127.0.0.1:{wrong.port}"
        with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
            plan = client.execute(SMALL_SQL)
            moved = [Endpoint(e.ticket, (wrong_location, replica_a.location))
                     for e in plan.endpoints]
            assert [_ids(client.read(e)) for e in moved] == _rows_of(replica_a.location,
                                                                   SMALL_SQL)
            with pytest.raises(EndpointUnavailableError, match="WrongNode: partition held"):
                list(client.read(Endpoint(plan.endpoints[0].ticket, (wrong_location,))))


class _Diverging(flight.FlightServerBase):
    """A "replica" that sends one batch of another schema, then drops the stream."""

    def do_get(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.do_get
               ticket: flight.Ticket,  # noqa: ARG002 - FlightServerBase.do_get
               ) -> flight.GeneratorStream:
        schema = pa.schema([("other", pa.int64())])

        def batches() -> Iterator[pa.RecordBatch]:
            yield pa.record_batch([pa.array([1, 2])], schema=schema)
            raise flight.FlightUnavailableError("node going away")

        return flight.GeneratorStream(schema, batches())


def test_a_replica_with_another_schema_is_not_used_to_resume(replica_a: ServerProcess) -> None:
    with _Diverging("grpc://127.0.0.1:0") as diverging:
        first = f"grpc://127.0.0.1:{diverging.port}"
        with FlightSelectClient(ConnectionOptions(replica_a.location)) as client:
            ticket = client.execute(SMALL_SQL).endpoints[0].ticket
            with pytest.raises(EndpointUnavailableError, match="schema differs"):
                list(client.read(Endpoint(ticket, (first, replica_a.location))))


def test_the_replica_proxy_lists_a_dead_node_first_and_reads_still_answer(
        replica_a: ServerProcess) -> None:
    # The proxy the DataFusion and Spark tests plan through.
    dead = _refusing_location()
    with replica_proxy(replica_a.location, [dead, replica_a.location]) as proxy:
        with FlightSelectClient(ConnectionOptions(proxy)) as client:
            assert {e.locations for e in client.execute(SMALL_SQL).endpoints} == {
                (dead, replica_a.location)}
        assert _rows_of(proxy, SMALL_SQL) == _rows_of(replica_a.location, SMALL_SQL)


def test_a_client_with_credentials_reads_past_a_dead_planning_node(
        data: Path, secret: Path, tmp_path: Path) -> None:
    # What a Spark executor does: a fresh client whose planning location is gone logs in to
    # the replica it reads from (tokens are signed with the shared secret too).
    users = tmp_path / "users.json"
    add_user(users, "alice", "alice-pw", ["b"])
    planner = start_server(data, "--ticket-secret-file", str(secret), "--auth", str(users))
    replica = start_server(data, "--ticket-secret-file", str(secret), "--auth", str(users))
    try:
        options = ConnectionOptions(planner.location, username="alice", password="alice-pw")
        with FlightSelectClient(options) as client:
            plan = client.execute(SMALL_SQL)
            expected = [_ids(client.read(e)) for e in plan.endpoints]
        wrong = ConnectionOptions(planner.location, username="alice", password="wrong")
        with FlightSelectClient(wrong) as client, pytest.raises(RemoteQueryError):
            # a refused login is the same on every replica: not a reason to fail over
            list(client.read(Endpoint(plan.endpoints[0].ticket,
                                      (planner.location, replica.location))))
        planner.process.kill()
        planner.process.wait()
        with FlightSelectClient(options) as executor:
            got = [_ids(executor.read(Endpoint(e.ticket, (planner.location, replica.location))))
                   for e in plan.endpoints]
    finally:
        planner.stop()
        replica.stop()
    assert got == expected
    assert sum(map(len, got)) == 1000
