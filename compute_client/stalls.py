"""Reading a Flight stream with a bound on the wait for each next message.

A storage node that hangs mid-stream (alive, its socket open, its process stopped or
deadlocked) leaves ``FlightStreamReader.read_chunk`` blocked for good: the kernel still
acknowledges TCP, gRPC keepalive pings from a client are refused by servers as abuse
(``too_many_pings``), and a call deadline would bound the whole stream, however healthy. Our
server sends an empty batch whenever it has sent nothing for ``--keepalive`` seconds (5 by
default), so a live node is never silent for long, and a silence far longer than that means
the node is gone. pyarrow has no per-message timeout, hence this hand-written watch: a thread
reads the stream into a short queue and the caller waits on the queue with a timeout, then
cancels the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Literal

import pyarrow as pa
import pyarrow.flight as flight

from compute_client.errors import StreamStalledError

_PREFETCH = 4
"""Messages read ahead of the caller (bounds the memory the watch adds)."""

_PUT_SLICE_S = 0.1
"""How often a blocked reader thread checks whether the caller went away."""

_Message = tuple[Literal["batch"], pa.RecordBatch | None] | tuple[Literal["end"], None] | tuple[
    Literal["error"], BaseException]


def batches_within(reader: flight.FlightStreamReader,
                   stall_timeout_s: float | None) -> Iterator[pa.RecordBatch]:
    """The stream's batches (keepalive batches included); None: wait as long as it takes.

    Raises:
        StreamStalledError: no message came for ``stall_timeout_s``; the call is cancelled.
    """
    if stall_timeout_s is None:
        for chunk in reader:
            if chunk.data is not None:
                yield chunk.data
        return
    messages: queue.Queue[_Message] = queue.Queue(maxsize=_PREFETCH)
    gone = threading.Event()
    thread = threading.Thread(target=_pump, args=(reader, messages, gone), daemon=True,
                              name="flight-stream-watch")
    thread.start()
    try:
        while True:
            try:
                message = messages.get(timeout=stall_timeout_s)
            except queue.Empty:
                raise StreamStalledError(
                    f"no message for {stall_timeout_s:g} s (the node stopped answering)"
                ) from None
            if message[0] == "end":
                return
            if message[0] == "error":
                raise message[1]
            if message[1] is not None:
                yield message[1]
    finally:
        gone.set()
        reader.cancel()


def _pump(reader: flight.FlightStreamReader, messages: queue.Queue[_Message],
          gone: threading.Event) -> None:
    """Read every message into ``messages`` until the stream ends or the caller goes away."""

    def put(message: _Message) -> bool:
        while not gone.is_set():
            try:
                messages.put(message, timeout=_PUT_SLICE_S)
                return True
            except queue.Full:
                continue
        return False

    try:
        for chunk in reader:
            if not put(("batch", chunk.data)):
                return
        put(("end", None))
    except BaseException as exc:  # handed to the caller's thread, which raises it
        put(("error", exc))
