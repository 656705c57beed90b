"""Statements DataFusion plans over the tables they name (the standard surface's JOINs, CTEs,
subqueries, window functions and DataFusion's functions): ``select_dialect/sql_surface.py``
says which, ``execution/datafusion_sql.py`` plans and runs them.

The server's hooks call these functions (``server.py``: ``plan_statement``, ``_statement_info``
and ``_serve_partition``). A statement the s3-select translation reads (one table, S3 Select's
expressions) keeps its own path and endpoints; one that names several tables, or that the
translation refuses as unsupported, comes here: one ``sql`` ticket, one endpoint. The ticket is
as stateless as the others: it carries the statement, the session's catalog and schema its
one-part names resolve in (as ``bucket`` and ``key``) and the fingerprint of every table's
objects, so DoGet resolves and plans again and refuses a table that changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

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
from flight_storage.execution.engine import SelectEngine
from flight_storage.protocol import (
    Partition,
    PartitionTicket,
    PlanDescription,
    SqlTicket,
    WholeObject,
)
from flight_storage.request.statement import TableReference
from flight_storage.request.table_kinds import IcebergTable, named_table
from flight_storage.request.tables import ResolvedTable, object_version
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.endpoints import expiry, query_id, ticket_key
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.sessions import Session, SessionCookies, qualify
from flight_storage.rpc.sessions import current as current_session
from flight_storage.rpc.streams import QueryStream, ReadCounter, StreamPool, object_sources
from flight_storage.storage.catalog import Catalog, ObjectInfo
from flight_storage.storage.iceberg_catalog import IcebergCatalogs
from select_dialect.errors import (
    QuerySyntaxError,
    SelectDialectError,
    TableShapeError,
    UnsupportedFeatureError,
)
from select_dialect.flavors import FLAVORS
from select_dialect.sql_surface import TableName, parse_sql

T = TypeVar("T")
R = TypeVar("R")

class SqlHost(Protocol):
    """What these functions use of the server."""

    config: ServerConfig
    engine: SelectEngine
    catalog: Catalog
    iceberg: IcebergCatalogs
    streams: StreamPool
    secret: bytes
    session_cookies: SessionCookies

    def check_access(self, call: CallContext, bucket: str) -> None: ...

    def is_cancelled(self, key: bytes) -> bool: ...

    def resolve(self, bucket: str, key: str, overrides: Any, flavor: str) -> ResolvedTable: ...

    def issue(self, request: type[PartitionTicket], call: CallContext, query: str,
              flavor: str, bucket: str, key: str, partitions: Sequence[Partition], *,
              parameters: bytes | None = None,
              object_version: str | None = None) -> list[PartitionTicket]:
        """The server's tickets, one per partition."""
        ...

    def bounded(self, call: CallContext, what: str,
                work: Callable[[threading.Event], T]) -> T: ...


def plan_either(host: SqlHost, call: CallContext, query: str, flavor: str,
                parameters: bytes | None, session: Session,
                one_table: Callable[[], tuple[R, Any]]) -> tuple[R | None, Any]:
    """The s3-select path's ``(table, plan)`` (``one_table``) where the translation reads the
    statement, else ``(None, SqlPlan)``: DataFusion's plan over the tables it names. A
    statement of one table the translation refuses as unsupported or does not parse goes to
    DataFusion; where DataFusion cannot plan it either, a syntax error is the translation's
    (line and column as written), anything else DataFusion's, naming the function or clause."""
    if not FLAVORS[flavor].datafusion_sql:
        return one_table()
    statement = parse_sql(bound_sql(query, parameters))
    if statement is None:
        return one_table()
    refused: SelectDialectError | None = None
    if statement.one_table:
        try:
            return one_table()
        except TableShapeError:
            raise  # the table cannot serve it, whichever engine plans the statement
        except (UnsupportedFeatureError, QuerySyntaxError) as exc:
            refused = exc  # what the s3-select translation does not speak, DataFusion may
    try:
        return None, host.bounded(call, "planning", lambda stop: _plan(
            host, call, query, flavor, parameters, session, stop))
    except (StorageError, SelectDialectError):
        if isinstance(refused, QuerySyntaxError):
            raise refused from None  # where it is wrong, as the user wrote it
        raise


def _plan(host: SqlHost, call: CallContext, query: str, flavor: str, parameters: bytes | None,
          session: Session, stop: threading.Event) -> SqlPlan:
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
        table = host.resolve(bucket, key, None, flavor)
        sources = object_sources(table.objects, stop)
        objects += table.objects
        tables.append(SqlTable(name, table_plan(host.engine, sources, table.input,
                                                flavor=flavor)))
    return plan_sql(host.engine, sql, tables, flavor=flavor, version=object_version(objects))


def _resolved(host: SqlHost, session: Session, name: TableName) -> tuple[str, str]:
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


def statement_info(host: SqlHost, call: CallContext, descriptor: flight.FlightDescriptor,
                   query: str, flavor: str, plan: SqlPlan, parameters: bytes | None,
                   fields: dict[str, Any], namespace: Session | None = None
                   ) -> flight.FlightInfo:
    """GetFlightInfo of such a statement: one ``sql`` ticket, one endpoint on this server."""
    session = namespace if namespace is not None else current_session(host, call)
    ticket = host.issue(SqlTicket, call, query, flavor, session.catalog or "",
                        session.schema or "", [WholeObject()], parameters=parameters,
                        object_version=plan.version)[0]
    endpoint = flight.FlightEndpoint(
        protocol.ticket_to_flight(ticket, host.secret), [],
        expiration_time=expiry(ticket.issued_at + host.config.ticket_max_age_s))
    fields.update(query_id=query_id(ticket), object=",".join(t.name.sql for t in plan.tables),
                  endpoints=1, flavor=flavor, reader="datafusion")
    about = PlanDescription(reader="datafusion", endpoints=1,
                            cores=host.engine.config.parallelism, limit_counts_input=False,
                            tables=len(plan.tables))
    return flight.FlightInfo(plan.arrow_schema, descriptor, [endpoint], -1, plan.bytes,
                             app_metadata=about.to_json())


def serve_partition(host: SqlHost, context: flight.ServerCallContext, call: CallContext,
                    ticket: SqlTicket, handle: bytes,
                    fields: dict[str, Any]) -> flight.FlightDataStream:
    """DoGet of a ``sql`` ticket: the statement resolved and planned again, then run."""
    key = ticket_key(handle)
    if host.is_cancelled(key):
        raise InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                  code="QueryCancelled")
    session = Session(ticket.bucket or None, ticket.key or None)
    plan = host.bounded(call, "planning", lambda stop: _plan(
        host, call, ticket.query, ticket.flavor, ticket.parameters, session, stop))
    if ticket.object_version is not None and ticket.object_version != plan.version:
        raise StaleTicketError("a table of the statement changed after it was planned; plan "
                               "it again (GetFlightInfo)", code="PreconditionFailed")
    fields.update(query_id=query_id(ticket), object=",".join(t.name.sql for t in plan.tables))

    def produce() -> Iterator[pa.RecordBatch]:
        return execute_sql(host.engine, plan)

    stream = QueryStream(produce=produce, schema=plan.arrow_schema, source=ReadCounter(),
                         context=context, pool=host.streams, fields=fields, stop_key=key)
    return flight.GeneratorStream(plan.arrow_schema, guarded(stream))
