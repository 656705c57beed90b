"""The fixed cost of an endpoint: one 0-row query over 1, 4, 16 and 64 endpoints.

The object is a headerless CSV of just under 64 MiB (the peer file's records) and the query
keeps no row (``_3`` holds 0-99), so every endpoint costs its fixed work plus the CSV parse of
its byte range, and the parse in all is the same whatever the count. The counts come from the
server's own rules: ``--partition-mb 1, 4, 16`` cut the object into 64, 16 and 4 ranges, and the
single-endpoint header (``x-flight-select-endpoints: single``) gives one endpoint for the whole
object. Each count is read by our Python client and by the ADBC driver (native, no GIL), and
the same SQL runs in process on DataFusion cut into the same number of partitions, so

    overhead per endpoint = (server CPU + client CPU - in-process CPU) / endpoints

is what serving adds per endpoint beyond the engine's own work, and the CPU of the 64-endpoint
run less the 1-endpoint run, over 63, is the marginal cost of one more endpoint. CPU-seconds do
not depend on the cores, so a 2-core machine measures what a 64-core one would serialise.

Run on its own with ``python -m benchmarks.server_efficiency --parts endpoints``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common
from flight_storage.protocol import ENDPOINTS_HEADER
from select_dialect import translate

log = logging.getLogger("benchmarks.endpoint_cost")

NAME = "endpoint_cost"
BUCKET = "bench"
KEY = "peer64.csv"
ROWS = 1_108_000
"""Peer records in the object: 63.x MiB, so 1 MiB ranges make exactly 64 endpoints."""
QUERY = "SELECT _1 FROM s3object WHERE _3 = 'none'"
"""Keeps no row: the answer is one empty stream per endpoint."""
COUNTS: tuple[tuple[int, int | None], ...] = ((1, None), (4, 16), (16, 4), (64, 1))
"""(endpoints wanted, the server's --partition-mb; None: one endpoint by the header)."""
MIN_RUNS = 6
"""Timed runs per count at least (the small counts take a tenth of a second)."""
TARGET_MS = 1.0
"""Target: fixed cost per endpoint, server + client CPU, in ms."""


def _object() -> Path:
    path = common.peer_csv(ROWS)
    size = path.stat().st_size
    if not (63 << 20) < size <= (64 << 20):
        raise RuntimeError(f"{path} is {size} bytes; the counts need 63-64 MiB")
    return path


def _in_process(path: Path, partitions: int) -> Callable[[], Any]:
    """The same SQL on DataFusion's CSV reader, the file cut into ``partitions`` ranges."""
    from datafusion import SessionConfig

    config = (SessionConfig().with_target_partitions(partitions)
              .with_repartition_file_scans(partitions > 1)
              .with_repartition_file_min_size(0))
    ctx = common.datafusion_csv_context(path, 6, has_header=False, config=config)
    sql = translate(QUERY, input_format="csv").sql
    shown = ctx.sql(sql).execution_plan()
    if shown.partition_count != partitions:
        raise RuntimeError(f"DataFusion made {shown.partition_count} partitions, not {partitions}")
    return lambda: ctx.sql(sql).collect()


def run(runs: int) -> list[dict[str, Any]]:
    """Every count, through our client, through ADBC and in process."""
    path = _object()
    root = common.data_root(NAME, {f"{BUCKET}/{KEY}": path})
    statement = QUERY.replace(" FROM s3object", f' FROM "{BUCKET}"."{KEY}"', 1)
    rows = []
    for wanted, partition_mb in COUNTS:
        extra = ["--partition-mb", str(partition_mb)] if partition_mb else []
        headers = {ENDPOINTS_HEADER: "single"} if partition_mb is None else {}
        with common.ServerGroup(root, 1, *extra, sample_memory=False, headers=headers) as servers, \
                common.AdbcReader(servers.location, headers) as adbc:
            endpoints = servers.query(statement).endpoints
            measured = common.measure_rounds(
                {"ours": lambda: servers.query(statement), "adbc": lambda: adbc.query(statement),
                 "in_process": _in_process(path, endpoints)},
                runs, {"ours": servers.pids, "adbc": servers.pids})
        (ours, ours_result), (native, native_result) = measured["ours"], measured["adbc"]
        local = measured["in_process"][0]
        row = {"wanted": wanted, "partition_mb": partition_mb, "endpoints": endpoints,
               "adbc_endpoints": native_result.endpoints,
               "rows": ours_result.rows + native_result.rows,
               "ours": ours, "adbc": native, "in_process": local}
        row.update(_per_endpoint(row))
        log.info("%2d endpoints: server %s + client %s (ours), server %s + client %s (ADBC), "
                 "in process %s; overhead per endpoint %.2f ms (ours), %.2f ms (ADBC)",
                 endpoints, *(common.fmt_cpu(x) for x in (
                     _mean_or_0(ours.server_cpu), _mean(ours.cpu),
                     _mean_or_0(native.server_cpu), _mean(native.cpu), _mean(local.cpu))),
                 row["overhead_ms"], row["adbc_overhead_ms"])
        rows.append(row)
    _marginal(rows)
    common.remove_work(common.WORK / "roots" / NAME)
    return rows


def _cpu(timed: common.Timed) -> float:
    """Mean CPU-seconds per run, server and client together."""
    server = timed.server_cpu
    return _mean(timed.cpu) + (_mean(server) if server is not None else 0.0)


def _mean(stat: common.Stat) -> float:
    return sum(stat.samples) / len(stat.samples)


def _mean_or_0(stat: common.Stat | None) -> float:
    return _mean(stat) if stat is not None else 0.0


def _per_endpoint(row: dict[str, Any]) -> dict[str, float]:
    n = row["endpoints"]
    engine = _mean(row["in_process"].cpu)
    out = {}
    for prefix, key in (("", "ours"), ("adbc_", "adbc")):
        timed = row[key]
        assert timed.server_cpu is not None
        out[f"{prefix}server_ms"] = _mean(timed.server_cpu) / n * 1e3
        out[f"{prefix}client_ms"] = _mean(timed.cpu) / n * 1e3
        out[f"{prefix}overhead_ms"] = (_cpu(timed) - engine) / n * 1e3
    return out


def _marginal(rows: list[dict[str, Any]]) -> None:
    """Add each row's CPU per endpoint beyond the one-endpoint run's, server + client."""
    base = next((r for r in rows if r["endpoints"] == 1), None)
    for row in rows:
        for prefix, key in (("", "ours"), ("adbc_", "adbc")):
            extra = row["endpoints"] - 1
            row[f"{prefix}marginal_ms"] = (
                (_cpu(row[key]) - _cpu(base[key])) / extra * 1e3 if base and extra else None)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The section of the server-efficiency report."""
    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    table = common.md_table(
        ["endpoints (ADBC)", "server CPU / query, ours", "client CPU, ours",
         "server CPU, ADBC", "client CPU, ADBC", "in-process CPU (same partitions)",
         "per endpoint ours: server / client / overhead / marginal (ms)",
         "per endpoint ADBC: server / client / overhead / marginal (ms)"],
        [[f"{r['endpoints']} ({r['adbc_endpoints']})",
          common.fmt_cpu(_mean(r["ours"].server_cpu)), common.fmt_cpu(_mean(r["ours"].cpu)),
          common.fmt_cpu(_mean(r["adbc"].server_cpu)), common.fmt_cpu(_mean(r["adbc"].cpu)),
          common.fmt_cpu(_mean(r["in_process"].cpu)),
          " / ".join(ms(r[k]) for k in ("server_ms", "client_ms", "overhead_ms",
                                        "marginal_ms")),
          " / ".join(ms(r[k]) for k in ("adbc_server_ms", "adbc_client_ms", "adbc_overhead_ms",
                                        "adbc_marginal_ms"))]
         for r in rows])
    most = max(rows, key=lambda r: r["endpoints"])
    verdict = ""
    if most["endpoints"] > 1:  # the most endpoints: the least noise per endpoint
        met = most["overhead_ms"] <= TARGET_MS
        verdict = (f" At {most['endpoints']} endpoints: {most['overhead_ms']:.2f} ms of "
                   f"overhead per endpoint through our client, {most['adbc_overhead_ms']:.2f} "
                   f"ms through ADBC (target ≤ {TARGET_MS:g} ms of CPU, server + client: "
                   f"{'met' if met else '**missed**'}).")
    return (
        "### Fixed cost per endpoint\n\n"
        f"`{QUERY}` (no row passes) over a {ROWS:,}-row headerless CSV of just under 64 MiB, "
        "cut by the server into 1, 4, 16 and 64 endpoints (single-endpoint header, "
        "`--partition-mb` 16, 4, 1). CPU-seconds are means per query (server: the server "
        "process's CPU clock; client: this process's); in process is DataFusion cut into as "
        "many partitions. Per endpoint: server and client CPU over the endpoints; overhead = "
        "(server + client − in-process) / endpoints; marginal = the extra server + client CPU "
        f"over the one-endpoint run, per extra endpoint.{verdict}\n\n{table}\n"
    )
