"""The decoded cache (issue #36): each peer query over the headerless peer CSV, cold (no cache),
cold with the cache on (a miss: the fill starts after the answer), warm (answered from the
entry), beside DuckDB over the CSV (all VARCHAR) and DuckDB over the same rows as typed
Parquet (what a user with an ETL job gets). In process (``SelectEngine``, the server's data
path without Flight), best of ``--runs``.

Two more cases:

* **SeaweedFS bucket**: the peer queries end to end (Flight, every endpoint) on a server whose
  bucket is a SeaweedFS bucket with ``--cache-dir``, warm (the entry filled), against a
  server over the same CSV in a folder without the cache (what a query costs cold: the CSV
  parsed each time); medians of ``--runs``.
* **JSON Lines**: the same rows as a JSON Lines object read as a typed table (standard
  flavour, configured columns), cold against warm, in process, beside DuckDB's
  ``read_json`` over the file.

A figure (``decoded_cache.png``) plots every case's cold and warm times.

    python -m benchmarks.decoded_cache --quick
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.peers import duckdb_runner
from benchmarks.queries import PEER_QUERIES
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.plan_types import EngineConfig, InputSpec
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.storage.sources import FileSource
from tests.seaweedfs import start_seaweedfs

log = logging.getLogger("benchmarks.decoded_cache")
NAME = "decoded_cache"
ROWS = {"quick": 1_000_000, "full": 16_000_000}
BUCKET = "bench"
FILL_WAIT_S = 600
JSON_COLUMNS = TypedColumns(names=("id", "n", "k", "price", "ts", "words"),
                            types=("int64", "int64", "int64", "float64", "timestamp", "string"))
JSON_SPEC = InputSpec("json", options={"Type": "LINES"}, columns=JSON_COLUMNS)
JSON_QUERIES = {
    "json_count": "SELECT count(*) FROM s3object",
    "json_projection_1pct": "SELECT id, price, words FROM s3object WHERE k = 0",
    "json_4_aggregates": "SELECT min(n), max(n), sum(price), avg(price) FROM s3object",
    "json_year": "SELECT count(*) FROM s3object WHERE extract(year FROM ts) = 2024",
    "json_like": "SELECT count(*) FROM s3object WHERE words LIKE '%echo%'",
}
"""The peer queries' shapes over the typed JSON Lines table (DuckDB runs the same SQL)."""


def _best(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _engine_run(engine: SelectEngine, source: FileSource, sql: str,
                spec: InputSpec | None = None, flavor: str = "aws") -> Callable[[], int]:
    def run() -> int:
        plan = engine.plan(sql, source, spec or InputSpec("csv"), flavor=flavor)
        return sum(b.num_rows for b in engine.execute(plan))
    return run


def _engine_rows(engine: SelectEngine, source: FileSource, sql: str, spec: InputSpec
                 ) -> tuple[str, list[Any]]:
    """The plan's cache state and its answer's rows."""
    plan = engine.plan(sql, source, spec, flavor="standard")
    return plan.cache, [r for b in engine.execute(plan) for r in b.to_pylist()]


def _wait_fills(stats: Callable[[], dict[str, Any]], fills: int) -> None:
    deadline = time.monotonic() + FILL_WAIT_S
    while stats()["fills"] < fills:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the entry was not filled: {stats()}")
        time.sleep(0.05)


def _typed_parquet(csv: Path, target: Path) -> Path:
    import duckdb

    literal = str(csv).replace("'", "''")
    duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{literal}', header=false)) TO "
                             f"'{target}' (FORMAT parquet, COMPRESSION zstd)")
    return target


def _duckdb_parquet(path: Path) -> Callable[[str], int]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE VIEW s3object AS SELECT * FROM read_parquet('{path}')")
    return lambda sql: con.sql(sql).to_arrow_table().num_rows


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__ or NAME, argv)
    rows = ROWS["quick" if args.quick else "full"]
    csv = common.peer_csv(rows)
    source = FileSource(csv, csv.name, csv.stat().st_size)
    work = Path(tempfile.mkdtemp(prefix="decoded-bench-"))
    try:
        typed = _typed_parquet(csv, work / "typed.parquet")
        duck_csv, duck_parquet = duckdb_runner(csv, header=False), _duckdb_parquet(typed)
        plain = SelectEngine(EngineConfig())
        results = []
        for query in PEER_QUERIES:
            # a fresh engine's first query, cache off and on, alternated (best of the runs);
            # each miss's fill is waited for before the next timing
            first_off, first_on = [], []
            for attempt in range(args.runs):
                first_off.append(_best(_engine_run(SelectEngine(EngineConfig()), source,
                                                   query.s3select), 1))
                cached = SelectEngine(EngineConfig(
                    cache_dir=str(work / f"{query.name}-{attempt}")))
                assert cached.decoded is not None
                run = _engine_run(cached, source, query.s3select)
                first_on.append(_best(run, 1))
                deadline = time.monotonic() + 600
                while cached.decoded.stats()["fills"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
            fill = cached.decoded.last_fill
            row = {
                "query": query.name,
                "cold_s": _best(_engine_run(plain, source, query.s3select), args.runs),
                "first_cache_off_s": min(first_off),
                "first_cache_on_s": min(first_on),
                "warm_s": _best(run, args.runs),
                "duckdb_csv_s": _best(lambda q=query.duckdb: duck_csv(q), args.runs),
                "duckdb_typed_parquet_s": _best(lambda q=query.duckdb: duck_parquet(q),
                                                args.runs),
                "fill_cpu_s": fill.cpu_s if fill else None,
                "fill_wall_s": fill.wall_s if fill else None,
                "entry_bytes": fill.bytes if fill else None,
                "csv_bytes": source.size,
            }
            log.info("%s", row)
            results.append(row)
        jsonl = _peer_jsonl(csv)
        json_results = _json_case(jsonl, work, args.runs)
        store_results = _store_case(csv, work, args.runs)
        payload = {"rows": rows, "results": results, "json_lines": json_results,
                   "seaweedfs": store_results, "json_bytes": jsonl.stat().st_size}
        report = "\n\n".join((_report(rows, source.size, results),
                               _json_report(jsonl.stat().st_size, json_results),
                               _store_report(store_results)))
        common.write_results(args.out, NAME, payload, report,
                             {f"{NAME}.png": _figure(results, json_results, store_results)})
    finally:
        if not args.keep_data:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _peer_jsonl(csv: Path) -> Path:
    """The peer CSV's rows as JSON Lines, typed (generated once, by DuckDB)."""
    import duckdb

    path = csv.with_suffix(".jsonl")
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    literal = str(csv).replace("'", "''")
    duckdb.connect().execute(
        "COPY (SELECT column0::BIGINT AS id, column1::BIGINT AS n, column2::BIGINT AS k, "
        "column3::DOUBLE AS price, column4 AS ts, column5 AS words FROM "
        f"read_csv('{literal}', header=false, all_varchar=true)) TO '{tmp}' (FORMAT json)")
    tmp.rename(path)
    return path


def _json_case(path: Path, work: Path, runs: int) -> list[dict[str, Any]]:
    """Each JSON query cold (no cache) and warm (from the entry), in process."""
    import duckdb

    source = FileSource(path, path.name, path.stat().st_size)
    plain = SelectEngine(EngineConfig())
    cached = SelectEngine(EngineConfig(cache_dir=str(work / "json-cache")))
    assert cached.decoded is not None
    decoded = cached.decoded
    con = duckdb.connect()
    literal = str(path).replace("'", "''")
    con.execute("CREATE VIEW s3object AS SELECT * FROM read_json("
                f"'{literal}', format='newline_delimited', columns={{id: 'BIGINT', "
                "n: 'BIGINT', k: 'BIGINT', price: 'DOUBLE', ts: 'TIMESTAMP', "
                "words: 'VARCHAR'})")
    results = []
    for name, sql in JSON_QUERIES.items():
        cold_state, cold_rows = _engine_rows(cached, source, sql, JSON_SPEC)
        _wait_fills(decoded.stats, 1)
        warm_state, warm_rows = _engine_rows(cached, source, sql, JSON_SPEC)
        if warm_rows != cold_rows or warm_state != "hit":
            raise AssertionError(f"{name}: warm ({warm_state}) answered differently")
        fill = decoded.last_fill
        row = {
            "query": name, "first_state": cold_state,
            "cold_s": _best(_engine_run(plain, source, sql, JSON_SPEC, "standard"), runs),
            "warm_s": _best(_engine_run(cached, source, sql, JSON_SPEC, "standard"), runs),
            "duckdb_json_s": _best(lambda q=sql: con.sql(q).to_arrow_table().num_rows, runs),
            "fill_cpu_s": fill.cpu_s if fill else None,
            "fill_wall_s": fill.wall_s if fill else None,
            "entry_bytes": fill.bytes if fill else None,
            "json_bytes": source.size,
        }
        log.info("%s", row)
        results.append(row)
    return results


def _store_case(csv: Path, work: Path, runs: int) -> list[dict[str, Any]]:
    """Each peer query on a SeaweedFS bucket's server, warm from its entry, against a folder
    server without the cache (Flight, every endpoint; medians)."""
    import pyarrow.flight as flight
    from boto3.s3.transfer import TransferConfig

    folder_root = common.data_root(NAME, {f"{BUCKET}/peer.csv": csv})
    weed = common.WORK / "seaweedfs" / secrets.token_hex(4)
    store = start_seaweedfs(weed)
    results = []
    try:
        store.new_bucket(BUCKET)
        store.client().upload_file(str(csv), BUCKET, "peer.csv",
                                   Config=TransferConfig(multipart_threshold=1 << 40))
        with common.ServerGroup(folder_root, 1, "--no-sniff") as folder, \
                common.ServerGroup(f"s3://{BUCKET}", 1, "--no-sniff", "--cache-dir",
                                   str(work / "store-cache"), env=store.env()) as remote:
            health = flight.connect(remote.location)

            def stats() -> dict[str, Any]:
                [answer] = list(health.do_action(flight.Action("health", b"")))
                return json.loads(answer.body.to_pybytes())["decoded_cache"]  # type: ignore[no-any-return]

            for query in PEER_QUERIES:
                sql = query.s3select.replace("FROM s3object", f'FROM "{BUCKET}"."peer.csv"')
                remote.query(sql)  # the miss (the first query fills the one entry)
                _wait_fills(stats, 1)
                hits = stats()["hits"]
                folder_stat, folder_result = common.measure(lambda q=sql: folder.query(q), runs)
                warm_stat, warm_result = common.measure(lambda q=sql: remote.query(q), runs)
                if (folder_result.rows, folder_result.nbytes) != (warm_result.rows,
                                                                  warm_result.nbytes):
                    raise AssertionError(f"{query.name}: {warm_result} != {folder_result}")
                row = {"query": query.name, "folder_cold": folder_stat, "store_warm": warm_stat,
                       "speedup": folder_stat.median / warm_stat.median,
                       "hits": stats()["hits"] - hits, "endpoints": warm_result.endpoints}
                log.info("%s", row)
                results.append(row)
    finally:
        store.stop(wait_s=5)
        common.remove_work(weed, folder_root)
    return results


def _json_report(size: int, results: list[dict[str, Any]]) -> str:
    lines = [f"## JSON Lines: the same rows as a typed JSON Lines object ({size / 1e6:.0f} MB)",
             "", "In process, standard flavour, configured columns (int64 x3, float64, "
             "timestamp, string); best of the runs. Cold reads the object (pyarrow's JSON "
             "parser); warm reads the entry.", "",
             "| query | cold | warm | warm vs cold | DuckDB read_json | fill CPU-s | "
             "entry / JSON |", "|---|---|---|---|---|---|---|"]
    for r in results:
        entry = r["entry_bytes"] / r["json_bytes"] if r["entry_bytes"] else float("nan")
        lines.append(f"| {r['query']} | {r['cold_s']:.3f} s | {r['warm_s']:.3f} s | "
                     f"{r['cold_s'] / r['warm_s']:.1f}x | {r['duckdb_json_s']:.3f} s | "
                     f"{r['fill_cpu_s'] or 0:.2f} | {entry:.2f} |")
    return "\n".join(lines)


def _store_report(results: list[dict[str, Any]]) -> str:
    lines = ["## SeaweedFS bucket, warm, against a folder without the cache", "",
             "End to end (GetFlightInfo, every endpoint; `--no-sniff`, standard flavour), "
             "medians; `hits` counts the warm runs answered from the entry.", "",
             "| query | folder, no cache | SeaweedFS, warm | speedup | hits | endpoints |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['query']} | {r['folder_cold'].cell()} | {r['store_warm'].cell()} | "
                     f"{r['speedup']:.1f}x | {r['hits']} | {r['endpoints']} |")
    return "\n".join(lines)


def _figure(csv: list[dict[str, Any]], jsonl: list[dict[str, Any]],
            store: list[dict[str, Any]]) -> Any:
    """Cold and warm seconds per query, one panel per case (log scale)."""
    plt = common.pyplot()
    panels = [
        ("CSV, in process", [r["query"] for r in csv], [r["cold_s"] for r in csv],
         [r["warm_s"] for r in csv], "no cache"),
        ("JSON Lines, in process", [r["query"] for r in jsonl], [r["cold_s"] for r in jsonl],
         [r["warm_s"] for r in jsonl], "no cache"),
        ("CSV, SeaweedFS warm vs folder", [r["query"] for r in store],
         [r["folder_cold"].median for r in store], [r["store_warm"].median for r in store],
         "folder, no cache"),
    ]
    figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for axis, (title, names, cold, warm, cold_label) in zip(axes, panels, strict=True):
        at = range(len(names))
        axis.bar([x - 0.2 for x in at], cold, 0.4, label=cold_label)
        axis.bar([x + 0.2 for x in at], warm, 0.4, label="warm (decoded cache)")
        axis.set_yscale("log")
        axis.set_xticks(list(at), [n.split("_", 1)[1] for n in names], rotation=30,
                        ha="right")
        axis.set_title(title)
        axis.set_ylabel("seconds")
        axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


def _report(rows: int, size: int, results: list[dict[str, Any]]) -> str:
    lines = [f"# Decoded cache: peer queries over {rows:,} rows ({size / 1e6:.0f} MB CSV)", "",
             "In process (aws flavour), best of the runs; *first* columns are a fresh "
             "engine's first query (survey and planning included), cache off and on (the "
             "miss: its fill starts after the answer). Warm reads the entry.", "",
             "| query | cold | first, off | first, on | on / off | warm | warm vs cold | "
             "DuckDB CSV | DuckDB typed Parquet | warm vs DuckDB Parquet | fill CPU-s | "
             "entry / CSV |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        entry = r["entry_bytes"] / r["csv_bytes"] if r["entry_bytes"] else float("nan")
        lines.append(
            f"| {r['query']} | {r['cold_s']:.3f} s | {r['first_cache_off_s']:.3f} s | "
            f"{r['first_cache_on_s']:.3f} s | "
            f"{r['first_cache_on_s'] / r['first_cache_off_s']:.2f} | "
            f"{r['warm_s']:.3f} s | {r['cold_s'] / r['warm_s']:.1f}x | "
            f"{r['duckdb_csv_s']:.3f} s | {r['duckdb_typed_parquet_s']:.3f} s | "
            f"{r['duckdb_typed_parquet_s'] / r['warm_s']:.2f}x | "
            f"{r['fill_cpu_s'] or 0:.2f} | {entry:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
