"""Multipart uploads on a writable door: CreateMultipartUpload, UploadPart, UploadPartCopy,
CompleteMultipartUpload, AbortMultipartUpload, ListParts and ListMultipartUploads.

Parts stream to the staging area (``staging.py``: on disk, bounded, expiring) and are checked
as any PutObject body is (``payload.py``); each answers the MD5 ETag S3 gives a part. Complete
checks the part list as S3 does (ascending numbers, each part's ETag and checksum, 5 MiB but
for the last), assembles the parts into one temporary file and hands it to the bucket's store
like a PutObject body, so the object appears whole, on folder and object-store buckets alike,
with the ETag S3 computes for a multipart object (the MD5 of the parts' MD5s, ``-N``).

An upload lives on the node that started it (its parts are on that node's disk): in a fleet
behind one address, send an upload's calls to one node. Hand-written because the XML bodies
are a handful of fixed elements.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import TYPE_CHECKING, BinaryIO, Final
from xml.sax.saxutils import escape

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from flight_storage.rpc.s3_http import objects
from flight_storage.rpc.s3_http.checksums import CHECKSUM_PREFIX
from flight_storage.rpc.s3_http.copies import copy_source
from flight_storage.rpc.s3_http.listing import OWNER_XML, S3_NS, XML_HEADER, iso_time
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.staging import Part, PartWriter, Upload, multipart_etag
from flight_storage.rpc.s3_http.xml_body import local_name, parse_xml
from flight_storage.storage.catalog import ObjectInfo

if TYPE_CHECKING:
    from flight_storage.rpc.s3_http.app import Call, S3Door

XML: Final = "application/xml"
MAX_LISTED: Final = 1000
_CHECKSUM_ELEMENTS: Final = {"ChecksumCRC32": "crc32", "ChecksumCRC32C": "crc32c",
                             "ChecksumCRC64NVME": "crc64nvme", "ChecksumSHA1": "sha1",
                             "ChecksumSHA256": "sha256"}
"""A Complete document's per-part checksum elements -> the algorithm's header suffix."""


def _result(name: str, body: str) -> bytes:
    return f'{XML_HEADER}<{name} xmlns="{S3_NS}">{body}</{name}>'.encode()


async def _upload(door: S3Door, call: Call) -> Upload:
    door.check_writable(call)
    door.check_bucket(call)
    return await run_in_threadpool(door.staging.get, call.query.get("uploadId", ""),
                                   call.bucket, call.key)


async def create(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    store = await run_in_threadpool(door.server.catalog.store, call.bucket)
    await run_in_threadpool(objects.check_key, store, call.key)
    user = call.user.name if call.user is not None else None
    upload = await run_in_threadpool(door.staging.create, call.bucket, call.key, user)
    body = (f"<Bucket>{escape(call.bucket)}</Bucket><Key>{escape(call.key)}</Key>"
            f"<UploadId>{upload.upload_id}</UploadId>")
    headers = {}
    algorithm = call.headers.get("x-amz-checksum-algorithm")
    if algorithm:
        headers["x-amz-checksum-algorithm"] = algorithm
    return Response(_result("InitiateMultipartUploadResult", body), headers=headers,
                    media_type=XML)


def _part_number(call: Call) -> int:
    text = call.query.get("partNumber", "")
    if not text.isdigit():
        raise S3HttpError("InvalidArgument", "Part number must be an integer between 1 and "
                          "10000, inclusive")
    return int(text)


async def upload_part(door: S3Door, call: Call) -> Response:
    upload = await _upload(door, call)
    writer = door.staging.part_writer(upload, _part_number(call))
    body = door.body_chunks(call, door.config.max_object_bytes, "EntityTooLarge")
    try:
        async for chunk in body:
            await asyncio.to_thread(writer.write, chunk)
    except BaseException:
        await asyncio.to_thread(writer.discard)
        raise
    part = await asyncio.to_thread(writer.commit, body.checksums)
    return Response(b"", headers={"ETag": part.etag, **part.checksums})


async def upload_part_copy(door: S3Door, call: Call) -> Response:
    upload = await _upload(door, call)
    number = _part_number(call)
    source = await copy_source(door, call)
    start, end = _copy_range(call.headers.get("x-amz-copy-source-range"), source.size)
    if end - start + 1 > door.config.max_object_bytes:
        raise S3HttpError("EntityTooLarge", "the part is over the limit of "
                          f"{door.config.max_object_bytes} bytes (--s3-max-object-mb)")
    writer = door.staging.part_writer(upload, number)
    try:
        await asyncio.to_thread(_copy_part, source, start, end, writer)
    except BaseException:
        await asyncio.to_thread(writer.discard)
        raise
    part = await asyncio.to_thread(writer.commit, {})
    body = (f"<ETag>{escape(part.etag)}</ETag><LastModified>{iso_time(part.mtime_ns)}"
            "</LastModified>")
    return Response(_result("CopyPartResult", body), media_type=XML)


def _copy_part(source: ObjectInfo, start: int, end: int, writer: PartWriter) -> None:
    for chunk in objects.read_object(source, start, end):
        writer.write(chunk)
    if writer.size != end - start + 1:
        raise S3HttpError("PreconditionFailed", "the copy source ended early (it changed)")


def _copy_range(header: str | None, size: int) -> tuple[int, int]:
    """``x-amz-copy-source-range: bytes=a-b`` (both ends given), else the whole source."""
    if header is None:
        return 0, size - 1
    unit, _, spec = header.partition("=")
    first, _, last = spec.partition("-")
    if unit.strip() != "bytes" or not first.isdigit() or not last.isdigit() \
            or int(first) > int(last) or int(last) >= size:
        raise S3HttpError("InvalidArgument", "The x-amz-copy-source-range value must be of "
                          "the form bytes=first-last where first and last are the zero-based "
                          f"offsets of the first and last bytes to copy (source: {size} bytes)")
    return int(first), int(last)


def parse_complete(body: bytes) -> tuple[list[tuple[int, str]], list[dict[str, str]]]:
    """``([(part number, ETag), ...], [checksums of each])`` of a Complete document.

    Raises:
        S3HttpError: ``MalformedXML`` (not XML, not the document, a part without its number
            or ETag, no part).
    """
    root = parse_xml(body, "the CompleteMultipartUpload document")
    if local_name(root.tag) != "CompleteMultipartUpload":
        raise S3HttpError("MalformedXML", "the body must be a CompleteMultipartUpload document")
    wanted: list[tuple[int, str]] = []
    sums: list[dict[str, str]] = []
    for entry in (e for e in root if local_name(e.tag) == "Part"):
        fields = {local_name(f.tag): (f.text or "").strip() for f in entry}
        if not fields.get("PartNumber", "").isdigit() or not fields.get("ETag"):
            raise S3HttpError("MalformedXML", "every Part needs a PartNumber and an ETag")
        wanted.append((int(fields["PartNumber"]), fields["ETag"]))
        sums.append({CHECKSUM_PREFIX + algorithm: fields[name]
                     for name, algorithm in _CHECKSUM_ELEMENTS.items() if fields.get(name)})
    if not wanted:
        raise S3HttpError("MalformedXML", "The XML you provided was not well-formed or did "
                          "not validate against our published schema (no Part)")
    return wanted, sums


async def complete(door: S3Door, call: Call) -> Response:
    upload = await _upload(door, call)
    wanted, sums = parse_complete(await door.read_body(call))
    parts = await run_in_threadpool(door.staging.begin_complete, upload, wanted, sums)
    done = False
    try:
        store = await run_in_threadpool(door.server.catalog.store, call.bucket)
        await objects.store_file(store, call.key, lambda handle: _assemble(
            door, upload, parts, handle))
        done = True
    finally:
        await run_in_threadpool(door.staging.end_complete, upload, done=done)
    body = (f"<Location>/{escape(call.bucket)}/{escape(call.key)}</Location><Bucket>"
            f"{escape(call.bucket)}</Bucket><Key>{escape(call.key)}</Key><ETag>"
            f"{escape(multipart_etag(parts))}</ETag>")
    return Response(_result("CompleteMultipartUploadResult", body), media_type=XML)


async def _assemble(door: S3Door, upload: Upload, parts: list[Part], handle: BinaryIO) -> int:
    def join() -> int:
        for path in door.staging.part_files(upload, parts):
            with open(path, "rb") as part:
                shutil.copyfileobj(part, handle, objects.READ_CHUNK)
        return handle.tell()

    return await asyncio.to_thread(join)


async def abort(door: S3Door, call: Call) -> Response:
    upload = await _upload(door, call)
    await run_in_threadpool(door.staging.abort, upload)
    return Response(b"", status_code=204)


def _max(call: Call, name: str) -> int:
    text = call.query.get(name, str(MAX_LISTED))
    if not text.isdigit():
        raise S3HttpError("InvalidArgument", f"{name} must be an integer between 0 and "
                          "2147483647")
    return min(int(text), MAX_LISTED)


async def list_parts(door: S3Door, call: Call) -> Response:
    upload = await _upload(door, call)
    most = _max(call, "max-parts")
    marker = call.query.get("part-number-marker", "0")
    after = int(marker) if marker.isdigit() else 0
    numbers = sorted(n for n in upload.parts if n > after)
    shown, truncated = numbers[:most], len(numbers) > most
    parts = "".join(
        f"<Part><PartNumber>{p.number}</PartNumber><LastModified>{iso_time(p.mtime_ns)}"
        f"</LastModified><ETag>{escape(p.etag)}</ETag><Size>{p.size}</Size>"
        + "".join(f"<{_element(h)}>{v}</{_element(h)}>" for h, v in p.checksums.items())
        + "</Part>"
        for p in (upload.parts[n] for n in shown))
    body = (f"<Bucket>{escape(call.bucket)}</Bucket><Key>{escape(call.key)}</Key><UploadId>"
            f"{upload.upload_id}</UploadId><PartNumberMarker>{after}</PartNumberMarker>"
            f"<NextPartNumberMarker>{shown[-1] if shown else after}</NextPartNumberMarker>"
            f"<MaxParts>{most}</MaxParts><IsTruncated>{str(truncated).lower()}</IsTruncated>"
            f"{parts}<Initiator><ID>{escape(upload.user or 'anonymous')}</ID></Initiator>"
            f"{OWNER_XML}<StorageClass>STANDARD</StorageClass>")
    return Response(_result("ListPartsResult", body), media_type=XML)


def _element(header: str) -> str:
    algorithm = header[len(CHECKSUM_PREFIX):]
    return next(n for n, a in _CHECKSUM_ELEMENTS.items() if a == algorithm)


async def list_uploads(door: S3Door, call: Call) -> Response:
    door.check_writable(call)
    door.check_bucket(call)
    query = call.query
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    key_marker, id_marker = query.get("key-marker", ""), query.get("upload-id-marker", "")
    most = _max(call, "max-uploads")
    shown: list[Upload] = []
    prefixes: list[str] = []
    truncated = False
    for upload in await run_in_threadpool(door.staging.uploads, call.bucket):
        if not upload.key.startswith(prefix) or (upload.key, upload.upload_id) <= (
                key_marker, id_marker if id_marker else "\uffff"):
            continue
        cut = upload.key.find(delimiter, len(prefix)) if delimiter else -1
        rolled = upload.key[:cut + len(delimiter)] if cut >= 0 else None
        if rolled is not None and rolled in prefixes:
            continue
        if len(shown) + len(prefixes) >= most:
            truncated = True
            break
        if rolled is not None:
            prefixes.append(rolled)
        else:
            shown.append(upload)
    entries = "".join(
        f"<Upload><Key>{escape(u.key)}</Key><UploadId>{u.upload_id}</UploadId><Initiator><ID>"
        f"{escape(u.user or 'anonymous')}</ID></Initiator>{OWNER_XML}<StorageClass>STANDARD"
        f"</StorageClass><Initiated>{iso_time(u.initiated_ns)}</Initiated></Upload>"
        for u in shown)
    rolled_up = "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>"
                        for p in prefixes)
    last = shown[-1] if shown else None
    body = (f"<Bucket>{escape(call.bucket)}</Bucket><KeyMarker>{escape(key_marker)}</KeyMarker>"
            f"<UploadIdMarker>{escape(id_marker)}</UploadIdMarker>"
            f"<NextKeyMarker>{escape(last.key if last else '')}</NextKeyMarker>"
            f"<NextUploadIdMarker>{last.upload_id if last else ''}</NextUploadIdMarker>"
            f"<Prefix>{escape(prefix)}</Prefix>"
            + (f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "")
            + f"<MaxUploads>{most}</MaxUploads><IsTruncated>{str(truncated).lower()}"
            f"</IsTruncated>{entries}{rolled_up}")
    return Response(_result("ListMultipartUploadsResult", body), media_type=XML)

