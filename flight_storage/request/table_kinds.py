"""Which kind of table a statement reads, decided in one place.

A Flight SQL statement reads one of three kinds of table, each a frozen type (a tagged union,
as ``protocol/tickets.py``'s tickets are):

| type | the statement names | read by |
|---|---|---|
| :class:`ConstantTable` | no table (``SELECT 1``; a FROM without a name is refused later) | ``engine.plan_constant`` |
| :class:`BucketTable` | ``"bucket"."key"``, a one-part name, ``"bucket"."schema"."table"`` | ``tables.resolve_table``: one object or a prefix table (:class:`~flight_storage.request.tables.ResolvedTable`) |
| :class:`IcebergTable` | ``"catalog"."namespace"."table"``, ``"catalog"."namespace.table"`` | ``execution/iceberg_scan.py`` |

:func:`statement_table` is the one decider: the server calls it (``StorageServer.table_of``)
and hands the typed answer to the code of that kind, so GetFlightInfo, DoGet's check that a
ticket matches its statement, CreatePreparedStatement and GetTables' schemas cannot decide
differently. Whether a bucket's name is an object or a prefix is the catalog's to say
(``tables.resolve_table``); which of these three a name is, this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from flight_storage.errors import StorageError
from flight_storage.execution.iceberg_scan import IcebergTableName
from flight_storage.request.statement import TableReference, split_table_reference
from flight_storage.storage.catalog import Catalog
from flight_storage.storage.iceberg_catalog import IcebergCatalogs


@dataclass(frozen=True)
class ConstantTable:
    """A statement that names no table; ``sql`` is the statement itself."""

    KIND: ClassVar[str] = "constant"
    sql: str


@dataclass(frozen=True)
class BucketTable:
    """A statement over a bucket's table: one object or a prefix table (``resolve_table`` tells
    which). ``reference`` is already an object's name (``TableReference.as_object``): a
    three-part ``"bucket"."schema"."table"`` reads ``schema/table``; a one-part name is still
    unqualified (``reference.qualified``), resolved in the caller's session
    (``rpc/sessions.qualify``). ``sql`` reads ``stdin`` in its place (empty where the name
    is one of several a statement DataFusion plans names)."""

    KIND: ClassVar[str] = "bucket"
    reference: TableReference
    sql: str


@dataclass(frozen=True)
class IcebergTable:
    """A statement over a table of an Iceberg catalog (``reference.bucket`` the catalog,
    ``reference.key`` the namespace, ``reference.table`` the table); ``sql`` reads ``stdin``
    in its place."""

    KIND: ClassVar[str] = "iceberg"
    reference: TableReference
    sql: str

    @property
    def name(self) -> IcebergTableName:
        """The table and the snapshot the statement asks for."""
        reference = self.reference
        assert reference.table is not None  # statement_table makes only three-part ones
        return IcebergTableName(reference.bucket, reference.key, reference.table,
                                reference.version, reference.as_of)

    @property
    def key(self) -> str:
        """``namespace.table``: a ticket's key (its bucket is the catalog)."""
        return f"{self.reference.key}.{self.reference.table}"


StatementTable = ConstantTable | BucketTable | IcebergTable
"""What a statement reads: exactly one of these."""

def statement_table(query: str, catalogs: IcebergCatalogs, buckets: Catalog) -> StatementTable:
    """The table ``query`` reads, of its kind.

    A three-part name is an Iceberg table's unless its first part is no Iceberg catalog but a
    bucket of ``buckets`` (then ``"bucket"."schema"."table"``, a table of that bucket). Besides
    ``"catalog"."namespace"."table"``, a two-part name whose first part is a configured
    catalog, ``"catalog"."namespace.table"``, names an Iceberg table too (the last dot ends the
    namespace): the form clients that name a table as ``bucket/key`` send (the DataFusion and
    Spark sources: ``lake/sales.orders``).

    Raises:
        InvalidRequestError: the name is malformed, or asks a bucket's table for a snapshot
            (``FOR VERSION AS OF``).
    """
    reference, sql = split_table_reference(query)
    if reference is None:
        return ConstantTable(sql)
    return named_table(reference, sql, catalogs, buckets)


def named_table(reference: TableReference, sql: str, catalogs: IcebergCatalogs,
                buckets: Catalog) -> BucketTable | IcebergTable:
    """The table a name reads (:func:`statement_table`'s rule; a statement DataFusion plans
    over several tables asks it of each name, ``rpc/tables/sql.py``)."""
    if reference.is_iceberg:
        if reference.bucket in catalogs or not _is_bucket(buckets, reference.bucket):
            return IcebergTable(reference, sql)
        return BucketTable(reference.as_object(), sql)
    namespace, dot, table = reference.key.rpartition(".")
    if reference.bucket in catalogs and dot and namespace and table:
        return IcebergTable(TableReference(reference.bucket, namespace, None, table), sql)
    return BucketTable(reference, sql)


def _is_bucket(buckets: Catalog, name: str) -> bool:
    try:
        buckets.store(name)
    except StorageError:
        return False
    return True


def select_all(*name: str) -> str:
    """``SELECT * FROM "bucket"."key"`` (or ``"catalog"."namespace"."table"``): the statement
    whose columns describe a table (GetTables' ``table_schema`` plans it, so it answers what
    the statement would)."""
    def quoted(part: str) -> str:
        return '"' + part.replace('"', '""') + '"'

    return "SELECT * FROM " + ".".join(quoted(part) for part in name)
