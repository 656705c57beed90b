"""The S3 REST API in path style (``/{bucket}/{key}``), as an ASGI application.

Starlette parses HTTP and uvicorn serves it (``gateway.py``); this module maps each S3 call to
its handler through one table, authenticates it from its head (SigV4 when the server has users,
see ``sigv4.py``) before any of its body is read, and logs one JSON line per call like the
Flight server's. A handler checks the caller's rights before it reads a body; a body is read
through ``payload.py`` (framing, signatures and digests checked as it streams, bounded in size
and time), into memory for a request document, or straight to disk for PutObject.
SelectObjectContent goes to the Flight server of the same process (``select_stream.py``); the
object calls read the same ``Catalog`` (``objects.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
from flight_storage.rpc.s3_http import checksums, eventstream, objects, payload, sigv4
from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from flight_storage.rpc.s3_http.s3_errors import S3HttpError, error_xml
from flight_storage.rpc.s3_http.select_stream import SelectBridge
from flight_storage.rpc.s3_http.select_xml import select_request
from flight_storage.rpc.server import StorageServer, log_event

XML: Final = "application/xml"
log = logging.getLogger(__name__)


@dataclass
class _Call:
    """One HTTP call: where it goes, who makes it, what to log."""

    request: Request
    bucket: str
    key: str
    request_id: str
    user: User | None = None
    chain: sigv4.ChunkChain | None = None
    body_started: bool = False
    """Some of the body was asked for (then uvicorn has sent ``100 Continue``)."""

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
            self._authenticate(call)
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
        if not call.body_started and request.headers.get("expect", "").lower() == "100-continue":
            # refused before the body was asked for: the client has not sent it and may not,
            # so this connection cannot carry another request (RFC 9110, 10.1.1). A body that
            # is sent anyway is read and thrown away by uvicorn, never kept.
            response.headers["Connection"] = "close"
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
    def body_chunks(self, call: _Call, limit: int, too_large: str) -> AsyncIterator[bytes]:
        """The object's bytes of the request body as they arrive, decoded and checked.

        Call it only once the caller may do what it asks: nothing of a body is read before.
        The last step checks the body's digests and signatures, so a consumer that keeps
        the bytes must keep them only if the iteration ends without an error.

        Raises:
            S3HttpError: ``too_large`` past ``limit`` bytes, ``RequestTimeout`` after
                ``body_timeout_s``, ``IncompleteBody`` when the client leaves, and what
                :class:`~flight_storage.rpc.s3_http.payload.PayloadDecoder` raises.
        """
        headers = {k.lower(): v for k, v in call.request.headers.items()}
        # what the head says is checked now, before a consumer prepares anything
        decoder = payload.PayloadDecoder(headers, call.chain, limit, too_large)
        return self._received(call, decoder)

    async def _received(self, call: _Call, decoder: payload.PayloadDecoder
                        ) -> AsyncIterator[bytes]:
        call.body_started = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.body_timeout_s
        more = True
        while more:
            try:
                message = await asyncio.wait_for(call.request.receive(),
                                                 deadline - loop.time())
            except TimeoutError:
                raise S3HttpError("RequestTimeout", "the body did not arrive within "
                                  f"{self.config.body_timeout_s} s (--s3-body-timeout)") from None
            if message["type"] == "http.disconnect":
                raise S3HttpError("IncompleteBody", "the client left before its body ended")
            more = bool(message.get("more_body", False))
            data = decoder.feed(message.get("body", b""))
            if data:
                yield data
        decoder.finish()

    async def read_body(self, call: _Call, limit: int, too_large: str) -> bytes:
        """The whole (small) body of a request document, checked as :meth:`body_chunks`."""
        return b"".join([chunk async for chunk in self.body_chunks(call, limit, too_large)])

    def _authenticate(self, call: _Call) -> None:
        """Check the request's signature from its head alone (the body is not read yet)."""
        if self.server.users is None:
            return  # authentication off: unsigned (and any signed) requests are served
        request = call.request
        signed = sigv4.SignedRequest(
            method=request.method, host=request.headers.get("host", ""),
            raw_path=request.scope.get("raw_path", b"").decode("latin-1") or request.url.path,
            raw_query=request.scope.get("query_string", b"").decode("latin-1"),
            headers={k.lower(): v for k, v in request.headers.items()})
        verified = sigv4.verify_head(
            signed, lambda k: self.keys[k][1] if k in self.keys else None)
        call.user = self.keys[verified.access_key][0]
        call.chain = verified.chain

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
        flavor = call.request.headers.get(FLAVOR_HEADER) or self.config.flavor
        headers.append((FLAVOR_HEADER.encode(), flavor.encode()))
        return headers


def _operation(request: Request, bucket: str, key: str) -> tuple[str, str]:
    """``(HTTP method, S3 resource kind)``: the key of the handler table."""
    kind = "object" if key else "bucket" if bucket else "service"
    query = request.query_params
    if request.method == "POST" and kind == "object":
        kind = "select" if "select" in query and query.get("select-type") == "2" else "post"
    elif kind == "bucket":
        kind = next((sub for (method, name), sub in _BUCKET_SUBRESOURCES.items()
                     if method == request.method and name in query), kind)
    return request.method, kind


_BUCKET_SUBRESOURCES: Final[dict[tuple[str, str], str]] = {
    ("GET", "versions"): "versions",
    ("POST", "delete"): "delete",
}
"""Bucket calls told apart by a query parameter (``?versions``, ``?delete``)."""


# ----------------------------------------------------------------------------- handlers


async def _select(door: S3Door, call: _Call) -> Response:
    door.check_bucket(call)
    body = await door.read_body(call, door.config.max_request_bytes, "MaxMessageLengthExceeded")
    request = select_request(body, call.bucket, call.key)
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


async def _list_versions(door: S3Door, call: _Call) -> Response:
    door.check_bucket(call)
    listing = objects.parse_versions_request(call.bucket, dict(call.request.query_params))
    body = await run_in_threadpool(objects.list_versions_xml, door.server.catalog, listing)
    return Response(body, media_type=XML)


async def _delete_objects(door: S3Door, call: _Call) -> Response:
    door.check_writable()
    door.check_bucket(call)
    headers = call.request.headers
    if "content-md5" not in headers and not any(
            h.lower().startswith(checksums.CHECKSUM_PREFIX) for h in headers):
        raise S3HttpError("InvalidRequest", "Missing required header for this request: "
                          "Content-MD5 (or x-amz-checksum-*)")
    body = await door.read_body(call, door.config.max_request_bytes, "MaxMessageLengthExceeded")
    quiet, keys = objects.parse_delete_request(body)
    deleted: list[str] = []
    errors: list[tuple[str, str, str]] = []
    for key, version in keys:
        if version not in (None, "", "null"):
            errors.append((key, "NoSuchVersion", f"{key} has no version {version}"))
            continue
        try:
            await run_in_threadpool(objects.delete_object, door.server.catalog, call.bucket,
                                    key)
        except StorageError as exc:
            document = error_document(exc)
            errors.append((key, document["code"], document["message"]))
        else:
            deleted.append(key)
    return Response(objects.delete_result_xml(deleted, errors, quiet), media_type=XML)


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
    await door.read_body(call, door.config.max_request_bytes, "MaxMessageLengthExceeded")
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
    await objects.write_object(door.server.catalog, call.bucket, call.key,
                               door.body_chunks(call, door.config.max_object_bytes,
                                                "EntityTooLarge"))
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
    ("GET", "versions"): _list_versions,
    ("POST", "delete"): _delete_objects,
    ("HEAD", "bucket"): _head_bucket,
    ("PUT", "bucket"): _create_bucket,
    ("DELETE", "bucket"): _delete_bucket,
    ("HEAD", "object"): _head_object,
    ("GET", "object"): _get_object,
    ("PUT", "object"): _put_object,
    ("DELETE", "object"): _delete_object,
}
