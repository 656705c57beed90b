"""Prove, with one vectorised pass over an object, that DataFusion's CSV reader reads it exactly
as the s3-select rules of :mod:`flight_storage.formats.csv_input` do: the one owner of when an
Arrow CSV reader (DataFusion's arrow-csv, pyarrow's) agrees with s3-select.

Two readers ask it: the engine, before it hands an object to DataFusion (:func:`survey_file`,
:func:`survey_range`), and the reference reader, before it parses a block with
``pyarrow.csv`` rather than its own tokenizer (:func:`arrow_block_reason`: the same checks on
one block, without counting fields).

DataFusion's reader (arrow-csv) and s3-select's rules agree on plain CSV and differ on a known
list of inputs (../shared/design/NOTES.md, "How DataFusion's CSV reader differs"). The survey
looks for each of them and names the first it finds; an object with none of them is *native*:
the engine may hand it to DataFusion, and the reference reader stays for everything else.

| what the survey refuses | why the two readers differ there |
|---|---|
| a multi-character delimiter, a record delimiter other than ``\\n``, trim characters | DataFusion takes single bytes and ``\\n``/``\\r\\n`` only |
| a leading byte-order mark | DataFusion drops it; s3-select keeps it in the first field |
| invalid UTF-8 | the reference reports ``InvalidTextEncoding`` with the byte offset |
| a ``\\r`` not followed by ``\\n`` | arrow-csv ends a record there |
| an empty line | DataFusion skips it; Ceph counts a record of one NULL field |
| a record over the record-size limit | the reference reports ``OverMaxRecordSize`` |
| a line starting with the comment character | the header and LIMIT rules of comments |
| the escape character anywhere (when it is not the quote) | Ceph removes it anywhere; DataFusion only inside quotes |
| a quote that does not open or close a field (``a"b"c``, a quote spanning lines) | Ceph toggles quotes anywhere and removes them; RFC 4180 keeps them |

What the survey measures (the fewest and most fields of a data record, the header's width) lets
the engine check the rest per query: rows wider than the table DataFusion is given are an error
there, and in the ``aws`` flavour an empty field is ``""`` but a missing one NULL, which
DataFusion cannot tell apart (it reads both as NULL), so a column some rows lack is refused.

A doubled quote inside a quoted field (``"a""b"``) is one quote to DataFusion and AWS and none
to Ceph (its quotes toggle and vanish); the survey reports it and the engine removes the quote
DataFusion kept in the ``ceph`` flavour.

Everything here is numpy over the bytes, about memory bandwidth; the result is cached per object
version by the caller, so a hot object pays for it once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np

from flight_storage.cores import usable_cores
from flight_storage.errors import StoppedError
from flight_storage.formats.compression import open_decompressed
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.record_size import first_long_line, long_lines

CHUNK_BYTES = 2 << 20
"""Bytes surveyed at a time (cut back to the last line end, so no line spans two chunks).
The survey's working arrays grow with the lines a chunk holds (about 30x the chunk for 4-byte
lines): 2 MiB keeps a bomb of short lines within ~100 MiB, and surveys a 121 MB CSV as fast as
8 MiB chunks did (231 vs 200 MB/s here)."""

_WORKERS = min(4, usable_cores())
_LF, _CR = 10, 13
_BOM = b"\xef\xbb\xbf"
_DEFAULT_QUOTE = '"'


@dataclass(frozen=True)
class CsvSurvey:
    """What one pass over an object found.

    Attributes:
        reason: why DataFusion's reader would read the object differently, or ``""`` when it
            reads it exactly as s3-select does (see the module's table).
        records: lines, the header included.
        header_fields: fields of the first line (0 for an empty object).
        min_fields: fewest fields of a data record (the header excluded when ``has_header``).
        max_fields: most fields of a data record.
        quote: the quote byte to give DataFusion (the request's, or ``"`` when quoting is off
            and the object holds no ``"``).
        doubled_quotes: some quoted field holds a doubled quote (``"a""b"``): DataFusion reads
            one quote there, as RFC 4180 and AWS do; Ceph's toggling rules read none.
        decoded_bytes: see below.
    """

    reason: str
    records: int = 0
    header_fields: int = 0
    min_fields: int = 0
    max_fields: int = 0
    quote: str = _DEFAULT_QUOTE
    doubled_quotes: bool = False
    decoded_bytes: int = 0
    """Bytes after decompression (S3's BytesProcessed of a whole compressed object); set by
    :func:`survey_file` for compressed objects only."""

    @property
    def native(self) -> bool:
        """True when DataFusion's reader gives exactly the s3-select records."""
        return not self.reason


def options_reason(options: CsvInputOptions) -> str:
    """Why no object can be read natively under ``options`` (``""`` when some can).

    Quoted record delimiters allowed (``AllowQuotedRecordDelimiter``, the standard flavour)
    refuse no object by themselves: the survey refuses a quote that spans lines, and an object
    without one reads the same either way (a ``\r\n`` is then always a line end, which both
    readers drop; Go's reader, MinIO's, rewrites it only inside quotes)."""
    return arrow_options_reason(options)


def arrow_options_reason(options: CsvInputOptions) -> str:
    """Why no Arrow CSV reader reads any block as s3-select does under ``options`` (``""``
    when some block can be): one-byte delimiters, quote, escape and comment, ``\n`` ending
    records, no trim characters."""
    fd = options.field_delimiter
    if len(fd) != 1 or not fd.isascii() or fd in "\r\n":
        return f"field delimiter {fd!r} is not one ASCII byte"
    if options.record_delimiter != "\n":
        return f"record delimiter {options.record_delimiter!r} is not a line feed"
    if options.trim_chars:
        return "trim characters are set"
    for name, char in (("quote", options.quote), ("escape", options.escape),
                       ("comment", options.comment)):
        if char is not None and (len(char) != 1 or not char.isascii() or char in "\r\n"):
            return f"{name} character {char!r} is not one ASCII byte"
    if options.quote is not None and options.quote == fd:
        return "quote and field delimiter are the same"
    return ""


def doubled_quotes_differ(options: CsvInputOptions) -> bool:
    """A doubled quote inside a quoted field (``"a""b"``) reads as no quote under ``options``
    (Ceph's toggling quotes, unless the escape character is the quote) but as one quote to an
    Arrow reader, as RFC 4180 and AWS read it."""
    return options.quotes_anywhere and options.escape != options.quote


def arrow_block_reason(block: bytes, options: CsvInputOptions, *, rows_counted: bool = False
                       ) -> str:
    """Why an Arrow CSV reader would read ``block`` (whole records, the last one's line end
    optional) other than s3-select does under ``options``, ``""`` when it reads it the same:
    the survey's checks on one block (the rows' widths left to the reader), and a doubled
    quote where :func:`doubled_quotes_differ`. The reference reader asks before it hands a
    block to ``pyarrow.csv``; it counts the rows that reader gives against the lines
    (``rows_counted``: an Arrow reader skips an empty line), so a block without quotes,
    carriage returns and comment characters is not searched for empty lines here.

    Example:
        >>> arrow_block_reason(b'1,"a""b"\\n', CsvInputOptions())
        "a doubled quote, which Ceph's quotes read as none"
        >>> arrow_block_reason(b'1,"a""b"\\n', replace(CsvInputOptions(), quotes_anywhere=False))
        ''
    """
    reason = arrow_options_reason(options)
    if reason:
        return reason
    checked = _ChunkSurveyor(options).checked(block, first=True, rows_counted=rows_counted)
    if not checked.reason and checked.doubled_quotes and doubled_quotes_differ(options):
        return "a doubled quote, which Ceph's quotes read as none"
    return checked.reason


def survey_csv(chunks: Iterable[bytes | memoryview], options: CsvInputOptions,
               stop: threading.Event | None = None) -> CsvSurvey:
    """Survey an object's bytes, given as consecutive chunks of any size.

    Args:
        chunks: the (decompressed) object from its first byte.
        options: the request's CSV options under its flavour.
        stop: when set (the query timed out or was cancelled), the survey ends at the next
            chunk with :class:`~flight_storage.errors.StoppedError`.

    Returns:
        The survey; its ``reason`` is empty when DataFusion may read the object.

    Example:
        >>> survey_csv([b"a,b\\n1,2\\n"], CsvInputOptions()).native
        True
        >>> survey_csv([b"a,b\\n\\n1,2\\n"], CsvInputOptions()).reason
        'an empty line (line 2)'
    """
    reason = options_reason(options)
    if reason:
        return CsvSurvey(reason)
    surveyor = _ChunkSurveyor(options)
    total = _Totals(has_header=options.has_header)
    # numpy releases the GIL in its scans: chunks are surveyed on every core, in order
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        pending: deque[Future[_ChunkSurvey]] = deque()
        for index, chunk in enumerate(_whole_lines(chunks, options.max_record_size)):
            if stop is not None and stop.is_set():
                _cancel(pending)
                raise StoppedError("survey stopped: its query ended")
            pending.append(pool.submit(surveyor.survey, chunk, index == 0))
            while len(pending) > _WORKERS or (pending and pending[0].done()):
                reason = total.add(pending.popleft().result())
                if reason:
                    _cancel(pending)
                    return CsvSurvey(reason)
        while pending:
            reason = total.add(pending.popleft().result())
            if reason:
                _cancel(pending)
                return CsvSurvey(reason)
    return total.result(surveyor.quote_char)


def _cancel(pending: deque[Future[_ChunkSurvey]]) -> None:
    for future in pending:
        future.cancel()


def survey_file(raw: BinaryIO, options: CsvInputOptions, compression: str = "NONE",
                stop: threading.Event | None = None) -> CsvSurvey:
    """:func:`survey_csv` over an object's stream from its first byte (decompressed as it
    streams when compressed); closes ``raw``."""
    decoded = [0]
    with raw, open_decompressed(raw, compression, decoded) as stream:
        survey = survey_csv(iter(lambda: stream.read(CHUNK_BYTES), b""), options, stop)
    return replace(survey, decoded_bytes=decoded[0])


def survey_range(raw: BinaryIO, options: CsvInputOptions, start: int, stop: int,
                 stopped: threading.Event | None = None) -> CsvSurvey:
    """:func:`survey_csv` over the lines a reader of the byte range ``[start, stop)`` reads (the
    records whose first byte lies in it, each to its end), from a seekable uncompressed stream
    of the whole object; closes ``raw``.

    Every rule the survey checks is about one line, so the lines of each range can be
    surveyed on their own, when that range is read (an object store's object is never read
    whole to plan). The header is the first line of the range at 0 only.
    """
    if start > 0:
        options = replace(options, file_header_info="NONE")
    with raw:
        return survey_csv(_range_lines(raw, start, stop), options, stopped)


def _range_lines(raw: BinaryIO, start: int, stop: int) -> Iterator[bytes]:
    """The bytes of the lines starting in ``[start, stop)``: from after the first line feed at
    or after ``start - 1`` (``start`` itself when 0) through the line feed ending the line that
    holds byte ``stop - 1``."""
    position = max(0, start - 1)
    raw.seek(position)
    skipping = start > 0
    while True:
        chunk = raw.read(CHUNK_BYTES)
        if not chunk:
            return
        if skipping:
            cut = chunk.find(b"\n")
            if cut == -1:
                position += len(chunk)
                continue
            position += cut + 1
            chunk = chunk[cut + 1:]
            skipping = False
            if position >= stop:
                return
        end = position + len(chunk)
        if end >= stop:
            cut = chunk.find(b"\n", max(0, stop - 1 - position))
            yield chunk if cut == -1 else chunk[: cut + 1]
            if cut != -1:
                return
        else:
            yield chunk
        position = end


def _whole_lines(chunks: Iterable[bytes | memoryview], limit: int
                 ) -> Iterator[bytes | memoryview]:
    """Re-cut chunks so each ends with a line feed (the last may not). A line still without
    its end after ``limit`` bytes is yielded as it is and the cutting stops: its chunk's survey
    names it (a record over the limit), so no line is ever buffered past the limit (a
    decompression bomb of zeros is one endless "line")."""
    carry: list[bytes] = []  # the pieces of the line the last chunk left unfinished
    carried = 0
    for chunk in chunks:
        data = np.frombuffer(chunk, np.uint8)
        ends = np.flatnonzero(data == _LF)
        if not len(ends):
            carry.append(bytes(chunk))
            carried += len(chunk)
            if carried > limit:
                yield b"".join(carry)
                return
            continue
        cut = int(ends[-1]) + 1
        yield b"".join([*carry, bytes(chunk[:cut])]) if carry else chunk[:cut]
        rest = bytes(chunk[cut:])
        carry, carried = ([rest], len(rest)) if rest else ([], 0)
    if carry:
        yield b"".join(carry)


@dataclass(frozen=True)
class _ChunkSurvey:
    """What one chunk of whole lines holds."""

    lines: int
    reason: str = ""
    reason_line: int | None = None
    """Line of the chunk (from 0) the reason is about, when it is about one."""
    first_fields: int = 0
    doubled_quotes: bool = False
    min_fields: int = 0
    max_fields: int = 0
    """Fewest and most fields of the chunk's lines (its first line excluded when that is the
    object's header)."""


@dataclass
class _Totals:
    """The surveys of the chunks so far, combined in order."""

    has_header: bool
    lines: int = 0
    header_fields: int = 0
    min_fields: int | None = None
    max_fields: int = 0
    doubled_quotes: bool = False

    def add(self, chunk: _ChunkSurvey) -> str:
        if chunk.reason:
            if chunk.reason_line is None:
                return chunk.reason
            return f"{chunk.reason} (line {self.lines + chunk.reason_line + 1})"
        if self.lines == 0:
            self.header_fields = chunk.first_fields
        self.doubled_quotes |= chunk.doubled_quotes
        self.lines += chunk.lines
        data_lines = chunk.lines - (1 if self.has_header and self.lines == chunk.lines else 0)
        if data_lines > 0:
            low = chunk.min_fields
            self.min_fields = low if self.min_fields is None else min(self.min_fields, low)
            self.max_fields = max(self.max_fields, chunk.max_fields)
        return ""

    def result(self, quote: str) -> CsvSurvey:
        return CsvSurvey("", records=self.lines, header_fields=self.header_fields,
                         min_fields=self.min_fields or 0, max_fields=self.max_fields,
                         quote=quote, doubled_quotes=self.doubled_quotes)


@dataclass(frozen=True)
class _Checked:
    """A chunk checked line by line: the first reason an Arrow reader reads it otherwise (and
    the chunk's line it is about), or the quote positions where it holds quotes and whether
    two of them stand together (a doubled quote, or an empty quoted field)."""

    chunk: bytes
    reason: str = ""
    reason_line: int | None = None
    quotes: np.ndarray | None = None
    doubled_quotes: bool = False


class _ChunkSurveyor:
    """Surveys one chunk of whole lines on its own (no state between chunks)."""

    def __init__(self, options: CsvInputOptions) -> None:
        self.options = options
        self.delimiter = ord(options.field_delimiter)
        quote = options.quote
        self.quote_char = quote if quote is not None else _DEFAULT_QUOTE
        self.quote = ord(self.quote_char)
        # with quoting off, DataFusion still has a quote byte: the object must not hold it
        self.quoting = quote is not None
        escape = options.escape
        self.escape = ord(escape) if escape is not None and escape != quote else None
        self.comment = ord(options.comment) if options.comment is not None else None
        self.limit = options.max_record_size

    def survey(self, chunk: bytes | memoryview, first: bool) -> _ChunkSurvey:
        checked = self.checked(chunk, first)
        if checked.reason:
            return _ChunkSurvey(0, checked.reason, checked.reason_line)
        fields = self._fields(checked)
        counted = fields[1:] if first and self.options.has_header else fields
        return _ChunkSurvey(
            len(fields),
            first_fields=int(fields[0]),
            doubled_quotes=checked.doubled_quotes,
            min_fields=int(counted.min()) if len(counted) else 0,
            max_fields=int(counted.max()) if len(counted) else 0,
        )

    def checked(self, chunk: bytes | memoryview, first: bool, rows_counted: bool = False
                ) -> _Checked:
        """The chunk's lines, or the first reason an Arrow reader would read them otherwise
        (``rows_counted``: see :func:`arrow_block_reason`)."""
        chunk = bytes(chunk)  # bytes.find and isascii run at memchr speed
        reason = self._bytes_reason(chunk, first)
        if reason:
            return _Checked(chunk, reason)
        has_quote = chunk.find(bytes([self.quote])) != -1
        has_comment = self.comment is not None and chunk.find(bytes([self.comment])) != -1
        if not (has_quote or has_comment or chunk.find(b"\r") != -1):
            return self._plain_lines(chunk, rows_counted)
        return self._lines(chunk, has_quote, has_comment)

    def _bytes_reason(self, chunk: bytes, first: bool) -> str | None:
        """The first reason found in the chunk's bytes, before its lines are looked at."""
        if first and chunk.startswith(_BOM):
            return "a byte-order mark at the start"
        if not chunk.isascii():
            try:
                chunk.decode("utf-8")  # whole lines: no character spans two chunks
            except UnicodeDecodeError:
                return "invalid UTF-8"
        if self.escape is not None and chunk.find(bytes([self.escape])) != -1:
            return "the escape character outside a doubled quote"
        return None

    def _lines(self, chunk: bytes, has_quote: bool, has_comment: bool) -> _Checked:
        """The line checks of a chunk with quotes, carriage returns or comment characters."""
        data = np.frombuffer(chunk, np.uint8)
        line_ends = _line_ends(data)
        starts = np.empty_like(line_ends)
        starts[0] = 0
        starts[1:] = line_ends[:-1] + 1
        lengths = line_ends - starts
        content = lengths
        if chunk.find(b"\r") != -1:
            reason = self._carriage_returns(data)
            if reason:
                return _Checked(chunk, reason)
            # a CR here always precedes a LF: it belongs to the line end, not the record
            ends_in_cr = (line_ends > starts) & (data[np.maximum(line_ends - 1, 0)] == _CR)
            content = lengths - ends_in_cr
        empty = np.flatnonzero(content == 0)
        if len(empty):
            return _Checked(chunk, "an empty line", int(empty[0]))
        if len(chunk) > self.limit:
            too_long = long_lines(lengths, self.limit)
            if len(too_long):
                return _Checked(chunk, f"a record over {self.limit} bytes", int(too_long[0]))
        if has_comment and np.any(data[starts] == self.comment):
            return _Checked(chunk, "a line starting with the comment character")
        if has_quote:
            return self._quoted(chunk, data, line_ends)
        return _Checked(chunk)

    def _quoted(self, chunk: bytes, data: np.ndarray, line_ends: np.ndarray) -> _Checked:
        """The quote checks of a chunk whose lines passed, with its quotes' positions."""
        if not self.quoting:
            return _Checked(chunk, f"the character {self.quote_char!r} with quoting off")
        quotes = np.flatnonzero(data == self.quote)
        reason = self._quotes_reason(data, quotes, line_ends)
        if reason:
            return _Checked(chunk, reason)
        doubled = bool(np.any(quotes[1:] == quotes[:-1] + 1))
        return _Checked(chunk, quotes=quotes, doubled_quotes=doubled)

    def _plain_lines(self, chunk: bytes, rows_counted: bool) -> _Checked:
        """The checks of a chunk without quotes, carriage returns or comment characters, at
        memchr speed: an empty line is two line feeds together (or one first), a line over
        the limit one without a line feed in ``limit + 1`` bytes."""
        if not rows_counted:
            empty = 0 if chunk.startswith(b"\n") else chunk.find(b"\n\n") + 1
            if empty > 0 or chunk.startswith(b"\n"):
                return _Checked(chunk, "an empty line", chunk.count(b"\n", 0, empty))
        long = first_long_line(chunk, self.limit)
        if long is not None:
            return _Checked(chunk, f"a record over {self.limit} bytes", chunk.count(b"\n", 0, long))
        return _Checked(chunk)

    def _carriage_returns(self, data: np.ndarray) -> str:
        returns = np.flatnonzero(data == _CR)
        following = returns + 1
        if following[-1] >= len(data) or np.any(data[following] != _LF):
            return "a carriage return not followed by a line feed"
        return ""

    def _fields(self, checked: _Checked) -> np.ndarray:
        """Fields per line, counting only delimiters outside quoted fields.

        The delimiters are many and the lines and quotes few, so every lookup searches the
        few in the many (``searchsorted`` of line ends and quotes into delimiter positions).
        """
        data = np.frombuffer(checked.chunk, np.uint8)
        line_ends, quotes = _line_ends(data), checked.quotes
        delimiters = np.flatnonzero(data == self.delimiter)
        before_end = np.searchsorted(delimiters, line_ends)
        per_line = np.diff(before_end, prepend=0)
        if quotes is None:
            return per_line + 1
        opening, closing = quotes[0::2], quotes[1::2]
        inside = np.searchsorted(delimiters, closing) - np.searchsorted(delimiters, opening)
        line_of = np.searchsorted(line_ends, opening)
        per_line = per_line - np.bincount(line_of, weights=inside, minlength=len(line_ends))
        return per_line.astype(np.int64) + 1

    def _quotes_reason(self, data: np.ndarray, quotes: np.ndarray, line_ends: np.ndarray) -> str:
        """Why the quotes are not all field-opening/closing pairs within one line."""
        per_line = np.diff(np.searchsorted(quotes, line_ends), prepend=0)
        if np.any(per_line % 2) or len(quotes) % 2:
            return "an unpaired quote or a quoted line end"
        opening, closing = quotes[0::2], quotes[1::2]
        before = data[np.maximum(opening - 1, 0)]
        opens_field = (opening == 0) | (before == self.delimiter) | (before == _LF)
        after_index = closing + 1
        at_end = after_index >= len(data)
        after = data[np.minimum(after_index, len(data) - 1)]
        closes_field = at_end | (after == self.delimiter) | (after == _LF) | (after == _CR)
        if len(closing) > 1:
            # a closing quote right before the next opening one is a doubled quote
            doubled = opening[1:] == closing[:-1] + 1
            opens_field[1:] |= doubled
            closes_field[:-1] |= doubled
        if not (np.all(opens_field) and np.all(closes_field)):
            return "a quote inside a field"
        return ""


def _line_ends(data: np.ndarray) -> np.ndarray:
    """Where each line of a chunk ends: its line feed, or the chunk's end for a last line
    without one."""
    line_ends = np.flatnonzero(data == _LF)
    if not len(line_ends) or line_ends[-1] != len(data) - 1:
        line_ends = np.append(line_ends, len(data))
    return line_ends
