"""The endpoints cancelled in this process (CancelFlightInfo). Tickets are stateless, so a
cancel reaches only the server it is sent to: its running streams of those tickets stop, and
later DoGets of them are refused here until the tickets expire (then they are forgotten)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import protocol
from flight_storage.errors import AccessDeniedError, InvalidRequestError
from flight_storage.protocol import Secret, pb
from flight_storage.rpc.endpoints import ticket_key


class Cancellations:
    """The cancelled endpoints' keys (``ticket_key``), each until its ticket expires."""

    def __init__(self, secret: Secret, ticket_max_age_s: float) -> None:
        self._secret = secret
        self._max_age_s = ticket_max_age_s
        self._lock = threading.Lock()
        self._until: dict[bytes, float] = {}

    def is_cancelled(self, key: bytes) -> bool:
        """True when the endpoint whose ticket hashes to ``key`` was cancelled."""
        with self._lock:
            return key in self._until

    def cancel(self, user: str | None, info_bytes: bytes) -> pb.CancelStatus:
        """Mark every endpoint of a serialized FlightInfo cancelled (``user``'s own only)."""
        try:
            info = flight.FlightInfo.deserialize(info_bytes)
        except (pa.ArrowInvalid, TypeError, ValueError) as exc:
            raise InvalidRequestError(
                f"CancelFlightInfo carries no valid FlightInfo ({exc})") from None
        keys: dict[bytes, float] = {}
        for endpoint in info.endpoints:
            _, message = protocol.unpack_any(endpoint.ticket.ticket)
            if not isinstance(message, pb.TicketStatementQuery):
                continue
            handle = message.statement_handle
            ticket = protocol.decode_ticket(handle, self._secret)
            if ticket.user != user:
                raise AccessDeniedError("cannot cancel another user's query")
            keys[ticket_key(handle)] = ticket.issued_at + self._max_age_s
        if not keys:
            return pb.CANCEL_STATUS_NOT_CANCELLABLE
        now = time.time()
        with self._lock:
            for stale in [k for k, until in self._until.items() if until < now]:
                del self._until[stale]
            self._until.update(keys)
        return pb.CANCEL_STATUS_CANCELLED
