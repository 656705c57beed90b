"""A typed JSON Lines table's values: the reference reader's JSON text cells as typed columns.

On the standard surface a JSON Lines object is a table of typed columns (sniffed,
:mod:`flight_storage.formats.json_sniff`, or declared in the bucket's ``.flight-select.json``).
The reference reader (:func:`~flight_storage.formats.json_input.iter_json_batches`) reads
each column as the compact JSON text of its key's value (byte ranges, compression, record
limits and JSON errors are its own); :func:`typed_batch` turns those cells into the column's
type with **pyarrow's JSON parser and an explicit schema**, which converts a value exactly or
refuses it (a fraction for an ``int64``, a string for a number, a number for a timestamp),
never truncating:

| column type | a cell | reads as |
|---|---|---|
| any | absent key, or ``null`` | NULL |
| ``int64``, ``float64``, ``bool`` | a JSON number / boolean of the type | its value (an integral number is also a ``float64``) |
| ``timestamp`` | an ISO 8601 string | the instant in UTC (an offset applied; none: UTC) |
| ``date`` | a ``YYYY-MM-DD`` string | the date |
| ``string`` | a JSON string | the string, unquoted and unescaped |
| ``string`` | a number, boolean, object or array | its JSON text (``12``, ``{"a":1}``), as DuckDB reads it into VARCHAR |
| ``json`` | any value | its compact JSON text |
| any other | a value of another kind or out of range | ``CastFailed``, naming the object, record, column and value |

A value that does not convert always fails the query (``bad_values`` is CSV's setting): a
JSON value of an unexpected kind is a sample that did not see the whole object, and the
configuration is where a user says what the column is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from flight_storage.errors import InputFormatError
from flight_storage.formats.typed_columns import TypedColumns, arrow_type

JSON_TEXT: Final = "json"
"""The column type of values kept as their compact JSON text (objects, arrays, mixed kinds)."""

_NULL_TEXT: Final = pa.scalar("null", pa.string())
_NO_STRING: Final = pa.scalar(None, pa.string())
_DATE_TEXT: Final = r'^"\d{4}-\d\d-\d\d"$'


def column_paths(columns: TypedColumns, names: Sequence[str] | None = None
                 ) -> dict[str, tuple[tuple[Any, ...], ...]]:
    """The reader's paths of a typed table's columns (``names``: those only): each column its
    key, matched in its own case (the last of duplicate keys wins)."""
    return {name: (("exact_key", name),) for name in (columns.names if names is None else names)}


def typed_batch(batch: pa.RecordBatch, columns: TypedColumns, *, first_record: int,
                object_name: str, where: str = "") -> pa.RecordBatch:
    """The reader's JSON text cells converted to their columns' types.

    Args:
        batch: one Utf8 column of JSON text per column read, named as the column
            (:func:`column_paths`): all of ``columns`` or some of them.
        columns: the table's columns.
        first_record: the number of the batch's first record (1-based).
        object_name: ``bucket/key``, for errors.
        where: what the record numbers count from, for errors (``""``: the object's start).

    Raises:
        InputFormatError: ``CastFailed`` for a value that does not convert.

    Example:
        >>> cols = TypedColumns(("a", "s"), ("int64", "string"))
        >>> cells = pa.record_batch([pa.array(["1", None]), pa.array(['"x"', "2"])], ["a", "s"])
        >>> typed_batch(cells, cols, first_record=1, object_name="b/k").to_pylist()
        [{'a': 1, 's': 'x'}, {'a': None, 's': '2'}]
    """
    if not batch.num_columns:
        return batch  # no column read (count(*)): its rows still count
    fields = []
    arrays = []
    for name, cells in zip(batch.schema.names, batch.columns, strict=True):
        index = columns.names.index(name)
        target = arrow_type(columns.types[index])
        converted, bad = _convert(cells, columns.types[index], target)
        if bad is not None:
            raise _cast_failed(columns, index, first_record + bad, cells[bad].as_py(),
                               object_name, where)
        fields.append(pa.field(name, target))
        arrays.append(converted)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def converts(texts: Sequence[str], type_name: str) -> bool:
    """Whether every string of ``texts``, as a JSON string, reads as ``type_name``."""
    cells = pa.array([json.dumps(t) for t in texts], pa.string())
    return _convert(cells, type_name, arrow_type(type_name))[1] is None


def _convert(cells: pa.Array, type_name: str, target: pa.DataType
             ) -> tuple[pa.Array, int | None]:
    """The cells as ``target`` and the index of the first that does not convert (None)."""
    is_null = pc.fill_null(pc.equal(cells, _NULL_TEXT), True)
    if type_name == JSON_TEXT:
        return pc.if_else(is_null, _NO_STRING, cells), None
    if target == pa.string():
        quoted = pc.fill_null(pc.starts_with(cells, '"'), False)
        decoded = _parsed(pc.if_else(quoted, cells, _NULL_TEXT), target)
        return pc.if_else(quoted, decoded, pc.if_else(is_null, _NO_STRING, cells)), None
    if pa.types.is_date(target):
        dated = pc.fill_null(pc.match_substring_regex(cells, _DATE_TEXT), False)
        wrong = pc.and_(pc.invert(is_null), pc.invert(dated))
        if pc.any(wrong).as_py():
            return cells, pc.index(wrong, True).as_py()
        stamps, bad = _convert(cells, "timestamp", arrow_type("timestamp"))
        return (pc.cast(stamps, target) if bad is None else stamps), bad
    try:
        return _parsed(cells, target), None
    except pa.ArrowInvalid:
        return cells, _first_bad(cells, target)


def _parsed(cells: pa.Array, target: pa.DataType) -> pa.Array:
    """pyarrow's JSON parser over one ``{"v": cell}`` line per cell, with ``target`` as the
    explicit type of ``v``."""
    if len(cells) == 0:
        return pa.array([], target)
    lines = pc.binary_join_element_wise('{"v":', pc.fill_null(cells, _NULL_TEXT), "}\n", "")
    size = pc.sum(pc.binary_length(lines)).as_py()
    data = lines.buffers()[2]  # a new array: its values start at byte 0
    table = pa_json.read_json(
        pa.BufferReader(data.slice(0, size)),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=max(size, 1 << 16)),
        parse_options=pa_json.ParseOptions(explicit_schema=pa.schema([("v", target)]),
                                           unexpected_field_behavior="error"))
    return table.column(0).combine_chunks()


def _first_bad(cells: pa.Array, target: pa.DataType) -> int:
    """The index of the first cell that does not convert (bisection over prefixes: the error
    path only)."""
    low, high = 0, len(cells)  # cells[:low] convert; cells[:high] do not
    while high - low > 1:
        middle = (low + high) // 2
        try:
            _parsed(cells.slice(0, middle), target)
            low = middle
        except pa.ArrowInvalid:
            high = middle
    return high - 1


def _cast_failed(columns: TypedColumns, index: int, record: int, value: str,
                 object_name: str, where: str) -> InputFormatError:
    name, type_name = columns.names[index], columns.types[index]
    origin = ("its type was inferred from the object's first records; declare the column in "
              "the bucket's .flight-select.json, as \"json\" to read any value as its JSON text"
              if columns.sniffed else "change its type in the bucket's .flight-select.json")
    return InputFormatError(
        f"{object_name}: record {record}{where}, column {index + 1} ({name}): {value} is not "
        f"a valid {type_name} ({origin})",
        code="CastFailed", row=record, column=index + 1)

