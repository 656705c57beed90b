"""Flight SQL wire messages: ``Any`` packing, action bodies, call headers and the errors.

Commands. Flight SQL puts protobuf messages packed in ``google.protobuf.Any`` (type URL
``type.googleapis.com/arrow.flight.protocol.sql.<Name>``) into ``FlightDescriptor.command``,
``Ticket.ticket``, ``Action.body`` and ``Result.body``. :func:`pack_any` and
:func:`unpack_any` convert; :func:`decode_action` also handles the core Flight actions
(``CancelFlightInfo``, ``CloseSession``, ``SetSessionOptions``, ``GetSessionOptions``) whose
bodies are plain serialized messages.
Hand-written because pyarrow.flight has no Flight SQL layer in Python.

Errors::

    ProtocolError                garbled input, or a message of the wrong kind
    ├── UnknownCommandError      a well-formed message this module does not know (.name)
    └── TicketError              bad magic/version/signature/payload, or expired
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from flight_storage import _flight_sql_pb2 as pb


class ProtocolError(Exception):
    """A Flight SQL message could not be decoded or is not the kind expected."""


class UnknownCommandError(ProtocolError):
    """A well-formed message whose type this module does not know.

    Attributes:
        name: the message or action name as sent (the last part of the type URL, or the
            full type URL when it is not a Flight SQL one), for an UNIMPLEMENTED answer.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"unsupported Flight SQL command: {name}")
        self.name = name


class TicketError(ProtocolError):
    """A ticket or prepared-statement handle was forged, altered, expired or malformed."""


FLAVOR_HEADER: Final = "x-flight-select-flavor"
"""Call header naming the dialect flavour (``standard``, ``ceph``, ``aws``; the list is
``select_dialect.flavors``). Absent: ``standard`` for Flight SQL statements, ``ceph`` for S3
SelectObjectContent requests."""
ENDPOINTS_HEADER: Final = "x-flight-select-endpoints"
"""Call header: :data:`ENDPOINTS_PARTITIONED` asks for one endpoint per partition (for clients
that read every endpoint of a FlightInfo), :data:`ENDPOINTS_SINGLE` for one endpoint carrying
the whole result. Absent: one endpoint unless the client is known to read them all
(``flight_storage.rpc.endpoint_readers``)."""
PARALLELISM_HEADER: Final = "x-flight-select-parallelism"
"""Call header: a whole number N >= 1, the endpoints a client that reads every endpoint would
like a statement over one object cut into (Spark with many executors): byte ranges (Parquet:
row-group groups) of at least the engine's 1 MiB split floor instead of ``--endpoint-min-mb``,
up to N (capped by the server's ``--max-parallelism``), never fewer than without it. Only with
one endpoint per partition (:data:`ENDPOINTS_HEADER`, or a client known to read them all);
ignored for a single endpoint, prefix and Iceberg tables, statements over several tables and S3
requests. Anything but a whole number >= 1 is refused (``InvalidRequest``)."""
INGEST_STAGE_OPTION: Final = "flight-select.stage"
"""``CommandStatementIngest.options`` key: ``true`` keeps the ingested object staged until the
``CommitIngest`` action stores it (``AbortIngest`` removes it); the Spark writer's two phases."""
INGEST_JOB_OPTION: Final = "flight-select.job"
"""With :data:`INGEST_STAGE_OPTION`: the writing job's id (hex), so that ``AbortIngest`` of
the job also removes what its tasks stage after the abort."""
ENDPOINTS_SINGLE: Final = "single"
ENDPOINTS_PARTITIONED: Final = "partitioned"

TYPE_URL_PREFIX: Final = "type.googleapis.com/arrow.flight.protocol.sql."

# Every Flight SQL message the server may receive inside an Any, by name. The server decides
# which ones it serves; the others are decoded only so it can refuse them by name.
_ANY_MESSAGES: Final[Mapping[str, type[Message]]] = {
    cls.DESCRIPTOR.name: cls
    for cls in (
        pb.CommandGetSqlInfo,
        pb.CommandGetXdbcTypeInfo,
        pb.CommandGetCatalogs,
        pb.CommandGetDbSchemas,
        pb.CommandGetTables,
        pb.CommandGetTableTypes,
        pb.CommandGetPrimaryKeys,
        pb.CommandGetExportedKeys,
        pb.CommandGetImportedKeys,
        pb.CommandGetCrossReference,
        pb.ActionCreatePreparedStatementRequest,
        pb.ActionCreatePreparedStatementResult,
        pb.ActionClosePreparedStatementRequest,
        pb.CommandStatementQuery,
        pb.CommandStatementSubstraitPlan,
        pb.TicketStatementQuery,
        pb.CommandPreparedStatementQuery,
        pb.CommandStatementUpdate,
        pb.CommandPreparedStatementUpdate,
        pb.CommandStatementIngest,
        pb.DoPutUpdateResult,
        pb.DoPutPreparedStatementResult,
        pb.ActionCancelQueryRequest,
        pb.ActionCancelQueryResult,
        pb.ActionBeginTransactionRequest,
        pb.ActionBeginTransactionResult,
        pb.ActionEndTransactionRequest,
    )
}

# Flight action type -> (request message, whether the body is wrapped in Any). Flight SQL
# actions wrap their body; the core Flight actions send the message itself.
FLIGHT_ACTIONS: Final[Mapping[str, tuple[type[Message], bool]]] = {
    "CreatePreparedStatement": (pb.ActionCreatePreparedStatementRequest, True),
    "ClosePreparedStatement": (pb.ActionClosePreparedStatementRequest, True),
    "CancelQuery": (pb.ActionCancelQueryRequest, True),
    "BeginTransaction": (pb.ActionBeginTransactionRequest, True),
    "EndTransaction": (pb.ActionEndTransactionRequest, True),
    "CancelFlightInfo": (pb.CancelFlightInfoRequest, False),
    "CloseSession": (pb.CloseSessionRequest, False),
    "SetSessionOptions": (pb.SetSessionOptionsRequest, False),
    "GetSessionOptions": (pb.GetSessionOptionsRequest, False),
}


def pack_any(message: Message) -> bytes:
    """Serialize a Flight SQL message wrapped in ``google.protobuf.Any``.

    Args:
        message: an instance of one of the Flight SQL classes in ``protocol.pb``.

    Returns:
        The serialized ``Any`` (type URL ``type.googleapis.com/arrow.flight.protocol.sql.<Name>``),
        ready for ``FlightDescriptor.for_command``, ``Ticket`` or a ``Result`` body.

    Raises:
        ProtocolError: the message is not a Flight SQL message this module knows.

    Example:
        >>> unpack_any(pack_any(pb.CommandStatementQuery(query="SELECT 1")))[0]
        'CommandStatementQuery'
    """
    name = message.DESCRIPTOR.name
    if _ANY_MESSAGES.get(name) is not type(message):
        raise ProtocolError(f"not a Flight SQL message: {message.DESCRIPTOR.full_name}")
    wrapped = any_pb2.Any(type_url=TYPE_URL_PREFIX + name, value=message.SerializeToString())
    return bytes(wrapped.SerializeToString())


def unpack_any(data: bytes) -> tuple[str, Message]:
    """Decode a serialized ``google.protobuf.Any`` holding a Flight SQL message.

    Args:
        data: the bytes of a descriptor command, ticket, action body or result body.

    Returns:
        ``(name, message)``, e.g. ``("CommandStatementQuery", <message>)``.

    Raises:
        UnknownCommandError: well-formed, but not a Flight SQL message known here; ``.name``
            names it.
        ProtocolError: the bytes are not a serialized ``Any`` or its value does not parse.
    """
    wrapped = any_pb2.Any()
    try:
        wrapped.ParseFromString(bytes(data))
    except (DecodeError, ValueError) as exc:
        raise ProtocolError("command is not a serialized google.protobuf.Any") from exc
    if not wrapped.type_url:
        raise ProtocolError("command is not a serialized google.protobuf.Any (no type URL)")
    if not wrapped.type_url.startswith(TYPE_URL_PREFIX):
        raise UnknownCommandError(wrapped.type_url)
    name = wrapped.type_url[len(TYPE_URL_PREFIX) :]
    cls = _ANY_MESSAGES.get(name)
    if cls is None:
        raise UnknownCommandError(name)
    return name, _parse(cls, wrapped.value, name)


def decode_action(action_type: str, body: bytes) -> Message:
    """Decode the body of a Flight SQL or core Flight action.

    Args:
        action_type: ``Action.type`` (e.g. ``"CreatePreparedStatement"``, ``"CloseSession"``).
        body: ``Action.body`` bytes.

    Returns:
        The request message; for ``CancelFlightInfo`` its ``info`` field holds a serialized
        FlightInfo (``pyarrow.flight.FlightInfo.deserialize``).

    Raises:
        UnknownCommandError: the action type is not one listed in :data:`FLIGHT_ACTIONS`.
        ProtocolError: the body does not decode as that action's request.
    """
    entry = FLIGHT_ACTIONS.get(action_type)
    if entry is None:
        raise UnknownCommandError(action_type)
    cls, wrapped = entry
    if not wrapped:
        return _parse(cls, bytes(body), action_type)
    name, message = unpack_any(body)
    if type(message) is not cls:
        raise ProtocolError(f"action {action_type} carries {name}, expected {cls.DESCRIPTOR.name}")
    return message


def _parse(cls: type[Message], data: bytes, what: str) -> Message:
    message = cls()
    try:
        message.ParseFromString(data)
    except (DecodeError, ValueError) as exc:
        raise ProtocolError(f"garbled {what} message") from exc
    return message
