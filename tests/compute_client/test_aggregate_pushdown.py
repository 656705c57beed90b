"""Aggregation pushdown: answers equal local DataFusion's, and only partial rows move.

A real server runs in a subprocess over a CSV (typed on the client with ``schema=``) and a
Parquet file of the same rows; every query also runs in DataFusion over the same rows held
locally, and the answers are compared (floats to a relative 1e-12: the server sums in another
order).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

from compute_client.aggregate_pushdown import collect_aggregate
from compute_client.datafusion_source import FlightDataset, register_flight_table
from tests.conftest import ServerProcess, read_csv_headers, running_server

ROWS = 20_000
TYPES = {"qty": pa.int64(), "price": pa.float64()}


def _rows(nulls: bool) -> list[dict[str, object]]:
    # NULLs only in Parquet: the standard flavour reads an empty CSV field as '', which the
    # client's int64 cast refuses with or without pushdown.
    return [{"region": f"r{i % 7}", "status": ("shipped", "open", "lost")[i % 3],
             "qty": None if nulls and i % 101 == 0 else (i * 37) % 1000 - 100,
             "price": None if nulls and i % 89 == 0 else ((i * 7919) % 10007) / 8.0}
            for i in range(ROWS)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("aggregates")
    (root / "shop").mkdir()
    rows = _rows(nulls=False)
    with (root / "shop" / "orders.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    pq.write_table(pa.Table.from_pylist(_rows(nulls=True)), root / "shop" / "orders.parquet",
                   row_group_size=3000)
    read_csv_headers(root / "shop", "orders.csv")
    with running_server(root) as process:
        yield process


Remote = tuple[SessionContext, FlightDataset, SessionContext]


@pytest.fixture(scope="module", params=["orders.csv", "orders.parquet"])
def remote(request: pytest.FixtureRequest, server: ServerProcess) -> Remote:
    """The remote table, and a context holding the same rows locally."""
    ctx = SessionContext()
    is_csv = request.param.endswith(".csv")
    dataset = register_flight_table(ctx, "orders", server.location, f"shop/{request.param}",
                                    schema=TYPES if is_csv else None)
    local = SessionContext()
    local.register_record_batches(
        "orders", [pa.Table.from_pylist(_rows(nulls=not is_csv)).to_batches()])
    return ctx, dataset, local


def _same(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema == expected.schema
    got, want = actual.to_pylist(), expected.to_pylist()
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        for name in want[0]:
            if isinstance(b[name], float):
                assert math.isclose(a[name], b[name], rel_tol=1e-12), (name, a, b)
            else:
                assert a[name] == b[name], (name, a, b)


PUSHED = [
    ("SELECT region, count(*) AS n, sum(qty) AS s, min(qty), max(price), avg(qty) AS a, "
     "avg(price), count(price) FROM orders GROUP BY region ORDER BY region"),
    ("SELECT status, region, count(*) AS n FROM orders WHERE status <> 'lost' AND qty > 10 "
     "GROUP BY status, region HAVING count(*) > 300 ORDER BY n DESC, status, region LIMIT 5"),
    "SELECT count(*), sum(qty), avg(price) FROM orders",
    "SELECT count(*) AS n, max(qty) FROM orders WHERE region = 'nowhere'",
    "SELECT region, count(*) AS n FROM orders WHERE region = 'nowhere' GROUP BY region",
    "SELECT region FROM orders WHERE qty BETWEEN 0 AND 5 GROUP BY region ORDER BY region",
    "SELECT sum(qty) + 1 AS s1, region FROM orders GROUP BY region ORDER BY s1",
]


@pytest.mark.parametrize("query", PUSHED)
def test_pushed_aggregates_equal_local_datafusion(
        remote: Remote, query: str) -> None:
    ctx, dataset, local = remote
    result = collect_aggregate(ctx, query, {"orders": dataset})
    assert result.reason == ""
    assert result.server_query is not None
    assert "GROUP BY" in result.server_query or "group" not in query.lower()
    assert result.rows <= 7 * 3  # partial rows: at most one per group
    _same(result.table, local.sql(query).to_arrow_table())


KEPT = {
    "SELECT region, count(DISTINCT status) FROM orders GROUP BY region ORDER BY region":
        "DISTINCT",
    "SELECT upper(region) AS r, count(*) FROM orders GROUP BY upper(region) ORDER BY r":
        "plain column",
    "SELECT region, count(*) FROM orders WHERE qty % 2 = 0 GROUP BY region ORDER BY region":
        "WHERE",
    "SELECT region, qty FROM orders ORDER BY qty, region LIMIT 3": "no aggregate",
    "SELECT status, min(region) FROM orders GROUP BY status ORDER BY status": "min of string",
}


@pytest.mark.parametrize("query", KEPT)
def test_other_shapes_run_on_the_client_with_the_same_answer(
        remote: Remote, query: str) -> None:
    ctx, dataset, local = remote
    result = collect_aggregate(ctx, query, {"orders": dataset})
    assert (result.server_query is None) == bool(KEPT[query])
    assert KEPT[query] in result.reason
    _same(result.table, local.sql(query).to_arrow_table())


def test_pushdown_moves_partials_instead_of_rows(remote: Remote) -> None:
    ctx, dataset, _ = remote
    query = "SELECT region, sum(qty) FROM orders GROUP BY region"
    pushed = collect_aggregate(ctx, query, {"orders": dataset})
    before = len(dataset.scans)
    ctx.sql(query).to_arrow_table()
    scanned = sum(s.rows for s in dataset.scans[before:])
    assert (pushed.rows, scanned) == (7, ROWS)


def test_an_unknown_table_keeps_everything_local() -> None:
    ctx = SessionContext()
    ctx.register_record_batches("t", [pa.table({"a": [1, 2, 2]}).to_batches()])
    result = collect_aggregate(ctx, "SELECT a, count(*) FROM t GROUP BY a ORDER BY a", {})
    assert result.server_query is None
    assert "not a Flight table" in result.reason
    assert result.table.column(1).to_pylist() == [1, 2]
