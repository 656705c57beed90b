"""Configured column names and types for text objects (CSV), applied as batches are read.

Faithful to S3 Select, a CSV field is a string unless the query casts it. A bucket configuration
may instead declare a prefix's columns (``{"name": "order_id", "type": "int64"}``); the reader's
``_1.._N`` strings are then converted batch by batch, so Flight SQL and Spark clients see a typed
table and the dialect translates the statement as it does for Parquet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InputFormatError, InvalidRequestError

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
        return cls(names, types)

    @property
    def schema(self) -> pa.Schema:
        """The typed table's Arrow schema (every column nullable)."""
        return pa.schema([pa.field(n, arrow_type(t)) for n, t in zip(self.names, self.types)])

    def convert(self, batch: pa.RecordBatch, first_row: int, object_name: str) -> pa.RecordBatch:
        """Cast a batch of ``_1.._N`` strings to the declared names and types.

        Raises:
            InputFormatError: a field does not convert (code ``CastFailed``, naming the object,
                the record number and the column).
        """
        schema = self.schema
        columns = []
        for index, target in enumerate(schema):
            column = batch.column(index) if index < batch.num_columns else pa.nulls(
                batch.num_rows, pa.string())
            if target.type != pa.string():
                column = _cast(column, target, first_row, object_name)
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _cast(column: pa.Array, target: pa.Field, first_row: int, object_name: str) -> pa.Array:
    trimmed = pc.utf8_trim_whitespace(column)
    try:
        return pc.cast(trimmed, target.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = _first_bad(trimmed, target.type)
        raise InputFormatError(
            f"{object_name}: record {first_row + bad + 1}: column {target.name}: "
            f"{trimmed[bad].as_py()!r} is not a valid {target.type}",
            code="CastFailed",
            row=first_row + bad + 1,
        ) from None


def _first_bad(column: pa.Array, data_type: pa.DataType) -> int:
    """Index of the first value that does not cast (only on the error path)."""
    for index, value in enumerate(column.to_pylist()):
        if value is None:
            continue
        try:
            pc.cast(pa.array([value]), data_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return index
    return 0
