"""A fleet node's role: a cluster file without holdings, so every node reads the same store
and any node plans and serves any endpoint.

Each endpoint lists every node, in rendezvous order of its object and partition (a repeated
query lands on the node whose caches are warm), live nodes first, so a dead node costs a client
one retry. Only the endpoints' locations and cancels involve the other nodes (the latter as
:class:`~flight_storage.rpc.roles.cluster.ClusterRole` sends them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.roles.actions import Headers
from flight_storage.rpc.roles.cluster import ClusterRole


class FleetRole(ClusterRole):
    """One node of a fleet: every node reads the same store (``--data s3://...``), so this
    node plans and serves everything itself, and only the endpoints' locations and cancels
    involve the others."""

    def holds(self, bucket: str, key: str) -> bool:  # noqa: ARG002 - ClusterRole.holds
        return True

    def check_holds(self, bucket: str, key: str) -> None:
        """Any node serves any ticket of a fleet."""

    def plans_here(self, bucket: str, key: str) -> bool:  # noqa: ARG002 - ClusterRole.plans_here
        return True

    def flight_info(
        self, call: CallContext, headers: Headers,  # noqa: ARG002 - ClusterRole.flight_info
        descriptor: flight.FlightDescriptor, bucket: str, key: str,  # noqa: ARG002 - ClusterRole.flight_info
        local: Callable[[], flight.FlightInfo],
    ) -> flight.FlightInfo:
        return local()

    def forward_action(self, call: CallContext, headers: Headers,  # noqa: ARG002 - ClusterRole.forward_action
                       action: flight.Action, bucket: str, key: str) -> list[bytes] | None:  # noqa: ARG002 - ClusterRole.forward_action
        return None

    def merged_metadata(self, call: CallContext, headers: Headers,  # noqa: ARG002 - ClusterRole.merged_metadata
                        ticket: flight.Ticket, local: pa.Table) -> pa.Table:  # noqa: ARG002 - ClusterRole.merged_metadata
        return local  # every node sees the same buckets

    def list_objects(self, call: CallContext, headers: Headers,  # noqa: ARG002 - ClusterRole.list_objects
                     request: Mapping[str, Any], local: Callable[[], bytes]) -> bytes:  # noqa: ARG002 - ClusterRole.list_objects
        return local()

    def order(self, bucket: str, key: str, partition: Mapping[str, Any]) -> list[str]:
        """Every node, in rendezvous order of the endpoint, nodes known to be down last."""
        name = f"{bucket}/{key}#{json.dumps(partition, sort_keys=True)}"
        return self.peers.live_first(self.cluster.rendezvous(name))

    def endpoint_locations(self, bucket: str, key: str, partition: Mapping[str, Any]
                           ) -> list[flight.Location]:
        return [flight.Location(self.cluster.node(n).location)
                for n in self.order(bucket, key, partition)]

    def endpoint_metadata(self, bucket: str, key: str,
                          partition: Mapping[str, Any] | None = None) -> bytes:
        return self._nodes_metadata(self.order(bucket, key, partition or {}))

