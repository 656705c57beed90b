"""A remote table as a ``pyarrow.dataset.Dataset`` that DataFusion scans: one fragment per
Flight endpoint.

The dataset is :class:`lazy_dataset.LazyDataset` (shared with the server's readers; its
docstring says how DataFusion reaches it). Here :meth:`FlightDataset.plan_scans` turns the
projection and the Exact filter DataFusion passes into one remote query, and each endpoint of
its plan into one fragment. The LIMIT is never passed (see
:mod:`compute_client.datafusion_table.limit`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from compute_client import pushdown
from compute_client.datafusion_table.exactness import (
    CONSTANT_TEXT,
    PushdownPlan,
    constant_filter,
    plan_pushdown,
    unreferable_columns,
)
from compute_client.datafusion_table.expressions import residual_columns
from compute_client.flight import ConnectionOptions, Endpoint, FlightSelectClient, QueryPlan
from lazy_dataset import Columns, LazyDataset, ScanFunction, project

log = logging.getLogger(__name__)

# The residual filter runs in Acero (``batch.filter(expression)``), which finds the buffers of
# Arrow data received over Flight unaligned and, by default, prints a warning to stderr for
# every batch. ``reallocate`` copies such a buffer before Acero reads it. Acero reads the
# variable once per process, so a user's own setting made earlier wins.
os.environ.setdefault("ACERO_ALIGNMENT_HANDLING", "reallocate")


@dataclass(frozen=True)
class RemoteTable:
    """Where a remote table lives: an object, or a key prefix (``orders/``) on servers that
    serve prefixes as tables."""

    connection: ConnectionOptions
    bucket: str
    key: str


@dataclass
class ScanStats:
    """One scan of a remote table: what was pushed and what came back.

    Attributes:
        query: the s3-select statement sent ('' when none was: the filter is constant FALSE
            or NULL, so the scan has no partitions).
        pushed: the pushed WHERE clause ('' when none).
        local: the filter applied locally, as text ('' when none).
        limit: the pushed LIMIT, if any.
        endpoints: Flight endpoints (DataFusion partitions).
        rows: rows received so far.
        bytes: Arrow bytes received so far (buffer sizes of the received batches).
    """

    query: str
    pushed: str
    local: str
    limit: int | None
    endpoints: int
    rows: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, batch: pa.RecordBatch) -> None:
        with self._lock:
            self.rows += batch.num_rows
            self.bytes += batch.nbytes


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Columns of ``schema`` by name, cast to its types (CSV text, decimals sent as double).

    Raises:
        RuntimeError: the batch has no column of that name, or several (index -1 would
            silently take the last column).
    """
    if not len(schema):
        return batch.select([])  # count(*): no columns, the row count still matters
    columns = []
    for target in schema:
        index = batch.schema.get_field_index(target.name)
        if index < 0:
            raise RuntimeError(f"server result has no single column {target.name!r}: "
                               f"{batch.schema.names}")
        column = batch.column(index)
        if column.type != target.type:
            column = column.cast(target.type)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class _Scan:
    """One planned scan: the remote plan, the residual, and where its batches go."""

    def __init__(self, table: RemoteTable, schema: pa.Schema, fetched: pa.Schema,
                 plan: QueryPlan, residual: pc.Expression | None, stats: ScanStats) -> None:
        self.table = table
        self.schema = schema
        self.fetched = fetched
        self.plan = plan
        self.residual = residual
        self.stats = stats

    def read(self, endpoint: Endpoint, columns: Sequence[str] | None,
             out_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        with FlightSelectClient(self.table.connection) as client:
            for batch in client.read(endpoint):
                self.stats.add(batch)
                batch = _conform(batch, self.fetched)
                if self.residual is not None:
                    batch = batch.filter(self.residual)
                if columns is not None:
                    batch = batch.select(list(columns))
                if batch.num_rows:
                    yield _conform(batch, out_schema)
        log.info("endpoint done query=%s rows=%d bytes=%d", self.stats.query, self.stats.rows,
                 self.stats.bytes)


def _endpoint_scan(scan: _Scan, endpoint: Endpoint) -> ScanFunction:
    """One Flight endpoint as a scan function: one DataFusion partition, read when pulled."""

    # ``filter`` is in ScanFunction's signature; plan_scans already pushed it or kept it as the
    # scan's residual, which _Scan.read applies.
    def read(columns: Columns, filter: pc.Expression | None  # noqa: ARG001 - ScanFunction
             ) -> Iterator[pa.RecordBatch]:
        projected = project(scan.schema, columns)
        missing = set(projected.names) - set(scan.fetched.names)
        if missing:
            raise RuntimeError(f"scan planned without columns {sorted(missing)}")
        return scan.read(endpoint, columns, projected)

    return read


class FlightDataset(LazyDataset):
    """A remote table as a pyarrow Dataset whose fragments are the server's endpoints.

    Attributes:
        table: where the table lives.
        schema: the table's schema as DataFusion sees it (declared types applied).
        server_schema: the schema the server sends for ``SELECT *``.
        limit_counts_input: the server's LIMIT counts scanned records, not result rows (its
            FlightInfo's ``limit_counts_input``; True when it does not say), so a LIMIT is
            pushed only where no filter is.
        scans: every scan so far, newest last.
    """

    def __init__(self, table: RemoteTable, schema: pa.Schema | None = None) -> None:
        self.table = table
        with FlightSelectClient(table.connection) as client:
            plan = client.execute(pushdown.build_query(table.bucket, table.key, None, (), 0))
        self.server_schema = plan.schema
        # Whether the flavour's LIMIT counts scanned records (Ceph's): the server says so in
        # its FlightInfo; one that does not is assumed to (never cut matching rows).
        self.limit_counts_input = plan.about.limit_counts_input is not False
        self._schema = _declared_schema(plan.schema, schema)
        super().__init__(self._schema)
        self.scans: list[ScanStats] = []
        self._fetch_hint: int | None = None
        self._lock = threading.Lock()

    @property
    def last_scan(self) -> ScanStats | None:
        """The most recent scan, or None."""
        return self.scans[-1] if self.scans else None

    def plan_scans(self, columns: Columns, filter: pc.Expression | None
                   ) -> list[ScanFunction]:
        """Plan one scan: push what is exact, ask the server, one fragment per endpoint."""
        split = plan_pushdown(filter, self.server_schema, self._schema)
        limit = self._take_fetch_hint(split)
        if split.no_rows:
            return self._no_rows(filter)
        needed = _needed_columns(self._schema, columns, split.residual)
        fetched = project(self._schema, needed)
        query = pushdown.build_query(
            self.table.bucket, self.table.key, _server_projection(self, needed),
            split.filters, limit,
        )
        with FlightSelectClient(self.table.connection) as client:
            plan = client.execute(query)
        stats = ScanStats(query, split.where, "" if split.residual is None else
                          str(split.residual), limit, len(plan.endpoints))
        with self._lock:
            self.scans.append(stats)
        log.info("flight scan table=%s/%s query=%s pushed=%r local=%r limit=%s endpoints=%d",
                 self.table.bucket, self.table.key, query, stats.pushed, stats.local, limit,
                 len(plan.endpoints))
        scan = _Scan(self.table, self._schema, fetched, plan, split.residual, stats)
        return [_endpoint_scan(scan, e) for e in plan.endpoints]

    def _no_rows(self, filter: pc.Expression | pa.Scalar | None) -> list[ScanFunction]:
        """A filter that is constant FALSE or NULL: no partitions, no call to the server."""
        constant = constant_filter(filter) if filter is not None else None
        text = CONSTANT_TEXT.get(constant, str(constant))
        with self._lock:
            self.scans.append(ScanStats("", "", text, None, 0))
        log.info("flight scan table=%s/%s skipped: the filter is constant %s",
                 self.table.bucket, self.table.key, text)
        return []

    def hint_fetch(self, fetch: int | None) -> None:
        """Offer the next scan a LIMIT (``None`` withdraws it); see
        :func:`compute_client.datafusion_table.limit.collect`."""
        with self._lock:
            self._fetch_hint = fetch

    def _take_fetch_hint(self, split: PushdownPlan) -> int | None:
        with self._lock:
            hint, self._fetch_hint = self._fetch_hint, None
        if hint is None or split.residual is not None:
            return None
        # A LIMIT that counts scanned records would cut matching rows beside a WHERE.
        if split.filters and self.limit_counts_input:
            return None
        return hint


def _declared_schema(server: pa.Schema, declared: pa.Schema | Mapping[str, Any] | None
                     ) -> pa.Schema:
    """The server's schema with the declared column types (names must exist there)."""
    if declared is None:
        return server
    types = dict(zip(declared.names, declared.types, strict=True)) if isinstance(declared, pa.Schema) \
        else {name: _data_type(t) for name, t in declared.items()}
    unknown = set(types) - set(server.names)
    if unknown:
        raise ValueError(f"declared columns not in the table: {sorted(unknown)}")
    return pa.schema([f.with_type(types.get(f.name, f.type)) for f in server])


def _data_type(value: Any) -> pa.DataType:
    if isinstance(value, pa.DataType):
        return value
    return pa.type_for_alias(str(value))


def _needed_columns(schema: pa.Schema, columns: Sequence[str] | None,
                    residual: pc.Expression | None) -> list[str] | None:
    if columns is None:
        return None
    wanted = set(columns) | residual_columns(residual, schema)
    if not wanted:
        # count(*) and friends need rows, not values: fetch the first column.
        wanted = {schema.names[0]}
    return [name for name in schema.names if name in wanted]


def _server_projection(dataset: FlightDataset, needed: Sequence[str] | None
                       ) -> Sequence[str] | None:
    """The SELECT list; ``*`` when a column has no reference of its own
    (:func:`unreferable_columns`)."""
    if needed is None:
        return None
    unreferable = unreferable_columns(dataset.server_schema)
    if any(name in unreferable for name in needed):
        return None
    return needed

