"""What a table name means: one object, or every object under a prefix, and how to read it.

``"bucket"."key"`` names one object; a key ending in ``/`` (or equal to a prefix configured in
the bucket's ``.flight-select.json``) names a *prefix table*: all objects under it, in key
order, which must share one format (their schema is taken from the first). The InputSerialization
comes from, in increasing priority: the key's suffixes, the bucket configuration of the longest
matching prefix, and options the statement itself gives (``WITH (...)``, see ``statement.py``).
On the standard surface a CSV table without configured columns may be sniffed instead
(``sniffing.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flight_storage.errors import InvalidRequestError, ObjectNotFoundError
from flight_storage.execution.plan_types import InputSpec
from flight_storage.formats.typed_columns import BAD_VALUES_ERROR, TypedColumns
from flight_storage.request.json_sniffing import json_lines
from flight_storage.request.sniffing import TableSniffer
from flight_storage.storage.catalog import Catalog, ObjectInfo, TableConfig
from flight_storage.storage.sources import StoredSource


@dataclass(frozen=True)
class ResolvedTable:
    """A table ready to plan: its objects and how they are encoded."""

    bucket: str
    key: str
    objects: tuple[ObjectInfo, ...]
    input: InputSpec
    is_prefix: bool

    @property
    def sources(self) -> tuple[StoredSource, ...]:
        """The objects as engine sources, named ``bucket/key``."""
        return tuple(StoredSource(o) for o in self.objects)

    @property
    def size(self) -> int:
        """Total bytes of the table's objects."""
        return sum(o.size for o in self.objects)

    @property
    def version(self) -> str:
        """A fingerprint of the objects as they are now (keys and versions)."""
        return object_version(self.objects)


def object_version(objects: Sequence[ObjectInfo]) -> str:
    """Fingerprint of objects (their keys and content versions, ``storage/stores.py``): a
    ticket planned against them is refused once one changes."""
    digest = hashlib.sha256()
    for o in objects:
        digest.update(f"{o.key}\0{o.version}\n".encode())
    return digest.hexdigest()[:24]


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for name, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = value
    return merged


def input_spec(obj: ObjectInfo, table: TableConfig | None,
               overrides: Mapping[str, Any] | None = None, *,
               bad_values: str = BAD_VALUES_ERROR) -> InputSpec:
    """The InputSerialization of ``obj`` under its bucket configuration and the overrides
    (``bad_values``: the default for configured columns whose entry does not say)."""
    request: dict[str, Any] = dict(table.input_serialization) if table is not None else {}
    if overrides:
        # An override naming another format replaces the configured format's options.
        formats = {"CSV", "JSON", "Parquet"}
        named = formats & set(overrides)
        if named:
            request = {k: v for k, v in request.items() if k not in formats - named}
        request = _merge(request, overrides)
    fmt = obj.format
    if fmt is None and not {"CSV", "JSON", "Parquet"} & set(request):
        raise InvalidRequestError(
            f"cannot tell the format of {obj.bucket}/{obj.key} from its name; "
            "configure it or give it in the statement",
            code="UnsupportedFormat",
        )
    spec = InputSpec.from_request(
        request or None,
        default_format=fmt,
        default_compression=obj.compression,
        json_lines=obj.json_lines,
    )
    if table is not None and table.columns is not None:
        if spec.format != "csv" and not json_lines(spec):
            # Parquet and JSON documents carry their own names and types: declared columns
            # would be silently ignored there, so the configuration is refused for them.
            raise InvalidRequestError(
                f"{obj.bucket}/{obj.key} is {spec.format.upper()}, and 'columns' in "
                f"{obj.bucket}/.flight-select.json (prefix {table.prefix!r}) applies to CSV "
                "and JSON Lines only; give other objects a prefix of their own without "
                "'columns'",
                code="InvalidRequest",
            )
        columns = TypedColumns.from_config(table.columns,
                                           bad_values=table.bad_values or bad_values)
        spec = InputSpec(spec.format, spec.compression, spec.options, columns)
    return spec


def resolve_table(catalog: Catalog, bucket: str, key: str,
                  overrides: Mapping[str, Any] | None = None, *,
                  sniffer: TableSniffer | None = None,
                  bad_values: str = BAD_VALUES_ERROR) -> ResolvedTable:
    """Resolve ``"bucket"."key"`` to its objects and InputSerialization.

    Args:
        catalog: the buckets.
        bucket, key: the table's name.
        overrides: the statement's ``WITH (...)`` options.
        sniffer: sniffs CSV tables without configured columns (None: S3 Select's reading,
            as the ``ceph`` and ``aws`` flavours have it); see ``sniffing.py``.
        bad_values: the default of configured and sniffed columns (``error`` or ``null``).

    Raises:
        ObjectNotFoundError: no such object, or a prefix with no readable objects.
        AccessDeniedError: the name would leave the data root.
        InvalidRequestError: a prefix mixes formats, or the format cannot be told.
    """
    config = catalog.bucket_config(bucket)
    configured = any(t.prefix == key for t in config.tables)
    if not key.endswith("/") and not configured:
        try:
            obj = catalog.object(bucket, key)
        except ObjectNotFoundError as exc:
            if exc.code != "NoSuchKey":
                raise
            if next(iter(catalog.objects(bucket, key + "/")), None) is None:
                raise ObjectNotFoundError(f"{exc.message}, and no table {key}/ of objects "
                                          "under it", code=exc.code) from None
            # "bucket"."table" names the prefix table table/ (what an ingest writes)
            return resolve_table(catalog, bucket, key + "/", overrides, sniffer=sniffer,
                                 bad_values=bad_values)
        entry = config.for_key(key)
        spec = input_spec(obj, entry, overrides, bad_values=bad_values)
        if sniffer is not None:
            spec = sniffer.typed_spec(StoredSource(obj), spec, entry, overrides)
        return ResolvedTable(bucket, key, (obj,), spec, False)
    objects = tuple(o for o in catalog.objects(bucket, key) if o.format is not None)
    if not objects:
        raise ObjectNotFoundError(f"no objects under {bucket}/{key}")
    formats = {(o.format, o.json_lines) for o in objects}
    if len(formats) > 1:
        raise InvalidRequestError(
            f"{bucket}/{key} mixes formats ({', '.join(sorted(str(f[0]) for f in formats))}); "
            "a prefix table has one format",
            code="InvalidRequest",
        )
    entry = config.for_key(objects[0].key)
    spec = input_spec(objects[0], entry, overrides, bad_values=bad_values)
    if sniffer is not None:  # the prefix's objects share its first object's schema
        spec = sniffer.typed_spec(StoredSource(objects[0]), spec, entry, overrides)
    return ResolvedTable(bucket, key, objects, spec, True)
