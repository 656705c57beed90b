"""DataFusion tables that live on flight-select storage servers, with exact pushdown.

    ctx = SessionContext()
    table = register_flight_table(ctx, "orders", "grpc://127.0.0.1:8815",
                                  "sales/orders/2024-01.csv")
    ctx.sql("SELECT region, count(*) FROM orders WHERE status = 'shipped' GROUP BY region")
    table.last_scan.query   # 'SELECT region FROM "sales"."orders/2024-01.csv" WHERE status = ...'

How DataFusion reaches us (datafusion-python 55; ``tests/compute_client/
test_datafusion_pushdown.py`` pins every point): a registered ``pyarrow.dataset.Dataset`` is
duck-typed. While planning a scan DataFusion calls ``dataset.scanner(columns=, filter=)`` and
then ``dataset.get_fragments(filter)`` with the same filter; each fragment becomes one partition
and is read, lazily and in parallel, through ``fragment.scanner(schema, columns=, filter=,
batch_size=).to_batches()``. The filter is a ``pyarrow.compute.Expression`` made of the WHERE
conjuncts DataFusion could convert, and DataFusion treats it as *Exact*: it never re-checks it.
The projection leaves out columns only the filter uses. The LIMIT is never passed.

So a scan here:

1. parses the Expression back into a tree (:func:`parse_expression`) and proves the parse by
   rebuilding the Expression and checking it ``equals`` the one received; anything unproven is
   applied locally, never dropped;
2. pushes each top-level conjunct whose s3-select rendering means exactly what DataFusion means
   on the same Arrow values (``exactness._KINDS``: per column type, how the server must read the
   column and which literals compare the same way), and keeps the others as a local residual;
3. sends ``SELECT <projection + residual columns> FROM "bucket"."key" WHERE <pushed>`` and makes
   one fragment per Flight endpoint, each read from the server the endpoint names;
4. casts what arrives to the table's declared schema, applies the residual, projects.

CSV columns are strings on the server. Declare their types with ``schema=`` and the client casts
them; a comparison on such a column is pushed with the server-side conversion that gives the
same answer (``CAST(q AS INT) < 24``), or, for dates, as a string comparison, which is exact
because pyarrow accepts only ``YYYY-MM-DD`` dates. Every scan is recorded in
:attr:`FlightDataset.scans` (pushed SQL, local residual, rows and bytes received) and logged at
INFO on the ``compute_client.datafusion_table`` loggers.

LIMIT: :func:`collect` inspects the optimized logical plan (``TableScan.fetch``) and pushes the
limit when it is safe (see :func:`collect`).

This module is the public entry; the work is done in :mod:`compute_client.datafusion_table`,
one job per module: ``expressions`` (reading the filter back), ``exactness`` (what is pushed),
``dataset`` (scans and endpoints), ``catalog`` (registration), ``limit`` (LIMIT pushdown).
"""

from __future__ import annotations

from compute_client.datafusion_table.catalog import (
    FlightCatalog,
    FlightSchema,
    connection_options,
    register_flight_catalog,
    register_flight_table,
)
from compute_client.datafusion_table.dataset import FlightDataset, RemoteTable, ScanStats
from compute_client.datafusion_table.exactness import (
    PushdownPlan,
    column_kinds,
    constant_filter,
    plan_pushdown,
    unreferable_columns,
)
from compute_client.datafusion_table.expressions import parse_expression, residual_columns
from compute_client.datafusion_table.limit import collect, scan_fetches

__all__ = [
    "FlightCatalog",
    "FlightDataset",
    "FlightSchema",
    "PushdownPlan",
    "RemoteTable",
    "ScanStats",
    "collect",
    "column_kinds",
    "connection_options",
    "constant_filter",
    "parse_expression",
    "plan_pushdown",
    "register_flight_catalog",
    "register_flight_table",
    "residual_columns",
    "scan_fetches",
    "unreferable_columns",
]
