"""A forwarding HTTP proxy in front of the real object store, for what a store alone cannot show:
how many bytes each client fetched (planning must read only footers and samples), and faults
(throttling with 503 SlowDown, a store that stops answering, a response body cut off mid-way as
a proxy or a load balancer that drops a connection does).

It forwards every request unchanged (the Host header included, so SigV4 signatures made for the
proxy's address still verify at the store) and streams the answer back, counting the bytes of
each response body. Hand-written for the tests: a dozen lines over the standard library's
``http.server`` and ``http.client``; no mock of the store's behaviour.
"""

from __future__ import annotations

import http.client
import random
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-request (a cancelled read) is no error to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Counters:
    """What went through the proxy."""

    requests: int = 0
    body_bytes: int = 0
    throttled: int = 0
    cut: int = 0
    """Response bodies cut off (:attr:`S3Proxy.cut_rate`, :attr:`S3Proxy.cut_next`)."""
    methods: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(method, path) of each request, in order."""


class S3Proxy:
    """Forward to ``target`` (``http://host:port``) from a free port on 127.0.0.1.

    Attributes:
        endpoint: the proxy's URL (give it to clients instead of the store's).
        counters: requests and response bytes so far (:meth:`reset` zeroes them).
        throttle: answer this many of the next requests with 503 SlowDown.
        refuse: while True, every request is answered 503 at once (a store that is down).
        cut_rate: the share of GET answers with a body (0 to 1) whose body is cut off half-way:
            the status and the full Content-Length go out, then half the bytes, then the
            connection is closed (drawn from a generator seeded with ``seed``: repeatable).
        cut_next: cut this many of the next GET bodies (before ``cut_rate`` is drawn).
        cut_only: cut only GETs whose path holds this text ("": any).
    """

    def __init__(self, target: str, *, seed: int = 35) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.counters = Counters()
        self.throttle = 0
        self.refuse = False
        self.cut_rate = 0.0
        self.cut_next = 0
        self.cut_only = ""
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        with self._lock:
            self.counters = Counters()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _count(self, update: Callable[[Counters], None]) -> None:
        with self._lock:
            update(self.counters)

    def _add_body_bytes(self, n: int) -> None:
        with self._lock:
            self.counters.body_bytes += n

    def _throttled(self) -> bool:
        """Whether this request is refused (``refuse``, or one of ``throttle`` left)."""
        with self._lock:
            throttled = self.refuse or self.throttle > 0
            if self.throttle > 0:
                self.throttle -= 1
        return throttled

    def _cut(self, handler: BaseHTTPRequestHandler, answer: http.client.HTTPResponse) -> bool:
        """Whether this answer's body is cut off (``cut_next``, then ``cut_rate``)."""
        if handler.command != "GET" or answer.status not in (200, 206):
            return False
        if int(answer.getheader("Content-Length") or 0) < 2 or self.cut_only not in handler.path:
            return False
        with self._lock:
            cut = self.cut_next > 0 or (self.cut_rate > 0 and
                                        self._random.random() < self.cut_rate)
            if self.cut_next > 0:
                self.cut_next -= 1
            if cut:
                self.counters.cut += 1
        return cut

    def _answer_slow_down(self, handler: BaseHTTPRequestHandler) -> None:
        self._count(lambda c: setattr(c, "throttled", c.throttled + 1))
        handler.send_response(503)
        handler.send_header("Content-Type", "application/xml")
        handler.send_header("Content-Length", str(len(_SLOWDOWN)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(_SLOWDOWN)

    def _relay(self, handler: BaseHTTPRequestHandler, answer: http.client.HTTPResponse) -> None:
        """The store's answer to the client, its body counted (chunked when unsized)."""
        handler.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "keep-alive", "transfer-encoding"):
                handler.send_header(name, value)
        chunked = answer.getheader("Content-Length") is None and handler.command != "HEAD"
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        if handler.command == "HEAD":
            return
        if self._cut(handler, answer):
            half = int(answer.getheader("Content-Length") or 0) // 2
            data = answer.read(half)
            self._add_body_bytes(len(data))
            handler.wfile.write(data)
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        while chunk := answer.read(1 << 16):
            self._add_body_bytes(len(chunk))
            if chunked:
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            else:
                handler.wfile.write(chunk)
        if chunked:
            handler.wfile.write(b"0\r\n\r\n")

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        self._count(lambda c: (setattr(c, "requests", c.requests + 1),
                               c.methods.append(handler.command),
                               c.calls.append((handler.command, handler.path))))
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        if self._throttled():
            self._answer_slow_down(handler)
            return
        upstream = http.client.HTTPConnection(*self._target, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in ("connection", "keep-alive")}
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            self._relay(handler, upstream.getresponse())
        except (ConnectionError, OSError):
            handler.close_connection = True
        finally:
            upstream.close()
