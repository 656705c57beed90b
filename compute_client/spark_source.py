"""PySpark Python Data Source ``flight-select``: the Flight endpoints packed into a Spark
partition per server core.

    spark = local_session("example")     # or register(spark) on a session of your own
    df = (spark.read.format("flight-select")
          .option("location", "grpc://127.0.0.1:8815")
          .option("table", "sales/orders/2024-01.csv")
          .load()
          .where("status = 'delivered'"))   # evaluated by the storage server

Batch options:

| option | meaning |
|---|---|
| ``location`` | ``grpc://host:port`` or ``grpc+tls://host:port`` (required) |
| ``table`` | the object, ``bucket/key`` |
| ``query`` | instead of ``table``: a raw statement (GROUP BY too, standard flavour); no filter pushed |
| ``group_by``, ``aggregates`` | with ``table``: group on the server (``group_by`` comma-separated columns, ``aggregates`` SQL such as ``count(*) AS n``); read like ``query`` |
| ``columns`` | comma-separated projection (column pruning; a user schema prunes too) |
| ``flavor`` | ``standard`` (the server's default), ``ceph`` or ``aws`` |
| ``filter_pushdown`` | ``true`` (default); ``false``: Spark filters every row (no JDK, see below) |
| ``num_partitions`` | Spark partitions the endpoints are packed into (default: ``parallelism`` when set, else the cores the server says it computes on, per node; never more than the endpoints) |
| ``parallelism`` | endpoints wanted per object (header ``x-flight-select-parallelism``): the server cuts it into up to that many byte ranges of at least 1 MiB (default: sized by work, 64 MiB and up, which suits most jobs); for more executors than the data would otherwise feed, e.g. ``spark.sparkContext.defaultParallelism`` (the source's planning runs in a Python worker that cannot read it itself) |
| ``username``, ``password`` | Basic credentials, exchanged for a bearer token |
| ``tls_root_certs`` | path of a PEM file with the CA to trust |
| ``timeout`` | per-call timeout in seconds |

Streaming (``spark.readStream.format("flight-select")``) is :mod:`compute_client.spark_stream`;
writing (``df.write.format("flight-select")``), :mod:`compute_client.spark_writer`.

Filters Spark offers are translated by :mod:`compute_client.spark_filters`, which pushes a filter
only when the server's answer is provably Spark's; the others are returned to Spark.

**Reusing a DataFrame (PySpark 4.3.0):** Spark keeps the read planned for the last query that
pushed filters on the relation one ``load()`` created, and would read with it in a later query
on that relation that pushes none (a plain ``count()``, a ``collect()``, a filter Spark cannot
offer such as an ``OR``): that query would see only the rows the earlier filters kept. Read off
the 4.3.0 classes: ``PythonScanBuilder.pushFilters`` calls Python only when a filter converts
(``UserDefinedPythonDataSource.pushdownFiltersInPython`` answers ``None`` otherwise) and then
stores the read function and partitions with ``PythonDataSourceV2.setReadInfo``;
``PythonBatch`` takes them from ``getOrCreateReadInfo``, which plans anew only while nothing is
stored, and nothing clears it. The planning worker receives the pickled source, the schema and
the filters, nothing that names the query, and the task receives the stored function and
partition, so the Python side alone cannot tell the query that pushed from a later one.
:func:`register` therefore installs a JVM optimizer rule (:mod:`compute_client.spark_reuse_guard`)
that clears a stored read no query of its own planned, and ``pushFilters`` returns every filter
to Spark while the server applies the pushed ones: each action reads its own rows and a
filtered action still receives only the matching rows (exact for actions run one after
another; two threads planning queries of one relation at the same moment can race, see the
rule's comment). The rule is compiled with the JDK's
``javac``; without one, :func:`register` warns, and a DataFrame reused across filtered and
unfiltered actions needs a ``load()`` per action or ``option("filter_pushdown", "false")``
(every read unfiltered; Spark filters, the server sends every row of the projection).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from compute_client import pushdown, spark_filters, spark_reuse_guard
from compute_client.flight import ConnectionOptions, FlightSelectClient
from compute_client.spark_common import (
    EndpointPartition,
    connection_options,
    positive_option,
    project,
    read_endpoints,
    spark_schema,
    spark_tasks,
    split_columns,
    task_groups,
)
from compute_client.spark_stream import FlightSelectStreamReader
from compute_client.spark_writer import FlightSelectWriter

SOURCE_NAME = "flight-select"
log = logging.getLogger(__name__)


def local_session(app_name: str, cores: int = 2, *, master: str | None = None,
                  config: Mapping[str, str] | None = None) -> SparkSession:
    """A Spark session on this machine bound to loopback whose Python workers run this
    interpreter, with the source registered and filter pushdown enabled.

    Args:
        app_name: the application's name.
        cores: local cores (``local[cores]``); also sizes the shuffle partitions.
        master: another master on this machine, e.g. ``local-cluster[2,1,1024]`` (executors
            in their own JVMs).
        config: further Spark settings.

    Example:
        >>> spark = local_session("example")  # doctest: +SKIP
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = (
        builder.master(master or f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Register the data source (batch and streaming) and turn on Python filter pushdown.

    A reader that implements ``pushFilters`` fails while
    ``spark.sql.python.filterPushdown.enabled`` is off (its default), hence the one call.
    """
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(FlightSelectDataSource)
    spark_reuse_guard.install(spark)


# ---------------------------------------------------------------------------- options
@dataclass(frozen=True)
class BatchOptions:
    """Parsed batch options: which object or query, which columns, and how to connect."""

    connection: ConnectionOptions
    bucket: str | None
    key: str | None
    query: str | None
    columns: tuple[str, ...] | None
    filter_pushdown: bool = True
    num_partitions: int | None = None

    @classmethod
    def parse(cls, options: dict[str, str]) -> BatchOptions:
        """Validate the options Spark passes (names are case-insensitive in Spark)."""
        options = {k.lower(): v for k, v in options.items()}
        table, query = options.get("table"), options.get("query")
        if (table is None) == (query is None):
            raise ValueError("flight-select: give exactly one of 'table' or 'query'")
        bucket = key = None
        if table is not None:
            bucket, _, key = table.partition("/")
            if not bucket or not key:
                raise ValueError("flight-select: 'table' must be bucket/key")
        if table is not None and ("group_by" in options or "aggregates" in options):
            assert bucket is not None
            assert key is not None
            query = pushdown.build_grouped_query(
                bucket, key, split_columns(options.get("group_by")) or (),
                options.get("aggregates", ""))
            bucket = key = None
        return cls(connection_options(options), bucket, key, query,
                   split_columns(options.get("columns")),
                   _flag(options, "filter_pushdown", default=True),
                   positive_option(options, "num_partitions"))

    def star_statement(self) -> str:
        """``SELECT *`` over the object (its full server schema)."""
        assert self.bucket is not None
        assert self.key is not None
        return f"SELECT * FROM {pushdown.quote_table(self.bucket, self.key)}"


def _flag(options: dict[str, str], name: str, *, default: bool) -> bool:
    """A ``true``/``false`` option (Spark passes every option as text)."""
    text = options.get(name)
    if text is None:
        return default
    value = {"true": True, "false": False}.get(text.strip().lower())
    if value is None:
        raise ValueError(f"flight-select: option {name!r} must be true or false, not {text!r}")
    return value


# ---------------------------------------------------------------------------- batch
class FlightSelectDataSource(DataSource):
    """Reads an object or a raw s3-select query from a flight-select server; also streams
    the objects under a prefix (see :mod:`compute_client.spark_stream`)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        options = dict(self.options)
        if _is_stream(options):
            from compute_client.spark_stream import stream_schema

            return stream_schema(options)
        parsed = BatchOptions.parse(options)
        with FlightSelectClient(parsed.connection) as client:
            if parsed.query is not None:
                return spark_schema(client.execute(parsed.query).schema)
            schema = client.execute(parsed.star_statement()).schema
        if parsed.columns is not None:
            schema = project(schema, parsed.columns)
        return spark_schema(schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return FlightSelectReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> Any:
        return FlightSelectStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> FlightSelectWriter:
        """``df.write.format("flight-select")``: see :mod:`compute_client.spark_writer`."""
        return FlightSelectWriter(dict(self.options), schema, overwrite)


def _is_stream(options: dict[str, str]) -> bool:
    return "prefix" in {k.lower() for k in options}


class FlightSelectReader(DataSourceReader):
    """Plans the pushed statement on the driver; each Flight endpoint becomes one partition.

    Lifecycle in PySpark 4.3.0 (traced): every planning pass unpickles the data source in a
    driver-side worker and calls ``reader(schema)`` for a new reader, then ``pushFilters`` (only
    when the query has a filter Spark can hand to Python) and ``partitions()`` on it, in that one
    process; the reader is then pickled into the read function, and each task unpickles its own
    copy to call ``read()``. Pushed state therefore never passes from one reader to another.
    What outlives a query is on the JVM side: the read function and partitions are stored on
    the relation and reused, without any call into Python, by a later query on it that pushes
    no filter; :mod:`compute_client.spark_reuse_guard` clears them (see the module docstring).

    Args:
        options: the data source options.
        schema: the schema Spark reads (the server's, or the user's: its columns are the
            projection).
    """

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = BatchOptions.parse(options)
        self.schema = schema
        self.filters: list[pushdown.Filter] = []
        self._refs: dict[str, spark_filters.ColumnRef] | None = None

    def _column_refs(self) -> dict[str, spark_filters.ColumnRef]:
        if self._refs is None:
            with FlightSelectClient(self.options.connection) as client:
                server = client.execute(self.options.star_statement()).schema
            self._refs = spark_filters.column_refs(server, self.schema)
        return self._refs

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Push every filter with an exact s3-select rendering; give the others back."""
        if self.options.query is not None or not self.options.filter_pushdown:
            yield from filters
            return
        pushed, rest = spark_filters.convert_all(filters, self._column_refs())
        self.filters.extend(pushed)
        log.debug("pushed %s, kept %s", pushed, rest)
        # Every filter goes back to Spark, the pushed ones too: the server still applies them
        # (the bytes saved), and Spark checks them again, so a query that ends up reading with
        # an unfiltered read (see spark_reuse_guard) still gets only its rows.
        yield from filters

    def statement(self) -> str:
        """The s3-select statement this reader sends."""
        if self.options.query is not None:
            return self.options.query
        assert self.options.bucket is not None
        assert self.options.key is not None
        refs = self._column_refs()
        projection = [refs[f.name].ref for f in self.schema.fields]
        return pushdown.build_query(self.options.bucket, self.options.key, projection,
                                    self.filters)

    def partitions(self) -> Sequence[InputPartition]:
        with FlightSelectClient(self.options.connection) as client:
            plan = client.execute(self.statement())
        by_position = self.options.query is None
        # asked for parallelism: a task per endpoint up to it (one per range), else per core
        tasks = spark_tasks(plan.about, plan.endpoints,
                            self.options.num_partitions or self.options.connection.parallelism)
        groups = task_groups(plan.endpoints, tasks)
        return [EndpointPartition(EndpointPartition.value_of(g), by_position) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, EndpointPartition)
        target = to_arrow_schema(self.schema, timezone="UTC")
        yield from read_endpoints(self.options.connection, partition, target)
