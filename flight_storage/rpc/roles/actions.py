"""The DoAction requests that involve a cluster's other nodes: preparing a statement on a node
holding its table (and where any planning command goes), listing objects over every node holding keys under the prefix, cancelling
on every node a FlightInfo's endpoints name. The other actions are answered where they arrive
(``flight_storage.rpc.actions``); a role asks for these (``cluster.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError
from flight_storage.request.s3_request import is_json_request, parse_request
from flight_storage.request.statement import split_table_reference
from flight_storage.rpc import access
from flight_storage.rpc.actions import ACTIONS, ActionHost
from flight_storage.rpc.middleware import CallContext

if TYPE_CHECKING:  # cluster.py's roles answer these actions with CLUSTER_ACTIONS
    from flight_storage.rpc.roles.cluster import ClusterRole

Headers = Mapping[str, list[str]]
Target = Callable[[], "tuple[str, str] | None"]
"""The bucket and key (or prefix) a planning command reads (:func:`planning_target`), asked
only by a role that routes by them."""
ClusterAction = Callable[[ActionHost, "ClusterRole", Headers, CallContext, flight.Action, bytes],
                         list[flight.Result]]


def statement_target(query: str) -> tuple[str, str] | None:
    """The bucket and key a statement names in FROM (None for one without FROM)."""
    reference, _ = split_table_reference(query)
    if reference is not None and not reference.qualified:
        raise InvalidRequestError(
            f'{reference.key!r} names no bucket: a cluster routes only "bucket"."key" names',
            code="MissingObject")
    return None if reference is None else (reference.bucket, reference.key)


def planning_target(host: ActionHost, call: CallContext,
                    command: bytes) -> tuple[str, str] | None:
    """The bucket and key (or prefix) a planning command reads, None for other commands:
    the nodes holding them plan it."""
    if is_json_request(command):
        request = parse_request(command)
        return request.bucket, request.key
    _, message = protocol.unpack_any(command)
    if isinstance(message, protocol.pb.CommandStatementQuery):
        query = message.query
    elif isinstance(message, protocol.pb.CommandPreparedStatementQuery):
        query = host.decode_handle(call, bytes(message.prepared_statement_handle)).query
    else:
        return None
    return statement_target(query)


def _prepare(host: ActionHost, cluster: ClusterRole, headers: Headers, call: CallContext,
             action: flight.Action, body: bytes) -> list[flight.Result]:
    """Prepare on a node holding the table: the answer holds its schema."""
    query = protocol.decode_action("CreatePreparedStatement", body).query
    target = statement_target(query)
    forwarded = None if target is None else cluster.forward_action(
        call, headers, action, *target)
    if forwarded is None:
        return ACTIONS[action.type].handle(host, call, body)
    return [flight.Result(b) for b in forwarded]


def _list_objects(host: ActionHost, cluster: ClusterRole, headers: Headers, call: CallContext,
                  action: flight.Action, body: bytes) -> list[flight.Result]:
    """ListObjects over every node holding keys under the prefix."""
    try:
        request = json.loads(body or b"{}")
        request["bucket"]
    except (ValueError, KeyError, TypeError):
        return ACTIONS[action.type].handle(host, call, body)  # its error message
    return [flight.Result(list_page(host, cluster, headers, call, request))]


def list_page(host: ActionHost, cluster: ClusterRole, headers: Headers, call: CallContext,
              request: Mapping[str, Any]) -> bytes:
    """One ListObjects page (the action's JSON answer) over every node holding keys under
    the request's bucket and prefix, for ``call``'s user (the S3 door's listings call it in
    process)."""
    # not check_access: the bucket may be held by other nodes only
    access.check_read(call.user, str(request["bucket"]))
    body = json.dumps(request).encode()
    return cluster.list_objects(call, headers, request, lambda: ACTIONS["ListObjects"].handle(
        host, call, body)[0].body.to_pybytes())


def _cancel(host: ActionHost, cluster: ClusterRole, headers: Headers, call: CallContext,
            action: flight.Action, body: bytes) -> list[flight.Result]:
    """Cancel here, then on every other node the endpoints name."""
    results = ACTIONS[action.type].handle(host, call, body)
    info = protocol.decode_action(action.type, body).info
    cluster.cancel_elsewhere(call, headers, action, info)
    return results


CLUSTER_ACTIONS: Final[Mapping[str, ClusterAction]] = {
    "CreatePreparedStatement": _prepare,
    "ListObjects": _list_objects,
    "CancelFlightInfo": _cancel,
    "CancelQuery": _cancel,
}
"""Actions that involve other nodes of a cluster (the others are answered here)."""
