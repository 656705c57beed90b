"""The XML body of ``SelectObjectContent`` -> the JSON request the Flight server already reads.

The HTTP door does not interpret a request itself: it turns AWS's XML into the JSON document
of ``flight_storage.request.s3_request`` (same field names, same nesting), so both doors share
one parser, one set of checks and one answer. Hand-written because the mapping is a few typed
leaves; the stdlib's expat parser reads the XML (expat >= 2.4 refuses entity-expansion bombs,
and the body is size-bounded before it gets here).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any, Final

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

_CONTAINERS: Final = frozenset(
    {"InputSerialization", "OutputSerialization", "CSV", "JSON", "Parquet", "RequestProgress",
     "ScanRange"}
)
"""Elements that are objects even when empty (``<Parquet/>``, ``<JSON/>``)."""


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise S3HttpError("MalformedXML", f"expected true or false, not {text!r}")
    return lowered == "true"


def _integer(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise S3HttpError("InvalidScanRange", f"expected an integer, not {text!r}") from None


_TYPED_LEAVES: Final[dict[str, Callable[[str], Any]]] = {
    "Enabled": _boolean,
    "Start": _integer,
    "End": _integer,
}
"""Leaves the JSON request holds as booleans or numbers; every other leaf is a string."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _value(element: ET.Element) -> Any:
    name = _local(element.tag)
    children = list(element)
    if children or name in _CONTAINERS:
        out: dict[str, Any] = {}
        for child in children:
            out[_local(child.tag)] = _value(child)
        return out
    return _TYPED_LEAVES.get(name, str)(element.text or "")


def select_request(body: bytes, bucket: str, key: str) -> dict[str, Any]:
    """The JSON SelectObjectContent request for an XML body addressed to ``bucket/key``.

    Raises:
        S3HttpError: ``MalformedXML`` for a body that is not the expected XML document;
            ``MissingRequiredParameter`` when InputSerialization or OutputSerialization is
            absent (the HTTP API requires both).
    """
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise S3HttpError("MalformedXML", "document type declarations are not accepted")
    try:
        # XML parsers turn a carriage return into a line feed (XML 1.0, 2.11), but SDKs send
        # delimiters such as RecordDelimiter "\r\n" as raw text and S3 keeps them: a character
        # reference survives the normalisation (inside the document element only: the prolog
        # may end its lines with CR LF too)
        start = max(body.find(b"<SelectObjectContentRequest"), 0)
        root = ET.fromstring(body[:start] + body[start:].replace(b"\r", b"&#13;"))
    except ET.ParseError as exc:
        raise S3HttpError("MalformedXML", f"the request body is not well-formed XML: {exc}") from None
    if _local(root.tag) != "SelectObjectContentRequest":
        raise S3HttpError("MalformedXML",
                          f"expected SelectObjectContentRequest, not {_local(root.tag)}")
    document = _value(root)
    for required in ("Expression", "InputSerialization", "OutputSerialization"):
        if required not in document:
            raise S3HttpError("MissingRequiredParameter", f"{required} is required")
    return {"Bucket": bucket, "Key": key, **document}
