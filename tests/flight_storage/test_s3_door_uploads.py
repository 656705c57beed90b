"""Uploads through the S3 door as real clients send them: never stored corrupted.

boto3 (>= 1.36) sends PutObject over https as ``aws-chunked`` with a trailing CRC32
(``STREAMING-UNSIGNED-PAYLOAD-TRAILER``); over plain http it sends the bytes with a checksum
header. The door serves plain http, so a TLS-terminating proxy (:class:`TlsProxy`, a
self-signed CA made per test module) sits in front of it, as a load balancer would; it also
records what boto3 sent, so the same bytes can be replayed to the plain door. An object is
read back and queried: the stored bytes are the uploaded ones or nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.auth import EMPTY_SHA256_HASH, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from flight_storage.rpc.auth import hash_password
from tests.flight_storage.test_s3_door import CSV_USE, s3_client, start_door
from tests.flight_storage.test_server_support import make_certificates

ROWS = b"a,b\n1,2\n3,4\n"
KEY_ID, SECRET = "AKIAWRITER", "writer-secret"


class TlsProxy:
    """Terminates TLS on a loopback port and forwards bytes to ``target`` as they come,
    recording what each client sent."""

    def __init__(self, target: str, certificates: dict[str, Path]) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.sent: list[bytearray] = []
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certificates["server.pem"], certificates["server.key"])
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", 0, ssl=context))
        self.url = f"https://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _relay(self, client_in: asyncio.StreamReader,
                     client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection(*self._target)
        record = bytearray()
        self.sent.append(record)
        await asyncio.gather(self._pipe(client_in, server_out, record),
                             self._pipe(server_in, client_out, None), return_exceptions=True)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    record: bytearray | None) -> None:
        try:
            while data := await source.read(1 << 16):
                if record is not None:
                    record += data
                sink.write(data)
                await sink.drain()
        finally:
            sink.close()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        self._server.close()
        relays = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def writable(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    data = tmp_path / "data"
    (data / "up").mkdir(parents=True)
    server, url = start_door(data, "--s3-writable")
    yield data, url
    server.stop()


def _https_client(proxy: TlsProxy, certificates: dict[str, Path], key: str = "any",
                  secret: str = "any") -> Any:
    return boto3.client("s3", endpoint_url=proxy.url, aws_access_key_id=key,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        verify=str(certificates["ca.pem"]),
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def _count(s3: Any, key: str) -> bytes:
    answer = s3.select_object_content(
        Bucket="up", Key=key, ExpressionType="SQL", Expression="SELECT count(*) FROM s3object",
        InputSerialization=CSV_USE, OutputSerialization={"CSV": {}})
    return b"".join(e["Records"]["Payload"] for e in answer["Payload"] if "Records" in e)


def _replay(url: str, request: bytes) -> tuple[int, bytes]:
    """Send raw request bytes to the plain door; its status line and body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.connect()
    assert connection.sock is not None
    connection.sock.sendall(request)
    answer = http.client.HTTPResponse(connection.sock, method="PUT")
    answer.begin()
    return answer.status, answer.read()


def _leftovers(bucket: Path) -> list[str]:
    return sorted(p.name for p in bucket.rglob("*") if p.name.startswith(".put-"))


def test_boto3_over_https_sends_aws_chunked_and_the_object_is_its_rows(
        writable: tuple[Path, str], certificates: dict[str, Path]) -> None:
    data, url = writable
    proxy = TlsProxy(url, certificates)
    try:
        s3 = _https_client(proxy, certificates)
        s3.put_object(Bucket="up", Key="a.csv", Body=ROWS)
        sent = bytes(proxy.sent[-1])
        assert b"STREAMING-UNSIGNED-PAYLOAD-TRAILER" in sent  # boto3 really framed it
        assert b"x-amz-checksum-crc32:" in sent
        assert s3.get_object(Bucket="up", Key="a.csv")["Body"].read() == ROWS
        assert (data / "up" / "a.csv").read_bytes() == ROWS
        assert _count(s3, "a.csv") == b"2\n"
        # the same bytes to the plain door store the same object
        status, _ = _replay(url, sent.replace(b"PUT /up/a.csv ", b"PUT /up/b.csv "))
        assert status == 200
        assert (data / "up" / "b.csv").read_bytes() == ROWS
        assert _count(s3_client(url), "b.csv") == b"2\n"
    finally:
        proxy.close()


def test_a_wrong_trailer_checksum_stores_nothing(writable: tuple[Path, str],
                                                 certificates: dict[str, Path]) -> None:
    data, url = writable
    proxy = TlsProxy(url, certificates)
    try:
        _https_client(proxy, certificates).put_object(Bucket="up", Key="a.csv", Body=ROWS)
        sent = bytes(proxy.sent[-1])
    finally:
        proxy.close()
    good = sent[sent.index(b"x-amz-checksum-crc32:") + 21:].split(b"\r\n")[0]
    for changed, code in [(sent.replace(good, b"AAAAAA=="), "BadDigest"),
                          (sent.replace(b"3,4\n", b"3,5\n"), "BadDigest"),
                          (sent.replace(b"x-amz-checksum-crc32:", b"x-amz-checksum-crc64:"),
                           "MalformedTrailerError")]:
        status, body = _replay(url, changed.replace(b"PUT /up/a.csv ", b"PUT /up/c.csv "))
        assert (status, f"<Code>{code}</Code>" in body.decode()) == (400, True), body
        assert not (data / "up" / "c.csv").exists()
    assert _leftovers(data / "up") == []


def test_signed_writer_over_https_through_auth(tmp_path: Path,
                                               certificates: dict[str, Path]) -> None:
    data = tmp_path / "data"
    (data / "up").mkdir(parents=True)
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"w": {
        "password": hash_password("pw"), "buckets": ["up"], "write": ["up"],
        "access_keys": {KEY_ID: SECRET}}}}))
    server, url = start_door(data, "--s3-writable", "--auth", str(users))
    proxy = TlsProxy(url, certificates)
    try:
        s3 = _https_client(proxy, certificates, KEY_ID, SECRET)
        s3.put_object(Bucket="up", Key="a.csv", Body=ROWS)
        assert _count(s3, "a.csv") == b"2\n"
        with pytest.raises(ClientError) as caught:
            _https_client(proxy, certificates, KEY_ID, "wrong").put_object(
                Bucket="up", Key="b.csv", Body=ROWS)
        assert caught.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        assert not (data / "up" / "b.csv").exists()
    finally:
        proxy.close()
        server.stop()


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"ContentMD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}, "BadDigest"),  # MD5 of b""
        ({"ChecksumSHA256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, "BadDigest"),
        ({"ChecksumCRC32": "AAAAAA=="}, "BadDigest"),
        ({"ContentMD5": "bm90IGFuIG1kNQ=="}, "InvalidDigest"),
    ],
)
def test_declared_digests_are_checked(writable: tuple[Path, str], fields: dict[str, str],
                                      code: str) -> None:
    data, url = writable
    s3 = s3_client(url)
    s3.put_object(Bucket="up", Key="a.csv", Body=ROWS)
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket="up", Key="a.csv", Body=b"x,y\n9,9\n", **fields)
    assert caught.value.response["Error"]["Code"] == code
    assert (data / "up" / "a.csv").read_bytes() == ROWS  # the old object stays
    assert _leftovers(data / "up") == []


# ----------------------------------------------------------------------------- signed chunks


def _signing_key(secret: str, day: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (day, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _chunk_signatures(secret: str, stamp: str, seed: str, chunks: list[bytes]) -> list[str]:
    """AWS's chunk chain, written from its documentation (checked against its example)."""
    key = _signing_key(secret, stamp[:8])
    scope = f"{stamp[:8]}/us-east-1/s3/aws4_request"
    signatures, previous = [], seed
    for chunk in chunks:
        text = (f"AWS4-HMAC-SHA256-PAYLOAD\n{stamp}\n{scope}\n{previous}\n{EMPTY_SHA256_HASH}\n"
                f"{hashlib.sha256(chunk).hexdigest()}")
        previous = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
        signatures.append(previous)
    return signatures


def test_the_test_chunk_signer_agrees_with_aws_example() -> None:
    assert _chunk_signatures(
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524T000000Z",
        "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
        [b"a" * 65536, b"a" * 1024, b""])[-1] \
        == "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"


class _StreamingHead(S3SigV4Auth):
    def payload(self, request: AWSRequest) -> str:
        return "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def _signed_chunked_put(url: str, path: str, data: bytes, secret: str = SECRET,
                        tamper: int | None = None) -> tuple[int, bytes]:
    request = AWSRequest(method="PUT", url=url + path, headers={
        "content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))})
    _StreamingHead(Credentials(KEY_ID, secret), "s3", "us-east-1").add_auth(request)
    seed = request.headers["Authorization"].rsplit("Signature=", 1)[1]
    chunks = [data[i:i + 8192] for i in range(0, len(data), 8192)] + [b""]
    signatures = _chunk_signatures(secret, request.context["timestamp"], seed, chunks)
    body = bytearray(b"".join(f"{len(c):x};chunk-signature={s}\r\n".encode() + c + b"\r\n"
                              for c, s in zip(chunks, signatures, strict=True)))
    if tamper is not None:
        body[tamper] ^= 1
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("PUT", path, body=bytes(body), headers=dict(request.headers))
    answer = connection.getresponse()
    return answer.status, answer.read()


def test_signed_chunks_are_checked_one_by_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "up").mkdir(parents=True)
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"w": {
        "password": hash_password("pw"), "buckets": ["up"], "write": ["up"],
        "access_keys": {KEY_ID: SECRET}}}}))
    server, url = start_door(data, "--s3-writable", "--auth", str(users))
    rows = b"".join(b"%d,%d\n" % (i, i * 7) for i in range(5000))
    try:
        assert _signed_chunked_put(url, "/up/signed.csv", rows)[0] == 200
        assert (data / "up" / "signed.csv").read_bytes() == rows
        status, body = _signed_chunked_put(url, "/up/tampered.csv", rows, tamper=20_000)
        assert status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in body
        assert not (data / "up" / "tampered.csv").exists()
        assert _leftovers(data / "up") == []
    finally:
        server.stop()


def test_a_failed_upload_leaves_no_folder(writable: tuple[Path, str]) -> None:
    data, url = writable
    with pytest.raises(ClientError):
        s3_client(url).put_object(Bucket="up", Key="new/deep/a.csv", Body=ROWS,
                                  ContentMD5="1B2M2Y8AsgTpgAmY7PhCfg==")
    assert not (data / "up" / "new").exists()
