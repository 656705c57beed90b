"""The reference CSV reader of S3 Select: records -> Arrow batches of Utf8 columns ``_1 .. _N``.

The options are :class:`~flight_storage.formats.csv_options.CsvInputOptions`; the tokenizer and
the vectorised split of records into fields are :mod:`flight_storage.formats.csv_tokenizer`;
this module reads blocks, decides per block which of them parses it, and builds the columns.

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

``csv_unclosed_quote_error`` (the standard flavour's reading)
    A quoted field that never closes is an error naming its line and column, as DuckDB's
    reader stops there: before the end of its line ``CSVEscapingRecordDelimiter`` (AWS's error
    for a record delimiter inside quotes without ``AllowQuotedRecordDelimiter``), with it
    before the end of the object ``CSVParsingError``.

With the record delimiter ``\\n`` a ``\\r`` before it is dropped (Windows line ends).

The object is read in blocks (2 MiB); the partial last record is carried to the next block.
A block an Arrow CSV reader reads as s3-select does (the survey says so:
:func:`~flight_storage.formats.csv_guard.arrow_block_reason`) is parsed by ``pyarrow.csv``;
otherwise records without quote or escape characters are split vectorised with
``pyarrow.compute`` and only records that contain them go through the Python tokenizer. A
record longer than the limit is ``OverMaxRecordSize``, measured as
:mod:`flight_storage.formats.record_size` says on every path.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from flight_storage.errors import InputFormatError
from flight_storage.formats.csv_guard import arrow_block_reason
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.csv_tokenizer import Tokenizer, UnclosedQuote, lines_to_lists
from flight_storage.formats.record_size import text_over, too_long
from flight_storage.formats.scan_range import iter_range_bytes

DEFAULT_BLOCK_SIZE = 2 * 1024 * 1024


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
    tokenizer = Tokenizer(options, split_records=False)
    for index in np.flatnonzero(mask.to_numpy(zero_copy_only=False)):
        line = lines[int(index)].as_py()
        if options.comment and line.startswith(options.comment):
            continue
        if options.record_delimiter == "\n" and line.endswith("\r"):
            line = line[:-1]
        field = tokenizer.unclosed_field(line)
        if field is not None:
            raise _unclosed(options, pos.records + int(index) + 1, field)


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
    lengths = pc.binary_length(lines)  # a record's bytes, its delimiter left out
    limit = options.max_record_size
    if pc.max(lengths).as_py() > limit:
        first = pc.index(pc.greater(lengths, limit), True).as_py()
        raise too_long(limit, record=pos.records + first + 1, offset=pos.offset)


def _fast_table(data: bytes, options: CsvInputOptions, keep: Sequence[int] | None = None,
                width: int | None = None) -> pa.Table | None:
    """Parse ``data`` (whole records) with ``pyarrow.csv`` when that gives the same fields as
    the s3-select rules, else None (the caller tokenizes it).

    Whether it does is the survey's decision
    (:func:`flight_storage.formats.csv_guard.arrow_block_reason`, the one owner of when an Arrow
    CSV reader agrees with s3-select); ``pyarrow.csv`` then also refuses rows of different
    widths, and every line must become a row.
    """
    if not data or arrow_block_reason(data, options, rows_counted=True):
        return None
    fd = options.field_delimiter
    quote = options.quote
    quote_char: str | bool = (
        quote if quote is not None and data.find(quote.encode()) != -1 else False)
    first = data[: data.find(b"\n")] if b"\n" in data else data
    # an upper bound of the width (delimiters inside quotes count too); pyarrow ignores
    # column_types entries for columns that do not exist, and refuses include_columns ones
    bound = first.count(fd.encode("ascii")) + 1
    if keep is None and width is not None and bound > width:
        keep = range(1, width + 1)  # records wider than the table: build its columns only
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
    except (pa.ArrowInvalid, pa.ArrowKeyError):  # ragged rows, a column the bound overcounted
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if table.num_rows != lines:
        return None
    if keep is not None:
        return table.rename_columns([f"_{p}" for p in wanted])
    return table.rename_columns([f"_{i + 1}" for i in range(table.num_columns)])


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
        self.stream_tokenizer = Tokenizer(options, split_records=True)
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
                self._bound_carry(carry)
                continue
            result, used = self._parse(buf[:cut], final=False)
            carry = buf[used:]
            self._bound_carry(carry)
            if result is not None and len(result):
                yield result
        if carry:
            if self.crlf_to_lf:
                carry = carry.replace(b"\r\n", b"\n")
            result, _ = self._parse(carry, final=True)
            if result is not None and len(result):
                yield result

    def _bound_carry(self, carry: bytes) -> None:
        """Stop buffering an unfinished record once it is over the limit whatever its end
        (a partial record delimiter may close it)."""
        limit = self.options.max_record_size
        if len(carry) > limit + len(self.rd_bytes):
            error = too_long(limit, record=self.pos.records + 1, offset=self.pos.offset)
            if self.rd_bytes in carry:  # line ends inside a quoted field that has not closed
                line = self.pos.lines + 1
                raise InputFormatError(
                    f"line {line}: {error.message}: a quoted field in it holds "
                    f"{carry.count(self.rd_bytes)} line ends and has not closed (an "
                    "unterminated quote?)", code=error.code, line=line, offset=error.offset,
                    row=error.row)
            raise error

    def _cut(self, buf: bytes) -> int | None:
        index = buf.rfind(self.rd_bytes)
        return None if index == -1 else index + len(self.rd_bytes)

    def _parse(self, data: bytes, final: bool) -> tuple[pa.ListArray | pa.Table | None, int]:
        """Parse whole records from ``data``; returns the rows and bytes consumed."""
        opts = self.options
        table = _fast_table(data, opts, self.keep, self.width) if self.fast else None
        if table is not None:  # the survey refused a block holding a record over the limit
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
            self._check_record_sizes(text, self.stream_tokenizer.record_ends)
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
        return lines_to_lists(lines, opts), len(data)

    def _check_record_sizes(self, text: str, ends: list[int]) -> None:
        """Refuse a tokenized record (``text[start:end]``, records delimited) over the limit."""
        limit, step = self.options.max_record_size, len(self.options.record_delimiter)
        start = 0
        for number, end in enumerate(ends):
            if text_over(text[start:end], limit):
                raise too_long(limit, record=self.pos.records + number + 1,
                               offset=self.pos.offset)
            start = end + step


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
