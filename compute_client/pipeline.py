"""The main job: a PySpark pipeline that reads the sample orders through the storage server.

    flight-select-pipeline [--location grpc://HOST:PORT] [--data DIR] [--out DIR]

Without ``--location`` it starts a storage server itself on the embedded sample data (a
subprocess on a free loopback port) and stops it at the end. The job reads the monthly order
objects through the server with a filter pushed down (only delivered orders leave the server),
computes revenue per region and month in Spark, writes Parquet, and prints a summary: rows read,
bytes the server scanned and bytes it sent to Spark.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
ORDER_TABLES = ("sales/orders/2024-01.csv", "sales/orders/2024-02.csv", "sales/orders/2024-03.csv")

log = logging.getLogger(__name__)


@dataclass
class ServerHandle:
    """A storage server the pipeline talks to, and the query log lines it printed."""

    location: str
    process: subprocess.Popen[str] | None = None
    events: list[dict[str, int]] = field(default_factory=list)


def partition_read_event(line: str) -> dict[str, int] | None:
    """``{"rows", "bytes", "scanned"}`` of one served partition from a server log line, or None.

    Understands the server's JSON log lines: ``{"event": "call", "method": "DO_GET", "rows",
    "bytes", "scanned"}`` and the older ``{"event": "query", "bytes", "bytes_scanned"}``.
    """
    start = line.find("{")
    if start < 0:
        return None
    try:
        event = json.loads(line[start:])
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict):
        return None
    is_read = event.get("event") == "query" or (
        event.get("event") == "call" and event.get("method") == "DO_GET" and "bytes" in event
    )
    if not is_read:
        return None
    scanned = event.get("scanned", event.get("bytes_scanned", 0))
    return {
        "rows": int(event.get("rows") or 0),
        "bytes": int(event.get("bytes") or 0),
        "scanned": int(scanned or 0),
    }


@contextmanager
def storage_server(location: str | None, data_dir: Path) -> Iterator[ServerHandle]:
    """Use the server at ``location``, or start one on ``data_dir`` for the job's duration."""
    if location is not None:
        yield ServerHandle(location)
        return
    process = subprocess.Popen(
        [sys.executable, "-m", "flight_storage", "serve", "--data", str(data_dir), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"storage server did not start: {process.stderr.read()}")
    handle = ServerHandle(line.split("listening on ", 1)[1].strip(), process)

    def collect(stream: IO[str]) -> None:
        for text in iter(stream.readline, ""):
            event = partition_read_event(text)
            if event is not None:
                handle.events.append(event)

    reader = threading.Thread(target=collect, args=(process.stderr,), daemon=True)
    reader.start()
    print(f"started storage server at {handle.location} on {data_dir}", flush=True)
    try:
        yield handle
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=5)


class PipelineSummary(TypedDict):
    """What :func:`run` read and wrote."""

    rows_read: int
    result: list[Any]  # pyspark Rows (pyspark ships no types)
    output: Path


def run(
    location: str,
    out: Path,
    tables: Sequence[str] = ORDER_TABLES,
    session: SparkSession | None = None,
) -> PipelineSummary:
    """Run the Spark job against ``location``; return what it read and wrote.

    Args:
        location: the storage server.
        out: output folder; the result goes to ``out/revenue_by_region_month`` (Parquet).
        tables: the order objects (``bucket/key``) to read.
        session: a Spark session to use (with the source registered); by default a local one
            is started and stopped at the end.
    """
    from pyspark.sql import functions as F

    from compute_client.spark_source import local_session, register

    spark = session if session is not None else local_session("flight-select-pipeline")
    if session is not None:
        register(spark)
    frames = [
        spark.read.format("flight-select")
        .option("location", location)
        .option("table", table)
        .option("columns", "region,quantity,unit_price,order_ts,status")
        .load()
        .where(F.col("status") == "delivered")
        for table in tables
    ]
    orders = frames[0]
    for frame in frames[1:]:
        orders = orders.unionByName(frame)
    # The standard flavour reads an empty CSV field as '' (AWS's rule); the report counts
    # an order without a region or a price as unknown (NULL).
    orders = orders.select([F.nullif(F.col(c), F.lit("")).alias(c) for c in orders.columns])
    orders = orders.cache()
    rows_read = orders.count()
    revenue = (
        orders.withColumn("quantity", F.col("quantity").cast("int"))
        .withColumn("unit_price", F.col("unit_price").cast("decimal(12,2)"))
        .withColumn("month", F.substring("order_ts", 1, 7))
        .withColumn("revenue", F.col("quantity") * F.col("unit_price"))
        .groupBy("region", "month")
        .agg(F.count("*").alias("orders"), F.sum("revenue").alias("revenue"))
        .orderBy("month", F.desc("revenue"))
    )
    result = revenue.collect()
    out.mkdir(parents=True, exist_ok=True)
    target = out / "revenue_by_region_month"
    revenue.write.mode("overwrite").parquet(str(target))
    orders.unpersist()
    if session is None:
        spark.stop()
    return {"rows_read": rows_read, "result": result, "output": target}


def main(argv: Sequence[str] | None = None, session: SparkSession | None = None) -> int:
    """Entry point of ``flight-select-pipeline`` (``session``: reuse a Spark session)."""
    parser = argparse.ArgumentParser(
        prog="flight-select-pipeline", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--location", help="an existing server (default: start one)")
    parser.add_argument(
        "--data", type=Path, default=SAMPLES, help="data dir for the started server"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "pipeline")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    with storage_server(args.location, args.data) as server:
        summary = run(server.location, args.out, session=session)
    print("\nrevenue of delivered orders by region and month:")
    print(f"  {'month':8} {'region':12} {'orders':>7} {'revenue':>12}")
    for row in summary["result"]:
        print(f"  {row['month']:8} {row['region']!s:12} {row['orders']:>7} {row['revenue']:>12}")
    print(f"\nrows read by Spark:           {summary['rows_read']}")
    if server.events:
        scanned = sum(e["scanned"] for e in server.events)
        sent = sum(e["bytes"] for e in server.events)
        queries = len(server.events)
        print(f"bytes scanned by the server:  {scanned} ({queries} partition reads)")
        print(f"bytes sent to Spark (Arrow):  {sent}")
        if sent:
            print(f"reduction:                    {scanned / sent:.1f}x")
    else:
        print("bytes scanned/sent: see the server's query log (external server)")
    print(f"output written to {summary['output']}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
