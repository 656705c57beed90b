"""The S3 REST API in path style (``/{bucket}/{key}``), as an ASGI application.

Starlette parses HTTP and uvicorn serves it (``gateway.py``); this module maps each S3 call to
its handler through one table, authenticates it (SigV4 when the server has users, see
``sigv4.py``), bounds the body it reads, and logs one JSON line per call like the Flight
server's. SelectObjectContent goes to the Flight server of the same process
(``select_stream.py``); the object calls read the same ``Catalog`` (``objects.py``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from pyarrow import flight
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from flight_storage.errors import StorageError
from flight_storage.protocol import FLAVOR_HEADER
from flight_storage.rpc.auth import User
from flight_storage.rpc.boundary import error_document
from flight_storage.rpc.s3_http import eventstream, objects, sigv4
from flight_storage.rpc.s3_http.s3_errors import S3HttpError, error_xml
from flight_storage.rpc.s3_http.select_stream import SelectBridge
from flight_storage.rpc.s3_http.select_xml import select_request
from flight_storage.rpc.server import StorageServer, log_event

XML: Final = "application/xml"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class S3DoorConfig:
    """How the S3 door runs; every resource a client can make it spend has a bound.

    Attributes:
        host, port: where it listens (loopback by default; 0 picks a free port).
        writable: serve CreateBucket, PutObject, DeleteObject and DeleteBucket.
        max_request_bytes: largest SelectObjectContent body (``MaxMessageLengthExceeded``).
        max_object_bytes: largest PutObject body (``EntityTooLarge``).
        body_timeout_s: time a client has to send its whole body (``RequestTimeout``).
        max_connections: connections and calls at once; more are answered 503 by uvicorn.
        keepalive_timeout_s: idle keep-alive connections are closed after this.
        max_event_bytes: largest payload of one ``Records`` event.
    """

    host: str = "127.0.0.1"
    port: int = 0
    writable: bool = False
    max_request_bytes: int = 256 * 1024
    max_object_bytes: int = 64 << 20
    body_timeout_s: float = 60.0
    max_connections: int = 64
    keepalive_timeout_s: float = 5.0
    max_event_bytes: int = 256 * 1024

    def refusal(self, *, authenticated: bool, allow_anonymous: bool,
                mutual_tls: bool = False) -> str | None:
        """Why the door must not start with these settings, or None."""
        if mutual_tls:
            # the door calls the Flight server as a client and holds no client certificate
            return "the S3 door cannot run beside mutual TLS (--tls-client-ca)"
        positive = {"max_request_bytes": self.max_request_bytes,
                    "max_object_bytes": self.max_object_bytes,
                    "body_timeout_s": self.body_timeout_s,
                    "max_connections": self.max_connections}
        bad = [name for name, value in positive.items() if value <= 0]
        if bad:
            return f"must be positive: {', '.join(bad)}"
        if not (authenticated or allow_anonymous or _is_loopback(self.host)):
            return (f"refusing to serve {self.host} without authentication: pass --auth "
                    "USERS_FILE (or --allow-anonymous)")
        return None


def _is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class _Call:
    """One HTTP call: where it goes, who makes it, what to log."""

    request: Request
    bucket: str
    key: str
    request_id: str
    body: bytes = b""
    user: User | None = None

    @property
    def resource(self) -> str:
        return "/" + "/".join(p for p in (self.bucket, self.key) if p)


Handler = Callable[["S3Door", _Call], Awaitable[Response]]


class S3Door:
    """The ASGI application of the S3 door of one :class:`StorageServer`.

    Args:
        server: the Flight server of this process (catalog, users, signer).
        config: the door's bounds.
        flight_location: where this process's Flight server listens (for SelectObjectContent).
    """

    def __init__(self, server: StorageServer, config: S3DoorConfig, flight_location: str,
                 **client_options: Any) -> None:
        self.server = server
        self.config = config
        self.bridge = SelectBridge(flight.connect(flight_location, **client_options),
                                   config.max_event_bytes)
        users = server.users.users.values() if server.users is not None else ()
        self.keys: dict[str, tuple[User, str]] = {
            key: (user, secret) for user in users for key, secret in user.access_keys.items()
        }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        response = await self._answer(Request(scope, receive))
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        started = time.perf_counter()
        bucket, _, key = request.url.path.lstrip("/").partition("/")
        call = _Call(request, bucket, key, uuid.uuid4().hex[:16].upper())
        operation = _operation(request, bucket, key)
        try:
            handler = _HANDLERS.get(operation)
            if handler is None:
                raise S3HttpError("NotImplemented",
                                  f"{operation[0]} on a {operation[1]} is not supported here")
            await self._authenticate(call, operation)
            response = await handler(self, call)
            error = None
        except S3HttpError as exc:
            response, error = self._error(call, exc), exc.code
        except StorageError as exc:
            doc = error_document(exc)
            response, error = self._error(call, S3HttpError(doc["code"], doc["message"])), doc[
                "code"]
        except Exception as exc:  # the boundary: no traceback reaches a client
            incident = uuid.uuid4().hex[:12]
            log.error("internal error incident=%s", incident, exc_info=exc)
            response, error = self._error(call, S3HttpError(
                "InternalError", f"internal error, id={incident}")), "InternalError"
        response.headers["x-amz-request-id"] = call.request_id
        log_event("call", door="s3", method=f"{request.method} {operation[1]}",
                  peer=f"{request.client.host}:{request.client.port}" if request.client else "",
                  user=call.user.name if call.user is not None else None,
                  object=call.resource, status="ok" if error is None else "error", error=error,
                  http=response.status_code,
                  duration_ms=round((time.perf_counter() - started) * 1000, 2))
        return response

    def _error(self, call: _Call, exc: S3HttpError) -> Response:
        body = b"" if call.request.method == "HEAD" else error_xml(
            exc.code, exc.message, call.resource, call.request_id)
        return Response(body, status_code=exc.status, media_type=XML)

    # ------------------------------------------------------------------ reading and auth
    async def read_body(self, call: _Call, limit: int, code: str) -> bytes:
        """The whole body, refused past ``limit`` bytes or ``body_timeout_s`` seconds."""
        declared = call.request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise S3HttpError(code, f"the body is {declared} bytes; the limit is {limit}")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.config.body_timeout_s):
                async for chunk in call.request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise S3HttpError(code, f"the body is over the limit of {limit} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise S3HttpError("RequestTimeout", "the body did not arrive within "
                              f"{self.config.body_timeout_s} s (--s3-body-timeout)") from None
        return b"".join(chunks)

    async def _authenticate(self, call: _Call, operation: tuple[str, str]) -> None:
        if operation == ("PUT", "object"):
            call.body = await self.read_body(call, self.config.max_object_bytes,
                                             "EntityTooLarge")
        else:
            call.body = await self.read_body(call, self.config.max_request_bytes,
                                             "MaxMessageLengthExceeded")
        if self.server.users is None:
            return  # authentication off: unsigned (and any signed) requests are served
        request = call.request
        signed = sigv4.SignedRequest(
            method=request.method, host=request.headers.get("host", ""),
            raw_path=request.scope.get("raw_path", b"").decode("latin-1") or request.url.path,
            raw_query=request.scope.get("query_string", b"").decode("latin-1"),
            headers={k.lower(): v for k, v in request.headers.items()}, body=call.body)
        access_key = sigv4.verify(signed, lambda k: self.keys[k][1] if k in self.keys else None)
        call.user = self.keys[access_key][0]

    def check_bucket(self, call: _Call) -> None:
        """Refuse a bucket the caller may not use (permissions as over Flight)."""
        self.server.catalog.store(call.bucket)
        if call.user is not None and not call.user.may_read(call.bucket):
            raise S3HttpError("AccessDenied",
                              f"user {call.user.name} may not read bucket {call.bucket}")

    def check_writable(self) -> None:
        """Refuse writes unless the server was started writable."""
        if not self.config.writable:
            raise S3HttpError("AccessDenied", "this server is read-only (start it with "
                              "--s3-writable to allow writes)")

    def flight_headers(self, call: _Call) -> list[tuple[bytes, bytes]]:
        """Headers of the Flight calls made for ``call``: the user, the flavour."""
        headers: list[tuple[bytes, bytes]] = []
        if call.user is not None:
            token = self.server.token_signer.issue(call.user.name)
            headers.append((b"authorization", f"Bearer {token}".encode()))
        flavor = call.request.headers.get(FLAVOR_HEADER)
        if flavor is not None:
            headers.append((FLAVOR_HEADER.encode(), flavor.encode()))
        return headers


def _operation(request: Request, bucket: str, key: str) -> tuple[str, str]:
    """``(HTTP method, S3 resource kind)``: the key of the handler table."""
    kind = "object" if key else "bucket" if bucket else "service"
    if request.method == "POST" and kind == "object":
        query = request.query_params
        kind = "select" if "select" in query and query.get("select-type") == "2" else "post"
    return request.method, kind


# ----------------------------------------------------------------------------- handlers


async def _select(door: S3Door, call: _Call) -> Response:
    request = select_request(call.body, call.bucket, call.key)
    headers = door.flight_headers(call)
    info, options = await run_in_threadpool(door.bridge.plan, request, headers)
    events: Iterator[bytes] = door.bridge.events(info, options)
    return StreamingResponse(events, media_type=eventstream.CONTENT_TYPE)


async def _list_buckets(door: S3Door, call: _Call) -> Response:
    catalog = door.server.catalog
    buckets = [b for b in catalog.buckets() if call.user is None or call.user.may_read(b)]
    return Response(await run_in_threadpool(objects.list_buckets_xml, buckets, catalog),
                    media_type=XML)


async def _list_objects(door: S3Door, call: _Call) -> Response:
    door.check_bucket(call)
    query = dict(call.request.query_params)
    if query.get("list-type") != "2":
        raise S3HttpError("NotImplemented", "only ListObjectsV2 (list-type=2) is supported",
                          status=501)
    listing = objects.parse_list_request(call.bucket, query)
    body = await run_in_threadpool(objects.list_objects_xml, door.server.catalog, listing)
    return Response(body, media_type=XML)


async def _head_bucket(door: S3Door, call: _Call) -> Response:
    door.check_bucket(call)
    return Response(b"")


async def _object_headers(door: S3Door, call: _Call) -> tuple[Any, dict[str, str]]:
    door.check_bucket(call)
    obj = await run_in_threadpool(door.server.catalog.object, call.bucket, call.key)
    return obj, {"ETag": objects.etag(obj), "Last-Modified": objects.http_date(obj.mtime_ns),
                 "Accept-Ranges": "bytes", "Content-Length": str(obj.size)}


async def _head_object(door: S3Door, call: _Call) -> Response:
    _, headers = await _object_headers(door, call)
    return Response(b"", headers=headers, media_type="binary/octet-stream")


async def _get_object(door: S3Door, call: _Call) -> Response:
    obj, headers = await _object_headers(door, call)
    wanted = objects.byte_range(call.request.headers.get("range"), obj.size)
    start, end = wanted if wanted is not None else (0, obj.size - 1)
    headers["Content-Length"] = str(max(0, end - start + 1))
    status = 200
    if wanted is not None:
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{obj.size}"
    body = objects.read_object(obj, start, end) if obj.size else iter(())
    return StreamingResponse(body, status_code=status, headers=headers,
                             media_type="binary/octet-stream")


async def _create_bucket(door: S3Door, call: _Call) -> Response:
    door.check_writable()
    if call.user is not None and not call.user.may_read(call.bucket):
        raise S3HttpError("AccessDenied", f"user {call.user.name} may not use {call.bucket}")
    await run_in_threadpool(objects.create_bucket, door.server.catalog, call.bucket)
    return Response(b"", headers={"Location": f"/{call.bucket}"})


async def _delete_bucket(door: S3Door, call: _Call) -> Response:
    door.check_writable()
    door.check_bucket(call)
    await run_in_threadpool(objects.delete_bucket, door.server.catalog, call.bucket)
    return Response(b"", status_code=204)


async def _put_object(door: S3Door, call: _Call) -> Response:
    door.check_writable()
    door.check_bucket(call)
    await run_in_threadpool(objects.write_object, door.server.catalog, call.bucket, call.key,
                            [call.body])
    obj = await run_in_threadpool(door.server.catalog.object, call.bucket, call.key)
    return Response(b"", headers={"ETag": objects.etag(obj)})


async def _delete_object(door: S3Door, call: _Call) -> Response:
    door.check_writable()
    door.check_bucket(call)
    await run_in_threadpool(objects.delete_object, door.server.catalog, call.bucket, call.key)
    return Response(b"", status_code=204)


_HANDLERS: Final[dict[tuple[str, str], Handler]] = {
    ("POST", "select"): _select,
    ("GET", "service"): _list_buckets,
    ("GET", "bucket"): _list_objects,
    ("HEAD", "bucket"): _head_bucket,
    ("PUT", "bucket"): _create_bucket,
    ("DELETE", "bucket"): _delete_bucket,
    ("HEAD", "object"): _head_object,
    ("GET", "object"): _get_object,
    ("PUT", "object"): _put_object,
    ("DELETE", "object"): _delete_object,
}
