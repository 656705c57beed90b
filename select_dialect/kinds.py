"""The static kinds of lowered expressions and the tables of how they meet.

s3-select is dynamically typed; the lowering (:mod:`select_dialect.lowering`) gives every
expression a static :class:`Kind` and brings two kinds together by these tables: how two numbers
meet (:data:`NUMBER_COERCION`), what SUM and AVG give (:data:`AGGREGATE_KINDS`), which SQL type a
kind is in the standard flavour's messages (:data:`SQL_TYPE_NAMES`), and the kind of a typed
input column (:data:`COLUMN_KINDS`, :class:`Column`). A test checks the tables against
DataFusion's result types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp


class Kind(StrEnum):
    """The static kind of a lowered expression (what DataFusion type it has, and how s3-select
    coerces it next to other kinds)."""

    INT = "int"
    FLOAT = "float"
    DECIMAL = "decimal"  # an Arrow decimal128(p, s): exact, DataFusion carries p and s
    STRING = "string"  # text that is a string (literal, string function result, Parquet string)
    FIELD = "field"  # CSV field text: compares with numbers as a number
    BOOL = "bool"
    TS = "ts"  # the S3_TIMESTAMP struct
    NATIVE_TS = "native_ts"  # an Arrow timestamp/date column (Parquet)
    NULL = "null"
    JSON = "json"  # compact JSON text of a JSON value


INT, FLOAT, DECIMAL = Kind.INT, Kind.FLOAT, Kind.DECIMAL


STRING, FIELD, BOOL, JSON = Kind.STRING, Kind.FIELD, Kind.BOOL, Kind.JSON


TS, NATIVE_TS, NULL = Kind.TS, Kind.NATIVE_TS, Kind.NULL


NUMERIC = frozenset({INT, FLOAT, DECIMAL})


TEXTUAL = frozenset({STRING, FIELD})


# Parquet/Arrow column type names (Column.type) -> kind; ``decimal(p,s)`` is DECIMAL.
COLUMN_KINDS: dict[str, Kind] = {
    "string": STRING,
    "int64": INT,
    "float64": FLOAT,
    "bool": BOOL,
    "timestamp": NATIVE_TS,
    "date": NATIVE_TS,
}


# The coercion of two numbers, one table for arithmetic (+ - * / %), comparisons, CASE and
# COALESCE: the kind both sides are brought to. A decimal next to an integer stays exact
# (DataFusion widens the precision: decimal(10,2) + int64 is decimal(23,2)); a decimal next
# to a float is a float, the usual SQL rule (the decimal side is cast to DOUBLE, see
# NUMBER_CASTS; left to itself DataFusion would cast both to decimal(30,15), which overflows
# past 10**15). An operand that is not a number is read as FLOAT first (as_number).
NUMBER_COERCION: dict[frozenset[Kind], Kind] = {
    frozenset({INT}): INT,
    frozenset({FLOAT}): FLOAT,
    frozenset({DECIMAL}): DECIMAL,
    frozenset({INT, FLOAT}): FLOAT,
    frozenset({INT, DECIMAL}): DECIMAL,
    frozenset({FLOAT, DECIMAL}): FLOAT,
}


# The explicit cast a number of one kind needs to reach another; pairs not listed are left to
# DataFusion's own coercion, which is exact for them (int64 -> double, int64 -> decimal).
NUMBER_CASTS: dict[tuple[Kind, Kind], str] = {
    (DECIMAL, FLOAT): "DOUBLE",
}


# The kind SUM and AVG give per argument kind (DataFusion 55: sum(decimal(p,s)) is
# decimal(min(p+10, 38), s), avg(decimal(p,s)) is decimal(min(p+4, 38), min(s+4, 38)),
# avg(int64) is double). Other arguments are read as numbers (FLOAT) first.
AGGREGATE_KINDS: dict[tuple[str, Kind], Kind] = {
    ("sum", INT): INT,
    ("sum", FLOAT): FLOAT,
    ("sum", DECIMAL): DECIMAL,
    ("avg", INT): FLOAT,
    ("avg", FLOAT): FLOAT,
    ("avg", DECIMAL): DECIMAL,
}


# Standard SQL (Flavor.sql_types): the SQL type a kind is, for error messages, and which kinds
# SUM/AVG and arithmetic take and MIN/MAX order as themselves (DataFusion 55, DuckDB 1.x and
# PostgreSQL refuse sum(VARCHAR), sum(BOOLEAN), VARCHAR + INTEGER; they order text as text).
SQL_TYPE_NAMES: dict[Kind, str] = {
    INT: "BIGINT", FLOAT: "DOUBLE", DECIMAL: "DECIMAL", STRING: "VARCHAR", FIELD: "VARCHAR",
    BOOL: "BOOLEAN", TS: "TIMESTAMP", NATIVE_TS: "TIMESTAMP", NULL: "NULL", JSON: "JSON",
}


SQL_NUMBERS = NUMERIC | {NULL, JSON}  # a JSON value is typed by its text: numbers are numbers


SQL_ORDERED = NUMERIC | TEXTUAL | {BOOL, TS, NATIVE_TS}


MAX_DECIMAL_PRECISION = 38  # Arrow's decimal128


DECIMAL_TYPE = re.compile(r"decimal\((\d+),\s*(\d+)\)")


Typed = tuple[exp.Expression, Kind]


@dataclass(frozen=True)
class Column:
    """A column of a typed input (Parquet): ``name`` and a type name (see ``COLUMN_KINDS``)."""

    name: str
    type: str = "string"

    @property
    def decimal_scale(self) -> int | None:
        """The scale ``s`` of a ``decimal(p,s)`` column, else None."""
        found = DECIMAL_TYPE.fullmatch(self.type)
        return int(found.group(2)) if found else None
