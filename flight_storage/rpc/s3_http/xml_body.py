"""The one parser of the XML bodies S3 clients send (SelectObjectContent, DeleteObjects,
CompleteMultipartUpload): ``defusedxml``'s ElementTree, which refuses document type
declarations, entity declarations and external references outright (no billion-laughs, no
external entity reaches a file or the network), before any handler reads an element. Bodies
are size-bounded before they get here (``payload.py``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from flight_storage.rpc.s3_http.s3_errors import S3HttpError


def parse_xml(body: bytes, what: str) -> ET.Element:
    """The document element of ``body``, the request body of ``what`` (named in errors).

    Raises:
        S3HttpError: ``MalformedXML`` for a body that is not well-formed XML, or that declares
            a document type, entities or external references.

    Example:
        >>> parse_xml(b"<Delete><Quiet>true</Quiet></Delete>", "the Delete document").tag
        'Delete'
    """
    try:
        root: ET.Element = fromstring(body, forbid_dtd=True, forbid_entities=True,
                                      forbid_external=True)
    except DefusedXmlException:
        raise S3HttpError("MalformedXML", f"{what}: document type declarations, entities and "
                          "external references are not accepted") from None
    except ET.ParseError as exc:
        raise S3HttpError("MalformedXML", f"{what} is not well-formed XML: {exc}") from None
    return root


def local_name(tag: str) -> str:
    """An element's name without its namespace (``{http://s3...}Delete`` is ``Delete``)."""
    return tag.rsplit("}", 1)[-1]
