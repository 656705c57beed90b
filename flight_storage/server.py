"""The Flight SQL storage server: decode -> dispatch -> encode, inside one error boundary.

Every RPC decodes its command, looks up a handler in a table keyed by the command's name, and
encodes the answer. Statements are s3-select SELECTs over one object, named in SQL as
``"bucket"."key"``; they are planned here and executed partition by partition in ``DoGet`` from
signed, stateless tickets, so any server sharing the ticket secret can serve any endpoint.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.boundary import guarded, rpc_boundary
from flight_storage.catalog import Catalog, ObjectInfo
from flight_storage.config import ServerConfig
from flight_storage.engine import InputSpec, SelectEngine, SelectPlan
from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ResourceLimitError,
    StorageError,
)
from flight_storage.parameters import bind
from flight_storage.protocol import Partition, PartitionTicket, PreparedHandle, SqlInfo, pb
from flight_storage.sources import FileSource
from flight_storage.statement import split_table_reference
from select_dialect import translate

log = logging.getLogger("flight_storage.server")

SERVER_NAME = "flight-select"
SERVER_VERSION = "0.1.0"
TABLE_TYPES = ("OBJECT",)
FLAVOR_HEADER = "x-flight-select-flavor"


def _log_event(event: str, **fields: Any) -> None:
    log.info(json.dumps({"event": event, **fields}, default=str, sort_keys=True))


@dataclass(frozen=True)
class CallContext:
    """Who is calling and with which per-call options."""

    user: str | None
    flavor: str
    peer: str


class _CallInfoMiddleware(flight.ServerMiddleware):
    def __init__(self, method: str, headers: Mapping[str, list[str]]) -> None:
        self.method = method
        self.headers = headers
        self.started = time.perf_counter()
        self.call_id = uuid.uuid4().hex[:12]

    def call_completed(self, exception: BaseException | None) -> None:
        _log_event(
            "call",
            call_id=self.call_id,
            method=self.method,
            duration_ms=round((time.perf_counter() - self.started) * 1000, 2),
            status="error" if exception is not None else "ok",
            error=str(exception).split(". Detail:")[0] if exception is not None else None,
        )


class _CallInfoFactory(flight.ServerMiddlewareFactory):
    def start_call(
        self, info: flight.CallInfo, headers: Mapping[str, list[str]]
    ) -> flight.ServerMiddleware:
        return _CallInfoMiddleware(str(info.method).rsplit(".", 1)[-1], headers)


class StorageServer(flight.FlightServerBase):
    """A Flight SQL server answering s3-select queries over a data directory.

    Args:
        config: where the data is, where to listen, limits and security.

    Example:
        >>> server = StorageServer(ServerConfig(Path("data/samples")))
        >>> server.location  # doctest: +SKIP
        'grpc+tcp://127.0.0.1:40123'
    """

    def __init__(self, config: ServerConfig, **kwargs: Any) -> None:
        self.config = config
        self.catalog = Catalog(config.data_dir)
        self.engine = SelectEngine(config.engine)
        self.secret = config.ticket_secret or secrets.token_bytes(32)
        self._running = threading.BoundedSemaphore(config.max_concurrent_queries)
        scheme = config.scheme
        super().__init__(
            f"{scheme}://{config.host}:{config.port}",
            middleware={"call": _CallInfoFactory()},
            **kwargs,
        )
        public_scheme = "grpc" if scheme == "grpc+tcp" else scheme
        self.location = f"{public_scheme}://{config.host}:{self.port}"

    # ------------------------------------------------------------------ call context
    def _call_context(self, context: flight.ServerCallContext) -> CallContext:
        middleware = context.get_middleware("call")
        headers = middleware.headers if middleware is not None else {}
        flavor = (headers.get(FLAVOR_HEADER) or ["ceph"])[0].lower()
        if flavor not in ("ceph", "aws"):
            raise InvalidRequestError(f"unknown flavor {flavor!r} in {FLAVOR_HEADER}")
        user = context.peer_identity().decode() or None if context.peer_identity() else None
        return CallContext(user=user, flavor=flavor, peer=context.peer())

    def _check_access(self, call: CallContext, bucket: str) -> None:
        """Hook for per-bucket permissions; every bucket is readable without auth."""
        self.catalog.bucket_path(bucket)

    # ------------------------------------------------------------------ GetFlightInfo
    @rpc_boundary
    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        call = self._call_context(context)
        command = _descriptor_command(descriptor)
        if command[:1] == b"{":
            raise InvalidRequestError("S3 SelectObjectContent requests are not served yet")
        name, message = protocol.unpack_any(command)
        handler = self._INFO_HANDLERS.get(name)
        if handler is None:
            raise protocol.UnknownCommandError(name)
        return handler(self, call, descriptor, message)

    @rpc_boundary
    def get_schema(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        info = self.get_flight_info(context, descriptor)
        return flight.SchemaResult(info.schema)

    def _info_statement(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any
    ) -> flight.FlightInfo:
        return self._statement_info(call, descriptor, message.query, call.flavor, None)

    def _info_prepared(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any
    ) -> flight.FlightInfo:
        handle = self._decode_handle(call, message.prepared_statement_handle)
        return self._statement_info(call, descriptor, handle.query, handle.flavor,
                                    handle.parameters)

    def _statement_info(
        self,
        call: CallContext,
        descriptor: flight.FlightDescriptor,
        query: str,
        flavor: str,
        parameters: bytes | None,
    ) -> flight.FlightInfo:
        obj, plan = self._plan_statement(call, query, flavor, parameters)
        endpoints = []
        planned = plan.partitions if plan.parallel_safe else ()
        chosen = [p.partition for p in planned] or [Partition("object")]
        for partition in chosen:
            ticket = PartitionTicket(
                query=query,
                flavor=flavor,
                bucket=obj.bucket,
                key=obj.key,
                partition=partition,
                input_serialization=plan.input.to_request(),
                user=call.user,
                parameters=parameters,
            )
            endpoints.append(
                flight.FlightEndpoint(
                    protocol.ticket_to_flight(ticket, self.secret),
                    [],
                    expiration_time=_expiry(self.config.ticket_max_age_s),
                )
            )
        total_bytes = sum(p.bytes or 0 for p in plan.partitions)
        rows = [p.rows for p in plan.partitions]
        total_records = sum(r for r in rows if r is not None) if all(
            r is not None for r in rows
        ) and plan.translation.sql and not _filters_rows(plan) else -1
        _log_event(
            "plan", peer=call.peer, user=call.user, object=f"{obj.bucket}/{obj.key}",
            endpoints=len(endpoints), flavor=flavor,
        )
        return flight.FlightInfo(
            plan.arrow_schema, descriptor, endpoints, total_records, total_bytes
        )

    def _plan_statement(
        self, call: CallContext, query: str, flavor: str, parameters: bytes | None
    ) -> tuple[ObjectInfo, SelectPlan]:
        reference, sql = split_table_reference(query)
        if reference is None:
            translate(query, input_format="csv", flavor=flavor)  # report syntax errors first
            raise InvalidRequestError(
                'name the object in FROM as "bucket"."key", e.g. '
                'SELECT * FROM "sales"."orders/2024-01.csv"',
                code="MissingObject",
            )
        self._check_access(call, reference.bucket)
        obj = self.catalog.object(reference.bucket, reference.key)
        if parameters is not None:
            sql = bind(sql, protocol.handle_parameters(parameters))
        spec = self._input_spec(obj)
        source = FileSource(obj.path, f"{obj.bucket}/{obj.key}", obj.size)
        return obj, self.engine.plan(sql, source, spec, flavor=flavor)

    def _input_spec(self, obj: ObjectInfo) -> InputSpec:
        if obj.format is None:
            raise InvalidRequestError(
                f"cannot tell the format of {obj.bucket}/{obj.key} from its name",
                code="UnsupportedFormat",
            )
        table = self.catalog.bucket_config(obj.bucket).for_key(obj.key)
        return InputSpec.from_request(
            table.input_serialization if table is not None else None,
            default_format=obj.format,
            default_compression=obj.compression,
            json_lines=obj.json_lines,
        )

    def _info_metadata(
        self, call: CallContext, descriptor: flight.FlightDescriptor, message: Any
    ) -> flight.FlightInfo:
        name = message.DESCRIPTOR.name
        schema = self._METADATA_SCHEMAS[name](message)
        ticket = flight.Ticket(protocol.pack_any(message))
        return flight.FlightInfo(schema, descriptor, [flight.FlightEndpoint(ticket, [])], -1, -1)

    # ------------------------------------------------------------------ DoGet
    @rpc_boundary
    def do_get(
        self, context: flight.ServerCallContext, ticket: flight.Ticket
    ) -> flight.FlightDataStream:
        call = self._call_context(context)
        name, message = protocol.unpack_any(ticket.ticket)
        if name == "TicketStatementQuery":
            return self._serve_partition(context, call, message.statement_handle)
        builder = self._METADATA_BUILDERS.get(name)
        if builder is None:
            raise protocol.UnknownCommandError(name)
        table = builder(self, message)
        return flight.RecordBatchStream(table)

    def _serve_partition(
        self, context: flight.ServerCallContext, call: CallContext, handle: bytes
    ) -> flight.FlightDataStream:
        ticket = protocol.decode_ticket(handle, self.secret, max_age=self.config.ticket_max_age_s)
        if ticket.user != call.user:
            raise AccessDeniedError("ticket was issued to another user")
        if not self._running.acquire(blocking=False):
            raise ResourceLimitError(
                f"server is running {self.config.max_concurrent_queries} queries; retry later",
                code="SlowDown",
            )
        try:
            self._check_access(call, ticket.bucket)
            _, plan = self._plan_statement(call, ticket.query, ticket.flavor, ticket.parameters)
        except BaseException:
            self._running.release()
            raise
        schema = plan.arrow_schema
        query_id = uuid.uuid4().hex[:12]
        batches = self._stream(context, plan, ticket, query_id)
        return flight.GeneratorStream(schema, guarded(batches))

    def _stream(
        self,
        context: flight.ServerCallContext,
        plan: SelectPlan,
        ticket: PartitionTicket,
        query_id: str,
    ) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        rows = 0
        nbytes = 0
        status = "ok"
        try:
            for batch in self.engine.execute_arrow(plan, [ticket.partition]):
                if context.is_cancelled():
                    status = "cancelled"
                    return
                if time.perf_counter() - started > self.config.query_timeout_s:
                    raise ResourceLimitError(
                        f"query ran longer than {self.config.query_timeout_s} s",
                        code="QueryTimeout",
                    )
                rows += batch.num_rows
                nbytes += batch.nbytes
                yield batch
        except GeneratorExit:
            status = "disconnected"
            raise
        except StorageError as exc:
            status = exc.code
            raise
        finally:
            self._running.release()
            _log_event(
                "query",
                query_id=query_id,
                object=f"{ticket.bucket}/{ticket.key}",
                partition=ticket.partition.to_dict(),
                bytes_scanned=_partition_bytes(ticket.partition, plan),
                user=ticket.user,
                rows=rows,
                bytes=nbytes,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                status=status,
            )

    # ------------------------------------------------------------------ DoAction
    @rpc_boundary
    def do_action(
        self, context: flight.ServerCallContext, action: flight.Action
    ) -> Iterator[flight.Result]:
        call = self._call_context(context)
        handler = self._ACTION_HANDLERS.get(action.type)
        if handler is None:
            raise protocol.UnknownCommandError(action.type)
        body = action.body.to_pybytes() if action.body is not None else b""
        return iter(handler(self, call, body))

    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return [
            ("CreatePreparedStatement", "prepare an s3-select statement"),
            ("ClosePreparedStatement", "close a prepared statement"),
            ("CancelFlightInfo", "cancel a query's endpoints"),
            ("CloseSession", "close the session"),
            ("health", "server status as JSON"),
        ]

    def _action_create_prepared(self, call: CallContext, body: bytes) -> list[flight.Result]:
        request = protocol.decode_action("CreatePreparedStatement", body)
        query = request.query
        handle = PreparedHandle(query=query, flavor=call.flavor, user=call.user)
        result = pb.ActionCreatePreparedStatementResult(
            prepared_statement_handle=protocol.encode_handle(handle, self.secret)
        )
        if not protocol_has_parameters(query):
            _, plan = self._plan_statement(call, query, call.flavor, None)
            result.dataset_schema = plan.arrow_schema.serialize().to_pybytes()
        return [flight.Result(protocol.pack_any(result))]

    def _action_close_prepared(self, call: CallContext, body: bytes) -> list[flight.Result]:
        request = protocol.decode_action("ClosePreparedStatement", body)
        self._decode_handle(call, request.prepared_statement_handle)
        return []

    def _action_cancel(self, call: CallContext, body: bytes) -> list[flight.Result]:
        protocol.decode_action("CancelFlightInfo", body)
        # Streams stop when their client cancels (context.is_cancelled); nothing is queued here.
        result = pb.CancelFlightInfoResult(status=pb.CANCEL_STATUS_CANCELLED)
        return [flight.Result(result.SerializeToString())]

    def _action_close_session(self, call: CallContext, body: bytes) -> list[flight.Result]:
        result = pb.CloseSessionResult(status=pb.CloseSessionResult.CLOSED)
        return [flight.Result(result.SerializeToString())]

    def _action_health(self, call: CallContext, body: bytes) -> list[flight.Result]:
        status = {"status": "ok", "server": SERVER_NAME, "version": SERVER_VERSION,
                  "buckets": len(self.catalog.buckets())}
        return [flight.Result(json.dumps(status).encode())]

    def _decode_handle(self, call: CallContext, data: bytes) -> PreparedHandle:
        handle = protocol.decode_handle(data, self.secret, max_age=self.config.ticket_max_age_s)
        if handle.user != call.user:
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
        if name != "CommandPreparedStatementQuery":
            raise AccessDeniedError(f"{name}: this server is read-only", code="ReadOnly")
        handle = self._decode_handle(call, message.prepared_statement_handle)
        table = reader.read_all()
        batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
        bound = protocol.bind_parameters(handle, batch)
        result = pb.DoPutPreparedStatementResult(
            prepared_statement_handle=protocol.encode_handle(bound, self.secret)
        )
        writer.write(pa.py_buffer(result.SerializeToString()))

    # ------------------------------------------------------------------ metadata
    def _sql_info(self, message: Any) -> pa.Table:
        values: dict[int, Any] = {
            SqlInfo.FLIGHT_SQL_SERVER_NAME: SERVER_NAME,
            SqlInfo.FLIGHT_SQL_SERVER_VERSION: SERVER_VERSION,
            SqlInfo.FLIGHT_SQL_SERVER_ARROW_VERSION: pa.__version__,
            SqlInfo.FLIGHT_SQL_SERVER_READ_ONLY: True,
            SqlInfo.FLIGHT_SQL_SERVER_SQL: True,
            SqlInfo.FLIGHT_SQL_SERVER_SUBSTRAIT: False,
            SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION: 0,
            SqlInfo.FLIGHT_SQL_SERVER_CANCEL: True,
            SqlInfo.SQL_DDL_CATALOG: False,
            SqlInfo.SQL_DDL_SCHEMA: False,
            SqlInfo.SQL_DDL_TABLE: False,
            SqlInfo.SQL_IDENTIFIER_QUOTE_CHAR: '"',
        }
        wanted = list(message.info) or list(values)
        chosen = {k: values[k] for k in wanted if k in values}
        return pa.Table.from_batches([protocol.build_sql_info(chosen)])

    def _catalogs(self, message: Any) -> pa.Table:
        return pa.Table.from_pylist([], schema=protocol.CATALOGS_SCHEMA)

    def _db_schemas(self, message: Any) -> pa.Table:
        pattern = message.db_schema_filter_pattern if message.HasField(
            "db_schema_filter_pattern") else None
        rows = [
            {"catalog_name": None, "db_schema_name": b}
            for b in self.catalog.buckets()
            if _like(b, pattern)
        ]
        return pa.Table.from_pylist(rows, schema=protocol.DB_SCHEMAS_SCHEMA)

    def _tables(self, message: Any) -> pa.Table:
        schema_pattern = message.db_schema_filter_pattern if message.HasField(
            "db_schema_filter_pattern") else None
        table_pattern = message.table_name_filter_pattern if message.HasField(
            "table_name_filter_pattern") else None
        types = set(message.table_types)
        rows = []
        if types and not types & set(TABLE_TYPES):
            buckets: list[str] = []
        else:
            buckets = [b for b in self.catalog.buckets() if _like(b, schema_pattern)]
        for bucket in buckets:
            for obj in self.catalog.objects(bucket):
                if obj.format is None or not _like(obj.key, table_pattern):
                    continue
                row: dict[str, Any] = {
                    "catalog_name": None,
                    "db_schema_name": bucket,
                    "table_name": obj.key,
                    "table_type": TABLE_TYPES[0],
                }
                if message.include_schema:
                    row["table_schema"] = self._object_schema(obj).serialize().to_pybytes()
                rows.append(row)
        schema = (
            protocol.TABLES_SCHEMA_WITH_SCHEMA if message.include_schema else protocol.TABLES_SCHEMA
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def _object_schema(self, obj: ObjectInfo) -> pa.Schema:
        source = FileSource(obj.path, f"{obj.bucket}/{obj.key}", obj.size)
        try:
            plan = self.engine.plan("SELECT * FROM s3object", source, self._input_spec(obj))
        except StorageError as exc:
            log.warning("no schema for %s/%s: %s", obj.bucket, obj.key, exc)
            return pa.schema([])
        return plan.arrow_schema

    def _table_types(self, message: Any) -> pa.Table:
        return pa.Table.from_pylist(
            [{"table_type": t} for t in TABLE_TYPES], schema=protocol.TABLE_TYPES_SCHEMA
        )

    _INFO_HANDLERS: Mapping[str, Callable[..., flight.FlightInfo]] = {
        "CommandStatementQuery": _info_statement,
        "CommandPreparedStatementQuery": _info_prepared,
        "CommandGetSqlInfo": _info_metadata,
        "CommandGetCatalogs": _info_metadata,
        "CommandGetDbSchemas": _info_metadata,
        "CommandGetTables": _info_metadata,
        "CommandGetTableTypes": _info_metadata,
    }
    _METADATA_SCHEMAS: Mapping[str, Callable[[Any], pa.Schema]] = {
        "CommandGetSqlInfo": lambda m: protocol.SQL_INFO_SCHEMA,
        "CommandGetCatalogs": lambda m: protocol.CATALOGS_SCHEMA,
        "CommandGetDbSchemas": lambda m: protocol.DB_SCHEMAS_SCHEMA,
        "CommandGetTables": lambda m: (
            protocol.TABLES_SCHEMA_WITH_SCHEMA if m.include_schema else protocol.TABLES_SCHEMA
        ),
        "CommandGetTableTypes": lambda m: protocol.TABLE_TYPES_SCHEMA,
    }
    _METADATA_BUILDERS: Mapping[str, Callable[..., pa.Table]] = {
        "CommandGetSqlInfo": _sql_info,
        "CommandGetCatalogs": _catalogs,
        "CommandGetDbSchemas": _db_schemas,
        "CommandGetTables": _tables,
        "CommandGetTableTypes": _table_types,
    }
    _ACTION_HANDLERS: Mapping[str, Callable[..., list[flight.Result]]] = {
        "CreatePreparedStatement": _action_create_prepared,
        "ClosePreparedStatement": _action_close_prepared,
        "CancelFlightInfo": _action_cancel,
        "CloseSession": _action_close_session,
        "health": _action_health,
    }


def protocol_has_parameters(query: str) -> bool:
    """True when the statement has ``?`` markers (its schema waits for the bound values)."""
    from flight_storage.parameters import placeholder_offsets

    try:
        return bool(placeholder_offsets(query))
    except StorageError:
        return False


def _descriptor_command(descriptor: flight.FlightDescriptor) -> bytes:
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise InvalidRequestError("only command descriptors are supported")
    return bytes(descriptor.command)


def _expiry(max_age_s: int) -> Any:
    import datetime as dt

    return pa.scalar(
        dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=max_age_s),
        type=pa.timestamp("ns", tz="UTC"),
    )


def _partition_bytes(partition: Partition, plan: SelectPlan) -> int:
    if partition.kind == "byte_range" and partition.start is not None and partition.end is not None:
        return partition.end - partition.start
    for planned in plan.partitions:
        if planned.partition == partition and planned.bytes is not None:
            return planned.bytes
    return plan.source.size


def _filters_rows(plan: SelectPlan) -> bool:
    sql = plan.translation.sql.upper()
    return " WHERE " in sql or " LIMIT " in sql or plan.translation.is_aggregate


def _like(value: str, pattern: str | None) -> bool:
    """SQL LIKE as Flight SQL filter patterns use it (``%`` and ``_``)."""
    if pattern is None or pattern == "":
        return True
    import re

    regex = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern
    )
    return re.fullmatch(regex, value, re.S) is not None
