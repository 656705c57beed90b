"""A single server's role: no cluster file, so it holds everything, forwards nothing and
names no locations in its endpoints (``role.py`` says what a role is asked)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.errors import WrongNodeError
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.roles.actions import Headers, Target

if TYPE_CHECKING:
    from flight_storage.rpc.actions import ActionHost
    from flight_storage.rpc.roles.cluster import ClusterRole


class LocalRole:
    """A single server: it holds everything, plans and serves everything itself, names no
    locations in its endpoints (clients read them where they asked) and has no peers.

    Args:
        location: the server's Flight location.
    """

    me: str | None = None
    clustered = False

    def __init__(self, location: str) -> None:
        self.location = location

    def close(self) -> None:
        """No peers to close."""

    def check_peers(self) -> None:
        """No peers to check."""

    def plan(self, call: CallContext, headers: Headers, fields: dict[str, Any],  # noqa: ARG002 - Role.plan
             descriptor: flight.FlightDescriptor, target: Target,  # noqa: ARG002 - Role.plan
             local: Callable[[], flight.FlightInfo]) -> flight.FlightInfo:
        return local()

    def plans_here(self, bucket: str, key: str) -> bool:  # noqa: ARG002 - Role.plans_here
        return True

    def flight_info(self, call: CallContext, headers: Headers,  # noqa: ARG002 - Role.flight_info
                    descriptor: flight.FlightDescriptor, bucket: str, key: str,  # noqa: ARG002 - Role.flight_info
                    local: Callable[[], flight.FlightInfo]) -> flight.FlightInfo:
        return local()

    def check_holds(self, bucket: str, key: str) -> None:
        """A single server holds every object its catalog has."""

    def endpoint_locations(self, bucket: str, key: str, partition: Mapping[str, Any]  # noqa: ARG002 - Role.endpoint_locations
                           ) -> list[flight.Location]:
        return []

    def endpoint_metadata(self, bucket: str, key: str,  # noqa: ARG002 - Role.endpoint_metadata
                          partition: Mapping[str, Any] | None = None) -> bytes:  # noqa: ARG002 - Role.endpoint_metadata
        return b""

    def metadata(self, call: CallContext, headers: Headers, fields: dict[str, Any], name: str,  # noqa: ARG002 - Role.metadata
                 ticket: flight.Ticket, local: pa.Table) -> pa.Table:  # noqa: ARG002 - Role.metadata
        return local

    def action(self, host: ActionHost, call: CallContext, headers: Headers,  # noqa: ARG002 - Role.action
               fields: dict[str, Any], action: flight.Action, body: bytes,  # noqa: ARG002 - Role.action
               local: Callable[[], list[flight.Result]]) -> list[flight.Result]:
        return local()

    def open_stream(self, call: CallContext, headers: Headers, ticket: bytes,  # noqa: ARG002 - Role.open_stream
                    locations: tuple[str, ...]) -> flight.FlightStreamReader:
        """Never asked: a single server's endpoints name no other node."""
        raise WrongNodeError("a single server reads no other node's endpoint",
                             nodes=[], locations=list(locations))

    def holdings_role(self) -> ClusterRole | None:
        return None

