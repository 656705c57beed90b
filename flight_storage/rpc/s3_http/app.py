"""The S3 REST API in path style (``/{bucket}/{key}``), as an ASGI application.

Starlette parses HTTP and uvicorn serves it (``gateway.py``); this module names each request's
S3 operation (``operations.py``) and hands it to its handler through one table, authenticates
it from its head (SigV4 in a header or a presigned URL's query, when the server has users, see
``sigv4.py``) before any of its body is read, and logs one JSON line per call like the Flight
server's. A handler checks the caller's rights before it reads a body; a body is read through
``payload.py`` (framing, signatures and digests checked as it streams, bounded in size and
time), into memory for a request document, or straight to disk for an object or a part.

The handlers live by subject: ``bucket_calls.py`` (listings and bucket calls),
``object_calls.py`` (Get/Head/Put/Delete and SelectObjectContent), ``copies.py``
(CopyObject), ``multipart.py`` (multipart uploads, parts staged by ``staging.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from flight_storage import telemetry
from flight_storage.errors import StorageError
from flight_storage.protocol import FLAVOR_HEADER
from flight_storage.rpc import access
from flight_storage.rpc.auth import User
from flight_storage.rpc.middleware import CallContext, named_flavor
from flight_storage.rpc.roles.door import DoorCluster
from flight_storage.rpc.s3_http import (
    bucket_calls,
    copies,
    multipart,
    object_calls,
    operations,
    payload,
    sigv4,
)
from flight_storage.rpc.s3_http.door_config import S3DoorConfig
from flight_storage.rpc.s3_http.s3_errors import S3HttpError, error_xml, s3_error
from flight_storage.rpc.s3_http.staging import Staging
from flight_storage.rpc.server import StorageServer, log_event
from select_dialect.errors import SelectDialectError

XML: Final = "application/xml"
log = logging.getLogger(__name__)


@dataclass
class Call:
    """One HTTP call: where it goes, who makes it, what to log."""

    request: Request
    bucket: str
    key: str
    request_id: str
    operation: str = ""
    user: User | None = None
    chain: sigv4.ChunkChain | None = None
    body_started: bool = False
    """Some of the body was asked for (then uvicorn has sent ``100 Continue``)."""

    @property
    def resource(self) -> str:
        return "/" + "/".join(p for p in (self.bucket, self.key) if p)

    @property
    def headers(self) -> dict[str, str]:
        """The request headers, lower-case names."""
        return {k.lower(): v for k, v in self.request.headers.items()}

    @property
    def query(self) -> dict[str, str]:
        return dict(self.request.query_params)


Handler = Callable[["S3Door", Call], Awaitable[Response]]


class ReceivedBody:
    """A request body as it arrives (``async for``), decoded and checked; after the
    iteration, :attr:`checksums` holds the ``x-amz-checksum-*`` values it was checked
    against."""

    def __init__(self, chunks: AsyncIterator[bytes], decoder: payload.PayloadDecoder) -> None:
        self._chunks = chunks
        self._decoder = decoder

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks

    @property
    def checksums(self) -> dict[str, str]:
        return self._decoder.checksums


class S3Door:
    """The ASGI application of the S3 door of one :class:`StorageServer`.

    Args:
        server: the Flight server of this process (catalog, users, query service).
        config: the door's bounds.
    """

    def __init__(self, server: StorageServer, config: S3DoorConfig) -> None:
        self.server = server
        self.config = config
        self.staging = Staging(config)
        self.cluster = DoorCluster.of(self)
        """This node's part in a holdings cluster, or none (``rpc/roles/door.py``)."""
        users = server.users.users.values() if server.users is not None else ()
        self.keys: dict[str, tuple[User, str]] = {
            key: (user, secret) for user in users for key, secret in user.access_keys.items()
        }

    def close(self) -> None:
        """Release what the door holds (a temporary staging folder)."""
        self.staging.close()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        response = await self._answer(Request(scope, receive))
        await response(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        started = time.perf_counter()
        bucket, _, key = request.url.path.lstrip("/").partition("/")
        call = Call(request, bucket, key, uuid.uuid4().hex[:16].upper())
        call.operation = operations.operation(request.method, bucket, key,
                                              request.query_params, request.headers)
        try:
            handler = _HANDLERS.get(call.operation)
            if handler is None:
                raise S3HttpError("NotImplemented", f"{call.operation} is not implemented by "
                                  "this server")
            self._authenticate(call)
            response = await handler(self, call)
            error = None
        except S3HttpError as exc:
            response, error = self.error(call, exc), exc.code
        except (StorageError, SelectDialectError) as exc:
            refused = s3_error(exc)
            response, error = self.error(call, refused), refused.code
        except Exception as exc:  # the boundary: no traceback reaches a client
            incident = uuid.uuid4().hex[:12]
            log.error("internal error incident=%s", incident, exc_info=exc)
            response, error = self.error(call, S3HttpError(
                "InternalError", f"internal error, id={incident}")), "InternalError"
        response.headers["x-amz-request-id"] = call.request_id
        if not call.body_started and request.headers.get("expect", "").lower() == "100-continue":
            # refused before the body was asked for: the client has not sent it and may not,
            # so this connection cannot carry another request (RFC 9110, 10.1.1). A body that
            # is sent anyway is read and thrown away by uvicorn, never kept.
            response.headers["Connection"] = "close"
        log_event("call", door="s3", method=f"{request.method} {call.operation}",
                  peer=f"{request.client.host}:{request.client.port}" if request.client else "",
                  user=call.user.name if call.user is not None else None,
                  object=call.resource, status="ok" if error is None else "error", error=error,
                  http=response.status_code,
                  duration_ms=round((time.perf_counter() - started) * 1000, 2))
        # operation names come from operations.py's tables (anything else has spaces: other)
        telemetry.S3_REQUESTS.labels(telemetry.bounded_code(call.operation),
                                     str(response.status_code)).inc()
        return response

    def error(self, call: Call, exc: S3HttpError) -> Response:
        """The S3 error answer of ``exc`` (no body for HEAD)."""
        body = b"" if call.request.method == "HEAD" else error_xml(
            exc.code, exc.message, call.resource, call.request_id)
        return Response(body, status_code=exc.status, media_type=XML)

    # ------------------------------------------------------------------ reading and auth
    def body_chunks(self, call: Call, limit: int, too_large: str) -> ReceivedBody:
        """The object's bytes of the request body as they arrive, decoded and checked.

        Call it only once the caller may do what it asks: nothing of a body is read before.
        The last step checks the body's digests and signatures, so a consumer that keeps
        the bytes must keep them only if the iteration ends without an error.

        Raises:
            S3HttpError: ``too_large`` past ``limit`` bytes, ``RequestTimeout`` after
                ``body_timeout_s``, ``IncompleteBody`` when the client leaves, and what
                :class:`~flight_storage.rpc.s3_http.payload.PayloadDecoder` raises.
        """
        # what the head says is checked now, before a consumer prepares anything
        decoder = payload.PayloadDecoder(call.headers, call.chain, limit, too_large)
        return ReceivedBody(self._received(call, decoder), decoder)

    async def _received(self, call: Call, decoder: payload.PayloadDecoder
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

    async def read_body(self, call: Call) -> bytes:
        """The whole (small) body of a request document, checked as :meth:`body_chunks`.

        Raises:
            S3HttpError: ``MaxMessageLengthExceeded`` past ``max_request_bytes``.
        """
        chunks = self.body_chunks(call, self.config.max_request_bytes,
                                  "MaxMessageLengthExceeded")
        return b"".join([chunk async for chunk in chunks])

    def _authenticate(self, call: Call) -> None:
        """Check the request's signature from its head alone (the body is not read yet)."""
        if self.server.users is None:
            return  # authentication off: unsigned (and any signed) requests are served
        request = call.request
        signed = sigv4.SignedRequest(
            method=request.method, host=request.headers.get("host", ""),
            raw_path=request.scope.get("raw_path", b"").decode("latin-1") or request.url.path,
            raw_query=request.scope.get("query_string", b"").decode("latin-1"),
            headers=call.headers)
        if "AWSAccessKeyId" in call.query and "Signature" in call.query:
            raise S3HttpError("AccessDenied", "SigV2 presigned URLs are not accepted: presign "
                              "with SigV4 (boto3: Config(signature_version='s3v4'))")
        check = sigv4.verify_query if sigv4.is_presigned(signed.raw_query) else \
            sigv4.verify_head
        verified = check(signed, lambda k: self.keys[k][1] if k in self.keys else None)
        call.user = self.keys[verified.access_key][0]
        call.chain = verified.chain

    def check_bucket(self, call: Call, bucket: str | None = None) -> None:
        """Refuse a bucket (``call``'s by default) the caller may not use (permissions as
        over Flight)."""
        bucket = call.bucket if bucket is None else bucket
        self.server.catalog.store(bucket)
        access.check_read(call.user, bucket)

    def check_listable(self, call: Call) -> None:
        """Refuse a bucket the caller may not read; in a holdings cluster the bucket may be
        held by other nodes only, so only the caller's right is checked here."""
        if not self.cluster.knows_bucket(call.bucket):
            self.check_bucket(call)
        else:
            access.check_read(call.user, call.bucket)

    def check_writable(self, call: Call, bucket: str | None = None) -> None:
        """Refuse writes unless the server was started writable and, with users, the caller
        may write the bucket (``call``'s by default): the users file's ``write`` list, the
        same right Flight SQL bulk ingest needs."""
        if not self.config.writable:
            raise S3HttpError("AccessDenied", "this server is read-only (start it with "
                              "--s3-writable to allow writes)")
        bucket = call.bucket if bucket is None else bucket
        access.check_write(call.user, bucket, hint=" (give it in the users file's write "
                           "list: add-user --write)")

    def call_context(self, call: Call) -> CallContext:
        """``call`` as the server's query service takes it: the user this door
        authenticated, the flavour it names (the door's by default), every endpoint read.

        Raises:
            InvalidRequestError: a flavour header naming no flavour.
        """
        client = call.request.client
        flavor = named_flavor(call.request.headers.get(FLAVOR_HEADER) or self.config.flavor)
        return CallContext(user=call.user, flavor=flavor,
                           peer=f"{client.host}:{client.port}" if client else "",
                           endpoints_reason="the S3 door reads every endpoint")


_HANDLERS: Final[dict[str, Handler]] = {
    "ListBuckets": bucket_calls.list_buckets,
    "ListObjects": bucket_calls.list_objects_v1,
    "ListObjectsV2": bucket_calls.list_objects_v2,
    "ListObjectVersions": bucket_calls.list_versions,
    "HeadBucket": bucket_calls.head_bucket,
    "GetBucketLocation": bucket_calls.get_location,
    "GetBucketVersioning": bucket_calls.get_versioning,
    "CreateBucket": bucket_calls.create_bucket,
    "DeleteBucket": bucket_calls.delete_bucket,
    "DeleteObjects": bucket_calls.delete_objects,
    "HeadObject": object_calls.head_object,
    "GetObject": object_calls.get_object,
    "PutObject": object_calls.put_object,
    "DeleteObject": object_calls.delete_object,
    "SelectObjectContent": object_calls.select,
    "CopyObject": copies.copy_object,
    "CreateMultipartUpload": multipart.create,
    "UploadPart": multipart.upload_part,
    "UploadPartCopy": multipart.upload_part_copy,
    "CompleteMultipartUpload": multipart.complete,
    "AbortMultipartUpload": multipart.abort,
    "ListParts": multipart.list_parts,
    "ListMultipartUploads": multipart.list_uploads,
}
"""Every operation the door serves; any other is ``NotImplemented`` naming it."""
