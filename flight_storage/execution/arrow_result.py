"""The Arrow result as Flight clients see it: display names, standard Arrow types.

Inside the engine an s3-select timestamp is the ``S3_TIMESTAMP`` struct (it keeps the zone it
was written with, for S3-style printing); Flight clients get a plain ``timestamp[ns, UTC]``.
Every column is nullable, so the schema advertised before execution is exactly the schema of
every batch streamed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pyarrow as pa

from flight_storage.formats.values import S3_TIMESTAMP


def arrow_result_schema(schema: pa.Schema, names: Sequence[str]) -> pa.Schema:
    """Result schema for clients: ``names`` as column names, timestamps as real timestamps."""
    return _result_schema(schema, tuple(names))


@functools.lru_cache(maxsize=256)
def _result_schema(schema: pa.Schema, names: tuple[str, ...]) -> pa.Schema:
    """Computed once per (schema, names): every DoGet of a cached plan asks for it."""
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
