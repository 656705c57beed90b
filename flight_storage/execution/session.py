"""The one place DataFusion sessions are made, and their streams turned into ours.

Every session the engine runs a statement in is :func:`new_session`: the read-only SQL options
(:data:`READ_ONLY`: no DDL, DML or statements reach DataFusion), our UDFs registered, the
memory pool of a query, and the settings that let one partition of a plan run on its own
(work stealing and round-robin repartitioning off, NOTES.md). :func:`arrow_batches` reads a
DataFusion stream as pyarrow batches with DataFusion's errors made ours.

A query's stream stops its engine work (:func:`stopped_by`): datafusion-python 55's blocking
``next()`` cannot be interrupted from another thread, and dropping the stream object while a
``next()`` runs leaves the batch being computed running (an aggregate's first batch is the whole
aggregate). Its ``__anext__`` runs the batch as a tokio task that pyo3's asyncio bridge drops
when the awaiting asyncio future is cancelled, and dropping DataFusion's stream aborts the tasks
it spawned; so a stream read under a stop switch awaits each batch on an event loop of its own
and cancels the wait when the switch is set. Measured on 2 loaded cores (a join and
``count(DISTINCT)`` over 20M Parquet rows, cancelled after 2.5 s): the sync ``next()`` went on
using 1.36 cores for seconds after the stream was dropped; the cancelled ``__anext__`` ended at
once and used 0.00-0.03 CPU-s in the second after.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from datafusion import RuntimeEnvBuilder, SessionConfig, SessionContext, SQLOptions

from flight_storage.errors import StoppedError, StorageError
from flight_storage.execution import udfs
from flight_storage.execution.engine_errors import engine_error
from flight_storage.execution.native_parquet import SESSION_SETTINGS as PARQUET_SETTINGS
from flight_storage.execution.plan_types import EngineConfig
from select_dialect import Translation

MIN_SPLIT_BYTES = 1 << 20
"""An order-free query splits an object into per-core ranges only above this size."""

BATCH_ROWS = 8192
"""Rows of a DataFusion batch (``datafusion.execution.batch_size``) of a narrow table."""

BATCH_FIELDS = 1 << 20
"""Fields of a batch of a wide table: DataFusion's CSV reader allocates a batch's buffers for
every column up front, so 8,192 rows of 4,000 columns zero hundreds of MB before the first
record (10 s for a one-record object on 2 loaded cores, against 25 ms at 128 rows)."""


def batch_rows(width: int) -> int:
    """Rows per DataFusion batch for a table of ``width`` columns (:data:`BATCH_FIELDS`)."""
    return max(1, min(BATCH_ROWS, BATCH_FIELDS // max(width, 1)))


STOP_POLL_S = 0.1
"""How often a batch being computed under a stop switch looks at it."""

_STOP: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "engine_stop", default=None)


@contextlib.contextmanager
def stopped_by(stop: threading.Event) -> Iterator[None]:
    """DataFusion streams read in this thread (:func:`arrow_batches`) until the block ends stop
    their engine work within :data:`STOP_POLL_S` of ``stop`` being set, raising
    :class:`StoppedError` (see the module docstring)."""
    token = _STOP.set(stop)
    try:
        yield
    finally:
        _STOP.reset(token)


READ_ONLY = SQLOptions().with_allow_ddl(False).with_allow_dml(False).with_allow_statements(False)
"""What a statement may do in DataFusion: read."""


def new_session(
    config: EngineConfig,
    translation: Translation | None = None,
    *,
    partitions: int = 2,
    split_min_bytes: int = MIN_SPLIT_BYTES,
    push_filters: bool = True,
    width: int = 0,
) -> SessionContext:
    """A session for one statement: ``partitions`` target partitions (file scans cut into
    that many byte ranges above ``split_min_bytes``), the memory pool of a query, our UDFs;
    the filter kept where the statement puts it when ``push_filters`` is off or the
    translation's aliases must be computed once per row below it; batches of
    :func:`batch_rows` rows for a table of ``width`` columns."""
    session_config = (
        SessionConfig()
        .with_batch_size(batch_rows(width))
        .with_target_partitions(partitions)
        .with_repartition_file_scans(partitions > 1)
        .with_repartition_file_min_size(split_min_bytes)
        # a partition executed on its own must read only its own range (NOTES.md)
        .set("datafusion.execution.enable_file_stream_work_stealing", "false")
        .set("datafusion.optimizer.enable_round_robin_repartition", "false")
        # DataFusion 55's simplifier can prove an aggregate's input non-null where the
        # physical expression says nullable (CASE WHEN x BETWEEN NULL AND x ... under
        # DISTINCT) and then refuses its own plan; the physical schema is the looser one
        .set("datafusion.execution.skip_physical_aggregate_schema_check", "true")
    )
    for key, value in PARQUET_SETTINGS:
        session_config = session_config.set(key, value)
    runtime = RuntimeEnvBuilder()
    if config.memory_limit_bytes is not None:
        runtime = runtime.with_fair_spill_pool(config.memory_limit_bytes)
    ctx = SessionContext(session_config, runtime)
    for function in _udfs():
        ctx.register_udf(function)
    if not push_filters or (translation is not None and translation.filter_over_aliases):
        # Keep the filter where the statement puts it: above the subquery that computes the
        # aliases once per row, or above a dataset that cannot take it (filter_not_convertible).
        ctx.remove_optimizer_rule("push_down_filter")
    return ctx


def filter_not_convertible(exc: Exception) -> bool:
    """datafusion-python could not turn the filters it pushes into a dataset into one pyarrow
    expression: it joins them with ``&`` in order, and a NULL literal conjunct (DataFusion's
    simplifier makes ``x = x`` into ``x IS NOT NULL OR NULL``) becomes a ``pa.BooleanScalar``,
    which ``&`` with an ``Expression`` refuses when it comes first."""
    text = str(exc)
    return "unsupported operand type" in text and "pyarrow" in text and "Expression" in text


@functools.cache
def _udfs() -> tuple[Any, ...]:
    """The s3-select UDFs, built once per process (each session registers the same ones)."""
    return tuple(udfs.build_udfs())


def plain_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with each dictionary column decoded to its value type: the engine's batches
    never carry a dictionary (a decoded-cache entry types text of few values as one)."""
    if not any(pa.types.is_dictionary(t) for t in batch.schema.types):
        return batch
    columns = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c
               for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with each dictionary field typed as its values (see :func:`plain_batch`)."""
    for index, field in enumerate(schema):
        if pa.types.is_dictionary(field.type):
            schema = schema.set(index, field.with_type(field.type.value_type))
    return schema


def arrow_batches(open_stream: Callable[[], Any],
                  explain: Callable[[str], StorageError | None] | None = None
                  ) -> Iterator[pa.RecordBatch]:
    """The batches of a DataFusion stream as pyarrow, DataFusion's errors made ours (by
    ``explain`` first: a native reader's errors name the object's line); nothing when
    ``open_stream`` returns None."""
    stop = _STOP.get()
    try:
        stream = open_stream()
        if stream is None:
            return
        run_elsewhere = getattr(stream, "arrow_batches", None)  # engine_workers.WorkerStream
        if run_elsewhere is not None:
            batches = run_elsewhere(stop)
        elif stop is None:
            batches = (batch.to_pyarrow() for batch in stream)
        else:
            batches = _stoppable(stream, stop)
        for batch in batches:
            yield plain_batch(batch)
    except (StorageError, StoppedError):
        raise
    except Exception as exc:  # DataFusion raises plain exceptions with text only
        explained = explain(str(exc)) if explain is not None else None
        raise (explained or engine_error(exc)) from None


async def _next_batch(stream: Any) -> Any:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None


def _stoppable(stream: Any, stop: threading.Event) -> Iterator[pa.RecordBatch]:
    """The batches of ``stream``, each awaited on an event loop of this generator's own whose
    wait is cancelled (and with it the engine's work on the batch) once ``stop`` is set."""
    loop = asyncio.new_event_loop()
    try:
        while True:
            batch = _await_batch(loop, stream, stop)
            if batch is None:
                return
            yield batch.to_pyarrow()
    finally:
        loop.close()


def _await_batch(loop: asyncio.AbstractEventLoop, stream: Any, stop: threading.Event) -> Any:
    if stop.is_set():
        raise StoppedError("query stopped")
    task = loop.create_task(_next_batch(stream))

    def watch() -> None:
        if stop.is_set():
            task.cancel()
        else:
            timer[0] = loop.call_later(STOP_POLL_S, watch)

    timer = [loop.call_later(STOP_POLL_S, watch)]
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        raise StoppedError("query stopped") from None
    finally:
        timer[0].cancel()
