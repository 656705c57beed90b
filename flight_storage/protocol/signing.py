"""The one owner of signing: HMAC-SHA256 with key rotation, for every signed thing the server
hands out (tickets and prepared-statement handles, bearer and node tokens, session cookies,
staged-ingest tokens).

A :class:`Signer` holds one or more keys: the **first signs, every one verifies**, so an
operator rotates the secret by putting the new key first and keeping the old one until what it
signed has expired (``--ticket-secret-file`` holds one key per line). Each use derives its own
keys (:meth:`Signer.derived`: ``sha256(purpose NUL key)``) and signs within a domain string, so
nothing signed for one use passes for another. Verification checks every key without an early
exit, so timing does not tell which key matched. Hand-written: a few lines over the standard
library's ``hmac``; what is signed (binary tickets, ``base64url(body).base64url(mac)`` text
tokens) is each caller's format.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

MAC_SIZE: Final = 32
MIN_SECRET: Final = 16
"""Shortest key accepted, in bytes."""

Secret = bytes | Sequence[bytes]
"""One key, or keys whose first one signs (see the module docstring)."""


class SignatureError(ValueError):
    """A signed value that is malformed, or whose signature no key made."""


@dataclass(frozen=True)
class Signer:
    """Signs with the first of :attr:`keys`, verifies with any of them.

    Example:
        >>> old, new = b"o" * 16, b"n" * 16
        >>> token = Signer.of(old).seal_text(b"demo", b"hello")
        >>> Signer.of([new, old]).open_text(b"demo", token)
        b'hello'
    """

    keys: tuple[bytes, ...]

    @classmethod
    def of(cls, secret: Secret) -> Signer:
        """A signer of ``secret`` (one key, or keys whose first signs).

        Raises:
            ValueError: no key, or a key shorter than :data:`MIN_SECRET` bytes.
        """
        keys = [secret] if isinstance(secret, bytes | bytearray) else list(secret)
        if not keys or any(len(k) < MIN_SECRET for k in keys):
            raise ValueError(f"signing secrets must be at least {MIN_SECRET} bytes")
        return cls(tuple(bytes(k) for k in keys))

    def derived(self, purpose: bytes) -> Signer:
        """The signer of one use: each key becomes ``sha256(purpose NUL key)``."""
        return Signer(tuple(hashlib.sha256(purpose + b"\x00" + k).digest() for k in self.keys))

    def mac(self, domain: bytes, data: bytes) -> bytes:
        """The signature of ``domain + data`` by the signing key."""
        return hmac.new(self.keys[0], domain + data, hashlib.sha256).digest()

    def valid(self, domain: bytes, data: bytes, mac: bytes) -> bool:
        """True when some key signed ``domain + data`` as ``mac`` (every key is tried)."""
        matches = [hmac.compare_digest(hmac.new(k, domain + data, hashlib.sha256).digest(), mac)
                   for k in self.keys]
        return any(matches)

    def seal_text(self, domain: bytes, body: bytes) -> str:
        """``base64url(body).base64url(mac)``: a signed value fit for a header or cookie."""
        return f"{b64url(body)}.{b64url(self.mac(domain, body))}"

    def open_text(self, domain: bytes, token: str) -> bytes:
        """The body of a :meth:`seal_text` value.

        Raises:
            SignatureError: malformed (``"malformed"`` in the message), or signed by no key.
        """
        body_text, _, mac_text = token.partition(".")
        try:
            body, mac = unb64url(body_text), unb64url(mac_text)
        except (ValueError, binascii.Error):
            raise SignatureError("malformed") from None
        if not self.valid(domain, body, mac):
            raise SignatureError("signature does not match")
        return body


def b64url(data: bytes) -> str:
    """URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """The bytes of :func:`b64url` text.

    Raises:
        ValueError: not base64url.
    """
    return base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode("ascii"))
