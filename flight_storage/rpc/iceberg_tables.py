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
from flight_storage.errors import InvalidRequestError, StorageError
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.iceberg_scan import (
    IcebergPlan,
    IcebergTableName,
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
from flight_storage.request.statement import TableReference, split_table_reference
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.endpoints import endpoint_partitions, known_rows, query_id, ticket_key
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.streams import QueryStream, ReadCounter, StreamPool
from flight_storage.storage.catalog import Catalog
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


def iceberg_reference(query: str, catalogs: IcebergCatalogs,
                      buckets: Catalog | None = None) -> TableReference | None:
    """The Iceberg table a statement reads (None: it reads an object, or nothing).

    A three-part name whose first part is no Iceberg catalog but a bucket of ``buckets`` is
    ``"bucket"."schema"."table"``, a table of that bucket (``TableReference.as_object``).

    Besides ``"catalog"."namespace"."table"``, a two-part name whose first part is a configured
    catalog, ``"catalog"."namespace.table"``, names a table too (the last dot ends the
    namespace): the form clients that name a table as ``bucket/key`` send (the DataFusion and
    Spark sources: ``lake/sales.orders``)."""
    reference, _ = split_table_reference(query)
    if reference is None:
        return None
    if reference.is_iceberg:
        if (reference.bucket not in catalogs and buckets is not None
                and _is_bucket(buckets, reference.bucket)):
            return None
        return reference
    namespace, dot, table = reference.key.rpartition(".")
    if reference.bucket in catalogs and dot and namespace and table:
        return TableReference(reference.bucket, namespace, None, table)
    return None


def _is_bucket(buckets: Catalog, name: str) -> bool:
    try:
        buckets.store(name)
    except StorageError:
        return False
    return True


def _name(reference: TableReference) -> IcebergTableName:
    assert reference.table is not None
    return IcebergTableName(reference.bucket, reference.key, reference.table,
                            reference.version, reference.as_of)


def plan_statement(host: IcebergHost, call: CallContext, query: str, flavor: str,
                   parameters: bytes | None) -> IcebergPlan:
    """Plan a statement over an Iceberg table (under a compute slot and the query timeout)."""
    host.check_query_length(query)
    refuse_writes(query)

    def plan(stop: threading.Event) -> IcebergPlan:  # noqa: ARG001 - bounded()'s work takes the stop event
        _, sql = split_table_reference(query)
        reference = iceberg_reference(query, host.iceberg)
        assert reference is not None
        host.iceberg.catalog(reference.bucket)  # NoSuchCatalog before AccessDenied
        host.check_access(call, reference.bucket)
        return plan_iceberg(host.engine, host.iceberg, _name(reference),
                            bound_sql(sql, parameters), flavor=flavor)

    return host.bounded(call, "planning", plan)


def statement_info(host: IcebergHost, call: CallContext, descriptor: flight.FlightDescriptor,
                   query: str, flavor: str, parameters: bytes | None,
                   fields: dict[str, Any]) -> flight.FlightInfo:
    """GetFlightInfo of a statement over an Iceberg table: a ticket per ``files`` partition."""
    planned = plan_statement(host, call, query, flavor, parameters)
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
    _, sql = split_table_reference(ticket.query)
    reference = iceberg_reference(ticket.query, host.iceberg)
    if (reference is None
            or (reference.bucket, f"{reference.key}.{reference.table}")
            != (ticket.bucket, ticket.key)):
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
    name = _name(reference)
    bound = bound_sql(sql, ticket.parameters)
    plan, ids = host.bounded(call, "planning", lambda _stop: replan(
        host.engine, host.iceberg, name, bound, flavor=ticket.flavor,
        snapshot_id=partition.snapshot or 0))

    def produce() -> Iterator[pa.RecordBatch]:
        return execute_iceberg(host.engine, host.iceberg, plan, ids, partition)

    schema = plan.arrow_schema
    stream = QueryStream(produce=produce, schema=schema, source=ReadCounter(), context=context,
                         pool=host.streams, fields=fields, stop_key=key)
    return flight.GeneratorStream(schema, guarded(stream))
