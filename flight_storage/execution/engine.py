"""Run one s3-select statement over an object (or a prefix of objects) with DataFusion.

``SelectEngine.plan`` translates the statement (``select_dialect.translate``), works out the
input table's schema and the result's Arrow schema, and splits the input into partitions;
``SelectEngine.execute`` runs the plan over some of those partitions and streams Arrow batches.
Nothing here keeps state between calls: a ticket carries what ``plan`` needs to be re-run.

Partitions (``flight_storage.protocol.Partition``):

| kind | reads |
|---|---|
| ``object`` | every object of the table, in order |
| ``byte_range`` | the records of the (single) object whose first byte lies in ``[start, end)`` |
| ``row_groups`` | those row groups of the (single) Parquet object |
| ``objects`` | the named objects of a prefix table, whole |

A ``byte_range`` of a Parquet object (only a ScanRange request makes one) reads the row groups
whose start (:func:`~flight_storage.execution.native_parquet.row_group_starts`) lies in it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from datafusion import RuntimeEnvBuilder, SessionConfig, SessionContext, SQLOptions

from flight_storage.errors import (
    InputFormatError,
    InvalidRequestError,
    ResourceLimitError,
    StorageError,
)
from flight_storage.execution import udfs
from flight_storage.execution.arrow_result import arrow_result_schema, to_arrow_result
from flight_storage.execution.engine_errors import engine_error, guard_reader
from flight_storage.execution.native_csv import (
    DeferredCsvTable,
    NativeCsvTable,
    SurveyCache,
    native_csv_table,
    native_ranges,
    reads_compression,
)
from flight_storage.execution.native_parquet import SESSION_SETTINGS as PARQUET_SETTINGS
from flight_storage.execution.native_parquet import (
    NanSurvey,
    NativeParquetTable,
    native_parquet_table,
    row_group_starts,
    row_groups_starting_in,
)
from flight_storage.execution.streaming_dataset import (
    ScanFunction,
    StreamingDataset,
    chain_scans,
    generic_scan,
)
from flight_storage.formats import compression, csv_input, json_input
from flight_storage.formats.csv_guard import CsvSurvey, options_reason
from flight_storage.formats.output import RecordWriter
from flight_storage.formats.scan_range import scan_bounds
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.protocol import Partition
from flight_storage.storage.sources import (
    DataFusionLocation,
    ObjectSource,
    datafusion_location,
    random_access,
    version_key,
)
from flight_storage.storage.version_cache import VersionCache
from select_dialect import Column, Translation, translate
from select_dialect.errors import SelectDialectError
from select_dialect.flavors import CEPH, FLAVOR_NAMES, FLAVORS, engine_rules
from select_dialect.translate import check_query_length

TABLE = "s3object"
COMPRESSIONS = ("NONE", "GZIP", "BZIP2", "ZSTD")


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of query execution (built once at the entry point).

    Attributes:
        batch_rows: rows per Arrow batch read from CSV/JSON.
        partition_bytes: CSV/NDJSON objects larger than this are split into byte ranges, and
            small objects of a prefix table are grouped up to this size.
        row_groups_per_partition: Parquet row groups per partition.
        memory_limit_bytes: DataFusion memory pool per query (None: unbounded).
        max_query_chars: longest statement accepted (AWS allows 256 KiB).
        max_record_bytes: longest CSV/JSON record accepted (AWS: 1 MiB).
        max_columns: widest table a CSV query may make (planning cost grows faster than
            linearly with the width).
        native_readers: let DataFusion's own readers read the objects a survey proves they
            read exactly (False: the reference readers read everything).
        cores: DataFusion partitions an order-free query (an aggregate) runs on at once;
            0 means every core of the machine.
    """

    batch_rows: int = 16384
    partition_bytes: int = 128 << 20
    row_groups_per_partition: int = 4
    memory_limit_bytes: int | None = 1 << 30
    max_query_chars: int = 256 * 1024
    max_record_bytes: int = 1 << 20
    max_columns: int = 4096
    native_readers: bool = True
    cores: int = 0

    @property
    def parallelism(self) -> int:
        """DataFusion partitions of an order-free query."""
        return self.cores or os.cpu_count() or 1


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

    @property
    def rules(self) -> str:
        """Whose reading and printing rules the flavour follows (``ceph`` or ``aws``)."""
        return engine_rules(self.flavor)

    def record_writer(self, output_serialization: Mapping[str, Any] | None) -> RecordWriter:
        """The writer of this plan's results as S3 records (``OutputSerialization``)."""
        t = self.translation
        return RecordWriter(
            output_serialization, flavor=self.rules, output_names=t.output_names,
            output_is_json=t.output_is_json, is_aggregate=t.is_aggregate,
            row_as_record=t.row_as_record,
            rows_keep_their_width=(t.select_star and self.input.format == "csv"
                                   and self.input.columns is None))

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

    @property
    def arrow_schema(self) -> pa.Schema:
        """The schema of :meth:`SelectEngine.execute_arrow` batches (what Flight clients see)."""
        names = list(self.translation.output_names)
        if len(names) != len(self.result_schema):  # select * of a CSV without a header
            names = self.result_schema.names
        return arrow_result_schema(self.result_schema, names)


_MIN_SPLIT_BYTES = 1 << 20
"""An order-free query splits an object into per-core ranges only above this size."""


def _session(
    config: EngineConfig,
    translation: Translation | None = None,
    *,
    partitions: int = 2,
    split_min_bytes: int = _MIN_SPLIT_BYTES,
    push_filters: bool = True,
) -> SessionContext:
    session_config = (
        SessionConfig()
        .with_batch_size(8192)
        .with_target_partitions(partitions)
        .with_repartition_file_scans(partitions > 1)
        .with_repartition_file_min_size(split_min_bytes)
        # a partition executed on its own must read only its own range (NOTES.md)
        .set("datafusion.execution.enable_file_stream_work_stealing", "false")
        .set("datafusion.optimizer.enable_round_robin_repartition", "false")
    )
    for key, value in PARQUET_SETTINGS:
        session_config = session_config.set(key, value)
    runtime = RuntimeEnvBuilder()
    if config.memory_limit_bytes is not None:
        runtime = runtime.with_fair_spill_pool(config.memory_limit_bytes)
    ctx = SessionContext(session_config, runtime)
    for function in _udfs():
        ctx.register_udf(function)
    if not push_filters or (translation is not None and translation.filter_over_aliases):
        # Keep the filter where the statement puts it: above the subquery that computes the
        # aliases once per row, or above a dataset that cannot take it (_filter_not_convertible).
        ctx.remove_optimizer_rule("push_down_filter")
    return ctx


def _filter_not_convertible(exc: Exception) -> bool:
    """datafusion-python could not turn the filters it pushes into a dataset into one pyarrow
    expression: it joins them with ``&`` in order, and a NULL literal conjunct (DataFusion's
    simplifier makes ``x = x`` into ``x IS NOT NULL OR NULL``) becomes a ``pa.BooleanScalar``,
    which ``&`` with an ``Expression`` refuses when it comes first."""
    text = str(exc)
    return "unsupported operand type" in text and "pyarrow" in text and "Expression" in text


@functools.cache
def _udfs() -> tuple[Any, ...]:
    """The s3-select UDFs, built once per process (each session registers the same ones)."""
    return tuple(udfs.build_udfs())


_READ_ONLY = SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)
READ_ONLY = _READ_ONLY
"""What every statement the engine runs may do: query, never DDL, DML or statements."""

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


def _dialect_type(data_type: pa.DataType) -> str:
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


def _without_views(schema: pa.Schema) -> pa.Schema:
    """The file schema with view and large string types as plain ones (what the engine sees)."""
    fields = []
    for f in schema:
        target = next((t for test, t in _VIEWS if test(f.type)), None)
        fields.append(f.with_type(target) if target is not None else f)
    return pa.schema(fields)  # file metadata (e.g. pandas') dropped: batches carry none


def _as_sources(source: ObjectSource | Sequence[ObjectSource]) -> tuple[ObjectSource, ...]:
    if isinstance(source, Sequence):
        sources = tuple(source)
        if not sources:
            raise InvalidRequestError("the table has no objects", code="NoSuchKey")
        return sources
    return (source,)


class SelectEngine:
    """Plans and runs s3-select statements over objects.

    Args:
        config: execution limits and partitioning.

    Example:
        >>> from flight_storage.storage.sources import BytesSource
        >>> engine = SelectEngine(EngineConfig())
        >>> plan = engine.plan("select _1 from s3object", BytesSource(b"a\\nb\\n"),
        ...                    InputSpec("csv"), flavor="ceph")
        >>> [b.num_rows for b in engine.execute(plan)]
        [2]
    """

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self.surveys = SurveyCache()
        self.nan_surveys = NanSurvey()
        self.parquet_footers: VersionCache[pq.FileMetaData] = VersionCache(1024)
        self._plans: OrderedDict[tuple[Any, ...], SelectPlan] = OrderedDict()
        self._plans_lock = threading.Lock()

    # ------------------------------------------------------------------ planning
    def _translate(self, expression: str, **kwargs: Any) -> Translation:
        return _translate(expression, max_query_chars=self.config.max_query_chars, **kwargs)

    def plan(
        self,
        expression: str,
        source: ObjectSource | Sequence[ObjectSource],
        input: InputSpec,
        *,
        flavor: str = CEPH,
        scan_range: tuple[int, int] | None = None,
    ) -> SelectPlan:
        """Translate ``expression`` for ``source`` (one object, or a prefix's objects in key
        order, all of one format and schema) and split the work into partitions.

        Plans of files are kept per object version (a ticket's DoGet plans what its
        GetFlightInfo planned: the second time costs a lookup)."""
        sources = _as_sources(source)
        key = _plan_key(expression, sources, input, flavor, scan_range)
        if key is not None:
            with self._plans_lock:
                cached = self._plans.get(key)
                if cached is not None:
                    self._plans.move_to_end(key)
                    return dataclasses.replace(cached, sources=sources)
        plan = self._plan(expression, sources, input, flavor=flavor, scan_range=scan_range)
        if key is not None:
            with self._plans_lock:
                self._plans[key] = plan
                while len(self._plans) > _PLAN_CACHE_ENTRIES:
                    self._plans.popitem(last=False)
        return plan

    def plan_constant(self, expression: str, *, flavor: str) -> SelectPlan:
        """Plan a statement that reads no object (``SELECT 1``, standard flavour only).

        Raises:
            InvalidRequestError: the statement reads a table after all.
        """
        if flavor not in FLAVORS:
            raise InvalidRequestError(
                f"unknown flavor {flavor!r}; use one of {', '.join(FLAVOR_NAMES)}")
        translation = self._translate(expression, input_format="csv", flavor=flavor)
        if translation.reads_table:
            raise InvalidRequestError("the statement reads an object; plan it with plan()")
        return self._finish_plan(expression, flavor, (), InputSpec("csv"), translation,
                                 pa.schema([]), [PlannedPartition(Partition("object"), bytes=0, rows=1)])

    def _plan(
        self,
        expression: str,
        sources: tuple[ObjectSource, ...],
        input: InputSpec,
        *,
        flavor: str,
        scan_range: tuple[int, int] | None,
    ) -> SelectPlan:
        if flavor not in FLAVORS:
            raise InvalidRequestError(
                f"unknown flavor {flavor!r}; use one of {', '.join(FLAVOR_NAMES)}")
        check_query_length(expression, self.config.max_query_chars)
        if scan_range is not None and (not input.range_readable or len(sources) > 1):
            raise InvalidRequestError(
                "ScanRange applies only to one uncompressed CSV, JSON LINES or Parquet object",
                code="UnsupportedScanRangeInput",  # AWS's code (400) for such objects
            )
        planner = _PLANNERS.get(input.format)
        if planner is None:
            raise InvalidRequestError(f"unsupported input format {input.format!r}")
        try:
            translation, schema, header = planner(self, expression, sources, input, flavor)
        except InputFormatError as exc:
            raise _named(exc, sources[0].name) from None
        if len(sources) > 1:
            partitions = self._object_partitions(sources)
        elif input.format == "parquet" and scan_range is not None:
            partitions = self._scan_range_row_groups(sources[0], scan_range)
        elif input.format == "parquet":
            partitions = self._row_group_partitions(sources[0])
        else:
            partitions = self._byte_partitions(sources[0], input, scan_range)
        plan = self._finish_plan(expression, flavor, sources, input, translation, schema,
                                 partitions, header)
        if input.format == "csv":
            native, reason = self._native_csv(plan, scan_range)
            plan = dataclasses.replace(plan, native=native, native_reason=reason)
        elif input.format == "parquet" and scan_range is not None:
            # DataFusion's Python API cuts a file only into equal ranges it chooses; the range
            # asked for rarely is one of them, and the reference reader reads exactly the
            # chosen row groups, so it serves every ScanRange request.
            plan = dataclasses.replace(plan, native_reason="a ScanRange request")
        elif input.format == "parquet":
            plan = self._with_native_parquet(plan)
        return plan

    def _with_native_parquet(self, plan: SelectPlan) -> SelectPlan:
        """The plan served by DataFusion's Parquet reader, its endpoints DataFusion's
        partitions, or the plan as it is with the reason why not."""
        if not self.config.native_readers:
            return dataclasses.replace(plan, native_reason="native readers are off")
        if len(plan.sources) != 1:
            return dataclasses.replace(plan, native_reason=_prefix_reason(plan))
        location = datafusion_location(plan.source)
        if location is None:
            return dataclasses.replace(plan, native_reason="not a stored object")
        metadata = self._parquet_metadata(plan.source)
        try:
            native, reason = native_parquet_table(location, plan.source.size, metadata,
                                                  plan.input_schema)
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            return dataclasses.replace(plan, native_reason=f"DataFusion cannot read it ({exc})")
        if native is None:
            return dataclasses.replace(plan, native_reason=reason)
        if location.local:  # an object store's object is surveyed per partition as it is read
            reason = self._nan_reason(plan, None)
            if reason:
                return dataclasses.replace(plan, native_reason=reason)
        count = native.partition_count(self._range_count(native.size))
        if count > 1 and self._native_partition_count(plan, native, count) != count:
            count = 1  # DataFusion keeps this query's scan whole (see below)
        partitions = tuple(
            PlannedPartition(
                Partition("row_groups", row_groups=groups),
                bytes=sum(metadata.row_group(g).total_byte_size for g in groups),
                rows=sum(metadata.row_group(g).num_rows for g in groups),
            )
            for groups in native.split(count) if groups
        ) or plan.partitions
        return dataclasses.replace(plan, native=native, native_reason="", partitions=partitions)

    def _nan_reason(self, plan: SelectPlan, row_groups: tuple[int, ...] | None) -> str:
        """Why DataFusion's Parquet reader would read ``row_groups`` (None: all) differently."""
        try:
            return self.nan_surveys.reason(plan.source, plan.input_schema, row_groups)
        except (OSError, pa.ArrowException) as exc:
            return f"survey failed ({exc})"

    def _native_partition_count(
        self, plan: SelectPlan, native: NativeParquetTable, count: int
    ) -> int:
        """Partitions DataFusion makes of the plan's query when asked for ``count``.

        Not always ``count``: DataFusion does not split a scan it knows (from the footer's
        row count, with no filter above it) to hold at most one batch of rows."""
        ctx = _session(self.config, plan.translation, partitions=count, split_min_bytes=0)
        native.register(ctx, TABLE)
        try:
            frame = ctx.sql_with_options(plan.translation.sql, _READ_ONLY)
            return int(frame.execution_plan().partition_count)
        except Exception:  # DataFusion raises plain exceptions; execution reports them
            return 1

    def _native_csv(
        self, plan: SelectPlan, scan_range: tuple[int, int] | None
    ) -> tuple[NativeCsvTable | DeferredCsvTable | None, str]:
        """DataFusion's CSV reader for the plan's object, or None and why not."""
        if not self.config.native_readers:
            return None, "native readers are off"
        if len(plan.sources) != 1:
            return None, _prefix_reason(plan)
        if plan.input.columns is not None:
            return None, "typed columns"
        if scan_range is not None:
            return None, "a ScanRange request"
        location = datafusion_location(plan.source)
        if location is None:
            return None, "not a stored object"
        if not reads_compression(plan.input.compression):
            # before the survey: it would decompress the whole object for nothing
            return None, f"{plan.input.compression} input"
        options = self._csv_options(plan.input, plan.flavor, plan.translation)
        if not location.local:
            reason = options_reason(options)
            if reason:
                return None, reason
            return DeferredCsvTable(location, options, len(plan.input_schema),
                                    plan.input.compression), ""
        try:
            survey = self.surveys.survey(plan.source, options, plan.input.compression)
        except (OSError, InputFormatError) as exc:
            return None, f"survey failed ({exc})"
        return self._checked_native_csv(location, options, survey, plan)

    def _checked_native_csv(self, location: DataFusionLocation, options: Any,
                            survey: CsvSurvey, plan: SelectPlan
                            ) -> tuple[NativeCsvTable | None, str]:
        widest = max(survey.max_fields, survey.header_fields)
        if widest > self.config.max_columns:
            return None, f"records of {widest} fields (over --max-columns)"
        return native_csv_table(location, options, survey, width=len(plan.input_schema),
                                compression=plan.input.compression)

    def _surveyed_range(self, plan: SelectPlan, deferred: DeferredCsvTable,
                        span: tuple[int, int] | None) -> NativeCsvTable | None:
        """The native table of a deferred plan for the bytes ``span`` (None: the whole
        object), surveyed now (and cached), or None when the reference reader must read it."""
        try:
            if span is None and plan.input.compression != "NONE":
                survey = self.surveys.survey(plan.source, deferred.options, plan.input.compression)
            else:
                start, stop = span if span is not None else (0, plan.source.size)
                survey = self.surveys.survey_range(plan.source, deferred.options, start, stop)
        except (OSError, InputFormatError):
            return None  # the reference reader reads it, and reports what is wrong
        native, _ = self._checked_native_csv(deferred.location, deferred.options, survey, plan)
        return native

    def _plan_csv(self, expression: str, sources: tuple[ObjectSource, ...], input: InputSpec,
                  flavor: str) -> tuple[Translation, pa.Schema, list[str] | None]:
        if input.columns is not None:
            schema = input.columns.schema
            columns = [Column(f.name, _dialect_type(f.type)) for f in schema]
            translation = self._translate(expression, input_format="parquet", flavor=flavor,
                                          columns=columns)
            return translation, schema, None
        options = self._csv_options(input, flavor)
        header_info = str(input.options.get("FileHeaderInfo", "NONE")).upper()
        header: list[str] | None = None
        if header_info == "USE":
            with self._open(sources[0], input) as stream:
                header = csv_input.read_csv_header(stream, options)
        translation = self._translate(expression, input_format="csv", flavor=flavor,
                                      header=header)
        width = translation.max_positional
        if header is not None and translation.select_star:
            width = max(width, len(header))
        if translation.select_star and header is None:
            width = max(width, self._peek_csv_width(sources[0], input, options))
        width = max(width, 1)  # a statement that reads no field still counts rows
        if width > self.config.max_columns:
            raise InvalidRequestError(
                f"the query's table would have {width} columns; the limit is "
                f"{self.config.max_columns} (--max-columns): name the columns you need",
                code="TooManyColumns",
            )
        schema = pa.schema([pa.field(f"_{i}", pa.string()) for i in range(1, width + 1)])
        return translation, schema, header

    def _plan_json(self, expression: str, sources: tuple[ObjectSource, ...], input: InputSpec,
                   flavor: str) -> tuple[Translation, pa.Schema, None]:
        translation = self._translate(expression, input_format="json", flavor=flavor)
        schema = pa.schema([pa.field(name, pa.string()) for name in translation.json_paths])
        return translation, schema, None

    def _plan_parquet(self, expression: str, sources: tuple[ObjectSource, ...],
                      input: InputSpec, flavor: str) -> tuple[Translation, pa.Schema, None]:
        file_schema = _without_views(self._parquet_metadata(sources[0]).schema.to_arrow_schema())
        columns = [Column(f.name, _dialect_type(f.type)) for f in file_schema]
        translation = self._translate(expression, input_format="parquet", flavor=flavor,
                                      columns=columns)
        return translation, file_schema, None

    def _finish_plan(
        self,
        expression: str,
        flavor: str,
        sources: tuple[ObjectSource, ...],
        input: InputSpec,
        translation: Translation,
        input_schema: pa.Schema,
        partitions: Sequence[PlannedPartition],
        header: Sequence[str] | None = None,
    ) -> SelectPlan:
        ctx = _session(self.config)
        ctx.register_dataset(TABLE, StreamingDataset(input_schema, []))
        try:
            result_schema = pa.schema(ctx.sql_with_options(translation.sql, _READ_ONLY).schema())
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            raise engine_error(exc) from None
        return SelectPlan(
            expression=expression,
            flavor=flavor,
            sources=sources,
            input=input,
            translation=translation,
            input_schema=input_schema,
            result_schema=result_schema,
            partitions=tuple(partitions),
            header=tuple(header) if header is not None else None,
        )

    def _byte_partitions(
        self, source: ObjectSource, input: InputSpec, scan_range: tuple[int, int] | None
    ) -> tuple[PlannedPartition, ...]:
        size = source.size
        if scan_range is not None:
            start, stop = scan_bounds(scan_range, size)
            return (
                PlannedPartition(Partition("byte_range", start=start, end=stop), bytes=stop - start),
            )
        count = self._range_count(size)
        if not input.splittable or count == 1:
            return (PlannedPartition(Partition("object"), bytes=size),)
        return tuple(
            PlannedPartition(Partition("byte_range", start=lo, end=hi), bytes=hi - lo)
            for lo, hi in native_ranges(size, count)
        )

    def _range_count(self, size: int) -> int:
        """Byte ranges a splittable object of ``size`` bytes is cut into (DataFusion's way):
        at most ``partition_bytes`` each, one per core for objects worth splitting, and a
        multiple of the cores when there are more ranges than cores, so that ranges served a
        core at a time end in full waves (9 ranges on 2 cores leave one core idle for the
        whole last range; 10 smaller ones do not)."""
        by_size = -(-size // self.config.partition_bytes)
        cores = self.config.parallelism
        if by_size > cores:
            by_size = -(-by_size // cores) * cores
        by_cores = min(cores, size // _MIN_SPLIT_BYTES)
        return max(1, by_size, by_cores)

    def _scan_range_row_groups(
        self, source: ObjectSource, scan_range: tuple[int, int]
    ) -> tuple[PlannedPartition, ...]:
        """The one partition of a Parquet ScanRange request: the byte range itself, which the
        Parquet scan reads as the row groups starting inside it (AWS's rule)."""
        start, stop = scan_bounds(scan_range, source.size)
        metadata = self._parquet_metadata(source)
        groups = row_groups_starting_in(row_group_starts(metadata), start, stop)
        return (
            PlannedPartition(
                Partition("byte_range", start=start, end=stop),
                bytes=sum(metadata.row_group(g).total_byte_size for g in groups),
                rows=sum(metadata.row_group(g).num_rows for g in groups),
            ),
        )

    def _row_group_partitions(self, source: ObjectSource) -> tuple[PlannedPartition, ...]:
        metadata = self._parquet_metadata(source)
        groups = list(range(metadata.num_row_groups))
        step = max(1, self.config.row_groups_per_partition)
        return tuple(
            PlannedPartition(
                Partition("row_groups", row_groups=tuple(groups[i : i + step])),
                bytes=sum(metadata.row_group(g).total_byte_size for g in groups[i : i + step]),
                rows=sum(metadata.row_group(g).num_rows for g in groups[i : i + step]),
            )
            for i in range(0, len(groups), step)
        ) or (PlannedPartition(Partition("object"), bytes=0, rows=0),)

    def _object_partitions(
        self, sources: Sequence[ObjectSource]
    ) -> tuple[PlannedPartition, ...]:
        """Whole objects of a prefix table, small neighbours grouped up to partition_bytes."""
        groups: list[list[ObjectSource]] = [[]]
        for source in sources:
            current = groups[-1]
            if current and sum(s.size for s in current) + source.size > self.config.partition_bytes:
                groups.append([source])
            else:
                current.append(source)
        return tuple(
            PlannedPartition(
                Partition("objects", keys=tuple(s.name for s in group)),
                bytes=sum(s.size for s in group),
            )
            for group in groups
        )

    # ------------------------------------------------------------- tables read elsewhere
    # Hooks for a table whose files the engine does not list or read itself: an Iceberg table
    # (``execution/iceberg_scan.py`` plans its data files and reads them with :meth:`session`).
    def plan_table(self, expression: str, input_schema: pa.Schema, *, flavor: str) -> SelectPlan:
        """Translate ``expression`` for a table of ``input_schema`` (columns by name, as a
        Parquet object's); the plan has no sources and no partitions yet (the caller's).

        Raises:
            InvalidRequestError: an unknown flavour, or a statement over the length limit.
            SelectDialectError: the statement does not translate.
        """
        if flavor not in FLAVORS:
            raise InvalidRequestError(
                f"unknown flavor {flavor!r}; use one of {', '.join(FLAVOR_NAMES)}")
        check_query_length(expression, self.config.max_query_chars)
        columns = [Column(f.name, _dialect_type(f.type)) for f in input_schema]
        translation = self._translate(expression, input_format="parquet", flavor=flavor,
                                      columns=columns)
        return self._finish_plan(expression, flavor, (), InputSpec("parquet"), translation,
                                 input_schema, [])

    def session(self, translation: Translation | None, *, partitions: int,
                split_min_bytes: int = 0) -> SessionContext:
        """A DataFusion session as the engine's own reads use (UDFs, Parquet settings, memory
        pool, independent partitions) with ``partitions`` target partitions."""
        return _session(self.config, translation, partitions=partitions,
                        split_min_bytes=split_min_bytes)

    # ------------------------------------------------------------------ execution
    def execute(
        self, plan: SelectPlan, partitions: Sequence[Partition] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Stream the statement's result batches (engine types) over ``partitions``.

        Partitions are read one after another inside one DataFusion partition, so the output
        keeps the object's record order (S3 Select's order) and a LIMIT sees records in order.
        """
        chosen = (
            list(partitions) if partitions is not None else [p.partition for p in plan.partitions]
        )
        if plan.native is not None:
            native = self._native_stream(plan, plan.native, chosen)
            if native is not None:
                yield from native
                return
        if self._objects_read_one_by_one(plan):
            yield from self._each_object(plan, chosen)
            return
        yield from self._reference_stream(plan, chosen)

    def _objects_read_one_by_one(self, plan: SelectPlan) -> bool:
        """A prefix table whose result is the union of its objects' results, in object order
        (no aggregate, LIMIT or whole-input clause): each object can be its own query, and
        then DataFusion's reader serves every object that qualifies on its own."""
        return (self.config.native_readers and len(plan.sources) > 1 and plan.parallel_safe
                and plan.input.format in ("csv", "parquet"))

    def _each_object(self, plan: SelectPlan, chosen: Sequence[Partition]
                     ) -> Iterator[pa.RecordBatch]:
        """The chosen partitions object by object: the object's own plan when DataFusion reads
        it and it reads as the table does (same input and result schema, same header), else
        the reference readers over that object alone."""
        by_name = {s.name: s for s in plan.sources}
        for partition in self._expand(plan, chosen):
            keys = partition.keys if partition.kind == "objects" else tuple(by_name)
            missing = [k for k in keys if k not in by_name]
            if missing:
                raise InvalidRequestError(
                    f"object {missing[0]} is no longer part of the table", code="NoSuchKey")
            waiting: list[str] = []  # a run of objects for the reference readers, read as one
            for key in keys:
                own = self.plan(plan.expression, (by_name[key],), plan.input,
                                flavor=plan.flavor, scan_range=None)
                if (own.native is None or own.result_schema != plan.result_schema
                        or own.input_schema != plan.input_schema or own.header != plan.header):
                    waiting.append(key)
                    continue
                yield from self._reference_objects(plan, waiting)
                waiting = []
                yield from self.execute(own)
            yield from self._reference_objects(plan, waiting)

    def _reference_objects(self, plan: SelectPlan, keys: Sequence[str]
                           ) -> Iterator[pa.RecordBatch]:
        """The reference readers over the named objects of the plan's table, in one stream."""
        if keys:
            yield from self._reference_stream(plan, [Partition("objects", keys=tuple(keys))])

    def _reference_stream(
        self, plan: SelectPlan, chosen: Sequence[Partition]
    ) -> Iterator[pa.RecordBatch]:
        """The reference readers (Python, s3-select rules) feeding DataFusion."""
        if _order_free(plan.translation):
            # An aggregate without LIMIT does not care about record order: let DataFusion read
            # the pieces in parallel, one fragment each.
            pieces = [s for p in self._expand(plan, chosen) for s in self._scans(plan, p)]
            scans = pieces or [chain_scans([])]
        else:
            scans = [chain_scans([s for p in chosen for s in self._scans(plan, p)])]

        def stream(push_filters: bool) -> Any:
            ctx = _session(self.config, plan.translation, push_filters=push_filters)
            ctx.register_dataset(TABLE, StreamingDataset(plan.input_schema, scans))
            return ctx.sql_with_options(plan.translation.sql, _READ_ONLY).execute_stream()

        def open_stream() -> Any:
            try:
                return stream(push_filters=True)
            except Exception as exc:  # DataFusion raises plain exceptions with text only
                if not _filter_not_convertible(exc):
                    raise
            return stream(push_filters=False)  # the filter above the scan; nothing read yet

        yield from _arrow_batches(open_stream)

    def _native_stream(
        self,
        plan: SelectPlan,
        native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,
        chosen: Sequence[Partition],
    ) -> Iterator[pa.RecordBatch] | None:
        """DataFusion reading the file itself, or None when ``chosen`` is not one of its
        partitions (the reference reader then serves them)."""
        whole = [p.partition for p in plan.partitions]
        everything = list(chosen) == whole or [p.kind for p in chosen] == ["object"]
        resolved = self._verified_native(plan, native, chosen, everything)
        if resolved is None:
            return None
        native = resolved
        if everything:
            if _order_free(plan.translation):
                cores = self.config.parallelism
                if isinstance(native, NativeParquetTable):
                    cores = native.partition_count(cores)
                return self._run_native(plan, native, cores, None)
            return self._run_native(plan, native, 1, None)
        if len(chosen) != 1 or not plan.parallel_safe:
            return None
        count = self._range_count(plan.source.size)
        if chosen[0].kind == "byte_range" and isinstance(native, NativeCsvTable):
            pieces: list[Any] = native_ranges(plan.source.size, count)
            wanted: Any = (chosen[0].start, chosen[0].end)
        elif chosen[0].kind == "row_groups" and isinstance(native, NativeParquetTable):
            count = native.partition_count(count)
            pieces, wanted = native.split(count), chosen[0].row_groups
        else:
            return None
        if wanted not in pieces:
            return None
        return self._run_native(plan, native, count, pieces.index(wanted), chosen[0])

    def _verified_native(
        self, plan: SelectPlan, native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,
        chosen: Sequence[Partition], everything: bool,
    ) -> NativeCsvTable | NativeParquetTable | None:
        """The native table once the chosen partitions are proven to read as the reference
        does: at once for an object of this machine (planning surveyed it), by a survey of
        just those partitions now for an object store's (None: the reference reads them)."""
        if isinstance(native, DeferredCsvTable):
            span = None
            if not everything:
                if len(chosen) != 1 or chosen[0].kind != "byte_range":
                    return None
                assert chosen[0].start is not None and chosen[0].end is not None
                span = (chosen[0].start, chosen[0].end)
            return self._surveyed_range(plan, native, span)
        if isinstance(native, NativeParquetTable) and not native.location.local:
            groups = None if everything else tuple(
                g for p in chosen for g in (p.row_groups if p.kind == "row_groups" else ()))
            if groups == ():
                return None
            if self._nan_reason(plan, groups):
                return None
        return native

    def _run_native(
        self,
        plan: SelectPlan,
        native: NativeCsvTable | NativeParquetTable,
        partitions: int,
        index: int | None,
        partition: Partition | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Execute the plan over DataFusion's table: partition ``index`` of ``partitions``
        equal byte ranges (for Parquet, the row groups starting in that range), or (``index``
        None) everything on ``partitions`` cores."""
        split = 0 if index is not None else _MIN_SPLIT_BYTES
        ctx = _session(self.config, plan.translation, partitions=partitions,
                       split_min_bytes=split)

        mismatch: list[bool] = []

        def open_stream() -> Any:
            native.register(ctx, TABLE)
            frame = ctx.sql_with_options(plan.translation.sql, _READ_ONLY)
            if index is None:
                return frame.execute_stream()
            physical = frame.execution_plan()
            if physical.partition_count != partitions:
                mismatch.append(True)  # not DataFusion's split after all
                return None
            return ctx.execute(physical, index)

        yield from _arrow_batches(open_stream)
        if mismatch and partition is not None:  # the reference reader serves the range
            yield from self._reference_stream(plan, [partition])

    def execute_arrow(
        self, plan: SelectPlan, partitions: Sequence[Partition] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`execute`, converted to :attr:`SelectPlan.arrow_schema`."""
        schema = plan.arrow_schema
        for batch in self.execute(plan, partitions):
            yield to_arrow_result(batch, schema)

    def _expand(self, plan: SelectPlan, chosen: Sequence[Partition]) -> list[Partition]:
        """Replace a whole-table partition by the plan's finer partitions."""
        if [p.kind for p in chosen] == ["object"]:
            return [p.partition for p in plan.partitions]
        return list(chosen)

    def _scans(self, plan: SelectPlan, partition: Partition) -> list[ScanFunction]:
        """One scan per (object, piece) the partition covers."""
        if partition.kind == "objects":
            by_name = {s.name: s for s in plan.sources}
            missing = [k for k in partition.keys if k not in by_name]
            if missing:
                raise InvalidRequestError(
                    f"object {missing[0]} is no longer part of the table", code="NoSuchKey"
                )
            return [self._scan(plan, by_name[k], Partition("object")) for k in partition.keys]
        if partition.kind == "object":
            return [self._scan(plan, source, partition) for source in plan.sources]
        return [self._scan(plan, plan.source, partition)]

    def _scan(self, plan: SelectPlan, source: ObjectSource, partition: Partition) -> ScanFunction:
        if plan.input.format == "parquet":
            return self._parquet_scan(plan, source, partition)
        reader = _READERS[plan.input.format]
        return generic_scan(
            lambda: guard_reader(reader(self, plan, source, partition), source.name),
            plan.input_schema,
        )

    def _read_csv(self, plan: SelectPlan, source: ObjectSource,
                  partition: Partition) -> Iterator[pa.RecordBatch]:
        options = self._csv_options(plan.input, plan.flavor, plan.translation)
        typed = plan.input.columns
        with self._open(source, plan.input) as stream:
            batches = csv_input.iter_csv_batches(
                stream,
                options,
                num_columns=len(plan.input_schema),
                byte_range=_byte_range(partition),
                batch_rows=self.config.batch_rows,
            )
            if typed is None:
                yield from batches
                return
            rows = 0
            for batch in batches:
                yield typed.convert(batch, rows, source.name)
                rows += batch.num_rows

    def _read_json(self, plan: SelectPlan, source: ObjectSource,
                   partition: Partition) -> Iterator[pa.RecordBatch]:
        options = json_input.JsonInputOptions.from_request(plan.input.options)
        translation = plan.translation
        with self._open(source, plan.input) as stream:
            yield from json_input.iter_json_batches(
                stream,
                options,
                from_path=translation.json_from_path or (),
                paths=translation.json_paths,
                flavor=plan.rules,
                byte_range=_byte_range(partition),
                batch_rows=min(self.config.batch_rows, 8192),
                max_record_size=self.config.max_record_bytes,
            )

    def _parquet_scan(self, plan: SelectPlan, source: ObjectSource,
                      partition: Partition) -> ScanFunction:
        """Push projection and filter into pyarrow: row groups are pruned by statistics."""
        groups: list[int] | None = None  # all of them
        if partition.kind == "row_groups":
            groups = list(partition.row_groups)
        elif partition.kind == "byte_range":  # a ScanRange request
            assert partition.start is not None and partition.end is not None
            starts = row_group_starts(self._parquet_metadata(source))
            groups = row_groups_starting_in(starts, partition.start, partition.end)
        schema = plan.input_schema

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
                                                 batch_size=self.config.batch_rows,
                                                 use_threads=False)
                else:
                    # View-typed columns: pyarrow's kernels cannot filter them against the plain
                    # strings DataFusion sees, so read, convert, then filter and project here.
                    fragments = pruned_fragments(file_format, file, groups, file_schema, None)
                    dataset = ds.FileSystemDataset(fragments, file_schema, file_format)
                    raw = dataset.to_batches(batch_size=self.config.batch_rows, use_threads=False)
                    batches = generic_scan(lambda: raw, schema)(columns, filter)
                for batch in guard_reader(_parquet_errors(batches, source.name), source.name):
                    if batch.num_rows:
                        yield batch

        return scan

    # ------------------------------------------------------------------ helpers
    def _csv_options(self, input: InputSpec, flavor: str,
                     translation: Translation | None = None) -> csv_input.CsvInputOptions:
        """The CSV reading rules of ``flavor``'s engine (``standard`` reads as AWS), an empty
        field kept as ``''`` where the translation reads it as NULL itself."""
        options = csv_input.CsvInputOptions.from_request(
            input.options, engine_rules(flavor), max_record_size=self.config.max_record_bytes
        )
        if translation is not None and translation.keeps_empty_fields:
            return replace(options, empty_is_null=False)
        return options

    def _open(self, source: ObjectSource, input: InputSpec) -> BinaryIO:
        # a source that reports S3's BytesProcessed has a ``processed`` counter (the server's)
        processed = getattr(source, "processed", None)
        return compression.open_decompressed(source.open(), input.compression, processed)

    def _parquet_metadata(self, source: ObjectSource) -> pq.FileMetaData:
        """The footer of a Parquet object, read once per object version (planning asks for
        it several times; over an object store each read is a request)."""
        try:
            version = version_key(source)
        except OSError:
            version = None
        if version is None:
            return self._parquet_file(source).metadata
        return self.parquet_footers.get(version, lambda: self._parquet_file(source).metadata)

    def _parquet_file(self, source: ObjectSource) -> pq.ParquetFile:
        try:
            # positioned reads: the footer alone, not a stream's read-ahead
            return pq.ParquetFile(random_access(source))
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputFormatError(
                f"{source.name}: not a readable Parquet object ({exc})", code="InvalidParquet"
            ) from None

    def _peek_csv_width(
        self, source: ObjectSource, input: InputSpec, options: csv_input.CsvInputOptions
    ) -> int:
        with self._open(source, input) as stream:
            for batch in csv_input.iter_csv_batches(
                stream, options, num_columns=None, batch_rows=1024, block_size=64 << 10
            ):
                return batch.num_columns
        return 0


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


_PLAN_CACHE_ENTRIES = 256


def _plan_key(
    expression: str,
    sources: Sequence[ObjectSource],
    input: InputSpec,
    flavor: str,
    scan_range: tuple[int, int] | None,
) -> tuple[Any, ...] | None:
    """What a plan depends on, or None when a source has no version (bytes in memory)."""
    versions = []
    for source in sources:
        try:
            version = version_key(source)
        except OSError:
            return None
        if version is None:
            return None
        versions.append((source.name, version))
    digest = hashlib.sha256(expression.encode("utf-8", "surrogatepass")).digest()
    return (digest, flavor, repr(input), scan_range, tuple(versions))


def _named(error: InputFormatError, object_name: str) -> InputFormatError:
    """The same error with the object named in its message."""
    if error.message.startswith(object_name):
        return error
    return type(error)(f"{object_name}: {error.message}", code=error.code, offset=error.offset,
                       row=error.row)


def _arrow_batches(open_stream: Callable[[], Any]) -> Iterator[pa.RecordBatch]:
    """The batches of a DataFusion stream as pyarrow, DataFusion's errors made ours; nothing
    when ``open_stream`` returns None."""
    try:
        stream = open_stream()
        if stream is None:
            return
        for batch in stream:
            yield batch.to_pyarrow()
    except StorageError:
        raise
    except Exception as exc:  # DataFusion raises plain exceptions with text only
        raise engine_error(exc) from None


arrow_batches = _arrow_batches
"""The public name of :func:`_arrow_batches` (tables read elsewhere: ``iceberg_scan.py``)."""


def _prefix_reason(plan: SelectPlan) -> str:
    """Why a prefix table has no single native reader, and who reads it instead."""
    if plan.parallel_safe:
        return "a prefix table: read object by object, by DataFusion's reader where it qualifies"
    return "a prefix table under an aggregate, LIMIT or whole-input clause: reference readers"


def _order_free(translation: Translation) -> bool:
    """The result does not depend on the order records are read in (DataFusion may read
    the pieces in parallel): an aggregate, GROUP BY, DISTINCT or ORDER BY without LIMIT."""
    return (translation.is_aggregate or translation.whole_input) and translation.limit is None


def _parquet_errors(batches: Iterable[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputFormatError(f"{name}: corrupt Parquet data ({exc})",
                               code="InvalidParquet") from None


def _byte_range(partition: Partition) -> tuple[int, int] | None:
    """The readers' ``(start, stop)`` for a byte-range partition (both end exclusive)."""
    if partition.kind != "byte_range":
        return None
    assert partition.start is not None and partition.end is not None
    return (partition.start, partition.end)


def _translate(expression: str, **kwargs: Any) -> Translation:
    try:
        return translate(expression, table=TABLE, **kwargs)
    except SelectDialectError:
        raise
    except RecursionError:
        raise ResourceLimitError(
            "expression is nested too deeply to evaluate", code="ExpressionTooComplex"
        ) from None


_PLANNERS = {
    "csv": SelectEngine._plan_csv,
    "json": SelectEngine._plan_json,
    "parquet": SelectEngine._plan_parquet,
}
_READERS = {
    "csv": SelectEngine._read_csv,
    "json": SelectEngine._read_json,
}
