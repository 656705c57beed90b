"""Server configuration, built once at the entry point and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from flight_storage.engine import EngineConfig


@dataclass(frozen=True)
class ServerConfig:
    """How a storage server runs.

    Attributes:
        data_dir: the data root; each top-level folder is a bucket.
        host: address to bind; loopback unless told otherwise.
        port: TCP port; 0 picks a free one.
        ticket_secret: key that signs tickets and prepared-statement handles; replicas that
            share it serve each other's tickets.
        ticket_max_age_s: tickets older than this are refused.
        tls_cert, tls_key: PEM files; both set means ``grpc+tls``.
        tls_client_ca: PEM of the CA that client certificates must chain to (mutual TLS).
        users_file: JSON users file enabling authentication (see ``flight_storage.auth``).
        token_ttl_s: lifetime of bearer tokens issued at handshake.
        max_concurrent_queries: DoGet streams running at once; more are refused.
        query_timeout_s: a stream running longer than this is stopped.
        keepalive_s: a scan that finds nothing sends an empty batch this often.
        engine: query execution limits.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    ticket_secret: bytes = b""
    ticket_max_age_s: int = 24 * 3600
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    users_file: Path | None = None
    token_ttl_s: int = 3600
    max_concurrent_queries: int = 16
    query_timeout_s: float = 600.0
    keepalive_s: float = 5.0
    engine: EngineConfig = field(default_factory=EngineConfig)

    @property
    def scheme(self) -> str:
        """``grpc+tls`` when a certificate is configured, else ``grpc+tcp``."""
        return "grpc+tls" if self.tls_cert is not None else "grpc+tcp"
