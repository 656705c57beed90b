"""S3 error answers of the HTTP door: the HTTP status of each S3 code, and the error XML.

The codes themselves are the server's errors' (``StorageError`` and the dialect's, their
documents written by ``flight_storage.rpc.boundary.error_document``), so both doors name an
error alike; this module only adds what HTTP needs.
"""

from __future__ import annotations

from typing import Final
from xml.sax.saxutils import escape

from flight_storage.errors import StorageError
from flight_storage.rpc.boundary import error_document
from select_dialect.errors import SelectDialectError

HTTP_STATUS: Final[dict[str, int]] = {
    "AccessDenied": 403,
    "InvalidAccessKeyId": 403,
    "SignatureDoesNotMatch": 403,
    "RequestTimeTooSkewed": 403,
    "MissingSecurityHeader": 403,
    "InvalidTicket": 403,
    "ExpiredToken": 400,
    "NoSuchKey": 404,
    "NoSuchBucket": 404,
    "MethodNotAllowed": 405,
    "BucketAlreadyOwnedByYou": 409,
    "BucketNotEmpty": 409,
    "PreconditionFailed": 412,
    "EntityTooLarge": 400,
    "InvalidRange": 416,
    "InternalError": 500,
    "NotImplemented": 501,
    "SlowDown": 503,
    "ServiceUnavailable": 503,
    "RequestTimeout": 400,
}
"""S3 code -> HTTP status, as S3 answers; any other code is a 400 (a bad request)."""


class S3HttpError(Exception):
    """An S3 error answered before the response started (error XML with its HTTP status)."""

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else HTTP_STATUS.get(code, 400)


def error_xml(code: str, message: str, resource: str, request_id: str) -> bytes:
    """The body of an S3 error answer."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode()


def s3_error(exc: StorageError | SelectDialectError) -> S3HttpError:
    """The S3 error of a client's error from the server's query service (its code and
    message, and where in the expression it is)."""
    document = error_document(exc)
    message = str(document["message"])
    if document.get("line") is not None:
        message += f" (line {document['line']}, column {document.get('column')})"
    return S3HttpError(str(document["code"]), message)
