"""JSON (LINES and DOCUMENT): always the reference reader (``formats/json_input.py``), one
Utf8 column of compact JSON text per path the statement uses; JSON LINES is cut in byte
ranges like CSV."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from flight_storage.execution.drivers.base import byte_range, open_input
from flight_storage.execution.drivers.csv_format import byte_partitions
from flight_storage.execution.engine_errors import guard_reader
from flight_storage.execution.plan_types import InputSpec, PlannedPartition, SelectPlan
from flight_storage.execution.streaming_dataset import ScanFunction, generic_scan
from flight_storage.formats import json_input
from flight_storage.protocol import Partition
from flight_storage.storage.sources import ObjectSource
from select_dialect import Translation

if TYPE_CHECKING:
    from flight_storage.execution.engine import SelectEngine
    from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable
    from flight_storage.execution.native_parquet import NativeParquetTable


class JsonDriver:
    """The JSON format driver (see the module docstring)."""

    def translate(self, engine: SelectEngine, expression: str,
                  sources: tuple[ObjectSource, ...], input: InputSpec, flavor: str  # noqa: ARG002 - FormatDriver.translate
                  ) -> tuple[Translation, pa.Schema, list[str] | None]:
        translation = engine.translate(expression, input_format="json", flavor=flavor)
        schema = pa.schema([pa.field(name, pa.string()) for name in translation.json_paths])
        return translation, schema, None

    def partitions(self, engine: SelectEngine, source: ObjectSource, input: InputSpec,
                   scan_range: tuple[int, int] | None) -> tuple[PlannedPartition, ...]:
        return byte_partitions(engine, source, input, scan_range)

    def with_native(self, engine: SelectEngine, plan: SelectPlan,  # noqa: ARG002 - FormatDriver.with_native
                    scan_range: tuple[int, int] | None) -> SelectPlan:  # noqa: ARG002 - FormatDriver.with_native
        return plan  # DataFusion's JSON reader is not s3-select's (paths, MISSING, text)

    def verified(self, engine: SelectEngine, plan: SelectPlan,  # noqa: ARG002 - FormatDriver.verified
                 native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,  # noqa: ARG002 - FormatDriver.verified
                 chosen: Sequence[Partition], everything: bool  # noqa: ARG002 - FormatDriver.verified
                 ) -> NativeCsvTable | NativeParquetTable | None:
        return None

    def scan(self, engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
             partition: Partition) -> ScanFunction:
        return generic_scan(
            lambda: guard_reader(_read(engine, plan, source, partition), source.name),
            plan.input_schema,
        )


def _read(engine: SelectEngine, plan: SelectPlan, source: ObjectSource,
          partition: Partition) -> Iterator[pa.RecordBatch]:
    options = json_input.JsonInputOptions.from_request(plan.input.options)
    translation = plan.translation
    with open_input(source, plan.input) as stream:
        yield from json_input.iter_json_batches(
            stream,
            options,
            from_path=translation.json_from_path or (),
            paths=translation.json_paths,
            reading=plan.reading,
            byte_range=byte_range(partition),
            batch_rows=min(engine.config.batch_rows, 8192),
            max_record_size=engine.config.max_record_bytes,
        )
