"""The listings of the S3 door: ListBuckets, ListObjects (v1), ListObjectsV2 and
ListObjectVersions (one version, ``null``, per key), with S3's paging, delimiter roll-up and
``encoding-type=url``.

A listing reads its keys from an iterator of :class:`Entry` in key order (a bucket's store,
or in a holdings cluster the merged listing of every node, ``rpc/roles/door.py``), so the
paging rules have one owner. Hand-written because the XML bodies are a handful of fixed elements.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import quote
from xml.sax.saxutils import escape

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

XML_HEADER: Final = '<?xml version="1.0" encoding="UTF-8"?>\n'
S3_NS: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_LIST_KEYS: Final = 1000
OWNER: Final = "flight-select"
OWNER_XML: Final = f"<Owner><ID>{OWNER}</ID><DisplayName>{OWNER}</DisplayName></Owner>"


@dataclass(frozen=True)
class Entry:
    """One listed object."""

    key: str
    size: int
    mtime_ns: int
    etag: str | None = None
    """The store's ETag (quoted); None: made from the size and time (:func:`etag`)."""


class Tagged(Protocol):
    """What an ETag is made of (an :class:`Entry`, a catalog object, a stored object)."""

    @property
    def size(self) -> int: ...

    @property
    def mtime_ns(self) -> int: ...

    @property
    def etag(self) -> str | None: ...


def etag(obj: Tagged) -> str:
    """The store's ETag, or for a file one that changes with it (size and modification time,
    not an MD5: hashing every object on HEAD would read it whole)."""
    return obj.etag or f'"{obj.mtime_ns:x}-{obj.size:x}"'


def http_date(ns: int) -> str:
    """RFC 7231 date of a modification time (Last-Modified)."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


def iso_time(ns: int) -> str:
    """ISO 8601 time of S3's XML bodies."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def list_buckets_xml(buckets: list[tuple[str, int]]) -> bytes:
    """The ListAllMyBucketsResult body of ``[(name, creation ns), ...]``."""
    entries = "".join(f"<Bucket><Name>{escape(b)}</Name><CreationDate>{iso_time(ns)}"
                      "</CreationDate></Bucket>" for b, ns in buckets)
    return (f'{XML_HEADER}<ListAllMyBucketsResult xmlns="{S3_NS}">{OWNER_XML}'
            f"<Buckets>{entries}</Buckets></ListAllMyBucketsResult>").encode()


@dataclass(frozen=True)
class ListRequest:
    """What a listing call asks for (the parameters of any of the three listings)."""

    bucket: str
    prefix: str = ""
    delimiter: str = ""
    after: str = ""
    """List the keys (and roll-ups) that sort after this."""
    max_keys: int = MAX_LIST_KEYS
    continuation: str | None = None
    start_after: str = ""
    marker: str = ""
    url_encoded: bool = False
    fetch_owner: bool = False


def parse_list_request(bucket: str, query: Mapping[str, str], version: int) -> ListRequest:
    """Read the parameters of ListObjects (``version`` 1: ``marker``) or ListObjectsV2
    (2: ``continuation-token``, ``start-after``, ``fetch-owner``); ``max-keys`` is capped at
    S3's 1000.

    Raises:
        S3HttpError: ``InvalidArgument`` (a bad token, ``max-keys`` or ``encoding-type``).
    """
    common = _common(bucket, query)
    if version == 1:
        marker = query.get("marker", "")
        return dataclasses.replace(common, after=marker, marker=marker)
    token = query.get("continuation-token")
    start_after = query.get("start-after", "")
    after = start_after
    if token is not None:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise S3HttpError("InvalidArgument", "The continuation token provided is "
                              "incorrect") from None
    return dataclasses.replace(common, after=after, continuation=token,
                               start_after=start_after,
                               fetch_owner=query.get("fetch-owner", "").lower() == "true")


def parse_versions_request(bucket: str, query: Mapping[str, str]) -> ListRequest:
    """Read ListObjectVersions' parameters. Objects here have one version, ``null``: the
    ``key-marker`` pages, and a ``version-id-marker`` may only name ``null``."""
    marker = query.get("key-marker", "")
    version = query.get("version-id-marker")
    if version is not None and not marker:
        raise S3HttpError("InvalidArgument",
                          "A version-id marker cannot be specified without a key marker.")
    if version not in (None, "", "null"):
        raise S3HttpError("InvalidArgument", "Invalid version id specified")
    return dataclasses.replace(_common(bucket, query), after=marker, marker=marker)


def _common(bucket: str, query: Mapping[str, str]) -> ListRequest:
    encoding = query.get("encoding-type")
    if encoding not in (None, "url"):
        raise S3HttpError("InvalidArgument", "Invalid Encoding Method specified in Request")
    try:
        max_keys = min(int(query.get("max-keys", MAX_LIST_KEYS)), MAX_LIST_KEYS)
    except ValueError:
        raise S3HttpError("InvalidArgument", "Provided max-keys not an integer or within "
                          "integer range") from None
    if max_keys < 0:
        raise S3HttpError("InvalidArgument", "Argument maxKeys must be an integer between 0 "
                          "and 2147483647")
    return ListRequest(bucket, query.get("prefix", ""), query.get("delimiter", ""),
                       max_keys=max_keys, url_encoded=encoding == "url")


@dataclass(frozen=True)
class Page:
    """One page of a listing: keys and common prefixes in key order."""

    contents: list[Entry]
    prefixes: list[str]
    truncated: bool
    last: str
    """The last key or prefix of the page (where the next one starts after)."""


def page(entries: Iterable[Entry], request: ListRequest) -> Page:
    """The page of ``entries`` (in key order, under the request's prefix) that ``request``
    asks for: keys after ``request.after``, rolled up at the delimiter, ``max_keys`` of them."""
    contents: list[Entry] = []
    prefixes: list[str] = []
    last = ""
    truncated = False
    for obj in entries:
        key = obj.key
        if key <= request.after or (request.after.endswith(request.delimiter or "\x00")
                                    and key.startswith(request.after)):
            continue
        rolled = _common_prefix(key, request.prefix, request.delimiter)
        if rolled is not None and prefixes and prefixes[-1] == rolled:
            continue
        if len(contents) + len(prefixes) >= request.max_keys:
            truncated = True
            break
        if rolled is not None:
            prefixes.append(rolled)
            last = rolled
        else:
            contents.append(obj)
            last = key
    return Page(contents, prefixes, truncated, last)


def _common_prefix(key: str, prefix: str, delimiter: str) -> str | None:
    if not delimiter:
        return None
    cut = key.find(delimiter, len(prefix))
    return key[: cut + len(delimiter)] if cut >= 0 else None


class _Text:
    """Text of a listing body, URL-encoded where the request asked for ``encoding-type=url``
    (keys, prefixes, delimiter and markers: what may hold characters XML 1.0 cannot)."""

    def __init__(self, request: ListRequest) -> None:
        self.encoded = request.url_encoded

    def __call__(self, text: str) -> str:
        return escape(quote(text, safe="/") if self.encoded else text)

    def element(self, name: str, text: str) -> str:
        return f"<{name}>{self(text)}</{name}>"


def _contents(pg: Page, text: _Text, owner: bool) -> str:
    return "".join(
        f"<Contents>{text.element('Key', o.key)}<LastModified>{iso_time(o.mtime_ns)}"
        f"</LastModified><ETag>{escape(etag(o))}</ETag><Size>{o.size}</Size>"
        f"{OWNER_XML if owner else ''}<StorageClass>STANDARD</StorageClass></Contents>"
        for o in pg.contents)


def _prefixes(pg: Page, text: _Text) -> str:
    return "".join(f"<CommonPrefixes>{text.element('Prefix', p)}</CommonPrefixes>"
                   for p in pg.prefixes)


def _head(request: ListRequest, text: _Text) -> str:
    head = f"<Name>{escape(request.bucket)}</Name>{text.element('Prefix', request.prefix)}"
    if request.delimiter:
        head += text.element("Delimiter", request.delimiter)
    if request.url_encoded:
        head += "<EncodingType>url</EncodingType>"
    return head + f"<MaxKeys>{request.max_keys}</MaxKeys>"


def _truncated(pg: Page) -> str:
    return f"<IsTruncated>{'true' if pg.truncated else 'false'}</IsTruncated>"


def list_objects_xml(entries: Iterable[Entry], request: ListRequest, version: int) -> bytes:
    """The ListBucketResult body of ListObjects (``version`` 1) or ListObjectsV2 (2)."""
    pg = page(entries, request)
    text = _Text(request)
    body = _head(request, text)
    if version == 1:
        body += text.element("Marker", request.marker)
        if pg.truncated:  # S3 sends it with a delimiter; clients fall back to the last key
            body += text.element("NextMarker", pg.last)
    else:
        body += f"<KeyCount>{len(pg.contents) + len(pg.prefixes)}</KeyCount>"
        if request.continuation is not None:
            body += f"<ContinuationToken>{escape(request.continuation)}</ContinuationToken>"
        if request.start_after:
            body += text.element("StartAfter", request.start_after)
        if pg.truncated:
            token = base64.urlsafe_b64encode(pg.last.encode()).decode()
            body += f"<NextContinuationToken>{token}</NextContinuationToken>"
    owner = version == 1 or request.fetch_owner
    return (f'{XML_HEADER}<ListBucketResult xmlns="{S3_NS}">{body}{_truncated(pg)}'
            f"{_contents(pg, text, owner)}{_prefixes(pg, text)}</ListBucketResult>").encode()


def list_versions_xml(entries: Iterable[Entry], request: ListRequest) -> bytes:
    """The ListVersionsResult body of a store without versioning: every key once, as its
    latest (and only) version ``null``, as S3 lists a bucket whose versioning was never on."""
    pg = page(entries, request)
    text = _Text(request)
    versions = "".join(
        f"<Version>{text.element('Key', o.key)}<VersionId>null</VersionId>"
        f"<IsLatest>true</IsLatest><LastModified>{iso_time(o.mtime_ns)}</LastModified>"
        f"<ETag>{escape(etag(o))}</ETag><Size>{o.size}</Size>{OWNER_XML}"
        "<StorageClass>STANDARD</StorageClass></Version>"
        for o in pg.contents)
    body = (_head(request, text) + text.element("KeyMarker", request.after)
            + f"<VersionIdMarker>{'null' if request.after else ''}</VersionIdMarker>")
    if pg.truncated:
        body += (text.element("NextKeyMarker", pg.last)
                 + "<NextVersionIdMarker>null</NextVersionIdMarker>")
    return (f'{XML_HEADER}<ListVersionsResult xmlns="{S3_NS}">{body}{_truncated(pg)}'
            f"{versions}{_prefixes(pg, text)}</ListVersionsResult>").encode()


def location_xml() -> bytes:
    """GetBucketLocation's body: every bucket is in the door's one region, us-east-1, which
    S3 names by an empty constraint."""
    return f'{XML_HEADER}<LocationConstraint xmlns="{S3_NS}"/>'.encode()


def versioning_xml() -> bytes:
    """GetBucketVersioning's body for a store that keeps no versions: no ``Status``, as S3
    answers for a bucket whose versioning was never enabled."""
    return f'{XML_HEADER}<VersioningConfiguration xmlns="{S3_NS}"/>'.encode()
