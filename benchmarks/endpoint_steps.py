"""Where one endpoint's server CPU goes, step by step (the per-endpoint path as it is now).

``benchmarks.endpoint_cost`` measures what an endpoint costs in all; a sampling profiler on
the server (``benchmarks.profile_server``) cannot split it well, because DataFusion's work
runs in native code with the GIL released and a thread waiting on a lock counts as busy to
py-spy. This module builds the real server in this process (``StorageServer`` over the
endpoint-cost object, 1 MiB ranges: 64 endpoints), makes its FlightInfo, and for every ticket
runs the steps that a DoGet runs, one at a time, each timed on this process's CPU clock
(every thread, DataFusion's included) and on the wall clock:

| step | what the server does per DoGet |
|---|---|
| ticket | unpack the Flight SQL ticket, decode and verify ours (HMAC, JSON) |
| access | ``check_access``: the bucket's store |
| plan ticket | ``rpc/tables/bucket._plan_ticket``: table resolved in the catalog, object version, the bucket configuration, the plan from the engine's cache |
| planning thread | ``run_planning``: a compute slot and a thread to run the planning in, polled |
| schema | ``arrow_schema``: the schema the stream announces |
| engine | ``execute_arrow`` of the partition: the cached physical plan looked up (one per object version and partition count), ``ctx.execute(plan, i)``, 1 MiB of CSV parsed and filtered (the engine's work), batches converted |
| version check | ``_check_version``: the object's version read again at the end |
| stream thread | a producer thread started and joined (``QueryStream``) |

It reaches into the server's private steps, so it follows the per-endpoint path of the commit
it runs on; when that path changes, this module changes with it.

    python -m benchmarks.endpoint_steps [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common, endpoint_cost

log = logging.getLogger("benchmarks.endpoint_steps")

NAME = "endpoint_steps"


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=5,
                        help="times every endpoint's steps are run (after one warm-up round)")


class _Steps:
    """CPU and wall seconds per step, summed over every endpoint run."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def run(self, name: str, work: Callable[[], Any]) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        result = work()
        self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
        return result


def _one_endpoint(server: Any, call: Any, handle: bytes, steps: _Steps) -> int:
    """The DoGet steps of one ticket; the rows it read."""
    from flight_storage import protocol
    from flight_storage.request.tables import object_version
    from flight_storage.rpc import partition_streams
    from flight_storage.rpc.tables import bucket

    ticket = steps.run("ticket", lambda: protocol.decode_ticket(
        protocol.unpack_any(handle)[1].statement_handle, server.secret,
        max_age=server.config.ticket_max_age_s))
    steps.run("access", lambda: server.check_access(call, ticket.bucket))
    stop = threading.Event()
    _source, plan, objects = steps.run("plan ticket",
                                       lambda: bucket._plan_ticket(server, call, ticket, stop))
    steps.run("planning thread", lambda: server.streams.run_planning(lambda _stop: None,
                                                                     call.is_cancelled))
    steps.run("schema", lambda: plan.arrow_schema)
    rows = steps.run("engine", lambda: sum(
        b.num_rows for b in server.engine.execute_arrow(plan, [ticket.partition])))
    version = object_version(objects)
    steps.run("version check", lambda: partition_streams._check_version(objects, version))
    thread = threading.Thread(target=lambda: None)
    steps.run("stream thread", lambda: (thread.start(), thread.join()))
    return int(rows)


def run(rounds: int) -> dict[str, Any]:
    """The steps of the 64 endpoints, ``rounds`` times after a warm-up; ms per endpoint."""
    from pyarrow import flight

    from flight_storage.execution.plan_types import EngineConfig
    from flight_storage.rpc.config import ServerConfig
    from flight_storage.rpc.middleware import CallContext
    from flight_storage.rpc.server import StorageServer

    path = endpoint_cost._object()
    root = common.data_root(NAME, {f"{endpoint_cost.BUCKET}/{endpoint_cost.KEY}": path})
    statement = endpoint_cost.QUERY.replace(
        " FROM s3object", f' FROM "{endpoint_cost.BUCKET}"."{endpoint_cost.KEY}"', 1)
    server = StorageServer(ServerConfig(Path(root), port=0,
                                        engine=EngineConfig(partition_bytes=1 << 20)))
    try:
        call = CallContext(user=None, flavor=None, peer="benchmark")
        descriptor = flight.FlightDescriptor.for_command(b"")
        info = server._statement_info(call, descriptor, statement, call.statement_flavor,
                                      None, {})
        handles = [e.ticket.ticket for e in info.endpoints]
        for handle in handles:  # warm-up: caches as a running server has them
            _one_endpoint(server, call, handle, _Steps())
        steps = _Steps()
        rows = 0
        for _ in range(rounds):
            for handle in handles:
                rows += _one_endpoint(server, call, handle, steps)
    finally:
        server.shutdown()
        common.remove_work(common.WORK / "roots" / NAME)
    done = rounds * len(handles)
    return {"endpoints": len(handles), "rounds": rounds, "rows": rows,
            "cpu_ms": {k: v / done * 1e3 for k, v in steps.cpu.items()},
            "wall_ms": {k: v / done * 1e3 for k, v in steps.wall.items()}}


def markdown(result: dict[str, Any], server_ms: float | None = None) -> str:
    """The table of steps (ms of CPU and of wall per endpoint)."""
    cpu, wall = result["cpu_ms"], result["wall_ms"]
    names = list(cpu)
    total = sum(cpu[k] for k in names)
    rows = [[f"`{k}`", f"{cpu[k]:.3f}", f"{wall[k]:.3f}", f"{cpu[k] / total:.0%}"] for k in names]
    rows.append(["**sum of the steps**", f"**{total:.3f}**",
                 f"**{sum(wall[k] for k in names):.3f}**", "100%"])
    rest = ""
    if server_ms is not None:
        rest = (f" The whole DoGet costs the server {server_ms:.2f} ms of CPU per endpoint "
                "over Flight (the endpoint-cost table, 64 endpoints): what the steps do not "
                f"cover, {server_ms - total:.2f} ms, is gRPC, the GeneratorStream and the "
                "stream's threads and queue.")
    return (
        f"## Per-endpoint steps on the server\n\n{result['endpoints']} endpoints of the "
        f"endpoint-cost query, {result['rounds']} rounds after a warm-up, each DoGet step run "
        "in turn in this process on the real server objects (`benchmarks.endpoint_steps`); ms "
        f"per endpoint.{rest}\n\n"
        + common.md_table(["step", "CPU ms", "wall ms", "share of the steps' CPU"], rows)
        + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    result = run(args.rounds)
    common.write_results(args.out, NAME, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
