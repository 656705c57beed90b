"""The duck-typed Dataset DataFusion scans, with every fragment read only when pulled.

How DataFusion reaches a registered dataset (datafusion-python 55;
``tests/flight_storage/test_streaming_dataset.py`` and ``tests/compute_client/
test_datafusion_pushdown.py`` pin every point): it duck-types ``schema``, calls
``scanner(columns=, filter=)`` to learn the projected schema, then ``get_fragments(filter)``
with the same filter; each fragment becomes one partition, read lazily and in parallel through
``fragment.scanner(schema, columns=, filter=, batch_size=).to_batches()``. The filter is
*Exact*: DataFusion never re-checks it, and the projection may leave out columns only the
filter uses. ``pyarrow``'s own in-memory dataset drains its source when created, which is why
this one exists.

A fragment here is a *scan function*: given the projection and the filter, it returns batches
holding exactly the projected columns, filtered. :meth:`LazyDataset.plan_scans` decides the
fragments; it is given the projection too (``get_fragments`` receives none, so the one passed
to the ``scanner`` call just before, with the same filter, is remembered).

Hand-written because datafusion-python 55 offers no Python TableProvider with pushdown: a
duck-typed Dataset is the one way to receive the projection and the filter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

Columns = Sequence[str] | None
ScanFunction = Callable[[Columns, pc.Expression | None], Iterable[pa.RecordBatch]]


def project(schema: pa.Schema, columns: Columns) -> pa.Schema:
    """``schema`` reduced to ``columns``, in their order (all of it for ``None``)."""
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


class Scanner:
    """What ``scanner()`` returns: DataFusion reads ``projected_schema`` and the batches."""

    def __init__(self, projected_schema: pa.Schema,
                 batches: Callable[[], Iterable[pa.RecordBatch]]) -> None:
        self.projected_schema = projected_schema
        self._batches = batches

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return iter(self._batches())

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.projected_schema)


class _Fragment:
    """One scan function: one DataFusion partition, read when DataFusion pulls it."""

    def __init__(self, scan: ScanFunction, schema: pa.Schema) -> None:
        self._scan = scan
        self._schema = schema

    # ``schema`` is in pyarrow's Fragment.scanner signature, which DataFusion calls positionally;
    # the fragment's own schema is the one its scan function reads.
    def scanner(self, schema: pa.Schema | None = None,  # noqa: ARG002 - Fragment.scanner
                columns: Columns = None, filter: pc.Expression | None = None,
                **_options: object) -> Scanner:
        return Scanner(project(self._schema, columns), lambda: self._scan(columns, filter))


class LazyDataset(ds.Dataset):
    """A dataset whose fragments are scan functions that :meth:`plan_scans` returns.

    Args:
        schema: the table's schema as DataFusion sees it.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema_value = schema
        self._pending: dict[str, list[str] | None] = {}
        self._pending_lock = threading.Lock()

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._schema_value

    def plan_scans(self, columns: Columns, filter: pc.Expression | None
                   ) -> Sequence[ScanFunction]:
        """The fragments of one scan, given its projection and its filter."""
        raise NotImplementedError

    # ``schema`` is in pyarrow's Dataset.scanner signature; this dataset's schema is fixed.
    def scanner(self, schema: pa.Schema | None = None,  # type: ignore[override]  # noqa: ARG002 - Dataset.scanner
                columns: Columns = None, filter: pc.Expression | None = None,
                **_options: object) -> Scanner:
        with self._pending_lock:
            self._pending[str(filter)] = list(columns) if columns is not None else None

        def batches() -> Iterator[pa.RecordBatch]:
            for scan in self.plan_scans(columns, filter):
                yield from scan(columns, filter)

        return Scanner(project(self._schema_value, columns), batches)

    def get_fragments(self, filter: pc.Expression | None = None  # type: ignore[override]
                      ) -> Iterator[_Fragment]:
        with self._pending_lock:
            columns = self._pending.pop(str(filter), None)
        return iter([_Fragment(scan, self._schema_value)
                     for scan in self.plan_scans(columns, filter)])
