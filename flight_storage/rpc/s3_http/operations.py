"""Which S3 operation an HTTP request is: its method, what its path names (the service, a
bucket or an object), the sub-resource its query names (``?uploads``, ``?acl``) and, for a
few, a header (``x-amz-copy-source`` makes a PUT a copy).

The door answers by operation name (``app.py``'s handler table); an operation this table knows
but the door does not serve is refused with ``NotImplemented`` naming it, so a tool calling
``GetBucketAcl`` hears "GetBucketAcl is not implemented" rather than a bucket listing. The
names are AWS's (the API reference's operation names); only the table is written here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

COPY_SOURCE: Final = "x-amz-copy-source"

_VERBS: Final = {"GET": "Get", "PUT": "Put", "DELETE": "Delete"}

_BUCKET_CONFIGURATIONS: Final[dict[str, str]] = {
    "accelerate": "BucketAccelerateConfiguration",
    "acl": "BucketAcl",
    "analytics": "BucketAnalyticsConfiguration",
    "cors": "BucketCors",
    "encryption": "BucketEncryption",
    "intelligent-tiering": "BucketIntelligentTieringConfiguration",
    "inventory": "BucketInventoryConfiguration",
    "lifecycle": "BucketLifecycleConfiguration",
    "logging": "BucketLogging",
    "metrics": "BucketMetricsConfiguration",
    "notification": "BucketNotificationConfiguration",
    "object-lock": "ObjectLockConfiguration",
    "ownershipControls": "BucketOwnershipControls",
    "policy": "BucketPolicy",
    "policyStatus": "BucketPolicyStatus",
    "publicAccessBlock": "PublicAccessBlock",
    "replication": "BucketReplication",
    "requestPayment": "BucketRequestPayment",
    "tagging": "BucketTagging",
    "versioning": "BucketVersioning",
    "website": "BucketWebsite",
}
"""Bucket sub-resources that are a configuration: ``Get``/``Put``/``Delete`` + the name."""

_BUCKET_CALLS: Final[dict[tuple[str, str], str]] = {
    ("GET", ""): "ListObjects",
    ("HEAD", ""): "HeadBucket",
    ("PUT", ""): "CreateBucket",
    ("DELETE", ""): "DeleteBucket",
    ("GET", "location"): "GetBucketLocation",
    ("GET", "versions"): "ListObjectVersions",
    ("GET", "uploads"): "ListMultipartUploads",
    ("POST", "delete"): "DeleteObjects",
}
"""Bucket calls that are not a configuration (``""``: no sub-resource)."""

_OBJECT_CALLS: Final[dict[tuple[str, str], str]] = {
    ("GET", ""): "GetObject",
    ("HEAD", ""): "HeadObject",
    ("PUT", ""): "PutObject",
    ("DELETE", ""): "DeleteObject",
    ("POST", "uploads"): "CreateMultipartUpload",
    ("PUT", "uploadId"): "UploadPart",
    ("POST", "uploadId"): "CompleteMultipartUpload",
    ("DELETE", "uploadId"): "AbortMultipartUpload",
    ("GET", "uploadId"): "ListParts",
    ("POST", "select"): "SelectObjectContent",
    ("POST", "restore"): "RestoreObject",
    ("GET", "acl"): "GetObjectAcl",
    ("PUT", "acl"): "PutObjectAcl",
    ("GET", "tagging"): "GetObjectTagging",
    ("PUT", "tagging"): "PutObjectTagging",
    ("DELETE", "tagging"): "DeleteObjectTagging",
    ("GET", "retention"): "GetObjectRetention",
    ("PUT", "retention"): "PutObjectRetention",
    ("GET", "legal-hold"): "GetObjectLegalHold",
    ("PUT", "legal-hold"): "PutObjectLegalHold",
    ("GET", "attributes"): "GetObjectAttributes",
    ("GET", "torrent"): "GetObjectTorrent",
    ("GET", "partNumber"): "GetObject",  # a part of a multipart object (refused in get)
    ("HEAD", "partNumber"): "HeadObject",
}

_COPIES: Final[dict[str, str]] = {"PutObject": "CopyObject", "UploadPart": "UploadPartCopy"}
"""Operations that become a copy when the request names ``x-amz-copy-source``."""

_OBJECT_SUBRESOURCES: Final = ("uploadId", "uploads", "select", "restore", "acl", "tagging",
                               "retention", "legal-hold", "attributes", "torrent", "partNumber")
"""In the order they decide (``?uploadId=..&partNumber=..`` is UploadPart)."""


def operation(method: str, bucket: str, key: str, query: Mapping[str, str],
              headers: Mapping[str, str]) -> str:
    """The S3 operation of a request, or ``"<METHOD> on a <resource>"`` when S3 has none.

    Args:
        method: the HTTP method.
        bucket, key: what the path names (empty when it does not).
        query: the query parameters.
        headers: the request headers (any case).
    """
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method} on the service"
    if not key:
        return _bucket_operation(method, query)
    sub = next((name for name in _OBJECT_SUBRESOURCES if name in query), "")
    name = _OBJECT_CALLS.get((method, sub), f"{method} on an object")
    if name in _COPIES and any(h.lower() == COPY_SOURCE for h in headers):
        return _COPIES[name]
    return name


def _bucket_operation(method: str, query: Mapping[str, str]) -> str:
    for sub, configuration in _BUCKET_CONFIGURATIONS.items():
        if sub in query and method in _VERBS:
            return _VERBS[method] + configuration
    sub = next((name for (_, name) in _BUCKET_CALLS if name and name in query), "")
    name = _BUCKET_CALLS.get((method, sub), f"{method} on a bucket")
    if name == "ListObjects" and query.get("list-type") == "2":
        return "ListObjectsV2"
    return name
