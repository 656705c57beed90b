"""An analyst's CSV, trait by trait: which traits take the server off DataFusion's reader, and
what a query costs through ADBC against DuckDB's ``read_csv`` of the same file (issue #39
item 8).

The base file has a header and 20 columns (numbers, text, zone-less timestamps); each variant
adds one trait of the analyst's file, and ``all`` adds every one:

* ``quoted_commas``: a referrer field quoted, holding commas and doubled quotes;
* ``offsets``: timestamps with offsets (``+02:00``, ``-05:00``, ``Z``);
* ``crlf_mix``: every third line ends in CRLF, the others in LF;
* ``short_rows``: three records of three fields at the end.

The server reads the variants sniffed (no configuration), each query after one warm-up (the
survey and the sniff are cached per object version, as for any repeated query). DuckDB reads
``read_csv(path)``, with ``strict_mode = false, null_padding = true`` where its sniffer needs
them (mixed line ends, short rows), and ``parallel = false`` where its parallel reader then
refuses the file (DuckDB 2.0 says so for the 340 MB ``all``).

    python -m benchmarks.analyst_csv --quick      # 40 MB per variant
    python -m benchmarks.analyst_csv              # 340 MB (--size-mb N for another size)
    python -m benchmarks.analyst_csv --traits all # only the analyst's whole shape
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "analyst_csv"
SIZES_MB = {"quick": 40, "full": 340}
TRAITS = ("base", "quoted_commas", "offsets", "crlf_mix", "short_rows", "all")
HEADER = ("id,user,region,k,amount,qty,ts,status,ip,path,referrer,bytes,latency_ms,country,"
          "city,device,os,browser,session,score")
QUERIES = {
    "count(*)": "SELECT count(*) FROM {t}",
    "group by": "SELECT region, count(*) AS n, sum(amount) AS s FROM {t} GROUP BY region",
    "max(ts)": "SELECT max(ts) FROM {t}",
    "1% filter": "SELECT * FROM {t} WHERE k = 42",
}


def _line(rng: random.Random, row: int, traits: set[str]) -> str:
    second = row * 7 % 86_400
    offset = rng.choice(["+02:00", "-05:00", "Z"]) if "offsets" in traits else ""
    referrer = (f'"https://example.com/?a={row % 13},b={row % 7},q=""x"""'
                if "quoted_commas" in traits else f"https://example.com/{row % 13}")
    return ",".join([
        str(row), f"user{rng.randrange(50_000)}",
        rng.choice(["north", "south", "east", "west"]), str(rng.randrange(100)),
        f"{rng.randrange(1, 100_000) / 100}", str(rng.randrange(1, 20)),
        f"2024-08-{1 + row % 28:02d} {second // 3600:02d}:{second // 60 % 60:02d}:"
        f"{second % 60:02d}{offset}",
        rng.choice(["shipped", "delivered", "returned"]),
        f"10.{row % 256}.{row * 7 % 256}.{row * 13 % 256}", f"/p/{row % 997}", referrer,
        str(rng.randrange(100, 100_000)), str(rng.randrange(1, 5000)),
        rng.choice(["US", "DE", "FR", "JP"]), rng.choice(["Paris", "Berlin", "Tokyo"]),
        rng.choice(["mobile", "desktop"]), rng.choice(["linux", "ios", "android"]),
        rng.choice(["firefox", "chrome", "safari"]), f"s{row // 10}",
        f"{rng.random():.4f}"])


def write_variant(path: Path, size_mb: int, trait: str) -> int:
    """One variant's CSV (deterministic), about ``size_mb`` MB; returns its data records."""
    traits = set(TRAITS[1:-1]) if trait == "all" else {trait}
    rng = random.Random(5)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, size = 0, 0
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(HEADER + "\n")
        while size < size_mb * 1_000_000:
            lines = []
            for _ in range(10_000):
                rows += 1
                end = "\r\n" if "crlf_mix" in traits and rows % 3 == 0 else "\n"
                lines.append(_line(rng, rows, traits) + end)
            chunk = "".join(lines)
            out.write(chunk)
            size += len(chunk)
        if "short_rows" in traits:
            for extra in range(3):
                rows += 1
                out.write(f"{rows},user{extra},north\n")
    return rows


def _adbc(location: str, sql: str) -> Any:
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        table = cursor.fetch_arrow_table()
    return table.num_rows


def _duckdb(path: Path) -> tuple[Callable[[str], Any], str]:
    """A runner of statements over DuckDB's ``read_csv`` of ``path``, and the options used."""
    import duckdb

    def connect() -> Any:
        con = duckdb.connect()
        con.sql("SET enable_progress_bar = false")
        return con

    for options in ("", ", strict_mode = false, null_padding = true",
                    ", strict_mode = false, null_padding = true, parallel = false"):
        table = f"read_csv('{path}'{options})"
        try:
            connect().sql(f"SELECT count(*) FROM {table}").fetchall()
        except duckdb.Error:
            continue
        return (lambda sql, table=table: connect().sql(sql.format(t=table))
                .to_arrow_table().num_rows, options.strip(", "))
    raise RuntimeError(f"DuckDB cannot read {path}")


def _about(location: str, sql: str) -> dict[str, Any]:
    import pyarrow.flight as flight

    from flight_storage import protocol

    client = flight.FlightClient(location)
    try:
        info = client.get_flight_info(flight.FlightDescriptor.for_command(
            protocol.pack_any(protocol.pb.CommandStatementQuery(query=sql))))
    finally:
        client.close()
    about: dict[str, Any] = json.loads(info.app_metadata)
    return about


def main(argv: Sequence[str] | None = None) -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--size-mb", type=int, default=None,
                            help="CSV size (default: 40 quick, 340 full)")
        parser.add_argument("--traits", nargs="+", choices=TRAITS, default=list(TRAITS),
                            help="the variants to run (default: all six)")

    args = common.bench_args(__doc__ or NAME, argv, extra)
    size = args.size_mb or SIZES_MB["quick" if args.quick else "full"]
    traits = args.traits
    root = common.WORK / NAME / f"{size}mb"
    for trait in traits:
        path = root / "bench" / f"{trait}.csv"
        if not path.exists():
            write_variant(path, size, trait)
    server = common.start_server(root, "--query-timeout", "1200")
    results: dict[str, Any] = {}
    try:
        for trait in traits:
            path = root / "bench" / f"{trait}.csv"
            duck, duck_options = _duckdb(path)
            for query_name, template in QUERIES.items():
                sql = template.format(t=f'"bench"."{trait}.csv"')
                started = time.perf_counter()
                about = _about(server.location, sql)  # cold: sniff and survey
                cold = time.perf_counter() - started
                ours, _ = common.measure(lambda sql=sql: _adbc(server.location, sql), args.runs)
                theirs, _ = common.measure(lambda t=template, duck=duck: duck(t), args.runs)
                ratio = theirs.median / ours.median if ours.median else float("inf")
                results[f"{trait} {query_name}"] = {
                    "server": ours.to_json(), "duckdb": theirs.to_json(), "ratio": ratio,
                    "planning_cold_s": cold, "reader": about.get("reader"),
                    "duckdb_options": duck_options}
                print(f"{trait:>13} {query_name:<10} server {ours.cell():>22} "
                      f"duckdb {theirs.cell():>22} duckdb/server {ratio:5.2f} "
                      f"reader={about.get('reader')} first plan {cold:.2f} s", flush=True)
    finally:
        server.stop()
    out = common.WORK / NAME / f"results-{size}mb.json"
    try:
        environment = common.environment()
    except ImportError:  # psutil is not installed everywhere the benchmark runs
        environment = {}
    out.write_text(json.dumps({"megabytes": size, "cases": results,
                               "environment": environment}, indent=2, default=str))


if __name__ == "__main__":
    main()
