"""``flight_storage/bounded_cache.py``: the bound by count and by weight, what eviction hands
back, recency, and many threads at once."""

from __future__ import annotations

import threading

import pytest

from flight_storage.bounded_cache import BoundedCache


def test_a_weight_bound_evicts_least_recently_used_first_and_says_what() -> None:
    cache: BoundedCache[str, int] = BoundedCache(100, lambda size: size)
    assert cache.put("a", 40) == []
    assert cache.put("b", 40) == []
    assert cache.get("a") == 40  # a is now the most recently used
    assert cache.put("c", 40) == [("b", 40)]
    assert cache.weight == 80
    assert sorted(cache.keys()) == ["a", "c"]
    assert cache.put("huge", 500) == [("a", 40), ("c", 40), ("huge", 500)]
    assert len(cache) == 0
    assert cache.weight == 0


def test_replacing_a_value_reweighs_it() -> None:
    cache: BoundedCache[str, int] = BoundedCache(10, lambda size: size)
    cache.put("a", 3)
    cache.put("a", 9)
    assert cache.weight == 9
    assert cache.pop("a") == 9
    assert cache.weight == 0
    assert cache.pop("a") is None


def test_compute_runs_on_a_miss_only_and_a_failure_keeps_nothing() -> None:
    cache: BoundedCache[str, str] = BoundedCache(2)
    calls: list[str] = []
    assert cache.get_or_compute("k", lambda: calls.append("k") or "v") == "v"
    assert cache.get_or_compute("k", lambda: calls.append("again") or "w") == "v"
    assert calls == ["k"]

    def fail() -> str:
        raise OSError("unreadable")

    with pytest.raises(OSError, match="unreadable"):
        cache.get_or_compute("bad", fail)
    assert "bad" not in cache


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BoundedCache(0)


def test_many_threads_keep_the_bound_and_the_weight_exact() -> None:
    cache: BoundedCache[int, int] = BoundedCache(1000, lambda size: size)

    def work(offset: int) -> None:
        for i in range(2000):
            cache.put((offset * 7919 + i) % 500, i % 17 + 1)
            cache.get(i % 500)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.weight <= 1000
    assert cache.weight == sum(cache.get(k) or 0 for k in cache)
