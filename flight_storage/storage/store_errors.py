"""What an object store's failures are told as: the one owner of the mapping from botocore's
errors, pyarrow's S3 client's texts and a cut response body to our errors (``errors.py``), each
naming the operation and the store's endpoint, never a credential.

| failure | told as |
|---|---|
| an S3 error code (``NoSuchKey``, ``AccessDenied``, ``SlowDown``, ``KeyTooLongError``, ...) | :data:`_CODES` |
| pyarrow's ``AWS Error NETWORK_CONNECTION ...`` | :func:`pyarrow_store_error` |
| unreachable, timed out, a body cut off past the retries | ``ServiceUnavailable`` (UNAVAILABLE: retry later) |
"""

from __future__ import annotations

import functools
import re

from flight_storage.errors import (
    AccessDeniedError,
    ConflictError,
    InvalidRequestError,
    ObjectNotFoundError,
    StaleTicketError,
    StorageError,
    StoreUnavailableError,
)

# S3 error code -> (our error, what to tell the user)
_CODES: dict[str, tuple[type[StorageError], str]] = {
    "NoSuchKey": (ObjectNotFoundError, "NoSuchKey"),
    "404": (ObjectNotFoundError, "NoSuchKey"),
    "NotFound": (ObjectNotFoundError, "NoSuchKey"),
    "NoSuchBucket": (ObjectNotFoundError, "NoSuchBucket"),
    "AccessDenied": (AccessDeniedError, "AccessDenied"),
    "403": (AccessDeniedError, "AccessDenied"),
    "Forbidden": (AccessDeniedError, "AccessDenied"),
    "InvalidAccessKeyId": (AccessDeniedError, "AccessDenied"),
    "SignatureDoesNotMatch": (AccessDeniedError, "AccessDenied"),
    "ExpiredToken": (AccessDeniedError, "AccessDenied"),
    "InvalidToken": (AccessDeniedError, "AccessDenied"),
    "PreconditionFailed": (StaleTicketError, "PreconditionFailed"),
    "412": (StaleTicketError, "PreconditionFailed"),
    "ConditionalRequestConflict": (ConflictError, "ConditionalRequestConflict"),
    "409": (ConflictError, "ConditionalRequestConflict"),
    "SlowDown": (StoreUnavailableError, "SlowDown"),
    "503": (StoreUnavailableError, "ServiceUnavailable"),
    "ServiceUnavailable": (StoreUnavailableError, "ServiceUnavailable"),
    "InternalError": (StoreUnavailableError, "ServiceUnavailable"),
    "500": (StoreUnavailableError, "ServiceUnavailable"),
    "RequestTimeout": (StoreUnavailableError, "ServiceUnavailable"),
    "KeyTooLongError": (InvalidRequestError, "KeyTooLongError"),
}


def store_error(exc: BaseException, what: str, endpoint: str) -> StorageError:
    """A botocore (or connection) failure of ``what`` as the error a client is told: the S3
    code, the operation and the store's endpoint; never a credential."""
    import boto3.exceptions
    import botocore.exceptions

    if isinstance(exc, boto3.exceptions.S3UploadFailedError) and isinstance(
            exc.__context__, botocore.exceptions.ClientError):
        exc = exc.__context__  # boto3's transfer manager wraps the store's answer
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        kind, s3_code = _CODES.get(code, (StoreUnavailableError, "ServiceUnavailable"))
        detail = {
            StaleTicketError: "it changed after the query was planned; plan it again",
            AccessDeniedError: f"the object store at {endpoint} refused the credentials "
                               f"({code}): check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                               "--store-profile",
            InvalidRequestError: f"the object store at {endpoint} refused it ({code}: "
                                 f"{str(error.get('Message', ''))[:200]})",
        }.get(kind, f"the object store at {endpoint} answered {code or 'an error'}")
        if kind is ObjectNotFoundError:
            detail = f"no such {'bucket' if s3_code == 'NoSuchBucket' else 'key'}"
        return kind(f"{what}: {detail}", code=s3_code)
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return AccessDeniedError(f"{what}: no credentials for the object store at {endpoint} "
                                 "(set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a "
                                 "profile)")
    if isinstance(exc, botocore.exceptions.BotoCoreError | OSError):
        return StoreUnavailableError(
            f"{what}: cannot reach the object store at {endpoint} ({type(exc).__name__})")
    return StoreUnavailableError(f"{what}: the object store at {endpoint} failed "
                                 f"({type(exc).__name__})")


# pyarrow's S3 client (the AWS C++ SDK) says what failed only in its text: "AWS Error
# NETWORK_CONNECTION during GetObject operation: ..." -> (our error, S3 code)
_PYARROW_AWS_ERROR = re.compile(r"AWS Error ([A-Z_]+)")
_PYARROW_CODES: dict[str, tuple[type[StorageError], str]] = {
    "NO_SUCH_KEY": (ObjectNotFoundError, "NoSuchKey"),
    "RESOURCE_NOT_FOUND": (ObjectNotFoundError, "NoSuchKey"),
    "NO_SUCH_BUCKET": (ObjectNotFoundError, "NoSuchBucket"),
    "ACCESS_DENIED": (AccessDeniedError, "AccessDenied"),
    "INVALID_ACCESS_KEY_ID": (AccessDeniedError, "AccessDenied"),
    "SIGNATURE_DOES_NOT_MATCH": (AccessDeniedError, "AccessDenied"),
    "SLOW_DOWN": (StoreUnavailableError, "SlowDown"),
    "THROTTLING": (StoreUnavailableError, "SlowDown"),
}


def pyarrow_store_error(text: str, what: str) -> StorageError | None:
    """The error a client is told for a failure of pyarrow's S3 client whose text is
    ``text`` (an ``OSError`` of pyarrow, or DataFusion's text around it), or None when it is
    not one: a store that dropped the connection, cut a body off or did not answer past the
    retries is ``ServiceUnavailable`` (retry later), never an error of the object's bytes."""
    match = _PYARROW_AWS_ERROR.search(text)
    if match is None:
        return None
    kind, code = _PYARROW_CODES.get(match.group(1), (StoreUnavailableError, "ServiceUnavailable"))
    detail = text.strip().splitlines()[0][:300] if text.strip() else match.group(0)
    return kind(f"{what}: the object store failed ({detail})", code=code)


@functools.cache
def body_errors() -> tuple[type[BaseException], ...]:
    """What reading a response body raises when the connection breaks mid-way: botocore's
    wrappers (``ResponseStreamingError``, ``IncompleteReadError``, read timeouts), urllib3's
    own, and the socket's."""
    import botocore.exceptions
    import urllib3.exceptions

    return (botocore.exceptions.BotoCoreError, urllib3.exceptions.HTTPError, OSError)
