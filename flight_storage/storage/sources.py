"""Where an object's bytes come from, as the engine sees them: a stored object, a file, or bytes
in memory.

Text readers stream with :meth:`ObjectSource.open`; Parquet reads row groups at their offsets,
possibly from several threads at once, so it asks for :func:`random_access`, a file with
positioned reads. DataFusion's own readers need more than bytes: a URL it can read and, for an
object store, the store registered in its session (:class:`DataFusionLocation`, from
:func:`datafusion_location`). Facts computed from an object (surveys, plans) are cached under
:func:`version_key`, which changes whenever the object's content may have.
"""

from __future__ import annotations

import functools
import io
import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import pyarrow as pa

from flight_storage.storage.catalog import ObjectInfo
from flight_storage.storage.folder_store import file_version

if TYPE_CHECKING:
    from datafusion import SessionContext


class ObjectSource(Protocol):
    """Random-access bytes of one object."""

    # Read-only members: the sources are frozen dataclasses, and nothing assigns these.
    @property
    def name(self) -> str:
        """The object's name (for messages)."""
        ...

    @property
    def size(self) -> int:
        """The object's length in bytes."""
        ...

    def open(self) -> BinaryIO:
        """A new binary stream positioned at 0 (the caller closes it)."""
        ...


@dataclass(frozen=True)
class DataFusionLocation:
    """How DataFusion's own readers reach an object.

    Attributes:
        url: the path or URL given to ``register_csv``/``register_parquet``.
        register: makes ``url`` readable in a session (registers its object store).
        local: the bytes are on this machine (a whole-object pass costs a disk read, not a
            download: planning may survey them).
        portable: makes, now, a ``register`` another process can be handed (values, fresh
            credentials: an engine worker registers the store itself); None where there is
            none (an Iceberg catalog's file IO).
    """

    url: str
    register: Callable[[SessionContext], None]
    local: bool
    portable: Callable[[], Callable[[SessionContext], None]] | None = None

    def for_another_process(self) -> DataFusionLocation | None:
        """This location as another process can use it, or None when it cannot."""
        if self.local:
            return self
        if self.portable is None:
            return None
        return DataFusionLocation(self.url, self.portable(), False)


def _nothing_to_register(ctx: SessionContext) -> None:
    """Local files need no object store."""


@dataclass(frozen=True)
class StoredSource:
    """An object of a bucket, read through its store (``stores.py``)."""

    info: ObjectInfo

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def size(self) -> int:
        return self.info.size

    def open(self) -> BinaryIO:
        return self.info.store.open(self.info.stored)

    def open_random_access(self) -> pa.NativeFile:
        """A file for positioned reads (several readers may share it safely)."""
        return self.info.store.open_random_access(self.info.stored)

    @property
    def version_key(self) -> Hashable:
        # where DataFusion reads it is part of it: plans and surveys made while an object
        # store's object was remote are made again once a local copy of it is kept
        return (self.info.store.description, self.info.key, self.info.version,
                self.datafusion.url)

    @functools.cached_property
    def datafusion(self) -> DataFusionLocation:
        """Where DataFusion reads the object, found once per source (a request's several
        questions, its version key among them, ask it again)."""
        store = self.info.store
        url = store.datafusion_url(self.info.stored)
        local = "://" not in url  # a file: a folder's object, or a store object's local copy
        if local:
            return DataFusionLocation(url, _nothing_to_register, True)
        return DataFusionLocation(url, store.register, False, store.portable_register)


@dataclass(frozen=True)
class FileSource:
    """A file that is no bucket's object (the local CLI, tests)."""

    path: Path
    name: str
    size: int

    def open(self) -> BinaryIO:
        return open(self.path, "rb")

    def open_random_access(self) -> pa.NativeFile:
        """A file for positioned reads (several readers may share it safely)."""
        return pa.OSFile(str(self.path))

    @property
    def version_key(self) -> Hashable:
        return (str(self.path), file_version(os.stat(self.path)))

    @property
    def datafusion(self) -> DataFusionLocation:
        return DataFusionLocation(str(self.path), _nothing_to_register, True)


@dataclass(frozen=True)
class BytesSource:
    """An object held in memory (the local CLI reading stdin, tests, the conformance runner)."""

    data: bytes
    name: str = "<memory>"

    @property
    def size(self) -> int:
        return len(self.data)

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)

    def open_random_access(self) -> pa.NativeFile:
        """A file for positioned reads (several readers may share it safely)."""
        return pa.BufferReader(self.data)


def random_access(source: ObjectSource) -> pa.NativeFile:
    """A positioned-read file for ``source`` (falls back to reading it whole into memory)."""
    opener = getattr(source, "open_random_access", None)
    if opener is not None:
        return opener()
    with source.open() as stream:
        return pa.BufferReader(stream.read())


def datafusion_location(source: ObjectSource) -> DataFusionLocation | None:
    """How DataFusion reaches ``source`` itself, or None (bytes in memory)."""
    location: Any = getattr(source, "datafusion", None)
    return location if isinstance(location, DataFusionLocation) else None


def stop_switch(source: ObjectSource) -> threading.Event | None:
    """The event that tells work reading ``source`` to stop (a server's query sources have
    one, set when their query times out or is cancelled), or None."""
    stop = getattr(source, "stop", None)
    return stop if isinstance(stop, threading.Event) else None


def version_key(source: ObjectSource) -> Hashable | None:
    """What identifies ``source``'s current content (None: nothing to cache by).

    Raises:
        OSError: a file source that can no longer be stat'ed.
    """
    return getattr(source, "version_key", None)


def content_identity(source: ObjectSource, *, ask_store: bool = False) -> Hashable | None:
    """What identifies ``source``'s content across restarts, for caches kept on disk: a
    stored object's store, bucket, key and version (``ask_store``: the version its store
    says now, not the one the request listed), a file's path and version (inode, change
    time, size, modification time: a rewrite that keeps size and mtime still changes the
    change time); None for bytes in memory.

    Raises:
        OSError: the object can no longer be stat'ed.
        StorageError: the store no longer has it (``ask_store``).
    """
    source = unwrapped(source)
    if isinstance(source, StoredSource):
        info = source.info
        version = info.store.head(info.key).version if ask_store else info.version
        return (info.store.description, info.bucket, info.key, version)
    if isinstance(source, FileSource):
        return (str(source.path), file_version(os.stat(source.path)))
    return None


def unwrapped(source: ObjectSource) -> ObjectSource:
    """The stored object under a query's wrapper (``rpc/streams.StoppableSource``: its reads
    stop with its query), for work that outlives the query (a decoded cache's fill)."""
    stored = getattr(source, "stored", None)
    return stored if isinstance(stored, StoredSource) else source
