"""The Arrow schemas of Flight SQL metadata results, and the ``GetSqlInfo`` value union.

The schemas are the ones the Flight SQL specification (``FlightSql.proto``) fixes; written out
here because pyarrow ships no Flight SQL module that defines them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa


class SqlInfo(enum.IntEnum):
    """The ``CommandGetSqlInfo`` ids this project answers (Flight SQL numbering)."""

    FLIGHT_SQL_SERVER_NAME = 0
    FLIGHT_SQL_SERVER_VERSION = 1
    FLIGHT_SQL_SERVER_ARROW_VERSION = 2
    FLIGHT_SQL_SERVER_READ_ONLY = 3
    FLIGHT_SQL_SERVER_SQL = 4
    FLIGHT_SQL_SERVER_SUBSTRAIT = 5
    FLIGHT_SQL_SERVER_TRANSACTION = 8
    FLIGHT_SQL_SERVER_CANCEL = 9
    FLIGHT_SQL_SERVER_BULK_INGESTION = 10
    FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED = 11
    FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT = 100
    FLIGHT_SQL_SERVER_TRANSACTION_TIMEOUT = 101
    SQL_DDL_CATALOG = 500
    SQL_DDL_SCHEMA = 501
    SQL_DDL_TABLE = 502
    SQL_IDENTIFIER_CASE = 503
    SQL_IDENTIFIER_QUOTE_CHAR = 504
    SQL_QUOTED_IDENTIFIER_CASE = 505
    SQL_ALL_TABLES_ARE_SELECTABLE = 506
    SQL_NULL_ORDERING = 507
    SQL_NUMERIC_FUNCTIONS = 509
    SQL_STRING_FUNCTIONS = 510
    SQL_SYSTEM_FUNCTIONS = 511
    SQL_DATETIME_FUNCTIONS = 512
    SQL_SUPPORTS_COLUMN_ALIASING = 515
    SQL_NULL_PLUS_NULL_IS_NULL = 516
    SQL_SUPPORTS_TABLE_CORRELATION_NAMES = 518
    SQL_SUPPORTS_LIKE_ESCAPE_CLAUSE = 523
    SQL_SUPPORTED_GRAMMAR = 525
    SQL_OUTER_JOINS_SUPPORT_LEVEL = 528
    SQL_SCHEMA_TERM = 529
    SQL_SELECT_FOR_UPDATE_SUPPORTED = 536
    SQL_STORED_PROCEDURES_SUPPORTED = 537
    SQL_SUPPORTED_SUBQUERIES = 538
    SQL_CORRELATED_SUBQUERIES_SUPPORTED = 539
    SQL_SUPPORTED_UNIONS = 540
    SQL_MAX_STATEMENT_LENGTH = 557
    SQL_MAX_TABLES_IN_SELECT = 560
    SQL_DEFAULT_TRANSACTION_ISOLATION = 562
    SQL_TRANSACTIONS_SUPPORTED = 563
    SQL_SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS = 564
    SQL_BATCH_UPDATES_SUPPORTED = 572
    SQL_SAVEPOINTS_SUPPORTED = 573
    SQL_NAMED_PARAMETERS_SUPPORTED = 574


_SQL_INFO_UNION: Final = pa.dense_union(
    [
        pa.field("string_value", pa.utf8(), nullable=False),
        pa.field("bool_value", pa.bool_(), nullable=False),
        pa.field("bigint_value", pa.int64(), nullable=False),
        pa.field("int32_bitmask", pa.int32(), nullable=False),
        pa.field("string_list", pa.list_(pa.utf8()), nullable=False),
        pa.field(
            "int32_to_int32_list_map",
            pa.map_(pa.int32(), pa.list_(pa.int32())),
            nullable=False,
        ),
    ],
    type_codes=[0, 1, 2, 3, 4, 5],
)

SQL_INFO_SCHEMA: Final = pa.schema(
    [
        pa.field("info_name", pa.uint32(), nullable=False),
        pa.field("value", _SQL_INFO_UNION, nullable=False),
    ]
)
"""Result of ``CommandGetSqlInfo``: one row per requested info id."""

CATALOGS_SCHEMA: Final = pa.schema([pa.field("catalog_name", pa.utf8(), nullable=False)])
"""Result of ``CommandGetCatalogs``."""

DB_SCHEMAS_SCHEMA: Final = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8(), nullable=False),
    ]
)
"""Result of ``CommandGetDbSchemas``."""

TABLES_SCHEMA: Final = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("table_type", pa.utf8(), nullable=False),
    ]
)
"""Result of ``CommandGetTables`` without ``include_schema``."""

TABLES_SCHEMA_WITH_SCHEMA: Final = TABLES_SCHEMA.append(
    pa.field("table_schema", pa.binary(), nullable=False)
)
"""Result of ``CommandGetTables`` with ``include_schema`` (IPC-serialized table schemas)."""

TABLE_TYPES_SCHEMA: Final = pa.schema([pa.field("table_type", pa.utf8(), nullable=False)])
"""Result of ``CommandGetTableTypes``."""

XDBC_TYPE_INFO_SCHEMA: Final = pa.schema(
    [
        pa.field("type_name", pa.utf8(), nullable=False),
        pa.field("data_type", pa.int32(), nullable=False),
        pa.field("column_size", pa.int32()),
        pa.field("literal_prefix", pa.utf8()),
        pa.field("literal_suffix", pa.utf8()),
        pa.field("create_params", pa.list_(pa.field("item", pa.utf8(), nullable=False))),
        pa.field("nullable", pa.int32(), nullable=False),
        pa.field("case_sensitive", pa.bool_(), nullable=False),
        pa.field("searchable", pa.int32(), nullable=False),
        pa.field("unsigned_attribute", pa.bool_()),
        pa.field("fixed_prec_scale", pa.bool_(), nullable=False),
        pa.field("auto_increment", pa.bool_()),
        pa.field("local_type_name", pa.utf8()),
        pa.field("minimum_scale", pa.int32()),
        pa.field("maximum_scale", pa.int32()),
        pa.field("sql_data_type", pa.int32(), nullable=False),
        pa.field("datetime_subcode", pa.int32()),
        pa.field("num_prec_radix", pa.int32()),
        pa.field("interval_precision", pa.int32()),
    ]
)
"""Result of ``CommandGetXdbcTypeInfo``."""

PRIMARY_KEYS_SCHEMA: Final = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("column_name", pa.utf8(), nullable=False),
        pa.field("key_name", pa.utf8()),
        pa.field("key_sequence", pa.int32(), nullable=False),
    ]
)
"""Result of ``CommandGetPrimaryKeys`` (objects have no keys: always empty)."""

FOREIGN_KEYS_SCHEMA: Final = pa.schema(
    [
        pa.field("pk_catalog_name", pa.utf8()),
        pa.field("pk_db_schema_name", pa.utf8()),
        pa.field("pk_table_name", pa.utf8(), nullable=False),
        pa.field("pk_column_name", pa.utf8(), nullable=False),
        pa.field("fk_catalog_name", pa.utf8()),
        pa.field("fk_db_schema_name", pa.utf8()),
        pa.field("fk_table_name", pa.utf8(), nullable=False),
        pa.field("fk_column_name", pa.utf8(), nullable=False),
        pa.field("key_sequence", pa.int32(), nullable=False),
        pa.field("fk_key_name", pa.utf8()),
        pa.field("pk_key_name", pa.utf8()),
        pa.field("update_rule", pa.uint8(), nullable=False),
        pa.field("delete_rule", pa.uint8(), nullable=False),
    ]
)
"""Result of ``CommandGetExportedKeys``, ``…ImportedKeys`` and ``…CrossReference`` (empty)."""

# Info ids whose integer value the protocol defines as int32 (the other integers are int64).
_INT32_INFOS: Final = frozenset(
    {
        SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION,
        SqlInfo.FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT,
        SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION_TIMEOUT,
        SqlInfo.SQL_IDENTIFIER_CASE,
        SqlInfo.SQL_QUOTED_IDENTIFIER_CASE,
        SqlInfo.SQL_NULL_ORDERING,
        SqlInfo.SQL_SUPPORTED_GRAMMAR,
        SqlInfo.SQL_OUTER_JOINS_SUPPORT_LEVEL,
        SqlInfo.SQL_SUPPORTED_SUBQUERIES,
        SqlInfo.SQL_SUPPORTED_UNIONS,
        SqlInfo.SQL_DEFAULT_TRANSACTION_ISOLATION,
        SqlInfo.SQL_SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS,
    }
)

SqlInfoValue = str | bool | int | Sequence[str] | Mapping[int, Sequence[int]]


def _sql_info_code(info: int, value: SqlInfoValue) -> int:
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return 3 if info in _INT32_INFOS else 2
    if isinstance(value, str):
        return 0
    if isinstance(value, Mapping):
        return 5
    return 4


def build_sql_info(values: Mapping[int, SqlInfoValue]) -> pa.RecordBatch:
    """Build a ``CommandGetSqlInfo`` result batch with :data:`SQL_INFO_SCHEMA`.

    Args:
        values: info id -> value. ``str`` goes to ``string_value``, ``bool`` to
            ``bool_value``, ``int`` to ``int32_bitmask`` for the ids the protocol types as
            int32 and to ``bigint_value`` otherwise, a sequence of ``str`` to
            ``string_list``, a mapping to ``int32_to_int32_list_map``.

    Returns:
        One row per entry, in the order given.

    Example:
        >>> build_sql_info({SqlInfo.FLIGHT_SQL_SERVER_NAME: "flight-select"}).num_rows
        1
    """
    children: list[list[Any]] = [[] for _ in range(6)]
    type_ids: list[int] = []
    offsets: list[int] = []
    for info, value in values.items():
        code = _sql_info_code(int(info), value)
        type_ids.append(code)
        offsets.append(len(children[code]))
        children[code].append(list(value.items()) if isinstance(value, Mapping) else value)
    arrays = [
        pa.array(items, type=_SQL_INFO_UNION.field(code).type)
        for code, items in enumerate(children)
    ]
    # Built from buffers because UnionArray.from_dense makes its children nullable, which
    # would not match SQL_INFO_SCHEMA.
    union = pa.Array.from_buffers(
        _SQL_INFO_UNION,
        len(type_ids),
        [
            None,
            pa.array(type_ids, type=pa.int8()).buffers()[1],
            pa.array(offsets, type=pa.int32()).buffers()[1],
        ],
        children=arrays,
    )
    names = pa.array([int(k) for k in values], type=pa.uint32())
    return pa.RecordBatch.from_arrays([names, union], schema=SQL_INFO_SCHEMA)
