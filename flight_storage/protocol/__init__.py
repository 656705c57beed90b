"""The wire contract both sides share: Flight SQL messages, result schemas, signed tickets.

This is the only server package the compute client imports, so it depends on the standard
library, protobuf, pyarrow and the generated ``_flight_sql_pb2`` module only. One job per
module: ``messages`` (``Any`` packing, action bodies, headers, errors), ``schemas`` (metadata
result schemas, ``SqlInfo``) and ``tickets`` (partition tickets, prepared handles). This file
re-exports their public names so ``from flight_storage import protocol`` keeps working.
"""

from flight_storage import _flight_sql_pb2 as pb
from flight_storage.protocol.messages import (
    ENDPOINTS_HEADER,
    ENDPOINTS_PARTITIONED,
    ENDPOINTS_SINGLE,
    FLAVOR_HEADER,
    FLIGHT_ACTIONS,
    TYPE_URL_PREFIX,
    ProtocolError,
    TicketError,
    UnknownCommandError,
    decode_action,
    pack_any,
    unpack_any,
)
from flight_storage.protocol.schemas import (
    CATALOGS_SCHEMA,
    DB_SCHEMAS_SCHEMA,
    FOREIGN_KEYS_SCHEMA,
    PRIMARY_KEYS_SCHEMA,
    SQL_INFO_SCHEMA,
    TABLE_TYPES_SCHEMA,
    TABLES_SCHEMA,
    TABLES_SCHEMA_WITH_SCHEMA,
    XDBC_TYPE_INFO_SCHEMA,
    SqlInfo,
    SqlInfoValue,
    build_sql_info,
)
from flight_storage.protocol.tickets import (
    HANDLE_VERSION,
    TICKET_VERSION,
    Partition,
    PartitionTicket,
    PreparedHandle,
    Secret,
    bind_parameters,
    decode_handle,
    decode_ticket,
    encode_handle,
    encode_ticket,
    handle_parameters,
    ticket_from_flight,
    ticket_to_flight,
)

__all__ = [
    "CATALOGS_SCHEMA",
    "DB_SCHEMAS_SCHEMA",
    "ENDPOINTS_HEADER",
    "ENDPOINTS_PARTITIONED",
    "ENDPOINTS_SINGLE",
    "FLAVOR_HEADER",
    "FLIGHT_ACTIONS",
    "FOREIGN_KEYS_SCHEMA",
    "HANDLE_VERSION",
    "PRIMARY_KEYS_SCHEMA",
    "SQL_INFO_SCHEMA",
    "TABLES_SCHEMA",
    "TABLES_SCHEMA_WITH_SCHEMA",
    "TABLE_TYPES_SCHEMA",
    "TICKET_VERSION",
    "TYPE_URL_PREFIX",
    "XDBC_TYPE_INFO_SCHEMA",
    "Partition",
    "PartitionTicket",
    "PreparedHandle",
    "ProtocolError",
    "Secret",
    "SqlInfo",
    "SqlInfoValue",
    "TicketError",
    "UnknownCommandError",
    "bind_parameters",
    "build_sql_info",
    "decode_action",
    "decode_handle",
    "decode_ticket",
    "encode_handle",
    "encode_ticket",
    "handle_parameters",
    "pack_any",
    "pb",
    "ticket_from_flight",
    "ticket_to_flight",
    "unpack_any",
]
