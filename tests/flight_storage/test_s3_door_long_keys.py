"""Keys at S3's length limits through the S3 door, with boto3 (issue 35, item 6). S3 allows a
key of 1,024 UTF-8 bytes in any parts; a folder bucket stores each ``/``-separated part as a
file name, which the file system limits (255 bytes on most). A key a folder bucket cannot hold
is ``KeyTooLongError`` naming the limit on every call (PUT, GET, HEAD, CopyObject, multipart
uploads), never a 500; a 1,024-byte key of shorter parts is stored; a store bucket (SeaweedFS,
whose parts have the same limit) passes its store's ``KeyTooLongError`` on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import ServerProcess
from tests.flight_storage.test_s3_door import s3_client, start_door
from tests.seaweedfs import SeaweedFS

ONE_PART = "k" * 1024  # S3's longest key, in one part
LONG_PART = "a/" + "p" * 300 + "/x.csv"  # a 300-byte part
SHORT_PARTS = "/".join(["d" * 250] * 4) + "/" + "f" * 20  # 1,024 bytes, parts of 250 or less
BODY = b"a,b\n1,2\n"


@pytest.fixture(scope="module")
def folder_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    data = tmp_path_factory.mktemp("long-keys") / "data"
    (data / "b").mkdir(parents=True)
    (data / "b" / "source.csv").write_bytes(BODY)
    server, url = start_door(data, "--s3-writable")
    try:
        yield data, s3_client(url)
    finally:
        server.stop()


def _multipart(s3: Any, bucket: str, key: str) -> Any:
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=BODY)
    return s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload,
        MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})


CALLS: dict[str, Callable[[Any, str], Any]] = {
    "PutObject": lambda s3, key: s3.put_object(Bucket="b", Key=key, Body=BODY),
    "GetObject": lambda s3, key: s3.get_object(Bucket="b", Key=key),
    "CopyObject": lambda s3, key: s3.copy_object(
        Bucket="b", Key=key, CopySource={"Bucket": "b", "Key": "source.csv"}),
    "CreateMultipartUpload": lambda s3, key: s3.create_multipart_upload(Bucket="b", Key=key),
    "DeleteObject": lambda s3, key: s3.delete_object(Bucket="b", Key=key),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("key", [ONE_PART, LONG_PART], ids=["1024-byte part", "300-byte part"])
def test_a_part_over_the_file_name_limit_is_key_too_long(folder_door: tuple[Path, Any],
                                                         call: str, key: str) -> None:
    _, s3 = folder_door
    with pytest.raises(ClientError) as refused:
        CALLS[call](s3, key)
    error = refused.value.response["Error"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Code"] == "KeyTooLongError"
    assert "at most 255 bytes" in error["Message"]


def test_head_of_such_a_key_is_400(folder_door: tuple[Path, Any]) -> None:
    """HEAD has no body: the status alone says it."""
    _, s3 = folder_door
    with pytest.raises(ClientError) as refused:
        s3.head_object(Bucket="b", Key=ONE_PART)
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_1024_byte_key_of_shorter_parts_is_stored(folder_door: tuple[Path, Any]) -> None:
    data, s3 = folder_door
    assert len(SHORT_PARTS.encode()) == 1024
    s3.put_object(Bucket="b", Key=SHORT_PARTS, Body=BODY)
    assert s3.get_object(Bucket="b", Key=SHORT_PARTS)["Body"].read() == BODY
    assert (data / "b" / SHORT_PARTS).read_bytes() == BODY
    copy = SHORT_PARTS[:-1] + "g"
    s3.copy_object(Bucket="b", Key=copy, CopySource={"Bucket": "b", "Key": SHORT_PARTS})
    _multipart(s3, "b", SHORT_PARTS[:-1] + "h")
    listed = s3.list_objects_v2(Bucket="b", Prefix="d")["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(
        [SHORT_PARTS, copy, SHORT_PARTS[:-1] + "h"])
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket="b", Key=SHORT_PARTS + "x", Body=BODY)
    assert refused.value.response["Error"]["Code"] == "KeyTooLongError"


def test_a_store_bucket_answers_as_its_store(seaweedfs: SeaweedFS, tmp_path: Path) -> None:
    """SeaweedFS limits a key's last part to 255 bytes (its filer's names; a folder part may be
    longer): a 1,024-byte key of shorter parts and a 300-byte folder part are stored, a longer
    last part is the store's ``KeyTooLongError`` passed on (it had been ``ServiceUnavailable``),
    by PutObject and by a multipart upload's completion."""
    bucket = seaweedfs.new_bucket("long-keys")
    server: ServerProcess
    server, url = start_door(tmp_path, "--data", f"s3://{bucket}", "--s3-writable",
                             env=seaweedfs.env())
    try:
        s3 = s3_client(url)
        s3.put_object(Bucket=bucket, Key=SHORT_PARTS, Body=BODY)
        assert s3.get_object(Bucket=bucket, Key=SHORT_PARTS)["Body"].read() == BODY
        _multipart(s3, bucket, SHORT_PARTS[:-1] + "h")
        assert seaweedfs.client().get_object(
            Bucket=bucket, Key=SHORT_PARTS[:-1] + "h")["Body"].read() == BODY
        s3.put_object(Bucket=bucket, Key=LONG_PART, Body=BODY)
        assert s3.get_object(Bucket=bucket, Key=LONG_PART)["Body"].read() == BODY
        for write in (lambda key: s3.put_object(Bucket=bucket, Key=key, Body=BODY),
                      lambda key: _multipart(s3, bucket, key)):
            for key in (ONE_PART, "a/" + "f" * 300, SHORT_PARTS + "x"):
                with pytest.raises(ClientError) as refused:
                    write(key)
                assert refused.value.response["Error"]["Code"] == "KeyTooLongError", key
                assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    finally:
        server.stop()
