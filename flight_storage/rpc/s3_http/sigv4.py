"""AWS Signature Version 4 checks for the HTTP door, computed by botocore's own signer.

The signature a request should carry is recomputed from the request as received with
``botocore.auth.S3SigV4Auth`` (canonical request, string to sign, signing key), restricted to
the headers the client says it signed and the timestamp it sent, and compared in constant time.
Only the parsing of the ``Authorization`` header and the clock-skew rule are ours.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

MAX_SKEW_S: Final = 15 * 60
"""S3 refuses a request whose ``x-amz-date`` is further than this from the server's clock."""

_UNSIGNED: Final = frozenset({"UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
_AUTH: Final = re.compile(
    r"AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+)\s*,\s*"
    r"SignedHeaders=(?P<signed>[^,\s]+)\s*,\s*Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


@dataclass(frozen=True)
class SignedRequest:
    """What the signature covers, as received."""

    method: str
    host: str
    raw_path: str
    raw_query: str
    headers: Mapping[str, str]
    """Lower-case names."""
    body: bytes


def verify(request: SignedRequest, secret_for: Callable[[str], str | None],
           now: dt.datetime | None = None) -> str:
    """The access key id of a correctly signed request.

    Args:
        request: the request as received.
        secret_for: the secret key of an access key id, or None when it is unknown.

    Raises:
        S3HttpError: ``AccessDenied`` (no or malformed signature), ``InvalidAccessKeyId``,
            ``RequestTimeTooSkewed``, ``XAmzContentSHA256Mismatch`` or
            ``SignatureDoesNotMatch``.
    """
    header = request.headers.get("authorization")
    if not header:
        raise S3HttpError("AccessDenied", "this server requires signed requests (SigV4)")
    match = _AUTH.match(header.strip())
    if match is None:
        raise S3HttpError("AccessDenied", "unsupported Authorization header; sign with SigV4")
    parts = match["credential"].split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise S3HttpError("AuthorizationHeaderMalformed", "malformed Credential scope")
    access_key, day, region, service, _ = parts
    secret = secret_for(access_key)
    if secret is None:
        raise S3HttpError("InvalidAccessKeyId", "the access key id is not known to this server")
    stamp = request.headers.get("x-amz-date", "")
    _check_clock(stamp, day, now or dt.datetime.now(dt.UTC))
    _check_payload(request)
    signed = match["signed"].split(";")
    if "host" not in signed:
        raise S3HttpError("AccessDenied", "the host header must be signed")
    missing = [h for h in signed if h not in request.headers]
    if missing:
        raise S3HttpError("AccessDenied", f"signed header(s) missing: {', '.join(missing)}")
    url = f"http://{request.host}{request.raw_path}"
    if request.raw_query:
        url += f"?{request.raw_query}"
    aws_request = AWSRequest(method=request.method, url=url,
                             headers={h: request.headers[h] for h in signed},
                             data=request.body)
    aws_request.context["timestamp"] = stamp
    signer = S3SigV4Auth(Credentials(access_key, secret), service, region)
    expected = signer.signature(
        signer.string_to_sign(aws_request, signer.canonical_request(aws_request)), aws_request)
    if not hmac.compare_digest(expected, match["signature"]):
        raise S3HttpError("SignatureDoesNotMatch",
                          "the request signature does not match (check the secret key)")
    return access_key


def _check_clock(stamp: str, day: str, now: dt.datetime) -> None:
    try:
        sent = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        raise S3HttpError("AccessDenied", "x-amz-date is missing or malformed") from None
    if stamp[:8] != day:
        raise S3HttpError("SignatureDoesNotMatch", "the credential date is not x-amz-date's")
    if abs((now - sent).total_seconds()) > MAX_SKEW_S:
        raise S3HttpError("RequestTimeTooSkewed",
                          "the request time differs from the server's by over 15 minutes")


def _check_payload(request: SignedRequest) -> None:
    declared = request.headers.get("x-amz-content-sha256")
    if declared is None or declared in _UNSIGNED:
        return
    if not hmac.compare_digest(declared, hashlib.sha256(request.body).hexdigest()):
        raise S3HttpError("XAmzContentSHA256Mismatch",
                          "x-amz-content-sha256 does not match the body")
