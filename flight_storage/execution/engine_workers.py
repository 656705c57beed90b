"""Engine work in processes the server can stop: a bounded pool of warm worker processes.

DataFusion stops a query's work only between the steps of its operators (``session.py``:
a cancelled ``__anext__``); a step that does not yield runs on to its end. Measured on 2
loaded cores, a GROUP BY over 20M Parquet rows (20M groups) went on for 0.3-1.75 s on one tokio
worker after its client went away, and the memory it freed stayed resident (mimalloc: 837 MB
against 170 MB idle). So an aggregate, whose first batch is the whole computation, runs in a
worker process: the server plans it as always and hands the worker what DataFusion's part
needs (the table as DataFusion reads it, the SQL, the session's settings: the worker runs the
same code the server would), then reads its batches back as Arrow IPC; when the query stops (cancel, a client gone, the query timeout) the server
kills the worker (SIGKILL: its CPU and memory end at once) and starts another.

| what | how |
|---|---|
| processes | ``EngineConfig.engine_workers`` (``--engine-workers``), started with the server from a ``forkserver`` that has imported DataFusion but started no tokio thread, so a replacement is a fork of a clean process (milliseconds), never of the server |
| which work | an aggregate DataFusion reads from a local file or a store's object (``SelectEngine``'s rule, ``engine.py``; the store crosses as values, ``DataFusionLocation.for_another_process``); its result is small, so the IPC hop costs little; everything else stays in the server |
| all busy | a query waits for a worker while it may wait for a compute slot (``wait_s``), then fails with ``SlowDown`` naming ``--engine-workers`` |
| errors | DataFusion's error text crosses as text (the server maps it as it maps its own); our ``StorageError`` crosses as its class name, code and message; no traceback |
| a worker that dies | the query fails with ``InternalError`` and the worker is replaced |
| memory | a worker that grew by ``RECYCLE_GROWTH_BYTES`` is replaced after its job (its allocator keeps freed pages) |
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import pickle
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flight_storage import errors
from flight_storage.errors import ResourceLimitError, StoppedError, StorageError
from flight_storage.execution.plan_types import EngineConfig
from flight_storage.execution.scan_progress import finished_bytes
from flight_storage.execution.session import READ_ONLY, new_session
from select_dialect import Translation

log = logging.getLogger(__name__)

STOP_POLL_S = 0.1
"""How often the server, waiting for a worker's next message, looks at the stop switch."""

PROGRESS_S = 0.05
"""How often a worker looks how far DataFusion's scan has read, and reports it when it moved
(S3 Select's Progress: a byte range's bytes count once it is read)."""

RECYCLE_GROWTH_BYTES = 128 << 20
"""A worker whose resident memory grew past this over its first job's start is replaced after
its job rather than kept: DataFusion's allocator keeps a large aggregate's freed pages (a
worker went from 86 to 333 MB for a GROUP BY of 20M groups), and a fresh fork gives them
back."""

_BATCH, _END, _ENGINE_ERROR, _STORAGE_ERROR, _SCANNED = b"B", b"E", b"X", b"S", b"P"


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs to run a statement as the server would: the table as DataFusion
    reads it (``NativeCsvTable`` or ``NativeParquetTable`` of a local file or a store's object, registered as
    ``table``), the DataFusion SQL, and the arguments of the session it runs in
    (``session.new_session``)."""

    native: Any
    table: str
    sql: str
    translation: Translation
    cores: int
    split_min_bytes: int
    width: int


class _Worker:
    def __init__(self, context: Any, config: EngineConfig) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, config),
                                       name="engine-worker", daemon=True)
        self.process.start()
        child.close()
        self.baseline = 0
        """Resident bytes when it took its first job (what it may grow from)."""

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.connection.close()


class EngineWorkers:
    """The pool. ``run`` takes an idle worker for one job and gives it back after a clean end,
    or kills and replaces it when the job stops early (see the module docstring).

    Args:
        count: worker processes (at least 1).
        config: the engine settings the workers make their sessions with.
        wait_s: how long a job waits for an idle worker before ``SlowDown``.
    """

    def __init__(self, count: int, config: EngineConfig, wait_s: float) -> None:
        self._count = max(1, count)
        self._config = config
        self._wait_s = wait_s
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([__name__])
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._live: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._start, args=(self._count,), name="engine-workers",
                         daemon=True).start()

    def _start(self, count: int) -> None:
        for _ in range(count):
            if self._closed:
                return
            try:
                worker = _Worker(self._context, self._config)
            except Exception:
                # aggregates then wait wait_s and answer SlowDown: say why here
                log.exception("an engine worker did not start")
                return
            with self._lock:
                self._live.add(worker)
            self._idle.put(worker)

    @property
    def pids(self) -> list[int]:
        """The worker processes started and not yet killed (tests and operators read it)."""
        with self._lock:
            return [w.process.pid for w in self._live]

    def close(self) -> None:
        """Stop every idle worker (busy ones end with their jobs)."""
        self._closed = True
        while True:
            try:
                self._replace(self._idle.get_nowait())
            except queue.Empty:
                return

    def run(self, job: WorkerJob, stop: threading.Event | None,
            scanned: list[int] | None = None) -> Iterator[pa.RecordBatch]:
        """The job's batches from a worker; raises the worker's error, :class:`StoppedError`
        when ``stop`` is set (the worker is killed then), ``SlowDown`` when no worker is
        free within ``wait_s``. ``scanned[0]`` follows the bytes DataFusion's scan has read
        (``scan_progress.finished_bytes`` in the worker)."""
        worker = self._take(stop)
        clean = False
        try:
            worker.connection.send(job)
            while True:
                kind, body = self._receive(worker, stop)
                if kind == _BATCH:
                    yield pa.ipc.open_stream(body).read_next_batch()
                    continue
                if kind == _SCANNED:
                    if scanned is not None:
                        scanned[0] = int(body)
                    continue
                clean = True
                if kind == _END:
                    return
                raise _error(kind, body)
        finally:
            if (clean and not self._closed
                    and _resident_bytes(worker) <= worker.baseline + RECYCLE_GROWTH_BYTES):
                self._idle.put(worker)
            else:
                self._replace(worker)

    def _take(self, stop: threading.Event | None) -> _Worker:
        deadline = time.monotonic() + self._wait_s
        while stop is None or not stop.is_set():
            try:
                worker = self._idle.get(timeout=max(0.0, min(STOP_POLL_S,
                                                              deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise ResourceLimitError(
                        f"every engine worker (--engine-workers {self._count}) stayed busy "
                        f"for {self._wait_s:g} s; retry later", code="SlowDown") from None
                continue
            if worker.process.is_alive():
                worker.baseline = worker.baseline or _resident_bytes(worker)
                return worker
            self._replace(worker)
        raise StoppedError("query stopped")

    def _receive(self, worker: _Worker, stop: threading.Event | None) -> tuple[bytes, bytes]:
        while not worker.connection.poll(STOP_POLL_S):
            if stop is not None and stop.is_set():
                raise StoppedError("query stopped")
            if not worker.process.is_alive():
                break
        try:
            message = worker.connection.recv_bytes()
        except (EOFError, OSError):
            raise StorageError(f"the engine worker ended unexpectedly (exit code "
                               f"{worker.process.exitcode}); run the query again",
                               code="InternalError") from None
        return message[:1], message[1:]

    def _replace(self, worker: _Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.kill()
        if not self._closed:
            threading.Thread(target=self._start, args=(1,), name="engine-workers",
                             daemon=True).start()


def _resident_bytes(worker: _Worker) -> int:
    """The worker's resident memory (0 where ``/proc`` cannot say)."""
    try:
        with open(f"/proc/{worker.process.pid}/status", encoding="ascii") as status:
            line = next((x for x in status if x.startswith("VmRSS:")), "VmRSS: 0 kB")
    except OSError:
        return 0
    return int(line.split()[1]) * 1024


def _error(kind: bytes, body: bytes) -> Exception:
    """A worker's error as the server raises it: DataFusion's text as a plain exception (the
    caller maps it as it maps errors in process), ours as its class with its code."""
    if kind == _ENGINE_ERROR:
        return Exception(body.decode())
    name, code, message = pickle.loads(body)
    cls = getattr(errors, name, StorageError)
    if not (isinstance(cls, type) and issubclass(cls, StorageError)):
        cls = StorageError
    return cls(message, code=code)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class WorkerStream:
    """A job to run on the pool, as ``session.arrow_batches`` reads it (in place of
    DataFusion's stream)."""

    workers: EngineWorkers
    job: WorkerJob
    scanned: list[int]
    """Bytes the worker's scan has read so far (a probe of the query's source reads it)."""

    def arrow_batches(self, stop: threading.Event | None) -> Iterator[pa.RecordBatch]:
        return self.workers.run(self.job, stop, self.scanned)


# ---------------------------------------------------------------- the worker process
def _serve(connection: multiprocessing.connection.Connection, config: EngineConfig) -> None:
    """A worker's loop: one job at a time until the server closes the pipe."""
    sending = threading.Lock()

    def send(message: bytes) -> None:
        with sending:
            connection.send_bytes(message)

    while True:
        try:
            job: WorkerJob = connection.recv()
        except (EOFError, OSError):
            return
        try:
            for batch in _execute(job, config, send):
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, batch.schema) as writer:
                    writer.write_batch(batch)
                send(_BATCH + sink.getvalue().to_pybytes())
        except StorageError as exc:
            send(_STORAGE_ERROR + pickle.dumps((type(exc).__name__, exc.code, exc.message)))
        except Exception as exc:  # noqa: BLE001 - DataFusion's errors are text; the server maps them
            send(_ENGINE_ERROR + str(exc).encode())
        else:
            send(_END)


def _execute(job: WorkerJob, config: EngineConfig,
             send: Callable[[bytes], None]) -> Iterator[pa.RecordBatch]:
    """The statement's batches, as ``SelectEngine._run_native`` runs it in the server; a plan
    of one partition reports its scan's progress every :data:`PROGRESS_S`."""
    ctx = new_session(config, job.translation, partitions=job.cores,
                      split_min_bytes=job.split_min_bytes, width=job.width)
    job.native.register(ctx, job.table)
    frame = ctx.sql_with_options(job.sql, READ_ONLY)
    physical = frame.execution_plan()
    if physical.partition_count != 1:
        for batch in frame.execute_stream():
            yield batch.to_pyarrow()
        return
    probe = finished_bytes(physical)
    done = threading.Event()

    def report() -> None:
        reported = 0
        while not done.wait(PROGRESS_S):
            scanned = probe()
            if scanned != reported:
                reported = scanned
                send(_SCANNED + str(scanned).encode())

    reporter = threading.Thread(target=report, name="progress", daemon=True)
    reporter.start()
    try:
        for batch in ctx.execute(physical, 0):
            yield batch.to_pyarrow()
    finally:
        done.set()
        reporter.join()  # no report may follow the job's end (it would count for the next)
