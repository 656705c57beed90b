"""The door's object calls: HeadObject and GetObject (ranges, conditions, ``response-*``
overrides), PutObject and DeleteObject on a writable door, and SelectObjectContent.

Each is ``async def handler(door, call) -> Response`` (``app.py``'s table).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from flight_storage.request.s3_request import request_from_document
from flight_storage.rpc.s3_http import conditions, eventstream, objects, select_stream
from flight_storage.rpc.s3_http.listing import etag, http_date
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.select_xml import select_request
from flight_storage.storage.catalog import ObjectInfo

if TYPE_CHECKING:
    from flight_storage.rpc.s3_http.app import Call, S3Door

OCTETS: Final = "binary/octet-stream"
RESPONSE_OVERRIDES: Final[dict[str, str]] = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}
"""GetObject's query parameters that set a header of the answer (presigned downloads)."""


async def _object(door: S3Door, call: Call) -> tuple[ObjectInfo, dict[str, str]]:
    """The object and its headers, once the caller may read it.

    Raises:
        S3HttpError: ``NotImplemented`` for ``partNumber``.
    """
    door.check_bucket(call)
    if "partNumber" in call.query:
        raise S3HttpError("NotImplemented", f"{call.operation} of one part (partNumber) is "
                          "not implemented by this server; read a Range")
    obj = await run_in_threadpool(door.server.catalog.object, call.bucket, call.key)
    headers = {"ETag": etag(obj), "Last-Modified": http_date(obj.mtime_ns),
               "Accept-Ranges": "bytes", "Content-Length": str(obj.size)}
    return obj, headers


def _unconditional(call: Call, obj: ObjectInfo, headers: dict[str, str]) -> Response | None:
    """None when the request's conditions hold, else the 304 answer.

    Raises:
        S3HttpError: ``PreconditionFailed``.
    """
    try:
        conditions.check(call.headers, headers["ETag"], obj.mtime_ns)
    except conditions.NotModified:
        return Response(status_code=304, headers={k: v for k, v in headers.items()
                                                   if k in ("ETag", "Last-Modified")})
    return None


async def _forwarded(door: S3Door, call: Call) -> Response | None:
    """The answer of the node holding the object, in a holdings cluster where this node
    does not (``rpc/roles/door.py``)."""
    if not door.cluster.knows_bucket(call.bucket):
        return None
    door.check_listable(call)
    return await door.cluster.forward(call)


async def head_object(door: S3Door, call: Call) -> Response:
    forwarded = await _forwarded(door, call)
    if forwarded is not None:
        return forwarded
    obj, headers = await _object(door, call)
    return _unconditional(call, obj, headers) or Response(b"", headers=headers,
                                                           media_type=OCTETS)


async def get_object(door: S3Door, call: Call) -> Response:
    forwarded = await _forwarded(door, call)
    if forwarded is not None:
        return forwarded
    obj, headers = await _object(door, call)
    refused = _unconditional(call, obj, headers)
    if refused is not None:
        return refused
    wanted = objects.byte_range(call.request.headers.get("range"), obj.size)
    start, end = wanted if wanted is not None else (0, obj.size - 1)
    headers["Content-Length"] = str(max(0, end - start + 1))
    status = 200
    if wanted is not None:
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{obj.size}"
    query = call.query
    headers.update({header: query[name] for name, header in RESPONSE_OVERRIDES.items()
                    if name in query})
    body: Iterator[bytes] = objects.read_object(obj, start, end) if obj.size else iter(())
    return StreamingResponse(body, status_code=status, headers=headers,
                             media_type=headers.get("Content-Type", OCTETS))


async def put_object(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    body = door.body_chunks(call, door.config.max_object_bytes, "EntityTooLarge")
    await objects.write_object(door.server.catalog, call.bucket, call.key, body)
    obj = await run_in_threadpool(door.server.catalog.object, call.bucket, call.key)
    return Response(b"", headers={"ETag": etag(obj), **body.checksums})


async def delete_object(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    await run_in_threadpool(objects.delete_object, door.server.catalog, call.bucket, call.key)
    return Response(b"", status_code=204)


async def select(door: S3Door, call: Call) -> Response:
    if call.query.get("select-type") != "2":
        raise S3HttpError("InvalidArgument", "SelectObjectContent needs ?select&select-type=2")
    door.check_listable(call)
    request = request_from_document(
        select_request(await door.read_body(call), call.bucket, call.key))
    context = door.call_context(call)
    service = door.server.selects  # in process: planned as GetFlightInfo plans it
    endpoints = await run_in_threadpool(service.endpoints, context, request)
    events = select_stream.events(
        select_stream.partitions(service, context, endpoints, call.request_id),
        door.config.max_event_bytes, progress=request.progress)
    return StreamingResponse(events, media_type=eventstream.CONTENT_TYPE)
