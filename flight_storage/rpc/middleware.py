"""Per-call middleware: who calls with which options, and one structured log line per call.

Per call, :class:`CallFactory` authenticates (``flight_storage.rpc.auth``) and starts a
:class:`CallMiddleware` that collects what the call did; it logs one JSON line (rendered by
:class:`JsonLogFormatter`) when the call completes. Hand-written because pyarrow.flight offers
the middleware hooks but no authentication or logging policy, and the standard library's
logging has no JSON formatter.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.flight as flight

from flight_storage import telemetry
from flight_storage.errors import InvalidRequestError
from flight_storage.protocol import FLAVOR_HEADER
from flight_storage.rpc.auth import (
    NODE_SCHEME,
    AuthenticationError,
    LoginThrottle,
    TokenSigner,
    User,
    Users,
    node_principal,
    parse_basic,
)
from flight_storage.rpc.boundary import client_error
from select_dialect.flavors import FLAVOR_NAMES, FLAVORS, S3_REQUEST_DEFAULT, STATEMENT_DEFAULT

log = logging.getLogger(__name__)


def log_event(event: str, **fields: Any) -> None:
    """Log one structured event (rendered as a JSON line by :class:`JsonLogFormatter`)."""
    log.info("%s", event, extra={"fields": {"event": event, **fields}})


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, and the event's fields or message."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        else:
            out["message"] = record.getMessage()
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)




def named_flavor(value: str | None) -> str | None:
    """The flavour a call names in :data:`~flight_storage.protocol.FLAVOR_HEADER` (None: it
    names none), for either door.

    Raises:
        InvalidRequestError: a name that is no flavour's.
    """
    if value is None:
        return None
    flavor = value.strip().lower()
    if flavor not in FLAVORS:
        raise InvalidRequestError(
            f"unknown flavor {flavor!r} in {FLAVOR_HEADER}; use one of {', '.join(FLAVOR_NAMES)}"
        )
    return flavor


@dataclass(frozen=True)
class CallContext:
    """Who is calling and with which per-call options."""

    user: User | None
    flavor: str | None
    """The flavour the call header names; None: each surface's default (see below)."""
    peer: str
    single_endpoint: bool = False
    """One endpoint for a whole statement (``flight_storage.rpc.endpoint_readers``)."""
    endpoints_reason: str = ""
    """Why :attr:`single_endpoint` is what it is (the call log's ``endpoints_for``)."""
    parallelism: int | None = None
    """The endpoints a statement over one object is cut into at most, as the client asked
    (``x-flight-select-parallelism``; None: sized by work, and always for a single endpoint)."""
    is_cancelled: Callable[[], bool] = dataclasses.field(default=lambda: False, compare=False)
    session_cookie: str | None = None
    """The signed session cookie the client echoed (``flight_storage.rpc.sessions``)."""
    add_header: Callable[[str, str], None] = dataclasses.field(
        default=lambda _name, _value: None, compare=False)
    """Adds a header to the call's answer (``set-cookie`` of a session)."""

    @property
    def statement_flavor(self) -> str:
        """The flavour of a Flight SQL statement: standard SQL unless the caller names one."""
        return self.flavor or STATEMENT_DEFAULT

    @property
    def s3_request_flavor(self) -> str:
        """The flavour of an S3 SelectObjectContent request: Ceph's unless the caller names
        one (the server stands in for RGW there, and the corpus pins its answers)."""
        return self.flavor or S3_REQUEST_DEFAULT

    @property
    def user_name(self) -> str | None:
        """The authenticated user's name (None when authentication is off)."""
        return self.user.name if self.user is not None else None


class CallMiddleware(flight.ServerMiddleware):
    """Per-call state: the caller, the bearer token to send back, and what to log."""

    def __init__(
        self, method: str, headers: Mapping[str, list[str]], user: User | None,
        token: str | None,
    ) -> None:
        self.method = method
        self.headers = headers
        self.user = user
        self.token = token
        self.started = time.perf_counter()
        self.fields: dict[str, Any] = {}

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def call_completed(self, exception: BaseException | None) -> None:
        error = _error_code(exception) if exception is not None else None
        status = self.fields.pop("status", None) or (
            "ok" if exception is None else _ENDED_BY.get(str(error), "error"))
        seconds = time.perf_counter() - self.started
        log_event(
            "call",
            method=self.method,
            user=self.user.name if self.user is not None else None,
            duration_ms=round(seconds * 1000, 2),
            status=status,
            error=error,
            **self.fields,
        )
        method = _grpc_name(self.method)
        # a stream that ended other than "ok" (cancelled, timeout, disconnected) is counted
        # by how it ended, though gRPC saw no exception
        code = error if error is not None else (None if status == "ok" else str(status))
        telemetry.CALLS.labels(method, telemetry.bounded_code(code)).inc()
        telemetry.CALL_SECONDS.labels(method).observe(seconds)
        if "endpoints_for" in self.fields:  # a Flight SQL statement's GetFlightInfo: its plan
            telemetry.PLAN_SECONDS.observe(seconds)


_ENDED_BY: dict[str, str] = {"QueryTimeout": "timeout"}
"""A call's logged status by the code of the error it raised, where the code says how it
ended (GetFlightInfo's planning past ``--query-timeout`` is a timeout, as a stream's is; a
stream's watchdog sets its own status)."""


def _grpc_name(method: str) -> str:
    """The metric label of a pyarrow method name: gRPC's (``GET_FLIGHT_INFO`` is
    ``GetFlightInfo``, as Flight's service definition and dashboards name it)."""
    return telemetry.bounded_code("".join(part.title() for part in method.split("_")))


def _error_code(exception: BaseException) -> str:
    text = str(exception)
    match = re.search(r'"code": "(\w+)"', text)
    return match.group(1) if match else text.split(". Detail:")[0][:200]


class CallFactory(flight.ServerMiddlewareFactory):
    """Authenticates every call (when a users file is configured) and starts its record."""

    def __init__(self, users: Users | None, signer: TokenSigner) -> None:
        self.users = users
        self.signer = signer
        self.throttle = LoginThrottle()

    def start_call(
        self, info: flight.CallInfo, headers: Mapping[str, list[str]]
    ) -> flight.ServerMiddleware:
        method = str(info.method).rsplit(".", 1)[-1]
        if self.users is None:
            return CallMiddleware(method, headers, None, None)
        try:
            user, token = self._authenticate(headers)
        except AuthenticationError as exc:
            log_event("call", method=method, status="unauthenticated", error=exc.code)
            telemetry.CALLS.labels(_grpc_name(method), telemetry.bounded_code(exc.code)).inc()
            raise client_error(exc) from None
        return CallMiddleware(method, headers, user, token)

    def _authenticate(self, headers: Mapping[str, list[str]]) -> tuple[User, str | None]:
        assert self.users is not None
        values = headers.get("authorization") or []
        if not values:
            raise AuthenticationError(
                "authentication required: log in with user name and password",
                code="MissingSecurityHeader",
            )
        scheme, _, credentials = values[0].strip().partition(" ")
        if scheme.lower() == "basic":
            name, password = parse_basic(credentials)
            user = self.throttle.verify(self.users, name, password)
            return user, self.signer.issue(user.name)
        if scheme.lower() == "bearer":
            name = self.signer.check(credentials.strip())
            known = self.users.users.get(name)
            if known is None:
                raise AuthenticationError("the token's user no longer exists")
            return known, None
        if scheme.lower() == NODE_SCHEME.lower():  # a peer's health check
            return node_principal(self.signer.check_node(credentials.strip())), None
        raise AuthenticationError(f"unsupported authorization scheme {scheme!r}")


class HandshakeHandler(flight.ServerAuthHandler):
    """Lets ``Handshake`` succeed; credentials travel in headers (see :class:`CallFactory`)."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:  # noqa: ARG002 - pyarrow's ServerAuthHandler.authenticate
        return None

    def is_valid(self, token: bytes) -> bytes:  # noqa: ARG002 - pyarrow's ServerAuthHandler.is_valid
        return b""
