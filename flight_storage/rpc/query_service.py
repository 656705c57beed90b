"""The query service both doors call for S3 SelectObjectContent: plan a request for a user into
partition tickets, and open one partition's stream for a user.

| caller | plans with | reads a partition with | errors it sees |
|---|---|---|---|
| Flight ``GetFlightInfo`` of a JSON request (``server.py``) | :meth:`SelectService.info` (tickets signed into a FlightInfo) | | Flight errors, from the RPC boundary |
| Flight ``DoGet`` of a ``select_object`` ticket (``server.py``) | | :meth:`SelectService.open` | Flight errors, from the RPC boundary |
| the S3 door (``s3_http/object_calls.py``), in process, as the user it authenticated | :meth:`SelectService.endpoints` | :meth:`SelectService.items` | the :class:`~flight_storage.errors.StorageError` raised |

Whichever door a request came through, it gets the same access check
(``rpc/access.py``), compute slots, open-stream limit, query timeout and watchdog
(``rpc/streams.py``), and the same records, Progress and Stats (``rpc/partition_streams.py``);
the door needs no token and no gRPC call for the partitions this process serves.

In a holdings cluster an object another node holds is planned there, as GetFlightInfo
forwards it (``rpc/roles/cluster.py``); its endpoints name that node, and
:meth:`SelectService.items` reads such a remote endpoint over Flight from its locations in
order (the peers' calls of ``rpc/roles/peers.py``, as the caller), turning the node's errors
back into ``StorageError``. That is the only Flight call left on the door's path; a fleet, or a holding this node is part of, plans
and serves every partition here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError
from flight_storage.execution.engine import InputSpec, SelectEngine, SelectPlan
from flight_storage.protocol import FLAVOR_HEADER, PartitionTicket, SelectObjectTicket
from flight_storage.protocol.signing import Secret
from flight_storage.request.s3_request import RECORDS_SCHEMA, SelectRequest
from flight_storage.request.tables import input_spec, object_version
from flight_storage.rpc.boundary import PEER_ERRORS, peer_error
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.endpoints import endpoint_partitions, known_rows, query_id, stale_ticket
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.partition_streams import PartitionStream, partition_stream
from flight_storage.rpc.roles.role import Role
from flight_storage.rpc.streams import (
    Cancellable,
    Item,
    StoppableSource,
    StreamPool,
    object_source,
)
from flight_storage.storage.catalog import Catalog, ObjectInfo
from select_dialect.translate import check_query_length

Describe = Callable[[pa.Schema, flight.FlightDescriptor, list[PartitionTicket], SelectPlan, int,
                     dict[str, Any]], flight.FlightInfo]
"""How the Flight server describes planned tickets (``StorageServer.tickets_info``)."""


@dataclass(frozen=True)
class PlannedSelect:
    """A request planned on this process: its object, plan and one ticket per partition."""

    obj: ObjectInfo
    plan: SelectPlan
    tickets: list[PartitionTicket]
    serialized: bool
    """The request has an OutputSerialization: its stream holds records, not Arrow rows."""

    @property
    def schema(self) -> pa.Schema:
        return RECORDS_SCHEMA if self.serialized else self.plan.arrow_schema

    @property
    def total_records(self) -> int:
        return -1 if self.serialized else known_rows(self.plan)


@dataclass(frozen=True)
class LocalEndpoint:
    """A partition this process serves."""

    ticket: PartitionTicket


@dataclass(frozen=True)
class RemoteEndpoint:
    """A partition another node of a holdings cluster serves, read over Flight from it."""

    ticket: bytes
    locations: tuple[str, ...]


SelectEndpoint = LocalEndpoint | RemoteEndpoint


class _NeverCancelled:
    """The S3 door's streams: it stops one by closing it, never through a call context."""

    @staticmethod
    def is_cancelled() -> bool:
        return False


_NEVER_CANCELLED: Final = _NeverCancelled()


def _itself(exc: BaseException) -> BaseException:
    return exc


@dataclass(frozen=True)
class SelectService:
    """Plans and serves S3 SelectObjectContent requests for both doors.

    Args:
        catalog, engine, streams, config: the server's.
        check_access: refuses a bucket the caller may not read (``StorageServer.check_access``:
            the bucket's name checked, then ``rpc/access.py``).
        issue: the one ticket builder (``StorageServer.issue``).
        describe: a FlightInfo of planned tickets (``StorageServer.tickets_info``).
        is_cancelled: whether the endpoint with this key was cancelled (CancelFlightInfo).
        secret: the ticket secret (a cluster's planning answers signed tickets).
        location: this process's Flight location as endpoints name it.
        role: this server's role (``rpc/roles/role.py``: single server, cluster node or fleet
            node).
    """

    catalog: Catalog
    engine: SelectEngine
    streams: StreamPool
    config: ServerConfig
    check_access: Callable[[CallContext, str], None]
    issue: Callable[..., list[PartitionTicket]]
    describe: Describe
    is_cancelled: Callable[[bytes], bool]
    secret: Secret
    location: str
    role: Role

    @property
    def node_name(self) -> str | None:
        return self.role.me

    # ------------------------------------------------------------------ planning
    def plan(self, call: CallContext, request: SelectRequest) -> PlannedSelect:
        """Plan ``request`` on this process for ``call``'s user, in a compute slot under the
        query timeout (GetFlightInfo's work, without the FlightInfo)."""
        check_query_length(request.expression, self.config.engine.max_query_chars,
                           what="expression", setting="--max-query-chars")
        flavor = call.s3_request_flavor
        obj, plan, _ = self.streams.run_planning(lambda stop: self._plan(
            call, request.bucket, request.key, request.input_serialization,
            request.expression, flavor, request.scan_range, stop), call.is_cancelled,
            "planning")
        if request.output_serialization is not None:
            plan.record_writer(request.output_serialization)  # refuse bad settings now
        tickets = self.issue(SelectObjectTicket, call, request.expression, flavor, obj.bucket,
                             obj.key, endpoint_partitions(plan),
                             input_serialization=plan.input.to_request(),
                             output_serialization=request.ticket_extras(),
                             object_version=object_version([obj]))
        return PlannedSelect(obj, plan, tickets, request.output_serialization is not None)

    def info(self, call: CallContext, request: SelectRequest,
             descriptor: flight.FlightDescriptor, fields: dict[str, Any]) -> flight.FlightInfo:
        """GetFlightInfo of ``request`` planned here: the signed tickets' FlightInfo."""
        planned = self.plan(call, request)
        return self.describe(planned.schema, descriptor, planned.tickets, planned.plan,
                             planned.total_records, fields)

    def endpoints(self, call: CallContext, request: SelectRequest) -> list[SelectEndpoint]:
        """The endpoints of ``request`` for the S3 door, in order: planned here (every one a
        :class:`LocalEndpoint`), or, in a holdings cluster, by the nodes holding the object
        (those naming this node are read here, the others from their nodes)."""
        if self.role.plans_here(request.bucket, request.key):
            return [LocalEndpoint(t) for t in self.plan(call, request).tickets]
        descriptor = flight.FlightDescriptor.for_command(request.to_command())
        headers = {FLAVOR_HEADER: [call.flavor]} if call.flavor is not None else {}
        try:
            info = self.role.flight_info(
                call, headers, descriptor, request.bucket, request.key,
                local=lambda: self.info(call, request, descriptor, {}))
        except PEER_ERRORS as exc:  # a holding node's answer (NoSuchKey, SlowDown, ...)
            raise peer_error(exc) from None
        return [self._endpoint(e) for e in info.endpoints]

    def _endpoint(self, endpoint: flight.FlightEndpoint) -> SelectEndpoint:
        locations = tuple(location.uri.decode() for location in endpoint.locations)
        if locations and self.location not in locations:
            return RemoteEndpoint(endpoint.ticket.ticket, locations)
        return LocalEndpoint(protocol.ticket_from_flight(
            endpoint.ticket.ticket, self.secret, max_age=self.config.ticket_max_age_s))

    def _plan(self, call: CallContext, bucket: str, key: str,
              input_serialization: Mapping[str, Any] | None, expression: str, flavor: str,
              scan_range: Callable[[int], tuple[int, int] | None] | None,
              stop: threading.Event) -> tuple[ObjectInfo, SelectPlan, StoppableSource]:
        """One object's plan (planning and each partition alike): access, the object, its
        InputSerialization, the plan (``scan_range`` the request's ScanRange for the object's
        size; a partition's ticket already holds it)."""
        self.check_access(call, bucket)
        obj = self.catalog.object(bucket, key)
        spec = self._input_spec(obj, input_serialization)
        source = object_source(obj, stop)
        plan = self.engine.plan(expression, source, spec, flavor=flavor,
                                scan_range=scan_range(obj.size) if scan_range else None)
        return obj, plan, source

    def _input_spec(self, obj: ObjectInfo, request: Mapping[str, Any] | None) -> InputSpec:
        """An S3 request's InputSerialization (the bucket configuration's when it has none)."""
        if request is None:
            table = self.catalog.bucket_config(obj.bucket).for_key(obj.key)
            request = table.input_serialization if table is not None else None
        return input_spec(obj, None, request)

    # ------------------------------------------------------------------ serving
    def open(self, call: CallContext, ticket: PartitionTicket, fields: dict[str, Any], *,
             context: Cancellable = _NEVER_CANCELLED, key: bytes = b"",
             to_client: Callable[[BaseException], BaseException] = _itself
             ) -> PartitionStream:
        """The stream of one partition of ``ticket``'s request for ``call``'s user (DoGet's
        work): the same checks, slot, limits and watchdog whichever door asks. ``key``: the
        signed ticket's key, checked against CancelFlightInfo; ``to_client``: how a failure
        reaches the consumer (the door's default: the error itself)."""
        self.role.check_holds(ticket.bucket, ticket.key)  # before the catalog's NoSuchBucket
        self.check_access(call, ticket.bucket)
        if key and self.is_cancelled(key):
            raise InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                      code="QueryCancelled")
        fields.update(query_id=query_id(ticket), object=f"{ticket.bucket}/{ticket.key}",
                      partition=ticket.partition.to_dict())
        obj, plan, source = self.streams.run_planning(lambda stop: self._plan(
            call, ticket.bucket, ticket.key, ticket.input_serialization, ticket.query,
            ticket.flavor, None, stop), call.is_cancelled, "planning")
        if ticket.object_version is not None and ticket.object_version != object_version([obj]):
            raise stale_ticket(ticket, self.node_name)
        source.read[0] = 0  # count what the scan reads, not the header planning peeked at
        source.processed[0] = 0
        return partition_stream(self.engine, self.streams, context, ticket, plan, source,
                                fields, key, (obj,), to_client)

    def items(self, call: CallContext, endpoint: SelectEndpoint,
              fields: dict[str, Any]) -> Iterator[Item]:
        """An endpoint's messages for the S3 door: records batches with their Progress or
        Stats metadata, as a DoGet sends them; failures are ``StorageError``. Closing the
        iterator early stops the partition's work."""
        if isinstance(endpoint, LocalEndpoint):
            stream = self.open(call, endpoint.ticket, fields)
            try:
                yield from stream.items
            finally:
                stream.items.close()
            return
        yield from self._remote(call, endpoint)

    def _remote(self, call: CallContext, endpoint: RemoteEndpoint) -> Iterator[Item]:
        """A remote endpoint read from the first of its locations that answers."""
        headers = {FLAVOR_HEADER: [call.flavor]} if call.flavor is not None else {}
        try:
            reader = self.role.open_stream(call, headers, endpoint.ticket, endpoint.locations)
        except PEER_ERRORS as exc:
            raise peer_error(exc) from None
        yield from _read(reader)


def _read(reader: flight.FlightStreamReader) -> Iterator[Item]:
    """A remote DoGet's messages as items; the stream is cancelled when left early."""
    finished = False
    try:
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                finished = True
                return
            except PEER_ERRORS as exc:
                finished = True
                raise peer_error(exc) from None
            if chunk.app_metadata is None:
                yield chunk.data
            else:
                yield chunk.data, chunk.app_metadata.to_pybytes()
    finally:
        if not finished:  # the HTTP client left: stop the node's stream
            reader.cancel()

