"""The Flight SQL storage server: decode -> dispatch -> encode, inside one error boundary.

Every RPC decodes its command, looks up a handler in a table keyed by the command's name, and
encodes the answer. Statements are s3-select SELECTs over one object, named in SQL as
``"bucket"."key"``; a descriptor command may also be a JSON S3 SelectObjectContent request
(``flight_storage.request.s3_request``). Both are planned in ``GetFlightInfo`` and executed partition by
partition in ``DoGet`` from signed, stateless tickets, so any server sharing the ticket secret
can serve any endpoint, also after a restart.

Per call, ``flight_storage.rpc.middleware`` authenticates and logs one JSON line; metadata
commands are built in ``flight_storage.rpc.metadata`` and DoAction handlers live in
``flight_storage.rpc.actions``, each one record per command. Query execution runs in a producer
thread (``flight_storage.rpc.streams``) that holds a compute slot only while it computes, under
a watchdog that enforces the query timeout and cancels clients that stopped reading.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import AccessDeniedError, InvalidRequestError
from flight_storage.execution.engine import SelectEngine, SelectPlan
from flight_storage.protocol import Partition, PartitionTicket, PreparedHandle, pb
from flight_storage.protocol.signing import Secret, Signer
from flight_storage.request.s3_request import (
    is_json_request,
    parse_request,
)
from flight_storage.request.sniffing import TableSniffer
from flight_storage.request.table_kinds import (
    StatementTable,
    statement_table,
)
from flight_storage.rpc import access
from flight_storage.rpc.actions import ACTIONS
from flight_storage.rpc.auth import TokenSigner, Users
from flight_storage.rpc.boundary import client_error, guarded, rpc_boundary
from flight_storage.rpc.cancellations import Cancellations
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.endpoint_readers import choose_endpoints
from flight_storage.rpc.endpoints import (
    expiry,
    partition_bytes,
    plan_description,
    query_id,
    ticket_key,
)
from flight_storage.rpc.ingest import ingest
from flight_storage.rpc.metadata import METADATA_COMMANDS
from flight_storage.rpc.middleware import (
    CallContext,
    CallFactory,
    HandshakeHandler,
    JsonLogFormatter,
    log_event,
    named_flavor,
)
from flight_storage.rpc.prepared_parameters import BoundParameters
from flight_storage.rpc.query_service import SelectService
from flight_storage.rpc.roles.actions import planning_target
from flight_storage.rpc.roles.role import Role, server_role
from flight_storage.rpc.sessions import Session, SessionCookies, session_cookie
from flight_storage.rpc.streams import StreamPool
from flight_storage.rpc.tables import kinds
from flight_storage.rpc.tables.seam import Planned, Statement
from flight_storage.storage.catalog import Catalog
from select_dialect.translate import check_query_length

__all__ = ["JsonLogFormatter", "StorageServer"]
"""The command line's entry points (``JsonLogFormatter`` is re-exported for it)."""

log = logging.getLogger(__name__)
T = TypeVar("T")

FLAVOR_HEADER: Final = protocol.FLAVOR_HEADER
_SHUTDOWN_AFTER_ABORT_S: Final = 5.0
"""After the grace, how long ended streams get to leave gRPC before the server gives up."""


# ----------------------------------------------------------------------------- the server


class StorageServer(flight.FlightServerBase):
    """A Flight SQL server answering s3-select queries over a data directory.

    Args:
        config: where the data is, where to listen, limits and security.

    Example:
        >>> from pathlib import Path
        >>> server = StorageServer(ServerConfig(Path("data/samples"), port=0))
        >>> server.location.startswith("grpc://127.0.0.1:")
        True
        >>> server.shutdown()
    """

    def __init__(self, config: ServerConfig) -> None:
        config.check()
        self.config = config
        self.catalog = Catalog(config.bucket_sets())
        self.iceberg = config.iceberg_catalogs()  # Iceberg tables: rpc/tables/iceberg.py
        self.engine = SelectEngine(config.engine, config.engine_workers())
        self.sniffer = TableSniffer(config.reading, max_columns=config.engine.max_columns)
        self.secret: Secret = (config.ticket_secret or secrets.token_bytes(32),
                               *config.previous_ticket_secrets)  # the first signs
        self.users = Users.load(config.users_file) if config.users_file is not None else None
        self._cancellations = Cancellations(self.secret, config.ticket_max_age_s)
        self._bound = BoundParameters()
        self.streams = StreamPool(config.stream_limits, self.is_cancelled)
        self.aborting = self.streams.aborting
        keys = Signer.of(self.secret)  # protocol/signing.py: the first key signs, all verify
        signer = TokenSigner(keys.derived(b"bearer"), config.token_ttl_s)
        self.session_cookies = SessionCookies(keys.derived(b"session"), config.ticket_max_age_s)
        super().__init__(
            f"{config.scheme}://{config.host}:{config.port}",
            auth_handler=HandshakeHandler(),
            middleware={"call": CallFactory(self.users, signer)},
            **config.tls_arguments(),
        )
        public_scheme = "grpc" if config.scheme == "grpc+tcp" else config.scheme
        # a single server, or a node of a cluster or fleet (rpc/roles/): chosen once
        self.role: Role = server_role(
            config, signer, f"{public_scheme}://{config.host}:{self.port}")
        self.location = self.role.location
        # S3 requests of both doors: this server's GetFlightInfo and DoGet, and the S3 door
        self.selects = SelectService(
            catalog=self.catalog, engine=self.engine, streams=self.streams, config=config,
            check_access=self.check_access, issue=self.issue, describe=self.tickets_info,
            is_cancelled=self.is_cancelled, secret=self.secret, location=self.location,
            role=self.role)

    # ------------------------------------------------------------------ lifecycle
    def stop_gracefully(self, grace_s: float | None = None) -> bool:
        """Stop accepting calls, let running streams finish for ``grace_s``, then end the rest.

        Returns:
            True when every call ended; False when some gRPC call was still stuck (a client
            that stopped reading keeps its write pending): the caller should then exit the
            process, which closes the listening socket with it.
        """
        grace = self.config.shutdown_grace_s if grace_s is None else grace_s
        log_event("shutdown", open_streams=self.streams.open_streams, grace_s=grace)
        stopper = threading.Thread(target=self.shutdown, name="shutdown", daemon=True)
        stopper.start()
        stopper.join(grace)
        if stopper.is_alive():
            log_event("shutdown", cancelling=self.streams.abort_all())
            stopper.join(_SHUTDOWN_AFTER_ABORT_S)
        self.streams.close()
        self.engine.close()
        self.role.close()
        if stopper.is_alive():
            log_event("shutdown", stuck_calls=True)
            return False
        self.wait()
        return True

    @property
    def running_queries(self) -> int:
        """Result streams open now."""
        return self.streams.open_streams

    def is_cancelled(self, key: bytes) -> bool:
        """True when the endpoint whose ticket hashes to ``key`` was cancelled here."""
        return self._cancellations.is_cancelled(key)

    # ------------------------------------------------------------------ call context
    def _call_context(self, context: flight.ServerCallContext) -> CallContext:
        middleware = context.get_middleware("call")
        headers = middleware.headers if middleware is not None else {}
        named = headers.get(FLAVOR_HEADER)
        flavor = named_flavor(named[0] if named else None)
        endpoints = choose_endpoints(headers)
        user = middleware.user if middleware is not None else None
        if middleware is not None:
            middleware.fields["peer"] = context.peer()
        return CallContext(user=user, flavor=flavor, peer=context.peer(),
                           single_endpoint=endpoints.single, parallelism=endpoints.parallelism,
                           endpoints_reason=endpoints.reason,
                           is_cancelled=context.is_cancelled,
                           session_cookie=session_cookie(headers),
                           add_header=context.add_header)

    @staticmethod
    def _headers(context: flight.ServerCallContext) -> Mapping[str, list[str]]:
        middleware = context.get_middleware("call")
        return middleware.headers if middleware is not None else {}

    def _fields(self, context: flight.ServerCallContext) -> dict[str, Any]:
        middleware = context.get_middleware("call")
        return middleware.fields if middleware is not None else {}

    def check_access(self, call: CallContext, bucket: str) -> None:
        """Refuse buckets (and Iceberg catalogs) the caller may not read, and names that could
        leave the root."""
        if bucket not in self.iceberg:
            self.catalog.store(bucket)
        access.check_read(call.user, bucket)

    def readable_buckets(self, call: CallContext) -> list[str]:
        return access.readable(call.user, self.catalog.buckets())

    # ------------------------------------------------------------------ GetFlightInfo
    @rpc_boundary
    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        call = self._call_context(context)
        command = _descriptor_command(descriptor)
        return self.role.plan(
            call, self._headers(context), self._fields(context), descriptor,
            lambda: planning_target(self, call, command),
            local=lambda: self._local_flight_info(context, call, descriptor, command))

    def _local_flight_info(
        self, context: flight.ServerCallContext, call: CallContext,
        descriptor: flight.FlightDescriptor, command: bytes,
    ) -> flight.FlightInfo:
        if is_json_request(command):
            return self.selects.info(call, parse_request(command), descriptor,
                                     self._fields(context))
        name, message = protocol.unpack_any(command)
        handler = self._INFO_HANDLERS.get(name)
        if handler is None and name in METADATA_COMMANDS:
            handler = StorageServer._info_metadata
        if handler is None:
            raise protocol.UnknownCommandError(name)
        return handler(self, call, descriptor, message, self._fields(context))

    @rpc_boundary
    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        info = self.get_flight_info(context, descriptor)
        return flight.SchemaResult(info.schema)

    def _info_statement(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any,
        fields: dict[str, Any],
    ) -> flight.FlightInfo:
        return self._statement_info(call, descriptor, message.query, call.statement_flavor, None,
                                    fields)

    def _info_prepared(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any,
        fields: dict[str, Any],
    ) -> flight.FlightInfo:
        raw = bytes(message.prepared_statement_handle)
        handle = self.decode_handle(call, raw)
        parameters = handle.parameters
        if parameters is None:  # a client that binds, then keeps using the first handle
            parameters = self._bound.get(raw, call.user_name)
        return self._statement_info(call, descriptor, handle.query, handle.flavor,
                                    parameters, fields, Session(handle.catalog, handle.schema))

    def _statement_info(
        self,
        call: CallContext,
        descriptor: flight.FlightDescriptor,
        query: str,
        flavor: str,
        parameters: bytes | None,
        fields: dict[str, Any],
        namespace: Session | None = None,
    ) -> flight.FlightInfo:
        planned = self.plan_statement(call, Statement(query, flavor, parameters, namespace))
        return planned.kind.flight_info(self, call, descriptor, planned, fields)

    def issue(self, request: type[PartitionTicket], call: CallContext, query: str,
              flavor: str, bucket: str, key: str, partitions: Sequence[Partition], *,
              input_serialization: dict[str, Any] | None = None,
              output_serialization: dict[str, Any] | None = None,
              parameters: bytes | None = None,
              object_version: str | None = None) -> list[PartitionTicket]:
        """The one place tickets are made: one per partition, of type ``request`` (one of
        :data:`~flight_storage.protocol.tickets.PartitionTicket`'s), signed later in the
        FlightInfo."""
        issued = time.time()
        return [
            request(
                query=query, flavor=flavor, bucket=bucket, key=key, partition=p,
                input_serialization=input_serialization or {},
                output_serialization=output_serialization, user=call.user_name,
                parameters=parameters, issued_at=issued, object_version=object_version,
                planned_by=self.node_name,
                parallelism=call.parallelism if request is protocol.StatementTicket else None)
            for p in partitions
        ]

    def tickets_info(
        self,
        schema: pa.Schema,
        descriptor: flight.FlightDescriptor,
        tickets: list[PartitionTicket],
        plan: SelectPlan,
        total_records: int,
        fields: dict[str, Any],
        about_plan: protocol.PlanDescription | None = None,
    ) -> flight.FlightInfo:
        """The FlightInfo of a planned statement's tickets (``about_plan``: what
        ``app_metadata`` says of a plan the engine did not read itself, an Iceberg table's)."""
        expires = expiry(tickets[0].issued_at + self.config.ticket_max_age_s)
        first = tickets[0]
        endpoints = []
        for ticket in tickets:
            locations, about_nodes = self._where(ticket)
            endpoints.append(flight.FlightEndpoint(
                protocol.ticket_to_flight(ticket, self.secret), locations,
                expiration_time=expires, app_metadata=about_nodes))
        fields.update(query_id=query_id(first), object=f"{first.bucket}/{first.key}",
                      endpoints=len(endpoints), flavor=first.flavor,
                      reader=about_plan.reader if about_plan else plan.reader)
        total_bytes = sum(partition_bytes(ticket.partition, plan) for ticket in tickets)
        about = plan_description(plan, len(endpoints), self.engine.config.parallelism,
                                 clustered=self.role.clustered, about_plan=about_plan)
        return flight.FlightInfo(schema, descriptor, endpoints, total_records, total_bytes,
                                 app_metadata=about.to_json())

    def _where(self, ticket: PartitionTicket) -> tuple[list[flight.Location], bytes]:
        """An endpoint's locations and ``app_metadata``: none for a single server (clients
        read it here); in a cluster, the nodes that may serve it, in the order to try."""
        if not ticket.bucket:  # a statement that reads no object: served where it was asked
            return [], b""
        partition = ticket.partition.to_dict()
        return (self.role.endpoint_locations(ticket.bucket, ticket.key, partition),
                self.role.endpoint_metadata(ticket.bucket, ticket.key, partition))

    def check_query_length(self, query: str, what: str = "query text") -> None:
        """Refuse statements over ``--max-query-chars`` before any work (every entry point)."""
        check_query_length(query, self.config.engine.max_query_chars, what=what,
                           setting="--max-query-chars")

    def bounded(self, call: CallContext, what: str,
                work: Callable[[threading.Event], T]) -> T:
        """Planning-like work under a compute slot and the query timeout; ``work`` gets the
        stop switch set when the call gives up (its object sources should share it)."""
        return self.streams.run_planning(work, call.is_cancelled, what)

    def plan_statement(self, call: CallContext, statement: Statement) -> Planned:
        """A statement planned by the kind of table it reads (``rpc/tables/kinds.py``: the one
        plan path of GetFlightInfo and CreatePreparedStatement)."""
        return kinds.plan_statement(self, call, statement)

    def table_of(self, query: str) -> StatementTable:
        """Which kind of table ``query`` reads: decided here only (``request/table_kinds.py``)."""
        return statement_table(query, self.iceberg, self.catalog)

    def check_holds(self, bucket: str, key: str) -> None:
        """Refuse a ticket for an object this node does not hold (the role's rule)."""
        self.role.check_holds(bucket, key)

    def _info_metadata(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any,  # noqa: ARG002 - an _INFO_HANDLERS entry
        fields: dict[str, Any],  # noqa: ARG002 - an _INFO_HANDLERS entry
    ) -> flight.FlightInfo:
        name = message.DESCRIPTOR.name
        schema = METADATA_COMMANDS[name].schema(message)
        ticket = flight.Ticket(protocol.pack_any(message))
        return flight.FlightInfo(schema, descriptor, [flight.FlightEndpoint(ticket, [])], -1, -1)

    # ------------------------------------------------------------------ DoGet
    @rpc_boundary
    def do_get(
        self, context: flight.ServerCallContext, ticket: flight.Ticket
    ) -> flight.FlightDataStream:
        call = self._call_context(context)
        name, message = protocol.unpack_any(ticket.ticket)
        if isinstance(message, pb.TicketStatementQuery):
            return self._serve_partition(context, call, message.statement_handle)
        command = METADATA_COMMANDS.get(name)
        if command is None:
            raise protocol.UnknownCommandError(name)
        # Metadata may plan (GetTables with schemas): the same slot and deadline as queries.
        table = self.bounded(call, name, lambda _stop: command.build(self, call, message))
        return flight.RecordBatchStream(self.role.metadata(
            call, self._headers(context), self._fields(context), name, ticket, table))

    def _serve_partition(
        self, context: flight.ServerCallContext, call: CallContext, handle: bytes
    ) -> flight.FlightDataStream:
        ticket = protocol.decode_ticket(handle, self.secret, max_age=self.config.ticket_max_age_s)
        if ticket.user != call.user_name:
            raise AccessDeniedError("ticket was issued to another user")
        serve = self._DO_GET[type(ticket)]
        return serve(self, context, call, ticket, handle, self._fields(context))

    def _serve_select(
        self, context: flight.ServerCallContext, call: CallContext,
        ticket: protocol.SelectObjectTicket, handle: bytes, fields: dict[str, Any],
    ) -> flight.FlightDataStream:
        """An S3 request's partition: the query service's (``query_service.py``)."""
        select = self.selects.open(call, ticket, fields, context=context,
                                   key=ticket_key(handle), to_client=client_error)
        return flight.GeneratorStream(select.schema, guarded(select.items))

    @property
    def node_name(self) -> str | None:
        """This node's name in its cluster (None for a single server)."""
        return self.role.me

    # ------------------------------------------------------------------ unsupported RPCs
    @rpc_boundary
    def do_exchange(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor,  # noqa: ARG002 - pyarrow's FlightServerBase.do_exchange
                    reader: Any, writer: Any) -> None:  # noqa: ARG002 - pyarrow's FlightServerBase.do_exchange
        raise protocol.UnknownCommandError("DoExchange")

    @rpc_boundary
    def list_flights(self, context: flight.ServerCallContext,  # noqa: ARG002 - pyarrow's FlightServerBase.list_flights
                     criteria: bytes) -> Iterator[flight.FlightInfo]:  # noqa: ARG002 - pyarrow's FlightServerBase.list_flights
        raise protocol.UnknownCommandError(
            "ListFlights (list tables with GetTables, objects with the ListObjects action)")

    # ------------------------------------------------------------------ DoAction
    @rpc_boundary
    def do_action(
        self, context: flight.ServerCallContext, action: flight.Action
    ) -> Iterator[flight.Result]:
        call = self._call_context(context)
        entry = ACTIONS.get(action.type)
        if entry is None:
            raise protocol.UnknownCommandError(action.type)
        self._fields(context)["action"] = action.type
        body = action.body.to_pybytes() if action.body is not None else b""
        return iter(self.role.action(self, call, self._headers(context), self._fields(context),
                                        action, body, lambda: entry.handle(self, call, body)))

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:  # noqa: ARG002 - pyarrow's FlightServerBase.list_actions
        return [(name, action.description) for name, action in ACTIONS.items()]

    def cancel_endpoints(self, call: CallContext, info_bytes: bytes) -> pb.CancelStatus:
        """Mark every endpoint of a FlightInfo cancelled in this process."""
        return self._cancellations.cancel(call.user_name, info_bytes)

    def decode_handle(self, call: CallContext, data: bytes) -> PreparedHandle:
        handle = protocol.decode_handle(data, self.secret, max_age=self.config.ticket_max_age_s)
        if handle.user != call.user_name:
            raise AccessDeniedError("prepared statement belongs to another user")
        return handle

    # ------------------------------------------------------------------ DoPut
    @rpc_boundary
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        call = self._call_context(context)
        name, message = protocol.unpack_any(_descriptor_command(descriptor))
        if isinstance(message, pb.CommandStatementIngest):
            self._fields(context)["ingest"] = message.table
            ingest(self, call, message, reader, writer)
            return
        if not isinstance(message, pb.CommandPreparedStatementQuery):
            raise AccessDeniedError(f"{name}: this server is read-only", code="ReadOnly")
        raw = bytes(message.prepared_statement_handle)
        handle = self.decode_handle(call, raw)
        bound = self._bound.bind(raw, call.user_name, handle, reader,
                                 self.config.max_parameter_bytes)
        result = pb.DoPutPreparedStatementResult(
            prepared_statement_handle=protocol.encode_handle(bound, self.secret)
        )
        writer.write(pa.py_buffer(result.SerializeToString()))

    _INFO_HANDLERS: Mapping[str, Callable[..., flight.FlightInfo]] = {
        "CommandStatementQuery": _info_statement,
        "CommandPreparedStatementQuery": _info_prepared,
    }
    _DO_GET: Mapping[type[PartitionTicket], Callable[..., flight.FlightDataStream]] = {
        protocol.SelectObjectTicket: _serve_select,
        **{ticket: kind.open for ticket, kind in kinds.KIND_OF_TICKET.items()},
    }
    """DoGet's handler of each type of ticket (``protocol/tickets.py`` decodes the type): an
    S3 request's is the query service's, a statement's its kind of table's
    (``rpc/tables/kinds.py``)."""


# ----------------------------------------------------------------------------- helpers


def _descriptor_command(descriptor: flight.FlightDescriptor) -> bytes:
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise InvalidRequestError("only command descriptors are supported")
    return bytes(descriptor.command)
