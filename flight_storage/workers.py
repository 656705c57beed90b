"""``flight-select serve --workers N``: N server processes on one host, as one fleet.

One Python process serves its endpoints' Python work (tickets, streams, batches) under one GIL;
on a host with many cores that work, not the engine's, becomes the limit (docs/benchmarks.md:
about 2.4 ms of an endpoint holds the GIL). ``--workers N`` starts N-1 more server processes
beside this one, on ports of their own, and makes the N of them a fleet (docs/storage.md): every
process reads the same ``--data``, any of them plans and serves any ticket (they share a ticket
secret), and each endpoint lists every process in rendezvous order, so the endpoints of a query
are served by different processes, on different cores, and a process that dies costs a client
one retry. The first process (the one started) is the one clients connect to; it alone runs the
S3 door. The workers stop with it.

Hand-written: the processes are ordinary ``serve`` processes; this module only writes their
fleet file and secret and starts and stops them.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_READY_S = 60.0
"""How long the first process waits for every worker to listen."""
_STOP_S = 10.0

_NOT_PASSED = {"--workers": 1, "--port": 1, "--s3-port": 1, "--cluster": 1, "--node": 1,
               "--ticket-secret-file": 1, "--metrics-port": 1}
"""``serve`` options the workers get their own values of (name -> values it takes)."""


@dataclass
class Workers:
    """The fleet of one host: its file, its secret and the worker processes."""

    folder: Path
    fleet_file: Path
    secret_file: Path
    ports: list[int]
    owns_secret: bool = True
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    metrics_ports: list[int] = field(default_factory=list)
    """Each worker's own operations port, when the first process serves one."""

    def start(self, argv: Sequence[str], host: str) -> None:
        """Start worker ``i`` (1..N-1) with the first process's options and its own port
        (and an operations port of its own when the first process serves ``--metrics-port``,
        whose ``/metrics`` gathers theirs), then wait until each listens."""
        kept = _without(argv, _NOT_PASSED)
        metrics = len(_without(argv, {"--metrics-port": 1})) < len(argv)
        self.metrics_ports = [_free_port(host) for _ in self.ports[1:]] if metrics else []
        for index, port in enumerate(self.ports[1:], start=1):
            command = [sys.executable, "-m", "flight_storage", "serve", *kept,
                       "--cluster", str(self.fleet_file), "--node", f"w{index}",
                       "--port", str(port), "--ticket-secret-file", str(self.secret_file)]
            if metrics:
                command += ["--metrics-port", str(self.metrics_ports[index - 1])]
            # the workers' logs join this process's (stderr); their "listening on" lines not
            self.processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
        deadline = time.monotonic() + _READY_S
        for process, port in zip(self.processes, self.ports[1:], strict=True):
            while not _listening(host, port):
                if process.poll() is not None:
                    raise OSError(f"worker on port {port} exited at start "
                                  f"(status {process.returncode}); see its log above")
                if time.monotonic() > deadline:
                    raise OSError(f"worker on port {port} did not listen within {_READY_S:g} s")
                time.sleep(0.1)

    def metrics_urls(self, host: str) -> list[tuple[str, str]]:
        """``(name, url)`` of each worker's ``/metrics`` (none without ``--metrics-port``)."""
        local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        shown = f"[{local}]" if ":" in local else local
        return [(f"w{index}", f"http://{shown}:{port}/metrics")
                for index, port in enumerate(self.metrics_ports, start=1)]

    def stop(self) -> None:
        """Stop every worker (SIGTERM, a bounded wait, then SIGKILL) and remove the files."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + _STOP_S
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.fleet_file.unlink(missing_ok=True)
        if self.owns_secret:
            self.secret_file.unlink(missing_ok=True)
        self.folder.rmdir()


def prepare(count: int, host: str, port: int, scheme: str, secret_file: Path | None
            ) -> Workers:
    """The fleet file and secret of ``count`` processes on ``host``: the first on ``port``
    (0: a free one), the others on free ports; ``secret_file`` shared when given."""
    folder = Path(tempfile.mkdtemp(prefix="flight-select-workers-"))
    ports = [port or _free_port(host)] + [_free_port(host) for _ in range(count - 1)]
    fleet_file = folder / "fleet.json"
    fleet_file.write_text(json.dumps({"nodes": [
        {"name": f"w{i}", "location": f"{scheme}://{host}:{p}"} for i, p in enumerate(ports)],
        # processes of one host: a worker that died is noticed within a second or two
        "peer_check_s": 2, "peer_timeout_s": 5}))
    if secret_file is not None:  # the user's: shared as it is, and left in place
        return Workers(folder, fleet_file, secret_file, ports, owns_secret=False)
    own = folder / "secret"
    own.touch(mode=0o600)
    own.write_text(secrets.token_hex(32))
    return Workers(folder, fleet_file, own, ports)


def _without(argv: Sequence[str], options: dict[str, int]) -> list[str]:
    """``argv`` without ``options`` (``--name value`` and ``--name=value`` forms)."""
    kept: list[str] = []
    skip = 0
    for item in argv:
        if skip:
            skip -= 1
            continue
        name = item.split("=", 1)[0]
        if name in options:
            skip = options[name] if "=" not in item else 0
            continue
        kept.append(item)
    return kept


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
