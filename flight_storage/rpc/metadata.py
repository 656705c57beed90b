"""The Flight SQL metadata commands: one record per command (result schema and builder).

``GetFlightInfo`` answers a metadata command with the record's schema and a ticket that
carries the command itself; ``DoGet`` builds the result. Buckets are schemas (of no catalog); an
object is a ``table`` and a configured prefix a ``view`` (see ``OBJECT_TABLE_TYPE``). An Iceberg
catalog (``--iceberg``) is a catalog, its namespaces are schemas and its tables ``table``s. Hand-written because
pyarrow.flight has no Flight SQL server layer (Arrow's C++ ``FlightSqlServerBase`` is not
exposed to Python).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import pyarrow as pa

from flight_storage import protocol
from flight_storage.errors import StorageError
from flight_storage.protocol import SqlInfo
from flight_storage.request.table_kinds import select_all
from flight_storage.rpc import access
from flight_storage.rpc.middleware import CallContext
from flight_storage.rpc.tables.kinds import table_schema
from flight_storage.rpc.tables.seam import TableHost
from flight_storage.storage.catalog import ingested_table
from select_dialect.flavors import FLAVORS

log = logging.getLogger(__name__)

SERVER_NAME: Final = "flight-select"
SERVER_VERSION: Final = "0.1.0"
OBJECT_TABLE_TYPE: Final = "table"
"""An object holds the bytes it is read from: a base table."""
PREFIX_TABLE_TYPE: Final = "view"
"""A configured prefix stores nothing of its own: it is the union of the objects under it, as a
view is a stored query over base tables. Flight SQL leaves the vocabulary to the server
(``CommandGetTableTypes``); lower case is what Arrow's reference SQLite Flight SQL servers and
ADBC's own drivers answer, and what sqlalchemy-adbc lists (it compares with ``"table"`` and
``"view"`` exactly). GetTables' ``table_types`` filter ignores case, so JDBC-style filters
(``TABLE``, ``VIEW``, the spec's own examples) select them too."""
TABLE_TYPES: Final = (OBJECT_TABLE_TYPE, PREFIX_TABLE_TYPE)


class MetadataHost(TableHost, Protocol):
    """What the metadata builders read from the server: the tables' (GetTables' schemas are
    their kinds'), and the buckets a caller may read."""

    def readable_buckets(self, call: CallContext) -> list[str]:
        """The buckets the caller may read."""
        ...


def _sql_info(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
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


def _catalogs(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    names = _readable_catalogs(host, call)
    # Buckets have no catalog. With no Iceberg catalog there is none to list (as before), and
    # ADBC's get_objects shows buckets under a null catalog; beside named catalogs, ADBC lists
    # only the catalogs named here, so the buckets' "no catalog" is listed as "".
    rows = [{"catalog_name": name} for name in (["", *names] if names else [])]
    return pa.Table.from_pylist(rows, schema=protocol.CATALOGS_SCHEMA)


def _readable_catalogs(host: MetadataHost, call: CallContext, message: Any = None) -> list[str]:
    """The Iceberg catalogs the caller may read, narrowed by the message's ``catalog`` (the
    spec: an empty string means "no catalog", as buckets are; absent, every catalog)."""
    wanted = _optional(message, "catalog") if message is not None else None
    names = access.readable(call.user, host.iceberg.names())
    return names if wanted is None else [n for n in names if n == wanted]


def _buckets_wanted(message: Any) -> bool:
    """Buckets have no catalog: listed unless the message asks for a named one."""
    return _optional(message, "catalog") in (None, "")


def _namespaces(host: MetadataHost, call: CallContext, message: Any) -> list[tuple[str, str]]:
    """(catalog, namespace) of every readable Iceberg catalog the message asks for; a catalog
    that cannot be listed is logged and left out (the others still answer)."""
    found = []
    for name in _readable_catalogs(host, call, message):
        try:
            found += [(name, ns) for ns in host.iceberg.namespaces(name)]
        except StorageError as exc:
            log.warning("Iceberg catalog %s: %s", name, exc)
    return found


def _db_schemas(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:
    pattern = _optional(message, "db_schema_filter_pattern")
    rows = [
        {"catalog_name": None, "db_schema_name": b}
        for b in (host.readable_buckets(call) if _buckets_wanted(message) else [])
        if _like(b, pattern)
    ]
    rows += [{"catalog_name": catalog, "db_schema_name": namespace}
             for catalog, namespace in _namespaces(host, call, message)
             if _like(namespace, pattern)]
    return pa.Table.from_pylist(rows, schema=protocol.DB_SCHEMAS_SCHEMA)

def _tables(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:
    schema_pattern = _optional(message, "db_schema_filter_pattern")
    table_pattern = _optional(message, "table_name_filter_pattern")
    # case-blind: JDBC tools ask for "TABLE", ADBC's vocabulary (ours) is "table"
    types = {t.casefold() for t in message.table_types}
    buckets: list[str] = []
    if (not types or types & set(TABLE_TYPES)) and _buckets_wanted(message):
        buckets = [b for b in host.readable_buckets(call) if _like(b, schema_pattern)]
    rows = []
    for bucket in buckets:
        try:
            configured = host.catalog.bucket_config(bucket).tables
        except StorageError as exc:  # one bucket's broken file must not hide the others
            log.warning("bucket %s: %s", bucket, exc)
            configured = ()
        names = [(t.prefix, PREFIX_TABLE_TYPE) for t in configured]
        for o in host.catalog.objects(bucket):
            # an ingested table once, by the name users write, rather than its part files
            name = ingested_table(o.key) or o.key
            if o.format is not None and (name, OBJECT_TABLE_TYPE) not in names[-1:]:
                names.append((name, OBJECT_TABLE_TYPE))
        for name, kind in names:
            if not _like(name, table_pattern) or (types and kind not in types):
                continue
            row: dict[str, Any] = {
                "catalog_name": None,
                "db_schema_name": bucket,
                "table_name": name,
                "table_type": kind,
            }
            if message.include_schema:
                row["table_schema"] = _table_schema(host, call, bucket, name
                                                    ).serialize().to_pybytes()
            rows.append(row)
    if not types or OBJECT_TABLE_TYPE in types:
        rows += _iceberg_tables(host, call, message, schema_pattern, table_pattern)
    schema = (
        protocol.TABLES_SCHEMA_WITH_SCHEMA if message.include_schema else protocol.TABLES_SCHEMA
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _iceberg_tables(host: MetadataHost, call: CallContext, message: Any,
                    schema_pattern: str | None, table_pattern: str | None) -> list[dict[str, Any]]:
    """GetTables' rows of the Iceberg catalogs: each table a ``table``, with the Arrow schema
    its current snapshot is read with."""
    rows = []
    for catalog, namespace in _namespaces(host, call, message):
        if not _like(namespace, schema_pattern):
            continue
        try:
            tables = host.iceberg.tables(catalog, namespace)
        except StorageError as exc:
            log.warning("Iceberg catalog %s, namespace %s: %s", catalog, namespace, exc)
            continue
        for table in tables:
            if not _like(table, table_pattern):
                continue
            row: dict[str, Any] = {"catalog_name": catalog, "db_schema_name": namespace,
                                   "table_name": table, "table_type": OBJECT_TABLE_TYPE}
            if message.include_schema:
                schema = _iceberg_schema(host, call, catalog, namespace, table)
                row["table_schema"] = schema.serialize().to_pybytes()
            rows.append(row)
    return rows


def _iceberg_schema(host: MetadataHost, call: CallContext, catalog: str, namespace: str,
                    table: str) -> pa.Schema:
    """The columns a statement over the table sees (in the caller's flavour)."""
    return _described(host, call, select_all(catalog, namespace, table))


def _table_schema(host: MetadataHost, call: CallContext, bucket: str, name: str) -> pa.Schema:
    """The columns ``SELECT * FROM "bucket"."name"`` answers with in the caller's flavour."""
    return _described(host, call, select_all(bucket, name))


def _described(host: MetadataHost, call: CallContext, query: str) -> pa.Schema:
    """``query``'s columns as its kind of table describes them: the code a statement's
    GetFlightInfo runs (``rpc/tables/kinds.table_schema``); none, logged, when it fails."""
    try:
        return table_schema(host, call, query)
    except StorageError as exc:
        log.warning("no schema for %s: %s", query, exc)
        return pa.schema([])


def _table_types(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    return pa.Table.from_pylist(
        [{"table_type": t} for t in TABLE_TYPES], schema=protocol.TABLE_TYPES_SCHEMA
    )


def _xdbc_type_info(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    rows = [dict(zip(_XDBC_COLUMNS, row, strict=True)) for row in _XDBC_TYPES]
    if message.HasField("data_type"):
        rows = [r for r in rows if r["data_type"] == message.data_type]
    return pa.Table.from_pylist(rows, schema=protocol.XDBC_TYPE_INFO_SCHEMA)


def _no_keys(host: MetadataHost, call: CallContext, message: Any) -> pa.Table:  # noqa: ARG001 - a METADATA_COMMANDS builder
    name = message.DESCRIPTOR.name
    return METADATA_COMMANDS[name].schema(message).empty_table()


@dataclass(frozen=True)
class MetadataCommand:
    """One Flight SQL metadata command: its result schema and how to build the result."""

    schema: Callable[[Any], pa.Schema]
    build: Callable[[MetadataHost, CallContext, Any], pa.Table]


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
    return getattr(message, name) if message.HasField(name) else None


def _like(value: str, pattern: str | None) -> bool:
    """SQL LIKE as Flight SQL filter patterns use it (``%`` and ``_``)."""
    if pattern is None or pattern == "":
        return True
    regex = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern
    )
    return re.fullmatch(regex, value, re.S) is not None
