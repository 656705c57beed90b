"""A lazily-read table for DataFusion: one fragment per partition, batches pulled on demand.

DataFusion (through ``register_dataset``) accepts any ``pyarrow.dataset.Dataset`` and then only
duck-types ``schema``, ``scanner(columns=, filter=)``, ``get_fragments(filter)`` and
``fragment.scanner(...).to_batches()``. ``pyarrow``'s own in-memory dataset drains its source
when created, so this class keeps each fragment as a batch factory that runs only when DataFusion
pulls the fragment. Filters DataFusion pushes here are *Exact* (it does not re-check them), so they
are applied before projecting; the projection may omit columns only the filter uses.
``tests/flight_storage/test_streaming_dataset.py`` pins this behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

BatchFactory = Callable[[], Iterable[pa.RecordBatch]]


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        column = batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, field.type)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Scanner:
    def __init__(
        self,
        factories: Sequence[BatchFactory],
        schema: pa.Schema,
        columns: Sequence[str] | None,
        filter: pc.Expression | None,
    ) -> None:
        self._factories = factories
        self._schema = schema
        self._columns = list(columns) if columns is not None else None
        self._filter = filter
        if self._columns is None:
            self.projected_schema = schema
        else:
            self.projected_schema = pa.schema([schema.field(name) for name in self._columns])

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for factory in self._factories:
            for batch in factory():
                batch = _conform(batch, self._schema)
                if self._filter is not None:
                    batch = batch.filter(self._filter)
                if self._columns is not None:
                    batch = batch.select(self._columns)
                if batch.num_rows:
                    yield batch

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)


class _Fragment:
    def __init__(self, factory: BatchFactory, schema: pa.Schema) -> None:
        self._factory = factory
        self._schema = schema

    def scanner(
        self,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        **_options: object,
    ) -> _Scanner:
        return _Scanner([self._factory], self._schema, columns, filter)


class StreamingDataset(ds.Dataset):
    """A dataset whose fragments are batch factories, each read once, lazily.

    Args:
        schema: the schema every batch is conformed to.
        factories: one callable per fragment (DataFusion partition) returning batches.
    """

    def __init__(self, schema: pa.Schema, factories: Sequence[BatchFactory]) -> None:
        self._schema_value = schema
        self._factories = list(factories)

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._schema_value

    def get_fragments(self, filter: pc.Expression | None = None) -> Iterator[_Fragment]:  # type: ignore[override]
        return iter([_Fragment(factory, self._schema_value) for factory in self._factories])

    def scanner(  # type: ignore[override]
        self,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        **_options: object,
    ) -> _Scanner:
        return _Scanner(self._factories, self._schema_value, columns, filter)
