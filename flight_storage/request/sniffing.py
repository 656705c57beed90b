"""Which tables a Flight SQL statement reads with a sniffed header and types, and the cache of
what each object's sample says.

On the standard surface (the ``standard`` flavour, the default of Flight SQL statements) a CSV
object that no entry of the bucket's ``.flight-select.json`` covers is read as its first
records show it (:mod:`flight_storage.formats.csv_sniff`): columns named by the header, typed.
Everything else keeps S3 Select's reading (no header, every field a string ``_1 .. _N``):

| the table | sniffed? |
|---|---|
| an S3 request (over Flight or the S3 door), or a statement in the ``ceph``/``aws`` flavour | no: S3 Select's semantics |
| a statement giving ``FileHeaderInfo`` in ``WITH (...)`` | no: the statement says how to read it |
| an object a configuration entry covers | only when the entry says ``"sniff": true`` (the entry's ``FileHeaderInfo`` then wins over the sniffed header); ``columns`` win over any sniffing |
| any other CSV object, server started without ``--no-sniff`` | when its first record is a header (it breaks a column's type): a headerless object keeps S3 Select's reading, since its columns can only be named ``_1 .. _N``, S3 Select's positional strings, and typing them would change what ``_1 = '7'`` means |

A prefix table's objects share the schema sniffed from its first object. What a sample says is
kept per object version and read options in a
:class:`~flight_storage.storage.version_cache.VersionCache`,
so an object is sniffed once until it changes.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from typing import Any

from flight_storage.errors import InputFormatError
from flight_storage.execution.plan_types import EngineConfig, InputSpec
from flight_storage.formats.compression import open_decompressed
from flight_storage.formats.csv_input import peek_width
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.csv_sniff import SniffedTable, TableReading, read_sample, sniff_csv
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.request.json_sniffing import JsonTableSniffer
from flight_storage.storage.catalog import TableConfig
from flight_storage.storage.sources import ObjectSource, version_key
from flight_storage.storage.version_cache import VersionCache
from select_dialect.flavors import FLAVORS, STANDARD

log = logging.getLogger(__name__)

_HEADER_INFO = {"USE": True, "IGNORE": True, "NONE": False}
_PEEK_BYTES = 4 << 10
"""Bytes the first record's width is counted in at a time (the whole sample would cost the
tokenizer every record of it, where the first is all that is asked)."""
_SAMPLE_READING = FLAVORS[STANDARD].reading
"""The reading rules a sample is sniffed under: the standard surface's, whose statements read
sniffed tables (``Flavor.sniffs_csv_tables``)."""


class TableSniffer:
    """Sniffs CSV objects for the standard surface, once per object version.

    Args:
        reading: the server's settings.
        max_entries: sniffed objects kept; the least recently used go first.
        max_columns: widest first record sniffed (``--max-columns``): a wider object is read
            as S3 Select reads it, so its statements name the fields they need (``_N``), and
            the limit is checked before anything costs the width.
    """

    def __init__(self, reading: TableReading | None = None, max_entries: int = 4096,
                 max_columns: int = EngineConfig.max_columns) -> None:
        self.reading = reading or TableReading()
        self.max_columns = max_columns
        self._cache: VersionCache[SniffedTable] = VersionCache(max_entries)
        self.json = JsonTableSniffer(self.reading, max_entries)
        """JSON Lines tables' columns (``json_sniffing.py``)."""

    @property
    def sniffs(self) -> int:
        """Objects sniffed (not served from the cache); tests read it."""
        return self._cache.computed

    def applies(self, flavor: str) -> bool:
        """Whether statements in ``flavor`` read sniffed tables (``Flavor.sniffs_csv_tables``)."""
        return self.reading.sniff and FLAVORS[flavor].sniffs_csv_tables

    def typed_spec(self, source: ObjectSource, spec: InputSpec, entry: TableConfig | None,
                   overrides: Mapping[str, Any] | None) -> InputSpec:
        """``spec`` with the sniffed header and columns of ``source`` where the table's rule
        (see the module's table) says so, else ``spec`` unchanged.

        Args:
            source: the object (a prefix table's first object).
            spec: its InputSerialization from the key, the configuration and the statement.
            entry: the configuration entry covering it, if any.
            overrides: the statement's ``WITH (...)`` options.
        """
        if spec.format == "json":
            return self.json.typed_spec(source, spec, entry, overrides)
        if spec.format != "csv" or spec.columns is not None:
            return spec
        if entry is not None and not entry.sniff:
            return spec
        if "FileHeaderInfo" in dict((overrides or {}).get("CSV") or {}):
            return spec
        configured = entry.input_serialization.get("CSV") if entry is not None else None
        header_info = str(dict(configured or {}).get("FileHeaderInfo", "")).upper()
        header = _HEADER_INFO.get(header_info)
        sniffed = self.sniffed(source, spec, header)
        if not sniffed.sniffed:
            log.info("%s: not sniffed (%s); read as S3 Select reads it", source.name,
                     sniffed.reason)
            return spec
        if entry is None and not sniffed.has_header:
            return spec
        bad_values = (entry.bad_values if entry is not None else None) or self.reading.bad_values
        columns = TypedColumns.from_config(sniffed.columns, bad_values=bad_values, sniffed=True)
        options = {**spec.options, "FileHeaderInfo": "USE" if sniffed.has_header else "NONE"}
        return InputSpec(spec.format, spec.compression, options, columns)

    def sniffed(self, source: ObjectSource, spec: InputSpec, header: bool | None
                ) -> SniffedTable:
        """What ``source``'s sample says under ``spec``'s options (cached per version)."""
        options = CsvInputOptions.from_request(spec.options, _SAMPLE_READING)

        def compute() -> SniffedTable:
            with source.open() as raw, open_decompressed(raw, spec.compression) as stream:
                sample = read_sample(stream, options, self.reading.sample_bytes)
            if sample is None:
                return SniffedTable(
                    reason=f"no record ends in the first {self.reading.sample_bytes} bytes")
            try:
                width = peek_width(io.BytesIO(sample), options, rows=1, block_size=_PEEK_BYTES)
            except InputFormatError:  # pyarrow's reading of the sample says what is wrong
                width = 0
            if width > self.max_columns:
                return SniffedTable(reason=f"a record of {width} fields (over --max-columns "
                                           f"{self.max_columns})")
            return sniff_csv(sample, options, header=header)

        version = version_key(source)
        if version is None:
            return compute()
        return self._cache.get(version, compute, options, spec.compression, header,
                               self.reading.sample_bytes)
