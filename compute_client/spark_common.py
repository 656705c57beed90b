"""What the batch and streaming Spark sources share: connection options, schemas, packing
endpoints into Spark tasks and reading them into Spark's Arrow schema.

Its own module so that :mod:`compute_client.spark_source` (batch) and
:mod:`compute_client.spark_stream` (streaming) both depend on it and not on each other.
Hand-written: PySpark's Python Data Source API leaves option parsing and schema conformance
to each source.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from compute_client.errors import RemoteQueryError
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient
from flight_storage.protocol import PlanDescription

T = TypeVar("T")


def connection_options(options: dict[str, str]) -> ConnectionOptions:
    """The connection part of the options (shared by batch and streaming; names in lower
    case). ``parallelism`` asks the server for that many endpoints per object
    (``x-flight-select-parallelism``): the Spark tasks one object's rows can spread over."""
    location = options.get("location")
    if not location:
        raise ValueError("flight-select: option 'location' is required")
    certs = options.get("tls_root_certs")
    tls_root_certs = None
    if certs:
        with open(certs, "rb") as pem:
            tls_root_certs = pem.read()
    return ConnectionOptions(
        location=location,
        flavor=options.get("flavor"),
        username=options.get("username"),
        password=options.get("password"),
        tls_root_certs=tls_root_certs,
        timeout_s=float(options["timeout"]) if options.get("timeout") else None,
        parallelism=positive_option(options, "parallelism"),
    )


def positive_option(options: dict[str, str], name: str) -> int | None:
    """A positive whole-number option (None when absent; Spark passes every option as text).

    Raises:
        ValueError: the option is there but not a whole number >= 1 (the message names it).
    """
    text = options.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"flight-select: option {name!r} must be a whole number >= 1, "
                         f"not {text!r}")
    return value


def split_columns(text: str | None) -> tuple[str, ...] | None:
    """The ``columns`` option as a tuple (None when absent)."""
    if not text:
        return None
    return tuple(c.strip() for c in text.split(",") if c.strip())


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema of a server result (every column nullable)."""
    return from_arrow_schema(pa.schema([f.with_nullable(True) for f in arrow_schema]))


def project(schema: pa.Schema, columns: Sequence[str]) -> pa.Schema:
    """``columns`` of ``schema`` (exact name, else the one case-insensitive match)."""
    fields = []
    for name in columns:
        index = schema.get_field_index(name)
        if index < 0:
            matches = [f for f in schema if f.name.lower() == name.lower()]
            if len(matches) != 1:
                raise ValueError(
                    f"flight-select: column {name!r} is not in the server's schema "
                    f"({', '.join(schema.names)})"
                )
            fields.append(matches[0])
        else:
            fields.append(schema.field(index))
    return pa.schema(fields)


class EndpointPartition(InputPartition):
    """The Flight endpoints one Spark task reads, in order (a JSON list of
    :meth:`~compute_client.flight.Endpoint.to_json`).

    ``by_position``: the statement's projection is the Spark schema in order, so columns map
    by position (their server names may be ``_N``).
    """

    def __init__(self, value: str, by_position: bool) -> None:
        super().__init__(value)
        self.by_position = by_position

    @staticmethod
    def value_of(endpoints: Sequence[Endpoint]) -> str:
        """The partition value naming ``endpoints``."""
        return json.dumps([e.to_json() for e in endpoints])

    def endpoints(self) -> list[Endpoint]:
        """The endpoints this task reads, in order."""
        return [Endpoint.from_json(e) for e in json.loads(self.value)]


def task_groups(items: Sequence[T], tasks: int | None) -> list[list[T]]:
    """``items`` (endpoints) cut into at most ``tasks`` runs of consecutive items, as even as
    can be (None or more tasks than items: one item each).

    PySpark runs each task of a Python data source through its Python worker at a fixed cost
    (about 30 ms of wall clock per task on 2 cores in PySpark 4.3.0, measured with a source
    that yields one row per task), so a task per endpoint pays it once per endpoint; a task
    per server core pays it once per core and still keeps every core of the server busy.
    """
    count = len(items)
    if tasks is None or tasks >= count:
        return [[item] for item in items]
    tasks = max(1, tasks)
    size, extra = divmod(count, tasks)
    groups, start = [], 0
    for i in range(tasks):
        stop = start + size + (1 if i < extra else 0)
        groups.append(list(items[start:stop]))
        start = stop
    return groups


def spark_tasks(about: PlanDescription, endpoints: Sequence[Endpoint],
                requested: int | None) -> int | None:
    """How many Spark tasks read ``endpoints``: ``requested``, else the cores the server
    computes on (its plan's ``about.cores``) times the nodes the endpoints name; None:
    one per endpoint (a server that does not say)."""
    if requested is not None:
        return requested
    cores = about.cores
    if cores is None or cores < 1:
        return None
    nodes = {e.locations[0] if e.locations else "" for e in endpoints}
    return cores * max(1, len(nodes))


def read_endpoints(
    connection: ConnectionOptions, partition: EndpointPartition, target: pa.Schema,
    skip: Callable[[int, RemoteQueryError], bool] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream a task's endpoints one after another, conformed to ``target`` (Spark's Arrow
    schema), over one connection. ``skip(i, error)``: True goes on with the next endpoint
    after endpoint ``i`` failed with ``error``; without it (or False) the error is raised."""
    with FlightSelectClient(connection) as client:
        for i, endpoint in enumerate(partition.endpoints()):
            try:
                for batch in client.read(endpoint):
                    yield conform(batch, target, by_position=partition.by_position)
            except RemoteQueryError as exc:
                if skip is None or not skip(i, exc):
                    raise


def _cast(column: pa.Array, target: pa.DataType) -> pa.Array:
    if column.type == target:
        return column
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target):
        # Spark holds microseconds; finer server timestamps are truncated, as Spark would.
        return column.cast(target, safe=False)
    return column.cast(target)


def conform(batch: pa.RecordBatch, schema: pa.Schema, *, by_position: bool) -> pa.RecordBatch:
    """Spark needs its own Arrow schema exactly: names, order, types, nullability."""
    columns: list[pa.Array] = []
    for index, target in enumerate(schema):
        position = index if by_position else batch.schema.get_field_index(target.name)
        if position < 0:
            position = index
        columns.append(_cast(batch.column(position), target.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
