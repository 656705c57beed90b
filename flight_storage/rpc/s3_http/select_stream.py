"""SelectObjectContent over HTTP, answered by the Flight server of the same process.

The HTTP door plans and reads a request exactly as a Flight client would (``GetFlightInfo`` of
the JSON request, then ``DoGet`` of every endpoint in order) over loopback, so a request gets
the same bytes, the same limits (compute slots, open streams, timeouts), the same checks and the
same call log whichever door it came through; no second engine exists. This module only
re-frames what the Flight stream carries into event-stream messages:

| Flight message | event |
|---|---|
| a ``records`` chunk | ``Records`` (split at the payload bound) |
| ``{"Progress": ..}`` metadata | ``Progress`` (counts of earlier endpoints added) |
| an empty batch without records (the server's keep-alive) | ``Cont`` (then ``Progress`` when it carries one) |
| ``{"Stats": ..}`` metadata (last message of an endpoint) | summed into the final ``Stats``; a ``Progress`` with the sum so far when progress was asked for |
| end of the last endpoint | ``Stats``, ``End`` |
| an error | the error message with its S3 code, and nothing after it |
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyarrow import flight

from flight_storage.rpc.s3_http import eventstream
from flight_storage.rpc.s3_http.s3_errors import S3HttpError, from_flight

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


class SelectBridge:
    """Plans a SelectObjectContent request on the Flight server and streams its events.

    Args:
        client: a Flight client connected to this process's Flight server.
        max_event_payload: largest payload of one ``Records`` event.
        local: this process's Flight location as endpoints name it (in a cluster, its
            location in the cluster file).
        client_options: how to connect to another location (TLS roots).
    """

    def __init__(self, client: flight.FlightClient, max_event_payload: int, *,
                 local: str = "", client_options: dict[str, Any] | None = None) -> None:
        self.client = client
        self.max_event_payload = max_event_payload
        self.local = local
        self._client_options = client_options or {}
        self._others: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()

    def _reader(self, endpoint: flight.FlightEndpoint, options: Any) -> Any:
        """The stream of an endpoint: from this process when the endpoint names no location
        or names it, else from the first location that answers (a cluster node holding the
        endpoint's data)."""
        locations = [location.uri.decode() for location in endpoint.locations]
        if not locations or self.local in locations:
            return self.client.do_get(endpoint.ticket, options)
        failure: Exception | None = None
        for location in locations:
            with self._lock:
                client = self._others.get(location)
                if client is None:
                    client = self._others[location] = flight.connect(
                        location, **self._client_options)
            try:
                return client.do_get(endpoint.ticket, options)
            except flight.FlightUnavailableError as exc:
                failure = exc
        assert failure is not None
        raise failure

    def plan(self, request: dict[str, Any],
             headers: Sequence[tuple[bytes, bytes]]) -> tuple[flight.FlightInfo, Any]:
        """``GetFlightInfo`` of the request: its errors are answered before the response starts.

        Raises:
            S3HttpError: the server refused the request (the S3 code it named).
        """
        options = flight.FlightCallOptions(headers=list(headers))
        descriptor = flight.FlightDescriptor.for_command(json.dumps(request).encode())
        try:
            return self.client.get_flight_info(descriptor, options), options
        except (flight.FlightError, pa.ArrowException, KeyError, NotImplementedError) as exc:
            # pyarrow raises ArrowInvalid, KeyError and NotImplementedError for the statuses
            # INVALID_ARGUMENT, NOT_FOUND and UNIMPLEMENTED
            raise from_flight(exc) from None

    def events(self, info: flight.FlightInfo, options: Any, *,
               progress: bool = False) -> Iterator[bytes]:
        """The event-stream messages of a planned request, ending with ``End`` or an error
        (``progress``: the request asked for Progress events)."""
        totals = _Totals()
        try:
            for endpoint in info.endpoints:
                yield from self._endpoint(endpoint, options, totals)
                if progress:  # what the endpoint read, now that it is known whole
                    yield eventstream.progress(*totals.with_current({}))
        except Exception as exc:  # noqa: BLE001 - the answer is already 200: errors are events
            error = _stream_error(exc)
            yield eventstream.error(error.code, error.message)
            return
        yield eventstream.stats(*totals.with_current({}))
        yield eventstream.end()

    def _endpoint(self, endpoint: flight.FlightEndpoint, options: Any,
                  totals: _Totals) -> Iterator[bytes]:
        reader = self._reader(endpoint, options)
        finished = False
        try:
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    finished = True
                    return
                data = b"".join(chunk.data.column(0).to_pylist()) if chunk.data.num_rows else b""
                meta = json.loads(chunk.app_metadata.to_pybytes()) if chunk.app_metadata else None
                if data:
                    yield from eventstream.records(data, self.max_event_payload)
                meta = meta or {}
                if "Stats" in meta:
                    totals.add(meta["Stats"])
                    continue
                if not data:  # a keep-alive while the scan finds nothing
                    yield eventstream.cont()
                if "Progress" in meta:
                    yield eventstream.progress(*totals.with_current(meta["Progress"]))
        finally:
            if not finished:  # the HTTP client left, or an error: stop the server's stream
                reader.cancel()


def _stream_error(exc: Exception) -> S3HttpError:
    error = from_flight(exc)
    if error.code == "InternalError" and not isinstance(exc, flight.FlightError):
        incident = uuid.uuid4().hex[:12]
        log.error("internal error incident=%s", incident, exc_info=exc)
        return S3HttpError("InternalError", f"internal error, id={incident}")
    return error
