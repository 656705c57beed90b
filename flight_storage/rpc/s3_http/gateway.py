"""Start the S3 door next to a running :class:`StorageServer`, in the same process.

uvicorn serves the ASGI app on a thread of its own; the listening socket is bound here, before
the thread starts, so a port in use fails start-up and port 0 reports the port it got.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import uvicorn

from flight_storage.rpc.s3_http.app import S3Door, S3DoorConfig
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
        self.app = S3Door(server, config, _flight_address(server), **_client_options(server))
        self._uvicorn = uvicorn.Server(uvicorn.Config(
            self.app,
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


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _flight_address(server: StorageServer) -> str:
    """Loopback address of the Flight server (it may listen on every address)."""
    host = server.config.host
    local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    scheme = "grpc+tls" if server.config.tls_cert is not None else "grpc"
    return f"{scheme}://{_url_host(local)}:{server.port}"


def _client_options(server: StorageServer) -> dict[str, Any]:
    """Trust the Flight server's own certificate when it serves TLS."""
    if server.config.tls_cert is None:
        return {}
    return {"tls_root_certs": server.config.tls_cert.read_bytes()}
