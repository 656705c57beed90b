"""Configured column names and types for text objects (CSV), applied as batches are read.

Faithful to S3 Select, a CSV field is a string unless the query casts it. A bucket configuration
may instead declare a prefix's columns (``{"name": "order_id", "type": "int64"}``); the reader's
``_1.._N`` strings are then converted batch by batch, so Flight SQL and Spark clients see a typed
table and the dialect translates the statement as it does for Parquet.

A field that does not convert to its declared type is NULL (as Spark's CSV reader does in its
default PERMISSIVE mode), so a bad value in one column never fails a query that does not read
it; the README's configuration reference says so. Failing instead only the queries that read
the column would need the scan's projection here, which the reader does not pass. Hand-written
because pyarrow's CSV conversion options have no per-value NULL-on-error mode
(``pc.cast(safe=False)`` would wrap numbers instead of giving NULL).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InvalidRequestError

log = logging.getLogger(__name__)

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")

_TYPES: dict[str, Callable[[], pa.DataType]] = {
    "string": pa.string,
    "int64": pa.int64,
    "int32": pa.int32,
    "float64": pa.float64,
    "double": pa.float64,
    "bool": pa.bool_,
    "date": pa.date32,
    "timestamp": lambda: pa.timestamp("us", tz="UTC"),
}


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of a configured type name (``int64``, ``decimal(12,2)``, ...)."""
    key = name.strip().lower()
    match = _DECIMAL.fullmatch(key)
    if match is not None:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    factory = _TYPES.get(key)
    if factory is None:
        raise InvalidRequestError(
            f"unknown column type {name!r}; use one of {sorted(_TYPES)} or decimal(p,s)"
        )
    return factory()


@dataclass(frozen=True)
class TypedColumns:
    """The declared columns of a text table, in field order."""

    names: tuple[str, ...]
    types: tuple[str, ...]

    @classmethod
    def from_config(cls, columns: Sequence[Mapping[str, str]]) -> TypedColumns:
        """Build from ``[{"name": ..., "type": ...}, ...]``."""
        try:
            names = tuple(str(c["name"]) for c in columns)
            types = tuple(str(c.get("type", "string")) for c in columns)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidRequestError(f"invalid column configuration ({exc})") from None
        for type_name in types:
            arrow_type(type_name)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidRequestError(f"column {repeated[0]!r} is declared more than once")
        return cls(names, types)

    @property
    def schema(self) -> pa.Schema:
        """The typed table's Arrow schema (every column nullable)."""
        return pa.schema([pa.field(n, arrow_type(t)) for n, t in zip(self.names, self.types, strict=True)])

    def convert(self, batch: pa.RecordBatch, first_row: int, object_name: str) -> pa.RecordBatch:
        """Cast a batch of ``_1.._N`` strings to the declared names and types; a field that
        does not convert (``"n/a"`` in an ``int64`` column) becomes NULL, logged once per batch
        and column with the object, the record number (``first_row`` counts the records before
        this batch) and the value, for the operator."""
        schema = self.schema
        columns = []
        for index, target in enumerate(schema):
            column = batch.column(index) if index < batch.num_columns else pa.nulls(
                batch.num_rows, pa.string())
            if target.type != pa.string():
                column, bad = _cast_or_null(column, target.type)
                if bad is not None:
                    log.warning("%s: record %d: column %s: %r is not a valid %s; read as NULL",
                                object_name, first_row + bad[0] + 1, target.name, bad[1],
                                target.type)
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _cast_or_null(column: pa.Array, data_type: pa.DataType
                  ) -> tuple[pa.Array, tuple[int, str] | None]:
    """The cast column, and the index and text of its first bad value (None if none)."""
    trimmed = pc.utf8_trim_whitespace(column)
    try:
        return pc.cast(trimmed, data_type), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Only on the error path: value by value, so one bad field costs its value, not its batch.
    values: list[object] = []
    first_bad: tuple[int, str] | None = None
    for index, value in enumerate(trimmed.to_pylist()):
        if value is None:
            values.append(None)
            continue
        try:
            values.append(pc.cast(pa.array([value]), data_type)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values.append(None)
            if first_bad is None:
                first_bad = (index, value)
    return pa.array(values, type=data_type), first_bad
