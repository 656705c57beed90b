"""Stateless partition tickets and prepared-statement handles, signed with HMAC-SHA256.

Tickets. A :data:`PartitionTicket` carries everything needed to compute one partition of a
query (query text, flavor, object, partition, serializations, user, issue time), so any
server sharing the secret can serve the ``DoGet`` without remembering the ``GetFlightInfo``.
Tickets and partitions are tagged unions, decoded here once: one frozen dataclass per kind of
request (:class:`StatementTicket`, ...) and per kind of partition (:class:`ByteRange`, ...),
each tag (``REQUEST``, ``KIND``) read only by this module's decoders, so code elsewhere
dispatches on a type, never on a string.
Wire format (:func:`encode_ticket`)::

    b"FST" | version (1 byte) | flags (1 byte) | payload | HMAC-SHA256 (32 bytes)

``payload`` is compact JSON (zlib-compressed when flag bit 0 is set, which happens when that
is shorter). Tickets are signed, not encrypted: a client can read what it was given (its own
query, the object, the partition) but cannot change it or mint another ticket. The MAC
covers everything before it, including the magic, so a ticket can never be accepted as a
handle or the other way round. Verification happens before any decompression or JSON
parsing. The bytes travel inside
``TicketStatementQuery.statement_handle`` (:func:`ticket_to_flight`).

Prepared statements. A :class:`PreparedHandle` is the same idea for
``ActionCreatePreparedStatementResult.prepared_statement_handle`` (magic ``b"FSH"``): it
holds the query text, the flavor, the user, the issue time and, after a ``DoPut`` of
parameters, the bound parameter batch as Arrow IPC. The server keeps no per-statement state:
``CreatePreparedStatement`` returns a signed handle; ``DoPut(CommandPreparedStatementQuery)``
answers ``DoPutPreparedStatementResult`` with a new handle carrying the parameters
(:func:`bind_parameters`); ``GetFlightInfo(CommandPreparedStatementQuery)`` decodes the handle
and plans; ``ClosePreparedStatement`` only has to verify the signature.

Hand-written: the signed, stateless format is this server's own (Flight leaves ticket
contents to the server).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeAlias

import pyarrow as pa

from flight_storage import _flight_sql_pb2 as pb
from flight_storage.protocol.messages import ProtocolError, TicketError, pack_any, unpack_any
from flight_storage.protocol.signing import MAC_SIZE, Secret, Signer

# ----------------------------------------------------------------------------- signed tokens

TICKET_VERSION: Final = 2
HANDLE_VERSION: Final = 1

_TICKET_MAGIC: Final = b"FST"
_HANDLE_MAGIC: Final = b"FSH"
_FLAG_ZLIB: Final = 0x01
# A token issued up to this many seconds "in the future" (clock skew between servers that
# share a secret) is accepted.
_CLOCK_SKEW: Final = 60.0

def _seal(magic: bytes, version: int, payload: Mapping[str, Any], secret: Secret) -> bytes:
    signer = Signer.of(secret)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    packed = zlib.compress(body, 6)
    flags = 0
    if len(packed) < len(body):
        body, flags = packed, _FLAG_ZLIB
    signed = magic + bytes((version, flags)) + body
    return signed + signer.mac(b"", signed)  # the magic is the domain


def _open(data: bytes, magic: bytes, version: int, secret: Secret, what: str) -> dict[str, Any]:
    data = bytes(data)
    header = len(magic) + 2
    if len(data) < header + MAC_SIZE or not data.startswith(magic):
        raise TicketError(f"not a {what}")
    signed, mac = data[:-MAC_SIZE], data[-MAC_SIZE:]
    if not Signer.of(secret).valid(b"", signed, mac):
        raise TicketError(f"{what} signature does not match (forged or altered)")
    if signed[len(magic)] != version:
        raise TicketError(f"unsupported {what} version {signed[len(magic)]}")
    flags, body = signed[len(magic) + 1], signed[header:]
    try:
        if flags & _FLAG_ZLIB:
            body = zlib.decompress(body)
        payload = json.loads(body)
    except (zlib.error, ValueError) as exc:
        raise TicketError(f"malformed {what} payload") from exc
    if not isinstance(payload, dict):
        raise TicketError(f"malformed {what} payload")
    return payload


def _check_age(issued_at: float, max_age: float | None, now: float | None, what: str) -> None:
    current = time.time() if now is None else now
    if issued_at > current + _CLOCK_SKEW:
        raise TicketError(f"{what} issued in the future")
    if max_age is not None and current - issued_at > max_age:
        raise TicketError(f"{what} expired ({current - issued_at:.0f}s old, max {max_age:.0f}s)")


# ----------------------------------------------------------------------------- partitions
#
# A partition is one of five types, each a frozen dataclass with only its own fields: code
# outside this module asks ``isinstance(partition, ByteRange)``, never which string a kind
# is. On the wire (``to_dict``) each carries its tag, ``KIND``, as ``"kind"``.


class _PartitionForm:
    """What every partition type has: its wire tag and its JSON-able form."""

    KIND: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: the tag and the set fields (tuples as lists)."""
        out: dict[str, Any] = {"kind": self.KIND}
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is one
            value = getattr(self, spec.name)
            if value is None or value == ():
                continue
            out[spec.name] = ([list(v) if isinstance(v, tuple) else v for v in value]
                              if isinstance(value, tuple) else value)
        return out


@dataclass(frozen=True)
class WholeObject(_PartitionForm):
    """The whole object (and the one endpoint of a plan that reads none, ``SELECT 1``)."""

    KIND: ClassVar[str] = "object"


@dataclass(frozen=True)
class ByteRange(_PartitionForm):
    """Bytes ``start``..``end`` (end exclusive) of one object, with S3 Select's ScanRange
    record rules (``formats/scan_range.py``)."""

    start: int
    end: int
    KIND: ClassVar[str] = "byte_range"

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad byte range {self.start}..{self.end}")


@dataclass(frozen=True)
class RowGroups(_PartitionForm):
    """Parquet row groups of one object, by index."""

    row_groups: tuple[int, ...]
    KIND: ClassVar[str] = "row_groups"

    def __post_init__(self) -> None:
        if not self.row_groups:
            raise ValueError("row_groups partition needs ['row_groups']")


@dataclass(frozen=True)
class ObjectGroup(_PartitionForm):
    """Several whole objects of one table (a prefix table), by key."""

    keys: tuple[str, ...]
    KIND: ClassVar[str] = "objects"

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("objects partition needs ['keys']")


@dataclass(frozen=True)
class IcebergFiles(_PartitionForm):
    """Data files of one snapshot of an Iceberg table.

    Attributes:
        keys: the data files' paths.
        snapshot: the snapshot id they belong to.
        split: ``(index, count)``: the one data file is read as DataFusion's partition
            ``index`` of ``count`` (empty: the files whole).
        deletes: ``(i, path)``: the positional delete file ``path`` applies to ``keys[i]``.
        row_groups: the row groups of the one split file (for sizes).
    """

    keys: tuple[str, ...]
    snapshot: int
    split: tuple[int, ...] = ()
    deletes: tuple[tuple[int, str], ...] = ()
    row_groups: tuple[int, ...] = ()
    KIND: ClassVar[str] = "files"

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("files partition needs ['keys']")
        if self.split and (len(self.split) != 2 or len(self.keys) != 1
                           or not 0 <= self.split[0] < self.split[1]):
            raise ValueError("a split is (index, count) of one file")
        if any(not 0 <= i < len(self.keys) for i, _ in self.deletes):
            raise ValueError("a delete file names no file of the partition")
        if self.deletes and self.split:
            raise ValueError("a file with delete files is read whole")


Partition: TypeAlias = WholeObject | ByteRange | RowGroups | ObjectGroup | IcebergFiles
"""The slice of the data one ticket computes: one of the five partition types."""

_PARTITION_TYPES: Final[Mapping[str, type[Partition]]] = {
    cls.KIND: cls for cls in (WholeObject, ByteRange, RowGroups, ObjectGroup, IcebergFiles)
}
PARTITION_KINDS: Final = tuple(_PARTITION_TYPES)
"""Every partition's wire tag (``"kind"``); only :func:`partition_from_dict` reads them."""


def is_whole_object(partitions: Sequence[Partition]) -> bool:
    """True when ``partitions`` is the one :class:`WholeObject` (everything in one piece)."""
    return len(partitions) == 1 and isinstance(partitions[0], WholeObject)


# Field name -> how its JSON value is read back.
_FIELD_READERS: Final[Mapping[str, Any]] = {
    "start": int,
    "end": int,
    "snapshot": int,
    "row_groups": lambda v: tuple(int(g) for g in v),
    "keys": lambda v: tuple(str(k) for k in v),
    "split": lambda v: tuple(int(i) for i in v),
    "deletes": lambda v: tuple((int(i), str(path)) for i, path in v),
}


def partition_from_dict(data: Mapping[str, Any]) -> Partition:
    """The partition a ``to_dict`` form describes: the decoder of its ``"kind"`` tag.

    Raises:
        ValueError: an unknown kind, a field the kind needs missing, one it has no place
            for, or values its type refuses.
    """
    tag = data.get("kind") if isinstance(data, Mapping) else None
    cls = _PARTITION_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ValueError(f"unknown partition kind {tag!r}")
    own = {spec.name: spec for spec in dataclasses.fields(cls)}
    given = {k: v for k, v in data.items() if k != "kind" and v is not None and v != ()
             and v != []}
    if extra := sorted(given.keys() - own.keys()):
        raise ValueError(f"{cls.KIND} partition takes no {extra}")
    required = {n for n, spec in own.items()
                if spec.default is dataclasses.MISSING
                and spec.default_factory is dataclasses.MISSING}
    if missing := sorted(required - given.keys()):
        raise ValueError(f"{cls.KIND} partition needs {missing}")
    return cls(**{name: _FIELD_READERS[name](value) for name, value in given.items()})


# ----------------------------------------------------------------------------- partition tickets


@dataclass(frozen=True)
class _TicketFields:
    """What every ticket carries: everything a server needs to compute one partition of a
    query, with no shared state.

    Attributes:
        query: the s3-select SQL text as the client wrote it.
        flavor: dialect flavour (a name of ``select_dialect.flavors``).
        bucket: bucket name.
        key: object key (for an :class:`ObjectGroup` partition, the table's prefix).
        partition: which slice to compute.
        input_serialization: S3 ``InputSerialization`` dict.
        output_serialization: S3 ``OutputSerialization`` dict, or None for Arrow output.
        user: authenticated user the ticket was issued to, if any.
        parameters: bound statement parameters as an Arrow IPC stream, if any.
        issued_at: issue time, seconds since the epoch.
        version: ticket format version.
        object_version: a fingerprint of the objects' content versions when the ticket was
            planned; a server refuses the ticket if its objects are another version.
        planned_by: the cluster node that planned it (named when another node's copy differs).
        parallelism: the endpoints the client asked for (``x-flight-select-parallelism``) when
            a statement was planned, so a DoGet cuts the object as its GetFlightInfo did
            (None: sized by work).
    """

    query: str
    flavor: str
    bucket: str
    key: str
    partition: Partition
    input_serialization: dict[str, Any] = field(default_factory=dict, hash=False)
    output_serialization: dict[str, Any] | None = field(default=None, hash=False)
    user: str | None = None
    parameters: bytes | None = None
    issued_at: float = field(default_factory=time.time)
    version: int = TICKET_VERSION
    object_version: str | None = None
    planned_by: str | None = None
    parallelism: int | None = None

    REQUEST: ClassVar[str]
    """The ticket's wire tag (``"r"``); only :func:`decode_ticket` reads it."""

    def __post_init__(self) -> None:
        if self.parallelism is not None and self.parallelism < 1:
            raise ValueError(f"parallelism {self.parallelism} is not a whole number >= 1")


@dataclass(frozen=True)
class StatementTicket(_TicketFields):
    """A Flight SQL statement over a table (an object or a prefix)."""

    REQUEST: ClassVar[str] = "statement"


@dataclass(frozen=True)
class ConstantTicket(_TicketFields):
    """A Flight SQL statement that reads no table (``SELECT 1``): no bucket, no key."""

    REQUEST: ClassVar[str] = "constant"


@dataclass(frozen=True)
class IcebergTicket(_TicketFields):
    """A statement over an Iceberg table (``bucket`` its catalog, ``key``
    ``namespace.table``), its partition :class:`IcebergFiles`."""

    REQUEST: ClassVar[str] = "iceberg"


@dataclass(frozen=True)
class SelectObjectTicket(_TicketFields):
    """An S3 SelectObjectContent request over one object."""

    REQUEST: ClassVar[str] = "select_object"


@dataclass(frozen=True)
class SqlTicket(_TicketFields):
    """A statement DataFusion plans over the tables it names (``bucket`` and ``key``: the
    session's catalog and schema its one-part names resolve in)."""

    REQUEST: ClassVar[str] = "sql"


PartitionTicket: TypeAlias = (StatementTicket | ConstantTicket | IcebergTicket
                              | SelectObjectTicket | SqlTicket)
"""A decoded ticket: one type per kind of request, so a DoGet dispatches on its type (one
handler per type), never on a string or on which fields are empty."""

_TICKET_TYPES: Final[Mapping[str, type[PartitionTicket]]] = {
    cls.REQUEST: cls
    for cls in (StatementTicket, ConstantTicket, IcebergTicket, SelectObjectTicket, SqlTicket)
}
REQUEST_KINDS: Final = tuple(_TICKET_TYPES)
"""Every ticket type's wire tag (``"r"``); only :func:`decode_ticket` reads them."""


# Short JSON keys keep tickets small: they are sent once per endpoint.
_TICKET_KEYS: Final = {
    "query": "q",
    "flavor": "f",
    "bucket": "b",
    "key": "k",
    "partition": "p",
    "input_serialization": "i",
    "output_serialization": "o",
    "user": "u",
    "parameters": "a",
    "issued_at": "t",
    "object_version": "v",
    "planned_by": "n",
    "request": "r",
    "parallelism": "w",
}


def encode_ticket(ticket: PartitionTicket, secret: Secret) -> bytes:
    """Serialize and sign a partition ticket.

    Args:
        ticket: the ticket; its ``version`` must be :data:`TICKET_VERSION`.
        secret: the signing key (at least 16 bytes), or a sequence of keys whose first one
            signs (key rotation).

    Returns:
        Opaque bytes; see the module docstring for the layout.
    """
    if ticket.version != TICKET_VERSION:
        raise ValueError(f"cannot encode ticket version {ticket.version}")
    values: dict[str, Any] = {
        "query": ticket.query,
        "flavor": ticket.flavor,
        "bucket": ticket.bucket,
        "key": ticket.key,
        "partition": ticket.partition.to_dict(),
        "input_serialization": ticket.input_serialization,
        "output_serialization": ticket.output_serialization,
        "user": ticket.user,
        "parameters": _b64(ticket.parameters),
        "issued_at": ticket.issued_at,
        "object_version": ticket.object_version,
        "planned_by": ticket.planned_by,
        "request": ticket.REQUEST,
        "parallelism": ticket.parallelism,
    }
    payload = {_TICKET_KEYS[k]: v for k, v in values.items() if v is not None}
    return _seal(_TICKET_MAGIC, TICKET_VERSION, payload, secret)


def decode_ticket(
    data: bytes,
    secret: Secret,
    *,
    max_age: float | None = None,
    now: float | None = None,
) -> PartitionTicket:
    """Verify and decode a ticket made by :func:`encode_ticket`.

    Args:
        data: the ticket bytes.
        secret: the key, or a sequence of keys any of which may have signed.
        max_age: refuse tickets issued more than this many seconds ago (None: no limit).
        now: the current time (for tests); defaults to ``time.time()``.

    Raises:
        TicketError: not a ticket, bad signature, unknown version, malformed or expired.
    """
    payload = _open(data, _TICKET_MAGIC, TICKET_VERSION, secret, "ticket")
    tag = payload.get("r")
    kind = _TICKET_TYPES.get(tag) if isinstance(tag, str) else None
    if kind is None:
        raise TicketError(f"unknown request kind {payload.get('r')!r}")
    try:
        ticket = kind(
            query=_str(payload["q"]),
            flavor=_str(payload["f"]),
            bucket=_str(payload["b"]),
            key=_str(payload["k"]),
            partition=partition_from_dict(payload["p"]),
            input_serialization=dict(payload.get("i", {})),
            output_serialization=None if "o" not in payload else dict(payload["o"]),
            user=None if "u" not in payload else _str(payload["u"]),
            parameters=_unb64(payload.get("a")),
            issued_at=float(payload["t"]),
            object_version=None if "v" not in payload else _str(payload["v"]),
            planned_by=None if "n" not in payload else _str(payload["n"]),
            parallelism=None if "w" not in payload else int(payload["w"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TicketError("malformed ticket payload") from exc
    _check_age(ticket.issued_at, max_age, now, "ticket")
    return ticket


def ticket_to_flight(ticket: PartitionTicket, secret: Secret) -> bytes:
    """Encode a ticket as the bytes of a Flight ``Ticket``.

    Returns:
        A packed ``TicketStatementQuery`` whose ``statement_handle`` is
        :func:`encode_ticket`'s output, as Flight SQL clients expect.
    """
    handle = encode_ticket(ticket, secret)
    return pack_any(pb.TicketStatementQuery(statement_handle=handle))


def ticket_from_flight(
    data: bytes,
    secret: Secret,
    *,
    max_age: float | None = None,
    now: float | None = None,
) -> PartitionTicket:
    """Inverse of :func:`ticket_to_flight` (verifies the signature and the age).

    Raises:
        TicketError: the bytes are not a ``TicketStatementQuery`` holding a valid ticket.
    """
    try:
        name, message = unpack_any(data)
    except ProtocolError as exc:
        raise TicketError(f"not a Flight SQL ticket: {exc}") from exc
    if not isinstance(message, pb.TicketStatementQuery):
        raise TicketError(f"expected TicketStatementQuery, got {name}")
    return decode_ticket(message.statement_handle, secret, max_age=max_age, now=now)


# ----------------------------------------------------------------------------- prepared handles


@dataclass(frozen=True)
class PreparedHandle:
    """A prepared statement, carried by the client instead of stored on the server.

    Attributes:
        query: the SQL text given to ``CreatePreparedStatement``.
        flavor: dialect flavor in force when it was prepared.
        user: authenticated user it was prepared for, if any (the server should refuse it
            from anyone else).
        parameters: bound parameters (Arrow IPC stream of one batch), set by a ``DoPut``.
        issued_at: issue time, seconds since the epoch.
        version: handle format version.
        catalog: the session's catalog (a bucket) when it was prepared: an unqualified table
            name in ``query`` is resolved there, whatever the session says later.
        schema: the session's schema (a key prefix) when it was prepared.
    """

    query: str
    flavor: str
    user: str | None = None
    parameters: bytes | None = None
    issued_at: float = field(default_factory=time.time)
    version: int = HANDLE_VERSION
    catalog: str | None = None
    schema: str | None = None


def encode_handle(handle: PreparedHandle, secret: Secret) -> bytes:
    """Serialize and sign a prepared-statement handle.

    Args:
        handle: the handle; its ``version`` must be :data:`HANDLE_VERSION`.
        secret: signing key(s), as for :func:`encode_ticket`.

    Returns:
        Bytes for ``prepared_statement_handle``.
    """
    if handle.version != HANDLE_VERSION:
        raise ValueError(f"cannot encode handle version {handle.version}")
    payload = {
        "q": handle.query,
        "f": handle.flavor,
        "u": handle.user,
        "a": _b64(handle.parameters),
        "t": handle.issued_at,
        "c": handle.catalog,
        "s": handle.schema,
    }
    compact = {k: v for k, v in payload.items() if v is not None}
    return _seal(_HANDLE_MAGIC, HANDLE_VERSION, compact, secret)


def decode_handle(
    data: bytes,
    secret: Secret,
    *,
    max_age: float | None = None,
    now: float | None = None,
) -> PreparedHandle:
    """Verify and decode a handle made by :func:`encode_handle`.

    Raises:
        TicketError: not a handle (a ticket is refused too), bad signature, unknown
            version, malformed or expired.
    """
    payload = _open(data, _HANDLE_MAGIC, HANDLE_VERSION, secret, "prepared statement handle")
    try:
        handle = PreparedHandle(
            query=_str(payload["q"]),
            flavor=_str(payload["f"]),
            user=None if "u" not in payload else _str(payload["u"]),
            parameters=_unb64(payload.get("a")),
            issued_at=float(payload["t"]),
            catalog=None if "c" not in payload else _str(payload["c"]),
            schema=None if "s" not in payload else _str(payload["s"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TicketError("malformed prepared statement handle payload") from exc
    _check_age(handle.issued_at, max_age, now, "prepared statement handle")
    return handle


def bind_parameters(handle: PreparedHandle, batch: pa.RecordBatch | None) -> PreparedHandle:
    """Return a copy of ``handle`` carrying ``batch`` as its bound parameters.

    Args:
        handle: the handle the client sent with ``DoPut``.
        batch: the parameter batch (columns ``"0"``, ``"1"``, …), or None to unbind.
    """
    if batch is None:
        return dataclasses.replace(handle, parameters=None)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return dataclasses.replace(handle, parameters=sink.getvalue().to_pybytes())


def handle_parameters(parameters: bytes | None) -> pa.RecordBatch | None:
    """Decode bound parameters (from a handle or a ticket) into one batch.

    Raises:
        ProtocolError: the bytes are not an Arrow IPC stream.
    """
    if parameters is None:
        return None
    try:
        reader = pa.ipc.open_stream(parameters)
        batches = list(reader)
    except pa.ArrowInvalid as exc:
        raise ProtocolError("bound parameters are not an Arrow IPC stream") from exc
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=reader.schema)
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


# ----------------------------------------------------------------------------- helpers


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes | None:
    if text is None:
        return None
    return base64.b64decode(_str(text), validate=True)
