"""What reading an endpoint away from the node that planned it costs, and what failover costs.

Python data sources cannot give Spark preferred locations, so an executor reads its partition
from whichever node the endpoint names, wherever the task landed. This benchmark reads every
endpoint of a query through :class:`compute_client.flight.FlightSelectClient` in three ways:

- ``planning node``: the endpoints from the node that planned them (what locality would give);
- ``other node``: the same tickets from a replica on another loopback address (127.0.0.3),
  what a task on a non-local executor does;
- ``dead first location``: the endpoints list a refused location before the replica (the
  failover path's cost per endpoint).

On one machine the "network" is loopback, so the first two differ only by noise; the figure
that carries over to real machines is the Arrow bytes each row costs on the wire (see
docs/cluster.md, "Clients").

    python -m benchmarks.remote_read --quick
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient

log = logging.getLogger("benchmarks.remote_read")

NAME = "remote_read"
ROWS = {"quick": 600_000, "full": 6_000_000}
QUERIES = {
    "all columns": 'SELECT * FROM "b"."rows.csv"',
    "one column, 1/7 of rows": 'SELECT _1 FROM "b"."rows.csv" WHERE _2 = \'3\'',
}


def _data(rows: int) -> Path:
    root = common.WORK / NAME / f"{rows}"
    path = root / "b" / "rows.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for start in range(0, rows, 100_000):
                out.write("".join(f"{i},{i % 7},payload payload payload {i:010d}\n"
                                  for i in range(start, min(rows, start + 100_000))))
    return root


def _refused() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"grpc://127.0.0.1:{probe.getsockname()[1]}"


def _reader(planner: str, sql: str, locations: Callable[[Endpoint], tuple[str, ...]]
            ) -> Callable[[], tuple[int, int]]:
    """A timed read of every endpoint of ``sql``: ``(rows, Arrow bytes)``."""
    with FlightSelectClient(ConnectionOptions(planner)) as client:
        endpoints = client.execute(sql).endpoints

    def read() -> tuple[int, int]:
        rows = size = 0
        with FlightSelectClient(ConnectionOptions(planner)) as client:
            for endpoint in endpoints:
                for batch in client.read(Endpoint(endpoint.ticket, locations(endpoint))):
                    rows += batch.num_rows
                    size += batch.nbytes
        return rows, size

    return read


def main(argv: Sequence[str] | None = None) -> None:
    """Run the cases and write ``benchmarks/results/remote_read.{json,md}``."""
    args = common.bench_args(__doc__.splitlines()[0] if __doc__ else NAME, argv)
    rows = ROWS["quick" if args.quick else "full"]
    root = _data(rows)
    secret = common.WORK / NAME / "ticket.key"
    secret.write_text("shared by both nodes")
    planning = common.start_server(root, "--host", "127.0.0.2", secret_file=secret)
    other = common.start_server(root, "--host", "127.0.0.3", secret_file=secret)
    dead = _refused()
    cases: dict[str, Callable[[Endpoint], tuple[str, ...]]] = {
        "planning node": lambda _e: (planning.location,),
        "other node": lambda _e: (other.location,),
        "dead first location": lambda _e: (dead, other.location),
    }
    results: list[dict[str, Any]] = []
    try:
        for query, sql in QUERIES.items():
            for case, locations in cases.items():
                stat, (got_rows, got_bytes) = common.measure(
                    _reader(planning.location, sql, locations), args.runs)
                log.info("%s / %s: %s", query, case, stat.cell())
                results.append({"query": query, "case": case, "time": stat, "rows": got_rows,
                                "arrow_bytes": got_bytes})
    finally:
        planning.stop()
        other.stop()
    table = common.md_table(
        ["query", "read from", "time", "rows/s", "Arrow MB/s", "Arrow bytes/row"],
        [(r["query"], r["case"], r["time"].cell(), f"{r['rows'] / r['time'].median:,.0f}",
          f"{r['arrow_bytes'] / r['time'].median / 1e6:,.0f}",
          f"{r['arrow_bytes'] / max(1, r['rows']):.1f}") for r in results])
    markdown = (f"# Reading endpoints away from the planning node ({rows:,} rows, "
                f"{(root / 'b' / 'rows.csv').stat().st_size / 1e6:.0f} MB CSV)\n\n{table}\n")
    common.write_results(args.out, NAME, {"rows": rows, "results": results}, markdown)
    if not args.keep_data:
        common.remove_work(common.WORK / NAME)


if __name__ == "__main__":
    main()
