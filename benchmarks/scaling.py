"""Benchmark 4: scaling with object size, and with 1 or 2 server processes.

One lineitem CSV object (tpchgen-cli at the scale factor giving the size) grows from 10 MB to
2 GB (quick: 10–100 MB). For each size and for 1 and 2 server replicas (sharing a ticket
secret; endpoint ``i`` is redeemed at replica ``i % n``), two queries run end to end through
Flight: a ~1% filter with a projection (one endpoint per byte range, read in parallel) and an
aggregate (one endpoint). Server memory is the summed RSS of the server processes, sampled
every 20 ms with psutil; the peak is over the timed runs. Each object is deleted after use.

    python -m benchmarks.scaling --quick
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from benchmarks import common

log = logging.getLogger("benchmarks.scaling")

NAME = "scaling"
BUCKET = "bench"
KEY = "lineitem.csv"
SIZES_MB = {"quick": (10, 30, 100), "full": (10, 100, 500, 1000, 2000)}
PROCESSES = (1, 2)
QUERIES = {
    "filter_1pct": (f'SELECT l_orderkey, l_extendedprice FROM "{BUCKET}"."{KEY}" '
                    "WHERE l_shipdate < '1992-03-15'"),
    "aggregate": (f'SELECT count(*), sum(CAST(l_quantity AS INT)) FROM "{BUCKET}"."{KEY}" '
                  "WHERE l_returnflag = 'R'"),
}
MEMORY_TARGET = 2.0


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default=None, help="comma list of sizes in MB")
    parser.add_argument("--partition-mb", type=int, default=None)
    parser.add_argument("--queries", default=",".join(QUERIES),
                        help=f"comma list of {', '.join(QUERIES)}")
    parser.add_argument("--processes", default="1,2", help="comma list of replica counts")


def _warm_cache(path: Any) -> None:
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else SIZES_MB["quick" if args.quick else "full"])
    extra = ["--partition-mb", str(args.partition_mb)] if args.partition_mb else []
    chosen = {name: QUERIES[name] for name in args.queries.split(",")}
    replicas = [int(n) for n in args.processes.split(",")]
    results: list[dict[str, Any]] = []
    for size in sizes:
        scale = common.scale_for_mb(size)
        path = common.lineitem(scale, "csv")
        nbytes = path.stat().st_size
        root = common.data_root(NAME, {f"{BUCKET}/{KEY}": path}, {
            BUCKET: [{"prefix": "", "InputSerialization": common.CSV_USE_HEADER}]})
        _warm_cache(path)
        for processes in replicas:
            with common.ServerGroup(root, processes, *extra) as servers:
                idle = servers.memory.current()
                for name, statement in chosen.items():
                    if processes > 1 and name == "aggregate":
                        continue  # an aggregate is one endpoint: a second replica never helps
                    servers.query(statement)  # warm-up (imports, first plan)
                    servers.memory.reset()
                    stat, answer = common.measure(lambda s=statement: servers.query(s),
                                                  args.runs, warmup=0)
                    peak = servers.memory.peak()
                    row = {"size_mb": size, "bytes": nbytes, "scale_factor": scale,
                           "processes": processes, "query": name, "time": stat,
                           "mb_per_s": nbytes / 1e6 / stat.median, "rows": answer.rows,
                           "endpoints": answer.endpoints, "idle_rss": idle, "peak_rss": peak}
                    results.append(row)
                    log.info("%5d MB  %d proc  %-12s %s  %.0f MB/s  peak %s  endpoints %d",
                             size, processes, name, stat.cell(), row["mb_per_s"],
                             common.fmt_bytes(peak), answer.endpoints)
        if not args.keep_data:
            common.remove_work(path.parent, common.WORK / "roots" / NAME)
    markdown, figures = report(results, args)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "server_args": extra, "results": results}
    common.write_results(args.out, NAME, payload, markdown, figures)
    return 0


def report(results: list[dict[str, Any]], args: argparse.Namespace
           ) -> tuple[str, dict[str, Any]]:
    """Table, memory-flatness check and plots."""
    table = common.md_table(
        ["object", "servers", "query", "endpoints", "time median (min–max)", "MB/s",
         "server RSS idle", "server RSS peak"],
        [[common.fmt_bytes(r["bytes"]), r["processes"], r["query"], r["endpoints"],
          r["time"].cell(), f"{r['mb_per_s']:.0f}", common.fmt_bytes(r["idle_rss"]),
          common.fmt_bytes(r["peak_rss"])] for r in results])
    text = (f"## Scaling ({'quick' if args.quick else 'full'} run)\n\n"
            f"lineitem CSV objects of growing size; {args.runs} timed runs after one warm-up "
            "query; RSS summed over the server processes.\n\n" + table + "\n")
    one = [r for r in results if r["processes"] == 1]
    from_100 = [r for r in one if r["size_mb"] >= 100]
    if len({r["size_mb"] for r in from_100}) > 1:
        lo = max(r["peak_rss"] for r in from_100 if r["size_mb"] == min(x["size_mb"]
                                                                        for x in from_100))
        hi = max(r["peak_rss"] for r in from_100)
        text += (f"\n**Memory target** (peak within {MEMORY_TARGET:g}x from 100 MB up): "
                 f"largest peak / peak at 100 MB = {hi / lo:.2f} "
                 f"({'met' if hi / lo <= MEMORY_TARGET else 'missed'}).\n")
    text += "\n![scaling](scaling.png)\n"
    plt = common.pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    for name in QUERIES:
        for processes in PROCESSES:
            points = [r for r in results if r["query"] == name and r["processes"] == processes]
            if not points:
                continue
            xs = [r["bytes"] / 1e6 for r in points]
            label = f"{name}, {processes} server{'s' if processes > 1 else ''}"
            ax1.plot(xs, [r["time"].median for r in points], marker="o", label=label)
            ax2.plot(xs, [r["peak_rss"] / 2**20 for r in points], marker="o", label=label)
    for ax, label in ((ax1, "seconds (median)"), (ax2, "server peak RSS (MiB)")):
        ax.set_xscale("log")
        ax.set_xlabel("object size (MB)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    ax1.set_yscale("log")
    ax2.set_ylim(bottom=0)
    fig.suptitle("Scaling with object size")
    return text, {"scaling.png": fig}


if __name__ == "__main__":
    raise SystemExit(main())
