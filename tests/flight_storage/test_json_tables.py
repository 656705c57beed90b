"""A user points a Flight SQL client at their own JSON Lines: the standard surface reads it as
DuckDB's ``read_json_auto`` does (columns per key, typed from a sample, ``null`` and absent keys
NULL, timestamps with offsets as UTC instants), from a folder, compressed, or a SeaweedFS
bucket; a value the sample did not foresee fails naming it; the s3-select flavours keep their
JSON semantics.

Every test runs the real server in a subprocess and the real ADBC driver, and compares with
DuckDB over the same file.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flight_storage.protocol import FLAVOR_HEADER
from tests.conftest import ServerProcess, running_server
from tests.flight_storage.test_server_support import statement_descriptor
from tests.seaweedfs import SeaweedFS

ROWS = 3000
_OFFSETS = (timedelta(0), timedelta(hours=2), timedelta(hours=-5), timedelta(hours=5, minutes=30),
            timedelta(hours=-9, minutes=-30))
_PATHS = ("/cart", "/home", '/say "hi"', "/caf\u00e9", "/a\\b", "/x\ny")


def _record(i: int, rng: random.Random) -> dict[str, Any]:
    """One web-log record: some keys null, some absent, timestamps in several offsets."""
    offset = _OFFSETS[i % len(_OFFSETS)]
    instant = datetime(2024, 8, 16, tzinfo=UTC) + timedelta(minutes=37 * i)
    stamp = instant.astimezone(timezone(offset)).isoformat()
    if offset == timedelta(0) and i % 2:
        stamp = stamp.replace("+00:00", "Z")
    record: dict[str, Any] = {"id": i, "path": rng.choice(_PATHS), "ts": stamp,
                              "bytes": rng.randrange(0, 1 << 40), "latency": rng.random() * 9,
                              "ok": rng.random() < 0.7}
    if i % 11 == 0:
        record["bytes"] = None
    if i % 13 == 0:
        del record["path"]
    if i % 17 == 0:
        record["latency"] = rng.randrange(0, 9)  # an integer among doubles: still a double
    if i % 7 == 0:
        record["user"] = f"u{i % 5}"
    return record


def _lines(rows: int, seed: int = 7, first: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(json.dumps(_record(i, rng)) + "\n" for i in range(first, first + rows))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("own-json")
    shop = root / "shop"
    shop.mkdir()
    text = _lines(ROWS)
    (shop / "events.jsonl").write_text(text)
    (shop / "events.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    # blank lines, CRLF and indented lines: pyarrow's parser leaves those to the reference
    gappy = [("  " if i % 50 == 0 else "") + line + ("\r" if i % 3 == 0 else "")
             + ("\n" if i % 100 == 0 else "") for i, line in enumerate(text.splitlines())]
    (shop / "gappy.jsonl").write_text("\n".join(gappy) + "\n")
    late = text + json.dumps({"id": ROWS + 1, "bytes": 1.5}) + "\n"
    (shop / "late_bad.jsonl").write_text(late)
    (shop / "nested.ndjson").write_text(
        '{"id": 1, "geo": {"lat": 1.5, "tags": ["a"]}, "any": 1}\n'
        '{"id": 2, "geo": null, "any": "two"}\n{"id": 3, "geo": [], "any": {"k": null}}\n')
    (shop / "parts").mkdir()
    (shop / "parts" / "a.jsonl").write_text(_lines(40, seed=1))
    (shop / "parts" / "b.jsonl").write_text(_lines(30, seed=2, first=41))
    (shop / "typed").mkdir()
    (shop / "typed" / "events.jsonl").write_text(_lines(20))
    (shop / "raw").mkdir()
    (shop / "raw" / "events.jsonl").write_text(_lines(3))
    (shop / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "raw/"},
        {"prefix": "typed/", "columns": [{"name": "id", "type": "string"},
                                         {"name": "ts", "type": "json"},
                                         {"name": "bytes", "type": "float64"}]}]}))
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data, "--sniff-kb", "16") as process:
        yield process


def _query(server: ServerProcess, sql: str, flavor: str | None = None) -> pa.Table:
    import adbc_driver_flightsql
    import adbc_driver_flightsql.dbapi as flightsql

    kwargs: dict[str, Any] = {}
    if flavor is not None:
        header = adbc_driver_flightsql.DatabaseOptions.RPC_CALL_HEADER_PREFIX.value
        kwargs["db_kwargs"] = {header + FLAVOR_HEADER: flavor}
    with flightsql.connect(server.location, autocommit=True, **kwargs) as conn, \
            conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _duckdb(sql: str) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    con.sql("SET TimeZone = 'UTC'")
    return con.sql(sql).to_arrow_table()


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return [tuple(row.values()) for row in table.to_pylist()]


# Each statement is written once with {t} for the table: ours is "shop"."<key>", DuckDB's
# read_json_auto of the same file.
STATEMENTS = [
    "SELECT * FROM {t} ORDER BY id",
    "SELECT max(path), min(path), max(ts), min(ts) FROM {t}",
    "SELECT sum(bytes), count(bytes), count(*) FROM {t}",
    "SELECT extract(hour FROM ts) AS h, count(*) AS n FROM {t} GROUP BY extract(hour FROM ts) "
    "ORDER BY h",
    "SELECT count(*) FROM {t} WHERE bytes IS NULL",
    "SELECT count(*) FROM {t} WHERE path IS NULL",
    "SELECT count(*) FROM {t} WHERE \"user\" IS NULL",
    "SELECT id, path FROM {t} WHERE path = '/say \"hi\"' AND latency > 4.5 ORDER BY id",
    "SELECT id FROM {t} WHERE ts >= CAST('2024-08-17T03:00:00Z' AS TIMESTAMP) AND ok "
    "ORDER BY id LIMIT 20",
]


@pytest.mark.parametrize("key", ["events.jsonl", "events.jsonl.gz", "gappy.jsonl"])
@pytest.mark.parametrize("statement", STATEMENTS)
def test_json_lines_answer_as_duckdb_does(server: ServerProcess, data: Path, key: str,
                                          statement: str) -> None:
    ours = _query(server, statement.format(t=f'"shop"."{key}"'))
    theirs = _duckdb(statement.format(t=f"read_json_auto('{data / 'shop' / key}')"))
    assert _rows(ours) == _rows(theirs)


@pytest.mark.parametrize("statement", [STATEMENTS[0], STATEMENTS[2], STATEMENTS[5]])
def test_a_prefix_table_answers_as_duckdb_over_its_objects(server: ServerProcess, data: Path,
                                                            statement: str) -> None:
    ours = _query(server, statement.format(t='"shop"."parts/"'))
    files = [str(data / "shop" / "parts" / name) for name in ("a.jsonl", "b.jsonl")]
    theirs = _duckdb(statement.format(t=f"read_json_auto({files})"))
    assert _rows(ours) == _rows(theirs)


def test_select_star_has_duckdbs_columns_and_types(server: ServerProcess, data: Path) -> None:
    ours = _query(server, 'SELECT * FROM "shop"."events.jsonl"')
    theirs = _duckdb(f"SELECT * FROM read_json_auto('{data / 'shop' / 'events.jsonl'}')")
    assert ours.schema.names == theirs.schema.names
    assert ours.schema.types == [pa.int64(), pa.string(), pa.timestamp("us", tz="UTC"),
                                 pa.int64(), pa.float64(), pa.bool_(), pa.string()]
    assert [pa.types.is_timestamp(t) and t.tz is not None for t in theirs.schema.types] == [
        pa.types.is_timestamp(t) for t in ours.schema.types]


@pytest.mark.parametrize("key, origin", [("events.jsonl", "sniffed"),
                                         ("typed/events.jsonl", "configured")])
def test_the_flight_info_says_where_the_columns_come_from_and_who_reads(
        server: ServerProcess, key: str, origin: str) -> None:
    import pyarrow.flight as flight

    info = flight.FlightClient(server.location).get_flight_info(
        statement_descriptor(f'SELECT * FROM "shop"."{key}"'))
    about = json.loads(info.app_metadata)
    assert about["columns"] == origin
    assert about["reader"] == "reference" and "pyarrow's JSON parser" in about["reason"]


def test_a_sum_of_integers_is_a_bigint(server: ServerProcess) -> None:
    table = _query(server, 'SELECT sum(bytes) AS s FROM "shop"."events.jsonl"')
    assert table.schema.types == [pa.int64()]


def test_get_table_schema_is_the_statements_schema(server: ServerProcess) -> None:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(server.location, autocommit=True) as conn:
        schema = conn.adbc_get_table_schema("events.jsonl", db_schema_filter="shop")
    table = _query(server, 'SELECT * FROM "shop"."events.jsonl" LIMIT 1')
    assert schema.names == table.schema.names
    assert schema.types == table.schema.types


def test_nested_values_read_as_their_json_text(server: ServerProcess) -> None:
    table = _query(server, 'SELECT * FROM "shop"."nested.ndjson"')
    assert table.schema.types == [pa.int64(), pa.string(), pa.string()]
    assert table.to_pylist() == [
        {"id": 1, "geo": '{"lat":1.5,"tags":["a"]}', "any": "1"},
        {"id": 2, "geo": None, "any": '"two"'},
        {"id": 3, "geo": "[]", "any": '{"k":null}'}]


def test_a_path_into_a_nested_column_is_refused_naming_where_it_reads(
        server: ServerProcess) -> None:
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT s.geo.lat FROM "shop"."nested.ndjson" s')
    message = str(info.value)
    assert "UnsupportedSyntax" in message and "s.geo.lat" in message
    assert "aws flavour" in message and "Traceback" not in message
    table = _query(server, 'SELECT s.geo.lat FROM "shop"."nested.ndjson" s', flavor="aws")
    assert table.column(0).to_pylist() == ["1.5", None, None]


def test_a_later_value_that_does_not_fit_fails_naming_record_and_column(
        server: ServerProcess) -> None:
    import adbc_driver_manager

    with pytest.raises(adbc_driver_manager.Error) as info:
        _query(server, 'SELECT sum(bytes) FROM "shop"."late_bad.jsonl"')
    message = str(info.value)
    assert "CastFailed" in message
    assert f"shop/late_bad.jsonl: record {ROWS + 1}, column 4 (bytes): 1.5 is not a valid " \
           "int64" in message
    assert ".flight-select.json" in message and "Traceback" not in message


def test_configured_columns_win_over_sniffing(server: ServerProcess, data: Path) -> None:
    table = _query(server, 'SELECT * FROM "shop"."typed/events.jsonl" ORDER BY bytes LIMIT 3')
    assert table.schema.names == ["id", "ts", "bytes"]
    assert table.schema.types == [pa.string(), pa.string(), pa.float64()]
    records = [json.loads(line) for line in (data / "shop" / "typed" / "events.jsonl")
               .read_text().splitlines()]
    expected = sorted((r for r in records if r["bytes"] is not None),
                      key=lambda r: r["bytes"])[:3]
    assert table.to_pylist() == [{"id": str(r["id"]), "ts": json.dumps(r["ts"]),
                                  "bytes": float(r["bytes"])} for r in expected]


def test_a_configuration_entry_without_columns_keeps_s3_selects_reading(
        server: ServerProcess) -> None:
    table = _query(server, 'SELECT * FROM "shop"."raw/events.jsonl"')
    assert table.num_columns == 1 and table.column(0).to_pylist()[0].startswith('{"id":1,')


@pytest.mark.parametrize("flavor", ["aws", "ceph"])
def test_the_s3_select_flavours_keep_json_text(server: ServerProcess, flavor: str) -> None:
    table = _query(server, 'SELECT s.id, s.ts FROM "shop"."events.jsonl" s WHERE s.id = 1',
                   flavor=flavor)
    (row,) = _rows(table)
    assert row[0] == "1" and row[1].startswith('"2024-08-16T')


def test_no_sniff_keeps_s3_selects_reading(data: Path) -> None:
    with running_server(data, "--no-sniff") as server:
        table = _query(server, 'SELECT * FROM "shop"."nested.ndjson"')
    assert table.num_columns == 1


def test_a_store_bucket_reads_as_the_folder(seaweedfs: SeaweedFS, data: Path,
                                            server: ServerProcess) -> None:
    bucket = seaweedfs.new_bucket("weblogs")
    client = seaweedfs.client()
    for key in ("events.jsonl", "events.jsonl.gz"):
        client.put_object(Bucket=bucket, Key=key, Body=(data / "shop" / key).read_bytes())
    with running_server(f"s3://{bucket}", "--sniff-kb", "16", env=seaweedfs.env()) as store:
        for key in ("events.jsonl", "events.jsonl.gz"):
            for statement in STATEMENTS[:4]:
                ours = _query(store, statement.format(t=f'"{bucket}"."{key}"'))
                folder = _query(server, statement.format(t=f'"shop"."{key}"'))
                assert ours.schema == folder.schema
                assert _rows(ours) == _rows(folder)
