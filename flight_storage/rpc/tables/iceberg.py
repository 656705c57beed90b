"""An Iceberg table behind the seam: a statement over ``"catalog"."namespace"."table"``
planned into ``files`` tickets in GetFlightInfo, one of them served in DoGet.

Planning and reading are ``execution/iceberg_scan.py``'s, the catalogs
``storage/iceberg_catalog.py``'s. A ticket is as stateless as an object's: it carries the
statement, the snapshot id and the data files of its endpoint, signed; DoGet translates the
statement again for that snapshot's schema and reads exactly those files, so a commit between
planning and reading never mixes snapshots.

Access: an Iceberg catalog's name is checked against a user's buckets (a users file lists
catalogs beside buckets).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any, ClassVar, Final

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError, StorageError
from flight_storage.execution.iceberg_scan import (
    IcebergPlan,
    arrow_schema,
    execute_iceberg,
    plan_iceberg,
    replan,
    whole_partition,
)
from flight_storage.execution.plan_types import PlannedPartition
from flight_storage.protocol import IcebergFiles, IcebergTicket, is_whole_object
from flight_storage.request.table_kinds import IcebergTable
from flight_storage.rpc import access
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.column_metadata import describe_columns
from flight_storage.rpc.endpoints import endpoint_partitions, known_rows, query_id, ticket_key
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.streams import QueryStream, ReadCounter
from flight_storage.rpc.tables.seam import (
    OBJECT_TABLE_TYPE,
    ListedTable,
    Planned,
    Statement,
    TableFilter,
)

log = logging.getLogger(__name__)

EVERY_TABLE: Final = TableFilter()
"""A GetTables call without filters."""


class IcebergKind:
    """A table of an Iceberg catalog (``--iceberg``)."""

    ticket: ClassVar[type[IcebergTicket]] = IcebergTicket
    datafusion_may_plan: ClassVar[bool] = False

    def plan(self, host: ServerParts, call: CallContext, read: IcebergTable, statement: Statement,
             stop: threading.Event) -> Planned:  # noqa: ARG002 - TableKind.plan
        catalog = read.reference.bucket
        host.iceberg.catalog(catalog)  # NoSuchCatalog before AccessDenied
        host.check_access(call, catalog)
        planned = plan_iceberg(host.engine, host.iceberg, read.name,
                               bound_sql(read.sql, statement.parameters),
                               flavor=statement.flavor)
        return Planned(self, statement, planned.plan, planned)

    def check(self, host: ServerParts, call: CallContext, read: IcebergTable,
              statement: Statement) -> None:  # noqa: ARG002 - TableKind.check
        host.check_access(call, read.reference.bucket)  # the catalog

    def schema(self, host: ServerParts, call: CallContext, read: IcebergTable) -> pa.Schema:
        """The current snapshot's columns as a statement's plan has them (without planning
        the scan: no manifest is read)."""
        name = read.name
        loaded = host.iceberg.table(name.catalog, name.namespace, name.table)
        plan = host.engine.plan_table("SELECT * FROM s3object", arrow_schema(loaded.schema()),
                                      flavor=call.statement_flavor)
        return describe_columns(plan.arrow_schema)

    def listed(self, host: ServerParts, call: CallContext,
               wanted: TableFilter) -> list[ListedTable]:
        """Each table of the readable catalogs' namespaces, a ``table``."""
        if not wanted.wants_type(OBJECT_TABLE_TYPE):
            return []
        found = []
        for catalog, namespace in namespaces(host, call, wanted):
            if not wanted.wants_schema(namespace):
                continue
            try:
                tables = host.iceberg.tables(catalog, namespace)
            except StorageError as exc:
                log.warning("Iceberg catalog %s, namespace %s: %s", catalog, namespace, exc)
                continue
            found += [ListedTable(catalog, namespace, table, OBJECT_TABLE_TYPE,
                                  (catalog, namespace, table))
                      for table in tables if wanted.wants(table, OBJECT_TABLE_TYPE)]
        return found

    def flight_info(self, host: ServerParts, call: CallContext,
                    descriptor: flight.FlightDescriptor, planned: Planned,
                    fields: dict[str, Any]) -> flight.FlightInfo:
        """A ticket per ``files`` partition."""
        iceberg, statement = planned.read, planned.statement
        assert isinstance(iceberg, IcebergPlan)
        plan = iceberg.plan
        if call.single_endpoint or is_whole_object(endpoint_partitions(plan)):
            # every file in one endpoint: the plan's one partition (its sizes the sum of all)
            whole = PlannedPartition(whole_partition(plan),
                                     bytes=sum(p.bytes or 0 for p in plan.partitions),
                                     rows=sum(p.rows or 0 for p in plan.partitions))
            plan = dataclasses.replace(plan, partitions=(whole,))
        name = iceberg.name
        tickets = host.issue(IcebergTicket, call, statement.query, statement.flavor,
                             name.catalog, f"{name.namespace}.{name.table}",
                             [p.partition for p in plan.partitions],
                             parameters=statement.parameters,
                             object_version=f"snapshot:{iceberg.snapshot}")
        return host.tickets_info(plan.arrow_schema, descriptor, tickets, plan,
                                 known_rows(plan), fields, iceberg.about)

    def open(self, host: ServerParts, context: flight.ServerCallContext, call: CallContext,
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
                                 "snapshot": partition.snapshot,
                                 "split": list(partition.split)})
        name = table.name
        bound = bound_sql(table.sql, ticket.parameters)
        plan, ids = host.bounded(call, "planning", lambda _stop: replan(
            host.engine, host.iceberg, name, bound, flavor=ticket.flavor,
            snapshot_id=partition.snapshot or 0))

        def produce() -> Iterator[pa.RecordBatch]:
            return execute_iceberg(host.engine, host.iceberg, plan, ids, partition)

        schema = plan.arrow_schema
        stream = QueryStream(produce=produce, schema=schema, source=ReadCounter(),
                             context=context, pool=host.streams, fields=fields, stop_key=key)
        return flight.GeneratorStream(schema, guarded(stream))


def readable_catalogs(host: ServerParts, call: CallContext,
                      wanted: TableFilter = EVERY_TABLE) -> list[str]:
    """The Iceberg catalogs the caller may read that ``wanted`` asks for (an empty catalog
    means "no catalog", as buckets are: none of these)."""
    return [name for name in access.readable(call.user, host.iceberg.names())
            if wanted.wants_catalog(name)]


def namespaces(host: ServerParts, call: CallContext,
               wanted: TableFilter = EVERY_TABLE) -> list[tuple[str, str]]:
    """(catalog, namespace) of every readable Iceberg catalog ``wanted`` asks for; a catalog
    that cannot be listed is logged and left out (the others still answer)."""
    found = []
    for name in readable_catalogs(host, call, wanted):
        try:
            found += [(name, ns) for ns in host.iceberg.namespaces(name)]
        except StorageError as exc:
            log.warning("Iceberg catalog %s: %s", name, exc)
    return found
