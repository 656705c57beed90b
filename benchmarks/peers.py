"""Benchmark 3: peers on the same queries and files.

* flight-select end to end through Flight (as in benchmark 1) vs DuckDB reading the CSV itself
  (``read_csv(..., all_varchar=true)``, the same question in DuckDB SQL) on every query of
  :data:`benchmarks.queries.QUERIES`;
* on a small file (the first rows of lineitem without the quoted ``l_comment`` column, because
  moto splits CSV lines on every comma), also moto's S3 Select emulation: moto converts the CSV
  with ``py_partiql_parser.csv_to_json`` and answers with ``S3SelectParser``; we call the same
  two functions, on the queries that parser can express;
* on the six peer queries over the headerless peer CSV (:data:`benchmarks.queries.PEER_QUERIES`),
  also Ceph's s3select engine (:mod:`benchmarks.ceph_peer`), when ``FLIGHT_SELECT_CEPH_S3SELECT``
  names its example program; its answers are checked against the server's.

    python -m benchmarks.peers --quick
    FLIGHT_SELECT_CEPH_S3SELECT=/path/to/s3select_example \
        python -m benchmarks.peers --queries 'peer_*' --out benchmarks/results/full
"""

from __future__ import annotations

import argparse
import fnmatch
import logging
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common, server_efficiency
from benchmarks.ceph_peer import NOT_MEASURED, CephError, CephS3Select, Row, answers_agree
from benchmarks.queries import PEER_QUERIES, QUERIES, Query

log = logging.getLogger("benchmarks.peers")

NAME = "peers"
SMALL_ROWS = {"quick": 5_000, "full": 20_000}
SMALL_KEY = "lineitem_small.csv"
SMALL_COLUMNS = common.LINEITEM_COLUMNS[:15]
PEER_KEY = "peer.csv"


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


def duckdb_runner(path: Path, header: bool = True) -> Callable[[str], int]:
    """A function running DuckDB SQL over ``path`` (view ``s3object``); returns rows.

    Without a header DuckDB names the columns ``column0 ..``, as the peer queries expect.
    """
    import duckdb

    con = duckdb.connect()
    literal = str(path).replace("'", "''")
    con.execute("CREATE VIEW s3object AS SELECT * FROM "
                f"read_csv('{literal}', header={str(header).lower()}, all_varchar=true)")

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


def ceph_runner(ceph: CephS3Select, path: Path, statement: str
                ) -> tuple[Callable[[], int], list[list[Row]]]:
    """A timed function running ``statement`` through Ceph's program over ``path`` (returns
    the row count) and the list its last answer is kept in, for the check against ours."""
    answers: list[list[Row]] = []

    def run() -> int:
        rows = ceph.run(statement, path)
        answers[:] = [rows]
        return len(rows)
    return run, answers


def server_answer(servers: common.ServerGroup, statement: str) -> list[Row]:
    """The server's records for ``statement`` as text cells (None as empty), untimed."""
    table = servers.clients[0].read_all(statement)
    return [tuple("" if v is None else str(v) for v in record.values())
            for record in table.to_pylist()]


def choose(spec: str | None) -> list[Query]:
    """The queries (of QUERIES and PEER_QUERIES) whose names match the comma list of names or
    shell patterns ``spec``; all of them without one.

    Raises:
        ValueError: a name or pattern matches no query.
    """
    every = [*QUERIES, *PEER_QUERIES]
    if not spec:
        return every
    patterns = [p.strip() for p in spec.split(",") if p.strip()]
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(q.name, p) for q in every)]
    if unknown:
        raise ValueError(f"no query matches {', '.join(unknown)}; queries: "
                         + ", ".join(q.name for q in every))
    return [q for q in every if any(fnmatch.fnmatchcase(q.name, p) for p in patterns)]


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition-mb", type=int, default=None)
    parser.add_argument("--queries", default=None,
                        help="comma list of query names or patterns, e.g. 'peer_*' "
                             "(default: every query)")


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    try:
        chosen = choose(args.queries)
        ceph = CephS3Select.from_env()
    except (ValueError, CephError) as exc:
        raise SystemExit(f"benchmarks.peers: {exc}") from None
    files, _ = server_efficiency.dataset(args.quick, {q.table for q in chosen})
    wide = [q for q in chosen if q.table != "peer"]
    narrow = [q for q in wide if q.partiql is not None]
    peer = [q for q in chosen if q.table == "peer"]
    small = (small_file(files["lineitem"], SMALL_ROWS["quick" if args.quick else "full"])
             if narrow else None)
    objects = {f"{server_efficiency.BUCKET}/{t}.csv": p for t, p in files.items()}
    headed = [f"{t}.csv" for t in files if t != "peer"]
    if small is not None:
        objects[f"{server_efficiency.BUCKET}/{SMALL_KEY}"] = small
        headed.append(SMALL_KEY)
    # Only the objects with a header get FileHeaderInfo USE; the peer CSV has none.
    root = common.data_root(NAME, objects, {server_efficiency.BUCKET: [
        {"prefix": key, "InputSerialization": common.CSV_USE_HEADER} for key in headed]})
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    big: list[dict[str, Any]] = []
    little: list[dict[str, Any]] = []
    peers: list[dict[str, Any]] = []
    with common.ServerGroup(root, 1, *extra) as servers:
        def server(statement: str) -> Callable[[], int]:
            return lambda: servers.query(statement).rows

        duck = {t: duckdb_runner(p, header=t != "peer") for t, p in files.items()}
        for query in wide:
            row = {"query": query.name, "table": query.table,
                   "flight_select": _time("server", server(
                       query.on(server_efficiency.BUCKET, f"{query.table}.csv")), args.runs),
                   "duckdb": _time("duckdb", lambda q=query: duck[q.table](q.duckdb), args.runs)}
            big.append(row)
            _log(query, row)
        if small is not None:
            duck_small = duckdb_runner(small)
            moto = moto_runner(small)
            for query in narrow:
                row = {"query": query.name, "table": "lineitem_small",
                       "flight_select": _time("server", server(
                           query.on(server_efficiency.BUCKET, SMALL_KEY)), args.runs),
                       "duckdb": _time("duckdb", lambda q=query: duck_small(q.duckdb),
                                       args.runs),
                       "moto": _time("moto", lambda q=query: moto(q.partiql or ""), args.runs)}
                little.append(row)
                _log(query, row)
        for query in peer:
            peers.append(_peer_row(query, servers, files["peer"], duck["peer"], ceph, args.runs))
            _log(query, peers[-1])
    markdown, figures = report(big, little, peers, files, small, ceph, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "queries": [q.name for q in chosen],
               "objects": {**{t: p.stat().st_size for t, p in files.items()},
                           **({"lineitem_small": small.stat().st_size} if small else {})},
               "ceph": {"binary": str(ceph.binary) if ceph else None,
                        "note": None if ceph else NOT_MEASURED},
               "results": big, "small_file_results": little, "peer_results": peers}
    common.write_results(args.out, NAME, payload, markdown, figures)
    if not args.keep_data:
        common.remove_work(common.WORK / "roots" / NAME, common.WORK / "peers")
    return 0


def _peer_row(query: Query, servers: common.ServerGroup, path: Path,
              duck: Callable[[str], int], ceph: CephS3Select | None, runs: int
              ) -> dict[str, Any]:
    """One peer query through the server, DuckDB and (when given) Ceph's program, timed
    interleaved; Ceph's answer is compared with the server's (numbers within a relative 1e-9).
    """
    import psutil

    statement = query.on(server_efficiency.BUCKET, PEER_KEY)
    server_process = psutil.Process(servers.servers[0].pid)
    systems: dict[str, tuple[Callable[[], int], Callable[[], float]]] = {
        "flight_select": (lambda: servers.query(statement).rows,
                          lambda: _cpu_seconds(server_process.cpu_times())),
        "duckdb": (lambda: duck(query.duckdb), time.process_time),
    }
    answers: list[list[Row]] = []
    if ceph is not None:
        run, answers = ceph_runner(ceph, path, query.s3select)
        systems["ceph"] = (run, _children_cpu_seconds)
    row: dict[str, Any] = {"query": query.name, "table": "peer",
                           **_time_interleaved(systems, runs)}
    if ceph is None:
        row["ceph"] = {"time": None, "rows": None, "error": NOT_MEASURED, "skipped": True}
    row["ceph_agrees"] = (answers_agree(answers[0], server_answer(servers, statement))
                          if answers and row["ceph"]["time"] is not None else None)
    if row["ceph_agrees"] is False:
        log.warning("%s: Ceph's answer differs from the server's", query.name)
    return row


def _time_interleaved(systems: dict[str, tuple[Callable[[], int], Callable[[], float]]],
                      runs: int) -> dict[str, dict[str, Any]]:
    """Each system's wall time and CPU seconds, one warm-up each, then ``runs`` rounds that
    run every system once in turn, so load from other work on the machine falls on all of
    them alike. ``systems`` maps a name to (run returning rows, CPU-seconds counter)."""
    results: dict[str, dict[str, Any]] = {}
    rows: dict[str, int] = {}
    for name, (run, _) in systems.items():
        try:
            rows[name] = run()
        except Exception as exc:  # noqa: BLE001 - a peer that cannot answer is a result
            log.info("%s failed: %s", name, exc)
            results[name] = {"time": None, "rows": None, "cpu": None,
                             "error": f"{type(exc).__name__}: {exc}"[:200]}
    walls: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    timed = [(name, run, cpu) for name, (run, cpu) in systems.items() if name in rows]
    for _ in range(runs):
        for name, run, cpu in timed:
            cpu_before, started = cpu(), time.perf_counter()
            rows[name] = run()
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(cpu() - cpu_before)
    for name, count in rows.items():
        results[name] = {"time": common.Stat.of(walls[name]), "rows": count,
                         "cpu": common.Stat.of(cpus[name]), "error": None}
    return results


def _cpu_seconds(times: Any) -> float:
    return float(times.user + times.system)


def _children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children (each Ceph run is one)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _log(query: Query, row: dict[str, Any]) -> None:
    parts = [f"{k} {v['time'].cell() if v['time'] else v['error']}"
             for k, v in row.items() if isinstance(v, dict)]
    log.info("%-20s %s", query.name, "  ".join(parts))


def _cell(result: dict[str, Any]) -> str:
    if result.get("skipped"):
        return "not measured"
    if result["time"] is None:
        return f"fails ({result['error'][:60]})"
    return result["time"].cell()


def _rows_cell(row: dict[str, Any], systems: Sequence[str]) -> str:
    counts = {row[s]["rows"] for s in systems if row[s]["rows"] is not None}
    first = row[systems[0]]["rows"]
    text = f"{first:,}" if first is not None else "?"
    return text if len(counts) <= 1 else text + " ≠"


def _agrees_cell(row: dict[str, Any]) -> str:
    return {True: "yes", False: "**no**", None: "–"}[row["ceph_agrees"]]


def report(big: list[dict[str, Any]], little: list[dict[str, Any]],
           peers: list[dict[str, Any]], files: dict[str, Path], small: Path | None,
           ceph: CephS3Select | None, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """Markdown tables and a log-scale bar plot per table."""
    systems_big = ("flight_select", "duckdb")
    systems_small = ("flight_select", "duckdb", "moto")
    systems_peer = ("flight_select", "duckdb", "ceph")
    sizes = ", ".join(f"{t} {common.fmt_bytes(p.stat().st_size)}" for t, p in files.items())
    text = (f"## Peers ({'quick' if args.quick else 'full'} run)\n\n"
            f"Same queries, same files ({sizes}); {args.runs} timed runs after one warm-up. "
            "Speed-up = flight-select median / peer median (how many times faster the peer "
            "is). A ≠ means the row counts differ.\n")
    if big:
        text += "\n" + common.md_table(
            ["query", "rows", "flight-select (Flight)", "DuckDB on the CSV", "DuckDB speed-up"],
            [[r["query"], _rows_cell(r, systems_big), _cell(r["flight_select"]),
              _cell(r["duckdb"]), _ratio(r["flight_select"], r["duckdb"])] for r in big]) + "\n"
    if little and small is not None:
        text += (f"\nSmall file ({common.fmt_bytes(small.stat().st_size)}, lineitem without "
                 "`l_comment`), only queries moto's parser can express (it has no CAST, "
                 "functions, LIKE or aggregates other than count). Last column: how many times "
                 "faster flight-select is than moto.\n\n" + common.md_table(
                     ["query", "rows", "flight-select (Flight)", "DuckDB",
                      "moto (py-partiql-parser)", "flight-select vs moto"],
                     [[r["query"], _rows_cell(r, systems_small), _cell(r["flight_select"]),
                       _cell(r["duckdb"]), _cell(r["moto"]), _ratio(r["moto"], r["flight_select"])]
                      for r in little]) + "\n")
    if peers:
        how = (f"Ceph: the example program of github.com/ceph/s3select (`{ceph.binary.name} "
               "-key <file> -q <s3-select text>`, the statement unchanged; its 4 MiB chunks go "
               "through the engine's CSV handler as in RGW), one process per run, records "
               "parsed from its output. \"Ceph's answer\" compares its records with the "
               "server's (numbers within a relative 1e-9)." if ceph else f"Ceph: {NOT_MEASURED}.")
        text += ("\nThe six peer queries on the headerless peer CSV (`_1 .. _6`; DuckDB reads it "
                 "with `header=false`), the systems timed in turn within each round so that "
                 "load from other work falls on all of them alike. \"vs Ceph\": how many times "
                 "faster flight-select is than Ceph's s3select engine (target ≥ 5x). CPU: median "
                 "CPU seconds per query of the server process (not the client) and of the Ceph "
                 "process; Ceph's engine runs on one core, the server on every core. "
                 + how + "\n\n" + common.md_table(
                     ["query", "rows", "flight-select (Flight)", "DuckDB on the CSV",
                      "Ceph s3select", "vs Ceph", "≥ 5x", "CPU server / Ceph",
                      "Ceph's answer"],
                     [[r["query"], _rows_cell(r, systems_peer), _cell(r["flight_select"]),
                       _cell(r["duckdb"]), _cell(r["ceph"]), _ratio(r["ceph"], r["flight_select"]),
                       _target_cell(r), _cpu_cell(r), _agrees_cell(r)] for r in peers]) + "\n")
    groups = [(rows, systems, title) for rows, systems, title in (
        (big, systems_big, "medium files"), (little, systems_small, "small file"),
        (peers, systems_peer if ceph else systems_peer[:2], "peer queries, headerless CSV"))
        if rows]
    plt = common.pyplot()
    fig, axes = plt.subplots(1, len(groups), figsize=(6.5 * len(groups), 4.5), squeeze=False)
    for ax, (rows, systems, title) in zip(axes[0], groups, strict=True):
        _bars(ax, rows, systems, title)
    fig.suptitle("Peers: same queries, same files (log scale)")
    return text + "\n![peers](peers.png)\n", {"peers.png": fig}


def ceph_speedup(row: dict[str, Any]) -> float | None:
    """How many times faster flight-select is than Ceph on one peer row, None if unmeasured."""
    ours, theirs = row["flight_select"]["time"], row.get("ceph", {}).get("time")
    if ours is None or theirs is None:
        return None
    return float(theirs.median / ours.median)


def _cpu_cell(row: dict[str, Any]) -> str:
    ours, theirs = row["flight_select"].get("cpu"), row["ceph"].get("cpu")
    if ours is None or theirs is None:
        return "–"
    return f"{ours.median:.2f} s / {theirs.median:.2f} s"


def _target_cell(row: dict[str, Any]) -> str:
    speedup = ceph_speedup(row)
    return "–" if speedup is None else ("yes" if speedup >= 5 else "**no**")


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
