"""Apache Iceberg tables: their data files planned with pruning, each endpoint read by our own
DataFusion.

Planning (:func:`plan_iceberg`), in GetFlightInfo:

1. the snapshot: the table's current one, or the one ``FOR VERSION AS OF n`` names, or the
   one current at ``FOR TIMESTAMP AS OF t``; the table's schema is that snapshot's;
2. the statement is translated for that schema (as a Parquet object's columns), and its
   WHERE becomes an Iceberg row filter where that is exact (``iceberg_filter.py``); what does
   not convert is left out, which only keeps more files;
3. pyiceberg's ``table.scan(row_filter=..., snapshot_id=...).plan_files()`` prunes by partition
   values (identity, day/month/year/hour, bucket, truncate) and by the manifests' column
   bounds and null counts, and gives the data files;
4. the files become ``files`` partitions (``protocol/tickets.py``: data file paths and the
   snapshot id, signed in the ticket): small files grouped, and, when there are fewer files
   than server cores, big files split by row groups (DataFusion's own file-scan partitions,
   as ``native_parquet.py`` splits one Parquet object), so a plan has an endpoint per core.

Execution (:func:`execute_iceberg`), in DoGet: each data file is registered in a DataFusion
session with DataFusion's Parquet reader (through the object store, or this machine's disk for a
``file://`` warehouse) and seen through a projection that maps the snapshot's schema onto the
file **by field id**: a renamed column is read under its old name, a column added after the
file was written reads as NULL, a promoted type (int to long, float to double, a wider decimal)
is cast. The statement, with its full WHERE, runs over the union of the files' projections.

Positional delete files (format v2) travel in the ticket beside their data file; a data file
with some is read whole in one DataFusion partition, numbered row by row in file order
(``row_number()`` below the statement's filter), and the deleted positions are left out by an
anti-join whose build side is the positions (so memory holds the deletes, not the data).
Equality delete files are not applied yet: a plan that meets one answers ``NotImplemented``
naming the table and the delete file, never rows that were deleted.

Hand-written: the field-id projection and the grouping of files into endpoints; pyiceberg
plans, DataFusion reads. pyiceberg's own DataFusion table provider is
not used: it is built against another DataFusion major.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flight_storage.errors import (
    InvalidRequestError,
    NotImplementedFeatureError,
    QueryExecutionError,
    StaleTicketError,
)
from flight_storage.execution.arrow_result import to_arrow_result
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.iceberg_filter import iceberg_row_filter
from flight_storage.execution.native_parquet import row_group_split, row_group_starts
from flight_storage.execution.plan_types import TABLE, PlannedPartition, SelectPlan
from flight_storage.execution.session import READ_ONLY, arrow_batches, new_session
from flight_storage.protocol import IcebergFiles, PlanDescription
from flight_storage.storage.iceberg_catalog import (
    IcebergCatalogs,
    check_present,
    data_file_location,
    iceberg_call,
    is_local,
    open_data_file,
)

MAX_FILES_PER_ENDPOINT = 64
"""Small data files grouped into one endpoint, at most (the ticket names each)."""
_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class IcebergTableName:
    """``"catalog"."namespace"."table"`` and the snapshot it asks for.

    Attributes:
        catalog: the configured catalog's name.
        namespace: the namespace, nested ones dotted.
        table: the table's name.
        version: ``FOR VERSION AS OF`` (a snapshot id), or None.
        as_of: ``FOR TIMESTAMP AS OF`` (ISO text), or None.
    """

    catalog: str
    namespace: str
    table: str
    version: int | None = None
    as_of: str | None = None

    @property
    def display(self) -> str:
        """How messages name the table."""
        return f"{self.catalog}.{self.namespace}.{self.table}"


@dataclass(frozen=True)
class IcebergPlan:
    """A planned statement over an Iceberg table.

    Attributes:
        name: the table.
        snapshot: the snapshot read (None: the table has none yet, so no rows).
        plan: the statement's plan (its partitions are ``files`` partitions).
        files: every data file the plan reads.
        pruned: data files of the snapshot that pruning left out (None: not counted).
        row_filter: the Iceberg row filter planning used (its text).
        field_ids: the snapshot schema's columns (:class:`ColumnIds`).
    """

    name: IcebergTableName
    snapshot: int | None
    plan: SelectPlan
    files: tuple[str, ...]
    pruned: int | None
    row_filter: str
    field_ids: ColumnIds

    @property
    def about(self) -> PlanDescription:
        """What FlightInfo's ``app_metadata`` says of the plan."""
        return PlanDescription(reader="datafusion", table="iceberg", snapshot=self.snapshot,
                               files=len(self.files), pruned_files=self.pruned,
                               row_filter=self.row_filter)


# ----------------------------------------------------------------------------- schemas


def arrow_schema(iceberg_schema: Any) -> pa.Schema:
    """The Arrow schema clients see for an Iceberg schema: plain (not large) strings, binaries
    and lists, every column nullable (a file may lack a required column's older spelling)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(iceberg_schema, include_field_ids=False)
    return pa.schema([pa.field(f.name, _plain(f.type), nullable=True) for f in schema])


def _plain(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type):
        return pa.binary()
    if isinstance(data_type, pa.ExtensionType):  # uuid: its 16 bytes
        return _plain(data_type.storage_type)
    if pa.types.is_large_list(data_type) or pa.types.is_list(data_type):
        value = data_type.value_field
        return pa.list_(value.with_type(_plain(value.type)))
    if pa.types.is_struct(data_type):
        return pa.struct([data_type.field(i).with_type(_plain(data_type.field(i).type))
                          for i in range(data_type.num_fields)])
    return data_type


# ----------------------------------------------------------------------------- planning


def plan_iceberg(engine: SelectEngine, catalogs: IcebergCatalogs, name: IcebergTableName,
                 expression: str, *, flavor: str) -> IcebergPlan:
    """Plan ``expression`` (``FROM stdin`` in place of the table) over the Iceberg table.

    Raises:
        ObjectNotFoundError: no such catalog, table or snapshot.
        NotImplementedFeatureError: the files to read have delete files.
    """
    table = catalogs.table(name.catalog, name.namespace, name.table)
    snapshot = _snapshot(table, name)
    schema = _snapshot_schema(table, snapshot)
    plan = engine.plan_table(expression, arrow_schema(schema), flavor=flavor)
    snapshot_id = snapshot.snapshot_id if snapshot is not None else None
    row_filter = iceberg_row_filter(engine, plan) if snapshot is not None else None
    tasks: list[Any] = []
    total: int | None = 0
    if snapshot is not None:
        from pyiceberg.expressions import AlwaysTrue

        scan = table.scan(row_filter=row_filter if row_filter is not None else AlwaysTrue(),
                          snapshot_id=snapshot_id, case_sensitive=True)
        tasks = _plan_files(name, table, snapshot, scan)
        total = _total_files(snapshot)
    partitions = _partitions(engine, catalogs, snapshot_id or 0, tasks, plan) or [
        PlannedPartition(_no_files(snapshot_id), bytes=0, rows=0)]
    files = tuple(t.file.file_path for t in tasks)
    return IcebergPlan(name, snapshot_id, dataclasses.replace(plan, partitions=tuple(partitions)),
                       files, total - len(files) if total is not None else None,
                       str(row_filter) if row_filter is not None else "AlwaysTrue()",
                       field_ids(table, schema))


def _no_files(snapshot_id: int | None) -> IcebergFiles:
    """The one endpoint of a plan that reads no file (no snapshot yet, or all pruned)."""
    return IcebergFiles(keys=("",), snapshot=snapshot_id or 0)


def _plan_files(name: IcebergTableName, table: Any, snapshot: Any, scan: Any) -> list[Any]:
    """pyiceberg's file tasks; its refusal of equality deletes as ours, naming the file."""
    def plan() -> list[Any]:
        try:
            return list(scan.plan_files())
        except ValueError as exc:
            if "equality deletes" not in str(exc):
                raise
        raise NotImplementedFeatureError(
            f"Iceberg table {name.display}: equality delete files are not applied yet (first: "
            f"{_equality_delete(table, snapshot)}); it answers no rows rather than rows that "
            "were deleted")

    return list(iceberg_call(f"Iceberg table {name.display}", plan))


def _equality_delete(table: Any, snapshot: Any) -> str:
    """The path of an equality delete file of the snapshot (for the message)."""
    from pyiceberg.manifest import DataFileContent

    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io):
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                return str(entry.data_file.file_path)
    return "unknown"


@dataclass(frozen=True)
class ColumnIds:
    """How a snapshot's columns are found in its data files.

    Attributes:
        by_name: the schema's top-level columns, name -> Iceberg field id.
        identity: field ids that an identity partition of the table takes its value from (a
            file may keep such a value in its manifest entry only).
    """

    by_name: dict[str, int]
    identity: frozenset[int] = frozenset()


def field_ids(table: Any, iceberg_schema: Any) -> ColumnIds:
    """The schema's columns and the table's identity-partition sources."""
    from pyiceberg.transforms import IdentityTransform

    identity = frozenset(f.source_id for spec in table.specs().values() for f in spec.fields
                         if isinstance(f.transform, IdentityTransform))
    return ColumnIds({f.name: f.field_id for f in iceberg_schema.fields}, identity)


def _snapshot(table: Any, name: IcebergTableName) -> Any:
    """The snapshot the statement reads (None: the table has none)."""
    if name.version is not None:
        snapshot = table.snapshot_by_id(name.version)
        if snapshot is None:
            raise _no_snapshot(name, f"no snapshot {name.version}")
        return snapshot
    if name.as_of is not None:
        moment = _timestamp_ms(name.as_of)
        found = table.snapshot_as_of_timestamp(moment)
        if found is None:
            raise _no_snapshot(name, f"no snapshot at or before {name.as_of}")
        return found
    return table.current_snapshot()


def _no_snapshot(name: IcebergTableName, what: str) -> Exception:
    from flight_storage.errors import ObjectNotFoundError

    return ObjectNotFoundError(f"Iceberg table {name.display}: {what}", code="NoSuchSnapshot")


def _timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch of ISO ``text`` (UTC unless it names a zone)."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRequestError(f"FOR TIMESTAMP AS OF {text!r}: not a time (write "
                                  "'2024-01-02 03:04:05', optionally with a zone)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _snapshot_schema(table: Any, snapshot: Any) -> Any:
    """The schema a snapshot was written with (pyiceberg's reading rule too)."""
    if snapshot is not None and snapshot.schema_id is not None:
        for schema in table.schemas().values():
            if schema.schema_id == snapshot.schema_id:
                return schema
    return table.schema()


def _total_files(snapshot: Any) -> int | None:
    summary = snapshot.summary
    value = summary.additional_properties.get("total-data-files") if summary else None
    return int(value) if value is not None else None


def _partitions(engine: SelectEngine, catalogs: IcebergCatalogs, snapshot_id: int,
                tasks: Sequence[Any], plan: SelectPlan) -> list[PlannedPartition]:
    """The plan's endpoints: every file in one when the statement is not a union of per-row
    results (aggregates, LIMIT, ORDER BY), else small files grouped and, when there are fewer
    files than cores, big files split by row groups."""
    if not tasks:
        return []
    if not plan.parallel_safe:
        return [_files_partition(snapshot_id, tasks)]
    cores = engine.config.parallelism
    planned: list[PlannedPartition] = []
    if len(tasks) < cores:
        wanted = -(-cores // len(tasks))
        for task in tasks:
            planned += _split_file(catalogs, snapshot_id, task, wanted)
        return planned
    return [_files_partition(snapshot_id, group)
            for group in _file_groups(tasks, cores, engine.config.partition_bytes)]


def _file_groups(tasks: Sequence[Any], cores: int, partition_bytes: int) -> list[list[Any]]:
    """Runs of consecutive files of near-equal bytes: a multiple of ``cores`` of them (full
    waves), each at most ``partition_bytes`` where the files allow, and at most
    :data:`MAX_FILES_PER_ENDPOINT` files each."""
    sizes = [max(1, t.file.file_size_in_bytes) for t in tasks]
    total = sum(sizes)
    count = max(cores, -(-total // max(1, partition_bytes)))
    count = min(len(tasks), -(-count // cores) * cores)
    groups: list[list[Any]] = [[] for _ in range(count)]
    share = total / count
    before = 0
    for task, size in zip(tasks, sizes, strict=True):
        groups[min(count - 1, int(before / share))].append(task)
        before += size
    return [group[i:i + MAX_FILES_PER_ENDPOINT] for group in groups if group
            for i in range(0, len(group), MAX_FILES_PER_ENDPOINT)]


def _files_partition(snapshot_id: int, tasks: Sequence[Any]) -> PlannedPartition:
    deletes = tuple((i, path) for i, t in enumerate(tasks)
                    for path in sorted(d.file_path for d in t.delete_files))
    return PlannedPartition(
        IcebergFiles(keys=tuple(t.file.file_path for t in tasks), snapshot=snapshot_id,
                     deletes=deletes),
        bytes=sum(t.file.file_size_in_bytes for t in tasks),
        rows=sum(t.file.record_count for t in tasks))


def _split_file(catalogs: IcebergCatalogs, snapshot_id: int, task: Any,
                wanted: int) -> list[PlannedPartition]:
    """One file as ``wanted`` (or fewer) DataFusion partitions of its row groups, leaving out
    partitions that hold no row group's start (``native_parquet.row_group_split``)."""
    whole = [_files_partition(snapshot_id, [task])]
    if wanted <= 1 or task.delete_files:  # a file with deletes is numbered whole
        return whole
    metadata = _footer(catalogs, task.file.file_path)
    if metadata.num_row_groups < 2:
        return whole
    size = task.file.file_size_in_bytes
    starts = row_group_starts(metadata)
    pieces = row_group_split(starts, size, wanted)
    if sum(1 for p in pieces if p) < 2:
        return whole
    path = task.file.file_path
    return [
        PlannedPartition(
            IcebergFiles(keys=(path,), snapshot=snapshot_id, split=(index, wanted),
                         row_groups=groups),
            bytes=sum(metadata.row_group(g).total_byte_size for g in groups),
            rows=sum(metadata.row_group(g).num_rows for g in groups))
        for index, groups in enumerate(pieces) if groups
    ]


def whole_partition(plan: SelectPlan) -> IcebergFiles:
    """Every file of the plan in one ``files`` partition (a client that reads one endpoint)."""
    paths: list[str] = []
    deletes: set[tuple[str, str]] = set()
    snapshot = 0
    for planned in plan.partitions:
        partition = planned.partition
        assert isinstance(partition, IcebergFiles)  # an Iceberg plan's every partition
        snapshot = partition.snapshot or snapshot
        paths += [k for k in partition.keys if k not in paths]
        deletes.update((partition.keys[i], path) for i, path in partition.deletes)
    return IcebergFiles(keys=tuple(paths) or ("",), snapshot=snapshot,
                        deletes=tuple(sorted((paths.index(k), d) for k, d in deletes)))


# ----------------------------------------------------------------------------- execution


def _footer(catalogs: IcebergCatalogs, path: str) -> pq.FileMetaData:
    """The file's footer (kept once read: ``ObjectNotFoundError`` naming a missing file)."""
    return catalogs.footer(path)


def replan(engine: SelectEngine, catalogs: IcebergCatalogs, name: IcebergTableName,
           expression: str, *, flavor: str, snapshot_id: int
           ) -> tuple[SelectPlan, ColumnIds]:
    """The plan a ticket's DoGet executes and the columns' field ids: the statement translated
    for the ticket's snapshot's schema (the files come from the ticket, not from planning
    again).

    Raises:
        StaleTicketError: the snapshot is no longer in the table (expired).
    """
    table = catalogs.table(name.catalog, name.namespace, name.table, fresh=False)
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id else None
    if snapshot is None and snapshot_id:  # committed within the last second?
        table = catalogs.table(name.catalog, name.namespace, name.table)
        snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is None and snapshot_id:
        raise StaleTicketError(f"Iceberg table {name.display}: snapshot {snapshot_id} is no "
                               "longer in the table (expired): plan the query again")
    schema = _snapshot_schema(table, snapshot)
    return (engine.plan_table(expression, arrow_schema(schema), flavor=flavor),
            field_ids(table, schema))


def execute_iceberg(engine: SelectEngine, catalogs: IcebergCatalogs, plan: SelectPlan,
                    ids: ColumnIds, partition: IcebergFiles) -> Iterator[pa.RecordBatch]:
    """The statement's result over one ``files`` partition, as Flight clients see it
    (``ids``: the snapshot schema's field ids, :func:`field_ids`)."""
    paths = [p for p in partition.keys if p]
    if not paths:
        return
    schema = plan.arrow_schema
    index, count = partition.split if partition.split else (None, 1)
    cores = engine.config.parallelism if not plan.parallel_safe else 1
    deleted = {n: [path for i, path in partition.deletes if i == n] for n in range(len(paths))}
    # row numbers follow file order only in a file read as one partition
    partitions = 1 if partition.deletes else max(count, cores)
    ctx = new_session(engine.config, plan.translation, partitions=partitions,
                      split_min_bytes=0)
    if partition.deletes:  # the deleted positions, not the data, are the join's build side
        ctx.sql("SET datafusion.optimizer.join_reordering = false")
    mismatch: list[int] = []
    # every data file is asked for in the store after the read, whatever the footers kept:
    # DataFusion reads a missing one as no rows (iceberg_catalog.check_present); files on this
    # disk (a stat each) before the read too, so the error comes before any row

    def open_stream() -> Any:
        check_present([p for p in paths if is_local(p)], catalogs.connection)
        frames = [_file_frame(ctx, catalogs, plan.input_schema, ids, path, n, deleted[n])
                  for n, path in enumerate(paths)]
        view = functools.reduce(lambda a, b: a.union(b), frames)
        ctx.register_view(TABLE, view)
        frame = ctx.sql_with_options(plan.translation.sql, READ_ONLY)
        if index is None:
            return frame.execute_stream()
        physical = frame.execution_plan()
        if physical.partition_count != count:
            mismatch.append(physical.partition_count)
            return None
        return ctx.execute(physical, index)

    for batch in arrow_batches(open_stream):
        yield to_arrow_result(batch, schema)
    check_present(paths, catalogs.connection)
    if mismatch:
        raise QueryExecutionError(
            f"{paths[0]}: DataFusion made {mismatch[0]} partitions of the file, not the "
            f"{count} planned: plan the query again", code="PreconditionFailed")


def _file_frame(ctx: Any, catalogs: IcebergCatalogs, schema: pa.Schema, ids: ColumnIds,
                path: str, number: int, delete_files: Sequence[str] = ()) -> Any:
    """The data file as a DataFrame of the snapshot's schema, columns matched by field id,
    without the rows its positional ``delete_files`` delete."""
    from datafusion import col, lit

    location = data_file_location(path, catalogs.connection)
    location.register(ctx)
    name = f"iceberg_file_{number}"
    # the file's schema from its footer (read once per file): DataFusion need not infer it,
    # which costs a HEAD and a footer read per file and query
    file_schema = _file_schema(catalogs, path)
    ctx.register_parquet(name, location.url, file_extension=location.url.rsplit("/", 1)[-1],
                         schema=file_schema)
    frame = ctx.table(name)
    if delete_files:
        frame = _without_deleted(ctx, catalogs, frame, name, path, delete_files)
    by_id = _file_columns(catalogs, path, file_schema)
    columns = []
    for field in schema:
        field_id = ids.by_name.get(field.name)
        source = by_id.get(field_id) if field_id is not None else None
        if source is None and field_id in ids.identity:
            raise NotImplementedFeatureError(
                f"data file {path} has no column {field.name} (an identity partition's source, "
                "kept in the manifest only?): partition values are not read from manifests yet")
        if source is None:  # added after the file was written
            columns.append(lit(pa.scalar(None, type=field.type)).alias(field.name))
            continue
        source_name, source_type = source
        expr = col(f'"{source_name}"')
        if source_type != field.type:
            expr = expr.cast(field.type)
        columns.append(expr.alias(field.name))
    return frame.select(*columns)


_POSITION = "__iceberg_row_position"
_DELETED = "__iceberg_deleted_position"


def _without_deleted(ctx: Any, catalogs: IcebergCatalogs, frame: Any, name: str, path: str,
                     delete_files: Sequence[str]) -> Any:
    """``frame`` (one data file, read as one partition) less the rows at the positions the
    delete files name for ``path``: rows numbered in file order below any filter, then a
    right anti-join against the positions."""
    from datafusion import col
    from datafusion import functions as f

    positions = _deleted_positions(catalogs, path, delete_files)
    columns = [col(f'"{c}"') for c in frame.schema().names]
    numbered = frame.select(*columns, (f.row_number() - 1).alias(_POSITION))
    ctx.register_view(f"{name}_rows", numbered)
    ctx.register_record_batches(f"{name}_deleted", [[pa.record_batch(
        [positions.cast(pa.uint64())], names=[_DELETED])]])
    kept = ", ".join(f'rows."{c}"' for c in frame.schema().names)
    return ctx.sql(f'SELECT {kept} FROM "{name}_deleted" AS deleted RIGHT ANTI JOIN '
                   f'"{name}_rows" AS rows ON deleted."{_DELETED}" = rows."{_POSITION}"')


def _deleted_positions(catalogs: IcebergCatalogs, path: str, delete_files: Sequence[str]
                       ) -> pa.Array:
    """The positions (0-based) the positional delete files delete from the data file
    ``path`` (a delete file may name several data files)."""
    import pyarrow.compute as pc

    found = []
    for delete_path in delete_files:
        with open_data_file(delete_path, catalogs.connection) as file:
            deletes = pq.read_table(file, columns=["file_path", "pos"])
        mine = deletes.filter(pc.equal(deletes["file_path"], path))
        found.append(mine["pos"].combine_chunks().cast(pa.int64()))
    if not found:
        return pa.array([], pa.int64())
    return pc.unique(pa.concat_arrays(found))


def _file_schema(catalogs: IcebergCatalogs, path: str) -> pa.Schema:
    """The Arrow schema DataFusion reads the file with: its footer's, plain types (DataFusion
    reads strings as plain Utf8 here, ``native_parquet.SESSION_SETTINGS``), no metadata."""
    arrow = _footer(catalogs, path).schema.to_arrow_schema()
    return pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in arrow])


def _file_columns(catalogs: IcebergCatalogs, path: str, read: pa.Schema
                  ) -> dict[int, tuple[str, pa.DataType]]:
    """The file's top-level columns by Iceberg field id: their names in the file and the type
    DataFusion reads them as."""
    metadata = _footer(catalogs, path)
    arrow = metadata.schema.to_arrow_schema()
    found: dict[int, tuple[str, pa.DataType]] = {}
    for field in arrow:
        raw = (field.metadata or {}).get(_FIELD_ID)
        if raw is None or read.get_field_index(field.name) < 0:
            continue
        found[int(raw)] = (field.name, read.field(field.name).type)
    if len(arrow) and not found:
        raise NotImplementedFeatureError(
            f"data file {path} carries no Iceberg field ids (written outside Iceberg and added "
            "to the table?): name mappings are not applied yet")
    return found
