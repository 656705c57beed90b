"""One bounded, thread-safe cache of facts computed from a file, kept per object version.

The native readers decide per object whether DataFusion reads it as the reference does (the
CSV survey, the Parquet NaN survey). Both verdicts cost a pass over the object and stay true
until the object changes, so both are kept here, keyed by the object's version: its path,
size, modification time (ns) and inode, plus whatever else the verdict depends on (the read
options). A rewritten object gets a new key and is computed again; the least recently used
entries go first once ``max_entries`` are held.

Hand-written because ``functools.lru_cache`` keys on the arguments only (it cannot see that a
file changed) and is one cache per function, where each engine needs its own.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

Value = TypeVar("Value")


class VersionCache(Generic[Value]):
    """Values computed from a file, at most once per version of that file.

    Two threads that miss on the same key at once may both compute; the value is a pure
    function of the file's contents, so either result is right and the last one is kept.

    Args:
        max_entries: values kept; the least recently used go first.

    Example:
        >>> cache: VersionCache[int] = VersionCache(max_entries=2)
        >>> cache.get(Path(__file__), lambda: 1)
        1
        >>> cache.get(Path(__file__), lambda: 2), cache.computed
        (1, 1)
    """

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self._entries: OrderedDict[Hashable, Value] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self.computed = 0
        """Values computed (not served from the cache); tests and benchmarks read it."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, path: Path, compute: Callable[[], Value], *extra: Hashable) -> Value:
        """The value for ``path`` as it is now (and ``extra``), computing it on a miss.

        Args:
            path: the file the value is computed from; its current version is part of the key.
            compute: computes the value (called without the lock held).
            *extra: anything else the value depends on.

        Raises:
            OSError: ``path`` cannot be stat'ed. Whatever ``compute`` raises is not cached.
        """
        stat = os.stat(path)
        key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, *extra)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()
        with self._lock:
            self.computed += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value
