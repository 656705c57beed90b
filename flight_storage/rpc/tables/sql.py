"""Statements DataFusion plans over the tables they name (the standard surface's JOINs, CTEs,
subqueries, window functions and DataFusion's functions): ``select_dialect/sql_surface.py``
says which, ``execution/datafusion_sql.py`` plans and runs them.

The plan path (``kinds.plan_statement``) asks :func:`plan_either` which plan a statement gets:
one the s3-select translation reads (one table, S3 Select's expressions) is its table kind's,
with that kind's endpoints; one that names several tables, or that the translation refuses as
unsupported, is DataFusion's here (:class:`SqlKind`): one ``sql`` ticket, one endpoint. The ticket is
as stateless as the others: it carries the statement, the session's catalog and schema its
one-part names resolve in (as ``bucket`` and ``key``) and the fingerprint of every table's
objects, so DoGet resolves and plans again and refuses a table that changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError, StaleTicketError, StorageError
from flight_storage.execution.datafusion_sql import (
    SqlPlan,
    SqlTable,
    execute_sql,
    plan_sql,
    table_plan,
)
from flight_storage.protocol import PlanDescription, SqlTicket, WholeObject
from flight_storage.request.statement import TableReference
from flight_storage.request.table_kinds import IcebergTable, named_table
from flight_storage.request.tables import object_version
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.endpoints import expiry, query_id, ticket_key
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.sessions import Session, qualify
from flight_storage.rpc.streams import QueryStream, ReadCounter, object_sources
from flight_storage.rpc.tables.bucket import resolve
from flight_storage.rpc.tables.seam import Planned, Statement
from flight_storage.storage.catalog import ObjectInfo
from select_dialect.errors import (
    QuerySyntaxError,
    SelectDialectError,
    TableShapeError,
    UnsupportedFeatureError,
)
from select_dialect.flavors import FLAVORS
from select_dialect.sql_surface import TableName, parse_sql


def plan_either(host: ServerParts, call: CallContext, statement: Statement,
                one_table: Callable[[], Planned]) -> Planned:
    """The table kind's plan (``one_table``) where the s3-select translation reads the
    statement, else DataFusion's plan over the tables it names (:class:`SqlKind`'s). A
    statement of one table the translation refuses as unsupported or does not parse goes to
    DataFusion; where DataFusion cannot plan it either, a syntax error is the translation's
    (line and column as written), anything else DataFusion's, naming the function or clause."""
    if not FLAVORS[statement.flavor].datafusion_sql:
        return one_table()
    parsed = parse_sql(bound_sql(statement.query, statement.parameters))
    if parsed is None:
        return one_table()
    refused: SelectDialectError | None = None
    if parsed.one_table:
        try:
            return one_table()
        except TableShapeError:
            raise  # the table cannot serve it, whichever engine plans the statement
        except (UnsupportedFeatureError, QuerySyntaxError) as exc:
            refused = exc  # what the s3-select translation does not speak, DataFusion may
    session = statement.session
    assert session is not None  # the plan path resolved the caller's
    try:
        plan = host.bounded(call, "planning", lambda stop: _plan(
            host, call, statement.query, statement.flavor, statement.parameters, session,
            stop))
    except (StorageError, SelectDialectError):
        if isinstance(refused, QuerySyntaxError):
            raise refused from None  # where it is wrong, as the user wrote it
        raise
    return Planned(SQL, statement, plan)


def _plan(host: ServerParts, call: CallContext, query: str, flavor: str,
          parameters: bytes | None, session: Session, stop: threading.Event) -> SqlPlan:
    """The statement's plan; its ``version`` the fingerprint of every table's objects."""
    sql = bound_sql(query, parameters)
    statement = parse_sql(sql)
    if statement is None:
        raise InvalidRequestError("the statement no longer parses as SQL")
    tables = []
    objects: list[ObjectInfo] = []
    for name in statement.tables:
        bucket, key = _resolved(host, session, name)
        host.check_access(call, bucket)
        table = resolve(host, bucket, key, None, flavor)
        sources = object_sources(table.objects, stop)
        objects += table.objects
        tables.append(SqlTable(name, table_plan(host.engine, sources, table.input,
                                                flavor=flavor)))
    return plan_sql(host.engine, sql, tables, flavor=flavor, version=object_version(objects))


def _resolved(host: ServerParts, session: Session, name: TableName) -> tuple[str, str]:
    """The bucket and key a table name reads: a one-part name in the session, a two-part one
    as ``"bucket"."key"``, a three-part one as ``"bucket"."schema"."table"``."""
    parts = name.written
    if len(parts) == 1:
        reference = qualify(host.catalog, session, TableReference("", parts[0], qualified=False))
        return reference.bucket, reference.key
    written = TableReference(parts[0], parts[1], None, parts[2] if len(parts) == 3 else None)
    table = named_table(written, "", host.iceberg, host.catalog)
    if isinstance(table, IcebergTable):
        host.iceberg.catalog(table.reference.bucket)  # NoSuchCatalog, as read alone
        raise UnsupportedFeatureError(
            f"{name.sql} is an Iceberg table: it is read alone (no JOIN or CTE with other "
            "tables yet); query it by itself")
    return table.reference.bucket, table.reference.key


class SqlKind:
    """DataFusion's plan over the tables a statement names: one ``sql`` ticket, one endpoint
    on this server. The ticket carries the session's catalog and schema its one-part names
    resolve in (as ``bucket`` and ``key``) and the fingerprint of every table's objects."""

    ticket: ClassVar[type[SqlTicket]] = SqlTicket

    def flight_info(self, host: ServerParts, call: CallContext,
                    descriptor: flight.FlightDescriptor, planned: Planned,
                    fields: dict[str, Any]) -> flight.FlightInfo:
        plan, statement, session = planned.plan, planned.statement, planned.statement.session
        assert isinstance(plan, SqlPlan)
        assert session is not None
        ticket = host.issue(SqlTicket, call, statement.query, statement.flavor,
                            session.catalog or "", session.schema or "", [WholeObject()],
                            parameters=statement.parameters, object_version=plan.version)[0]
        endpoint = flight.FlightEndpoint(
            protocol.ticket_to_flight(ticket, host.secret), [],
            expiration_time=expiry(ticket.issued_at + host.config.ticket_max_age_s))
        fields.update(query_id=query_id(ticket),
                      object=",".join(t.name.sql for t in plan.tables),
                      endpoints=1, flavor=statement.flavor, reader="datafusion")
        about = PlanDescription(reader="datafusion", endpoints=1,
                                cores=host.engine.config.parallelism, limit_counts_input=False,
                                tables=len(plan.tables))
        return flight.FlightInfo(plan.arrow_schema, descriptor, [endpoint], -1, plan.bytes,
                                 app_metadata=about.to_json())

    def open(self, host: ServerParts, context: flight.ServerCallContext, call: CallContext,
             ticket: SqlTicket, handle: bytes,
             fields: dict[str, Any]) -> flight.FlightDataStream:
        """The statement resolved and planned again, then run."""
        key = ticket_key(handle)
        if host.is_cancelled(key):
            raise InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                      code="QueryCancelled")
        session = Session(ticket.bucket or None, ticket.key or None)
        plan = host.bounded(call, "planning", lambda stop: _plan(
            host, call, ticket.query, ticket.flavor, ticket.parameters, session, stop))
        if ticket.object_version is not None and ticket.object_version != plan.version:
            raise StaleTicketError("a table of the statement changed after it was planned; "
                                   "plan it again (GetFlightInfo)", code="PreconditionFailed")
        fields.update(query_id=query_id(ticket),
                      object=",".join(t.name.sql for t in plan.tables))

        def produce() -> Iterator[pa.RecordBatch]:
            return execute_sql(host.engine, plan)

        stream = QueryStream(produce=produce, schema=plan.arrow_schema, source=ReadCounter(),
                             context=context, pool=host.streams, fields=fields, stop_key=key)
        return flight.GeneratorStream(plan.arrow_schema, guarded(stream))


SQL = SqlKind()
"""The one DataFusion plan kind (``kinds.py`` serves its tickets)."""
