"""CSV input for S3 Select: records -> Arrow batches of Utf8 columns ``_1 .. _N``.

Two tokenizing rule sets, chosen by the flavour's reading rules
(:class:`select_dialect.flavors.ReadingRules`, ``csv_quotes_anywhere``):

Quotes anywhere (Ceph's s3select engine)
    Every record delimiter ends a record (an unclosed quote closes there). Quote characters
    are honoured **anywhere** in a field and removed (``third="c31,c32"`` -> ``third=c31,c32``);
    the escape character (default ``\\``) is removed and makes the next character literal.
    An empty field is NULL; a trailing field delimiter adds a NULL column; empty lines are
    records (one NULL field).

RFC 4180 with lazy quotes (AWS S3 Select; MinIO's Go ``encoding/csv`` with LazyQuotes reads alike)
    A field is quoted only when it **starts** with the quote character; inside it a doubled
    quote (or escape + quote) is a literal quote, and a quote not followed by a delimiter is
    kept literally (lazy quotes). Quotes inside unquoted fields are data. An empty field is an
    empty string; empty lines are skipped. MinIO's reading is this with
    ``AllowQuotedRecordDelimiter`` TRUE and ``Comments`` ``#``. A quoted field that never
    closes reads lazily to the end of its line (to the end of the object with
    ``AllowQuotedRecordDelimiter``), as Go's reader does.

``csv_unclosed_quote_error`` (the standard flavour)
    A quoted field that never closes is an error naming its line and column, as DuckDB's
    reader stops there: before the end of its line ``CSVEscapingRecordDelimiter`` (AWS's error
    for a record delimiter inside quotes without ``AllowQuotedRecordDelimiter``), with it
    before the end of the object ``CSVParsingError``.

With the record delimiter ``\\n`` a ``\\r`` before it is dropped (Windows line ends).

The object is read in blocks (4 MiB); the partial last record is carried to the next block.
Records without quote or escape characters are split vectorised with ``pyarrow.compute``;
only records that contain them go through the Python tokenizer.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from flight_storage.errors import InputFormatError, InvalidRequestError
from flight_storage.formats.scan_range import iter_range_bytes
from select_dialect.flavors import CEPH_READING, ReadingRules

DEFAULT_BLOCK_SIZE = 2 * 1024 * 1024
DEFAULT_MAX_RECORD_SIZE = 1024 * 1024

_HEADER_INFO = ("NONE", "IGNORE", "USE")
_BOOL_TEXT = {"TRUE": True, "FALSE": False}


@dataclass(frozen=True)
class CsvInputOptions:
    """How to read a CSV object (AWS ``InputSerialization.CSV`` plus the flavour's reading
    rules; the defaults are Ceph's).

    Attributes:
        field_delimiter: separates fields (one or more characters).
        record_delimiter: ends records (one or more characters).
        quote: quote character, or None when quoting is disabled.
        escape: escape character, or None when disabled.
        comment: a record starting with this character is skipped, or None.
        file_header_info: ``NONE``, ``IGNORE`` or ``USE``.
        quoted_record_delimiter: a record delimiter inside quotes is data.
        quotes_anywhere: Ceph's tokenizing rules (quotes anywhere toggle and vanish); off,
            RFC 4180 with lazy quotes (:attr:`ReadingRules.csv_quotes_anywhere`).
        empty_is_null: an empty field is NULL (Ceph) rather than ``""`` (AWS).
        skip_empty_lines: empty records are dropped.
        trim_chars: characters trimmed from both ends of every field (Ceph extension).
        max_record_size: longest record accepted, in bytes.
        unclosed_quote_error: a quoted field that does not close (before its line ends, or
            with ``quoted_record_delimiter`` before the object ends) is an error rather than
            closed there (Ceph's rule).
    """

    field_delimiter: str = ","
    record_delimiter: str = "\n"
    quote: str | None = '"'
    escape: str | None = "\\"
    comment: str | None = None
    file_header_info: str = "NONE"
    quoted_record_delimiter: bool = False
    quotes_anywhere: bool = True
    empty_is_null: bool = True
    skip_empty_lines: bool = False
    trim_chars: str = ""
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    unclosed_quote_error: bool = False

    @classmethod
    def from_request(
        cls,
        csv: Mapping[str, str] | None,
        reading: ReadingRules = CEPH_READING,
        *,
        extensions: Mapping[str, object] | None = None,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    ) -> CsvInputOptions:
        """Build options from the request's ``InputSerialization["CSV"]`` mapping.

        Args:
            csv: ``FieldDelimiter``, ``RecordDelimiter``, ``QuoteCharacter``,
                ``QuoteEscapeCharacter``, ``Comments``, ``AllowQuotedRecordDelimiter``,
                ``FileHeaderInfo``; missing keys take the flavour's defaults. An empty
                ``QuoteCharacter`` / ``QuoteEscapeCharacter`` disables it.
            reading: the flavour's reading rules (``Flavor.reading``).
            extensions: Ceph-only options: ``comment_empty_lines`` (bool) and
                ``trim_chars`` (list of characters).
            max_record_size: longest record accepted, in bytes.

        Raises:
            InvalidRequestError: empty delimiters, a multi-character quote or escape, or an
                unknown ``FileHeaderInfo``.

        Example:
            >>> from select_dialect.flavors import AWS_READING
            >>> CsvInputOptions.from_request({"FieldDelimiter": "|"}, AWS_READING).escape
            '"'
        """
        csv = csv or {}
        ext = extensions or {}
        header = str(csv.get("FileHeaderInfo") or "NONE").upper()
        if header not in _HEADER_INFO:
            raise InvalidRequestError(
                f"FileHeaderInfo must be one of {', '.join(_HEADER_INFO)}, not {header!r}"
            )
        quote = _optional_char(csv, "QuoteCharacter", '"')
        escape = _optional_char(csv, "QuoteEscapeCharacter", reading.csv_escape)
        comment = _optional_char(csv, "Comments", reading.csv_comment)
        field = str(csv.get("FieldDelimiter") or ",")
        record = str(csv.get("RecordDelimiter") or "\n")
        allow = str(csv.get("AllowQuotedRecordDelimiter") or "FALSE").upper()
        if allow not in _BOOL_TEXT:
            raise InvalidRequestError("AllowQuotedRecordDelimiter must be TRUE or FALSE")
        skip_empty = reading.csv_skip_empty_lines or bool(ext.get("comment_empty_lines"))
        # A string or a list of characters; anything else fails in join as it did untyped.
        trim_chars = cast("Iterable[object]", ext.get("trim_chars") or [])
        trim = "".join(str(c) for c in trim_chars)
        return cls(
            field_delimiter=field,
            record_delimiter=record,
            quote=quote,
            escape=escape,
            comment=comment,
            file_header_info=header,
            quoted_record_delimiter=_BOOL_TEXT[allow] or reading.csv_quoted_record_delimiter,
            quotes_anywhere=reading.csv_quotes_anywhere,
            empty_is_null=reading.csv_empty_is_null,
            skip_empty_lines=skip_empty,
            trim_chars=trim,
            max_record_size=max_record_size,
            unclosed_quote_error=reading.csv_unclosed_quote_error,
        )

    @property
    def has_header(self) -> bool:
        """True when the first record is a header (``IGNORE`` or ``USE``)."""
        return self.file_header_info in ("IGNORE", "USE")


def _optional_char(csv: Mapping[str, str], key: str, default: str | None) -> str | None:
    if key not in csv or csv[key] is None:
        return default
    value = str(csv[key])
    if value == "":
        return None
    if len(value) != 1:
        raise InvalidRequestError(f"{key} must be a single character, not {value!r}")
    return value


# --------------------------------------------------------------------------- tokenizers


class UnclosedQuote(Exception):
    """A quoted field that never closes (the tokenizer's signal; readers make it an error)."""

    def __init__(self, position: int, field: int) -> None:
        super().__init__(position, field)
        self.position = position
        self.field = field


def _specials(options: CsvInputOptions, with_record: bool) -> re.Pattern[str]:
    chars = {options.field_delimiter[0]}
    if options.quote:
        chars.add(options.quote)
    if options.escape:
        chars.add(options.escape)
    if with_record:
        chars.add(options.record_delimiter[0])
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]")


class _Tokenizer:
    """Splits text into records of fields following one rule set.

    ``tokenize(text, final)`` returns the complete records and how many characters they
    used; with ``final`` the text's tail is a record even without a record delimiter.
    When ``split_records`` is False the caller has already split records and ``text`` is a
    single record.
    """

    def __init__(self, options: CsvInputOptions, split_records: bool) -> None:
        self.fd = options.field_delimiter
        self.rd = options.record_delimiter if split_records else None
        self.quote = options.quote
        self.escape = options.escape
        self.specials = _specials(options, split_records)
        self.rfc = not options.quotes_anywhere
        self.strict = options.unclosed_quote_error

    def unclosed_field(self, record: str) -> int | None:
        """The field (1-based) of ``record`` (one whole record, RFC rules) whose opening quote
        never closes, or None."""
        fd, quote = self.fd, self.quote
        assert quote is not None
        i, n, field = 0, len(record), 1
        while i < n:
            if record.startswith(quote, i):
                i = self._closing(record, i + len(quote))
                if i < 0:
                    return field
            else:
                i = self._bare_end(record, i)
            if i >= n:
                return None
            i += len(fd)
            field += 1
        return None

    def _closing(self, text: str, i: int) -> int:
        """Where a quoted field whose body starts at ``i`` ends (after its closing quote), or
        -1 when it does not close in ``text``; the rules of :meth:`_rfc_quoted`."""
        quote, escape, fd = self.quote, self.escape, self.fd
        assert quote is not None
        while True:
            j = text.find(quote, i)
            if escape is not None and escape != quote:
                k = text.find(escape, i)
                if k != -1 and (j == -1 or k < j):
                    i = k + (1 + len(quote) if text.startswith(quote, k + 1) else 1)
                    continue
            if j == -1:
                return -1
            after = j + len(quote)
            if text.startswith(quote, after):
                i = after + len(quote)
                continue
            if after == len(text) or text.startswith(fd, after):
                return after
            i = after  # lazy quote: a stray quote is data

    def tokenize(self, text: str, final: bool) -> tuple[list[list[str]], int]:
        if self.rfc:
            return self._rfc(text, final)
        return self._ceph(text, final)

    def _ceph(self, text: str, final: bool) -> tuple[list[list[str]], int]:
        fd, rd, quote, escape = self.fd, self.rd, self.quote, self.escape
        search = self.specials.search
        rows: list[list[str]] = []
        fields: list[str] = []
        cur: list[str] = []
        in_quote = False
        record_start = 0
        i, n = 0, len(text)
        while i < n:
            m = search(text, i)
            if m is None:
                cur.append(text[i:])
                i = n
                break
            j = m.start()
            if j > i:
                cur.append(text[i:j])
            c = text[j]
            if escape is not None and c == escape and (escape != quote or in_quote):
                if escape == quote:  # inside quotes "" is a literal quote, else it closes
                    if text.startswith(quote, j + 1):
                        cur.append(quote)
                        i = j + 2
                    else:
                        in_quote = False
                        i = j + 1
                    continue
                nxt = j + 1
                if nxt < n and not (rd is not None and text.startswith(rd, nxt)):
                    cur.append(text[nxt])
                    i = nxt + 1
                else:
                    i = nxt
                continue
            if quote is not None and c == quote:
                in_quote = not in_quote
                i = j + 1
                continue
            if rd is not None and text.startswith(rd, j) and not in_quote:
                fields.append("".join(cur))
                rows.append(fields)
                fields, cur = [], []
                i = record_start = j + len(rd)
                continue
            if not in_quote and text.startswith(fd, j):
                fields.append("".join(cur))
                cur = []
                i = j + len(fd)
                continue
            cur.append(c)
            i = j + 1
        return self._finish(rows, fields, cur, record_start, n, final)

    def _rfc(self, text: str, final: bool) -> tuple[list[list[str]], int]:
        fd, rd, quote = self.fd, self.rd, self.quote
        rows: list[list[str]] = []
        fields: list[str] = []
        record_start = 0
        after_delimiter = False  # a field delimiter was just consumed: a field must follow
        i, n = 0, len(text)
        while i < n:
            if quote is not None and text.startswith(quote, i):
                opened = i
                i, value, complete = self._rfc_quoted(text, i + len(quote))
                if not complete and not final:
                    return rows, record_start
                if not complete and self.strict:
                    raise UnclosedQuote(opened, len(fields) + 1)
            else:
                j = self._bare_end(text, i)
                if j == n and rd is not None and not final:
                    return rows, record_start
                value, i = text[i:j], j
            fields.append(value)
            after_delimiter = False
            if i >= n:
                break
            if rd is not None and text.startswith(rd, i):
                rows.append(fields)
                fields = []
                i = record_start = i + len(rd)
                continue
            i += len(fd)
            after_delimiter = True
        if after_delimiter:
            fields.append("")
        if not final:
            return rows, record_start
        if fields or rd is None:
            rows.append(fields or [""])
        return rows, n

    def _bare_end(self, text: str, i: int) -> int:
        j = text.find(self.fd, i)
        if self.rd is not None:
            k = text.find(self.rd, i)
            if k != -1 and (j == -1 or k < j):
                return k
        return len(text) if j == -1 else j

    def _rfc_quoted(self, text: str, i: int) -> tuple[int, str, bool]:
        """Parse a quoted field body from ``i``; returns (end, value, closed_or_ended)."""
        quote, escape, fd, rd = self.quote, self.escape, self.fd, self.rd
        assert quote is not None
        out: list[str] = []
        n = len(text)
        while True:
            j = text.find(quote, i)
            if escape is not None and escape != quote:
                k = text.find(escape, i)
                if k != -1 and (j == -1 or k < j):
                    out.append(text[i:k])
                    if text.startswith(quote, k + 1):
                        out.append(quote)
                        i = k + 2
                    else:
                        out.append(escape)
                        i = k + 1
                    continue
            if j == -1:
                if rd is None:
                    out.append(text[i:])
                    return n, "".join(out), True
                return n, "".join(out) + text[i:], False
            out.append(text[i:j])
            after = j + len(quote)
            if text.startswith(quote, after):
                out.append(quote)
                i = after + len(quote)
                continue
            if after == n:
                return n, "".join(out), rd is None
            if text.startswith(fd, after) or (rd is not None and text.startswith(rd, after)):
                return after, "".join(out), True
            out.append(quote)  # lazy quote: a stray quote is data
            i = after

    def _finish(
        self,
        rows: list[list[str]],
        fields: list[str],
        cur: list[str],
        record_start: int,
        n: int,
        final: bool,
    ) -> tuple[list[list[str]], int]:
        if not final:
            return rows, record_start
        if record_start < n or self.rd is None:
            fields.append("".join(cur))
            rows.append(fields)
        return rows, n


# --------------------------------------------------------------------------- blocks -> rows


@dataclass
class _Position:
    """Where the reader is: byte offset of the current block and records seen so far."""

    offset: int = 0
    records: int = 0
    lines: int = 0
    """Line ends consumed (differs from ``records`` where quoted fields hold line ends)."""


def _decode(data: bytes, pos: _Position, options: CsvInputOptions) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = pos.lines + data.count(b"\n", 0, exc.start) + 1
        column = data.count(options.field_delimiter.encode("utf-8"), line_start, exc.start) + 1
        raise InputFormatError(
            f"line {line}, column {column}: invalid UTF-8 at byte offset "
            f"{pos.offset + exc.start}",
            code="InvalidTextEncoding",
            offset=pos.offset + exc.start,
            line=line,
            column=column,
        ) from exc


def _unclosed(options: CsvInputOptions, line: int, column: int) -> InputFormatError:
    if options.quoted_record_delimiter:
        return InputFormatError(
            f"line {line}, column {column}: a quoted field opens here and never closes "
            "(an unterminated quote)", code="CSVParsingError", line=line, column=column)
    return InputFormatError(
        f"line {line}, column {column}: a quoted field does not close before the end of its "
        "line (an unterminated quote; a line break inside quotes needs "
        "AllowQuotedRecordDelimiter TRUE)",
        code="CSVEscapingRecordDelimiter", line=line, column=column)


def _check_quotes_closed(lines: pa.Array, options: CsvInputOptions, pos: _Position) -> None:
    """Refuse a record (one line each) holding a quoted field that does not close in it."""
    if not (options.unclosed_quote_error and options.quote):
        return
    mask = pc.match_substring(lines, options.quote)
    if not pc.any(mask).as_py():
        return
    tokenizer = _Tokenizer(options, split_records=False)
    for index in np.flatnonzero(mask.to_numpy(zero_copy_only=False)):
        line = lines[int(index)].as_py()
        if options.comment and line.startswith(options.comment):
            continue
        if options.record_delimiter == "\n" and line.endswith("\r"):
            line = line[:-1]
        field = tokenizer.unclosed_field(line)
        if field is not None:
            raise _unclosed(options, pos.records + int(index) + 1, field)


def _too_long(options: CsvInputOptions, offset: int, record: int | None) -> InputFormatError:
    where = f"record {record}" if record is not None else f"the record at byte offset {offset}"
    return InputFormatError(
        f"{where} is longer than the maximum record size ({options.max_record_size} bytes)",
        code="OverMaxRecordSize",
        offset=offset,
        row=record,
    )


def _needs_care_mask(lines: pa.Array, options: CsvInputOptions) -> pa.Array | None:
    mask = None
    for char in (options.quote, options.escape):
        if char:
            hit = pc.match_substring(lines, char)
            mask = hit if mask is None else pc.or_(mask, hit)
    return mask


def _lines_to_lists(lines: pa.Array, options: CsvInputOptions) -> pa.ListArray:
    """Split each (complete, delimiter-free) record into its list of fields."""
    fast = pc.split_pattern(lines, options.field_delimiter)
    mask = _needs_care_mask(lines, options)
    if mask is None or not pc.any(mask).as_py():
        return fast
    careful_lines = pc.filter(lines, mask).to_pylist()
    careful = pa.array(_tokenize_records(careful_lines, options), type=fast.type)
    positions = pa.array(range(len(lines)), pa.int64())
    replacement = pa.array(range(len(lines), len(lines) + len(careful)), pa.int64())
    indices = pc.replace_with_mask(positions, mask, replacement)
    return pc.take(pa.concat_arrays([fast, careful]), indices)


def _ceph_split_quotes(record: str, fd: str, quote: str) -> list[str]:
    """Ceph rules for a record without escape characters: quotes toggle, then vanish."""
    fields: list[str] = []
    cur = ""
    for k, part in enumerate(record.split(quote)):
        if k % 2:
            cur += part
            continue
        pieces = part.split(fd)
        cur += pieces[0]
        if len(pieces) > 1:
            fields.append(cur)
            fields.extend(pieces[1:-1])
            cur = pieces[-1]
    fields.append(cur)
    return fields


def _rfc_well_formed(options: CsvInputOptions) -> re.Pattern[str] | None:
    """A record pattern for which Python's ``csv`` module equals the lazy-quote rules."""
    fd, quote = options.field_delimiter, options.quote
    if len(fd) != 1 or quote is None or options.escape not in (quote, None) or fd == quote:
        return None
    q, d = re.escape(quote), re.escape(fd)
    dq = f"{q}{q}" if options.escape == quote else "(?!)"
    field = f"(?:{q}(?:[^{q}\\r\\n]|{dq})*{q}|[^{q}{d}\\r\\n]*)"
    return re.compile(f"{field}(?:{d}{field})*")


def _tokenize_records(records: list[str], options: CsvInputOptions) -> list[list[str]]:
    """Fields of whole records that contain quote or escape characters."""
    tokenizer = _Tokenizer(options, split_records=False)
    fd, quote, escape = options.field_delimiter, options.quote, options.escape
    if options.quotes_anywhere:
        return [
            _ceph_split_quotes(r, fd, quote)
            if quote is not None and (escape is None or escape not in r)
            else tokenizer.tokenize(r, True)[0][0]
            for r in records
        ]
    pattern = _rfc_well_formed(options)
    if pattern is None:
        return [tokenizer.tokenize(r, True)[0][0] for r in records]
    good = [r for r in records if pattern.fullmatch(r)]
    parsed = iter(
        csv.reader(good, delimiter=fd, quotechar=options.quote, doublequote=True, strict=True)
    )
    # csv.reader gives [] for an empty record; our rules give one empty field
    return [
        (next(parsed) or [""]) if pattern.fullmatch(r) else tokenizer.tokenize(r, True)[0][0]
        for r in records
    ]


def _filter_lines(lines: pa.Array, options: CsvInputOptions) -> pa.Array:
    if options.record_delimiter == "\n" and pc.any(pc.ends_with(lines, "\r")).as_py():
        lines = pc.replace_substring_regex(lines, pattern="\r$", replacement="")
    keep = None
    if options.comment:
        keep = pc.invert(pc.starts_with(lines, options.comment))
    if options.skip_empty_lines:
        nonempty = pc.greater(pc.binary_length(lines), 0)
        keep = nonempty if keep is None else pc.and_(keep, nonempty)
    return lines if keep is None else pc.filter(lines, keep)


def _filter_rows(rows: list[list[str]], options: CsvInputOptions) -> list[list[str]]:
    """Comment and empty-line rules for rows the stream tokenizer produced."""
    comment = options.comment
    out = []
    for row in rows:
        if comment and row and row[0].startswith(comment):
            continue
        if options.skip_empty_lines and row == [""]:
            continue
        out.append(row)
    return out


def _columns(
    lists: pa.ListArray, options: CsvInputOptions, num_columns: int | None,
    keep: Sequence[int] | None = None,
) -> pa.RecordBatch:
    """Turn one list of fields per row into Utf8 columns ``_1 .. _N`` (only the positions in
    ``keep`` when given: a record of 100,000 fields costs the columns asked for)."""
    lengths = pc.list_value_length(lists).fill_null(0)
    if keep is not None:
        positions = list(keep)
    elif num_columns is None:
        positions = list(range(1, (pc.max(lengths).as_py() or 0 if len(lists) else 0) + 1))
    else:
        positions = list(range(1, num_columns + 1))
    flat = lists.flatten()
    starts = pc.subtract(lists.offsets.slice(0, len(lists)), lists.offsets[0])
    arrays = []
    for col in (p - 1 for p in positions):
        present = pc.greater(lengths, col)
        index = pc.if_else(present, pc.add(starts, col), pa.scalar(None, pa.int32()))
        values = pc.take(flat, index)
        if options.trim_chars:
            values = pc.utf8_trim(values, characters=options.trim_chars)
        if options.empty_is_null:
            values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
        arrays.append(values.cast(pa.string()))
    names = [f"_{p}" for p in positions]
    schema = pa.schema([pa.field(n, pa.string(), nullable=True) for n in names])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _check_lengths(lines: pa.Array, options: CsvInputOptions, pos: _Position) -> None:
    if not len(lines):
        return
    lengths = pc.binary_length(lines)
    if pc.max(lengths).as_py() > options.max_record_size:
        first = pc.index(pc.greater(lengths, options.max_record_size), True).as_py()
        raise _too_long(options, pos.offset, pos.records + first + 1)


def _fast_table(data: bytes, options: CsvInputOptions, keep: Sequence[int] | None = None,
                width: int | None = None) -> pa.Table | None:
    """Parse ``data`` with ``pyarrow.csv`` when that provably gives the same fields.

    That holds when the block has no quote, escape, comment or carriage-return characters,
    no empty records, single-character delimiters with ``\\n`` ending records, and every
    record has the same number of fields (``pyarrow.csv`` rejects ragged rows; we then fall
    back). Invalid UTF-8 also makes it fall back, so the slow path reports the offset.
    """
    fd = options.field_delimiter
    if (
        options.record_delimiter != "\n"
        or len(fd) != 1
        or not fd.isascii()
        or options.trim_chars
        or not data
    ):
        return None
    quote_char: str | bool = False
    for char in (options.comment, "\r"):
        if char and data.find(char.encode("utf-8")) != -1:
            return None
    verify_quotes = False
    if options.quotes_anywhere and options.quote is not None and options.quote.isascii():
        # Checked after parsing instead of with a pattern (the pattern costs twice the parse).
        if options.escape and data.find(options.escape.encode("utf-8")) != -1:
            return None
        if data.find(options.quote.encode("ascii")) != -1:
            quote_char, verify_quotes = options.quote, True
    else:
        for char in dict.fromkeys((options.quote, options.escape)):
            if char and data.find(char.encode("utf-8")) != -1:
                pattern = _rfc_block_pattern(options)
                if pattern is None or pattern.fullmatch(data) is None:
                    return None
                quote_char = options.quote or False
                break
    # pyarrow.csv skips a leading byte-order mark and empty lines; our rules keep both (empty
    # lines are caught after parsing: every line must have become a row)
    if data.startswith(b"\xef\xbb\xbf"):
        return None
    first = data[: data.find(b"\n")] if b"\n" in data else data
    # an upper bound of the width (delimiters inside quotes count too); pyarrow ignores
    # column_types entries for columns that do not exist
    bound = first.count(fd.encode("ascii")) + 1
    if keep is None and width is not None and bound > width:
        keep = range(1, width + 1)  # records wider than the table: build its columns only
    if keep is not None and not data.isascii():
        try:  # the columns not built are not decoded: check the text here (as the slow path)
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    wanted = [p for p in keep if p <= bound] if keep is not None else list(range(1, bound + 1))
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            # 1 MiB chunks: pyarrow parses the chunks of a block on several threads
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True, block_size=1 << 20),
            parse_options=pa_csv.ParseOptions(
                delimiter=fd,
                quote_char=quote_char,
                double_quote=True,
                escape_char=False,
                newlines_in_values=False,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={f"f{p - 1}": pa.string() for p in wanted},
                strings_can_be_null=options.empty_is_null,
                null_values=[""],
                quoted_strings_can_be_null=options.empty_is_null,
                # only the columns asked for are built (the others are parsed, not kept)
                include_columns=[f"f{p - 1}" for p in wanted] if keep is not None else None,
            ),
        )
    except pa.ArrowInvalid:
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if table.num_rows != lines:
        return None
    # verify_quotes is set only together with quote_char = options.quote (a str).
    if keep is not None:
        if verify_quotes:  # the quote check needs every field's bytes
            return None
        return table.rename_columns([f"_{p}" for p in wanted])
    if (verify_quotes and isinstance(quote_char, str)
            and not _every_quote_consumed(table, data, quote_char, lines)):
        return None
    return table.rename_columns([f"_{i + 1}" for i in range(table.num_columns)])


def _every_quote_consumed(table: pa.Table, data: bytes, quote: str, lines: int) -> bool:
    """True when ``pyarrow.csv`` read every quote of ``data`` as quoting, none as text.

    A block's bytes are its fields' bytes, the delimiters between fields, the line ends and the
    quotes read as quoting. So the block's length equals that sum with *all* its quotes counted
    exactly when no quote was kept as text. With none kept, each field has at most one quoted
    section and it opens the field, which Ceph's rules (quotes anywhere toggle and vanish) read
    identically; a quote kept as text (``ab"c``, ``"a""b"``) is where the two differ.
    """
    content = 0
    for column in table.columns:
        if not pa.types.is_null(column.type):  # an all-NULL column holds no bytes
            content += pc.sum(pc.binary_length(column)).as_py() or 0
    delimiters = table.num_rows * max(table.num_columns - 1, 0)
    line_ends = lines - (0 if data.endswith(b"\n") else 1)
    return len(data) == content + delimiters + line_ends + data.count(quote.encode())


def _rfc_block_pattern(options: CsvInputOptions) -> re.Pattern[bytes] | None:
    """Whole-block pattern of records that ``pyarrow.csv`` reads exactly like our rules.

    Quoted fields start and end at delimiters and contain no line ends. Under RFC rules they
    escape quotes only by doubling. Under Ceph's rules (quotes anywhere toggle and vanish, the
    escape character disables the next one) the two agree only when a quoted field holds no
    quote at all and the block holds no escape character, so the pattern admits exactly that.
    It uses possessive quantifiers so it never backtracks.
    """
    fd, quote = options.field_delimiter, options.quote
    if (
        options.quoted_record_delimiter
        or quote is None
        or len(fd) != 1
        or not quote.isascii()
    ):
        return None
    q, d = re.escape(quote.encode()), re.escape(fd.encode())
    if options.quotes_anywhere:
        if options.escape is not None and (len(options.escape) != 1 or not options.escape.isascii()):
            return None
        e = re.escape(options.escape.encode()) if options.escape else b""
        inside = b"[^" + q + e + b"\n]"
        bare = b"[^" + q + d + e + b"\n]"
        field = b"(?:" + q + inside + b"*+" + q + b"|" + bare + b"*+)"
    elif options.escape in (quote, None):
        dq = q + q if options.escape == quote else b"(?!)"
        field = b"(?:" + q + b"(?:[^" + q + b"\n]++|" + dq + b")*+" + q + b"|[^" + q + d + b"\n]*+)"
    else:
        return None
    record = field + b"(?:" + d + field + b")*+"
    return re.compile(b"(?:" + record + b"\n)*+(?:" + record + b")?+")


def _check_record_sizes(data: bytes, options: CsvInputOptions, pos: _Position) -> None:
    """Raise OverMaxRecordSize when a ``\\n``-terminated record in ``data`` is too long."""
    if len(data) <= options.max_record_size:
        return
    limit = options.max_record_size
    start = 0
    while len(data) - start > limit:
        # the last line end within the next limit + 1 bytes: none means a long record
        end = data.rfind(b"\n", start, start + limit + 1)
        if end == -1:
            raise _too_long(
                options, pos.offset + start, pos.records + data.count(b"\n", 0, start) + 1
            )
        start = end + 1


class _Reader:
    """Turns a stream of raw blocks into lists-of-fields arrays, block by block."""

    def __init__(self, options: CsvInputOptions, keep: Sequence[int] | None = None,
                 fast: bool = True, width: int | None = None) -> None:
        self.options = options
        self.keep = keep
        self.fast = fast
        self.width = width
        self.rd_bytes = options.record_delimiter.encode("utf-8")
        self.pos = _Position()
        self.stream_tokenizer = _Tokenizer(options, split_records=True)
        # Quoted fields may hold line ends: normalise CRLF first, as Go's encoding/csv does
        # (byte offsets in errors then count the normalised bytes).
        self.crlf_to_lf = options.quoted_record_delimiter and options.record_delimiter == "\n"

    def lists(self, blocks: Iterator[bytes]) -> Iterator[pa.ListArray | pa.Table]:
        carry = b""
        for block in blocks:
            buf = carry + block if carry else block
            if self.crlf_to_lf:
                buf = buf.replace(b"\r\n", b"\n")
            cut = self._cut(buf)
            if cut is None:
                carry = buf
                if len(carry) > self.options.max_record_size + len(self.rd_bytes):
                    raise _too_long(self.options, self.pos.offset, self.pos.records + 1)
                continue
            result, used = self._parse(buf[:cut], final=False)
            carry = buf[used:]
            if len(carry) > self.options.max_record_size + len(self.rd_bytes):
                raise _too_long(self.options, self.pos.offset, self.pos.records + 1)
            if result is not None and len(result):
                yield result
        if carry:
            if self.crlf_to_lf:
                carry = carry.replace(b"\r\n", b"\n")
            result, _ = self._parse(carry, final=True)
            if result is not None and len(result):
                yield result

    def _cut(self, buf: bytes) -> int | None:
        index = buf.rfind(self.rd_bytes)
        return None if index == -1 else index + len(self.rd_bytes)

    def _parse(self, data: bytes, final: bool) -> tuple[pa.ListArray | pa.Table | None, int]:
        """Parse whole records from ``data``; returns the rows and bytes consumed."""
        opts = self.options
        table = _fast_table(data, opts, self.keep, self.width) if self.fast else None
        if table is not None:
            _check_record_sizes(data, opts, self.pos)
            self.pos.records += table.num_rows
            self.pos.lines += table.num_rows
            self.pos.offset += len(data)
            return table, len(data)
        text = _decode(data, self.pos, opts)
        if opts.quoted_record_delimiter and opts.quote and opts.quote in text:
            try:
                rows, used_chars = self.stream_tokenizer.tokenize(text, final)
            except UnclosedQuote as unclosed:
                line_start = text.rfind("\n", 0, unclosed.position) + 1
                line = self.pos.lines + text.count("\n", 0, unclosed.position) + 1
                field = text.count(opts.field_delimiter, line_start, unclosed.position) + 1
                raise _unclosed(opts, line, field) from None
            used = len(text[:used_chars].encode("utf-8")) if used_chars < len(text) else len(data)
            for number, row in enumerate(rows):
                size = sum(len(f) for f in row)
                if size > opts.max_record_size:
                    raise _too_long(opts, self.pos.offset, self.pos.records + number + 1)
            self.pos.records += len(rows)
            self.pos.lines += data.count(b"\n", 0, used)
            self.pos.offset += used
            rows = _filter_rows(rows, opts)
            return pa.array(rows, type=pa.list_(pa.string())), used
        lines = pc.split_pattern(pa.array([text], pa.string()), opts.record_delimiter).flatten()
        if text.endswith(opts.record_delimiter):
            lines = lines.slice(0, len(lines) - 1)
        _check_lengths(lines, opts, self.pos)
        _check_quotes_closed(lines, opts, self.pos)
        self.pos.records += len(lines)
        self.pos.lines += len(lines)
        self.pos.offset += len(data)
        lines = _filter_lines(lines, opts)
        return _lines_to_lists(lines, opts), len(data)


def _raw_blocks(
    source: BinaryIO,
    options: CsvInputOptions,
    byte_range: tuple[int, int] | None,
    block_size: int,
) -> Iterator[bytes]:
    if byte_range is None:
        while block := source.read(block_size):
            yield block
        return
    quote = (
        options.quote.encode("utf-8") if options.quoted_record_delimiter and options.quote else None
    )
    yield from iter_range_bytes(
        source,
        options.record_delimiter.encode("utf-8"),
        byte_range[0],
        byte_range[1],
        quote=quote,
        block_size=block_size,
    )


def read_csv_header(source: BinaryIO, options: CsvInputOptions) -> list[str]:
    """The fields of the object's first record (after comment / empty-line rules).

    Args:
        source: the (decompressed) object, read from its current position.
        options: parsing options.

    Returns:
        The header names; an empty field gives ``""``.

    Example:
        >>> import io
        >>> read_csv_header(io.BytesIO(b"a,b\\n1,2\\n"), CsvInputOptions())
        ['a', 'b']
    """
    header_options = replace(options, empty_is_null=False)
    reader = _Reader(header_options)
    for lists in reader.lists(_raw_blocks(source, header_options, None, 64 * 1024)):
        if isinstance(lists, pa.Table) and lists.num_rows:
            return [v if v is not None else "" for v in lists.slice(0, 1).to_pylist()[0].values()]
        if not isinstance(lists, pa.Table) and len(lists):
            return [v if v is not None else "" for v in lists[0].as_py()]
    return []


def iter_csv_batches(
    source: BinaryIO,
    options: CsvInputOptions,
    *,
    num_columns: int | None,
    byte_range: tuple[int, int] | None = None,
    batch_rows: int = 65536,
    skip_header: bool | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    columns: Sequence[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Read CSV records as batches of nullable Utf8 columns ``_1 .. _N``.

    Args:
        source: the decompressed object (seekable when ``byte_range`` is given).
        options: parsing options (see :class:`CsvInputOptions`).
        num_columns: fixed width: short records are padded with NULL, extra fields dropped.
            None: each batch is as wide as its widest record.
        byte_range: ``(start, stop)``, end exclusive: read only the records whose first byte
            lies in ``[start, stop)`` (AWS's ``ScanRange`` rule,
            :mod:`flight_storage.formats.scan_range`).
        batch_rows: most rows per batch.
        skip_header: drop the first record; by default when ``FileHeaderInfo`` is
            ``IGNORE``/``USE`` and the range (if any) starts at byte 0.
        block_size: bytes read from ``source`` per step.
        columns: read only these field positions (1-based, ascending; ``num_columns`` is then
            ignored): columns ``_p`` for each, NULL where a record is shorter.

    Yields:
        Record batches (never empty).

    Raises:
        InputFormatError: ``InvalidTextEncoding`` (with the byte offset) for invalid UTF-8,
            ``OverMaxRecordSize`` for a record over ``options.max_record_size``.

    Example:
        >>> import io
        >>> source = io.BytesIO(b"a,,b\\n")
        >>> batch = next(iter_csv_batches(source, CsvInputOptions(), num_columns=None))
        >>> batch.to_pydict()
        {'_1': ['a'], '_2': [None], '_3': ['b']}
    """
    if skip_header is None:
        skip_header = options.has_header and (byte_range is None or byte_range[0] == 0)
    reader = _Reader(options, columns, width=num_columns)
    for rows in reader.lists(_raw_blocks(source, options, byte_range, block_size)):
        if skip_header:
            rows = rows.slice(1)
            skip_header = False
        if isinstance(rows, pa.Table):
            for batch in rows.to_batches(max_chunksize=batch_rows):
                if batch.num_rows:
                    yield _fit_width(batch, num_columns, columns)
            continue
        for begin in range(0, len(rows), batch_rows):
            part = rows.slice(begin, batch_rows)
            if len(part):
                yield _columns(part, options, num_columns, columns)


def peek_width(source: BinaryIO, options: CsvInputOptions, *, rows: int = 1024,
               block_size: int = 64 << 10) -> int:
    """The most fields of the first ``rows`` records (the header included), counted without
    building a column per field (a record of 100,000 fields costs its bytes, not 100,000
    arrays)."""
    reader = _Reader(options, fast=False)
    widest = seen = 0
    for lists in reader.lists(_raw_blocks(source, options, None, block_size)):
        part = lists.slice(0, rows - seen)
        if len(part):
            widest = max(widest, pc.max(pc.list_value_length(part)).as_py() or 0)
        seen += len(part)
        if seen >= rows:
            break
    return widest


def _fit_width(batch: pa.RecordBatch, num_columns: int | None,
               keep: Sequence[int] | None = None) -> pa.RecordBatch:
    """Pad with NULL columns or drop extra columns to make ``batch`` ``num_columns`` wide (or
    have the columns ``_p`` of ``keep``)."""
    if keep is not None:
        have = dict(zip(batch.schema.names, batch.columns, strict=True))
        names = [f"_{p}" for p in keep]
        return pa.RecordBatch.from_arrays(
            [have.get(n, pa.nulls(batch.num_rows, pa.string())) for n in names], names=names)
    if num_columns is None or num_columns == batch.num_columns:
        return batch
    arrays = list(batch.columns[:num_columns])
    arrays += [pa.nulls(batch.num_rows, pa.string())] * (num_columns - len(arrays))
    names = [f"_{i + 1}" for i in range(num_columns)]
    return pa.RecordBatch.from_arrays(arrays, names=names)
