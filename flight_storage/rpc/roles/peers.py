"""Calls from one cluster node to another: the caller's identity, a time bound, peer health.

Every call a node makes to a peer carries the caller's identity as a bearer token this node
issues for the caller's user (nodes share the ticket secret, so the peer accepts it, and no
password travels between nodes), the caller's flavour header, the endpoint choice this node
made for the caller (the peer sees this node's user agent, not the client's), and
:data:`FORWARDED_HEADER` naming this node, so the peer answers from its own data only and
never forwards again. Each call is bounded by the cluster file's ``peer_timeout_s``; a peer
that does not answer is marked down and the error names it.

Hand-written: pyarrow.flight gives the clients; which node to ask and what a failure means is
this project's rule.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.errors import NodeUnavailableError
from flight_storage.protocol import (
    ENDPOINTS_HEADER,
    ENDPOINTS_PARTITIONED,
    ENDPOINTS_SINGLE,
    FLAVOR_HEADER,
    PARALLELISM_HEADER,
)
from flight_storage.rpc.auth import NODE_SCHEME, TokenSigner
from flight_storage.rpc.middleware import CallContext, log_event
from flight_storage.storage.cluster import ClusterDescription, ClusterNode

FORWARDED_HEADER: Final = "x-flight-select-forwarded"
"""Set on calls between nodes (the value names the calling node): answer locally."""
T = TypeVar("T")
_FRESH_S: Final = 1.0
"""How long a peer found down is taken as down without asking again."""
_PASSED_HEADERS: Final = (FLAVOR_HEADER, PARALLELISM_HEADER)


class PeerUnreachable(Exception):
    """A peer did not answer (connection refused, unavailable, or over the time bound)."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"node {node} did not answer: {reason}")
        self.node = node
        self.reason = reason


@dataclass
class _Health:
    up: bool
    checked_at: float


class Peers:
    """Clients to the other nodes of a cluster and what this node knows of their health.

    Args:
        cluster: the cluster description.
        me: this node's name.
        signer: makes the bearer tokens of callers' users and this node's own token for its
            health checks (peers share the secret, so they accept both).
        tls_root_certs: PEM to trust for ``grpc+tls`` peers.
    """

    def __init__(self, cluster: ClusterDescription, me: str,
                 signer: TokenSigner | None = None, tls_root_certs: bytes | None = None) -> None:
        self.cluster = cluster
        self.me = cluster.node(me)
        self._signer = signer
        self._tls_root_certs = tls_root_certs
        self._clients: dict[str, flight.FlightClient] = {}
        self._health: dict[str, _Health] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._checker: threading.Thread | None = None

    # ------------------------------------------------------------------ calls
    def options(self, call: CallContext, headers: Mapping[str, list[str]],
                timeout_s: float | None = None) -> flight.FlightCallOptions:
        """Call options carrying the caller's identity and headers, bounded by ``timeout_s``
        (default: the cluster's ``peer_timeout_s``)."""
        sent: list[tuple[bytes, bytes]] = [(FORWARDED_HEADER.encode(), self.me.name.encode())]
        if call.user is not None and self._signer is not None:
            token = self._signer.issue(call.user.name)
            sent.append((b"authorization", f"Bearer {token}".encode()))
        for name in _PASSED_HEADERS:
            for value in headers.get(name, []):
                sent.append((name.encode(), value.encode()))
        # the caller's endpoint choice, made here: the peer sees this node's user agent
        choice = ENDPOINTS_SINGLE if call.single_endpoint else ENDPOINTS_PARTITIONED
        sent.append((ENDPOINTS_HEADER.encode(), choice.encode()))
        return flight.FlightCallOptions(headers=sent,
                                        timeout=timeout_s or self.cluster.peer_timeout_s)

    def get_flight_info(self, node: str, descriptor: flight.FlightDescriptor,
                        options: flight.FlightCallOptions) -> flight.FlightInfo:
        """Plan on ``node``; raises :class:`PeerUnreachable` when it does not answer."""
        return self._guard(node, lambda c: c.get_flight_info(descriptor, options))

    def do_action(self, node: str, action: flight.Action,
                  options: flight.FlightCallOptions) -> list[bytes]:
        """The results' bodies of one DoAction on ``node``."""
        return self._guard(node, lambda c: [r.body.to_pybytes()
                                            for r in c.do_action(action, options)])

    def read(self, node: str, ticket: flight.Ticket,
             options: flight.FlightCallOptions) -> pa.Table:
        """All of one DoGet on ``node`` (small results only: metadata)."""
        return self._guard(node, lambda c: c.do_get(ticket, options).read_all())

    def stream(self, node: str, ticket: flight.Ticket,
               options: flight.FlightCallOptions) -> flight.FlightStreamReader:
        """One DoGet on ``node``, its stream read by the caller (an endpoint's records)."""
        return self._guard(node, lambda c: c.do_get(ticket, options))

    def node_at(self, location: str) -> str | None:
        """The name of the node at ``location`` (an endpoint's), None for none of ours."""
        return next((n.name for n in self.cluster.nodes.values() if n.location == location),
                    None)

    def _guard(self, node: str, work: Callable[[flight.FlightClient], T]) -> T:
        try:
            result = work(self._client(node))
        except (flight.FlightUnavailableError, flight.FlightTimedOutError) as exc:
            if _is_answer(exc):
                raise  # the peer answered (SlowDown, QueryTimeout...): pass its error on
            self._mark(node, up=False, reason=first_line(exc))
            self._drop_client(node)
            raise PeerUnreachable(node, first_line(exc)) from None
        self._mark(node, up=True)
        return result

    def _client(self, node: str) -> flight.FlightClient:
        with self._lock:
            client = self._clients.get(node)
            if client is None:
                location = self.cluster.node(node).location
                kwargs: dict[str, bytes] = {}
                if location.startswith("grpc+tls") and self._tls_root_certs is not None:
                    kwargs["tls_root_certs"] = self._tls_root_certs
                client = flight.FlightClient(location, **kwargs)
                self._clients[node] = client
            return client

    def _drop_client(self, node: str) -> None:
        """Forget a failed peer's client: gRPC holds a channel that failed to connect in
        back-off (up to minutes), so the next call must start a new channel. Not closed
        here: another thread may be in a call on it; it closes when the last user drops it."""
        with self._lock:
            self._clients.pop(node, None)

    # ------------------------------------------------------------------ health
    def is_up(self, node: str) -> bool:
        """This node's view of ``node``: itself is always up; a peer is as last seen (up
        until a call or a check says otherwise)."""
        if node == self.me.name:
            return True
        with self._lock:
            health = self._health.get(node)
        return health is None or health.up

    def confirm_up(self, node: str) -> bool:
        """Ask ``node`` now (bounded by the peer timeout) unless it was found down in the last
        second: a replica that plans must not send clients to an owner that died since the
        last periodic check (a connection refused answers at once; a hung node costs the
        timeout once, then counts as down for a second)."""
        if node == self.me.name:
            return True
        if self.recently_down(node):
            return False
        return self.check(self.cluster.node(node))

    def recently_down(self, node: str) -> bool:
        """True when ``node`` failed to answer in the last second (skip it without waiting)."""
        with self._lock:
            health = self._health.get(node)
        return health is not None and not health.up and time.time() - health.checked_at < _FRESH_S

    def live_first(self, nodes: Iterable[str], *, confirm: bool = False) -> list[str]:
        """``nodes`` in their order, those known to be down moved last."""
        ordered = list(nodes)
        up = {n: (self.confirm_up(n) if confirm else self.is_up(n)) for n in ordered}
        return [n for n in ordered if up[n]] + [n for n in ordered if not up[n]]

    def check(self, node: ClusterNode) -> bool:
        """Ask ``node`` for its health (bounded); log one ``peer_check`` line."""
        started = time.monotonic()
        headers = [(FORWARDED_HEADER.encode(), self.me.name.encode())]
        if self._signer is not None:  # as this node: no unauthenticated call in peers' logs
            token = self._signer.issue_node(self.me.name)
            headers.append((b"authorization", f"{NODE_SCHEME} {token}".encode()))
        options = flight.FlightCallOptions(headers=headers, timeout=self.cluster.peer_timeout_s)
        try:
            status = json.loads(b"".join(self._guard(
                node.name, lambda c: [r.body.to_pybytes() for r in c.do_action(
                    flight.Action("health", b""), options)])))
            up, detail = True, str(status.get("status", "ok"))
        except PeerUnreachable as exc:
            up, detail = False, exc.reason
        except flight.FlightError as exc:  # it answered, e.g. authentication required
            up, detail = True, first_line(exc)
        log_event("peer_check", peer=node.name, location=node.location, up=up, detail=detail,
                  ms=round((time.monotonic() - started) * 1000, 1))
        return up

    def start_checks(self) -> None:
        """Check every peer now and then every ``peer_check_s`` seconds, in a daemon thread."""
        def loop() -> None:
            while True:
                for node in self.cluster.nodes.values():
                    if node.name != self.me.name:
                        self.check(node)
                if self._stop.wait(self.cluster.peer_check_s):
                    return

        self._checker = threading.Thread(target=loop, name="peer-checks", daemon=True)
        self._checker.start()

    def close(self) -> None:
        """Stop the checks and close the clients."""
        self._stop.set()
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _mark(self, node: str, *, up: bool, reason: str = "") -> None:
        with self._lock:
            before = self._health.get(node)
            self._health[node] = _Health(up, time.time())
        if before is None or before.up != up:
            log_event("peer_state", peer=node, up=up, reason=reason or None)

    def unavailable(self, nodes: list[str], what: str,
                    failures: Mapping[str, str]) -> NodeUnavailableError:
        """The error for ``what`` when none of ``nodes`` answered."""
        detail = "; ".join(f"{n} ({self.cluster.node(n).location}): {failures.get(n, 'down')}"
                           for n in nodes)
        return NodeUnavailableError(
            f"no node holding {what} answered: {detail}", nodes=nodes)


def _is_answer(exc: flight.FlightError) -> bool:
    """True when the error is a document our server sent (it is up and said no)."""
    try:
        document = json.loads(exc.extra_info or b"")
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(document, dict) and "code" in document


def first_line(exc: BaseException) -> str:
    """An error's first line (its type's name when it has no text)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
