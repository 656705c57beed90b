"""The result-stream pump: keep-alives, cancellation, slots, watchdog, shutdown (no server)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_storage.errors import ResourceLimitError
from flight_storage.rpc.streams import (
    QueryStream,
    StoppableSource,
    StreamLimits,
    StreamPool,
    _Stopped,
    object_source,
)
from flight_storage.storage.catalog import Catalog

pytestmark = pytest.mark.reliability

SCHEMA = pa.schema([pa.field("a", pa.int64())])


class _Context:
    def __init__(self) -> None:
        self.cancelled = False

    def is_cancelled(self) -> bool:
        return self.cancelled


def _pool(**limits: Any) -> StreamPool:
    return StreamPool(StreamLimits(**{"keepalive_s": 0.0, **limits}))


def _stream(tmp_path: Path, produce: Any, pool: StreamPool | None = None,
            **kwargs: Any) -> tuple[QueryStream, StreamPool, _Context, StoppableSource]:
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "b" / "k").write_bytes(b"x" * 100)
    source = object_source(Catalog(tmp_path).object("b", "k"))
    pool = pool or _pool()
    context = _Context()
    stream = QueryStream(produce=produce, schema=SCHEMA, source=source, context=context,
                         pool=pool, fields={}, **kwargs)
    return stream, pool, context, source


def _wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds or ``timeout_s`` passes (the caller asserts it)."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def _batch(value: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([value])], schema=SCHEMA)


def test_keepalive_empty_batches_while_the_scan_finds_nothing(tmp_path: Path) -> None:
    idle = threading.Event()

    def produce() -> Iterator[pa.RecordBatch]:
        assert idle.wait(30)  # nothing found until the consumer has sent a keep-alive
        yield _batch(7)

    def on_idle() -> pa.RecordBatch:
        idle.set()
        return _batch(0).slice(0, 0)

    stream, pool, _, _ = _stream(tmp_path, produce, on_idle=on_idle)
    items = list(stream)
    assert items[0].num_rows == 0 and items[0].schema.equals(SCHEMA)
    assert [b.num_rows for b in items if b.num_rows] == [1]
    assert items[-1].column(0).to_pylist() == [7]
    assert pool.open_streams == 0


def test_client_cancel_stops_the_reader(tmp_path: Path) -> None:
    opened = threading.Event()
    failures: list[BaseException] = []

    def produce() -> Iterator[pa.RecordBatch]:
        yield _batch(1)
        with source.open() as handle:
            opened.set()
            try:
                while True:  # a scan that finds nothing, reading on
                    handle.seek(0)
                    handle.read()
            except _Stopped as exc:
                failures.append(exc)
                raise

    stream, pool, context, source = _stream(tmp_path, produce)
    assert next(stream).num_rows == 1
    assert opened.wait(30)
    context.cancelled = True
    with pytest.raises(flight.FlightCancelledError):
        next(stream)
    assert source.stop.is_set() and pool.open_streams == 0
    assert stream._thread is not None
    stream._thread.join(30)  # the reader noticed and ended
    assert not stream._thread.is_alive() and isinstance(failures[0], _Stopped)
    assert pool.computing == 0


def test_timeout_and_shutdown_end_the_stream(tmp_path: Path) -> None:
    stream, pool, _, _ = _stream(tmp_path, lambda: iter(()), _pool(query_timeout_s=-1.0))
    with pytest.raises(flight.FlightTimedOutError):
        next(stream)
    assert pool.open_streams == 0

    aborting = _pool()
    aborting.aborting.set()
    with pytest.raises(ResourceLimitError) as refused:
        _stream(tmp_path, lambda: iter(()), aborting)
    assert refused.value.code == "ServiceUnavailable"


def test_abandoned_stream_leaves_the_pool(tmp_path: Path) -> None:
    stream, pool, _, source = _stream(tmp_path, lambda: iter([_batch(1), _batch(2)]))
    assert next(stream).num_rows == 1
    stream.close()
    stream.close()
    assert pool.open_streams == 0 and source.stop.is_set()


def test_a_stream_waiting_for_its_reader_holds_no_compute_slot(tmp_path: Path) -> None:
    """One compute slot, two streams: the one nobody reads must not block the other."""
    pool = _pool(max_running=1, queue_bytes=1, queue_wait_s=30.0)
    unread, _, _, _ = _stream(tmp_path, lambda: iter([_batch(i) for i in range(100)]), pool)
    assert next(unread).column(0).to_pylist() == [0]  # started, then never read again
    read, _, _, _ = _stream(tmp_path / "..", lambda: iter([_batch(i) for i in range(50)]), pool)
    assert [b.column(0)[0].as_py() for b in read] == list(range(50))
    assert pool.computing == 0
    unread.close()


def test_a_stream_computes_ahead_up_to_its_byte_budget_and_no_further(tmp_path: Path) -> None:
    """The producer queues batches while their bytes fit the budget (one always fits), then
    waits for its client: what an unread stream holds is bounded in bytes."""
    one = pa.record_batch([pa.array(range(1000), pa.int64())], names=["v"])  # 8,000 bytes
    pulled: list[int] = []

    def produce() -> Iterator[pa.RecordBatch]:
        for i in range(100):
            pulled.append(i)
            yield one

    pool = _pool(queue_bytes=5 * one.nbytes, keepalive_s=300.0)
    stream, *_ = _stream(tmp_path, produce, pool)
    assert next(stream).num_rows == 1000
    _wait_for(lambda: stream._queue.producer_waiting)
    time.sleep(0.2)  # a producer that ignored the budget would keep pulling meanwhile
    # sent 1, queued 5 (the budget), 1 in the producer's hand waiting for room
    assert stream._queue.producer_waiting and len(pulled) == 7
    assert sum(b.num_rows for b in stream) == 99 * 1000  # and every batch still arrives
    assert len(pulled) == 100


def test_one_batch_larger_than_the_budget_still_goes_through(tmp_path: Path) -> None:
    pool = _pool(queue_bytes=1)
    stream, *_ = _stream(tmp_path, lambda: iter([_batch(i) for i in range(20)]), pool)
    assert [b.column(0)[0].as_py() for b in stream] == list(range(20))


def test_watchdog_ends_a_stream_past_its_deadline_without_a_pull(tmp_path: Path) -> None:
    pool = _pool(query_timeout_s=0.5, queue_bytes=1)
    stream, _, _, source = _stream(tmp_path, lambda: iter([_batch(i) for i in range(10)]), pool)
    assert next(stream).num_rows == 1  # then the client stops pulling
    _wait_for(lambda: pool.open_streams == 0)
    assert pool.open_streams == 0 and source.stop.is_set()
    with pytest.raises(flight.FlightTimedOutError, match="QueryTimeout"):
        next(stream)


def test_watchdog_cancels_a_client_that_stopped_reading(tmp_path: Path) -> None:
    pool = _pool(idle_timeout_s=0.3, queue_bytes=1)
    stream, _, _, _ = _stream(tmp_path, lambda: iter([_batch(i) for i in range(10)]), pool)
    assert next(stream).num_rows == 1
    _wait_for(lambda: pool.open_streams == 0)
    assert pool.open_streams == 0
    with pytest.raises(flight.FlightError, match="RequestTimeout"):
        next(stream)
    assert stream._thread is not None
    stream._thread.join(30)
    assert not stream._thread.is_alive()


def test_watchdog_cancels_an_idle_client_whose_answer_is_all_queued(tmp_path: Path) -> None:
    """The producer has finished (every batch fits the budget) and the client stopped
    reading: the queued answer is freed after the idle timeout, not kept to the deadline."""
    pool = _pool(idle_timeout_s=0.3, query_timeout_s=300.0)
    stream, _, _, _ = _stream(tmp_path, lambda: iter([_batch(i) for i in range(3)]), pool)
    assert next(stream).num_rows == 1
    _wait_for(lambda: pool.open_streams == 0)
    assert pool.open_streams == 0
    with pytest.raises(flight.FlightError, match="RequestTimeout"):
        next(stream)


def test_open_streams_are_bounded_with_a_named_limit(tmp_path: Path) -> None:
    pool = _pool(max_open=2)
    first, *_ = _stream(tmp_path, lambda: iter(()), pool)
    second, *_ = _stream(tmp_path, lambda: iter(()), pool)
    with pytest.raises(ResourceLimitError, match="max-open-streams") as refused:
        _stream(tmp_path, lambda: iter(()), pool)
    assert refused.value.code == "SlowDown"
    first.close()
    third, *_ = _stream(tmp_path, lambda: iter(()), pool)
    second.close()
    third.close()


_COLLECT_A_REFUSED_STREAM = """
import gc, pathlib, sys
import pyarrow as pa
from flight_storage import telemetry
from flight_storage.errors import ResourceLimitError
from flight_storage.rpc.streams import QueryStream, StreamLimits, StreamPool, object_source
from flight_storage.storage.catalog import Catalog

root = pathlib.Path(sys.argv[1])

class Context:
    def is_cancelled(self) -> bool:
        return False

def refused() -> ResourceLimitError:
    try:
        QueryStream(produce=lambda: iter(()), schema=pa.schema([]), context=Context(),
                    source=object_source(Catalog(root).object("b", "k")),
                    pool=StreamPool(StreamLimits(max_open=0)), fields={})
    except ResourceLimitError as exc:
        return exc
    raise AssertionError("the pool took a stream over its limit")

error = refused()
error.cycle = error  # only the cycle collector frees the stream left in its traceback
del error
gc.disable()
with telemetry.STREAM_SECONDS._lock:  # as when a histogram creates a label's child
    gc.collect()
print("collected")
"""


def test_a_stream_the_pool_refused_is_collected_inside_a_metrics_lock(tmp_path: Path) -> None:
    """A finalizer that finished a refused stream took the (non-reentrant) metrics lock the
    collecting thread already held: CI hung there. Run apart so a regression cannot hang us."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "k").write_bytes(b"x")
    run = subprocess.run([sys.executable, "-c", _COLLECT_A_REFUSED_STREAM, str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "collected", run.stderr


def test_a_stream_that_never_gets_a_slot_fails_with_slowdown(tmp_path: Path) -> None:
    pool = _pool(max_running=1, queue_wait_s=0.3)
    taken = threading.Event()
    assert pool.acquire(taken)  # someone else computes for longer than the wait
    stream, *_ = _stream(tmp_path, lambda: iter([_batch(1)]), pool)
    with pytest.raises(flight.FlightUnavailableError, match="SlowDown"):
        list(stream)  # keep-alives, then the error
    pool.release()


def test_abort_all_ends_every_open_stream(tmp_path: Path) -> None:
    pool = _pool(queue_bytes=1)
    streams = [_stream(tmp_path, lambda: iter([_batch(i) for i in range(10)]), pool)[0]
               for _ in range(3)]
    for stream in streams:
        next(stream)
    assert pool.abort_all() == 3
    assert pool.open_streams == 0
    for stream in streams:
        with pytest.raises(flight.FlightUnavailableError, match="ServiceUnavailable"):
            next(stream)


def test_a_producer_stuck_in_the_engine_gives_its_slot_back_when_failed(tmp_path: Path) -> None:
    """DataFusion can spin on a file truncated under it: failing the stream frees the slot."""
    pool = _pool(max_running=1)
    entered, release = threading.Event(), threading.Event()

    def produce() -> Iterator[pa.RecordBatch]:
        yield _batch(1)
        entered.set()
        release.wait(30)  # stuck inside next() as far as the stream can tell
        yield _batch(2)

    stream, *_ = _stream(tmp_path, produce, pool)
    assert next(stream).num_rows == 1
    assert entered.wait(30) and pool.computing == 1
    stream.fail(ResourceLimitError("object changed", code="PreconditionFailed"), "changed")
    assert pool.computing == 0 and pool.acquire(threading.Event())  # the slot is usable
    pool.release()
    release.set()
    assert stream._thread is not None
    stream._thread.join(30)
    assert pool.computing == 0  # the producer did not release a second time


# -- planning under the same limits (StreamPool.run_planning)


def test_planning_holds_a_slot_until_it_really_ends() -> None:
    pool = _pool(max_running=1, queue_wait_s=0.3, query_timeout_s=0.3)
    release = threading.Event()
    with pytest.raises(ResourceLimitError) as timed_out:
        pool.run_planning(lambda stop: release.wait(30), lambda: False)
    assert timed_out.value.code == "QueryTimeout"
    assert pool.computing == 1  # the abandoned planning still runs on a core
    with pytest.raises(ResourceLimitError) as busy:
        pool.run_planning(lambda stop: 1, lambda: False)
    assert busy.value.code == "SlowDown"
    release.set()
    deadline = time.monotonic() + 10
    while pool.computing and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.run_planning(lambda stop: 42, lambda: False) == 42
    assert pool.computing == 0


@pytest.mark.parametrize("cancelled", [False, True])
def test_planning_told_to_stop_ends_and_frees_its_slot(cancelled: bool) -> None:
    """Work that honours the stop switch (object sources and surveys do) gives its slot back
    as soon as the call gives up, at the timeout or on a cancel."""
    pool = _pool(max_running=1, queue_wait_s=5, query_timeout_s=0.3)
    stopped = threading.Event()

    def work(stop: threading.Event) -> None:
        stop.wait(30)
        stopped.set()

    with pytest.raises((ResourceLimitError, flight.FlightCancelledError)):
        pool.run_planning(work, lambda: cancelled)
    assert stopped.wait(5)
    assert pool.run_planning(lambda stop: 42, lambda: False) == 42


def test_planning_answers_a_cancelled_client_and_passes_errors_through() -> None:
    pool = _pool(max_running=2, query_timeout_s=30)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(flight.FlightCancelledError):
        pool.run_planning(lambda stop: release.wait(30), lambda: True)
    assert time.monotonic() - started < 5
    release.set()

    def broken() -> None:
        raise ValueError("bad statement")

    with pytest.raises(ValueError, match="bad statement"):
        pool.run_planning(lambda stop: broken(), lambda: False)
