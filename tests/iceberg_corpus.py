"""A generated corpus of Apache Iceberg tables, written by pyiceberg, for the Iceberg tests.

Every table is made through pyiceberg's own SQL catalog (SQLite) with a warehouse in a folder
(``file://``) or in an object store (``s3://``, through pyarrow's S3 file system), so the
server meets what a user's writer leaves behind:

| table | what it covers |
|---|---|
| ``events`` | day(ts) partitions, three appends, then schema evolution: a rename, an added column, int -> long, float -> double and decimal(9,2) -> decimal(18,2) promotions, and an append after them |
| ``parts`` | identity(region), bucket(4, id), truncate(2, name) and month(d) partitions |
| ``big`` | one data file of several row groups (split into endpoints by row groups) |
| ``deletes`` | a v2 table of two data files, a positional delete file deleting two rows of one |
| ``eqdeletes`` | a v2 table with an equality delete file (pyiceberg refuses it; so does the server) |
| ``empty`` | a table with no snapshot yet |
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

NAMESPACE = "corpus"


@dataclass
class Corpus:
    """The written corpus: its catalog and, per table, the snapshot ids in commit order."""

    catalog: Any
    snapshots: dict[str, list[int]] = field(default_factory=dict)

    def table(self, name: str) -> Any:
        return self.catalog.load_table(f"{NAMESPACE}.{name}")


def sql_catalog(name: str, database: str, warehouse: str,
                properties: Mapping[str, str] | None = None) -> Any:
    """pyiceberg's SQL catalog ``name`` in the SQLite file ``database``."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(name, uri=f"sqlite:///{database}", warehouse=warehouse,
                      **dict(properties or {}))


def _events_batch(start: int, rows: int) -> pa.Table:
    base = dt.datetime(2024, 1, 1)
    return pa.table({
        "id": pa.array(range(start, start + rows), pa.int64()),
        "ts": pa.array([base + dt.timedelta(hours=7 * i) for i in range(start, start + rows)],
                       pa.timestamp("us")),
        "name": pa.array([f"user{i % 13}" for i in range(start, start + rows)]),
        "score": pa.array([i % 50 for i in range(start, start + rows)], pa.int32()),
        "ratio": pa.array([(i % 8) / 4 for i in range(start, start + rows)], pa.float32()),
        "price": pa.array([Decimal(i * 37 % 10_000) / 100 for i in range(start, start + rows)],
                          pa.decimal128(9, 2)),
    })


def write_corpus(catalog: Any) -> Corpus:
    """Write every table of the corpus into ``catalog`` (namespace ``corpus``)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
    )
    from pyiceberg.types import (
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
    )

    catalog.create_namespace(NAMESPACE)
    corpus = Corpus(catalog)

    events_schema = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType()),
        NestedField(3, "name", StringType()), NestedField(4, "score", IntegerType()),
        NestedField(5, "ratio", FloatType()), NestedField(6, "price", DecimalType(9, 2)))
    events = catalog.create_table(
        f"{NAMESPACE}.events", events_schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")))
    ids: list[int] = []
    for start in (0, 60, 120):
        events.append(_events_batch(start, 60))
        ids.append(events.current_snapshot().snapshot_id)
    with events.update_schema() as update:
        update.rename_column("name", "user_name")
        update.add_column("note", StringType())
        update.update_column("score", LongType())
        update.update_column("ratio", DoubleType())
        update.update_column("price", DecimalType(18, 2))
    events = catalog.load_table(f"{NAMESPACE}.events")
    later = _events_batch(180, 40)
    later = pa.table({"id": later["id"], "ts": later["ts"], "user_name": later["name"],
                      "score": later["score"].cast(pa.int64()),
                      "ratio": later["ratio"].cast(pa.float64()),
                      "price": later["price"].cast(pa.decimal128(18, 2)),
                      "note": pa.array([f"n{i}" if i % 3 else None for i in range(40)])})
    events.append(later)
    ids.append(events.current_snapshot().snapshot_id)
    corpus.snapshots["events"] = ids

    parts_schema = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "region", StringType()),
        NestedField(3, "name", StringType()), NestedField(4, "d", DateType()),
        NestedField(5, "amount", DoubleType()))
    spec = PartitionSpec(
        PartitionField(2, 1000, IdentityTransform(), "region"),
        PartitionField(1, 1001, BucketTransform(4), "id_bucket"),
        PartitionField(3, 1002, TruncateTransform(2), "name_trunc"),
        PartitionField(4, 1003, MonthTransform(), "d_month"))
    parts = catalog.create_table(f"{NAMESPACE}.parts", parts_schema, partition_spec=spec)
    rows = 400
    parts.append(pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "region": pa.array([("east", "west", "north")[i % 3] for i in range(rows)]),
        "name": pa.array([f"{'abcd'[i % 4]}{'xyz'[i % 3]}-{i}" for i in range(rows)]),
        "d": pa.array([dt.date(2024, 1 + i % 6, 1 + i % 28) for i in range(rows)], pa.date32()),
        "amount": pa.array([i * 1.25 for i in range(rows)], pa.float64()),
    }))
    corpus.snapshots["parts"] = [parts.current_snapshot().snapshot_id]

    big_schema = Schema(NestedField(1, "k", LongType()), NestedField(2, "v", StringType()))
    big = catalog.create_table(f"{NAMESPACE}.big", big_schema,
                               properties={"write.parquet.row-group-limit": "20000"})
    big.append(pa.table({"k": pa.array(range(200_000), pa.int64()),
                         "v": pa.array([f"value {i:07d}" for i in range(200_000)])}))
    corpus.snapshots["big"] = [big.current_snapshot().snapshot_id]

    catalog.create_table(f"{NAMESPACE}.empty", big_schema)
    corpus.snapshots["empty"] = []

    _write_deletes(catalog, corpus, big_schema)
    return corpus


def _write_deletes(catalog: Any, corpus: Corpus, schema: Any) -> None:
    _write_delete_file(catalog, corpus, schema, "deletes", positional=True)
    _write_delete_file(catalog, corpus, schema, "eqdeletes", positional=False)


def _write_delete_file(catalog: Any, corpus: Corpus, schema: Any, name: str, *,
                       positional: bool) -> None:
    """A v2 table of two data files (k 0-9 and 10-19) whose last snapshot adds a delete file:
    positional (rows 3 and 5 of the first file) or equality (k = 3 or 5). pyiceberg writes no
    delete files itself: this one is written as the spec says (``file_path`` and ``pos`` with
    their reserved field ids, or the equality column with its own) and committed with a fast
    append, which pyiceberg's planner reads by each file's content."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    table = catalog.create_table(f"{NAMESPACE}.{name}", schema,
                                 properties={"format-version": "2"})
    table.append(pa.table({"k": pa.array(range(10), pa.int64()),
                           "v": pa.array([f"v{i}" for i in range(10)])}))
    data_path = next(iter(table.scan().plan_files())).file.file_path
    table.append(pa.table({"k": pa.array(range(10, 20), pa.int64()),  # a file it spares
                           "v": pa.array([f"v{i}" for i in range(10, 20)])}))
    delete_path = data_path.rsplit("/", 1)[0] + f"/{name}-00001.parquet"
    deletes = pa.table({
        "file_path": pa.array([data_path, data_path]),
        "pos": pa.array([3, 5], pa.int64()),
    }, schema=pa.schema([
        pa.field("file_path", pa.string(), nullable=False,
                 metadata={"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
    ]))
    if not positional:  # rows whose k is 3 or 5 (field id 1)
        deletes = pa.table({"k": pa.array([3, 5], pa.int64())}, schema=pa.schema([
            pa.field("k", pa.int64(), metadata={"PARQUET:field_id": "1"})]))
    io = table.io
    with io.new_output(delete_path).create(overwrite=True) as out:
        pq.write_table(deletes, out)
    size = io.new_input(delete_path).__len__()
    delete_file = DataFile.from_args(
        content=(DataFileContent.POSITION_DELETES if positional
                 else DataFileContent.EQUALITY_DELETES),
        file_path=delete_path, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=2, file_size_in_bytes=size,
        equality_ids=None if positional else [1])
    delete_file.spec_id = 0
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(delete_file)
    corpus.snapshots[name] = [s.snapshot_id for s in catalog.load_table(
        f"{NAMESPACE}.{name}").snapshots()]


def write_files_table(catalog: Any, name: str, files: int = 5, rows: int = 1000) -> list[str]:
    """Table ``name`` (namespace ``corpus``, created if absent) of one column ``k`` appended
    ``files`` times, ``rows`` consecutive values each (one data file per append); its data
    files' paths in append order."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    if (NAMESPACE,) not in [tuple(n) for n in catalog.list_namespaces()]:
        catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.{name}", Schema(NestedField(1, "k", LongType())))
    paths: list[str] = []
    for n in range(files):
        table.append(pa.table({"k": pa.array(range(n * rows, (n + 1) * rows), pa.int64())}))
        paths += [t.file.file_path for t in table.scan().plan_files()
                  if t.file.file_path not in paths]
    return paths
