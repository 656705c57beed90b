"""Infer a JSON Lines object's columns and their types from a sample at its start.

A Flight SQL user who points a client at JSON Lines expects what DuckDB's ``read_json_auto``
shows: one column per key, typed, ``null`` and an absent key NULL. S3 Select's reading (each
path the statement uses as the compact JSON text of its value) stays for the s3-select
flavours; the standard surface reads a JSON Lines object without configuration as
:func:`sniff_json_lines` describes it (``request/json_sniffing.py`` decides when).

Columns are the keys of the sample's records, in the order they first appear (DuckDB's order).
A key's type is read off the JSON kinds of its non-null values in the sample, DuckDB's rules
as a table (:data:`KIND_TYPES`):

| values in the sample | column type | DuckDB's |
|---|---|---|
| integers | ``int64`` | BIGINT |
| numbers, some with a fraction or exponent | ``float64`` | DOUBLE |
| ``true``/``false`` | ``bool`` | BOOLEAN |
| strings, every one an ISO 8601 timestamp | ``timestamp`` (UTC instants: an offset is applied, a value without one read as UTC) | TIMESTAMP WITH TIME ZONE (offsets), TIMESTAMP (none) |
| strings, every one a date ``YYYY-MM-DD`` | ``date`` | DATE |
| other strings, or only ``null`` | ``string`` | VARCHAR (NULL) |
| objects, arrays, or values of several kinds | ``json``: the value's compact JSON text | STRUCT, LIST, JSON |

A string column whose values mix timestamps with and without an offset stays ``string``, as
DuckDB keeps it VARCHAR. A timestamp or date type is kept only when the reader
(:mod:`flight_storage.formats.json_typed`) converts every such value of the sample. Keys that
first appear after the sample are not columns (the bucket configuration can declare them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

from flight_storage.formats.csv_sniff import SniffedColumns
from flight_storage.formats.json_typed import JSON_TEXT, converts

_TIMESTAMP: Final = re.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,6})?)?(?P<zone>Z|[+-]\d\d(?::?\d\d)?)?")
_DATE: Final = re.compile(r"\d{4}-\d\d-\d\d")

KIND_TYPES: Final[tuple[tuple[frozenset[str], str], ...]] = (
    (frozenset(), "string"),
    (frozenset({"int"}), "int64"),
    (frozenset({"float"}), "float64"),
    (frozenset({"int", "float"}), "float64"),
    (frozenset({"bool"}), "bool"),
    (frozenset({"str"}), "string"),  # then timestamp or date where every value is one
)
"""The JSON kinds a key's sample values have -> its column type; any other set is ``json``."""

_KINDS: Final[tuple[tuple[type, str], ...]] = (
    (bool, "bool"),  # before int: a bool is an int to Python
    (int, "int"),
    (float, "float"),
    (str, "str"),
)


@dataclass(frozen=True)
class SniffedJson(SniffedColumns):
    """What the sample says about a JSON Lines object (names are its keys, in the order they
    first appear)."""


def read_json_sample(stream: BinaryIO, sample_bytes: int) -> bytes | None:
    """The object's first ``sample_bytes`` cut back to its last line end (the whole object
    when it is shorter), or None when no line ends inside the sample."""
    data = stream.read(sample_bytes + 1)
    if len(data) <= sample_bytes:
        return data
    end = data.rfind(b"\n", 0, sample_bytes)
    return data[: end + 1] if end != -1 else None


def sniff_json_lines(sample: bytes) -> SniffedJson:
    """Infer the columns of a JSON Lines sample (see the module's table).

    Args:
        sample: whole lines from the object's start (:func:`read_json_sample`).

    Returns:
        The sniffed table, or one whose ``reason`` says why there is none.

    Example:
        >>> t = sniff_json_lines(b'{"a": 1, "ts": "2024-08-16T20:29:54+02:00"}\\n{"b": 2.5}\\n')
        >>> t.names, t.types
        (('a', 'ts', 'b'), ('int64', 'timestamp', 'float64'))
    """
    try:
        text = sample.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError:
        return SniffedJson(reason="invalid UTF-8 in the sample")
    values: dict[str, list[Any]] = {}
    records = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)  # 3.0 stays a float here: the column is float64
        except (ValueError, RecursionError):
            return SniffedJson(reason=f"line {number} of the sample is not one JSON value")
        if not isinstance(record, dict):
            return SniffedJson(reason=f"line {number} of the sample is not a JSON object")
        records += 1
        for key, value in record.items():
            values.setdefault(key, []).append(value)
    if not records:
        return SniffedJson(reason="the object is empty")
    if not values:
        return SniffedJson(reason="the sample's objects have no keys")
    names = tuple(values)
    types = tuple(_column_type(values[name]) for name in names)
    return SniffedJson(names, types, records)


def _kind(value: Any) -> str:
    return next((kind for cls, kind in _KINDS if isinstance(value, cls)), JSON_TEXT)


def _column_type(values: Iterable[Any]) -> str:
    present = [v for v in values if v is not None]
    kinds = frozenset(_kind(v) for v in present)
    name = next((t for k, t in KIND_TYPES if k == kinds), JSON_TEXT)
    return _string_type(present) if name == "string" and present else name


def _string_type(texts: list[str]) -> str:
    """``timestamp`` or ``date`` where every text is one (and reads as one), else ``string``."""
    stamps = [_TIMESTAMP.fullmatch(t) for t in texts]
    if all(stamps):
        zoned = {m.group("zone") is not None for m in stamps if m is not None}
        if len(zoned) == 1 and converts(texts, "timestamp"):
            return "timestamp"
    if all(_DATE.fullmatch(t) for t in texts) and converts(texts, "date"):
        return "date"
    return "string"
