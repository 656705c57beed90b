"""Benchmark 1: server efficiency.

Each query of :data:`benchmarks.queries.QUERIES` runs end to end through the Flight SQL server
(plan with GetFlightInfo, then every endpoint's DoGet in parallel, Arrow batches drained by the
client), and the same translated SQL (``select_dialect.translate``) runs in this process on
DataFusion's own CSV reader over the same file registered as ``s3object`` (Utf8 ``_1.._N``,
our UDFs registered). The ratio is in-process time / server time: 1.0 means the server adds
nothing; the target is >= 0.8 on every query.

:data:`FORMAT_QUERIES` do the same over other formats: tpchgen's lineitem Parquet (in process:
DataFusion's Parquet reader with its defaults) and the peer CSV gzip-compressed (in process:
DataFusion's CSV reader decompressing it). Every row says which reader served the query and over
how many endpoints.

    python -m benchmarks.server_efficiency --quick
"""

from __future__ import annotations

import argparse
import gzip
import logging
import shutil
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks import common
from benchmarks.queries import ORDERS_COLUMNS, PEER_COLUMNS, PEER_QUERIES, QUERIES, Query
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.storage.sources import FileSource
from select_dialect import translate

log = logging.getLogger("benchmarks.server_efficiency")

NAME = "server_efficiency"
TARGET_RATIO = 0.8
BUCKET = "bench"
# (lineitem scale factor, orders MB, peer-file rows) per mode
SIZES = {"quick": (0.02, 5, 200_000), "full": (0.15, 50, 2_000_000)}

FORMAT_QUERIES: tuple[Query, ...] = (
    Query(
        "parquet_filter", "Parquet, numeric filter, ~4% of rows", "lineitem_parquet",
        "SELECT l_orderkey, l_extendedprice, l_shipmode FROM s3object WHERE l_quantity > 48",
        "",
    ),
    Query(
        "parquet_aggregate", "Parquet, 3 aggregates with a filter", "lineitem_parquet",
        "SELECT sum(l_extendedprice), avg(l_discount), count(*) FROM s3object "
        "WHERE l_returnflag = 'R'",
        "",
    ),
    Query(
        "gzip_projection_1pct", "gzip CSV, projection of 1% of rows", "peer_gzip",
        "SELECT _1, _4, _6 FROM s3object WHERE _3 = '0'",
        "",
    ),
)
"""Queries over other formats (reader and endpoints reported like the others)."""

KEYS = {"lineitem": "lineitem.csv", "orders": "orders.csv", "peer": "peer.csv",
        "lineitem_parquet": "lineitem.parquet", "peer_gzip": "peer.csv.gz"}
"""Each table's object key in the bucket (the suffix tells the server its format)."""


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition-mb", type=int, default=None,
                        help="server --partition-mb (default: the server's own default)")
    parser.add_argument("--only", default=None, help="comma list of query names to run")


def dataset(quick: bool, tables: Collection[str] | None = None
            ) -> tuple[dict[str, Path], dict[str, tuple[str, ...]]]:
    """The files of the query set (only ``tables`` when given) and their headers."""
    scale, orders_mb, peer_rows = SIZES["quick" if quick else "full"]
    makers: dict[str, Callable[[], Path]] = {
        "lineitem": lambda: common.lineitem(scale, "csv"),
        "orders": lambda: common.orders_csv(orders_mb),
        "peer": lambda: common.peer_csv(peer_rows),
        "lineitem_parquet": lambda: common.lineitem(scale, "parquet"),
        "peer_gzip": lambda: _gzipped(common.peer_csv(peer_rows)),
    }
    headers = {"lineitem": common.LINEITEM_COLUMNS, "orders": ORDERS_COLUMNS,
               "peer": PEER_COLUMNS, "lineitem_parquet": common.LINEITEM_COLUMNS,
               "peer_gzip": PEER_COLUMNS}
    files = {table: make() for table, make in makers.items() if tables is None or table in tables}
    return files, {table: headers[table] for table in files}


def _gzipped(path: Path) -> Path:
    """``path`` gzip-compressed beside it (made once)."""
    target = path.with_name(path.name + ".gz")
    if not target.exists():
        partial = target.with_suffix(".tmp")
        with path.open("rb") as raw, gzip.open(partial, "wb", compresslevel=6) as out:
            shutil.copyfileobj(raw, out, 1 << 20)
        partial.rename(target)
    return target


def server_root(files: dict[str, Path]) -> Path:
    """A data root with bucket ``bench`` holding the files, header names on where they have
    one (the peer file has none)."""
    return common.data_root(
        NAME,
        {f"{BUCKET}/{KEYS[table]}": path for table, path in files.items()},
        {BUCKET: [{"prefix": KEYS[table], "InputSerialization": common.CSV_USE_HEADER}
                  for table in ("lineitem", "orders")]},
    )


def _in_process(query: Query, files: dict[str, Path], headers: dict[str, tuple[str, ...]]
                ) -> tuple[str, Any]:
    """The SQL the server runs for ``query`` and a DataFusion session reading the file itself."""
    path = files[query.table]
    if query.table == "lineitem_parquet":
        from datafusion import SessionContext

        from flight_storage.execution.udfs import register_udfs

        engine = SelectEngine(EngineConfig(native_readers=False))
        plan = engine.plan(query.s3select, FileSource(path, KEYS[query.table],
                                                      path.stat().st_size), InputSpec("parquet"))
        ctx = SessionContext()
        register_udfs(ctx)
        ctx.register_parquet("s3object", str(path))
        return plan.translation.sql, ctx
    if query.table == "peer_gzip":
        from datafusion import SessionContext
        from datafusion.options import CsvReadOptions

        from flight_storage.execution.udfs import register_udfs

        ctx = SessionContext()
        register_udfs(ctx)
        schema = pa.schema([pa.field(c, pa.string())
                                   for c in headers[query.table]])
        ctx.register_csv("s3object", str(path), options=CsvReadOptions(
            has_header=False, schema=schema, file_extension=".gz",
            file_compression_type="gzip"))
        return translate(query.s3select, input_format="csv").sql, ctx
    header = headers[query.table]
    sql = translate(query.s3select, input_format="csv",
                    header=list(header) if query.has_header else None).sql
    return sql, common.datafusion_csv_context(path, len(header), has_header=query.has_header)


def run_query(query: Query, servers: common.ServerGroup, files: dict[str, Path],
              headers: dict[str, tuple[str, ...]], runs: int) -> dict[str, Any]:
    """Time one query through the server and in process; rows must agree."""
    statement = query.on(BUCKET, KEYS[query.table])
    server_stat, server_result = common.measure(lambda: servers.query(statement), runs)
    sql, ctx = _in_process(query, files, headers)
    local_stat, (local_rows, _local_bytes) = common.measure(
        lambda: common.drain_datafusion(ctx, sql), runs
    )
    ratio = local_stat.median / server_stat.median
    log.info("%-20s server %s  in-process %s  ratio %.2f", query.name, server_stat.cell(),
             local_stat.cell(), ratio)
    return {
        "query": query.name,
        "kind": query.kind,
        "table": query.table,
        "s3select": query.s3select,
        "datafusion_sql": sql,
        "server": server_stat,
        "in_process": local_stat,
        "ratio": ratio,
        "rows": server_result.rows,
        "rows_in_process": local_rows,
        "rows_agree": server_result.rows == local_rows,
        "endpoints": server_result.endpoints,
        "reader": server_result.reader,
        "arrow_bytes": server_result.nbytes,
    }


def report(rows: list[dict[str, Any]], files: dict[str, Path], args: argparse.Namespace
           ) -> tuple[str, dict[str, Any]]:
    """Markdown and figures of the results."""
    sizes = ", ".join(f"{t} {common.fmt_bytes(p.stat().st_size)}" for t, p in files.items())
    table = common.md_table(
        ["query", "what", "rows", "reader", "endpoints", "server median (min–max)",
         "in-process DataFusion", "ratio", "≥ 0.8"],
        [[r["query"], r["kind"], f"{r['rows']:,}" + ("" if r["rows_agree"] else " ≠"),
          r.get("reader", "?"), r["endpoints"], r["server"].cell(), r["in_process"].cell(), f"{r['ratio']:.2f}",
          "yes" if r["ratio"] >= TARGET_RATIO else "**no**"] for r in rows],
    )
    worst = min(rows, key=lambda r: r["ratio"])
    text = (
        f"## Server efficiency ({'quick' if args.quick else 'full'} run)\n\n"
        f"Objects: {sizes}. {args.runs} timed runs after one warm-up; ratio = in-process "
        f"median / server median (target ≥ {TARGET_RATIO}). Worst: `{worst['query']}` "
        f"{worst['ratio']:.2f}. A ≠ after the row count means the two disagree.\n\n{table}\n\n"
        "![server efficiency](server_efficiency.png)\n"
    )
    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    names = [r["query"] for r in rows]
    x = range(len(rows))
    ax1.bar([i - 0.2 for i in x], [r["server"].median for r in rows], 0.4, label="server (Flight)",
            yerr=_err(r["server"] for r in rows))
    ax1.bar([i + 0.2 for i in x], [r["in_process"].median for r in rows], 0.4,
            label="DataFusion in process", yerr=_err(r["in_process"] for r in rows))
    ax1.set_xticks(list(x), names, rotation=40, ha="right")
    ax1.set_ylabel("seconds (median, min–max)")
    ax1.legend()
    ax2.bar(list(x), [r["ratio"] for r in rows], color="tab:green")
    ax2.axhline(TARGET_RATIO, color="red", linestyle="--", label=f"target {TARGET_RATIO}")
    ax2.set_xticks(list(x), names, rotation=40, ha="right")
    ax2.set_ylabel("in-process time / server time")
    ax2.legend()
    fig.suptitle("Server efficiency: same SQL through Flight vs in process")
    return text, {"server_efficiency.png": fig}


def _err(stats: Any) -> list[list[float]]:
    stats = list(stats)
    return [[s.median - s.min for s in stats], [s.max - s.median for s in stats]]


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    files, headers = dataset(args.quick)
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    chosen = [q for q in QUERIES + PEER_QUERIES + FORMAT_QUERIES
              if not args.only or q.name in args.only.split(",")]
    rows = []
    with common.ServerGroup(server_root(files), 1, *extra) as servers:
        for query in chosen:
            rows.append(run_query(query, servers, files, headers, args.runs))
    markdown, figures = report(rows, files, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "objects": {t: {"path": str(p.relative_to(common.ROOT)), "bytes": p.stat().st_size}
                           for t, p in files.items()},
               "server_args": extra, "results": rows}
    common.write_results(args.out, NAME, payload, markdown, figures)
    if not args.keep_data:
        common.remove_work(common.WORK / "roots" / NAME)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
