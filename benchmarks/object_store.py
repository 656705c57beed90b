"""Benchmark: buckets in an object store (SeaweedFS on this machine) against the same objects
in a folder, planning's share of the bytes, and a fleet of 1, 2 and 3 nodes over the store.

* **Store / folder.** The six peer queries over the headerless peer CSV, and a scan and an
  aggregate over the same rows as Parquet, run end to end (GetFlightInfo, every endpoint read
  in parallel) on one server whose bucket is a folder and on servers whose bucket is the
  store's (``--data s3://bench``): one reading the store every time, one keeping local copies
  (``--store-cache-mb``, docs/storage.md). All warm (a first untimed run: the per-version
  surveys are cached, the copies made). The ratio is folder time / store time (1.0: the store
  costs nothing; the target is >= 0.8 on the scan-heavy queries).
* **Planning reads.** GetFlightInfo of the 1% projection on a freshly uploaded CSV, through a
  counting proxy in front of the store: the bytes the store sent for planning, against the
  object's size (target <= 1% of a 1 GB object; the quick run's object is smaller).
* **Fleet.** 1, 2 and 3 nodes (127.0.0.2-4) over the store, sharing this machine's cores:
  the answers must be equal; the times and each node's cores are reported.

    python -m benchmarks.object_store --quick
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from benchmarks import common
from benchmarks.queries import PEER_QUERIES
from tests.s3_proxy import S3Proxy
from tests.seaweedfs import SeaweedFS, start_seaweedfs

log = logging.getLogger("benchmarks.object_store")

NAME = "object_store"
BUCKET = "bench"
TARGET_RATIO = 0.8
TARGET_PLANNING_SHARE = 0.01
ROWS = {"quick": 600_000, "full": 14_500_000}  # about 40 MB and 1.0 GB of peer CSV
FLEET_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
PARQUET_QUERIES = {
    "parquet_scan": f'SELECT * FROM "{BUCKET}"."peer.parquet" WHERE c3 = 0',
    "parquet_aggregate": f'SELECT count(*), sum(c4), max(c2) FROM "{BUCKET}"."peer.parquet" '
                         "WHERE c2 > 100",
}
SCAN_HEAVY = {"peer_count", "peer_projection_1pct", "peer_4_aggregates", "peer_like",
              "parquet_scan", "parquet_aggregate"}
"""Queries whose time is reading the object (the rest spend it in functions)."""


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=None, help="rows of the peer CSV")


def _queries() -> dict[str, str]:
    statements = {q.name: q.s3select.replace("FROM s3object", f'FROM "{BUCKET}"."peer.csv"')
                  for q in PEER_QUERIES}
    return {**statements, **PARQUET_QUERIES}


def _parquet(csv: Path) -> Path:
    path = csv.with_suffix(".parquet")
    if not path.exists():
        types = {f"f{i}": t for i, t in enumerate(
            (pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.string(), pa.string()))}
        reader = pacsv.open_csv(csv, read_options=pacsv.ReadOptions(
            column_names=list(types)), convert_options=pacsv.ConvertOptions(column_types=types))
        names = [f"c{i + 1}" for i in range(6)]
        with pq.ParquetWriter(path, pa.schema([(n, t) for n, t in zip(
                names, types.values(), strict=True)])) as writer:
            for batch in reader:
                writer.write_batch(batch.rename_columns(names), row_group_size=1 << 20)
    return path


def _upload(store: SeaweedFS, objects: dict[str, Path]) -> None:
    from boto3.s3.transfer import TransferConfig

    client = store.client()
    store.new_bucket(BUCKET)
    for key, path in objects.items():
        client.upload_file(str(path), BUCKET, key,
                           Config=TransferConfig(multipart_threshold=1 << 40))


def _measured(group: common.ServerGroup, sql: str, runs: int, store_pid: int
              ) -> tuple[common.Stat, Any, float, float]:
    """Time ``sql`` on ``group``; also the CPU-seconds per query of its servers and of the
    store's process (every call, the warm-up too)."""
    servers = common.process_cpu_seconds_of(group.pids)
    store = common.process_cpu_seconds(store_pid)
    stat, result = common.measure(lambda: group.query(sql), runs)
    calls = runs + 1
    return (stat, result, (common.process_cpu_seconds_of(group.pids) - servers) / calls,
            (common.process_cpu_seconds(store_pid) - store) / calls)


def _compare(folder: common.ServerGroup, remote: common.ServerGroup,
             copies: common.ServerGroup, queries: dict[str, str], runs: int, store_pid: int
             ) -> list[dict[str, Any]]:
    rows = []
    for name, sql in queries.items():
        log.info("store vs folder: %s", name)
        copies.query(sql)  # the first read asks for the copy, made in the background
        time.sleep(1.0)
        folder_stat, folder_result, folder_cpu, _ = _measured(folder, sql, runs, store_pid)
        remote_stat, remote_result, remote_cpu, store_cpu = _measured(remote, sql, runs,
                                                                      store_pid)
        copies_stat, copies_result, copies_cpu, copies_store_cpu = _measured(copies, sql, runs,
                                                                             store_pid)
        for result in (remote_result, copies_result):
            if (folder_result.rows, folder_result.nbytes) != (result.rows, result.nbytes):
                raise AssertionError(f"{name}: the store answered {result}, the folder "
                                     f"{folder_result}")
        rows.append({"query": name, "folder": folder_stat, "store": remote_stat,
                     "ratio": folder_stat.median / remote_stat.median,
                     "store_copies": copies_stat,
                     "ratio_copies": folder_stat.median / copies_stat.median,
                     "cpu": {"folder_server": folder_cpu, "store_server": remote_cpu,
                             "store": store_cpu, "copies_server": copies_cpu,
                             "copies_store": copies_store_cpu},
                     "scan_heavy": name in SCAN_HEAVY, "rows": remote_result.rows,
                     "endpoints": remote_result.endpoints, "reader": remote_result.reader})
    return rows


def _planning_bytes(store: SeaweedFS, csv: Path) -> dict[str, Any]:
    """GetFlightInfo of a query on a freshly uploaded copy, through a counting proxy."""
    import pyarrow.flight as flight

    from flight_storage import protocol
    from flight_storage.protocol import pb

    key = "fresh/peer.csv"
    store.client().upload_file(str(csv), BUCKET, key)
    proxy = S3Proxy(store.endpoint)
    server = common.start_server(f"s3://{BUCKET}",
                                 env={**store.env(), "AWS_ENDPOINT_URL_S3": proxy.endpoint})
    try:
        sql = f'SELECT _1, _4, _6 FROM "{BUCKET}"."{key}" WHERE _3 = \'0\''
        descriptor = flight.FlightDescriptor.for_command(
            protocol.pack_any(pb.CommandStatementQuery(query=sql)))
        proxy.reset()
        info = flight.connect(server.location).get_flight_info(descriptor)
        planned = proxy.counters.body_bytes
        requests = proxy.counters.requests
    finally:
        server.stop()
        proxy.close()
    size = csv.stat().st_size
    return {"object_bytes": size, "planning_bytes": planned, "planning_requests": requests,
            "share": planned / size, "endpoints": len(info.endpoints)}


def _fleet(store: SeaweedFS, sizes: Sequence[int], runs: int) -> list[dict[str, Any]]:
    secret = common.WORK / f".fleet-secret-{secrets.token_hex(4)}"
    secret.write_text(secrets.token_hex(32))
    sql = (f'SELECT _3, count(*) AS n FROM "{BUCKET}"."peer.csv" WHERE _2 > \'5\' '
           "GROUP BY _3 ORDER BY _3")
    scan = f'SELECT _1, _4 FROM "{BUCKET}"."peer.csv" WHERE _3 = \'0\''
    results: list[dict[str, Any]] = []
    answers: list[Any] = []
    try:
        for n in sizes:
            nodes = {f"n{i}": f"grpc://{a}:{common.free_port(a)}"
                     for i, a in enumerate(FLEET_ADDRESSES[:n])}
            fleet_file = common.WORK / f"fleet-{n}.json"
            fleet_file.write_text(json.dumps({"nodes": [
                {"name": k, "location": v} for k, v in nodes.items()]}))
            servers = []
            try:
                for name, location in nodes.items():
                    servers.append(common.start_server(
                        f"s3://{BUCKET}", "--cluster", str(fleet_file), "--node", name,
                        "--port", location.rsplit(":", 1)[1], secret_file=secret,
                        env=store.env()))
                from compute_client.flight import ConnectionOptions, FlightSelectClient

                with FlightSelectClient(ConnectionOptions(servers[0].location)) as client:
                    grouped = common.measure(lambda: client.read_all(sql), runs)
                    scanned = common.measure(lambda: client.read_all(scan), runs)
                    cores = client.execute(scan).about.cores
                answers.append((grouped[1].to_pylist(), scanned[1].num_rows))
                results.append({"nodes": n, "grouped": grouped[0], "scan_1pct": scanned[0],
                                "rows": scanned[1].num_rows, "cores_per_node": cores})
            finally:
                for server in servers:
                    server.stop()
    finally:
        secret.unlink(missing_ok=True)
    if any(a != answers[0] for a in answers):
        raise AssertionError("fleets of different sizes answered differently")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    mode = "quick" if args.quick else "full"
    rows = args.rows or ROWS[mode]
    csv = common.peer_csv(rows)
    parquet = _parquet(csv)
    folder_root = common.data_root(NAME, {f"{BUCKET}/peer.csv": csv,
                                          f"{BUCKET}/peer.parquet": parquet})
    store = start_seaweedfs(common.WORK / "seaweedfs" / secrets.token_hex(4))
    try:
        log.info("uploading %s and %s", common.fmt_bytes(csv.stat().st_size),
                 common.fmt_bytes(parquet.stat().st_size))
        _upload(store, {"peer.csv": csv, "peer.parquet": parquet})
        copies_dir = common.WORK / "seaweedfs" / "copies"
        with common.ServerGroup(folder_root) as folder, \
                common.ServerGroup(f"s3://{BUCKET}", env=store.env()) as remote, \
                common.ServerGroup(f"s3://{BUCKET}", 1, "--store-cache-mb", "4096",
                                   "--store-cache-dir", str(copies_dir),
                                   env=store.env()) as copies:
            compared = _compare(folder, remote, copies, _queries(), args.runs,
                                store.process.pid)
        planning = _planning_bytes(store, csv)
        fleet = _fleet(store, (1, 2, 3), args.runs)
    finally:
        store.stop(wait_s=5)
        if not args.keep_data:
            common.remove_work(common.WORK / "seaweedfs", folder_root)
    markdown = _markdown(mode, csv, parquet, compared, planning, fleet)
    common.write_results(args.out, NAME, {"mode": mode, "rows": rows, "compared": compared,
                                          "planning": planning, "fleet": fleet}, markdown)
    print(markdown)
    return 0


def _markdown(mode: str, csv: Path, parquet: Path, compared: list[dict[str, Any]],
              planning: dict[str, Any], fleet: list[dict[str, Any]]) -> str:
    heavy = [r for r in compared if r["scan_heavy"]]
    met = sum(r["ratio"] >= TARGET_RATIO for r in heavy)
    met_copies = sum(r["ratio_copies"] >= TARGET_RATIO for r in heavy)
    lines = [
        f"## Object store (SeaweedFS) vs folder, {mode} run",
        "",
        f"Peer CSV {common.fmt_bytes(csv.stat().st_size)}, the same rows as Parquet "
        f"{common.fmt_bytes(parquet.stat().st_size)}; one server per side on this machine, "
        f"the store on the same machine. Ratio = folder time / store time (target >= "
        f"{TARGET_RATIO} on scan-heavy queries: reading the store every time {met} of "
        f"{len(heavy)} met, with local copies (`--store-cache-mb`) {met_copies} of "
        f"{len(heavy)}).",
        "",
        common.md_table(
            ["query", "folder", "store", "ratio", "store, local copies", "ratio",
             "scan-heavy", "rows", "endpoints"],
            [[r["query"], r["folder"].cell(), r["store"].cell(), f"{r['ratio']:.2f}",
              r["store_copies"].cell(), f"{r['ratio_copies']:.2f}",
              "yes" if r["scan_heavy"] else "", r["rows"], r["endpoints"]]
             for r in compared]),
        "",
        "CPU-seconds per query (process CPU clocks): the query server, and SeaweedFS's "
        "`weed` process (master, volume server, filer and S3 gateway in one). On more cores "
        "the store's work runs beside the server's instead of taking turns with it; where "
        "the store is another machine it leaves this one altogether.",
        "",
        common.md_table(
            ["query", "folder: server", "store: server", "store: weed", "copies: server",
             "copies: weed"],
            [[r["query"], *(common.fmt_cpu(r["cpu"][k]) for k in (
                "folder_server", "store_server", "store", "copies_server", "copies_store"))]
             for r in compared]),
        "",
        f"Planning the 1% projection on a freshly uploaded "
        f"{common.fmt_bytes(planning['object_bytes'])} CSV fetched "
        f"{common.fmt_bytes(planning['planning_bytes'])} in {planning['planning_requests']} "
        f"requests: {planning['share']:.3%} of the object (target <= "
        f"{TARGET_PLANNING_SHARE:.0%} of a 1 GB object), {planning['endpoints']} endpoints.",
        "",
        "Fleets over the store (all nodes on this machine's cores; answers equal):",
        "",
        common.md_table(["nodes", "GROUP BY", "1% scan", "rows", "cores per node"],
                        [[f["nodes"], f["grouped"].cell(), f["scan_1pct"].cell(), f["rows"],
                          f["cores_per_node"]] for f in fleet]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
