"""The S3 door's XML request decoding: what SDKs send as raw text survives XML's rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.request.s3_request import parse_request, request_from_document
from flight_storage.rpc.s3_http.multipart import parse_complete
from flight_storage.rpc.s3_http.objects import parse_delete_request
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.select_xml import select_request

_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\r\n'
    b'<SelectObjectContentRequest xmlns="http://s3.amazonaws.com/doc/2006-03-01/">\r\n'
    b"<Expression>select * from s3object</Expression><ExpressionType>SQL</ExpressionType>\r\n"
    b"<InputSerialization><CSV><RecordDelimiter>\r\n</RecordDelimiter></CSV>"
    b"</InputSerialization><OutputSerialization><CSV><RecordDelimiter>\r\n</RecordDelimiter>"
    b"</CSV></OutputSerialization></SelectObjectContentRequest>"
)


def test_a_crlf_record_delimiter_stays_crlf() -> None:
    """botocore sends RecordDelimiter "\\r\\n" raw; an XML parser would read "\\n" (XML 1.0
    section 2.11 end-of-line handling), and S3 answers with CR LF."""
    request = select_request(_BODY, "b", "k")
    assert request["InputSerialization"]["CSV"]["RecordDelimiter"] == "\r\n"
    assert request["OutputSerialization"]["CSV"]["RecordDelimiter"] == "\r\n"
    assert request["Expression"] == "select * from s3object"


def test_a_door_request_is_the_flight_request_and_round_trips() -> None:
    """The door's document is checked by the Flight door's code; the command a cluster node
    forwards (``SelectRequest.to_command``) reads back as the same request."""
    body = _BODY.replace(b"</OutputSerialization>", b"</OutputSerialization><ScanRange><Start>"
                         b"5</Start></ScanRange><RequestProgress><Enabled>true</Enabled>"
                         b"</RequestProgress>")
    request = request_from_document(select_request(body, "b", "k"))
    assert (request.bucket, request.key, request.scan_start, request.scan_end,
            request.progress) == ("b", "k", 5, None, True)
    assert parse_request(request.to_command()) == request
    with pytest.raises(InvalidRequestError) as refused:
        request_from_document({**select_request(_BODY, "b", "k"), "ExpressionType": "XPATH"})
    assert refused.value.code == "InvalidExpressionType"


_HOSTILE = {
    "an entity bomb": b'<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>',
    "an external entity": b'<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    "a bare document type": b"<!DOCTYPE d>",
}
_PARSERS: dict[str, tuple[Callable[[bytes], Any], bytes]] = {
    "SelectObjectContent": (lambda b: select_request(b, "b", "k"),
                            _BODY.split(b"\r\n", 1)[1]),
    "DeleteObjects": (parse_delete_request, b"<Delete><Object><Key>k</Key></Object></Delete>"),
    "CompleteMultipartUpload": (parse_complete, b"<CompleteMultipartUpload><Part><PartNumber>1"
                                b"</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>"),
}


@pytest.mark.parametrize("parser", sorted(_PARSERS))
@pytest.mark.parametrize("prolog", sorted(_HOSTILE))
def test_every_xml_body_refuses_declarations(parser: str, prolog: str) -> None:
    """One parser (defusedxml) reads every body a client sends: no document type, entity or
    external reference reaches a handler, whichever call carries it."""
    parse, body = _PARSERS[parser]
    parse(body)  # the plain document is accepted
    with pytest.raises(S3HttpError) as refused:
        parse(_HOSTILE[prolog] + body)
    assert refused.value.code == "MalformedXML"
