"""A node's role in a cluster with holdings: any node plans, the nodes holding the data serve.

The server asks its role at each RPC (``role.py``); a holdings cluster's rules live here:

* **Planning** (GetFlightInfo, CreatePreparedStatement): a node holding the object plans it
  itself; any other node forwards the call to the holding's nodes (owner first, then its
  replicas, nodes known to be down last) and returns the first answer. Planning reads the
  object (its header, Parquet footer, CSV survey), so it runs where the bytes are: forwarding
  the whole call costs one round trip and needs no second protocol for "object info", and
  the owner signs tickets with the object's version as it sees it.
* **Endpoints** list the holding's locations, live nodes first, so a client (or Spark
  executor) reads each endpoint where its data lives and can fall over to a replica.
* A prefix table whose keys are spread over several holdings is planned on one node of each
  and their endpoints are joined, when the query's rows are the union of per-node rows (no
  aggregate, ordering, DISTINCT or LIMIT: the planning node reads the ``mergeable`` flag of
  each FlightInfo's ``app_metadata``) and the client reads every endpoint (one that gets a
  single endpoint, ``flight_storage.rpc.endpoint_readers``, is refused rather than given a
  part of the rows).
* **DoGet** of a partition this node does not hold answers ``WrongNode`` naming the nodes
  that hold it, never a result from data it may not have.
* **Catalog calls** (GetDbSchemas, GetTables, ListObjects) merge every live node's answer.
* **CancelFlightInfo** is applied here and sent to every other node named in the endpoints.

A fleet's node (``fleet.py``) is this role with the holdings rules switched off: every node
holds everything, and only endpoints' locations and cancels involve the others.

Hand-written: no library has this project's cluster rules.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.errors import InvalidRequestError, WrongNodeError
from flight_storage.protocol import ENDPOINTS_HEADER, PlanDescription
from flight_storage.rpc.middleware import CallContext, log_event
from flight_storage.rpc.roles.actions import CLUSTER_ACTIONS, Headers, Target
from flight_storage.rpc.roles.peers import FORWARDED_HEADER, Peers, PeerUnreachable
from flight_storage.storage.cluster import ClusterDescription, Holding

if TYPE_CHECKING:
    from flight_storage.rpc.actions import ActionHost

T = TypeVar("T")

MERGED_METADATA: Final = frozenset({"CommandGetDbSchemas", "CommandGetTables"})
"""Metadata commands whose rows are the union of every node's rows."""


class ClusterRole:
    """One node's part in a cluster.

    Args:
        peers: clients to the other nodes (holds the description and this node's name).
        planning_timeout_s: bound on a forwarded planning or metadata call. Planning reads
            the object (a CSV survey of a large object takes seconds), so the bound is the
            owner's own query timeout plus the peer timeout: the owner then answers with its
            own ``QueryTimeout`` first. Health checks, listings and cancels use the cluster
            file's ``peer_timeout_s``.
    """

    clustered = True

    def __init__(self, peers: Peers, planning_timeout_s: float) -> None:
        self.peers = peers
        self.planning_timeout_s = planning_timeout_s
        self.cluster: ClusterDescription = peers.cluster
        self.me: str | None = peers.me.name
        self.location: str = peers.me.location

    def close(self) -> None:
        self.peers.close()

    def check_peers(self) -> None:
        """Check every other node now (the health checks' first round, at once)."""
        for peer in self.cluster.nodes.values():
            if peer.name != self.me:
                self.peers.check(peer)

    def holdings_role(self) -> ClusterRole | None:
        """This role when objects live on particular nodes (the S3 door forwards to them)."""
        return self

    @staticmethod
    def _peer_call(headers: Headers, fields: dict[str, Any]) -> bool:
        """Whether another node forwarded this call (logged as ``forwarded_by``): it is then
        answered from local data only."""
        forwarded_by = headers.get(FORWARDED_HEADER)
        if forwarded_by:
            fields["forwarded_by"] = forwarded_by[0]
        return bool(forwarded_by)

    # ------------------------------------------------------------------ per RPC
    def plan(self, call: CallContext, headers: Headers, fields: dict[str, Any],
             descriptor: flight.FlightDescriptor, target: Target,
             local: Callable[[], flight.FlightInfo]) -> flight.FlightInfo:
        """GetFlightInfo: a planning command is planned by the nodes holding what it reads;
        one a peer forwarded, here, when this node holds it."""
        reads = target()
        if reads is None:
            return local()
        if self._peer_call(headers, fields):
            self.check_holds(*reads)
            return local()
        return self.flight_info(call, headers, descriptor, *reads, local=local)

    def metadata(self, call: CallContext, headers: Headers, fields: dict[str, Any], name: str,
                 ticket: flight.Ticket, local: pa.Table) -> pa.Table:
        """A metadata command's rows: for the merged ones, every node's (unless a peer asks)."""
        if self._peer_call(headers, fields) or name not in MERGED_METADATA:
            return local
        return self.merged_metadata(call, headers, ticket, local)

    def action(self, host: ActionHost, call: CallContext, headers: Headers,
               fields: dict[str, Any], action: flight.Action, body: bytes,
               local: Callable[[], list[flight.Result]]) -> list[flight.Result]:
        """DoAction: those involving other nodes (``actions.py``) unless a peer asks."""
        clustered = None if self._peer_call(headers, fields) else CLUSTER_ACTIONS.get(action.type)
        if clustered is None:
            return local()
        return clustered(host, self, headers, call, action, body)

    def open_stream(self, call: CallContext, headers: Headers, ticket: bytes,
                    locations: tuple[str, ...]) -> flight.FlightStreamReader:
        """A remote endpoint's DoGet from the first of its locations that answers (another
        node's error answer is raised as pyarrow raises it)."""
        # the stream runs under the serving node's query timeout; this bound only ends a
        # call that node never answers
        options = self.peers.options(call, headers, self.planning_timeout_s)
        failures: dict[str, str] = {}
        nodes = [n for n in (self.peers.node_at(loc) for loc in locations) if n]
        for node in nodes:
            try:
                return self.peers.stream(node, flight.Ticket(ticket), options)
            except PeerUnreachable as exc:
                failures[node] = exc.reason
        raise self.peers.unavailable(nodes, "the endpoint", failures)

    # ------------------------------------------------------------------ where data is
    def holdings(self, bucket: str, key: str) -> list[Holding]:
        """The holdings a table reference reads: its key's holding, or for a prefix table
        every holding under the prefix (empty when no node holds it)."""
        holding = self.cluster.holding(bucket, key)
        if holding is not None:
            return [holding]
        return self.cluster.holdings_under(bucket, key)

    def holds(self, bucket: str, key: str) -> bool:
        return any(self.me in h.nodes for h in self.holdings(bucket, key))

    def locations(self, bucket: str, key: str) -> list[flight.Location]:
        """The endpoint locations of data this node planned: the holding's nodes, live first."""
        mine = [h for h in self.holdings(bucket, key) if self.me in h.nodes]
        if not mine:
            return []
        # a replica planning confirms the nodes listed before it are still up
        nodes = self.peers.live_first(mine[0].nodes, confirm=mine[0].owner != self.me)
        return [flight.Location(self.cluster.node(n).location) for n in nodes]

    def endpoint_locations(self, bucket: str, key: str, partition: Mapping[str, Any]  # noqa: ARG002 - ClusterRole.endpoint_locations (FleetRole places by partition)
                           ) -> list[flight.Location]:
        """The locations of one endpoint: here, those of its object's holding."""
        return self.locations(bucket, key)

    def endpoint_metadata(self, bucket: str, key: str,
                          partition: Mapping[str, Any] | None = None) -> bytes:  # noqa: ARG002 - ClusterRole.endpoint_metadata (FleetRole places by partition)
        """An endpoint's ``app_metadata`` in a cluster: the nodes holding its data, with their
        machine names (``host``) for compute-side locality, e.g. Spark's preferred hosts."""
        mine = [h for h in self.holdings(bucket, key) if self.me in h.nodes]
        return self._nodes_metadata(mine[0].nodes if mine else ())

    def _nodes_metadata(self, names: Iterable[str]) -> bytes:
        """An endpoint's ``app_metadata`` naming ``names``' nodes, in order."""
        nodes = [self.cluster.node(n) for n in names]
        return json.dumps({"nodes": [{"name": n.name, "location": n.location, "host": n.host}
                                     for n in nodes]}).encode()

    def check_holds(self, bucket: str, key: str) -> None:
        """Refuse to serve data this node does not hold (DoGet of a partition).

        Raises:
            WrongNodeError: naming the nodes and locations that hold it.
        """
        if self.holds(bucket, key):
            return
        holdings = self.holdings(bucket, key)
        nodes = [n for h in holdings for n in h.nodes]
        where = ", ".join(f"{n} ({self.cluster.node(n).location})" for n in nodes)
        raise WrongNodeError(
            f"node {self.me} does not hold {bucket}/{key}; "
            + (f"read it from {where}" if nodes else "no node of the cluster holds it"),
            nodes=nodes, locations=[self.cluster.node(n).location for n in nodes])

    # ------------------------------------------------------------------ planning
    def plans_here(self, bucket: str, key: str) -> bool:
        """Whether this node plans ``bucket/key`` alone: it holds it, or nobody does (the
        local catalog then says NoSuchKey); else :meth:`flight_info` asks the holders."""
        holdings = self.holdings(bucket, key)
        return not holdings or (len(holdings) == 1 and self.me in holdings[0].nodes)

    def flight_info(
        self, call: CallContext, headers: Headers,
        descriptor: flight.FlightDescriptor, bucket: str, key: str,
        local: Callable[[], flight.FlightInfo],
    ) -> flight.FlightInfo:
        """Plan ``bucket/key`` here when this node holds it, else on the nodes that do."""
        if self.plans_here(bucket, key):
            return local()
        holdings = self.holdings(bucket, key)
        if len(holdings) == 1:
            return self._relabelled(self._forward(holdings[0], f"{bucket}/{key}", lambda node: (
                self.peers.get_flight_info(node, descriptor, self._planning(call, headers)))))
        return self._spread(call, headers, descriptor, bucket, key, holdings, local)

    def _relabelled(self, info: flight.FlightInfo) -> flight.FlightInfo:
        """``info`` with each endpoint's locations reordered by this node's view: a node
        that just failed to answer this node goes last (the planner may not know yet)."""
        by_location = {n.location: n.name for n in self.cluster.nodes.values()}

        def order(endpoint: flight.FlightEndpoint) -> list[flight.Location]:
            locations = list(endpoint.locations)
            return sorted(locations, key=lambda loc: not self.peers.is_up(
                by_location.get(loc.uri.decode(), "")))

        endpoints = [flight.FlightEndpoint(e.ticket, order(e), e.expiration_time,
                                           e.app_metadata) for e in info.endpoints]
        return flight.FlightInfo(info.schema, info.descriptor, endpoints, info.total_records,
                                 info.total_bytes, app_metadata=info.app_metadata)

    def forward_action(self, call: CallContext, headers: Headers,
                       action: flight.Action, bucket: str, key: str) -> list[bytes] | None:
        """An action about ``bucket/key`` answered by a node holding it, or None to answer
        here (this node holds it, or nobody does)."""
        holdings = self.holdings(bucket, key)
        if not holdings or any(self.me in h.nodes for h in holdings):
            return None
        return self._forward(holdings[0], f"{bucket}/{key}", lambda node: self.peers.do_action(
            node, action, self._planning(call, headers)))

    def _planning(self, call: CallContext,
                  headers: Headers) -> flight.FlightCallOptions:
        return self.peers.options(call, headers, self.planning_timeout_s)

    def _forward(self, holding: Holding, what: str, call: Callable[[str], T]) -> T:
        failures: dict[str, str] = {}
        for node in self.peers.live_first(holding.nodes):
            try:
                return call(node)
            except PeerUnreachable as exc:
                failures[node] = exc.reason
                log_event("peer_failover", peer=node, object=what, reason=exc.reason)
        raise self.peers.unavailable(list(holding.nodes), what, failures)

    def _spread(
        self, call: CallContext, headers: Headers,
        descriptor: flight.FlightDescriptor, bucket: str, key: str,
        holdings: list[Holding], local: Callable[[], flight.FlightInfo],
    ) -> flight.FlightInfo:
        shared = {n for h in holdings for n in h.nodes
                  if sum(n in other.nodes for other in holdings) > 1}
        if shared:
            raise InvalidRequestError(
                f"{bucket}/{key} spans holdings that node(s) {', '.join(sorted(shared))} hold "
                "together; name a prefix inside one holding", code="NotImplemented")
        if call.single_endpoint:  # one endpoint cannot carry rows held by several nodes
            raise InvalidRequestError(
                f"{bucket}/{key} is held by {len(holdings)} groups of nodes, so its answer has "
                f"an endpoint per group, and this client gets one endpoint "
                f"({call.endpoints_reason}); a client that reads every endpoint sends "
                f"{ENDPOINTS_HEADER}: partitioned, any other can query each holding's prefix",
                code="NotImplemented")

        def plan(holding: Holding) -> flight.FlightInfo:
            if self.me in holding.nodes:
                return local()
            return self._relabelled(self._forward(
                holding, f"{bucket}/{holding.prefix}", lambda node: self.peers.get_flight_info(
                    node, descriptor, self._planning(call, headers))))

        # at once: the planning node's latency is then one round trip, not one per holding
        with ThreadPoolExecutor(len(holdings), thread_name_prefix="plan-holding") as pool:
            infos = list(pool.map(plan, holdings))
        return _joined(infos, descriptor, f"{bucket}/{key}")

    # ------------------------------------------------------------------ catalog
    def merged_metadata(self, call: CallContext, headers: Headers,
                        ticket: flight.Ticket, local: pa.Table) -> pa.Table:
        """``local`` plus every live peer's rows for the same metadata command, deduplicated
        and sorted (a peer that does not answer is left out and logged)."""
        tables = [local]
        for node in self.cluster.nodes:
            if node == self.me or self.peers.recently_down(node):
                continue
            try:
                tables.append(self.peers.read(node, ticket, self._planning(call, headers))
                              .cast(local.schema))
            except PeerUnreachable as exc:
                log_event("catalog_partial", peer=node, reason=exc.reason)
        rows = {json.dumps(r, sort_keys=True, default=_bytes_text): r
                for t in tables for r in t.to_pylist()}
        return pa.Table.from_pylist([rows[k] for k in sorted(rows)], schema=local.schema)

    def list_objects(self, call: CallContext, headers: Headers,
                     request: Mapping[str, Any], local: Callable[[], bytes]) -> bytes:
        """A ListObjects page over every holding under the request's bucket and prefix."""
        bucket, prefix = str(request["bucket"]), str(request.get("prefix", ""))
        max_keys = int(request.get("max_keys", 1000))
        holdings = self.holdings(bucket, prefix)
        if not holdings:
            return local()
        documents = []
        asked_here = False
        action = flight.Action("ListObjects", json.dumps(request).encode())
        for holding in holdings:
            if self.me in holding.nodes:
                if not asked_here:
                    documents.append(json.loads(local()))
                    asked_here = True
                continue
            bodies = self._forward(holding, f"{bucket}/{holding.prefix}", lambda node: (
                self.peers.do_action(node, action, self.peers.options(call, headers))))
            documents.append(json.loads(bodies[0]))
        return json.dumps(_merged_page(documents, max_keys)).encode()

    # ------------------------------------------------------------------ cancel
    def cancel_elsewhere(self, call: CallContext, headers: Headers,
                         action: flight.Action, info_bytes: bytes) -> None:
        """Send a cancel to every other node the FlightInfo's endpoints name (best effort:
        a node that does not answer is logged; its streams end at their own time limits)."""
        info = flight.FlightInfo.deserialize(info_bytes)
        by_location = {n.location: n.name for n in self.cluster.nodes.values()}
        nodes = {by_location[loc.uri.decode()] for e in info.endpoints for loc in e.locations
                 if loc.uri.decode() in by_location}
        for node in sorted(nodes - {self.me}):
            try:
                self.peers.do_action(node, action, self.peers.options(call, headers))
                log_event("cancel_forwarded", peer=node)
            except (PeerUnreachable, flight.FlightError) as exc:
                log_event("cancel_forward_failed", peer=node, reason=str(exc)[:200])



def _joined(infos: list[flight.FlightInfo], descriptor: flight.FlightDescriptor,
            what: str) -> flight.FlightInfo:
    """One FlightInfo of per-holding plans whose rows are the union of theirs."""
    for info in infos:
        if not PlanDescription.from_json(info.app_metadata).mergeable:
            raise InvalidRequestError(
                f"{what} is spread over several nodes and this query (aggregate, ORDER BY, "
                "DISTINCT or LIMIT) needs all rows in one place; query each holding's prefix",
                code="NotImplemented")
        if not info.schema.equals(infos[0].schema):
            raise InvalidRequestError(
                f"the objects of {what} have different columns on different nodes")
    endpoints = [e for info in infos for e in info.endpoints]
    records = [i.total_records for i in infos]
    total_records = -1 if any(r < 0 for r in records) else sum(records)
    total_bytes = sum(max(i.total_bytes, 0) for i in infos)
    about = dataclasses.replace(PlanDescription.from_json(infos[0].app_metadata),
                                endpoints=len(endpoints), nodes=len(infos))
    return flight.FlightInfo(infos[0].schema, descriptor, endpoints, total_records, total_bytes,
                             app_metadata=about.to_json())


def _merged_page(documents: list[Mapping[str, Any]], max_keys: int) -> dict[str, Any]:
    """The first ``max_keys`` keys of several nodes' pages (each is its node's first keys)."""
    objects = {o["key"]: o for d in documents for o in d["objects"]}
    keys = sorted(objects)
    more = len(keys) > max_keys or any(d.get("next_start_after") for d in documents)
    page = [objects[k] for k in keys[:max_keys]]
    return {"objects": page, "next_start_after": page[-1]["key"] if more and page else None}


def _bytes_text(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)
