"""The floor of one DoGet in pyarrow's Flight server: what any Python Flight server pays.

``benchmarks.endpoint_cost`` measures what an endpoint of flight-select costs; this module
measures, on the same machine, a server that does nothing but answer: every DoGet gets one
empty batch, as a ``RecordBatchStream`` (a table handed to C++), a ``GeneratorStream`` (a
Python generator, as flight-select streams) and a ``GeneratorStream`` fed by a producer thread
through a queue (as a server that computes while it sends). The server runs in a subprocess;
its CPU is its process CPU clock, the client's this process's, over ``--calls`` sequential
DoGets per kind, the kinds in turn for ``--runs`` rounds.

    python -m benchmarks.flight_floor [--calls 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from benchmarks import common

NAME = "flight_floor"
SCHEMA = pa.schema([("a", pa.int64())])
KINDS = {
    "record_batch_stream": "RecordBatchStream of an empty table",
    "generator_stream": "GeneratorStream of one empty batch",
    "producer_thread": "GeneratorStream fed by a producer thread through a queue",
}


def _empty() -> pa.RecordBatch:
    return pa.record_batch([pa.array([], pa.int64())], schema=SCHEMA)


def _from_a_thread() -> Iterator[pa.RecordBatch]:
    handoff: queue.Queue[pa.RecordBatch | None] = queue.Queue(4)

    def produce() -> None:
        handoff.put(_empty())
        handoff.put(None)

    threading.Thread(target=produce, daemon=True).start()
    while (batch := handoff.get()) is not None:
        yield batch


class _BareServer(flight.FlightServerBase):  # type: ignore[misc]
    """Answers every ticket (its bytes name the kind) with one empty batch."""

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.FlightDataStream:
        del context
        kind = ticket.ticket.decode()
        if kind == "record_batch_stream":
            return flight.RecordBatchStream(pa.Table.from_batches([_empty()]))
        if kind == "generator_stream":
            return flight.GeneratorStream(SCHEMA, iter([_empty()]))
        return flight.GeneratorStream(SCHEMA, _from_a_thread())


def _serve() -> None:
    server = _BareServer("grpc://127.0.0.1:0")
    print(server.port, flush=True)
    server.serve()


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=2000, help="DoGets per kind and round")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)


def run(calls: int, rounds: int) -> dict[str, Any]:
    """Server and client CPU and wall per DoGet of each kind, per round (ms)."""
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.flight_floor", "--serve"],
                               stdout=subprocess.PIPE, text=True, cwd=common.ROOT)
    try:
        assert process.stdout is not None
        client = flight.connect(f"grpc://127.0.0.1:{int(process.stdout.readline())}")
        results: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for _ in range(rounds):
            for kind in KINDS:
                ticket = flight.Ticket(kind.encode())
                for _ in range(50):  # warm-up
                    client.do_get(ticket).read_all()
                server_cpu = common.process_cpu_seconds(process.pid)
                client_cpu = common.process_cpu_seconds()
                started = time.perf_counter()
                for _ in range(calls):
                    client.do_get(ticket).read_all()
                results[kind].append({
                    "server_ms": (common.process_cpu_seconds(process.pid) - server_cpu) / calls * 1e3,
                    "client_ms": (common.process_cpu_seconds() - client_cpu) / calls * 1e3,
                    "wall_ms": (time.perf_counter() - started) / calls * 1e3,
                })
        client.close()
    finally:
        process.kill()
        process.wait()
    return {"calls": calls, "rounds": rounds, "kinds": results}


def markdown(result: dict[str, Any]) -> str:
    """One row per kind: the range over the rounds of each figure."""
    def span(samples: list[dict[str, float]], key: str) -> str:
        values = [s[key] for s in samples]
        return f"{min(values):.3f}–{max(values):.3f}"

    rows = [[f"`{kind}`", KINDS[kind], span(samples, "server_ms"), span(samples, "client_ms"),
             span(samples, "wall_ms")] for kind, samples in result["kinds"].items()]
    return (
        "## The floor of a DoGet in pyarrow.flight\n\n"
        f"A Python Flight server that answers every DoGet with one empty batch, "
        f"{result['calls']} sequential DoGets per kind, {result['rounds']} rounds "
        "(`benchmarks.flight_floor`); ms per DoGet, the range over the rounds. What "
        "flight-select adds to an endpoint is measured against this (`Fixed cost per "
        "endpoint`, `Per-endpoint steps on the server`).\n\n"
        + common.md_table(["kind", "what the server answers with", "server CPU ms",
                           "client CPU ms", "wall ms"], rows) + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = common.bench_args(__doc__.splitlines()[0], argv, _options)
    if args.serve:
        _serve()
        return 0
    result = run(args.calls, args.runs)
    common.write_results(args.out, NAME, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
