"""A DoGet's stream of one partition: the plan's batches for a Flight SQL statement, and
for an S3 SelectObjectContent request its records (the request's OutputSerialization) with
Progress and Stats in each message's app_metadata; both fail, rather than end short, when the
objects change while they are read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flight_storage.errors import (
    AccessDeniedError,
    ObjectNotFoundError,
    StaleTicketError,
    StorageError,
)
from flight_storage.execution.engine import PlannedPartition, SelectEngine, SelectPlan
from flight_storage.execution.select_local import select_stats, serialized_records
from flight_storage.protocol import PartitionTicket, StatementTicket
from flight_storage.request.s3_request import RECORDS_SCHEMA, extras_from_ticket, stats_metadata
from flight_storage.request.tables import object_version
from flight_storage.rpc.boundary import client_error
from flight_storage.rpc.endpoints import partition_bytes
from flight_storage.rpc.streams import (
    Cancellable,
    Item,
    QueryStream,
    StoppableSource,
    StreamPool,
    empty_batch,
)
from flight_storage.storage.catalog import ObjectInfo


@dataclass(frozen=True)
class PartitionStream:
    """What a DoGet answers with: the stream's schema and its items."""

    schema: pa.Schema
    items: QueryStream


def partition_stream(
    engine: SelectEngine,
    pool: StreamPool,
    context: Cancellable,
    ticket: PartitionTicket,
    plan: SelectPlan,
    source: StoppableSource,
    fields: dict[str, Any],
    key: bytes,
    objects: Sequence[ObjectInfo],
    to_client: Callable[[BaseException], BaseException] = client_error,
) -> PartitionStream:
    """The stream of ``ticket``'s partition of ``plan`` (its type says which: a statement's
    Arrow batches, or an S3 request's records); ``to_client``: how a failure reaches the
    consumer (:class:`QueryStream`)."""
    partition = ticket.partition
    version = object_version(objects)
    common: dict[str, Any] = dict(
        source=source, context=context, pool=pool, fields=fields, stop_key=key,
        check_source=lambda: _changed(objects, version), to_client=to_client)

    def arrow() -> Iterator[pa.RecordBatch]:
        batches = _counted(engine.execute_arrow(plan, [partition]), plan, source,
                           partition_bytes(partition, plan))
        return _unchanged(batches, objects, version)

    if isinstance(ticket, StatementTicket):
        schema = plan.arrow_schema
        produce = arrow
        return PartitionStream(schema, QueryStream(produce=produce, schema=schema, **common))
    extras = extras_from_ticket(ticket.output_serialization or {})
    one = dataclasses.replace(
        plan, partitions=(PlannedPartition(partition, partition_bytes(partition, plan)),)
    )
    total = select_stats(one, 0)["BytesScanned"]
    returned = [0]

    compressed = plan.input.compression != "NONE"

    def counts(kind: str) -> bytes:
        # Progress: what the readers have read so far (issue 27: DataFusion's reader counted
        # through its scan metrics, execution/scan_progress.py), never past the total
        scanned = total if kind == "Stats" else min(source.scanned(), total)
        # AWS counts the decompressed bytes of compressed input as processed
        processed = source.processed[0] if compressed else scanned
        return stats_metadata(kind, scanned, processed, returned[0])

    if extras.output_serialization is None:
        schema = plan.arrow_schema
        produce = arrow
        measure: Callable[[pa.RecordBatch], int] = lambda b: b.nbytes  # noqa: E731
    else:
        schema = RECORDS_SCHEMA
        output = extras.output_serialization
        produce = lambda: _unchanged(  # noqa: E731
            _counted(_chunks(serialized_records(engine, plan, output, [partition])),
                     plan, source, total), objects, version)
        measure = lambda b: len(b.column(0)[0].as_buffer()) if b.num_rows else 0  # noqa: E731

    def on_batch(batch: pa.RecordBatch) -> Item:
        returned[0] += measure(batch)
        return (batch, counts("Progress")) if extras.progress else batch

    def on_idle() -> Item:
        empty = empty_batch(schema)
        return (empty, counts("Progress")) if extras.progress else empty

    def on_end() -> Item:
        fields["returned"] = returned[0]
        return (empty_batch(schema), counts("Stats"))

    query = QueryStream(produce=produce, schema=schema, on_batch=on_batch, on_idle=on_idle,
                         on_end=on_end, **common)
    return PartitionStream(schema, query)


def _counted(batches: Iterator[pa.RecordBatch], plan: SelectPlan, source: StoppableSource,
             nbytes: int) -> Iterator[pa.RecordBatch]:
    """``batches``; then, when DataFusion read the object itself (Python saw none of its
    bytes), count the partition's bytes as scanned. A LIMIT may stop DataFusion early, so
    those scans are not counted rather than over-counted."""
    yield from batches
    if plan.native is not None and plan.translation.limit is None:
        source.read[0] = max(source.read[0], nbytes)
        # a compressed object is one partition: the survey counted its decompressed bytes
        decoded = getattr(getattr(plan.native, "survey", None), "decoded_bytes", 0)
        source.processed[0] = max(source.processed[0], decoded)


def _unchanged(batches: Iterator[pa.RecordBatch], objects: Sequence[ObjectInfo],
               version: str) -> Iterator[pa.RecordBatch]:
    """``batches``, then a check that the objects are still the version planned: an object
    replaced or truncated while it streamed fails the stream instead of ending it short (and a
    reader's error caused by such a change is reported as the change)."""
    try:
        yield from batches
    except StorageError:
        _check_version(objects, version)
        raise
    _check_version(objects, version)


def _check_version(objects: Sequence[ObjectInfo], version: str) -> None:
    changed = _changed(objects, version)
    if changed is not None:
        raise changed


def _changed(objects: Sequence[ObjectInfo], version: str) -> StaleTicketError | None:
    """The error to fail a stream with when its objects are no longer ``version``."""
    try:
        fresh = [dataclasses.replace(o, version=o.store.head(o.key).version) for o in objects]
    except (ObjectNotFoundError, AccessDeniedError):
        fresh = []  # deleted (or replaced by something we may not read)
    except StorageError:
        return None  # the store did not answer: the reads say so themselves if it stays down
    if object_version(fresh) == version:
        return None
    return StaleTicketError(
        f"{objects[0].bucket}/{objects[0].key} changed while it was read; the result is "
        "incomplete: run the query again",
        code="PreconditionFailed",
    )


def _chunks(chunks: Iterator[bytes]) -> Iterator[pa.RecordBatch]:
    for chunk in chunks:
        yield pa.RecordBatch.from_arrays([pa.array([chunk], pa.binary())],
                                         schema=RECORDS_SCHEMA)
