"""The S3 door's XML request decoding: what SDKs send as raw text survives XML's rules."""

from __future__ import annotations

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
