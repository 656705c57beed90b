"""Infer a CSV object's header and column types from a sample at its start.

A Flight SQL user who points a client at their own CSV expects what DuckDB, pandas or Spark
would show: columns named by the header line and typed (``count(*)`` not counting the header,
``amount > 10`` comparing numbers, zone-less ``2024-08-16 20:29:54`` a timestamp). S3 Select's
reading (no header, every field a string ``_1 .. _N``) stays for the s3-select flavours; the
standard surface reads an object without configuration as :func:`sniff_csv` describes it.

The types are **pyarrow.csv's inference** over the sample (``null -> int64 -> bool -> date ->
timestamp -> float64 -> string``, the same ladder DuckDB's sniffer climbs), not a guesser of
ours. What is hand-written here is the header rule and the mapping onto the configured type
names, both as tables:

* **Header** (DuckDB's rule): the first record is a header when it breaks a column's type,
  that is, pyarrow types some column from the records after it (``int64``, ``timestamp``, ...)
  but only ``string`` once the first record is included. Where every column is text the
  header cannot be told from data; DuckDB then assumes one, we do not (the object keeps S3
  Select's reading, a configuration entry says otherwise), and a one-record sample has none.
* **Types**: :data:`TYPE_NAMES` maps pyarrow's inferred types onto the column types of
  ``.flight-select.json`` (a timestamp with or without zone is ``timestamp``: UTC, a value
  without zone read as UTC). A column pyarrow types but DataFusion's reader would not read
  the same way (``2024-08-16 20:29``, minutes only, is a timestamp to pyarrow and an error to
  DataFusion) stays ``string``: :func:`_datafusion_reads` casts the sample's values with
  DataFusion and keeps a type only when every value converts.
* **Round trip**: a number column whose texts do not read back as written stays ``string``,
  as DuckDB keeps them: a value's sign and digits before its point or exponent must be the
  ones the number prints (:data:`READS_BACK`). ``00611`` prints ``611`` and ``+1`` prints
  ``1``, so a zip code stays text and ``zip LIKE '0%'`` finds it; ``1.50`` and ``1e3`` are
  the numbers they spell in a float's notation and stay ``float64``.

The sample is the object's first ``sample_bytes`` cut back to the last record delimiter. A
later value that does not fit its sniffed type is the reader's business (an error naming the
object, line and column, or NULL with a warning: ``bad_values``), never silently NULL.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Final

import pyarrow as pa
import pyarrow.csv as pa_csv

from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.typed_columns import BAD_VALUES_ERROR, check_bad_values

DEFAULT_SAMPLE_BYTES: Final = 64 << 10
"""Bytes read from an object's start to sniff it: about 1,300 records of 50 bytes (DuckDB's
sniffer takes 20,480 records), and no more than an object store's first ranged GET (planning a
64 MB object there reads under 2% of it, ``tests/flight_storage/test_object_store.py``: a
256 KiB sample broke that). A later value the sample did not show is an error naming it, not a
silent NULL; ``--sniff-kb`` takes a larger sample."""

TYPE_NAMES: Final[tuple[tuple[str, str], ...]] = (
    ("int64", "int64"),
    ("double", "float64"),
    ("bool", "bool"),
    ("date32[day]", "date"),
    ("timestamp", "timestamp"),
)
"""pyarrow's inferred type (``str`` of the type, a timestamp by its prefix) -> the column type
of the bucket configuration. Anything else (``null`` for a column empty in the whole sample,
``time32``, ``string``, ``binary``) is ``string``."""

_INTEGER_PART = re.compile(r"\s*([+-]?\d*)")


def _integer_part_reads_back(text: str) -> bool:
    """The sign and digits before the point or exponent are what the number prints."""
    match = _INTEGER_PART.match(text)
    written = match.group(1) if match is not None else ""
    if written in ("", "-"):  # ".5", "-.5": no integer digits written
        return True
    try:
        return str(int(written)) == written
    except ValueError:  # "+" alone
        return False


READS_BACK: Final[dict[str, Callable[[str], bool]]] = {
    "int64": _integer_part_reads_back,
    "float64": _integer_part_reads_back,
}
"""A sniffed type -> whether a sample's text reads back as written through it (a column with
one that does not stays ``string``). Booleans, dates and timestamps have no such loss: their
spellings (``TRUE``, ``T`` or space) are notation, not digits."""

_DATAFUSION_TYPES: Final = {
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
}
"""The SQL type DataFusion casts a sniffed column's sample to, to prove its reader takes it."""


@dataclass(frozen=True)
class TableReading:
    """How Flight SQL statements read CSV tables (``serve``'s settings; a bucket
    configuration entry may say otherwise for its prefix).

    Attributes:
        sniff: infer the header and types of CSV objects no entry covers (``--no-sniff``
            turns it off: every such object reads as S3 Select reads it).
        sample_bytes: bytes read from an object's start to sniff it (``--sniff-bytes``).
        bad_values: what a field that does not convert to its column's type does, where the
            entry does not say (``--bad-values``: ``error`` or ``null``).
    """

    sniff: bool = True
    sample_bytes: int = DEFAULT_SAMPLE_BYTES
    bad_values: str = BAD_VALUES_ERROR

    def __post_init__(self) -> None:
        check_bad_values(self.bad_values)
        if self.sample_bytes < 1:
            raise ValueError(f"sample_bytes must be at least 1, got {self.sample_bytes}")


@dataclass(frozen=True)
class SniffedColumns:
    """What a sample says about an object's columns (CSV and JSON Lines alike).

    Attributes:
        names: column names.
        types: column types, as the bucket configuration spells them.
        sample_records: records of the sample the types come from (a header excluded).
        reason: why the object could not be sniffed (``""`` when it was); an unsniffed object
            is read as S3 Select reads it.
    """

    names: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    sample_records: int = 0
    reason: str = ""

    @property
    def sniffed(self) -> bool:
        """True when the sample gave a table."""
        return not self.reason

    @property
    def columns(self) -> tuple[dict[str, str], ...]:
        """The columns as a bucket configuration's ``columns`` entry."""
        return tuple({"name": n, "type": t} for n, t in zip(self.names, self.types, strict=True))


@dataclass(frozen=True)
class SniffedTable(SniffedColumns):
    """What the sample says about a CSV object: its columns (names are the header's, made
    unique; ``_N`` without a header or for an empty header field) and ``has_header``, whether
    the first record names them."""

    has_header: bool = False


def read_sample(stream: BinaryIO, options: CsvInputOptions, sample_bytes: int) -> bytes | None:
    """The object's first ``sample_bytes`` cut back to its last record delimiter (the whole
    object when it is shorter), or None when no record ends inside the sample."""
    data = stream.read(sample_bytes + 1)
    if len(data) <= sample_bytes:
        return data
    delimiter = options.record_delimiter.encode("utf-8")
    end = data.rfind(delimiter, 0, sample_bytes)
    quote = options.quote.encode("utf-8") if options.quote else b""
    if options.quoted_record_delimiter and quote:
        # a delimiter after an odd number of quotes is inside a quoted field (RFC 4180: a
        # doubled quote counts twice), not a record's end
        while end != -1 and data.count(quote, 0, end) % 2:
            end = data.rfind(delimiter, 0, end)
    return data[: end + len(delimiter)] if end != -1 else None


def sniff_csv(sample: bytes, options: CsvInputOptions, *, header: bool | None = None
              ) -> SniffedTable:
    """Infer the header and column types of a CSV sample.

    Args:
        sample: whole records from the object's start (:func:`read_sample`).
        options: the table's CSV options (delimiter, quote, ...; the header setting is
            ignored: ``header`` says it).
        header: whether the first record is a header, when a configuration says so (None:
            decide by the module's rule).

    Returns:
        The sniffed table, or one whose ``reason`` says why there is none.

    Example:
        >>> t = sniff_csv(b"id,ts\\n1,2024-08-16 20:29:54\\n", CsvInputOptions(quotes_anywhere=False))
        >>> t.has_header, t.names, t.types
        (True, ('id', 'ts'), ('int64', 'timestamp'))
        >>> sniff_csv(b"a,b\\nc,d\\n", CsvInputOptions(quotes_anywhere=False)).has_header  # all text
        False
    """
    reason = _options_reason(options)
    if reason:
        return SniffedTable(reason=reason)
    if not sample.strip():
        return SniffedTable(reason="the object is empty")
    try:
        return _sniff(sample, options, header)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        return SniffedTable(reason=f"pyarrow cannot read the sample ({_first_line(exc)})")


def _sniff(sample: bytes, options: CsvInputOptions, header: bool | None) -> SniffedTable:
    # Each pyarrow read costs about its columns times the types it tries: the header record
    # (text in typed columns) fails every type, so the first record is read as names and the
    # types with it included are asked only where the answer can change (see _header).
    try:
        named = _read(sample, options, skip_rows=0, named=True)
    except UnicodeDecodeError:  # in the first record, which pyarrow decodes as names
        return SniffedTable(reason="invalid UTF-8 in the sample")
    if any(pa.types.is_binary(f.type) for f in named.schema):
        return SniffedTable(reason="invalid UTF-8 in the sample")
    width = named.num_columns
    rest_types = [_type_name(f.type) for f in named.schema]
    if named.num_rows == 0:  # a single record
        has_header = bool(header)
        types = ["string"] * width if has_header else _with_first(sample, options, named)
        text = named if has_header else _text(sample, options, width, skip_rows=0)
    else:
        rest = _text(sample, options, width, skip_rows=1)
        if rest.num_columns != width:
            return SniffedTable(reason="the first record and the others differ in width")
        has_header = _header(sample, options, rest_types) if header is None else header
        types = rest_types if has_header else _with_first(sample, options, named)
        text = rest if has_header else _text(sample, options, width, skip_rows=0)
    verified = _datafusion_reads(text, types)
    names = _names(named.column_names if has_header else [], width)
    return SniffedTable(names, tuple(verified), text.num_rows, has_header=has_header)


_HEADER_PROBE: Final = 16
"""Typed columns whose types with the first record are asked first: a header breaks them all
as a rule, so a wide header is told from data without re-typing every column."""


def _header(sample: bytes, options: CsvInputOptions, rest_types: list[str]) -> bool:
    """Whether the first record breaks a column's type (the module's header rule)."""
    typed = [i for i, t in enumerate(rest_types) if t != "string"]
    for columns in (typed[:_HEADER_PROBE], typed[_HEADER_PROBE:]):
        if "string" in _first_types(sample, options, columns).values():
            return True
    return False


def _with_first(sample: bytes, options: CsvInputOptions, named: pa.Table) -> list[str]:
    """The column types with the first record among the data: a column that is text without
    it stays text; the others (typed, or empty without it) are typed again."""
    again = [i for i, f in enumerate(named.schema)
             if pa.types.is_null(f.type) or _type_name(f.type) != "string"]
    retyped = _first_types(sample, options, again)
    return [retyped.get(i, "string") for i in range(named.num_columns)]


def _first_types(sample: bytes, options: CsvInputOptions, columns: list[int]) -> dict[int, str]:
    """Inferred types of ``columns`` (positions) with the first record among the data."""
    if not columns:
        return {}
    table = _read(sample, options, skip_rows=0, include=[f"f{i}" for i in columns])
    return {i: _type_name(f.type) for i, f in zip(columns, table.schema, strict=True)}


def _options_reason(options: CsvInputOptions) -> str:
    """Why pyarrow's parser cannot read under ``options`` (``""`` when it can)."""
    if options.quotes_anywhere:
        return "Ceph's CSV rules (quotes anywhere) are not pyarrow's"
    if len(options.field_delimiter) != 1 or options.record_delimiter not in ("\n", "\r\n"):
        return "multi-character or custom delimiters"
    if options.comment is not None or options.trim_chars:
        return "comment or trim characters"
    return ""


def _parse_options(options: CsvInputOptions) -> pa_csv.ParseOptions:
    escape = options.escape if options.escape not in (None, options.quote) else False
    return pa_csv.ParseOptions(
        delimiter=options.field_delimiter,
        quote_char=options.quote if options.quote is not None else False,
        double_quote=options.escape == options.quote,
        escape_char=escape,
        newlines_in_values=options.quoted_record_delimiter,
        ignore_empty_lines=True,
        # a record of another width says nothing of the types (the reader refuses a wider one
        # and NULL-fills a shorter one)
        invalid_row_handler=_skip,
    )


def _skip(row: object) -> str:  # noqa: ARG001 - pyarrow's invalid_row_handler
    return "skip"


def _read(sample: bytes, options: CsvInputOptions, *, skip_rows: int, named: bool = False,
          column_types: dict[str, pa.DataType] | None = None,
          include: list[str] | None = None) -> pa.Table:
    """The sample as pyarrow reads it: columns ``f0 .. fN`` (``named``: the first record's
    fields name them), typed by inference except for ``column_types``."""
    return pa_csv.read_csv(
        io.BytesIO(sample),
        read_options=pa_csv.ReadOptions(autogenerate_column_names=not named,
                                        skip_rows=skip_rows, use_threads=False),
        parse_options=_parse_options(options),
        # only an empty field is NULL, as DataFusion's reader has it ("n/a" is no NULL)
        convert_options=pa_csv.ConvertOptions(null_values=[""], strings_can_be_null=True,
                                              column_types=column_types,
                                              include_columns=include),
    )


def _text(sample: bytes, options: CsvInputOptions, width: int, *, skip_rows: int) -> pa.Table:
    """The sample's fields as text (``width``: the first record's)."""
    return _read(sample, options, skip_rows=skip_rows,
                 column_types={f"f{i}": pa.string() for i in range(width)})


def _type_name(data_type: pa.DataType) -> str:
    text = str(data_type)
    return next((name for prefix, name in TYPE_NAMES if text.startswith(prefix)), "string")


def _names(header: list[str], width: int) -> tuple[str, ...]:
    """The header's names, unique: an empty one is ``_N`` (its position), a repeated one gets
    ``_2``, ``_3``, ...; positional ``_1 .. _N`` without a header."""
    names: list[str] = []
    taken: set[str] = set()
    for index in range(width):
        base = header[index].strip() if index < len(header) else ""
        name = base or f"_{index + 1}"
        suffix = 2
        while name in taken:
            name, suffix = f"{base}_{suffix}", suffix + 1
        taken.add(name)
        names.append(name)
    return tuple(names)


def _datafusion_reads(text: pa.Table, types: list[str]) -> list[str]:
    """``types`` with ``string`` for each column whose sample (``text``) DataFusion does not
    convert.

    The typed columns' values go into one long table (column, target type, value), so the
    statement that casts them has one condition per type whatever the width: a statement
    with an expression per column costs DataFusion's planner the square of the width
    (4,000 columns took 11 s)."""
    typed = [i for i, t in enumerate(types) if t != "string"]
    if not typed:
        return list(types)
    from datafusion import SessionContext  # here: the CLI reads this module's defaults

    columns = text.columns
    lengths = [len(columns[i]) for i in typed]
    long = pa.table({
        "c": pa.array([i for i, n in zip(typed, lengths, strict=True) for _ in range(n)],
                      pa.int64()),
        "t": pa.array([types[i] for i, n in zip(typed, lengths, strict=True) for _ in range(n)],
                      pa.string()),
        "v": pa.concat_arrays([chunk for i in typed for chunk in columns[i].chunks]),
    })
    ctx = SessionContext()
    ctx.from_arrow(long, name="sample")
    fails = " OR ".join(
        f"(t = '{name}' AND try_cast(v AS {sql}) IS NULL)"
        for name, sql in _DATAFUSION_TYPES.items() if name in {types[i] for i in typed})
    failed = ctx.sql(f"SELECT DISTINCT c FROM sample WHERE v IS NOT NULL AND ({fails})")
    bad = {int(c) for batch in failed.collect() for c in batch.column(0).to_pylist()}
    return ["string" if i in bad or not _reads_back(text.column(i), t) else t
            for i, t in enumerate(types)]


def _reads_back(column: pa.ChunkedArray, type_name: str) -> bool:
    """Every text of a sample's column reads back as written through ``type_name``."""
    reads_back = READS_BACK.get(type_name)
    if reads_back is None:
        return True
    return all(reads_back(value) for value in column.to_pylist() if value is not None)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
