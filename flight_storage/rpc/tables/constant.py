"""A statement that reads no table (``SELECT 1``, ``SELECT upper('a')``) behind the seam: one
``ConstantTicket`` naming no object, computed at once in DoGet without a stream slot, since no
input can make it large."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError
from flight_storage.execution.plan_types import SelectPlan
from flight_storage.protocol import ConstantTicket, WholeObject
from flight_storage.request.table_kinds import ConstantTable
from flight_storage.rpc.boundary import guarded
from flight_storage.rpc.endpoints import endpoint_partitions, known_rows
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.prepared_parameters import bound_sql
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.tables.seam import ListedTable, Planned, Statement, TableFilter
from select_dialect import translate


class ConstantKind:
    """No table: the statement's one row."""

    ticket: ClassVar[type[ConstantTicket]] = ConstantTicket
    datafusion_may_plan: ClassVar[bool] = True

    def plan(self, host: ServerParts, call: CallContext, read: ConstantTable,  # noqa: ARG002 - TableKind.plan
             statement: Statement, stop: threading.Event) -> Planned:  # noqa: ARG002 - TableKind.plan
        # bound first: the dialect has no ``?`` (SELECT ? || 'x' reads no table either)
        bound = bound_sql(read.sql, statement.parameters)
        translation = translate(bound, input_format="csv", flavor=statement.flavor)  # syntax first
        if translation.reads_table:
            raise InvalidRequestError(
                'name the object in FROM as "bucket"."key", e.g. '
                'SELECT * FROM "sales"."orders/2024-01.csv"', code="MissingObject")
        return Planned(self, statement, host.engine.plan_constant(bound, flavor=statement.flavor))

    def check(self, host: ServerParts, call: CallContext, read: ConstantTable,  # noqa: ARG002 - TableKind.check
              statement: Statement) -> None:  # noqa: ARG002 - TableKind.check
        """Nothing to refuse: no table, nothing to read."""

    def schema(self, host: ServerParts, call: CallContext, read: ConstantTable) -> pa.Schema:
        """The statement's own columns (no table is listed of this kind)."""
        statement = Statement(read.sql, call.statement_flavor)
        return self.plan(host, call, read, statement, threading.Event()).arrow_schema

    def listed(self, host: ServerParts, call: CallContext,  # noqa: ARG002 - TableKind.listed
               wanted: TableFilter) -> list[ListedTable]:  # noqa: ARG002 - TableKind.listed
        """None: a statement without a table lists nothing."""
        return []

    def flight_info(self, host: ServerParts, call: CallContext,
                    descriptor: flight.FlightDescriptor, planned: Planned,
                    fields: dict[str, Any]) -> flight.FlightInfo:
        plan, statement = planned.plan, planned.statement
        assert isinstance(plan, SelectPlan)
        partitions = [WholeObject()] if call.single_endpoint else endpoint_partitions(plan)
        tickets = host.issue(ConstantTicket, call, statement.query, statement.flavor, "", "",
                             partitions, parameters=statement.parameters)
        fields["endpoints_for"] = call.endpoints_reason
        return host.tickets_info(plan.arrow_schema, descriptor, tickets, plan,
                                 known_rows(plan), fields)

    def open(self, host: ServerParts, context: flight.ServerCallContext,  # noqa: ARG002 - TableKind.open
             call: CallContext, ticket: ConstantTicket, handle: bytes,  # noqa: ARG002 - TableKind.open
             fields: dict[str, Any]) -> flight.FlightDataStream:  # noqa: ARG002 - TableKind.open
        read = host.table_of(ticket.query)
        if not isinstance(read, ConstantTable):
            raise protocol.TicketError("ticket does not match its statement")
        plan = host.engine.plan_constant(bound_sql(read.sql, ticket.parameters),
                                         flavor=ticket.flavor)
        batches = list(host.engine.execute_arrow(plan))
        return flight.GeneratorStream(plan.arrow_schema, guarded(iter(batches)))
