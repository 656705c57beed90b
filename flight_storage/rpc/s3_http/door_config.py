"""How the S3 door runs: its address, bounds and default flavour, one owner per default.

A leaf module (the standard library and the flavour list only), so ``flight-select serve``
reads its ``--s3-*`` defaults from here without loading the HTTP stack.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from select_dialect.flavors import AWS, FLAVOR_NAMES


@dataclass(frozen=True)
class S3DoorConfig:
    """How the S3 door runs; every resource a client can make it spend has a bound.

    Attributes:
        host, port: where it listens (loopback by default; 0 picks a free port).
        writable: serve CreateBucket, PutObject, DeleteObject and DeleteBucket.
        max_request_bytes: largest SelectObjectContent body (``MaxMessageLengthExceeded``).
        max_object_bytes: largest PutObject body, streamed to disk (``EntityTooLarge``).
        body_timeout_s: time a client has to send its whole body (``RequestTimeout``).
        header_timeout_s: time a connection has, from opening or from the end of its previous
            answer, to send a complete request head; then it is closed.
        max_connections: connections and calls at once; more are answered 503 by uvicorn.
        keepalive_timeout_s: idle keep-alive connections are closed after this.
        max_event_bytes: largest payload of one ``Records`` event.
        flavor: the flavour of a SelectObjectContent request that names none in the
            ``x-flight-select-flavor`` header: ``aws``, since the door speaks AWS's API.
    """

    host: str = "127.0.0.1"
    port: int = 0
    writable: bool = False
    max_request_bytes: int = 256 * 1024
    max_object_bytes: int = 64 << 20
    body_timeout_s: float = 60.0
    header_timeout_s: float = 10.0
    max_connections: int = 64
    keepalive_timeout_s: float = 5.0
    max_event_bytes: int = 256 * 1024
    flavor: str = AWS

    def refusal(self, *, authenticated: bool, allow_anonymous: bool,
                mutual_tls: bool = False) -> str | None:
        """Why the door must not start with these settings, or None."""
        if mutual_tls:
            # the door calls the Flight server as a client and holds no client certificate
            return "the S3 door cannot run beside mutual TLS (--tls-client-ca)"
        positive = {"max_request_bytes": self.max_request_bytes,
                    "max_object_bytes": self.max_object_bytes,
                    "body_timeout_s": self.body_timeout_s,
                    "header_timeout_s": self.header_timeout_s,
                    "max_connections": self.max_connections}
        bad = [name for name, value in positive.items() if value <= 0]
        if bad:
            return f"must be positive: {', '.join(bad)}"
        if self.flavor not in FLAVOR_NAMES:
            return f"unknown flavour {self.flavor!r}; one of {', '.join(FLAVOR_NAMES)}"
        if not (authenticated or allow_anonymous or _is_loopback(self.host)):
            return (f"refusing to serve {self.host} without authentication: pass --auth "
                    "USERS_FILE (or --allow-anonymous)")
        return None


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
