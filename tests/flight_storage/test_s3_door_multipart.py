"""Multipart uploads through the S3 door (issue 27, item 1): boto3's ``upload_file`` and
``download_file`` of a 100 MB object, the part list S3 checks at Complete, the staging
bounds and expiry, and nothing visible before Complete."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.conftest import SAMPLES, ServerProcess
from tests.flight_storage.test_s3_door import ORDERS_KEY, _raw, s3_client, start_door

MIB = 1 << 20


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, ServerProcess]]:
    data = tmp_path_factory.mktemp("multipart") / "data"
    shutil.copytree(SAMPLES / "sales", data / "sales")
    server, url = start_door(data, "--s3-writable", "--s3-max-object-mb", "16")
    yield data, url, server
    server.stop()


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_upload_file_and_download_file_of_100_mb(door: tuple[Path, str, ServerProcess],
                                                 tmp_path: Path) -> None:
    data, url, server = door
    s3 = s3_client(url)
    big = tmp_path / "big.bin"
    with big.open("wb") as out:
        for i in range(100):  # 100 MiB, no two MiB alike
            out.write(hashlib.sha256(str(i).encode()).digest() * (MIB // 32))
    before = _peak_rss_kib(server.process.pid)
    s3.upload_file(str(big), "sales", "big/object.bin")  # 8 MiB parts, 10 threads
    peak = _peak_rss_kib(server.process.pid) - before
    stored = data / "sales" / "big" / "object.bin"
    assert stored.stat().st_size == big.stat().st_size
    assert _sha(stored) == _sha(big)
    # parts and the object stream through files: far less than the object in memory
    assert peak < 64 * 1024, f"peak RSS grew {peak} KiB for a 100 MiB upload"
    back = tmp_path / "back.bin"
    s3.download_file("sales", "big/object.bin", str(back))
    assert _sha(back) == _sha(big)
    assert not s3.list_multipart_uploads(Bucket="sales").get("Uploads")
    assert not [p for p in (data / "sales").rglob(".*") if p.name != ".flight-select.json"]


def _sha(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _parts(s3: Any, key: str, bodies: list[bytes]) -> tuple[str, list[dict[str, Any]]]:
    upload = s3.create_multipart_upload(Bucket="sales", Key=key)["UploadId"]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket="sales", Key=key, UploadId=upload,
                                                      PartNumber=n, Body=body)["ETag"]}
             for n, body in enumerate(bodies, 1)]
    return upload, parts


def test_complete_answers_the_etag_s3_computes(door: tuple[Path, str, ServerProcess]) -> None:
    data, url, _ = door
    s3 = s3_client(url)
    bodies = [b"a" * (5 * MIB), b"b" * (5 * MIB), b"tail\n"]
    upload, parts = _parts(s3, "mp/etag.bin", bodies)
    assert [p["ETag"] for p in parts] == [f'"{hashlib.md5(b).hexdigest()}"' for b in bodies]
    # nothing is visible before Complete
    with pytest.raises(ClientError) as absent:
        s3.head_object(Bucket="sales", Key="mp/etag.bin")
    assert absent.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert not s3.list_objects_v2(Bucket="sales", Prefix="mp/").get("Contents")
    listed = s3.list_parts(Bucket="sales", Key="mp/etag.bin", UploadId=upload)
    assert [(p["PartNumber"], p["Size"]) for p in listed["Parts"]] == [
        (1, 5 * MIB), (2, 5 * MIB), (3, 5)]
    uploads = s3.list_multipart_uploads(Bucket="sales")["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [("mp/etag.bin", upload)]
    done = s3.complete_multipart_upload(Bucket="sales", Key="mp/etag.bin", UploadId=upload,
                                        MultipartUpload={"Parts": parts})
    digests = b"".join(hashlib.md5(b).digest() for b in bodies)
    assert done["ETag"] == f'"{hashlib.md5(digests).hexdigest()}-3"'
    assert (data / "sales" / "mp" / "etag.bin").read_bytes() == b"".join(bodies)
    with pytest.raises(ClientError) as gone:
        s3.list_parts(Bucket="sales", Key="mp/etag.bin", UploadId=upload)
    assert gone.value.response["Error"]["Code"] == "NoSuchUpload"


def test_a_part_uploaded_again_replaces_the_first(door: tuple[Path, str, ServerProcess]) -> None:
    _, url, _ = door
    s3 = s3_client(url)
    upload, _ = _parts(s3, "mp/again.bin", [b"x" * (5 * MIB)])
    again = s3.upload_part(Bucket="sales", Key="mp/again.bin", UploadId=upload, PartNumber=1,
                           Body=b"y" * 10)
    s3.complete_multipart_upload(Bucket="sales", Key="mp/again.bin", UploadId=upload,
                                 MultipartUpload={"Parts": [{"PartNumber": 1,
                                                             "ETag": again["ETag"]}]})
    assert s3.get_object(Bucket="sales", Key="mp/again.bin")["Body"].read() == b"y" * 10


@pytest.mark.parametrize(("complete", "code"), [
    (lambda parts: list(reversed(parts)), "InvalidPartOrder"),
    (lambda parts: [{**parts[0], "ETag": '"0123"'}, parts[1]], "InvalidPart"),
    (lambda parts: [parts[0], {**parts[1], "PartNumber": 7}], "InvalidPart"),
    (lambda parts: [parts[1], {**parts[0], "PartNumber": 3}], "InvalidPart"),
])
def test_a_bad_part_list_is_refused_and_nothing_is_written(
        door: tuple[Path, str, ServerProcess], complete: Any, code: str) -> None:
    data, url, _ = door
    s3 = s3_client(url)
    key = f"mp/bad-{uuid.uuid4().hex}.bin"
    upload, parts = _parts(s3, key, [b"a" * (5 * MIB), b"b"])
    with pytest.raises(ClientError) as caught:
        s3.complete_multipart_upload(Bucket="sales", Key=key, UploadId=upload,
                                     MultipartUpload={"Parts": complete(parts)})
    assert caught.value.response["Error"]["Code"] == code
    assert not (data / "sales" / key).exists()
    # the upload is still there: a correct list completes it
    s3.complete_multipart_upload(Bucket="sales", Key=key, UploadId=upload,
                                 MultipartUpload={"Parts": parts})
    assert (data / "sales" / key).stat().st_size == 5 * MIB + 1


def test_small_parts_and_malformed_documents(door: tuple[Path, str, ServerProcess]) -> None:
    data, url, _ = door
    s3 = s3_client(url)
    upload, parts = _parts(s3, "mp/small.bin", [b"a", b"b"])
    with pytest.raises(ClientError) as small:
        s3.complete_multipart_upload(Bucket="sales", Key="mp/small.bin", UploadId=upload,
                                     MultipartUpload={"Parts": parts})
    assert small.value.response["Error"]["Code"] == "EntityTooSmall"
    path = f"/sales/mp/small.bin?uploadId={upload}"
    for body in (b"<CompleteMultipartUpload><Part>", b"<Other/>",
                 b"<CompleteMultipartUpload></CompleteMultipartUpload>",
                 b"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber></Part>"
                 b"</CompleteMultipartUpload>"):
        status, answer = _raw(url, "POST", path, body)
        assert status == 400 and b"<Code>MalformedXML</Code>" in answer
    s3.abort_multipart_upload(Bucket="sales", Key="mp/small.bin", UploadId=upload)
    assert not (data / "sales" / "mp" / "small.bin").exists()
    for call in (lambda: s3.upload_part(Bucket="sales", Key="mp/small.bin", UploadId=upload,
                                        PartNumber=1, Body=b"x"),
                 lambda: s3.upload_part(Bucket="sales", Key="mp/small.bin",
                                        UploadId="not-an-upload-id-at-all", PartNumber=1,
                                        Body=b"x")):
        with pytest.raises(ClientError) as gone:
            call()
        assert gone.value.response["Error"]["Code"] == "NoSuchUpload"
    other, _ = _parts(s3, "mp/other.bin", [])
    with pytest.raises(ClientError) as number:
        s3.upload_part(Bucket="sales", Key="mp/other.bin", UploadId=other, PartNumber=10001,
                       Body=b"x")
    assert number.value.response["Error"]["Code"] == "InvalidArgument"
    with pytest.raises(ClientError) as wrong_key:
        s3.upload_part(Bucket="sales", Key="mp/small.bin", UploadId=other, PartNumber=1,
                       Body=b"x")
    assert wrong_key.value.response["Error"]["Code"] == "NoSuchUpload"


def test_upload_part_copy(door: tuple[Path, str, ServerProcess]) -> None:
    data, url, _ = door
    s3 = s3_client(url)
    source = (data / "sales" / ORDERS_KEY).read_bytes()
    upload, parts = _parts(s3, "mp/copied.csv", [b"h" * (5 * MIB)])
    copied = s3.upload_part_copy(Bucket="sales", Key="mp/copied.csv", UploadId=upload,
                                 PartNumber=2, CopySource={"Bucket": "sales", "Key": ORDERS_KEY},
                                 CopySourceRange="bytes=10-109")
    assert copied["CopyPartResult"]["ETag"] == f'"{hashlib.md5(source[10:110]).hexdigest()}"'
    s3.complete_multipart_upload(Bucket="sales", Key="mp/copied.csv", UploadId=upload,
                                 MultipartUpload={"Parts": [*parts, {
                                     "PartNumber": 2,
                                     "ETag": copied["CopyPartResult"]["ETag"]}]})
    assert (data / "sales" / "mp" / "copied.csv").read_bytes() == b"h" * (5 * MIB) + \
        source[10:110]


def test_managed_copy_of_a_large_object(door: tuple[Path, str, ServerProcess],
                                        tmp_path: Path) -> None:
    """boto3's ``copy`` of an object past its 8 MiB threshold: UploadPartCopy per part."""
    data, url, _ = door
    s3 = s3_client(url)
    body = os.urandom(12 * MIB)
    (data / "sales" / "mp").mkdir(exist_ok=True)
    (data / "sales" / "mp" / "source.bin").write_bytes(body)
    s3.copy({"Bucket": "sales", "Key": "mp/source.bin"}, "sales", "mp/target.bin",
            Config=TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=5 * MIB))
    assert (data / "sales" / "mp" / "target.bin").read_bytes() == body


EXPIRY_S = 8
"""Long enough that the uploads before the count check (27 MiB of parts, slow on a loaded
machine) are not yet expired: at 2 s one expired under load and made room."""


def test_staging_bounds_and_expiry(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "b").mkdir(parents=True)
    server, url = start_door(data, "--s3-writable", "--s3-max-object-mb", "8",
                             "--s3-max-upload-mb", "12", "--s3-staging-mb", "20",
                             "--s3-max-uploads", "3", "--s3-upload-expiry", str(EXPIRY_S))
    try:
        s3 = s3_client(url)
        first = s3.create_multipart_upload(Bucket="b", Key="a.bin")["UploadId"]
        with pytest.raises(ClientError) as part_too_large:
            s3.upload_part(Bucket="b", Key="a.bin", UploadId=first, PartNumber=1,
                           Body=b"x" * (9 * MIB))
        assert part_too_large.value.response["Error"]["Code"] == "EntityTooLarge"
        for number in (1, 2):
            s3.upload_part(Bucket="b", Key="a.bin", UploadId=first, PartNumber=number,
                           Body=b"x" * (6 * MIB))
        with pytest.raises(ClientError) as upload_too_large:
            s3.upload_part(Bucket="b", Key="a.bin", UploadId=first, PartNumber=3, Body=b"x")
        assert upload_too_large.value.response["Error"]["Code"] == "EntityTooLarge"
        second = s3.create_multipart_upload(Bucket="b", Key="b.bin")["UploadId"]
        s3.upload_part(Bucket="b", Key="b.bin", UploadId=second, PartNumber=1,
                       Body=b"y" * (7 * MIB))
        with pytest.raises(ClientError) as full:  # 12 + 7 + 2 MiB > 20 MiB staged
            s3.upload_part(Bucket="b", Key="b.bin", UploadId=second, PartNumber=2,
                           Body=b"y" * (2 * MIB))
        assert full.value.response["Error"]["Code"] == "SlowDown"
        s3.create_multipart_upload(Bucket="b", Key="c.bin")
        with pytest.raises(ClientError) as too_many:
            s3.create_multipart_upload(Bucket="b", Key="d.bin")
        assert too_many.value.response["Error"]["Code"] == "SlowDown"
        time.sleep(EXPIRY_S + 0.5)  # past --s3-upload-expiry
        with pytest.raises(ClientError) as expired:
            s3.list_parts(Bucket="b", Key="a.bin", UploadId=first)
        assert expired.value.response["Error"]["Code"] == "NoSuchUpload"
        s3.create_multipart_upload(Bucket="b", Key="d.bin")  # the expired ones were removed
        assert not list(data.rglob("*.bin"))
    finally:
        server.stop()


def test_multipart_is_refused_by_a_read_only_door() -> None:
    server, url = start_door(SAMPLES)
    try:
        with pytest.raises(ClientError) as caught:
            s3_client(url).create_multipart_upload(Bucket="sales", Key="x.bin")
        assert caught.value.response["Error"]["Code"] == "AccessDenied"
    finally:
        server.stop()
