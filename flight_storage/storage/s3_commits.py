"""Prefix tables' commit records in an object-store bucket (``table_commits.py`` says what
they are for): ``<prefix>.flight-select-commits/<digest of the table>/<generation>.json``,
hidden from listings like every dot-name.

A record is created with ``PutObject`` and ``If-None-Match: *``: the store refuses it (412
``PreconditionFailed``, or 409 ``ConditionalRequestConflict`` while another conditional write
of the key runs) when the key exists. SeaweedFS 4.48 honours it atomically (of 20 concurrent
writers of one key, exactly one succeeded in each of 5 trials); its ``If-Match`` is not (two
succeeded in 2 of 5 trials), so records are only ever created, never overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from flight_storage.errors import ConflictError, ObjectNotFoundError, StaleTicketError
from flight_storage.storage.folder_store import check_name
from flight_storage.storage.stores import (
    COMMITS_FOLDER,
    commit_folder,
    commit_generation,
    commit_name,
)

T = TypeVar("T")


class _Connection(Protocol):
    @property
    def client(self) -> Any: ...


class _Bucket(Protocol):
    """What the records use of an ``S3Bucket`` (and its ``S3Connection``)."""

    @property
    def connection(self) -> _Connection: ...

    @property
    def name(self) -> str: ...

    @property
    def bucket(self) -> str: ...

    @property
    def prefix(self) -> str: ...

    def _call(self, what: str, request: Callable[[], T]) -> T: ...


class S3CommitRecords:
    """The commit records of one object-store bucket (``BucketStore``'s commit methods)."""

    def __init__(self, bucket: _Bucket) -> None:
        self._bucket = bucket
        self._client = bucket.connection.client

    def _folder(self, table: str) -> str:
        check_name("table", table.rstrip("/") or "-")
        return f"{self._bucket.prefix}{commit_folder(table)}/"

    def _keys(self, prefix: str, what: str) -> list[str]:
        pages = iter(self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self._bucket.bucket, Prefix=prefix))
        keys: list[str] = []
        while True:
            page = self._bucket._call(f"ListObjectsV2 {self._bucket.name} {what}",
                                      lambda: next(pages, None))
            if page is None:
                return keys
            keys.extend(entry["Key"] for entry in page.get("Contents", []))

    def generations(self, table: str) -> Sequence[int]:
        folder = self._folder(table)
        found = {commit_generation(key[len(folder):])
                 for key in self._keys(folder, f"{table} commits")}
        return sorted(g for g in found if g is not None)

    def read(self, table: str, generation: int) -> bytes | None:
        key = self._folder(table) + commit_name(generation)
        try:
            answer = self._bucket._call(
                f"GetObject {self._bucket.name}/{table} commit {generation}",
                lambda: self._client.get_object(Bucket=self._bucket.bucket, Key=key))
        except ObjectNotFoundError:
            return None
        body = answer["Body"]
        try:
            return bytes(body.read(1 << 20))
        finally:
            body.close()

    def create(self, table: str, generation: int, body: bytes) -> bool:
        key = self._folder(table) + commit_name(generation)
        try:
            self._bucket._call(
                f"PutObject {self._bucket.name}/{table} commit {generation}",
                lambda: self._client.put_object(Bucket=self._bucket.bucket, Key=key,
                                                Body=body, IfNoneMatch="*"))
        except (StaleTicketError, ConflictError):  # 412, 409: another writer's record
            return False
        return True

    def delete(self, table: str, generation: int) -> None:
        key = self._folder(table) + commit_name(generation)
        self._bucket._call(f"DeleteObject {self._bucket.name}/{table} commit {generation}",
                           lambda: self._client.delete_object(Bucket=self._bucket.bucket,
                                                              Key=key))

    def drop_all(self) -> None:
        """Remove every table's records (the bucket is being deleted, holding no object)."""
        for key in self._keys(f"{self._bucket.prefix}{COMMITS_FOLDER}/", "commits"):
            self._bucket._call(f"DeleteObject {self._bucket.name} commit record",
                               lambda k=key: self._client.delete_object(  # type: ignore[misc]
                                   Bucket=self._bucket.bucket, Key=k))
