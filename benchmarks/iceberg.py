"""Benchmark: an Apache Iceberg table in SeaweedFS, served with pruning (issue #25).

pyiceberg writes a table partitioned by day(ts) into a SeaweedFS bucket (its SQL catalog in a
SQLite file): one data file per day, ``id`` increasing with time (a sorted column). The server
serves it twice, over the very same data files:

* as the Iceberg table ``"lake"."bench"."events"`` (``--iceberg``): planning prunes by
  partition and column bounds, endpoints are the files kept;
* as the plain prefix table ``"bench"."warehouse/bench/events/data/"`` (``--data s3://bench``):
  every object under the prefix, each planned and read by DataFusion's Parquet reader.

A counting proxy (``tests/s3_proxy.py``) stands between the server and the store, so the bytes
each query fetches (planning and reading) are counted. Reported:

* a one-day filter against a full scan: bytes fetched (target <= 1/10) and time;
* the same one-day query on the prefix table (target: the Iceberg table >= 5x faster);
* a filter on the sorted ``id`` column: files kept by column bounds;
* the same queries planned by pyiceberg and read by DataFusion in this process, over the same
  store (ratio in-process / server, target >= 0.8).

    python -m benchmarks.iceberg --quick     # 60 days, about 30 MB; what the committed results are
    python -m benchmarks.iceberg             # 60 days, about 1.2 GB: needs ~4 GB of disk for
                                             # SeaweedFS and a machine of its own
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial, reduce
from typing import Any

import pyarrow as pa

from benchmarks import common
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import SeaweedFS, start_seaweedfs

log = logging.getLogger("benchmarks.iceberg")

NAME = "iceberg"
BUCKET = "bench"
DAYS = 60
ROWS_PER_DAY = {"quick": 40_000, "full": 1_000_000}
PREFIX = "warehouse/bench/events/data/"
START = dt.datetime(2024, 1, 1)
DAY = 23  # the day the one-day queries ask for


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows-per-day", type=int, default=None)


def _day(n: int) -> str:
    return (START + dt.timedelta(days=n)).strftime("%Y-%m-%dT%H:%M:%S")


def _queries(rows_per_day: int) -> dict[str, tuple[str, str]]:
    """name -> (WHERE clause, the same as a pyiceberg row filter)."""
    low = DAY * rows_per_day + 1000
    return {
        "full_scan": ("", "True"),
        "one_day": (f"WHERE ts >= TIMESTAMP '{_day(DAY)}' AND ts < TIMESTAMP '{_day(DAY + 1)}'",
                    f"ts >= '{_day(DAY)}' and ts < '{_day(DAY + 1)}'"),
        "sorted_id_range": (f"WHERE id >= {low} AND id < {low + 5000}",
                            f"id >= {low} and id < {low + 5000}"),
    }


def _write_table(store: SeaweedFS, database: str, rows_per_day: int) -> Any:
    """The table, one append per day (a data file per day); returns the pyiceberg table."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    store.new_bucket(BUCKET)
    catalog = SqlCatalog("lake", uri=f"sqlite:///{database}",
                         warehouse=f"s3://{BUCKET}/warehouse", **store.iceberg_properties())
    catalog.create_namespace("bench")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType()),
                    NestedField(3, "user", StringType()), NestedField(4, "amount", DoubleType()),
                    NestedField(5, "payload", StringType()))
    table = catalog.create_table(
        "bench.events", schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")))
    step = 86_400_000_000 // rows_per_day
    for day in range(DAYS):
        first = day * rows_per_day
        ids = pa.array(range(first, first + rows_per_day), pa.int64())
        micros = int((START + dt.timedelta(days=day)).timestamp() * 1_000_000)
        table.append(pa.table({
            "id": ids,
            "ts": pa.array([micros + i * step for i in range(rows_per_day)], pa.timestamp("us")),
            "user": pa.array([f"user{(first + i) % 997}" for i in range(rows_per_day)]),
            "amount": pa.array([((first + i) % 10_000) / 100 for i in range(rows_per_day)]),
            # hashed digits: a payload Parquet cannot squeeze to nothing
            "payload": pa.array([f"{(first + i) * 2654435761 % 4294967296:010d}"
                                 f"{(first + i) * 40503 % 65536:05d}" for i in range(rows_per_day)]),
        }))
    return catalog.load_table("bench.events")


def _read_all(client: Any, sql: str) -> tuple[int, int, dict[str, Any]]:
    """Plan, then read every endpoint in parallel: rows, endpoints, the plan's about."""
    plan = client.execute(sql)

    def drain(endpoint: Any) -> int:
        return sum(batch.num_rows for batch in client.read(endpoint))

    with ThreadPoolExecutor(min(max(1, len(plan.endpoints)), common.MAX_PARALLEL_READS)) as pool:
        rows = sum(pool.map(drain, plan.endpoints))
    return rows, len(plan.endpoints), plan.about.to_dict()


def _in_process(catalog: Any, endpoint: str, row_filter: str, columns: Sequence[str]
                ) -> Callable[[], int]:
    """pyiceberg loads the table and plans the files, DataFusion reads them in this process
    from the store at ``endpoint`` (the counting proxy, as the server does). The table is
    loaded for each query, as the server does, so both answer from the latest commit."""
    from datafusion import SessionContext
    from datafusion.object_store import AmazonS3

    from tests.seaweedfs import ADMIN, REGION

    def run() -> int:
        ctx = SessionContext()
        ctx.register_object_store("s3://", AmazonS3(
            bucket_name=BUCKET, region=REGION, access_key_id=ADMIN[0],
            secret_access_key=ADMIN[1], endpoint=endpoint, allow_http=True), BUCKET)
        table = catalog.load_table("bench.events")
        paths = [t.file.file_path for t in table.scan(row_filter=row_filter).plan_files()]
        if not paths:
            return 0
        frames = [ctx.read_parquet(p, file_extension=".parquet").select(*columns)
                  for p in paths]
        frame = reduce(lambda a, b: a.union(b), frames)
        where = row_filter if row_filter != "True" else None
        ctx.register_view("t", frame)
        sql = "SELECT * FROM t" + (f" WHERE {_datafusion_where(where)}" if where else "")
        return sum(b.to_pyarrow().num_rows for b in ctx.sql(sql).execute_stream())

    return run


def _datafusion_where(row_filter: str) -> str:
    return row_filter.replace("ts >= '", "ts >= TIMESTAMP '").replace("ts < '",
                                                                     "ts < TIMESTAMP '")


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    mode = "quick" if args.quick else "full"
    rows_per_day = args.rows_per_day or ROWS_PER_DAY[mode]
    work = common.WORK / NAME / secrets.token_hex(4)
    work.mkdir(parents=True)
    store = start_seaweedfs(work / "seaweedfs")
    proxy = S3Proxy(store.endpoint)
    server = None
    try:
        log.info("writing %d days x %d rows with pyiceberg", DAYS, rows_per_day)
        table = _write_table(store, str(work / "catalog.db"), rows_per_day)
        files = list(table.scan().plan_files())
        total_bytes = sum(t.file.file_size_in_bytes for t in files)
        log.info("%d data files, %s", len(files), common.fmt_bytes(total_bytes))
        os.environ.update({**store.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint})
        server = common.start_server(
            f"s3://{BUCKET}", "--iceberg",  # type: ignore[arg-type]
            f"lake=sql:sqlite:///{work / 'catalog.db'}?warehouse=s3://{BUCKET}/warehouse")
        # pyiceberg of the in-process side reads through the proxy too: the same path
        from pyiceberg.catalog.sql import SqlCatalog

        proxied = SqlCatalog("lake", uri=f"sqlite:///{work / 'catalog.db'}",
                             **{**store.iceberg_properties(), "s3.endpoint": proxy.endpoint})
        results = _measure(server, proxy, proxied, rows_per_day, args.runs)
    finally:
        if server is not None:
            server.stop()
        proxy.close()
        store.stop(wait_s=5)
        if not args.keep_data:
            common.remove_work(work)
    payload = {"mode": mode, "runs": args.runs, "days": DAYS, "rows_per_day": rows_per_day,
               "data_files": len(files), "table_bytes": total_bytes, "results": results}
    common.write_results(args.out, NAME, payload, _report(payload))
    return 0


def _measure(server: common.Server, proxy: S3Proxy, catalog: Any, rows_per_day: int,
             runs: int) -> list[dict[str, Any]]:
    from compute_client.flight import ConnectionOptions, FlightSelectClient

    columns = ("id", "ts", "amount")
    results = []
    with FlightSelectClient(ConnectionOptions(server.location)) as client:
        for name, (where, row_filter) in _queries(rows_per_day).items():
            iceberg_sql = f'SELECT id, ts, amount FROM "lake"."bench"."events" {where}'
            prefix_sql = f'SELECT id, ts, amount FROM "{BUCKET}"."{PREFIX}" {where}'
            row: dict[str, Any] = {"query": name, "where": where}
            for side, sql in (("iceberg", iceberg_sql), ("prefix", prefix_sql)):
                _read_all(client, sql)  # warm: metadata, footers, connections
                proxy.reset()
                rows, endpoints, about = _read_all(client, sql)
                fetched = proxy.counters.body_bytes
                stat, _ = common.measure(partial(_read_all, client, sql), runs, warmup=0)
                row[side] = {"time": stat, "rows": rows, "endpoints": endpoints,
                             "fetched_bytes": fetched, "files": about.get("files"),
                             "pruned_files": about.get("pruned_files")}
                log.info("%-16s %-8s %s rows %d endpoints %d fetched %s files %s", name, side,
                         stat.cell(), rows, endpoints, common.fmt_bytes(fetched),
                         about.get("files"))
            local = _in_process(catalog, proxy.endpoint, row_filter, columns)
            stat, rows = common.measure(local, runs)
            row["in_process"] = {"time": stat, "rows": rows}
            if rows != row["iceberg"]["rows"] or rows != row["prefix"]["rows"]:
                raise AssertionError(f"{name}: the answers differ: {rows}, "
                                     f"{row['iceberg']['rows']}, {row['prefix']['rows']}")
            log.info("%-16s in-process %s", name, stat.cell())
            results.append(row)
    return results


def _report(payload: dict[str, Any]) -> str:
    results = {r["query"]: r for r in payload["results"]}
    full, day = results["full_scan"]["iceberg"], results["one_day"]["iceberg"]
    day_prefix = results["one_day"]["prefix"]
    sorted_row = results["sorted_id_range"]["iceberg"]
    table = common.md_table(
        ["query", "table", "time median (min–max)", "rows", "endpoints", "data files read",
         "bytes fetched from the store"],
        [[r["query"], side, r[side]["time"].cell(), r[side]["rows"], r[side]["endpoints"],
          r[side]["files"] if r[side]["files"] is not None else "all",
          common.fmt_bytes(r[side]["fetched_bytes"])]
         for r in payload["results"] for side in ("iceberg", "prefix")]
        + [[r["query"], "pyiceberg + DataFusion in-process", r["in_process"]["time"].cell(),
            r["in_process"]["rows"], "", "", ""] for r in payload["results"]])
    share = day["fetched_bytes"] / max(1, full["fetched_bytes"])
    speedup = day_prefix["time"].median / day["time"].median
    ratios = ", ".join(
        f"{r['query']} {r['in_process']['time'].median / r['iceberg']['time'].median:.2f}"
        for r in payload["results"])
    return (
        f"## Iceberg tables ({payload['mode']} run)\n\n"
        f"A table of {payload['data_files']} data files partitioned by day(ts) "
        f"({payload['days']} days x {payload['rows_per_day']} rows, "
        f"{common.fmt_bytes(payload['table_bytes'])} of Parquet) written by pyiceberg into "
        "SeaweedFS; the server reads it through a counting proxy, as an Iceberg table "
        "(`--iceberg`) and as the plain prefix table of the same data files; pyiceberg + "
        "DataFusion in-process plan and read the same table through the same proxy. "
        f"{payload['runs']} timed runs after a warm-up; every endpoint read in parallel.\n\n"
        + table + "\n\n"
        f"* one day against a full scan: {share:.3f} of the bytes fetched (target <= 0.1)\n"
        f"* one day, Iceberg table against prefix table: {speedup:.1f}x faster (target >= 5x)\n"
        f"* sorted `id` range: {sorted_row['files']} data file(s) kept of "
        f"{payload['data_files']} by column bounds\n"
        f"* pyiceberg + DataFusion in-process / server (time ratio, target >= 0.8): {ratios}\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
