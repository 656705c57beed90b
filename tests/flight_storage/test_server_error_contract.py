"""Every RPC and odd key answers with the S3 error JSON, never a traceback or InternalError."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from tests.conftest import ServerProcess, start_server
from tests.flight_storage.test_server_support import error_document, statement_descriptor


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    root = tmp_path_factory.mktemp("contract")
    bucket = root / "b"
    bucket.mkdir()
    (bucket / "ok.csv").write_text("a,b\n1,2\n")
    (bucket / ".flight-select.json").write_text('{"tables": []}')
    (bucket / ".hidden.csv").write_text("secret\n")
    os.symlink("loop2", bucket / "loop1.csv")
    os.symlink("loop1.csv", bucket / "loop2")
    process = start_server(root)
    yield process  # type: ignore[misc]
    process.stop()


def _code(server: ServerProcess, key: str) -> str:
    client = flight.connect(server.location)
    with pytest.raises(pa.ArrowException) as failed:
        client.get_flight_info(statement_descriptor(f'SELECT * FROM "b"."{key}"'))
    text = str(failed.value)
    assert "Traceback" not in text and ".py" not in text
    return str(error_document(failed.value)["code"])


@pytest.mark.parametrize("key, code", [
    (".flight-select.json", "NoSuchKey"),  # the configuration is not an object
    (".hidden.csv", "NoSuchKey"),
    ("loop1.csv", "NoSuchKey"),
    ("k" * 300 + ".csv", "KeyTooLongError"),
    ("d/" * 200 + "x.csv", "NoSuchKey"),
])
def test_odd_keys_answer_with_s3_codes(server: ServerProcess, key: str, code: str) -> None:
    assert _code(server, key) == code


def test_listing_survives_a_symlink_loop(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(server.location) as conn:
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
    tables = [t["table_name"] for c in objects for s in c["catalog_db_schemas"] or []
              for t in s["db_schema_tables"] or []]
    assert "ok.csv" in tables and not any(t.startswith((".", "loop")) for t in tables)


def test_do_exchange_and_list_flights_answer_unimplemented_json(server: ServerProcess) -> None:
    client = flight.connect(server.location)
    with pytest.raises(pa.ArrowNotImplementedError) as listing:
        list(client.list_flights())
    assert "ListFlights" in str(listing.value) and "Traceback" not in str(listing.value)
    with pytest.raises(pa.ArrowNotImplementedError) as exchange:
        _writer, reader = client.do_exchange(flight.FlightDescriptor.for_command(b"x"))
        reader.read_all()
    assert "DoExchange" in str(exchange.value) and "Traceback" not in str(exchange.value)


def test_a_broken_bucket_configuration_hides_no_other_bucket(tmp_path: Path) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    for bucket, key in (("good", "x.csv"), ("bad", "y.csv")):
        (tmp_path / bucket).mkdir()
        (tmp_path / bucket / key).write_text("a,b\n")
    (tmp_path / "bad" / ".flight-select.json").write_text("{not json")
    process = start_server(tmp_path)
    try:
        with flightsql.connect(process.location) as conn:
            objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
            tables = {(s["db_schema_name"], t["table_name"]) for c in objects
                      for s in c["catalog_db_schemas"] or [] for t in s["db_schema_tables"] or []}
            assert {("good", "x.csv"), ("bad", "y.csv")} <= tables
            with conn.cursor() as cursor:
                cursor.execute('SELECT * FROM "good"."x.csv"')
                assert cursor.fetchall() == [("a", "b")]
                with pytest.raises(Exception, match="invalid bucket configuration"):
                    cursor.execute('SELECT * FROM "bad"."y.csv"')
    finally:
        process.stop()
