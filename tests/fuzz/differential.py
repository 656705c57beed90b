"""Run one fuzz case through the engine and through the oracle, and compare.

s3-select flavours: the engine is the in-process request path
(``flight_storage.execution.select_local``, what the conformance runner uses); its CSV output
text is compared with the row-at-a-time oracle's (:mod:`tests.fuzz.oracle`). Floats that an
aggregate adds up are compared with a relative tolerance of 1e-12: the order of a float sum is
not part of the language.

The standard flavour: the engine is ``SelectEngine`` in process, its Arrow result (what a Flight
SQL client receives) read as Python values; the oracle is DuckDB over the same CSV bytes
(:mod:`tests.fuzz.standard_sql`), or the same JSON Lines bytes (:mod:`tests.fuzz.standard_json`:
our side reads the object as a Flight SQL statement does, with the columns its sample's
sniffing gives, and those must be the columns the generator expects). Rows compare as
multisets unless the query orders every column; floats within 1e-9 (DuckDB sums in another
order); a query both engines refuse agrees.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
import pyarrow as pa

from flight_storage.errors import StorageError
from flight_storage.execution.datafusion_sql import SqlTable, execute_sql, plan_sql, table_plan
from flight_storage.execution.engine import InputSpec, SelectEngine
from flight_storage.execution.plan_types import EngineConfig
from flight_storage.execution.select_local import run_select
from flight_storage.formats.csv_sniff import TableReading
from flight_storage.request.json_sniffing import JsonTableSniffer
from flight_storage.storage.sources import FileSource
from select_dialect import SelectDialectError
from select_dialect.sql_surface import parse_sql
from tests.fuzz.generate import Case_
from tests.fuzz.oracle import answer, render_csv
from tests.fuzz.query_ast import render_query
from tests.fuzz.standard_json import DUCKDB_TYPES
from tests.fuzz.standard_sql import StandardCase


@dataclass
class Outcome:
    sql: str
    expected: str
    actual: str
    agrees: bool

    def describe(self, case: Case_) -> str:
        return (f"flavor={case.flavor} source={case.source}\nquery: {self.sql}\n"
                f"data: {case.data!r}\nexpected: {self.expected!r}\nactual:   {self.actual!r}")


def _close(expected: str, actual: str) -> bool:
    ours, theirs = expected.split(","), actual.split(",")
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs, strict=True):
        if a == b:
            continue
        try:
            if not math.isclose(float(a), float(b), rel_tol=1e-12):
                return False
        except ValueError:
            return False
    return True


CACHE_DIR_ENV = "FUZZ_DECODED_CACHE_DIR"
"""When set, the engine keeps a decoded cache in this folder; with
``FLIGHT_SELECT_DECODED_CACHE=fill-first`` every answer over a CSV object it can cache is read
from a filled entry (issue #36: the fuzzers through a filled cache)."""


def engine_config() -> EngineConfig:
    """The engine's configuration: a decoded cache where :data:`CACHE_DIR_ENV` names one."""
    return EngineConfig(cache_dir=os.environ.get(CACHE_DIR_ENV) or None)


def engine_answer(case: Case_, sql: str) -> str:
    """The engine's CSV output, or ``ERROR <code>: <message>``."""
    try:
        result = run_select(case.data, sql, input_serialization=case.input_serialization,
                            output_serialization={"CSV": {}}, flavor=case.flavor,
                            config=engine_config())
    except (StorageError, SelectDialectError) as exc:  # an answer to compare; a crash raises
        return f"ERROR {exc.code}: {exc}"
    return result.records.decode("utf-8", "replace")


def check(case: Case_) -> Outcome:
    """Both answers, and whether they agree."""
    sql = render_query(case.query)
    records = answer(case.query, case.rows, case.flavor)
    expected = render_csv(records, case.flavor, case.query.is_aggregate)
    actual = engine_answer(case, sql)
    agrees = expected == actual or (
        case.query.is_aggregate and _close(expected.strip("\n"), actual.strip("\n"))
    )
    return Outcome(sql, expected, actual, agrees)


# --------------------------------------------------------------------------- standard SQL


@dataclass
class StandardOutcome:
    ours: str
    duck: str
    expected: list[tuple[Any, ...]] | str
    actual: list[tuple[Any, ...]] | str
    agrees: bool
    sniffed: list[tuple[str, str]] | None = None  # JSON Lines: the columns our sniffer gave

    def describe(self, case: StandardCase) -> str:
        columns = (f"\ncolumns: {case.columns!r}\nsniffed: {self.sniffed!r}"
                   if case.source == "json" else "")
        return (f"flavor=standard source={case.source}\nquery: {self.ours}\n"
                f"duckdb: {self.duck}\ndata: {case.data!r}{columns}\n"
                f"expected: {self.expected!r}\nactual:   {self.actual!r}")


def _plain(value: Any) -> Any:
    """One value as both engines' Python values compare: decimals as floats, timestamps as
    naive datetimes of microseconds (no generated value has finer digits)."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def _arrow_rows(batches: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for batch in batches:
        columns = []
        for column in batch.columns:
            if pa.types.is_timestamp(column.type):
                column = column.cast(pa.timestamp("us", column.type.tz))
            columns.append(column.to_pylist())
        rows.extend(tuple(_plain(v) for v in row) for row in zip(*columns, strict=True))
    return rows


_CSV_WITH_HEADER: Final = {"CSV": {"FileHeaderInfo": "USE"}}
_JSON_LINES: Final = {"JSON": {"Type": "LINES"}}


def _input(case: StandardCase, path: Path) -> tuple[FileSource, InputSpec]:
    """The object at ``path`` and how a Flight SQL statement reads it: a CSV with its header
    (every field text), JSON Lines with the columns its sample's sniffing gives
    (``request/json_sniffing.py``, as ``resolve_table`` asks it)."""
    source = FileSource(path, path.name, path.stat().st_size)
    if case.source == "csv":
        return source, InputSpec.from_request(_CSV_WITH_HEADER, default_format="csv")
    spec = InputSpec.from_request(_JSON_LINES, default_format="json")
    return source, JsonTableSniffer(TableReading()).typed_spec(source, spec, None, None)


def sniffed_columns(case: StandardCase, path: Path) -> list[tuple[str, str]] | None:
    """The JSON Lines object's sniffed columns (None: it keeps S3 Select's reading)."""
    columns = _input(case, path)[1].columns
    return None if columns is None else list(zip(columns.names, columns.types, strict=True))


def standard_engine_answer(case: StandardCase, path: Path) -> list[tuple[Any, ...]] | str:
    """Our answer over the object at ``path`` (the standard flavour), or ``ERROR``."""
    engine = SelectEngine(engine_config())
    try:
        source, spec = _input(case, path)
        plan = engine.plan(case.ours, source, spec, flavor="standard")
        return _arrow_rows(list(engine.execute_arrow(plan)))
    except (StorageError, SelectDialectError) as exc:  # an answer to compare; a crash raises
        return f"ERROR {exc.code}: {exc}"


def standard_join_answer(case: StandardCase, path: Path) -> list[tuple[Any, ...]] | str:
    """Our answer to a statement DataFusion plans over the tables it names (the object is the
    table ``s3object``, read as the standard surface reads it alone), or ``ERROR``."""
    engine = SelectEngine(engine_config())
    try:
        source, spec = _input(case, path)
        statement = parse_sql(case.ours)
        assert statement is not None, case.ours
        assert not statement.one_table, case.ours
        tables = [SqlTable(name, table_plan(engine, [source], spec, flavor="standard"))
                  for name in statement.tables]
        plan = plan_sql(engine, case.ours, tables, flavor="standard")
        return _arrow_rows(list(execute_sql(engine, plan)))
    except (StorageError, SelectDialectError) as exc:  # an answer to compare; a crash raises
        return f"ERROR {exc.code}: {exc}"


def _duckdb_table(case: StandardCase, path: Path) -> str:
    """The query that DuckDB's view ``t`` is: the CSV with every column VARCHAR, or the JSON
    Lines with the expected columns' types (a ``json`` column read as its text)."""
    if case.source == "csv":
        columns = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in case.columns)
        return (f"SELECT * FROM read_csv('{path}', header = true, auto_detect = false, "
                f"delim = ',', quote = '\"', escape = '\"', nullstr = '\\N', "
                f"columns = {{{columns}}})")
    columns = ", ".join(f"'{name}': '{DUCKDB_TYPES[kind]}'" for name, kind in case.columns)
    select = ", ".join(f"CAST({name} AS VARCHAR) AS {name}" if kind == "json" else name
                       for name, kind in case.columns)
    return (f"SELECT {select} FROM read_json('{path}', format = 'newline_delimited', "
            f"columns = {{{columns}}})")


def duckdb_answer(case: StandardCase, path: Path) -> list[tuple[Any, ...]] | str:
    """DuckDB's answer over the same bytes (its session in UTC), or ``ERROR``."""
    connection = duckdb.connect()
    try:
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(f"CREATE VIEW t AS {_duckdb_table(case, path)}")
        return [tuple(_plain(v) for v in row) for row in connection.execute(case.duck).fetchall()]
    except duckdb.Error as exc:
        return f"ERROR {type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        connection.close()


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    if isinstance(b, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
        return _same_value(b, a)
    return type(a) is type(b) and a == b


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, type(v).__name__, "" if v is None else v) for v in row)


def _same_rows(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]], ordered: bool
               ) -> bool:
    if len(expected) != len(actual):
        return False
    if not ordered:
        expected, actual = sorted(expected, key=_sort_key), sorted(actual, key=_sort_key)
    return all(len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
               for a, b in zip(expected, actual, strict=True))


def check_standard(case: StandardCase, *, joined: bool = False) -> StandardOutcome:
    """Our engine and DuckDB over one object; they agree when both give the same rows (floats
    within 1e-9) or both refuse the query (``joined``: a statement DataFusion plans over the
    tables it names, :func:`standard_join_answer`), and, for JSON Lines, our sniffer gives the
    columns the generator expects."""
    with tempfile.TemporaryDirectory(prefix="fuzz-standard-") as directory:
        path = Path(directory) / f"object.{'csv' if case.source == 'csv' else 'jsonl'}"
        path.write_bytes(case.data)
        sniffed = sniffed_columns(case, path) if case.source == "json" else None
        ours = standard_join_answer if joined else standard_engine_answer
        actual = ours(case, path)
        expected = duckdb_answer(case, path)
    if isinstance(expected, str) or isinstance(actual, str):
        agrees = isinstance(expected, str) and isinstance(actual, str)
    else:
        agrees = _same_rows(expected, actual, case.ordered)
    if case.source == "json":
        agrees = agrees and sniffed == case.columns
    return StandardOutcome(case.ours, case.duck, expected, actual, agrees, sniffed)
