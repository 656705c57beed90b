"""The kinds of table, one table each way: a statement's table to its kind (planning,
GetTables' schemas) and a ticket's type to the kind that serves it (DoGet).

:func:`plan_statement` is the one plan path (GetFlightInfo, CreatePreparedStatement) and
:func:`table_schema` the one description (GetTables): both ask ``table_of`` which table a
statement reads and hand it to that kind (``seam.py``), so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

import pyarrow as pa

from flight_storage.protocol import PartitionTicket
from flight_storage.request.table_kinds import BucketTable, ConstantTable, IcebergTable
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.sessions import current as current_session
from flight_storage.rpc.tables.bucket import BucketKind
from flight_storage.rpc.tables.constant import ConstantKind
from flight_storage.rpc.tables.iceberg import IcebergKind
from flight_storage.rpc.tables.seam import Planned, Statement, TableKind, TicketKind
from flight_storage.rpc.tables.sql import SQL, plan_either
from select_dialect.translate import refuse_writes

KIND_OF_TABLE: Final[Mapping[type, TableKind]] = {
    BucketTable: BucketKind(),
    ConstantTable: ConstantKind(),
    IcebergTable: IcebergKind(),
}
"""Each kind of table a statement reads (``request/table_kinds.StatementTable``)."""

_TICKET_KINDS: Final[tuple[TicketKind, ...]] = (*KIND_OF_TABLE.values(), SQL)
KIND_OF_TICKET: Final[Mapping[type[PartitionTicket], TicketKind]] = {
    kind.ticket: kind for kind in _TICKET_KINDS
}
"""DoGet's kind for each type of statement ticket (``protocol/tickets.py`` decodes it)."""


def plan_statement(host: ServerParts, call: CallContext, statement: Statement) -> Planned:
    """Plan ``statement``: refused early when too long or a write, its table's kind decided
    once (``table_of``), planned by that kind in a compute slot under the query timeout, or by
    DataFusion where the kind lets it and the s3-select translation does not read it."""
    host.check_query_length(statement.query)
    refuse_writes(statement.query)  # before the table: INSERT INTO a new key is not NoSuchKey
    statement = _in_session(host, call, statement)
    read = host.table_of(statement.query)
    kind = KIND_OF_TABLE[type(read)]

    def one_table() -> Planned:
        # all of it in the slot: scanning a long statement takes time too
        return host.bounded(call, "planning",
                            lambda stop: kind.plan(host, call, read, statement, stop))

    if not kind.datafusion_may_plan:
        return one_table()
    return plan_either(host, call, statement, one_table)


def check_statement(host: ServerParts, call: CallContext, statement: Statement) -> None:
    """Refuse, without planning, a statement the caller may not run over its table or whose
    table does not exist (its kind's ``check``)."""
    statement = _in_session(host, call, statement)
    read = host.table_of(statement.query)
    KIND_OF_TABLE[type(read)].check(host, call, read, statement)


def _in_session(host: ServerParts, call: CallContext, statement: Statement) -> Statement:
    """``statement`` with the namespace its one-part names resolve in: its own (a prepared
    statement's), else the caller's session (``rpc/sessions.current``)."""
    if statement.session is not None:
        return statement
    return replace(statement, session=current_session(host, call))


def table_schema(host: ServerParts, call: CallContext, query: str) -> pa.Schema:
    """The columns ``query`` (a ``SELECT *`` over one table) answers with in the caller's
    flavour, described by the kind of table it reads (GetTables' ``table_schema``)."""
    read = host.table_of(query)
    return KIND_OF_TABLE[type(read)].schema(host, call, read)
