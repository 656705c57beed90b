"""The decoded cache's disk: entries (Parquet files of an object's decoded rows) under a folder,
bounded in bytes, least recently used first out, filled once each in the background.

What an entry holds and how queries read it is the execution side's
(``execution/decoded_table.py``); this module knows only names, files and bytes:

* an entry is ``<name>.parquet`` where ``name`` is a digest of everything the rows depend on
  (:func:`entry_name`: the object's content identity and every reading rule), so an entry
  never changes and a rewritten object or another reading is another name;
* a fill writes ``.partial-*`` and renames it to the entry's name only when complete, so a
  process killed mid-fill leaves no file that is used (a restart deletes the partials);
* a restart reuses the entries it finds (the least recently modified are evicted first);
* fills are single-flight (one per name at a time, however many queries miss at once) and run
  on a bounded pool of background threads, off the queries' paths;
* the entries' bytes stay under ``max_bytes``: an entry larger than ``1 / largest_share`` of it
  is dropped, and the least recently used go when a new one passes the bound (deleted after a
  grace period: a query planned on an evicted entry may still open it);
* a fill that fails (an unwritable folder, a full disk, a malformed object) is logged and the
  name is not tried again for a while; the query that asked never sees it fail.

Hand-written, as ``object_cache.py``: a folder of immutable files with an LRU index.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from flight_storage.bounded_cache import BoundedCache

log = logging.getLogger(__name__)

SUFFIX = ".parquet"
PARTIAL = ".partial-"
_LARGEST_SHARE = 4
"""An entry over 1/4 of the cache is not kept (it would evict everything else)."""
_EVICTED_KEPT_S = 600.0
"""An evicted entry is deleted this long after: plans made on it (the engine keeps DataFusion
plans for 5 minutes) may still open it."""
_FAILED_RETRY_S = 600.0
"""A name whose fill failed is not tried again for this long."""


def entry_name(parts: Hashable) -> str:
    """The entry name of ``parts`` (a digest of their ``repr``: every part must have a stable
    one, as tuples of strings, numbers and frozen dataclasses do)."""
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class FillReport:
    """What one fill cost.

    Attributes:
        rows: rows written.
        bytes: the entry's size.
        cpu_s: process CPU seconds while it ran (the fill's DataFusion threads included; a
            query running at the same time is counted too).
        wall_s: seconds it took.
    """

    rows: int
    bytes: int
    cpu_s: float
    wall_s: float


Filler = Callable[[Path], int]
"""Writes the entry's rows to the path given and returns how many rows it wrote; raises
when the object cannot be cached (nothing is kept)."""


def _size(size: int) -> int:
    """An entry's weight: its bytes."""
    return size


class DecodedCache:
    """Entries under ``folder``, up to ``max_bytes`` in all.

    Args:
        folder: where entries go (made if missing); entries found there are reused.
        max_bytes: the most bytes of entries kept.
        workers: fills running at once.

    Example:
        >>> import tempfile
        >>> cache = DecodedCache(Path(tempfile.mkdtemp()), 1 << 20)
        >>> cache.state("x")
        'miss'
    """

    def __init__(self, folder: Path, max_bytes: int, *,
                 workers: int = 1) -> None:
        if max_bytes <= 0:
            raise ValueError("the decoded cache needs a positive size")
        self.folder = folder
        self.max_bytes = max_bytes
        self._entries: BoundedCache[str, int] = BoundedCache(max_bytes, _size)  # name -> bytes
        self._filling: dict[str, Future[None]] = {}
        self._failed: dict[str, float] = {}
        self._evicted: list[tuple[float, Path]] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decoded-fill")
        self.hits = 0
        self.misses = 0
        self.fills = 0
        self.evictions = 0
        self.failures = 0
        self.last_fill: FillReport | None = None
        self.usable = self._open_folder()

    def _open_folder(self) -> bool:
        """Reuse the complete entries found, delete partial ones; False when the folder
        cannot be used (every lookup then misses and fills are not tried)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            found = []
            for path in self.folder.iterdir():
                if path.name.startswith(PARTIAL):
                    path.unlink(missing_ok=True)
                elif path.name.endswith(SUFFIX):
                    st = path.stat()
                    found.append((st.st_mtime_ns, path.name[:-len(SUFFIX)], st.st_size))
        except OSError as exc:
            log.warning("decoded cache: cannot use %s (%s); objects are read without it",
                        self.folder, exc)
            return False
        with self._lock:
            for _, name, size in sorted(found):
                self._retire(self._entries.put(name, size))
        if found:
            log.info("decoded cache: reusing %d entries (%d bytes) in %s", len(self._entries),
                     self.bytes, self.folder)
        return True

    @property
    def bytes(self) -> int:
        """Bytes of the entries kept."""
        return self._entries.weight

    def path(self, name: str) -> Path:
        """Where the entry ``name`` is (whether or not it exists)."""
        return self.folder / f"{name}{SUFFIX}"

    def lookup(self, name: str) -> Path | None:
        """The entry's file (counted as a hit and as used), or None (a miss)."""
        with self._lock:
            if self._entries.get(name) is not None:
                self.hits += 1
                return self.path(name)
            self.misses += 1
            return None

    def state(self, name: str) -> str:
        """``hit``, ``filling`` or ``miss`` (not counted)."""
        with self._lock:
            if name in self._entries:
                return "hit"
            return "filling" if name in self._filling else "miss"

    def fill(self, name: str, filler: Filler, *, wait: bool = False) -> str:
        """Fill the entry ``name`` with ``filler`` in the background, once however many ask
        (``wait``: and wait for it; a test mode). Returns the state after asking."""
        with self._lock:
            if name in self._entries:
                return "hit"
            future = self._filling.get(name)
            failed_at = self._failed.get(name)
            if future is None:
                if not self.usable or (failed_at is not None
                                       and time.monotonic() - failed_at < _FAILED_RETRY_S):
                    return "miss"
                future = self._pool.submit(self._fill, name, filler)
                self._filling[name] = future
        if wait:
            future.result()
            return self.state(name)
        return "filling"

    def _fill(self, name: str, filler: Filler) -> None:
        started, cpu = time.monotonic(), time.process_time()
        partial = self.folder / f"{PARTIAL}{name}-{threading.get_ident()}"
        try:
            rows = filler(partial)
            size = partial.stat().st_size
            if size * _LARGEST_SHARE > self.max_bytes:
                partial.unlink(missing_ok=True)
                log.info("decoded cache: entry %s not kept (%d bytes, over 1/%d of --cache-mb)",
                         name[:12], size, _LARGEST_SHARE)
                self._failed_now(name)
                return
            os.replace(partial, self.path(name))
        except Exception as exc:  # a failed fill is only a miss: the object is read as before
            partial.unlink(missing_ok=True)
            first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            log.warning("decoded cache: fill of %s failed (%s); the object is read without it",
                        name[:12], first)
            self._failed_now(name)
            return
        report = FillReport(rows, size, time.process_time() - cpu, time.monotonic() - started)
        with self._lock:
            self._filling.pop(name, None)
            self.fills += 1
            self.last_fill = report
            self._retire(self._entries.put(name, size))
        log.info("decoded cache: filled %s: %d rows, %d bytes written, %.2f CPU-s, %.2f s",
                 name[:12], rows, size, report.cpu_s, report.wall_s)

    def _failed_now(self, name: str) -> None:
        with self._lock:
            self._filling.pop(name, None)
            self.failures += 1
            self._failed[name] = time.monotonic()

    def _retire(self, evicted: list[tuple[str, int]]) -> None:
        """Delete the files of entries the bound evicted, ten minutes later (plans made on
        them may still read them), and those retired before that long ago (the lock held)."""
        now = time.monotonic()
        for old, size in evicted:
            self._evicted.append((now, self.path(old)))
            self.evictions += 1
            log.info("decoded cache: evicted %s (%d bytes; %d bytes kept)", old[:12], size,
                     self.bytes)
        while self._evicted and now - self._evicted[0][0] > _EVICTED_KEPT_S:
            self._evicted.pop(0)[1].unlink(missing_ok=True)

    def stats(self) -> dict[str, int | float | str]:
        """Entries, bytes, hits, misses, fills, evictions and failures (the health action)."""
        with self._lock:
            stats: dict[str, int | float | str] = {
                "folder": str(self.folder), "entries": len(self._entries), "bytes": self.bytes,
                "max_bytes": self.max_bytes, "hits": self.hits, "misses": self.misses,
                "filling": len(self._filling), "fills": self.fills,
                "evictions": self.evictions, "failures": self.failures}
            if self.last_fill is not None:
                stats["last_fill_cpu_s"] = round(self.last_fill.cpu_s, 3)
                stats["last_fill_bytes"] = self.last_fill.bytes
            return stats

    def close(self) -> None:
        """Stop taking fills (those running finish)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
