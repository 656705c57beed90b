"""S3 SelectObjectContent requests carried over Flight, and the stream that answers them.

A ``FlightDescriptor`` command that starts with ``{`` is a JSON document with the fields of an
AWS ``SelectObjectContent`` request, spelled as in the AWS API (and boto3)::

    {"Bucket": "sales", "Key": "orders/2024-01.csv",
     "Expression": "SELECT s.region FROM s3object s WHERE s.status = 'shipped'",
     "ExpressionType": "SQL",
     "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}, "CompressionType": "NONE"},
     "OutputSerialization": {"JSON": {}},
     "ScanRange": {"Start": 0, "End": 1048575},
     "RequestProgress": {"Enabled": true}}

``Bucket``, ``Key`` and ``Expression`` are required; ``InputSerialization`` defaults to what the
key's suffixes say (``.csv``, ``.ndjson``, ``.parquet``, ``.gz`` …). ``ExpectedBucketOwner`` is
accepted and ignored; server-side-encryption keys (``SSECustomer*``) are refused.

The answer (see ``docs/server.md``):

* without ``OutputSerialization`` the records are Arrow batches with the query's result schema;
* with it, the stream has one column ``records`` (``binary``, not null) and every row holds the
  next chunk of the serialized CSV or JSON records, byte for byte what S3 would send in its
  ``Records`` events; concatenating the rows of all endpoints in order gives the whole output;
* every message may carry JSON ``app_metadata``: ``{"Progress": {...}}`` on each batch when
  ``RequestProgress`` is enabled, and ``{"Stats": {"BytesScanned": .., "BytesProcessed": ..,
  "BytesReturned": ..}}`` on the last message of every stream (an empty batch);
* while a scan finds nothing for a while, empty batches keep the stream alive.

With several endpoints (large objects are split into byte ranges), each stream reports the
Stats of its own part; a client adds them up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from flight_storage.errors import InvalidRequestError
from flight_storage.formats.scan_range import requested_scan_range

RECORDS_SCHEMA: Final = pa.schema([pa.field("records", pa.binary(), nullable=False)])
"""Stream schema of a request with an ``OutputSerialization``: one chunk of records per row."""

_REQUIRED: Final = ("Bucket", "Key", "Expression")
_IGNORED: Final = frozenset({"ExpectedBucketOwner"})
_REFUSED: Final = frozenset({"SSECustomerAlgorithm", "SSECustomerKey", "SSECustomerKeyMD5"})
_KNOWN: Final = frozenset(
    {
        *_REQUIRED,
        "ExpressionType",
        "InputSerialization",
        "OutputSerialization",
        "ScanRange",
        "RequestProgress",
        *_IGNORED,
        *_REFUSED,
    }
)


@dataclass(frozen=True)
class SelectRequest:
    """One SelectObjectContent request.

    Attributes:
        bucket, key: the object.
        expression: s3-select SQL (``FROM s3object``).
        input_serialization: the AWS ``InputSerialization`` dict, or None to use the key's
            suffixes.
        output_serialization: the AWS ``OutputSerialization`` dict, or None for Arrow records.
        scan_start, scan_end: ``ScanRange`` as sent (``End`` inclusive); either may be None.
        progress: ``RequestProgress.Enabled``.
    """

    bucket: str
    key: str
    expression: str
    input_serialization: Mapping[str, Any] | None = None
    output_serialization: Mapping[str, Any] | None = None
    scan_start: int | None = None
    scan_end: int | None = None
    progress: bool = False

    def scan_range(self, size: int) -> tuple[int, int] | None:
        """``(start, end)`` inclusive byte range for an object of ``size`` bytes, or None
        (S3's rules: :func:`~flight_storage.formats.scan_range.requested_scan_range`)."""
        return requested_scan_range(self.scan_start, self.scan_end, size)

    def ticket_extras(self) -> dict[str, Any]:
        """What a partition ticket carries in its ``output_serialization`` slot.

        A ticket of an S3 request always has a dict there (a Flight SQL statement's ticket has
        None): ``{"OutputSerialization": ... (absent for Arrow records), "RequestProgress":
        bool}``. :func:`extras_from_ticket` reads it back.
        """
        extras: dict[str, Any] = {"RequestProgress": self.progress}
        if self.output_serialization is not None:
            extras["OutputSerialization"] = dict(self.output_serialization)
        return extras

    def to_command(self) -> bytes:
        """The JSON descriptor command of this request (:func:`parse_request` reads it back):
        what a cluster node sends the node that plans an object it does not hold."""
        document: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key,
                                    "Expression": self.expression,
                                    "RequestProgress": {"Enabled": self.progress}}
        for name, value in (("InputSerialization", self.input_serialization),
                            ("OutputSerialization", self.output_serialization)):
            if value is not None:
                document[name] = dict(value)
        scan = {name: value for name, value in (("Start", self.scan_start),
                                                ("End", self.scan_end)) if value is not None}
        if scan:
            document["ScanRange"] = scan
        return json.dumps(document).encode()


@dataclass(frozen=True)
class TicketExtras:
    """The S3-request part of a partition ticket."""

    output_serialization: Mapping[str, Any] | None
    progress: bool


def extras_from_ticket(slot: Mapping[str, Any]) -> TicketExtras:
    """Inverse of :meth:`SelectRequest.ticket_extras`."""
    output = slot.get("OutputSerialization")
    return TicketExtras(dict(output) if output is not None else None,
                        bool(slot.get("RequestProgress", False)))


def is_json_request(command: bytes) -> bool:
    """True when a descriptor command is a JSON document rather than a protobuf ``Any``."""
    return command.lstrip()[:1] == b"{"


def parse_request(command: bytes) -> SelectRequest:
    """Parse a JSON SelectObjectContent request.

    Raises:
        InvalidRequestError: not JSON, and what :func:`request_from_document` raises.
    """
    try:
        document = json.loads(command)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRequestError(f"request is not valid JSON: {exc}", code="MalformedXML") from None
    return request_from_document(document)


def request_from_document(document: Any) -> SelectRequest:
    """A SelectObjectContent request from its document (the JSON of a Flight command, or the
    S3 door's reading of its XML body): the one set of checks of both doors.

    Raises:
        InvalidRequestError: not an object, a required field missing, a field of the wrong
            type, an unknown field, or an ``ExpressionType`` other than SQL.
    """
    if not isinstance(document, dict):
        raise InvalidRequestError("request must be a JSON object", code="MalformedXML")
    unknown = sorted(set(document) - _KNOWN)
    if unknown:
        raise InvalidRequestError(f"unknown request field(s): {', '.join(unknown)}",
                                  code="InvalidRequestParameter")
    refused = sorted(k for k in _REFUSED if document.get(k))
    if refused:
        raise InvalidRequestError(
            f"server-side encryption with customer keys is not supported ({', '.join(refused)})",
            code="NotImplemented",
        )
    for name in _REQUIRED:
        if not isinstance(document.get(name), str) or not document[name]:
            raise InvalidRequestError(f"{name} is required (a non-empty string)",
                                      code="MissingRequiredParameter")
    expression_type = document.get("ExpressionType", "SQL")
    if not isinstance(expression_type, str) or expression_type.upper() != "SQL":
        raise InvalidRequestError(f"ExpressionType must be SQL, not {expression_type!r}",
                                  code="InvalidExpressionType")
    start, end = _scan_range(document.get("ScanRange"))
    return SelectRequest(
        bucket=document["Bucket"],
        key=document["Key"],
        expression=document["Expression"],
        input_serialization=_object_field(document, "InputSerialization"),
        output_serialization=_object_field(document, "OutputSerialization"),
        scan_start=start,
        scan_end=end,
        progress=_enabled(document.get("RequestProgress")),
    )


def _object_field(document: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{name} must be a JSON object", code="InvalidRequestParameter")
    return value


def _enabled(value: Any) -> bool:
    if value is None:
        return False
    enabled = value.get("Enabled", False) if isinstance(value, dict) else None
    if not isinstance(enabled, bool):
        raise InvalidRequestError('RequestProgress must be {"Enabled": true|false}',
                                  code="InvalidRequestParameter")
    return enabled


def _scan_range(value: Any) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict) or set(value) - {"Start", "End"}:
        raise InvalidRequestError('ScanRange must be {"Start": n, "End": m}',
                                  code="InvalidScanRange")
    bounds = [value.get("Start"), value.get("End")]
    for bound in bounds:
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)
                                  or bound < 0):
            raise InvalidRequestError("ScanRange Start and End must be non-negative integers",
                                      code="InvalidScanRange")
    start, end = bounds
    if start is not None and end is not None and end < start:
        raise InvalidRequestError(f"ScanRange End {end} is before Start {start}",
                                  code="InvalidScanRange")
    return start, end


def stats_metadata(kind: str, scanned: int, processed: int, returned: int) -> bytes:
    """``app_metadata`` of a Progress or Stats message."""
    counts = {"BytesScanned": scanned, "BytesProcessed": processed, "BytesReturned": returned}
    return json.dumps({kind: counts}, separators=(",", ":")).encode()
