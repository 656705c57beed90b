"""AWS Signature Version 4 checks for the HTTP door, computed by botocore's own signer.

The signature a request should carry is recomputed from the request as received with
``botocore.auth.S3SigV4Auth`` (canonical request, string to sign, signing key), restricted to
the headers the client says it signed and the timestamp it sent, and compared in constant time.
The request head is checked before any of its body is read: the canonical request ends with
the payload hash the client declared in ``x-amz-content-sha256`` (S3 requires that header),
and the body is held to that hash as it streams (``payload.py``).

A body sent as signed ``aws-chunked`` (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]``)
carries one signature per chunk, each chained to the one before and seeded by the head's
(:class:`ChunkChain`). botocore does not send such bodies, but its signer signs the chain's
strings to sign (same signing key, same HMAC); only the layout of those strings, as AWS
documents it, is written here, with the parsing of the ``Authorization`` header and the
clock-skew rule.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from botocore.auth import EMPTY_SHA256_HASH, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

MAX_SKEW_S: Final = 15 * 60
"""S3 refuses a request whose ``x-amz-date`` is further than this from the server's clock."""
MAX_EXPIRES_S: Final = 7 * 24 * 3600
"""The longest ``X-Amz-Expires`` of a presigned URL S3 accepts (seven days)."""
QUERY_SIGNATURE: Final = "X-Amz-Signature"

_NOT_A_HASH: Final = re.compile(r"[^0-9a-f]")
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
    body: bytes | None = None
    """The whole body when it is at hand (then its hash is checked too), else None."""


class ChunkChain:
    """The signatures of a signed ``aws-chunked`` body, checked chunk by chunk.

    Each chunk's string to sign names the previous signature (the head's for the first), the
    hash of the empty string and the hash of the chunk's data; the trailer's names the last
    chunk's signature and the hash of the trailing header lines.
    """

    def __init__(self, signer: S3SigV4Auth, request: AWSRequest, seed: str) -> None:
        self._signer = signer
        self._request = request
        self._previous = seed
        self._timestamp = request.context["timestamp"]
        self._scope = signer.credential_scope(request)

    def check_chunk(self, data_sha256: str, signature: str) -> None:
        """Check the next chunk's signature.

        Raises:
            S3HttpError: ``SignatureDoesNotMatch``.
        """
        self._check("AWS4-HMAC-SHA256-PAYLOAD", f"{EMPTY_SHA256_HASH}\n{data_sha256}",
                    signature, "a chunk")

    def check_trailer(self, trailer_lines: bytes, signature: str) -> None:
        """Check the trailer's signature over its header lines (``name:value\\n`` each).

        Raises:
            S3HttpError: ``SignatureDoesNotMatch``.
        """
        self._check("AWS4-HMAC-SHA256-TRAILER", hashlib.sha256(trailer_lines).hexdigest(),
                    signature, "the trailer")

    def _check(self, algorithm: str, tail: str, signature: str, what: str) -> None:
        text = f"{algorithm}\n{self._timestamp}\n{self._scope}\n{self._previous}\n{tail}"
        expected = self._signer.signature(text, self._request)
        if not hmac.compare_digest(expected, signature):
            raise S3HttpError("SignatureDoesNotMatch",
                              f"the signature of {what} of the aws-chunked body does not match")
        self._previous = expected


@dataclass(frozen=True)
class Verified:
    """A request whose head is correctly signed."""

    access_key: str
    chain: ChunkChain | None
    """Checks the chunk signatures of a signed aws-chunked body (None for a presigned URL,
    whose body is unsigned)."""


def verify(request: SignedRequest, secret_for: Callable[[str], str | None],
           now: dt.datetime | None = None) -> str:
    """The access key id of a correctly signed request (its body too, when given).

    Raises:
        S3HttpError: as :func:`verify_head`, and ``XAmzContentSHA256Mismatch`` when the body
            does not hash to ``x-amz-content-sha256``.
    """
    verified = verify_head(request, secret_for, now)
    declared = request.headers.get("x-amz-content-sha256", "")
    if request.body is not None and is_payload_hash(declared) and not hmac.compare_digest(
            declared, hashlib.sha256(request.body).hexdigest()):
        raise S3HttpError("XAmzContentSHA256Mismatch",
                          "x-amz-content-sha256 does not match the body")
    return verified.access_key


def verify_head(request: SignedRequest, secret_for: Callable[[str], str | None],
                now: dt.datetime | None = None) -> Verified:
    """Check a request's signature over its head, before any of its body is read.

    Args:
        request: the request as received (its body is not looked at).
        secret_for: the secret key of an access key id, or None when it is unknown.

    Raises:
        S3HttpError: ``AccessDenied`` (no or malformed signature), ``InvalidAccessKeyId``,
            ``RequestTimeTooSkewed``, ``InvalidRequest`` (no ``x-amz-content-sha256``) or
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
    declared = request.headers.get("x-amz-content-sha256")
    if declared is None:
        raise S3HttpError("InvalidRequest", "Missing required header for this request: "
                          "x-amz-content-sha256")
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
                             headers={h: request.headers[h] for h in signed})
    aws_request.context["timestamp"] = stamp
    signer = _DeclaredPayload(Credentials(access_key, secret), service, region, declared)
    expected = signer.signature(
        signer.string_to_sign(aws_request, signer.canonical_request(aws_request)), aws_request)
    if not hmac.compare_digest(expected, match["signature"]):
        raise S3HttpError("SignatureDoesNotMatch",
                          "the request signature does not match (check the secret key)")
    return Verified(access_key, ChunkChain(signer, aws_request, expected))


def is_presigned(raw_query: str) -> bool:
    """Whether a request carries its signature in the query (a presigned URL)."""
    return any(p.partition("=")[0] == "X-Amz-Algorithm" for p in raw_query.split("&"))


def verify_query(request: SignedRequest, secret_for: Callable[[str], str | None],
                 now: dt.datetime | None = None) -> Verified:
    """Check a presigned URL (SigV4 in the query string): its signature, recomputed with
    botocore's ``S3SigV4QueryAuth`` over the request as received less ``X-Amz-Signature``
    (the payload is ``UNSIGNED-PAYLOAD``), and its validity period.

    Raises:
        S3HttpError: ``AuthorizationQueryParametersError`` (a parameter missing or malformed,
            ``X-Amz-Expires`` over seven days), ``InvalidAccessKeyId``, ``AccessDenied``
            (expired, or dated more than 15 minutes ahead), ``SignatureDoesNotMatch``.
    """
    pairs = [p.partition("=") for p in request.raw_query.split("&") if p]
    params = {k: unquote(v) for k, _, v in pairs}
    wanted = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
              "X-Amz-SignedHeaders", QUERY_SIGNATURE)
    missing = [name for name in wanted if not params.get(name)]
    if missing or params["X-Amz-Algorithm"] != "AWS4-HMAC-SHA256":
        raise S3HttpError("AuthorizationQueryParametersError", "Query-string authentication "
                          "version 4 requires the X-Amz-Algorithm (AWS4-HMAC-SHA256), "
                          "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders "
                          "and X-Amz-Expires parameters"
                          + (f"; missing: {', '.join(missing)}" if missing else ""))
    parts = params["X-Amz-Credential"].split("/")
    expires = params["X-Amz-Expires"]
    if len(parts) != 5 or parts[4] != "aws4_request" or not expires.isdigit() \
            or not 0 < int(expires) <= MAX_EXPIRES_S:
        raise S3HttpError("AuthorizationQueryParametersError", "X-Amz-Credential must be "
                          "<key>/<date>/<region>/<service>/aws4_request and X-Amz-Expires "
                          f"1 to {MAX_EXPIRES_S} seconds")
    access_key, day, region, service, _ = parts
    secret = secret_for(access_key)
    if secret is None:
        raise S3HttpError("InvalidAccessKeyId", "the access key id is not known to this server")
    stamp = params["X-Amz-Date"]
    now = now or dt.datetime.now(dt.UTC)
    sent = _check_clock(stamp, day, now, future_only=True)
    if (now - sent).total_seconds() > int(expires):
        raise S3HttpError("AccessDenied", "Request has expired")
    signed = params["X-Amz-SignedHeaders"].split(";")
    if "host" not in signed:
        raise S3HttpError("AccessDenied", "the host header must be signed")
    headers = dict(request.headers, host=request.host)
    absent = [h for h in signed if h not in headers]
    if absent:
        raise S3HttpError("AccessDenied", f"signed header(s) missing: {', '.join(absent)}")
    query = "&".join(f"{k}{sep}{v}" for k, sep, v in pairs if k != QUERY_SIGNATURE)
    url = f"http://{request.host}{request.raw_path}" + (f"?{query}" if query else "")
    aws_request = AWSRequest(method=request.method, url=url,
                             headers={h: headers[h] for h in signed})
    aws_request.context["timestamp"] = stamp
    signer = S3SigV4QueryAuth(Credentials(access_key, secret), service, region)
    expected = signer.signature(
        signer.string_to_sign(aws_request, signer.canonical_request(aws_request)), aws_request)
    if not hmac.compare_digest(expected, params[QUERY_SIGNATURE]):
        raise S3HttpError("SignatureDoesNotMatch",
                          "the presigned URL's signature does not match (check the secret key)")
    return Verified(access_key, None)


def is_payload_hash(declared: str) -> bool:
    """Whether an ``x-amz-content-sha256`` value is a SHA-256 of the body (not a keyword)."""
    return len(declared) == 64 and _NOT_A_HASH.search(declared) is None


class _DeclaredPayload(S3SigV4Auth):
    """botocore's S3 signer, with the payload hash the client declared (the body is not read
    before the head is trusted)."""

    def __init__(self, credentials: Credentials, service: str, region: str,
                 declared: str) -> None:
        super().__init__(credentials, service, region)
        self._declared = declared

    def payload(self, request: AWSRequest) -> str:  # noqa: ARG002 - botocore's SigV4Auth.payload
        return self._declared


def _check_clock(stamp: str, day: str, now: dt.datetime, *,
                 future_only: bool = False) -> dt.datetime:
    """The time a request was signed; refused when it is too far from ``now`` (a presigned
    URL, ``future_only``, may be old: its expiry says how old)."""
    try:
        sent = dt.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        raise S3HttpError("AccessDenied", "x-amz-date is missing or malformed") from None
    if stamp[:8] != day:
        raise S3HttpError("SignatureDoesNotMatch", "the credential date is not x-amz-date's")
    ahead = (sent - now).total_seconds()
    if future_only and ahead > MAX_SKEW_S:
        raise S3HttpError("AccessDenied", "Request is not valid yet (X-Amz-Date is over 15 "
                          "minutes ahead of the server's clock)")
    if not future_only and abs(ahead) > MAX_SKEW_S:
        raise S3HttpError("RequestTimeTooSkewed",
                          "the request time differs from the server's by over 15 minutes")
    return sent
