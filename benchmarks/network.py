"""Benchmark: what pushing the query to the data saves on a network, and where pulling wins.

One CSV object in SeaweedFS; the same statement (``SELECT *`` with an id filter keeping a chosen
share of the rows, 0.01% to 100%) answered three ways, each across the same shaped link
(``benchmarks/throttle_proxy.py``: a token bucket per link, a per-stream cap of 60 MB/s, one
S3 GET's median, and 0.25 ms one way):

* **pushdown**: flight-select next to the store (``--data s3://bench``, reading the store over
  loopback, unshaped) and the ADBC driver across the link; with ``--cache-dir`` also **pushdown,
  warm**: the decoded cache filled (issue 36), when the server has it;
* **DataFusion pull**: DataFusion in this process reading the object across the link with its
  object_store S3 reader;
* **pyarrow pull**: pyarrow's S3 filesystem and CSV reader across the link, filtered with
  pyarrow.compute.

For each it reports wall time, bytes on the wire (both directions, counted by the proxy), the
client's CPU-seconds (this process: the ADBC driver, DataFusion or pyarrow), the server's and
the store's; a plot of wall time against selectivity per link, and the selectivity from which
pulling is faster (the crossover).

    python -m benchmarks.network --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from benchmarks import common
from tests.seaweedfs import ADMIN, REGION, SeaweedFS, start_seaweedfs

log = logging.getLogger("benchmarks.network")

NAME = "network"
BUCKET = "bench"
KEY = "peer.csv"
ROWS = {"quick": 1_500_000, "full": 14_500_000}  # about 100 MB and 1.0 GB of peer CSV
LINKS_MBPS = {"quick": (1000, 2500, 10000), "full": (1000, 2500, 10000)}
SELECTIVITIES = (0.0001, 0.001, 0.01, 0.1, 0.5, 1.0)
STREAM_MBPS = 480  # 60 MB/s
LATENCY_MS = 0.25
COLUMNS = ("_1", "_2", "_3", "_4", "_5", "_6")
PULLS = ("datafusion", "pyarrow")
TARGET_COLD = 4.0
TARGET_WARM = 20.0
TARGET_WIRE_SHARE = 1 / 20


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=None, help="rows of the peer CSV")
    parser.add_argument("--links", type=float, nargs="+", default=None,
                        help="link rates in Mbit/s (default 1000 2500 10000)")
    parser.add_argument("--selectivities", type=float, nargs="+", default=None,
                        help="shares of rows kept (default 0.0001 0.001 0.01 0.1 0.5 1)")
    parser.add_argument("--pulls", nargs="+", choices=PULLS, default=list(PULLS),
                        help="the ways that pull the object (default both; pyarrow's takes "
                             "about 4x DataFusion's, so a 1 GB run over every link may leave "
                             "it out)")


@dataclass
class Proxy:
    """A ``benchmarks.throttle_proxy`` process: its port, and the bytes it forwarded."""

    process: subprocess.Popen[str]
    port: int

    @classmethod
    def start(cls, target: str, link_mbps: float) -> Proxy:
        process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.throttle_proxy", "--target", target,
             "--link-mbps", str(link_mbps), "--stream-mbps", str(STREAM_MBPS),
             "--latency-ms", str(LATENCY_MS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=common.ROOT)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            process.kill()
            raise RuntimeError(f"proxy did not start: {line!r}")
        return cls(process, int(line.split()[-1]))

    def _ask(self, command: str) -> dict[str, int]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, int] = json.loads(self.process.stdout.readline())
        return answer

    def wire_bytes(self) -> int:
        counts = self._ask("stats")
        return counts["to_target"] + counts["from_target"]

    def reset(self) -> None:
        self._ask("reset")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def _statement(table: str, rows: int, share: float) -> str:
    if share >= 1.0:
        return f"SELECT * FROM {table}"
    return f"SELECT * FROM {table} WHERE CAST(_1 AS BIGINT) <= {max(1, int(rows * share))}"


def _pushdown(location: str, rows: int, closing: list[Callable[[], None]]
              ) -> Callable[[float], tuple[int, int]]:
    import adbc_driver_flightsql.dbapi as dbapi

    connection = dbapi.connect(location, autocommit=True)
    cursor = connection.cursor()
    closing += [cursor.close, connection.close]

    def run(share: float) -> tuple[int, int]:
        cursor.execute(_statement(f'"{BUCKET}"."{KEY}"', rows, share))
        table = cursor.fetch_arrow_table()
        return table.num_rows, table.nbytes

    return run


def _datafusion_pull(endpoint: str, rows: int) -> Callable[[float], tuple[int, int]]:
    from datafusion import SessionContext
    from datafusion.object_store import AmazonS3

    ctx = SessionContext()
    store = AmazonS3(bucket_name=BUCKET, region=REGION, access_key_id=ADMIN[0],
                     secret_access_key=ADMIN[1], endpoint=endpoint, allow_http=True)
    ctx.register_object_store("s3://", store, BUCKET)
    schema = pa.schema([(c, pa.string()) for c in COLUMNS])
    ctx.register_csv("t", f"s3://{BUCKET}/{KEY}", schema=schema, has_header=False)

    def run(share: float) -> tuple[int, int]:
        return common.drain_datafusion(ctx, _statement("t", rows, share))

    return run


def _pyarrow_pull(endpoint: str, rows: int) -> Callable[[float], tuple[int, int]]:
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(endpoint_override=endpoint.split("://", 1)[1], scheme="http",
                           access_key=ADMIN[0], secret_key=ADMIN[1], region=REGION)

    def run(share: float) -> tuple[int, int]:
        kept = max(1, int(rows * share))
        out_rows = nbytes = 0
        with fs.open_input_stream(f"{BUCKET}/{KEY}") as stream:
            reader = pacsv.open_csv(
                stream, read_options=pacsv.ReadOptions(column_names=list(COLUMNS)),
                convert_options=pacsv.ConvertOptions(
                    column_types=dict.fromkeys(COLUMNS, pa.string())))
            for batch in reader:
                if share < 1.0:
                    batch = batch.filter(pc.less_equal(pc.cast(batch["_1"], pa.int64()), kept))
                out_rows += batch.num_rows
                nbytes += batch.nbytes
        return out_rows, nbytes

    return run


def _wait_for_entry(location: str, statement: str, limit_s: float = 600.0) -> str:
    """Wait until the server's FlightInfo for ``statement`` says the decoded cache serves it
    (``"cache": "hit"``: the fill the first run started has finished); what it said last."""
    import pyarrow.flight as flight

    from flight_storage import protocol
    from flight_storage.protocol import pb

    client = flight.connect(location)
    descriptor = flight.FlightDescriptor.for_command(
        protocol.pack_any(pb.CommandStatementQuery(query=statement)))
    deadline = time.monotonic() + limit_s
    said = ""
    while time.monotonic() < deadline:
        about = json.loads(client.get_flight_info(descriptor).app_metadata or b"{}")
        said = str(about.get("cache", ""))
        if said in ("hit", ""):
            break
        time.sleep(0.5)
    client.close()
    return said


def _measure(way: str, run: Callable[[float], tuple[int, int]], proxy: Proxy, share: float,
             runs: int, pids: dict[str, int], warm: Callable[[float], str] | None = None
             ) -> dict[str, Any]:
    """``runs`` timed runs of one way at one selectivity (one untimed first, and for a warm
    way the wait for its decoded-cache entry): wall, bytes on the wire and CPU-seconds per
    run."""
    run(share)  # warm: connections, plans, the decoded cache's fill
    cache = warm(share) if warm is not None else ""
    time.sleep(0.2)
    proxy.reset()
    before = {name: common.process_cpu_seconds(pid) for name, pid in pids.items()}
    client_before = common.process_cpu_seconds()
    walls = []
    answer = (0, 0)
    for _ in range(runs):
        started = time.perf_counter()
        answer = run(share)
        walls.append(time.perf_counter() - started)
    cpu = {name: (common.process_cpu_seconds(pid) - before[name]) / runs
           for name, pid in pids.items()}
    return {"way": way, "selectivity": share, "wall": common.Stat.of(walls), "cache": cache,
            "wire_bytes": proxy.wire_bytes() / runs, "rows": answer[0], "arrow_bytes": answer[1],
            "cpu_client": (common.process_cpu_seconds() - client_before) / runs, "cpu": cpu}


def _has_decoded_cache() -> bool:
    out = subprocess.run([sys.executable, "-m", "flight_storage", "serve", "--help"],
                         capture_output=True, text=True, cwd=common.ROOT, check=False).stdout
    return "--cache-dir" in out


def _link(store: SeaweedFS, link_mbps: float, rows: int, selectivities: Sequence[float],
          runs: int, servers: dict[str, common.Server], pulls: Sequence[str]
          ) -> list[dict[str, Any]]:
    store_address = store.endpoint.split("://", 1)[1]
    results: list[dict[str, Any]] = []
    proxies = {way: Proxy.start(server.location.split("://", 1)[1], link_mbps)
               for way, server in servers.items()}
    store_proxy = Proxy.start(store_address, link_mbps)
    closing: list[Callable[[], None]] = []
    try:
        ways: dict[str, tuple[Callable[[float], tuple[int, int]], Proxy, dict[str, int]]] = {
            way: (_pushdown(f"grpc://127.0.0.1:{proxies[way].port}", rows, closing),
                  proxies[way],
                  {"server": server.pid, "store": store.process.pid})
            for way, server in servers.items()}
        pulled = f"http://127.0.0.1:{store_proxy.port}"
        if "datafusion" in pulls:
            ways["DataFusion pull"] = (_datafusion_pull(pulled, rows), store_proxy,
                                       {"store": store.process.pid})
        if "pyarrow" in pulls:
            ways["pyarrow pull"] = (_pyarrow_pull(pulled, rows), store_proxy,
                                    {"store": store.process.pid})
        for share in selectivities:
            answers = set()
            for way, (run, proxy, pids) in ways.items():
                log.info("%g Mbit/s, %g%%: %s", link_mbps, share * 100, way)
                warm = None
                if way == "pushdown, warm":
                    location = servers[way].location
                    warm = lambda s, at=location: _wait_for_entry(  # noqa: E731
                        at, _statement(f'"{BUCKET}"."{KEY}"', rows, s))
                result = _measure(way, run, proxy, share, runs, pids, warm)
                result["link_mbps"] = link_mbps
                answers.add(result["rows"])
                results.append(result)
            if len(answers) != 1:
                raise AssertionError(f"the ways disagree at {share}: {answers} rows")
    finally:
        for close in closing:
            close()
        for proxy in (*proxies.values(), store_proxy):
            proxy.stop()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    mode = "quick" if args.quick else "full"
    rows = args.rows or ROWS[mode]
    links = tuple(args.links or LINKS_MBPS[mode])
    selectivities = tuple(args.selectivities or SELECTIVITIES)
    csv = common.peer_csv(rows)
    store = start_seaweedfs(common.WORK / "seaweedfs" / secrets.token_hex(4))
    servers: dict[str, common.Server] = {}
    try:
        from boto3.s3.transfer import TransferConfig

        store.new_bucket(BUCKET)
        store.client().upload_file(str(csv), BUCKET, KEY,
                                   Config=TransferConfig(multipart_threshold=1 << 40))
        servers["pushdown"] = common.start_server(f"s3://{BUCKET}", env=store.env())
        if _has_decoded_cache():
            cache = common.WORK / "network-cache"
            common.remove_work(cache)
            servers["pushdown, warm"] = common.start_server(
                f"s3://{BUCKET}", "--cache-dir", str(cache), env=store.env())
        results = [r for link in links
                   for r in _link(store, link, rows, selectivities, args.runs, servers,
                                    args.pulls)]
    finally:
        for server in servers.values():
            server.stop()
        store.stop(wait_s=5)
        if not args.keep_data:
            common.remove_work(common.WORK / "seaweedfs")
    size = csv.stat().st_size
    summary = _summary(results, size)
    markdown = _markdown(mode, size, rows, results, summary)
    figure = _plot(results, size)
    common.write_results(args.out, NAME, {"mode": mode, "rows": rows, "object_bytes": size,
                                          "stream_mbps": STREAM_MBPS, "latency_ms": LATENCY_MS,
                                          "results": results, "summary": summary},
                         markdown, {f"{NAME}.png": figure})
    print(markdown)
    return 0


def _wall(results: list[dict[str, Any]], link: float, share: float, way: str) -> float | None:
    for r in results:
        if r["link_mbps"] == link and r["selectivity"] == share and r["way"] == way:
            return float(r["wall"].median)
    return None


def _summary(results: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """Per link: pushdown's speed-up over the faster pull at each selectivity, and the
    crossover (the smallest selectivity where a pull is faster than cold pushdown)."""
    out: dict[str, Any] = {}
    for link in sorted({r["link_mbps"] for r in results}):
        shares = sorted({r["selectivity"] for r in results if r["link_mbps"] == link})
        rows = []
        crossover = None
        for share in shares:
            pulls = [w for w in (_wall(results, link, share, "DataFusion pull"),
                                 _wall(results, link, share, "pyarrow pull")) if w is not None]
            pull = min(pulls)
            cold = _wall(results, link, share, "pushdown")
            warm = _wall(results, link, share, "pushdown, warm")
            wire = next(r["wire_bytes"] for r in results if r["link_mbps"] == link
                        and r["selectivity"] == share and r["way"] == "pushdown")
            rows.append({"selectivity": share, "pull": pull,
                         "speedup_cold": pull / cold if cold else None,
                         "speedup_warm": pull / warm if warm else None,
                         "wire_share": wire / size})
            if crossover is None and cold is not None and pull < cold:
                crossover = share
        out[str(link)] = {"rows": rows, "crossover": crossover}
    return out


def _markdown(mode: str, size: int, rows: int, results: list[dict[str, Any]],
              summary: dict[str, Any]) -> str:
    lines = [
        f"# Network-shaped pushdown ({mode} run)",
        "",
        f"`python -m benchmarks.network{' --quick' if mode == 'quick' else ''}`: a "
        f"{common.fmt_bytes(size)} headerless CSV ({rows:,} rows) in SeaweedFS; each way "
        f"crosses a link shaped by `benchmarks/throttle_proxy.py` (per-stream cap "
        f"{STREAM_MBPS / 8:.0f} MB/s, {LATENCY_MS} ms one way). Pushdown's server reads the "
        "store unshaped (it runs next to it). Wall: median (min–max) of the timed runs; wire: "
        "bytes the proxy forwarded per run; CPU-seconds per run.",
        "",
        f"Targets (issue 38, at 1 Gbit/s and 1%): pushdown >= {TARGET_COLD:g}x faster than "
        f"the faster pull cold and >= {TARGET_WARM:g}x warm; wire <= 1/20 of the object.",
        "",
    ]
    for link, part in summary.items():
        lines.append(f"## {float(link) / 1000:g} Gbit/s")
        lines.append("")
        table = []
        for r in results:
            if str(r["link_mbps"]) != link:
                continue
            cpu = r["cpu"]
            table.append([f"{r['selectivity'] * 100:g}%", r["way"], r["wall"].cell(),
                          common.fmt_bytes(r["wire_bytes"]), common.fmt_cpu(r["cpu_client"]),
                          common.fmt_cpu(cpu.get("server", 0.0)),
                          common.fmt_cpu(cpu.get("store", 0.0)), f"{r['rows']:,}"])
        lines.append(common.md_table(["kept", "way", "wall", "wire", "client CPU",
                                      "server CPU", "store CPU", "rows"], table))
        lines.append("")
        speed = [[f"{r['selectivity'] * 100:g}%", common.fmt_s(r["pull"]),
                  f"{r['speedup_cold']:.1f}x" if r["speedup_cold"] else "",
                  f"{r['speedup_warm']:.1f}x" if r["speedup_warm"] else "",
                  f"{r['wire_share']:.4f}"] for r in part["rows"]]
        lines.append(common.md_table(["kept", "faster pull", "pushdown speed-up (cold)",
                                      "(warm)", "wire / object"], speed))
        crossover = part["crossover"]
        lines.append("")
        lines.append(f"Crossover: pulling is faster than cold pushdown from "
                     f"{crossover * 100:g}% of the rows kept." if crossover is not None else
                     "Crossover: pushdown was faster at every selectivity measured.")
        lines.append("")
    return "\n".join(lines)


def _plot(results: list[dict[str, Any]], size: int) -> Any:
    plt = common.pyplot()
    links = sorted({r["link_mbps"] for r in results})
    figure, axes = plt.subplots(1, len(links), figsize=(5 * len(links), 4), squeeze=False)
    for axis, link in zip(axes[0], links, strict=True):
        for way in dict.fromkeys(r["way"] for r in results):
            points = sorted((r["selectivity"] * 100, r["wall"].median) for r in results
                            if r["link_mbps"] == link and r["way"] == way)
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=way)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("rows kept (%)")
        axis.set_ylabel("wall time (s)")
        axis.set_title(f"{link / 1000:g} Gbit/s, {common.fmt_bytes(size)} CSV")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    return figure


if __name__ == "__main__":
    raise SystemExit(main())
