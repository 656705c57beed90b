"""The Flight SQL column metadata on the table schemas that ``GetTables`` returns.

Flight SQL lets a server describe each field of a ``table_schema`` with metadata keys
(``ARROW:FLIGHT:SQL:TYPE_NAME``, ``PRECISION``, ``SCALE``, ``IS_READ_ONLY``, ...: the comment on
``CommandGetTables`` in ``FlightSql.proto``). The ADBC Flight SQL driver turns ``TYPE_NAME`` into
``xdbc_type_name`` in ``adbc_get_objects`` and leaves it NULL without it, and SQLAlchemy
dialects over ADBC (sqlalchemy-adbc) reflect a column's type from that name alone: without it
every reflected column is ``NullType``. The SQL name of an Arrow type is one DataFusion's SQL
parser accepts for it (``CAST(x AS BIGINT)`` gives Int64; binary is ``BYTEA``, DataFusion has
no ``VARBINARY``), so a name read here can be written back in a statement. Hand-written:
pyarrow has no Flight SQL layer and no Arrow-to-SQL type names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import pyarrow as pa

TYPE_NAME: Final = "ARROW:FLIGHT:SQL:TYPE_NAME"
PRECISION: Final = "ARROW:FLIGHT:SQL:PRECISION"
SCALE: Final = "ARROW:FLIGHT:SQL:SCALE"
IS_AUTO_INCREMENT: Final = "ARROW:FLIGHT:SQL:IS_AUTO_INCREMENT"
IS_CASE_SENSITIVE: Final = "ARROW:FLIGHT:SQL:IS_CASE_SENSITIVE"
IS_READ_ONLY: Final = "ARROW:FLIGHT:SQL:IS_READ_ONLY"
IS_SEARCHABLE: Final = "ARROW:FLIGHT:SQL:IS_SEARCHABLE"


def _decimal_name(data_type: pa.DataType) -> str:
    return f"DECIMAL({data_type.precision},{data_type.scale})"


def _timestamp_name(data_type: pa.DataType) -> str:
    return "TIMESTAMP WITH TIME ZONE" if data_type.tz is not None else "TIMESTAMP"


def _fixed(name: str) -> Callable[[pa.DataType], str]:
    return lambda _: name


# First match wins. Types with no SQL name (lists, structs, maps, ...) get no TYPE_NAME: a
# client then sees the Arrow type only, which is the truth.
_SQL_TYPE_NAMES: Final[tuple[tuple[Callable[[pa.DataType], bool],
                                   Callable[[pa.DataType], str]], ...]] = (
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)
     or pa.types.is_string_view(t), _fixed("VARCHAR")),
    (pa.types.is_int8, _fixed("TINYINT")),
    (pa.types.is_int16, _fixed("SMALLINT")),
    (pa.types.is_int32, _fixed("INTEGER")),
    (pa.types.is_int64, _fixed("BIGINT")),
    (pa.types.is_uint8, _fixed("TINYINT UNSIGNED")),
    (pa.types.is_uint16, _fixed("SMALLINT UNSIGNED")),
    (pa.types.is_uint32, _fixed("INT UNSIGNED")),
    (pa.types.is_uint64, _fixed("BIGINT UNSIGNED")),
    (lambda t: pa.types.is_float16(t) or pa.types.is_float32(t), _fixed("REAL")),
    (pa.types.is_float64, _fixed("DOUBLE")),
    (pa.types.is_decimal, _decimal_name),
    (pa.types.is_boolean, _fixed("BOOLEAN")),
    (pa.types.is_date, _fixed("DATE")),
    (pa.types.is_time, _fixed("TIME")),
    (pa.types.is_timestamp, _timestamp_name),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)
     or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t), _fixed("BYTEA")),
)


def sql_type_name(data_type: pa.DataType) -> str | None:
    """The SQL name of an Arrow type (one DataFusion's SQL accepts); None if it has none.

    Example:
        >>> sql_type_name(pa.decimal128(12, 2))
        'DECIMAL(12,2)'
    """
    for matches, name in _SQL_TYPE_NAMES:
        if matches(data_type):
            return name(data_type)
    return None


def _field_metadata(data_type: pa.DataType) -> dict[str, str]:
    # Every column of an object is read-only (the server runs SELECT only), filterable in
    # WHERE, never generated; text compares case-sensitively (no collations).
    metadata = {
        IS_AUTO_INCREMENT: "0",
        IS_CASE_SENSITIVE: "1" if sql_type_name(data_type) == "VARCHAR" else "0",
        IS_READ_ONLY: "1",
        IS_SEARCHABLE: "1",
    }
    name = sql_type_name(data_type)
    if name is not None:
        metadata[TYPE_NAME] = name
    if pa.types.is_decimal(data_type):
        metadata[PRECISION] = str(data_type.precision)
        metadata[SCALE] = str(data_type.scale)
    return metadata


def describe_columns(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the Flight SQL column metadata on every field (existing keys kept)."""
    fields = [
        field.with_metadata({**(field.metadata or {}),
                             **{k.encode(): v.encode()
                                for k, v in _field_metadata(field.type).items()}})
        for field in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)
