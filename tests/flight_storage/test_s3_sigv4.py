"""SigV4 checks of the S3 door against requests signed by botocore itself."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from flight_storage.rpc.s3_http.s3_errors import S3HttpError
from flight_storage.rpc.s3_http.sigv4 import SignedRequest, verify

KEYS = {"AKIATEST": "s3cr3t"}


def _signed(body: bytes = b"<x/>", secret: str = "s3cr3t") -> SignedRequest:
    request = AWSRequest(method="POST",
                         url="http://127.0.0.1:9000/sales/orders/a%20b.csv?select&select-type=2",
                         data=body, headers={"Content-Type": "application/xml"})
    S3SigV4Auth(Credentials("AKIATEST", secret), "s3", "us-east-1").add_auth(request)
    parts = urlsplit(request.url)
    headers = {k.lower(): v for k, v in request.headers.items()}
    headers["host"] = parts.netloc
    return SignedRequest("POST", parts.netloc, parts.path, parts.query, headers, body)


def test_a_botocore_signature_verifies() -> None:
    assert verify(_signed(), KEYS.get) == "AKIATEST"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda r: r.__class__(**{**r.__dict__, "body": b"<y/>"}), "XAmzContentSHA256Mismatch"),
        (lambda r: r.__class__(**{**r.__dict__, "raw_path": "/sales/other.csv"}),
         "SignatureDoesNotMatch"),
        (lambda r: r.__class__(**{**r.__dict__, "headers": {
            k: v for k, v in r.headers.items() if k != "authorization"}}), "AccessDenied"),
    ],
)
def test_a_changed_request_is_refused(change: object, code: str) -> None:
    with pytest.raises(S3HttpError) as caught:
        verify(change(_signed()), KEYS.get)  # type: ignore[operator]
    assert caught.value.code == code


def test_wrong_secret_unknown_key_and_skew() -> None:
    with pytest.raises(S3HttpError) as wrong:
        verify(_signed(secret="other"), KEYS.get)
    assert wrong.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3HttpError) as unknown:
        verify(_signed(), {}.get)
    assert unknown.value.code == "InvalidAccessKeyId"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with pytest.raises(S3HttpError) as skewed:
        verify(_signed(), KEYS.get, now=later)
    assert skewed.value.code == "RequestTimeTooSkewed"


def test_add_user_makes_an_access_key_the_users_file_loads(tmp_path: object) -> None:
    from pathlib import Path

    from flight_storage.rpc.auth import Users, add_user

    path = Path(str(tmp_path)) / "users.json"
    pair = add_user(path, "bob", "pw", ["sales"], s3_access_key=True)
    assert pair is not None
    user = Users.load(path).users["bob"]
    assert dict(user.access_keys) == {pair[0]: pair[1]}
    assert add_user(path, "carol", "pw", ["sales"]) is None
    assert dict(Users.load(path).users["carol"].access_keys) == {}
