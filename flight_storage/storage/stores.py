"""The storage seam: where a bucket's objects live, behind one interface.

A bucket is served from a *store*: a folder of this machine (``folder_store.py``) or a bucket of
an S3-compatible object store (``s3_store.py``). Everything above this seam — the catalog, the
engine's readers, DataFusion's own readers, the S3 door — asks a :class:`BucketStore` for what it
needs and never branches on where the bytes are:

| need | method |
|---|---|
| one object's size, time and version | :meth:`BucketStore.head` |
| the objects under a prefix, in key order | :meth:`BucketStore.list` |
| a stream of the bytes from an offset (reference readers, surveys, GetObject) | :meth:`BucketStore.open` |
| positioned reads (Parquet footers and row groups) | :meth:`BucketStore.open_random_access` |
| DataFusion reading the object itself | :meth:`BucketStore.datafusion_url`, :meth:`BucketStore.register` |
| the bucket's ``.flight-select.json`` | :meth:`BucketStore.config_text` |
| writes of the S3 door's writable mode | :meth:`BucketStore.put_file`, :meth:`BucketStore.delete` |
| a copy that never passes through this process (CopyObject) | :meth:`BucketStore.copy_in` |
| a prefix table's commit records (ingests atomic across processes, ``table_commits.py``) | :meth:`BucketStore.commit_generations`, :meth:`BucketStore.read_commit`, :meth:`BucketStore.create_commit`, :meth:`BucketStore.delete_commit` |

An object's **version** is a content identity the store vouches for, and a ticket is bound to
it: a store's ETag with the object's size and last-modified time, or, for a file, its inode,
change time, size and modification time (the change time cannot be set back by ``touch``,
``cp -p`` or ``rsync -t``, so a rewrite with the old size and modification time still changes
it). A reader that finds another version answers ``PreconditionFailed``; never rows of two
versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

import pyarrow as pa

if TYPE_CHECKING:  # the storage layer does not load DataFusion; the engine hands it a session
    from datafusion import SessionContext


COMMITS_FOLDER = ".flight-select-commits"
"""A bucket's hidden folder of prefix tables' commit records (a dot-name: never an object)."""


def commit_folder(table: str) -> str:
    """``table``'s folder of commit records, relative to the bucket: ``COMMITS_FOLDER/<hash>``
    (a digest, so any table name, however long, gives one short name)."""
    return f"{COMMITS_FOLDER}/{hashlib.sha256(table.encode()).hexdigest()[:32]}"


def commit_name(generation: int) -> str:
    """The file name of commit record ``generation`` (zero-padded: names sort as numbers)."""
    return f"{generation:020d}.json"


def commit_generation(name: str) -> int | None:
    """The generation a commit record's file name says, or None for any other name."""
    stem, dot, suffix = name.partition(".")
    return int(stem) if dot and suffix == "json" and len(stem) == 20 and stem.isdigit() \
        else None


@dataclass(frozen=True)
class StoredObject:
    """What a store knows of one object.

    Attributes:
        key: the object's key in its bucket (``/``-separated, never starting with ``/``).
        size: length in bytes.
        mtime_ns: last modification (ns since the epoch).
        version: the content identity (see the module's docstring).
        etag: the S3 ETag, quoted, when the store keeps one (folders compute none).
    """

    key: str
    size: int
    mtime_ns: int
    version: str
    etag: str | None = None


class BucketStore(Protocol):
    """The objects of one bucket, wherever they are stored."""

    @property
    def description(self) -> str:
        """Where the bucket lives, for messages and listings (never a secret)."""
        ...

    @property
    def writable(self) -> bool:
        """Whether :meth:`put_file` and :meth:`delete` may be called (the store allows it)."""
        ...

    def head(self, key: str) -> StoredObject:
        """One object as it is now.

        Raises:
            ObjectNotFoundError: no such key (or a key that must not be served).
            AccessDeniedError: the key would leave the bucket, or the store refuses us.
            StoreUnavailableError: the store did not answer.
        """
        ...

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """The objects whose key starts with ``prefix``, in key order (dotfiles left out)."""
        ...

    def open(self, obj: StoredObject, start: int = 0) -> BinaryIO:
        """A stream of ``obj``'s bytes from ``start`` (seekable; the caller closes it).

        Raises:
            StaleTicketError: the object is no longer ``obj.version`` (PreconditionFailed).
        """
        ...

    def open_random_access(self, obj: StoredObject) -> pa.NativeFile:
        """A file for positioned reads of ``obj`` (several readers may share it)."""
        ...

    def datafusion_url(self, obj: StoredObject) -> str:
        """What DataFusion's readers are given to read ``obj`` (after :meth:`register`)."""
        ...

    def register(self, ctx: SessionContext) -> None:
        """Make :meth:`datafusion_url` readable in ``ctx`` (an object store, or nothing)."""
        ...

    def portable_register(self) -> Callable[[SessionContext], None]:
        """:meth:`register` as values another process can be handed and call (an engine
        worker): picklable, with the credentials as they are now."""
        ...

    def config_text(self) -> str | None:
        """The bucket's ``.flight-select.json``, or None when it has none."""
        ...

    def created_ns(self) -> int:
        """When the bucket was created (ListBuckets' CreationDate), 0 when unknown."""
        ...

    def put_file(self, key: str, file: Path, size: int) -> StoredObject:
        """Store the finished temporary ``file`` (``size`` bytes) as ``key``, atomically:
        readers see the old object or the new one, never part of it."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is absent)."""
        ...

    def copy_in(self, key: str, source: BucketStore, obj: StoredObject) -> StoredObject | None:
        """Copy ``obj`` of ``source`` to ``key`` here without its bytes passing through this
        process (the kernel copies a file, an object store copies within itself), atomically
        as :meth:`put_file`; None when this store cannot (another kind of store, another
        object store), and the caller streams the bytes instead.

        Raises:
            StaleTicketError: ``obj`` is no longer the source's version
                (``PreconditionFailed``); nothing was written.
        """
        ...

    def temporary_folder(self) -> Path | None:
        """Where an upload may be written before :meth:`put_file` (beside the objects for a
        folder, so the final rename is atomic; a folder of this bucket's own under the system's
        temporary folder for an object store; None: anywhere)."""
        ...

    def commit_generations(self, table: str) -> Sequence[int]:
        """The generations of the commit records of the prefix table ``table``, ascending
        (records live in the bucket's hidden ``.flight-select-commits/``, never objects)."""
        ...

    def read_commit(self, table: str, generation: int) -> bytes | None:
        """The body of one commit record; None when it is gone (pruned meanwhile)."""
        ...

    def create_commit(self, table: str, generation: int, body: bytes) -> bool:
        """Write the record ``generation`` only if no record of that generation exists, in
        one atomic step every process sharing the store agrees on (a folder's ``link``, S3's
        ``If-None-Match: *``); False when one exists (another commit won)."""
        ...

    def delete_commit(self, table: str, generation: int) -> None:
        """Remove one commit record (no error when it is absent)."""
        ...


class BucketSet(Protocol):
    """Buckets that come from one ``--data`` location: a folder of buckets, a store's
    buckets, or one bucket."""

    @property
    def description(self) -> str:
        """The location, for messages (never a secret)."""
        ...

    def names(self) -> list[str]:
        """Bucket names served from here, sorted."""
        ...

    def bucket(self, name: str) -> BucketStore | None:
        """The bucket ``name`` when this set serves it (None: not here)."""
        ...

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (the S3 door's CreateBucket).

        Raises:
            InvalidRequestError: this location cannot hold new buckets.
        """
        ...

    def delete_bucket(self, name: str) -> None:
        """Delete the empty bucket ``name`` (the S3 door's DeleteBucket)."""
        ...
