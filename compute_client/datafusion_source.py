"""DataFusion tables that live on a flight-select storage server.

``register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815", "sales/orders/2024-01.csv")``
makes ``orders`` queryable with ordinary DataFusion SQL. Each Flight endpoint of the remote
statement becomes one DataFusion partition, read lazily when DataFusion pulls it.

DataFusion accepts a ``pyarrow.dataset.Dataset`` and duck-types ``schema``,
``scanner(columns=, filter=)``, ``get_fragments(filter)`` and
``fragment.scanner(...).to_batches()``; a filter it hands over is *Exact* (it will not re-check
it), so this dataset applies it to what the server returns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from compute_client import pushdown
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient

log = logging.getLogger("compute_client.datafusion")


@dataclass(frozen=True)
class RemoteTable:
    """Where a remote table lives."""

    connection: ConnectionOptions
    bucket: str
    key: str


class _EndpointScanner:
    def __init__(self, table: RemoteTable, endpoints: Sequence[Endpoint], schema: pa.Schema,
                 columns: Sequence[str] | None, filter: pc.Expression | None) -> None:
        self._table = table
        self._endpoints = endpoints
        self._schema = schema
        self._columns = list(columns) if columns is not None else None
        self._filter = filter
        self.projected_schema = (
            schema if columns is None else pa.schema([schema.field(c) for c in columns])
        )

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        with FlightSelectClient(self._table.connection) as client:
            for endpoint in self._endpoints:
                for batch in client.read(endpoint):
                    if self._filter is not None:
                        batch = batch.filter(self._filter)
                    if self._columns is not None:
                        batch = batch.select(self._columns)
                    if batch.num_rows:
                        yield batch

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())


class _EndpointFragment:
    def __init__(self, table: RemoteTable, endpoint: Endpoint, schema: pa.Schema) -> None:
        self._table = table
        self._endpoint = endpoint
        self._schema = schema

    def scanner(self, schema: pa.Schema | None = None, columns: Sequence[str] | None = None,
                filter: pc.Expression | None = None, **_: Any) -> _EndpointScanner:
        return _EndpointScanner(self._table, [self._endpoint], self._schema, columns, filter)


class FlightDataset(ds.Dataset):
    """A remote object as a dataset whose fragments are the server's endpoints."""

    def __init__(self, table: RemoteTable) -> None:
        self._table = table
        self._query = pushdown.build_query(table.bucket, table.key, None)
        with FlightSelectClient(table.connection) as client:
            self._plan = client.execute(self._query)

    @property
    def schema(self) -> pa.Schema:  # type: ignore[override]
        return self._plan.schema

    def get_fragments(self, filter: pc.Expression | None = None) -> Iterator[_EndpointFragment]:  # type: ignore[override]
        with FlightSelectClient(self._table.connection) as client:
            plan = client.execute(self._query)
        log.info("remote scan query=%s endpoints=%d", self._query, len(plan.endpoints))
        return iter([_EndpointFragment(self._table, e, self.schema) for e in plan.endpoints])

    def scanner(self, schema: pa.Schema | None = None, columns: Sequence[str] | None = None,  # type: ignore[override]
                filter: pc.Expression | None = None, **_: Any) -> _EndpointScanner:
        return _EndpointScanner(self._table, self._plan.endpoints, self.schema, columns, filter)


def register_flight_table(ctx: Any, name: str, location: str, table: str,
                          **options: Any) -> FlightDataset:
    """Register the remote object ``table`` (``bucket/key``) as ``name`` in ``ctx``.

    Args:
        ctx: a ``datafusion.SessionContext``.
        name: the table name in DataFusion SQL.
        location: the server, e.g. ``grpc://127.0.0.1:8815``.
        table: ``bucket/key`` of the object.
        **options: fields of :class:`~compute_client.flight.ConnectionOptions` (flavor, username,
            password, tls_root_certs, timeout_s, ...).

    Example:
        >>> register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815",
        ...                       "sales/orders/2024-01.csv")  # doctest: +SKIP
        >>> ctx.sql("SELECT count(*) FROM orders").collect()  # doctest: +SKIP
    """
    bucket, _, key = table.partition("/")
    if not key:
        raise ValueError(f"table must be bucket/key, got {table!r}")
    connection = replace(ConnectionOptions(location), **options)
    dataset = FlightDataset(RemoteTable(connection, bucket, key))
    ctx.register_dataset(name, dataset)
    return dataset
