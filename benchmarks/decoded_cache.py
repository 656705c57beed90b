"""The decoded cache (issue #36): each peer query over the headerless peer CSV, cold (no cache),
cold with the cache on (a miss: the fill starts after the answer), warm (answered from the
entry), beside DuckDB over the CSV (all VARCHAR) and DuckDB over the same rows as typed
Parquet (what a user with an ETL job gets). In process (``SelectEngine``, the server's data
path without Flight), best of ``--runs``.

    python -m benchmarks.decoded_cache --quick
"""

from __future__ import annotations

import logging
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
from flight_storage.storage.sources import FileSource

log = logging.getLogger("benchmarks.decoded_cache")
NAME = "decoded_cache"
ROWS = {"quick": 1_000_000, "full": 16_000_000}


def _best(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _engine_run(engine: SelectEngine, source: FileSource, sql: str) -> Callable[[], int]:
    def run() -> int:
        plan = engine.plan(sql, source, InputSpec("csv"), flavor="aws")
        return sum(b.num_rows for b in engine.execute(plan))
    return run


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
        common.write_results(args.out, NAME, {"rows": rows, "results": results},
                             _report(rows, source.size, results))
    finally:
        if not args.keep_data:
            shutil.rmtree(work, ignore_errors=True)
    return 0


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
