"""Authentication, TLS, permissions, the data root and limits, through a server subprocess."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage import protocol
from flight_storage.protocol import pb
from flight_storage.rpc.auth import add_user
from tests.conftest import ROOT, ServerProcess, start_server
from tests.flight_storage.test_server_support import (
    error_document,
    json_descriptor,
    make_certificates,
    make_data,
    statement_descriptor,
    wait_for_event,
)

SQL = 'SELECT _1 FROM "sales"."orders_noheader.csv" LIMIT 3'


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_data(tmp_path_factory.mktemp("data"))
    outside = tmp_path_factory.mktemp("outside") / "stolen.csv"
    outside.write_text("secret,1\n")
    (root / "sales" / "link.csv").symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "users.json"
    add_user(path, "alice", "alice-pw", ["sales", "big"])
    add_user(path, "bob", "bob-pw", ["private"])
    return path


@pytest.fixture(scope="module")
def auth_server(data_root: Path, users_file: Path) -> Iterator[ServerProcess]:
    process = start_server(data_root, "--auth", str(users_file))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def open_server(data_root: Path) -> Iterator[ServerProcess]:
    process = start_server(data_root, "--max-query-chars", "300")
    yield process
    process.stop()


def _login(user: str, password: str) -> dict[str, str]:
    return {"username": user, "password": password}


# ----------------------------------------------------------------------------- authentication


def test_adbc_with_password_reads(auth_server: ServerProcess) -> None:
    with flightsql.connect(auth_server.location,
                           db_kwargs=_login("alice", "alice-pw")) as conn:
        with conn.cursor() as cursor:
            cursor.execute(SQL)
            assert len(cursor.fetchall()) == 3
        objects = conn.adbc_get_objects(depth="db_schemas").read_all().to_pylist()
    buckets = {s["db_schema_name"] for c in objects for s in c["catalog_db_schemas"]}
    assert buckets == {"sales", "big"}  # private is not listed for alice


def test_wrong_password_is_unauthenticated(auth_server: ServerProcess) -> None:
    with pytest.raises(adbc_driver_manager.Error) as info:
        with flightsql.connect(auth_server.location,
                               db_kwargs=_login("alice", "nope")) as conn:
            with conn.cursor() as cursor:
                cursor.execute(SQL)
    assert "UNAUTHENTICATED" in str(info.value)
    assert '"code": "InvalidAccessKeyId"' in str(info.value)


def test_no_credentials_is_unauthenticated(auth_server: ServerProcess) -> None:
    client = flight.connect(auth_server.location)
    with pytest.raises(flight.FlightUnauthenticatedError) as info:
        client.get_flight_info(statement_descriptor(SQL))
    assert error_document(info.value)["code"] == "MissingSecurityHeader"


def test_forged_bearer_is_unauthenticated(auth_server: ServerProcess) -> None:
    client = flight.connect(auth_server.location)
    name, value = client.authenticate_basic_token("alice", "alice-pw")
    assert value.startswith(b"Bearer ")
    _body, _, mac = value[len(b"Bearer "):].partition(b".")
    forged_body = base64.urlsafe_b64encode(b'{"u":"bob","e":9999999999}').rstrip(b"=")
    options = flight.FlightCallOptions(headers=[(name, b"Bearer " + forged_body + b"." + mac)])
    with pytest.raises(flight.FlightUnauthenticatedError):
        client.get_flight_info(statement_descriptor(SQL), options)
    good = flight.FlightCallOptions(headers=[(name, value)])
    assert client.get_flight_info(statement_descriptor(SQL), good).endpoints


def test_bucket_permission_is_checked(auth_server: ServerProcess) -> None:
    with flightsql.connect(auth_server.location,
                           db_kwargs=_login("bob", "bob-pw")) as conn:
        with conn.cursor() as cursor, pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute(SQL)
    assert "UNAUTHORIZED" in str(info.value) and '"code": "AccessDenied"' in str(info.value)


def test_tickets_are_checked_again_in_do_get(auth_server: ServerProcess) -> None:
    client = flight.connect(auth_server.location)
    alice = flight.FlightCallOptions(headers=[client.authenticate_basic_token("alice", "alice-pw")])
    bob = flight.FlightCallOptions(headers=[client.authenticate_basic_token("bob", "bob-pw")])
    info = client.get_flight_info(statement_descriptor(SQL), alice)
    with pytest.raises(flight.FlightUnauthorizedError) as refused:
        client.do_get(info.endpoints[0].ticket, bob).read_all()
    assert error_document(refused.value)["code"] == "AccessDenied"
    assert client.do_get(info.endpoints[0].ticket, alice).read_all().num_rows == 3


def test_no_auth_on_a_public_address_refuses_to_start(data_root: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "flight_storage", "serve", "--data", str(data_root),
         "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert result.returncode == 2
    assert "--auth" in result.stderr and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def test_tls_with_adbc(data_root: Path, certificates: dict[str, Path], users_file: Path) -> None:
    server = start_server(data_root, "--tls-cert", str(certificates["server.pem"]),
                          "--tls-key", str(certificates["server.key"]), "--auth", str(users_file))
    try:
        assert server.location.startswith("grpc+tls://")
        options = {"adbc.flight.sql.client_option.tls_root_certs":
                   certificates["ca.pem"].read_text(), "username": "alice",
                   "password": "alice-pw"}
        with flightsql.connect(server.location, db_kwargs=options) as conn:
            with conn.cursor() as cursor:
                cursor.execute(SQL)
                assert len(cursor.fetchall()) == 3
        plain = flight.connect(server.location.replace("grpc+tls", "grpc"))
        with pytest.raises(flight.FlightError):
            plain.wait_for_available(timeout=2)
    finally:
        server.stop()


def test_mutual_tls_requires_a_client_certificate(data_root: Path,
                                                  certificates: dict[str, Path]) -> None:
    server = start_server(data_root, "--tls-cert", str(certificates["server.pem"]),
                          "--tls-key", str(certificates["server.key"]),
                          "--tls-client-ca", str(certificates["ca.pem"]))
    root = certificates["ca.pem"].read_text()
    try:
        with flightsql.connect(server.location, db_kwargs={
            "adbc.flight.sql.client_option.tls_root_certs": root,
            "adbc.flight.sql.client_option.mtls_cert_chain":
                certificates["client.pem"].read_text(),
            "adbc.flight.sql.client_option.mtls_private_key":
                certificates["client.key"].read_text(),
        }) as conn, conn.cursor() as cursor:
            cursor.execute(SQL)
            assert len(cursor.fetchall()) == 3
        anonymous = flight.connect(server.location, tls_root_certs=root.encode())
        with pytest.raises((flight.FlightError, pa.ArrowException)):
            anonymous.get_flight_info(statement_descriptor(SQL))
    finally:
        server.stop()


# ----------------------------------------------------------------------------- the data root


@pytest.mark.parametrize(
    "table",
    ['"sales"."../private/secret.csv"', '"sales"."/etc/passwd"', '".."."etc/passwd"',
     '"sales"."link.csv"', '"sales"."orders/../../private/secret.csv"'],
)
def test_object_names_never_leave_the_root(open_server: ServerProcess, table: str) -> None:
    with flightsql.connect(open_server.location) as conn, conn.cursor() as cursor:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute(f"SELECT _1 FROM {table}")
    assert '"code": "AccessDenied"' in str(info.value)
    assert "secret" not in str(info.value).replace("secret.csv", "")


def test_nul_byte_in_a_key_is_refused(open_server: ServerProcess) -> None:
    client = flight.connect(open_server.location)
    with pytest.raises(flight.FlightUnauthorizedError):
        client.get_flight_info(statement_descriptor('SELECT _1 FROM "sales"."a\x00.csv"'))
    with pytest.raises(flight.FlightUnauthorizedError):
        client.get_flight_info(json_descriptor(
            {"Bucket": "sales", "Key": "orders_noheader.csv\x00../x", "Expression": "SELECT 1"}))


# ----------------------------------------------------------------------------- read-only


@pytest.mark.parametrize("sql", ['DROP TABLE "sales"."orders_noheader.csv"',
                                 'INSERT INTO "sales"."x.csv" VALUES (1)',
                                 'DELETE FROM "sales"."orders_noheader.csv"'])
def test_only_select_statements_run(open_server: ServerProcess, sql: str) -> None:
    with flightsql.connect(open_server.location) as conn, conn.cursor() as cursor:
        with pytest.raises(adbc_driver_manager.Error) as info:
            cursor.execute(sql)
    assert "INVALID_ARGUMENT" in str(info.value)
    assert '"code": "UnsupportedSyntax"' in str(info.value)
    assert "Traceback" not in str(info.value)


def test_do_put_other_than_parameters_is_refused(open_server: ServerProcess) -> None:
    client = flight.connect(open_server.location)
    descriptor = flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandStatementUpdate(query="DELETE FROM x")))
    writer, _ = client.do_put(descriptor, pa.schema([("a", pa.int64())]))
    with pytest.raises(flight.FlightUnauthorizedError) as info:
        writer.close()
    assert error_document(info.value)["code"] == "ReadOnly"


# ----------------------------------------------------------------------------- limits


@pytest.mark.reliability
def test_query_text_length_limit(open_server: ServerProcess) -> None:
    sql = SQL + " " * 400
    with pytest.raises(pa.ArrowInvalid) as info:
        flight.connect(open_server.location).get_flight_info(statement_descriptor(sql))
    assert error_document(info.value)["code"] == "ExpressionTooLong"


@pytest.mark.reliability
def test_record_size_limit(open_server: ServerProcess, data_root: Path) -> None:
    (data_root / "sales" / "wide.csv").write_text("a," + "x" * (1 << 20) + "\nb,c\n")
    client = flight.connect(open_server.location)
    info = client.get_flight_info(statement_descriptor('SELECT _1 FROM "sales"."wide.csv"'))
    with pytest.raises(pa.ArrowInvalid) as refused:
        client.do_get(info.endpoints[0].ticket).read_all()
    assert error_document(refused.value)["code"] == "OverMaxRecordSize"


@pytest.mark.reliability
def test_open_stream_limit(data_root: Path) -> None:
    server = start_server(data_root, "--max-open-streams", "1")
    try:
        client = flight.connect(server.location)
        sql = 'SELECT _1, _2, _3 FROM "big"."huge.csv" LIMIT 999999'
        first = client.do_get(client.get_flight_info(statement_descriptor(sql)).endpoints[0].ticket)
        assert first.read_chunk().data.num_rows > 0  # open, not drained
        second = client.get_flight_info(statement_descriptor(sql)).endpoints[0].ticket
        with pytest.raises(flight.FlightUnavailableError) as refused:
            client.do_get(second).read_all()
        document = error_document(refused.value)
        assert document["code"] == "SlowDown" and "--max-open-streams" in document["message"]
        first.read_all()  # drain: the stream closes
        wait_for_event(server, event="call", method="DO_GET", status="ok")
        assert client.do_get(second).read_all().num_rows == 999999
    finally:
        server.stop()


@pytest.mark.reliability
def test_an_unread_stream_does_not_block_others(data_root: Path) -> None:
    """One compute slot: a stream whose client stopped reading leaves it to the next query."""
    server = start_server(data_root, "--max-concurrent-queries", "1", "--queue-wait", "5")
    try:
        client = flight.connect(server.location)
        sql = 'SELECT _1, _2, _3 FROM "big"."huge.csv" LIMIT 999999'
        first = client.do_get(client.get_flight_info(statement_descriptor(sql)).endpoints[0].ticket)
        assert first.read_chunk().data.num_rows > 0  # then not read
        second = client.get_flight_info(statement_descriptor(sql)).endpoints[0].ticket
        assert client.do_get(second).read_all().num_rows == 999999
        assert first.read_all().num_rows > 0
    finally:
        server.stop()


@pytest.mark.reliability
def test_query_timeout(data_root: Path) -> None:
    """The query timeout bounds planning and streaming alike: past 1e-9 s the query ends with
    QueryTimeout in GetFlightInfo (planning outlasted the watchdog's 0.1 s poll: a loaded
    machine) or else in DoGet, and that call is logged as timed out."""
    server = start_server(data_root, "--query-timeout", "1e-9")
    try:
        client = flight.connect(server.location)
        method = "GET_FLIGHT_INFO"
        with pytest.raises(flight.FlightTimedOutError) as refused:
            info = client.get_flight_info(statement_descriptor(SQL))
            method = "DO_GET"
            client.do_get(info.endpoints[0].ticket).read_all()
        assert error_document(refused.value)["code"] == "QueryTimeout"
        record = wait_for_event(server, event="call", method=method)
        assert record["status"] == "timeout"
    finally:
        server.stop()


@pytest.mark.reliability
def test_errors_never_carry_a_traceback(open_server: ServerProcess) -> None:
    client = flight.connect(open_server.location)
    for descriptor in (flight.FlightDescriptor.for_command(b"\x0a\x03abc"),
                       flight.FlightDescriptor.for_path("sales"),
                       json_descriptor({"Bucket": "sales"})):
        with pytest.raises(pa.ArrowException) as info:
            client.get_flight_info(descriptor)
        assert "Traceback" not in str(info.value) and ".py" not in str(info.value)
        assert error_document(info.value)["code"]


def test_failed_logins_are_throttled_per_user(data_root: Path, users_file: Path) -> None:
    """Five wrong passwords lock the name out (no password is checked meanwhile); other users
    are not affected."""
    server = start_server(data_root, "--auth", str(users_file))
    try:
        def attempt(name: str, password: str) -> str:
            try:
                with flightsql.connect(server.location,
                                       db_kwargs=_login(name, password)) as conn:
                    with conn.cursor() as cursor:
                        cursor.execute(SQL)
                        cursor.fetchall()
            except adbc_driver_manager.Error as exc:
                return str(exc)
            return "ok"

        for _ in range(5):
            assert '"code": "InvalidAccessKeyId"' in attempt("bob", "guess")
        locked = attempt("bob", "bob-pw")
        assert '"code": "SlowDown"' in locked and "too many failed logins" in locked
        assert attempt("alice", "alice-pw") == "ok"
    finally:
        server.stop()
