"""The plain object calls of the HTTP door: ListBuckets, ListObjectsV2, ListObjectVersions
(one version per key), Head/Get, and, on a writable server, CreateBucket, PutObject,
DeleteObject, DeleteObjects, DeleteBucket.

They read and write through ``Catalog`` and each bucket's store (a folder or an object store),
so a key names the same object over both doors and no path leaves a bucket. Hand-written because the XML bodies are a handful
of fixed elements; no maintained package serves S3 from a directory as a library we could mount
(MinIO and Ceph are servers of their own).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from xml.sax.saxutils import escape

from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.storage.catalog import Catalog, ObjectInfo
from flight_storage.storage.folder_store import FolderBucket

XML_HEADER: Final = '<?xml version="1.0" encoding="UTF-8"?>\n'
S3_NS: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_LIST_KEYS: Final = 1000
READ_CHUNK: Final = 1 << 20
OWNER: Final = "flight-select"
MAX_DELETE_KEYS: Final = 1000


def http_date(ns: int) -> str:
    """RFC 7231 date of a modification time (Last-Modified)."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def etag(obj: ObjectInfo) -> str:
    """The store's ETag, or for a file one that changes with it (size and modification time,
    not an MD5: hashing every object on HEAD would read it whole)."""
    return obj.etag or f'"{obj.mtime_ns:x}-{obj.size:x}"'


def list_buckets_xml(buckets: list[str], catalog: Catalog) -> bytes:
    """The ListAllMyBucketsResult body."""
    entries = "".join(
        f"<Bucket><Name>{escape(b)}</Name><CreationDate>"
        f"{_iso(catalog.store(b).created_ns())}</CreationDate></Bucket>"
        for b in buckets
    )
    return (f'{XML_HEADER}<ListAllMyBucketsResult xmlns="{S3_NS}"><Owner><ID>{OWNER}</ID>'
            f"</Owner><Buckets>{entries}</Buckets></ListAllMyBucketsResult>").encode()


@dataclass(frozen=True)
class ListRequest:
    """The query parameters of ListObjectsV2."""

    bucket: str
    prefix: str = ""
    delimiter: str = ""
    after: str = ""
    max_keys: int = MAX_LIST_KEYS
    continuation: str | None = None
    start_after: str = ""


def parse_list_request(bucket: str, query: dict[str, str]) -> ListRequest:
    """Read ListObjectsV2's parameters (``max-keys`` capped at S3's 1000)."""
    token = query.get("continuation-token")
    start_after = query.get("start-after", "")
    after = start_after
    if token is not None:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise S3HttpError("InvalidArgument", "the continuation token is not valid") from None
    return ListRequest(bucket, query.get("prefix", ""), query.get("delimiter", ""), after,
                       _max_keys(query), token, start_after)


def parse_versions_request(bucket: str, query: dict[str, str]) -> ListRequest:
    """Read ListObjectVersions' parameters. Objects here have one version, ``null``: the
    ``key-marker`` pages, and a ``version-id-marker`` may only name ``null``."""
    marker = query.get("key-marker", "")
    version = query.get("version-id-marker")
    if version is not None and not marker:
        raise S3HttpError("InvalidArgument",
                          "A version-id marker cannot be specified without a key marker.")
    if version not in (None, "", "null"):
        raise S3HttpError("InvalidArgument", "Invalid version id specified")
    return ListRequest(bucket, query.get("prefix", ""), query.get("delimiter", ""), marker,
                       _max_keys(query), start_after=marker)


def _max_keys(query: dict[str, str]) -> int:
    try:
        max_keys = min(int(query.get("max-keys", MAX_LIST_KEYS)), MAX_LIST_KEYS)
    except ValueError:
        raise S3HttpError("InvalidArgument", "max-keys must be an integer") from None
    if max_keys < 0:
        raise S3HttpError("InvalidArgument", "max-keys must not be negative")
    return max_keys


@dataclass(frozen=True)
class _Page:
    """One page of a listing: keys and common prefixes in key order."""

    contents: list[ObjectInfo]
    prefixes: list[str]
    truncated: bool
    last: str
    """The last key or prefix of the page (where the next one starts after)."""


def _page(catalog: Catalog, request: ListRequest) -> _Page:
    contents: list[ObjectInfo] = []
    prefixes: list[str] = []
    last = ""
    truncated = False
    for obj in catalog.objects(request.bucket, request.prefix):
        key = obj.key
        if key <= request.after or (request.after.endswith(request.delimiter or "\x00")
                                    and key.startswith(request.after)):
            continue
        rolled = _common_prefix(key, request.prefix, request.delimiter)
        if rolled is not None and prefixes and prefixes[-1] == rolled:
            continue
        if len(contents) + len(prefixes) >= request.max_keys:
            truncated = True
            break
        if rolled is not None:
            prefixes.append(rolled)
            last = rolled
        else:
            contents.append(obj)
            last = key
    return _Page(contents, prefixes, truncated, last)


def _prefixes_xml(page: _Page) -> str:
    return "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>"
                   for p in page.prefixes)


def list_objects_xml(catalog: Catalog, request: ListRequest) -> bytes:
    """The ListBucketResult (V2) body: keys and common prefixes in key order, one page."""
    page = _page(catalog, request)
    items = "".join(
        f"<Contents><Key>{escape(o.key)}</Key><LastModified>{_iso(o.mtime_ns)}</LastModified>"
        f"<ETag>{escape(etag(o))}</ETag><Size>{o.size}</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for o in page.contents
    )
    optional = ""
    if request.delimiter:
        optional += f"<Delimiter>{escape(request.delimiter)}</Delimiter>"
    if request.continuation is not None:
        optional += f"<ContinuationToken>{escape(request.continuation)}</ContinuationToken>"
    if request.start_after:
        optional += f"<StartAfter>{escape(request.start_after)}</StartAfter>"
    if page.truncated:
        token = base64.urlsafe_b64encode(page.last.encode()).decode()
        optional += f"<NextContinuationToken>{token}</NextContinuationToken>"
    return (
        f'{XML_HEADER}<ListBucketResult xmlns="{S3_NS}"><Name>{escape(request.bucket)}</Name>'
        f"<Prefix>{escape(request.prefix)}</Prefix><KeyCount>"
        f"{len(page.contents) + len(page.prefixes)}</KeyCount><MaxKeys>{request.max_keys}"
        f"</MaxKeys>{optional}<IsTruncated>{'true' if page.truncated else 'false'}"
        f"</IsTruncated>{items}{_prefixes_xml(page)}</ListBucketResult>"
    ).encode()


def list_versions_xml(catalog: Catalog, request: ListRequest) -> bytes:
    """The ListVersionsResult body of a store without versioning: every key once, as its
    latest (and only) version ``null``, as S3 lists a bucket whose versioning was never on."""
    page = _page(catalog, request)
    versions = "".join(
        f"<Version><Key>{escape(o.key)}</Key><VersionId>null</VersionId>"
        f"<IsLatest>true</IsLatest><LastModified>{_iso(o.mtime_ns)}</LastModified>"
        f"<ETag>{escape(etag(o))}</ETag><Size>{o.size}</Size><Owner><ID>{OWNER}</ID></Owner>"
        "<StorageClass>STANDARD</StorageClass></Version>"
        for o in page.contents
    )
    optional = f"<Delimiter>{escape(request.delimiter)}</Delimiter>" if request.delimiter else ""
    if page.truncated:
        optional += (f"<NextKeyMarker>{escape(page.last)}</NextKeyMarker>"
                     "<NextVersionIdMarker>null</NextVersionIdMarker>")
    return (
        f'{XML_HEADER}<ListVersionsResult xmlns="{S3_NS}"><Name>{escape(request.bucket)}'
        f"</Name><Prefix>{escape(request.prefix)}</Prefix><KeyMarker>{escape(request.after)}"
        f"</KeyMarker><VersionIdMarker>{'null' if request.after else ''}</VersionIdMarker>"
        f"<MaxKeys>{request.max_keys}</MaxKeys>{optional}<IsTruncated>"
        f"{'true' if page.truncated else 'false'}</IsTruncated>{versions}"
        f"{_prefixes_xml(page)}</ListVersionsResult>"
    ).encode()


def _common_prefix(key: str, prefix: str, delimiter: str) -> str | None:
    if not delimiter:
        return None
    cut = key.find(delimiter, len(prefix))
    return key[: cut + len(delimiter)] if cut >= 0 else None


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end)`` inclusive for a ``Range: bytes=...`` header, None for the whole object.

    Raises:
        S3HttpError: ``InvalidRange`` when the range starts past the end.
    """
    if not header:
        return None
    unit, _, spec = header.partition("=")
    first, dash, last = spec.partition("-")
    if unit.strip() != "bytes" or not dash or "," in spec:
        return None  # S3 ignores a Range it cannot read and sends the whole object
    try:
        if not first:
            length = int(last)
            return (max(0, size - length), size - 1) if length and size else None
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        raise S3HttpError("InvalidRange", f"the range {header!r} is outside the object "
                          f"({size} bytes)")
    return start, end


def read_object(obj: ObjectInfo, start: int, end: int) -> Iterator[bytes]:
    """The bytes ``start..end`` (inclusive) of an object, in chunks."""
    with obj.store.open(obj.stored, start) as handle:
        left = end - start + 1
        while left > 0:
            chunk = handle.read(min(READ_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


# ----------------------------------------------------------------------------- writes


async def write_object(catalog: Catalog, bucket: str, key: str,
                       chunks: AsyncIterable[bytes]) -> None:
    """Store an object atomically as its bytes arrive, never holding it in memory.

    The chunks go to a temporary file (beside a folder bucket's objects, so the final rename is
    atomic) that is handed to the bucket's store once the iterator ends. If the iterator raises
    (a checksum found wrong at the end, a client gone, a body over its bound) or a write
    fails, the temporary file is removed and the old object stays as it was.
    """
    store = await asyncio.to_thread(catalog.store, bucket)
    if isinstance(store, FolderBucket):
        await asyncio.to_thread(store.new_path, key)  # a bad name is refused before the body
    fd, temp = await asyncio.to_thread(tempfile.mkstemp, dir=store.temporary_folder(),
                                       prefix=".put-")
    handle = os.fdopen(fd, "wb")
    size = 0
    try:
        async for chunk in chunks:
            await asyncio.to_thread(handle.write, chunk)
            size += len(chunk)
        await asyncio.to_thread(handle.close)
        await asyncio.to_thread(store.put_file, key, Path(temp), size)
    except BaseException:
        handle.close()
        Path(temp).unlink(missing_ok=True)
        raise


def delete_object(catalog: Catalog, bucket: str, key: str) -> None:
    """Remove an object (S3 answers 204 for a key that does not exist)."""
    catalog.store(bucket).delete(key)


def create_bucket(catalog: Catalog, bucket: str) -> None:
    """Make a bucket (names as S3's: 3-63 lower-case letters, digits, ``.``, ``-``); a
    bucket that exists already is kept as it is (the caller's rights were checked)."""
    valid = 3 <= len(bucket) <= 63 and all(c.islower() or c.isdigit() or c in ".-"
                                           for c in bucket) and bucket[0].isalnum()
    if not valid or ".." in bucket:
        raise S3HttpError("InvalidBucketName", f"invalid bucket name {bucket!r}")
    if bucket in catalog.buckets():
        return  # S3 (us-east-1) and Ceph answer 200 to a bucket's owner
    catalog.bucket_set(bucket).create_bucket(bucket)


def delete_bucket(catalog: Catalog, bucket: str) -> None:
    """Remove an empty bucket."""
    store = catalog.store(bucket)
    if next(iter(store.list()), None) is not None:
        raise S3HttpError("BucketNotEmpty", f"bucket {bucket} is not empty")
    for bucket_set in catalog.sets:
        if bucket_set.bucket(bucket) is not None:
            bucket_set.delete_bucket(bucket)
            return


# ----------------------------------------------------------------------------- DeleteObjects


def parse_delete_request(body: bytes) -> tuple[bool, list[tuple[str, str | None]]]:
    """``(quiet, [(key, version id or None), ...])`` of a DeleteObjects body.

    Raises:
        S3HttpError: ``MalformedXML`` (not a ``Delete`` document, a key missing, no key or
            more than 1000).
    """
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise S3HttpError("MalformedXML", f"the Delete document is not XML: {exc}") from None
    if _local(root.tag) != "Delete":
        raise S3HttpError("MalformedXML", "the body must be a Delete document")
    quiet = any(_local(c.tag) == "Quiet" and (c.text or "").strip().lower() == "true"
                for c in root)
    keys: list[tuple[str, str | None]] = []
    for entry in (c for c in root if _local(c.tag) == "Object"):
        fields = {_local(f.tag): f.text or "" for f in entry}
        if not fields.get("Key"):
            raise S3HttpError("MalformedXML", "an Object of the Delete document has no Key")
        keys.append((fields["Key"], fields.get("VersionId")))
    if not 0 < len(keys) <= MAX_DELETE_KEYS:
        raise S3HttpError("MalformedXML", f"a Delete document names 1 to {MAX_DELETE_KEYS} "
                          f"objects, not {len(keys)}")
    return quiet, keys


def delete_result_xml(deleted: list[str], errors: list[tuple[str, str, str]],
                      quiet: bool) -> bytes:
    """The DeleteResult body: what was deleted (unless ``quiet``), and each key's error."""
    done = "" if quiet else "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>"
                                    for k in deleted)
    failed = "".join(f"<Error><Key>{escape(k)}</Key><Code>{escape(c)}</Code><Message>"
                     f"{escape(m)}</Message></Error>" for k, c, m in errors)
    return f'{XML_HEADER}<DeleteResult xmlns="{S3_NS}">{done}{failed}</DeleteResult>'.encode()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
