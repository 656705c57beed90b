"""A bounded disk cache of object-store objects, one file per object version.

A store object is read over the network every time; the same object in a folder comes from
the page cache. With ``--store-cache-mb`` a server keeps the objects it reads in a folder of its
own (``--store-cache-dir``, a temporary folder by default), one file per object *version*: the
name is a digest of the bucket, the key and the version (ETag, size, last-modified), so a
rewritten object is another file and a cached file never changes. The first query of an object
reads it from the store as before and asks for a copy in the background (one download at a
time, to a temporary name renamed when complete); the queries after it read the local file,
DataFusion included, as they would a folder's object (planning then surveys it whole, as for a
folder). The least recently used files go when the cache passes its size (deleted ten minutes
later: a query planned on one may still open it); an object larger than a quarter of the cache
is never kept.

The version check stays the store's: a ticket's DoGet still asks the store for the object's
version (HEAD) and refuses one that changed (``PreconditionFailed``).

Hand-written: a directory of immutable files with an LRU index is a few lines, and every
caching library we looked at caches values in memory or by URL without versions.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from flight_storage.bounded_cache import BoundedCache

log = logging.getLogger(__name__)

_LARGEST_SHARE = 4
"""An object over 1/4 of the cache is never kept (it would evict everything else)."""
_REFUSALS_KEPT = 4096
"""Versions remembered as too large to keep (so each is logged once, within a bound)."""
_EVICTED_KEPT_S = 600.0
"""An evicted file is deleted this long after: a query planned on it (the engine keeps
DataFusion plans for 5 minutes) may still open it."""


def _size(size: int) -> int:
    """A copy's weight: its bytes."""
    return size


class ObjectCache:
    """Object versions kept as files under ``folder``, up to ``max_bytes`` in all.

    Args:
        folder: where the files go (made if missing; files found there are not reused).
        max_bytes: the most bytes kept.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("the object cache needs a positive size")
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="flight-select-cache-", dir=folder))
        self.max_bytes = max_bytes
        self._files: BoundedCache[str, int] = BoundedCache(max_bytes, _size)  # name -> size
        self._evicted: list[tuple[float, Path]] = []
        self._pending: set[str] = set()
        self._refused: set[str] = set()  # versions too large, logged once
        self._lock = threading.Lock()
        self._downloads: queue.Queue[tuple[str, int, Callable[[], BinaryIO]]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self.hits = 0
        self.downloads = 0

    @staticmethod
    def name(bucket: str, key: str, version: str) -> str:
        """The file name of one object version."""
        return hashlib.sha256(f"{bucket}\0{key}\0{version}".encode()).hexdigest()

    def path(self, name: str) -> Path | None:
        """The cached file of ``name`` (counted as used), or None."""
        with self._lock:
            if self._files.get(name) is None:
                return None
            self.hits += 1
        return self.folder / name

    def request(self, name: str, size: int, open_object: Callable[[], BinaryIO],
                label: str = "") -> None:
        """Copy an object version into the cache in the background (once; never one too
        large to keep: that is logged once per version, naming ``label``, the object)."""
        if size * _LARGEST_SHARE > self.max_bytes:
            self._too_large(name, size, label or name)
            return
        with self._lock:
            if name in self._files or name in self._pending:
                return
            self._pending.add(name)
            if self._worker is None:
                self._worker = threading.Thread(target=self._download_loop,
                                                name="object-cache", daemon=True)
                self._worker.start()
        self._downloads.put((name, size, open_object))

    def _too_large(self, name: str, size: int, label: str) -> None:
        with self._lock:
            if name in self._refused:
                return
            if len(self._refused) >= _REFUSALS_KEPT:
                self._refused.clear()
            self._refused.add(name)
        log.warning("object cache: %s (%d MiB) is not kept: an object over 1/%d of the cache "
                 "(--store-cache-mb %d) would evict everything else; a cache of at least "
                 "%d MiB keeps it", label, size >> 20, _LARGEST_SHARE, self.max_bytes >> 20,
                 -(-size * _LARGEST_SHARE // (1 << 20)))

    def _download_loop(self) -> None:
        while True:
            name, size, open_object = self._downloads.get()
            try:
                self._download(name, size, open_object)
            except Exception as exc:  # a failed copy is only a cache miss; say why once
                log.warning("object cache: could not keep a copy (%s)", exc)
            finally:
                with self._lock:
                    self._pending.discard(name)

    def _download(self, name: str, size: int, open_object: Callable[[], BinaryIO]) -> None:
        target = self.folder / name
        fd, partial = tempfile.mkstemp(dir=self.folder, prefix=".partial-")
        try:
            copied = 0
            with os.fdopen(fd, "wb") as out, open_object() as source:
                while chunk := source.read(8 << 20):
                    out.write(chunk)
                    copied += len(chunk)
            if copied != size:
                raise OSError(f"read {copied} bytes of {size}")
            os.replace(partial, target)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        with self._lock:
            self.downloads += 1
            self._retire(self._files.put(name, size))

    def _retire(self, evicted: list[tuple[str, int]]) -> None:
        """Delete evicted copies once no plan made on them may still read them."""
        now = time.monotonic()
        self._evicted.extend((now, self.folder / old) for old, _ in evicted)
        while self._evicted and now - self._evicted[0][0] > _EVICTED_KEPT_S:
            self._evicted.pop(0)[1].unlink(missing_ok=True)
