"""The door's bucket calls: ListBuckets, the three listings, HeadBucket, GetBucketLocation,
GetBucketVersioning and, on a writable door, CreateBucket, DeleteBucket and DeleteObjects.

Each is ``async def handler(door, call) -> Response`` (``app.py``'s table); the XML is
``listing.py``'s and ``objects.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from flight_storage.errors import StorageError
from flight_storage.rpc import access
from flight_storage.rpc.boundary import error_document
from flight_storage.rpc.s3_http import checksums, listing, objects
from flight_storage.rpc.s3_http.listing import Entry, ListRequest
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.storage.catalog import Catalog

if TYPE_CHECKING:
    from flight_storage.rpc.s3_http.app import Call, S3Door

XML: Final = "application/xml"


def entries(door: S3Door, call: Call, prefix: str) -> Iterator[Entry]:
    """The objects of the call's bucket under ``prefix``, in key order, as this node's
    catalog has them (or, in a holdings cluster, every node's: ``rpc/roles/door.py``)."""
    bucket = call.bucket
    if door.cluster.knows_bucket(bucket):
        yield from door.cluster.entries(call, bucket, prefix)
        return
    for obj in door.server.catalog.objects(bucket, prefix):
        yield Entry(obj.key, obj.size, obj.mtime_ns, obj.etag)


async def list_buckets(door: S3Door, call: Call) -> Response:
    catalog = door.server.catalog

    def named() -> bytes:
        held = door.cluster.buckets()
        names = access.readable(call.user, sorted({*catalog.buckets(), *held}))
        return listing.list_buckets_xml([(b, _created(catalog, b)) for b in names])

    return Response(await run_in_threadpool(named), media_type=XML)


def _created(catalog: Catalog, bucket: str) -> int:
    """A bucket's creation time here (0 for a bucket only other nodes hold)."""
    try:
        return catalog.store(bucket).created_ns()
    except StorageError:
        return 0


async def _listed(door: S3Door, call: Call, request: ListRequest, version: int) -> Response:
    door.check_listable(call)
    body = await run_in_threadpool(lambda: listing.list_objects_xml(
        entries(door, call, request.prefix), request, version))
    return Response(body, media_type=XML)


async def list_objects_v1(door: S3Door, call: Call) -> Response:
    return await _listed(door, call, listing.parse_list_request(call.bucket, call.query, 1), 1)


async def list_objects_v2(door: S3Door, call: Call) -> Response:
    return await _listed(door, call, listing.parse_list_request(call.bucket, call.query, 2), 2)


async def list_versions(door: S3Door, call: Call) -> Response:
    door.check_listable(call)
    request = listing.parse_versions_request(call.bucket, call.query)
    body = await run_in_threadpool(lambda: listing.list_versions_xml(
        entries(door, call, request.prefix), request))
    return Response(body, media_type=XML)


async def head_bucket(door: S3Door, call: Call) -> Response:
    door.check_listable(call)
    return Response(b"", headers={"x-amz-bucket-region": "us-east-1"})


async def get_location(door: S3Door, call: Call) -> Response:
    door.check_listable(call)
    return Response(listing.location_xml(), media_type=XML)


async def get_versioning(door: S3Door, call: Call) -> Response:
    door.check_listable(call)
    return Response(listing.versioning_xml(), media_type=XML)


async def create_bucket(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    access.check_read(call.user, call.bucket, verb="use")
    await door.read_body(call)
    await run_in_threadpool(objects.create_bucket, door.server.catalog, call.bucket)
    return Response(b"", headers={"Location": f"/{call.bucket}"})


async def delete_bucket(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    await run_in_threadpool(objects.delete_bucket, door.server.catalog, call.bucket)
    return Response(b"", status_code=204)


async def delete_objects(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    headers = call.headers
    if "content-md5" not in headers and not any(
            h.startswith(checksums.CHECKSUM_PREFIX) for h in headers):
        raise S3HttpError("InvalidRequest", "Missing required header for this request: "
                          "Content-MD5 (or x-amz-checksum-*)")
    quiet, keys = objects.parse_delete_request(await door.read_body(call))
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
