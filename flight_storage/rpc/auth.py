"""Who may call the server: a users file, salted password hashes, expiring bearer tokens.

Authentication is off unless the server is started with ``--auth USERS_FILE``. The file is JSON::

    {"users": {
        "alice": {"password": "scrypt$16384$8$1$<salt b64>$<hash b64>", "buckets": ["sales"]},
        "ops":   {"password": "pbkdf2_sha256$600000$<salt b64>$<hash b64>", "buckets": ["*"]}
    }}

``buckets`` lists the buckets the user may read (``"*"``: all); ``write`` (optional) those the
user may also write with Flight SQL bulk ingest when the server runs ``--writable``. An entry
may also hold
``"access_keys": {"<access key id>": "<secret key>"}`` for the S3 door's SigV4 signatures
(``flight_storage.rpc.s3_http``); SigV4 needs the secret itself, so keep the file private. Passwords are never stored: an
entry holds a salted scrypt (or PBKDF2-SHA256) hash, made by :func:`hash_password` or by the
command line::

    python -m flight_storage.rpc.auth add-user USERS_FILE alice --bucket sales

Flight SQL clients log in the way the ADBC driver does: a ``Handshake`` call carrying
``authorization: Basic <base64(user:password)>``; the server answers with
``authorization: Bearer <token>`` and the client sends that header on every later call. Tokens
are stateless and signed with the server secret (:class:`TokenSigner`): every replica that
shares the secret accepts them until they expire. A client may also send ``Basic`` on every call.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import getpass
import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from flight_storage.errors import StorageError
from flight_storage.protocol.signing import SignatureError, Signer


class AuthenticationError(StorageError):
    """Missing, malformed or wrong credentials, or an expired token."""

    code = "InvalidAccessKeyId"
    status = "unauthenticated"


class UsersFileError(ValueError):
    """The users file cannot be read (raised at start-up, never to a client)."""


# ----------------------------------------------------------------------------- password hashes

_SCRYPT_N: Final = 1 << 14
_SCRYPT_R: Final = 8
_SCRYPT_P: Final = 1
_PBKDF2_ROUNDS: Final = 600_000


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _verify_scrypt(password: bytes, fields: Sequence[str]) -> bool:
    n, r, p, salt, digest = fields
    expected = _unb64(digest)
    got = hashlib.scrypt(
        password, salt=_unb64(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected),
        maxmem=128 * int(r) * int(n) * 2 + (1 << 20),
    )
    return hmac.compare_digest(got, expected)


def _verify_pbkdf2(password: bytes, fields: Sequence[str]) -> bool:
    rounds, salt, digest = fields
    expected = _unb64(digest)
    got = hashlib.pbkdf2_hmac("sha256", password, _unb64(salt), int(rounds), len(expected))
    return hmac.compare_digest(got, expected)


# Scheme name -> (number of fields after the name, verifier).
_SCHEMES: Final[Mapping[str, tuple[int, Callable[[bytes, Sequence[str]], bool]]]] = {
    "scrypt": (5, _verify_scrypt),
    "pbkdf2_sha256": (3, _verify_pbkdf2),
}


def hash_password(password: str, *, scheme: str = "scrypt") -> str:
    """Hash a password with a fresh random salt, for the users file.

    Args:
        password: the clear-text password.
        scheme: ``"scrypt"`` (default) or ``"pbkdf2_sha256"``.

    Returns:
        ``scrypt$N$r$p$salt$hash`` or ``pbkdf2_sha256$rounds$salt$hash`` (base64 fields).

    Example:
        >>> verify_password("s3cret", hash_password("s3cret"))
        True
    """
    salt = secrets.token_bytes(16)
    if scheme == "scrypt":
        digest = hashlib.scrypt(
            password.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32
        )
        return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(digest)}"
    if scheme == "pbkdf2_sha256":
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, _PBKDF2_ROUNDS, 32)
        return f"pbkdf2_sha256${_PBKDF2_ROUNDS}${_b64(salt)}${_b64(digest)}"
    raise ValueError(f"unknown password scheme {scheme!r}")


def verify_password(password: str, stored: str) -> bool:
    """True when ``password`` matches a hash made by :func:`hash_password`."""
    name, _, rest = stored.partition("$")
    entry = _SCHEMES.get(name)
    if entry is None:
        return False
    count, verifier = entry
    fields = rest.split("$")
    if len(fields) != count:
        return False
    try:
        return verifier(password.encode(), fields)
    except (ValueError, binascii.Error):
        return False


# ----------------------------------------------------------------------------- users


@dataclass(frozen=True)
class User:
    """One entry of the users file: its grants (what they allow is ``rpc/access.py``'s
    to decide)."""

    name: str
    password_hash: str
    buckets: frozenset[str]
    """Buckets (and Iceberg catalogs) this user may read; ``"*"``: all."""
    access_keys: Mapping[str, str] = field(default_factory=dict, hash=False)
    """S3 access key id -> secret key (SigV4 over the S3 door)."""
    write_buckets: frozenset[str] = frozenset()
    """Buckets this user may write (bulk ingest); ``"*"``: all."""


@dataclass(frozen=True)
class Users:
    """The parsed users file."""

    users: Mapping[str, User]

    @classmethod
    def load(cls, path: Path) -> Users:
        """Read and check a users file.

        Raises:
            UsersFileError: unreadable, not JSON, or an entry without a valid hash.
        """
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsersFileError(f"{path}: cannot read users file ({exc})") from None
        entries = document.get("users") if isinstance(document, dict) else None
        if not isinstance(entries, dict):
            raise UsersFileError(f'{path}: expected {{"users": {{name: entry}}}}')
        users: dict[str, User] = {}
        for name, entry in entries.items():
            stored = entry.get("password") if isinstance(entry, dict) else None
            buckets = entry.get("buckets", []) if isinstance(entry, dict) else None
            if not isinstance(stored, str) or stored.partition("$")[0] not in _SCHEMES:
                raise UsersFileError(f"{path}: user {name!r} has no valid password hash")
            if not isinstance(buckets, list) or not all(isinstance(b, str) for b in buckets):
                raise UsersFileError(f"{path}: user {name!r}: buckets must be a list of names")
            if ":" in name or not name:
                raise UsersFileError(f"{path}: invalid user name {name!r}")
            writes = entry.get("write", [])
            if not isinstance(writes, list) or not all(isinstance(b, str) for b in writes):
                raise UsersFileError(f"{path}: user {name!r}: write must be a list of names")
            keys = entry.get("access_keys", {})
            if not isinstance(keys, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) and k and v
                    for k, v in keys.items()):
                raise UsersFileError(f"{path}: user {name!r}: access_keys must map ids to secrets")
            users[name] = User(name, stored, frozenset(buckets), dict(keys), frozenset(writes))
        return cls(users)

    def check(self, name: str, password: str) -> User:
        """The user, if the password is right.

        Raises:
            AuthenticationError: unknown user or wrong password (one message for both).
        """
        user = self.users.get(name)
        # Hash even for an unknown name so the answer takes as long either way.
        stored = user.password_hash if user is not None else _DUMMY_HASH
        if not verify_password(password, stored) or user is None:
            raise AuthenticationError("wrong user name or password")
        return user


class LoginThrottle:
    """Failed logins per user name, and a bound on password checks running at once.

    After ``max_failures`` wrong passwords for one name within ``window_s``, that name is
    refused for ``lockout_s`` without checking any password (a check costs a scrypt, which is
    what a guessing client makes everyone else wait for). At most ``parallel_checks`` password
    checks run at once; a login that cannot start one within ``wait_s`` is refused.

    Example:
        >>> throttle = LoginThrottle(max_failures=1, lockout_s=60)
        >>> throttle.failed("alice")
        >>> throttle.check("alice")
        Traceback (most recent call last):
        ...
        flight_storage.rpc.auth.AuthenticationError: SlowDown: too many failed logins ...
    """

    def __init__(self, *, max_failures: int = 5, window_s: float = 60.0,
                 lockout_s: float = 30.0, parallel_checks: int = 2, wait_s: float = 10.0,
                 max_names: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.lockout_s = lockout_s
        self.wait_s = wait_s
        self.max_names = max_names
        self._failures: dict[str, list[float]] = {}
        self._locked: dict[str, float] = {}
        self._lock = threading.Lock()
        self._checks = threading.BoundedSemaphore(parallel_checks)

    def check(self, name: str) -> None:
        """Refuse ``name`` while it is locked out."""
        with self._lock:
            until = self._locked.get(name, 0.0)
        left = until - time.monotonic()
        if left > 0:
            raise AuthenticationError(
                f"too many failed logins for {name!r}; retry in {left:.0f} s", code="SlowDown")

    def failed(self, name: str) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._failures) >= self.max_names and name not in self._failures:
                self._failures.clear()  # bounded memory: forget, do not grow
            recent = [t for t in self._failures.get(name, []) if now - t < self.window_s]
            recent.append(now)
            self._failures[name] = recent
            if len(recent) >= self.max_failures:
                self._locked[name] = now + self.lockout_s
                self._failures.pop(name, None)

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(name, None)

    def verify(self, users: Users, name: str, password: str) -> User:
        """``users.check`` under the throttle."""
        self.check(name)
        if not self._checks.acquire(timeout=self.wait_s):
            raise AuthenticationError("too many logins at once; retry later", code="SlowDown")
        try:
            user = users.check(name, password)
        except AuthenticationError:
            self.failed(name)
            raise
        finally:
            self._checks.release()
        self.succeeded(name)
        return user


_DUMMY_HASH: Final = (
    "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
)


# ----------------------------------------------------------------------------- tokens

_TOKEN_DOMAIN: Final = b"flight-select bearer token v1\x00"
_NODE_TOKEN_DOMAIN: Final = b"flight-select node token v1\x00"
"""Node tokens are signed in their own domain: no user token can pass for one, or back."""
NODE_SCHEME: Final = "Node"
"""``authorization: Node <token>``: a call from another node of the cluster (its health
checks), authenticated by a token only holders of the shared secret can make."""


def node_principal(node: str) -> User:
    """Who a node's call is: ``node <name>``, with no bucket rights (it reads no data)."""
    return User(name=f"node {node}", password_hash="", buckets=frozenset())


@dataclass(frozen=True)
class TokenSigner:
    """Issues and checks stateless bearer tokens: ``base64url(json).base64url(hmac)``.

    Args:
        signer: the server's bearer-token keys (derived from its secret, shared by replicas;
            ``flight_storage.protocol.signing``: the first signs, every one verifies).
        ttl_s: lifetime of a token in seconds.
    """

    signer: Signer
    ttl_s: float

    def issue(self, user: str, *, now: float | None = None) -> str:
        """A token for ``user`` that expires after ``ttl_s`` seconds."""
        return self._issue(_TOKEN_DOMAIN, user, now)

    def issue_node(self, node: str, *, now: float | None = None) -> str:
        """A token for cluster node ``node`` (sent as ``authorization: Node <token>``)."""
        return self._issue(_NODE_TOKEN_DOMAIN, node, now)

    def check(self, token: str, *, now: float | None = None) -> str:
        """The user a valid token was issued to.

        Raises:
            AuthenticationError: malformed, forged or expired.
        """
        return self._check(_TOKEN_DOMAIN, token, now)

    def check_node(self, token: str, *, now: float | None = None) -> str:
        """The node a valid node token was issued to (raises as :meth:`check`)."""
        return self._check(_NODE_TOKEN_DOMAIN, token, now)

    def _issue(self, domain: bytes, name: str, now: float | None) -> str:
        issued = time.time() if now is None else now
        body = json.dumps({"u": name, "e": issued + self.ttl_s}, separators=(",", ":")).encode()
        return self.signer.seal_text(domain, body)

    def _check(self, domain: bytes, token: str, now: float | None) -> str:
        try:
            body = self.signer.open_text(domain, token)
        except SignatureError as exc:
            if "malformed" in str(exc):
                raise AuthenticationError("malformed bearer token") from None
            raise AuthenticationError(
                "bearer token is not valid (forged or from another server)") from None
        try:
            payload = json.loads(body)
            user, expires = str(payload["u"]), float(payload["e"])
        except (ValueError, KeyError, TypeError):
            raise AuthenticationError("malformed bearer token") from None
        if (time.time() if now is None else now) >= expires:
            raise AuthenticationError("bearer token expired; log in again", code="ExpiredToken")
        return user


def parse_basic(value: str) -> tuple[str, str]:
    """Decode the credentials of an ``authorization: Basic ...`` header value.

    The ADBC driver leaves out the base64 padding, so padding is optional.

    Raises:
        AuthenticationError: not base64 of ``user:password``.
    """
    encoded = value.strip()
    try:
        text = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode()
    except (ValueError, binascii.Error):
        raise AuthenticationError("malformed Basic credentials") from None
    name, sep, password = text.partition(":")
    if not sep:
        raise AuthenticationError("malformed Basic credentials")
    return name, password


# ----------------------------------------------------------------------------- command line


def add_user(path: Path, name: str, password: str, buckets: Sequence[str], *,
             s3_access_key: bool = False,
             write: Sequence[str] = ()) -> tuple[str, str] | None:
    """Add or replace a user in a users file (created when missing, written atomically).

    Returns:
        With ``s3_access_key``, a new ``(access key id, secret key)`` pair for the S3 door,
        stored in the entry; else None.
    """
    if not name or ":" in name:
        raise UsersFileError(f"invalid user name {name!r}")
    document: dict[str, Any] = {"users": {}}
    if path.exists():
        document = json.loads(path.read_text(encoding="utf-8"))
    entry: dict[str, Any] = {"password": hash_password(password), "buckets": sorted(set(buckets))}
    if write:
        entry["write"] = sorted(set(write))
    pair = None
    if s3_access_key:
        pair = ("FS" + secrets.token_hex(9).upper(), secrets.token_urlsafe(30))
        entry["access_keys"] = {pair[0]: pair[1]}
    document.setdefault("users", {})[name] = entry
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(document, out, indent=2, sort_keys=True)
        out.write("\n")
    os.replace(tmp, path)
    return pair


def add_user_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``add-user`` (this module's ``main`` and ``flight-select add-user``)."""
    parser.add_argument("users_file", type=Path)
    parser.add_argument("name")
    parser.add_argument("--bucket", action="append", default=[],
                        help="bucket the user may read (repeat; '*' for all)")
    parser.add_argument("--write", action="append", default=[], metavar="BUCKET",
                        help="bucket the user may also write with bulk ingest (repeat; '*' for "
                        "all; the server must run --writable)")
    parser.add_argument("--password-stdin", action="store_true",
                        help="read the password from standard input instead of prompting")
    parser.add_argument("--s3-access-key", action="store_true",
                        help="also make an S3 access key pair (SigV4 on the S3 door); printed "
                        "once")


def run_add_user(args: argparse.Namespace) -> int:
    """Add or replace the user ``args`` (:func:`add_user_arguments`) names; the exit status."""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
    if not password:
        print("empty password refused", file=sys.stderr)
        return 2
    pair = add_user(args.users_file, args.name, password, args.bucket,
                    s3_access_key=args.s3_access_key, write=args.write)
    if pair is not None:
        print(f"aws_access_key_id = {pair[0]}\naws_secret_access_key = {pair[1]}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flight_storage.rpc.auth add-user USERS_FILE NAME [--bucket B ...]``."""
    parser = argparse.ArgumentParser(prog="python -m flight_storage.rpc.auth")
    commands = parser.add_subparsers(dest="command", required=True)
    add_user_arguments(commands.add_parser("add-user",
                                           help="add or replace a user in a users file"))
    return run_add_user(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
