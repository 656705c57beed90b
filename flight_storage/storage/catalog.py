"""Buckets and their objects, and the bucket configuration that says how to read them.

A bucket is served from a store (``stores.py``): a folder of this machine or a bucket of an
S3-compatible object store; the catalog maps bucket names to stores, from every ``--data``
location. An object is named by its ``/``-separated key; format and compression come from the
key's suffixes (``orders.csv.gz`` is GZIP-compressed CSV) unless a request says otherwise.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flight_storage.errors import AccessDeniedError, InvalidRequestError, ObjectNotFoundError
from flight_storage.formats.typed_columns import BAD_VALUES
from flight_storage.storage.folder_store import BUCKET_CONFIG, FolderBuckets, check_name
from flight_storage.storage.stores import BucketSet, BucketStore, StoredObject

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
_INGESTED_PART = re.compile(r"^(.+)/part-[^/]*\.parquet$")
"""The objects a bulk ingest writes (``rpc/ingest.py``): ``<table>/part-<time>-<random>.parquet``."""


def ingested_table(key: str) -> str | None:
    """The table an ingest's part file belongs to, as users name it (``events/part-1-a.parquet``
    is part of ``events``), or None for any other key.

    Example:
        >>> ingested_table("analytics/daily/part-00000000000000000001-0a1b2c3d.parquet")
        'analytics/daily'
    """
    match = _INGESTED_PART.match(key)
    return match.group(1) if match else None


@dataclass(frozen=True)
class ObjectInfo:
    """One object: where it lives, its version, and how it is encoded."""

    bucket: str
    key: str
    size: int
    mtime_ns: int
    version: str
    """The content identity its store vouches for (``stores.py``); tickets are bound to it."""
    format: str | None
    compression: str
    json_lines: bool
    store: BucketStore = field(compare=False, repr=False)
    etag: str | None = None

    @property
    def table_name(self) -> str:
        """The object's name in SQL: ``"bucket"."key"``."""
        return f'"{self.bucket}"."{self.key}"'

    @property
    def name(self) -> str:
        """``bucket/key`` (messages, source names)."""
        return f"{self.bucket}/{self.key}"

    @property
    def stored(self) -> StoredObject:
        """What its store said of it (what the store's readers are given)."""
        return StoredObject(self.key, self.size, self.mtime_ns, self.version, self.etag)


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
        _check_columns(columns, what)
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


def _check_columns(columns: object, what: str) -> None:
    if not isinstance(columns, list) or not columns:
        raise _ConfigError(f"'columns' of {what} must be a non-empty list")
    for column in columns:
        column = _known_keys(column, _COLUMN_KEYS, f"a column of {what}")
        if not isinstance(column.get("name"), str) or not column["name"]:
            raise _ConfigError(f"every column of {what} needs a 'name' (a string)")
        if not isinstance(column.get("type", "string"), str):
            raise _ConfigError(f"the 'type' of column {column['name']!r} must be a string")


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


class Catalog:
    """Buckets and their objects, wherever each bucket is stored.

    Args:
        data: a data directory (every top-level folder a bucket), or the bucket sets of
            every ``--data`` location (``storage/data_locations.py``); a bucket name served by
            two of them is refused.

    Example:
        >>> Catalog(Path("data/samples")).object("sales", "orders/2024-01.csv").format
        'csv'
    """

    def __init__(self, data: Path | Sequence[BucketSet]) -> None:
        sets = (FolderBuckets(data),) if isinstance(data, Path) else tuple(data)
        if not sets:
            raise InvalidRequestError("no data location given")
        self.sets: tuple[BucketSet, ...] = sets
        # a location serving every bucket of a store is asked last: named ones win
        self._lookup = sorted(sets, key=lambda s: bool(getattr(s, "open_ended", False)))

    def buckets(self) -> list[str]:
        """Bucket names, sorted (the first location serving a name wins; see
        :func:`~flight_storage.storage.data_locations.check_unique`)."""
        names: set[str] = set()
        for bucket_set in self.sets:
            names.update(bucket_set.names())
        return sorted(names)

    def store(self, bucket: str) -> BucketStore:
        """The store of ``bucket``; refuses names that could leave a folder.

        Raises:
            ObjectNotFoundError: no location serves it (``NoSuchBucket``).
        """
        check_name("bucket", bucket)
        if "/" in bucket:
            raise AccessDeniedError(f"invalid bucket name {bucket!r}")
        for bucket_set in self._lookup:
            store = bucket_set.bucket(bucket)
            if store is not None:
                return store
        raise ObjectNotFoundError(f"no such bucket: {bucket}", code="NoSuchBucket")

    def bucket_set(self) -> BucketSet:
        """The location new buckets are created in (the first one)."""
        return self.sets[0]

    def bucket_config(self, bucket: str) -> BucketConfig:
        """The bucket's table configuration (empty when it has none); read every time (it
        may change), parsed once per text."""
        text = self.store(bucket).config_text()
        if text is None:
            return BucketConfig()
        return _parsed_config(text, f"{bucket}/{BUCKET_CONFIG}")

    def object(self, bucket: str, key: str) -> ObjectInfo:
        """Resolve one object (refusing names that could leave its bucket)."""
        store = self.store(bucket)
        return _info(bucket, store, store.head(key))

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
        store = self.store(bucket)
        for stored in store.list(prefix):
            yield _info(bucket, store, stored)


@functools.lru_cache(maxsize=256)
def _parsed_config(text: str, where: str) -> BucketConfig:
    return BucketConfig.parse(text, where)


def _info(bucket: str, store: BucketStore, stored: StoredObject) -> ObjectInfo:
    fmt, compression, json_lines = describe_key(stored.key)
    return ObjectInfo(bucket, stored.key, stored.size, stored.mtime_ns, stored.version, fmt,
                      compression, json_lines, store, stored.etag)


@dataclass(frozen=True)
class ObjectPage:
    """One page of a listing in key order; ``next_start_after`` is None on the last page."""

    objects: tuple[ObjectInfo, ...]
    next_start_after: str | None
