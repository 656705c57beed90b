"""A partition whose rows follow its input, pulled by pyarrow's C++ server in the gRPC thread.

:class:`QueryStream` computes in a producer thread and hands each batch to the gRPC thread
through a queue: two threads meet under the GIL for every batch, and pyarrow's
``GeneratorStream`` builds each batch's IPC payload holding it. A stream whose every batch
costs a bounded slice of its input (no filter, aggregate, LIMIT or whole-input clause: the
batches come at the pace the reader reads) needs neither the thread nor the keep-alives
that cover a long wait for a batch. :class:`PulledStream` hands pyarrow a
``RecordBatchReader``; the C++ server pulls it in the gRPC thread, which computes each batch
with DataFusion's plain ``next()`` (the GIL released while the engine works), then encodes and
sends it without Python. A stop is seen between batches, each a bounded slice of the input
(milliseconds), so it ends the engine's work well within a second without
:func:`~flight_storage.execution.session.stopped_by`'s per-batch event loop, which held the GIL
about 60 µs a batch.

Measured on 2 loaded cores, ``SELECT *`` of a 120 MB CSV (6M rows, one endpoint), server
per query: GIL held 0.22 s → 0.07 s (py-spy ``--gil``), CPU 0.70 → 0.51 s, wall 0.90 → 0.66 s
(``benchmarks/results/FINDINGS.md``).

What a :class:`QueryStream` keeps, this keeps, on the same rules:

| what | how |
|---|---|
| compute slot | taken for each batch's computation and given back before the batch is sent (a stream waiting for its client holds none) |
| query timeout, shutdown, objects changed | the watchdog fails the stream (:meth:`QueryStream.fail`); the pull after the batch being computed ends the reader and the error is sent |
| client cancelled, CancelFlightInfo | checked before a batch is computed, at most every 0.1 s (a few calls not worth making per batch) |
| a client that stops reading | the watchdog's idle test, from the time the last batch was handed to gRPC |
| rows, bytes sent; the log line | counted as the reader hands batches over, added to the fields and metrics with each check and at the end |

Errors never leave the reader (pyarrow would send a Python traceback for an exception raised
inside a reader, and lose its ``extra_info``): the reader ends, and the generator around it
(the ``GeneratorStream`` that yielded the reader) raises the error as a Flight error. A reader
that ended for any reason but the end of its batches is never taken for a complete answer.

Why not DataFusion's own C stream (``DataFrame.__arrow_c_stream__``, read by pyarrow without
Python): in datafusion-python 55 it drains a plan's partitions one after another (one core
for a plan of many: why a 16-core experiment found it slower than a generator), takes the GIL
for every batch all the same (its ``wait_for_future`` runs a Python statement to look for
signals), exists for a whole DataFrame only (``ctx.execute(plan, i)``, an endpoint's partition,
is no C stream), and nothing of ours would run between its batches: no stop, timeout or
CancelFlightInfo could end it, and its errors would reach the client as DataFusion's text.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from flight_storage import telemetry
from flight_storage.errors import ResourceLimitError
from flight_storage.rpc.boundary import client_error
from flight_storage.rpc.streams import POLL_S, Item, QueryStream

_END = object()
"""The reader's outcome when its batches ended (else the exception that ended it)."""


class _Tally:
    """Rows and bytes handed to gRPC since the last flush into the log line's fields and
    the metrics (flushed with each check, not per batch)."""

    def __init__(self) -> None:
        self.first = True
        self.rows = 0
        self.bytes = 0

    def flush(self, fields: dict[str, Any]) -> None:
        fields["rows"] += self.rows
        fields["bytes"] += self.bytes
        telemetry.SENT_ROWS.inc(self.rows)
        telemetry.SENT_BYTES.inc(self.bytes)
        self.rows = self.bytes = 0


class PulledStream(QueryStream):
    """A :class:`QueryStream` served as one ``RecordBatchReader`` pulled in the gRPC thread
    (see the module docstring); iterate it for the items of pyarrow's ``GeneratorStream``."""

    _handed_at: float | None = None
    """When the last batch went to gRPC while no pull has come since (the idle test)."""

    def __iter__(self) -> Iterator[Item]:  # type: ignore[override]
        return self._items()

    def _items(self) -> Iterator[Item]:
        outcome: list[object] = []
        try:
            self._check_stop()
            yield pa.RecordBatchReader.from_batches(self._schema, self._pulled(outcome))
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise client_error(failure)
            if not outcome:
                raise RuntimeError("a pulled stream ended without its outcome")
            if outcome[0] is not _END:
                raise outcome[0]  # type: ignore[misc]
            self._finish("ok")
        except GeneratorExit:
            self.close()  # the client went away: pyarrow dropped the stream
            raise
        except BaseException as exc:
            self._fields.setdefault("status", getattr(exc, "code", "error"))
            self._finish(None)
            raise

    def _pulled(self, outcome: list[object]) -> Iterator[pa.RecordBatch]:
        """The batches, each computed when pyarrow asks for it; the reason it ended goes to
        ``outcome`` (``_END``, or the exception, which must not reach pyarrow)."""
        batches = self._produce()
        tally = _Tally()
        checked = 0.0
        try:
            while True:
                self._handed_at = None
                now = time.monotonic()
                if now >= checked or self._failure is not None:
                    # the client's cancel, CancelFlightInfo, shutdown, the deadline: a few
                    # calls, not worth making per batch (the watchdog's failures stop the
                    # engine's wait at once through the stop switch)
                    self._check_stop()
                    tally.flush(self._fields)
                    checked = now + POLL_S
                if not self._pool.acquire(self.stop):
                    raise client_error(self._failure or ResourceLimitError(
                        f"every compute slot (--max-concurrent-queries "
                        f"{self._limits.max_running}) stayed busy for "
                        f"{self._limits.queue_wait_s:g} s; retry later", code="SlowDown"))
                with self._lock:
                    self._holding_slot = True
                try:
                    batch = next(batches)
                except StopIteration:
                    outcome.append(_END)
                    return
                finally:
                    self._give_back_slot()
                if tally.first:
                    telemetry.FIRST_BATCH_SECONDS.observe(time.monotonic() - self._started)
                    tally.first = False
                tally.rows += batch.num_rows
                tally.bytes += batch.nbytes
                self._handed_at = time.monotonic()
                yield batch
        except GeneratorExit:
            raise
        except BaseException as exc:  # noqa: BLE001 - raised by the generator around the reader
            outcome.append(exc)
        finally:
            tally.flush(self._fields)
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # DataFusion's stream is dropped now, not when the reader is

    def check_clock(self, now: float) -> None:
        """The watchdog's tests (:meth:`QueryStream.check_clock`), the idle one timed from the
        last batch handed to gRPC (this stream has no queue)."""
        super().check_clock(now)
        handed = self._handed_at
        if (not self._done and handed is not None
                and now - handed > self._limits.idle_timeout_s):
            self.fail(ResourceLimitError(
                f"the client read nothing for {self._limits.idle_timeout_s:g} s "
                "(--idle-timeout); the stream was cancelled", code="RequestTimeout"), "idle")
