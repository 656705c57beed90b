"""A small Flight SQL client for the storage server: execute -> endpoints, read(endpoint).

It speaks the same Flight SQL messages as any client (``CommandStatementQuery`` then one
``DoGet`` per endpoint) through ``pyarrow.flight`` and maps server errors to
:class:`~compute_client.errors.RemoteQueryError`. Endpoints are plain data
(:class:`Endpoint`), so they can be shipped to other processes (Spark executors) and read there.

:meth:`FlightSelectClient.read` is the one place every client (DataFusion, Spark, ADBC-style
partition reads) redeems an endpoint, so failover lives there: each location of the endpoint
in order, the next one when a location is down or redirects, and a resume that skips the rows
already delivered when a location dies mid-stream. Hand-written because Flight leaves reading
``locations`` to the client: pyarrow's ``FlightClient`` talks to one location and neither it
nor gRPC knows that two servers are replicas giving the same rows in the same order.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from compute_client.errors import (
    ClientError,
    EndpointUnavailableError,
    RemoteQueryError,
    ServerUnavailableError,
)
from compute_client.stalls import batches_within
from flight_storage import protocol

FLAVOR_HEADER = protocol.FLAVOR_HEADER
INGEST_STAGE_OPTION = protocol.INGEST_STAGE_OPTION
INGEST_JOB_OPTION = protocol.INGEST_JOB_OPTION
pb = protocol.pb
_OPTIONS = pb.CommandStatementIngest.TableDefinitionOptions
_INGEST_MODES: dict[str, tuple[Any, Any]] = {
    "create": (_OPTIONS.TABLE_NOT_EXIST_OPTION_CREATE, _OPTIONS.TABLE_EXISTS_OPTION_FAIL),
    "append": (_OPTIONS.TABLE_NOT_EXIST_OPTION_FAIL, _OPTIONS.TABLE_EXISTS_OPTION_APPEND),
    "replace": (_OPTIONS.TABLE_NOT_EXIST_OPTION_CREATE, _OPTIONS.TABLE_EXISTS_OPTION_REPLACE),
    "create_append": (_OPTIONS.TABLE_NOT_EXIST_OPTION_CREATE,
                      _OPTIONS.TABLE_EXISTS_OPTION_APPEND),
}
"""ADBC's ingest modes as the table-definition options of ``CommandStatementIngest``."""

REUSE_CONNECTION = "arrow-flight-reuse-connection://?"
"""The Flight location that means "the server you planned on" (as an empty list does)."""

FAILOVER_CODES: dict[str, str] = {
    "WrongNode": "the node does not hold this partition and names who does",
    "ServiceUnavailable": "the node is shutting down or has no room for the stream",
}
"""Server error codes after which another location of the endpoint is tried (any other
server error is the query's own and would repeat on a replica)."""


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
        timeout_s: per-call timeout (a whole DoGet stream included).
        connect_timeout_s: longest wait for one location to accept a connection before the
            next location is tried (gRPC's own default is 20 s).
        max_attempts: most locations one endpoint read tries, a mid-stream resume included.
        stall_timeout_s: longest silence of an open stream before its node counts as gone
            and the next location resumes it (None: wait for ever). The server sends an
            empty batch after ``--keepalive`` seconds (5 by default) of nothing to send, so
            keep this well above the servers' keepalive.
        parallelism: the endpoints wanted for a statement over one object, sent as
            ``x-flight-select-parallelism`` (the server cuts it into up to that many byte
            ranges of at least 1 MiB, never fewer than it would anyway; for an engine with
            more workers than the data justifies, such as Spark with many executors). None
            (the default): the server sizes endpoints by work, which suits one reader.
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
    connect_timeout_s: float = 5.0
    max_attempts: int = 4
    stall_timeout_s: float | None = 60.0
    parallelism: int | None = None

    def __post_init__(self) -> None:
        if self.parallelism is not None and self.parallelism < 1:
            raise ValueError(f"parallelism must be a whole number >= 1, not {self.parallelism}")


@dataclass(frozen=True)
class Endpoint:
    """One partition of a result: a ticket and where to redeem it (picklable).

    ``locations`` come in the server's order of preference (the owning node, then its
    replicas); empty, or :data:`REUSE_CONNECTION`, means the planning server. ``index`` is the
    endpoint's position in its plan, used only to name it in errors.
    """

    ticket: bytes
    locations: tuple[str, ...]
    index: int | None = None

    @property
    def name(self) -> str:
        """How errors name the endpoint: its index and a short digest of its ticket."""
        digest = hashlib.sha256(self.ticket).hexdigest()[:12]
        return f"#{self.index} (ticket {digest})" if self.index is not None else digest

    def to_json(self) -> dict[str, object]:
        """Plain data (for Spark partitions and logs)."""
        return {"ticket": base64.b64encode(self.ticket).decode(),
                "locations": list(self.locations), "index": self.index}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Endpoint:
        """Inverse of :meth:`to_json`."""
        locations = data.get("locations", [])
        assert isinstance(locations, list)
        index = data.get("index")
        return cls(base64.b64decode(str(data["ticket"])), tuple(str(x) for x in locations),
                   int(index) if isinstance(index, int) else None)


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
    about: protocol.PlanDescription = field(default_factory=protocol.PlanDescription)
    """What the server says of the plan (``reader``: ``datafusion`` or ``reference``; empty
    when it said nothing)."""


def _like_literal(text: str) -> str:
    """A Flight SQL filter pattern matching ``text`` only (``%`` and ``_`` escaped away)."""
    # The server's patterns have no escape character: ``_`` matches itself too, and the
    # exact-name check after the call drops any other match.
    return text.replace("%", "_")


def _failover_reason(error: ClientError) -> str | None:
    """Why another location may answer where this one failed (None: it would not)."""
    if isinstance(error, RemoteQueryError):
        return f"{error.code}: {error.message}" if error.code in FAILOVER_CODES else None
    if isinstance(error, ServerUnavailableError):
        return str(error).split(". gRPC client debug context")[0]
    return None


def _skip_rows(batch: pa.RecordBatch, rows: int) -> pa.RecordBatch | None:
    """``batch`` without its first ``rows`` rows (None when nothing is left)."""
    if rows >= batch.num_rows:
        return None
    return batch.slice(rows) if rows else batch


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
        # Locations that failed a read of this client are tried after the others: a node
        # that hung mid-stream would also hang the next DoGet, before any stall watch starts.
        self._failed: set[str] = set()
        named = [] if options.flavor is None else [(FLAVOR_HEADER.encode(),
                                                    options.flavor.encode())]
        given = {k.lower(): v for k, v in options.headers.items()}
        # This client reads every endpoint: ask for one per partition (the server gives
        # clients it does not know one endpoint), unless the caller's headers say otherwise.
        given.setdefault(protocol.ENDPOINTS_HEADER, protocol.ENDPOINTS_PARTITIONED)
        if options.parallelism is not None:
            given.setdefault(protocol.PARALLELISM_HEADER, str(options.parallelism))
        self._headers: list[tuple[bytes, bytes]] = named + [
            (k.encode(), v.encode()) for k, v in given.items()]
        # No connection (nor login) until a call needs one: an executor reading endpoints
        # from their own locations must not depend on the planning server still being up.

    def _client(self, location: str) -> flight.FlightClient:
        client = self._clients.get(location)
        if client is None:
            kwargs: dict[str, object] = {}
            if self.options.tls_root_certs is not None:
                kwargs["tls_root_certs"] = self.options.tls_root_certs
            if self.options.cert_chain is not None:
                kwargs["cert_chain"] = self.options.cert_chain
                kwargs["private_key"] = self.options.private_key
            # gRPC waits 20 s for a silent host by default; a replica should take over sooner.
            kwargs["generic_options"] = [
                ("grpc.min_reconnect_backoff_ms", int(self.options.connect_timeout_s * 1000))]
            try:
                client = flight.FlightClient(location, **kwargs)
                if self.options.username is not None:
                    token = client.authenticate_basic_token(
                        self.options.username, self.options.password or ""
                    )
                    self._headers = [h for h in self._headers if h[0] != b"authorization"]
                    self._headers.append(token)
            except flight.FlightInternalError as exc:
                # pyarrow reports a refused connection during the login handshake as an
                # internal error ("Could not finish writing before closing"), not UNAVAILABLE.
                raise ServerUnavailableError(f"login at {location} failed: {exc}") from None
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
            Endpoint(e.ticket.ticket, tuple(str(loc.uri.decode()) for loc in e.locations), i)
            for i, e in enumerate(info.endpoints)
        )
        return QueryPlan(info.schema, endpoints, info.total_records, info.total_bytes,
                         protocol.PlanDescription.from_json(info.app_metadata))

    def locations(self, endpoint: Endpoint) -> tuple[str, ...]:
        """Where ``endpoint`` may be read, in order, each once; the planning server stands in
        for an empty list and for :data:`REUSE_CONNECTION`, and locations that already failed
        a read of this client come last."""
        named = endpoint.locations or (self.options.location,)
        resolved = tuple(dict.fromkeys(
            self.options.location if loc.startswith(REUSE_CONNECTION.split("?")[0]) else loc
            for loc in named))
        ordered = sorted(resolved, key=lambda location: location in self._failed)
        return tuple(ordered[: self.options.max_attempts])

    def read(self, endpoint: Endpoint) -> Iterator[pa.RecordBatch]:
        """Stream one endpoint's batches, every row exactly once, from the first location
        that answers.

        A location that is down, redirects (``WrongNode``), dies mid-stream or stalls (see
        ``ConnectionOptions.stall_timeout_s``) hands over to the next one, which resumes
        after the rows already yielded: every replica gives an endpoint's rows in the same
        order, and a replica whose schema differs is not used.

        Raises:
            EndpointUnavailableError: no location delivered the endpoint; it names the
                endpoint and each location tried with its error.
            RemoteQueryError: the server failed the query itself (a replica would too).
        """
        attempts: list[tuple[str, str]] = []
        delivered = 0
        schema: pa.Schema | None = None
        for location in self.locations(endpoint):
            try:
                reader = self._client(location).do_get(
                    flight.Ticket(endpoint.ticket), self._call_options())
                if schema is not None and not reader.schema.equals(schema):
                    reader.cancel()
                    self._failed.add(location)
                    attempts.append((location, "schema differs from the first location's"))
                    continue
                schema = reader.schema
                to_skip = delivered
                for data in batches_within(reader, self.options.stall_timeout_s):
                    batch = _skip_rows(data, to_skip)
                    to_skip = max(0, to_skip - data.num_rows)
                    if batch is not None:
                        delivered += batch.num_rows
                        yield batch
                if to_skip:
                    self._failed.add(location)
                    attempts.append((location, f"ended {to_skip} rows short of the rows "
                                               "already delivered"))
                    continue
                self._failed.discard(location)
                return
            except (flight.FlightError, pa.ArrowException, ClientError) as exc:
                error = exc if isinstance(exc, ClientError) else _to_client_error(exc)
                reason = _failover_reason(error)
                if reason is None:
                    raise error from None
                self._failed.add(location)
                attempts.append((location, reason))
        raise EndpointUnavailableError(endpoint.name, tuple(attempts), delivered)

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

    def ingest(self, bucket: str, table: str, schema: pa.Schema,
               batches: Iterable[pa.RecordBatch], *, mode: str = "create_append",
               staged_job: str | None = None) -> tuple[int, str | None]:
        """Bulk-ingest ``batches`` into the prefix table ``bucket/table/`` (the server must run
        ``--writable``); ``mode`` is ADBC's (``create``, ``append``, ``replace``,
        ``create_append``).

        Returns:
            The rows written and, with ``staged_job`` (the writing job's hex id), the token
            that :meth:`finish_ingest` commits or aborts (the object stays invisible until
            then).
        """
        options = pb.CommandStatementIngest.TableDefinitionOptions
        if_not_exist, if_exists = _INGEST_MODES[mode]
        command = pb.CommandStatementIngest(
            table=table, catalog=bucket,
            table_definition_options=options(if_not_exist=if_not_exist, if_exists=if_exists))
        if staged_job is not None:
            command.options[INGEST_STAGE_OPTION] = "true"
            command.options[INGEST_JOB_OPTION] = staged_job
        descriptor = flight.FlightDescriptor.for_command(protocol.pack_any(command))
        answers: list[bytes] = []
        try:
            writer, reader = self._client(self.options.location).do_put(
                descriptor, schema, self._call_options())
            with writer:
                for batch in batches:
                    writer.write_batch(batch)
                writer.done_writing()
                while (answer := reader.read()) is not None:
                    answers.append(answer.to_pybytes())
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None
        rows = pb.DoPutUpdateResult.FromString(answers[0]).record_count
        token = json.loads(answers[1])["staged"] if staged_job is not None else None
        return rows, token

    def finish_ingest(self, tokens: Sequence[str], *, commit: bool, replace: bool = False,
                      job: str | None = None, bucket: str | None = None) -> None:
        """Store (``commit``) or remove the staged ingests ``tokens``; with ``replace`` the
        tables' other objects go once the new ones are stored. An abort naming ``job`` and
        its ``bucket`` also removes what the job's tasks stage from now on."""
        request: dict[str, Any] = {"staged": list(tokens), "replace": replace}
        if job is not None:
            request.update(job=job, bucket=bucket)
        body = json.dumps(request).encode()
        action = "CommitIngest" if commit else "AbortIngest"
        try:
            list(self._client(self.options.location).do_action(
                flight.Action(action, body), self._call_options()))
        except (flight.FlightError, pa.ArrowException) as exc:
            raise _to_client_error(exc) from None

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
