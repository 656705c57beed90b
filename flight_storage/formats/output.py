"""S3 Select output serialization: Arrow result batches -> CSV or JSON record bytes.

Each column is turned into text with ``pyarrow.compute`` (casts, ``strftime``, ``if_else``,
``replace_substring``) and rows are joined with ``binary_join_element_wise``; Python touches
single values only for rare shapes (JSON strings with escapes, nested Parquet values,
strings with control characters in JSON output).

The printing rules are the flavour's :class:`~select_dialect.flavors.PrintingRules`
(``Flavor.printing``), one flag per rule; Ceph's and AWS's records differ in every one (see
the conformance README, "Output formatting"):

================================  ==============================  ============================
flag                              Ceph                            AWS
================================  ==============================  ============================
``csv_null``                      ``null``                        empty field
``plain_json_values``             strings unquoted                JSON strings; MISSING (NULL
                                  (``{"a":male}``), containers    of a JSON path column) drops
                                  and MISSING ``null``            the key
``csv_quote_as_needed``           ASNEEDED never quotes           fields holding a delimiter,
                                                                  quote or line end
``csv_quote_escape_from_input``   ALWAYS: C++ ``std::quoted``     ALWAYS: a quote inside is
                                  with the input's escape         preceded by the output's
                                  character (a backslash): a      QuoteEscapeCharacter (``"``
                                  quote or that character inside  by default)
                                  is preceded by it
``aggregate_row_delimited``       no record delimiter after it    record delimiter after it
``timestamps_as_written``         ``YYYY-MM-DDTHH:MM:SS[.ffffff]``  the precision as written,
                                  + zone as written (``Z``,        raised by functions:
                                  ``±HH:MM``, none -> ``+00:00``)  ``2010T``, ``…T04:11Z``, no
                                                                  zone -> ``-00:00``; Parquet
                                                                  timestamps: the shortest form
``json_rows_as_leaf_lines``       ``path. : value`` lines         the row is the record
================================  ==============================  ============================

Floats print as the shortest round-trip decimal with integral values lacking ``.0`` in both
flavours, as Python's ``repr`` writes it; Arrow's float -> string cast does that except for
magnitudes >= 1e10 or < 1e-4, which go through Python. Decimals (a configured ``decimal(p,s)``
column, a Parquet decimal) print their exact digits at their scale, never in exponent form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.errors import InvalidRequestError
from flight_storage.formats.json_text import dumps, quote_strings
from flight_storage.formats.timestamp_text import (
    nanos_of_second,
    offset_text,
    wall_clock,
    zero_pad,
)
from flight_storage.formats.values import (
    PRECISION_FRACTION,
    PRECISION_SECOND,
    ZONE_NONE,
    ZONE_Z,
    is_s3_timestamp,
)
from select_dialect.flavors import PrintingRules

_QUOTE_FIELDS = ("ASNEEDED", "ALWAYS")
_NULL_STR = pa.scalar(None, pa.string())


@dataclass(frozen=True)
class _Text:
    """A column as text: ``values`` (NULL = SQL NULL) and whether JSON quotes them."""

    values: pa.Array
    json_string: bool


# --------------------------------------------------------------------------- helpers


def _lit(text: str, length: int) -> pa.Array:
    """A string literal repeated over ``length`` rows.

    An array rather than a scalar: ``binary_join_element_wise`` with a single array argument
    and a scalar separator returns one row (pyarrow 26), so never rely on broadcasting there.
    """
    return pa.repeat(pa.scalar(text, pa.string()), length)


def _join(parts: Sequence[pa.Array | str], length: int) -> pa.Array:
    """Concatenate string arrays / literals row by row (NULL if any part is NULL)."""
    arrays = [_lit(p, length) if isinstance(p, str) else p for p in parts]
    return pc.binary_join_element_wise(*arrays, "")


# --------------------------------------------------------------------------- timestamps


def _zone_text(offset_minutes: pa.Array, zone: pa.Array, none_text: str) -> pa.Array:
    """``Z`` / ``±HH:MM`` / ``none_text`` per the zone code and offset."""
    n = len(offset_minutes)
    offset = offset_text(offset_minutes)
    zone8 = zone.cast(pa.int8())
    return pc.case_when(
        pc.make_struct(pc.equal(zone8, ZONE_Z), pc.equal(zone8, ZONE_NONE)),
        _lit("Z", n),
        _lit(none_text, n),
        offset,
    )


@dataclass(frozen=True)
class _Parts:
    """Calendar fields of local times, as padded strings plus the values needed to choose
    the shortest form."""

    year: pa.Array
    month: pa.Array
    day: pa.Array
    hour: pa.Array
    minute: pa.Array
    second: pa.Array
    nanos: pa.Array  # int64 nanoseconds within the second
    local: pa.Array  # timestamp[ns] without zone


def _parts(utc: pa.Array, offset_minutes: pa.Array | None) -> _Parts:
    local = wall_clock(utc.cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64()), offset_minutes)
    nanos = nanos_of_second(local)
    return _Parts(
        year=zero_pad(pc.year(local), 4),
        month=zero_pad(pc.month(local), 2),
        day=zero_pad(pc.day(local), 2),
        hour=zero_pad(pc.hour(local), 2),
        minute=zero_pad(pc.minute(local), 2),
        second=zero_pad(pc.second(local), 2),
        nanos=nanos,
        local=local,
    )


def _fraction(nanos: pa.Array, digits: int) -> pa.Array:
    """``.`` + the first ``digits`` digits of the nanoseconds."""
    scaled = pc.divide(nanos, 10 ** (9 - digits))
    return _join([".", zero_pad(scaled, digits)], len(nanos))


def _trimmed_fraction(nanos: pa.Array) -> pa.Array:
    """``.`` + nanoseconds without trailing zeros (only used where nanos != 0)."""
    digits = pc.utf8_rtrim(zero_pad(nanos, 9), characters="0")
    return _join([".", digits], len(nanos))


def _fixed_timestamp(parts: _Parts, has_fraction: pa.Array, zone: pa.Array) -> pa.Array:
    n = len(parts.nanos)
    base = _join(
        [parts.year, "-", parts.month, "-", parts.day, "T",
         parts.hour, ":", parts.minute, ":", parts.second],
        n,
    )  # fmt: skip
    frac = pc.if_else(has_fraction, _fraction(parts.nanos, 6), _lit("", n))
    return _join([base, frac, zone], n)


def _shortest_timestamp(parts: _Parts, zone: pa.Array, has_zone: pa.Array) -> pa.Array:
    """MinIO/AWS: the shortest layout that keeps every non-default field."""
    n = len(parts.nanos)
    date = _join([parts.year, "-", parts.month, "-", parts.day, "T"], n)
    minute = _join([date, parts.hour, ":", parts.minute], n)
    second = _join([minute, ":", parts.second], n)
    has_frac = pc.not_equal(parts.nanos, 0)
    has_second = pc.not_equal(pc.second(parts.local), 0)
    has_time = pc.or_(
        pc.not_equal(pc.hour(parts.local), 0), pc.not_equal(pc.minute(parts.local), 0)
    )
    has_day = pc.not_equal(pc.day(parts.local), 1)
    has_month = pc.not_equal(pc.month(parts.local), 1)
    return pc.case_when(
        pc.make_struct(has_frac, has_second, pc.or_(has_time, has_zone), has_day, has_month),
        _join([second, _trimmed_fraction(parts.nanos), zone], n),
        _join([second, zone], n),
        _join([minute, zone], n),
        date,
        _join([parts.year, "-", parts.month, "T"], n),
        _join([parts.year, "T"], n),
    )


def _s3_timestamp_text(array: pa.Array, printing: PrintingRules) -> _Text:
    struct = array
    utc = struct.field("utc")
    offset = struct.field("offset_minutes").fill_null(0)
    zone_code = struct.field("zone").fill_null(ZONE_NONE)
    parts = _parts(utc, offset)
    if not printing.timestamps_as_written:
        zone = _zone_text(offset, zone_code, "+00:00")
        has_fraction = pc.greater(struct.field("fraction_digits").fill_null(0), 0)
        text = _fixed_timestamp(parts, has_fraction, zone)
    else:
        zone = _zone_text(offset, zone_code, "-00:00")
        precision = struct.field("precision").fill_null(PRECISION_SECOND)
        digits = struct.field("fraction_digits").fill_null(0)
        has_zone = pc.not_equal(zone_code.cast(pa.int8()), ZONE_NONE)
        text = pc.if_else(
            pc.less(precision, 0),
            _shortest_timestamp(parts, zone, has_zone),
            _written_timestamp(parts, zone, precision, digits),
        )
    return _Text(_keep_nulls(array, text), True)


def _written_timestamp(
    parts: _Parts, zone: pa.Array, precision: pa.Array, digits: pa.Array
) -> pa.Array:
    """AWS: the precision the timestamp was written with, raised where a function needed
    more (DATE_ADD reference: ``DATE_ADD(year, 5, `2010-01-01T`)`` is ``2015-01-01T``,
    ``DATE_ADD(second, 1, `…05.006Z`)`` is ``…06.006Z``); the fraction keeps its digits."""
    n = len(parts.nanos)
    date = _join([parts.year, "-", parts.month, "-", parts.day, "T"], n)
    minute = _join([date, parts.hour, ":", parts.minute], n)
    second = _join([minute, ":", parts.second], n)
    fraction = _lit("", n)
    for count in sorted(set(pc.unique(digits).to_pylist()) - {0, None}):
        fraction = pc.if_else(pc.equal(digits, count), _fraction(parts.nanos, count), fraction)
    precision = precision.cast(pa.int8())
    return pc.case_when(
        pc.make_struct(*(pc.equal(precision, p) for p in range(PRECISION_FRACTION + 1))),
        _join([parts.year, "T"], n),
        _join([parts.year, "-", parts.month, "T"], n),
        date,
        _join([minute, zone], n),
        _join([second, zone], n),
        _join([second, fraction, zone], n),
    )


def _arrow_timestamp_text(array: pa.Array, printing: PrintingRules) -> _Text:
    """Timestamps from Parquet: UTC (``Z``) when zoned, no zone written otherwise."""
    n = len(array)
    zoned = array.type.tz is not None
    utc = array if zoned else array.cast(pa.timestamp(array.type.unit))
    parts = _parts(utc.cast(pa.timestamp("ns", tz="UTC")) if not zoned else utc, None)
    if not printing.timestamps_as_written:
        zone = _lit("Z" if zoned else "+00:00", n)
        text = _fixed_timestamp(parts, pc.not_equal(parts.nanos, 0), zone)
    else:
        zone = _lit("Z", n)
        text = _shortest_timestamp(parts, zone, pa.array([False] * n, pa.bool_()))
    return _Text(_keep_nulls(array, text), True)


def _date_text(array: pa.Array, printing: PrintingRules) -> _Text:
    n = len(array)
    if not printing.timestamps_as_written:
        return _Text(array.cast(pa.date32()).cast(pa.string()), True)
    ts = array.cast(pa.date32()).cast(pa.timestamp("s")).cast(pa.timestamp("ns", tz="UTC"))
    parts = _parts(ts, None)
    text = _shortest_timestamp(parts, _lit("Z", n), pa.array([False] * n, pa.bool_()))
    return _Text(_keep_nulls(array, text), True)


def _keep_nulls(source: pa.Array, text: pa.Array) -> pa.Array:
    if source.null_count == 0:
        return text
    return pc.if_else(source.is_valid(), text, _NULL_STR)


# --------------------------------------------------------------------------- other types


def _cast_text(json_string: bool) -> Callable[[pa.Array, PrintingRules], _Text]:
    def convert(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
        return _Text(array.cast(pa.string()), json_string)

    return convert


def _float_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    """The shortest round-trip decimal as Python's ``repr`` writes it, without ``.0``.

    Arrow's cast agrees except far from 1: it writes ``1e+10`` and ``0.00001`` where repr
    writes ``10000000000`` and ``1e-05``; those rare rows are printed by Python."""
    text = array.cast(pa.string())
    magnitude = pc.abs(array.cast(pa.float64()))
    far = pc.fill_null(
        pc.or_(pc.greater_equal(magnitude, 1e10),
               pc.and_(pc.greater(magnitude, 0), pc.less(magnitude, 1e-4))),
        False,
    )
    if pc.any(far).as_py():
        rows = pc.take(array, pc.indices_nonzero(far)).to_pylist()
        printed = [repr(float(v)).removesuffix(".0") for v in rows]
        text = pc.replace_with_mask(text, far, pa.array(printed, pa.string()))
    return _Text(text, False)


def _decimal_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    """A decimal's exact digits at its scale (``1.50``, ``-0.000000001``), in both flavours.

    Arrow's decimal -> string cast writes scientific notation when the value is below
    10**-6 (``-1E-9``, and ``0E-9`` for zero at scale 9); those rows are printed by Python's
    ``format(value, "f")``, which keeps every digit of the scale."""
    text = array.cast(pa.string())
    scientific = pc.fill_null(pc.match_substring(text, "E"), False)
    if pc.any(scientific).as_py():
        rows = pc.take(array, pc.indices_nonzero(scientific)).to_pylist()
        printed = [format(value, "f") for value in rows]
        text = pc.replace_with_mask(text, scientific, pa.array(printed, pa.string()))
    return _Text(text, False)


def _string_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    return _Text(array.cast(pa.string()), True)


def _binary_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    try:
        return _Text(array.cast(pa.string()), True)
    except pa.ArrowInvalid:
        values = [None if v is None else v.hex() for v in array.to_pylist()]
        return _Text(pa.array(values, pa.string()), True)


def _null_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    return _Text(pa.nulls(len(array), pa.string()), False)


def _nested_text(array: pa.Array, printing: PrintingRules) -> _Text:  # noqa: ARG001 - a _FORMATTERS entry
    """Lists / structs / maps (Parquet): compact JSON text, built in Python (rare)."""
    values = [None if v is None else dumps(v) for v in array.to_pylist()]
    return _Text(pa.array(values, pa.string()), False)


def _is_nested(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_struct(t)
        or pa.types.is_map(t)
    )


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


# Order matters: the S3 timestamp struct must win over the generic struct rule.
_FORMATTERS: list[tuple[Callable[[pa.DataType], bool], Callable[[pa.Array, PrintingRules], _Text]]] = [
    (is_s3_timestamp, _s3_timestamp_text),
    (pa.types.is_timestamp, _arrow_timestamp_text),
    (pa.types.is_date, _date_text),
    (_is_text, _string_text),
    (pa.types.is_boolean, _cast_text(False)),
    (pa.types.is_integer, _cast_text(False)),
    (pa.types.is_floating, _float_text),
    (pa.types.is_decimal, _decimal_text),
    (pa.types.is_null, _null_text),
    (_is_binary, _binary_text),
    (_is_nested, _nested_text),
]


def _column_text(array: pa.Array, printing: PrintingRules) -> _Text:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    for matches, convert in _FORMATTERS:
        if matches(array.type):
            return convert(array, printing)
    return _Text(array.cast(pa.string()), True)


# --------------------------------------------------------------------------- JSON text columns


def _json_scalar_values(array: pa.Array, printing: PrintingRules) -> pa.Array:
    """JSON text -> printable scalar text: strings decoded, JSON null -> NULL.

    Non-scalars stay JSON text, or are NULL (printed ``null``) with ``plain_json_values``.
    """
    text = array.cast(pa.string())
    is_string = pc.starts_with(text, '"')
    has_escape = pc.and_(is_string, pc.match_substring(text, "\\"))
    plain = pc.utf8_slice_codeunits(text, 1, -1)
    decoded = pc.if_else(is_string, plain, text)
    if pc.any(has_escape).as_py():
        rows = pc.indices_nonzero(has_escape.fill_null(False))
        values = [json.loads(v) for v in pc.take(text, rows).to_pylist()]
        replacement = pa.array(values, pa.string())
        decoded = pc.replace_with_mask(decoded, has_escape.fill_null(False), replacement)
    is_null = pc.equal(text, "null")
    decoded = pc.if_else(is_null, _NULL_STR, decoded)
    if printing.plain_json_values:
        nested = pc.or_(pc.starts_with(text, "["), pc.starts_with(text, "{"))
        decoded = pc.if_else(nested, _NULL_STR, decoded)
    return decoded


# --------------------------------------------------------------------------- writer


def _option(mapping: Mapping[str, str], key: str, default: str) -> str:
    value = mapping.get(key)
    return default if value is None or value == "" else str(value)


class RecordWriter:
    """Serializes result batches as S3 Select CSV or JSON records.

    Args:
        output_serialization: the request's ``OutputSerialization`` (``{"CSV": {...}}`` or
            ``{"JSON": {...}}``); None means CSV with defaults.
        printing: the flavour's printing rules (``Flavor.printing``, see the module
            docstring).
        output_names: display name per output column (JSON keys).
        output_is_json: per column, True when its Utf8 values are JSON text.
        is_aggregate: the query is an aggregate (one result row).
        row_as_record: the single column is a whole JSON row (``SELECT *`` on JSON input, or
            the bare FROM alias): an object row prints as the record itself (``{}`` when
            MISSING) and, in CSV, its member values as the fields; with
            ``json_rows_as_leaf_lines`` one ``path. : value`` line per leaf and a
            ``#=== n ===#`` separator per row.
        input_escape: with ``csv_quote_escape_from_input``, QuoteFields ALWAYS escapes a quote,
            and this character itself, with this character: the CSV reader's escape character
            (the input's ``QuoteEscapeCharacter``, a backslash by default), not the output's
            (Ceph: rgw_s3select.cc passes the input's to s3select's ``std::quoted``).
        rows_keep_their_width: CSV output leaves out each row's trailing NULL fields. For
            ``SELECT *`` over CSV text read with empty fields kept as '' (AWS's rules; Ceph's
            for this statement, ``Translation.keeps_empty_fields``), where only a field the
            record lacks is NULL, so each record prints with its own fields, as AWS and Ceph
            return it ("as-is") rather than padded to the widest record.

    Raises:
        InvalidRequestError: both/neither of CSV and JSON, empty delimiters, or an unknown
            ``QuoteFields``.

    Example:
        >>> import pyarrow as pa
        >>> from select_dialect.flavors import CEPH_PRINTING
        >>> w = RecordWriter(None, printing=CEPH_PRINTING, output_names=["_1"],
        ...                  output_is_json=[False], is_aggregate=False)
        >>> w.write(pa.record_batch({"c0": pa.array([1, None])}))
        b'1\\nnull\\n'
    """

    def __init__(
        self,
        output_serialization: Mapping[str, Any] | None,
        *,
        printing: PrintingRules,
        output_names: Sequence[str],
        output_is_json: Sequence[bool],
        is_aggregate: bool,
        row_as_record: bool = False,
        rows_keep_their_width: bool = False,
        input_escape: str = "\\",
    ) -> None:
        serialization = dict(output_serialization or {"CSV": {}})
        kinds = [k for k in ("CSV", "JSON") if k in serialization]
        if len(kinds) != 1:
            raise InvalidRequestError("OutputSerialization must have exactly one of CSV, JSON")
        self._printing = printing
        self._json = kinds[0] == "JSON"
        settings: Mapping[str, str] = serialization[kinds[0]] or {}
        self._record_delimiter = _option(settings, "RecordDelimiter", "\n")
        self._field_delimiter = _option(settings, "FieldDelimiter", ",")
        self._quote = _option(settings, "QuoteCharacter", '"')
        self._escape = _option(settings, "QuoteEscapeCharacter", '"')
        self._input_escape = input_escape
        quote_fields = _option(settings, "QuoteFields", "ASNEEDED").upper()
        if quote_fields not in _QUOTE_FIELDS:
            raise InvalidRequestError(
                f"QuoteFields must be ASNEEDED or ALWAYS, not {quote_fields!r}"
            )
        self._always_quote = quote_fields == "ALWAYS"
        self._names = list(output_names)
        self._is_json = list(output_is_json)
        # the one aggregate row in CSV without a record delimiter after it
        self._separate_only = (is_aggregate and not printing.aggregate_row_delimited
                               and not self._json)
        self._rows_written = 0
        self._row_as_record = row_as_record
        self._rows_keep_their_width = rows_keep_their_width and not self._json

    def write(self, batch: pa.RecordBatch) -> bytes:
        """Serialize one batch; returns the bytes of its records."""
        n = batch.num_rows
        if n == 0:
            return b""
        if self._row_as_record and batch.num_columns == 1:
            rows = self._record_rows(batch.column(0))
        else:
            rows = self._json_rows(batch) if self._json else self._csv_rows(batch)
        if self._separate_only:
            body = self._record_delimiter.join(rows.to_pylist())
            prefix = self._record_delimiter if self._rows_written else ""
            self._rows_written += n
            return (prefix + body).encode("utf-8")
        self._rows_written += n
        return _concat(_join([rows, self._record_delimiter], n))

    def finish(self) -> bytes:
        """Bytes to send after the last batch (nothing is buffered: always empty)."""
        return b""

    # ------------------------------------------------------------------ whole-row records

    def _record_rows(self, column: pa.Array) -> pa.Array:
        text = column.cast(pa.string())
        if self._printing.json_rows_as_leaf_lines:
            first = self._rows_written
            return pa.array([_leaf_lines(v, first + i) for i, v in enumerate(text.to_pylist())],
                            pa.string())
        if self._json:
            n = len(text)
            wrapped = _join(["{", dumps(self._name(0)), ":", text, "}"], n)
            rows = pc.if_else(pc.starts_with(text, "{"), text, wrapped)
            return rows.fill_null("{}")
        fields = [_record_fields(v) for v in text.to_pylist()]
        width = max((len(f) for f in fields), default=0)
        columns = [pa.array([f[i] if i < len(f) else None for f in fields], pa.string())
                   for i in range(width)]
        n = len(text)
        if not columns:
            return pa.repeat(pa.scalar("", pa.string()), n)
        quoted = [self._csv_field(c.fill_null(self._printing.csv_null), n) for c in columns]
        joined = pc.binary_join_element_wise(*quoted, _lit(self._field_delimiter, n))
        # a row with fewer fields than the widest one keeps only its own fields
        return pa.array([self._field_delimiter.join(q[: len(f)]) if len(f) < width else j
                         for f, q, j in zip(fields,
                                            zip(*[c.to_pylist() for c in quoted], strict=True),
                                            joined.to_pylist(), strict=True)], pa.string())

    # ------------------------------------------------------------------ CSV

    def _csv_rows(self, batch: pa.RecordBatch) -> pa.Array:
        n = batch.num_rows
        fields = []
        for i, column in enumerate(batch.columns):
            if self._column_is_json(i):
                values = _json_scalar_values(column, self._printing)
            else:
                values = _column_text(column, self._printing).values
            fields.append(self._csv_field(values.fill_null(self._printing.csv_null), n))
        if not fields:
            return pa.repeat(pa.scalar("", pa.string()), n)
        if self._rows_keep_their_width:
            return self._own_width_rows(batch, fields, n)
        return pc.binary_join_element_wise(*fields, _lit(self._field_delimiter, n))

    def _own_width_rows(self, batch: pa.RecordBatch, fields: list[pa.Array], n: int) -> pa.Array:
        """Rows without their trailing NULL fields: field k prints (after its delimiter) when
        it or any field after it is present."""
        pieces = [fields[0]]
        present_after = pa.repeat(pa.scalar(False), n)
        keep: list[pa.Array] = []
        for column in reversed(batch.columns[1:]):
            present_after = pc.or_(present_after, pc.is_valid(column))
            keep.append(present_after)
        for field_text, kept in zip(fields[1:], reversed(keep), strict=True):
            with_delimiter = _join([self._field_delimiter, field_text], n)
            pieces.append(pc.if_else(kept, with_delimiter, _lit("", n)))
        return _join(pieces, n)

    def _csv_field(self, values: pa.Array, n: int) -> pa.Array:
        if self._always_quote:
            return self._quoted(values, n)
        if not self._printing.csv_quote_as_needed:
            return values
        needs = None
        for token in {self._field_delimiter, self._quote, self._record_delimiter, "\n", "\r"}:
            hit = pc.match_substring(values, token)
            needs = hit if needs is None else pc.or_(needs, hit)
        if needs is None or not pc.any(needs).as_py():
            return values
        return pc.if_else(needs, self._quoted(values, n), values)

    def _quoted(self, values: pa.Array, n: int) -> pa.Array:
        if self._printing.csv_quote_escape_from_input:
            # std::quoted: the escape character escapes itself and the quote
            escape = self._input_escape
            if escape != self._quote:
                values = pc.replace_substring(values, escape, escape + escape)
        else:
            escape = self._escape
        escaped = pc.replace_substring(values, self._quote, escape + self._quote)
        return _join([self._quote, escaped, self._quote], n)

    # ------------------------------------------------------------------ JSON

    def _json_rows(self, batch: pa.RecordBatch) -> pa.Array:
        n = batch.num_rows
        members = []
        for i, column in enumerate(batch.columns):
            key = dumps(self._name(i)) + ":"
            value = self._json_value(i, column)
            members.append(_join([key, value], n))
        if not members:
            return pa.repeat(pa.scalar("{}", pa.string()), n)
        # Join the present members with ",": prefix each with "," (MISSING -> ""), concatenate,
        # drop the first comma. (null_handling="skip" would do it, but pyarrow 26 drops rows
        # whose values are all null instead of giving "".)
        pieces = [_join([",", m], n).fill_null("") for m in members]
        body = pc.utf8_slice_codeunits(_join(pieces, n), 1)
        return _join(["{", body, "}"], n)

    def _json_value(self, i: int, column: pa.Array) -> pa.Array:
        """JSON text of one column; NULL means "leave the key out" (AWS MISSING)."""
        if self._column_is_json(i):
            if self._printing.plain_json_values:
                return _json_scalar_values(column, self._printing).fill_null("null")
            return column.cast(pa.string())  # raw JSON; SQL NULL = MISSING -> key dropped
        text = _column_text(column, self._printing)
        if self._printing.plain_json_values or not text.json_string:
            return text.values.fill_null("null")
        return quote_strings(text.values).fill_null("null")

    def _column_is_json(self, i: int) -> bool:
        return i < len(self._is_json) and bool(self._is_json[i])

    def _name(self, i: int) -> str:
        return self._names[i] if i < len(self._names) else f"_{i + 1}"


def _scalar_text(value: Any) -> str:
    """A decoded JSON scalar as S3 prints it in CSV and in Ceph's debug lines."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return dumps(value)
    return dumps(value)


def _record_fields(text: str | None) -> list[str]:
    """MinIO/AWS CSV of a whole JSON row: an object's member values are the fields."""
    if text is None:
        return []
    value = json.loads(text)
    if isinstance(value, dict):
        return [_scalar_text(v) if v is not None else "" for v in value.values()]
    return [_scalar_text(value)]


def _leaf_lines(text: str | None, row: int) -> str:
    """``select *`` on JSON as Ceph prints it: ``path. : value`` per leaf (first occurrence of each path,
    arrays see-through), then ``#=== row ===#``."""
    leaves: dict[str, str] = {}
    if text is not None:
        _collect_leaves(json.loads(text, object_pairs_hook=list), [], leaves)
    lines = "".join(f"{path} : {value}\n" for path, value in leaves.items())
    return f"{lines}#=== {row} ===#"


def _collect_leaves(value: Any, path: list[str], leaves: dict[str, str]) -> None:
    if isinstance(value, list) and value and all(
        isinstance(p, tuple) and len(p) == 2 for p in value
    ):  # an object, as (key, value) pairs in document order
        for key, member in value:
            _collect_leaves(member, [*path, key], leaves)
    elif isinstance(value, list):
        for element in value:
            _collect_leaves(element, path, leaves)
    else:
        name = "".join(f"{step}." for step in path)
        leaves.setdefault(name, _scalar_text(value))


def _concat(strings: pa.Array) -> bytes:
    """The concatenation of a string array's values, straight from its data buffer."""
    strings = strings.cast(pa.string())
    if strings.null_count:
        strings = strings.fill_null("")
    _, offsets, data = strings.buffers()
    if data is None or len(strings) == 0:
        return b""
    positions = memoryview(offsets).cast("i")
    first = positions[strings.offset]
    last = positions[strings.offset + len(strings)]
    return memoryview(data)[first:last].tobytes()
