"""A lazily-read table for DataFusion: one fragment per partition, batches pulled on demand.

The dataset itself is :class:`lazy_dataset.LazyDataset` (shared with the DataFusion client);
here each fragment is a *scan function* over one of the server's readers, run only when
DataFusion pulls the fragment.

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

from lazy_dataset import Columns, LazyDataset, ScanFunction

__all__ = ["Columns", "ScanFunction", "StreamingDataset", "apply_filter", "chain_scans",
           "conform", "generic_scan"]

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


class StreamingDataset(LazyDataset):
    """A dataset whose fragments are fixed scan functions, each read once, lazily.

    Args:
        schema: the table's schema.
        scans: one scan function per fragment (DataFusion partition).
    """

    def __init__(self, schema: pa.Schema, scans: Sequence[ScanFunction]) -> None:
        super().__init__(schema)
        self._scans = list(scans)

    def plan_scans(self, columns: Columns, filter: pc.Expression | None  # noqa: ARG002 - lazy_dataset StreamingDataset.plan_scans
                   ) -> Sequence[ScanFunction]:
        return self._scans
