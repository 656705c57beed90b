"""One bounded, thread-safe cache of facts computed from an object, kept per object version.

The native readers decide per object whether DataFusion reads it as the reference does (the
CSV survey, the Parquet NaN survey). Both verdicts cost a pass over the object and stay true
until the object changes, so both are kept here, keyed by the object's version
(:func:`flight_storage.storage.sources.version_key`: its store's content identity, or a file's
inode, change time, size and modification time) plus whatever else the verdict depends on (the
read options). A rewritten object gets a new key and is computed again; the least recently used
entries go first once ``max_entries`` are held.

Keyed per object version rather than ``functools.lru_cache`` (which keys on the arguments
only: it cannot see that an object changed, and is one cache per function where each engine
needs its own); bounded by the server's one cache type (``flight_storage.bounded_cache``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from flight_storage.bounded_cache import BoundedCache

Value = TypeVar("Value")


class VersionCache(Generic[Value]):
    """Values computed from an object, at most once per version of that object.

    Two threads that miss on the same key at once may both compute; the value is a pure
    function of the object's contents, so either result is right and the last one is kept.

    Args:
        max_entries: values kept; the least recently used go first.

    Example:
        >>> cache: VersionCache[int] = VersionCache(max_entries=2)
        >>> cache.get(("sales/a.csv", "v1"), lambda: 1)
        1
        >>> cache.get(("sales/a.csv", "v1"), lambda: 2), cache.computed
        (1, 1)
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._entries: BoundedCache[Hashable, Value] = BoundedCache(max_entries)
        self._lock = threading.Lock()
        self.computed = 0
        """Values computed (not served from the cache); tests and benchmarks read it."""

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, version: Hashable, compute: Callable[[], Value], *extra: Hashable) -> Value:
        """The value for the object version ``version`` (and ``extra``), computing it on a
        miss.

        Args:
            version: the object's version key (``storage.sources.version_key``).
            compute: computes the value (called without the lock held).
            *extra: anything else the value depends on.

        Raises:
            Whatever ``compute`` raises (not cached).
        """
        key = (version, *extra)
        found = self._entries.get(key)
        if found is not None:
            return found
        value = compute()
        with self._lock:
            self.computed += 1
        self._entries.put(key, value)
        return value
