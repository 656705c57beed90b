"""The engine's value types: its configuration, a resolved InputSerialization, a plan and its
partitions. No DataFusion here: callers that need only :class:`InputSpec` or
:class:`EngineConfig` (the request stage, the server's configuration) load none of it.

Partitions (``flight_storage.protocol.Partition``):

| type | reads |
|---|---|
| ``WholeObject`` | every object of the table, in order |
| ``ByteRange`` | the records of the (single) object whose first byte lies in ``[start, end)`` |
| ``RowGroups`` | those row groups of the (single) Parquet object |
| ``ObjectGroup`` | the named objects of a prefix table, whole |

A ``ByteRange`` of a Parquet object (only a ScanRange request makes one) reads the row groups
whose start (:func:`~flight_storage.execution.native_parquet.row_group_starts`) lies in it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from flight_storage.cores import usable_cores
from flight_storage.errors import InvalidRequestError
from flight_storage.execution.arrow_result import arrow_result_schema
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.output import RecordWriter
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.protocol import Partition
from flight_storage.storage.sources import ObjectSource
from select_dialect import Translation
from select_dialect.flavors import FLAVORS, PrintingRules, ReadingRules

if TYPE_CHECKING:  # the native tables load DataFusion; a plan only holds them
    from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable
    from flight_storage.execution.native_parquet import NativeParquetTable

TABLE = "s3object"
"""The table every translated statement reads."""
COMPRESSIONS = ("NONE", "GZIP", "BZIP2", "ZSTD")
WARNINGS_METADATA = "flight-select.warnings"
"""The result schema's metadata key holding :attr:`SelectPlan.warnings` (a JSON list)."""


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of query execution (built once at the entry point).

    Attributes:
        batch_rows: rows per Arrow batch read from CSV/JSON.
        partition_bytes: CSV/NDJSON objects larger than this are split into byte ranges, and
            small objects of a prefix table are grouped up to this size.
        endpoint_min_bytes: an object is cut into one byte range per core only while every
            range keeps at least this many bytes: an endpoint costs a few milliseconds of
            server CPU however small it is, so it must carry enough work to hide that (a
            smaller object is one endpoint, read on every core when its order does not matter).
        max_parallelism: the most byte ranges a client may ask an object to be cut into
            (``x-flight-select-parallelism``: :meth:`SelectEngine.range_count`); a larger ask
            gets this many.
        row_groups_per_partition: Parquet row groups per partition.
        memory_limit_bytes: DataFusion memory pool per query (None: unbounded).
        max_query_chars: longest statement accepted (AWS allows 256 KiB).
        max_record_bytes: longest CSV/JSON record accepted (AWS: 1 MiB).
        max_columns: widest table a CSV query may make (planning cost grows faster than
            linearly with the width).
        native_readers: let DataFusion's own readers read the objects a survey proves they
            read exactly (False: the reference readers read everything).
        cores: DataFusion partitions an order-free query (an aggregate) runs on at once;
            0 means every core the process may use (its CPU affinity).
        cache_dir: the decoded cache's folder (None: no decoded cache;
            ``execution/decoded_table.py``).
        cache_bytes: the most bytes the decoded cache keeps.
        engine_workers: worker processes the server runs aggregates over local files in, so
            that a cancel or timeout stops them at once (``execution/engine_workers.py``); 0:
            every query in the server's process.
    """

    batch_rows: int = 16384
    partition_bytes: int = 128 << 20
    endpoint_min_bytes: int = 64 << 20
    max_parallelism: int = 256
    row_groups_per_partition: int = 4
    memory_limit_bytes: int | None = 1 << 30
    max_query_chars: int = 256 * 1024
    max_record_bytes: int = 1 << 20
    max_columns: int = 4096
    native_readers: bool = True
    cores: int = 0
    cache_dir: str | None = None
    cache_bytes: int = 4 << 30
    engine_workers: int = 2

    @property
    def parallelism(self) -> int:
        """DataFusion partitions of an order-free query."""
        return self.cores or usable_cores()


@dataclass(frozen=True)
class InputSpec:
    """A resolved AWS InputSerialization: format, compression and the format's options."""

    format: str
    compression: str = "NONE"
    options: Mapping[str, Any] = field(default_factory=dict)
    columns: TypedColumns | None = None

    @classmethod
    def from_request(
        cls,
        request: Mapping[str, Any] | None,
        *,
        default_format: str | None = None,
        default_compression: str = "NONE",
        json_lines: bool = True,
    ) -> InputSpec:
        """Build from an ``InputSerialization`` dict, falling back to what the key suggests."""
        request = dict(request or {})
        compression_type = str(request.pop("CompressionType", default_compression) or "NONE")
        compression_type = compression_type.upper()
        if compression_type not in COMPRESSIONS:
            raise InvalidRequestError(
                f"unsupported CompressionType {compression_type!r}",
                code="InvalidCompressionFormat",
            )
        for key, fmt in (("CSV", "csv"), ("JSON", "json"), ("Parquet", "parquet")):
            if key in request:
                return cls(fmt, compression_type, dict(request[key] or {}))
        if default_format is None:
            raise InvalidRequestError(
                "InputSerialization must name CSV, JSON or Parquet", code="MissingRequiredParameter"
            )
        options: dict[str, Any] = {}
        if default_format == "json":
            options = {"Type": "LINES" if json_lines else "DOCUMENT"}
        return cls(default_format, compression_type, options)

    def to_request(self) -> dict[str, Any]:
        """The AWS-shaped dict again (what tickets carry)."""
        key = {"csv": "CSV", "json": "JSON", "parquet": "Parquet"}[self.format]
        return {key: dict(self.options), "CompressionType": self.compression}

    @property
    def splittable(self) -> bool:
        """True when byte ranges of the object can be read on their own."""
        if self.compression != "NONE":
            return False
        if self.format == "csv":
            return True
        return self.format == "json" and str(self.options.get("Type", "")).upper() == "LINES"

    @property
    def range_readable(self) -> bool:
        """True when a ScanRange request can read the object: a splittable one, or an
        uncompressed Parquet object (by row groups)."""
        return self.splittable or (self.format == "parquet" and self.compression == "NONE")


@dataclass(frozen=True)
class PlannedPartition:
    """A partition with what planning learnt of its size (for FlightInfo totals)."""

    partition: Partition
    bytes: int | None = None
    rows: int | None = None


@dataclass(frozen=True)
class SelectPlan:
    """Everything needed to execute a statement over partitions of a table."""

    expression: str
    flavor: str
    sources: tuple[ObjectSource, ...]
    input: InputSpec
    translation: Translation
    input_schema: pa.Schema
    result_schema: pa.Schema
    partitions: tuple[PlannedPartition, ...]
    header: tuple[str, ...] | None = None
    native: NativeCsvTable | NativeParquetTable | DeferredCsvTable | None = None
    native_reason: str = "not a CSV or Parquet object"
    warnings: tuple[str, ...] = ()
    """What clients should know of the answer (fields of a ``bad_values`` ``null`` table read
    as NULL); the result schema's metadata and the FlightInfo carry them."""
    cache: str = ""
    """The decoded cache's part: ``hit`` (served from the object's entry), ``miss``,
    ``filling``, or ``""`` (the plan cannot be served from an entry, or no cache)."""
    cache_entry: str = ""
    """The name of the object's entry (a miss's: what a fill writes)."""
    uncached: SelectPlan | None = None
    """A served plan's plan over the object itself (tickets planned before the fill read it)."""
    wanted_parallelism: int | None = None
    """The byte ranges the client asked the object cut into (``x-flight-select-parallelism``,
    capped at ``max_parallelism``); None: sized by work (:meth:`SelectEngine.range_count`)."""

    @property
    def reading(self) -> ReadingRules:
        """How the flavour reads input (the readers' flags, :mod:`select_dialect.flavors`)."""
        return FLAVORS[self.flavor].reading

    @property
    def printing(self) -> PrintingRules:
        """How the flavour prints S3 records (the output writer's flags)."""
        return FLAVORS[self.flavor].printing

    @property
    def limit_counts_input(self) -> bool:
        """The flavour's LIMIT counts scanned records (the clients learn it from the
        FlightInfo: a LIMIT they push beside a filter would then cut matching rows)."""
        return FLAVORS[self.flavor].limit_counts_input

    def record_writer(self, output_serialization: Mapping[str, Any] | None) -> RecordWriter:
        """The writer of this plan's results as S3 records (``OutputSerialization``)."""
        t = self.translation
        return RecordWriter(
            output_serialization, printing=self.printing, output_names=t.output_names,
            output_is_json=t.output_is_json, is_aggregate=t.is_aggregate,
            row_as_record=t.row_as_record,
            rows_keep_their_width=(t.select_star and self.input.format == "csv"
                                   and self.input.columns is None),
            input_escape=self._input_escape())

    def _input_escape(self) -> str:
        """The escape character of the CSV reader for this input, which ALWAYS quoting uses
        where the flavour prints with the input's escape (``std::quoted``'s backslash when
        the input is not CSV or disables escaping)."""
        default = "\\"
        if self.input.format != "csv" or not self.printing.csv_quote_escape_from_input:
            return default
        options = CsvInputOptions.from_request(self.input.options, self.reading)
        return options.escape or default

    @property
    def reader(self) -> str:
        """Which reader serves the plan: ``datafusion`` or ``reference``."""
        return "datafusion" if self.native is not None else "reference"

    @property
    def source(self) -> ObjectSource:
        """The first (for a single-object table, the only) object."""
        return self.sources[0]

    @property
    def total_bytes(self) -> int:
        """Bytes of input the partitions cover."""
        return sum(p.bytes or 0 for p in self.partitions)

    @property
    def parallel_safe(self) -> bool:
        """True when partitions may be served as independent endpoints (no cross-row state)."""
        t = self.translation
        return not (t.is_aggregate or t.whole_input) and t.limit is None

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """The schema of :meth:`SelectEngine.execute_arrow` batches (what Flight clients see);
        computed once per plan (every DoGet of a cached plan asks)."""
        names = list(self.translation.result_names or self.translation.output_names)
        if len(names) != len(self.result_schema):  # select * of a CSV without a header
            names = self.result_schema.names
        schema = arrow_result_schema(self.result_schema, names)
        if self.warnings:
            schema = schema.with_metadata({WARNINGS_METADATA: json.dumps(list(self.warnings))})
        return schema


def order_free(translation: Translation) -> bool:
    """The result does not depend on the order records are read in (DataFusion may read
    the pieces in parallel): an aggregate, GROUP BY, DISTINCT or ORDER BY without LIMIT."""
    return (translation.is_aggregate or translation.whole_input) and translation.limit is None


_PARQUET_TYPES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_boolean, "bool"),
    (pa.types.is_integer, "int64"),
    (pa.types.is_floating, "float64"),
    (pa.types.is_decimal, "decimal"),
    (pa.types.is_timestamp, "timestamp"),
    (pa.types.is_date, "date"),
    (pa.types.is_string, "string"),
    (pa.types.is_large_string, "string"),
)


def dialect_type(data_type: pa.DataType) -> str:
    """The dialect's type name of an Arrow type (:class:`select_dialect.Column`)."""
    for test, name in _PARQUET_TYPES:
        if test(data_type):
            if name == "decimal":
                return f"decimal({data_type.precision},{data_type.scale})"
            return name
    return "string"


_VIEWS: tuple[tuple[Callable[[pa.DataType], bool], pa.DataType], ...] = (
    (pa.types.is_string_view, pa.string()),
    (pa.types.is_large_string, pa.string()),
    (pa.types.is_binary_view, pa.binary()),
)


def without_views(schema: pa.Schema) -> pa.Schema:
    """The file schema with view and large string types as plain ones (what the engine sees)."""
    fields = []
    for f in schema:
        target = next((t for test, t in _VIEWS if test(f.type)), None)
        fields.append(f.with_type(target) if target is not None else f)
    return pa.schema(fields)  # file metadata (e.g. pandas') dropped: batches carry none
