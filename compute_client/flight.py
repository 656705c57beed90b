"""A small Flight SQL client for the storage server: execute -> endpoints, read(endpoint).

It speaks the same Flight SQL messages as any client (``CommandStatementQuery`` then one
``DoGet`` per endpoint) through ``pyarrow.flight`` and maps server errors to
:class:`~compute_client.errors.RemoteQueryError`. Endpoints are plain data
(:class:`Endpoint`), so they can be shipped to other processes (Spark executors) and read there.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from compute_client.errors import ClientError, RemoteQueryError, ServerUnavailableError
from flight_storage import protocol

FLAVOR_HEADER = protocol.FLAVOR_HEADER


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach a storage server.

    Attributes:
        location: ``grpc://host:port`` or ``grpc+tls://host:port``.
        flavor: dialect flavour (``standard``, ``ceph`` or ``aws``); None sends no header,
            so the server's default applies (``standard`` for statements).
        username, password: Basic credentials exchanged for a bearer token at connect time.
        tls_root_certs: PEM bytes of the CA to trust for ``grpc+tls``.
        cert_chain, private_key: PEM client certificate and key (mutual TLS).
        timeout_s: per-call timeout.
    """

    location: str
    flavor: str | None = None
    username: str | None = None
    password: str | None = None
    tls_root_certs: bytes | None = None
    cert_chain: bytes | None = None
    private_key: bytes | None = None
    timeout_s: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Endpoint:
    """One partition of a result: a ticket and where to redeem it (picklable)."""

    ticket: bytes
    locations: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """Plain data (for Spark partitions and logs)."""
        return {"ticket": base64.b64encode(self.ticket).decode(), "locations": list(self.locations)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Endpoint:
        """Inverse of :meth:`to_json`."""
        locations = data.get("locations", [])
        assert isinstance(locations, list)
        return cls(base64.b64decode(str(data["ticket"])), tuple(str(x) for x in locations))


@dataclass(frozen=True)
class ListedObject:
    """An object as the server lists it."""

    key: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ObjectPage:
    """A page of a listing; ``next_start_after`` is None on the last page."""

    objects: tuple[ListedObject, ...]
    next_start_after: str | None


@dataclass(frozen=True)
class QueryPlan:
    """The server's answer to a statement: the result schema and its endpoints."""

    schema: pa.Schema
    endpoints: tuple[Endpoint, ...]
    total_records: int
    total_bytes: int
    about: dict[str, Any] = field(default_factory=dict)
    """What the server says of the plan (``reader``: ``datafusion`` or ``reference``)."""


def _about(info: flight.FlightInfo) -> dict[str, Any]:
    """The server's JSON note on a FlightInfo (empty when it sent none or something else)."""
    try:
        about = json.loads(bytes(info.app_metadata or b"") or b"{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return about if isinstance(about, dict) else {}


def _like_literal(text: str) -> str:
    """A Flight SQL filter pattern matching ``text`` only (``%`` and ``_`` escaped away)."""
    # The server's patterns have no escape character: ``_`` matches itself too, and the
    # exact-name check after the call drops any other match.
    return text.replace("%", "_")


def _to_client_error(exc: BaseException) -> ClientError:
    if isinstance(exc, flight.FlightUnavailableError) and "{" not in str(exc):
        return ServerUnavailableError(str(exc))
    extra = getattr(exc, "extra_info", None)
    text = extra.decode("utf-8", "replace") if extra else str(exc)
    return RemoteQueryError.from_text(text.split(". Detail:")[0])


class FlightSelectClient:
    """Run s3-select statements on a storage server and read their partitions.

    Example:
        >>> client = FlightSelectClient(ConnectionOptions("grpc://127.0.0.1:8815"))
        >>> plan = client.execute('SELECT _1 FROM "sales"."orders/2024-01.csv"')  # doctest: +SKIP
        >>> batches = [b for e in plan.endpoints for b in client.read(e)]  # doctest: +SKIP
    """

    def __init__(self, options: ConnectionOptions) -> None:
        self.options = options
        self._clients: dict[str, flight.FlightClient] = {}
        named = [] if options.flavor is None else [(FLAVOR_HEADER.encode(),
                                                    options.flavor.encode())]
        self._headers: list[tuple[bytes, bytes]] = named + [
            (k.lower().encode(), v.encode()) for k, v in options.headers.items()]
        self._client(options.location)

    def _client(self, location: str) -> flight.FlightClient:
        client = self._clients.get(location)
        if client is None:
            kwargs: dict[str, object] = {}
            if self.options.tls_root_certs is not None:
                kwargs["tls_root_certs"] = self.options.tls_root_certs
            if self.options.cert_chain is not None:
                kwargs["cert_chain"] = self.options.cert_chain
                kwargs["private_key"] = self.options.private_key
            try:
                client = flight.FlightClient(location, **kwargs)
                if self.options.username is not None:
                    token = client.authenticate_basic_token(
                        self.options.username, self.options.password or ""
                    )
                    self._headers = [h for h in self._headers if h[0] != b"authorization"]
                    self._headers.append(token)
            except flight.FlightError as exc:
                raise _to_client_error(exc) from None
            self._clients[location] = client
        return client

    def _call_options(self) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(headers=self._headers, timeout=self.options.timeout_s)

    def execute(self, query: str) -> QueryPlan:
        """Plan ``query`` on the server; nothing is read until :meth:`read`."""
        command = protocol.pack_any(protocol.pb.CommandStatementQuery(query=query))
        descriptor = flight.FlightDescriptor.for_command(command)
        try:
            info = self._client(self.options.location).get_flight_info(
                descriptor, self._call_options()
            )
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None
        endpoints = tuple(
            Endpoint(e.ticket.ticket, tuple(str(loc.uri.decode()) for loc in e.locations))
            for e in info.endpoints
        )
        return QueryPlan(info.schema, endpoints, info.total_records, info.total_bytes,
                         _about(info))

    def read(self, endpoint: Endpoint) -> Iterator[pa.RecordBatch]:
        """Stream one endpoint's batches, from the server it names (or the default one)."""
        location = endpoint.locations[0] if endpoint.locations else self.options.location
        if location.startswith("arrow-flight-reuse-connection"):
            location = self.options.location
        try:
            reader = self._client(location).do_get(
                flight.Ticket(endpoint.ticket), self._call_options()
            )
            for chunk in reader:
                if chunk.data is not None:
                    yield chunk.data
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None

    def _metadata(self, message: object) -> pa.Table:
        descriptor = flight.FlightDescriptor.for_command(protocol.pack_any(message))
        try:
            info = self._client(self.options.location).get_flight_info(
                descriptor, self._call_options()
            )
            tables = [
                self._client(self.options.location)
                .do_get(e.ticket, self._call_options())
                .read_all()
                for e in info.endpoints
            ]
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None
        return pa.concat_tables(tables) if tables else pa.table({})

    def list_buckets(self) -> list[str]:
        """The server's buckets (Flight SQL ``GetDbSchemas``), sorted."""
        table = self._metadata(protocol.pb.CommandGetDbSchemas())
        return sorted(str(v) for v in table.column("db_schema_name").to_pylist())

    def list_objects(self, bucket: str) -> list[str]:
        """Keys of ``bucket`` the server serves as tables (Flight SQL ``GetTables``)."""
        table = self._metadata(
            protocol.pb.CommandGetTables(db_schema_filter_pattern=_like_literal(bucket))
        )
        rows = zip(table.column("db_schema_name").to_pylist(),
                   table.column("table_name").to_pylist(), strict=True)
        return sorted(str(key) for schema, key in rows if schema == bucket)

    def list_objects_page(self, bucket: str, prefix: str = "", start_after: str = "",
                          max_keys: int = 1000) -> ObjectPage:
        """One page of the objects under ``bucket/prefix`` sorting after ``start_after``
        (the server's ``ListObjects`` action; the server lists only that page)."""
        body = json.dumps({"bucket": bucket, "prefix": prefix, "start_after": start_after,
                           "max_keys": max_keys}).encode()
        try:
            results = list(self._client(self.options.location).do_action(
                flight.Action("ListObjects", body), self._call_options()))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None
        document = json.loads(results[0].body.to_pybytes())
        objects = tuple(ListedObject(str(o["key"]), int(o["size"]), int(o["mtime_ns"]))
                        for o in document["objects"])
        return ObjectPage(objects, document.get("next_start_after"))

    def read_all(self, query: str) -> pa.Table:
        """Execute ``query`` and read every endpoint into one table."""
        plan = self.execute(query)
        batches = [batch for endpoint in plan.endpoints for batch in self.read(endpoint)]
        return pa.Table.from_batches(batches, schema=plan.schema)

    def close(self) -> None:
        """Close every connection."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> FlightSelectClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
