"""A prepared statement's parameters: bound by DoPut (bounded in bytes), kept per handle for
the clients that keep executing the first handle, and substituted into the statement's ``?``
before planning (refused when it has some and none were bound)."""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.bounded_cache import BoundedCache
from flight_storage.errors import InvalidRequestError, ResourceLimitError
from flight_storage.protocol import PreparedHandle
from flight_storage.request.parameters import bind, has_parameters

KEPT_HANDLES: Final = 1024
"""Parameters bound by DoPut kept per handle, for clients that keep the first handle."""


def bound_sql(sql: str, parameters: bytes | None) -> str:
    """``sql`` with its ``?`` parameters bound (refused when it has some and none are)."""
    if parameters is not None:
        return bind(sql, protocol.handle_parameters(parameters))
    if has_parameters(sql):
        raise InvalidRequestError("statement has ? parameters but none were bound")
    return sql


class BoundParameters:
    """The parameters last bound to each (handle, user), the ``KEPT_HANDLES`` latest."""

    def __init__(self, capacity: int = KEPT_HANDLES) -> None:
        self._kept: BoundedCache[tuple[bytes, str | None], bytes] = BoundedCache(capacity)

    def get(self, handle: bytes, user: str | None) -> bytes | None:
        return self._kept.get((handle, user))

    def bind(self, handle: bytes, user: str | None, prepared: PreparedHandle,
             reader: flight.MetadataRecordBatchReader, max_bytes: int) -> PreparedHandle:
        """``prepared`` with the parameters DoPut's ``reader`` sends, kept for ``handle``."""
        table = _read_bounded(reader, max_bytes)
        batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
        bound = protocol.bind_parameters(prepared, batch)
        if bound.parameters is not None:
            self._kept.put((handle, user), bound.parameters)
        return bound


def _read_bounded(reader: flight.MetadataRecordBatchReader, limit: int) -> pa.Table:
    """Everything a DoPut sends, refused as soon as it passes ``limit`` bytes."""
    batches, size = [], 0
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            break
        if chunk.data is None:
            continue
        size += chunk.data.nbytes
        if size > limit:
            raise ResourceLimitError(
                f"statement parameters are over {limit} bytes (--max-parameter-bytes)",
                code="EntityTooLarge",
            )
        batches.append(chunk.data)
    if not batches:
        return reader.schema.empty_table()
    return pa.Table.from_batches(batches)
