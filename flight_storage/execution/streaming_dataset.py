"""A lazily-read table for DataFusion: one fragment per partition, batches pulled on demand.

DataFusion (through ``register_dataset``) accepts any ``pyarrow.dataset.Dataset`` and then only
duck-types ``schema``, ``scanner(columns=, filter=)``, ``get_fragments(filter)`` and
``fragment.scanner(...).to_batches()``. ``pyarrow``'s own in-memory dataset drains its source
when created, so here each fragment is a *scan function* that runs only when DataFusion pulls
the fragment.

A scan function receives the projection and the filter DataFusion pushes down and returns
batches holding exactly the projected columns, filtered. Pushed filters are *Exact* (DataFusion
does not re-check them) and the projection may omit columns only the filter uses, so a scan
must filter before it projects. :func:`generic_scan` does that for readers that cannot push
anything themselves; the Parquet reader pushes both into pyarrow (row-group pruning from
statistics). ``tests/flight_storage/test_streaming_dataset.py`` pins this behaviour of DataFusion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

Columns = Sequence[str] | None
ScanFunction = Callable[[Columns, pc.Expression | None], Iterable[pa.RecordBatch]]
BatchFactory = Callable[[], Iterable[pa.RecordBatch]]


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Give ``batch`` exactly ``schema``: missing columns become NULL, types are cast."""
    if batch.schema.equals(schema):
        return batch
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        column = batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, field.type)
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def apply_filter(batch: pa.RecordBatch, filter: pc.Expression) -> pa.RecordBatch:
    """Keep the rows where ``filter`` is true; DataFusion may fold a filter to a constant
    (``WHERE _1 = '0' AND _1 = '1'`` arrives as the literal ``false``), which
    ``RecordBatch.filter`` does not take."""
    if isinstance(filter, pa.Scalar):  # a folded filter may even arrive as a plain scalar
        return batch if filter.as_py() is True else batch.slice(0, 0)
    try:
        return batch.filter(filter)
    except pa.ArrowTypeError:
        table = ds.dataset(pa.Table.from_batches([batch])).to_table(filter=filter)
        return table.combine_chunks().to_batches()[0] if table.num_rows else batch.slice(0, 0)


def generic_scan(factory: BatchFactory, schema: pa.Schema) -> ScanFunction:
    """A scan over a reader that pushes nothing down: conform, filter, then project."""

    def scan(columns: Columns, filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
        for batch in factory():
            batch = conform(batch, schema)
            if filter is not None:
                batch = apply_filter(batch, filter)
            if columns is not None:
                batch = batch.select(list(columns))
            if batch.num_rows:
                yield batch

    return scan


def chain_scans(scans: Sequence[ScanFunction]) -> ScanFunction:
    """One scan reading several in order (keeps record order within a DataFusion partition)."""

    def scan(columns: Columns, filter: pc.Expression | None) -> Iterator[pa.RecordBatch]:
        for part in scans:
            yield from part(columns, filter)

    return scan


class _Scanner:
    def __init__(self, scans: Sequence[ScanFunction], schema: pa.Schema, columns: Columns,
                 filter: pc.Expression | None) -> None:
        self._scans = scans
        self._columns = list(columns) if columns is not None else None
        self._filter = filter
        self.projected_schema = (
            schema if self._columns is None
            else pa.schema([schema.field(name) for name in self._columns])
        )

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        for scan in self._scans:
            yield from scan(self._columns, self._filter)

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)


class _Fragment:
    def __init__(self, scan: ScanFunction, schema: pa.Schema) -> None:
        self._scan = scan
        self._schema = schema

    def scanner(self, schema: pa.Schema | None = None, columns: Columns = None,
                filter: pc.Expression | None = None, **_options: object) -> _Scanner:
        return _Scanner([self._scan], self._schema, columns, filter)


class StreamingDataset(ds.Dataset):
    """A dataset whose fragments are scan functions, each read once, lazily.

    Args:
        schema: the table's schema.
        scans: one scan function per fragment (DataFusion partition).
    """

    def __init__(self, schema: pa.Schema, scans: Sequence[ScanFunction]) -> None:
        self._schema_value = schema
        self._scans = list(scans)

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._schema_value

    def get_fragments(self, filter: pc.Expression | None = None) -> Iterator[_Fragment]:  # type: ignore[override]
        return iter([_Fragment(scan, self._schema_value) for scan in self._scans])

    def scanner(self, schema: pa.Schema | None = None, columns: Columns = None,  # type: ignore[override]
                filter: pc.Expression | None = None, **_options: object) -> _Scanner:
        return _Scanner(self._scans, self._schema_value, columns, filter)
