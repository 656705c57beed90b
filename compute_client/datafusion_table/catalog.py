"""Remote tables and catalogs registered in a DataFusion ``SessionContext``.

``register_flight_table`` names one object or prefix; ``register_flight_catalog`` exposes
servers as a catalog whose schemas are buckets and whose tables open when a query names them
(DataFusion's Python ``CatalogProvider``/``SchemaProvider``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from datafusion.catalog import CatalogProvider, SchemaProvider, Table

from compute_client.datafusion_table.dataset import FlightDataset, RemoteTable
from compute_client.flight import ConnectionOptions, FlightSelectClient


def connection_options(location: str, **options: Any) -> ConnectionOptions:
    """``ConnectionOptions`` from keyword options; PEM options may be file paths.

    Options: ``flavor``, ``username``, ``password``, ``tls_root_certs``, ``cert_chain``,
    ``private_key`` (bytes or a path), ``timeout_s``, ``headers``.
    """
    for name in ("tls_root_certs", "cert_chain", "private_key"):
        value = options.get(name)
        if isinstance(value, (str, Path)):
            options[name] = Path(value).read_bytes()
    return replace(ConnectionOptions(location), **options)


def register_flight_table(ctx: Any, name: str, location: str, table: str,
                          schema: pa.Schema | Mapping[str, Any] | None = None,
                          **options: Any) -> FlightDataset:
    """Register the remote object or prefix ``table`` (``bucket/key``) as ``name`` in ``ctx``.

    Args:
        ctx: a ``datafusion.SessionContext``.
        name: the table name in DataFusion SQL.
        location: the server, e.g. ``grpc://127.0.0.1:8815`` (``grpc+tls://`` for TLS).
        table: ``bucket/key`` of an object (or ``bucket/prefix/``).
        schema: declared column types (a schema or ``{column: type}``), cast on the client;
            CSV columns are strings on the server otherwise.
        **options: see :func:`connection_options` (auth, TLS, timeout, flavour).

    Returns:
        The dataset; its :attr:`FlightDataset.scans` tell what each query pushed and received.

    Example:
        >>> register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815",
        ...                       "sales/orders/2024-01.csv")  # doctest: +SKIP
        >>> ctx.sql("SELECT count(*) FROM orders").collect()  # doctest: +SKIP
    """
    bucket, _, key = table.partition("/")
    if not key:
        raise ValueError(f"table must be bucket/key, got {table!r}")
    dataset = FlightDataset(RemoteTable(connection_options(location, **options), bucket, key),
                            schema)
    ctx.register_dataset(name, dataset)
    return dataset


class FlightSchema(SchemaProvider):
    """One bucket as a DataFusion schema; tables (objects) are opened when a query names them.

    Attributes:
        datasets: the tables opened so far, by name.
    """

    def __init__(self, connection: ConnectionOptions, bucket: str,
                 schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None) -> None:
        self.connection = connection
        self.bucket = bucket
        self.schemas = dict(schemas or {})
        self.datasets: dict[str, FlightDataset] = {}

    def table_names(self) -> set[str]:
        with FlightSelectClient(self.connection) as client:
            return set(client.list_objects(self.bucket))

    def table(self, name: str) -> Table:
        dataset = self.datasets.get(name)
        if dataset is None:
            dataset = FlightDataset(RemoteTable(self.connection, self.bucket, name),
                                    self.schemas.get(name))
            self.datasets[name] = dataset
        return Table(dataset)

    def table_exist(self, name: str) -> bool:
        return name in self.table_names()


class FlightCatalog(CatalogProvider):
    """One or more storage servers as a DataFusion catalog whose schemas are buckets.

    A bucket found on several servers is read from the first that lists it.
    """

    def __init__(self, connections: Sequence[ConnectionOptions],
                 schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None) -> None:
        self.connections = list(connections)
        self.schemas = dict(schemas or {})
        self._buckets: dict[str, FlightSchema] | None = None

    def _bucket_map(self) -> dict[str, FlightSchema]:
        if self._buckets is None:
            found: dict[str, FlightSchema] = {}
            for connection in self.connections:
                with FlightSelectClient(connection) as client:
                    for bucket in client.list_buckets():
                        if bucket not in found:
                            prefix = f"{bucket}/"
                            declared = {k[len(prefix):]: v for k, v in self.schemas.items()
                                        if k.startswith(prefix)}
                            found[bucket] = FlightSchema(connection, bucket, declared)
            self._buckets = found
        return self._buckets

    def schema_names(self) -> set[str]:
        return set(self._bucket_map())

    def schema(self, name: str) -> Any:
        return self._bucket_map().get(name)

    def dataset(self, bucket: str, key: str) -> FlightDataset | None:
        """The dataset of ``bucket/key`` once a query has opened it."""
        schema = self._bucket_map().get(bucket)
        return schema.datasets.get(key) if schema is not None else None


def register_flight_catalog(ctx: Any, name: str, locations: str | Sequence[str],
                            schemas: Mapping[str, pa.Schema | Mapping[str, Any]] | None = None,
                            **options: Any) -> FlightCatalog:
    """Register one or more servers as catalog ``name``: ``name.bucket."key"`` in SQL.

    Args:
        ctx: a ``datafusion.SessionContext``.
        name: the catalog name.
        locations: one server location or several.
        schemas: declared types per table, keyed ``bucket/key``.
        **options: see :func:`connection_options` (shared by every server).

    Example:
        >>> register_flight_catalog(ctx, "store", "grpc://127.0.0.1:8815")  # doctest: +SKIP
        >>> ctx.sql('SELECT count(*) FROM store.sales."orders/2024-01.csv"')  # doctest: +SKIP
    """
    if isinstance(locations, str):
        locations = [locations]
    catalog = FlightCatalog([connection_options(loc, **dict(options)) for loc in locations],
                            schemas)
    ctx.register_catalog_provider(name, catalog)
    return catalog

