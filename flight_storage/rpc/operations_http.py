"""The operations port (``serve --metrics-port``): Prometheus metrics and health probes over HTTP.

| path | answers |
|---|---|
| ``/metrics`` | ``prometheus_client``'s text exposition of ``flight_storage.telemetry`` |
| ``/healthz`` | 200 ``ok`` while the process answers (liveness) |
| ``/readyz`` | 200 ``ready`` when the server can plan and read: not draining, and its buckets and catalogs answer; else 503 with the reason (readiness) |

Readiness is what a load balancer routes on: it turns false as soon as SIGTERM arrives (the
server drains: running streams finish, no new ones should come), and while a store or catalog
does not answer. The check reaches the stores at most once per ``check_every_s`` however often
probes come (their answer is kept that long), and a check that does not answer within
``check_timeout_s`` counts as unreachable, so a hung store cannot hang the probe.

Served by the standard library's threading WSGI server with ``prometheus_client``'s WSGI app
for ``/metrics``; hand-written only the two probes and their dispatch.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from flight_storage import telemetry

Check = Callable[[], str | None]
"""A readiness check: None when fine, else why the server is not ready."""


@dataclass(frozen=True)
class Readiness:
    """How ``/readyz`` decides."""

    draining: threading.Event
    """Set at SIGTERM: the server is stopping and takes no new work."""
    check: Check
    """Reaches the buckets and catalogs (``StorageServer.check_reachable``)."""
    check_every_s: float = 1.0
    check_timeout_s: float = 2.0


class _Cached:
    """The readiness check's last answer, refreshed at most every ``check_every_s`` in a
    thread of its own, bounded by ``check_timeout_s``."""

    def __init__(self, readiness: Readiness) -> None:
        self._readiness = readiness
        self._lock = threading.Lock()
        self._answer: str | None = "not checked yet"
        self._checked_at = float("-inf")

    def reason(self) -> str | None:
        if self._readiness.draining.is_set():
            return "draining: the server is stopping"
        with self._lock:
            if time.monotonic() - self._checked_at >= self._readiness.check_every_s:
                self._answer = self._run_check()
                self._checked_at = time.monotonic()
            return self._answer

    def _run_check(self) -> str | None:
        result: list[str | None] = []

        def run() -> None:
            try:
                result.append(self._readiness.check())
            except Exception as exc:  # noqa: BLE001 - any failure to reach a store is "not ready"
                result.append(f"{type(exc).__name__}: {exc}")

        worker = threading.Thread(target=run, name="readiness-check", daemon=True)
        worker.start()
        worker.join(self._readiness.check_timeout_s)
        if not result:
            return f"a store or catalog did not answer within {self._readiness.check_timeout_s:g} s"
        return result[0]


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingWSGIServer6(_ThreadingWSGIServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Probes every second would flood the log; the server logs its own events."""


class OperationsServer:
    """A running operations port.

    Args:
        host: address to bind (the server's ``--host``).
        port: port to bind; 0 picks a free one (see :attr:`port`).
        readiness: how ``/readyz`` decides.
        registry: what ``/metrics`` shows (default: this process's metrics).
    """

    def __init__(self, host: str, port: int, readiness: Readiness,
                 registry: CollectorRegistry | None = None) -> None:
        self._ready = _Cached(readiness)
        telemetry.track(telemetry.READY, lambda: 0 if self._ready.reason() else 1)
        metrics = make_wsgi_app(registry) if registry is not None else make_wsgi_app()

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/healthz":
                return _text(start_response, "200 OK", "ok\n")
            if path == "/readyz":
                reason = self._ready.reason()
                if reason is None:
                    return _text(start_response, "200 OK", "ready\n")
                return _text(start_response, "503 Service Unavailable", f"not ready: {reason}\n")
            if path == "/metrics":
                answer: Iterable[bytes] = metrics(environ, start_response)
                return answer
            return _text(start_response, "404 Not Found",
                         "not found: the paths are /metrics, /healthz and /readyz\n")

        server_class = _ThreadingWSGIServer6 if ":" in host else _ThreadingWSGIServer
        self._server = make_server(host, port, app, server_class=server_class,
                                   handler_class=_QuietHandler)
        self.port = self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.location = f"http://{shown}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="operations",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _text(start_response: Callable[..., Any], status: str, body: str) -> list[bytes]:
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(data)))])
    return [data]
