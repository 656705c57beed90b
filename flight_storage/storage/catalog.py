"""Buckets and objects under a data root; names never leave the root.

A bucket is a top-level folder of the data directory; an object is a regular file below it,
named by its ``/``-separated key. Format and compression come from the key's suffixes
(``orders.csv.gz`` is GZIP-compressed CSV) unless a request says otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flight_storage.errors import (
    AccessDeniedError,
    InvalidRequestError,
    ObjectNotFoundError,
    StorageError,
)
from flight_storage.formats.typed_columns import BAD_VALUES

_COMPRESSION_SUFFIXES = {".gz": "GZIP", ".gzip": "GZIP", ".bz2": "BZIP2", ".zst": "ZSTD"}
_FORMAT_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".json": "json",
    ".ndjson": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_JSON_LINES_SUFFIXES = {".ndjson", ".jsonl"}


@dataclass(frozen=True)
class ObjectInfo:
    """One object: where it lives and how it is encoded."""

    bucket: str
    key: str
    path: Path
    size: int
    mtime_ns: int
    format: str | None
    compression: str
    json_lines: bool

    @property
    def table_name(self) -> str:
        """The object's name in SQL: ``"bucket"."key"``."""
        return f'"{self.bucket}"."{self.key}"'


BUCKET_CONFIG = ".flight-select.json"


@dataclass(frozen=True)
class TableConfig:
    """Settings for the objects under one key prefix of a bucket.

    ``input_serialization`` is an AWS ``InputSerialization`` dict; keys it leaves out keep their
    defaults (the format and compression still come from the key's suffixes). ``columns``
    optionally declares the names and types of a CSV table's fields
    (``[{"name": "order_id", "type": "int64"}, ...]``, see ``formats/typed_columns.py``).
    ``sniff`` lets Flight SQL statements infer the header and types of the prefix's CSV
    objects as they do for objects no entry covers (``request/sniffing.py``); ``bad_values``
    says what a field that does not convert to its column's type does (``error``, ``null``;
    None: the server's ``--bad-values``).
    """

    prefix: str
    input_serialization: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[Mapping[str, str], ...] | None = None
    sniff: bool = False
    bad_values: str | None = None


@dataclass(frozen=True)
class BucketConfig:
    """A bucket's ``.flight-select.json``: ``{"tables": [{"prefix": ..., "InputSerialization":
    {...}}, ...]}``."""

    tables: tuple[TableConfig, ...] = ()

    def for_key(self, key: str) -> TableConfig | None:
        """The configuration of the longest prefix that ``key`` starts with."""
        matches = [t for t in self.tables if key.startswith(t.prefix)]
        return max(matches, key=lambda t: len(t.prefix)) if matches else None

    @classmethod
    def parse(cls, text: str, where: str) -> BucketConfig:
        """Read the JSON text of a bucket configuration file.

        Raises:
            InvalidRequestError: not JSON, or a key or value the reference in the README does
                not allow (an unknown key is refused, naming it, rather than ignored: a
                misspelt ``colums`` would otherwise leave a table untyped without a word).
        """
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidRequestError(f"{where}: invalid bucket configuration ({exc})") from None
        try:
            return cls(tuple(_table_config(t) for t in _entries(document)))
        except _ConfigError as exc:
            raise InvalidRequestError(f"{where}: invalid bucket configuration ({exc})") from None


class _ConfigError(Exception):
    """A configuration value that breaks the reference (message only; wrapped with the file)."""


_DOCUMENT_KEYS = frozenset({"tables"})
_TABLE_KEYS = frozenset({"prefix", "InputSerialization", "columns", "sniff", "bad_values"})

_COLUMN_KEYS = frozenset({"name", "type"})


def _known_keys(value: object, allowed: frozenset[str], what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _ConfigError(f"{what} must be a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _ConfigError(f"unknown key {unknown[0]!r} in {what}; "
                           f"known: {', '.join(sorted(allowed))}")
    return value


def _entries(document: object) -> list[Any]:
    tables = _known_keys(document, _DOCUMENT_KEYS, "the document").get("tables", [])
    if not isinstance(tables, list):
        raise _ConfigError("'tables' must be a list")
    return tables


def _table_config(entry: object) -> TableConfig:
    table = _known_keys(entry, _TABLE_KEYS, "a table")
    prefix = table.get("prefix")
    if not isinstance(prefix, str):
        raise _ConfigError("every table needs a 'prefix' (a string; \"\" for the whole bucket)")
    what = f"table {prefix!r}"
    serialization = table.get("InputSerialization", {})
    if not isinstance(serialization, Mapping):
        raise _ConfigError(f"'InputSerialization' of {what} must be a JSON object")
    columns = table.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not columns:
            raise _ConfigError(f"'columns' of {what} must be a non-empty list")
        for column in columns:
            column = _known_keys(column, _COLUMN_KEYS, f"a column of {what}")
            if not isinstance(column.get("name"), str) or not column["name"]:
                raise _ConfigError(f"every column of {what} needs a 'name' (a string)")
            if not isinstance(column.get("type", "string"), str):
                raise _ConfigError(f"the 'type' of column {column['name']!r} must be a string")
    sniff = table.get("sniff", False)
    if not isinstance(sniff, bool):
        raise _ConfigError(f"'sniff' of {what} must be true or false")
    if sniff and columns is not None:
        raise _ConfigError(f"{what} has both 'columns' and 'sniff': declared columns are "
                           "not sniffed; drop one")
    bad_values = table.get("bad_values")
    if bad_values is not None and bad_values not in BAD_VALUES:
        raise _ConfigError(f"'bad_values' of {what} must be one of {', '.join(BAD_VALUES)}")
    return TableConfig(prefix, dict(serialization),
                       tuple(dict(c) for c in columns) if columns is not None else None,
                       sniff, bad_values)


def describe_key(key: str) -> tuple[str | None, str, bool]:
    """Return ``(format, compression, json_lines)`` guessed from a key's suffixes."""
    name = key.rsplit("/", 1)[-1].lower()
    stem, dot, last = name.rpartition(".")
    compression = "NONE"
    if dot and f".{last}" in _COMPRESSION_SUFFIXES:
        compression = _COMPRESSION_SUFFIXES[f".{last}"]
        name = stem
    suffix = "." + name.rpartition(".")[2] if "." in name else ""
    return _FORMAT_SUFFIXES.get(suffix), compression, suffix in _JSON_LINES_SUFFIXES


MAX_KEY_BYTES = 1024
"""S3's limit on a key's UTF-8 length."""


def _check_name(kind: str, name: str) -> None:
    if not name or "\x00" in name or name.startswith("/") or "\\" in name:
        raise AccessDeniedError(f"invalid {kind} name {name!r}")
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise AccessDeniedError(f"invalid {kind} name {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{kind} name {name!r} is not valid UTF-8",
                                  code="InvalidArgument") from None
    if size > MAX_KEY_BYTES:
        raise InvalidRequestError(f"{kind} name is {size} bytes; the limit is {MAX_KEY_BYTES}",
                                  code="KeyTooLongError")


# errno -> (error class, S3 code) for a key whose file cannot be looked up
_LOOKUP_ERRORS: dict[int, tuple[type[StorageError], str]] = {
    errno.ENAMETOOLONG: (InvalidRequestError, "KeyTooLongError"),
    errno.ELOOP: (ObjectNotFoundError, "NoSuchKey"),
    errno.EACCES: (AccessDeniedError, "AccessDenied"),
    errno.EPERM: (AccessDeniedError, "AccessDenied"),
}


class Catalog:
    """Read-only view of a data directory as buckets of objects.

    Args:
        root: the data directory; every path handed out is inside it.

    Example:
        >>> Catalog(Path("data/samples")).object("sales", "orders/2024-01.csv").format
        'csv'
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve(strict=True)

    def buckets(self) -> list[str]:
        """Bucket names, sorted."""
        return sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
        )

    def bucket_path(self, bucket: str) -> Path:
        """The folder of ``bucket``; refuses names that could leave the root."""
        _check_name("bucket", bucket)
        if "/" in bucket:
            raise AccessDeniedError(f"invalid bucket name {bucket!r}")
        path = self.root / bucket
        if not path.is_dir() or path.is_symlink():
            raise ObjectNotFoundError(f"no such bucket: {bucket}", code="NoSuchBucket")
        return path

    def bucket_config(self, bucket: str) -> BucketConfig:
        """The bucket's table configuration (empty when it has none)."""
        path = self.bucket_path(bucket) / BUCKET_CONFIG
        if not path.is_file() or path.is_symlink():
            return BucketConfig()
        return BucketConfig.parse(path.read_text(encoding="utf-8"), f"{bucket}/{BUCKET_CONFIG}")

    def object(self, bucket: str, key: str) -> ObjectInfo:
        """Resolve one object, refusing ``..``, absolute paths, NUL bytes and symlinks out."""
        base = self.bucket_path(bucket)
        _check_name("key", key)
        if any(part.startswith(".") for part in key.split("/")):
            # dotfiles (the bucket configuration among them) are not objects, as in listings
            raise ObjectNotFoundError(f"no such key: {bucket}/{key}")
        path = base.joinpath(*key.split("/"))
        try:
            resolved = path.resolve(strict=True)
            st = resolved.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(f"no such key: {bucket}/{key}") from None
        except RuntimeError:  # pathlib's "Symlink loop"
            raise ObjectNotFoundError(f"no such key: {bucket}/{key} (a symlink loop)") from None
        except OSError as exc:
            kind, code = _LOOKUP_ERRORS.get(exc.errno or 0, (ObjectNotFoundError, "NoSuchKey"))
            raise kind(f"{bucket}/{key}: {exc.strerror}", code=code) from None
        if not resolved.is_relative_to(base.resolve()):
            raise AccessDeniedError(f"object {bucket}/{key} points outside its bucket")
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFoundError(f"no such key: {bucket}/{key}")
        fmt, compression, json_lines = describe_key(key)
        return ObjectInfo(bucket, key, resolved, st.st_size, st.st_mtime_ns, fmt, compression,
                          json_lines)

    def list_page(self, bucket: str, prefix: str = "", start_after: str = "",
                  max_keys: int = 1000) -> ObjectPage:
        """Up to ``max_keys`` objects under ``prefix`` whose keys sort after ``start_after``."""
        if max_keys < 1:
            raise InvalidRequestError("max_keys must be at least 1")
        page: list[ObjectInfo] = []
        more = False
        for obj in self.objects(bucket, prefix):
            if obj.key <= start_after:
                continue
            if len(page) == max_keys:
                more = True
                break
            page.append(obj)
        return ObjectPage(tuple(page), page[-1].key if more and page else None)

    def objects(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects of ``bucket`` whose key starts with ``prefix``, in key order."""
        base = self.bucket_path(bucket)
        if prefix and ("\x00" in prefix or prefix.startswith("/") or ".." in prefix.split("/")):
            raise AccessDeniedError(f"invalid prefix {prefix!r}")
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rel = Path(dirpath).relative_to(base).as_posix()
            for name in filenames:
                if name.startswith("."):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        for key in sorted(keys):
            try:
                yield self.object(bucket, key)
            except (ObjectNotFoundError, AccessDeniedError, InvalidRequestError):
                continue  # vanished, a link out or a loop, an unusable name: not listed


@dataclass(frozen=True)
class ObjectPage:
    """One page of a listing in key order; ``next_start_after`` is None on the last page."""

    objects: tuple[ObjectInfo, ...]
    next_start_after: str | None
