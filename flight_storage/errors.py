"""Errors raised by the storage side, each carrying an S3 error code.

    StorageError (code, message, status)
    ├── ObjectNotFoundError        NoSuchKey / NoSuchBucket        -> not found
    ├── AccessDeniedError          AccessDenied                    -> permission denied
    ├── InvalidRequestError        InvalidRequest, InvalidScanRange… -> invalid argument
    ├── InputFormatError           CSVParsingError, JSONParsingError, InvalidTextEncoding,
    │                              OverMaxRecordSize, InvalidCompressionFormat, … -> invalid argument
    ├── QueryExecutionError        CastFailed, ProcessingTimeError, …  -> invalid argument
    ├── StaleTicketError           PreconditionFailed: the objects changed since planning
    ├── ResourceLimitError         query too long, too many queries, memory, timeout -> resource exhausted
    ├── WrongNodeError             WrongNode: this cluster node does not hold the object
    ├── NodeUnavailableError       NodeUnavailable: no node holding the object answered -> unavailable
    ├── StoreUnavailableError      ServiceUnavailable, SlowDown: the object store did not answer
    │                              (unreachable, throttling past the retries) -> unavailable
    ├── ConflictError              ConditionalRequestConflict: a concurrent write won; nothing of
    │                              this one was kept, send it again -> unavailable
    └── NotImplementedFeatureError NotImplemented: input we know and do not read yet (an Iceberg
                                   delete file) -> unimplemented

``StoppedError`` is not among them: it ends work whose query was told to stop (timed out,
cancelled, the server stopping), after the client has been answered; no client sees it.

The server converts these at one boundary into Flight errors whose ``extra_info`` is the
JSON of :meth:`StorageError.to_dict`; anything else is an internal error with an incident id.
"""

from __future__ import annotations

from typing import Any


class StorageError(Exception):
    """Base class: a user-facing error with an S3 error code."""

    code: str = "InternalError"
    status: str = "invalid_argument"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        line: int | None = None,
        column: int | None = None,
        offset: int | None = None,
        row: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.line = line
        self.column = column
        self.offset = offset
        self.row = row

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able description sent to clients (never a traceback)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        for name in ("line", "column", "offset", "row"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ObjectNotFoundError(StorageError):
    code = "NoSuchKey"
    status = "not_found"


class AccessDeniedError(StorageError):
    code = "AccessDenied"
    status = "permission_denied"


class InvalidRequestError(StorageError):
    code = "InvalidRequest"


class InputFormatError(StorageError):
    """The object's bytes do not match its declared InputSerialization."""

    code = "InvalidInput"


class QueryExecutionError(StorageError):
    code = "ProcessingTimeError"


class StaleTicketError(StorageError):
    """A ticket's objects changed after it was planned."""

    code = "PreconditionFailed"
    status = "invalid_argument"


class ResourceLimitError(StorageError):
    code = "ResourceLimitExceeded"
    status = "resource_exhausted"


class WrongNodeError(StorageError):
    """A cluster node was asked for data it does not hold: a redirect to the nodes that do."""

    code = "WrongNode"

    def __init__(self, message: str, *, nodes: list[str], locations: list[str]) -> None:
        super().__init__(message)
        self.nodes = nodes
        self.locations = locations

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "nodes": self.nodes, "locations": self.locations}


class NodeUnavailableError(StorageError):
    """No node holding the requested data answered in time (the message names them)."""

    code = "NodeUnavailable"
    status = "unavailable"

    def __init__(self, message: str, *, nodes: list[str]) -> None:
        super().__init__(message)
        self.nodes = nodes

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "nodes": self.nodes}


class StoreUnavailableError(StorageError):
    """The object store behind a bucket did not answer (the message names its endpoint, never
    its credentials): unreachable, timed out, or still throttling after the bounded retries."""

    code = "ServiceUnavailable"
    status = "unavailable"


class ConflictError(StorageError):
    """A write lost a race with a concurrent one (another node's ingest into the same table)
    and kept nothing: retryable (the message names the table and the winner)."""

    code = "ConditionalRequestConflict"
    status = "unavailable"


class NotImplementedFeatureError(StorageError):
    """Input this server recognises and does not read yet (it never answers without it)."""

    code = "NotImplemented"
    status = "unimplemented"


class StoppedError(Exception):
    """Work told to stop (its query timed out or was cancelled, or the server is stopping)
    ends with this at its next read; it never reaches a client (see the module docstring)."""
