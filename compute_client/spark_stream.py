"""Streaming ``flight-select``: list new objects under a prefix, fetch each through the server.

    (spark.readStream.format("flight-select")
         .option("location", "grpc://127.0.0.1:8815")
         .option("prefix", "sales/orders/")          # bucket/key-prefix
         .option("where", "status = 'delivered'")    # s3-select predicate, run on the server
         .option("maxFilesPerTrigger", "10")
         .load())

Two steps, after the list/fetch design of incremental object-store sources:

* **list** (driver): finds objects whose key sorts after the last admitted key (start-after
  semantics, as S3 ListObjectsV2 pages), one page of ``listPageSize`` keys at a time, buffering
  the page between triggers so a trigger lists only when its buffer runs dry. Objects must
  therefore appear in key order (date- or sequence-named keys); a key that sorts before one
  already admitted is never seen. A page is one call of the server's ``ListObjects`` action
  (``{bucket, prefix, start_after, max_keys}``), which returns keys with their sizes.
* **fetch** (executors): each admitted object is planned with the pushed statement
  (``SELECT columns FROM "bucket"."key" WHERE <where>``), and the batch's endpoints are packed
  into a Spark partition per core the server computes on (a Python task costs about 30 ms).
  An object deleted before it is fetched is skipped with a warning; the task reads the rest.

Offsets (kept by Spark in the checkpoint) are ``{"v": 1, "after": key, "batch": [[key, bytes],
...]}``: the last admitted key and the objects of the batch that ends there, so a batch
replayed after a restart reads exactly the same objects. Objects are the unit of progress: a
batch either commits with all its objects or is replayed whole.

Options beyond the batch ones (``location``, ``columns``, ``flavor``, auth, TLS, ``timeout``,
``parallelism``: endpoints per object, and then Spark tasks per batch):
``prefix`` (required), ``where``, ``maxFilesPerTrigger``, ``maxBytesPerTrigger`` (object bytes
as the server reports them), ``listPageSize`` (default 1000), ``startAfter`` (a key: only
later keys are read).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from compute_client import pushdown, spark_filters
from compute_client.errors import RemoteQueryError
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient
from compute_client.spark_common import (
    EndpointPartition,
    connection_options,
    project,
    read_endpoints,
    spark_schema,
    spark_tasks,
    split_columns,
    task_groups,
)
from flight_storage.protocol import PlanDescription

log = logging.getLogger(__name__)

OFFSET_VERSION = 1
# An offset as Spark keeps it in the checkpoint: a JSON object (see the module docstring).
Offset = dict[str, Any]
_GONE = ("NoSuchKey", "NoSuchBucket")


@dataclass(frozen=True)
class StreamOptions:
    """Parsed streaming options."""

    connection: ConnectionOptions
    bucket: str
    prefix: str
    columns: tuple[str, ...] | None
    where: str | None
    max_files: int | None
    max_bytes: int | None
    page_size: int
    start_after: str

    @classmethod
    def parse(cls, options: dict[str, str]) -> StreamOptions:
        """Validate the options (Spark passes option names case-insensitively)."""
        options = {k.lower(): v for k, v in options.items()}
        bucket, _, prefix = options.get("prefix", "").partition("/")
        if not bucket:
            raise ValueError("flight-select: option 'prefix' must be bucket/key-prefix")
        page_size = int(options.get("listpagesize", "1000"))
        if page_size < 1:
            raise ValueError("flight-select: 'listPageSize' must be positive")
        return cls(
            connection=connection_options(options),
            bucket=bucket,
            prefix=prefix,
            columns=split_columns(options.get("columns")),
            where=options.get("where") or None,
            max_files=_positive(options, "maxfilespertrigger"),
            max_bytes=_positive(options, "maxbytespertrigger"),
            page_size=page_size,
            start_after=options.get("startafter", ""),
        )


def _positive(options: dict[str, str], name: str) -> int | None:
    if not options.get(name):
        return None
    value = int(options[name])
    if value < 1:
        raise ValueError(f"flight-select: {name} must be positive")
    return value


@dataclass(frozen=True)
class ListedObject:
    """One object found by the list step."""

    key: str
    size: int


def list_page(
    client: FlightSelectClient, options: StreamOptions, after: str, limit: int
) -> list[ListedObject]:
    """Up to ``limit`` objects under the prefix whose keys sort after ``after``, in key order,
    with their sizes: one ``ListObjects`` page, so a trigger never re-lists the bucket."""
    page = client.list_objects_page(options.bucket, options.prefix, after, limit)
    return [ListedObject(o.key, o.size) for o in page.objects]


def stream_schema(options: dict[str, str]) -> StructType:
    """The schema of the first object under the prefix (pruned by ``columns``)."""
    parsed = StreamOptions.parse(options)
    with FlightSelectClient(parsed.connection) as client:
        first = list_page(client, parsed, parsed.start_after, 1)
        if not first:
            raise ValueError(
                f"flight-select: no object under {parsed.bucket}/{parsed.prefix} to take a "
                "schema from; give one with .schema(...)"
            )
        table = pushdown.quote_table(parsed.bucket, first[0].key)
        schema = client.execute(f"SELECT * FROM {table}").schema
    if parsed.columns is not None:
        schema = project(schema, parsed.columns)
    return spark_schema(schema)


class FetchPartition(EndpointPartition):
    """Endpoints of the batch's objects that one task reads, and each one's object key."""

    def __init__(self, value: str, keys: Sequence[str]) -> None:
        super().__init__(value, by_position=True)
        self.keys = list(keys)


def _limits(default_files: int | None, default_bytes: int | None,
            limit: ReadLimit) -> tuple[int | None, int | None]:
    """(max files, max bytes) for one trigger; ReadAllAvailable lifts both."""
    if isinstance(limit, ReadAllAvailable):
        return None, None
    if isinstance(limit, ReadMaxFiles):
        return limit.max_files, default_bytes
    if isinstance(limit, ReadMaxBytes):
        return default_files, limit.max_bytes
    if isinstance(limit, ReadMaxRows):  # rows are unknown before fetching: one object
        return 1, default_bytes
    return default_files, default_bytes


class FlightSelectStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The list step on the driver, the fetch step on executors.

    Nothing a query pushes lives here: a stream reader has no ``pushFilters`` and ``where`` is
    an option of the relation. That matters because PySpark 4.3.0 stores the read function on
    the relation and every streaming query started from one DataFrame reads with it; ``read()``
    uses only the options and the schema, which are the same for all of them.

    Args:
        options: the data source options.
        schema: the stream's schema; its columns are the projection sent to the server.
    """

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = StreamOptions.parse(options)
        self.schema = schema
        self._buffer: list[ListedObject] = []
        self._buffer_end: str | None = None  # last key the buffer's listing reached
        self._available_now = False
        self._target: str | None = None  # AvailableNow: admit nothing after this key

    # ------------------------------------------------------------------ offsets
    def initialOffset(self) -> Offset:
        return {"v": OFFSET_VERSION, "after": self.options.start_after, "batch": []}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_files is not None:
            return ReadMaxFiles(self.options.max_files)
        if self.options.max_bytes is not None:
            return ReadMaxBytes(self.options.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Admit only what exists now (the target is fixed at the first ``latestOffset``)."""
        self._available_now = True

    def latestOffset(self, start: Offset, limit: ReadLimit) -> Offset:
        after = str(start["after"])
        with FlightSelectClient(self.options.connection) as client:
            if self._available_now and self._target is None:
                self._target = self._last_key(client, after)
                log.info("AvailableNow: reading up to %r", self._target)
            max_files, max_bytes = _limits(self.options.max_files, self.options.max_bytes, limit)
            admitted = self._admit(client, after, max_files, max_bytes)
        if not admitted:
            return start
        return {
            "v": OFFSET_VERSION,
            "after": admitted[-1].key,
            "batch": [[o.key, o.size] for o in admitted],
        }

    def _last_key(self, client: FlightSelectClient, after: str) -> str:
        last = after
        while True:
            page = list_page(client, self.options, last, self.options.page_size)
            if not page:
                return last
            last = page[-1].key

    def _candidates(self, client: FlightSelectClient, after: str) -> Iterator[ListedObject]:
        """Objects after ``after`` in key order: the buffer first, then page by page; a short
        page ends the listing for this trigger."""
        if self._buffer_end is None or self._buffer_end < after:  # first call, or a restart
            self._buffer, self._buffer_end = [], after
        self._buffer = [o for o in self._buffer if o.key > after]
        index = 0
        done = False
        while True:
            while index < len(self._buffer):
                yield self._buffer[index]
                index += 1
            if done:
                return
            listed = list_page(client, self.options, self._buffer_end, self.options.page_size)
            done = len(listed) < self.options.page_size
            if not listed:
                return
            self._buffer_end = listed[-1].key
            self._buffer += listed

    def _admit(self, client: FlightSelectClient, after: str, max_files: int | None,
               max_bytes: int | None) -> list[ListedObject]:
        admitted: list[ListedObject] = []
        total = 0
        for candidate in self._candidates(client, after):
            if self._target is not None and candidate.key > self._target:
                break
            if max_files is not None and len(admitted) >= max_files:
                break
            size = max(candidate.size, 0)
            if max_bytes is not None and admitted and total + size > max_bytes:
                break
            admitted.append(candidate)
            total += size
        return admitted

    # ------------------------------------------------------------------ fetch
    def partitions(self, start: Offset,  # noqa: ARG002 - DataSourceStreamReader.partitions
                   end: Offset) -> Sequence[InputPartition]:
        """The batch's objects planned, their endpoints packed into a task per server core
        (per node; a Python task costs about 30 ms, see ``spark_common.task_groups``).

        ``start`` is in PySpark's signature; ``end`` alone lists the batch's objects."""
        fetched: list[tuple[str, Endpoint]] = []
        about: PlanDescription | None = None
        with FlightSelectClient(self.options.connection) as client:
            for key, _ in end.get("batch", []):
                try:
                    plan = client.execute(self.statement(client, key))
                except RemoteQueryError as exc:
                    if exc.code not in _GONE:
                        raise
                    self._skipped(key, exc)
                    continue
                about = about or plan.about
                fetched += [(key, e) for e in plan.endpoints]
        tasks = spark_tasks(about or PlanDescription(), [e for _, e in fetched],
                            self.options.connection.parallelism)
        return [FetchPartition(FetchPartition.value_of([e for _, e in group]),
                               [key for key, _ in group])
                for group in task_groups(fetched, tasks)]

    def _skipped(self, key: str, exc: RemoteQueryError) -> None:
        log.warning("skipping %s/%s: deleted before it was fetched (%s)",
                    self.options.bucket, key, exc.code)

    def statement(self, client: FlightSelectClient, key: str) -> str:
        """The fetch statement of one object: the stream's columns and ``where``."""
        table = pushdown.quote_table(self.options.bucket, key)
        server = client.execute(f"SELECT * FROM {table}").schema
        refs = spark_filters.column_refs(server, self.schema)
        sql = pushdown.build_query(self.options.bucket, key,
                                   [refs[f.name].ref for f in self.schema.fields])
        if self.options.where:
            sql += f" WHERE ({self.options.where})"
        return sql

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FetchPartition)
        target = to_arrow_schema(self.schema, timezone="UTC")
        gone: set[str] = set()

        def skip(index: int, exc: RemoteQueryError) -> bool:
            """An object deleted before it was fetched is skipped, the task's others read."""
            if exc.code not in _GONE:
                return False
            key = partition.keys[index]
            if key not in gone:
                gone.add(key)
                self._skipped(key, exc)
            return True

        yield from read_endpoints(self.options.connection, partition, target, skip)

    def commit(self, end: Offset) -> None:
        self._buffer = [o for o in self._buffer if o.key > str(end["after"])]

    def stop(self) -> None:
        self._buffer = []

