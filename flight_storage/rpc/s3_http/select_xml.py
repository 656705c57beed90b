"""The XML body of ``SelectObjectContent`` -> the JSON request the Flight server already reads.

The HTTP door does not interpret a request itself: it turns AWS's XML into the JSON document
of ``flight_storage.request.s3_request`` (same field names, same nesting), so both doors share
one parser, one set of checks and one answer. Hand-written because the mapping is a few typed
leaves; ``xml_body.parse_xml`` (defusedxml) reads the XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any, Final

from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.xml_body import local_name, parse_xml

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



def _value(element: ET.Element) -> Any:
    name = local_name(element.tag)
    children = list(element)
    if children or name in _CONTAINERS:
        out: dict[str, Any] = {}
        for child in children:
            out[local_name(child.tag)] = _value(child)
        return out
    return _TYPED_LEAVES.get(name, str)(element.text or "")


def select_request(body: bytes, bucket: str, key: str) -> dict[str, Any]:
    """The JSON SelectObjectContent request for an XML body addressed to ``bucket/key``.

    Raises:
        S3HttpError: ``MalformedXML`` for a body that is not the expected XML document;
            ``MissingRequiredParameter`` when InputSerialization or OutputSerialization is
            absent (the HTTP API requires both).
    """
    # XML parsers turn a carriage return into a line feed (XML 1.0, 2.11), but SDKs send
    # delimiters such as RecordDelimiter "\r\n" as raw text and S3 keeps them: a character
    # reference survives the normalisation (inside the document element only: the prolog may
    # end its lines with CR LF too)
    start = max(body.find(b"<SelectObjectContentRequest"), 0)
    root = parse_xml(body[:start] + body[start:].replace(b"\r", b"&#13;"), "the request body")
    if local_name(root.tag) != "SelectObjectContentRequest":
        raise S3HttpError("MalformedXML",
                          f"expected SelectObjectContentRequest, not {local_name(root.tag)}")
    document = _value(root)
    for required in ("Expression", "InputSerialization", "OutputSerialization"):
        if required not in document:
            raise S3HttpError("MissingRequiredParameter", f"{required} is required")
    return {"Bucket": bucket, "Key": key, **document}
