"""A folder bucket lists the keys under a prefix by walking only the folders the prefix can
reach (issue 35: a one-object prefix table beside 50,000 unrelated files listed in 0.11 s, the
whole bucket walked; now the prefix's folder alone). The answer is the brute-force one: every
file's key that starts with the prefix, by key, without dotfiles, dot-folders or links out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flight_storage.errors import AccessDeniedError
from flight_storage.storage.folder_store import FolderBucket

FILES = ["a.csv", "ab/x.csv", "ab/y/z.csv", "abc.csv", "b/a.csv", "b/ab/c.csv", "orders/2024-01.csv",
         "orders/2024-02.csv", "orders/2025/01.csv", "orders/old/2024.csv", "orders-x.csv",
         "deep/1/2/3/4.csv", ".hidden.csv", "orders/.dot.csv", ".dotdir/orders/x.csv"]
PREFIXES = ["", "a", "ab", "ab/", "ab/y", "abc", "b/", "b/a", "orders", "orders/", "orders/2024",
            "orders/2025/", "orders/old/2", "deep/1/2/", "nothing/", "nothing", "orders/2024-01.csv",
            "orders/2024-01.csv/", ".dotdir/", ".dotdir/orders/", "orders/.dot", "outside/"]


@pytest.fixture()
def bucket(tmp_path: Path) -> FolderBucket:
    folder = tmp_path / "bucket"
    for key in FILES:
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_text(key)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("no")
    os.symlink(outside, folder / "outside")  # a folder link out: never walked
    return FolderBucket("bucket", folder)


def _expected(prefix: str) -> list[str]:
    return sorted(k for k in FILES if k.startswith(prefix) and not any(
        part.startswith(".") for part in k.split("/")))


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_prefix_lists_what_the_whole_walk_would(bucket: FolderBucket, prefix: str) -> None:
    assert [o.key for o in bucket.list(prefix)] == _expected(prefix)


@pytest.mark.parametrize("prefix", ["../", "/etc", "a/../b", "x\x00"])
def test_a_prefix_out_of_the_bucket_is_refused(bucket: FolderBucket, prefix: str) -> None:
    with pytest.raises(AccessDeniedError):
        list(bucket.list(prefix))
