"""Apache Iceberg tables served as Flight SQL tables (``--iceberg``, docs/storage.md): the
catalog lists them, statements over ``"catalog"."namespace"."table"`` answer what pyiceberg's
own ``scan().to_arrow()`` answers on a generated corpus (schema evolution, hidden partitions,
snapshots), planning prunes files, endpoints pin the snapshot, and delete files are refused
rather than read wrong. The tables are written by pyiceberg in a folder warehouse; the same over
SeaweedFS is ``test_iceberg_store.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.protocol import ENDPOINTS_HEADER, ENDPOINTS_PARTITIONED, FLAVOR_HEADER
from tests.conftest import SAMPLES, ServerProcess, running_server, start_server
from tests.flight_storage.test_server_support import error_document, statement_descriptor
from tests.iceberg_corpus import NAMESPACE, Corpus, sql_catalog, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("iceberg")
    return write_corpus(sql_catalog("lake", str(root / "catalog.db"),
                                    (root / "warehouse").as_uri()))


def _iceberg_flag(corpus: Corpus) -> str:
    properties = corpus.catalog.properties
    return f"lake=sql:{properties['uri']}?warehouse={properties['warehouse']}"


@pytest.fixture(scope="module")
def server(corpus: Corpus) -> Iterator[ServerProcess]:
    with running_server(SAMPLES, "--iceberg", _iceberg_flag(corpus)) as process:
        yield process


def _query(server: ServerProcess, sql: str, flavor: str | None = None) -> pa.Table:
    options = {f"adbc.flight.sql.rpc.call_header.{FLAVOR_HEADER}": flavor} if flavor else {}
    with flightsql.connect(server.location, autocommit=True, conn_kwargs=options) as conn, \
            conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _sorted_rows(table: pa.Table, key: str) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: row[key])


def _expected(corpus: Corpus, name: str, row_filter: str, columns: tuple[str, ...],
              snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """pyiceberg's own answer: ``scan(row_filter, selected_fields, snapshot_id).to_arrow()``."""
    scan = corpus.table(name).scan(row_filter=row_filter, selected_fields=columns,
                                   snapshot_id=snapshot_id)
    return _sorted_rows(scan.to_arrow(), columns[0])


# (table, SQL WHERE, the same as a pyiceberg row filter, columns)
CASES = [
    ("events", "", "True", ("id", "ts", "user_name", "score", "ratio", "price", "note")),
    ("events", "WHERE price > 50", "price > 50", ("id", "price")),
    ("events", "WHERE ts >= TIMESTAMP '2024-01-20T00:00:00'", "ts >= '2024-01-20T00:00:00'",
     ("id", "ts", "user_name", "score", "ratio", "note")),
    ("events", "WHERE user_name = 'user3' AND score > 10", "user_name = 'user3' and score > 10",
     ("id", "user_name", "score")),
    ("events", "WHERE note IS NOT NULL", "note is not null", ("id", "note")),
    ("events", "WHERE ratio >= 1.5", "ratio >= 1.5", ("id", "ratio")),
    ("events", "WHERE id IN (5, 77, 150, 199)", "id in (5, 77, 150, 199)", ("id", "ts")),
    ("parts", "", "True", ("id", "region", "name", "d", "amount")),
    ("parts", "WHERE region = 'west'", "region = 'west'", ("id", "region")),
    ("parts", "WHERE id = 42", "id = 42", ("id", "name", "d")),
    ("parts", "WHERE name LIKE 'bx%'", "name like 'bx%'", ("id", "name")),
    ("parts", "WHERE d >= TO_TIMESTAMP('2024-04-01T')", "d >= '2024-04-01'", ("id", "d")),
    ("parts", "WHERE d < TO_TIMESTAMP('2024-03-01T12:00:00Z')", "d <= '2024-03-01'", ("id", "d")),
    ("parts", "WHERE region = 'east' OR amount < 10", "region = 'east' or amount < 10",
     ("id", "region", "amount")),
    ("big", "WHERE k >= 150000 AND k < 150100", "k >= 150000 and k < 150100", ("k", "v")),
]


@pytest.mark.parametrize(("name", "where", "row_filter", "columns"), CASES)
def test_answers_equal_pyiceberg(server: ServerProcess, corpus: Corpus, name: str, where: str,
                                 row_filter: str, columns: tuple[str, ...]) -> None:
    selected = ", ".join(f'"{c}"' for c in columns)
    answer = _query(server, f'SELECT {selected} FROM "lake"."{NAMESPACE}"."{name}" {where}')
    expected = _expected(corpus, name, row_filter, columns)
    assert expected
    assert _sorted_rows(answer, columns[0]) == expected


def test_schema_evolution_reads_old_files_by_field_id(server: ServerProcess) -> None:
    """Rows written before the rename, the added column and the promotions read under today's
    names and types: the old files' ``name`` is ``user_name``, ``note`` is NULL there."""
    answer = _query(server, f'SELECT * FROM "lake"."{NAMESPACE}"."events" WHERE id < 3')
    assert answer.schema.names == ["id", "ts", "user_name", "score", "ratio", "price", "note"]
    assert answer.schema.field("score").type == pa.int64()
    assert answer.schema.field("ratio").type == pa.float64()
    assert answer.schema.field("price").type == pa.decimal128(18, 2)
    assert _sorted_rows(answer.select(["id", "user_name", "note"]), "id") == [
        {"id": i, "user_name": f"user{i}", "note": None} for i in range(3)]


PARTITIONED = flight.FlightCallOptions(
    headers=[(ENDPOINTS_HEADER.encode(), ENDPOINTS_PARTITIONED.encode())])
"""A pyarrow client that reads every endpoint says so (``rpc/endpoint_readers.py``)."""


def _info(server: ServerProcess, sql: str) -> flight.FlightInfo:
    return flight.connect(server.location).get_flight_info(statement_descriptor(sql),
                                                           PARTITIONED)


def _about(info: flight.FlightInfo) -> dict[str, Any]:
    return dict(json.loads(info.app_metadata))


@pytest.mark.parametrize(("where", "most_files"), [
    ("WHERE ts >= TIMESTAMP '2024-02-01T00:00:00' AND ts < TIMESTAMP '2024-02-02T00:00:00'", 1),
    ("WHERE id >= 1000", 0),  # column bounds: no file holds such ids
])
def test_planning_prunes_files(server: ServerProcess, where: str, most_files: int) -> None:
    table = f'"lake"."{NAMESPACE}"."events"'
    everything = _about(_info(server, f"SELECT * FROM {table}"))
    pruned = _about(_info(server, f"SELECT * FROM {table} {where}"))
    assert everything["files"] == everything["pruned_files"] + everything["files"] > 50
    assert pruned["files"] <= most_files
    assert pruned["pruned_files"] == everything["files"] - pruned["files"]
    assert pruned["row_filter"] != "AlwaysTrue()"


@pytest.mark.parametrize(("where", "most_files"), [
    ("WHERE region = 'north'", 16),                 # identity
    ("WHERE id = 7", 12),                           # bucket(4, id), within the identity ones
    ("WHERE name LIKE 'cz%'", 12),                  # truncate(2, name)
    ("WHERE d < TO_TIMESTAMP('2024-02-01T')", 8),    # month(d)
])
def test_hidden_partitions_prune(server: ServerProcess, where: str, most_files: int) -> None:
    table = f'"lake"."{NAMESPACE}"."parts"'
    everything = _about(_info(server, f"SELECT * FROM {table}"))["files"]
    files = _about(_info(server, f"SELECT * FROM {table} {where}"))["files"]
    assert 0 < files <= most_files < everything


def test_a_big_file_is_split_by_row_groups(server: ServerProcess) -> None:
    info = _info(server, f'SELECT * FROM "lake"."{NAMESPACE}"."big"')
    assert _about(info)["files"] == 1
    assert len(info.endpoints) >= _about(info)["cores"]
    client = flight.connect(server.location)
    rows = sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)
    assert rows == 200_000


def test_older_snapshots(server: ServerProcess, corpus: Corpus) -> None:
    first, second = corpus.snapshots["events"][:2]
    table = f'"lake"."{NAMESPACE}"."events"'
    by_version = _query(server, f"SELECT id, name FROM {table} FOR VERSION AS OF {second}")
    assert _sorted_rows(by_version, "id") == _expected(corpus, "events", "True",
                                                       ("id", "name"), second)
    assert by_version.num_rows == 120
    committed = corpus.table("events").snapshot_by_id(first).timestamp_ms
    moment = f"{committed / 1000:.3f}"
    import datetime as dt

    text = dt.datetime.fromtimestamp(float(moment), dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    by_time = _query(server, f"SELECT count(*) AS n FROM {table} FOR TIMESTAMP AS OF '{text}'")
    assert by_time.to_pylist() == [{"n": 60}]


def test_tickets_pin_the_snapshot(tmp_path: Path) -> None:
    """Endpoints planned before a commit read the planned snapshot, never rows of the next."""
    catalog = sql_catalog("pin", str(tmp_path / "c.db"), (tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    table = catalog.create_table("ns.t", Schema(NestedField(1, "x", LongType())))
    table.append(pa.table({"x": pa.array(range(10), pa.int64())}))
    flag = f"pin=sql:sqlite:///{tmp_path / 'c.db'}?warehouse={(tmp_path / 'wh').as_uri()}"
    with running_server(SAMPLES, "--iceberg", flag) as server:
        info = _info(server, 'SELECT x FROM "pin"."ns"."t"')
        table.append(pa.table({"x": pa.array(range(10, 20), pa.int64())}))
        client = flight.connect(server.location)
        planned = sorted(x for e in info.endpoints
                         for x in client.do_get(e.ticket).read_all().column("x").to_pylist())
        assert planned == list(range(10))
        again = _query(server, 'SELECT count(*) AS n FROM "pin"."ns"."t"')
        assert again.to_pylist() == [{"n": 20}]


@pytest.mark.parametrize(("where", "row_filter"), [
    ("", "True"), ("WHERE k < 6", "k < 6"), ("WHERE v = 'v5' OR k >= 18", "v = 'v5' or k >= 18")])
def test_positional_deletes_are_applied(server: ServerProcess, corpus: Corpus, where: str,
                                        row_filter: str) -> None:
    """Rows 3 and 5 of one data file are deleted: never answered, also under a filter (the
    positions are numbered below it) and with the spared file beside."""
    answer = _query(server, f'SELECT k, v FROM "lake"."{NAMESPACE}"."deletes" {where}')
    expected = _expected(corpus, "deletes", row_filter, ("k", "v"))
    assert _sorted_rows(answer, "k") == expected
    assert not {3, 5} & {row["k"] for row in expected}


def test_positional_deletes_under_an_aggregate_and_one_endpoint(server: ServerProcess) -> None:
    table = f'"lake"."{NAMESPACE}"."deletes"'
    assert _query(server, f"SELECT count(*) AS n, sum(k) AS s FROM {table}").to_pylist() == [
        {"n": 18, "s": sum(range(20)) - 3 - 5}]
    options = {f"adbc.flight.sql.rpc.call_header.{ENDPOINTS_HEADER}": "single"}
    with flightsql.connect(server.location, autocommit=True, conn_kwargs=options) as conn, \
            conn.cursor() as cursor:
        cursor.execute(f"SELECT k FROM {table}")
        single = sorted(cursor.fetch_arrow_table().column("k").to_pylist())
    assert single == [k for k in range(20) if k not in (3, 5)]


def test_equality_deletes_are_refused_naming_them(server: ServerProcess,
                                                  corpus: Corpus) -> None:
    table = f'"lake"."{NAMESPACE}"."eqdeletes"'
    with pytest.raises(pa.ArrowNotImplementedError) as caught:  # gRPC UNIMPLEMENTED
        _info(server, f"SELECT * FROM {table}")
    document = error_document(caught.value)
    assert document["code"] == "NotImplemented"
    assert f"lake.{NAMESPACE}.eqdeletes" in document["message"]
    assert "equality delete" in document["message"]
    assert "eqdeletes-00001.parquet" in document["message"]
    # the snapshot before the delete file has none
    first = corpus.snapshots["eqdeletes"][-2]
    old = _query(server, f"SELECT count(*) AS n FROM {table} FOR VERSION AS OF {first}")
    assert old.to_pylist() == [{"n": 20}]


def test_a_table_without_snapshots_has_no_rows(server: ServerProcess) -> None:
    answer = _query(server, f'SELECT * FROM "lake"."{NAMESPACE}"."empty"')
    assert answer.num_rows == 0
    assert answer.schema.names == ["k", "v"]


@pytest.mark.parametrize("flavor", ["aws", "ceph", "standard"])
def test_s3_select_flavours_read_iceberg_tables(server: ServerProcess, corpus: Corpus,
                                                flavor: str) -> None:
    sql = (f'SELECT s.id, s.region FROM "lake"."{NAMESPACE}"."parts" s '
           "WHERE s.region = 'west' AND s.id < 30")
    answer = _query(server, sql, flavor)
    assert sorted(answer.column(0).to_pylist()) == [i for i in range(30) if i % 3 == 1]


def test_errors_name_what_is_missing(server: ServerProcess) -> None:
    cases = {
        f'SELECT * FROM "lake"."{NAMESPACE}"."nope"': "NoSuchTable",
        'SELECT * FROM "nolake"."ns"."t"': "NoSuchCatalog",
        f'SELECT * FROM "lake"."{NAMESPACE}"."events" FOR VERSION AS OF 123': "NoSuchSnapshot",
    }
    for sql, code in cases.items():
        with pytest.raises(pa.ArrowException) as caught:  # gRPC NOT_FOUND
            _info(server, sql)
        assert error_document(caught.value)["code"] == code, sql


def test_a_bad_iceberg_flag_is_refused_at_start() -> None:
    with pytest.raises(RuntimeError, match="--iceberg lake=mysql://x: give NAME=sql:"):
        start_server(SAMPLES, "--iceberg", "lake=mysql://x")


def test_catalog_lists_iceberg_tables_and_buckets(server: ServerProcess) -> None:
    with flightsql.connect(server.location, autocommit=True) as conn:
        objects: Any = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        schema = conn.adbc_get_table_schema("events", catalog_filter="lake",
                                            db_schema_filter=NAMESPACE)
    catalogs = {c["catalog_name"]: c for c in objects}
    assert set(catalogs) == {"", "lake"}
    lake = {s["db_schema_name"]: s for s in catalogs["lake"]["catalog_db_schemas"]}
    tables = {t["table_name"]: t["table_type"] for t in lake[NAMESPACE]["db_schema_tables"]}
    assert tables == {"events": "table", "parts": "table", "big": "table", "empty": "table",
                      "deletes": "table", "eqdeletes": "table"}
    buckets = {s["db_schema_name"] for s in catalogs[""]["catalog_db_schemas"]}
    assert "sales" in buckets
    assert schema.names == ["id", "ts", "user_name", "score", "ratio", "price", "note"]
    assert schema.field("score").type == pa.int64()


def test_a_data_file_without_field_ids_is_refused_naming_it(tmp_path: Path) -> None:
    """Files added from outside Iceberg (``add_files``) carry no field ids; until name
    mappings are applied the server refuses them rather than read NULLs."""
    import pyarrow.parquet as pq

    catalog = sql_catalog("added", str(tmp_path / "c.db"), (tmp_path / "wh").as_uri())
    catalog.create_namespace("ns")
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"x": pa.array([1, 2, 3], pa.int64())}), outside)
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    table = catalog.create_table("ns.t", Schema(NestedField(1, "x", LongType())))
    table.add_files([outside.as_uri()])
    flag = f"added=sql:sqlite:///{tmp_path / 'c.db'}?warehouse={(tmp_path / 'wh').as_uri()}"
    with running_server(SAMPLES, "--iceberg", flag) as server:
        info = _info(server, 'SELECT x FROM "added"."ns"."t"')
        with pytest.raises(pa.ArrowNotImplementedError) as caught:
            flight.connect(server.location).do_get(info.endpoints[0].ticket).read_all()
    document = error_document(caught.value)
    assert document["code"] == "NotImplemented"
    assert "outside.parquet" in document["message"] and "field ids" in document["message"]


MISSING_FILE_QUERIES = ('SELECT count(*) AS n FROM "gone"."corpus"."t"',
                        'SELECT * FROM "gone"."corpus"."t"',
                        'SELECT k FROM "gone"."corpus"."t" WHERE k > 10')


def _all_endpoints(server: ServerProcess, sql: str) -> int:
    """The rows of every endpoint of ``sql`` (one GetFlightInfo, a DoGet each)."""
    client = flight.connect(server.location)
    info = _info(server, sql)
    return sum(client.do_get(e.ticket).read_all().num_rows for e in info.endpoints)


def test_a_missing_data_file_is_an_error_on_a_warm_server(tmp_path: Path) -> None:
    """A data file the snapshot lists and the warehouse lacks is ``NoSuchKey`` naming it, on a
    server whose caches (footers, table metadata) hold the table from queries before (issue
    35: DataFusion read the missing file as a folder of no files, 4,000 rows of 5,000), and
    on a fresh server; never fewer rows."""
    from tests.iceberg_corpus import write_files_table

    catalog = sql_catalog("gone", str(tmp_path / "c.db"), (tmp_path / "wh").as_uri())
    paths = write_files_table(catalog, "t")
    flag = f"gone=sql:sqlite:///{tmp_path / 'c.db'}?warehouse={(tmp_path / 'wh').as_uri()}"
    with running_server(SAMPLES, "--iceberg", flag) as server:
        assert _query(server, MISSING_FILE_QUERIES[0]).to_pylist() == [{"n": 5000}]
        assert [_query(server, sql).num_rows for sql in MISSING_FILE_QUERIES[1:]] == [5000, 4989]
        assert _all_endpoints(server, MISSING_FILE_QUERIES[1]) == 5000
        Path(paths[2].removeprefix("file://")).unlink()
        for sql in MISSING_FILE_QUERIES:
            for run in (lambda s=sql: _query(server, s), lambda s=sql: _all_endpoints(server, s)):
                with pytest.raises((pa.ArrowException, flightsql.Error)) as caught:
                    run()
                document = error_document(caught.value)
                assert document["code"] == "NoSuchKey", sql
                assert paths[2] in document["message"], sql
    with running_server(SAMPLES, "--iceberg", flag) as fresh, \
            pytest.raises(flightsql.Error) as caught:
        _query(fresh, MISSING_FILE_QUERIES[1])
    assert error_document(caught.value)["code"] == "NoSuchKey"
    assert paths[2] in error_document(caught.value)["message"]


def test_damaged_metadata_is_a_named_error_not_retryable(tmp_path: Path) -> None:
    """A metadata file cut short, a manifest cut in half and a manifest list of other bytes
    are ``InvalidIcebergMetadata`` naming the table, INVALID_ARGUMENT (asking again reads the
    same bytes), where they had been UNAVAILABLE ("retry later")."""
    from tests.iceberg_corpus import write_files_table

    catalog = sql_catalog("bad", str(tmp_path / "c.db"), (tmp_path / "wh").as_uri())
    for name in ("meta", "manifest", "list"):
        write_files_table(catalog, name, files=2)
    meta = catalog.load_table(f"{NAMESPACE}.meta").metadata_location
    Path(meta.removeprefix("file://")).write_text('{"format-version": 2, "table-uuid": ')
    table = catalog.load_table(f"{NAMESPACE}.manifest")
    manifest = Path(table.current_snapshot().manifests(table.io)[0].manifest_path
                    .removeprefix("file://"))
    manifest.write_bytes(manifest.read_bytes()[:manifest.stat().st_size // 2])
    table = catalog.load_table(f"{NAMESPACE}.list")
    Path(table.current_snapshot().manifest_list.removeprefix("file://")).write_bytes(b"x" * 70)
    flag = f"bad=sql:sqlite:///{tmp_path / 'c.db'}?warehouse={(tmp_path / 'wh').as_uri()}"
    with running_server(SAMPLES, "--iceberg", flag) as server:
        for name in ("meta", "manifest", "list"):
            with pytest.raises(flightsql.ProgrammingError) as caught:  # INVALID_ARGUMENT
                _query(server, f'SELECT count(*) FROM "bad"."{NAMESPACE}"."{name}"')
            assert "INVALID_ARGUMENT" in str(caught.value), name
            document = error_document(caught.value)
            assert document["code"] == "InvalidIcebergMetadata", name
            assert f"bad.{NAMESPACE}.{name}" in document["message"]


@pytest.mark.parametrize("name", [f'"lake"."{NAMESPACE}"."parts"', f'"lake"."{NAMESPACE}.parts"'])
def test_a_prepared_statement_with_parameters_reads_an_iceberg_table(server: ServerProcess,
                                                                     name: str) -> None:
    """CreatePreparedStatement of a statement with ``?`` checks the table it reads (an Iceberg
    table, by either spelling: ``request/table_kinds.py``) before the parameters are bound."""
    with flightsql.connect(server.location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {name} WHERE region = ? AND id < 30",
                       parameters=("west",))
        ids = sorted(cursor.fetch_arrow_table().column(0).to_pylist())
    assert ids == [i for i in range(30) if i % 3 == 1]


@pytest.mark.parametrize("flavor", [None, "ceph", "aws"])
def test_get_tables_schema_is_the_statements_for_an_iceberg_table(server: ServerProcess,
                                                                  flavor: str | None) -> None:
    options = {f"adbc.flight.sql.rpc.call_header.{FLAVOR_HEADER}": flavor} if flavor else {}
    with flightsql.connect(server.location, autocommit=True, conn_kwargs=options) as conn:
        listed = conn.adbc_get_table_schema("events", catalog_filter="lake",
                                            db_schema_filter=NAMESPACE)
    headers = [] if flavor is None else [(FLAVOR_HEADER.encode(), flavor.encode())]
    client = flight.FlightClient(server.location)
    try:
        info = client.get_flight_info(
            statement_descriptor(f'SELECT * FROM "lake"."{NAMESPACE}"."events"'),
            flight.FlightCallOptions(headers=headers))
    finally:
        client.close()
    assert [(f.name, f.type) for f in listed] == [(f.name, f.type) for f in info.schema]
    assert len(listed) == 7


@pytest.mark.parametrize(("name", "code"), [
    (f'"lake"."{NAMESPACE}"."parts"', "UnsupportedSyntax"),
    (f'"lake"."{NAMESPACE}.parts"', "UnsupportedSyntax"),  # the same table, as read alone
    ('"nolake"."ns"."t"', "NoSuchCatalog"),  # as the statement over it alone says
])
def test_a_join_names_iceberg_tables_as_a_statement_over_one_does(server: ServerProcess,
                                                                  name: str, code: str) -> None:
    """A statement DataFusion plans over several tables decides each name's kind by the rule
    a one-table statement uses (``request/table_kinds.named_table``)."""
    with pytest.raises(pa.ArrowException) as caught:
        _info(server, f'SELECT b.id FROM "sales"."parquet/orders.parquet" a JOIN {name} b '
                      "ON a.order_id = b.id")
    document = error_document(caught.value)
    assert document["code"] == code
    if code == "UnsupportedSyntax":
        assert "is an Iceberg table: it is read alone" in document["message"]
