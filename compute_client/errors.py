"""Errors of the compute client.

    ClientError
    ├── RemoteQueryError         the server refused or failed the query (code, message, line, column)
    └── ServerUnavailableError   the server could not be reached
        ├── EndpointUnavailableError   no location of an endpoint answered (names each one)
        └── StreamStalledError         a stream sent nothing for longer than a live server would
"""

from __future__ import annotations

import json
from typing import Any


class ClientError(Exception):
    """Base class of compute-client errors."""


class RemoteQueryError(ClientError):
    """The storage server answered with an error.

    Attributes:
        code: S3 error code (``ParseUnexpectedToken``, ``NoSuchKey``, ...).
        message: the server's message.
        line, column: position of a syntax error, when it has one.
    """

    def __init__(self, code: str, message: str, line: int | None = None,
                 column: int | None = None) -> None:
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"{code}: {message}{where}")
        self.code = code
        self.message = message
        self.line = line
        self.column = column

    @classmethod
    def from_text(cls, text: str) -> RemoteQueryError:
        """Parse the JSON error document the server sends (as message or extra_info)."""
        document = _find_document(text)
        if document is None:
            return cls("ServerError", text.strip())
        return cls(
            str(document.get("code", "ServerError")),
            str(document.get("message", "")),
            document.get("line"),
            document.get("column"),
        )


class ServerUnavailableError(ClientError):
    """The storage server could not be reached."""


class StreamStalledError(ServerUnavailableError):
    """An open stream sent nothing for longer than a live server would (it sends an empty
    batch whenever it has had nothing to send for ``--keepalive`` seconds)."""


class EndpointUnavailableError(ServerUnavailableError):
    """No location of an endpoint delivered it whole.

    Attributes:
        endpoint: the endpoint's name in messages (its index in the plan, or a digest of its
            ticket when the index is not known).
        attempts: ``(location, why it failed)`` for every location tried, in order.
        rows_delivered: rows the caller had already received when the last location failed.
    """

    def __init__(self, endpoint: str, attempts: tuple[tuple[str, str], ...],
                 rows_delivered: int) -> None:
        tried = "; ".join(f"{location}: {why}" for location, why in attempts) or "none"
        super().__init__(
            f"endpoint {endpoint}: no location answered after {rows_delivered} rows "
            f"(tried {tried})"
        )
        self.endpoint = endpoint
        self.attempts = attempts
        self.rows_delivered = rows_delivered


def _find_document(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict) and "code" in value:
            return value
        start = text.find("{", start + 1)
    return None
