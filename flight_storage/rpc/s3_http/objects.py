"""The plain object calls of the HTTP door: ranges of GetObject, and, on a writable server,
CreateBucket, PutObject, DeleteObject, DeleteObjects, DeleteBucket (listings are
``listing.py``'s, multipart uploads ``multipart.py``'s, copies ``copies.py``'s).

They read and write through ``Catalog`` and each bucket's store (a folder or an object store),
so a key names the same object over both doors and no path leaves a bucket. Hand-written because the XML bodies are a handful
of fixed elements; no maintained package serves S3 from a directory as a library we could mount
(MinIO and Ceph are servers of their own).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Final
from xml.sax.saxutils import escape

from flight_storage.rpc.s3_http.listing import S3_NS, XML_HEADER
from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.xml_body import local_name, parse_xml
from flight_storage.storage.catalog import Catalog, ObjectInfo
from flight_storage.storage.folder_store import FolderBucket
from flight_storage.storage.stores import BucketStore, StoredObject

READ_CHUNK: Final = 1 << 20
MAX_DELETE_KEYS: Final = 1000


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


def check_key(store: BucketStore, key: str) -> None:
    """Refuse, before any body is read, a key the store could not write."""
    if isinstance(store, FolderBucket):
        store.new_path(key)


async def write_object(catalog: Catalog, bucket: str, key: str,
                       chunks: AsyncIterable[bytes]) -> None:
    """Store an object atomically as its bytes arrive, never holding it in memory.

    The chunks go to a temporary file (beside a folder bucket's objects, so the final rename is
    atomic) that is handed to the bucket's store once the iterator ends. If the iterator raises
    (a checksum found wrong at the end, a client gone, a body over its bound) or a write
    fails, the temporary file is removed and the old object stays as it was.
    """
    store = await asyncio.to_thread(catalog.store, bucket)
    await asyncio.to_thread(check_key, store, key)  # a bad name is refused before the body
    await store_file(store, key, lambda handle: _drain(chunks, handle))


async def _drain(chunks: AsyncIterable[bytes], handle: BinaryIO) -> int:
    size = 0
    async for chunk in chunks:
        await asyncio.to_thread(handle.write, chunk)
        size += len(chunk)
    return size


async def store_file(store: BucketStore, key: str,
                     fill: Callable[[BinaryIO], Awaitable[int]]) -> StoredObject:
    """Write a temporary file with ``fill`` (which returns its size) and hand it to the
    store as ``key``; on any failure the file is removed and nothing is stored."""
    fd, temp = await asyncio.to_thread(tempfile.mkstemp, dir=store.temporary_folder(),
                                       prefix=".put-")
    handle = os.fdopen(fd, "wb")
    try:
        size = await fill(handle)
        await asyncio.to_thread(handle.close)
        return await asyncio.to_thread(store.put_file, key, Path(temp), size)
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
    catalog.bucket_set().create_bucket(bucket)


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
    root = parse_xml(body, "the Delete document")
    if local_name(root.tag) != "Delete":
        raise S3HttpError("MalformedXML", "the body must be a Delete document")
    quiet = any(local_name(c.tag) == "Quiet" and (c.text or "").strip().lower() == "true"
                for c in root)
    keys: list[tuple[str, str | None]] = []
    for entry in (c for c in root if local_name(c.tag) == "Object"):
        fields = {local_name(f.tag): f.text or "" for f in entry}
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

