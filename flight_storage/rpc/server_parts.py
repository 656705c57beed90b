"""The one statement of what the server's handlers use of the server.

The handlers live in modules the server imports (``rpc/tables/``, ``metadata.py``,
``actions.py``, ``ingest.py``), so they cannot import ``StorageServer`` back; they take a
:class:`ServerParts` instead, which mypy checks the server satisfies wherever it passes itself.
One protocol, not one per module, so a member's signature is stated once (the session
actions, below these, keep their narrower ``sessions.SessionHost``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.plan_types import SelectPlan
from flight_storage.protocol import Partition, PartitionTicket, PlanDescription
from flight_storage.protocol.signing import Secret
from flight_storage.request.sniffing import TableSniffer
from flight_storage.request.table_kinds import StatementTable
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.sessions import SessionCookies
from flight_storage.rpc.streams import StreamPool
from flight_storage.storage.catalog import Catalog
from flight_storage.storage.iceberg_catalog import IcebergCatalogs

T = TypeVar("T")


class ServerParts(Protocol):
    """What the server's handlers use of it (``rpc/server.StorageServer``): the kinds of
    table (``rpc/tables/``), the metadata commands, the actions (``ActionHost`` adds theirs)
    and bulk ingest."""

    config: ServerConfig
    engine: SelectEngine
    catalog: Catalog
    iceberg: IcebergCatalogs
    sniffer: TableSniffer
    streams: StreamPool
    secret: Secret
    session_cookies: SessionCookies

    @property
    def node_name(self) -> str | None: ...

    def check_query_length(self, query: str, what: str = ...) -> None: ...

    def check_access(self, call: CallContext, bucket: str) -> None: ...

    def readable_buckets(self, call: CallContext) -> list[str]:
        """The buckets the caller may read."""
        ...

    def check_holds(self, bucket: str, key: str) -> None:
        """Refuse a ticket for an object this node does not hold (a holdings cluster)."""
        ...

    def is_cancelled(self, key: bytes) -> bool: ...

    def table_of(self, query: str) -> StatementTable: ...

    def bounded(self, call: CallContext, what: str,
                work: Callable[[threading.Event], T]) -> T: ...

    def issue(self, request: type[PartitionTicket], call: CallContext, query: str,
              flavor: str, bucket: str, key: str, partitions: Sequence[Partition], *,
              input_serialization: dict[str, Any] | None = None,
              parameters: bytes | None = None,
              object_version: str | None = None) -> list[PartitionTicket]:
        """The server's tickets, one per partition."""
        ...

    def tickets_info(self, schema: pa.Schema, descriptor: flight.FlightDescriptor,
                     tickets: list[PartitionTicket], plan: SelectPlan, total_records: int,
                     fields: dict[str, Any], about_plan: PlanDescription | None = None
                     ) -> flight.FlightInfo:
        """The FlightInfo of planned tickets: endpoints where the role says, sizes, the
        plan's description."""
        ...
