"""Whether the server's data answers: every bucket lists, every Iceberg catalog lists its
namespaces. What ``/readyz`` asks (``flight_storage.rpc.operations_http``)."""

from __future__ import annotations

from flight_storage.errors import StorageError
from flight_storage.storage.catalog import Catalog
from flight_storage.storage.iceberg_catalog import IcebergCatalogs


def unreachable(catalog: Catalog, iceberg: IcebergCatalogs | None = None) -> str | None:
    """None when every bucket and catalog answers, else the first that does not and why.

    A bucket answers when the first page of its listing comes back (one request to an object
    store; a folder's first entry); a catalog when it lists its namespaces.
    """
    try:
        names = catalog.buckets()
    except StorageError as exc:
        return f"the bucket list: {exc}"
    for name in names:
        try:
            next(iter(catalog.store(name).list("")), None)
        except StorageError as exc:
            return f"bucket {name}: {exc}"
    if iceberg is None:
        return None
    for name in iceberg.names():
        try:
            iceberg.catalog(name).list_namespaces()
        except Exception as exc:  # noqa: BLE001 - pyiceberg and its catalogs raise their own types
            return f"Iceberg catalog {name}: {type(exc).__name__}: {exc}"
    return None
