"""The DoAction handlers: one record per action (its description and its handler).

The Flight SQL actions (prepared statements, cancelling, transactions, closing a session) and
this server's own (``health``, ``ListObjects``). Hand-written because pyarrow.flight has no
Flight SQL server layer to dispatch actions.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from threading import Event
from typing import Final, Protocol

import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import InvalidRequestError
from flight_storage.protocol import PreparedHandle, pb
from flight_storage.request.parameters import has_parameters
from flight_storage.rpc import ingest, sessions
from flight_storage.rpc.auth import Users
from flight_storage.rpc.metadata import SERVER_NAME, SERVER_VERSION
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.tables.kinds import check_statement
from flight_storage.rpc.tables.seam import Planned, Statement


class ActionHost(ServerParts, Protocol):
    """What the action handlers use of the server beyond the tables' part of it."""

    users: Users | None
    aborting: Event

    def plan_statement(self, call: CallContext, statement: Statement) -> Planned: ...

    def decode_handle(self, call: CallContext, data: bytes) -> PreparedHandle: ...

    def cancel_endpoints(self, call: CallContext, info_bytes: bytes) -> pb.CancelStatus: ...


def _create_prepared(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:
    request = protocol.decode_action("CreatePreparedStatement", body)
    query = request.query
    host.check_query_length(query)
    session = sessions.current(host, call)
    handle = PreparedHandle(query=query, flavor=call.statement_flavor,
                            user=call.user_name, catalog=session.catalog,
                            schema=session.schema)
    result = pb.ActionCreatePreparedStatementResult(
        prepared_statement_handle=protocol.encode_handle(handle, host.secret)
    )
    if has_parameters(query):
        # The parameter types are known once bound; still check the statement now.
        check_statement(host, call, Statement(query, call.statement_flavor, session=session))
    else:
        planned = host.plan_statement(call, Statement(query, call.statement_flavor,
                                                      session=session))
        result.dataset_schema = planned.arrow_schema.serialize().to_pybytes()
    return [flight.Result(protocol.pack_any(result))]

def _close_prepared(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:
    request = protocol.decode_action("ClosePreparedStatement", body)
    host.decode_handle(call, request.prepared_statement_handle)
    return []

def _cancel(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:
    request = protocol.decode_action("CancelFlightInfo", body)
    status = host.cancel_endpoints(call, request.info)
    return [flight.Result(pb.CancelFlightInfoResult(status=status).SerializeToString())]

def _cancel_query(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:
    request = protocol.decode_action("CancelQuery", body)
    status = host.cancel_endpoints(call, request.info)
    result = pb.ActionCancelQueryResult(result=_CANCEL_RESULTS[status])
    return [flight.Result(protocol.pack_any(result))]

def _begin_transaction(host: ActionHost, call: CallContext,  # noqa: ARG001 - an ACTIONS handler
                       body: bytes) -> list[flight.Result]:
    """A transaction id for clients that turn autocommit off. Only SELECT runs, so there is
    nothing to isolate or undo: each statement reads its objects' versions current when it is
    planned (read committed), and the id is a random token no later call needs to find."""
    protocol.decode_action("BeginTransaction", body)
    result = pb.ActionBeginTransactionResult(transaction_id=secrets.token_bytes(16))
    return [flight.Result(protocol.pack_any(result))]

def _end_transaction(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:  # noqa: ARG001 - an ACTIONS handler
    """COMMIT or ROLLBACK: nothing was written, so both succeed with nothing to do."""
    request = protocol.decode_action("EndTransaction", body)
    if not request.transaction_id:
        raise InvalidRequestError("EndTransaction names no transaction_id")
    if request.action not in _END_TRANSACTION:
        raise InvalidRequestError("EndTransaction needs END_TRANSACTION_COMMIT or "
                                  "END_TRANSACTION_ROLLBACK")
    return []

def _list_objects(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:
    try:
        request = json.loads(body or b"{}")
        bucket = str(request["bucket"])
        prefix = str(request.get("prefix", ""))
        start_after = str(request.get("start_after", ""))
        max_keys = int(request.get("max_keys", 1000))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidRequestError(f"ListObjects takes JSON {{bucket, prefix, start_after, "
                                  f"max_keys}} ({exc})") from None
    host.check_access(call, bucket)
    page = host.bounded(call, "ListObjects", lambda _stop: host.catalog.list_page(
        bucket, prefix, start_after, min(max_keys, 10000)))
    document = {
        "objects": [{"key": o.key, "size": o.size, "mtime_ns": o.mtime_ns}
                    for o in page.objects],
        "next_start_after": page.next_start_after,
    }
    return [flight.Result(json.dumps(document).encode())]

def _health(host: ActionHost, call: CallContext, body: bytes) -> list[flight.Result]:  # noqa: ARG001 - an ACTIONS handler
    status: dict[str, object] = {
        "status": "stopping" if host.aborting.is_set() else "ok",
        "server": SERVER_NAME,
        "version": SERVER_VERSION,
        "buckets": len(host.readable_buckets(call)),
        "open_streams": host.streams.open_streams,
        "computing_streams": host.streams.computing,
        "max_concurrent_queries": host.config.max_concurrent_queries,
        "auth": host.users is not None,
        "tls": host.config.scheme == "grpc+tls",
    }
    if host.engine.decoded is not None:  # entries, bytes, hits, misses, fills, evictions
        status["decoded_cache"] = host.engine.decoded.stats()
    return [flight.Result(json.dumps(status).encode())]


_END_TRANSACTION: Final = frozenset({
    pb.ActionEndTransactionRequest.END_TRANSACTION_COMMIT,
    pb.ActionEndTransactionRequest.END_TRANSACTION_ROLLBACK,
})

_CANCEL_RESULTS: Final = {
    pb.CANCEL_STATUS_CANCELLED: pb.ActionCancelQueryResult.CANCEL_RESULT_CANCELLED,
    pb.CANCEL_STATUS_NOT_CANCELLABLE: pb.ActionCancelQueryResult.CANCEL_RESULT_NOT_CANCELLABLE,
}
"""The deprecated CancelQuery's answer for each CancelFlightInfo status the server gives."""


@dataclass(frozen=True)
class Action:
    """One DoAction type: what ListActions says about it and what runs it."""

    description: str
    handle: Callable[[ActionHost, CallContext, bytes], list[flight.Result]]


ACTIONS: Final[Mapping[str, Action]] = {
    "CreatePreparedStatement": Action("prepare an s3-select statement", _create_prepared),
    "ClosePreparedStatement": Action("close a prepared statement", _close_prepared),
    "CancelFlightInfo": Action("cancel a query's endpoints", _cancel),
    "CancelQuery": Action("cancel a query's endpoints (deprecated Flight SQL action)",
                          _cancel_query),
    "BeginTransaction": Action("begin a transaction (read-only: nothing to commit)",
                               _begin_transaction),
    "EndTransaction": Action("commit or roll back a transaction (nothing was written)",
                             _end_transaction),
    "SetSessionOptions": Action("set session options: catalog (a bucket), schema (a key "
                                "prefix); kept in a signed cookie", sessions.set_session_options),
    "GetSessionOptions": Action("the session's options", sessions.get_session_options),
    "CloseSession": Action("close the session (the client drops its cookie)",
                           sessions.close_session),
    "CommitIngest": Action('store the staged objects of a bulk write: JSON {"staged": '
                           '[token, ...], "replace": bool}', ingest.commit_staged),
    "AbortIngest": Action('remove the staged objects of a bulk write: JSON {"staged": '
                          '[token, ...]}', ingest.abort_staged),
    "health": Action("server status as JSON", _health),
    "ListObjects": Action(
        "a page of a bucket's objects: JSON {bucket, prefix, start_after, max_keys} -> "
        "{objects: [{key, size, mtime_ns}], next_start_after}",
        _list_objects),
}
"""Every action, in the order ListActions reports them."""
