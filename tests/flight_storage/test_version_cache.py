"""The per-object-version cache both native readers keep their verdicts in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flight_storage.execution.version_cache import VersionCache


def _file(tmp_path: Path, name: str, data: bytes = b"x") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_value_is_computed_once_per_version(tmp_path: Path) -> None:
    path = _file(tmp_path, "a")
    cache: VersionCache[str] = VersionCache()
    assert [cache.get(path, lambda: "first") for _ in range(3)] == ["first"] * 3
    assert cache.computed == 1


@pytest.mark.parametrize("change", ["size", "mtime", "inode"])
def test_a_new_version_is_computed_again(tmp_path: Path, change: str) -> None:
    path = _file(tmp_path, "a")
    cache: VersionCache[str] = VersionCache()
    assert cache.get(path, lambda: "old") == "old"
    stat = path.stat()
    if change == "size":
        path.write_bytes(b"xy")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif change == "mtime":
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    else:  # replaced by another file of the same size and time: a new inode
        other = _file(tmp_path, "b")
        os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(other, path)
    assert cache.get(path, lambda: "new") == "new"
    assert cache.computed == 2


def test_extra_key_parts_are_separate_entries(tmp_path: Path) -> None:
    path = _file(tmp_path, "a")
    cache: VersionCache[str] = VersionCache()
    assert cache.get(path, lambda: "comma", ",") == "comma"
    assert cache.get(path, lambda: "tab", "\t") == "tab"
    assert cache.get(path, lambda: "other", ",") == "comma"
    assert cache.computed == 2


def test_the_least_recently_used_entry_goes_first(tmp_path: Path) -> None:
    a, b, c = (_file(tmp_path, name) for name in "abc")
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
    path = _file(tmp_path, "a")
    cache: VersionCache[str] = VersionCache()

    def fail() -> str:
        raise OSError("unreadable")

    with pytest.raises(OSError, match="unreadable"):
        cache.get(path, fail)
    assert cache.get(path, lambda: "read") == "read"
    assert cache.computed == 1


def test_a_missing_file_raises_and_an_empty_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        VersionCache[str]().get(tmp_path / "missing", lambda: "never")
    with pytest.raises(ValueError, match="at least 1"):
        VersionCache[str](max_entries=0)
