"""DataFusion's own CSV reader as the table ``s3object``, where a survey proves it exact.

:func:`flight_storage.formats.csv_guard.survey_file` proves (or refuses) that DataFusion reads
an object exactly as the s3-select rules do; :class:`SurveyCache` keeps that verdict per object
version, so a hot object is surveyed once. :func:`native_csv_table` combines the verdict with
what one query needs (how many columns, the flavour's empty-field rule) and
:meth:`NativeCsvTable.register` gives DataFusion the table:

* ``<name>_file``: the file through ``CsvReadOptions``, every column Utf8, as wide as the widest
  record (DataFusion refuses records wider than its schema; shorter ones are NULL-filled);
* ``<name>``: a view with exactly the query's ``_1 .. _N``. In the ``aws`` flavour an empty
  field is ``""`` where DataFusion reads NULL, so columns every record has are
  ``coalesce(_i, '')``; columns no record has are NULL in both readers.

Byte-range partitions are DataFusion's own file-scan partitions: with ``n`` target partitions
DataFusion cuts a file of ``size`` bytes at multiples of ``ceil(size / n)`` and gives each record
to the range holding its first byte (AWS's ScanRange rule). :func:`native_ranges` computes that
split; the engine plans its endpoints with it and executes range ``i`` as ``ctx.execute(plan,
i)``. ``tests/flight_storage/test_native_csv.py`` pins both facts against the reference reader.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa
from datafusion import SessionContext
from datafusion.options import CsvReadOptions

from flight_storage.formats.csv_guard import CsvSurvey, survey_file, survey_range
from flight_storage.formats.csv_input import RULES_CEPH, CsvInputOptions
from flight_storage.storage.sources import DataFusionLocation, ObjectSource, version_key
from flight_storage.storage.version_cache import VersionCache

_COMPRESSION = {"NONE": "", "GZIP": "gzip", "BZIP2": "bz2", "ZSTD": "zstd"}
"""DataFusion's name of each CompressionType the native path takes (concatenated members and
frames included: checked on 55.0 for all three). A compressed object is one partition: neither
reader can start inside a compressed stream."""


def reads_compression(compression: str) -> bool:
    """Whether the native path takes objects of this CompressionType (else no survey)."""
    return compression in _COMPRESSION


def native_ranges(size: int, count: int) -> list[tuple[int, int]]:
    """DataFusion's split of a ``size``-byte file into ``count`` ranges (end exclusive)."""
    if count <= 1 or size == 0:
        return [(0, size)]
    step = -(-size // count)
    return [(lo, min(lo + step, size)) for lo in range(0, size, step)]


class SurveyCache:
    """Surveys by object version and read options (a :class:`VersionCache`).

    Args:
        max_entries: surveys kept; the least recently used go first.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: VersionCache[CsvSurvey] = VersionCache(max_entries)

    @property
    def surveys(self) -> int:
        """Surveys computed (not served from the cache); tests and benchmarks read it."""
        return self._cache.computed

    def survey(self, source: ObjectSource, options: CsvInputOptions,
               compression: str) -> CsvSurvey:
        """The survey of ``source`` as it is now, computed at most once per version. The survey
        reads the record layout, not how an empty field is read, so one survey serves both."""
        key = replace(options, empty_is_null=True)
        return self._cache.get(version_key(source),
                               lambda: survey_file(source.open(), options, compression),
                               key, compression)

    def survey_range(self, source: ObjectSource, options: CsvInputOptions, start: int,
                     stop: int) -> CsvSurvey:
        """The survey of the lines of ``[start, stop)`` of an uncompressed ``source``, computed
        at most once per version (see :func:`~flight_storage.formats.csv_guard.survey_range`)."""
        key = replace(options, empty_is_null=True)
        return self._cache.get(version_key(source),
                               lambda: survey_range(source.open(), options, start, stop),
                               key, "NONE", start, stop)


@dataclass(frozen=True)
class NativeCsvTable:
    """How DataFusion reads one object for one query.

    Attributes:
        location: where DataFusion reads the object.
        options: the request's CSV options.
        survey: what the survey found (native).
        width: columns the query's table has (``_1 .. _width``).
        coalesce_empty: columns ``1 .. coalesce_empty`` read ``""`` for an empty field.
        strip_quotes: remove the quotes DataFusion kept from doubled quotes (Ceph's rules read
            ``"a""b"`` as ``ab``; a field left empty is NULL).
        compression: the request's CompressionType (the survey read the decompressed bytes).
    """

    location: DataFusionLocation
    options: CsvInputOptions
    survey: CsvSurvey
    width: int
    coalesce_empty: int
    strip_quotes: bool = False
    compression: str = "NONE"

    @property
    def file_width(self) -> int:
        """Columns of the file table: every field of every line fits."""
        return max(self.width, self.survey.max_fields, self.survey.header_fields, 1)

    def register(self, ctx: SessionContext, name: str) -> None:
        """Register the view ``name`` (and the file table ``name_file`` under it) on ``ctx``."""
        file_table = f"{name}_file"
        schema = pa.schema(
            [pa.field(f"_{i}", pa.string()) for i in range(1, self.file_width + 1)]
        )
        options = CsvReadOptions(
            has_header=self.options.has_header,
            delimiter=self.options.field_delimiter,
            quote=self.survey.quote,
            schema=schema,
            # DataFusion filters a table's files by this suffix; the whole name always matches
            file_extension=self.location.url.rsplit("/", 1)[-1],
            truncated_rows=True,
            file_compression_type=_COMPRESSION[self.compression],
        )
        self.location.register(ctx)
        ctx.register_csv(file_table, self.location.url, options=options)
        columns = []
        for i in range(1, self.width + 1):
            if i > self.file_width:
                columns.append(f'CAST(NULL AS VARCHAR) AS "_{i}"')
            elif self.strip_quotes:
                # Ceph's quote toggling: doubled quotes vanish and what is left empty is an
                # empty field: NULL, or '' where empty fields are kept
                quote = self.survey.quote.replace("'", "''")
                stripped = f"replace(\"_{i}\", '{quote}', '')"
                kept = (f"coalesce({stripped}, '')" if i <= self.coalesce_empty
                        else f"nullif({stripped}, '')")
                columns.append(f'{kept} AS "_{i}"')
            elif i <= self.coalesce_empty:
                columns.append(f"coalesce(\"_{i}\", '') AS \"_{i}\"")
            else:
                columns.append(f'"_{i}"')
        ctx.register_view(name, ctx.sql(f'SELECT {", ".join(columns)} FROM "{file_table}"'))


@dataclass(frozen=True)
class DeferredCsvTable:
    """DataFusion's reader for an object that is not on this machine (an object store's):
    planning reads only the header, and each byte range is surveyed when it is read
    (:meth:`SurveyCache.survey_range`), then read by DataFusion where its survey allows
    (:meth:`resolve`) and by the reference reader where it does not.

    Attributes:
        location: where DataFusion reads the object.
        options: the request's CSV options.
        width: columns the query's table has (``_1 .. _width``).
        compression: the request's CompressionType (a compressed object is one range).
    """

    location: DataFusionLocation
    options: CsvInputOptions
    width: int
    compression: str = "NONE"

    def resolve(self, survey: CsvSurvey) -> tuple[NativeCsvTable | None, str]:
        """The native table for the surveyed range, or None and why not."""
        return native_csv_table(self.location, self.options, survey, width=self.width,
                                compression=self.compression)


def native_csv_table(
    location: DataFusionLocation,
    options: CsvInputOptions,
    survey: CsvSurvey,
    *,
    width: int,
    compression: str = "NONE",
) -> tuple[NativeCsvTable | None, str]:
    """The native table for a query reading ``width`` columns, or None and the reason why not.

    Args:
        location: where DataFusion reads the object.
        options: the request's CSV options (flavour rules included).
        survey: the object's survey under ``options``.
        width: columns ``_1 .. _width`` the query's table has.
        compression: the request's CompressionType.
    """
    if not survey.native:
        return None, survey.reason
    if compression not in _COMPRESSION:
        return None, f"{compression} input"
    coalesce_empty = 0
    if not options.empty_is_null:
        # An empty field is "" and a missing one NULL; DataFusion reads both as NULL, so a
        # column that some records have and others lack cannot be read natively.
        low, high = survey.min_fields, survey.max_fields
        if low < min(width, high):
            return None, (
                f"records of {low} to {high} fields and a query reading {width} columns "
                "(empty and missing fields differ in this flavour)"
            )
        coalesce_empty = min(width, low)
    strip = survey.doubled_quotes and options.rules == RULES_CEPH and options.escape != options.quote
    return NativeCsvTable(location, options, survey, width, coalesce_empty, strip,
                          compression), ""
