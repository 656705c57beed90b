"""The fixed s3-select query set of the server-efficiency and peers benchmarks.

Each query names the object it reads (``lineitem``: TPC-H lineitem CSV from tpchgen-cli;
``orders``: the retail orders CSV of ``python -m data.generate``), its s3-select text (header
names, ``FileHeaderInfo USE``), the same question in DuckDB SQL over all-VARCHAR columns, and,
where moto's S3 Select emulation (py-partiql-parser) can answer it, its PartiQL text.
"""

from __future__ import annotations

from dataclasses import dataclass

ORDERS_COLUMNS: tuple[str, ...] = (
    "order_id", "customer_id", "region", "product", "quantity", "unit_price", "order_ts",
    "status", "note",
)


@dataclass(frozen=True)
class Query:
    """One benchmark query.

    Attributes:
        name: short id (table rows, plot labels).
        kind: what it exercises.
        table: ``lineitem`` or ``orders``.
        s3select: the statement over ``s3object``.
        duckdb: the same over the DuckDB view ``s3object`` (all columns VARCHAR).
        partiql: the same for py-partiql-parser, or None when it cannot express it.
    """

    name: str
    kind: str
    table: str
    s3select: str
    duckdb: str
    partiql: str | None = None

    @property
    def has_header(self) -> bool:
        """True when the query's file has a header row (the peer file has none)."""
        return self.table != "peer"

    def on(self, bucket: str, key: str) -> str:
        """The statement with ``FROM "bucket"."key"`` (what a Flight SQL client sends)."""
        return self.s3select.replace(" FROM s3object", f' FROM "{bucket}"."{key}"', 1)


QUERIES: tuple[Query, ...] = (
    Query(
        "select_star", "full scan, every column", "lineitem",
        "SELECT * FROM s3object",
        "SELECT * FROM s3object",
        "SELECT * FROM s3object",
    ),
    Query(
        "projection", "3 of 16 columns", "lineitem",
        "SELECT l_orderkey, l_partkey, l_shipmode FROM s3object",
        "SELECT l_orderkey, l_partkey, l_shipmode FROM s3object",
        "SELECT l_orderkey, l_partkey, l_shipmode FROM s3object",
    ),
    Query(
        "filter_eq", "string equality, ~25% of rows", "lineitem",
        "SELECT * FROM s3object s WHERE s.l_returnflag = 'R'",
        "SELECT * FROM s3object WHERE l_returnflag = 'R'",
        "SELECT * FROM s3object s WHERE s.l_returnflag = 'R'",
    ),
    Query(
        "filter_cast", "numeric filter (cast), ~4% of rows", "lineitem",
        "SELECT * FROM s3object WHERE CAST(l_quantity AS INT) > 48",
        "SELECT * FROM s3object WHERE CAST(l_quantity AS INTEGER) > 48",
    ),
    Query(
        "count", "count(*)", "lineitem",
        "SELECT count(*) FROM s3object",
        "SELECT count(*) FROM s3object",
        "SELECT count(*) FROM s3object",
    ),
    Query(
        "aggregate", "sum/avg/max of casts with a filter", "lineitem",
        "SELECT sum(CAST(l_extendedprice AS FLOAT)), avg(CAST(l_discount AS FLOAT)), "
        "max(CAST(l_quantity AS INT)) FROM s3object WHERE l_returnflag = 'R'",
        "SELECT sum(CAST(l_extendedprice AS DOUBLE)), avg(CAST(l_discount AS DOUBLE)), "
        "max(CAST(l_quantity AS INTEGER)) FROM s3object WHERE l_returnflag = 'R'",
    ),
    Query(
        "string_functions", "upper, substring, char_length, trim", "lineitem",
        "SELECT upper(l_shipmode), substring(l_comment, 1, 8), char_length(l_comment), "
        "trim(l_shipinstruct) FROM s3object WHERE l_linestatus = 'F'",
        "SELECT upper(l_shipmode), substring(l_comment, 1, 8), length(l_comment), "
        "trim(l_shipinstruct) FROM s3object WHERE l_linestatus = 'F'",
    ),
    Query(
        "like", "LIKE with two wildcards", "lineitem",
        "SELECT l_orderkey, l_comment FROM s3object WHERE l_comment LIKE '%regular%deposits%'",
        "SELECT l_orderkey, l_comment FROM s3object WHERE l_comment LIKE '%regular%deposits%'",
    ),
    Query(
        "timestamp_functions", "to_timestamp, extract, date_add, to_string", "orders",
        "SELECT order_id, extract(hour FROM to_timestamp(order_ts)), "
        "to_string(date_add(day, 7, to_timestamp(order_ts)), 'yyyy-MM-dd') FROM s3object "
        "WHERE to_timestamp(order_ts) < to_timestamp('2024-07-01T00:00:00Z')",
        "SELECT order_id, hour(CAST(order_ts AS TIMESTAMPTZ) AT TIME ZONE 'UTC'), "
        "strftime(CAST(order_ts AS TIMESTAMPTZ) + INTERVAL 7 DAY, '%Y-%m-%d') FROM s3object "
        "WHERE CAST(order_ts AS TIMESTAMPTZ) < TIMESTAMPTZ '2024-07-01 00:00:00+00'",
    ),
    Query(
        "timestamp_diff", "date_diff between two parsed timestamps", "orders",
        "SELECT count(*) FROM s3object WHERE date_diff(day, to_timestamp(order_ts), "
        "to_timestamp('2025-01-01T00:00:00Z')) > 100",
        "SELECT count(*) FROM s3object WHERE date_diff('day', CAST(order_ts AS TIMESTAMPTZ), "
        "TIMESTAMPTZ '2025-01-01 00:00:00+00') > 100",
    ),
)
"""The query set, in report order."""

PEER_COLUMNS: tuple[str, ...] = ("_1", "_2", "_3", "_4", "_5", "_6")

PEER_QUERIES: tuple[Query, ...] = (
    Query(
        "peer_count", "count(*), headerless CSV", "peer",
        "SELECT count(*) FROM s3object",
        "SELECT count(*) FROM s3object",
    ),
    Query(
        "peer_int_casts", "2 int casts in a filter", "peer",
        "SELECT count(*) FROM s3object WHERE CAST(_2 AS INT) > 500 AND CAST(_3 AS INT) < 50",
        "SELECT count(*) FROM s3object WHERE CAST(column1 AS INTEGER) > 500 "
        "AND CAST(column2 AS INTEGER) < 50",
    ),
    Query(
        "peer_projection_1pct", "projection of 1% of rows", "peer",
        "SELECT _1, _4, _6 FROM s3object WHERE _3 = '0'",
        "SELECT column0, column3, column5 FROM s3object WHERE column2 = '0'",
    ),
    Query(
        "peer_4_aggregates", "min/max/sum/avg of casts", "peer",
        "SELECT min(CAST(_2 AS INT)), max(CAST(_2 AS INT)), sum(CAST(_4 AS FLOAT)), "
        "avg(CAST(_4 AS FLOAT)) FROM s3object",
        "SELECT min(CAST(column1 AS INTEGER)), max(CAST(column1 AS INTEGER)), "
        "sum(CAST(column3 AS DOUBLE)), avg(CAST(column3 AS DOUBLE)) FROM s3object",
    ),
    Query(
        "peer_year", "year of to_timestamp", "peer",
        "SELECT count(*) FROM s3object WHERE extract(year FROM to_timestamp(_5)) = 2024",
        "SELECT count(*) FROM s3object WHERE year(CAST(column4 AS TIMESTAMP)) = 2024",
    ),
    Query(
        "peer_like", "LIKE with a wildcard", "peer",
        "SELECT count(*) FROM s3object WHERE _6 LIKE '%echo%'",
        "SELECT count(*) FROM s3object WHERE column5 LIKE '%echo%'",
    ),
)
"""The six peer queries (the shapes Ceph's s3select engine is benchmarked on), over a
headerless CSV of synthetic records (:func:`benchmarks.common.peer_csv`)."""
