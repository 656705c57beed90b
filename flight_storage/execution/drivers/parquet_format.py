"""Parquet: DataFusion's own Parquet reader (filter pushdown, statistics and page-index pruning,
late materialisation) where it reads what the reference reader reads
(``execution/native_parquet.py``), groups of row groups as partitions, and the reference reader
(pyarrow's dataset, projection and filter pushed, row groups pruned by statistics) otherwise."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from flight_storage.errors import InputFormatError
from flight_storage.execution.drivers.base import prefix_reason
from flight_storage.execution.engine_errors import guard_reader
from flight_storage.execution.native_parquet import (
    NativeParquetTable,
    native_parquet_table,
    row_group_starts,
    row_groups_starting_in,
)
from flight_storage.execution.plan_types import (
    TABLE,
    InputSpec,
    PlannedPartition,
    SelectPlan,
    dialect_type,
    without_views,
)
from flight_storage.execution.session import READ_ONLY, new_session
from flight_storage.execution.streaming_dataset import ScanFunction, generic_scan
from flight_storage.formats.scan_range import scan_bounds
from flight_storage.protocol import ByteRange, Partition, RowGroups, WholeObject
from flight_storage.storage.sources import (
    ObjectSource,
    datafusion_location,
    random_access,
    version_key,
)
from flight_storage.storage.store_errors import pyarrow_store_error
from select_dialect import Column, Translation

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine
    from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable


class ParquetDriver:
    """The Parquet format driver (see the module docstring)."""

    # ------------------------------------------------------------------ planning
    def translate(self, engine: SelectEngine, expression: str,
                  sources: tuple[ObjectSource, ...], input: InputSpec, flavor: str  # noqa: ARG002 - FormatDriver.translate
                  ) -> tuple[Translation, pa.Schema, list[str] | None]:
        file_schema = without_views(metadata(engine, sources[0]).schema.to_arrow_schema())
        columns = [Column(f.name, dialect_type(f.type)) for f in file_schema]
        translation = engine.translate(expression, input_format="parquet", flavor=flavor,
                                       columns=columns)
        return translation, file_schema, None

    def partitions(self, engine: SelectEngine, source: ObjectSource, input: InputSpec,  # noqa: ARG002 - FormatDriver.partitions
                   scan_range: tuple[int, int] | None,
                   wanted: int | None  # noqa: ARG002 - the reference reader's groups of row_groups_per_partition
                   ) -> tuple[PlannedPartition, ...]:
        footer = metadata(engine, source)
        if scan_range is not None:
            # the range itself, read as the row groups starting inside it (AWS's rule)
            start, stop = scan_bounds(scan_range, source.size)
            groups = row_groups_starting_in(row_group_starts(footer), start, stop)
            return (_planned(ByteRange(start, stop), footer, groups),)
        every = list(range(footer.num_row_groups))
        step = max(1, engine.config.row_groups_per_partition)
        return tuple(
            _planned(RowGroups(tuple(every[i:i + step])), footer,
                     every[i:i + step])
            for i in range(0, len(every), step)
        ) or (PlannedPartition(WholeObject(), bytes=0, rows=0),)

    def with_native(self, engine: SelectEngine, plan: SelectPlan,
                    scan_range: tuple[int, int] | None) -> SelectPlan:
        """The plan served by DataFusion's Parquet reader, its endpoints DataFusion's
        partitions, or the plan as it is with the reason why not."""
        if scan_range is not None:
            # DataFusion's Python API cuts a file only into equal ranges it chooses; the range
            # asked for rarely is one of them, and the reference reader reads exactly the
            # chosen row groups, so it serves every ScanRange request.
            return dataclasses.replace(plan, native_reason="a ScanRange request")
        if not engine.config.native_readers:
            return dataclasses.replace(plan, native_reason="native readers are off")
        if len(plan.sources) != 1:
            return dataclasses.replace(plan, native_reason=prefix_reason(plan))
        location = datafusion_location(plan.source)
        if location is None:
            return dataclasses.replace(plan, native_reason="not a stored object")
        footer = metadata(engine, plan.source)
        try:
            native, reason = native_parquet_table(location, plan.source.size, footer,
                                                  plan.input_schema)
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            return dataclasses.replace(plan, native_reason=f"DataFusion cannot read it ({exc})")
        if native is None:
            return dataclasses.replace(plan, native_reason=reason)
        if location.local:  # an object store's object is surveyed per partition as it is read
            reason = _nan_reason(engine, plan, None)
            if reason:
                return dataclasses.replace(plan, native_reason=reason)
        count = native.partition_count(engine.range_count(native.size,
                                                          plan.wanted_parallelism))
        if count > 1 and _datafusion_partitions(engine, plan, native, count) != count:
            count = 1  # DataFusion keeps this query's scan whole (see below)
        partitions = tuple(
            _planned(RowGroups(groups), footer, groups)
            for groups in native.split(count) if groups
        ) or plan.partitions
        return dataclasses.replace(plan, native=native, native_reason="", partitions=partitions)

    def verified(self, engine: SelectEngine, plan: SelectPlan,
                 native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,
                 chosen: Sequence[Partition], everything: bool
                 ) -> NativeCsvTable | NativeParquetTable | None:
        if not isinstance(native, NativeParquetTable):
            return None
        if native.location.local:
            return native  # planning surveyed the object
        groups = None if everything else tuple(
            g for p in chosen for g in (p.row_groups if isinstance(p, RowGroups) else ()))
        if groups == () or _nan_reason(engine, plan, groups):
            return None
        return native

    # ------------------------------------------------------------------ reading
    def scan(self, engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             partition: Partition) -> ScanFunction:
        """Push projection and filter into pyarrow: row groups are pruned by statistics."""
        groups: list[int] | None = None  # all of them
        if isinstance(partition, RowGroups):
            groups = list(partition.row_groups)
        elif isinstance(partition, ByteRange):  # a ScanRange request
            starts = row_group_starts(metadata(engine, source))
            groups = row_groups_starting_in(starts, partition.start, partition.end)
        schema = plan.input_schema
        batch_rows = engine.config.batch_rows

        def scan(columns: Sequence[str] | None,
                 filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
            if groups == []:  # a ScanRange holding no row group's start: pyarrow reads all
                return
            if isinstance(filter, pa.Scalar):  # DataFusion folded the filter to a constant
                if filter.as_py() is not True:
                    return
                filter = None
            file_format = ds.ParquetFileFormat()
            # positioned reads: pyarrow may read several row groups at once
            with random_access(source) as file:
                file_schema = file_format.inspect(file)
                if file_schema.equals(schema):
                    fragments = pruned_fragments(file_format, file, groups, schema, filter)
                    dataset = ds.FileSystemDataset(fragments, schema, file_format)
                    wanted = list(columns) if columns is not None else schema.names
                    batches = dataset.to_batches(columns=wanted, filter=filter,
                                                 batch_size=batch_rows, use_threads=False)
                else:
                    # View-typed columns: pyarrow's kernels cannot filter them against the plain
                    # strings DataFusion sees, so read, convert, then filter and project here.
                    fragments = pruned_fragments(file_format, file, groups, file_schema, None)
                    dataset = ds.FileSystemDataset(fragments, file_schema, file_format)
                    raw = dataset.to_batches(batch_size=batch_rows, use_threads=False)
                    batches = generic_scan(lambda: raw, schema)(columns, filter)
                for batch in guard_reader(_parquet_errors(batches, source.name), source.name):
                    if batch.num_rows:
                        yield batch

        return scan


def metadata(engine: SelectEngine, source: ObjectSource) -> pq.FileMetaData:
    """The footer of a Parquet object, read once per object version (planning asks for it
    several times; over an object store each read is a request)."""
    try:
        version = version_key(source)
    except OSError:
        version = None
    if version is None:
        return _parquet_file(source).metadata
    return engine.parquet_footers.get(version, lambda: _parquet_file(source).metadata)


def _parquet_file(source: ObjectSource) -> pq.ParquetFile:
    try:
        # positioned reads: the footer alone, not a stream's read-ahead
        return pq.ParquetFile(random_access(source))
    except (pa.ArrowInvalid, OSError) as exc:
        store_failure = pyarrow_store_error(str(exc), source.name)
        if store_failure is not None:  # not the object's bytes: the store's answer
            raise store_failure from None
        raise InputFormatError(
            f"{source.name}: not a readable Parquet object ({exc})", code="InvalidParquet"
        ) from None


def _planned(partition: Partition, footer: pq.FileMetaData, groups: Sequence[int]
             ) -> PlannedPartition:
    return PlannedPartition(partition,
                            bytes=sum(footer.row_group(g).total_byte_size for g in groups),
                            rows=sum(footer.row_group(g).num_rows for g in groups))


def _nan_reason(engine: SelectEngine, plan: SelectPlan, row_groups: tuple[int, ...] | None
                ) -> str:
    """Why DataFusion's Parquet reader would read ``row_groups`` (None: all) differently."""
    try:
        return engine.nan_surveys.reason(plan.source, plan.input_schema, row_groups)
    except (OSError, pa.ArrowException) as exc:
        return f"survey failed ({exc})"


def _datafusion_partitions(engine: SelectEngine, plan: SelectPlan, native: NativeParquetTable,
                           count: int) -> int:
    """Partitions DataFusion makes of the plan's query when asked for ``count``.

    Not always ``count``: DataFusion does not split a scan it knows (from the footer's row
    count, with no filter above it) to hold at most one batch of rows."""
    ctx = new_session(engine.config, plan.translation, partitions=count, split_min_bytes=0)
    native.register(ctx, TABLE)
    try:
        frame = ctx.sql_with_options(plan.translation.sql, READ_ONLY)
        return int(frame.execution_plan().partition_count)
    except Exception:  # DataFusion raises plain exceptions; execution reports them
        return 1


def pruned_fragments(
    file_format: ds.ParquetFileFormat,
    file: Any,
    row_groups: Sequence[int] | None,
    schema: pa.Schema,
    filter: pc.Expression | None,
) -> list[ds.ParquetFileFragment]:
    """One fragment per row group whose statistics may satisfy ``filter``, in file order.

    One fragment per row group because pyarrow does not keep the order of the row groups given
    to ``make_fragment`` (``[6, 7, 8]`` reads as 8, 6, 7), and records must stay in file order.
    """
    fragment = file_format.make_fragment(file, row_groups=row_groups)
    fragment.ensure_complete_metadata()
    if filter is not None:
        fragment = fragment.subset(filter=filter, schema=schema)
    return [file_format.make_fragment(file, row_groups=[rg])
            for rg in sorted(rg.id for rg in fragment.row_groups)]


def _parquet_errors(batches: Iterable[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (pa.ArrowInvalid, OSError) as exc:
        store_failure = pyarrow_store_error(str(exc), name)
        if store_failure is not None:  # not the object's bytes: the store's answer
            raise store_failure from None
        raise InputFormatError(f"{name}: corrupt Parquet data ({exc})",
                               code="InvalidParquet") from None
