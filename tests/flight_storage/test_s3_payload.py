"""aws-chunked decoding and upload digests of the S3 door, against AWS's published examples.

The two worked examples of AWS's "Signature Calculations for the Authorization Header:
Transferring Payload in Multiple Chunks" and "... Including Trailing Headers" pages (their
keys, headers, seed and chunk signatures) are the oracle: the door's head check must find the
documented seed signature, and its chunk chain the documented chunk signatures.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import zlib

import pytest

from flight_storage.rpc.s3_http.aws_chunked import ChunkedDecoder
from flight_storage.rpc.s3_http.checksums import COMPUTABLE
from flight_storage.rpc.s3_http.payload import PayloadDecoder
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.sigv4 import SignedRequest, verify_head

DOC_KEY = "AKIAIOSFODNN7EXAMPLE"
DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DOC_TIME = dt.datetime(2013, 5, 24, tzinfo=dt.UTC)
DOC_CHUNKS = (65536, 1024, 0)
DOC_SIGNED = {
    "seed": "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
    "chunks": ("ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
               "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
               "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"),
    "payload": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "signed_headers": ("content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
                       "x-amz-decoded-content-length;x-amz-storage-class"),
    "trailer": b"",
}
DOC_TRAILER = {
    "seed": "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
    "chunks": ("b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
               "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
               "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992"),
    "payload": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
    "signed_headers": ("content-encoding;host;x-amz-content-sha256;x-amz-date;"
                       "x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer"),
    "trailer": (b"x-amz-checksum-crc32c:sOO8/Q==\r\nx-amz-trailer-signature:"
                b"d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n"),
}


def _doc_body(example: dict[str, object]) -> bytes:
    parts = []
    for size, signature in zip(DOC_CHUNKS, example["chunks"], strict=True):  # type: ignore[call-overload]
        parts.append(f"{size:x};chunk-signature={signature}\r\n".encode() + b"a" * size)
        parts.append(b"\r\n" if size else b"")
    return b"".join(parts) + example["trailer"] + b"\r\n"  # type: ignore[operator]


def _doc_head(example: dict[str, object], body: bytes) -> SignedRequest:
    headers = {
        "content-encoding": "aws-chunked", "content-length": str(len(body)),
        "host": "s3.amazonaws.com", "x-amz-content-sha256": str(example["payload"]),
        "x-amz-date": "20130524T000000Z", "x-amz-decoded-content-length": "66560",
        "x-amz-storage-class": "REDUCED_REDUNDANCY",
        "authorization": (f"AWS4-HMAC-SHA256 Credential={DOC_KEY}/20130524/us-east-1/s3/"
                          f"aws4_request,SignedHeaders={example['signed_headers']},"
                          f"Signature={example['seed']}"),
    }
    if example["trailer"]:
        headers["x-amz-trailer"] = "x-amz-checksum-crc32c"
        del headers["content-length"]  # not signed in AWS's trailer example
    return SignedRequest("PUT", "s3.amazonaws.com", "/examplebucket/chunkObject.txt", "",
                         headers)


def _feed(decoder: ChunkedDecoder | PayloadDecoder, body: bytes, step: int = 997) -> bytes:
    return b"".join(decoder.feed(body[i:i + step]) for i in range(0, len(body), step))


def test_the_documented_signed_upload_decodes() -> None:
    body = _doc_body(DOC_SIGNED)
    assert len(body) == 66824  # AWS's documented Content-Length
    head = _doc_head(DOC_SIGNED, body)
    verified = verify_head(head, {DOC_KEY: DOC_SECRET}.get, now=DOC_TIME)
    decoder = PayloadDecoder(dict(head.headers), verified.chain, 1 << 20, "EntityTooLarge")
    assert _feed(decoder, body) == b"a" * 66560
    decoder.finish()


def test_the_documented_trailer_upload_decodes() -> None:
    body = _doc_body(DOC_TRAILER)
    head = _doc_head(DOC_TRAILER, body)
    verified = verify_head(head, {DOC_KEY: DOC_SECRET}.get, now=DOC_TIME)
    decoder = ChunkedDecoder(signed=True, chain=verified.chain, signed_trailer=True)
    assert _feed(decoder, body, 4096) == b"a" * 66560
    assert decoder.finish() == {"x-amz-checksum-crc32c": "sOO8/Q=="}
    if "crc32c" in COMPUTABLE:  # the trailer's CRC32C too, where awscrt computes it
        chain = verify_head(head, {DOC_KEY: DOC_SECRET}.get, now=DOC_TIME).chain
        whole = PayloadDecoder(dict(head.headers), chain, 1 << 20, "EntityTooLarge")
        assert _feed(whole, body) == b"a" * 66560
        whole.finish()


@pytest.mark.parametrize("chunk", [0, 1])
def test_a_changed_byte_of_a_signed_chunk_is_refused(chunk: int) -> None:
    body = bytearray(_doc_body(DOC_SIGNED))
    first = body.index(b"\r\n") + 2
    second = body.index(b"\r\n", first + DOC_CHUNKS[0] + 2) + 2
    body[(first, second)[chunk] + 5] = ord("b")
    head = _doc_head(DOC_SIGNED, bytes(body))
    chain = verify_head(head, {DOC_KEY: DOC_SECRET}.get, now=DOC_TIME).chain
    decoder = PayloadDecoder(dict(head.headers), chain, 1 << 20, "EntityTooLarge")
    with pytest.raises(S3HttpError) as caught:
        _feed(decoder, bytes(body))
    assert caught.value.code == "SignatureDoesNotMatch"


def test_a_changed_trailer_is_refused() -> None:
    body = _doc_body(DOC_TRAILER).replace(b"sOO8/Q==", b"AAAAAA==")
    head = _doc_head(DOC_TRAILER, body)
    chain = verify_head(head, {DOC_KEY: DOC_SECRET}.get, now=DOC_TIME).chain
    decoder = ChunkedDecoder(signed=True, chain=chain, signed_trailer=True)
    with pytest.raises(S3HttpError) as caught:
        _feed(decoder, body)
    assert caught.value.code == "SignatureDoesNotMatch"


def _unsigned(data: bytes, checksum: str | None = None, *, length: int | None = None,
              algorithm: str = "crc32") -> tuple[dict[str, str], bytes]:
    value = checksum if checksum is not None else base64.b64encode(
        zlib.crc32(data).to_bytes(4, "big")).decode()
    body = (f"{len(data):x}\r\n".encode() + data + b"\r\n" if data else b"") \
        + f"0\r\nx-amz-checksum-{algorithm}:{value}\r\n\r\n".encode()
    headers = {"x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
               "content-encoding": "aws-chunked", "x-amz-trailer": f"x-amz-checksum-{algorithm}",
               "x-amz-decoded-content-length": str(len(data) if length is None else length)}
    return headers, body


def test_an_unsigned_upload_with_a_trailer_decodes() -> None:
    headers, body = _unsigned(b"a,b\n1,2\n3,4\n")
    decoder = PayloadDecoder(headers, None, 1000, "EntityTooLarge")
    assert _feed(decoder, body, 3) == b"a,b\n1,2\n3,4\n"
    decoder.finish()


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"checksum": "AAAAAA=="}, "BadDigest"),
        ({"checksum": "not base64"}, "InvalidRequest"),
        ({"length": 11}, "InvalidRequest"),
        ({"length": 13}, "IncompleteBody"),
        ({"length": 5000}, "EntityTooLarge"),
    ],
)
def test_an_unsigned_upload_that_does_not_add_up_is_refused(change: dict[str, object],
                                                            code: str) -> None:
    with pytest.raises(S3HttpError) as caught:
        headers, body = _unsigned(b"a,b\n1,2\n3,4\n", **change)  # type: ignore[arg-type]
        decoder = PayloadDecoder(headers, None, 1000, "EntityTooLarge")
        _feed(decoder, body)
        decoder.finish()
    assert caught.value.code == code


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"c\r\na,b\n1,2\n3,4\n\r\n", "IncompleteBody"),  # no final chunk
        (b"zz\r\nab\r\n0\r\n\r\n", "InvalidRequest"),  # size not hexadecimal
        (b"0x2\r\nab\r\n0\r\n\r\n", "InvalidRequest"),
        (b"2\r\nabc\r\n0\r\n\r\n", "InvalidRequest"),  # chunk longer than its size
        (b"0\r\n\r\nextra", "InvalidRequest"),
        (b"1" * 5000, "InvalidRequest"),  # a framing line without end
    ],
)
def test_malformed_framing_is_refused(body: bytes, code: str) -> None:
    decoder = PayloadDecoder({"content-encoding": "aws-chunked"}, None, 1 << 20,
                             "EntityTooLarge")
    with pytest.raises(S3HttpError) as caught:
        _feed(decoder, body)
        decoder.finish()
    assert caught.value.code == code


def test_a_missing_trailer_is_refused() -> None:
    headers, body = _unsigned(b"xyz")
    body = body.replace(b"x-amz-checksum-crc32:", b"x-amz-other:")
    decoder = PayloadDecoder(headers, None, 1000, "EntityTooLarge")
    _feed(decoder, body)
    with pytest.raises(S3HttpError) as caught:
        decoder.finish()
    assert caught.value.code == "MalformedTrailerError"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"content-md5": base64.b64encode(hashlib.md5(b"other").digest()).decode()},
         "BadDigest"),
        ({"content-md5": "short"}, "InvalidDigest"),
        ({"x-amz-checksum-sha256": base64.b64encode(hashlib.sha256(b"x").digest()).decode()},
         "BadDigest"),
        ({"x-amz-checksum-sha1": base64.b64encode(b"123").decode()}, "InvalidRequest"),
        ({"x-amz-checksum-crc32": "AAAAAA==", "x-amz-checksum-sha1": "AAAAAA=="},
         "InvalidRequest"),
        ({"x-amz-checksum-md4": "AAAAAA=="}, "InvalidRequest"),
        ({"x-amz-content-sha256": hashlib.sha256(b"other").hexdigest()},
         "XAmzContentSHA256Mismatch"),
        ({"x-amz-content-sha256": "SOMETHING"}, "InvalidArgument"),
        ({"x-amz-content-sha256": "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD"},
         "NotImplemented"),
        ({"content-length": "2000"}, "EntityTooLarge"),
    ],
)
def test_declared_digests_of_a_plain_body(headers: dict[str, str], code: str) -> None:
    body = b"a,b\n1,2\n"
    with pytest.raises(S3HttpError) as caught:
        decoder = PayloadDecoder(headers, None, 1000, "EntityTooLarge")
        _feed(decoder, body)
        decoder.finish()
    assert caught.value.code == code


def test_right_digests_of_a_plain_body_pass() -> None:
    body = b"a,b\n1,2\n"
    headers = {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode(),
               "x-amz-checksum-sha256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
               "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    decoder = PayloadDecoder(headers, None, 1000, "EntityTooLarge")
    assert _feed(decoder, body, 2) == body
    decoder.finish()


CHECK_VECTORS = {"crc32c": 0xE3069283, "crc64nvme": 0xAE8B14860A799888}
"""CRC-32C and CRC-64/NVME of b"123456789" (the catalogue's check values)."""


@pytest.mark.parametrize("algorithm", sorted(CHECK_VECTORS))
def test_crc32c_and_crc64nvme_are_verified_or_refused_by_name(algorithm: str) -> None:
    """They need awscrt (botocore[crt]): with it the digest is checked, without it the
    header is refused by name, never stored unchecked."""
    size = 8 if algorithm == "crc64nvme" else 4
    right = base64.b64encode(CHECK_VECTORS[algorithm].to_bytes(size, "big")).decode()
    header = f"x-amz-checksum-{algorithm}"
    if algorithm not in COMPUTABLE:
        with pytest.raises(S3HttpError) as caught:
            PayloadDecoder({header: right}, None, 100, "EntityTooLarge")
        assert caught.value.code == "NotImplemented"
        assert header in caught.value.message
        return
    decoder = PayloadDecoder({header: right}, None, 100, "EntityTooLarge")
    decoder.feed(b"123456789")
    decoder.finish()
    wrong = PayloadDecoder({header: right}, None, 100, "EntityTooLarge")
    wrong.feed(b"123456780")
    with pytest.raises(S3HttpError) as caught:
        wrong.finish()
    assert caught.value.code == "BadDigest"
