"""The object API S3 tools use, against the door with boto3 (issue 27, item 1): ListObjects
v1 and v2 with delimiter, markers and ``encoding-type=url``, GetBucketLocation,
GetBucketVersioning, conditional GETs, CopyObject, presigned URLs, and ``NotImplemented``
naming any other operation."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import re
import shutil
import unittest.mock
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.error import HTTPError

import pytest
from botocore.exceptions import ClientError

from flight_storage.rpc.auth import hash_password
from tests.conftest import SAMPLES, ServerProcess
from tests.flight_storage.test_s3_door import ORDERS_KEY, _all_keys, _raw, s3_client, start_door

ODD_KEYS = ("odd/a b+c.csv", "odd/tab\there.csv", "odd/ctrl\x01.csv", "odd/ü/x.csv")


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    data = tmp_path_factory.mktemp("objects") / "data"
    shutil.copytree(SAMPLES / "sales", data / "sales")
    for key in ODD_KEYS:
        (data / "sales" / key).parent.mkdir(parents=True, exist_ok=True)
        (data / "sales" / key).write_bytes(b"x\n")
    server, url = start_door(data, "--s3-writable")
    yield data, url
    server.stop()


@pytest.fixture(scope="module")
def s3(door: tuple[Path, str]) -> Any:
    return s3_client(door[1])


def test_list_objects_v1_pages_with_markers_and_delimiter(door: tuple[Path, str],
                                                          s3: Any) -> None:
    expected = _all_keys(door[0] / "sales")
    pages = s3.get_paginator("list_objects").paginate(Bucket="sales",
                                                      PaginationConfig={"PageSize": 3})
    assert [o["Key"] for page in pages for o in page.get("Contents", [])] == expected
    first = s3.list_objects(Bucket="sales", MaxKeys=2)
    assert first["IsTruncated"] and len(first["Contents"]) == 2
    assert first["Contents"][0]["Owner"]["ID"]  # v1 lists the owner
    rolled = s3.get_paginator("list_objects").paginate(
        Bucket="sales", Delimiter="/", PaginationConfig={"PageSize": 1})
    prefixes = [p["Prefix"] for page in rolled for p in page.get("CommonPrefixes", [])]
    assert prefixes == sorted({k.split("/")[0] + "/" for k in expected if "/" in k})
    after = s3.list_objects(Bucket="sales", Marker=expected[2])
    assert [o["Key"] for o in after["Contents"]] == expected[3:]


@pytest.mark.parametrize("operation", ["list_objects", "list_objects_v2",
                                       "list_object_versions"])
def test_listings_url_encode_keys_when_asked(s3: Any, operation: str) -> None:
    """botocore asks for ``encoding-type=url`` and decodes what comes back: a key with a
    control character (not XML 1.0) lists only that way."""
    answer = getattr(s3, operation)(Bucket="sales", Prefix="odd/")
    rows = answer.get("Contents") or answer.get("Versions")
    assert sorted(o["Key"] for o in rows) == sorted(ODD_KEYS)
    assert answer["EncodingType"] == "url"
    top = getattr(s3, operation)(Bucket="sales", Prefix="odd/", Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["odd/ü/"]


def test_location_and_versioning(s3: Any) -> None:
    assert s3.get_bucket_location(Bucket="sales")["LocationConstraint"] is None  # us-east-1
    versioning = s3.get_bucket_versioning(Bucket="sales")
    assert "Status" not in versioning  # never enabled
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_location(Bucket="nobucket")
    assert caught.value.response["Error"]["Code"] == "NoSuchBucket"


@pytest.mark.parametrize(("call", "arguments", "operation"), [
    ("get_bucket_acl", {"Bucket": "sales"}, "GetBucketAcl"),
    ("get_bucket_policy", {"Bucket": "sales"}, "GetBucketPolicy"),
    ("put_bucket_tagging", {"Bucket": "sales", "Tagging": {"TagSet": []}}, "PutBucketTagging"),
    ("get_object_tagging", {"Bucket": "sales", "Key": ORDERS_KEY}, "GetObjectTagging"),
    ("get_object_acl", {"Bucket": "sales", "Key": ORDERS_KEY}, "GetObjectAcl"),
    ("get_object_lock_configuration", {"Bucket": "sales"}, "GetObjectLockConfiguration"),
])
def test_other_operations_are_not_implemented_by_name(s3: Any, call: str,
                                                      arguments: dict[str, Any],
                                                      operation: str) -> None:
    with pytest.raises(ClientError) as caught:
        getattr(s3, call)(**arguments)
    error = caught.value.response
    assert error["Error"]["Code"] == "NotImplemented"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 501
    assert operation in error["Error"]["Message"]


def _date(moment: dt.datetime) -> str:
    return email.utils.format_datetime(moment.astimezone(dt.UTC), usegmt=True)


def test_conditional_get_and_head(s3: Any) -> None:
    head = s3.head_object(Bucket="sales", Key=ORDERS_KEY)
    tag, modified = head["ETag"], head["LastModified"]
    data = s3.get_object(Bucket="sales", Key=ORDERS_KEY, IfMatch=tag)["Body"].read()
    assert len(data) == head["ContentLength"]
    for method in (s3.get_object, s3.head_object):
        for condition in ({"IfNoneMatch": tag}, {"IfModifiedSince": modified},
                          {"IfNoneMatch": tag, "IfModifiedSince": modified - dt.timedelta(1)}):
            with pytest.raises(ClientError) as unchanged:
                method(Bucket="sales", Key=ORDERS_KEY, **condition)
            assert unchanged.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
        for condition in ({"IfMatch": '"other"'},
                          {"IfUnmodifiedSince": modified - dt.timedelta(days=1)}):
            with pytest.raises(ClientError) as failed:
                method(Bucket="sales", Key=ORDERS_KEY, **condition)
            assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    # S3: If-Match true wins over If-Unmodified-Since false; a changed ETag is served
    both = s3.get_object(Bucket="sales", Key=ORDERS_KEY, IfMatch=tag,
                         IfUnmodifiedSince=modified - dt.timedelta(days=1))
    assert both["Body"].read() == data
    assert s3.get_object(Bucket="sales", Key=ORDERS_KEY, IfNoneMatch='"other"',
                         Range="bytes=0-9")["Body"].read() == data[:10]
    assert s3.get_object(Bucket="sales", Key=ORDERS_KEY,
                         IfModifiedSince=modified - dt.timedelta(days=1))["Body"].read() == data


def test_copy_object_within_and_across_buckets(door: tuple[Path, str], s3: Any) -> None:
    data, _ = door
    s3.create_bucket(Bucket="copies")
    answer = s3.copy_object(Bucket="copies", Key="o/orders.csv",
                            CopySource={"Bucket": "sales", "Key": ORDERS_KEY})
    source = (data / "sales" / ORDERS_KEY).read_bytes()
    assert (data / "copies" / "o" / "orders.csv").read_bytes() == source
    assert answer["CopyObjectResult"]["ETag"] == s3.head_object(
        Bucket="copies", Key="o/orders.csv")["ETag"]
    s3.copy_object(Bucket="sales", Key="copied/odd.csv",
                   CopySource={"Bucket": "sales", "Key": ODD_KEYS[0]})
    assert (data / "sales" / "copied" / "odd.csv").read_bytes() == b"x\n"
    tag = s3.head_object(Bucket="sales", Key=ORDERS_KEY)["ETag"]
    with pytest.raises(ClientError) as failed:
        s3.copy_object(Bucket="copies", Key="never.csv", CopySourceIfNoneMatch=tag,
                       CopySource={"Bucket": "sales", "Key": ORDERS_KEY})
    assert failed.value.response["Error"]["Code"] == "PreconditionFailed"
    with pytest.raises(ClientError) as missing:
        s3.copy_object(Bucket="copies", Key="never.csv",
                       CopySource={"Bucket": "sales", "Key": "nope.csv"})
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as itself:
        s3.copy_object(Bucket="sales", Key=ORDERS_KEY,
                       CopySource={"Bucket": "sales", "Key": ORDERS_KEY})
    assert itself.value.response["Error"]["Code"] == "InvalidRequest"
    assert not (data / "copies" / "never.csv").exists()
    assert not [p for p in (data / "copies").rglob(".*")]  # no temporary file left


def test_copy_is_refused_by_a_read_only_door() -> None:
    server, url = start_door(SAMPLES)
    try:
        with pytest.raises(ClientError) as caught:
            s3_client(url).copy_object(Bucket="sales", Key="c.csv",
                                       CopySource={"Bucket": "sales", "Key": ORDERS_KEY})
        assert caught.value.response["Error"]["Code"] == "AccessDenied"
        assert not (SAMPLES / "sales" / "c.csv").exists()
    finally:
        server.stop()


# ----------------------------------------------------------------------------- presigned URLs


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("presigned")
    users = root / "users.json"
    users.write_text(json.dumps({"users": {
        "alice": {"password": hash_password("pw"), "buckets": ["sales"], "write": ["sales"],
                  "access_keys": {"AKIAALICE": "alice-secret"}},
        "reader": {"password": hash_password("pw"), "buckets": ["sales"],
                   "access_keys": {"AKIAREADER": "reader-secret"}},
    }}))
    shutil.copytree(SAMPLES / "sales", root / "data" / "sales")
    server: ServerProcess
    server, url = start_door(root / "data", "--auth", str(users), "--s3-writable")
    yield root / "data", url
    server.stop()


def _fetch(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except HTTPError as exc:
        return exc.code, exc.read()


def test_presigned_get_and_put(signed: tuple[Path, str]) -> None:
    data, url = signed
    alice = s3_client(url, "AKIAALICE", "alice-secret", signature_version="s3v4")
    get = alice.generate_presigned_url("get_object", Params={"Bucket": "sales",
                                                             "Key": ORDERS_KEY})
    assert _fetch(get) == (200, (data / "sales" / ORDERS_KEY).read_bytes())
    put = alice.generate_presigned_url("put_object", Params={"Bucket": "sales",
                                                             "Key": "up/new.csv"})
    assert _fetch(put, "PUT", b"a,b\n1,2\n")[0] == 200
    assert (data / "sales" / "up" / "new.csv").read_bytes() == b"a,b\n1,2\n"
    named = alice.generate_presigned_url("get_object", Params={
        "Bucket": "sales", "Key": ORDERS_KEY, "ResponseContentDisposition": "attachment"})
    with urllib.request.urlopen(named, timeout=30) as answer:
        assert answer.headers["Content-Disposition"] == "attachment"


@pytest.mark.parametrize(("change", "code"), [
    (lambda u: u.replace("X-Amz-Signature=", "X-Amz-Signature=0"), "SignatureDoesNotMatch"),
    (lambda u: re.sub(r"X-Amz-Date=[^&]*&", "", u), "AuthorizationQueryParametersError"),
    (lambda u: u.replace("orders", "ordersX", 1), "SignatureDoesNotMatch"),
    (lambda u: u.replace("AKIAALICE", "AKIANOBODY"), "InvalidAccessKeyId"),
])
def test_presigned_urls_are_checked(signed: tuple[Path, str], change: Any, code: str) -> None:
    _, url = signed
    alice = s3_client(url, "AKIAALICE", "alice-secret", signature_version="s3v4")
    good = alice.generate_presigned_url("get_object", Params={"Bucket": "sales",
                                                              "Key": ORDERS_KEY})
    status, body = _fetch(change(good))
    assert status in (400, 403)
    assert f"<Code>{code}".encode() in body


def test_presigned_url_expires(signed: tuple[Path, str]) -> None:
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    _, url = signed
    request = AWSRequest(method="GET", url=f"{url}/sales/{ORDERS_KEY}")
    signer = S3SigV4QueryAuth(Credentials("AKIAALICE", "alice-secret"), "s3", "us-east-1",
                              expires=60)
    signer.add_auth(request)  # signed now, valid for 60 s
    assert _fetch(request.url)[0] == 200
    stale = AWSRequest(method="GET", url=f"{url}/sales/{ORDERS_KEY}")
    old = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    with unittest.mock.patch("botocore.auth.get_current_datetime", return_value=old):
        signer.add_auth(stale)
    status, body = _fetch(stale.url)
    assert status == 403 and b"Request has expired" in body
    too_long = AWSRequest(method="GET", url=f"{url}/sales/{ORDERS_KEY}")
    S3SigV4QueryAuth(Credentials("AKIAALICE", "alice-secret"), "s3", "us-east-1",
                     expires=7 * 24 * 3600 + 1).add_auth(too_long)
    status, body = _fetch(too_long.url)
    assert status == 400 and b"AuthorizationQueryParametersError" in body


def test_an_unsigned_request_to_a_signed_door_is_refused_presigned_or_not(
        signed: tuple[Path, str]) -> None:
    _, url = signed
    status, body = _raw(url, "GET", f"/sales/{ORDERS_KEY}?X-Amz-Algorithm=AWS4-HMAC-SHA256")
    assert status == 400 and b"AuthorizationQueryParametersError" in body
    status, _ = _raw(url, "GET", f"/sales/{ORDERS_KEY}")
    assert status == 403
    # boto3 presigns with SigV2 unless told s3v4: refused, saying so
    v2 = s3_client(url, "AKIAALICE", "alice-secret").generate_presigned_url(
        "get_object", Params={"Bucket": "sales", "Key": ORDERS_KEY})
    status, body = _fetch(v2)
    assert status == 403 and b"signature_version" in body


def test_writing_needs_the_write_right(signed: tuple[Path, str]) -> None:
    """--s3-writable opens writes to the users the users file lets write the bucket (its
    ``write`` list, the right Flight SQL bulk ingest needs), not to every reader."""
    data, url = signed
    reader = s3_client(url, "AKIAREADER", "reader-secret", signature_version="s3v4")
    assert reader.get_object(Bucket="sales", Key=ORDERS_KEY)["Body"].read()
    with pytest.raises(ClientError) as refused:
        reader.put_object(Bucket="sales", Key="up/by-reader.csv", Body=b"x\n")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert "may not write bucket sales" in refused.value.response["Error"]["Message"]
    assert not (data / "sales" / "up" / "by-reader.csv").exists()
    with pytest.raises(ClientError) as delete:
        reader.delete_object(Bucket="sales", Key=ORDERS_KEY)
    assert delete.value.response["Error"]["Code"] == "AccessDenied"
    assert (data / "sales" / ORDERS_KEY).exists()
