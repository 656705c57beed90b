"""``flight-select cluster status``: each node of a cluster file asked, over Flight, whether it
is up and how many objects and bytes its holdings have."""

from __future__ import annotations

import json

import pyarrow.flight as flight

from flight_storage.rpc.middleware import log_event
from flight_storage.rpc.roles.peers import FORWARDED_HEADER, first_line
from flight_storage.storage.cluster import ClusterDescription, ClusterNode


def cluster_status(cluster: ClusterDescription, user: str | None = None,
                   password: str | None = None) -> list[dict[str, object]]:
    """Each node's state: up or down, and the objects and bytes it holds (``cluster status``).

    Asks every node's ``health`` action, then lists each bucket of its holdings with
    ``ListObjects`` (marked as forwarded, so each node counts only its own data); a fleet's
    nodes hold nothing of their own (``objects`` and ``bytes`` None, ``serves`` the shared
    store, ``buckets`` the buckets it serves). A node that
    answers but refuses the credentials (none given to an ``--auth`` cluster, a wrong
    password, a user without rights) is up, with ``objects`` and ``bytes`` None and an
    ``error`` saying what to pass.
    """
    return [_node_status(cluster, node, user, password) for node in cluster.nodes.values()]


def _node_status(cluster: ClusterDescription, node: ClusterNode, user: str | None,
                 password: str | None) -> dict[str, object]:
    state: dict[str, object] = {"node": node.name, "location": node.location, "up": False,
                                "objects": 0, "bytes": 0}
    headers = [(FORWARDED_HEADER.encode(), b"cluster-status")]
    client = flight.FlightClient(node.location)
    try:
        if user is not None:
            headers.append(client.authenticate_basic_token(
                user, password or "", flight.FlightCallOptions(timeout=cluster.peer_timeout_s)))
        options = flight.FlightCallOptions(headers=headers, timeout=cluster.peer_timeout_s)
        health = json.loads(b"".join(r.body.to_pybytes() for r in client.do_action(
            flight.Action("health", b""), options)))
        state.update(up=True, status=health.get("status"),
                     open_streams=health.get("open_streams"))
        if cluster.is_fleet:  # every node serves the store's objects: none are its own
            state.update(objects=None, bytes=None, buckets=health.get("buckets"),
                         serves="the shared store")
        for holding in cluster.holdings_of(node.name):
            objects, size = _holding_size(client, holding.bucket, holding.prefix, options)
            state["objects"] = int(state["objects"]) + objects  # type: ignore[call-overload]
            state["bytes"] = int(state["bytes"]) + size  # type: ignore[call-overload]
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError) as exc:
        # it answered: up, but it refuses these credentials (its holdings are unknown)
        state.update(up=True, objects=None, bytes=None, error=_refusal(exc, user))
    except flight.FlightError as exc:
        state["error"] = first_line(exc)
    finally:
        client.close()
    log_event("peer_check", peer=node.name, location=node.location, up=state["up"],
              detail=state.get("error") or state.get("status"))
    return state


def _refusal(exc: flight.FlightError, user: str | None) -> str:
    """What to do about a node that is up but refuses ``cluster status``'s credentials."""
    if user is None:
        return ("up, but it needs a login (its nodes use --auth): pass --user NAME, with the "
                "password in $FLIGHT_SELECT_PASSWORD")
    if isinstance(exc, flight.FlightUnauthorizedError):
        return f"up, but user {user} may not list its holdings: {first_line(exc)}"
    return (f"up, but it refused user {user}: check the password in $FLIGHT_SELECT_PASSWORD "
            f"({first_line(exc)})")


def _holding_size(client: flight.FlightClient, bucket: str, prefix: str,
                  options: flight.FlightCallOptions) -> tuple[int, int]:
    objects = size = 0
    start_after = ""
    while True:
        body = json.dumps({"bucket": bucket, "prefix": prefix, "start_after": start_after,
                           "max_keys": 10000}).encode()
        page = json.loads(b"".join(r.body.to_pybytes() for r in client.do_action(
            flight.Action("ListObjects", body), options)))
        objects += len(page["objects"])
        size += sum(int(o["size"]) for o in page["objects"])
        if not page.get("next_start_after"):
            return objects, size
        start_after = page["next_start_after"]


def format_status(nodes: list[dict[str, object]]) -> str:
    """A table of :func:`cluster_status` for people."""
    lines = [f"{'node':<12} {'location':<28} {'state':<6} {'objects':>8} {'bytes':>14}"]
    for n in nodes:
        state = "up" if n["up"] else "DOWN"
        unknown = "shared" if n.get("serves") else "?"
        objects, size = (unknown if n[k] is None else n[k] for k in ("objects", "bytes"))
        lines.append(f"{n['node']!s:<12} {n['location']!s:<28} {state:<6} {objects!s:>8} "
                     f"{size!s:>14}" + (f"  {n['error']}" if n.get("error") else ""))
    return "\n".join(lines)
