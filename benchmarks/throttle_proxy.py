"""A TCP proxy that shapes traffic like a network link: what ``benchmarks.network`` puts between
a client and the server, or between a client and the object store.

* **Link rate**: one token bucket shared by every connection and both directions (bytes per
  second; a full-duplex link would have one per direction: the answers here flow one way, so
  one bucket is the link the answer crosses).
* **Per-stream cap**: each connection has a bucket of its own as well (an S3 GET's median
  throughput, about 60 MB/s, is such a cap: more streams, more bandwidth).
* **Latency**: every chunk is held back ``latency_ms`` before it is forwarded (one way).

It counts the bytes it forwarded each way. Run as a process of its own, so its CPU is not the
client's::

    python -m benchmarks.throttle_proxy --target 127.0.0.1:8815 --link-mbps 1000 \\
        --stream-mbps 480 --latency-ms 0.5

It prints ``listening on PORT`` once ready; each line ``stats`` on its standard input is
answered with one JSON line of the byte counts so far, ``reset`` zeroes them. Hand-written: a
token-bucket shaper is a few lines over asyncio's streams, and no library on PyPI shapes a TCP
stream in process (tc/netem need root and a network namespace per run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

CHUNK = 256 << 10
"""Bytes read per forward step: big enough that a loopback proxy is not the bottleneck at
1 Gbit/s, small enough that the bucket shapes smoothly."""


@dataclass
class TokenBucket:
    """``rate`` bytes per second, bursts up to ``burst`` bytes (``rate`` 0: unlimited)."""

    rate: float
    burst: float
    tokens: float = 0.0
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def delay(self, nbytes: int) -> float:
        """Take ``nbytes``; the seconds to wait before sending them (0 if none)."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= nbytes
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


@dataclass
class Shape:
    link_bytes_s: float
    stream_bytes_s: float
    latency_s: float


@dataclass
class Counts:
    to_target: int = 0
    from_target: int = 0
    connections: int = 0


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: TokenBucket,
                stream: TokenBucket, shape: Shape, counts: Counts, direction: str) -> None:
    """Forward ``reader`` to ``writer`` at the buckets' rates, each chunk delivered
    ``latency_s`` after it was read (a pipe, not a stop-and-wait: chunks in flight overlap)."""
    in_flight: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=64)

    async def deliver() -> None:
        while True:
            due, data = await in_flight.get()
            if not data:
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
            setattr(counts, direction, getattr(counts, direction) + len(data))

    delivering = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            wait = max(link.delay(len(data)), stream.delay(len(data)))
            if wait > 0:
                await asyncio.sleep(wait)
            await in_flight.put((time.monotonic() + shape.latency_s, data))
        await in_flight.put((0.0, b""))
        await delivering
    except (ConnectionError, asyncio.IncompleteReadError):
        delivering.cancel()
    finally:
        with contextlib.suppress(RuntimeError):  # the loop is closing
            writer.close()


async def _serve(target: tuple[str, int], shape: Shape, counts: Counts) -> asyncio.Server:
    link = TokenBucket(shape.link_bytes_s, max(shape.link_bytes_s * 0.01, CHUNK))

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        counts.connections += 1
        try:
            target_r, target_w = await asyncio.open_connection(*target)
        except OSError:
            client_w.close()
            return
        stream_in = TokenBucket(shape.stream_bytes_s, max(shape.stream_bytes_s * 0.01, CHUNK))
        stream_out = TokenBucket(shape.stream_bytes_s, max(shape.stream_bytes_s * 0.01, CHUNK))
        await asyncio.gather(
            _pump(client_r, target_w, link, stream_in, shape, counts, "to_target"),
            _pump(target_r, client_w, link, stream_out, shape, counts, "from_target"))

    return await asyncio.start_server(handle, "127.0.0.1", 0, limit=CHUNK)


def _control(counts: Counts) -> None:
    """Answer ``stats`` and ``reset`` lines on stdin (a thread: stdin blocks)."""
    for line in sys.stdin:
        command = line.strip()
        if command == "reset":
            counts.to_target = counts.from_target = counts.connections = 0
        print(json.dumps({"to_target": counts.to_target, "from_target": counts.from_target,
                          "connections": counts.connections}), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--link-mbps", type=float, default=0,
                        help="link rate in megabits per second (0: unlimited)")
    parser.add_argument("--stream-mbps", type=float, default=0,
                        help="cap of each connection in megabits per second (0: none)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="one-way added latency")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    shape = Shape(args.link_mbps * 1e6 / 8, args.stream_mbps * 1e6 / 8, args.latency_ms / 1e3)
    counts = Counts()

    async def run() -> None:
        server = await _serve((host, int(port)), shape, counts)
        print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
        threading.Thread(target=_control, args=(counts,), daemon=True).start()
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
