"""A server's role: a single server, a node of a cluster with holdings or a node of a fleet.

Where the three differ (where planning goes, which node serves an endpoint and which
locations it names, whether metadata merges every node's rows, which actions other nodes
answer, how another node's endpoint is read), the server, its query service and its S3 door
ask their :class:`Role`, chosen once at start by :func:`server_role` from the configuration;
none of them asks whether it is in a cluster (``tests/test_architecture.py`` pins it).

The roles' code is this folder's (``ROLES_LAYERS`` in ``tests/test_architecture.py``, top to
bottom): ``door.py`` (the S3 door's part), this module, ``fleet.py``, ``cluster.py`` (the
holdings rules), ``local.py``, ``actions.py`` (what a cluster routes), ``status.py``
(``cluster status``), ``peers.py`` (calls between nodes), ``fleet_metrics.py`` (``/metrics``
of ``serve --workers N``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.roles.actions import Headers, Target
from flight_storage.rpc.roles.cluster import ClusterRole
from flight_storage.rpc.roles.fleet import FleetRole
from flight_storage.rpc.roles.local import LocalRole
from flight_storage.rpc.roles.peers import Peers

if TYPE_CHECKING:
    from flight_storage.rpc.actions import ActionHost
    from flight_storage.rpc.auth import TokenSigner
    from flight_storage.rpc.config import ServerConfig


class Role(Protocol):
    """What a server asks its role (:class:`LocalRole`, :class:`ClusterRole`,
    :class:`FleetRole`), chosen once by :func:`server_role`."""

    me: str | None
    """This node's name in its cluster (None for a single server)."""
    location: str
    """This process's Flight location as endpoints name it."""
    clustered: bool
    """Whether plans may be joined across nodes (``PlanDescription.mergeable`` is said)."""

    def close(self) -> None: ...

    def check_peers(self) -> None: ...

    def plan(self, call: CallContext, headers: Headers, fields: dict[str, Any],
             descriptor: flight.FlightDescriptor, target: Target,
             local: Callable[[], flight.FlightInfo]) -> flight.FlightInfo: ...

    def plans_here(self, bucket: str, key: str) -> bool: ...

    def flight_info(self, call: CallContext, headers: Headers,
                    descriptor: flight.FlightDescriptor, bucket: str, key: str,
                    local: Callable[[], flight.FlightInfo]) -> flight.FlightInfo: ...

    def check_holds(self, bucket: str, key: str) -> None: ...

    def endpoint_locations(self, bucket: str, key: str, partition: Mapping[str, Any]
                           ) -> list[flight.Location]: ...

    def endpoint_metadata(self, bucket: str, key: str,
                          partition: Mapping[str, Any] | None = None) -> bytes: ...

    def metadata(self, call: CallContext, headers: Headers, fields: dict[str, Any], name: str,
                 ticket: flight.Ticket, local: pa.Table) -> pa.Table: ...

    def action(self, host: ActionHost, call: CallContext, headers: Headers,
               fields: dict[str, Any], action: flight.Action, body: bytes,
               local: Callable[[], list[flight.Result]]) -> list[flight.Result]: ...

    def open_stream(self, call: CallContext, headers: Headers, ticket: bytes,
                    locations: tuple[str, ...]) -> flight.FlightStreamReader: ...

    def holdings_role(self) -> ClusterRole | None: ...


def server_role(config: ServerConfig, signer: TokenSigner, location: str) -> Role:
    """The role of a server: a node of the cluster its configuration names (its peers'
    health checks started), else a single server at ``location``."""
    if config.cluster is None or config.node_name is None:
        return LocalRole(location)
    roots = config.tls_cert.read_bytes() if config.tls_cert is not None else None
    peers = Peers(config.cluster, config.node_name, signer, roots)
    kind = FleetRole if config.cluster.is_fleet else ClusterRole
    role = kind(peers, planning_timeout_s=config.query_timeout_s + config.cluster.peer_timeout_s)
    peers.start_checks()
    return role

