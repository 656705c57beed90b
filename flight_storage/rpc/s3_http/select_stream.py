"""SelectObjectContent over HTTP: the query service's messages as an event stream.

The door plans a request and reads its partitions through the server's query service
(``rpc/query_service.py``) in this process, as the user it authenticated, so a request gets the
same bytes, limits (compute slots, open streams, timeouts) and checks whichever door it came
through; no second engine exists and no Flight call is made for the partitions this process
serves. This module only re-frames each partition's messages (a ``records`` batch, with
Progress or Stats metadata, as a DoGet sends them) into event-stream messages:

| message of a partition | event |
|---|---|
| a ``records`` chunk | ``Records`` (split at the payload bound) |
| ``{"Progress": ..}`` metadata | ``Progress`` (counts of earlier endpoints added) |
| an empty batch without records (the keep-alive) | ``Cont`` (then ``Progress`` when it carries one) |
| ``{"Stats": ..}`` metadata (last message of a partition) | summed into the final ``Stats``; a ``Progress`` with the sum so far when progress was asked for |
| end of the last partition | ``Stats``, ``End`` |
| an error | the error message with its S3 code, and nothing after it |
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from flight_storage.errors import StorageError
from flight_storage.rpc.middleware import CallContext, log_event
from flight_storage.rpc.query_service import SelectEndpoint, SelectService
from flight_storage.rpc.s3_http import eventstream
from flight_storage.rpc.s3_http.s3_errors import S3HttpError, s3_error
from flight_storage.rpc.streams import Item
from select_dialect.errors import SelectDialectError

log = logging.getLogger(__name__)

_COUNTS = ("BytesScanned", "BytesProcessed", "BytesReturned")


@dataclass
class _Totals:
    finished: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))

    def add(self, counts: dict[str, Any]) -> None:
        for name in _COUNTS:
            self.finished[name] += int(counts.get(name, 0))

    def with_current(self, counts: dict[str, Any]) -> tuple[int, int, int]:
        scanned, processed, returned = (self.finished[n] + int(counts.get(n, 0)) for n in _COUNTS)
        return scanned, processed, returned


def events(partitions: Iterable[Iterator[Item]], max_event_payload: int, *,
           progress: bool = False) -> Iterator[bytes]:
    """The event-stream messages of a planned request's partitions, in order, ending with
    ``End`` or an error (``progress``: the request asked for Progress events). Each partition
    is opened when the one before it has ended; closing this iterator early closes the
    partition being read, which stops its work."""
    totals = _Totals()
    try:
        for items in partitions:
            yield from _partition(items, totals, max_event_payload)
            if progress:  # what the partition read, now that it is known whole
                yield eventstream.progress(*totals.with_current({}))
    except Exception as exc:  # noqa: BLE001 - the answer is already 200: errors are events
        error = stream_error(exc)
        yield eventstream.error(error.code, error.message)
        return
    yield eventstream.stats(*totals.with_current({}))
    yield eventstream.end()


def _partition(items: Iterator[Item], totals: _Totals,
               max_event_payload: int) -> Iterator[bytes]:
    for item in items:
        batch, raw = item if isinstance(item, tuple) else (item, None)
        data = _records(batch)
        if data:
            yield from eventstream.records(data, max_event_payload)
        meta = json.loads(raw) if raw else {}
        if "Stats" in meta:
            totals.add(meta["Stats"])
            continue
        if not data:  # a keep-alive while the scan finds nothing
            yield eventstream.cont()
        if "Progress" in meta:
            yield eventstream.progress(*totals.with_current(meta["Progress"]))


def _records(batch: pa.RecordBatch) -> bytes:
    """The serialized records a ``records`` batch carries (one chunk per row)."""
    if not batch.num_rows:
        return b""
    column = batch.column(0)
    return column[0].as_py() if batch.num_rows == 1 else b"".join(column.to_pylist())


def partitions(service: SelectService, call: CallContext, endpoints: Sequence[SelectEndpoint],
               request_id: str) -> Iterator[Iterator[Item]]:
    """Each endpoint's messages from the query service, in order, each partition logged in
    one JSON line when it ends (rows, bytes, scanned, returned, status, as a DoGet's call line
    says them)."""
    for endpoint in endpoints:
        fields: dict[str, Any] = {}
        yield _logged(service.items(call, endpoint, fields), fields, request_id)


def _logged(items: Iterator[Item], fields: dict[str, Any], request_id: str) -> Iterator[Item]:
    try:
        yield from items
    finally:
        log_event("select_partition", door="s3", request_id=request_id, **fields)


def stream_error(exc: Exception) -> S3HttpError:
    """The S3 error event of a failure while the answer streams; anything not a client's
    error is logged with an incident id and named by it alone."""
    if isinstance(exc, (StorageError, SelectDialectError)):
        return s3_error(exc)
    incident = uuid.uuid4().hex[:12]
    log.error("internal error incident=%s", incident, exc_info=exc)
    return S3HttpError("InternalError", f"internal error, id={incident}")
