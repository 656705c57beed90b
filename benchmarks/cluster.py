"""Benchmark: a storage cluster of 1, 2 and 3 nodes on this machine, same data split over them.

The retail orders CSV (``python -m data.generate``) is cut into six objects of about equal
size. With N nodes, node i holds the prefix ``parts/g<i>/`` of bucket ``bench`` (its share of
the six objects) in its own data directory, on its own loopback address (127.0.0.2, .3, .4).
A client plans ``SELECT ... FROM "bench"."parts/"`` on node 0 (the planning node, which
forwards planning to the others), then reads every endpoint from its location in parallel
threads. Reported per N: the end-to-end time and throughput, and the planning time alone
(GetFlightInfo: the planning node's share of the work).

All nodes share this machine's cores, so more nodes cannot add CPU here: the figures show
the cluster's overhead and the planning node's cost, not the speed-up of N machines (see
docs/cluster.md for the model).

    python -m benchmarks.cluster --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import common

log = logging.getLogger("benchmarks.cluster")

NAME = "cluster"
BUCKET = "bench"
OBJECTS = 6
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
SIZE_MB = {"quick": 24, "full": 600}
QUERIES = {
    "filter_5pct": (f'SELECT order_id, unit_price FROM "{BUCKET}"."parts/" '
                    "WHERE status = 'returned' AND region = 'north'"),
    "scan_all": f'SELECT order_id, quantity FROM "{BUCKET}"."parts/"',
}


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size-mb", type=int, default=None, help="total CSV size")
    parser.add_argument("--nodes", default="1,2,3", help="comma list of node counts (<= 3)")


def _split(source: Path, into: int, directory: Path) -> list[Path]:
    """``source`` cut at line boundaries into ``into`` CSV files, each with the header."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = source.read_bytes().splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    step = -(-len(rows) // into)
    parts = []
    for i in range(into):
        path = directory / f"part-{i}.csv"
        path.write_bytes(header + b"".join(rows[i * step:(i + 1) * step]))
        parts.append(path)
    return parts


class _Cluster:
    """``n`` nodes, node i holding ``parts/g<i>/`` (parts i, i+n, ... of the six)."""

    def __init__(self, parts: list[Path], n: int) -> None:
        self.root = common.WORK / "roots" / f"{NAME}-{n}"
        shutil.rmtree(self.root, ignore_errors=True)
        nodes = [{"name": f"n{i}", "location": f"grpc://{a}:{common.free_port(a)}"}
                 for i, a in enumerate(ADDRESSES[:n])]
        holdings = [{"bucket": BUCKET, "prefix": f"parts/g{i}/", "nodes": [f"n{i}"]}
                    for i in range(n)]
        for j, part in enumerate(parts):
            group = j % n
            target = self.root / f"n{group}" / BUCKET / "parts" / f"g{group}" / part.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(part, target)
        for i in range(n):
            config = self.root / f"n{i}" / BUCKET / ".flight-select.json"
            config.write_text(json.dumps({"tables": [
                {"prefix": "", "InputSerialization": common.CSV_USE_HEADER}]}))
        cluster_file = self.root / "cluster.json"
        cluster_file.write_text(json.dumps({"nodes": nodes, "holdings": holdings}))
        secret = self.root / "secret"
        secret.write_text(secrets.token_hex(32))
        self.servers: list[common.Server] = []
        try:
            for node in nodes:
                self.servers.append(common.start_server(
                    self.root / str(node["name"]), "--cluster", str(cluster_file), "--node",
                    str(node["name"]), "--port", str(node["location"]).rsplit(":", 1)[1],
                    secret_file=secret))
        except BaseException:
            self.close()
            raise
        self.memory = common.MemorySampler(s.pid for s in self.servers)
        from compute_client.flight import ConnectionOptions, FlightSelectClient

        self.client = FlightSelectClient(ConnectionOptions(self.servers[0].location))

    def plan(self, statement: str) -> Any:
        return self.client.execute(statement)

    def query(self, statement: str) -> common.FlightResult:
        """Plan on node 0, read every endpoint at its location, in parallel."""
        plan = self.client.execute(statement)

        def drain(endpoint: Any) -> tuple[int, int]:
            rows = nbytes = 0
            for batch in self.client.read(endpoint):
                rows += batch.num_rows
                nbytes += batch.nbytes
            return rows, nbytes

        with ThreadPoolExecutor(min(len(plan.endpoints), common.MAX_PARALLEL_READS)) as pool:
            parts = list(pool.map(drain, plan.endpoints))
        return common.FlightResult(sum(p[0] for p in parts), sum(p[1] for p in parts),
                                   len(plan.endpoints), str(plan.about.reader or "?"))

    def close(self) -> None:
        if hasattr(self, "client"):
            self.client.close()
        if hasattr(self, "memory"):
            self.memory.close()
        for server in self.servers:
            server.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    size = args.size_mb or SIZE_MB["quick" if args.quick else "full"]
    source = common.orders_csv(size)
    parts = _split(source, OBJECTS, common.WORK / NAME / f"{size}mb")
    total = sum(p.stat().st_size for p in parts)
    results: list[dict[str, Any]] = []
    for n in [int(x) for x in args.nodes.split(",")]:
        cluster = _Cluster(parts, n)
        try:
            for name, statement in QUERIES.items():
                cluster.query(statement)  # warm-up: imports, first plans, page cache
                cluster.memory.reset()
                stat, answer = common.measure(partial(cluster.query, statement), args.runs,
                                              warmup=0)
                planning, _ = common.measure(partial(cluster.plan, statement), args.runs,
                                             warmup=0)
                row = {"nodes": n, "query": name, "bytes": total, "time": stat,
                       "planning": planning, "mb_per_s": total / 1e6 / stat.median,
                       "rows": answer.rows, "endpoints": answer.endpoints,
                       "peak_rss": cluster.memory.peak()}
                results.append(row)
                log.info("%d node(s) %-12s %s  %.0f MB/s  planning %s  endpoints %d rows %d",
                         n, name, stat.cell(), row["mb_per_s"], planning.cell(),
                         answer.endpoints, answer.rows)
        finally:
            cluster.close()
        time.sleep(0.2)
    if not args.keep_data:
        common.remove_work(common.WORK / NAME)
    payload = {"mode": "quick" if args.quick else "full", "runs": args.runs,
               "total_bytes": total, "objects": OBJECTS, "results": results}
    common.write_results(args.out, NAME, payload, _report(results, args, total))
    return 0


def _report(results: list[dict[str, Any]], args: argparse.Namespace, total: int) -> str:
    table = common.md_table(
        ["nodes", "query", "endpoints", "rows", "time median (min–max)", "MB/s",
         "planning (GetFlightInfo on node 0)", "server RSS peak (sum)"],
        [[r["nodes"], r["query"], r["endpoints"], r["rows"], r["time"].cell(),
          f"{r['mb_per_s']:.0f}", r["planning"].cell(), common.fmt_bytes(r["peak_rss"])]
         for r in results])
    return (f"## Cluster ({'quick' if args.quick else 'full'} run)\n\n"
            f"{common.fmt_bytes(total)} of orders CSV in {OBJECTS} objects, split over N nodes "
            "on this machine (each node its own process, data directory and loopback "
            f"address); {args.runs} timed runs after a warm-up; planning on node 0, every "
            "endpoint read at its location in parallel threads. The nodes share this "
            "machine's cores: see docs/cluster.md for what the figures imply for N "
            "machines.\n\n" + table + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
