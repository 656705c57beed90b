"""Run one s3-select statement over one object with DataFusion, partition by partition.

``SelectEngine.plan`` translates the statement (``select_dialect.translate``), works out the
input table's schema and the result's Arrow schema, and splits the object into partitions;
``SelectEngine.execute`` runs the plan over some of those partitions and streams Arrow batches.
Nothing here keeps state between calls: a ticket carries what ``plan`` needs to be re-run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from datafusion import RuntimeEnvBuilder, SessionConfig, SessionContext, SQLOptions

from flight_storage import udfs
from flight_storage.errors import (
    InputFormatError,
    InvalidRequestError,
    QueryExecutionError,
    ResourceLimitError,
    StorageError,
)
from flight_storage.formats import compression, csv_input, json_input
from flight_storage.protocol import Partition
from flight_storage.sources import ObjectSource
from flight_storage.streaming_dataset import StreamingDataset
from flight_storage.values import S3_TIMESTAMP
from select_dialect import Column, Translation, translate
from select_dialect.errors import SelectDialectError

TABLE = "s3object"
FLAVORS = ("ceph", "aws")
COMPRESSIONS = ("NONE", "GZIP", "BZIP2", "ZSTD")


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of query execution (built once at the entry point).

    Attributes:
        batch_rows: rows per Arrow batch read from CSV/JSON.
        partition_bytes: CSV/NDJSON objects larger than this are split into byte ranges.
        row_groups_per_partition: Parquet row groups per partition.
        memory_limit_bytes: DataFusion memory pool per query (None: unbounded).
        max_query_chars: longest statement accepted (AWS allows 256 KiB).
        max_record_bytes: longest CSV/JSON record accepted (AWS: 1 MiB).
    """

    batch_rows: int = 65536
    partition_bytes: int = 64 << 20
    row_groups_per_partition: int = 4
    memory_limit_bytes: int | None = 1 << 30
    max_query_chars: int = 256 * 1024
    max_record_bytes: int = 1 << 20


@dataclass(frozen=True)
class InputSpec:
    """A resolved AWS InputSerialization: format, compression and the format's options."""

    format: str
    compression: str = "NONE"
    options: Mapping[str, Any] = field(default_factory=dict)

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


@dataclass(frozen=True)
class PlannedPartition:
    """A partition with what planning learnt of its size (for FlightInfo totals)."""

    partition: Partition
    bytes: int | None = None
    rows: int | None = None


@dataclass(frozen=True)
class SelectPlan:
    """Everything needed to execute a statement over partitions of one object."""

    expression: str
    flavor: str
    source: ObjectSource
    input: InputSpec
    translation: Translation
    input_schema: pa.Schema
    result_schema: pa.Schema
    partitions: tuple[PlannedPartition, ...]
    header: tuple[str, ...] | None = None

    @property
    def parallel_safe(self) -> bool:
        """True when partitions may be served as independent endpoints (no cross-row state)."""
        t = self.translation
        return not t.is_aggregate and t.limit is None

    @property
    def arrow_schema(self) -> pa.Schema:
        """The schema of :meth:`SelectEngine.execute_arrow` batches (what Flight clients see)."""
        return arrow_result_schema(self.result_schema, self.translation.output_names)


def _session(config: EngineConfig) -> SessionContext:
    session_config = (
        SessionConfig()
        .with_batch_size(8192)
        .with_target_partitions(2)
        .set("datafusion.execution.enable_file_stream_work_stealing", "false")
        .set("datafusion.optimizer.enable_round_robin_repartition", "false")
        .set("datafusion.execution.parquet.pushdown_filters", "true")
    )
    runtime = RuntimeEnvBuilder()
    if config.memory_limit_bytes is not None:
        runtime = runtime.with_fair_spill_pool(config.memory_limit_bytes)
    ctx = SessionContext(session_config, runtime)
    udfs.register_udfs(ctx)
    return ctx


_READ_ONLY = SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)

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


# DataFusion error texts that are really the user's processing errors: (pattern, S3 code).
_ENGINE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Cannot cast|Cast error|Failed to parse|Can't parse", re.I), "CastFailed"),
    (re.compile(r"Divide by zero|Division by zero", re.I), "DivisionByZero"),
    (re.compile(r"overflow", re.I), "NumericValueOutOfRange"),
    (re.compile(r"Resources exhausted|memory", re.I), "ResourceLimitExceeded"),
)


def engine_error(exc: BaseException) -> StorageError:
    """Turn an exception raised inside DataFusion into a user-facing error with an S3 code."""
    if isinstance(exc, StorageError):
        return exc
    text = str(exc)
    found = udfs.parse_processing_error(text)
    if found is not None:
        code, message = found
        return QueryExecutionError(message, code=code)
    embedded = _embedded_storage_error(text)
    if embedded is not None:
        return embedded
    for pattern, code in _ENGINE_ERRORS:
        if pattern.search(text):
            message = _first_line(text)
            if code == "ResourceLimitExceeded":
                return ResourceLimitError(message, code=code)
            return QueryExecutionError(message, code=code)
    return QueryExecutionError(_first_line(text), code="ProcessingTimeError")


_EMBEDDED = re.compile(r"\[flight-select:(\w+):(\w+)\] (.*)")


def _embedded_storage_error(text: str) -> StorageError | None:
    """Recover a StorageError raised by one of our readers inside a DataFusion scan."""
    match = _EMBEDDED.search(text)
    if match is None:
        return None
    cls_name, code, message = match.groups()
    cls = {"InputFormatError": InputFormatError, "ResourceLimitError": ResourceLimitError}.get(
        cls_name, QueryExecutionError
    )
    return cls(message.strip(), code=code)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "query failed"
    return re.sub(r"^(DataFusion error|Execution error|Arrow error|External error):\s*", "", line)


def _reader_guard(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Mark our own errors so they survive the trip through DataFusion's error text."""
    try:
        yield from batches
    except StorageError as exc:
        raise RuntimeError(
            f"[flight-select:{type(exc).__name__}:{exc.code}] {exc.message}"
        ) from None


def arrow_result_schema(schema: pa.Schema, names: Sequence[str]) -> pa.Schema:
    """Result schema as Flight clients see it: display names, timestamps as real timestamps."""
    fields = []
    for arrow_field, name in zip(schema, names, strict=True):
        data_type = arrow_field.type
        if data_type == S3_TIMESTAMP:
            data_type = pa.timestamp("ns", tz="UTC")
        elif pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
            data_type = pa.string()
        fields.append(pa.field(name, data_type, nullable=True))
    return pa.schema(fields)


def to_arrow_result(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Convert one engine batch to :func:`arrow_result_schema` exactly."""
    columns = []
    for column, target in zip(batch.columns, schema, strict=True):
        if column.type == S3_TIMESTAMP:
            column = column.field("utc")
        if column.type != target.type:
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class SelectEngine:
    """Plans and runs s3-select statements over objects.

    Args:
        config: execution limits and partitioning.

    Example:
        >>> engine = SelectEngine(EngineConfig())
        >>> plan = engine.plan("select _1 from s3object", BytesSource(b"a\\nb\\n"),
        ...                    InputSpec("csv"), flavor="ceph")
        >>> [b.num_rows for b in engine.execute(plan)]
        [2]
    """

    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()

    # ------------------------------------------------------------------ planning
    def plan(
        self,
        expression: str,
        source: ObjectSource,
        input: InputSpec,
        *,
        flavor: str = "ceph",
        scan_range: tuple[int, int] | None = None,
    ) -> SelectPlan:
        """Translate ``expression`` for ``source`` and split the work into partitions."""
        if flavor not in FLAVORS:
            raise InvalidRequestError(f"unknown flavor {flavor!r}; use one of {FLAVORS}")
        if len(expression) > self.config.max_query_chars:
            raise ResourceLimitError(
                f"query text is {len(expression)} characters; the limit is "
                f"{self.config.max_query_chars}",
                code="ExpressionTooLong",
            )
        if scan_range is not None and not input.splittable:
            raise InvalidRequestError(
                "ScanRange applies only to uncompressed CSV and JSON LINES objects",
                code="InvalidRequestParameter",
            )
        planner = _PLANNERS.get(input.format)
        if planner is None:
            raise InvalidRequestError(f"unsupported input format {input.format!r}")
        return planner(self, expression, source, input, flavor, scan_range)

    def _plan_csv(
        self,
        expression: str,
        source: ObjectSource,
        input: InputSpec,
        flavor: str,
        scan_range: tuple[int, int] | None,
    ) -> SelectPlan:
        options = csv_input.CsvInputOptions.from_request(input.options, flavor)
        header_info = str(input.options.get("FileHeaderInfo", "NONE")).upper()
        header: list[str] | None = None
        if header_info == "USE":
            with self._open(source, input) as stream:
                header = csv_input.read_csv_header(stream, options)
        translation = _translate(expression, input_format="csv", flavor=flavor, header=header)
        width = translation.max_positional
        if header is not None:
            width = max(width, len(header)) if translation.select_star else width
        if translation.select_star and header is None:
            width = max(width, self._peek_csv_width(source, input, options))
        width = max(width, 1)  # a statement that reads no field still counts rows
        schema = pa.schema([pa.field(f"_{i}", pa.string()) for i in range(1, width + 1)])
        partitions = self._byte_partitions(source, input, scan_range)
        return self._finish_plan(
            expression, flavor, source, input, translation, schema, partitions, header
        )

    def _plan_json(
        self,
        expression: str,
        source: ObjectSource,
        input: InputSpec,
        flavor: str,
        scan_range: tuple[int, int] | None,
    ) -> SelectPlan:
        translation = _translate(expression, input_format="json", flavor=flavor)
        schema = pa.schema([pa.field(name, pa.string()) for name in translation.json_paths])
        partitions = self._byte_partitions(source, input, scan_range)
        return self._finish_plan(expression, flavor, source, input, translation, schema, partitions)

    def _plan_parquet(
        self,
        expression: str,
        source: ObjectSource,
        input: InputSpec,
        flavor: str,
        scan_range: tuple[int, int] | None,
    ) -> SelectPlan:
        metadata = self._parquet_file(source).metadata
        file_schema = metadata.schema.to_arrow_schema()
        columns = [Column(f.name, _dialect_type(f.type)) for f in file_schema]
        translation = _translate(expression, input_format="parquet", flavor=flavor, columns=columns)
        groups = list(range(metadata.num_row_groups))
        step = max(1, self.config.row_groups_per_partition)
        partitions = tuple(
            PlannedPartition(
                Partition("row_groups", row_groups=tuple(groups[i : i + step])),
                bytes=sum(metadata.row_group(g).total_byte_size for g in groups[i : i + step]),
                rows=sum(metadata.row_group(g).num_rows for g in groups[i : i + step]),
            )
            for i in range(0, len(groups), step)
        ) or (PlannedPartition(Partition("object"), bytes=0, rows=0),)
        return self._finish_plan(
            expression, flavor, source, input, translation, file_schema, partitions
        )

    def _finish_plan(
        self,
        expression: str,
        flavor: str,
        source: ObjectSource,
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
            source=source,
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
            start, end = scan_range  # S3's End is inclusive; a Partition's end is exclusive
            if not 0 <= start <= end:
                raise InvalidRequestError(
                    f"invalid ScanRange {start}..{end}", code="InvalidScanRange"
                )
            stop = min(end + 1, size)
            if start >= stop:
                return (PlannedPartition(Partition("byte_range", start=start, end=start), bytes=0),)
            return (
                PlannedPartition(Partition("byte_range", start=start, end=stop), bytes=stop - start),
            )
        step = self.config.partition_bytes
        if not input.splittable or size <= step:
            return (PlannedPartition(Partition("object"), bytes=size),)
        return tuple(
            PlannedPartition(
                Partition("byte_range", start=lo, end=min(lo + step, size)),
                bytes=min(step, size - lo),
            )
            for lo in range(0, size, step)
        )

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
        factories = [self._batch_factory(plan, p) for p in chosen]
        ctx = _session(self.config)
        ctx.register_dataset(TABLE, StreamingDataset(plan.input_schema, [_chain(factories)]))
        try:
            frame = ctx.sql_with_options(plan.translation.sql, _READ_ONLY)
            for batch in frame.execute_stream():
                yield batch.to_pyarrow()
        except StorageError:
            raise
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            raise engine_error(exc) from None

    def execute_arrow(
        self, plan: SelectPlan, partitions: Sequence[Partition] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`execute`, converted to :attr:`SelectPlan.arrow_schema`."""
        schema = plan.arrow_schema
        for batch in self.execute(plan, partitions):
            yield to_arrow_result(batch, schema)

    def _batch_factory(
        self, plan: SelectPlan, partition: Partition
    ) -> Callable[[], Iterable[pa.RecordBatch]]:
        reader = _READERS[plan.input.format]
        return lambda: _reader_guard(reader(self, plan, partition))

    def _read_csv(self, plan: SelectPlan, partition: Partition) -> Iterator[pa.RecordBatch]:
        options = csv_input.CsvInputOptions.from_request(plan.input.options, plan.flavor)
        with self._open(plan.source, plan.input) as stream:
            yield from csv_input.iter_csv_batches(
                stream,
                options,
                num_columns=len(plan.input_schema),
                byte_range=_byte_range(partition),
                batch_rows=self.config.batch_rows,
            )

    def _read_json(self, plan: SelectPlan, partition: Partition) -> Iterator[pa.RecordBatch]:
        options = json_input.JsonInputOptions.from_request(plan.input.options)
        translation = plan.translation
        with self._open(plan.source, plan.input) as stream:
            yield from json_input.iter_json_batches(
                stream,
                options,
                from_path=translation.json_from_path or (),
                paths=translation.json_paths,
                flavor=plan.flavor,
                byte_range=_byte_range(partition),
                batch_rows=min(self.config.batch_rows, 8192),
            )

    def _read_parquet(self, plan: SelectPlan, partition: Partition) -> Iterator[pa.RecordBatch]:
        parquet = self._parquet_file(plan.source)
        groups = list(partition.row_groups) if partition.kind == "row_groups" else None
        if groups == []:
            return
        yield from parquet.iter_batches(
            batch_size=self.config.batch_rows, row_groups=groups, use_threads=False
        )

    # ------------------------------------------------------------------ helpers
    def _open(self, source: ObjectSource, input: InputSpec) -> BinaryIO:
        return compression.open_decompressed(source.open(), input.compression)

    def _parquet_file(self, source: ObjectSource) -> pq.ParquetFile:
        try:
            return pq.ParquetFile(source.open())
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputFormatError(
                f"{source.name}: not a readable Parquet object ({exc})", code="InvalidParquet"
            ) from None

    def _peek_csv_width(
        self, source: ObjectSource, input: InputSpec, options: csv_input.CsvInputOptions
    ) -> int:
        with self._open(source, input) as stream:
            for batch in csv_input.iter_csv_batches(
                stream, options, num_columns=None, batch_rows=1024
            ):
                return batch.num_columns
        return 0


def _chain(
    factories: Sequence[Callable[[], Iterable[pa.RecordBatch]]],
) -> Callable[[], Iterator[pa.RecordBatch]]:
    def run() -> Iterator[pa.RecordBatch]:
        for factory in factories:
            yield from factory()

    return run


def _byte_range(partition: Partition) -> tuple[int, int] | None:
    """The readers' inclusive ``(start, end)`` for a byte-range partition."""
    if partition.kind != "byte_range":
        return None
    assert partition.start is not None and partition.end is not None
    return (partition.start, partition.end - 1)


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
    "parquet": SelectEngine._read_parquet,
}
