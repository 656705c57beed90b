"""The Flight SQL metadata commands: one record per command (result schema and builder).

``GetFlightInfo`` answers a metadata command with the record's schema and a ticket that
carries the command itself; ``DoGet`` builds the result. Buckets are schemas (of no catalog); an
object is a ``table`` and a configured prefix a ``view`` (``rpc/tables/seam.PREFIX_TABLE_TYPE``
says why). An Iceberg catalog (``--iceberg``) is a catalog, its namespaces are schemas and its
tables ``table``s. GetTables lists what each kind of table lists (``TableKind.listed``) and
describes each as that kind does. Hand-written because pyarrow.flight has no Flight SQL server
layer (Arrow's C++ ``FlightSqlServerBase`` is not exposed to Python).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from flight_storage import protocol
from flight_storage.errors import StorageError
from flight_storage.protocol import SqlInfo
from flight_storage.request.table_kinds import select_all
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.server_parts import ServerParts
from flight_storage.rpc.tables.iceberg import namespaces, readable_catalogs
from flight_storage.rpc.tables.kinds import KIND_OF_TABLE, table_schema
from flight_storage.rpc.tables.seam import TABLE_TYPES, TableFilter
from select_dialect.flavors import FLAVORS

log = logging.getLogger(__name__)

SERVER_NAME: Final = "flight-select"
SERVER_VERSION: Final = "0.1.0"


def _sql_info(host: ServerParts, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    writable = host.config.writable
    values: dict[int, Any] = {
        SqlInfo.FLIGHT_SQL_SERVER_NAME: SERVER_NAME,
        SqlInfo.FLIGHT_SQL_SERVER_VERSION: SERVER_VERSION,
        SqlInfo.FLIGHT_SQL_SERVER_ARROW_VERSION: pa.__version__,
        # only bulk ingest writes, and only on a --writable server
        SqlInfo.FLIGHT_SQL_SERVER_READ_ONLY: not writable,
        SqlInfo.FLIGHT_SQL_SERVER_SQL: True,
        SqlInfo.FLIGHT_SQL_SERVER_SUBSTRAIT: False,
        # SQL_SUPPORTED_TRANSACTION_TRANSACTION: BeginTransaction/EndTransaction are answered
        # for statements, which only read (read committed: each reads the objects' versions
        # current when it is planned), so DB-API clients can turn autocommit off; with NONE
        # the ADBC driver refuses and its DB-API layer warns at every connect. Bulk ingest is
        # outside transactions (INGEST_TRANSACTIONS_SUPPORTED false): a rollback undoes none.
        SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION: 1,
        SqlInfo.FLIGHT_SQL_SERVER_CANCEL: True,
        SqlInfo.FLIGHT_SQL_SERVER_BULK_INGESTION: writable,
        SqlInfo.FLIGHT_SQL_SERVER_INGEST_TRANSACTIONS_SUPPORTED: False,
        SqlInfo.FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT: int(host.config.query_timeout_s),
        SqlInfo.FLIGHT_SQL_SERVER_TRANSACTION_TIMEOUT: 0,
        **_DIALECT_INFO,
        **(_DATAFUSION_SQL_INFO if FLAVORS[call.statement_flavor].datafusion_sql else {}),
        SqlInfo.SQL_MAX_STATEMENT_LENGTH: host.config.engine.max_query_chars,
    }
    wanted = list(message.info) or list(values)
    chosen = {k: values[k] for k in wanted if k in values}
    return pa.Table.from_batches([protocol.build_sql_info(chosen)])


_DIALECT_INFO: Final[Mapping[int, Any]] = {
    SqlInfo.SQL_DDL_CATALOG: False,
    SqlInfo.SQL_DDL_SCHEMA: False,
    SqlInfo.SQL_DDL_TABLE: False,  # tables are made by bulk ingest, never by SQL
    # SqlSupportedCaseSensitivity UNKNOWN: no single answer fits. Unquoted column names match
    # any case (AmbiguousFieldName when several spellings match), quoted ones their own case;
    # table names are object keys, case-sensitive quoted or not (docs/server.md, Sessions).
    SqlInfo.SQL_IDENTIFIER_CASE: 0,
    SqlInfo.SQL_QUOTED_IDENTIFIER_CASE: 0,
    SqlInfo.SQL_IDENTIFIER_QUOTE_CHAR: '"',
    SqlInfo.SQL_ALL_TABLES_ARE_SELECTABLE: True,  # GetTables lists readable buckets only
    SqlInfo.SQL_NULL_ORDERING: 0,  # SQL_NULLS_SORTED_HIGH: DataFusion's ORDER BY default
    # the functions every flavour runs (tests/flight_storage/test_sql_info.py runs each)
    SqlInfo.SQL_NUMERIC_FUNCTIONS: ["INT", "FLOAT"],
    SqlInfo.SQL_STRING_FUNCTIONS: ["CHAR_LENGTH", "CHARACTER_LENGTH", "LOWER", "SUBSTRING",
                                   "TRIM", "UPPER"],
    SqlInfo.SQL_SYSTEM_FUNCTIONS: ["COALESCE", "NULLIF"],
    SqlInfo.SQL_DATETIME_FUNCTIONS: ["DATE_ADD", "DATE_DIFF", "EXTRACT", "TO_STRING",
                                     "TO_TIMESTAMP", "UTCNOW"],
    SqlInfo.SQL_SUPPORTS_COLUMN_ALIASING: True,
    SqlInfo.SQL_NULL_PLUS_NULL_IS_NULL: True,
    SqlInfo.SQL_SUPPORTS_TABLE_CORRELATION_NAMES: True,
    SqlInfo.SQL_SUPPORTS_LIKE_ESCAPE_CLAUSE: True,
    SqlInfo.SQL_SUPPORTED_GRAMMAR: 1,  # bit SQL_MINIMUM_GRAMMAR: one table, no joins
    SqlInfo.SQL_OUTER_JOINS_SUPPORT_LEVEL: 0,  # SQL_JOINS_UNSUPPORTED
    SqlInfo.SQL_SCHEMA_TERM: "bucket",
    SqlInfo.SQL_SELECT_FOR_UPDATE_SUPPORTED: False,
    SqlInfo.SQL_STORED_PROCEDURES_SUPPORTED: False,
    SqlInfo.SQL_SUPPORTED_SUBQUERIES: 0,  # FROM names the object
    SqlInfo.SQL_CORRELATED_SUBQUERIES_SUPPORTED: False,
    SqlInfo.SQL_SUPPORTED_UNIONS: 0,
    SqlInfo.SQL_MAX_TABLES_IN_SELECT: 1,
    SqlInfo.SQL_DEFAULT_TRANSACTION_ISOLATION: 2,  # SQL_TRANSACTION_READ_COMMITTED
    SqlInfo.SQL_TRANSACTIONS_SUPPORTED: True,
    SqlInfo.SQL_SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS: 1 << 2,  # read committed only
    SqlInfo.SQL_BATCH_UPDATES_SUPPORTED: False,
    SqlInfo.SQL_SAVEPOINTS_SUPPORTED: False,
    SqlInfo.SQL_NAMED_PARAMETERS_SUPPORTED: False,  # ? only
}
"""What the SQL surface supports, for GetSqlInfo (each claim is checked by a test)."""

_DATAFUSION_SQL_INFO: Final[Mapping[int, Any]] = {
    SqlInfo.SQL_SUPPORTED_GRAMMAR: 3,  # SQL_MINIMUM_GRAMMAR | SQL_CORE_GRAMMAR: DataFusion's
    SqlInfo.SQL_OUTER_JOINS_SUPPORT_LEVEL: 2,  # SQL_FULL_OUTER_JOINS
    SqlInfo.SQL_SUPPORTED_SUBQUERIES: 7,  # in comparisons, EXISTS, IN
    SqlInfo.SQL_CORRELATED_SUBQUERIES_SUPPORTED: True,
    SqlInfo.SQL_SUPPORTED_UNIONS: 3,  # UNION, UNION ALL
    SqlInfo.SQL_MAX_TABLES_IN_SELECT: 0,  # no limit
}
"""What a flavour with ``datafusion_sql`` (the standard surface: ``rpc/tables/sql.py``)
supports beyond S3 Select's one table, for a caller in that flavour."""


def _catalogs(host: ServerParts, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    names = readable_catalogs(host, call)
    # Buckets have no catalog. With no Iceberg catalog there is none to list (as before), and
    # ADBC's get_objects shows buckets under a null catalog; beside named catalogs, ADBC lists
    # only the catalogs named here, so the buckets' "no catalog" is listed as "".
    rows = [{"catalog_name": name} for name in (["", *names] if names else [])]
    return pa.Table.from_pylist(rows, schema=protocol.CATALOGS_SCHEMA)


def _filter(message: Any) -> TableFilter:
    """What a GetDbSchemas or GetTables message asks for (the spec: an empty ``catalog``
    means "no catalog", as buckets are; absent, every catalog)."""
    types = getattr(message, "table_types", ())
    return TableFilter(catalog=_optional(message, "catalog"),
                       schema_pattern=_optional(message, "db_schema_filter_pattern"),
                       table_pattern=_optional(message, "table_name_filter_pattern"),
                       # case-blind: JDBC tools ask for "TABLE", ADBC's vocabulary is "table"
                       types=frozenset(t.casefold() for t in types))


def _db_schemas(host: ServerParts, call: CallContext, message: Any) -> pa.Table:
    wanted = _filter(message)
    buckets = host.readable_buckets(call) if wanted.wants_catalog("") else []
    rows = [{"catalog_name": None, "db_schema_name": b}
            for b in buckets if wanted.wants_schema(b)]
    rows += [{"catalog_name": catalog, "db_schema_name": namespace}
             for catalog, namespace in namespaces(host, call, wanted)
             if wanted.wants_schema(namespace)]
    return pa.Table.from_pylist(rows, schema=protocol.DB_SCHEMAS_SCHEMA)


def _tables(host: ServerParts, call: CallContext, message: Any) -> pa.Table:
    """Every kind of table's tables that the message asks for (``TableKind.listed``), each
    with the columns its kind describes for ``SELECT *`` over it where asked."""
    wanted = _filter(message)
    rows = []
    for kind in KIND_OF_TABLE.values():
        for table in kind.listed(host, call, wanted):
            row: dict[str, Any] = {"catalog_name": table.catalog,
                                   "db_schema_name": table.schema,
                                   "table_name": table.name, "table_type": table.table_type}
            if message.include_schema:
                schema = _described(host, call, select_all(*table.names))
                row["table_schema"] = schema.serialize().to_pybytes()
            rows.append(row)
    schema = (
        protocol.TABLES_SCHEMA_WITH_SCHEMA if message.include_schema else protocol.TABLES_SCHEMA
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _described(host: ServerParts, call: CallContext, query: str) -> pa.Schema:
    """``query``'s columns as its kind of table describes them: the code a statement's
    GetFlightInfo runs (``rpc/tables/kinds.table_schema``); none, logged, when it fails."""
    try:
        return table_schema(host, call, query)
    except StorageError as exc:
        log.warning("no schema for %s: %s", query, exc)
        return pa.schema([])


def _table_types(host: ServerParts, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    return pa.Table.from_pylist(
        [{"table_type": t} for t in TABLE_TYPES], schema=protocol.TABLE_TYPES_SCHEMA
    )


def _xdbc_type_info(host: ServerParts, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    rows = [dict(zip(_XDBC_COLUMNS, row, strict=True)) for row in _XDBC_TYPES]
    if message.HasField("data_type"):
        rows = [r for r in rows if r["data_type"] == message.data_type]
    return pa.Table.from_pylist(rows, schema=protocol.XDBC_TYPE_INFO_SCHEMA)


def _no_keys(host: ServerParts, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    name = message.DESCRIPTOR.name
    return METADATA_COMMANDS[name].schema(message).empty_table()


@dataclass(frozen=True)
class MetadataCommand:
    """One Flight SQL metadata command: its result schema and how to build the result."""

    schema: Callable[[Any], pa.Schema]
    build: Callable[[ServerParts, CallContext, Any], pa.Table]


METADATA_COMMANDS: Final[Mapping[str, MetadataCommand]] = {
    "CommandGetSqlInfo": MetadataCommand(lambda _m: protocol.SQL_INFO_SCHEMA,
                                          _sql_info),
    "CommandGetCatalogs": MetadataCommand(lambda _m: protocol.CATALOGS_SCHEMA,
                                           _catalogs),
    "CommandGetDbSchemas": MetadataCommand(lambda _m: protocol.DB_SCHEMAS_SCHEMA,
                                            _db_schemas),
    "CommandGetTables": MetadataCommand(
        lambda m: protocol.TABLES_SCHEMA_WITH_SCHEMA if m.include_schema else
        protocol.TABLES_SCHEMA,
        _tables),
    "CommandGetTableTypes": MetadataCommand(lambda _m: protocol.TABLE_TYPES_SCHEMA,
                                             _table_types),
    "CommandGetXdbcTypeInfo": MetadataCommand(lambda _m: protocol.XDBC_TYPE_INFO_SCHEMA,
                                               _xdbc_type_info),
    "CommandGetPrimaryKeys": MetadataCommand(lambda _m: protocol.PRIMARY_KEYS_SCHEMA,
                                              _no_keys),
    "CommandGetExportedKeys": MetadataCommand(lambda _m: protocol.FOREIGN_KEYS_SCHEMA,
                                               _no_keys),
    "CommandGetImportedKeys": MetadataCommand(lambda _m: protocol.FOREIGN_KEYS_SCHEMA,
                                               _no_keys),
    "CommandGetCrossReference": MetadataCommand(lambda _m: protocol.FOREIGN_KEYS_SCHEMA,
                                                 _no_keys),
}
"""Every metadata command, one record each (GetFlightInfo's schema, DoGet's result)."""

_XDBC_COLUMNS: Final = tuple(protocol.XDBC_TYPE_INFO_SCHEMA.names)
# The types a result column can have: name, XDBC/SQL type code, column size, literal prefix and
# suffix, create params, nullable (1), case sensitive, searchable (3: full), unsigned,
# fixed precision, auto increment, local name, min and max scale, SQL type, datetime subcode,
# radix, interval precision.
_XDBC_TYPES: Final = (
    ("VARCHAR", 12, None, "'", "'", None, 1, True, 3, None, False, None, "string", None, None,
     12, None, None, None),
    ("BIGINT", -5, 19, None, None, None, 1, False, 2, False, True, False, "int64", 0, 0, -5,
     None, 10, None),
    ("DOUBLE", 8, 53, None, None, None, 1, False, 2, False, False, False, "float64", None,
     None, 8, None, 2, None),
    ("DECIMAL", 3, 38, None, None, ["precision", "scale"], 1, False, 2, False, True, False,
     "decimal", 0, 38, 3, None, 10, None),
    ("BOOLEAN", 16, 1, None, None, None, 1, False, 2, None, False, None, "bool", None, None,
     16, None, None, None),
    ("DATE", 91, 10, "DATE '", "'", None, 1, False, 2, None, False, None, "date", None, None,
     9, 1, None, None),
    ("TIMESTAMP", 93, 35, "TIMESTAMP '", "'", None, 1, False, 2, None, False, None,
     "timestamp", 0, 9, 9, 3, None, None),
    # Parquet columns can have these too (column_metadata names every Arrow type it maps)
    ("TINYINT", -6, 3, None, None, None, 1, False, 2, False, True, False, "int8", 0, 0, -6,
     None, 10, None),
    ("SMALLINT", 5, 5, None, None, None, 1, False, 2, False, True, False, "int16", 0, 0, 5,
     None, 10, None),
    ("INTEGER", 4, 10, None, None, None, 1, False, 2, False, True, False, "int32", 0, 0, 4,
     None, 10, None),
    ("TINYINT UNSIGNED", -6, 3, None, None, None, 1, False, 2, True, True, False, "uint8", 0, 0,
     -6, None, 10, None),
    ("SMALLINT UNSIGNED", 5, 5, None, None, None, 1, False, 2, True, True, False, "uint16", 0,
     0, 5, None, 10, None),
    ("INT UNSIGNED", 4, 10, None, None, None, 1, False, 2, True, True, False, "uint32", 0, 0, 4,
     None, 10, None),
    ("BIGINT UNSIGNED", -5, 20, None, None, None, 1, False, 2, True, True, False, "uint64", 0, 0,
     -5, None, 10, None),
    ("REAL", 7, 24, None, None, None, 1, False, 2, False, False, False, "float32", None, None,
     7, None, 2, None),
    ("TIME", 92, 18, "TIME '", "'", None, 1, False, 2, None, False, None, "time", 0, 9, 9, 2,
     None, None),
    ("TIMESTAMP WITH TIME ZONE", 2014, 41, "TIMESTAMP '", "'", None, 1, False, 2, None, False,
     None, "timestamp with time zone", 0, 9, 9, 3, None, None),
    ("BYTEA", -3, None, None, None, None, 1, False, 2, None, False, None, "binary", None, None,
     -3, None, None, None),
)
XDBC_TYPE_NAMES: Final = frozenset(row[0] for row in _XDBC_TYPES)
"""Every type name GetXdbcTypeInfo lists (GetTables' column type names are among them)."""


def _optional(message: Any, name: str) -> str | None:
    """An optional field's value; None when unset or when the message has no such field
    (GetDbSchemas has no table pattern)."""
    if name not in message.DESCRIPTOR.fields_by_name:
        return None
    return getattr(message, name) if message.HasField(name) else None

