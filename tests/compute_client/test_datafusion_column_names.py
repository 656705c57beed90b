"""DataFusion client: columns whose names are not plain identifiers are read and filtered right.

In the server's default (Ceph) flavour a bare double-quoted name is a string literal, so
``SELECT "order region"`` used to return the text ``order region`` on every row and a filter on
it matched nothing. The client now names every column ``s3object."order region"``, which the
s3-select dialect reads as that column in every flavour (also where two names differ only in
case, which AWS's rules make ambiguous unquoted); a name ``_N`` that is not the N-th
column is fetched with ``SELECT *`` (CSV reads ``_N`` as a position whatever the quoting).
Expected answers are computed with pyarrow from the same rows, never written out by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext
from sqlglot import parser, tokens

from compute_client import pushdown
from compute_client.datafusion_source import (
    FlightDataset,
    plan_pushdown,
    register_flight_table,
    unreferable_columns,
)
from flight_storage.execution.select_local import run_select
from select_dialect.s3select import ANONYMOUS_FUNCTIONS
from tests.conftest import ServerProcess, read_csv_headers, running_server

# Names chosen to break naive rendering: a space, two names equal but for case, a keyword, a
# dot, and "_3" standing at position 7 (CSV reads _3 as the third field).
ROWS = pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "order region": ["north", "south", "north", "east"],
    "Status": ["OPEN", "CLOSED", "OPEN", "OPEN"],
    "status": ["open", "closed", "closed", "open"],
    "select": ["s1", "s2", "s3", "s4"],
    "a.b": ["ab1", "ab2", "ab3", "ab4"],
    "_3": ["x1", "x2", "x3", "x4"],
})
TABLES = ("n/orders.csv", "n/orders.parquet")


@pytest.fixture(scope="module")
def names_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("names")
    bucket = root / "n"
    bucket.mkdir()
    pacsv.write_csv(ROWS, bucket / "orders.csv")
    pq.write_table(ROWS, bucket / "orders.parquet")
    read_csv_headers(bucket, "orders.csv")
    with running_server(root) as server:
        yield server


def _table(server: ServerProcess, table: str, flavor: str) -> tuple[SessionContext, FlightDataset]:
    ctx = SessionContext()
    # The CSV holds text on the server: declare id an integer, as the Parquet file has it.
    dataset = register_flight_table(ctx, "o", server.location, table, {"id": pa.int64()},
                                    flavor=flavor)
    return ctx, dataset


def _column(ctx: SessionContext, sql: str, name: str) -> list[object]:
    return ctx.sql(sql).to_arrow_table().column(name).to_pylist()


def _ids_where(mask: pa.ChunkedArray) -> list[int]:
    return sorted(ROWS.filter(mask).column("id").to_pylist())


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
@pytest.mark.parametrize("table", TABLES)
def test_projection_of_names_that_are_not_identifiers(names_server: ServerProcess, table: str,
                                                      flavor: str) -> None:
    ctx, dataset = _table(names_server, table, flavor)
    for name in ("order region", "Status", "status", "select", "a.b"):
        got = _column(ctx, f'SELECT "{name}" FROM o ORDER BY id', name)
        assert got == ROWS.column(name).to_pylist(), (name, dataset.last_scan)
    assert dataset.last_scan is not None
    assert dataset.last_scan.query == (
        f'SELECT s3object."id", s3object."a.b" FROM "n"."{table[2:]}"')


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
@pytest.mark.parametrize("table", TABLES)
def test_filters_on_names_that_are_not_identifiers_are_pushed_and_exact(
    names_server: ServerProcess, table: str, flavor: str
) -> None:
    ctx, dataset = _table(names_server, table, flavor)
    cases = [
        ("\"order region\" = 'north'", pc.equal(ROWS["order region"], "north"),
         "s3object.\"order region\" = 'north'"),
        ("\"Status\" = 'OPEN' AND status = 'open'",
         pc.and_(pc.equal(ROWS["Status"], "OPEN"), pc.equal(ROWS["status"], "open")),
         "s3object.\"Status\" = 'OPEN' AND s3object.\"status\" = 'open'"),
        ("\"select\" IN ('s2', 's4') AND \"a.b\" <> 'ab4'",
         pc.and_(pc.is_in(ROWS["select"], pa.array(["s2", "s4"])),
                 pc.not_equal(ROWS["a.b"], "ab4")),
         "s3object.\"select\" IN ('s2', 's4') AND s3object.\"a.b\" != 'ab4'"),
    ]
    for where, mask, pushed in cases:
        assert sorted(_column(ctx, f"SELECT id FROM o WHERE {where}", "id")) == _ids_where(mask)
        assert dataset.last_scan is not None
        assert dataset.last_scan.pushed == pushed, where
        assert dataset.last_scan.local == ""


@pytest.mark.parametrize("table", TABLES)
def test_a_positional_looking_name_elsewhere_is_read_whole_and_filtered_here(
    names_server: ServerProcess, table: str
) -> None:
    ctx, dataset = _table(names_server, table, "ceph")
    assert _column(ctx, 'SELECT "_3" FROM o ORDER BY id', "_3") == ROWS.column("_3").to_pylist()
    got = sorted(_column(ctx, "SELECT id FROM o WHERE \"_3\" = 'x2'", "id"))
    assert got == _ids_where(pc.equal(ROWS["_3"], "x2"))
    assert dataset.last_scan is not None
    assert dataset.last_scan.query == f'SELECT * FROM "n"."{table[2:]}"'
    assert dataset.last_scan.pushed == ""
    assert dataset.last_scan.local == '(_3 == "x2")'


# ------------------------------------------------------------------ pure rendering


def test_quote_identifier_qualifies_every_name_but_a_position() -> None:
    assert pushdown.quote_identifier("region") == 's3object."region"'
    assert pushdown.quote_identifier("Status") == 's3object."Status"'
    assert pushdown.quote_identifier("_3") == "_3"
    assert pushdown.quote_identifier("_3x") == 's3object."_3x"'
    assert pushdown.quote_identifier("order region") == 's3object."order region"'
    assert pushdown.quote_identifier('we"ird') == 's3object."we""ird"'
    assert pushdown.quote_identifier("Select") == 's3object."Select"'
    assert pushdown.quote_identifier("missing") == 's3object."missing"'


def test_filters_on_such_names_are_read_back_and_pushed() -> None:
    schema = pa.schema([("order region", pa.string()), ("a.b", pa.string()),
                        ("x,y", pa.string()), ("n", pa.int64())])
    expression = ((pc.field("order region") == "a b") & pc.field("a.b").is_null()
                  & pc.field("x,y").isin(["p", "q", "r"]) & (pc.field("n") > 1))
    plan = plan_pushdown(expression, schema, schema)
    assert plan.where == ("s3object.\"order region\" = 'a b' AND s3object.\"a.b\" IS NULL "
                          "AND s3object.\"x,y\" IN ('p', 'q', 'r') AND s3object.\"n\" > 1")
    assert plan.residual is None


def test_unreferable_columns() -> None:
    schema = pa.schema([("_1", pa.string()), ("_3", pa.string()), ("_3x", pa.string()),
                        ("a", pa.string()), ("a", pa.string())])
    assert unreferable_columns(schema) == {"_3", "a"}
    plan = plan_pushdown(pc.field("_3") == "v", schema, schema)
    assert plan.filters == ()
    assert plan.residual is not None


def _dialect_words() -> list[str]:
    """Every keyword and function name of the s3-select parser that looks like a name."""
    words = {k.lower() for k in tokens.Tokenizer.KEYWORDS}
    words |= {k.lower() for k in parser.Parser.FUNCTIONS} | {k.lower() for k in ANONYMOUS_FUNCTIONS}
    words |= {"missing", "s3object", "stdin"}
    return sorted(w for w in words if re.fullmatch(r"[a-z_][a-z0-9_]*", w)
                  and not re.fullmatch(r"_\d+", w))


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
def test_every_dialect_word_as_a_column_name_is_read_as_that_column(flavor: str) -> None:
    """Every word the parser knows (keywords, functions), as the client names a column, is
    read as that column: the projection and the WHERE below would read something else (or
    fail) for a name the client left bare."""
    words = _dialect_words()
    assert len(words) > 500
    first = [f"v{i}" for i in range(len(words))]
    second = [f"w{i}" for i in range(len(words))]
    data = "\n".join(",".join(row) for row in (words, first, second)).encode() + b"\n"
    refs = [pushdown.quote_identifier(word) for word in words]
    serialization = {"CSV": {"FileHeaderInfo": "USE"}}
    out = run_select(data, f"select {', '.join(refs)} from s3object", flavor=flavor,
                     input_serialization=serialization, output_serialization={"CSV": {}})
    got = [row.split(",") for row in out.records.decode().splitlines()]
    wrong = [(w, got[0][i]) for i, w in enumerate(words) if got[0][i] != first[i]]
    assert wrong == []
    assert got[1] == second
    condition = " and ".join(f"{ref} = 'w{i}'" for i, ref in enumerate(refs))
    out = run_select(data, f"select count(*) from s3object where {condition}", flavor=flavor,
                     input_serialization=serialization, output_serialization={"CSV": {}})
    assert out.records.strip() == b"1"
