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

Where the view would only rename (every column is the file's field as DataFusion reads it: no
conversion, quote or empty-field rule, no missing columns), the file table itself is ``<name>``,
its schema carrying the table's names: DataFusion plans a ``SELECT`` of N columns in time
growing with N squared (seconds at 4,000 columns), a registration in time linear in N.

Byte-range partitions are DataFusion's own file-scan partitions: with ``n`` target partitions
DataFusion cuts a file of ``size`` bytes at multiples of ``ceil(size / n)`` and gives each record
to the range holding its first byte (AWS's ScanRange rule). :func:`native_ranges` computes that
split; the engine plans its endpoints with it and executes range ``i`` as ``ctx.execute(plan,
i)``. ``tests/flight_storage/test_native_csv.py`` pins both facts against the reference reader.

A typed table (configured or sniffed columns, ``formats/typed_columns.py``) gives DataFusion
its types: the file table is exactly as wide as the columns (a wider record is DataFusion's
error, a shorter one NULL-filled) and DataFusion's reader converts the fields itself; the view
names the columns. With ``bad_values`` ``null`` the file table stays Utf8 and the view converts
with ``try_cast`` (a field that does not convert is NULL), and :meth:`NativeCsvTable.bad_values`
counts them for the warning. DataFusion's reader errors (``Error while parsing value 'n/a' as
type 'Int64' for column 1 at line 22``) count lines from the start of the partition's byte
range: :meth:`NativeCsvTable.read_error` turns them into an error naming the object, its line
and the column.

Byte-range partitions are DataFusion's own file-scan partitions: with ``n`` target partitions
DataFusion cuts a file of ``size`` bytes at multiples of ``ceil(size / n)`` and gives each record
to the range holding its first byte (AWS's ScanRange rule). :func:`native_ranges` computes that
split; the engine plans its endpoints with it and executes range ``i`` as ``ctx.execute(plan,
i)``. ``tests/flight_storage/test_native_csv.py`` pins both facts against the reference reader.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from datafusion import SessionContext
from datafusion.options import CsvReadOptions

from flight_storage.errors import InputFormatError
from flight_storage.formats.csv_guard import (
    CsvSurvey,
    doubled_quotes_differ,
    survey_file,
    survey_range,
)
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.typed_columns import BAD_VALUES_NULL, TypedColumns, arrow_type
from flight_storage.protocol import ByteRange, Partition
from flight_storage.storage.sources import (
    DataFusionLocation,
    ObjectSource,
    stop_switch,
    version_key,
)
from flight_storage.storage.version_cache import VersionCache

_SQL_TYPES: tuple[tuple[str, str], ...] = (
    ("int64", "BIGINT"), ("int32", "INT"), ("float64", "DOUBLE"), ("double", "DOUBLE"),
    ("bool", "BOOLEAN"), ("date", "DATE"), ("string", "VARCHAR"),
)
"""A configured type name -> the SQL type ``try_cast`` converts to (``bad_values`` ``null``);
decimals and timestamps are written out in :func:`_try_cast`."""

_READ_ERRORS: tuple[tuple[re.Pattern[str], int], ...] = (
    # (DataFusion's text, what to add to its line number to count from the range's first line)
    (re.compile(r"parsing value '(?P<value>.*?)' as type '\w+' for column (?P<column>\d+) "
                r"at line (?P<line>\d+)", re.S), 1),
    (re.compile(r"Error parsing column (?P<column>\d+) at line (?P<line>\d+): .*?from "
                r"'(?P<value>.*?)'", re.S), 1),
    (re.compile(r"incorrect number of fields for line (?P<line>\d+), expected (?P<width>\d+) "
                r"got (?P<got>\d+)"), 0),
    (re.compile(r"can't parse the string value (?P<value>.*?) to decimal"), 0),
)
"""arrow-csv's errors (checked on DataFusion 55): a value that does not parse (0-based line,
the header counted), a timestamp that does not parse, a record wider than the schema (1-based),
each counting from the first line of the partition's byte range; a decimal that does not parse
(no line, no column: :func:`find_field` looks for the value)."""

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
        return self._cache.get(
            version_key(source),
            lambda: survey_file(source.open(), options, compression, stop_switch(source)),
            key, compression)

    def survey_range(self, source: ObjectSource, options: CsvInputOptions, start: int,
                     stop: int) -> CsvSurvey:
        """The survey of the lines of ``[start, stop)`` of an uncompressed ``source``, computed
        at most once per version (see :func:`~flight_storage.formats.csv_guard.survey_range`)."""
        key = replace(options, empty_is_null=True)
        return self._cache.get(
            version_key(source),
            lambda: survey_range(source.open(), options, start, stop, stop_switch(source)),
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
        columns: the typed table's columns (None: Utf8 ``_1 .. _N``).
        source: the object, for errors (which line a reader error is on).
    """

    location: DataFusionLocation
    options: CsvInputOptions
    survey: CsvSurvey
    width: int
    coalesce_empty: int
    strip_quotes: bool = False
    compression: str = "NONE"
    columns: TypedColumns | None = None
    source: ObjectSource | None = None

    @property
    def signature(self) -> tuple[object, ...]:
        """What DataFusion's plan of this table depends on besides the statement and the
        object's version (a cached physical plan is reused only for an equal signature)."""
        return (type(self).__name__, self.location.url, self.options, self.file_width,
                self.width, self.coalesce_empty, self.strip_quotes, self.survey.quote,
                self.compression, repr(self.columns))

    @property
    def file_width(self) -> int:
        """Columns of the file table: every field of every line fits (a typed table: its
        columns, and a wider record is an error)."""
        if self.columns is not None:
            return len(self.columns.names)
        return max(self.width, self.survey.max_fields, self.survey.header_fields, 1)

    @property
    def converts_in_view(self) -> bool:
        """A typed table whose fields the view converts with ``try_cast`` (``bad_values``
        ``null``) rather than DataFusion's reader."""
        return self.columns is not None and self.columns.bad_values == BAD_VALUES_NULL

    @property
    def object_name(self) -> str:
        """The object's name, for errors."""
        return self.source.name if self.source is not None else self.location.url

    def _file_schema(self) -> pa.Schema:
        if self.columns is None or self.converts_in_view:
            types = [pa.string()] * self.file_width
        else:
            types = list(self.columns.schema.types)
        return pa.schema([pa.field(f"_{i}", t) for i, t in enumerate(types, start=1)])

    def _plain_schema(self) -> pa.Schema | None:
        """The table's schema where every column is the file's field as DataFusion reads it
        (no conversion, quote or empty-field rule in a view), else None. Such a table is
        registered under its own names without a view: DataFusion plans a ``SELECT`` of N
        columns in time growing with the square of N (4,000 columns took seconds)."""
        if self.strip_quotes or self.converts_in_view:
            return None
        if self.columns is None:
            if self.coalesce_empty or self.width != self.file_width:
                return None
            return self._file_schema()
        strings = [i for i, t in enumerate(self.columns.types, start=1)
                   if arrow_type(t) == pa.string()]
        if strings and strings[0] <= self.coalesce_empty:
            return None
        return self.columns.schema

    def register(self, ctx: SessionContext, name: str) -> None:
        """Register the view ``name`` (and the file table ``name_file`` under it) on ``ctx``,
        or the file table as ``name`` where no view is needed (:meth:`_plain_schema`)."""
        plain = self._plain_schema()
        file_table = name if plain is not None else f"{name}_file"
        schema = plain if plain is not None else self._file_schema()
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
        if plain is not None:
            return
        if self.columns is not None:
            ctx.register_view(name, ctx.sql(
                f'SELECT {", ".join(self._typed_columns())} FROM "{file_table}"'))
            return
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

    def _typed_columns(self) -> list[str]:
        """The view's columns of a typed table: named, converted where the view converts,
        the flavour's empty-field and quote rules on string columns."""
        assert self.columns is not None
        out = []
        for i, (column, type_name) in enumerate(
                zip(self.columns.names, self.columns.types, strict=True), start=1):
            field = _quoted(i)
            if arrow_type(type_name) == pa.string():
                if self.strip_quotes:
                    quote = self.survey.quote.replace("'", "''")
                    field = f"nullif(replace({field}, '{quote}', ''), '')"
                if i <= self.coalesce_empty:
                    field = f"coalesce({field}, '')"
            elif self.converts_in_view:
                field = _try_cast(field, type_name)
            out.append(f'{field} AS "{column.replace(chr(34), chr(34) * 2)}"')
        return out

    def bad_values(self, ctx: SessionContext) -> list[tuple[int, int, str]]:
        """``(column, count, example)`` for each typed column with fields the view's
        ``try_cast`` turns to NULL (a ``bad_values`` ``null`` table), counted on ``ctx``."""
        assert self.columns is not None
        assert self.converts_in_view
        self.register(ctx, "checked")
        typed = [(i, t) for i, t in enumerate(self.columns.types, start=1)
                 if arrow_type(t) != pa.string()]
        if not typed:
            return []
        bad = {i: f'"_{i}" IS NOT NULL AND {_try_cast(_quoted(i), t)} IS NULL' for i, t in typed}
        parts = ", ".join(f'sum(CASE WHEN {bad[i]} THEN 1 ELSE 0 END) AS "n{i}", '
                          f'min(CASE WHEN {bad[i]} THEN "_{i}" END) AS "e{i}"' for i, _ in typed)
        counts = ctx.sql(f'SELECT {parts} FROM "checked_file"').to_pylist()[0]
        return [(i, int(counts[f"n{i}"]), str(counts[f"e{i}"])) for i, _ in typed
                if counts[f"n{i}"]]

    # -- how a plan's endpoints map onto DataFusion's partitions (shared with Parquet's table)
    def endpoint_split(self, size: int, count: int) -> tuple[int, list[Any]]:
        """DataFusion's partitions of the object when asked for ``count``, and the piece each
        reads: its byte ranges."""
        return count, list(native_ranges(size, count))

    @staticmethod
    def piece(partition: Partition) -> Any | None:
        """The piece a plan's partition reads (a byte range), or None."""
        if not isinstance(partition, ByteRange):
            return None
        return (partition.start, partition.end)

    def whole_partitions(self, cores: int) -> int:
        """Partitions to read the whole object on ``cores`` cores."""
        return cores

    def explainer(self, size: int, partitions: int, start: int | None
                  ) -> Callable[[str], InputFormatError | None]:
        """What names a DataFusion error of one range (starting at ``start``) or of the
        whole object read in ``partitions`` ranges: its line and column."""
        starts = ([start] if start is not None
                  else [lo for lo, _ in native_ranges(size, partitions)])
        return functools.partial(self.read_error, range_starts=starts)

    def read_error(self, text: str, range_starts: list[int]) -> InputFormatError | None:
        """DataFusion's reader error ``text`` as an error naming the object, its line and the
        column, or None when it is not one.

        Args:
            text: the error's text.
            range_starts: where the byte ranges start that the failing partition may be (one
                when the plan executed one range; every range when DataFusion read the file
                on several cores): the line the error names is the one of those candidates
                whose text holds the value (or is too wide).
        """
        matched = next(((m.groupdict(), shift) for pattern, shift in _READ_ERRORS
                        if (m := pattern.search(text)) is not None), None)
        if matched is None:
            return None
        found, shift = matched
        if "line" not in found:  # a decimal: where is the value?
            assert self.columns is not None
            decimals = [i for i, t in enumerate(self.columns.types, start=1)
                        if pa.types.is_decimal(arrow_type(t))]
            where = None if self.compression != "NONE" or self.source is None else find_field(
                self.source, found["value"], decimals, self.options.field_delimiter)
            line, column = where if where is not None else (None, decimals[0])
            return self.columns.bad_value(self.object_name, line, column, found["value"])
        relative = int(found["line"]) + shift
        if "width" in found:
            width = int(found["width"])
            delimiter = self.options.field_delimiter.encode()
            line = self._locate(range_starts, relative, lambda row: row.count(delimiter) >= width)
            return InputFormatError(
                f"{self.object_name}: {_at(line)}a record has {found['got']} fields; the table "
                f"has {width} columns", code="CSVParsingError", line=line, column=width + 1)
        assert self.columns is not None  # a Utf8 file table has no value to parse
        value = found["value"]
        line = self._locate(range_starts, relative,
                            lambda row: value.encode("utf-8", "replace") in row)
        return self.columns.bad_value(self.object_name, line, int(found["column"]) + 1, value)

    def _locate(self, range_starts: list[int], relative: int,
                matches: Callable[[bytes], bool]) -> int | None:
        if self.compression != "NONE" or self.source is None:  # one partition from line 1
            return relative
        return locate_line(self.source, range_starts, relative, matches)


def _at(line: int | None) -> str:
    return f"line {line}: " if line is not None else ""


def locate_line(source: ObjectSource, range_starts: list[int], relative: int,
                matches: Callable[[bytes], bool]) -> int | None:
    """The line of ``source`` (1-based) that is line ``relative`` of a byte range starting at
    one of ``range_starts`` (a range's first line is the first one starting at or after its
    start) and whose text ``matches``; the first candidate when none does. One pass over the
    object, on an error's path only."""
    pending = sorted(range_starts)
    candidates: list[int] = []
    offset = 0
    with source.open() as stream:
        for number, row in enumerate(stream, start=1):
            while pending and pending[0] <= offset:
                pending.pop(0)
                candidates.append(number - 1 + relative)
            if number in candidates and matches(row):
                return number
            if not pending and number >= max(candidates, default=0):
                break
            offset += len(row)
    return candidates[0] if candidates else None


def find_field(source: ObjectSource, value: str, columns: list[int], delimiter: str
               ) -> tuple[int, int] | None:
    """The first ``(line, column)`` of ``source`` (both 1-based) where one of ``columns`` holds
    exactly ``value`` (quoted or not), or None: the place of an error that names only the
    value. One pass over the object, on an error's path only."""
    needle = value.encode("utf-8", "replace")
    sep = delimiter.encode("utf-8")
    with source.open() as stream:
        for number, row in enumerate(stream, start=1):
            if needle not in row:
                continue
            fields = row.rstrip(b"\r\n").split(sep)
            for column in columns:
                if column <= len(fields) and fields[column - 1].strip(b'"') == needle:
                    return number, column
    return None


def _quoted(index: int) -> str:
    return f'"_{index}"'


def _try_cast(field: str, type_name: str) -> str:
    """SQL that converts the Utf8 ``field`` to a configured type, NULL where it cannot."""
    data_type = arrow_type(type_name)
    if pa.types.is_timestamp(data_type):
        return (f"arrow_cast(try_cast({field} AS TIMESTAMP), "
                f"'Timestamp({_UNITS[data_type.unit]}, Some(\"{data_type.tz}\"))')")
    if pa.types.is_decimal(data_type):
        return f"try_cast({field} AS DECIMAL({data_type.precision}, {data_type.scale}))"
    sql = dict(_SQL_TYPES)[type_name.strip().lower()]
    return f"try_cast({field} AS {sql})"


_UNITS = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


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
        columns: the typed table's columns, if it is one.
        source: the object, for errors.
    """

    location: DataFusionLocation
    options: CsvInputOptions
    width: int
    compression: str = "NONE"
    columns: TypedColumns | None = None
    source: ObjectSource | None = None

    def resolve(self, survey: CsvSurvey) -> tuple[NativeCsvTable | None, str]:
        """The native table for the surveyed range, or None and why not."""
        return native_csv_table(self.location, self.options, survey, width=self.width,
                                compression=self.compression, columns=self.columns,
                                source=self.source)


def native_csv_table(
    location: DataFusionLocation,
    options: CsvInputOptions,
    survey: CsvSurvey,
    *,
    width: int,
    compression: str = "NONE",
    columns: TypedColumns | None = None,
    source: ObjectSource | None = None,
) -> tuple[NativeCsvTable | None, str]:
    """The native table for a query reading ``width`` columns, or None and the reason why not.

    Args:
        location: where DataFusion reads the object.
        options: the request's CSV options (flavour rules included).
        survey: the object's survey under ``options``.
        width: columns ``_1 .. _width`` the query's table has.
        compression: the request's CompressionType.
        columns: the typed table's columns, if it is one.
        source: the object, for errors.
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
    strip = survey.doubled_quotes and doubled_quotes_differ(options)
    return NativeCsvTable(location, options, survey, width, coalesce_empty, strip,
                          compression, columns, source), ""
