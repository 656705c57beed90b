"""Benchmark 2: pushdown, time and bytes moved at selectivities 0.1%, 1%, 10% and 100%.

The question at every selectivity: ``count(*)`` and ``sum(l_extendedprice)`` of the lineitem
rows with ``l_shipdate < D`` (D picked from the data so the predicate keeps the wanted share;
ISO dates compare as strings), asked five ways:

* ``datafusion_local``: DataFusion reading the CSV file itself (the baseline of the remote
  table);
* ``datafusion_remote``: ``compute_client.datafusion_source.register_flight_table`` and
  DataFusion SQL (whatever projection/filter the client pushes to the server);
* ``datafusion_whole_object``: fetch ``SELECT *`` through Flight, filter in DataFusion;
* ``spark_pushdown``: the ``flight-select`` Spark source with the 3 columns and the filter
  pushed;
* ``spark_whole_object``: the same source, all columns, a filter Spark cannot push;
* ``spark_csv``: Spark reading the CSV file itself.

Bytes moved are Arrow bytes reaching the client (Flight paths) or the file bytes Spark reads.

``--cache``: the server keeps a decoded cache (issue #36); its entry of the CSV is filled
before any timing (every variant through the server then reads the entry: *warm*), and the
results are written as ``pushdown_cached``.

    python -m benchmarks.pushdown --quick
    python -m benchmarks.pushdown --scale 1.4 --selectivities 0.01 \
        --variants spark_pushdown,spark_csv --cache
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from benchmarks import common

log = logging.getLogger("benchmarks.pushdown")

NAME = "pushdown"
BUCKET = "bench"
KEY = "lineitem.csv"
SELECTIVITIES = (0.001, 0.01, 0.1, 1.0)
SIZES = {"quick": 0.01, "full": 0.3}
COLUMNS = ("l_orderkey", "l_extendedprice", "l_shipdate")
TARGET_SPEEDUP = 3.0
TARGET_SPEEDUP_CACHED = 10.0
"""Spark at 1% through a server whose decoded cache holds the CSV (issue #36)."""
TARGET_BYTES = 50.0
TARGET_REMOTE = 0.8


def thresholds(path: Path) -> dict[float, tuple[str, float]]:
    """Per selectivity: the date D and the exact share of rows with ``l_shipdate < D``."""
    table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        include_columns=["l_shipdate"], column_types={"l_shipdate": pa.string()}))
    dates = pc.sort_indices(table["l_shipdate"])
    ordered = table["l_shipdate"].take(dates).to_pylist()
    n = len(ordered)
    out = {}
    for share in SELECTIVITIES:
        if share >= 1.0:
            out[share] = ("9999-12-31", 1.0)
            continue
        date = ordered[min(n - 1, int(share * n))]
        kept = sum(1 for d in ordered if d < date)  # all rows of that day fall out
        if kept == 0:
            date = ordered[int(share * n) + 1] if int(share * n) + 1 < n else date
            kept = sum(1 for d in ordered if d < date)
        out[share] = (date, kept / n)
    return out


class _ByteCounter:
    """Counts Arrow bytes read by ``FlightSelectClient.read`` in this process."""

    def __init__(self) -> None:
        from compute_client.flight import FlightSelectClient

        self._cls = FlightSelectClient
        self._original = FlightSelectClient.read
        self._lock = threading.Lock()
        self.bytes = 0
        counter = self

        def read(client: Any, endpoint: Any) -> Any:
            for batch in counter._original(client, endpoint):
                with counter._lock:
                    counter.bytes += batch.nbytes
                yield batch

        FlightSelectClient.read = read  # type: ignore[method-assign]

    def take(self) -> int:
        with self._lock:
            value, self.bytes = self.bytes, 0
        return value

    def close(self) -> None:
        self._cls.read = self._original  # type: ignore[method-assign]


def _datafusion_remote(location: str, date: str) -> Callable[[], Any]:
    from datafusion import SessionContext

    from compute_client.datafusion_source import register_flight_table

    def run() -> Any:
        ctx = SessionContext()
        register_flight_table(ctx, "li", location, f"{BUCKET}/{KEY}")
        return ctx.sql(
            "SELECT count(*), sum(CAST(l_extendedprice AS DOUBLE)) FROM li "
            f"WHERE l_shipdate < '{date}'").collect()
    return run


def _datafusion_local(path: Path, date: str) -> Callable[[], Any]:
    """DataFusion reading the CSV file itself (all columns Utf8, as the server reads it)."""
    from datafusion import SessionContext

    schema = pa.schema([pa.field(name, pa.string()) for name in common.LINEITEM_COLUMNS])

    def run() -> Any:
        ctx = SessionContext()
        ctx.register_csv("li", str(path), schema=schema, has_header=True,
                         file_extension=path.suffix)
        return ctx.sql(
            "SELECT count(*), sum(CAST(l_extendedprice AS DOUBLE)) FROM li "
            f"WHERE l_shipdate < '{date}'").collect()
    return run


def _datafusion_whole(location: str, date: str) -> Callable[[], Any]:
    from datafusion import SessionContext

    from compute_client.flight import ConnectionOptions, FlightSelectClient

    def run() -> Any:
        with FlightSelectClient(ConnectionOptions(location)) as client:
            table = client.read_all(f'SELECT * FROM "{BUCKET}"."{KEY}"')
        ctx = SessionContext()
        ctx.register_record_batches("li", [table.to_batches()])
        return ctx.sql(
            "SELECT count(*), sum(CAST(l_extendedprice AS DOUBLE)) FROM li "
            f"WHERE l_shipdate < '{date}'").collect()
    return run


def _spark_job(spark: Any, location: str, path: Path, date: str, variant: str
               ) -> Callable[[], Any]:
    from pyspark.sql import functions as F

    def frame() -> Any:
        if variant == "spark_csv":
            return (spark.read.option("header", "true").csv(str(path))
                    .where(F.col("l_shipdate") < date))
        reader = (spark.read.format("flight-select").option("location", location)
                  .option("table", f"{BUCKET}/{KEY}"))
        if variant == "spark_pushdown":
            return reader.option("columns", ",".join(COLUMNS)).load().where(
                F.col("l_shipdate") < date)
        # substring(...) is an expression, which Spark never offers to a Python source
        return reader.load().where(F.substring("l_shipdate", 1, 10) < date)

    def run() -> Any:
        return frame().agg(F.count(F.lit(1)),
                           F.sum(F.col("l_extendedprice").cast("double"))).collect()
    return run


def _flight_bytes(location: str, statement: str) -> int:
    from compute_client.flight import ConnectionOptions, FlightSelectClient

    with FlightSelectClient(ConnectionOptions(location)) as client:
        plan = client.execute(statement)
        return sum(b.nbytes for e in plan.endpoints for b in client.read(e))


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark variants")
    parser.add_argument("--scale", type=float, default=None,
                        help="TPC-H scale factor of lineitem (1.4 is about 1 GB of CSV)")
    parser.add_argument("--selectivities", default=None,
                        help="comma list of shares to run, e.g. 0.01 (default: all)")
    parser.add_argument("--partition-mb", type=int, default=None,
                        help="server --partition-mb (default: the server's own default)")
    parser.add_argument("--variants", default=None,
                        help="comma list of variants to run (default: all)")
    parser.add_argument("--cache", action="store_true",
                        help="the server with a decoded cache, filled before timing")


def _server_args(args: argparse.Namespace, cache_dir: Path) -> list[str]:
    """The server's options: its partition size, and its decoded cache (emptied) with
    ``--cache``."""
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    if args.cache:
        common.remove_work(cache_dir)
        extra += ["--cache-dir", str(cache_dir), "--cache-mb", str(8 * 1024)]
    return extra


def _fill_cache(location: str, statement: str, wanted: bool) -> dict[str, Any] | None:
    """Ask ``statement`` once and wait until the server's decoded cache has filled an entry
    (its fill runs after the answer); returns the cache's stats (None unless ``wanted``)."""
    if not wanted:
        return None
    import json
    import time

    import pyarrow.flight as flight

    from compute_client.flight import ConnectionOptions, FlightSelectClient

    with FlightSelectClient(ConnectionOptions(location)) as client:
        client.read_all(statement)
    health = flight.connect(location)
    deadline = time.monotonic() + 1800
    while True:
        [answer] = list(health.do_action(flight.Action("health", b"")))
        stats: dict[str, Any] = json.loads(answer.body.to_pybytes())["decoded_cache"]
        if stats["fills"] >= 1:
            log.info("decoded cache filled: %s", stats)
            return stats
        if time.monotonic() > deadline:
            raise TimeoutError(f"the decoded cache was not filled: {stats}")
        time.sleep(0.2)


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    scale = args.scale or SIZES["quick" if args.quick else "full"]
    path = common.lineitem(scale, "csv")
    file_bytes = path.stat().st_size
    cuts = thresholds(path)
    if args.selectivities:
        wanted = {float(x) for x in args.selectivities.split(",")}
        cuts = {share: cut for share, cut in cuts.items() if share in wanted}
    chosen = set(args.variants.split(",")) if args.variants else None
    root = common.data_root(NAME, {f"{BUCKET}/{KEY}": path},
                            {BUCKET: [{"prefix": "", "InputSerialization": common.CSV_USE_HEADER}]})
    results: list[dict[str, Any]] = []
    spark = None
    cache_dir = common.WORK / "roots" / f"{NAME}-cache"
    extra = _server_args(args, cache_dir)
    with common.ServerGroup(root, 1, *extra) as servers:
        location = servers.location
        _fill_cache(location, f'SELECT count(*) FROM "{BUCKET}"."{KEY}"', args.cache)
        whole = _flight_bytes(location, f'SELECT * FROM "{BUCKET}"."{KEY}"')
        counter = _ByteCounter()
        try:
            for share, (date, actual) in cuts.items():
                pushed = (f'SELECT {", ".join(COLUMNS)} FROM "{BUCKET}"."{KEY}" '
                          f"WHERE l_shipdate < '{date}'")
                pushed_bytes = _flight_bytes(location, pushed)
                cases: list[tuple[str, Callable[[], Any], Callable[[], int]]] = [
                    ("datafusion_local", _datafusion_local(path, date), lambda: file_bytes),
                    ("datafusion_remote", _datafusion_remote(location, date), counter.take),
                    ("datafusion_whole_object", _datafusion_whole(location, date),
                     lambda: whole),
                ]
                if not args.no_spark:
                    if spark is None:
                        from compute_client.spark_source import local_session

                        os.environ.setdefault(  # no progress bars on stderr
                            "PYSPARK_SUBMIT_ARGS",
                            "--conf spark.ui.showConsoleProgress=false pyspark-shell")
                        spark = local_session("flight-select-bench", cores=2)
                    cases += [
                        ("spark_pushdown", _spark_job(spark, location, path, date,
                                                      "spark_pushdown"),
                         # Bound now, not looked up when called: the name changes per share.
                         lambda n=pushed_bytes: n),
                        ("spark_whole_object", _spark_job(spark, location, path, date,
                                                          "spark_whole_object"), lambda: whole),
                        ("spark_csv", _spark_job(spark, location, path, date, "spark_csv"),
                         lambda: file_bytes),
                    ]
                for variant, job, moved in cases:
                    if chosen is not None and variant not in chosen:
                        continue
                    counter.take()
                    stat, answer = common.measure(job, args.runs)
                    nbytes = moved()
                    if variant == "datafusion_remote":
                        nbytes //= args.runs + 1  # counted over warm-up and timed runs
                    count = _first_count(answer)
                    log.info("%-6s %-24s %s  %s  rows=%s", f"{share:.1%}", variant, stat.cell(),
                             common.fmt_bytes(nbytes), count)
                    results.append({"selectivity": share, "actual_selectivity": actual,
                                    "date": date, "variant": variant, "time": stat,
                                    "bytes": nbytes, "rows_matched": count})
        finally:
            counter.close()
            if spark is not None:
                spark.stop()
    markdown, figures = report(results, file_bytes, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "object": {"path": str(path.relative_to(common.ROOT)), "bytes": file_bytes},
               "whole_object_arrow_bytes": whole, "results": results}
    payload["decoded_cache"] = args.cache
    name = f"{NAME}_cached" if args.cache else NAME
    common.write_results(args.out, name, payload, markdown,
                         {f"{name}.png": figure for figure in figures.values()})
    if not args.keep_data:
        common.remove_work(common.WORK / "roots" / NAME)
        common.remove_work(cache_dir)
    return 0


def _first_count(answer: Any) -> int | None:
    try:
        if isinstance(answer, list) and answer and hasattr(answer[0], "num_rows"):
            return int(answer[0].column(0)[0].as_py())  # DataFusion batches
        return int(answer[0][0])  # Spark rows
    except (IndexError, TypeError, AttributeError):
        return None


def report(results: list[dict[str, Any]], file_bytes: int, args: argparse.Namespace
           ) -> tuple[str, dict[str, Any]]:
    """Markdown table, target check and plots."""
    variants = list(dict.fromkeys(r["variant"] for r in results))
    by = {(r["selectivity"], r["variant"]): r for r in results}
    rows = []
    for share in SELECTIVITIES:
        for variant in variants:
            r = by.get((share, variant))
            if r is None:
                continue
            rows.append([f"{share:.1%} ({r['actual_selectivity']:.2%})", variant,
                         f"{r['rows_matched']:,}" if r["rows_matched"] is not None else "?",
                         r["time"].cell(), common.fmt_bytes(r["bytes"])])
    cached = (" — the server reading its decoded cache, filled before timing (warm)"
              if getattr(args, "cache", False) else "")
    text = (f"## Pushdown ({'quick' if args.quick else 'full'} run){cached}\n\n"
            f"lineitem CSV {common.fmt_bytes(file_bytes)}; `count(*)` and "
            "`sum(l_extendedprice)` where `l_shipdate < D`; selectivity asked (actual). "
            f"{args.runs} timed runs after one warm-up.\n\n"
            + common.md_table(["selectivity", "variant", "rows matched",
                               "time median (min–max)", "bytes to the client"], rows))
    one = {v: by.get((0.01, v)) for v in variants}
    target = TARGET_SPEEDUP_CACHED if getattr(args, "cache", False) else TARGET_SPEEDUP
    if one.get("spark_pushdown") and one.get("spark_csv"):
        speedup = one["spark_csv"]["time"].median / one["spark_pushdown"]["time"].median
        fewer = one["spark_csv"]["bytes"] / max(1, one["spark_pushdown"]["bytes"])
        text += (f"\n\n**Target at 1%**: Spark through the server vs Spark reading the CSV: "
                 f"{speedup:.2f}x faster (target ≥ {target}x: "
                 f"{'met' if speedup >= target else 'missed'}), {fewer:.0f}x fewer "
                 f"bytes (target ≥ {TARGET_BYTES:.0f}x: "
                 f"{'met' if fewer >= TARGET_BYTES else 'missed'}).")
    if one.get("datafusion_remote") and one.get("datafusion_local"):
        ratio = one["datafusion_local"]["time"].median / one["datafusion_remote"]["time"].median
        text += (f"\n\n**Target at 1%**: DataFusion reading the file locally / the DataFusion "
                 f"remote table = {ratio:.2f} (target ≥ {TARGET_REMOTE}: "
                 f"{'met' if ratio >= TARGET_REMOTE else 'missed'}).")
    image = "pushdown_cached.png" if getattr(args, "cache", False) else "pushdown.png"
    text += f"\n\n![pushdown]({image})\n"
    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    for variant in variants:
        points = [by[(s, variant)] for s in SELECTIVITIES if (s, variant) in by]
        xs = [p["selectivity"] * 100 for p in points]
        ax1.errorbar(xs, [p["time"].median for p in points], marker="o", label=variant,
                     yerr=[[p["time"].median - p["time"].min for p in points],
                           [p["time"].max - p["time"].median for p in points]])
        ax2.plot(xs, [max(1, p["bytes"]) for p in points], marker="o", label=variant)
    for ax, label in ((ax1, "seconds (median)"), (ax2, "bytes to the client")):
        ax.set_xscale("log")
        ax.set_xlabel("selectivity (%)")
        ax.set_ylabel(label)
    ax2.set_yscale("log")
    ax1.legend(fontsize=8)
    fig.suptitle("Pushdown: time and bytes moved by selectivity")
    return text, {"pushdown.png": fig}


if __name__ == "__main__":
    raise SystemExit(main())
