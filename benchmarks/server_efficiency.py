"""Benchmark 1: server efficiency.

Each query of :data:`benchmarks.queries.QUERIES` runs end to end through the Flight SQL server
(plan with GetFlightInfo, then every endpoint's DoGet in parallel, Arrow batches drained by the
client), and the same translated SQL (``select_dialect.translate``) runs in this process on
DataFusion's own CSV reader over the same file registered as ``s3object`` (Utf8 ``_1.._N``,
our UDFs registered). The ratio is in-process time / server time: 1.0 means the server adds
nothing; the target is >= 0.8 on every query.

Two clients read every query: ours (``compute_client.flight`` through
``common.ServerGroup.query``, Python per batch, up to 8 endpoints at once) and the ADBC Flight
SQL driver (native, every endpoint at once, no GIL), so what the server costs is measured apart
from what our client costs. Beside the wall times each query reports CPU-seconds per run: the
server process's, the client's (this process) and the in-process engine's. CPU-seconds do not
depend on the core count, so the serial cost that many cores expose shows here too.

:data:`FORMAT_QUERIES` do the same over other formats: tpchgen's lineitem Parquet and a wide
hits-like Parquet object (in process: DataFusion's Parquet reader with the server's Parquet
settings, filter pushdown on), and the peer CSV gzip-compressed (in process: DataFusion's CSV
reader decompressing it). Every row says which reader served the query and over how many
endpoints. The ClickBench-shaped query on the wide object also runs on DuckDB, on the same file
in the same run, and on DataFusion with its default settings.

Then :mod:`benchmarks.endpoint_cost` measures the fixed cost of an endpoint (a 0-row query
over 1, 4, 16 and 64 endpoints). ``--cores N`` pins this process (client and in-process
engine) and the server, which inherits the mask, to N cores.

    python -m benchmarks.server_efficiency --quick [--cores 2] [--parts queries,endpoints]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import logging
import os
import shutil
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks import common, endpoint_cost
from benchmarks.gil_time import gil_seconds
from benchmarks.hits import hits_parquet
from benchmarks.queries import ORDERS_COLUMNS, PEER_COLUMNS, PEER_QUERIES, QUERIES, Query
from flight_storage.cores import usable_cores
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.execution.native_parquet import SESSION_SETTINGS as PARQUET_SETTINGS
from flight_storage.storage.sources import FileSource
from select_dialect import translate
from select_dialect.flavors import STANDARD

log = logging.getLogger("benchmarks.server_efficiency")

NAME = "server_efficiency"
TARGET_RATIO = 0.8
TARGET_CPU = 1.15
"""Target: server CPU per query at most this multiple of the in-process engine's."""
BUCKET = "bench"
# (lineitem scale factor, orders MB, peer-file rows, hits rows) per mode
SIZES = {"quick": (0.02, 5, 200_000, 500_000), "full": (0.15, 50, 2_000_000, 2_000_000)}
PARTS = ("queries", "endpoints")
WIDE_QUERY = "wide_topk"

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
    Query(
        WIDE_QUERY, "ClickBench-shaped: * of 70 columns, LIKE, ORDER BY … LIMIT 10",
        "hits_parquet",
        "SELECT * FROM s3object WHERE URL LIKE '%google%' ORDER BY EventTime LIMIT 10",
        "SELECT * FROM read_parquet('{path}') WHERE URL LIKE '%google%' "
        "ORDER BY EventTime LIMIT 10",
    ),
)
"""Queries over other formats (reader and endpoints reported like the others)."""

KEYS = {"lineitem": "lineitem.csv", "orders": "orders.csv", "peer": "peer.csv",
        "lineitem_parquet": "lineitem.parquet", "peer_gzip": "peer.csv.gz",
        "hits_parquet": "hits.parquet"}
"""Each table's object key in the bucket (the suffix tells the server its format)."""


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition-mb", type=int, default=None,
                        help="server --partition-mb (default: the server's own default)")
    parser.add_argument("--only", default=None, help="comma list of query names to run")
    parser.add_argument("--cores", type=int, default=None,
                        help="pin the server, the client and the in-process engine to this many "
                        "cores (default: every core this process may use)")
    parser.add_argument("--plan-cores", type=int, default=None, metavar="N",
                        help="the server plans as on an N-core host (serve --engine-cores N) "
                        "and the in-process baseline runs N partitions; each query also "
                        "reports the seconds the server held the GIL (py-spy)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma list of what to run: {', '.join(PARTS)}")


def dataset(quick: bool, tables: Collection[str] | None = None
            ) -> tuple[dict[str, Path], dict[str, tuple[str, ...]]]:
    """The files of the query set (only ``tables`` when given) and their headers."""
    scale, orders_mb, peer_rows, hits_rows = SIZES["quick" if quick else "full"]
    makers: dict[str, Callable[[], Path]] = {
        "lineitem": lambda: common.lineitem(scale, "csv"),
        "orders": lambda: common.orders_csv(orders_mb),
        "peer": lambda: common.peer_csv(peer_rows),
        "lineitem_parquet": lambda: common.lineitem(scale, "parquet"),
        "peer_gzip": lambda: _gzipped(common.peer_csv(peer_rows)),
        "hits_parquet": lambda: hits_parquet(hits_rows),
    }
    headers = {"lineitem": common.LINEITEM_COLUMNS, "orders": ORDERS_COLUMNS,
               "peer": PEER_COLUMNS, "lineitem_parquet": common.LINEITEM_COLUMNS,
               "peer_gzip": PEER_COLUMNS, "hits_parquet": ()}
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


PLAN_CORES: list[int] = []
"""``--plan-cores``: the partitions of the in-process baseline (empty: DataFusion's default)."""


def _config() -> Any:
    """A DataFusion session config with ``--plan-cores`` partitions when set."""
    from datafusion import SessionConfig

    config = SessionConfig()
    return config.with_target_partitions(PLAN_CORES[0]) if PLAN_CORES else config


def _parquet_context(path: Path, settings: bool = True) -> Any:
    """A DataFusion session with our UDFs and the Parquet file as ``s3object``: with the
    server's Parquet settings (filter pushdown on), or DataFusion's defaults."""
    from datafusion import SessionContext

    from flight_storage.execution.udfs import register_udfs

    config = _config()
    for key, value in PARQUET_SETTINGS if settings else ():
        config = config.set(key, value)
    ctx = SessionContext(config)
    register_udfs(ctx)
    ctx.register_parquet("s3object", str(path))
    return ctx


def _in_process(query: Query, files: dict[str, Path], headers: dict[str, tuple[str, ...]]
                ) -> tuple[str, Any]:
    """The SQL the server runs for ``query`` and a DataFusion session reading the file itself."""
    path = files[query.table]
    if query.table.endswith("_parquet"):
        engine = SelectEngine(EngineConfig(native_readers=False))
        plan = engine.plan(query.s3select, FileSource(path, KEYS[query.table],
                                                      path.stat().st_size),
                           InputSpec("parquet"), flavor=STANDARD)
        return plan.translation.sql, _parquet_context(path)
    if query.table == "peer_gzip":
        from datafusion import SessionContext
        from datafusion.options import CsvReadOptions

        from flight_storage.execution.udfs import register_udfs

        ctx = SessionContext(_config())
        register_udfs(ctx)
        schema = pa.schema([pa.field(c, pa.string())
                                   for c in headers[query.table]])
        ctx.register_csv("s3object", str(path), options=CsvReadOptions(
            has_header=False, schema=schema, file_extension=".gz",
            file_compression_type="gzip"))
        return translate(query.s3select, input_format="csv").sql, ctx
    header = headers[query.table]
    typed = _typed_csv(query, path) if query.has_header else None
    if typed is not None:
        return typed
    sql = translate(query.s3select, input_format="csv",
                    header=list(header) if query.has_header else None).sql
    return sql, common.datafusion_csv_context(path, len(header), has_header=query.has_header,
                                              config=_config())


def _typed_csv(query: Query, path: Path) -> tuple[str, Any] | None:
    """A CSV with a header as the server's standard surface reads it: its sniffed columns,
    typed by DataFusion's CSV reader and the server's view (``NativeCsvTable``), and the SQL
    over them; None when the server reads it as text. Reading it as text here would compare
    the server's typed parsing (int, double, date columns) with a cheaper text scan."""
    from datafusion import SessionContext

    from flight_storage.execution.udfs import register_udfs
    from flight_storage.request.sniffing import TableSniffer

    source = FileSource(path, KEYS[query.table], path.stat().st_size)
    spec = TableSniffer().typed_spec(source, InputSpec("csv"), None, None)
    if spec.columns is None:
        return None
    plan = SelectEngine(EngineConfig()).plan(query.s3select, source, spec, flavor=STANDARD)
    if plan.native is None:
        return None
    ctx = SessionContext(_config())
    register_udfs(ctx)
    plan.native.register(ctx, "s3object")
    return plan.translation.sql, ctx


def run_query(query: Query, servers: common.ServerGroup, adbc: common.AdbcReader,
              files: dict[str, Path], headers: dict[str, tuple[str, ...]], runs: int
              ) -> dict[str, Any]:
    """Time one query through the server (our client and ADBC) and in process, a run of each
    in turn per round, with the CPU-seconds of each; rows must agree. The wide query also
    runs on DuckDB and on DataFusion's defaults in the same rounds (``row["wide"]``)."""
    statement = query.on(BUCKET, KEYS[query.table])
    sql, ctx = _in_process(query, files, headers)
    cases: dict[str, Any] = {
        "ours": lambda: servers.query(statement),
        "adbc": lambda: adbc.query(statement),
        "in_process": lambda: common.drain_datafusion(ctx, sql),
    }
    wide = query.name == WIDE_QUERY
    if wide:
        cases.update(_wide_cases(query, files[query.table], sql))
    measured = common.measure_rounds(cases, runs, {"ours": servers.pids, "adbc": servers.pids})
    (ours, server_result), (native, adbc_result) = measured["ours"], measured["adbc"]
    local, (local_rows, _local_bytes) = measured["in_process"]
    ratio = local.wall.median / ours.wall.median
    adbc_ratio = local.wall.median / native.wall.median
    cpu = {"server": _mean(ours.server_cpu), "client": _mean(ours.cpu),
           "adbc_server": _mean(native.server_cpu), "adbc_client": _mean(native.cpu),
           "in_process": _mean(local.cpu)}
    log.info("%-20s server %s (ADBC %s) in-process %s ratio %.2f (ADBC %.2f); CPU server %s "
             "client %s, ADBC server %s client %s, in process %s", query.name,
             ours.wall.cell(), native.wall.cell(), local.wall.cell(), ratio, adbc_ratio,
             *(common.fmt_cpu(cpu[k]) for k in ("server", "client", "adbc_server",
                                                 "adbc_client", "in_process")))
    row = {
        "query": query.name,
        "kind": query.kind,
        "table": query.table,
        "s3select": query.s3select,
        "datafusion_sql": sql,
        "server": ours.wall,
        "in_process": local.wall,
        "adbc": native.wall,
        "ratio": ratio,
        "adbc_ratio": adbc_ratio,
        "cpu": cpu,
        "cpu_samples": {"ours": ours, "adbc": native, "in_process": local},
        "rows": server_result.rows,
        "rows_in_process": local_rows,
        "rows_adbc": adbc_result.rows,
        "rows_agree": server_result.rows == local_rows == adbc_result.rows,
        "endpoints": server_result.endpoints,
        "adbc_endpoints": adbc_result.endpoints,
        "reader": server_result.reader,
        "arrow_bytes": server_result.nbytes,
    }
    if wide:
        row["wide"] = _wide_result(query, measured, servers, files[query.table])
    if PLAN_CORES:
        row["gil_s"] = gil_seconds(servers.pids[0], lambda: adbc.query(statement), runs)
        log.info("%-20s GIL held %s per query (target <= in-process CPU / %d = %s)",
                 query.name, common.fmt_cpu(row["gil_s"]), PLAN_CORES[0],
                 common.fmt_cpu(cpu["in_process"] / PLAN_CORES[0]))
    return row


def _mean(stat: common.Stat | None) -> float:
    """Mean of a CPU Stat's samples (a total over runs, per run); 0 without one."""
    return sum(stat.samples) / len(stat.samples) if stat is not None else 0.0


def _wide_cases(query: Query, path: Path, sql: str) -> dict[str, Any]:
    """The ClickBench-shaped query on DuckDB and on DataFusion's defaults, same file."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads TO {usable_cores()}")
    duck_sql = query.duckdb.format(path=str(path).replace("'", "''"))
    defaults = _parquet_context(path, settings=False)
    return {"duckdb": lambda: con.sql(duck_sql).to_arrow_table(),
            "datafusion_defaults": lambda: common.drain_datafusion(defaults, sql)}


def _wide_result(query: Query, measured: dict[str, Any], servers: common.ServerGroup,
                 path: Path) -> dict[str, Any]:
    """DuckDB's and DataFusion's defaults' figures; the ten rows the server returns must be
    DuckDB's (their EventTime: ties aside, the same rows)."""
    duck, duck_table = measured["duckdb"]
    plain, _ = measured["datafusion_defaults"]
    served = servers.clients[0].read_all(query.on(BUCKET, KEYS[query.table]))
    times = served.schema.field("EventTime").type
    agree = (served.column("EventTime").to_pylist()
             == duck_table.column("EventTime").cast(times).to_pylist())
    log.info("%s: DuckDB %s (CPU %s), DataFusion defaults %s (CPU %s); answers %s",
             WIDE_QUERY, duck.wall.cell(), common.fmt_cpu(_mean(duck.cpu)), plain.wall.cell(),
             common.fmt_cpu(_mean(plain.cpu)), "agree" if agree else "DIFFER")
    return {"duckdb": duck, "datafusion_defaults": plain, "answers_agree": agree,
            "columns": served.num_columns, "bytes": path.stat().st_size,
            "row_groups": _row_groups(path)}


def _row_groups(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_row_groups)


def report(rows: list[dict[str, Any]], files: dict[str, Path], args: argparse.Namespace,
           wide: dict[str, Any] | None, endpoints: list[dict[str, Any]] | None
           ) -> tuple[str, dict[str, Any]]:
    """Markdown and figures of the results."""
    sizes = ", ".join(f"{t} {common.fmt_bytes(p.stat().st_size)}" for t, p in files.items())
    text = (f"## Server efficiency ({'quick' if args.quick else 'full'} run)\n\n"
            f"Objects: {sizes}. {args.runs} timed runs after one warm-up, on "
            f"{usable_cores()} cores{' (--cores)' if args.cores else ''}.")
    figures: dict[str, Any] = {}
    if rows:
        text += _queries_markdown(rows)
        if PLAN_CORES:
            text += _many_cores_markdown(rows, PLAN_CORES[0])
        if importlib.util.find_spec("matplotlib") is not None:
            figures["server_efficiency.png"] = _figure(rows)
    if wide is not None:
        text += "\n" + _wide_markdown(rows, wide)
    if endpoints is not None:
        text += "\n" + endpoint_cost.markdown(endpoints)
    return text, figures


def _queries_markdown(rows: list[dict[str, Any]]) -> str:
    def agree(r: dict[str, Any]) -> str:
        return "" if r["rows_agree"] else " ≠"

    wall = common.md_table(
        ["query", "what", "rows", "reader", "endpoints (ADBC)", "server, our client",
         "server, ADBC", "in-process DataFusion", "ratio ours", "ratio ADBC", "≥ 0.8"],
        [[r["query"], r["kind"], f"{r['rows']:,}{agree(r)}", r.get("reader", "?"),
          f"{r['endpoints']} ({r['adbc_endpoints']})", r["server"].cell(), r["adbc"].cell(),
          r["in_process"].cell(), f"{r['ratio']:.2f}", f"{r['adbc_ratio']:.2f}",
          "yes" if min(r["ratio"], r["adbc_ratio"]) >= TARGET_RATIO else "**no**"]
         for r in rows])
    cpu = common.md_table(
        ["query", "server CPU, ours", "client CPU, ours", "server CPU, ADBC",
         "client CPU, ADBC", "in-process CPU", "server / in-process (ours, ADBC)",
         f"≤ {TARGET_CPU}"],
        [[r["query"], *(common.fmt_cpu(r["cpu"][k]) for k in (
            "server", "client", "adbc_server", "adbc_client", "in_process")),
          f"{_cpu_ratio(r, 'server'):.2f}, {_cpu_ratio(r, 'adbc_server'):.2f}",
          "yes" if max(_cpu_ratio(r, "server"), _cpu_ratio(r, "adbc_server")) <= TARGET_CPU
          else "**no**"] for r in rows])
    worst = min(rows, key=lambda r: min(r["ratio"], r["adbc_ratio"]))
    cpu_worst = max(rows, key=lambda r: _cpu_ratio(r, "adbc_server"))
    return (
        " Ratio = in-process median / server median (target ≥ "
        f"{TARGET_RATIO}), through our client and through the ADBC driver. Worst: "
        f"`{worst['query']}` {min(worst['ratio'], worst['adbc_ratio']):.2f}. A ≠ after the row "
        "count means the readers disagree.\n\n"
        f"{wall}\n\n![server efficiency](server_efficiency.png)\n\n"
        "CPU-seconds per query (mean of the timed runs): the CPU clocks of the server process and its engine workers (every "
        "thread), this process's while our client or ADBC reads, and this process's while "
        "DataFusion runs the same SQL in process. Target: server CPU ≤ "
        f"{TARGET_CPU}x in-process; worst through ADBC `{cpu_worst['query']}` "
        f"{_cpu_ratio(cpu_worst, 'adbc_server'):.2f}x.\n\n{cpu}\n"
    )


def _many_cores_markdown(rows: list[dict[str, Any]], cores: int) -> str:
    """Issue 37's account of an N-core host: endpoints, server CPU against in-process CPU,
    and the seconds the server held the GIL against the in-process CPU over N."""
    table = common.md_table(
        ["query", "endpoints (ADBC)", "server / in-process CPU (ADBC)",
         f"≤ {TARGET_CPU}", "GIL held per query", f"in-process CPU / {cores}", "GIL ≤ it"],
        [[r["query"], r["adbc_endpoints"], f"{_cpu_ratio(r, 'adbc_server'):.2f}",
          "yes" if _cpu_ratio(r, "adbc_server") <= TARGET_CPU else "**no**",
          common.fmt_cpu(r["gil_s"]), common.fmt_cpu(r["cpu"]["in_process"] / cores),
          "yes" if r["gil_s"] <= r["cpu"]["in_process"] / cores else "**no**"]
         for r in rows])
    return (f"\n### Planned as on {cores} cores (`--plan-cores {cores}`)\n\nThe server runs "
            f"with `--engine-cores {cores}` on this machine and the in-process baseline with "
            f"{cores} partitions; CPU-seconds do not depend on the cores present. GIL held: "
            "py-spy `--gil` samples of the server process over the ADBC runs "
            "(`benchmarks/gil_time.py`).\n\n" + table + "\n")


def _cpu_ratio(row: dict[str, Any], key: str) -> float:
    return float(row["cpu"][key] / max(row["cpu"]["in_process"], 1e-9))


def _wide_markdown(rows: list[dict[str, Any]], wide: dict[str, Any]) -> str:
    row = next(r for r in rows if r["query"] == WIDE_QUERY)
    duck = wide["duckdb"].wall.median
    lines = [
        ["server, our client (1 endpoint)", row["server"].cell(),
         common.fmt_cpu(row["cpu"]["server"] + row["cpu"]["client"]),
         f"{duck / row['server'].median:.2f}"],
        ["server, ADBC", row["adbc"].cell(),
         common.fmt_cpu(row["cpu"]["adbc_server"] + row["cpu"]["adbc_client"]),
         f"{duck / row['adbc'].median:.2f}"],
        ["DataFusion in process, server's Parquet settings", row["in_process"].cell(),
         common.fmt_cpu(row["cpu"]["in_process"]), f"{duck / row['in_process'].median:.2f}"],
        ["DataFusion in process, its defaults (no filter pushdown)",
         wide["datafusion_defaults"].wall.cell(),
         common.fmt_cpu(_mean(wide["datafusion_defaults"].cpu)),
         f"{duck / wide['datafusion_defaults'].wall.median:.2f}"],
        ["DuckDB", wide["duckdb"].wall.cell(), common.fmt_cpu(_mean(wide["duckdb"].cpu)), "1.00"],
    ]
    met = duck / max(row["server"].median, row["adbc"].median) >= 1
    return (
        "### Wide Parquet, ClickBench-shaped\n\n"
        f"`{next(q for q in FORMAT_QUERIES if q.name == WIDE_QUERY).s3select}` on a hits-like "
        f"object ({wide['columns']} columns, {common.fmt_bytes(wide['bytes'])}, "
        f"{wide['row_groups']} row groups; `benchmarks/hits.py`), every reader on the same file "
        "in this run. CPU: server + client, or this process. Speed vs DuckDB = DuckDB's median "
        "/ the reader's (target ≥ 1 through the server: "
        f"{'met' if met else '**missed**'}); the ten rows' EventTime "
        f"{'agree' if wide['answers_agree'] else '**differ**'} between the server and DuckDB.\n\n"
        + common.md_table(["reader", "time median (min–max)", "CPU", "speed vs DuckDB"], lines)
        + "\n"
    )


def _figure(rows: list[dict[str, Any]]) -> Any:
    plt = common.pyplot()
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(19, 4.5))
    names = [r["query"] for r in rows]
    x = range(len(rows))
    ax1.bar([i - 0.27 for i in x], [r["server"].median for r in rows], 0.27,
            label="server, our client", yerr=_err(r["server"] for r in rows))
    ax1.bar(list(x), [r["adbc"].median for r in rows], 0.27, label="server, ADBC",
            yerr=_err(r["adbc"] for r in rows))
    ax1.bar([i + 0.27 for i in x], [r["in_process"].median for r in rows], 0.27,
            label="DataFusion in process", yerr=_err(r["in_process"] for r in rows))
    ax1.set_ylabel("seconds (median, min–max)")
    ax2.bar([i - 0.2 for i in x], [r["ratio"] for r in rows], 0.4, label="our client")
    ax2.bar([i + 0.2 for i in x], [r["adbc_ratio"] for r in rows], 0.4, label="ADBC")
    ax2.axhline(TARGET_RATIO, color="red", linestyle="--", label=f"target {TARGET_RATIO}")
    ax2.set_ylabel("in-process time / server time")
    ax3.bar([i - 0.27 for i in x], [r["cpu"]["server"] + r["cpu"]["client"] for r in rows],
            0.27, label="server + our client")
    ax3.bar(list(x), [r["cpu"]["adbc_server"] + r["cpu"]["adbc_client"] for r in rows], 0.27,
            label="server + ADBC")
    ax3.bar([i + 0.27 for i in x], [r["cpu"]["in_process"] for r in rows], 0.27,
            label="in process")
    ax3.set_ylabel("CPU-seconds per query")
    for ax in (ax1, ax2, ax3):
        ax.set_xticks(list(x), names, rotation=40, ha="right")
        ax.legend()
    fig.suptitle("Server efficiency: same SQL through Flight (two clients) vs in process")
    return fig


def _err(stats: Any) -> list[list[float]]:
    stats = list(stats)
    return [[s.median - s.min for s in stats], [s.max - s.median for s in stats]]


def pin_cores(count: int) -> None:
    """Run this process, and the processes it starts, on ``count`` of its cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= count <= len(allowed):
        raise SystemExit(f"--cores {count}: this process may use {len(allowed)} cores")
    os.sched_setaffinity(0, allowed[:count])


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    if args.cores:
        pin_cores(args.cores)  # before DataFusion starts its threads, and before any server
    parts = set(args.parts.split(","))
    chosen = [q for q in QUERIES + PEER_QUERIES + FORMAT_QUERIES
              if "queries" in parts and (not args.only or q.name in args.only.split(","))]
    files, headers = dataset(args.quick, {q.table for q in chosen})
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    if args.plan_cores:
        PLAN_CORES[:] = [args.plan_cores]
        extra += ["--engine-cores", str(args.plan_cores)]
    rows = []
    if chosen:
        with common.ServerGroup(server_root(files), 1, *extra, sample_memory=False) as servers, \
                common.AdbcReader(servers.location) as adbc:
            rows = [run_query(query, servers, adbc, files, headers, args.runs)
                    for query in chosen]
    wide = next((r.pop("wide") for r in rows if "wide" in r), None)
    endpoints = endpoint_cost.run(max(args.runs, endpoint_cost.MIN_RUNS)) \
        if "endpoints" in parts else None
    markdown, figures = report(rows, files, args, wide, endpoints)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "cores": usable_cores(), "pinned": args.cores, "plan_cores": args.plan_cores,
               "objects": {t: {"path": str(p.relative_to(common.ROOT)), "bytes": p.stat().st_size}
                           for t, p in files.items()},
               "server_args": extra, "results": rows, "wide_parquet": wide,
               "endpoint_cost": endpoints}
    common.write_results(args.out, NAME, payload, markdown, figures)
    if not args.keep_data:
        common.remove_work(common.WORK / "roots" / NAME)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
