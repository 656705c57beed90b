"""PySpark Python Data Source ``flight-select``: one Spark partition per Flight endpoint.

    spark = ...
    register(spark)          # registers the source and enables filter pushdown
    df = (spark.read.format("flight-select")
          .option("location", "grpc://127.0.0.1:8815")
          .option("table", "sales/orders/2024-01.csv")
          .load())

Options: ``location`` (required), ``table`` (``bucket/key``) or ``query`` (a raw s3-select
statement, aggregates included), ``columns`` (comma-separated projection), ``flavor``,
``username``/``password``, ``tls_root_certs`` (a PEM file path), ``timeout``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from compute_client import pushdown
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient

SOURCE_NAME = "flight-select"

_COMPARISONS: dict[type, str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
_MATCHES: dict[type, str] = {
    StringStartsWith: "starts",
    StringEndsWith: "ends",
    StringContains: "contains",
}


def local_session(app_name: str, cores: int = 2) -> SparkSession:
    """A local Spark session whose Python workers run this interpreter, bound to loopback,
    with the source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Register the data source and turn on Python filter pushdown for this session."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(FlightSelectDataSource)


def _column(attribute: Sequence[str]) -> str:
    if len(attribute) != 1:
        raise pushdown.NotPushable("nested column")
    return attribute[0]


def spark_filter(f: Filter) -> pushdown.Filter:
    """Translate one Spark filter into the neutral tree, or raise ``NotPushable``."""
    kind = type(f)
    if kind in _COMPARISONS:
        return pushdown.Comparison(_column(f.attribute), _COMPARISONS[kind], f.value)
    if kind in _MATCHES:
        return pushdown.StringMatch(_column(f.attribute), _MATCHES[kind], f.value)
    if kind is In:
        return pushdown.InList(_column(f.attribute), tuple(f.value))
    if kind is IsNull:
        return pushdown.NullTest(_column(f.attribute), True)
    if kind is IsNotNull:
        return pushdown.NullTest(_column(f.attribute), False)
    if kind is Not:
        return pushdown.Not(spark_filter(f.child))
    raise pushdown.NotPushable(kind.__name__)


@dataclass(frozen=True)
class _Options:
    connection: ConnectionOptions
    bucket: str | None
    key: str | None
    query: str | None
    columns: tuple[str, ...] | None

    @classmethod
    def parse(cls, options: dict[str, str]) -> _Options:
        location = options.get("location")
        if not location:
            raise ValueError("flight-select: option 'location' is required")
        table, query = options.get("table"), options.get("query")
        if (table is None) == (query is None):
            raise ValueError("flight-select: give exactly one of 'table' or 'query'")
        bucket = key = None
        if table is not None:
            bucket, _, key = table.partition("/")
            if not key:
                raise ValueError("flight-select: 'table' must be bucket/key")
        certs = options.get("tls_root_certs")
        connection = ConnectionOptions(
            location=location,
            flavor=options.get("flavor", "ceph"),
            username=options.get("username"),
            password=options.get("password"),
            tls_root_certs=open(certs, "rb").read() if certs else None,
            timeout_s=float(options["timeout"]) if "timeout" in options else None,
        )
        columns = options.get("columns")
        return cls(
            connection,
            bucket,
            key,
            query,
            tuple(c.strip() for c in columns.split(",")) if columns else None,
        )

    def statement(self, columns: Sequence[str] | None,
                  filters: Sequence[pushdown.Filter]) -> str:
        if self.query is not None:
            return self.query
        assert self.bucket is not None and self.key is not None
        return pushdown.build_query(self.bucket, self.key, columns, filters)


class FlightSelectDataSource(DataSource):
    """Reads a table (object) or a raw s3-select query from a flight-select server."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        parsed = _Options.parse(dict(self.options))
        with FlightSelectClient(parsed.connection) as client:
            plan = client.execute(parsed.statement(parsed.columns, ()))
        return from_arrow_schema(plan.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return FlightSelectReader(dict(self.options), schema)


class FlightSelectReader(DataSourceReader):
    """Plans the pushed statement on the driver; each endpoint becomes one partition."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = _Options.parse(options)
        self.schema = schema
        self.pushed: list[pushdown.Filter] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Keep the filters that render exactly; give back the others to Spark."""
        if self.options.query is not None:
            yield from filters
            return
        for f in filters:
            try:
                node = spark_filter(f)
                pushdown.render_filter(node)
            except pushdown.NotPushable:
                yield f
                continue
            self.pushed.append(node)

    def statement(self) -> str:
        """The s3-select statement this reader sends."""
        columns = list(self.options.columns or self.schema.fieldNames())
        return self.options.statement(columns, self.pushed)

    def partitions(self) -> Sequence[InputPartition]:
        with FlightSelectClient(self.options.connection) as client:
            plan = client.execute(self.statement())
        return [_EndpointPartition(json.dumps(e.to_json())) for e in plan.endpoints]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _EndpointPartition)
        endpoint = Endpoint.from_json(json.loads(partition.value))
        target = to_arrow_schema(self.schema)
        with FlightSelectClient(self.options.connection) as client:
            for batch in client.read(endpoint):
                yield _conform(batch, target)


class _EndpointPartition(InputPartition):
    def __init__(self, value: str) -> None:
        super().__init__(value)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Spark needs its own schema exactly: names, order, types."""
    columns: list[Any] = []
    for index, target in enumerate(schema):
        position = batch.schema.get_field_index(target.name)
        column = batch.column(position if position >= 0 else index)
        if column.type != target.type:
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)
