"""The one bounded cache type of the server: thread-safe, least recently used first out.

Every cache the server keeps (plans per statement and object version, per-version verdicts of
the native readers, Parquet footers, bound statement parameters, the index of the object-store
copy and of the decoded cache) is bounded by a count of entries or by a total weight (bytes),
and hands back what it evicted so that a cache of files can delete them. Hand-written rather
than ``cachetools``: that library's caches are not thread-safe, do not report what they evict
from a weight bound, and would be the one dependency for forty lines.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


def _one(_value: object) -> int:
    return 1


class BoundedCache(Generic[Key, Value]):
    """At most ``max_weight`` of weight (by default: entries), the least recently used out
    first.

    Args:
        max_weight: the bound (at least 1).
        weigh: an entry's weight (default 1: the bound counts entries).

    Example:
        >>> cache: BoundedCache[str, int] = BoundedCache(2)
        >>> cache.put("a", 1), cache.put("b", 2), cache.get("a"), cache.put("c", 3)
        ([], [], 1, [('b', 2)])
        >>> sorted(cache.keys())
        ['a', 'c']
    """

    def __init__(self, max_weight: int, weigh: Callable[[Value], int] = _one) -> None:
        if max_weight < 1:
            raise ValueError(f"a cache's bound must be at least 1, got {max_weight}")
        self.max_weight = max_weight
        self._weigh = weigh
        self._entries: OrderedDict[Key, Value] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def weight(self) -> int:
        """The entries' total weight."""
        with self._lock:
            return self._weight

    def keys(self) -> list[Key]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def get(self, key: Key) -> Value | None:
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def put(self, key: Key, value: Value) -> list[tuple[Key, Value]]:
        """Keep ``value`` as the most recently used; returns what the bound evicted, least
        recently used first (``value`` itself when it alone outweighs the bound)."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._weight -= self._weigh(old)
            self._entries[key] = value
            self._weight += self._weigh(value)
            evicted = []
            while self._weight > self.max_weight and self._entries:
                gone = self._entries.popitem(last=False)
                self._weight -= self._weigh(gone[1])
                evicted.append(gone)
            return evicted

    def pop(self, key: Key) -> Value | None:
        """Forget ``key``; its value, or None."""
        with self._lock:
            value = self._entries.pop(key, None)
            if value is not None:
                self._weight -= self._weigh(value)
            return value

    def get_or_compute(self, key: Key, compute: Callable[[], Value]) -> Value:
        """The value of ``key``, computed (without the lock held) and kept on a miss. Two
        threads missing at once may both compute; the last value is kept.

        Raises:
            Whatever ``compute`` raises (nothing is kept).
        """
        found = self.get(key)
        if found is not None:
            return found
        value = compute()
        self.put(key, value)
        return value

    def __iter__(self) -> Iterator[Key]:
        return iter(self.keys())
