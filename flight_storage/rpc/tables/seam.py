"""The one table seam: what every kind of table a Flight SQL statement reads answers.

DataFusion's ``TableProvider`` is the model: a kind of table plans a statement over itself
(or checks it without planning), lists its tables and describes the columns ``SELECT *`` sees
(GetTables), cuts its plan into signed tickets (GetFlightInfo's endpoints) and opens one
ticket's stream (DoGet). The server
has one plan path and one serve path over them (``kinds.py``); which kind a statement reads is
``request/table_kinds.py``'s to decide, once.

| kind | table (``request/table_kinds.py``) | ticket (``protocol/tickets.py``) | module |
|---|---|---|---|
| a bucket's object or prefix table | ``BucketTable`` | ``StatementTicket`` | ``bucket.py`` |
| no table (``SELECT 1``) | ``ConstantTable`` | ``ConstantTicket`` | ``constant.py`` |
| an Iceberg table | ``IcebergTable`` | ``IcebergTicket`` | ``iceberg.py`` |
| DataFusion over the tables a statement names | (several, or what the dialect refuses) | ``SqlTicket`` | ``sql.py`` |

The decoded cache (issue #36) is no kind of its own: a bucket's table reads its decoded copy
when the engine finds one (``execution/decoded_shadows.py``), behind the same seam.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Final, Protocol

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.execution.datafusion_sql import SqlPlan
from flight_storage.execution.iceberg_scan import IcebergPlan
from flight_storage.execution.plan_types import SelectPlan
from flight_storage.protocol import PartitionTicket
from flight_storage.request.tables import ResolvedTable
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.sessions import Session

OBJECT_TABLE_TYPE: Final = "table"
"""GetTables' type of an object, and of an Iceberg table: a base table, holding what it is read
from."""
PREFIX_TABLE_TYPE: Final = "view"
"""GetTables' type of a configured prefix: it stores nothing of its own, it is the union of the
objects under it, as a view is a stored query over base tables. Flight SQL leaves the
vocabulary to the server (``CommandGetTableTypes``); lower case is what Arrow's reference SQLite
Flight SQL servers and ADBC's own drivers answer, and what sqlalchemy-adbc lists (it compares
with ``"table"`` and ``"view"`` exactly). GetTables' ``table_types`` filter ignores case, so
JDBC-style filters (``TABLE``, ``VIEW``, the spec's own examples) select them too."""
TABLE_TYPES: Final = (OBJECT_TABLE_TYPE, PREFIX_TABLE_TYPE)


def like(value: str, pattern: str | None) -> bool:
    """SQL LIKE as Flight SQL filter patterns use it (``%`` and ``_``)."""
    if pattern is None or pattern == "":
        return True
    regex = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern
    )
    return re.fullmatch(regex, value, re.S) is not None


@dataclass(frozen=True)
class TableFilter:
    """What a GetTables call lists (Flight SQL's filters).

    Attributes:
        catalog: None: every catalog; ``""``: tables of no catalog only (buckets); else one.
        schema_pattern: a LIKE pattern on the schema (a bucket, a namespace), or None.
        table_pattern: a LIKE pattern on the table's name, or None.
        types: the table types asked for, case-folded (JDBC tools ask for ``TABLE``); empty:
            every type.
    """

    catalog: str | None = None
    schema_pattern: str | None = None
    table_pattern: str | None = None
    types: frozenset[str] = frozenset()

    def wants_catalog(self, name: str) -> bool:
        return self.catalog is None or self.catalog == name

    def wants_schema(self, name: str) -> bool:
        return like(name, self.schema_pattern)

    def wants_type(self, table_type: str) -> bool:
        return not self.types or table_type in self.types

    def wants(self, name: str, table_type: str) -> bool:
        return like(name, self.table_pattern) and self.wants_type(table_type)


@dataclass(frozen=True)
class ListedTable:
    """A table as GetTables lists it, and the parts a statement names it by (``SELECT *``
    over ``names`` is what its ``table_schema`` describes)."""

    catalog: str | None
    schema: str
    name: str
    table_type: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Statement:
    """A statement as a call asks it: its text, flavour and bound parameters, and the
    namespace its one-part names resolve in (a prepared statement's; None: the caller's
    session, ``rpc/sessions.current``)."""

    query: str
    flavor: str
    parameters: bytes | None = None
    session: Session | None = None


@dataclass(frozen=True)
class Planned:
    """A statement planned by its kind of table.

    Attributes:
        kind: the kind that planned it, which also cuts it into tickets.
        statement: what was asked.
        plan: the engine's plan (its ``arrow_schema`` is the result's).
        read: what the kind read to plan it: a bucket's resolved table, an Iceberg plan
            (snapshot, files), or None (no table; DataFusion's plan names its own).
    """

    kind: TicketKind
    statement: Statement
    plan: SelectPlan | SqlPlan
    read: ResolvedTable | IcebergPlan | None = None

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.plan.arrow_schema


class TicketKind(Protocol):
    """What cuts a planned statement into tickets and serves them: every kind of table, and
    DataFusion's plan over the tables a statement names (``sql.py``)."""

    @property
    def ticket(self) -> type[PartitionTicket]:
        """The type of ticket its GetFlightInfo issues and its DoGet serves."""
        ...

    def flight_info(self, host: ServerParts, call: CallContext,
                    descriptor: flight.FlightDescriptor, planned: Planned,
                    fields: dict[str, Any]) -> flight.FlightInfo:
        """GetFlightInfo of a planned statement: its partitions as signed tickets."""
        ...

    def open(self, host: ServerParts, context: flight.ServerCallContext, call: CallContext,
             ticket: Any, handle: bytes, fields: dict[str, Any]) -> flight.FlightDataStream:
        """DoGet of one of its tickets (``ticket``, decoded from ``handle``)."""
        ...


class TableKind(TicketKind, Protocol):
    """One kind of table behind the seam (the module docstring's table)."""

    @property
    def datafusion_may_plan(self) -> bool:
        """Whether a statement over it that the s3-select translation refuses goes to
        DataFusion (``sql.plan_either``) on a flavour that allows it."""
        ...

    def plan(self, host: ServerParts, call: CallContext, read: Any, statement: Statement,
             stop: threading.Event) -> Planned:
        """Plan ``statement`` over ``read`` (its table, as ``table_of`` decided it); the
        caller holds a compute slot and sets ``stop`` when it gives up."""
        ...

    def check(self, host: ServerParts, call: CallContext, read: Any, statement: Statement) -> None:
        """Refuse, without planning, a statement the caller may not run or whose table does
        not exist (a prepared statement with ``?``, whose types come with its parameters)."""
        ...

    def schema(self, host: ServerParts, call: CallContext, read: Any) -> pa.Schema:
        """The columns ``SELECT *`` over ``read`` answers with in the caller's flavour, as a
        statement's plan has them (GetTables' ``table_schema``)."""
        ...

    def listed(self, host: ServerParts, call: CallContext,
               wanted: TableFilter) -> list[ListedTable]:
        """The tables of this kind the caller may read that ``wanted`` asks for (GetTables);
        a source that cannot be listed is logged and left out, the others still answer."""
        ...
