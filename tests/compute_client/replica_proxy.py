"""A planning proxy for failover and cluster tests: plans on one storage server, and lists other
locations in the endpoints it returns.

Until servers describe a cluster themselves, this is how a test makes a real client (DataFusion
in this process, Spark in its Python workers) meet endpoints whose first location is dead: the
proxy forwards each call to the upstream server and rewrites the endpoints' locations
(endpoint ``i`` gets ``placements[i % len(placements)]``: one list puts the same nodes on every
endpoint, several spread endpoints over nodes as a cluster would). Tickets pass through untouched,
so any server sharing the upstream's ticket secret and data redeems them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pyarrow.flight as flight

from tests.flight_storage.test_server_support import PARTITIONED


class ReplicaProxy(flight.FlightServerBase):
    """Forward planning, metadata and DoGet calls to ``upstream``; endpoint ``i`` names the
    locations ``placements[i % len(placements)]``."""

    def __init__(self, upstream: str, placements: Sequence[Sequence[str]]) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self._upstream = flight.connect(upstream)
        self._placements = [[flight.Location(loc) for loc in p] for p in placements]

    def get_flight_info(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.get_flight_info
                        descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        # the clients tested through the proxy read every endpoint: ask for partitions
        info = self._upstream.get_flight_info(descriptor, PARTITIONED)
        endpoints = [
            flight.FlightEndpoint(e.ticket, self._placements[i % len(self._placements)])
            for i, e in enumerate(info.endpoints)
        ]
        return flight.FlightInfo(info.schema, info.descriptor, endpoints, info.total_records,
                                 info.total_bytes, app_metadata=info.app_metadata)

    def get_schema(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.get_schema
                   descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        return self._upstream.get_schema(descriptor)

    def do_get(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.do_get
               ticket: flight.Ticket) -> flight.RecordBatchStream:
        return flight.RecordBatchStream(self._upstream.do_get(ticket).read_all())

    def do_action(self, context: flight.ServerCallContext,  # noqa: ARG002 - FlightServerBase.do_action
                  action: flight.Action) -> Iterator[bytes]:
        return iter([result.body.to_pybytes() for result in self._upstream.do_action(action)])

    def shutdown(self) -> None:
        """Stop serving and close the upstream connection."""
        super().shutdown()
        self._upstream.close()


@contextmanager
def replica_proxy(upstream: str, *placements: Sequence[str]) -> Iterator[str]:
    """Run a :class:`ReplicaProxy` on a free loopback port; yields its location."""
    proxy = ReplicaProxy(upstream, placements)
    try:
        yield f"grpc://127.0.0.1:{proxy.port}"
    finally:
        proxy.shutdown()
