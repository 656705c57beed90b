"""The one place where server-side exceptions become what a Flight client receives.

pyarrow.flight sends a Python traceback with any exception that is not a ``FlightError``, and
``FlightError`` subclasses can only express seven gRPC statuses (no INVALID_ARGUMENT,
NOT_FOUND or RESOURCE_EXHAUSTED). So:

* errors whose status pyarrow cannot express as a ``FlightError`` are raised as Arrow
  exceptions of the right Arrow code (``ArrowInvalid`` -> INVALID_ARGUMENT, ``KeyError`` ->
  NOT_FOUND), with the traceback suppressed (see :class:`_NoTraceback`), and the JSON error
  document as their message;
* the others (unauthenticated, permission denied, unavailable, internal) are ``FlightError``s
  carrying the same JSON document both as message and as ``extra_info``.

RESOURCE_EXHAUSTED is not reachable from pyarrow at all: its C++ layer maps Arrow status codes
to gRPC codes and has no code that becomes RESOURCE_EXHAUSTED (``MemoryError``,
``ArrowCapacityError`` and ``ArrowMemoryError`` all arrive as UNKNOWN, with a traceback;
``tests/flight_storage/test_boundary.py`` pins this). Resource limits (``ResourceLimitError``)
are therefore sent by their S3 code (:data:`RESOURCE_STATUS`): limits of the request itself
(query text too long, record too large) as INVALID_ARGUMENT, as S3 answers 400 for them; the
query timeout as DEADLINE_EXCEEDED; the others (too many queries, memory, shutting down) as
UNAVAILABLE, which clients treat as "retry later" and S3 answers as 503 SlowDown.

The JSON document is ``{"code": <S3 error code>, "message": ..., "line": .., "column": ..}``.
Anything unexpected is logged with an incident id and answered as an internal error naming
only that id.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage.errors import StorageError
from flight_storage.protocol import ProtocolError, TicketError, UnknownCommandError
from select_dialect.errors import SelectDialectError

log = logging.getLogger(__name__)


class _NoTraceback:
    """Mixin that keeps pyarrow from sending a traceback with the error.

    pyarrow formats the exception with ``traceback.format_exception`` for the status detail and
    falls back to the bare type name when that fails; reading ``__notes__`` is the first thing
    that formatting does that an exception class controls. ``tests/flight_storage/
    test_boundary.py`` pins that no traceback reaches a client.
    """

    @property
    def __notes__(self) -> Any:
        raise RuntimeError("client-facing error: no traceback")

    # A setter keeps the attribute writable, as on BaseException (mypy: a read-only override
    # of a writable attribute); it refuses, as the getter-only property did.
    @__notes__.setter
    def __notes__(self, value: Any) -> None:
        raise AttributeError("client-facing error: no notes")


class InvalidArgument(_NoTraceback, pa.ArrowInvalid):
    """Sent as gRPC INVALID_ARGUMENT."""


class NotFound(_NoTraceback, KeyError):
    """Sent as gRPC NOT_FOUND."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Unimplemented(_NoTraceback, NotImplementedError):
    """Sent as gRPC UNIMPLEMENTED."""


def error_document(exc: StorageError | SelectDialectError) -> dict[str, Any]:
    """The JSON error document for a user-facing error."""
    if isinstance(exc, StorageError):
        return exc.to_dict()
    doc: dict[str, Any] = {"code": exc.code, "message": exc.message}
    for name in ("line", "column", "text"):
        value = getattr(exc, name, None)
        if value is not None:
            doc[name] = value
    return doc


def _flight_error(cls: type[flight.FlightError], doc: dict[str, Any]) -> Exception:
    text = json.dumps(doc, ensure_ascii=False)
    error: Exception = cls(text, extra_info=text.encode())  # pyarrow's FlightError is an Exception
    return error


_BY_STATUS: dict[str, Callable[[dict[str, Any]], BaseException]] = {
    "invalid_argument": lambda doc: InvalidArgument(json.dumps(doc, ensure_ascii=False)),
    "not_found": lambda doc: NotFound(json.dumps(doc, ensure_ascii=False)),
    "unimplemented": lambda doc: Unimplemented(json.dumps(doc, ensure_ascii=False)),
    "permission_denied": lambda doc: _flight_error(flight.FlightUnauthorizedError, doc),
    "unauthenticated": lambda doc: _flight_error(flight.FlightUnauthenticatedError, doc),
    "unavailable": lambda doc: _flight_error(flight.FlightUnavailableError, doc),
    "cancelled": lambda doc: _flight_error(flight.FlightCancelledError, doc),
    "timed_out": lambda doc: _flight_error(flight.FlightTimedOutError, doc),
}


RESOURCE_STATUS: dict[str, str] = {
    "ExpressionTooLong": "invalid_argument",
    "OverMaxRecordSize": "invalid_argument",
    "ExpressionTooComplex": "invalid_argument",
    "QueryTimeout": "timed_out",
}
"""S3 code of a resource limit -> the status sent; any other limit is ``unavailable``."""


def _status(exc: StorageError) -> str:
    if exc.status == "resource_exhausted":
        return RESOURCE_STATUS.get(exc.code, "unavailable")
    return exc.status if exc.status in _BY_STATUS else "invalid_argument"


def client_error(exc: BaseException) -> BaseException:
    """Map any exception to the one sent to the client (never with a traceback)."""
    if isinstance(exc, (flight.FlightError, InvalidArgument, NotFound, Unimplemented)):
        return exc
    if isinstance(exc, StorageError):
        return _BY_STATUS[_status(exc)](error_document(exc))
    if isinstance(exc, SelectDialectError):
        return _BY_STATUS["invalid_argument"](error_document(exc))
    if isinstance(exc, UnknownCommandError):
        return _BY_STATUS["unimplemented"](
            {"code": "NotImplemented", "message": f"unsupported command: {exc.name}"}
        )
    if isinstance(exc, TicketError):
        return _BY_STATUS["permission_denied"]({"code": "InvalidTicket", "message": str(exc)})
    if isinstance(exc, ProtocolError):
        return _BY_STATUS["invalid_argument"]({"code": "InvalidRequest", "message": str(exc)})
    incident = uuid.uuid4().hex[:12]
    log.error("internal error incident=%s", incident, exc_info=exc)
    return _flight_error(
        flight.FlightInternalError, {"code": "InternalError", "message": f"internal error, id={incident}"}
    )


PEER_ERRORS: tuple[type[BaseException], ...] = (
    flight.FlightError, pa.ArrowException, KeyError, NotImplementedError)
"""What a Flight client raises for another node's answer: pyarrow raises ``ArrowInvalid``,
``KeyError`` and ``NotImplementedError`` for INVALID_ARGUMENT, NOT_FOUND and UNIMPLEMENTED."""


def peer_error(exc: BaseException) -> StorageError:
    """The inverse of :func:`client_error` for an error another node's Flight server sent
    (reading a cluster's remote endpoint): the error its JSON document names, found in
    ``extra_info`` or, for INVALID_ARGUMENT and NOT_FOUND (which pyarrow sends without it),
    in the message text; ``InternalError`` when it carries none."""
    extra = getattr(exc, "extra_info", None) or b""
    for text in (extra.decode("utf-8", "replace"), str(exc)):
        start = text.find("{")
        if start < 0:
            continue
        try:
            doc, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("code"), str):
            return StorageError(str(doc.get("message", "")), code=doc["code"],
                                line=doc.get("line"), column=doc.get("column"))
    return StorageError("the query failed inside the server", code="InternalError")


F = TypeVar("F", bound=Callable[..., Any])


def rpc_boundary(method: F) -> F:
    """Decorate an RPC method so every exception leaves as :func:`client_error`."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except BaseException as exc:  # the boundary: nothing may escape unconverted
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise client_error(exc) from None

    return wrapper  # type: ignore[return-value]


def guarded(items: Iterator[Any]) -> Iterator[Any]:
    """Wrap a stream's generator so errors raised while it is consumed are converted too."""
    try:
        yield from items
    except GeneratorExit:
        raise
    except BaseException as exc:  # the boundary for streamed results
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise client_error(exc) from None
