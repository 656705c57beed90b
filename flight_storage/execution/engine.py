"""Run one s3-select statement over an object (or a prefix of objects) with DataFusion.

``SelectEngine.plan`` translates the statement (``select_dialect.translate``), works out the
input table's schema and the result's Arrow schema, and splits the input into partitions;
``SelectEngine.execute`` runs the plan over some of those partitions and streams Arrow batches.
What depends on the input format is its driver's (``execution/drivers/``: one per format,
dispatched through ``DRIVERS``); the engine keeps the per-object-version caches (plans,
surveys, footers) and decides who reads: DataFusion's own reader over its partitions, the
objects of a prefix table one by one, or the reference readers feeding DataFusion. Nothing here
keeps state a ticket needs: a ticket carries what ``plan`` needs to be re-run. The value types
(``EngineConfig``, ``InputSpec``, ``SelectPlan``, the partitions) are in ``plan_types.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flight_storage.bounded_cache import BoundedCache
from flight_storage.errors import (
    InputFormatError,
    InvalidRequestError,
    ResourceLimitError,
)
from flight_storage.execution.arrow_result import to_arrow_result
from flight_storage.execution.decoded_table import (
    decoded_plan,
    for_partitions,
    open_cache,
    request_fill,
)
from flight_storage.execution.drivers import DRIVERS, FormatDriver
from flight_storage.execution.drivers.base import named
from flight_storage.execution.engine_errors import engine_error
from flight_storage.execution.engine_workers import EngineWorkers, WorkerJob, WorkerStream
from flight_storage.execution.in_order import in_order
from flight_storage.execution.native_csv import DeferredCsvTable, NativeCsvTable, SurveyCache
from flight_storage.execution.native_parquet import NanSurvey, NativeParquetTable
from flight_storage.execution.plan_types import (
    COMPRESSIONS,
    TABLE,
    WARNINGS_METADATA,
    EngineConfig,
    InputSpec,
    PlannedPartition,
    SelectPlan,
    dialect_type,
    order_free,
)
from flight_storage.execution.scan_progress import finished_bytes
from flight_storage.execution.session import (
    MIN_SPLIT_BYTES,
    READ_ONLY,
    arrow_batches,
    filter_not_convertible,
    new_session,
)
from flight_storage.execution.streaming_dataset import (
    ScanFunction,
    StreamingDataset,
    chain_scans,
)
from flight_storage.protocol import (
    ByteRange,
    ObjectGroup,
    Partition,
    WholeObject,
    is_whole_object,
)
from flight_storage.storage.sources import ObjectSource, version_key
from flight_storage.storage.version_cache import VersionCache
from select_dialect import Column, Translation, translate
from select_dialect.errors import SelectDialectError
from select_dialect.flavors import FLAVOR_NAMES, FLAVORS, S3_REQUEST_DEFAULT
from select_dialect.translate import check_query_length

__all__ = ["COMPRESSIONS", "TABLE", "WARNINGS_METADATA", "EngineConfig", "InputSpec",
           "PlannedPartition", "SelectEngine", "SelectPlan"]
"""The engine and the value types its callers use with it."""

_PLAN_CACHE_ENTRIES = 256
_PARTITION_PLANS = 64
"""DataFusion physical plans kept for the endpoints of recent statements (each holds a
session with its registered table: a few hundred KiB)."""
_PARTITION_PLAN_TTL_S = 300.0
"""A cached physical plan is made again after this long (an object store registered in its
session holds credentials that may be temporary)."""
_SPLIT_DIFFERS = object()
"""A cached answer: DataFusion did not cut the statement into the partitions asked for."""


def _as_sources(source: ObjectSource | Sequence[ObjectSource]) -> tuple[ObjectSource, ...]:
    if isinstance(source, Sequence):
        sources = tuple(source)
        if not sources:
            raise InvalidRequestError("the table has no objects", code="NoSuchKey")
        return sources
    return (source,)


class SelectEngine:
    """Plans and runs s3-select statements over objects.

    Args:
        config: execution limits and partitioning.

    Example:
        >>> from flight_storage.storage.sources import BytesSource
        >>> engine = SelectEngine(EngineConfig())
        >>> plan = engine.plan("select _1 from s3object", BytesSource(b"a\\nb\\n"),
        ...                    InputSpec("csv"), flavor="ceph")
        >>> [b.num_rows for b in engine.execute(plan)]
        [2]
    """

    def __init__(self, config: EngineConfig | None = None,
                 workers: EngineWorkers | None = None) -> None:
        self.config = config or EngineConfig()
        self.workers = workers
        """Where aggregates over local files run (None: in this process; the server's)."""
        self.surveys = SurveyCache()
        self.nan_surveys = NanSurvey()
        self.parquet_footers: VersionCache[pq.FileMetaData] = VersionCache(1024)
        self.bad_values: VersionCache[list[tuple[int, int, str]]] = VersionCache()
        self._plans: BoundedCache[tuple[Any, ...], SelectPlan] = BoundedCache(
            _PLAN_CACHE_ENTRIES)
        self._partition_plans: BoundedCache[tuple[Any, ...], tuple[float, Any]] = (
            BoundedCache(_PARTITION_PLANS))
        self._partition_lock = threading.Lock()
        self.partition_plans_made = 0
        """Physical plans made for endpoints (not served from the cache); tests read it."""
        self.decoded = open_cache(self.config.cache_dir, self.config.cache_bytes)
        """The decoded cache (``execution/decoded_table.py``), or None."""

    def close(self) -> None:
        """Stop the engine workers (the server's shutdown)."""
        if self.workers is not None:
            self.workers.close()

    # ------------------------------------------------------------------ planning
    def translate(self, expression: str, **kwargs: Any) -> Translation:
        """``select_dialect.translate`` of ``expression`` against the table ``s3object``."""
        try:
            return translate(expression, table=TABLE,
                             max_query_chars=self.config.max_query_chars, **kwargs)
        except SelectDialectError:
            raise
        except RecursionError:
            raise ResourceLimitError(
                "expression is nested too deeply to evaluate", code="ExpressionTooComplex"
            ) from None

    def plan(
        self,
        expression: str,
        source: ObjectSource | Sequence[ObjectSource],
        input: InputSpec,
        *,
        flavor: str = S3_REQUEST_DEFAULT,
        scan_range: tuple[int, int] | None = None,
        parallelism: int | None = None,
    ) -> SelectPlan:
        """Translate ``expression`` for ``source`` (one object, or a prefix's objects in key
        order, all of one format and schema) and split the work into partitions
        (``parallelism``: the byte ranges a client asked one object cut into, see
        :meth:`range_count`).

        Plans are kept per object version (a ticket's DoGet plans what its GetFlightInfo
        planned: the second time costs a lookup). A plan over an object the decoded cache
        holds reads the object's entry instead (``decoded_table.decoded_plan``)."""
        sources = _as_sources(source)
        wanted = (min(parallelism, self.config.max_parallelism)
                  if parallelism is not None else None)
        key = _plan_key(expression, sources, input, flavor, scan_range, wanted)
        cached = self._plans.get(key) if key is not None else None
        if cached is not None:
            return decoded_plan(self, dataclasses.replace(cached, sources=sources))
        plan = self._plan(expression, sources, input, flavor=flavor, scan_range=scan_range,
                          wanted=wanted)
        if key is not None:
            self._plans.put(key, plan)
        return decoded_plan(self, plan)

    def plan_constant(self, expression: str, *, flavor: str) -> SelectPlan:
        """Plan a statement that reads no object (``SELECT 1``, standard flavour only).

        Raises:
            InvalidRequestError: the statement reads a table after all.
        """
        _check_flavor(flavor)
        translation = self.translate(expression, input_format="csv", flavor=flavor)
        if translation.reads_table:
            raise InvalidRequestError("the statement reads an object; plan it with plan()")
        return self._finish_plan(expression, flavor, (), InputSpec("csv"), translation,
                                 pa.schema([]),
                                 [PlannedPartition(WholeObject(), bytes=0, rows=1)])

    def _plan(
        self,
        expression: str,
        sources: tuple[ObjectSource, ...],
        input: InputSpec,
        *,
        flavor: str,
        scan_range: tuple[int, int] | None,
        wanted: int | None = None,
    ) -> SelectPlan:
        _check_flavor(flavor)
        check_query_length(expression, self.config.max_query_chars)
        if scan_range is not None and (not input.range_readable or len(sources) > 1):
            raise InvalidRequestError(
                "ScanRange applies only to one uncompressed CSV, JSON LINES or Parquet object",
                code="UnsupportedScanRangeInput",  # AWS's code (400) for such objects
            )
        driver = _driver(input)
        try:
            translation, schema, header = driver.translate(self, expression, sources, input,
                                                           flavor)
        except InputFormatError as exc:
            raise named(exc, sources[0].name) from None
        if len(sources) > 1:
            partitions = self._object_partitions(sources)
        else:
            partitions = driver.partitions(self, sources[0], input, scan_range, wanted)
        plan = self._finish_plan(expression, flavor, sources, input, translation, schema,
                                 partitions, header)
        plan = dataclasses.replace(plan, wanted_parallelism=wanted)
        return driver.with_native(self, plan, scan_range)

    def _finish_plan(
        self,
        expression: str,
        flavor: str,
        sources: tuple[ObjectSource, ...],
        input: InputSpec,
        translation: Translation,
        input_schema: pa.Schema,
        partitions: Sequence[PlannedPartition],
        header: Sequence[str] | None = None,
    ) -> SelectPlan:
        ctx = new_session(self.config)
        ctx.register_dataset(TABLE, StreamingDataset(input_schema, []))
        try:
            result_schema = pa.schema(ctx.sql_with_options(translation.sql, READ_ONLY).schema())
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            raise engine_error(exc) from None
        return SelectPlan(
            expression=expression,
            flavor=flavor,
            sources=sources,
            input=input,
            translation=translation,
            input_schema=input_schema,
            result_schema=result_schema,
            partitions=tuple(partitions),
            header=tuple(header) if header is not None else None,
        )

    def plan_table(self, expression: str, input_schema: pa.Schema, *, flavor: str) -> SelectPlan:
        """Translate ``expression`` for a table of ``input_schema`` whose files the engine does
        not list or read itself (an Iceberg table: ``execution/iceberg_scan.py`` plans its data
        files and reads them); columns by name, as a Parquet object's. The plan has no sources
        and no partitions yet (the caller's).

        Raises:
            InvalidRequestError: an unknown flavour, or a statement over the length limit.
            SelectDialectError: the statement does not translate.
        """
        _check_flavor(flavor)
        check_query_length(expression, self.config.max_query_chars)
        columns = [Column(f.name, dialect_type(f.type)) for f in input_schema]
        translation = self.translate(expression, input_format="parquet", flavor=flavor,
                                     columns=columns)
        return self._finish_plan(expression, flavor, (), InputSpec("parquet"), translation,
                                 input_schema, [])

    def range_count(self, size: int, wanted: int | None = None) -> int:
        """Byte ranges a splittable object of ``size`` bytes is cut into (DataFusion's way):
        at most ``partition_bytes`` each, one per core while each keeps ``endpoint_min_bytes``
        (an endpoint's fixed cost must stay small beside its work: issue 37), and a multiple
        of the cores when there are more ranges than cores, so that ranges served a core at a
        time end in full waves (9 ranges on 2 cores leave one core idle for the whole last
        range; 10 smaller ones do not).

        ``wanted``: a client asked for that many endpoints (``x-flight-select-parallelism``;
        Spark with more executors than the data justifies): up to ``wanted`` (at most
        ``max_parallelism``) ranges of at least the 1 MiB split floor instead, never fewer than
        without it."""
        by_size = -(-size // self.config.partition_bytes)
        cores = self.config.parallelism
        if by_size > cores:
            by_size = -(-by_size // cores) * cores
        by_cores = min(cores, size // max(self.config.endpoint_min_bytes, MIN_SPLIT_BYTES))
        by_wish = (min(wanted, self.config.max_parallelism, size // MIN_SPLIT_BYTES)
                   if wanted is not None else 0)
        return max(1, by_size, by_cores, by_wish)

    def _object_partitions(
        self, sources: Sequence[ObjectSource]
    ) -> tuple[PlannedPartition, ...]:
        """Whole objects of a prefix table, small neighbours grouped up to partition_bytes."""
        groups: list[list[ObjectSource]] = [[]]
        for source in sources:
            current = groups[-1]
            if current and sum(s.size for s in current) + source.size > self.config.partition_bytes:
                groups.append([source])
            else:
                current.append(source)
        return tuple(
            PlannedPartition(
                ObjectGroup(tuple(s.name for s in group)),
                bytes=sum(s.size for s in group),
            )
            for group in groups
        )

    # ------------------------------------------------------------------ execution
    def execute(
        self, plan: SelectPlan, partitions: Sequence[Partition] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Stream the statement's result batches (engine types) over ``partitions``.

        The output keeps the object's record order (S3 Select's order; a LIMIT sees records in
        order; a client resuming a broken stream on a replica skips what it has): the byte
        ranges of one endpoint are read on every core at once and yielded range after range
        (``execution/in_order.py``). A plan that missed the decoded cache asks for its entry
        once its stream has ended.
        """
        chosen = (
            list(partitions) if partitions is not None else [p.partition for p in plan.partitions]
        )
        plan = for_partitions(plan, chosen)
        yield from self._execute(plan, chosen)
        request_fill(self, plan)

    def _execute(self, plan: SelectPlan, chosen: list[Partition]) -> Iterator[pa.RecordBatch]:
        if plan.native is not None:
            native = self._native_stream(plan, plan.native, chosen)
            if native is not None:
                yield from native
                return
        if self._objects_read_one_by_one(plan):
            yield from self._each_object(plan, chosen)
            return
        yield from self._reference_stream(plan, chosen)

    def execute_arrow(
        self, plan: SelectPlan, partitions: Sequence[Partition] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`execute`, converted to :attr:`SelectPlan.arrow_schema`."""
        schema = plan.arrow_schema
        for batch in self.execute(plan, partitions):
            yield to_arrow_result(batch, schema)

    def register_input(self, ctx: Any, plan: SelectPlan) -> None:
        """Register all of ``plan``'s table as ``s3object`` on ``ctx``, read as
        :meth:`execute` reads it: DataFusion's own reader where it reads as the reference
        does, else the reference readers, one fragment per piece (a statement DataFusion
        plans over several tables reads each table this way)."""
        whole = [p.partition for p in plan.partitions]
        if plan.native is not None and len(plan.sources) == 1:
            table = _driver(plan.input).verified(self, plan, plan.native, whole, True)
            if table is not None:
                table.register(ctx, TABLE)
                return
        pieces = [s for p in self._expand(plan, whole) for s in self._scans(plan, p)]
        ctx.register_dataset(TABLE, StreamingDataset(plan.input_schema,
                                                     pieces or [chain_scans([])]))

    def _objects_read_one_by_one(self, plan: SelectPlan) -> bool:
        """A prefix table whose result is the union of its objects' results, in object order
        (no aggregate, LIMIT or whole-input clause): each object can be its own query, and
        then DataFusion's reader serves every object that qualifies on its own."""
        return (self.config.native_readers and len(plan.sources) > 1 and plan.parallel_safe
                and plan.input.format in ("csv", "parquet"))

    def _each_object(self, plan: SelectPlan, chosen: Sequence[Partition]
                     ) -> Iterator[pa.RecordBatch]:
        """The chosen partitions object by object: the object's own plan when DataFusion reads
        it and it reads as the table does (same input and result schema, same header), else
        the reference readers over that object alone."""
        by_name = {s.name: s for s in plan.sources}
        for partition in self._expand(plan, chosen):
            keys = partition.keys if isinstance(partition, ObjectGroup) else tuple(by_name)
            missing = [k for k in keys if k not in by_name]
            if missing:
                raise InvalidRequestError(
                    f"object {missing[0]} is no longer part of the table", code="NoSuchKey")
            waiting: list[str] = []  # a run of objects for the reference readers, read as one
            for key in keys:
                own = self.plan(plan.expression, (by_name[key],), plan.input,
                                flavor=plan.flavor, scan_range=None)
                if (own.native is None or own.result_schema != plan.result_schema
                        or own.input_schema != plan.input_schema or own.header != plan.header):
                    waiting.append(key)
                    continue
                yield from self._reference_objects(plan, waiting)
                waiting = []
                yield from self.execute(own)
            yield from self._reference_objects(plan, waiting)

    def _reference_objects(self, plan: SelectPlan, keys: Sequence[str]
                           ) -> Iterator[pa.RecordBatch]:
        """The reference readers over the named objects of the plan's table, in one stream."""
        if keys:
            yield from self._reference_stream(plan, [ObjectGroup(tuple(keys))])

    def _reference_stream(
        self, plan: SelectPlan, chosen: Sequence[Partition]
    ) -> Iterator[pa.RecordBatch]:
        """The reference readers (Python, s3-select rules) feeding DataFusion."""
        if order_free(plan.translation):
            # An aggregate without LIMIT does not care about record order: let DataFusion read
            # the pieces in parallel, one fragment each.
            pieces = [s for p in self._expand(plan, chosen) for s in self._scans(plan, p)]
            scans = pieces or [chain_scans([])]
        else:
            scans = [chain_scans([s for p in chosen for s in self._scans(plan, p)])]

        def stream(push_filters: bool) -> Any:
            ctx = new_session(self.config, plan.translation, push_filters=push_filters)
            ctx.register_dataset(TABLE, StreamingDataset(plan.input_schema, scans))
            return ctx.sql_with_options(plan.translation.sql, READ_ONLY).execute_stream()

        def open_stream() -> Any:
            try:
                return stream(push_filters=True)
            except Exception as exc:  # DataFusion raises plain exceptions with text only
                if not filter_not_convertible(exc):
                    raise
            return stream(push_filters=False)  # the filter above the scan; nothing read yet

        yield from arrow_batches(open_stream)

    def _native_stream(
        self,
        plan: SelectPlan,
        native: NativeCsvTable | NativeParquetTable | DeferredCsvTable,
        chosen: Sequence[Partition],
    ) -> Iterator[pa.RecordBatch] | None:
        """DataFusion reading the object itself, or None when ``chosen`` is not one of its
        partitions (the reference reader then serves them)."""
        whole = [p.partition for p in plan.partitions]
        everything = list(chosen) == whole or is_whole_object(chosen)
        table = _driver(plan.input).verified(self, plan, native, chosen, everything)
        if table is None:
            return None
        if everything:
            cores = table.whole_partitions(self.config.parallelism)
            if order_free(plan.translation):
                return self._run_native(plan, table, cores, None)
            if (cores > 1 and plan.parallel_safe and len(plan.sources) == 1
                    and plan.source.size >= cores * MIN_SPLIT_BYTES):
                return self._in_order(plan, table, cores)
            return self._run_native(plan, table, 1, None)
        if len(chosen) != 1 or not plan.parallel_safe:
            return None
        wanted = table.piece(chosen[0])
        count, pieces = table.endpoint_split(
            plan.source.size, self.range_count(plan.source.size, plan.wanted_parallelism))
        if wanted is None or wanted not in pieces:
            return None
        return self._run_native(plan, table, count, pieces.index(wanted), chosen[0])

    def _run_native(
        self,
        plan: SelectPlan,
        native: NativeCsvTable | NativeParquetTable,
        partitions: int,
        index: int | None,
        partition: Partition | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Execute the plan over DataFusion's table: partition ``index`` of ``partitions``
        equal byte ranges (for Parquet, the row groups starting in that range), or (``index``
        None) everything on ``partitions`` cores."""
        mismatch: list[bool] = []

        def open_stream() -> Any:
            if index is None:
                elsewhere = self._in_worker(plan, native, partitions)
                if elsewhere is not None:
                    return elsewhere
                ctx = new_session(self.config, plan.translation, partitions=partitions,
                                  split_min_bytes=MIN_SPLIT_BYTES, width=_batch_width(native))
                native.register(ctx, TABLE)
                frame = ctx.sql_with_options(plan.translation.sql, READ_ONLY)
                physical = frame.execution_plan()
                if physical.partition_count != 1:
                    return frame.execute_stream()
                # a plan of this stream alone: its scan metrics say how far it has read
                watch = getattr(plan.sources[0], "watch_scan", None)
                if watch is not None:
                    watch(finished_bytes(physical))
                return ctx.execute(physical, 0)
            prepared = self._partition_plan(plan, native, partitions)
            if prepared is _SPLIT_DIFFERS:
                mismatch.append(True)  # not DataFusion's split after all
                return None
            ctx, physical = prepared
            return ctx.execute(physical, index)

        start = ((partition.start if isinstance(partition, ByteRange) else 0)
                 if partition is not None and index is not None else None)
        explain = native.explainer(plan.source.size, partitions, start)
        yield from arrow_batches(open_stream, explain)
        if mismatch and partition is not None:  # the reference reader serves the range
            yield from self._reference_stream(plan, [partition])

    def _in_worker(self, plan: SelectPlan, native: NativeCsvTable | NativeParquetTable,
                   cores: int) -> WorkerStream | None:
        """An aggregate over a file or a store's object runs in an engine worker, which the
        server kills when the query stops (``execution/engine_workers.py``): its first batch is
        the whole computation, which DataFusion does not stop in every step, and its result is
        small."""
        if self.workers is None or not plan.translation.is_aggregate:
            return None
        location = native.location.for_another_process()
        if location is None:
            return None
        # the source (a stop switch, read counters) stays here: the worker needs the file,
        # or the object store as values (its credentials as they are now)
        table: NativeCsvTable | NativeParquetTable = dataclasses.replace(native, location=location)
        if isinstance(table, NativeCsvTable):
            table = dataclasses.replace(table, source=None)
        scanned = [0]
        watch = getattr(plan.sources[0], "watch_scan", None)
        if watch is not None:
            watch(lambda: scanned[0])
        return WorkerStream(self.workers, WorkerJob(
            table, TABLE, plan.translation.sql, plan.translation, cores, MIN_SPLIT_BYTES,
            _batch_width(native)), scanned)

    def _in_order(self, plan: SelectPlan, native: NativeCsvTable | NativeParquetTable,
                  partitions: int) -> Iterator[pa.RecordBatch]:
        """The whole object as ``partitions`` ranges read at once and yielded in record order
        (one endpoint using every core; ``execution/in_order.py``)."""
        prepared = self._partition_plan(plan, native, partitions)
        if prepared is _SPLIT_DIFFERS:
            yield from self._run_native(plan, native, 1, None)
            return
        ctx, physical = prepared
        explain = native.explainer(plan.source.size, partitions, None)

        def reader(index: int) -> Callable[[], Iterator[pa.RecordBatch]]:
            return lambda: arrow_batches(lambda: ctx.execute(physical, index), explain)

        yield from in_order([reader(i) for i in range(partitions)])

    def _partition_plan(self, plan: SelectPlan, native: NativeCsvTable | NativeParquetTable,
                        partitions: int) -> Any:
        """The session and DataFusion physical plan of ``plan`` cut into ``partitions``, made
        once per statement, object version and table and reused by every DoGet of its
        endpoints (each runs its own partition of the one plan: ``ctx.execute(plan, i)``), or
        :data:`_SPLIT_DIFFERS`. Only plans of independent partitions come here (scans,
        filters and projections: no aggregate, sort or limit, whose operators keep state
        across partitions), so running one plan's partitions at once, again and in any order
        is what DataFusion's partitions are for."""
        identity = _plan_key(plan.expression, plan.sources, plan.input, plan.flavor, None)
        if identity is None:
            return self._make_partition_plan(plan, native, partitions)
        key = (identity, partitions, native.signature)
        # one at a time: the endpoints of a statement arrive together (ADBC opens them all at
        # once), and one of them makes the plan the others then share
        with self._partition_lock:
            now = time.monotonic()
            cached = self._partition_plans.get(key)
            if cached is not None and now - cached[0] < _PARTITION_PLAN_TTL_S:
                return cached[1]
            prepared = self._make_partition_plan(plan, native, partitions)
            self._partition_plans.put(key, (now, prepared))
        return prepared

    def _make_partition_plan(self, plan: SelectPlan,
                             native: NativeCsvTable | NativeParquetTable, partitions: int
                             ) -> Any:
        ctx = new_session(self.config, plan.translation, partitions=partitions,
                          split_min_bytes=0, width=_batch_width(native))
        native.register(ctx, TABLE)
        physical = ctx.sql_with_options(plan.translation.sql, READ_ONLY).execution_plan()
        self.partition_plans_made += 1
        return (ctx, physical) if physical.partition_count == partitions else _SPLIT_DIFFERS

    def _expand(self, plan: SelectPlan, chosen: Sequence[Partition]) -> list[Partition]:
        """Replace a whole-table partition by the plan's finer partitions."""
        if is_whole_object(chosen):
            return [p.partition for p in plan.partitions]
        return list(chosen)

    def _scans(self, plan: SelectPlan, partition: Partition) -> list[ScanFunction]:
        """One scan per (object, piece) the partition covers."""
        driver = _driver(plan.input)
        if isinstance(partition, ObjectGroup):
            by_name = {s.name: s for s in plan.sources}
            missing = [k for k in partition.keys if k not in by_name]
            if missing:
                raise InvalidRequestError(
                    f"object {missing[0]} is no longer part of the table", code="NoSuchKey"
                )
            return [driver.scan(self, plan, by_name[k], WholeObject())
                    for k in partition.keys]
        if isinstance(partition, WholeObject):
            return [driver.scan(self, plan, source, partition) for source in plan.sources]
        return [driver.scan(self, plan, plan.source, partition)]


def _batch_width(native: NativeCsvTable | NativeParquetTable) -> int:
    """The width DataFusion's batches are sized for (``new_session``): a CSV table's columns
    (its reader allocates every column of a batch up front); 0 for Parquet, whose partition
    count depends on the batch size its endpoints were counted with."""
    return native.file_width if isinstance(native, NativeCsvTable) else 0


def _driver(input: InputSpec) -> FormatDriver:
    driver = DRIVERS.get(input.format)
    if driver is None:
        raise InvalidRequestError(f"unsupported input format {input.format!r}")
    return driver


def _check_flavor(flavor: str) -> None:
    if flavor not in FLAVORS:
        raise InvalidRequestError(
            f"unknown flavor {flavor!r}; use one of {', '.join(FLAVOR_NAMES)}")


def _plan_key(
    expression: str,
    sources: Sequence[ObjectSource],
    input: InputSpec,
    flavor: str,
    scan_range: tuple[int, int] | None,
    wanted: int | None = None,
) -> tuple[Any, ...] | None:
    """What a plan depends on (``wanted``: the parallelism a client asked for), or None when a
    source has no version (bytes in memory)."""
    versions = []
    for source in sources:
        try:
            version = version_key(source)
        except OSError:
            return None
        if version is None:
            return None
        versions.append((source.name, version))
    digest = hashlib.sha256(expression.encode("utf-8", "surrogatepass")).digest()
    return (digest, flavor, repr(input), scan_range, tuple(versions), wanted)
