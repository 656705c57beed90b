"""What ``flight-select serve --data`` accepts, and the bucket sets it makes.

``--data`` may be given several times; each value is one location:

| value | buckets |
|---|---|
| ``DIR`` | every top-level folder of ``DIR`` (a folder of buckets, as before) |
| ``s3://`` | every bucket the store's credentials can list |
| ``s3://BUCKET`` or ``s3://BUCKET/PREFIX`` | that bucket (only the keys under ``PREFIX``, the prefix removed) |
| ``NAME=DIR`` | the folder ``DIR`` itself as bucket ``NAME`` |
| ``NAME=s3://BUCKET[/PREFIX]`` | that store bucket (or prefix) as bucket ``NAME`` |

So one server may mix folders and object-store buckets. A bucket name served by two locations
is refused at start, naming both. The object store is reached with :class:`S3Settings` (AWS
conventions, overridden by ``--store-endpoint-url``, ``--store-region``, ``--store-profile``);
one connection serves every ``s3://`` location of the server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from flight_storage.errors import InvalidRequestError
from flight_storage.storage.folder_store import FolderBuckets
from flight_storage.storage.s3_store import S3Buckets, S3Connection, S3Settings
from flight_storage.storage.stores import BucketSet

_NAMED = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)=(?P<where>.+)")


def is_store_location(value: str) -> bool:
    """True when ``value`` names an object-store location (``s3://...``, maybe ``NAME=``)."""
    match = _NAMED.fullmatch(value)
    return (match.group("where") if match else value).startswith("s3://")


def bucket_sets(values: Sequence[str], settings: S3Settings | None = None, *,
                content_versions: bool = False) -> list[BucketSet]:
    """The bucket sets of every ``--data`` value, in order.

    Args:
        values: the ``--data`` values.
        settings: how to reach the object store (defaults: the AWS conventions).
        content_versions: folder objects are versioned by a digest of their bytes (cluster
            replicas, ``folder_store.py``).

    Raises:
        InvalidRequestError: a value that is none of the forms above, a folder that does not
            exist, or a bucket name served twice (checked for named locations and folders).
    """
    if not values:
        raise InvalidRequestError("--data: give at least one location (a folder or s3://...)")
    connection: list[S3Connection] = []

    def store() -> S3Connection:
        if not connection:
            connection.append(S3Connection(settings or S3Settings()))
        return connection[0]

    sets = [_location(value, store, content_versions) for value in values]
    _check_unique(sets, values)
    return sets


def _location(value: str, store: object, content_versions: bool) -> BucketSet:
    match = _NAMED.fullmatch(value)
    name = match.group("name") if match else None
    where = match.group("where") if match else value
    if where.startswith("s3://"):
        bucket, _, prefix = where[len("s3://"):].partition("/")
        if not bucket and name is not None:
            raise InvalidRequestError(f"--data {value}: a named location needs a bucket "
                                      f"({name}=s3://BUCKET[/PREFIX])")
        connection = store()  # type: ignore[operator]
        return S3Buckets(connection, bucket=bucket or None, prefix=prefix, name=name)
    if "://" in where:
        raise InvalidRequestError(f"--data {value}: unknown scheme; give a folder, s3://, "
                                  "s3://BUCKET[/PREFIX] or NAME=LOCATION")
    folder = Path(where)
    if name is not None:
        if not folder.is_dir():
            raise InvalidRequestError(f"--data {value}: {folder} is not a folder")
        return FolderBuckets.single(name, folder, content_versions=content_versions)
    return FolderBuckets(folder, content_versions=content_versions)


def _check_unique(sets: Sequence[BucketSet], values: Sequence[str]) -> None:
    """A bucket named by two locations is ambiguous (open-ended store locations are listed
    lazily and looked up last, so they are not checked here)."""
    seen: dict[str, str] = {}
    for bucket_set, value in zip(sets, values, strict=True):
        if getattr(bucket_set, "open_ended", False):
            continue
        for name in bucket_set.names():
            if name in seen:
                raise InvalidRequestError(f"--data: bucket {name!r} is served by both "
                                          f"{seen[name]} and {value}")
            seen[name] = value
