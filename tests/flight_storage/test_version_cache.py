"""The per-object-version cache both native readers keep their verdicts in, and the version of
a file it is keyed by (``storage.sources.version_key``)."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Hashable
from pathlib import Path

import pytest

from flight_storage.storage.object_cache import ObjectCache
from flight_storage.storage.sources import FileSource, version_key
from flight_storage.storage.version_cache import VersionCache


def _file(tmp_path: Path, name: str, data: bytes = b"x") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _version(path: Path) -> Hashable:
    return version_key(FileSource(path, path.name, path.stat().st_size))


def test_a_value_is_computed_once_per_version(tmp_path: Path) -> None:
    path = _file(tmp_path, "a")
    cache: VersionCache[str] = VersionCache()
    assert [cache.get(_version(path), lambda: "first") for _ in range(3)] == ["first"] * 3
    assert cache.computed == 1


@pytest.mark.parametrize("change", ["size", "mtime", "inode", "content"])
def test_a_new_version_is_computed_again(tmp_path: Path, change: str) -> None:
    path = _file(tmp_path, "a", b"xy")
    cache: VersionCache[str] = VersionCache()
    assert cache.get(_version(path), lambda: "old") == "old"
    stat = path.stat()
    if change == "size":
        path.write_bytes(b"xyz")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif change == "mtime":
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    elif change == "inode":  # replaced by another file of the same size and time
        other = _file(tmp_path, "b", b"xy")
        os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(other, path)
    else:  # rewritten in place: same size, same inode, the modification time restored
        with open(path, "r+b") as handle:
            handle.write(b"zz")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (
            stat.st_size, stat.st_mtime_ns, stat.st_ino)
    assert cache.get(_version(path), lambda: "new") == "new"
    assert cache.computed == 2


def test_extra_key_parts_are_separate_entries(tmp_path: Path) -> None:
    version = _version(_file(tmp_path, "a"))
    cache: VersionCache[str] = VersionCache()
    assert cache.get(version, lambda: "comma", ",") == "comma"
    assert cache.get(version, lambda: "tab", "\t") == "tab"
    assert cache.get(version, lambda: "other", ",") == "comma"
    assert cache.computed == 2


def test_the_least_recently_used_entry_goes_first(tmp_path: Path) -> None:
    a, b, c = (_version(_file(tmp_path, name)) for name in "abc")
    cache: VersionCache[str] = VersionCache(max_entries=2)
    cache.get(a, lambda: "a")
    cache.get(b, lambda: "b")
    cache.get(a, lambda: "a again")  # a is now the most recently used
    cache.get(c, lambda: "c")  # evicts b
    assert len(cache) == 2
    assert cache.get(a, lambda: "a recomputed") == "a"
    assert cache.get(b, lambda: "b recomputed") == "b recomputed"
    assert cache.computed == 4


def test_a_failed_computation_is_not_cached(tmp_path: Path) -> None:
    version = _version(_file(tmp_path, "a"))
    cache: VersionCache[str] = VersionCache()

    def fail() -> str:
        raise OSError("unreadable")

    with pytest.raises(OSError, match="unreadable"):
        cache.get(version, fail)
    assert cache.get(version, lambda: "read") == "read"
    assert cache.computed == 1


def test_a_missing_file_has_no_version_and_an_empty_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        version_key(FileSource(tmp_path / "missing", "missing", 0))
    with pytest.raises(ValueError, match="at least 1"):
        VersionCache[str](max_entries=0)


def test_an_object_too_large_for_the_object_cache_is_logged_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``--store-cache-mb`` too small for an object was silently unused (issue #39 item 10):
    the log says so, once per object version, naming the object and the size that keeps it."""
    cache = ObjectCache(tmp_path, 8 << 20)
    opened: list[str] = []

    def open_object() -> io.BytesIO:
        opened.append("opened")
        return io.BytesIO(b"")

    with caplog.at_level(logging.WARNING, logger="flight_storage.storage.object_cache"):
        for _ in range(3):
            cache.request("v1", 3 << 20, open_object, "shop/big.csv")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["object cache: shop/big.csv (3 MiB) is not kept: an object over 1/4 of the "
                     "cache (--store-cache-mb 8) would evict everything else; a cache of at "
                     "least 12 MiB keeps it"]
    assert opened == [] and cache.path("v1") is None
