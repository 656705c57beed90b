"""Bucket calls that S3 tools and suites make around the objects (issue 27's defects):
ListObjectVersions of a store without versioning, DeleteObjects, CreateBucket of a bucket
the caller already has."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import SAMPLES
from tests.flight_storage.test_s3_door import _all_keys, s3_client, start_door


@pytest.fixture(scope="module")
def read_only() -> Iterator[Any]:
    server, url = start_door(SAMPLES)
    yield s3_client(url)
    server.stop()


@pytest.fixture
def writable(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    data = tmp_path / "data"
    shutil.copytree(SAMPLES / "sales", data / "sales")
    server, url = start_door(data, "--s3-writable")
    yield data, url
    server.stop()


def test_list_object_versions_lists_each_key_once_as_version_null(read_only: Any) -> None:
    pages = read_only.get_paginator("list_object_versions").paginate(
        Bucket="sales", PaginationConfig={"PageSize": 2})
    versions = [v for page in pages for v in page.get("Versions", [])]
    assert [v["Key"] for v in versions] == _all_keys(SAMPLES / "sales")
    assert {(v["VersionId"], v["IsLatest"]) for v in versions} == {("null", True)}
    heads = {v["Key"]: read_only.head_object(Bucket="sales", Key=v["Key"])["ETag"]
             for v in versions[:3]}
    assert all(v["ETag"] == heads[v["Key"]] for v in versions[:3])
    top = read_only.list_object_versions(Bucket="sales", Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == [
        p["Prefix"] for p in read_only.list_objects_v2(Bucket="sales",
                                                       Delimiter="/")["CommonPrefixes"]]
    assert not top.get("DeleteMarkers")


def test_delete_objects_verbose_and_quiet(writable: tuple[Path, str]) -> None:
    data, url = writable
    s3 = s3_client(url)
    keys = _all_keys(data / "sales")
    orders = [k for k in keys if k.startswith("orders/")]
    answer = s3.delete_objects(Bucket="sales", Delete={
        "Objects": [{"Key": k} for k in [*orders, "orders/never-there.csv"]]})
    assert sorted(d["Key"] for d in answer["Deleted"]) == sorted(
        [*orders, "orders/never-there.csv"])  # S3 reports a missing key as deleted
    assert not answer.get("Errors")
    assert not (data / "sales" / "orders").exists()
    rest = [k for k in keys if k not in orders][:2]
    quiet = s3.delete_objects(Bucket="sales", Delete={"Objects": [{"Key": k} for k in rest],
                                                      "Quiet": True})
    assert not quiet.get("Deleted") and not quiet.get("Errors")
    assert all(not (data / "sales" / k).exists() for k in rest)


def test_delete_objects_is_refused_on_a_read_only_door(read_only: Any) -> None:
    with pytest.raises(ClientError) as caught:
        read_only.delete_objects(Bucket="sales", Delete={"Objects": [{"Key": "x.csv"}]})
    assert caught.value.response["Error"]["Code"] == "AccessDenied"


def test_create_bucket_again_is_ok_for_its_owner(writable: tuple[Path, str]) -> None:
    data, url = writable
    s3 = s3_client(url)
    s3.create_bucket(Bucket="fresh")
    s3.put_object(Bucket="fresh", Key="a.csv", Body=b"x\n")
    s3.create_bucket(Bucket="fresh")  # AWS in us-east-1 and Ceph answer 200
    s3.create_bucket(Bucket="sales")
    assert (data / "fresh" / "a.csv").read_bytes() == b"x\n"
    assert _all_keys(data / "sales")
