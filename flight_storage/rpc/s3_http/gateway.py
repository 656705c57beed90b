"""Start the S3 door next to a running :class:`StorageServer`, in the same process.

uvicorn serves the ASGI app on a thread of its own; the listening socket is bound here, before
the thread starts, so a port in use fails start-up and port 0 reports the port it got.

uvicorn bounds idle keep-alive connections but not a connection that never finishes its
request head (nor a fresh one that says nothing), and every open connection counts against
``--s3-max-connections``: a few silent sockets would shut the door. :class:`_HeadTimeoutH11`
is uvicorn's h11 protocol with one timer more, closing a connection that has not sent a whole
request head ``header_timeout_s`` after it opened or after its previous answer.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from flight_storage.rpc.s3_http.app import S3Door
from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from flight_storage.rpc.server import StorageServer


class S3Gateway:
    """A running S3 door.

    Args:
        server: the Flight server whose catalog, users, limits and engine it uses.
        config: the door's address and bounds.
    """

    def __init__(self, server: StorageServer, config: S3DoorConfig) -> None:
        self.socket = socket.create_server((config.host, config.port),
                                           family=_family(config.host), reuse_port=False)
        self.port = self.socket.getsockname()[1]
        self.location = f"http://{_url_host(config.host)}:{self.port}"
        self.app = S3Door(server, config)
        self._uvicorn = uvicorn.Server(_DoorConfig(
            self.app,
            header_timeout_s=config.header_timeout_s,
            http=_HeadTimeoutH11,
            limit_concurrency=config.max_connections,
            timeout_keep_alive=int(config.keepalive_timeout_s),
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
        ))
        self._thread = threading.Thread(target=self._uvicorn.run,
                                        kwargs={"sockets": [self.socket]},
                                        name="s3-door", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting calls and wait up to ``timeout_s`` for the running ones."""
        self._uvicorn.should_exit = True
        self._thread.join(timeout_s)
        self.app.close()


log = logging.getLogger(__name__)


class _DoorConfig(uvicorn.Config):
    """uvicorn's settings plus the time a connection has to send a request head."""

    def __init__(self, app: Any, *, header_timeout_s: float, **options: Any) -> None:
        super().__init__(app, **options)
        self.header_timeout_s = header_timeout_s


class _HeadTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol that closes a connection slow to send its request head."""

    config: _DoorConfig
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.config.header_timeout_s, self._head_late)

    def _head_late(self) -> None:
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            log.info("closing a connection that sent no request head within %s s "
                     "(--s3-header-timeout)", self.config.header_timeout_s)
            self.transport.close()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
