"""Errors raised inside DataFusion, turned back into user-facing errors with S3 codes.

DataFusion reports failures as exceptions carrying only text. Our UDFs encode their processing
errors in that text (``flight_storage.execution.udfs.processing_error``); our readers, which DataFusion calls
from its scans, encode theirs with :func:`guard_reader`. Everything else is matched against a
small table of DataFusion messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import pyarrow as pa

from flight_storage.errors import (
    AccessDeniedError,
    InputFormatError,
    ObjectNotFoundError,
    QueryExecutionError,
    ResourceLimitError,
    StaleTicketError,
    StorageError,
    StoreUnavailableError,
)
from flight_storage.execution import udfs
from flight_storage.storage.store_errors import pyarrow_store_error

# DataFusion error texts that are really the user's processing errors: (pattern, S3 code).
_ENGINE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Cannot cast|Cast error|Failed to parse|Can't parse|Error parsing timestamp",
                re.I), "CastFailed"),
    (re.compile(r"Divide by zero|Division by zero", re.I), "DivisionByZero"),
    (re.compile(r"overflow", re.I), "NumericValueOutOfRange"),
    (re.compile(r"Resources exhausted|memory", re.I), "ResourceLimitExceeded"),
    (re.compile(r"RecursionLimitExceeded|recursion limit", re.I), "ExpressionTooComplex"),
)
# DataFusion's object store failing (object_store's texts): the store's answer, not the
# query's; a store that is down or cuts bodies off past object_store's retries is UNAVAILABLE
# (retry later), never a processing error of the statement.
_STORE_ERRORS: tuple[tuple[re.Pattern[str], type[StorageError], str], ...] = (
    (re.compile(r"Object at location \S+ not found", re.I), ObjectNotFoundError, "NoSuchKey"),
    (re.compile(r"Generic (S3|HTTP|MicrosoftAzure|GCS) error|HTTP error: |error sending request"
                r"|request or response body error|Error after \d+ retries", re.I),
     StoreUnavailableError, "ServiceUnavailable"),
)
_EMBEDDED = re.compile(r"\[flight-select:(\w+):(\w+)\] (.*)")
_EMBEDDED_CLASSES: dict[str, type[StorageError]] = {
    cls.__name__: cls for cls in (InputFormatError, ResourceLimitError, StoreUnavailableError,
                                  ObjectNotFoundError, AccessDeniedError, StaleTicketError)
}
"""Our readers' errors that keep their class (and so their status) through DataFusion."""


def engine_error(exc: BaseException) -> StorageError:
    """Turn an exception raised inside DataFusion into a user-facing error with an S3 code."""
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    found = udfs.parse_processing_error(text)
    if found is not None:
        code, message = found
        return QueryExecutionError(message, code=code)
    match = _EMBEDDED.search(text)
    if match is not None:
        cls_name, code, message = match.groups()
        return _EMBEDDED_CLASSES.get(cls_name, QueryExecutionError)(message.strip(), code=code)
    message = _first_line(text)
    store_failure = pyarrow_store_error(message, "reading the input")
    if store_failure is not None:
        return store_failure
    for store_pattern, kind, code in _STORE_ERRORS:
        if store_pattern.search(text):
            return kind(f"the object store failed: {message}", code=code)
    for pattern, code in _ENGINE_ERRORS:
        if pattern.search(text):
            if code == "ResourceLimitExceeded":
                return ResourceLimitError(
                    f"{message} (the per-query memory limit is --memory-limit-mb)", code=code)
            return QueryExecutionError(message, code=code)
    return QueryExecutionError(message, code="ProcessingTimeError")


def _first_line(text: str) -> str:
    """The line that names the failure: the first, or the innermost cause of a chain
    (``Optimizer rule 'simplify_expressions' failed`` / ``caused by`` / the cast that failed on
    a constant)."""
    lines = [line for line in text.strip().splitlines() if line.strip()] or ["query failed"]
    line = lines[-1] if "caused by" in lines else lines[0]
    return re.sub(r"^((DataFusion|Execution|Arrow|External|Parser) error:\s*)+", "", line)


def guard_reader(batches: Iterable[pa.RecordBatch], object_name: str) -> Iterator[pa.RecordBatch]:
    """Name the object in reader errors and mark them so they survive DataFusion's error text."""
    try:
        yield from batches
    except StorageError as exc:
        message = exc.message if exc.message.startswith(object_name) else (
            f"{object_name}: {exc.message}"
        )
        raise RuntimeError(f"[flight-select:{type(exc).__name__}:{exc.code}] {message}") from None
