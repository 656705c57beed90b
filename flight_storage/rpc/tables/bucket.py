"""A bucket's table behind the seam: one object, or a prefix table (the union of the objects
under a configured prefix), read by the engine (``execution/engine.py``), from its decoded copy
where the cache holds one.

A statement's GetFlightInfo resolves the table (``request/tables.resolve_table``: sniffed
where the flavour and the table's rule say so, S3 Select's reading otherwise), plans it and
cuts the plan into ``StatementTicket``s, one per byte range or row group
(``rpc/endpoints.endpoint_partitions``). DoGet of one resolves and plans the statement again,
cut as its GetFlightInfo cut it, and refuses a ticket whose objects changed since.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError, StorageError
from flight_storage.execution.plan_types import SelectPlan
from flight_storage.protocol import StatementTicket, WholeObject
from flight_storage.request.table_kinds import BucketTable
from flight_storage.request.tables import ResolvedTable, object_version, resolve_table
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.column_metadata import describe_columns
from flight_storage.rpc.endpoints import (
    endpoint_partitions,
    known_rows,
    query_id,
    stale_ticket,
    ticket_key,
)
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.partition_streams import partition_stream
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.sessions import qualify
from flight_storage.rpc.streams import StoppableSource, object_sources
from flight_storage.rpc.tables.seam import (
    OBJECT_TABLE_TYPE,
    PREFIX_TABLE_TYPE,
    TABLE_TYPES,
    ListedTable,
    Planned,
    Statement,
    TableFilter,
)
from flight_storage.storage.catalog import ObjectInfo, ingested_table

log = logging.getLogger(__name__)


class BucketKind:
    """One object or a prefix table of a bucket."""

    ticket: ClassVar[type[StatementTicket]] = StatementTicket
    datafusion_may_plan: ClassVar[bool] = True

    def plan(self, host: ServerParts, call: CallContext, read: BucketTable, statement: Statement,
             stop: threading.Event) -> Planned:
        assert statement.session is not None  # the plan path resolved the caller's
        reference = qualify(host.catalog, statement.session, read.reference)
        table, plan, _ = plan_table(host, call, reference.bucket, reference.key,
                                    reference.input_serialization,
                                    bound_sql(read.sql, statement.parameters),
                                    statement.flavor, stop)
        return Planned(self, statement, plan, table)

    def check(self, host: ServerParts, call: CallContext, read: BucketTable,
              statement: Statement) -> None:
        assert statement.session is not None  # the plan path resolved the caller's
        reference = qualify(host.catalog, statement.session, read.reference)
        host.check_access(call, reference.bucket)
        # the table rule (a prefix or an object), not the object rule: "orders/" is a key no
        # object can have, but a configured prefix's name
        resolve_table(host.catalog, reference.bucket, reference.key)

    def schema(self, host: ServerParts, call: CallContext, read: BucketTable) -> pa.Schema:
        reference = read.reference
        _, plan, _ = plan_table(host, call, reference.bucket, reference.key, None, read.sql,
                                call.statement_flavor, threading.Event())
        return describe_columns(plan.arrow_schema)

    def listed(self, host: ServerParts, call: CallContext,
               wanted: TableFilter) -> list[ListedTable]:
        """Each readable bucket's configured prefixes (``view``) and objects (``table``; an
        ingested table once, by the name users write, rather than its part files)."""
        if not wanted.wants_catalog("") or not any(map(wanted.wants_type, TABLE_TYPES)):
            return []  # buckets have no catalog
        found = []
        for bucket in filter(wanted.wants_schema, host.readable_buckets(call)):
            try:
                configured = host.catalog.bucket_config(bucket).tables
            except StorageError as exc:  # one bucket's broken file must not hide the others
                log.warning("bucket %s: %s", bucket, exc)
                configured = ()
            names = [(t.prefix, PREFIX_TABLE_TYPE) for t in configured]
            for o in host.catalog.objects(bucket):
                name = ingested_table(o.key) or o.key
                if o.format is not None and (name, OBJECT_TABLE_TYPE) not in names[-1:]:
                    names.append((name, OBJECT_TABLE_TYPE))
            found += [ListedTable(None, bucket, name, table_type, (bucket, name))
                      for name, table_type in names if wanted.wants(name, table_type)]
        return found

    def flight_info(self, host: ServerParts, call: CallContext,
                    descriptor: flight.FlightDescriptor, planned: Planned,
                    fields: dict[str, Any]) -> flight.FlightInfo:
        table, plan, statement = planned.read, planned.plan, planned.statement
        assert isinstance(table, ResolvedTable)
        assert isinstance(plan, SelectPlan)
        partitions = [WholeObject()] if call.single_endpoint else endpoint_partitions(plan)
        tickets = host.issue(StatementTicket, call, statement.query, statement.flavor,
                             table.bucket, table.key, partitions,
                             input_serialization=plan.input.to_request(),
                             parameters=statement.parameters, object_version=table.version)
        fields["endpoints_for"] = call.endpoints_reason
        return host.tickets_info(plan.arrow_schema, descriptor, tickets, plan,
                                 known_rows(plan), fields)

    def open(self, host: ServerParts, context: flight.ServerCallContext, call: CallContext,
             ticket: StatementTicket, handle: bytes,
             fields: dict[str, Any]) -> flight.FlightDataStream:
        host.check_holds(ticket.bucket, ticket.key)  # before the catalog's NoSuchBucket
        host.check_access(call, ticket.bucket)
        key = ticket_key(handle)
        if host.is_cancelled(key):
            raise InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                      code="QueryCancelled")
        fields.update(query_id=query_id(ticket), object=f"{ticket.bucket}/{ticket.key}",
                      partition=ticket.partition.to_dict())
        source, plan, objects = host.bounded(
            call, "planning", lambda stop: _plan_ticket(host, call, ticket, stop))
        stream = partition_stream(host.engine, host.streams, context, ticket, plan, source,
                                  fields, key, objects)
        return flight.GeneratorStream(stream.schema, guarded(stream.items))


def plan_table(host: ServerParts, call: CallContext, bucket: str, key: str,
               overrides: Mapping[str, Any] | None, sql: str, flavor: str,
               stop: threading.Event
               ) -> tuple[ResolvedTable, SelectPlan, list[StoppableSource]]:
    """A statement over a bucket's table: access, the table resolved, its plan (GetFlightInfo,
    DoGet and GetTables' schemas alike; the sources share the call's stop switch)."""
    host.check_access(call, bucket)
    table = resolve(host, bucket, key, overrides, flavor)
    sources = object_sources(table.objects, stop)
    return table, host.engine.plan(sql, sources, table.input, flavor=flavor,
                                   parallelism=call.parallelism), sources


def resolve(host: ServerParts, bucket: str, key: str, overrides: Mapping[str, Any] | None,
            flavor: str) -> ResolvedTable:
    """A Flight SQL statement's table: sniffed where ``flavor`` and the table's rule
    (``request/sniffing.py``) say so, S3 Select's reading otherwise."""
    sniffer = host.sniffer if host.sniffer.applies(flavor) else None
    return resolve_table(host.catalog, bucket, key, overrides, sniffer=sniffer,
                         bad_values=host.config.reading.bad_values)


def _plan_ticket(host: ServerParts, call: CallContext, ticket: StatementTicket,
                 stop: threading.Event
                 ) -> tuple[StoppableSource, SelectPlan, Sequence[ObjectInfo]]:
    """A statement's DoGet plan, the way GetFlightInfo planned it."""
    read = host.table_of(ticket.query)
    if (not isinstance(read, BucketTable)
            or not read.reference.names(ticket.bucket, ticket.key)):
        raise protocol.TicketError("ticket does not match its statement")
    table, plan, sources = plan_table(  # cut as its GetFlightInfo cut it
        host, replace(call, parallelism=ticket.parallelism), ticket.bucket, ticket.key,
        read.reference.input_serialization, bound_sql(read.sql, ticket.parameters),
        ticket.flavor, stop)
    objects: Sequence[ObjectInfo] = table.objects
    if ticket.object_version is not None and ticket.object_version != object_version(objects):
        raise stale_ticket(ticket, host.node_name)
    sources[0].read[0] = 0  # count what the scan reads, not the header planning peeked at
    sources[0].processed[0] = 0
    return sources[0], plan, objects

