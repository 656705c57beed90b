"""Users file, password hashes and bearer tokens (no server)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.flight as flight
import pytest

from flight_storage.protocol.signing import Signer
from flight_storage.rpc import access
from flight_storage.rpc.auth import (
    AuthenticationError,
    TokenSigner,
    Users,
    UsersFileError,
    add_user,
    hash_password,
    parse_basic,
    verify_password,
)
from tests.conftest import ROOT, running_server
from tests.flight_storage.test_server_support import statement_descriptor


@pytest.mark.parametrize("scheme", ["scrypt", "pbkdf2_sha256"])
def test_hash_round_trip_and_salt(scheme: str) -> None:
    # a space and '!' lie outside base64's alphabet: the password can appear in the stored hash
    # only if it was stored in clear, never by chance (a bare "pw" did, about 1 run in 100)
    password = "p w!"
    first, second = hash_password(password, scheme=scheme), hash_password(password, scheme=scheme)
    assert first != second  # fresh salt each time
    assert verify_password(password, first) and verify_password(password, second)
    assert not verify_password("p W!", first)
    assert password not in first.split("$", 1)[1]


def test_garbled_hash_never_verifies() -> None:
    assert not verify_password("pw", "scrypt$1$2")
    assert not verify_password("pw", "md5$abc")
    assert not verify_password("pw", "scrypt$16384$8$1$!!!$!!!")


def test_users_file_permissions_and_check(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    add_user(path, "alice", "pw", ["sales"])
    add_user(path, "root", "pw2", ["*"])
    users = Users.load(path)
    assert access.may_read(users.check("alice", "pw"), "sales")
    assert not access.may_read(users.check("alice", "pw"), "private")
    assert access.may_read(users.check("root", "pw2"), "anything")
    for name, password in (("alice", "bad"), ("nobody", "pw")):
        with pytest.raises(AuthenticationError) as info:
            users.check(name, password)
        assert info.value.message == "wrong user name or password"
    assert path.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("content", ["not json", '{"users": []}',
                                     '{"users": {"a": {"password": "plain"}}}',
                                     '{"users": {"a": {"password": "scrypt$x", "buckets": "s"}}}'])
def test_bad_users_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "users.json"
    path.write_text(content)
    with pytest.raises(UsersFileError):
        Users.load(path)


def test_tokens_expire_and_cannot_be_forged() -> None:
    signer = TokenSigner(Signer.of(b"k" * 32), ttl_s=60)
    token = signer.issue("alice", now=1000.0)
    assert signer.check(token, now=1059.0) == "alice"
    with pytest.raises(AuthenticationError) as expired:
        signer.check(token, now=1060.0)
    assert expired.value.code == "ExpiredToken"
    _body, _, mac = token.partition(".")
    forged = base64.urlsafe_b64encode(b'{"u":"root","e":99999}').rstrip(b"=").decode()
    with pytest.raises(AuthenticationError):
        signer.check(f"{forged}.{mac}", now=1000.0)
    with pytest.raises(AuthenticationError):
        TokenSigner(Signer.of(b"x" * 32), ttl_s=60).check(token, now=1000.0)
    with pytest.raises(AuthenticationError):
        signer.check("garbage", now=1000.0)


def test_node_tokens_and_user_tokens_never_pass_for_each_other() -> None:
    """A node's health-check token is signed in a domain of its own: a user token named like
    a node is no node token, and a node token is no user token."""
    signer = TokenSigner(Signer.of(b"k" * 32), ttl_s=60)
    assert signer.check_node(signer.issue_node("a", now=1000.0), now=1001.0) == "a"
    with pytest.raises(AuthenticationError):
        signer.check_node(signer.issue("a", now=1000.0), now=1001.0)
    with pytest.raises(AuthenticationError):
        signer.check(signer.issue_node("alice", now=1000.0), now=1001.0)
    with pytest.raises(AuthenticationError):
        TokenSigner(Signer.of(b"x" * 32), ttl_s=60).check_node(signer.issue_node("a"))


def test_parse_basic_accepts_missing_padding() -> None:
    encoded = base64.b64encode(b"alice:p:w").decode().rstrip("=")
    assert parse_basic(encoded) == ("alice", "p:w")
    with pytest.raises(AuthenticationError):
        parse_basic(base64.b64encode(b"nocolon").decode())


def test_add_user_command_line(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    result = subprocess.run(
        [sys.executable, "-m", "flight_storage.rpc.auth", "add-user", str(path), "carol",
         "--bucket", "sales", "--password-stdin"],
        input="secret-pw\n", capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    entry = json.loads(path.read_text())["users"]["carol"]
    assert entry["buckets"] == ["sales"]
    assert Users.load(path).check("carol", "secret-pw").name == "carol"


def test_flight_select_add_user_has_help_and_adds_a_user(tmp_path: Path) -> None:
    """``flight-select add-user -h`` was an argparse error (issue #39 item 10)."""
    helped = subprocess.run([sys.executable, "-m", "flight_storage", "add-user", "-h"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: flight-select add-user")
    assert "--password-stdin" in helped.stdout and "users_file" in helped.stdout
    path = tmp_path / "users.json"
    added = subprocess.run(
        [sys.executable, "-m", "flight_storage", "add-user", str(path), "dave", "--bucket", "*",
         "--password-stdin"], input="pw-dave\n", capture_output=True, text=True, cwd=ROOT,
        timeout=60)
    assert added.returncode == 0, added.stderr
    assert Users.load(path).check("dave", "pw-dave").name == "dave"


def test_login_throttle_locks_a_name_after_failures_and_forgets_on_success() -> None:
    from flight_storage.rpc.auth import AuthenticationError, LoginThrottle

    throttle = LoginThrottle(max_failures=3, window_s=60.0, lockout_s=60.0)
    throttle.failed("bob")
    throttle.failed("bob")
    throttle.succeeded("bob")  # a success forgets earlier failures
    throttle.failed("bob")
    throttle.failed("bob")
    throttle.check("bob")  # two recent failures: still allowed
    throttle.failed("bob")
    with pytest.raises(AuthenticationError) as locked:
        throttle.check("bob")
    assert locked.value.code == "SlowDown"
    throttle.check("alice")
    expired = LoginThrottle(max_failures=1, lockout_s=0.0)
    expired.failed("bob")
    expired.check("bob")  # a lockout of zero seconds is over at once


def test_rotated_keys_keep_what_the_old_key_signed() -> None:
    """Key rotation (protocol/signing.py): the new key signs, the old one still verifies, so
    tokens and tickets issued before the rotation stay valid until they expire; a server that
    dropped the old key refuses them."""
    old, new = b"o" * 32, b"n" * 32
    before = TokenSigner(Signer.of(old), ttl_s=60).issue("alice", now=1000.0)
    rotated = TokenSigner(Signer.of([new, old]), ttl_s=60)
    assert rotated.check(before, now=1001.0) == "alice"
    after = rotated.issue("bob", now=1001.0)
    assert TokenSigner(Signer.of(new), ttl_s=60).check(after, now=1002.0) == "bob"
    with pytest.raises(AuthenticationError, match="not valid"):
        TokenSigner(Signer.of(new), ttl_s=60).check(before, now=1001.0)
    with pytest.raises(AuthenticationError, match="not valid"):
        TokenSigner(Signer.of(old), ttl_s=60).check(after, now=1002.0)


def test_a_server_with_a_rotated_secret_serves_tickets_of_the_old_one(tmp_path: Path) -> None:
    """``--previous-ticket-secret-file``: a ticket planned by a server with the old key is
    served by one that signs with the new key and keeps the old one; without it, refused."""
    (tmp_path / "data" / "b").mkdir(parents=True)
    (tmp_path / "data" / "b" / "t.csv").write_text("1\n2\n3\n")
    old, new = tmp_path / "old", tmp_path / "new"
    old.write_text("an-old-secret-of-32-characters!!")
    new.write_text("a-new-secret-of-32-characters!!!")
    data = tmp_path / "data"
    with running_server(data, "--ticket-secret-file", str(old)) as before:
        info = flight.connect(before.location).get_flight_info(
            statement_descriptor('SELECT * FROM "b"."t.csv"'))
    ticket = info.endpoints[0].ticket
    with running_server(data, "--ticket-secret-file", str(new),
                        "--previous-ticket-secret-file", str(old)) as rotated:
        assert flight.connect(rotated.location).do_get(ticket).read_all().num_rows == 3
    with running_server(data, "--ticket-secret-file", str(new)) as dropped, \
            pytest.raises(flight.FlightUnauthorizedError, match="signature"):
        flight.connect(dropped.location).do_get(ticket).read_all()
