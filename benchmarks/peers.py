"""Benchmark 3: peers on the same queries and files.

* flight-select end to end through Flight (as in benchmark 1) vs DuckDB reading the CSV itself
  (``read_csv(..., all_varchar=true)``, the same question in DuckDB SQL) on every query of
  :data:`benchmarks.queries.QUERIES`;
* on a small file (the first rows of lineitem without the quoted ``l_comment`` column, because
  moto splits CSV lines on every comma), also moto's S3 Select emulation: moto converts the CSV
  with ``py_partiql_parser.csv_to_json`` and answers with ``S3SelectParser``; we call the same
  two functions, on the queries that parser can express.

    python -m benchmarks.peers --quick
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common, server_efficiency
from benchmarks.queries import QUERIES, Query

log = logging.getLogger("benchmarks.peers")

NAME = "peers"
SMALL_ROWS = {"quick": 5_000, "full": 20_000}
SMALL_KEY = "lineitem_small.csv"
SMALL_COLUMNS = common.LINEITEM_COLUMNS[:15]


def small_file(source: Path, rows: int) -> Path:
    """The first ``rows`` records of lineitem, without ``l_comment`` (no quoted fields)."""
    target = common.WORK / "peers" / f"lineitem_small_{rows}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open() as src, target.open("w") as dst:
        for i, line in enumerate(src):
            if i > rows:
                break
            dst.write(",".join(line.rstrip("\n").split(",")[:15]) + "\n")
    return target


def duckdb_runner(path: Path) -> Callable[[str], int]:
    """A function running DuckDB SQL over ``path`` (view ``s3object``); returns rows."""
    import duckdb

    con = duckdb.connect()
    literal = str(path).replace("'", "''")
    con.execute("CREATE VIEW s3object AS SELECT * FROM "
                f"read_csv('{literal}', header=true, all_varchar=true)")

    def run(sql: str) -> int:
        return con.sql(sql).to_arrow_table().num_rows
    return run


def moto_runner(path: Path) -> Callable[[str], int]:
    """moto's S3 Select path over ``path``: csv_to_json, then S3SelectParser (per request)."""
    from py_partiql_parser import S3SelectParser, csv_to_json

    def run(sql: str) -> int:
        text = path.read_text().rstrip("\n")
        return len(S3SelectParser(csv_to_json(text, headers_included=True)).parse(sql))
    return run


def _time(label: str, fn: Callable[[], int], runs: int) -> dict[str, Any]:
    try:
        stat, rows = common.measure(fn, runs)
    except Exception as exc:  # a peer that cannot answer is a result, not a crash
        log.info("%s failed: %s", label, exc)
        return {"time": None, "rows": None, "error": f"{type(exc).__name__}: {exc}"[:200]}
    return {"time": stat, "rows": rows, "error": None}


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition-mb", type=int, default=None)


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    files, _ = server_efficiency.dataset(args.quick)
    small = small_file(files["lineitem"], SMALL_ROWS["quick" if args.quick else "full"])
    root = common.data_root(
        NAME,
        {**{f"{server_efficiency.BUCKET}/{t}.csv": p for t, p in files.items()},
         f"{server_efficiency.BUCKET}/{SMALL_KEY}": small},
        {server_efficiency.BUCKET: [{"prefix": "",
                                     "InputSerialization": common.CSV_USE_HEADER}]},
    )
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    duck = {table: duckdb_runner(path) for table, path in files.items()}
    duck_small = duckdb_runner(small)
    moto = moto_runner(small)
    big: list[dict[str, Any]] = []
    little: list[dict[str, Any]] = []
    with common.ServerGroup(root, 1, *extra) as servers:
        def server(statement: str) -> Callable[[], int]:
            return lambda: servers.query(statement).rows

        for query in QUERIES:
            row = {"query": query.name, "table": query.table,
                   "flight_select": _time("server", server(
                       query.on(server_efficiency.BUCKET, f"{query.table}.csv")), args.runs),
                   "duckdb": _time("duckdb", lambda q=query: duck[q.table](q.duckdb), args.runs)}
            big.append(row)
            _log(query, row)
        for query in QUERIES:
            if query.partiql is None:
                continue
            row = {"query": query.name, "table": "lineitem_small",
                   "flight_select": _time("server", server(
                       query.on(server_efficiency.BUCKET, SMALL_KEY)), args.runs),
                   "duckdb": _time("duckdb", lambda q=query: duck_small(q.duckdb), args.runs),
                   "moto": _time("moto", lambda q=query: moto(q.partiql or ""), args.runs)}
            little.append(row)
            _log(query, row)
    markdown, figures = report(big, little, files, small, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "objects": {**{t: p.stat().st_size for t, p in files.items()},
                           "lineitem_small": small.stat().st_size},
               "results": big, "small_file_results": little}
    common.write_results(args.out, NAME, payload, markdown, figures)
    if not args.keep_data:
        common.remove_work(common.WORK / "roots" / NAME, common.WORK / "peers")
    return 0


def _log(query: Query, row: dict[str, Any]) -> None:
    parts = [f"{k} {v['time'].cell() if v['time'] else v['error']}"
             for k, v in row.items() if isinstance(v, dict)]
    log.info("%-20s %s", query.name, "  ".join(parts))


def _cell(result: dict[str, Any]) -> str:
    if result["time"] is None:
        return f"fails ({result['error'][:60]})"
    return result["time"].cell()


def _rows_cell(row: dict[str, Any], systems: Sequence[str]) -> str:
    counts = {row[s]["rows"] for s in systems if row[s]["rows"] is not None}
    first = row[systems[0]]["rows"]
    text = f"{first:,}" if first is not None else "?"
    return text if len(counts) <= 1 else text + " ≠"


def report(big: list[dict[str, Any]], little: list[dict[str, Any]], files: dict[str, Path],
           small: Path, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Markdown tables and a log-scale bar plot."""
    systems_big = ("flight_select", "duckdb")
    systems_small = ("flight_select", "duckdb", "moto")
    sizes = ", ".join(f"{t} {common.fmt_bytes(p.stat().st_size)}" for t, p in files.items())
    table_big = common.md_table(
        ["query", "rows", "flight-select (Flight)", "DuckDB on the CSV", "DuckDB speed-up"],
        [[r["query"], _rows_cell(r, systems_big), _cell(r["flight_select"]), _cell(r["duckdb"]),
          _ratio(r["flight_select"], r["duckdb"])] for r in big])
    table_small = common.md_table(
        ["query", "rows", "flight-select (Flight)", "DuckDB", "moto (py-partiql-parser)",
         "flight-select vs moto"],
        [[r["query"], _rows_cell(r, systems_small), _cell(r["flight_select"]),
          _cell(r["duckdb"]), _cell(r["moto"]), _ratio(r["moto"], r["flight_select"])]
         for r in little])
    text = (f"## Peers ({'quick' if args.quick else 'full'} run)\n\n"
            f"Same queries, same files ({sizes}); {args.runs} timed runs after one warm-up. "
            "Speed-up = flight-select median / peer median (how many times faster the peer "
            "is). A ≠ means the row counts differ.\n\n" + table_big
            + f"\n\nSmall file ({common.fmt_bytes(small.stat().st_size)}, lineitem without "
            "`l_comment`), only queries moto's parser can express (it has no CAST, "
            "functions, LIKE or aggregates other than count). Last column: how many times "
            "faster flight-select is than moto.\n\n" + table_small + "\n\n![peers](peers.png)\n")
    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    _bars(ax1, big, systems_big, "medium files")
    _bars(ax2, little, systems_small, "small file")
    fig.suptitle("Peers: same queries, same files (log scale)")
    return text, {"peers.png": fig}


def _ratio(slow: dict[str, Any], fast: dict[str, Any]) -> str:
    if slow["time"] is None or fast["time"] is None:
        return "–"
    return f"{slow['time'].median / fast['time'].median:.1f}x"


def _bars(ax: Any, rows: list[dict[str, Any]], systems: Sequence[str], title: str) -> None:
    width = 0.8 / len(systems)
    for j, system in enumerate(systems):
        xs = [i + (j - (len(systems) - 1) / 2) * width for i in range(len(rows))]
        ys = [r[system]["time"].median if r[system]["time"] else 0 for r in rows]
        ax.bar(xs, ys, width, label=system)
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [r["query"] for r in rows], rotation=40, ha="right")
    ax.set_ylabel("seconds (median)")
    ax.set_title(title)
    ax.legend(fontsize=8)


if __name__ == "__main__":
    raise SystemExit(main())
