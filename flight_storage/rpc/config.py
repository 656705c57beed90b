"""Server configuration, built once at the entry point and passed down."""

from __future__ import annotations

import ipaddress
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import pyarrow.flight as flight

from flight_storage.execution.engine_workers import EngineWorkers
from flight_storage.execution.plan_types import EngineConfig
from flight_storage.formats.csv_sniff import TableReading
from flight_storage.rpc.streams import StreamLimits, default_running
from flight_storage.storage.cluster import ClusterDescription
from flight_storage.storage.data_locations import bucket_sets
from flight_storage.storage.iceberg_catalog import IcebergCatalogs, IcebergCatalogSpec
from flight_storage.storage.s3_store import S3Connection, S3Settings
from flight_storage.storage.stores import BucketSet

_STREAMS = StreamLimits()
"""The stream bounds' defaults (one owner: ``StreamLimits``)."""


class ConfigError(ValueError):
    """A configuration the server refuses to start with (reported at start-up)."""


@dataclass(frozen=True)
class ServerConfig:
    """How a storage server runs.

    Attributes:
        data: a data directory (each top-level folder a bucket), or the ``--data`` locations
            (folders, ``s3://`` stores, ``NAME=LOCATION``: ``storage/data_locations.py``).
        store: how to reach the object store of ``s3://`` locations.
        host: address to bind; loopback unless told otherwise.
        port: TCP port; 0 picks a free one.
        ticket_secret: key that signs tickets, prepared-statement handles and bearer tokens;
            replicas that share it serve each other's tickets and accept each other's tokens.
        previous_ticket_secrets: keys that signed before ``ticket_secret``: what they signed is
            still accepted, nothing new is signed with them (``protocol/signing.py``).
        ticket_max_age_s: tickets older than this are refused (and endpoints expire then).
        tls_cert, tls_key: PEM files; both set means ``grpc+tls``.
        tls_client_ca: PEM of the CA that client certificates must chain to (mutual TLS).
        users_file: JSON users file enabling authentication (see ``flight_storage.rpc.auth``).
        allow_anonymous: serve without authentication on a non-loopback address.
        token_ttl_s: lifetime of bearer tokens issued at handshake.
        max_concurrent_queries: result streams computing at once (compute slots: a stream
            holds one only while it computes a batch, not while its client reads).
        queue_wait_s: a stream waits this long for a compute slot, then fails (SlowDown).
        max_open_streams: result streams open at once (each endpoint read is one); a DoGet
            over it is refused (SlowDown).
        idle_timeout_s: a stream whose client read nothing for this long is cancelled.
        max_parameter_bytes: largest parameter batch a DoPut may bind (EntityTooLarge).
        writable: Flight SQL bulk ingest (``CommandStatementIngest``) may write Parquet objects
            into buckets (for users with the bucket's write right, ``rpc/auth.py``).
        max_ingest_bytes: Arrow bytes one ingest may send (EntityTooLarge past it).
        max_abort_marks: marks of aborted write jobs one bucket keeps at once
            (``TooManyAbortedJobs`` past it; each lasts ``ticket_max_age_s``).
        temporary_max_age_s: an ingest's temporary file (``.ingest-*``) older than this is
            a crash's leftover, swept at start and every few minutes (``rpc/ingest.py``).
        default_catalog: the session catalog (a bucket) of a caller that set none.
        query_timeout_s: a stream running longer than this is stopped (server's clock).
        keepalive_s: a scan that finds nothing sends an empty batch this often.
        shutdown_grace_s: on shutdown, running streams may finish for this long before they
            are cancelled.
        engine: query execution limits.
        reading: how Flight SQL statements read CSV tables (sniffing, bad values).
        cluster: the cluster description when this server is one node of a cluster.
        node_name: this node's name in ``cluster``.
        iceberg: the ``--iceberg NAME=...`` catalogs (``storage/iceberg_catalog.py``).
    """

    data: Path | tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 0
    ticket_secret: bytes = b""
    previous_ticket_secrets: tuple[bytes, ...] = ()
    ticket_max_age_s: int = 24 * 3600
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    users_file: Path | None = None
    allow_anonymous: bool = False
    token_ttl_s: int = 3600
    max_concurrent_queries: int = field(default_factory=default_running)
    queue_wait_s: float = _STREAMS.queue_wait_s
    max_open_streams: int = _STREAMS.max_open
    max_parameter_bytes: int = 1 << 20
    writable: bool = False
    max_ingest_bytes: int = 1 << 30
    max_abort_marks: int = 1000
    temporary_max_age_s: int = 3600
    default_catalog: str | None = None
    idle_timeout_s: float = _STREAMS.idle_timeout_s
    query_timeout_s: float = _STREAMS.query_timeout_s
    keepalive_s: float = _STREAMS.keepalive_s
    shutdown_grace_s: float = 30.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    reading: TableReading = field(default_factory=TableReading)
    cluster: ClusterDescription | None = None
    node_name: str | None = None
    store: S3Settings = field(default_factory=S3Settings)
    iceberg: tuple[str, ...] = ()

    def iceberg_catalogs(self) -> IcebergCatalogs:
        """The ``--iceberg`` catalogs (loaded on first use; their ``s3://`` files are read with
        :attr:`store`'s settings)."""
        connection: list[S3Connection] = []

        def store() -> S3Connection:
            if not connection:
                connection.append(S3Connection(self.store))
            return connection[0]

        return IcebergCatalogs([IcebergCatalogSpec.parse(v) for v in self.iceberg], store)

    def bucket_sets(self) -> list[BucketSet]:
        """The buckets of every data location. Folder objects of a cluster's holdings are
        versioned by their content, so a replica's copy is recognised as the same object
        (and one whose bytes differ is not); a fleet's nodes read the same data (an object
        store, one shared folder, the processes of ``--workers``), whose own versions serve."""
        values = (str(self.data),) if isinstance(self.data, Path) else self.data
        holdings = self.cluster is not None and not self.cluster.is_fleet
        return bucket_sets(values, self.store, content_versions=holdings)

    def engine_workers(self) -> EngineWorkers | None:
        """The pool of engine worker processes (started now, in the background), or None
        with ``engine.engine_workers`` 0: a query waits for a worker as long as for a compute
        slot."""
        if self.engine.engine_workers <= 0:
            return None
        return EngineWorkers(self.engine.engine_workers, self.engine, self.queue_wait_s)

    @property
    def stream_limits(self) -> StreamLimits:
        """The bounds of result streams."""
        return StreamLimits(
            max_running=self.max_concurrent_queries,
            max_open=self.max_open_streams,
            queue_wait_s=self.queue_wait_s,
            query_timeout_s=self.query_timeout_s,
            idle_timeout_s=self.idle_timeout_s,
            keepalive_s=self.keepalive_s,
        )

    @property
    def scheme(self) -> str:
        """``grpc+tls`` when a certificate is configured, else ``grpc+tcp``."""
        return "grpc+tls" if self.tls_cert is not None else "grpc+tcp"

    def tls_arguments(self) -> dict[str, Any]:
        """The Flight server's TLS keyword arguments (none without a certificate)."""
        if self.tls_cert is None or self.tls_key is None:
            return {}
        arguments: dict[str, Any] = {
            "tls_certificates": [
                flight.CertKeyPair(self.tls_cert.read_bytes(), self.tls_key.read_bytes())
            ]
        }
        if self.tls_client_ca is not None:
            arguments["verify_client"] = True
            arguments["root_certificates"] = self.tls_client_ca.read_bytes()
        return arguments

    @property
    def loopback(self) -> bool:
        """True when the server listens on a loopback address only."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def check(self) -> None:
        """Refuse unsafe or inconsistent settings.

        Raises:
            ConfigError: no authentication on a non-loopback address (unless
                ``allow_anonymous``), half a TLS key pair, mutual TLS without TLS, or a limit
                that is not positive.
        """
        if not self.loopback and self.users_file is None and not self.allow_anonymous:
            raise ConfigError(
                f"refusing to serve {self.host} without authentication: pass --auth USERS_FILE "
                "(or --allow-anonymous to accept anyone who can reach the port)"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("TLS needs both a certificate and its key")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ConfigError("mutual TLS (client CA) needs a server certificate too")
        positive = {
            "max_concurrent_queries": self.max_concurrent_queries,
            "max_open_streams": self.max_open_streams,
            "max_parameter_bytes": self.max_parameter_bytes,
            "max_ingest_bytes": self.max_ingest_bytes,
            "max_abort_marks": self.max_abort_marks,
            "temporary_max_age_s": self.temporary_max_age_s,
            "idle_timeout_s": self.idle_timeout_s,
            "query_timeout_s": self.query_timeout_s,
            "keepalive_s": self.keepalive_s,
            "token_ttl_s": self.token_ttl_s,
            "ticket_max_age_s": self.ticket_max_age_s,
            "max_parallelism": self.engine.max_parallelism,
        }
        if self.cluster is not None:
            self._check_cluster(self.cluster)
        bad = [name for name, value in positive.items() if value <= 0]
        if bad:
            raise ConfigError(f"must be positive: {', '.join(bad)}")

    def _check_cluster(self, cluster: ClusterDescription) -> None:
        if self.node_name is None:
            raise ConfigError("a cluster node needs --node NAME (its name in the cluster file)")
        cluster.node(self.node_name)
        if not self.ticket_secret:
            raise ConfigError(
                "cluster nodes must share the ticket secret: pass --ticket-secret-file FILE "
                "(the same file on every node); without it no node accepts another's tickets "
                "or tokens")


def serve_defaults() -> dict[str, Any]:
    """Every :class:`ServerConfig` field's default (``flight-select serve`` shows and uses
    these: the CLI owns no default of its own)."""
    out: dict[str, Any] = {}
    for item in fields(ServerConfig):
        if item.default is not MISSING:
            out[item.name] = item.default
        elif item.default_factory is not MISSING:
            out[item.name] = item.default_factory()
    return out
