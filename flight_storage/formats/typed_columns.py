"""Configured (or sniffed) column names and types for text objects (CSV).

Faithful to S3 Select, a CSV field is a string unless the query casts it. A bucket configuration
may instead declare a prefix's columns (``{"name": "order_id", "type": "int64"}``), and on the
standard surface an object without configuration gets the columns its first records show
(:mod:`flight_storage.formats.csv_sniff`); Flight SQL and Spark clients then see a typed table
and the dialect translates the statement as it does for Parquet.

DataFusion's CSV reader converts the fields itself where the survey lets it read the object
(``execution/native_csv.py``); the reference reader's ``_1.._N`` strings are converted here,
batch by batch, with the same outcome for a field that does not convert (``n/a`` in an
``int64`` column), chosen by :data:`BAD_VALUES` (``bad_values`` in the configuration,
``--bad-values`` of ``serve``):

| ``bad_values`` | a field that does not convert |
|---|---|
| ``error`` (default) | fails the query that reads its column, naming the object, line, column and value |
| ``null`` | reads as NULL; the query's FlightInfo and result schema carry a warning saying how many values of which column (the server counts them when it plans) |

A value without a zone in a ``timestamp`` column is read as UTC (``2024-08-16 20:29:54`` is
``2024-08-16T20:29:54Z``), as DataFusion's reader reads it. Hand-written because pyarrow's casts
refuse a zone-less text for a zoned timestamp and have no per-value NULL-on-error mode
(``pc.cast(safe=False)`` would wrap numbers instead of giving NULL).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InputFormatError, InvalidRequestError

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")

_TYPES: dict[str, Callable[[], pa.DataType]] = {
    "string": pa.string,
    "int64": pa.int64,
    "int32": pa.int32,
    "float64": pa.float64,
    "double": pa.float64,
    "bool": pa.bool_,
    "date": pa.date32,
    "timestamp": lambda: pa.timestamp("us", tz="UTC"),
    "json": pa.string,  # JSON Lines: a value's compact JSON text (formats/json_typed.py)
}

BAD_VALUES_ERROR = "error"
BAD_VALUES_NULL = "null"
BAD_VALUES = (BAD_VALUES_ERROR, BAD_VALUES_NULL)
"""What a field that does not convert to its column's type does (see the module's table)."""

_ZONE = r"\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?\s*(?:[zZ]|[+-]\d\d(?::?\d\d)?)$"
"""The end of a timestamp text that names its zone (after a time: ``2024-08-16`` has none)."""


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of a configured type name (``int64``, ``decimal(12,2)``, ...)."""
    key = name.strip().lower()
    match = _DECIMAL.fullmatch(key)
    if match is not None:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    factory = _TYPES.get(key)
    if factory is None:
        raise InvalidRequestError(
            f"unknown column type {name!r}; use one of {sorted(_TYPES)} or decimal(p,s)"
        )
    return factory()


def check_bad_values(value: str) -> str:
    """``value`` when it is one of :data:`BAD_VALUES`.

    Raises:
        InvalidRequestError: anything else.
    """
    if value not in BAD_VALUES:
        raise InvalidRequestError(
            f"bad_values must be one of {', '.join(BAD_VALUES)}, not {value!r}")
    return value


@dataclass(frozen=True)
class TypedColumns:
    """The declared (or sniffed) columns of a text table, in field order.

    Attributes:
        names: column names.
        types: configured type names (``int64``, ``timestamp``, ``decimal(10,2)``, ...).
        bad_values: ``error`` or ``null`` (see the module's table).
        sniffed: the columns were inferred from the object's first records, not configured
            (an error then says how to configure them).
    """

    names: tuple[str, ...]
    types: tuple[str, ...]
    bad_values: str = BAD_VALUES_ERROR
    sniffed: bool = False

    @classmethod
    def from_config(cls, columns: Sequence[Mapping[str, str]], *,
                    bad_values: str = BAD_VALUES_ERROR, sniffed: bool = False) -> TypedColumns:
        """Build from ``[{"name": ..., "type": ...}, ...]``."""
        try:
            names = tuple(str(c["name"]) for c in columns)
            types = tuple(str(c.get("type", "string")) for c in columns)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidRequestError(f"invalid column configuration ({exc})") from None
        for type_name in types:
            arrow_type(type_name)
        repeated = sorted(n for n, times in Counter(names).items() if times > 1)
        if repeated:
            raise InvalidRequestError(f"column {repeated[0]!r} is declared more than once")
        return cls(names, types, check_bad_values(bad_values), sniffed)

    @property
    def schema(self) -> pa.Schema:
        """The typed table's Arrow schema (every column nullable)."""
        return pa.schema([pa.field(n, arrow_type(t)) for n, t in zip(self.names, self.types, strict=True)])

    def bad_value(self, object_name: str, line: int | None, column: int, value: str
                  ) -> InputFormatError:
        """The error of a field that does not convert: object, line, column and value, and
        what the user can do about it.

        Args:
            object_name: ``bucket/key``.
            line: the field's line in the object (1-based, the header counted), if known.
            column: the field's column (1-based).
            value: the field's text.
        """
        name, type_name = self.names[column - 1], self.types[column - 1]
        where = f"line {line}, " if line is not None else ""
        origin = ("its type was inferred from the object's first records; declare the column "
                  "in the bucket's .flight-select.json" if self.sniffed
                  else "change its type in the bucket's .flight-select.json")
        return InputFormatError(
            f"{object_name}: {where}column {column} ({name}): {value!r} is not a valid "
            f"{type_name} ({origin}, or set \"bad_values\": \"null\" to read such values as "
            "NULL)",
            code="CastFailed", line=line, column=column)

    def convert(self, batch: pa.RecordBatch, first_line: int | None, object_name: str
                ) -> pa.RecordBatch:
        """Cast a batch of ``_1.._N`` strings to the declared names and types.

        Args:
            batch: the reader's strings (wider than the columns: an error, as DataFusion's
                reader has it).
            first_line: the line of the batch's first record in the object (1-based), if
                known.
            object_name: ``bucket/key``, for errors.

        Raises:
            InputFormatError: a record wider than the columns, or (``bad_values`` ``error``) a
                field that does not convert.
        """
        schema = self.schema
        _check_width(batch, len(schema), first_line, object_name)
        columns = []
        for index, target in enumerate(schema):
            column = batch.column(index) if index < batch.num_columns else pa.nulls(
                batch.num_rows, pa.string())
            if target.type != pa.string():
                column, bad = cast_or_null(column, target.type)
                if bad is not None and self.bad_values == BAD_VALUES_ERROR:
                    line = first_line + bad[0] if first_line is not None else None
                    raise self.bad_value(object_name, line, index + 1, bad[1])
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def _check_width(batch: pa.RecordBatch, width: int, first_line: int | None,
                 object_name: str) -> None:
    """Refuse a record with a field past the last column (an empty one reads as NULL under
    Ceph's rules and is no field then)."""
    for extra in range(width, batch.num_columns):
        present = pc.is_valid(batch.column(extra))
        if pc.any(present).as_py():
            row = pc.index(present, True).as_py()
            where = f"line {first_line + row}" if first_line is not None else "a record"
            raise InputFormatError(
                f"{object_name}: {where} has more fields than the table's {width} columns",
                code="CSVParsingError",
                line=first_line + row if first_line is not None else None,
                column=extra + 1)


def cast_or_null(column: pa.Array, data_type: pa.DataType
                 ) -> tuple[pa.Array, tuple[int, str] | None]:
    """The cast column, and the index and text of its first bad value (None if none); an
    empty field is NULL."""
    trimmed = pc.utf8_trim_whitespace(column)
    trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)
    try:
        return _cast(trimmed, data_type), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # Only on the error path: value by value, so one bad field costs its value, not its batch.
    values: list[object] = []
    first_bad: tuple[int, str] | None = None
    for index, value in enumerate(trimmed.to_pylist()):
        if value is None:
            values.append(None)
            continue
        try:
            values.append(_cast(pa.array([value]), data_type)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values.append(None)
            if first_bad is None:
                first_bad = (index, value)
    return pa.array(values, type=data_type), first_bad


def _cast(text: pa.Array, data_type: pa.DataType) -> pa.Array:
    """pyarrow's cast, a zone-less text read as UTC where the type has a zone."""
    if not (pa.types.is_timestamp(data_type) and data_type.tz is not None):
        return pc.cast(text, data_type)
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONE), False)
    if pc.all(zoned).as_py():
        return pc.cast(text, data_type)
    naive = pa.timestamp(data_type.unit)
    local = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), text), naive)
    as_utc = pc.assume_timezone(local, "UTC").cast(data_type)
    if not pc.any(zoned).as_py():
        return as_utc
    return pc.if_else(zoned, pc.cast(pc.if_else(zoned, text, pa.scalar(None, pa.string())),
                                     data_type), as_utc)
