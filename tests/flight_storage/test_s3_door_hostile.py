"""Hostile clients of the S3 door: unauthenticated bodies, silent connections.

A refused upload must cost no memory for its body (the door checks the signature, the
bucket right and writability from the request head, then streams a body to disk), and a
connection that never finishes its request head must not hold a connection slot for long.
Memory is the server process's peak resident set (``VmHWM`` in ``/proc``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from flight_storage.rpc.auth import hash_password
from tests.conftest import SAMPLES
from tests.flight_storage.test_s3_door import s3_client, start_door

pytestmark = pytest.mark.reliability

BODY_MB = 48
CLIENTS = 8


def _memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def _put(address: tuple[str, int], path: str, body: bytes, headers: dict[str, str],
         answers: list[bytes]) -> None:
    """A client that sends its whole body whatever the server says, then reads the answer."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(address, timeout=120) as sock:
        sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
                     f"Content-Length: {len(body)}\r\n{head}\r\n".encode())
        try:
            sock.sendall(body)
        except OSError:
            pass  # the server may close once it has answered
        answer = b""
        while b"</Error>" not in answer:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        answers.append(answer)


def test_unauthenticated_uploads_cost_no_memory_for_their_bodies(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"alice": {
        "password": hash_password("pw"), "buckets": ["sales"],
        "access_keys": {"AKIAALICE": "alice-secret"}}}}))
    server, url = start_door(SAMPLES, "--auth", str(users), "--s3-max-object-mb", "64")
    try:
        parts = urlsplit(url)
        address = (parts.hostname or "127.0.0.1", parts.port or 0)
        assert s3_client(url, "AKIAALICE", "alice-secret").list_buckets()  # warm
        pid = server.process.pid
        before = _memory_kib(pid, "VmHWM")
        body = b"x" * (BODY_MB << 20)
        forged = {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIAALICE/20260101/us-east-1/"
                  "s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                  "Signature=" + "0" * 64,
                  "x-amz-date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
                  "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
        answers: list[bytes] = []
        clients = [threading.Thread(target=_put, args=(
            address, f"/sales/up-{i}.csv", body, forged if i % 2 else {}, answers))
            for i in range(CLIENTS)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(180)
        peak = _memory_kib(pid, "VmHWM")
        after = _memory_kib(pid, "VmRSS")
    finally:
        server.stop()
    assert len(answers) == CLIENTS
    assert all(a.startswith(b"HTTP/1.1 403") for a in answers), [a[:200] for a in answers]
    codes = {a.split(b"<Code>")[1].split(b"</Code>")[0] for a in answers}
    assert codes == {b"AccessDenied", b"SignatureDoesNotMatch"}
    sent_kib = CLIENTS * (BODY_MB << 10)
    print(f"peak RSS {before >> 10} -> {peak >> 10} MiB (after: {after >> 10} MiB) for "
          f"{sent_kib >> 10} MiB of refused bodies")
    assert peak - before < sent_kib // 8  # far below one body per client
    assert not list((SAMPLES / "sales").glob("up-*"))


def test_a_refused_upload_waiting_for_continue_is_answered_and_closed() -> None:
    """An S3 SDK sends ``Expect: 100-continue`` and waits: refused before the door asks for the
    body, it gets its answer and the connection closes (it never sends the body)."""
    server, url = start_door(SAMPLES)  # read-only: PutObject is refused
    try:
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            sock.sendall(f"PUT /sales/new.csv HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                         "Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n".encode())
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 403")
        assert b"<Code>AccessDenied</Code>" in answer
        assert b"100 Continue" not in answer
    finally:
        server.stop()


def _silent(address: tuple[str, int], partial: bytes) -> socket.socket:
    sock = socket.create_connection(address, timeout=30)
    if partial:
        sock.sendall(partial)
    return sock


def test_silent_connections_do_not_shut_the_door() -> None:
    server, url = start_door(SAMPLES, "--s3-max-connections", "4", "--s3-header-timeout", "1")
    try:
        parts = urlsplit(url)
        address = (parts.hostname or "127.0.0.1", parts.port or 0)
        # the door's slots filled by clients that never finish a request head
        silent = [_silent(address, b"" if i % 2 else b"GET / HTTP/1.1\r\nHost: x\r\n")
                  for i in range(4)]
        started = time.monotonic()
        s3 = s3_client(url)
        answered = None
        while time.monotonic() - started < 60:
            try:
                answered = s3.list_buckets()
                break
            except Exception:  # noqa: BLE001 - 503 while the slots are held
                time.sleep(0.2)
        waited = time.monotonic() - started
        closed = [sock.recv(100) for sock in silent]
        for sock in silent:
            sock.close()
    finally:
        server.stop()
    print(f"a request waited {waited:.2f} s behind 4 silent connections "
          "(--s3-header-timeout 1)")
    assert answered is not None, "the door stayed shut"
    assert closed == [b""] * 4  # the server closed every silent connection
