"""JSON (LINES and DOCUMENT): always the reference reader (``formats/json_input.py``), one
Utf8 column of compact JSON text per path the statement uses; JSON LINES is cut in byte
ranges like CSV. A typed JSON Lines table (the standard surface's: sniffed or configured
columns, ``request/json_sniffing.py``) is translated as a Parquet table of those columns and
its cells converted to their types (``formats/json_typed.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InvalidRequestError
from flight_storage.execution.drivers.base import byte_range, open_input
from flight_storage.execution.drivers.csv_format import byte_partitions
from flight_storage.execution.engine_errors import guard_reader
from flight_storage.execution.native_parquet import NativeParquetTable
from flight_storage.execution.plan_types import (
    InputSpec,
    PlannedPartition,
    SelectPlan,
    dialect_type,
)
from flight_storage.execution.streaming_dataset import Columns, ScanFunction, generic_scan
from flight_storage.formats import json_input
from flight_storage.formats.json_lines_arrow import arrow_reads, iter_arrow_lines
from flight_storage.formats.json_typed import column_paths, typed_batch
from flight_storage.protocol import Partition, WholeObject
from flight_storage.storage.sources import ObjectSource
from select_dialect import Column, Translation
from select_dialect.errors import TableShapeError, UnsupportedFeatureError

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine
    from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable


_TYPED_READER = ("typed JSON Lines: pyarrow's JSON parser where it proves it reads as the "
                 "reference JSON reader does (formats/json_lines_arrow.py), that reader otherwise")
"""The reader note of a typed JSON table's plan (the FlightInfo's ``reason``)."""
_NESTED_PATHS = "nested paths"
"""How the dialect's refusal of a path into a column begins (``lowering_base._reference``)."""


def _with_json_hint(error: UnsupportedFeatureError) -> UnsupportedFeatureError:
    """A refused path into a typed JSON table's column, with where such paths are read."""
    if not error.message.startswith(_NESTED_PATHS):
        return error
    return TableShapeError(
        f"{error.message}: on the standard surface a JSON Lines object is a table of its keys, "
        "a nested object or array a column of its JSON text; read paths into it in the aws "
        "flavour", code=error.code, line=error.line, column=error.column)


class JsonDriver:
    """The JSON format driver (see the module docstring)."""

    def translate(self, engine: SelectEngine, expression: str,
                  sources: tuple[ObjectSource, ...], input: InputSpec, flavor: str  # noqa: ARG002 - FormatDriver.translate
                  ) -> tuple[Translation, pa.Schema, list[str] | None]:
        if input.columns is not None:
            if len(input.columns.names) > engine.config.max_columns:
                raise InvalidRequestError(
                    f"the table would have {len(input.columns.names)} columns (keys); the "
                    f"limit is {engine.config.max_columns} (--max-columns): declare the "
                    "columns you need in the bucket's .flight-select.json",
                    code="TooManyColumns")
            schema = input.columns.schema
            columns = [Column(f.name, dialect_type(f.type)) for f in schema]
            try:
                translation = engine.translate(expression, input_format="parquet",
                                               flavor=flavor, columns=columns)
            except UnsupportedFeatureError as exc:
                raise _with_json_hint(exc) from None
            return translation, schema, None
        translation = engine.translate(expression, input_format="json", flavor=flavor)
        schema = pa.schema([pa.field(name, pa.string()) for name in translation.json_paths])
        return translation, schema, None

    def partitions(self, engine: SelectEngine, source: ObjectSource, input: InputSpec,
                   scan_range: tuple[int, int] | None, wanted: int | None
                   ) -> tuple[PlannedPartition, ...]:
        return byte_partitions(engine, source, input, scan_range, wanted)

    def with_native(self, engine: SelectEngine, plan: SelectPlan,  # noqa: ARG002 - FormatDriver.with_native
                    scan_range: tuple[int, int] | None) -> SelectPlan:  # noqa: ARG002 - FormatDriver.with_native
        if plan.input.columns is not None:
            return dataclasses.replace(plan, native_reason=_TYPED_READER)
        return plan  # DataFusion's JSON reader is not s3-select's (paths, MISSING, text)

    def verified(self, engine: SelectEngine, plan: SelectPlan,  # noqa: ARG002 - FormatDriver.verified
                 native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,  # noqa: ARG002 - FormatDriver.verified
                 chosen: Sequence[Partition], everything: bool  # noqa: ARG002 - FormatDriver.verified
                 ) -> NativeCsvTable | NativeParquetTable | None:
        # a typed table's plan has a Parquet table only when served from its decoded entry
        return native if isinstance(native, NativeParquetTable) else None

    def scan(self, engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             partition: Partition) -> ScanFunction:
        if plan.input.columns is not None:
            return _typed_scan(engine, plan, source, partition)
        return generic_scan(
            lambda: guard_reader(_read(engine, plan, source, partition), source.name),
            plan.input_schema,
        )


def typed_json_rows(engine: SelectEngine, plan: SelectPlan) -> Iterator[pa.RecordBatch]:
    """Every row of a typed JSON Lines plan's object, every column, in record order, as the
    plan's queries read them (the decoded cache's fill).

    Raises:
        StorageError: the reader's errors (a value that does not convert, a malformed line).
    """
    columns = plan.input.columns
    assert columns is not None
    for batch in _read(engine, plan, plan.source, WholeObject(), columns.names):
        yield pa.RecordBatch.from_arrays(batch.columns, schema=plan.input_schema)


def _typed_scan(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
                partition: Partition) -> ScanFunction:
    """A typed table's scan, reading and converting only the projected columns (all of them
    under a pushed filter, whose columns the projection may leave out)."""
    columns = plan.input.columns
    assert columns is not None

    def scan(projection: Columns, filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
        names = columns.names if projection is None or filter is not None else projection
        read = generic_scan(
            lambda: guard_reader(_read(engine, plan, source, partition, names), source.name),
            plan.input_schema)
        yield from read(projection, filter)

    return scan


def _read(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
          partition: Partition, names: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    typed = plan.input.columns
    if typed is None:
        yield from _reference(engine, plan, source, partition)
        return
    served = 0
    if arrow_reads(typed, names):
        with open_input(source, plan.input) as stream:
            fast = iter_arrow_lines(stream, typed, names, byte_range=byte_range(partition),
                                    max_record_size=engine.config.max_record_bytes,
                                    batch_rows=engine.config.batch_rows)
            while True:
                try:
                    batch = next(fast)
                except StopIteration as done:
                    if done.value:
                        return
                    break
                served += batch.num_rows
                yield batch
    # the reference reader from the partition's start: the rows pyarrow served are skipped
    for batch in _reference(engine, plan, source, partition, names):
        skip = min(served, batch.num_rows)
        served -= skip
        if skip < batch.num_rows:
            yield batch.slice(skip)


def _reference(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
               partition: Partition, names: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    options = json_input.JsonInputOptions.from_request(plan.input.options)
    translation = plan.translation
    typed = plan.input.columns
    span = byte_range(partition)
    from_path = translation.json_from_path or ()
    paths = translation.json_paths
    if typed is not None:  # the columns read, each its key under the document
        from_path, paths = (), column_paths(typed, names)
    with open_input(source, plan.input) as stream:
        batches = json_input.iter_json_batches(
            stream,
            options,
            from_path=from_path,
            paths=paths,
            reading=plan.reading,
            byte_range=span,
            batch_rows=min(engine.config.batch_rows, 8192),
            max_record_size=engine.config.max_record_bytes,
        )
        if typed is None:
            yield from batches
            return
        where = f" of the range from byte {span[0]}" if span is not None and span[0] else ""
        record = 1
        for batch in batches:
            yield typed_batch(batch, typed, first_record=record, object_name=source.name,
                              where=where)
            record += batch.num_rows
