"""CSV: the s3-select CSV rules (``formats/csv_input.py``), DataFusion's own CSV reader where
one vectorised survey proves it reads the object exactly so (``formats/csv_guard.py``,
``execution/native_csv.py``), byte ranges as partitions, and typed (configured or sniffed)
tables."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InputFormatError, InvalidRequestError
from flight_storage.execution.drivers.base import byte_range, open_input, prefix_reason
from flight_storage.execution.engine_errors import guard_reader
from flight_storage.execution.native_csv import (
    DeferredCsvTable,
    NativeCsvTable,
    native_csv_table,
    native_ranges,
    reads_compression,
)
from flight_storage.execution.plan_types import (
    InputSpec,
    PlannedPartition,
    SelectPlan,
    dialect_type,
)
from flight_storage.execution.session import new_session
from flight_storage.execution.streaming_dataset import ScanFunction, generic_scan
from flight_storage.formats import csv_input
from flight_storage.formats.csv_guard import CsvSurvey, options_reason
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.scan_range import scan_bounds
from flight_storage.formats.typed_columns import BAD_VALUES_NULL, TypedColumns, cast_or_null
from flight_storage.protocol import ByteRange, Partition, WholeObject
from flight_storage.storage.sources import (
    DataFusionLocation,
    ObjectSource,
    datafusion_location,
    version_key,
)
from select_dialect import Column, Translation
from select_dialect.flavors import FLAVORS

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine
    from flight_storage.execution.native_parquet import NativeParquetTable


def csv_options(engine: SelectEngine, input: InputSpec, flavor: str,
                translation: Translation | None = None) -> CsvInputOptions:
    """The CSV options of ``input`` under the reading rules of ``flavor``
    (``Flavor.reading``; a typed table's empty fields by ``csv_typed_empty_is_null``), an
    empty field kept as ``''`` where the translation reads it as NULL itself."""
    options = CsvInputOptions.from_request(
        input.options, FLAVORS[flavor].reading, max_record_size=engine.config.max_record_bytes,
        typed=input.columns is not None,
    )
    if translation is not None and translation.keeps_empty_fields:
        return replace(options, empty_is_null=False)
    return options


class CsvDriver:
    """The CSV format driver (see the module docstring)."""

    # ------------------------------------------------------------------ planning
    def translate(self, engine: SelectEngine, expression: str,
                  sources: tuple[ObjectSource, ...], input: InputSpec, flavor: str
                  ) -> tuple[Translation, pa.Schema, list[str] | None]:
        if input.columns is not None:
            schema = input.columns.schema
            columns = [Column(f.name, dialect_type(f.type)) for f in schema]
            translation = engine.translate(expression, input_format="parquet", flavor=flavor,
                                           columns=columns)
            return translation, schema, None
        options = csv_options(engine, input, flavor)
        header_info = str(input.options.get("FileHeaderInfo", "NONE")).upper()
        header: list[str] | None = None
        if header_info == "USE":
            with open_input(sources[0], input) as stream:
                header = csv_input.read_csv_header(stream, options)
        translation = engine.translate(expression, input_format="csv", flavor=flavor,
                                       header=header)
        width = translation.max_positional
        if header is not None and translation.select_star:
            width = max(width, len(header))
        if translation.select_star and header is None:
            with open_input(sources[0], input) as stream:
                width = max(width, csv_input.peek_width(stream, options))
        width = max(width, 1)  # a statement that reads no field still counts rows
        positions: Sequence[int] = range(1, width + 1)
        if width > engine.config.max_columns and not translation.select_star:
            # very wide records: the table has only the fields the statement names
            positions = sorted(translation.positions)
        if len(positions) > engine.config.max_columns:
            raise InvalidRequestError(
                f"the query's table would have {len(positions)} columns; the limit is "
                f"{engine.config.max_columns} (--max-columns): name the columns you need",
                code="TooManyColumns",
            )
        schema = pa.schema([pa.field(f"_{i}", pa.string()) for i in positions])
        return translation, schema, header

    def partitions(self, engine: SelectEngine, source: ObjectSource, input: InputSpec,
                   scan_range: tuple[int, int] | None, wanted: int | None
                   ) -> tuple[PlannedPartition, ...]:
        return byte_partitions(engine, source, input, scan_range, wanted)

    def with_native(self, engine: SelectEngine, plan: SelectPlan,
                    scan_range: tuple[int, int] | None) -> SelectPlan:
        native, reason = self._native(engine, plan, scan_range)
        plan = dataclasses.replace(plan, native=native, native_reason=reason)
        if plan.input.columns is not None and plan.input.columns.bad_values == BAD_VALUES_NULL:
            plan = dataclasses.replace(plan, warnings=_bad_value_warnings(engine, plan))
        return plan

    def _native(self, engine: SelectEngine, plan: SelectPlan,
                scan_range: tuple[int, int] | None
                ) -> tuple[NativeCsvTable | DeferredCsvTable | None, str]:
        """DataFusion's CSV reader for the plan's object, or None and why not."""
        if not engine.config.native_readers:
            return None, "native readers are off"
        if len(plan.sources) != 1:
            return None, prefix_reason(plan)
        if scan_range is not None:
            return None, "a ScanRange request"
        location = datafusion_location(plan.source)
        if location is None:
            return None, "not a stored object"
        if not reads_compression(plan.input.compression):
            # before the survey: it would decompress the whole object for nothing
            return None, f"{plan.input.compression} input"
        options = csv_options(engine, plan.input, plan.flavor, plan.translation)
        if not location.local:
            reason = options_reason(options)
            if reason:
                return None, reason
            return DeferredCsvTable(location, options, len(plan.input_schema),
                                    plan.input.compression, plan.input.columns,
                                    plan.source), ""
        try:
            survey = engine.surveys.survey(plan.source, options, plan.input.compression)
        except (OSError, InputFormatError) as exc:
            return None, f"survey failed ({exc})"
        return _checked(engine, location, options, survey, plan)

    def verified(self, engine: SelectEngine, plan: SelectPlan,
                 native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,
                 chosen: Sequence[Partition], everything: bool
                 ) -> NativeCsvTable | NativeParquetTable | None:
        if not isinstance(native, DeferredCsvTable):
            return native  # planning surveyed the object
        span = None
        if not everything:
            if len(chosen) != 1 or not isinstance(chosen[0], ByteRange):
                return None
            span = byte_range(chosen[0])
        return _surveyed(engine, plan, native, span)

    # ------------------------------------------------------------------ reading
    def scan(self, engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             partition: Partition) -> ScanFunction:
        return generic_scan(
            lambda: guard_reader(_read(engine, plan, source, partition), source.name),
            plan.input_schema,
        )


def byte_partitions(engine: SelectEngine, source: ObjectSource, input: InputSpec,
                    scan_range: tuple[int, int] | None, wanted: int | None = None
                    ) -> tuple[PlannedPartition, ...]:
    """A splittable object's byte ranges (DataFusion's own split; ``wanted``: as many as a
    client asked for, ``SelectEngine.range_count``), or the whole object; a ScanRange
    request's one range."""
    size = source.size
    if scan_range is not None:
        start, stop = scan_bounds(scan_range, size)
        return (
            PlannedPartition(ByteRange(start, stop), bytes=stop - start),
        )
    count = engine.range_count(size, wanted)
    if not input.splittable or count == 1:
        return (PlannedPartition(WholeObject(), bytes=size),)
    return tuple(
        PlannedPartition(ByteRange(lo, hi), bytes=hi - lo)
        for lo, hi in native_ranges(size, count)
    )


def _checked(engine: SelectEngine, location: DataFusionLocation,
             options: CsvInputOptions, survey: CsvSurvey, plan: SelectPlan
             ) -> tuple[NativeCsvTable | None, str]:
    widest = max(survey.max_fields, survey.header_fields)
    if widest > engine.config.max_columns:
        return None, f"records of {widest} fields (over --max-columns)"
    return native_csv_table(location, options, survey, width=len(plan.input_schema),
                            compression=plan.input.compression, columns=plan.input.columns,
                            source=plan.source)


def _surveyed(engine: SelectEngine, plan: SelectPlan, deferred: DeferredCsvTable,
              span: tuple[int, int] | None) -> NativeCsvTable | None:
    """The native table of a deferred plan for the bytes ``span`` (None: the whole object),
    surveyed now (and cached), or None when the reference reader must read it."""
    try:
        if span is None and plan.input.compression != "NONE":
            survey = engine.surveys.survey(plan.source, deferred.options,
                                           plan.input.compression)
        else:
            start, stop = span if span is not None else (0, plan.source.size)
            survey = engine.surveys.survey_range(plan.source, deferred.options, start, stop)
    except (OSError, InputFormatError):
        return None  # the reference reader reads it, and reports what is wrong
    native, _ = _checked(engine, deferred.location, deferred.options, survey, plan)
    return native


def _bad_value_warnings(engine: SelectEngine, plan: SelectPlan) -> tuple[str, ...]:
    """A warning per object and typed column holding fields that read as NULL (a
    ``bad_values`` ``null`` table), counted once per object version: by DataFusion where it
    reads the object, by the reference reader otherwise. A prefix table has the warnings of
    its objects' own plans."""
    if len(plan.sources) > 1:
        return tuple(w for source in plan.sources for w in engine.plan(
            plan.expression, (source,), plan.input, flavor=plan.flavor).warnings)
    columns = plan.input.columns
    assert columns is not None
    source = plan.source

    def count() -> list[tuple[int, int, str]]:
        if isinstance(plan.native, NativeCsvTable):
            return plan.native.bad_values(new_session(engine.config))
        return _count_bad_values(engine, plan, source, columns)

    version = version_key(source)
    options = csv_options(engine, plan.input, plan.flavor, plan.translation)
    found = count() if version is None else engine.bad_values.get(
        version, count, columns, options, plan.input.compression)
    return tuple(
        f"{source.name}: {n} value{'s' if n > 1 else ''} of column {i} "
        f"({columns.names[i - 1]}) {'are' if n > 1 else 'is'} not a valid "
        f"{columns.types[i - 1]} (e.g. {example!r}); read as NULL"
        for i, n, example in found)


def _count_bad_values(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
                      columns: TypedColumns) -> list[tuple[int, int, str]]:
    """``(column, count, example)`` of fields that do not convert, by the reference reader
    (one pass over the object)."""
    options = csv_options(engine, plan.input, plan.flavor, plan.translation)
    schema = columns.schema
    found: dict[int, tuple[int, str]] = {}
    with open_input(source, plan.input) as stream:
        for batch in csv_input.iter_csv_batches(stream, options, num_columns=len(schema),
                                                batch_rows=engine.config.batch_rows):
            for index, target in enumerate(schema, start=1):
                if target.type == pa.string():
                    continue
                text = pc.utf8_trim_whitespace(batch.column(index - 1))
                converted, bad = cast_or_null(text, target.type)
                if bad is None:
                    continue
                given = pc.and_(pc.is_valid(text), pc.not_equal(text, ""))
                lost = pc.sum(pc.and_(given, pc.is_null(converted))).as_py() or 0
                before = found.get(index, (0, bad[1]))
                found[index] = (before[0] + lost, before[1])
    return [(i, n, example) for i, (n, example) in sorted(found.items())]


def _sparse_positions(schema: pa.Schema) -> list[int] | None:
    """The field positions of a table of only the fields a statement names (very wide
    records), or None for the usual ``_1 .. _N``."""
    positions = [int(name[1:]) for name in schema.names]
    return None if positions == list(range(1, len(positions) + 1)) else positions


def _read(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
          partition: Partition) -> Iterator[pa.RecordBatch]:
    span = byte_range(partition)
    try:
        yield from _batches(engine, plan, source, span)
    except InputFormatError as exc:  # its line counts from the range's first line
        raise _shifted(exc, source, plan.input, span) from None


def _batches(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             span: tuple[int, int] | None) -> Iterator[pa.RecordBatch]:
    options = csv_options(engine, plan.input, plan.flavor, plan.translation)
    typed = plan.input.columns
    with open_input(source, plan.input) as stream:
        batches = csv_input.iter_csv_batches(
            stream,
            options,
            # a typed table sees every field: a record wider than its columns is an error
            num_columns=len(plan.input_schema) if typed is None else None,
            byte_range=span,
            batch_rows=engine.config.batch_rows,
            columns=_sparse_positions(plan.input_schema) if typed is None else None,
        )
        if typed is None:
            yield from batches
            return
        # the range's lines; the lines before it are counted only for an error
        start = span[0] if span is not None else 0
        line = 2 if options.has_header and start == 0 else 1
        for batch in batches:
            yield typed.convert(batch, line, source.name)
            line += batch.num_rows


def _range_origin(source: ObjectSource, start: int) -> tuple[int, int]:
    """Lines of ``source`` that start before byte ``start``, and where the first line at or
    after it starts (a range's first record; an error's line and offset need them)."""
    count, last, offset = 0, b"\n", 0
    with source.open() as stream:
        while offset < start and (chunk := stream.read(min(4 << 20, start - offset))):
            count, last, offset = count + chunk.count(b"\n"), chunk[-1:], offset + len(chunk)
        if last == b"\n":
            return count, offset
        rest = stream.readline()
        return count + 1, offset + len(rest)


def _shifted(error: InputFormatError, source: ObjectSource, input: InputSpec,
             span: tuple[int, int] | None) -> InputFormatError:
    """A reader error whose line and byte offset count from a byte range, counted from the
    object's start instead."""
    start = span[0] if span is not None else 0
    if start == 0 or input.compression != "NONE" or (error.line is None
                                                     and error.offset is None):
        return error
    lines, first = _range_origin(source, start)
    line = error.line + lines if error.line is not None else None
    offset = error.offset + first if error.offset is not None else None
    message = error.message
    if line is not None:
        message = re.sub(r"\bline \d+", f"line {line}", message, count=1)
    if offset is not None:
        message = re.sub(r"\bbyte offset \d+", f"byte offset {offset}", message, count=1)
    return type(error)(message, code=error.code, line=line, column=error.column,
                       offset=offset, row=error.row)
