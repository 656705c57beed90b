"""Vectorised kernels for the UDFs named in :mod:`select_dialect.udf_names`.

Every kernel works on whole ``pyarrow`` arrays with ``pyarrow.compute`` (calendar arithmetic
included); the only Python loops are over the *distinct* values of an argument that is a
pattern (``to_string`` formats, dynamic ``LIKE`` patterns, date parts), in
``s3_json_to_string`` a per-row ``json.loads`` for string values that contain a backslash
escape (rare), and in ``s3_json_in`` / ``s3_json_equal`` one decode per distinct pair of JSON
container texts (only queries that compare JSON arrays use them). A kernel that meets a
processing error raises :func:`processing_error`; the engine turns DataFusion's error text
back into ``(code, message)`` with :func:`parse_processing_error`.

Example:
    >>> import datafusion
    >>> ctx = datafusion.SessionContext()
    >>> register_udfs(ctx)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import datafusion
import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.formats.json_text import quote_strings
from flight_storage.formats.timestamp_text import (
    nanos_of_second,
    offset_text,
    wall_clock,
    zero_pad,
)
from flight_storage.formats.values import S3_TIMESTAMP, ZONE_NONE, ZONE_OFFSET, ZONE_Z
from select_dialect import udf_names as U
from select_dialect.like_patterns import like_to_regex
from select_dialect.timestamp_format import tokenize

Kernel = Callable[..., pa.Array]

_ERROR_RE = re.compile(r"S3SELECT_ERROR<([A-Za-z]+)\|([0-9a-f]*)>")

_ARROW_TYPES: dict[str, pa.DataType] = {
    "utf8": pa.utf8(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp_ns_utc": pa.timestamp("ns", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "s3_timestamp": S3_TIMESTAMP,
}

_INT_TEXT = r"^[+-]?[0-9]+$"
_FLOAT_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NUMBER_PREFIX = re.compile(r"^\s*[+-]?(\d|\.\d)")
_TIMESTAMP_TEXT = (
    r"^(?P<y>[0-9]{4})(?:-(?P<mo>[0-9]{2})(?:-(?P<d>[0-9]{2}))?)?T"
    r"(?:(?P<h>[0-9]{2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2})(?:\.(?P<f>[0-9]{1,9}))?)?"
    r"(?P<z>Z|[+-][0-9]{2}:[0-9]{2})?)?$"
)

# ISO 8601 basic format (Ceph accepts it: ``19171028T021607Z``), rewritten to the extended
# form before parsing: with seconds (and an optional fraction), or hours and minutes only.
_BASIC_TIMESTAMPS = (
    (
        r"^([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})(\.[0-9]{1,9})?"
        r"(Z|[+-][0-9]{2}:[0-9]{2})?$",
        r"\1-\2-\3T\4:\5:\6\7\8",
    ),
    (
        r"^([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})?$",
        r"\1-\2-\3T\4:\5\6",
    ),
)

_NS = {"second": 10**9, "minute": 60 * 10**9, "hour": 3600 * 10**9, "day": 86400 * 10**9}
_DAY_NS = _NS["day"]
# date_add adds precision as necessary (AWS: DATE_ADD(month, 1, `2010T`) is 2010-02T)
_PART_PRECISION = {"year": 0, "ceph_year": 0, "month": 1, "day": 2, "hour": 3, "minute": 3,
                   "second": 4}
# Months per unit of the calendar parts. ``ceph_year`` is Ceph's year (boost's years: the last
# day of a month stays the last day, 2023-02-28 + 1 year is 2024-02-29); the others clamp.
_CALENDAR_MONTHS = {"year": 12, "month": 1, "ceph_year": 12}
_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip


class UdfProcessingError(ValueError):
    """Raised inside a kernel; its text carries the S3 code and message through DataFusion."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"S3SELECT_ERROR<{code}|{message.encode('utf-8').hex()}>")
        self.code = code
        self.message = message


def processing_error(code: str, message: str) -> UdfProcessingError:
    """The exception a kernel raises for a processing error (``raise processing_error(...)``).

    Example:
        >>> parse_processing_error(str(processing_error("CastFailed", "bad")))
        ('CastFailed', 'bad')
    """
    return UdfProcessingError(code, message)


def parse_processing_error(text: str) -> tuple[str, str] | None:
    """Recover ``(code, message)`` from a DataFusion error text, or None if there is none."""
    match = _ERROR_RE.search(text)
    if match is None:
        return None
    return match.group(1), bytes.fromhex(match.group(2)).decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------- helpers


def _first_invalid(values: pa.Array, bad: pa.Array) -> str:
    index = pc.index(bad, True).as_py()
    return str(values[index].as_py())


def _any(mask: pa.Array) -> bool:
    return bool(pc.any(pc.fill_null(mask, False)).as_py())


def _conversion_error(text: str) -> UdfProcessingError:
    if _NUMBER_PREFIX.match(text):
        return processing_error("CastFailed", "extra characters after the number")
    return processing_error("CastFailed", "text cannot be converted to a number")


def _range_error() -> UdfProcessingError:
    return processing_error(
        "CastFailed", "converted value would fall out of the range of the result type!"
    )


def _const(values: pa.Array) -> str | None:
    """The single value of a literal argument (None if it varies or is null)."""
    distinct = pc.unique(values)
    if len(distinct) != 1:
        return None
    value = distinct[0].as_py()
    return None if value is None else str(value)


# ---------------------------------------------------------------------------- casts


def cast_int(values: pa.Array) -> pa.Array:
    """``s3_cast_int``: trim spaces, accept ``[+-]digits``, else CastFailed (Ceph wording)."""
    text = pc.utf8_trim_whitespace(values)
    good = pc.match_substring_regex(text, _INT_TEXT)
    bad = pc.and_(values.is_valid(), pc.invert(pc.fill_null(good, False)))
    if _any(bad):
        raise _conversion_error(_first_invalid(values, bad))
    # Arrow's string -> int cast rejects a leading "+"; it is valid s3-select ("+00").
    text = pc.replace_substring_regex(text, r"^\+", "")
    try:
        return pc.cast(text, pa.int64())
    except (pa.ArrowInvalid, OverflowError):
        raise _range_error() from None


def cast_float(values: pa.Array) -> pa.Array:
    """``s3_cast_float``: decimal/scientific text to float64, CastFailed otherwise."""
    text = pc.utf8_trim_whitespace(values)
    good = pc.match_substring_regex(text, _FLOAT_TEXT)
    bad = pc.and_(values.is_valid(), pc.invert(pc.fill_null(good, False)))
    if _any(bad):
        raise _conversion_error(_first_invalid(values, bad))
    try:
        out = pc.cast(text, pa.float64())
    except pa.ArrowInvalid:
        raise _range_error() from None
    if _any(pc.is_inf(out)):
        raise _range_error()
    return out


def string_to_bool(values: pa.Array) -> pa.Array:
    """``s3_string_to_bool``: 'true'/'false' (any case), a number is true when non-zero,
    any other text is false; NULL stays NULL."""
    text = pc.utf8_lower(pc.utf8_trim_whitespace(values))
    numeric = pc.fill_null(pc.match_substring_regex(text, _FLOAT_TEXT), False)
    number = pc.cast(pc.if_else(numeric, text, "0"), pa.float64())
    out = pc.if_else(
        pc.equal(text, "true"),
        True,
        pc.if_else(numeric, pc.not_equal(number, 0.0), False),
    )
    return pc.if_else(values.is_valid(), out, pa.scalar(None, pa.bool_()))


# ---------------------------------------------------------------------------- JSON values


def _is_json_string(values: pa.Array) -> pa.Array:
    return pc.fill_null(pc.starts_with(values, '"'), False)


def json_to_string(values: pa.Array) -> pa.Array:
    """``s3_json_to_string``: a JSON string's text (unescaped), JSON ``null`` -> NULL, any
    other value its JSON text. Strings with backslash escapes are decoded per row."""
    is_string = _is_json_string(values)
    inner = pc.utf8_slice_codeunits(values, 1, -1)
    out = pc.if_else(is_string, inner, values)
    out = pc.if_else(pc.fill_null(pc.equal(values, "null"), False), pa.scalar(None, pa.utf8()), out)
    escaped = pc.and_(is_string, pc.fill_null(pc.match_substring(inner, "\\"), False))
    if _any(escaped):
        rows = pc.indices_nonzero(escaped).to_pylist()
        decoded = out.to_pylist()
        for row in rows:
            decoded[row] = json.loads(values[row].as_py())
        out = pa.array(decoded, pa.utf8())
    return out


def json_to_double(values: pa.Array) -> pa.Array:
    """``s3_json_to_double``: a JSON number (or a string holding one) as float64, true/false
    as 1/0, anything else NULL."""
    text = pc.if_else(_is_json_string(values), pc.utf8_slice_codeunits(values, 1, -1), values)
    text = pc.utf8_trim_whitespace(text)
    numeric = pc.fill_null(pc.match_substring_regex(text, _FLOAT_TEXT), False)
    number = pc.cast(pc.if_else(numeric, text, "0"), pa.float64())
    out = pc.if_else(numeric, number, pa.scalar(None, pa.float64()))
    out = pc.if_else(pc.fill_null(pc.equal(values, "true"), False), 1.0, out)
    return pc.if_else(pc.fill_null(pc.equal(values, "false"), False), 0.0, out)


def _json_same(a: Any, b: Any) -> bool:
    """Equality of two decoded JSON values: numbers by value, containers member-wise,
    booleans only with booleans (``true`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise processing_error("InvalidJsonValue", f"not a JSON value: {text[:60]!r}") from None


def _json_pairs(first: pa.Array, second: pa.Array, decide: Callable[[Any, Any], bool]) -> pa.Array:
    """Apply ``decide`` to the decoded values of each *distinct* (first, second) pair.

    JSON texts are decoded once per distinct pair: a constant needle against repeated
    arrays costs one decode per distinct array. Only queries that compare JSON containers
    reach this (``x IN s.arr[*]``, ``(1,2) = s.arr``); a row with a NULL argument (MISSING)
    gives NULL.
    """
    keys = pc.binary_join_element_wise(first, second, "\x00")
    encoded = pc.dictionary_encode(keys)
    answers = []
    for key in encoded.dictionary.to_pylist():
        left, right = key.split("\x00", 1)
        answers.append(decide(_decode(left), _decode(right)))
    return pc.take(pa.array(answers, pa.bool_()), encoded.indices)


def _contains(needle: Any, haystack: Any) -> bool:
    if isinstance(haystack, list):
        return any(_json_same(needle, element) for element in haystack)
    return _json_same(needle, haystack)


def json_in(needles: pa.Array, haystacks: pa.Array) -> pa.Array:
    """``s3_json_in``: the needle (JSON text) equals an element of the haystack array (a
    non-array haystack is a one-element list); NULL when either is NULL (MISSING)."""
    return _json_pairs(needles, haystacks, _contains)


def json_equal(first: pa.Array, second: pa.Array) -> pa.Array:
    """``s3_json_equal``: structural equality of two JSON texts (``[2,3.0]`` = ``[2,3]``)."""
    return _json_pairs(first, second, _json_same)


def json_quote(values: pa.Array) -> pa.Array:
    """``s3_json_quote``: a string as a JSON string literal (the one spelling of
    :func:`flight_storage.formats.json_text.quote_strings`)."""
    return quote_strings(values)


# ---------------------------------------------------------------------------- timestamps


def _struct(
    utc_ns: pa.Array, offset: pa.Array, zone: pa.Array, precision: pa.Array, digits: pa.Array,
    valid: pa.Array,
) -> pa.Array:
    arrays = [
        pc.cast(utc_ns, pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        pc.cast(offset, pa.int16()),
        pc.cast(zone, pa.int8()),
        pc.cast(precision, pa.int8()),
        pc.cast(digits, pa.int8()),
    ]
    present = pc.fill_null(valid, False)
    # children NULL too: DataFusion's get_field reads a child under a NULL parent as is, so
    # ``get_field(to_timestamp(NULL), 'utc')`` would be 1970 and compare as a real instant
    arrays = [pc.if_else(present, a, pa.scalar(None, a.type)) for a in arrays]
    return pa.StructArray.from_arrays(arrays, fields=list(S3_TIMESTAMP), mask=pc.invert(present))


def to_timestamp(values: pa.Array) -> pa.Array:
    """``s3_to_timestamp``: parse ``YYYY[-MM[-DD]]T[HH:MM[:SS[.f…]][Z|±HH:MM]]`` or the
    basic form ``YYYYMMDDTHHMM[SS[.f…]][Z|±HH:MM]``."""
    text = pc.utf8_upper(pc.utf8_trim_whitespace(values))
    for pattern, replacement in _BASIC_TIMESTAMPS:
        text = pc.replace_substring_regex(text, pattern, replacement)
    matched = pc.fill_null(pc.match_substring_regex(text, _TIMESTAMP_TEXT), False)
    bad = pc.and_(values.is_valid(), pc.invert(matched))
    if _any(bad):
        raise processing_error(
            "CastFailed", f"cannot convert {_first_invalid(values, bad)!r} to a timestamp"
        )
    safe = pc.if_else(matched, text, "1970T")
    parts = pc.extract_regex(safe, _TIMESTAMP_TEXT)
    field = {name: pc.struct_field(parts, name) for name in ("y", "mo", "d", "h", "mi", "s", "f", "z")}

    def default(name: str, value: str) -> pa.Array:
        return pc.if_else(pc.equal(field[name], ""), value, field[name])

    iso = pc.binary_join_element_wise(
        field["y"], "-", default("mo", "01"), "-", default("d", "01"), "T",
        default("h", "00"), ":", default("mi", "00"), ":", default("s", "00"), "",
    )  # fmt: skip
    try:
        local = pc.strptime(iso, format="%Y-%m-%dT%H:%M:%S", unit="ns")
    except pa.ArrowInvalid:
        raise processing_error("CastFailed", "invalid date or time in timestamp") from None
    fraction = pc.cast(pc.utf8_rpad(field["f"], 9, "0"), pa.int64())
    zone_text = field["z"]
    has_offset = pc.greater(pc.utf8_length(zone_text), 1)
    hours = pc.cast(pc.if_else(has_offset, pc.utf8_slice_codeunits(zone_text, 1, 3), "0"), pa.int64())
    minutes = pc.cast(pc.if_else(has_offset, pc.utf8_slice_codeunits(zone_text, 4, 6), "0"), pa.int64())
    sign = pc.if_else(pc.starts_with(zone_text, "-"), -1, 1)
    offset = pc.multiply(sign, pc.add(pc.multiply(hours, 60), minutes))
    local_ns = pc.add(pc.cast(local, pa.int64()), fraction)
    utc_ns = pc.subtract(local_ns, pc.multiply(offset, 60 * 10**9))
    zone = pc.if_else(pc.equal(zone_text, ""), ZONE_NONE, pc.if_else(pc.equal(zone_text, "Z"), ZONE_Z, ZONE_OFFSET))
    precision = pc.if_else(
        pc.equal(field["mo"], ""), 0,
        pc.if_else(pc.equal(field["d"], ""), 1,
        pc.if_else(pc.equal(field["h"], ""), 2,
        pc.if_else(pc.equal(field["s"], ""), 3,
        pc.if_else(pc.equal(field["f"], ""), 4, 5)))),
    )  # fmt: skip
    return _struct(utc_ns, offset, zone, precision, pc.utf8_length(field["f"]), values.is_valid())


def timestamp_from_utc(instants: pa.Array, precision: pa.Array) -> pa.Array:
    """``s3_timestamp_from_utc``: an Arrow instant as an s3 timestamp without zone."""
    ns = pc.cast(pc.cast(instants, pa.timestamp("ns", tz="UTC")), pa.int64())
    zeros = pa.array([0] * len(instants), pa.int64())
    return _struct(ns, zeros, zeros, pc.fill_null(precision, 4), zeros, instants.is_valid())


def timestamp_z(instants: pa.Array, precision: pa.Array) -> pa.Array:
    """``s3_timestamp_z``: an Arrow instant as an s3 timestamp written in UTC (``Z``)."""
    ns = pc.cast(pc.cast(instants, pa.timestamp("ns", tz="UTC")), pa.int64())
    zeros = pa.array([0] * len(instants), pa.int64())
    zone = pa.array([ZONE_Z] * len(instants), pa.int64())
    return _struct(ns, zeros, zone, pc.fill_null(precision, 4), zeros, instants.is_valid())


def _fields(ts: pa.Array) -> dict[str, pa.Array]:
    """The struct fields as int64 arrays (nulls filled with 0) plus the validity mask."""
    flat = {f.name: ts.field(f.name) for f in S3_TIMESTAMP}
    names = {"utc": "utc", "offset": "offset_minutes", "zone": "zone", "precision": "precision", "digits": "fraction_digits"}
    out = {key: pc.fill_null(pc.cast(flat[name], pa.int64()), 0) for key, name in names.items()}
    out["valid"] = pc.and_(ts.is_valid(), flat["utc"].is_valid())
    return out


def _local_ns(f: dict[str, pa.Array]) -> pa.Array:
    return pc.add(f["utc"], pc.multiply(f["offset"], 60 * 10**9))


def _as_time(ns: pa.Array) -> pa.Array:
    return pc.cast(ns, pa.int64()).cast(pa.timestamp("ns"))


def local_time(ts: pa.Array) -> pa.Array:
    """``s3_local_time``: the wall-clock time at the timestamp's own offset (naive)."""
    f = _fields(ts)
    return pc.if_else(f["valid"], wall_clock(f["utc"], f["offset"]),
                      pa.scalar(None, pa.timestamp("ns")))


def _month_index_and_rest(ns: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Months since year 0 and the nanoseconds since the start of that month."""
    stamps = _as_time(ns)
    index = pc.add(pc.multiply(pc.cast(pc.year(stamps), pa.int64()), 12), pc.subtract(pc.cast(pc.month(stamps), pa.int64()), 1))
    start = pc.cast(pc.floor_temporal(stamps, unit="month"), pa.int64())
    return index, pc.subtract(pc.cast(stamps, pa.int64()), start)


def _month_start(index: pa.Array) -> pa.Array:
    """Nanoseconds of the first instant of month ``index`` (months since year 0)."""
    year = pc.divide(index, 12)
    month = pc.add(pc.subtract(index, pc.multiply(year, 12)), 1)
    text = pc.binary_join_element_wise(zero_pad(year, 4), "-", zero_pad(month, 2), "-01", "")
    return pc.cast(pc.strptime(text, format="%Y-%m-%d", unit="ns"), pa.int64())


def _days_in_month(index: pa.Array, start: pa.Array) -> pa.Array:
    return pc.divide(pc.subtract(_month_start(pc.add(index, 1)), start), _DAY_NS)


def _add_months(local: pa.Array, months: pa.Array, *, end_stays_end: bool = False) -> pa.Array:
    """Calendar months added, the day clamped to the last day of the month reached
    (2024-01-31 + 1 month is 2024-02-29): Ceph's ``_fn_add_month_to_timestamp`` and the Ion
    timestamps behind AWS's DATE_ADD both clamp; the time of day is kept. ``end_stays_end``:
    the last day of a month lands on the last day of the month reached (boost's month
    arithmetic, which Ceph's year addition uses)."""
    index, rest = _month_index_and_rest(local)
    moved = pc.add(index, months)
    start = _month_start(moved)
    last_day = pc.subtract(_days_in_month(moved, start), 1)
    day = pc.divide(rest, _DAY_NS)
    time_of_day = pc.subtract(rest, pc.multiply(day, _DAY_NS))
    moved_day = pc.min_element_wise(day, last_day)
    if end_stays_end:
        was_last = pc.equal(day, pc.subtract(_days_in_month(index, _month_start(index)), 1))
        moved_day = pc.if_else(was_last, last_day, moved_day)
    return pc.add(pc.add(start, pc.multiply(moved_day, _DAY_NS)), time_of_day)


def date_add(parts: pa.Array, amounts: pa.Array, ts: pa.Array) -> pa.Array:
    """``s3_date_add``: calendar arithmetic on the local time (year/month) or exact durations
    (day/hour/minute/second); the zone and written precision are kept."""
    part = _const(parts)
    if part is None:  # a NULL part (or an empty batch): every result is NULL
        return pa.nulls(len(ts), S3_TIMESTAMP)
    if part not in _NS and part not in _CALENDAR_MONTHS:
        raise processing_error("InvalidArgument", f"date_add: unsupported date part {part}")
    f = _fields(ts)
    n = pc.fill_null(pc.cast(amounts, pa.int64()), 0)
    local = _local_ns(f)
    if part in _CALENDAR_MONTHS:
        moved = _add_months(local, pc.multiply(n, _CALENDAR_MONTHS[part]),
                            end_stays_end=part == "ceph_year")
    else:
        moved = pc.add(local, pc.multiply(n, _NS[part]))
    utc = pc.subtract(moved, pc.multiply(f["offset"], 60 * 10**9))
    raised = pc.max_element_wise(f["precision"], _PART_PRECISION.get(part, 0))
    unwritten = pc.less(f["precision"], 0)  # a native value keeps printing shortest
    precision = pc.if_else(unwritten, f["precision"], raised)
    valid = pc.and_(f["valid"], amounts.is_valid())
    return _struct(utc, f["offset"], f["zone"], precision, f["digits"], valid)


def _truncated(delta: pa.Array, unit: int) -> pa.Array:
    """``delta / unit`` truncated toward zero (Arrow integer division truncates)."""
    return pc.divide(delta, unit)


def date_diff(parts: pa.Array, first: pa.Array, second: pa.Array) -> pa.Array:
    """``s3_date_diff``: ``second - first`` in whole units, truncated toward zero, on UTC."""
    part = _const(parts)
    if part is None:  # a NULL part (or an empty batch): every result is NULL
        return pa.nulls(len(first), pa.int64())
    a = _fields(first)
    b = _fields(second)
    valid = pc.and_(a["valid"], b["valid"])
    if part in _NS:
        out = _truncated(pc.subtract(b["utc"], a["utc"]), _NS[part])
    elif part in ("year", "month"):
        month_a, rest_a = _month_index_and_rest(a["utc"])
        month_b, rest_b = _month_index_and_rest(b["utc"])
        months = pc.subtract(month_b, month_a)
        down = pc.and_(pc.greater(months, 0), pc.less(rest_b, rest_a))
        up = pc.and_(pc.less(months, 0), pc.greater(rest_b, rest_a))
        months = pc.add(pc.subtract(months, pc.cast(down, pa.int64())), pc.cast(up, pa.int64()))
        out = months if part == "month" else _truncated(months, 12)
    else:
        raise processing_error("InvalidArgument", f"date_diff: unsupported date part {part}")
    return pc.if_else(valid, pc.cast(out, pa.int64()), pa.scalar(None, pa.int64()))


class _Parts:
    """Components of a batch of timestamps at their own offsets, computed lazily."""

    def __init__(self, ts: pa.Array) -> None:
        f = _fields(ts)
        self.local = wall_clock(f["utc"], f["offset"])
        self.offset = f["offset"]
        self.nanos = nanos_of_second(self.local)

    def year(self) -> pa.Array:
        return pc.year(self.local)

    def month(self) -> pa.Array:
        return pc.month(self.local)


def _format_token(parts: _Parts, letter: str, count: int) -> pa.Array | str:
    table: dict[str, Callable[[], pa.Array | str]] = {
        "y": lambda: zero_pad(pc.subtract(parts.year(), pc.multiply(pc.divide(parts.year(), 100), 100)), 2)
        if count == 2
        else zero_pad(parts.year(), count),
        "M": lambda: _month_text(parts, count),
        "d": lambda: zero_pad(pc.day(parts.local), count),
        "H": lambda: zero_pad(pc.hour(parts.local), count),
        "h": lambda: zero_pad(_hour12(parts), count),
        "a": lambda: pc.if_else(pc.less(pc.hour(parts.local), 12), "AM", "PM"),
        "m": lambda: zero_pad(pc.minute(parts.local), count),
        "s": lambda: zero_pad(pc.second(parts.local), count),
        "S": lambda: _fraction(parts, count),
        "n": lambda: pc.cast(parts.nanos, pa.utf8()),
        "X": lambda: pc.if_else(pc.equal(parts.offset, 0), "Z", _zone_text(parts, count)),
        "x": lambda: _zone_text(parts, count),
    }
    builder = table.get(letter)
    if builder is None:
        return letter * count
    return builder()


def _month_text(parts: _Parts, count: int) -> pa.Array:
    month = parts.month()
    if count <= 2:
        return zero_pad(month, count)
    names = pc.take(pa.array(_MONTHS), pc.subtract(month, 1))
    if count == 3:
        return pc.utf8_slice_codeunits(names, 0, 3)
    if count == 4:
        return names
    return pc.utf8_slice_codeunits(names, 0, 1)


def _hour12(parts: _Parts) -> pa.Array:
    hour = pc.hour(parts.local)
    twelve = pc.subtract(hour, pc.multiply(pc.divide(hour, 12), 12))
    return pc.if_else(pc.equal(twelve, 0), 12, twelve)


def _fraction(parts: _Parts, count: int) -> pa.Array:
    digits = zero_pad(parts.nanos, 9)
    if count <= 9:
        return pc.utf8_slice_codeunits(digits, 0, count)
    return pc.utf8_rpad(digits, count, "0")


def _zone_text(parts: _Parts, count: int) -> pa.Array:
    if count == 1:
        return offset_text(parts.offset, colon=False, hours_only_when_whole=True)
    return offset_text(parts.offset, colon=count in (3, 5))


def _format_with(parts: _Parts, pattern: str, length: int) -> pa.Array:
    pieces: list[pa.Array | str] = []
    for token in tokenize(pattern):
        pieces.append(_format_token(parts, *token) if isinstance(token, tuple) else token)
    arrays = [p if isinstance(p, pa.Array) else pa.array([p] * length, pa.utf8()) for p in pieces]
    if not arrays:
        return pa.array([""] * length, pa.utf8())
    return pc.binary_join_element_wise(*arrays, "")


def to_string(ts: pa.Array, patterns: pa.Array) -> pa.Array:
    """``s3_to_string``: format with the Java-like pattern table; one pass per distinct
    pattern in the batch."""
    parts = _Parts(ts)
    valid = pc.and_(ts.is_valid(), patterns.is_valid())
    distinct = [p for p in pc.unique(patterns).to_pylist() if p is not None]
    out: pa.Array = pa.nulls(len(ts), pa.utf8())
    for pattern in distinct:
        formatted = _format_with(parts, pattern, len(ts))
        out = pc.if_else(pc.fill_null(pc.equal(patterns, pattern), False), formatted, out)
    return pc.if_else(valid, out, pa.scalar(None, pa.utf8()))


def timestamp_to_string(ts: pa.Array) -> pa.Array:
    """``s3_timestamp_to_string``: ``YYYY-MM-DDTHH:MM:SS[.ffffff|.fffffffff]`` + zone as
    written (``Z``, ``±HH:MM``; ``+00:00`` when none was written)."""
    f = _fields(ts)
    parts = _Parts(ts)
    base = pc.strftime(parts.local, format="%Y-%m-%dT%H:%M:%S")
    base = pc.utf8_slice_codeunits(base, 0, 19)
    digits = f["digits"]
    six = pc.utf8_slice_codeunits(zero_pad(parts.nanos, 9), 0, 6)
    nine = zero_pad(parts.nanos, 9)
    fraction = pc.if_else(
        pc.equal(digits, 0), "", pc.binary_join_element_wise(".", pc.if_else(pc.greater(digits, 6), nine, six), "")
    )
    zone = pc.if_else(pc.equal(f["zone"], ZONE_Z), "Z", offset_text(parts.offset))
    out = pc.binary_join_element_wise(base, fraction, zone, "")
    return pc.if_else(f["valid"], out, pa.scalar(None, pa.utf8()))


# ---------------------------------------------------------------------------- LIKE


def like(values: pa.Array, patterns: pa.Array, escapes: pa.Array) -> pa.Array:
    """``s3_like``: LIKE with a pattern/escape per row; one regex pass per distinct pair."""
    keys = pc.binary_join_element_wise(pc.fill_null(escapes, ""), pc.fill_null(patterns, ""), "\x00")
    out: pa.Array = pa.nulls(len(values), pa.bool_())
    for key in pc.unique(keys).to_pylist():
        escape, pattern = key.split("\x00", 1)
        if len(escape) > 1:
            raise processing_error("InvalidArgument", "the ESCAPE argument must be a single character")
        regex = like_to_regex(pattern, escape or None)
        matched = pc.match_substring_regex(values, regex)
        out = pc.if_else(pc.fill_null(pc.equal(keys, key), False), matched, out)
    valid = pc.and_(pc.and_(values.is_valid(), patterns.is_valid()), escapes.is_valid())
    return pc.if_else(valid, out, pa.scalar(None, pa.bool_()))


# ---------------------------------------------------------------------------- registration

KERNELS: dict[str, Kernel] = {
    U.CAST_INT: cast_int,
    U.CAST_FLOAT: cast_float,
    U.STRING_TO_BOOL: string_to_bool,
    U.JSON_TO_DOUBLE: json_to_double,
    U.JSON_TO_STRING: json_to_string,
    U.TO_TIMESTAMP: to_timestamp,
    U.TIMESTAMP_FROM_UTC: timestamp_from_utc,
    U.TIMESTAMP_Z: timestamp_z,
    U.TIMESTAMP_TO_STRING: timestamp_to_string,
    U.LOCAL_TIME: local_time,
    U.DATE_ADD: date_add,
    U.DATE_DIFF: date_diff,
    U.TO_STRING: to_string,
    U.LIKE: like,
    U.JSON_IN: json_in,
    U.JSON_EQUAL: json_equal,
    U.JSON_QUOTE: json_quote,
}


def _typed(kernel: Kernel, returns: pa.DataType) -> Kernel:
    def run(*args: Any) -> pa.Array:
        arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in args]
        result = kernel(*arrays)
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        return result if result.type == returns else result.cast(returns)

    run.__name__ = kernel.__name__
    return run


def build_udfs() -> list[datafusion.ScalarUDF]:
    """One DataFusion scalar UDF per signature in :data:`select_dialect.udf_names.UDFS`."""
    out = []
    for signature in U.UDFS:
        returns = _ARROW_TYPES[signature.returns]
        out.append(
            datafusion.udf(
                _typed(KERNELS[signature.name], returns),
                [_ARROW_TYPES[a] for a in signature.args],
                returns,
                "immutable",
                name=signature.name,
            )
        )
    return out


def register_udfs(ctx: datafusion.SessionContext) -> None:
    """Register every s3-select UDF on ``ctx``."""
    for function in build_udfs():
        ctx.register_udf(function)
