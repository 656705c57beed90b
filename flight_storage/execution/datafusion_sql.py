"""A statement DataFusion plans as written over several tables of the server (the standard
surface's JOINs, CTEs, subqueries, window functions and DataFusion's functions:
``select_dialect/sql_surface.py`` says which statements come here).

Each table the statement names is planned as the standard surface reads it alone
(``SELECT * FROM s3object`` through :class:`~flight_storage.execution.engine.SelectEngine`:
sniffed CSV columns, Parquet's own, JSON as its driver reads it) and registered in one
DataFusion session under the name the statement gives it (``"bucket"."key"`` in the schema
``bucket``, ``"bucket"."schema"."table"`` in the catalog ``bucket``, a one-part name in the
default schema), read by DataFusion's reader where it qualifies and by the reference readers
otherwise. DataFusion then plans the statement with the read-only SQL options; the session has
no other tables. The whole result is one stream (one endpoint), bounded as any statement is:
the memory pool of a query, the server's slots and timeouts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from datafusion import col

from flight_storage.errors import InvalidRequestError, StorageError
from flight_storage.execution.engine import SelectEngine
from flight_storage.execution.engine_errors import engine_error
from flight_storage.execution.plan_types import TABLE, InputSpec, SelectPlan
from flight_storage.execution.session import (
    READ_ONLY,
    arrow_batches,
    filter_not_convertible,
    new_session,
    plain_schema,
)
from flight_storage.storage.sources import ObjectSource
from select_dialect.errors import UnsupportedFeatureError
from select_dialect.sql_surface import TableName

WHOLE_TABLE = f"SELECT * FROM {TABLE}"
"""How each table of such a statement is read: all of it, as the standard surface reads it."""

# DataFusion's planning errors a user meets, named: (pattern, error class, S3 code, hint).
_PLANNING_ERRORS: tuple[tuple[re.Pattern[str], type[StorageError] | None, str, str], ...] = (
    (re.compile(r"Invalid function '([^']*)'"), None, "UnsupportedFunction",
     "function {0} is not available"),
    (re.compile(r"table function '([^']*)' not found"), None, "UnsupportedSyntax",
     'table function {0} is not available: read a table by its name, "bucket"."key"'),
    (re.compile(r"No field named (\S+)"), InvalidRequestError, "InvalidColumnIndex",
     "no column {0}"),
)


@dataclass(frozen=True)
class SqlTable:
    """One table of the statement: its name there, and its plan alone (:data:`WHOLE_TABLE`)."""

    name: TableName
    plan: SelectPlan


@dataclass(frozen=True)
class SqlPlan:
    """A statement DataFusion plans over the server's tables."""

    sql: str
    flavor: str
    tables: tuple[SqlTable, ...]
    result_schema: pa.Schema
    version: str = ""
    """The fingerprint of every table's objects (a ticket is refused once one changes)."""

    @property
    def arrow_schema(self) -> pa.Schema:
        """The result's schema as clients read it."""
        return self.result_schema

    @property
    def bytes(self) -> int:
        """Bytes of every table's objects."""
        return sum(s.size for t in self.tables for s in t.plan.sources)


def table_plan(engine: SelectEngine, sources: Sequence[ObjectSource], input: InputSpec, *,
               flavor: str) -> SelectPlan:
    """One table of the statement, read whole as the standard surface reads it alone."""
    return engine.plan(WHOLE_TABLE, sources, input, flavor=flavor)


def plan_sql(engine: SelectEngine, sql: str, tables: Sequence[SqlTable], *,
             flavor: str, version: str = "") -> SqlPlan:
    """DataFusion's plan of ``sql`` over ``tables`` (its schema; nothing is read).

    Raises:
        UnsupportedFeatureError: a function or clause DataFusion does not have.
        StorageError: another planning error, with its S3 code.
    """
    ctx = _session(engine, tables)
    try:
        frame = ctx.sql_with_options(sql, READ_ONLY)
        frame.optimized_logical_plan()  # type errors now, not when an endpoint is read
        schema = plain_schema(pa.schema(frame.schema()))
    except Exception as exc:  # DataFusion raises plain exceptions with text only
        raise _planning_error(exc) from None
    return SqlPlan(sql, flavor, tuple(tables), schema, version)


def execute_sql(engine: SelectEngine, plan: SqlPlan) -> Iterator[pa.RecordBatch]:
    """The statement's result batches, all partitions of DataFusion's plan in one stream.

    A filter datafusion-python cannot hand to a table read through a pyarrow Dataset (a NULL
    literal conjunct first: :func:`session.filter_not_convertible`) is kept above the scans
    instead, as the one-table path does; nothing has been read when that is found."""
    def open_stream() -> Any:
        try:
            return _session(engine, plan.tables).sql_with_options(
                plan.sql, READ_ONLY).execute_stream()
        except Exception as exc:  # DataFusion raises plain exceptions with text only
            if not filter_not_convertible(exc):
                raise
        return _session(engine, plan.tables, push_filters=False).sql_with_options(
            plan.sql, READ_ONLY).execute_stream()

    for batch in arrow_batches(open_stream):
        yield batch if batch.schema == plan.result_schema else batch.cast(plan.result_schema)


def _session(engine: SelectEngine, tables: Sequence[SqlTable], *, push_filters: bool = True
             ) -> Any:
    """A session holding each table under its name (and no other table)."""
    ctx = new_session(engine.config, partitions=engine.config.parallelism,
                      push_filters=push_filters)
    views = []
    for table in tables:
        engine.register_input(ctx, table.plan)
        translation = table.plan.translation
        whole = ctx.sql(translation.sql)
        views.append(whole.select(*[
            col(f'"{_escaped(inner)}"').alias(name)
            for inner, name in zip(whole.schema().names, translation.output_names, strict=True)]))
        # a view holds its providers: the next table is registered under the same names, and
        # the statement's own names (``s3object`` too) are free once every input is
        for name in (TABLE, f"{TABLE}_file"):
            ctx.deregister_table(name)
    for table, view in zip(tables, views, strict=True):
        _create_namespace(ctx, table.name)
        ctx.register_view(table.name.sql, view)
    return ctx


def _create_namespace(ctx: Any, name: TableName) -> None:
    """The catalog and schema a two- or three-part name lives in."""
    quoted = ['"' + _escaped(p) + '"' for p in name.parts[:-1]]
    if len(quoted) == 2:
        ctx.sql(f"CREATE DATABASE IF NOT EXISTS {quoted[0]}").collect()
    if quoted:
        ctx.sql(f"CREATE SCHEMA IF NOT EXISTS {'.'.join(quoted)}").collect()


def _escaped(name: str) -> str:
    return name.replace('"', '""')


def _planning_error(exc: Exception) -> StorageError | UnsupportedFeatureError:
    text = str(exc)
    for pattern, cls, code, hint in _PLANNING_ERRORS:
        match = pattern.search(text)
        if match is None:
            continue
        detail = " ".join(line.strip() for line in text.strip().splitlines()[1:] if line.strip())
        message = hint.format(*match.groups()) + (f" ({detail})" if detail else "")
        if cls is None:
            return UnsupportedFeatureError(message, code=code)
        return cls(message, code=code)
    return engine_error(exc)
