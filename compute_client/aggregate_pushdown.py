"""Aggregation pushdown for DataFusion queries over one flight-select table.

    ctx = SessionContext()
    orders = register_flight_table(ctx, "orders", location, "sales/orders.csv",
                                   schema={"qty": "int64"})
    result = collect_aggregate(ctx, "SELECT region, count(*), avg(qty) FROM orders "
                               "WHERE status = 'shipped' GROUP BY region", {"orders": orders})
    result.server_query  # 'SELECT region AS g0, COUNT(*) AS p0, SUM(CAST(qty AS INT)) ...'

Why an explicit call: datafusion-python 55 hands a registered dataset only a projection and a
filter (see :mod:`compute_client.datafusion_source`); no Python hook ever sees the aggregate,
so ``ctx.sql(...)`` alone always moves every matching row to the client. Here the query text
is read with sqlglot (DataFusion's SQL is close to Postgres'), and when its shape allows it
the grouping runs next to the data:

1. shape: one SELECT over one registered Flight table; GROUP BY plain columns (or none);
   aggregates COUNT(*), COUNT of a plain column, SUM/MIN/MAX/AVG of a plain numeric column
   (S3 Select's MIN/MAX read text as numbers); no DISTINCT, join, window or subquery. Columns keep their meaning on the server: the same Arrow type there, or CSV
   text the client declared ``int64`` (``CAST(c AS INT)``) or ``float64`` (``CAST(c AS
   FLOAT)``, aggregates only).
2. WHERE: DataFusion plans ``SELECT count(*) FROM t WHERE <where>`` (planned, never run: it
   shows in :attr:`FlightDataset.scans` with no rows) and the dataset splits the filter it
   receives exactly as a normal scan does; the aggregate is pushed only if the whole WHERE
   went to the server (nothing local, no Filter left in the plan).
3. the server runs ``SELECT <groups>, <partials> FROM "bucket"."key" WHERE ... GROUP BY ...``
   in the standard flavour, one partial row per group and endpoint (AVG as SUM and COUNT);
4. the client registers the partial rows as a table and runs the *final* aggregate over
   them with DataFusion: COUNT as the sum of counts, SUM/MIN/MAX of the partials, AVG as
   sum over count; HAVING, ORDER BY and LIMIT run there, and the result is cast to the schema
   DataFusion gives the original query.

Anything outside that shape runs unchanged through :func:`compute_client.datafusion_source.
collect` (filter, projection and LIMIT pushdown only); :attr:`AggregateResult.reason` says why.
Hand-written because no library rewrites a query into partial and final aggregates for a
remote table behind a pyarrow dataset.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import expressions as exp
from sqlglot.errors import SqlglotError

from compute_client import pushdown
from compute_client.datafusion_source import FlightDataset, collect
from compute_client.flight import FlightSelectClient

log = logging.getLogger(__name__)

_READ = "postgres"  # the sqlglot dialect closest to DataFusion's SQL
_AGGREGATES = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)
_PARTIAL_TABLE = itertools.count()


class NotPushable(ValueError):
    """The query's shape or types keep its aggregate on the client."""


@dataclass(frozen=True)
class AggregateResult:
    """A query's answer and what moved to produce it.

    Attributes:
        table: the result, with the schema DataFusion gives the query.
        server_query: the grouped statement sent to the server, or None when not pushed.
        reason: why the aggregate was not pushed ('' when it was).
        rows: rows received from the server (partial rows when pushed).
        bytes: Arrow bytes received from the server.
    """

    table: pa.Table
    server_query: str | None
    reason: str = ""
    rows: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class _Column:
    """A column as the server reads it: its name and the conversion that keeps its meaning."""

    name: str
    cast: str | None

    def sql(self) -> str:
        return pushdown.render_column(pushdown.Field(self.name, self.cast) if self.cast
                                      else self.name)


@dataclass
class _Plan:
    dataset: FlightDataset
    table_names: set[str]
    groups: list[str]
    partials: dict[tuple[str, str | None], str] = field(default_factory=dict)


# Server column type (by category) -> client type -> the server cast that gives it.
_TEXT_CASTS: dict[pa.DataType, str] = {pa.int64(): "INT", pa.float64(): "FLOAT"}


def collect_aggregate(ctx: Any, query: str, tables: Mapping[str, FlightDataset]
                      ) -> AggregateResult:
    """Run ``query``; compute its aggregate next to the data when its shape allows it.

    Args:
        ctx: the ``datafusion.SessionContext`` the tables are registered in.
        query: DataFusion SQL.
        tables: registered name -> dataset (as for :func:`~compute_client.datafusion_source.
            collect`).

    Returns:
        The answer, equal to ``ctx.sql(query)``'s, and what was pushed.
    """
    expected = ctx.sql(query).schema()
    try:
        statement, plan = _plan(query, tables)
        where = _pushed_where(ctx, statement, plan)
    except NotPushable as exc:
        log.info("aggregate kept on the client (%s): %s", exc, query)
        return _unpushed(ctx, query, tables, str(exc))
    server_query = _server_query(plan, where)
    partial, rows, size = _read_partials(plan.dataset, server_query)
    name = f"flight_partials_{next(_PARTIAL_TABLE)}"
    ctx.register_record_batches(name, [partial.to_batches() or
                                       [pa.RecordBatch.from_pylist([], partial.schema)]])
    try:
        final = _final_query(statement, plan, name, expected.names)
        table = ctx.sql(final).to_arrow_table()
    finally:
        ctx.deregister_table(name)
    log.info("aggregate pushed: %s (%d partial rows, %d bytes)", server_query, rows, size)
    return AggregateResult(table.cast(expected), server_query, "", rows, size)


def _unpushed(ctx: Any, query: str, tables: Mapping[str, FlightDataset],
              reason: str) -> AggregateResult:
    before = {name: len(dataset.scans) for name, dataset in tables.items()}
    table = collect(ctx, query, tables)
    scans = [s for name, d in tables.items() for s in d.scans[before[name]:]]
    return AggregateResult(table, None, reason, sum(s.rows for s in scans),
                           sum(s.bytes for s in scans))


# ------------------------------------------------------------------ shape


def _plan(query: str, tables: Mapping[str, FlightDataset]) -> tuple[exp.Select, _Plan]:
    statement = _plain_select(query)
    table, name = _flight_table(statement, tables)
    if statement.find(exp.Subquery, exp.Window, exp.Distinct, exp.Filter) is not None:
        raise NotPushable("has a subquery, window, DISTINCT or FILTER aggregate")
    group = statement.args.get("group")
    group_nodes = list(group.expressions) if group is not None else []
    aggregates: list[exp.Expression] = list(statement.find_all(*_AGGREGATES))
    if not aggregates and not group_nodes:
        raise NotPushable("no aggregate")
    names = {name} | ({_identifier(table.args["alias"].this)} if table.alias else set())
    plan = _Plan(tables[name], names, [])
    for node in group_nodes:
        plan.groups.append(_grouping_column(node, plan))
    for node in aggregates:
        for partial in _partials_of(node, plan):
            plan.partials.setdefault(partial, f"p{len(plan.partials)}")
    _check_bare_columns(statement, plan)
    return statement, plan


def _plain_select(query: str) -> exp.Select:
    """``query`` parsed, when it is one SELECT without a clause the plan cannot split."""
    try:
        statement = sqlglot.parse_one(query, read=_READ)
    except SqlglotError as exc:
        raise NotPushable(f"not read: {exc}") from None
    if not isinstance(statement, exp.Select):
        raise NotPushable("not a single SELECT")
    for clause in ("joins", "with_", "laterals", "distinct", "qualify", "windows"):
        if statement.args.get(clause):
            raise NotPushable(f"has {clause}")
    return statement


def _flight_table(statement: exp.Select, tables: Mapping[str, FlightDataset]
                  ) -> tuple[exp.Table, str]:
    """The one registered Flight table the SELECT reads, and its name."""
    source = statement.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or table.args.get("db"):
        raise NotPushable("FROM is not one registered table")
    name = _identifier(table.this)
    if name not in tables:
        raise NotPushable(f"{name} is not a Flight table")
    return table, name


def _identifier(node: exp.Expression) -> str:
    """A name as DataFusion resolves it: unquoted names are lower-cased."""
    assert isinstance(node, exp.Identifier)
    text = str(node.this)  # an Identifier's ``this`` is its text (sqlglot's Identifier)
    return text if node.quoted else text.lower()


def _column_name(node: exp.Expression, plan: _Plan) -> str:
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise NotPushable(f"not a plain column: {node.sql()}")
    if node.table and node.args["table"] is not None and \
            _identifier(node.args["table"]) not in plan.table_names:
        raise NotPushable(f"unknown qualifier in {node.sql()}")
    name = _identifier(node.this)
    if name not in plan.dataset.schema.names:
        raise NotPushable(f"{name} is not a column of the table")
    return name


def _server_column(name: str, plan: _Plan, *, grouping: bool) -> _Column:
    """How the server reads ``name`` so that its values equal the client's."""
    client = plan.dataset.schema.field(name).type
    server = plan.dataset.server_schema.field(name).type
    if name not in plan.dataset.server_schema.names:
        raise NotPushable(f"column {name} has no plain server reference")
    if client == server:
        return _Column(name, None)
    cast = _TEXT_CASTS.get(client) if pa.types.is_string(server) else None
    if cast is None or (grouping and cast == "FLOAT"):
        raise NotPushable(f"column {name}: {client} on the client, {server} on the server")
    return _Column(name, cast)


def _grouping_column(node: exp.Expression, plan: _Plan) -> str:
    name = _column_name(node, plan)
    _server_column(name, plan, grouping=True)
    return name


def _partials_of(node: exp.Expression, plan: _Plan) -> list[tuple[str, str | None]]:
    """The partial aggregates the server computes for one aggregate call."""
    argument = node.this
    if isinstance(node, exp.Count) and isinstance(argument, exp.Star):
        return [("COUNT", None)]
    if node.expressions or argument is None:
        raise NotPushable(f"unsupported aggregate: {node.sql()}")
    name = _column_name(argument, plan)
    client = plan.dataset.schema.field(name).type
    _server_column(name, plan, grouping=False)
    if isinstance(node, exp.Count):
        return [("COUNT", name)]
    # Only numbers: S3 Select's MIN/MAX read CSV text as numbers, so strings would differ.
    if not (pa.types.is_integer(client) or pa.types.is_floating(client)):
        raise NotPushable(f"{node.key} of {client}")
    if isinstance(node, exp.Avg):
        return [("SUM", name), ("COUNT", name)]
    return [(node.key.upper(), name)]


def _check_bare_columns(statement: exp.Select, plan: _Plan) -> None:
    """Every column outside an aggregate must be a grouping column (the final query sees only
    groups and partials)."""
    for column in statement.find_all(exp.Column):
        if column.find_ancestor(*_AGGREGATES) is not None or isinstance(column.this, exp.Star):
            continue
        if column.find_ancestor(exp.Group, exp.Where) is not None:
            continue
        name = _identifier(column.this)
        aliases = {e.alias_or_name.lower() for e in statement.expressions if e.alias}
        if name in plan.groups or (name in aliases and not column.table):
            continue
        raise NotPushable(f"column {column.sql()} is neither grouped nor aggregated")


# ------------------------------------------------------------------ WHERE, through the scan


def _pushed_where(ctx: Any, statement: exp.Select, plan: _Plan) -> str:
    """The WHERE clause the server runs: the dataset's own split of DataFusion's filter."""
    where = statement.args.get("where")
    if where is None:
        return ""
    dataset = plan.dataset
    probe = statement.copy()
    for clause in ("group", "having", "order", "limit", "offset"):
        probe.set(clause, None)
    probe.set("expressions", [exp.Count(this=exp.Star())])
    frame = ctx.sql(probe.sql(dialect=_READ))
    if any(type(n.to_variant()).__name__ == "Filter" for n in _walk(
            frame.optimized_logical_plan())):
        raise NotPushable("part of the WHERE stays above the scan")
    before = len(dataset.scans)
    frame.execution_plan()  # planning the scan is what hands the dataset its filter
    scans = dataset.scans[before:]
    if len(scans) != 1:
        raise NotPushable(f"the probe planned {len(scans)} scans")
    scan = scans[0]
    if scan.local or not scan.query:
        raise NotPushable("the filter is not pushed whole" if scan.local
                          else "the filter is constant")
    return scan.pushed


def _walk(node: Any) -> Any:
    yield node
    for child in node.inputs():
        yield from _walk(child)


# ------------------------------------------------------------------ server and final queries


def _server_query(plan: _Plan, where: str) -> str:
    table = plan.dataset.table
    groups = [_server_column(g, plan, grouping=True).sql() for g in plan.groups]
    items = [f"{sql} AS g{i}" for i, sql in enumerate(groups)]
    for (function, column), alias in plan.partials.items():
        argument = "*" if column is None else _server_column(column, plan,
                                                              grouping=False).sql()
        items.append(f"{function}({argument}) AS {alias}")
    sql = f"SELECT {', '.join(items)} FROM {pushdown.quote_table(table.bucket, table.key)}"
    if where:
        sql += f" WHERE {where}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    return sql


def _read_partials(dataset: FlightDataset, query: str) -> tuple[pa.Table, int, int]:
    with FlightSelectClient(dataset.table.connection) as client:
        remote = client.execute(query)
        batches = [b for e in remote.endpoints for b in client.read(e)]
    return (pa.Table.from_batches(batches, schema=remote.schema),
            sum(b.num_rows for b in batches), sum(b.nbytes for b in batches))


def _merge(node: exp.Expression, plan: _Plan) -> exp.Expression:
    """The final aggregate over the partial rows for one aggregate call of the query."""
    def partial(function: str, column: str | None) -> exp.Expression:
        return exp.column(plan.partials[(function, column)], quoted=True)

    argument = None if isinstance(node.this, exp.Star) else _identifier(node.this.this)
    if isinstance(node, exp.Count):
        return exp.Coalesce(this=exp.Sum(this=partial("COUNT", argument)),
                            expressions=[exp.Literal.number(0)])
    if isinstance(node, exp.Avg):
        total = exp.cast(exp.Sum(this=partial("SUM", argument)), "DOUBLE")
        count = exp.Nullif(this=exp.cast(exp.Sum(this=partial("COUNT", argument)), "DOUBLE"),
                           expression=exp.Literal.number(0))
        return exp.Paren(this=exp.Div(this=total, expression=count))
    return type(node)(this=partial(node.key.upper(), argument))


def _final_query(statement: exp.Select, plan: _Plan, partials: str,
                 output_names: list[str]) -> str:
    final = statement.copy()
    final.set("where", None)
    final.set("from_", exp.From(this=exp.to_table(partials, quoted=True)))
    group_columns = {name: f"g{i}" for i, name in enumerate(plan.groups)}

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, _AGGREGATES):
            return _merge(node, plan)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            name = _identifier(node.this)
            if name in group_columns:
                return exp.column(group_columns[name], quoted=True)
        return node

    rewritten = final.transform(rewrite, copy=False)
    assert isinstance(rewritten, exp.Select)
    rewritten.set("expressions", [
        exp.alias_(e.this if isinstance(e, exp.Alias) else e, name, quoted=True)
        for e, name in zip(rewritten.expressions, output_names, strict=True)
    ])
    return rewritten.sql(dialect=_READ)


__all__ = ["AggregateResult", "NotPushable", "collect_aggregate"]
