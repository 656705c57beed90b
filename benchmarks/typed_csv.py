"""Typed CSV tables against untyped ones, through the server and the ADBC driver.

One CSV with a header line and zone-less timestamps (``id,user,region,k,amount,qty,ts,status``,
``k`` uniform in 0..99, so ``k = 42`` keeps 1% of the rows), served three ways from one file
(hard links):

* ``untyped``: an entry ``{"prefix": "raw/", FileHeaderInfo USE}``: named string columns,
  S3 Select's reading (DataFusion's CSV reader after the survey);
* ``configured``: an entry with ``columns`` (int64, float64, timestamp, ...);
* ``sniffed``: no entry: the standard surface infers the header and types.

Each table answers ``count(*)``, ``count(ts)`` (reads the timestamp column) and a 1% filter
returning every column; the FlightInfo says which reader served it.

    python -m benchmarks.typed_csv --quick        # 30 MB
    python -m benchmarks.typed_csv                # 150 MB (--size-mb N for another size)
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import common

NAME = "typed_csv"
SIZES_MB = {"quick": 30, "full": 150}
COLUMNS = [{"name": "id", "type": "int64"}, {"name": "user", "type": "string"},
           {"name": "region", "type": "string"}, {"name": "k", "type": "int64"},
           {"name": "amount", "type": "float64"}, {"name": "qty", "type": "int64"},
           {"name": "ts", "type": "timestamp"}, {"name": "status", "type": "string"}]
TABLES = {"untyped": '"bench"."raw/events.csv"', "configured": '"bench"."typed/events.csv"',
          "sniffed": '"bench"."events.csv"'}
QUERIES = {
    "count(*)": "SELECT count(*) FROM {t}",
    "count(ts)": "SELECT count(ts) FROM {t}",
    "1% filter": "SELECT * FROM {t} WHERE k = {k}",
}


def write_events(path: Path, size_mb: int) -> int:
    """The CSV (deterministic), about ``size_mb`` MB; returns its rows."""
    rng = random.Random(31)
    regions = ["north", "south", "east", "west", "centre"]
    statuses = ["shipped", "delivered", "returned", "pending"]
    path.parent.mkdir(parents=True, exist_ok=True)
    rows, size = 0, 0
    with open(path, "w", encoding="utf-8") as out:
        out.write("id,user,region,k,amount,qty,ts,status\n")
        while size < size_mb * 1_000_000:
            lines = []
            for _ in range(10_000):
                rows += 1
                second = rows * 7 % 86_400
                lines.append(
                    f"{rows},user{rng.randrange(50_000)},{rng.choice(regions)},"
                    f"{rng.randrange(100)},{rng.randrange(1, 100_000) / 100},"
                    f"{rng.randrange(1, 20)},2024-08-{1 + rows % 28:02d} "
                    f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d},"
                    f"{rng.choice(statuses)}\n")
            chunk = "".join(lines)
            out.write(chunk)
            size += len(chunk)
    return rows


def data_root(size_mb: int) -> tuple[Path, int]:
    root = common.WORK / NAME / f"{size_mb}mb"
    source = root / "bench" / "events.csv"
    if not source.exists():
        write_events(source, size_mb)
    for folder in ("raw", "typed"):
        link = root / "bench" / folder / "events.csv"
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, link)
    (root / "bench" / ".flight-select.json").write_text(json.dumps({"tables": [
        {"prefix": "raw/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}},
        {"prefix": "typed/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
         "columns": COLUMNS}]}))
    with open(source, "rb") as file:
        rows = sum(1 for _ in file) - 1
    return root, rows


def _run(location: str, sql: str) -> tuple[int, str]:
    """The answer (a count, or the rows of a filter) through the ADBC driver."""
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(location, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        table = cursor.fetch_arrow_table()
    value = table.column(0)[0].as_py() if table.num_rows == 1 else table.num_rows
    return int(value), ""


def _reader(location: str, sql: str) -> dict[str, Any]:
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
    args = common.bench_args(__doc__ or NAME, argv, lambda parser: parser.add_argument(
        "--size-mb", type=int, default=None, help="CSV size (default: 30 quick, 150 full)"))
    size = args.size_mb or SIZES_MB["quick" if args.quick else "full"]
    root, rows = data_root(size)
    server = common.start_server(root, "--query-timeout", "1200")
    results: dict[str, Any] = {}
    try:
        for table_name, table in TABLES.items():
            for query_name, template in QUERIES.items():
                k = "'42'" if table_name == "untyped" else "42"
                sql = template.format(t=table, k=k)
                about = _reader(server.location, sql)
                stat, (value, _) = common.measure(lambda sql=sql: _run(server.location, sql),
                                                  args.runs)
                results[f"{table_name} {query_name}"] = {
                    "time": stat.to_json(), "answer": value, "reader": about.get("reader"),
                    "columns": about.get("columns", "strings")}
                print(f"{table_name:>10} {query_name:<10} {stat.cell():>22} "
                      f"answer={value:<9} reader={about.get('reader')} "
                      f"columns={about.get('columns', 'strings')}", flush=True)
    finally:
        server.stop()
    megabytes = (root / "bench" / "events.csv").stat().st_size / 1e6
    print(f"{rows} rows, {megabytes:.0f} MB")
    out = common.WORK / NAME / f"results-{size}mb.json"
    out.write_text(json.dumps({"rows": rows, "megabytes": megabytes, "cases": results,
                               "environment": common.environment()}, indent=2, default=str))


if __name__ == "__main__":
    main()
