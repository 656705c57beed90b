"""Conditional requests: ``If-Match``, ``If-None-Match``, ``If-Modified-Since`` and
``If-Unmodified-Since`` on GetObject and HeadObject, and their ``x-amz-copy-source-if-*``
twins on CopyObject and UploadPartCopy.

The order is RFC 9110's (section 13.2.2), which is also what S3 documents for the pairs:
``If-Match`` true wins over a false ``If-Unmodified-Since`` (200), and ``If-None-Match`` false
answers 304 whatever ``If-Modified-Since`` says. A date S3 cannot read is ignored, as S3 does;
times compare at whole seconds (``Last-Modified`` has no fraction). A copy's failed condition
is 412 for all four, as S3 answers. Hand-written: the rules are a dozen lines; the libraries
that know them (werkzeug's ``is_resource_modified``) are frameworks of their own.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from typing import Final

from flight_storage.rpc.s3_http.s3_errors import S3HttpError

GET_HEADERS: Final = ("if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
COPY_HEADERS: Final = tuple(f"x-amz-copy-source-{name}" for name in GET_HEADERS)


class NotModified(Exception):
    """The object has not changed since the client's copy: answer 304 without a body."""


def check(headers: Mapping[str, str], etag: str, mtime_ns: int, *,
          copy_source: bool = False) -> None:
    """Evaluate a request's conditions against an object.

    Args:
        headers: the request headers, lower-case names.
        etag: the object's ETag (quoted).
        mtime_ns: its modification time.
        copy_source: read the ``x-amz-copy-source-if-*`` headers (of CopyObject).

    Raises:
        S3HttpError: ``PreconditionFailed`` (412) naming the condition.
        NotModified: a GET or HEAD whose copy is current (304).
    """
    names = COPY_HEADERS if copy_source else GET_HEADERS
    if_match, if_none_match, modified_since, unmodified_since = (headers.get(n) for n in names)
    seconds = mtime_ns // 1_000_000_000
    _check_unchanged(names, if_match, unmodified_since, etag, seconds)
    _check_changed(names, if_none_match, modified_since, etag, seconds, copy_source)


def _check_unchanged(names: tuple[str, ...], if_match: str | None,
                     unmodified_since: str | None, etag: str, seconds: int) -> None:
    """``If-Match``, else ``If-Unmodified-Since``: 412 when the object changed."""
    if if_match is not None:
        if not _matches(if_match, etag):
            raise _failed(names[0])
    elif unmodified_since is not None:
        limit = _seconds(unmodified_since)
        if limit is not None and seconds > limit:
            raise _failed(names[3])


def _check_changed(names: tuple[str, ...], if_none_match: str | None,
                   modified_since: str | None, etag: str, seconds: int,
                   copy_source: bool) -> None:
    """``If-None-Match``, else ``If-Modified-Since``: 304 (412 for a copy) when unchanged."""
    if if_none_match is not None:
        if _matches(if_none_match, etag):
            if copy_source:
                raise _failed(names[1])
            raise NotModified()
    elif modified_since is not None:
        limit = _seconds(modified_since)
        if limit is not None and seconds <= limit:
            if copy_source:
                raise _failed(names[2])
            raise NotModified()


def _failed(header: str) -> S3HttpError:
    return S3HttpError("PreconditionFailed", "At least one of the pre-conditions you "
                       f"specified did not hold ({header})")


def _matches(header: str, etag: str) -> bool:
    """Whether an ``If-Match``/``If-None-Match`` list names ``etag`` (or is ``*``)."""
    wanted = _bare(etag)
    for item in header.split(","):
        item = item.strip()
        if item == "*" or _bare(item) == wanted:
            return True
    return False


def _bare(tag: str) -> str:
    tag = tag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    return tag.strip('"')


def _seconds(text: str) -> int | None:
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp())
