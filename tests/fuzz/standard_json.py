"""Hypothesis strategies for the standard surface's JSON Lines tables: a JSON Lines object and a
standard-SQL query over its columns, written for our engine and for DuckDB (issue #39).

On the standard surface a JSON Lines object is a table of typed columns, inferred from a sample
(``flight_storage/formats/json_sniff.py``: its keys in the order they first appear, each typed
by the JSON kinds of its values). The generator writes the object and, from what it wrote, the
columns that documented inference gives (:func:`expected_type`, the module table of
``json_sniff``, restated here rather than imported, so that the sniffer is under test too); the
oracle is DuckDB's ``read_json(format = 'newline_delimited', columns = {...})`` over the same
bytes with those columns, as DuckDB types them:

| values of a key (nulls and absent keys aside) | ours | DuckDB's column |
|---|---|---|
| integers | ``int64`` | BIGINT |
| numbers, some with a fraction or exponent | ``float64`` | DOUBLE |
| ``true``/``false`` | ``bool`` | BOOLEAN |
| ISO 8601 timestamps, all with an offset or all without | ``timestamp`` (UTC instants) | TIMESTAMPTZ, the session in UTC (a value without offset is UTC) |
| dates ``YYYY-MM-DD`` | ``date`` | DATE |
| other strings (timestamps with and without offsets mixed among them), or only nulls | ``string`` | VARCHAR |
| objects, arrays, values of several kinds | ``json``: the compact JSON text | JSON, read as its text (``CAST(… AS VARCHAR)`` in the view ``t``) |

DuckDB's auto-detection is not the oracle: it agrees with the table only in part (it keeps a
column of timestamps written in several forms VARCHAR, reads nested values as STRUCT or LIST),
so the test would be about detection heuristics rather than answers. Whether our sniffer gives
the expected columns is checked beside the answers (:func:`tests.fuzz.differential.check_standard`).

The objects exercise absent keys and explicit ``null``, keys in a different order per line,
integers, numbers written with fractions, exponents and trailing zeros, integers among
numbers, booleans, strings with quotes, backslashes, control characters, non-ASCII text
(written raw or as ``\\uXXXX`` escapes, surrogate pairs included), timestamps with offsets
(``Z``, ``+05``, ``+0530``, ``-09:30``), without, and mixed (a string column), fractions of a
second, minutes without seconds, dates, nested objects and arrays, values of several kinds,
spaces around separators, CRLF line ends, blank lines, and no line end after the last line.
Both of our readers are reached: pyarrow's JSON parser (no ``json`` or ``date`` column, every
line one object) and the reference reader (``flight_storage/formats/json_lines_arrow.py``).
Queries are :func:`tests.fuzz.standard_sql.query_texts` over the typed columns, with
``SELECT *`` beside its shapes, and its JOINs (:func:`json_join_cases`).

Left out, because the two differ by definition, not by a bug:

* The spelling of numbers inside a ``json`` column's text: ours is the reader's compact text,
  where a number with an integral value prints as an integer and a fraction as Python's
  ``repr`` (``1.0`` → ``1``, ``1e2`` → ``100``, ``-0.0`` → ``0``, ``1e-7`` → ``1e-07``);
  DuckDB prints the double it read (``1.0``, ``100.0``, ``-0.0``, ``1e-7``). Both are the same
  JSON value (the reader keeps an integral number as an integer, ``json_values.parse_float``,
  which S3 Select's printing needs). Nested numbers are integers and fractions of two digits,
  not integral.
* Control characters other than ``\\b \\f \\n \\r \\t`` inside a ``json`` column: ours escapes
  ``\\u001f``, DuckDB ``\\u001F``. Strings of ``string`` columns hold any.
* An object whose sample has no key at all: there are no columns to type, so the standard
  surface keeps S3 Select's reading (``request/json_sniffing.py``); every object has a key.
* Values the sample did not see: every object here is read whole into its sample, so a later
  line of another kind (ours: ``CastFailed``, DuckDB: its own error) is not made.
* Integers beyond 64 bits, and sums or products that leave them: DuckDB's SUM of BIGINT is a
  HUGEINT; integers stay within ±1000.
* Duplicate keys in one object (ours: the last wins, pyarrow's parser hands those lines to the
  reference reader; DuckDB: its own rule), and keys that need quoting in SQL.
* What the CSV part (:mod:`tests.fuzz.standard_sql`) leaves out for the same expressions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import assume
from hypothesis import strategies as st

from tests.fuzz.standard_sql import (
    BOOL,
    FLOAT,
    INT,
    STR,
    TS,
    Sql,
    StandardCase,
    _Gen,
    join_texts,
    query_texts,
)

DUCKDB_TYPES: Final = {"int64": "BIGINT", "float64": "DOUBLE", "bool": "BOOLEAN",
                       "string": "VARCHAR", "timestamp": "TIMESTAMPTZ", "date": "DATE",
                       "json": "JSON"}
"""Our column type -> the DuckDB type ``read_json`` is given (the module's table)."""

_STRING_PIECES: Final = ["a", "b", "A", "B", " ", "é", "%", "_", ",", '"', "\\", "1", "9",
                         "\n", "\t", "\x01", "\U0001f600", "\u2028", "NaN", "'"]
_NESTED_PIECES: Final = ["a", "B", " ", "é", '"', "\\", "\n", "\t", "\U0001f600", "1"]

# What a generated value is: the JSON kind the documented inference reads off it.
_INT, _FLOAT, _BOOL, _STRING, _ZONED, _PLAIN, _DATE, _NESTED = (
    "int", "float", "bool", "str", "ts+", "ts-", "date", "nested")


@dataclass(frozen=True)
class _Value:
    text: str  # the JSON text written
    kind: str


def expected_type(kinds: set[str]) -> str:
    """The column type the documented inference gives a key whose non-null values are of
    ``kinds`` (the module's table)."""
    strings = {_STRING, _ZONED, _PLAIN, _DATE}
    if not kinds:
        return "string"
    if kinds <= {_INT}:
        return "int64"
    if kinds <= {_INT, _FLOAT}:
        return "float64"
    if kinds == {_BOOL}:
        return "bool"
    if kinds in ({_ZONED}, {_PLAIN}):
        return "timestamp"
    if kinds == {_DATE}:
        return "date"
    if kinds <= strings:
        return "string"
    return "json"


# --------------------------------------------------------------------------- values


def _string(draw: Any, pieces: list[str]) -> str:
    return "".join(draw(st.lists(st.sampled_from(pieces), max_size=4)))


def _dumps(draw: Any, value: Any) -> str:
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def _stamp(draw: Any, zoned: bool) -> _Value:
    date = (f"{draw(st.integers(1995, 2030)):04d}-{draw(st.integers(1, 12)):02d}-"
            f"{draw(st.integers(1, 28)):02d}")
    text = f"{date}{draw(st.sampled_from(['T', ' ']))}{draw(st.integers(0, 23)):02d}:" \
           f"{draw(st.integers(0, 59)):02d}"
    if draw(st.integers(0, 4)):
        text += f":{draw(st.integers(0, 59)):02d}"
        if draw(st.booleans()):
            text += "." + draw(st.text("0123456789", min_size=1, max_size=6))
    if zoned:
        hours, minutes = draw(st.integers(-11, 13)), draw(st.sampled_from([0, 0, 30, 45]))
        sign = "-" if hours < 0 else "+"
        text += draw(st.sampled_from([
            "Z", f"{sign}{abs(hours):02d}:{minutes:02d}", f"{sign}{abs(hours):02d}{minutes:02d}",
            f"{sign}{abs(hours):02d}"]))
    return _Value(json.dumps(text), _ZONED if zoned else _PLAIN)


@st.composite
def _number(draw: Any, fraction: bool) -> _Value:
    if not fraction:
        return _Value(str(draw(st.integers(-1000, 1000))), _INT)
    value = draw(st.integers(-5000, 5000)) / 100
    text = draw(st.sampled_from([repr(value), f"{value:.3f}", f"{value:e}", f"{value:E}"]))
    return _Value(text, _FLOAT)


@st.composite
def _nested(draw: Any, depth: int = 2) -> Any:
    """An object or array whose JSON text both engines spell alike (see the module)."""
    size = draw(st.integers(0, 3))
    if draw(st.booleans()):
        return [draw(_element(depth - 1)) for _ in range(size)]
    keys = draw(st.lists(st.sampled_from(["k", "x", "é", "a b"]), max_size=size, unique=True))
    return {key: draw(_element(depth - 1)) for key in keys}


def _element(depth: int) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.integers(-1000, 1000), st.booleans(), st.none(),
        st.integers(-5000, 5000).filter(lambda n: n % 100 != 0).map(lambda n: n / 100),
        st.lists(st.sampled_from(_NESTED_PIECES), max_size=3).map("".join))
    return st.one_of(scalars, _nested(depth)) if depth > 0 else scalars


@st.composite
def _value(draw: Any, shape: str) -> _Value:
    """One value of a column of ``shape``."""
    if shape == "int":
        return draw(_number(False))
    if shape == "float":
        return draw(_number(draw(st.integers(0, 3)) > 0))
    if shape == "bool":
        return _Value(draw(st.sampled_from(["true", "false"])), _BOOL)
    if shape == "str":
        return _Value(_dumps(draw, _string(draw, _STRING_PIECES)), _STRING)
    if shape in ("zoned", "plain"):
        return draw(_stamp(shape == "zoned"))
    if shape == "stamps":  # with and without offsets, and other strings: a string column
        return draw(st.one_of(_stamp(True), _stamp(False), _value("str")))
    if shape == "date":
        return _Value(json.dumps(f"{draw(st.integers(1995, 2030)):04d}-"
                                 f"{draw(st.integers(1, 12)):02d}-"
                                 f"{draw(st.integers(1, 28)):02d}"), _DATE)
    if shape == "nested":
        value = draw(_nested())
        return _Value(_dumps(draw, value), _NESTED)
    # "mixed": values of several kinds, a json column
    return draw(st.one_of(_number(False), _value("bool"), _value("str"),
                          _number(True).filter(lambda v: float(v.text) % 1 != 0)))


_SHAPES: Final = {"int": "n", "float": "f", "bool": "b", "str": "w", "zoned": "tz",
                  "plain": "t", "stamps": "s", "date": "d", "nested": "j", "mixed": "m"}
"""A column's shape -> the prefix of its name."""


@st.composite
def json_lines(draw: Any) -> tuple[bytes, list[tuple[str, str]]]:
    """A JSON Lines object and its columns as the documented inference types them."""
    shapes = draw(st.lists(st.sampled_from(list(_SHAPES)), min_size=1, max_size=5))
    names = [f"{_SHAPES[s]}{i}" for i, s in enumerate(shapes, start=1)]
    records: list[list[tuple[str, _Value | None]]] = []
    for _ in range(draw(st.integers(1, 8))):
        members = []
        for name, shape in zip(names, shapes, strict=True):
            presence = draw(st.integers(0, 7))
            if presence == 0:
                continue  # absent
            members.append((name, None if presence == 1 else draw(_value(shape))))
        records.append(draw(st.permutations(members)) if members else [])
    seen: dict[str, set[str]] = {}
    for record in records:
        for name, value in record:
            seen.setdefault(name, set()).update([] if value is None else [value.kind])
    assume(seen)  # an object without keys has no columns to type
    columns = [(name, expected_type(kinds)) for name, kinds in seen.items()]
    return _write(draw, records), columns


def _write(draw: Any, records: list[list[tuple[str, _Value | None]]]) -> bytes:
    comma, colon = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,", " :")]))
    end = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    lines = []
    for record in records:
        members = comma.join(f"{json.dumps(name)}{colon}{'null' if v is None else v.text}"
                             for name, v in record)
        lines.append(draw(st.sampled_from(["{", "{ "])) + members + "}")
        if draw(st.integers(0, 9)) == 0:
            lines.append("")  # a blank line
    text = end.join(lines) + (end if draw(st.integers(0, 5)) else "")
    return text.encode()


# --------------------------------------------------------------------------- queries


_PLAIN_NAME: Final = re.compile(r"[a-z][a-z0-9]*")


def _typed_reads(name: str, holds: str, kind: str) -> Sql | None:
    """A typed column read as the expression kind ``kind``: as itself, an integer also as a
    double, a date as a timestamp (None: it cannot be)."""
    assert _PLAIN_NAME.fullmatch(name), name
    reads = {
        (STR, "string"): name, (STR, "json"): name,
        (INT, "int64"): name,
        (FLOAT, "float64"): name, (FLOAT, "int64"): f"CAST({name} AS DOUBLE)",
        (BOOL, "bool"): name,
        (TS, "timestamp"): name, (TS, "date"): f"CAST({name} AS TIMESTAMP)",
    }.get((kind, holds))
    return None if reads is None else Sql.same(reads, kind)


@st.composite
def json_cases(draw: Any) -> StandardCase:
    """A JSON Lines object and a standard-SQL query over its typed columns, for our engine
    and for DuckDB."""
    data, columns = draw(json_lines())
    ours, duck, ordered = query_texts(draw, _Gen(draw, columns, _typed_reads, prefer_columns=True), star=True)
    return StandardCase(data, columns, ours, duck, ordered, source="json")


@st.composite
def json_join_cases(draw: Any) -> StandardCase:
    """A JSON Lines object and a JOIN of it with an aggregate of itself
    (:func:`tests.fuzz.standard_sql.join_texts`): the table a statement DataFusion plans reads
    as ``SELECT *`` reads it on the standard surface."""
    data, columns = draw(json_lines())
    ours, duck = join_texts(draw, _Gen(draw, columns, _typed_reads, prefer_columns=True))
    return StandardCase(data, columns, ours, duck, False, source="json")
