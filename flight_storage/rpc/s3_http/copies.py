"""CopyObject (and the source side of UploadPartCopy): ``x-amz-copy-source`` read, the caller's
rights on both buckets, the source's ``x-amz-copy-source-if-*`` conditions, the size bound.

A copy goes through the stores: the target store copies without the bytes passing through
this process where it can (:meth:`~flight_storage.storage.stores.BucketStore.copy_in`: a
kernel copy between folder buckets, a server-side copy inside one object store), otherwise
the source is streamed into a temporary file that the target store takes as a PutObject's
body. Either way the source must still be the version whose conditions were checked, and the
target is replaced whole or not at all. No metadata is kept here, so a copy onto itself is
refused as S3 refuses one that changes nothing.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING, BinaryIO, Final
from urllib.parse import unquote
from xml.sax.saxutils import escape

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from flight_storage.rpc.s3_http import conditions, objects
from flight_storage.rpc.s3_http.listing import S3_NS, XML_HEADER, etag, iso_time
from flight_storage.rpc.s3_http.operations import COPY_SOURCE
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.storage.catalog import ObjectInfo
from flight_storage.storage.stores import BucketStore, StoredObject

if TYPE_CHECKING:
    from flight_storage.rpc.s3_http.app import Call, S3Door

XML: Final = "application/xml"


async def copy_source(door: S3Door, call: Call) -> ObjectInfo:
    """The object ``x-amz-copy-source`` names, once the caller may read it and its
    ``x-amz-copy-source-if-*`` conditions hold.

    Raises:
        S3HttpError: ``InvalidArgument`` (malformed), ``NoSuchVersion`` (a version other than
            ``null``), ``AccessDenied``, ``PreconditionFailed``.
    """
    text = call.headers.get(COPY_SOURCE, "")
    path, _, version = unquote(text).lstrip("/").partition("?versionId=")
    bucket, _, key = path.partition("/")
    if not bucket or not key:
        raise S3HttpError("InvalidArgument", "Copy Source must mention the source bucket and "
                          "key: sourcebucket/sourcekey")
    if version not in ("", "null"):
        raise S3HttpError("NoSuchVersion", f"{bucket}/{key} has no version {version} (this "
                          "store keeps one version of an object, null)")
    door.check_bucket(call, bucket)
    source = await run_in_threadpool(door.server.catalog.object, bucket, key)
    try:
        conditions.check(call.headers, etag(source), source.mtime_ns, copy_source=True)
    except conditions.NotModified:  # pragma: no cover - copy conditions never answer 304
        raise S3HttpError("PreconditionFailed", "a copy source condition failed") from None
    return source


async def copy_object(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    source = await copy_source(door, call)
    if (source.bucket, source.key) == (call.bucket, call.key) and call.headers.get(
            "x-amz-metadata-directive", "COPY").upper() != "REPLACE":
        raise S3HttpError("InvalidRequest", "This copy request is illegal because it is trying "
                          "to copy an object to itself without changing the object's metadata, "
                          "storage class, website redirect location or encryption attributes.")
    if source.size > door.config.max_upload_bytes:
        raise S3HttpError("InvalidRequest", f"The specified copy source is larger than the "
                          f"maximum allowable size for a copy source: "
                          f"{door.config.max_upload_bytes} (--s3-max-upload-mb)")
    target = await run_in_threadpool(door.server.catalog.store, call.bucket)
    await run_in_threadpool(objects.check_key, target, call.key)
    copied = await copy_into(target, call.key, source)
    body = (f'{XML_HEADER}<CopyObjectResult xmlns="{S3_NS}"><LastModified>'
            f"{iso_time(copied.mtime_ns)}</LastModified><ETag>{escape(etag(copied))}</ETag>"
            "</CopyObjectResult>")
    return Response(body.encode(), media_type=XML)


async def copy_into(target: BucketStore, key: str, source: ObjectInfo) -> StoredObject:
    """``source`` copied to ``key`` of ``target``: by the store where it can, else streamed."""
    copied = await run_in_threadpool(target.copy_in, key, source.store, source.stored)
    if copied is not None:
        return copied
    return await objects.store_file(target, key, lambda handle: _stream(source, handle))


async def _stream(source: ObjectInfo, handle: BinaryIO) -> int:
    def copy() -> int:
        with source.store.open(source.stored) as reading:  # PreconditionFailed if changed
            shutil.copyfileobj(reading, handle, objects.READ_CHUNK)
            return handle.tell()

    return await asyncio.to_thread(copy)
