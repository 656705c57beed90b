"""Writes of the S3 door go through the bucket's store (issue 27, item 1): multipart uploads
and CopyObject on a SeaweedFS bucket, a copy between a folder bucket and a store bucket, and
the stores' copy primitive (``BucketStore.copy_in``) on its own."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from flight_storage.errors import StaleTicketError
from flight_storage.storage.folder_store import FolderBucket
from flight_storage.storage.s3_store import S3Bucket, S3Connection, S3Settings
from tests.conftest import SAMPLES
from tests.flight_storage.test_s3_door import ORDERS_KEY, s3_client, start_door
from tests.seaweedfs import REGION, SeaweedFS

MIB = 1 << 20


def test_multipart_and_copy_on_a_store_bucket(seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    bucket = seaweedfs.new_bucket("door-writes")
    seaweedfs.upload_folder(SAMPLES / "sales" / "orders", bucket, "orders/")
    (tmp_path / "local" / "files").mkdir(parents=True)
    (tmp_path / "local" / "files" / "f.csv").write_bytes(b"a,b\n1,2\n")
    server, url = start_door(tmp_path / "local", "--data", f"s3://{bucket}", "--s3-writable",
                             env=seaweedfs.env())
    try:
        s3 = s3_client(url)
        store = seaweedfs.client()
        bodies = [os.urandom(5 * MIB), os.urandom(3 * MIB)]
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big/obj.bin")["UploadId"]
        parts = [{"PartNumber": n, "ETag": s3.upload_part(
            Bucket=bucket, Key="big/obj.bin", UploadId=upload, PartNumber=n, Body=b)["ETag"]}
            for n, b in enumerate(bodies, 1)]
        assert store.list_objects_v2(Bucket=bucket, Prefix="big/").get("KeyCount", 0) == 0
        done = s3.complete_multipart_upload(Bucket=bucket, Key="big/obj.bin", UploadId=upload,
                                            MultipartUpload={"Parts": parts})
        digests = b"".join(hashlib.md5(b).digest() for b in bodies)
        assert done["ETag"] == f'"{hashlib.md5(digests).hexdigest()}-2"'
        assert store.get_object(Bucket=bucket, Key="big/obj.bin")["Body"].read() == \
            b"".join(bodies)
        # inside the store: a server-side copy
        s3.copy_object(Bucket=bucket, Key="copies/orders.csv",
                       CopySource={"Bucket": bucket, "Key": ORDERS_KEY})
        assert store.get_object(Bucket=bucket, Key="copies/orders.csv")["Body"].read() == \
            (SAMPLES / "sales" / ORDERS_KEY).read_bytes()
        # between a folder bucket and the store, both ways: streamed
        s3.copy_object(Bucket=bucket, Key="from-folder.csv",
                       CopySource={"Bucket": "files", "Key": "f.csv"})
        assert store.get_object(Bucket=bucket, Key="from-folder.csv")["Body"].read() == \
            b"a,b\n1,2\n"
        s3.copy_object(Bucket="files", Key="from-store.csv",
                       CopySource={"Bucket": bucket, "Key": ORDERS_KEY})
        assert (tmp_path / "local" / "files" / "from-store.csv").read_bytes() == \
            (SAMPLES / "sales" / ORDERS_KEY).read_bytes()
        with pytest.raises(ClientError) as missing:
            s3.copy_object(Bucket=bucket, Key="never.csv",
                           CopySource={"Bucket": bucket, "Key": "nope.csv"})
        assert missing.value.response["Error"]["Code"] == "NoSuchKey"
        assert store.list_objects_v2(Bucket=bucket, Prefix="never").get("KeyCount", 0) == 0
    finally:
        server.stop()


def test_folder_copy_in_checks_the_source_version(tmp_path: Path) -> None:
    shutil.copytree(SAMPLES / "sales" / "orders", tmp_path / "a")
    (tmp_path / "b").mkdir()
    source, target = FolderBucket("a", tmp_path / "a"), FolderBucket("b", tmp_path / "b")
    obj = source.head("2024-01.csv")
    copied = target.copy_in("x/y.csv", source, obj)
    assert copied is not None and copied.size == obj.size
    assert (tmp_path / "b" / "x" / "y.csv").read_bytes() == (tmp_path / "a" /
                                                             "2024-01.csv").read_bytes()
    (tmp_path / "a" / "2024-01.csv").write_bytes(b"changed\n")
    with pytest.raises(StaleTicketError):
        target.copy_in("x/z.csv", source, obj)
    assert not (tmp_path / "b" / "x" / "z.csv").exists()
    assert [p.name for p in (tmp_path / "b").rglob("*") if p.is_file()] == ["y.csv"]


def test_store_copy_in_is_server_side_and_checks_the_etag(
        seaweedfs: SeaweedFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = seaweedfs.new_bucket("copy-in")
    seaweedfs.client().put_object(Bucket=bucket, Key="src.csv", Body=b"1,2\n")
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    connection = S3Connection(S3Settings(endpoint_url=seaweedfs.endpoint, region=REGION))
    store = S3Bucket(connection, bucket, bucket)
    obj = store.head("src.csv")
    folder = FolderBucket("f", tmp_path)
    assert folder.copy_in("x.csv", store, obj) is None  # another kind of store: streamed
    copied = store.copy_in("dst.csv", store, obj)
    assert copied is not None and copied.size == 4
    seaweedfs.client().put_object(Bucket=bucket, Key="src.csv", Body=b"3,4\n")
    with pytest.raises(StaleTicketError):
        store.copy_in("stale.csv", store, obj)


def test_a_store_bucket_is_listed_with_the_stores_creation_date(
        seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    """The S3 door listed an object store's buckets as created on 1970-01-01 (issue #39 item
    10): it gives the store's own CreationDate."""
    bucket = seaweedfs.new_bucket("dated")
    created = {b["Name"]: b["CreationDate"]
               for b in seaweedfs.client().list_buckets()["Buckets"]}[bucket]
    (tmp_path / "local" / "files").mkdir(parents=True)
    server, url = start_door(tmp_path / "local", "--data", f"s3://{bucket}",
                             env=seaweedfs.env())
    try:
        listed = {b["Name"]: b["CreationDate"] for b in s3_client(url).list_buckets()["Buckets"]}
    finally:
        server.stop()
    assert created.year >= 2026
    assert abs((listed[bucket] - created).total_seconds()) < 1  # S3 XML: whole seconds
    assert listed["files"].year >= 2026  # a folder: its modification time
