"""The standard surface speaks DataFusion's SQL (issue #39 item 4), checked against DuckDB.

A real server in a subprocess, the real ADBC driver, two generated CSV objects with a header
(sniffed: named and typed columns). Every statement of a fixed list (filters, GROUP BY,
DISTINCT aggregates, ROUND / DATE_TRUNC / CAST AS DATE, ILIKE, MEDIAN, window functions, a CTE,
subqueries, a set operation, JOINs of the two objects) answers as DuckDB answers the same text
over the same files (DuckDB's views carry the same names, ``"shop"."events.csv"``). What stays
refused (DDL, DML, COPY, EXPLAIN, table functions that read files, ...) is refused by name; the
S3 Select flavours keep refusing what S3 Select does not speak.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import duckdb
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.protocol import FLAVOR_HEADER, pack_any, pb
from tests.conftest import ServerProcess, running_server

EVENTS = '"shop"."events.csv"'
USERS = '"shop"."users.csv"'
PATHS = ["/a", "/about", "/cart", "/Admin", "/b/c", "/ABC"]
COUNTRIES = ["fr", "de", "it", "es"]
ROWS = 2_001  # odd: MEDIAN of integers is the middle value in both engines


def _write(bucket: Path) -> None:
    rng = random.Random(39)
    start = datetime.datetime(2024, 3, 1)
    with (bucket / "events.csv").open("w") as out:
        out.write("id,user_id,path,bytes,amount,ts\n")
        for i in range(ROWS):
            ts = start + datetime.timedelta(seconds=rng.randrange(0, 9 * 86_400))
            out.write(f"{i},u{rng.randrange(40)},{rng.choice(PATHS)},{rng.randrange(10, 2000)},"
                      f"{rng.randrange(0, 100_000) / 100:.2f},{ts:%Y-%m-%d %H:%M:%S}\n")
    with (bucket / "users.csv").open("w") as out:
        out.write("user_id,country,age\n")
        for u in range(0, 45):  # u40 .. u44 have no events: the LEFT JOIN keeps them
            out.write(f"u{u},{COUNTRIES[u % 4]},{18 + u}\n")
    with (bucket / "users.ndjson").open("w") as out:  # the same users as JSON Lines
        for u in range(0, 45):
            out.write(json.dumps({"user_id": f"u{u}", "country": COUNTRIES[u % 4],
                                  "age": 18 + u}) + "\n")


# (our statement, DuckDB's where its spelling differs)
STATEMENTS: list[tuple[str, str | None]] = [
    (f"SELECT id, path FROM {EVENTS} WHERE bytes > 1500 AND path LIKE '/a%' ORDER BY id", None),
    (f"SELECT path, count(*) AS n, sum(bytes) AS b, min(ts) AS first FROM {EVENTS} "
     "GROUP BY path ORDER BY path", None),
    (f"SELECT count(DISTINCT user_id) AS users, count(DISTINCT path) AS paths FROM {EVENTS}",
     None),
    (f"SELECT path, round(avg(amount), 2) AS a, round(max(amount)) AS m FROM {EVENTS} "
     "GROUP BY path ORDER BY path", None),
    (f"SELECT date_trunc('day', ts) AS day, count(*) AS n FROM {EVENTS} GROUP BY 1 ORDER BY 1",
     None),
    (f"SELECT CAST(ts AS DATE) AS d, max(bytes) AS m, count(DISTINCT path) AS p FROM {EVENTS} "
     "GROUP BY 1 ORDER BY 1", None),
    (f"SELECT count(*) AS n FROM {EVENTS} WHERE path ILIKE '/a%'", None),
    (f"SELECT median(bytes) AS m FROM {EVENTS}", None),
    # DuckDB's approx_count_distinct says 41 of these 40 users; DataFusion's HyperLogLog is
    # exact at this cardinality, so the exact count is the reference
    (f"SELECT approx_distinct(user_id) AS u FROM {EVENTS}",
     f"SELECT count(DISTINCT user_id) AS u FROM {EVENTS}"),
    (f"SELECT id, row_number() OVER (PARTITION BY path ORDER BY bytes DESC, id) AS r "
     f"FROM {EVENTS} ORDER BY id", None),
    (f"SELECT id, sum(bytes) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s "
     f"FROM {EVENTS} ORDER BY id", None),
    (f"WITH big AS (SELECT user_id, sum(bytes) AS b FROM {EVENTS} GROUP BY user_id) "
     "SELECT user_id, b FROM big WHERE b > 50000 ORDER BY user_id", None),
    (f"SELECT id FROM {EVENTS} WHERE bytes > (SELECT avg(bytes) + 800 FROM {EVENTS}) "
     "ORDER BY id", None),
    (f"SELECT count(*) AS n FROM {EVENTS} WHERE user_id IN "
     f"(SELECT user_id FROM {USERS} WHERE country = 'fr')", None),
    (f"SELECT u.country, count(*) AS n, sum(e.bytes) AS b FROM {EVENTS} e "
     f"JOIN {USERS} u ON e.user_id = u.user_id GROUP BY u.country ORDER BY u.country", None),
    (f"SELECT u.user_id, count(e.id) AS n FROM {USERS} u LEFT JOIN {EVENTS} e "
     "ON e.user_id = u.user_id GROUP BY u.user_id ORDER BY u.user_id", None),
    (f"SELECT {EVENTS}.id, {USERS}.age FROM {EVENTS} JOIN {USERS} "
     f"ON {EVENTS}.user_id = {USERS}.user_id WHERE {USERS}.age > 50 ORDER BY 1", None),
    (f"SELECT user_id FROM {USERS} WHERE age < 25 UNION SELECT user_id FROM {EVENTS} "
     "WHERE bytes > 1990 ORDER BY 1", None),
    # DataFusion's parser binds IS DISTINCT FROM looser than AND: parenthesised
    (f"SELECT id FROM {EVENTS} WHERE (path IS DISTINCT FROM '/a') AND bytes < 40 ORDER BY id "
     "LIMIT 5 OFFSET 2", None),
    (f"SELECT count(*) FILTER (WHERE bytes > 1000) AS big, round(stddev(bytes), 6) AS sd "
     f"FROM {EVENTS}", None),
    (f"SELECT date_part('hour', ts) AS h, count(*) AS n FROM {EVENTS} GROUP BY 1 ORDER BY 1",
     None),
    # still the s3-select path (one table, S3 Select's expressions): the same answers
    (f"SELECT user_id, count(*) AS n FROM {EVENTS} WHERE bytes BETWEEN 100 AND 200 "
     "GROUP BY user_id ORDER BY user_id", None),
]

# statement -> the error code and a word of its message
REFUSED: dict[str, tuple[str, str]] = {
    "CREATE TABLE t AS SELECT 1": ("UnsupportedSyntax", "CREATE"),
    "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'": ("UnsupportedSyntax",
                                                                     "CREATE"),
    "COPY (SELECT 1) TO '/tmp/out.csv'": ("UnsupportedSyntax", "COPY"),
    f"INSERT INTO {USERS} VALUES ('u99', 'fr', 1)": ("UnsupportedSyntax", "INSERT"),
    "SELECT * FROM read_csv('/etc/passwd')": ("UnsupportedSyntax", "read_csv"),
    "SELECT * FROM read_parquet('/tmp/x.parquet')": ("UnsupportedSyntax", "read_parquet"),
    f"SELECT * FROM {EVENTS} WHERE user_id IN (SELECT * FROM read_csv('/etc/passwd'))":
        ("UnsupportedSyntax", "read_csv"),
    "SELECT * FROM generate_series(1, 10)": ("UnsupportedSyntax", "generate_series"),
    f"SELECT no_such_function(id) FROM {EVENTS} e JOIN {USERS} u ON e.user_id = u.user_id":
        ("UnsupportedFunction", "no_such_function"),
    f"SELECT 1 FROM {EVENTS}; SELECT 2": ("UnsupportedSyntax", "one statement"),
    "EXPLAIN SELECT 1": ("ParseUnexpectedToken", "EXPLAIN"),
    # a type error DataFusion finds while planning, in GetFlightInfo (not when read)
    f"SELECT id FROM {EVENTS} WHERE path IS DISTINCT FROM '/a' AND bytes < 40":
        ("ProcessingTimeError", "Utf8 AND Boolean"),
    "SELECT * FROM information_schema.tables e JOIN information_schema.columns c ON 1 = 1":
        ("NoSuchBucket", "information_schema"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("datafusion_sql")
    (root / "shop").mkdir()
    _write(root / "shop")
    return root


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[ServerProcess]:
    with running_server(data) as process:
        yield process


@pytest.fixture(scope="module")
def duck(data: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.sql("CREATE SCHEMA shop")
    for name in ("events.csv", "users.csv", "users.ndjson"):
        path = str(data / "shop" / name).replace("'", "''")
        reader = "read_json" if name.endswith(".ndjson") else "read_csv"
        header = "" if name.endswith(".ndjson") else ", header=true"
        con.sql(f"CREATE VIEW shop.\"{name}\" AS SELECT * FROM {reader}('{path}'{header})")
    yield con
    con.close()


def _ours(server: ServerProcess, sql: str, flavor: str | None = None) -> pa.Table:
    options = {f"adbc.flight.sql.rpc.call_header.{FLAVOR_HEADER}": flavor} if flavor else {}
    with flightsql.connect(server.location, db_kwargs=options) as conn, \
            conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetch_arrow_table()


def _value(value: Any) -> Any:
    """One engine's value in a form both engines' answers compare in."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-9)
    return bool(ours == theirs)


@pytest.mark.parametrize(("statement", "duckdb_statement"), STATEMENTS,
                         ids=[s[0][:60] for s in STATEMENTS])
def test_statement_answers_as_duckdb_does(server: ServerProcess,
                                          duck: duckdb.DuckDBPyConnection, statement: str,
                                          duckdb_statement: str | None) -> None:
    ours = _ours(server, statement)
    theirs = duck.sql(duckdb_statement or statement).to_arrow_table()
    assert ours.column_names == theirs.column_names
    our_rows = [tuple(_value(v) for v in row.values()) for row in ours.to_pylist()]
    their_rows = [tuple(_value(v) for v in row.values()) for row in theirs.to_pylist()]
    assert len(our_rows) == len(their_rows) > 0
    for mine, other in zip(our_rows, their_rows, strict=True):
        assert all(_same(a, b) for a, b in zip(mine, other, strict=True)), (mine, other)


@pytest.mark.parametrize("statement", list(REFUSED), ids=[s[:50] for s in REFUSED])
def test_what_stays_refused_is_named(server: ServerProcess, statement: str) -> None:
    code, word = REFUSED[statement]
    with pytest.raises(adbc_driver_manager.Error) as raised:
        _ours(server, statement)
    assert f'"code": "{code}"' in str(raised.value)
    assert word in str(raised.value)
    assert "DoGet" not in str(raised.value)  # refused while planning, before any endpoint


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_s3_select_flavours_do_not_speak_it(server: ServerProcess, flavor: str) -> None:
    events = "\"shop\".'events.csv'" if flavor == "ceph" else EVENTS
    for statement in (f"SELECT count(DISTINCT _1) FROM {events}",
                      f"SELECT * FROM {events} a JOIN {events} b ON a._1 = b._1"):
        with pytest.raises(adbc_driver_manager.Error, match=r"UnsupportedSyntax|ParseUnexpected"):
            _ours(server, statement, flavor)


def test_a_joined_statement_is_one_endpoint_read_by_datafusion(server: ServerProcess) -> None:
    command = pb.CommandStatementQuery(
        query=f"SELECT count(*) FROM {EVENTS} e JOIN {USERS} u ON e.user_id = u.user_id")
    client = flight.connect(server.location)
    info = client.get_flight_info(flight.FlightDescriptor.for_command(pack_any(command)))
    assert len(info.endpoints) == 1
    assert json.loads(info.app_metadata)["reader"] == "datafusion"
    table = client.do_get(info.endpoints[0].ticket).read_all()
    assert table.column(0).to_pylist() == [ROWS]


def test_parameters_bind_in_a_joined_statement(server: ServerProcess,
                                               duck: duckdb.DuckDBPyConnection) -> None:
    sql = (f"SELECT count(*) AS n FROM {EVENTS} e JOIN {USERS} u ON e.user_id = u.user_id "
           "WHERE u.country = ? AND e.bytes > ?")
    with flightsql.connect(server.location) as conn, conn.cursor() as cursor:
        cursor.execute(sql, parameters=("fr", 1000))
        ours = cursor.fetchall()
    theirs = duck.execute(sql, ["fr", 1000]).fetchall()
    assert ours == theirs
    assert ours[0][0] > 0


def test_a_json_lines_table_joins_by_its_fields(server: ServerProcess,
                                                duck: duckdb.DuckDBPyConnection) -> None:
    sql = (f'SELECT u.country, count(*) AS n FROM {EVENTS} e JOIN "shop"."users.ndjson" u '
           "ON e.user_id = u.user_id GROUP BY u.country ORDER BY u.country")
    ours = _ours(server, sql)
    assert ours.to_pylist() == duck.sql(sql).to_arrow_table().to_pylist()


def test_a_joined_statement_is_bounded_as_any_statement(data: Path) -> None:
    with running_server(data, "--query-timeout", "2") as bounded:
        # 2001^3 rows: far beyond two seconds
        with pytest.raises(adbc_driver_manager.Error, match="QueryTimeout"):
            _ours(bounded, f"SELECT count(*) FROM {EVENTS} a CROSS JOIN {EVENTS} b "
                           f"CROSS JOIN {EVENTS} c")
        # and the server still answers
        assert _ours(bounded, f"SELECT count(*) AS n FROM {EVENTS}").column(0).to_pylist() == [
            ROWS]
