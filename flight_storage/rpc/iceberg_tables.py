"""Iceberg tables over Flight SQL: a statement over ``"catalog"."namespace"."table"`` planned
into ``files`` tickets in GetFlightInfo, one of them served in DoGet.

The server's hooks call these functions (``server.py``: ``_statement_info``, ``plan_statement``
and ``_serve_partition``); planning and reading are ``execution/iceberg_scan.py``'s, the
catalogs ``storage/iceberg_catalog.py``'s. A ticket is as stateless as an object's: it carries
the statement, the snapshot id and the data files of its endpoint, signed; DoGet translates the
statement again for that snapshot's schema and reads exactly those files, so a commit between
planning and reading never mixes snapshots.

Access: an Iceberg catalog's name is checked against a user's buckets (a users file lists
catalogs beside buckets).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.iceberg_scan import (
    IcebergPlan,
    execute_iceberg,
    plan_iceberg,
    replan,
    whole_partition,
)
from flight_storage.execution.plan_types import PlannedPartition, SelectPlan
from flight_storage.protocol import (
    IcebergFiles,
    IcebergTicket,
    Partition,
    PartitionTicket,
    PlanDescription,
    is_whole_object,
)
from flight_storage.request.table_kinds import IcebergTable, StatementTable
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.endpoints import endpoint_partitions, known_rows, query_id, ticket_key
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.streams import QueryStream, ReadCounter, StreamPool
from flight_storage.storage.iceberg_catalog import IcebergCatalogs
from select_dialect.translate import refuse_writes

T = TypeVar("T")


class IcebergHost(Protocol):
    """What these functions use of the server."""

    config: ServerConfig
    engine: SelectEngine
    iceberg: IcebergCatalogs
    streams: StreamPool

    @property
    def node_name(self) -> str | None: ...

    def check_query_length(self, query: str, what: str = ...) -> None: ...

    def check_access(self, call: CallContext, bucket: str) -> None: ...

    def is_cancelled(self, key: bytes) -> bool: ...

    def table_of(self, query: str) -> StatementTable:
        """Which kind of table ``query`` reads (``request/table_kinds.py``)."""
        ...

    def issue(self, request: type[PartitionTicket], call: CallContext, query: str,
              flavor: str, bucket: str, key: str, partitions: Sequence[Partition], *,
              parameters: bytes | None = None,
              object_version: str | None = None) -> list[PartitionTicket]:
        """The server's tickets, one per partition."""
        ...

    def bounded(self, call: CallContext, what: str,
                work: Callable[[threading.Event], T]) -> T: ...

    def _flight_info(self, schema: pa.Schema, descriptor: flight.FlightDescriptor,
                     tickets: list[PartitionTicket], plan: SelectPlan, total_records: int,
                     fields: dict[str, Any], about_plan: PlanDescription | None = None
                     ) -> flight.FlightInfo:
        """The server's FlightInfo of planned tickets."""
        ...


def plan_statement(host: IcebergHost, call: CallContext, table: IcebergTable, query: str,
                   flavor: str, parameters: bytes | None) -> IcebergPlan:
    """Plan ``query``, a statement over ``table`` (under a compute slot and the query
    timeout)."""
    host.check_query_length(query)
    refuse_writes(query)

    def plan(stop: threading.Event) -> IcebergPlan:  # noqa: ARG001 - bounded()'s work takes the stop event
        catalog = table.reference.bucket
        host.iceberg.catalog(catalog)  # NoSuchCatalog before AccessDenied
        host.check_access(call, catalog)
        return plan_iceberg(host.engine, host.iceberg, table.name,
                            bound_sql(table.sql, parameters), flavor=flavor)

    return host.bounded(call, "planning", plan)


def statement_info(host: IcebergHost, call: CallContext, descriptor: flight.FlightDescriptor,
                   table: IcebergTable, query: str, flavor: str, parameters: bytes | None,
                   fields: dict[str, Any]) -> flight.FlightInfo:
    """GetFlightInfo of ``query``, a statement over ``table``: a ticket per ``files``
    partition."""
    planned = plan_statement(host, call, table, query, flavor, parameters)
    plan = planned.plan
    if call.single_endpoint or is_whole_object(endpoint_partitions(plan)):
        # every file in one endpoint: the plan's one partition (its sizes the sum of all)
        whole = PlannedPartition(whole_partition(plan),
                                 bytes=sum(p.bytes or 0 for p in plan.partitions),
                                 rows=sum(p.rows or 0 for p in plan.partitions))
        plan = dataclasses.replace(plan, partitions=(whole,))
    name = planned.name
    tickets = host.issue(IcebergTicket, call, query, flavor, name.catalog,
                         f"{name.namespace}.{name.table}",
                         [p.partition for p in plan.partitions], parameters=parameters,
                         object_version=f"snapshot:{planned.snapshot}")
    return host._flight_info(plan.arrow_schema, descriptor, tickets, plan, known_rows(plan),
                             fields, planned.about)


def serve_partition(host: IcebergHost, context: flight.ServerCallContext, call: CallContext,
                    ticket: IcebergTicket, handle: bytes,
                    fields: dict[str, Any]) -> flight.FlightDataStream:
    """DoGet of a ``files`` ticket: the statement over those data files of its snapshot."""
    table = host.table_of(ticket.query)
    if (not isinstance(table, IcebergTable)
            or (table.reference.bucket, table.key) != (ticket.bucket, ticket.key)):
        raise protocol.TicketError("ticket does not match its statement")
    host.check_access(call, ticket.bucket)
    key = ticket_key(handle)
    if host.is_cancelled(key):
        raise InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                  code="QueryCancelled")
    partition = ticket.partition
    if not isinstance(partition, IcebergFiles):
        raise protocol.TicketError("ticket does not match its statement")
    fields.update(query_id=query_id(ticket), object=f"{ticket.bucket}.{ticket.key}",
                  partition={"kind": partition.KIND, "files": len(partition.keys),
                             "snapshot": partition.snapshot, "split": list(partition.split)})
    name = table.name
    bound = bound_sql(table.sql, ticket.parameters)
    plan, ids = host.bounded(call, "planning", lambda _stop: replan(
        host.engine, host.iceberg, name, bound, flavor=ticket.flavor,
        snapshot_id=partition.snapshot or 0))

    def produce() -> Iterator[pa.RecordBatch]:
        return execute_iceberg(host.engine, host.iceberg, plan, ids, partition)

    schema = plan.arrow_schema
    stream = QueryStream(produce=produce, schema=schema, source=ReadCounter(), context=context,
                         pool=host.streams, fields=fields, stop_key=key)
    return flight.GeneratorStream(schema, guarded(stream))
