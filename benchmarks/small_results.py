"""Small results: query latency through ADBC with one endpoint per partition vs one endpoint.

Three rows, asked three ways (issue #12 item 5, "should small results be one endpoint
anyway"), each with ADBC's default (``partitioned``: the server recognises the driver) and
with the header ``x-flight-select-endpoints: single``:

* ``three_objects``: a prefix table of three one-row CSV objects;
* ``one_object``: one three-row CSV object;
* ``filtered_large``: ``WHERE id < 3`` over a 200,000-row CSV (about 5 MB, split per core):
  the result is small but only execution finds that out.

The server splits by input size (CSV/JSON above 1 MiB, Parquet row groups and prefix objects
grouped up to ``--partition-mb``), so the first two are one endpoint either way.

Each timing is one ``cursor.execute`` + ``fetch_arrow_table`` on an open ADBC connection.

    python -m benchmarks.small_results --quick
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import adbc_driver_flightsql.dbapi as flightsql

from benchmarks import common

NAME = "small_results"
RUNS = {"quick": 30, "full": 200}
HEADER = "adbc.flight.sql.rpc.call_header.x-flight-select-endpoints"
CASES = {
    "three_objects": 'SELECT * FROM "small"."rows/"',
    "one_object": 'SELECT * FROM "small"."three.csv"',
    "filtered_large": 'SELECT * FROM "small"."large.csv" WHERE CAST(id AS INT) < 3',
}


def _data() -> Path:
    directory = common.WORK / NAME
    directory.mkdir(parents=True, exist_ok=True)
    objects: dict[str, Path] = {}
    for i in range(3):
        path = directory / f"row{i}.csv"
        path.write_text(f"id,name\n{i},n{i}\n")
        objects[f"small/rows/row{i}.csv"] = path
    three = directory / "three.csv"
    three.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(3)))
    objects["small/three.csv"] = three
    large = directory / "large.csv"
    large.write_text("id,name\n" + "".join(f"{i},name number {i:08d}\n" for i in range(200_000)))
    objects["small/large.csv"] = large
    csv = {"InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}
    return common.data_root(NAME, objects, {"small": [{"prefix": "rows/", **csv},
                                                      {"prefix": "three.csv", **csv},
                                                      {"prefix": "large.csv", **csv}]})


def _query(connection: Any, sql: str) -> Callable[[], int]:
    def run() -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return int(cursor.fetch_arrow_table().num_rows)
    return run


def main(argv: Sequence[str] | None = None) -> None:
    args = common.bench_args(__doc__ or NAME, argv)
    runs = RUNS["quick" if args.quick else "full"]
    server = common.start_server(_data())
    results: dict[str, Any] = {}
    try:
        for mode in ("partitioned", "single"):
            with flightsql.connect(server.location, db_kwargs={HEADER: mode}) as connection:
                for case, sql in CASES.items():
                    with connection.cursor() as cursor:
                        partitions, _ = cursor.adbc_execute_partitions(sql)
                    stat, rows = common.measure(_query(connection, sql), runs, warmup=3)
                    if rows != 3:
                        raise SystemExit(f"{case}/{mode}: {rows} rows, expected 3")
                    results[f"{case}/{mode}"] = {"endpoints": len(partitions), "time": stat}
    finally:
        server.stop()
    table = common.md_table(["case / endpoints option", "endpoints", "latency (median, min–max)"],
                            [(k, v["endpoints"], v["time"].cell()) for k, v in results.items()])
    markdown = f"# Small results through ADBC ({runs} runs each)\n\n{table}"
    print(markdown)
    common.write_results(args.out, NAME, {"runs": runs, "cases": results}, markdown)


if __name__ == "__main__":
    main()
