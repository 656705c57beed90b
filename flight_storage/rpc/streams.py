"""Result streams: compute slots for work, not for waiting, and a watchdog on the server's clock.

A DoGet stream runs its query in a producer thread and hands batches to the gRPC thread through
a small queue. The resources a client can make the server spend are bounded here:

| resource | bound (``StreamLimits``) | when it is reached |
|---|---|---|
| streams computing at once | ``max_running`` compute slots | a producer waits for a slot up to ``queue_wait_s``, then the stream fails with ``SlowDown`` |
| streams open at once | ``max_open`` | DoGet is refused at once with ``SlowDown`` naming the limit |
| memory of a stream | ``queue_bytes`` of batches queued (at least one batch) | the producer waits (holding no slot) until the client reads |
| a client that stops reading | ``idle_timeout_s`` | the stream is cancelled (``RequestTimeout``) and its producer ends |
| run time | ``query_timeout_s`` | the stream fails with ``QueryTimeout`` |
| an object changed under a running stream | checked every second | the stream fails with ``PreconditionFailed`` |
| planning (GetFlightInfo, DoGet, CreatePreparedStatement, GetTables with schemas, ListObjects) | a compute slot and ``query_timeout_s`` (:meth:`StreamPool.run_planning`) | ``SlowDown`` when no slot comes, ``QueryTimeout`` past the deadline |

Planning cannot be interrupted (DataFusion has no cancel API and a Python thread cannot be
stopped), so :meth:`StreamPool.run_planning` runs it in a thread of its own: the RPC answers the
client at the deadline or on cancellation, while the planning thread keeps its compute slot
until it really ends, since it still uses a core (the slot count stays the truth about the
machine).

A producer holds a compute slot only while it computes the next batch (``next()`` of the query:
DataFusion or the reference reader doing the work) and gives it back before it queues the batch.
So a stream whose client is not reading it yet (ADBC opens every endpoint at once and reads them
in order) waits without a slot, and the endpoint the client reads always gets one: no reading
order can deadlock the server.

gRPC stops pulling a stream whose client stops reading, so nothing that waits for the next pull
can enforce a time limit. :class:`StreamPool` runs a watchdog thread that checks every open
stream's deadline and idle time on the server's own clock, and on shutdown ends every stream.
"""

from __future__ import annotations

import collections
import io
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, TypeAlias, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_storage import telemetry
from flight_storage.cores import usable_cores
from flight_storage.errors import (
    InvalidRequestError,
    ResourceLimitError,
    StoppedError,
    StorageError,
)
from flight_storage.execution.session import stopped_by
from flight_storage.rpc.boundary import client_error
from flight_storage.storage.catalog import ObjectInfo
from flight_storage.storage.sources import DataFusionLocation, StoredSource

log = logging.getLogger(__name__)

POLL_S = 0.1
"""How often a waiting thread looks at its stream's stop switch."""
_SOURCE_CHECK_S = 1.0
"""How often the watchdog checks that a stream's objects are still the version planned."""

Item: TypeAlias = pa.RecordBatch | tuple[pa.RecordBatch, bytes]
T = TypeVar("T")


def default_running() -> int:
    """Streams computing at once by default: twice the usable cores, at least 4 (a stream
    holds its slot only while it computes a batch, so more slots than cores keep every core
    busy while some streams wait on their clients)."""
    return max(4, 2 * usable_cores())


@dataclass(frozen=True)
class StreamLimits:
    """Bounds on result streams (see the module's table). Each default here is the
    server's (``ServerConfig`` and ``flight-select serve`` read them from here)."""

    max_running: int = field(default_factory=default_running)
    max_open: int = 256
    queue_bytes: int = 8 << 20
    queue_wait_s: float = 120.0
    query_timeout_s: float = 600.0
    idle_timeout_s: float = 300.0
    keepalive_s: float = 5.0


_Stopped = StoppedError


class StoppableFile(io.RawIOBase):
    """An object's stream that counts the bytes read and fails once its query stops."""

    def __init__(self, raw: BinaryIO, stop: threading.Event, counter: list[int]) -> None:
        self._file = raw
        self._stop = stop
        self._counter = counter

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._stop.is_set():
            raise _Stopped("query stopped")
        n = self._file.readinto(buffer)  # type: ignore[attr-defined]
        self._counter[0] += n or 0
        return n or 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()


class StreamInput(Protocol):
    """What a :class:`QueryStream` needs of its input: the switch that stops its reads, and the
    bytes read so far (the log line's ``scanned``)."""

    @property
    def stop(self) -> threading.Event: ...

    @property
    def read(self) -> list[int]: ...


@dataclass
class ReadCounter:
    """The :class:`StreamInput` of a stream whose reader is not an object source (an Iceberg
    table's data files, read by DataFusion)."""

    stop: threading.Event = field(default_factory=threading.Event)
    read: list[int] = field(default_factory=lambda: [0])


@dataclass
class StoppableSource:
    """A stored object whose streams stop with their query (see :class:`StoppableFile`)."""

    stored: StoredSource
    stop: threading.Event = field(default_factory=threading.Event)
    read: list[int] = field(default_factory=lambda: [0])
    processed: list[int] = field(default_factory=lambda: [0])
    """Decompressed bytes read from a compressed object (S3's BytesProcessed)."""
    probes: list[Callable[[], int]] = field(default_factory=list)
    """How far DataFusion's own reader has read (``execution/scan_progress.py``)."""

    def watch_scan(self, probe: Callable[[], int]) -> None:
        """Count what ``probe`` says DataFusion's reader has read (it reads the bytes itself,
        so :attr:`read` does not see them)."""
        self.probes.append(probe)

    def scanned(self) -> int:
        """Bytes read so far, by this process's readers or DataFusion's (a lower bound)."""
        return max(self.read[0], sum(probe() for probe in self.probes))

    @property
    def name(self) -> str:
        return self.stored.name

    @property
    def size(self) -> int:
        return self.stored.size

    @property
    def version_key(self) -> Hashable:
        return self.stored.version_key

    @property
    def datafusion(self) -> DataFusionLocation:
        return self.stored.datafusion

    def open(self) -> Any:
        return io.BufferedReader(StoppableFile(self.stored.open(), self.stop, self.read), 1 << 20)

    def open_random_access(self) -> pa.NativeFile:
        """Positioned reads for Parquet (stopped by dropping the DataFusion stream instead)."""
        return self.stored.open_random_access()


def object_source(obj: ObjectInfo, stop: threading.Event | None = None) -> StoppableSource:
    """The stoppable source of one stored object (stopped by ``stop`` when given)."""
    return StoppableSource(StoredSource(obj), stop or threading.Event())


def object_sources(objects: Sequence[ObjectInfo], stop: threading.Event | None = None
                   ) -> list[StoppableSource]:
    """Sources of a table's objects sharing one stop switch (``stop`` when given) and one
    read counter."""
    first = object_source(objects[0], stop)
    return [first] + [StoppableSource(StoredSource(o), first.stop, first.read,
                                      probes=first.probes)
                      for o in objects[1:]]


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch with no rows and exactly ``schema`` (keep-alives, Stats messages)."""
    return pa.RecordBatch.from_arrays(
        [pa.array([], type=f.type) for f in schema], schema=schema
    )


class Cancellable(Protocol):
    """Whether the client cancelled the call (a Flight call's context; the S3 door closes)."""

    def is_cancelled(self) -> bool: ...


class StreamPool:
    """The server's open streams, its compute slots and the watchdog that times them.

    Args:
        limits: the bounds.
        is_cancelled: whether the endpoint with this stop key was cancelled (CancelFlightInfo).
    """

    def __init__(self, limits: StreamLimits,
                 is_cancelled: Callable[[bytes], bool] = lambda _key: False) -> None:
        self.limits = limits
        self.is_cancelled = is_cancelled
        self.aborting = threading.Event()
        self._slots = threading.BoundedSemaphore(limits.max_running)
        self._lock = threading.Lock()
        self._open: set[QueryStream] = set()
        self._computing = 0
        self._waiting = 0
        self._watchdog: threading.Thread | None = None
        self._closed = threading.Event()

    # -- open streams
    def register(self, stream: QueryStream) -> None:
        """Count ``stream`` as open, or refuse it when ``max_open`` streams are."""
        if self.aborting.is_set():
            raise ResourceLimitError("server is shutting down; retry on another replica",
                                     code="ServiceUnavailable")
        with self._lock:
            if len(self._open) >= self.limits.max_open:
                raise ResourceLimitError(
                    f"{len(self._open)} result streams are open, the limit "
                    f"(--max-open-streams) is {self.limits.max_open}; read or close some, "
                    "or retry later",
                    code="SlowDown",
                )
            self._open.add(stream)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="stream-watchdog",
                                                  daemon=True)
                self._watchdog.start()

    def unregister(self, stream: QueryStream) -> None:
        with self._lock:
            self._open.discard(stream)

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._open)

    @property
    def computing(self) -> int:
        """Streams holding a compute slot now."""
        with self._lock:
            return self._computing

    @property
    def waiting(self) -> int:
        """Streams and planning calls waiting for a compute slot now."""
        with self._lock:
            return self._waiting

    # -- compute slots
    def acquire(self, stop: threading.Event) -> bool:
        """Wait for a compute slot up to ``queue_wait_s``; False when none came or ``stop``."""
        if stop.is_set():
            return False
        if self._slots.acquire(blocking=False):
            with self._lock:
                self._computing += 1
            return True
        with self._lock:
            self._waiting += 1
        try:
            deadline = time.monotonic() + self.limits.queue_wait_s
            while not stop.is_set():
                wait = min(POLL_S, deadline - time.monotonic())
                if wait <= 0:
                    return False
                if self._slots.acquire(timeout=wait):
                    with self._lock:
                        self._computing += 1
                    return True
            return False
        finally:
            with self._lock:
                self._waiting -= 1

    def release(self) -> None:
        with self._lock:
            self._computing -= 1
        self._slots.release()

    # -- planning
    def run_planning(self, work: Callable[[threading.Event], T],
                     is_cancelled: Callable[[], bool], what: str = "planning") -> T:
        """Run ``work(stop)`` (planning, schema discovery, listing) under the streams' limits.

        It takes a compute slot (``SlowDown`` after ``queue_wait_s``) and runs in its own
        thread; the caller waits up to ``query_timeout_s`` on the server's clock and gives up
        when the client cancels or the server shuts down. Then it sets ``stop``: work that reads
        objects reads them through sources sharing that switch (:func:`object_sources`), whose
        reads and surveys end at the next chunk, so the thread ends and gives its slot back
        (work that cannot stop keeps its slot until it returns, see the module docstring).

        Raises:
            ResourceLimitError: ``SlowDown``, ``QueryTimeout`` or ``ServiceUnavailable``.
            flight.FlightCancelledError: the client cancelled.
            Exception: whatever ``work`` raised.
        """
        waiting = threading.Event()
        if not self.acquire(waiting):
            raise ResourceLimitError(
                f"every compute slot (--max-concurrent-queries {self.limits.max_running}) "
                f"stayed busy for {self.limits.queue_wait_s:g} s; retry later", code="SlowDown")
        outcome: list[Any] = []
        done = threading.Event()
        stop = threading.Event()

        def run() -> None:
            try:
                outcome.append((True, work(stop)))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                outcome.append((False, exc))
            finally:
                self.release()
                done.set()

        threading.Thread(target=run, name=what, daemon=True).start()
        deadline = time.monotonic() + self.limits.query_timeout_s
        while not done.wait(POLL_S):
            if is_cancelled():
                stop.set()
                raise flight.FlightCancelledError(f"{what} cancelled by the client")
            if self.aborting.is_set():
                stop.set()
                raise ResourceLimitError("server is shutting down; retry on another replica",
                                         code="ServiceUnavailable")
            if time.monotonic() > deadline:
                stop.set()
                log.warning("%s passed the query timeout; told to stop, it keeps its slot "
                            "until it does", what)
                raise ResourceLimitError(
                    f"{what} took longer than {self.limits.query_timeout_s:g} s "
                    "(--query-timeout)", code="QueryTimeout")
        ok, value = outcome[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    # -- the server's clock
    def _watch(self) -> None:
        while not self._closed.wait(POLL_S * 2):
            now = time.monotonic()
            with self._lock:
                streams = list(self._open)
            for stream in streams:
                stream.check_clock(now)

    def abort_all(self) -> int:
        """End every open stream now (shutdown after the grace); returns how many."""
        self.aborting.set()
        with self._lock:
            streams = list(self._open)
        for stream in streams:
            stream.fail(ResourceLimitError("server is shutting down; retry on another replica",
                                           code="ServiceUnavailable"), "shutdown")
        return len(streams)

    def close(self) -> None:
        """Stop the watchdog (after shutdown)."""
        self._closed.set()


class QueryStream:
    """Runs a query's batches in a producer thread and hands them to the gRPC thread.

    The consumer (``__next__``, called by pyarrow's ``GeneratorStream``) waits for batches in
    short slices; between them it stops the query when the client cancelled or went away, the
    statement's FlightInfo was cancelled or the stream failed (watchdog, shutdown); and it
    yields an empty batch when nothing was sent for ``keepalive_s``. A failure reaches the
    consumer as ``to_client`` makes it: a DoGet's Flight error, or the S3 door's StorageError.
    """

    def __init__(
        self,
        *,
        produce: Callable[[], Iterator[pa.RecordBatch]],
        schema: pa.Schema,
        source: StreamInput,
        context: Cancellable,
        pool: StreamPool,
        fields: dict[str, Any],
        on_batch: Callable[[pa.RecordBatch], Item] | None = None,
        on_end: Callable[[], Item] | None = None,
        on_idle: Callable[[], Item] | None = None,
        stop_key: bytes = b"",
        check_source: Callable[[], StorageError | None] | None = None,
        to_client: Callable[[BaseException], BaseException] = client_error,
    ) -> None:
        self._produce = produce
        self._schema = schema
        self._source = source
        self._context = context
        self._pool = pool
        self._limits = pool.limits
        self._fields = fields
        self._on_batch = on_batch or (lambda b: b)
        self._on_end = on_end
        self._on_idle = on_idle or (lambda: empty_batch(schema))
        self._stop_key = stop_key
        self._check_source = check_source
        self._to_client = to_client
        self._next_source_check = 0.0
        self._holding_slot = False
        self._queue = _BatchQueue(self._limits.queue_bytes)
        self._thread: threading.Thread | None = None
        self._done = False
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._last_sent = self._started
        self._last_pull = self._started
        self._deadline = self._started + self._limits.query_timeout_s
        fields.update(rows=0, bytes=0)
        pool.register(self)

    @property
    def stop(self) -> threading.Event:
        return self._source.stop

    # -- producer (its own thread)
    def _run(self) -> None:
        with stopped_by(self.stop):
            self._produce_batches()

    def _produce_batches(self) -> None:
        stop = self.stop
        batches = self._produce()
        try:
            while True:
                if not self._pool.acquire(stop):
                    if not stop.is_set():
                        self.fail(ResourceLimitError(
                            f"every compute slot (--max-concurrent-queries "
                            f"{self._limits.max_running}) stayed busy for "
                            f"{self._limits.queue_wait_s:g} s; retry later",
                            code="SlowDown",
                        ), "busy")
                    return
                with self._lock:
                    self._holding_slot = True
                try:
                    batch = next(batches)
                except StopIteration:
                    self._put(("end", None))
                    return
                finally:
                    self._give_back_slot()
                if not self._put(("batch", batch)):
                    return
        except BaseException as exc:  # handed to the consumer, which converts it
            if not stop.is_set():
                self._put(("error", exc))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # a generator: release its reader (and DataFusion's stream) now

    def _give_back_slot(self) -> None:
        """Release the compute slot once, whoever gets here first: the producer after its
        batch, or :meth:`fail` for a producer stuck inside the engine."""
        with self._lock:
            holding, self._holding_slot = self._holding_slot, False
        if holding:
            self._pool.release()

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self.stop.is_set():
            if self._queue.put(item, timeout=POLL_S):
                return True
        return False

    # -- the watchdog (server's clock)
    def check_clock(self, now: float) -> None:
        """Fail the stream past its deadline, or when its client stopped reading."""
        if self._done:
            return
        if self._check_source is not None and now >= self._next_source_check:
            self._next_source_check = now + _SOURCE_CHECK_S
            changed = self._check_source()
            if changed is not None:
                self.fail(changed, "changed")
                return
        if now > self._deadline:
            self.fail(ResourceLimitError(
                f"query ran longer than {self._limits.query_timeout_s:g} s (--query-timeout)",
                code="QueryTimeout"), "timeout")
        elif (self._queue.waiting_for_client
              and now - self._last_pull > self._limits.idle_timeout_s):
            self.fail(ResourceLimitError(
                f"the client read nothing for {self._limits.idle_timeout_s:g} s "
                "(--idle-timeout); the stream was cancelled", code="RequestTimeout"), "idle")

    def fail(self, error: StorageError, status: str) -> None:
        """End the stream with ``error`` from outside the consumer (watchdog, shutdown)."""
        with self._lock:
            if self._failure is not None or self._done:
                return
            self._failure = error
        self._fields.setdefault("status", status)
        self.stop.set()
        # a producer that never comes back from the engine must not keep its slot
        self._give_back_slot()
        self._queue.clear()  # the batches' memory goes now, not when gRPC pulls again
        self._finish(None)

    # -- consumer (gRPC thread)
    def __iter__(self) -> QueryStream:
        return self

    def __next__(self) -> Item:
        self._last_pull = time.monotonic()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise self._to_client(failure)
        if self._done:
            raise StopIteration
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="query", daemon=True)
            self._thread.start()
        try:
            return self._next()
        except BaseException:
            self._finish(None)
            raise

    def _next(self) -> Item:
        while True:
            self._check_stop()
            got = self._queue.get(timeout=POLL_S)
            if got is None:
                if time.monotonic() - self._last_sent >= self._limits.keepalive_s:
                    self._last_sent = time.monotonic()
                    self._fields["keepalives"] = self._fields.get("keepalives", 0) + 1
                    return self._on_idle()
                continue
            kind, value = got
            if kind == "batch":
                if not self._fields["rows"] and not self._fields["bytes"]:
                    telemetry.FIRST_BATCH_SECONDS.observe(time.monotonic() - self._started)
                self._fields["rows"] += value.num_rows
                self._fields["bytes"] += value.nbytes
                telemetry.SENT_ROWS.inc(value.num_rows)
                telemetry.SENT_BYTES.inc(value.nbytes)
                self._last_sent = time.monotonic()
                return self._on_batch(value)
            if kind == "error":
                self._fields["status"] = getattr(value, "code", "error")
                raise value
            self._finish("ok")
            if self._on_end is not None:
                return self._on_end()
            raise StopIteration

    def _check_stop(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise self._to_client(failure)
        if self._context.is_cancelled():
            self._finish("cancelled")
            raise flight.FlightCancelledError("query cancelled by the client")
        if self._stop_key and self._pool.is_cancelled(self._stop_key):
            self._finish("cancelled")
            raise self._to_client(
                InvalidRequestError("the query was cancelled (CancelFlightInfo)",
                                    code="QueryCancelled")
            )
        if self._pool.aborting.is_set():
            self._finish("shutdown")
            raise self._to_client(
                ResourceLimitError("server is shutting down; retry on another replica",
                                   code="ServiceUnavailable")
            )
        if time.monotonic() > self._deadline:
            self._finish("timeout")
            raise self._to_client(
                ResourceLimitError(
                    f"query ran longer than {self._limits.query_timeout_s:g} s "
                    "(--query-timeout)",
                    code="QueryTimeout",
                )
            )

    def _finish(self, status: str | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self.stop.set()
        if status is not None:
            self._fields.setdefault("status", status)
        self._fields["scanned"] = self._source.read[0]
        self._pool.unregister(self)
        telemetry.SCANNED_BYTES.inc(self._source.read[0])
        telemetry.STREAM_SECONDS.labels(
            telemetry.bounded_code(self._fields.get("status"), ok="unknown")
        ).observe(time.monotonic() - self._started)

    def close(self) -> None:
        """The client went away before the stream was drained (``guarded`` closes it). No
        ``__del__`` calls this: finishing takes the pool's and the metrics' locks (not
        reentrant), and a finalizer run by the collector inside one on the same thread
        deadlocked it; the pool holds a registered stream until it finishes anyway."""
        if not self._done:
            self._fields.setdefault("status", "disconnected")
            self._finish(None)


class _BatchQueue:
    """The hand-off between a stream's producer and its gRPC thread, bounded in bytes.

    Batches wait here up to ``budget`` bytes in all; one batch always fits, however large, so a
    wide batch cannot block its stream. ``waiting_for_client`` is true while something is
    queued or the producer waits for room: the client, not the engine, is what the stream
    waits for (the watchdog's idle test). A
    budget of a few batches lets the engine compute ahead of gRPC; with two batches it kept
    waiting for sends (a full scan of 154 MB took a sixth longer: docs/server.md).
    """

    def __init__(self, budget: int) -> None:
        self._budget = max(1, budget)
        self._items: collections.deque[tuple[tuple[str, Any], int]] = collections.deque()
        self._bytes = 0
        self._waiting = False
        self._changed = threading.Condition()

    @property
    def producer_waiting(self) -> bool:
        """The producer waits for the consumer to make room."""
        return self._waiting

    @property
    def waiting_for_client(self) -> bool:
        """Batches (or the end) wait for the consumer, or the producer waits for room."""
        return self._waiting or bool(self._items)

    def put(self, item: tuple[str, Any], timeout: float) -> bool:
        """Queue ``item``; False when no room came within ``timeout`` seconds."""
        size = item[1].nbytes if item[0] == "batch" else 0
        with self._changed:
            if self._items and self._bytes + size > self._budget:
                # stays set between the producer's retries, until the item goes in
                self._waiting = True
                if not self._changed.wait_for(
                        lambda: not self._items or self._bytes + size <= self._budget, timeout):
                    return False
            self._waiting = False
            self._items.append((item, size))
            self._bytes += size
            self._changed.notify_all()
            return True

    def get(self, timeout: float) -> tuple[str, Any] | None:
        """The oldest item, or None when none came within ``timeout`` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._items), timeout):
                return None
            item, size = self._items.popleft()
            self._bytes -= size
            self._changed.notify_all()
            return item

    def clear(self) -> None:
        with self._changed:
            self._items.clear()
            self._bytes = 0
            self._waiting = False
            self._changed.notify_all()
