"""What a format driver does for the engine, and the helpers every driver shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import pyarrow as pa

from flight_storage.errors import InputFormatError
from flight_storage.execution.plan_types import InputSpec, PlannedPartition, SelectPlan
from flight_storage.execution.streaming_dataset import ScanFunction
from flight_storage.formats import compression
from flight_storage.protocol import ByteRange, Partition
from flight_storage.storage.sources import ObjectSource
from select_dialect import Translation

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine
    from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable
    from flight_storage.execution.native_parquet import NativeParquetTable

    NativeTable = NativeCsvTable | NativeParquetTable | DeferredCsvTable


class FormatDriver(Protocol):
    """One input format's part of planning and reading.

    Every method gets the engine: its configuration and its per-object-version caches."""

    def translate(self, engine: SelectEngine, expression: str,
                  sources: tuple[ObjectSource, ...], input: InputSpec, flavor: str
                  ) -> tuple[Translation, pa.Schema, list[str] | None]:
        """The statement translated for the table, the table's schema (what DataFusion is
        given as ``s3object``) and the CSV header the statement's names resolved against."""
        ...

    def partitions(self, engine: SelectEngine, source: ObjectSource, input: InputSpec,
                   scan_range: tuple[int, int] | None, wanted: int | None
                   ) -> tuple[PlannedPartition, ...]:
        """The partitions of one object (a ScanRange request's: its one range; ``wanted``:
        the byte ranges a client asked for, ``SelectEngine.range_count``)."""
        ...

    def with_native(self, engine: SelectEngine, plan: SelectPlan,
                    scan_range: tuple[int, int] | None) -> SelectPlan:
        """``plan`` served by DataFusion's own reader where that reads exactly as the
        reference does (its endpoints then DataFusion's partitions), or with the reason why
        not."""
        ...

    def verified(self, engine: SelectEngine, plan: SelectPlan, native: NativeTable,
                 chosen: Sequence[Partition], everything: bool
                 ) -> NativeCsvTable | NativeParquetTable | None:
        """The native table once the chosen partitions are proven to read as the reference
        does (an object store's object is surveyed as it is read), or None: the reference
        readers read them."""
        ...

    def scan(self, engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             partition: Partition) -> ScanFunction:
        """The reference reader of one object's piece, as a scan DataFusion pulls from."""
        ...


def open_input(source: ObjectSource, input: InputSpec) -> BinaryIO:
    """The object's bytes, decompressed as they stream (a server's source counts S3's
    BytesProcessed in its ``processed`` counter)."""
    processed = getattr(source, "processed", None)
    return compression.open_decompressed(source.open(), input.compression, processed)


def byte_range(partition: Partition) -> tuple[int, int] | None:
    """The readers' ``(start, stop)`` for a byte-range partition (both end exclusive)."""
    if not isinstance(partition, ByteRange):
        return None
    return (partition.start, partition.end)


def prefix_reason(plan: SelectPlan) -> str:
    """Why a prefix table has no single native reader, and who reads it instead."""
    if plan.parallel_safe:
        return "a prefix table: read object by object, by DataFusion's reader where it qualifies"
    return "a prefix table under an aggregate, LIMIT or whole-input clause: reference readers"


def named(error: InputFormatError, object_name: str) -> InputFormatError:
    """The same error with the object named in its message."""
    if error.message.startswith(object_name):
        return error
    return type(error)(f"{object_name}: {error.message}", code=error.code, offset=error.offset,
                       row=error.row)


def never_native(*_: Any) -> None:
    """The verification of a format DataFusion never reads itself."""
