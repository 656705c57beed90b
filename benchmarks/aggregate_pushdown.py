"""Aggregation pushdown: time and bytes moved for a grouped query, pushed vs not.

One query over the retail orders CSV (``python -m data.generate``), asked two ways through
the DataFusion client:

* ``pushed``: :func:`compute_client.aggregate_pushdown.collect_aggregate` (the server groups,
  the client merges partial rows);
* ``scan``: plain ``collect`` (projection and filter pushed, every matching row moved, the
  client groups).

    python -m benchmarks.aggregate_pushdown --quick
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datafusion import SessionContext

from benchmarks import common
from compute_client.aggregate_pushdown import AggregateResult, collect_aggregate
from compute_client.datafusion_source import collect, register_flight_table

NAME = "aggregate_pushdown"
SIZES_MB = {"quick": 20, "full": 200}
QUERY = ("SELECT region, count(*) AS n, sum(order_id) AS s, avg(order_id) AS a FROM orders "
         "WHERE status = 'delivered' GROUP BY region ORDER BY region")


def main(argv: Sequence[str] | None = None) -> None:
    args = common.bench_args(__doc__ or NAME, argv)
    size = SIZES_MB["quick" if args.quick else "full"]
    csv_path = common.orders_csv(size)
    root = common.data_root(NAME, {"sales/orders.csv": csv_path}, {
        "sales": [{"prefix": "", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}}}]})
    server = common.start_server(root)
    try:
        ctx = SessionContext()
        dataset = register_flight_table(ctx, "orders", server.location, "sales/orders.csv",
                                        schema={"order_id": "int64"})
        tables = {"orders": dataset}
        pushed_time, pushed = common.measure(lambda: collect_aggregate(ctx, QUERY, tables),
                                             args.runs)

        def scan() -> AggregateResult:
            before = len(dataset.scans)
            table = collect(ctx, QUERY, tables)
            scans = dataset.scans[before:]
            return AggregateResult(table, None, "", sum(s.rows for s in scans),
                                   sum(s.bytes for s in scans))

        scan_time, scanned = common.measure(scan, args.runs)
    finally:
        server.stop()
    if not pushed.table.equals(scanned.table):
        raise SystemExit("pushed and scanned answers differ")
    cases: dict[str, Any] = {
        "pushed": {"time": pushed_time, "rows": pushed.rows, "bytes": pushed.bytes,
                   "server_query": pushed.server_query},
        "scan": {"time": scan_time, "rows": scanned.rows, "bytes": scanned.bytes},
    }
    rows = [(name, case["time"].cell(), case["rows"], common.fmt_bytes(case["bytes"]))
            for name, case in cases.items()]
    markdown = (f"# Aggregation pushdown ({size} MB orders CSV)\n\n`{QUERY}`\n\n"
                + common.md_table(["way", "time", "rows moved", "bytes moved"], rows))
    print(markdown)
    common.write_results(args.out, NAME,
                         {"size_mb": size, "query": QUERY, "cases": cases}, markdown)


if __name__ == "__main__":
    main()
