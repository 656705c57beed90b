"""DataFusion's own Parquet reader as the table ``s3object``, where it reads what the reference
reader reads.

The reference reader (pyarrow's dataset, fed to DataFusion through
:mod:`flight_storage.execution.streaming_dataset`) decides the types of a Parquet object's
columns; DataFusion's reader may decide others for the same file (an INT96 timestamp is
``timestamp[ns]`` to pyarrow and whatever the file's Arrow schema says to DataFusion; string
columns are views unless told otherwise). :func:`native_parquet_table` asks DataFusion for the
table's schema and takes the native path only when it equals the plan's, so a value reaches the
query with the same type, and the same s3-select reading, whichever reader served it. Where the
only difference is a view type the file's own Arrow schema asks for (tpchgen writes
``string_view``), DataFusion is given the plan's schema and casts the views to plain strings,
which loses nothing.

Floating-point NaN is the one value the two read differently (checked on 55.0): the reference
hands a filter to pyarrow, where ``NaN > 1.5`` is false, and DataFusion orders NaN above every
number, so ``NaN > 1.5`` is true there; DataFusion also answers ``max(f)`` from the footer's
statistics, which leave NaN out. :class:`NanSurvey` reads an object's floating-point columns
once per object version and the native path is refused where one holds a NaN.

Endpoints are DataFusion's own file-scan partitions. With ``n`` target partitions DataFusion
cuts the file at multiples of ``ceil(size / n)`` (as it does a CSV file,
:func:`~flight_storage.execution.native_csv.native_ranges`) and a row group belongs to the range
holding the offset of its first column chunk's first page (the dictionary page when there is
one). No API tells which row groups a partition reads, so :func:`row_group_split` works it out
from the footer; ``tests/flight_storage/test_native_parquet.py`` pins the rule against
DataFusion (a file where the rule and the row group's midpoint disagree). Ranges that hold no
row group are not endpoints; the rest keep the file's order, so the endpoints read in order give
every record once and in order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datafusion import SessionConfig, SessionContext

from flight_storage.errors import StoppedError
from flight_storage.execution.native_csv import native_ranges
from flight_storage.protocol import Partition, RowGroups
from flight_storage.storage.sources import (
    DataFusionLocation,
    ObjectSource,
    random_access,
    stop_switch,
    version_key,
)
from flight_storage.storage.version_cache import VersionCache

SESSION_SETTINGS: tuple[tuple[str, str], ...] = (
    # plain Utf8 as pyarrow reads it (views are DataFusion 55's default)
    ("datafusion.execution.parquet.schema_force_view_types", "false"),
    # evaluate the filter while decoding: rows that fail it are never materialised
    ("datafusion.execution.parquet.pushdown_filters", "true"),
    ("datafusion.execution.parquet.reorder_filters", "true"),
    # one 64 KiB read finds most footers (DataFusion 55 asks for 512 KiB, which over an object
    # store is what planning reads, twice); a larger footer costs a second read
    ("datafusion.execution.parquet.metadata_size_hint", "65536"),
)
"""Session settings the native Parquet path relies on (harmless to the other readers)."""


def row_group_starts(metadata: pq.FileMetaData) -> list[int]:
    """The byte offset DataFusion places each row group at: its first column chunk's first
    page (the dictionary page when there is one)."""
    starts = []
    for index in range(metadata.num_row_groups):
        chunk = metadata.row_group(index).column(0)
        starts.append(chunk.dictionary_page_offset if chunk.has_dictionary_page
                      else chunk.data_page_offset)
    return starts


def row_groups_starting_in(starts: list[int], lo: int, hi: int) -> list[int]:
    """The row groups whose start (see :func:`row_group_starts`) lies in ``[lo, hi)``.

    The one rule for both DataFusion's file-scan partitions and S3's Parquet ScanRange
    ("row groups that start within the scan range")."""
    return [g for g, start in enumerate(starts) if lo <= start < hi]


def row_group_split(starts: list[int], size: int, count: int) -> list[tuple[int, ...]]:
    """The row groups each of DataFusion's ``count`` byte ranges of a ``size``-byte file reads
    (empty tuples for ranges that hold no row group's start)."""
    return [tuple(row_groups_starting_in(starts, lo, hi)) for lo, hi in native_ranges(size, count)]


@dataclass(frozen=True)
class NativeParquetTable:
    """How DataFusion reads one Parquet object.

    Attributes:
        location: where DataFusion reads the object.
        size: its size in bytes (what DataFusion splits).
        starts: each row group's offset (see :func:`row_group_starts`).
        schema: the schema DataFusion is told to read (views cast to plain types), or None
            for the file's own.
    """

    location: DataFusionLocation
    size: int
    starts: tuple[int, ...]
    schema: pa.Schema | None = None

    def register(self, ctx: SessionContext, name: str) -> None:
        """Register the file as table ``name`` on ``ctx``."""
        # DataFusion filters a table's files by this suffix; the whole name always matches
        self.location.register(ctx)
        ctx.register_parquet(name, self.location.url,
                             file_extension=self.location.url.rsplit("/", 1)[-1],
                             schema=self.schema)

    @property
    def signature(self) -> tuple[object, ...]:
        """What DataFusion's plan of this table depends on besides the statement and the
        object's version (a cached physical plan is reused only for an equal signature)."""
        return (type(self).__name__, self.location.url, self.size,
                None if self.schema is None else self.schema.to_string())

    def endpoint_split(self, size: int, count: int) -> tuple[int, list[Any]]:  # noqa: ARG002 - NativeCsvTable.endpoint_split (the native tables share it)
        """DataFusion's partitions of the file when asked for about ``count`` (see
        :meth:`partition_count`), and the row groups each reads."""
        chosen = self.partition_count(count)
        return chosen, list(self.split(chosen))

    @staticmethod
    def piece(partition: Partition) -> Any | None:
        """The piece a plan's partition reads (row groups), or None."""
        return partition.row_groups if isinstance(partition, RowGroups) else None

    def whole_partitions(self, cores: int) -> int:
        """Partitions to read the whole file on ``cores`` cores."""
        return self.partition_count(cores)

    def explainer(self, size: int, partitions: int, start: int | None) -> None:
        """DataFusion's Parquet errors need no position: :func:`engine_error` names them."""

    def split(self, count: int) -> list[tuple[int, ...]]:
        """Row groups of each of ``count`` DataFusion partitions of the file."""
        return row_group_split(list(self.starts), self.size, count)

    def partition_count(self, wanted: int) -> int:
        """The smallest DataFusion partition count (``wanted`` to ``2 * wanted``) that puts
        row groups in ``wanted`` partitions; failing that, the one that puts them in the
        most, the smallest of equals.

        Row groups rarely line up with equal cuts: tpchgen's two row groups of a 3.9 MB file
        both start in the first half, so two partitions would read everything in one and
        nothing in the other; three cuts give each its own. A file of many row groups (a
        decoded-cache entry has one per 131,072 rows) gets ``wanted``, not twice as many
        endpoints, each of which has a fixed cost (issue 37)."""
        if wanted <= 1:
            return 1
        spread = {count: sum(1 for groups in self.split(count) if groups)
                  for count in range(wanted, 2 * wanted + 1)}
        enough = [count for count in sorted(spread) if spread[count] >= wanted]
        if enough:
            return enough[0]
        return max(spread, key=lambda count: (spread[count], -count))


def _holds_float(data_type: pa.DataType) -> bool:
    if pa.types.is_floating(data_type):
        return True
    return any(_holds_float(data_type.field(i).type) for i in range(data_type.num_fields))


class NanSurvey:
    """Which objects hold a floating-point NaN, by object version (a :class:`VersionCache`).

    Args:
        max_entries: verdicts kept; the least recently used go first.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._cache: VersionCache[str] = VersionCache(max_entries)

    @property
    def surveys(self) -> int:
        """Objects read (not served from the cache); tests read it."""
        return self._cache.computed

    def reason(self, source: ObjectSource, schema: pa.Schema,
               row_groups: tuple[int, ...] | None = None) -> str:
        """Why the native reader would differ (a column holding NaN), or ``""``: in the whole
        object, or in ``row_groups`` only (an object store's object is surveyed partition by
        partition as it is read, never whole to plan)."""
        floats = [f.name for f in schema if _holds_float(f.type)]
        if not floats:
            return ""
        return self._cache.get(version_key(source),
                               lambda: _nan_reason(source, schema, floats, row_groups),
                               row_groups)


def _nan_reason(source: ObjectSource, schema: pa.Schema, floats: list[str],
                row_groups: tuple[int, ...] | None) -> str:
    nested = [name for name in floats if not pa.types.is_floating(schema.field(name).type)]
    if nested:
        return f"column {nested[0]} nests floating-point values (NaN is not surveyed there)"
    with random_access(source) as file:
        parquet = pq.ParquetFile(file)
        groups = list(row_groups) if row_groups is not None else None
        stop = stop_switch(source)
        for batch in parquet.iter_batches(batch_size=1 << 16, columns=floats,
                                          row_groups=groups):
            if stop is not None and stop.is_set():
                raise StoppedError("survey stopped: its query ended")
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                if pc.any(pc.is_nan(column)).as_py():
                    return f"column {name} holds NaN (DataFusion orders it above every number)"
    return ""


def native_parquet_table(
    location: DataFusionLocation, size: int, metadata: pq.FileMetaData, schema: pa.Schema
) -> tuple[NativeParquetTable | None, str]:
    """The native table of one object, or None and the reason why not.

    Args:
        location: where DataFusion reads the object.
        size: its size in bytes.
        metadata: its footer (as the reference reader saw it).
        schema: the table schema the plan was made for (the reference reader's types).
    """
    starts = row_group_starts(metadata)
    if any(b <= a for a, b in itertools.pairwise(starts)):
        return None, "row groups are not stored in file order"
    table = NativeParquetTable(location, size, tuple(starts))
    native_schema = _schema_of(table)
    if _views_aside(native_schema, schema):
        table = NativeParquetTable(table.location, table.size, table.starts, schema)
        native_schema = _schema_of(table)
    if not native_schema.equals(schema, check_metadata=False):
        differ = [f"{a.name} ({a.type} vs {b.type})"
                  for a, b in zip(native_schema, schema, strict=False) if not a.equals(b)]
        return None, "DataFusion reads other column types: " + (", ".join(differ[:3])
                                                               or "other columns")
    return table, ""


_PLAIN = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary(),
          pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
"""The plain type the reference reader gives each view (or large) type."""


def _views_aside(native: pa.Schema, expected: pa.Schema) -> bool:
    """True when ``native`` differs from ``expected`` and only by view (or large) types."""
    if native.names != expected.names or native.equals(expected, check_metadata=False):
        return False
    return all(
        a.nullable == b.nullable and _PLAIN.get(a.type, a.type) == b.type
        for a, b in zip(native, expected, strict=True)
    )


def _schema_of(table: NativeParquetTable) -> pa.Schema:
    """The schema DataFusion reads ``table`` with (the footer only)."""
    config = SessionConfig()
    for key, value in SESSION_SETTINGS:
        config = config.set(key, value)
    ctx = SessionContext(config)
    table.register(ctx, "probe")
    return pa.schema(ctx.table("probe").schema())
