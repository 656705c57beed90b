"""Which JSON tables a Flight SQL statement reads as typed columns, and the cache of what each
object's sample says (the JSON half of ``sniffing.py``, which hands JSON tables here).

On the standard surface a JSON Lines object (plain or compressed) is a table of columns: its
keys, typed as :mod:`flight_storage.formats.json_sniff` infers them from the object's first
lines, or as the bucket's ``.flight-select.json`` declares them (``columns``, with the type
``json`` for a value kept as its JSON text). The rules mirror CSV's:

| the table | typed? |
|---|---|
| an S3 request (over Flight or the S3 door), or a statement in the ``ceph``/``aws`` flavour | no: S3 Select's semantics (each path's JSON text) |
| a JSON DOCUMENT object (``.json``) | no |
| an object a configuration entry with ``columns`` covers | the declared columns |
| an object an entry without ``columns`` covers | only when the entry says ``"sniff": true`` |
| any other JSON Lines object, server started without ``--no-sniff`` | sniffed; an object the sample cannot type (a line that is not a JSON object) keeps S3 Select's reading |

A prefix table's objects share the columns sniffed from its first object. What a sample says
is kept per object version in a :class:`~flight_storage.storage.version_cache.VersionCache`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flight_storage.execution.plan_types import InputSpec
from flight_storage.formats.compression import open_decompressed
from flight_storage.formats.csv_sniff import TableReading
from flight_storage.formats.json_sniff import SniffedJson, read_json_sample, sniff_json_lines
from flight_storage.formats.typed_columns import BAD_VALUES_ERROR, TypedColumns
from flight_storage.storage.catalog import TableConfig
from flight_storage.storage.sources import ObjectSource, version_key
from flight_storage.storage.version_cache import VersionCache

log = logging.getLogger(__name__)


def json_lines(spec: InputSpec) -> bool:
    """Whether ``spec`` reads JSON Lines (one value per line)."""
    return spec.format == "json" and str(spec.options.get("Type", "")).upper() == "LINES"


class JsonTableSniffer:
    """Sniffs JSON Lines objects for the standard surface, once per object version.

    Args:
        reading: the server's settings (``sample_bytes``).
        max_entries: sniffed objects kept; the least recently used go first.
    """

    def __init__(self, reading: TableReading, max_entries: int = 4096) -> None:
        self.reading = reading
        self._cache: VersionCache[SniffedJson] = VersionCache(max_entries)

    @property
    def sniffs(self) -> int:
        """Objects sniffed (not served from the cache); tests read it."""
        return self._cache.computed

    def typed_spec(self, source: ObjectSource, spec: InputSpec, entry: TableConfig | None,
                   overrides: Mapping[str, Any] | None) -> InputSpec:  # noqa: ARG002 - the sniffers' signature
        """``spec`` with the sniffed columns of ``source`` where the module's table says so,
        else ``spec`` unchanged (configured columns are ``tables.input_spec``'s)."""
        if not json_lines(spec) or spec.columns is not None:
            return spec
        if entry is not None and not entry.sniff:
            return spec
        sniffed = self.sniffed(source, spec)
        if not sniffed.sniffed:
            log.info("%s: not sniffed (%s); read as S3 Select reads it", source.name,
                     sniffed.reason)
            return spec
        columns = TypedColumns.from_config(sniffed.columns, bad_values=BAD_VALUES_ERROR,
                                           sniffed=True)
        return InputSpec(spec.format, spec.compression, spec.options, columns)

    def sniffed(self, source: ObjectSource, spec: InputSpec) -> SniffedJson:
        """What ``source``'s sample says (cached per version)."""
        sample_bytes = self.reading.sample_bytes

        def compute() -> SniffedJson:
            with source.open() as raw, open_decompressed(raw, spec.compression) as stream:
                sample = read_json_sample(stream, sample_bytes)
            if sample is None:
                return SniffedJson(reason=f"no line ends in the first {sample_bytes} bytes")
            return sniff_json_lines(sample)

        version = version_key(source)
        if version is None:
            return compute()
        return self._cache.get(version, compute, "json", spec.compression, sample_bytes)
