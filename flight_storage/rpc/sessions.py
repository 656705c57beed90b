"""Flight sessions: the current catalog (a bucket) and schema (a key prefix), kept by the client.

``SetSessionOptions``, ``GetSessionOptions`` and ``CloseSession`` are core Flight actions. ADBC
calls them for ``adbc.connection.catalog`` / ``adbc.connection.db_schema`` (its Go driver sets
the session options ``catalog`` and ``schema``, and reads them back for ``GetOption``). The
server keeps **no** session: the options travel in a signed cookie, ``flight_select_session``,
that the answer to ``SetSessionOptions`` sets (``set-cookie``) and the client echoes on every
later call (``cookie``), as Arrow Go's stateless session manager does with its
``arrow_flight_session`` cookie. So any replica that shares the ticket secret reads the same
session, a restart loses nothing, and no client can make the server hold state. The cookie is
bound to the user it was issued to and expires ``--ticket-max-age`` seconds after it was set
(:class:`SessionCookies`); its size is bounded by :data:`MAX_NAME_CHARS` per option. ADBC
echoes cookies only with ``adbc.flight.sql.rpc.with_cookie_middleware=true``.

Name resolution (:func:`qualify`), the one owner of the rules:

| the statement names | it reads |
|---|---|
| ``"bucket"."key"`` | that object or prefix table, whatever the session says |
| one part, ``"name"`` or ``name`` (as written: keys are case-sensitive, quoted or not) | in the session's catalog, the key ``schema + name``: the object of that key, or the prefix table ``schema + name + "/"`` (the tables bulk ingest writes); a name ending in ``/`` is a prefix table |
| one part, and both the object and the prefix exist | refused: ``AmbiguousTable`` names both spellings |
| one part, without a current catalog | refused: ``MissingObject`` says how to set one |

``s3object`` and ``stdin`` keep S3 Select's meaning. Hand-written: pyarrow.flight has no
Flight session layer in Python (Arrow's C++ ``ServerSessionMiddleware`` is not exposed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from http.cookies import CookieError, SimpleCookie
from typing import Final, Protocol

import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    StorageError,
)
from flight_storage.protocol import pb
from flight_storage.protocol.signing import SignatureError, Signer
from flight_storage.request.statement import TableReference
from flight_storage.rpc.config import ServerConfig
from flight_storage.rpc.middleware import CallContext
from flight_storage.storage.catalog import Catalog

SESSION_COOKIE: Final = "flight_select_session"
"""The cookie holding the signed session options."""
MAX_NAME_CHARS: Final = 1024
"""Longest catalog or schema name a session accepts (the cookie's size stays bounded)."""
COOKIE_MIDDLEWARE_OPTION: Final = "adbc.flight.sql.rpc.with_cookie_middleware"
"""The ADBC database option that makes the Go driver keep and echo cookies."""
_DOMAIN: Final = b"flight-select session v1\x00"
_SET_COOKIE: Final = "set-cookie"


@dataclass(frozen=True)
class Session:
    """A session's options: where unqualified table names resolve.

    Attributes:
        catalog: the current bucket (None: none set).
        schema: the current key prefix inside it, ending in ``/`` (None: the bucket's root).
    """

    catalog: str | None = None
    schema: str | None = None

    def options(self) -> dict[str, str]:
        """The options set, by their Flight session option names."""
        values = {"catalog": self.catalog, "schema": self.schema}
        return {name: value for name, value in values.items() if value is not None}


class SessionError(InvalidRequestError):
    """A session cookie that is forged, from another user, expired or malformed."""

    code = "InvalidSession"


@dataclass(frozen=True)
class SessionCookies:
    """Signs and reads session cookies: ``base64url(json).base64url(hmac)``.

    Args:
        signer: the cookie keys (derived from the ticket secret: replicas share them;
            ``flight_storage.protocol.signing``: the first signs, every one verifies).
        max_age_s: a cookie set longer ago than this is refused (``--ticket-max-age``).

    Example:
        >>> cookies = SessionCookies(Signer.of(b"k" * 32), 60)
        >>> cookies.read(cookies.value(Session("sales", "orders/"), "alice"), "alice")
        Session(catalog='sales', schema='orders/')
    """

    signer: Signer
    max_age_s: float

    def value(self, session: Session, user: str | None, *, now: float | None = None) -> str:
        """The cookie value carrying ``session`` for ``user``."""
        body = json.dumps({"o": session.options(), "u": user,
                           "t": time.time() if now is None else now},
                          separators=(",", ":")).encode()
        return self.signer.seal_text(_DOMAIN, body)

    def read(self, value: str, user: str | None, *, now: float | None = None) -> Session:
        """The session a cookie carries.

        Raises:
            SessionError: forged, another user's, older than ``max_age_s`` or malformed.
        """
        try:
            body = self.signer.open_text(_DOMAIN, value)
        except SignatureError as exc:
            if "malformed" in str(exc):
                raise SessionError("malformed session cookie; close the session") from None
            raise SessionError("session cookie is not valid (forged, or set by a server with "
                               "another ticket secret); close the session") from None
        try:
            payload = json.loads(body)
            options, owner, issued = dict(payload["o"]), payload["u"], float(payload["t"])
            session = Session(options.get("catalog"), options.get("schema"))
        except (ValueError, KeyError, TypeError):
            raise SessionError("malformed session cookie; close the session") from None
        if owner != user:
            raise SessionError("the session cookie belongs to another user")
        age = (time.time() if now is None else now) - issued
        if age > self.max_age_s:
            raise SessionError(
                f"the session options were set {age:.0f} s ago, longer than --ticket-max-age "
                f"({self.max_age_s:g} s): set them again", code="ExpiredSession")
        return session


def session_cookie(headers: Mapping[str, list[str]]) -> str | None:
    """The session cookie's value among a call's ``cookie`` headers (None: none sent)."""
    for header in headers.get("cookie", []):
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(header)
        except CookieError:
            continue
        if SESSION_COOKIE in jar:
            return jar[SESSION_COOKIE].value
    return None


class SessionHost(Protocol):
    """What the session actions and name resolution use of the server."""

    catalog: Catalog
    session_cookies: SessionCookies
    config: ServerConfig

    def check_access(self, call: CallContext, bucket: str) -> None: ...


def current(host: SessionHost, call: CallContext) -> Session:
    """The caller's session (``--default-catalog`` when it sent no cookie)."""
    if call.session_cookie is None:
        return Session(host.config.default_catalog)
    return host.session_cookies.read(call.session_cookie, call.user_name)


# ----------------------------------------------------------------------------- the actions


def _string(value: pb.SessionOptionValue) -> str | None:
    return value.string_value if value.WhichOneof("option_value") == "string_value" else None


def _set_catalog(host: SessionHost, call: CallContext, session: Session,
                 value: pb.SessionOptionValue) -> Session | None:
    if value.WhichOneof("option_value") is None:  # erase
        return Session()
    name = _string(value)
    if not name or len(name) > MAX_NAME_CHARS:
        return None
    try:
        host.check_access(call, name)
    except StorageError:
        return None
    # another bucket: the old schema was a prefix of the old one
    return Session(name, session.schema if name == session.catalog else None)


def _set_schema(host: SessionHost, call: CallContext, session: Session,  # noqa: ARG001 - an _OPTIONS setter
                value: pb.SessionOptionValue) -> Session | None:
    if value.WhichOneof("option_value") is None:  # erase
        return replace(session, schema=None)
    prefix = _string(value)
    if prefix is None or len(prefix) > MAX_NAME_CHARS or prefix.startswith("/"):
        return None
    if prefix and not prefix.endswith("/"):
        prefix += "/"  # a schema is a folder: "orders" is the prefix "orders/"
    return replace(session, schema=prefix or None)


_OPTIONS: Final[Mapping[str, Callable[[SessionHost, CallContext, Session,
                                       pb.SessionOptionValue], Session | None]]] = {
    "catalog": _set_catalog,
    "schema": _set_schema,
}
"""Each session option: how a value changes the session (None: the value is refused)."""
_ERROR: Final = pb.SetSessionOptionsResult


def set_session_options(host: SessionHost, call: CallContext,
                        body: bytes) -> list[flight.Result]:
    """Apply the options that are valid, report the others, and send the new cookie."""
    request = protocol.decode_action("SetSessionOptions", body)
    session = current(host, call)
    result = pb.SetSessionOptionsResult()
    # the catalog first: a schema given with it belongs to the new catalog
    for name in sorted(request.session_options, key=lambda n: n != "catalog"):
        apply = _OPTIONS.get(name)
        changed = None if apply is None else apply(host, call, session,
                                                   request.session_options[name])
        if changed is None:
            result.errors[name].value = (_ERROR.INVALID_NAME if apply is None
                                         else _ERROR.INVALID_VALUE)
            continue
        session = changed
    value = host.session_cookies.value(session, call.user_name)
    call.add_header(_SET_COOKIE, f"{SESSION_COOKIE}={value}; Max-Age="
                                 f"{int(host.session_cookies.max_age_s)}")
    return [flight.Result(result.SerializeToString())]


def get_session_options(host: SessionHost, call: CallContext,
                        body: bytes) -> list[flight.Result]:
    """The session's options (``catalog``, ``schema``) as they are now."""
    protocol.decode_action("GetSessionOptions", body)
    result = pb.GetSessionOptionsResult()
    for name, value in current(host, call).options().items():
        result.session_options[name].string_value = value
    return [flight.Result(result.SerializeToString())]


def close_session(host: SessionHost, call: CallContext, body: bytes) -> list[flight.Result]:  # noqa: ARG001 - an ACTIONS handler
    """Forget the session: the client drops its cookie (there is nothing to free here)."""
    protocol.decode_action("CloseSession", body)
    if call.session_cookie is not None:
        call.add_header(_SET_COOKIE, f"{SESSION_COOKIE}=; Max-Age=0")
    result = pb.CloseSessionResult(status=pb.CloseSessionResult.CLOSED)
    return [flight.Result(result.SerializeToString())]


# ----------------------------------------------------------------------------- resolution


def qualify(catalog: Catalog, session: Session, reference: TableReference) -> TableReference:
    """``reference`` with its bucket and key (see the module's table of rules).

    Raises:
        InvalidRequestError: ``MissingObject`` without a current catalog, ``AmbiguousTable``
            when both the object and the prefix table exist.
        ObjectNotFoundError: neither exists.
    """
    if reference.qualified:
        return reference
    if session.catalog is None:
        raise InvalidRequestError(
            f'{reference.key!r} names no bucket: write "bucket"."key" (e.g. SELECT * FROM '
            f'"sales"."orders/2024-01.csv"), or set the session catalog (ADBC: '
            f'adbc.connection.catalog, with {COOKIE_MIDDLEWARE_OPTION}=true)',
            code="MissingObject")
    bucket, key = session.catalog, (session.schema or "") + reference.key
    if key.endswith("/"):
        return reference.in_namespace(bucket, key)
    is_object = _exists(lambda: catalog.object(bucket, key))
    is_prefix = (any(t.prefix == key + "/" for t in catalog.bucket_config(bucket).tables)
                 or next(catalog.objects(bucket, key + "/"), None) is not None)
    if is_object and is_prefix:
        raise InvalidRequestError(
            f'{reference.key!r} in {bucket}/{session.schema or ""} is both the object {key} '
            f'and the prefix table {key}/: write "{bucket}"."{key}" or "{bucket}"."{key}/"',
            code="AmbiguousTable")
    if not (is_object or is_prefix):
        raise ObjectNotFoundError(
            f"{reference.key!r}: no object {key} and no prefix table {key}/ in bucket "
            f"{bucket} (the session's catalog"
            + (f", schema {session.schema})" if session.schema else ")"))
    return reference.in_namespace(bucket, key if is_object else key + "/")


def _exists(head: Callable[[], object]) -> bool:
    try:
        head()
    except (ObjectNotFoundError, AccessDeniedError):
        return False
    return True
