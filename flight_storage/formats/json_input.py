"""JSON input (``InputSerialization.JSON``, DOCUMENT and LINES) as Arrow batches of JSON text.

The table ``s3object`` of a JSON query has one nullable Utf8 column per JSON path the query
uses (see docs/architecture.md). Each cell holds the compact JSON text of the value at that
path under the row (``1``, ``"abc"``, ``true``, ``null``, ``[1,2]``, ``{"a":1}``), or SQL NULL
when the path is MISSING (absent key, index out of range, a step into a scalar).

This module reads the object (LINES and DOCUMENT, byte ranges, errors) and makes the batches;
decoded values and member lookups are :mod:`flight_storage.formats.json_values`, rows and paths
:mod:`flight_storage.formats.json_paths`, the cells' text
:func:`flight_storage.formats.json_text.decoded_text`, a record's size
:mod:`flight_storage.formats.record_size` and a range's records
:mod:`flight_storage.formats.scan_range`.

Documents
    LINES: every non-blank line is one JSON value (surrounding whitespace allowed).
    DOCUMENT: the object is a sequence of JSON values, each of any size and layout
    (concatenated, pretty-printed, separated by whitespace or nothing). It is read as a
    stream: only the document being parsed is held in memory, and where arrays are
    transparent (Ceph's rows) a top-level array is read element by element where the rows allow it, so a large array
    is held one element at a time. Each value held is bounded by the record limit.

Rows (``from_path``: the steps after ``s3object[*]``; empty for ``FROM s3object[*]``), by the
flavour's :attr:`~select_dialect.flavors.ReadingRules.json_partiql_rows`
    Off (Ceph): arrays are transparent, as in Ceph's key-path matcher. A key step applies to
    an object's members whose key matches (every duplicate counts) and to each element of
    an array; the values reached at the end of the path are rows, arrays among them
    flattened recursively. So a top-level array document gives one row per element,
    ``FROM s3object[*].phoneNumbers`` one row per phone number, and an object reached by
    the path one row. ``*`` matches every member (every duplicate too), ``[*]`` every
    element (other values pass through), ``[n]`` element n of an array.
    On (AWS): the path is evaluated like a PartiQL path over each document and yields
    exactly what it reaches: a key or index step gives one value or MISSING, ``[*]``
    iterates an array (and passes any other value through, MISSING included), ``*``
    iterates an object's members. A top-level array document is one row; a MISSING row
    is still a row (every column NULL), as in AWS's ``FROM S3Object[*].Rules[*].id`` example.

Paths (``paths``: column name -> steps)
    ``("key", name)`` matches case-insensitively; when several members match, the last
    one wins (Ceph). AWS's rules: ``("exact_key", name)`` (a quoted name) matches its own
    case only; ``("only_key", name)`` (unquoted) matches any case, and an object with
    several members that match it in different cases fails the query with
    ``AmbiguousFieldName``. ``("index", n)``; ``("any_index",)`` and ``("any_key",)`` make the value a
    JSON array of everything reached (nested wildcards flattened), or NULL when the part of
    the path before the first wildcard is MISSING or not an array / object.

Duplicate keys
    A lookup sees the last duplicate, in both flavours. Container text (the whole-row path
    ``()`` included) re-serializes every member in document order, duplicates included, so
    ``select *`` in Ceph's format can print the first value of each key and AWS-style output
    can decide for itself. Numbers are re-serialized canonically as the shortest
    round-trip decimal (``1.50`` -> ``1.5``); an integral value prints without a fraction
    (``3.0`` -> ``3``, ``1E2`` -> ``100``), as Ceph and MinIO print doubles.

Errors
    :class:`~flight_storage.errors.InputFormatError` with code ``JSONParsingError`` (naming
    the record number and byte offset) for invalid JSON, a number outside the double range,
    ``NaN``/``Infinity`` literals or nesting too deep; ``InvalidTextEncoding`` for bytes that
    are not UTF-8. A scan range on DOCUMENT input is an ``InvalidRequestError``.

Byte ranges (LINES only)
    ``[start, stop)``, end exclusive, as every range inside the server (S3's inclusive ``End``
    is read once, by :func:`flight_storage.formats.scan_range.scan_bounds`). AWS's rule: a
    record belongs to the range in which its first byte lies; a record starting in the range
    is read to its end. Adjacent ranges therefore produce every record exactly once.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import pyarrow as pa

from flight_storage.errors import InputFormatError, InvalidRequestError
from flight_storage.formats.json_paths import PathEvaluator, row_selector, rows_split_over_arrays
from flight_storage.formats.json_values import new_decoder
from flight_storage.formats.record_size import text_over, text_size, too_long
from flight_storage.formats.scan_range import iter_span_bytes, record_span
from select_dialect.flavors import CEPH_READING, ReadingRules

JSON_TYPES: Final = ("DOCUMENT", "LINES")

_READ_BLOCK: Final = 1 << 20
# A decode error this close to the end of the buffer may only mean the value continues in
# the next block (the longest token the decoder backs up over is a \uXXXX escape).
_TRUNCATION_WINDOW: Final = 64
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
# Last characters after which a value cannot go on in the next block.
_CLOSED_VALUE_END: Final = frozenset('}]"')
# Characters that may continue a number (or follow a prefix of one) in the next block.
_NUMBER_TAIL: Final = re.compile(r"[0-9.eE+-]*")


@dataclass(frozen=True)
class JsonInputOptions:
    """How to read a JSON object (the AWS ``InputSerialization.JSON`` element).

    Attributes:
        type: ``"DOCUMENT"`` (a stream of JSON values of any layout) or ``"LINES"`` (one
            value per line; splittable by byte ranges).
    """

    type: str = "DOCUMENT"

    @classmethod
    def from_request(cls, json: Mapping[str, str] | None) -> JsonInputOptions:
        """Build options from the request's ``JSON`` dict.

        Args:
            json: e.g. ``{"Type": "LINES"}``; None or a missing ``Type`` means DOCUMENT.

        Returns:
            The options.

        Raises:
            InvalidRequestError: code ``InvalidJsonType`` for a ``Type`` other than
                DOCUMENT or LINES (case-insensitive).

        Example:
            >>> JsonInputOptions.from_request({"Type": "lines"}).type
            'LINES'
        """
        raw = (json or {}).get("Type") or "DOCUMENT"
        json_type = str(raw).strip().upper()
        if json_type not in JSON_TYPES:
            raise InvalidRequestError(
                f"JSON Type must be DOCUMENT or LINES, not {raw!r}", code="InvalidJsonType"
            )
        return cls(type=json_type)


def iter_json_batches(
    source: BinaryIO,
    options: JsonInputOptions,
    *,
    from_path: Sequence[tuple[Any, ...]],
    paths: Mapping[str, Sequence[tuple[Any, ...]]],
    reading: ReadingRules = CEPH_READING,
    byte_range: tuple[int, int] | None = None,
    batch_rows: int = 8192,
    max_record_size: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Read JSON rows and yield the JSON text at each path as Utf8 columns.

    Args:
        source: the (decompressed) object, read sequentially; seekable when a byte range is
            given (as :func:`~flight_storage.formats.csv_input.iter_csv_batches` has it).
        options: DOCUMENT or LINES.
        from_path: steps of ``FROM s3object[*]...`` after ``s3object[*]`` (empty for
            ``s3object[*]``); selects the rows (module docstring).
        paths: column name -> steps under the row; ``()`` is the whole row.
        reading: the flavour's reading rules (``json_partiql_rows``: how ``from_path``
            selects rows).
        byte_range: ``(start, stop)``, end exclusive: the lines whose first byte lies in
            ``[start, stop)``; LINES only.
        batch_rows: maximum rows per batch.
        max_record_size: longest record in bytes (AWS: 1 MiB), a LINES line or a DOCUMENT
            value (an element of a top-level array read element by element); None for no
            limit.

    Yields:
        Record batches with one nullable Utf8 column per entry of ``paths``, in order.

    Raises:
        InputFormatError: ``JSONParsingError``, ``InvalidTextEncoding`` or
            ``OverMaxRecordSize``.
        InvalidRequestError: a byte range with DOCUMENT input.
        ValueError: a malformed step or ``batch_rows < 1``.

    Example:
        >>> import io
        >>> data = io.BytesIO(b'{"a": {"B": [1, 2]}}\\n{"a": 3}\\n')
        >>> batch = next(iter_json_batches(data, JsonInputOptions("LINES"), from_path=(),
        ...                                paths={"x": (("key", "a"), ("key", "b"))}))
        >>> batch.column(0).to_pylist()
        ['[1,2]', None]
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be positive, not {batch_rows}")
    select_rows = row_selector(reading.json_partiql_rows, from_path)
    evaluate = PathEvaluator(paths)
    schema = pa.schema([pa.field(name, pa.string(), nullable=True) for name in paths])
    if options.type == "LINES":
        documents = _line_documents(source, byte_range, max_record_size)
    elif byte_range is not None:
        raise InvalidRequestError(
            "a scan range is supported only for CSV and JSON LINES input",
            code="InvalidRequest",
        )
    else:
        documents = _stream_documents(
            source, max_record_size, split_arrays=rows_split_over_arrays(reading.json_partiql_rows, from_path)
        )
    return _batches(documents, select_rows, evaluate, schema, batch_rows)



# ----------------------------------------------------------------------------- batches


def _batches(
    documents: Iterator[tuple[Any, int]],
    select_rows: Callable[[Any], list[Any]],
    evaluate: PathEvaluator,
    schema: pa.Schema,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    pending: list[list[str | None]] = []
    for document, record in documents:
        try:
            pending.extend(map(evaluate, select_rows(document)))
        except (ValueError, RecursionError) as exc:
            raise InputFormatError(
                f"JSON record {record}: {exc}", code="JSONParsingError", row=record
            ) from exc
        while len(pending) >= batch_rows:
            yield _to_batch(pending[:batch_rows], schema)
            del pending[:batch_rows]
    if pending:
        yield _to_batch(pending, schema)


def _to_batch(rows: list[list[str | None]], schema: pa.Schema) -> pa.RecordBatch:
    if not schema:
        return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([])))
    columns = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=pa.string()) for column in columns], schema=schema
    )


def _parsing_error(message: str, *, record: int, offset: int) -> InputFormatError:
    return InputFormatError(
        f"invalid JSON in record {record} at byte offset {offset}: {message}",
        code="JSONParsingError",
        row=record,
        offset=offset,
    )


def _encoding_error(offset: int) -> InputFormatError:
    return InputFormatError(
        f"the object is not valid UTF-8 (byte offset {offset})",
        code="InvalidTextEncoding",
        offset=offset,
    )


# ----------------------------------------------------------------------------- LINES


def line_blocks(
    source: BinaryIO, byte_range: tuple[int, int] | None
) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` blocks of whole lines, as LINES input reads them (the object's, or
    those starting in ``byte_range``): what a reader of JSON Lines that is not this module's
    reads (``formats/json_lines_arrow.py``)."""
    return _line_blocks(source, byte_range)


def _line_blocks(
    source: BinaryIO, byte_range: tuple[int, int] | None
) -> Iterator[tuple[int, bytes]]:
    """``(offset, bytes)`` blocks of whole lines: the object's, or those whose first byte lies
    in ``byte_range`` (:mod:`flight_storage.formats.scan_range`'s rule, which reads the range
    from a seekable ``source``)."""
    base = 0
    blocks: Iterator[bytes] = iter(lambda: source.read(_READ_BLOCK), b"")
    if byte_range is not None:
        span = record_span(source, b"\n", *byte_range, block_size=_READ_BLOCK)
        if span is None:
            return
        base = span[0]
        blocks = iter_span_bytes(source, *span, block_size=_READ_BLOCK)
    pending: list[bytes] = []  # the pieces of the line the blocks so far leave unfinished
    for block in blocks:
        cut = block.rfind(b"\n") + 1
        if not cut:
            pending.append(block)
            continue
        lines = b"".join([*pending, block[:cut]]) if pending else block[:cut]
        yield base, lines
        base += len(lines)
        pending = [block[cut:]] if cut < len(block) else []
    if pending:
        yield base, b"".join(pending)


def _line_documents(
    source: BinaryIO, byte_range: tuple[int, int] | None, max_record_size: int | None = None
) -> Iterator[tuple[Any, int]]:
    decoder = new_decoder()
    # The scanner alone parses a value at an index (no whitespace skipping, no checks):
    # a line it does not fully consume takes the slow, checking path below.
    scan_once = decoder.scan_once  # type: ignore[attr-defined]
    record = 0
    for base, block in _line_blocks(source, byte_range):
        skip = len(_UTF8_BOM) if base == 0 and block.startswith(_UTF8_BOM) else 0
        try:
            text = block[skip:].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _encoding_error(base + skip + exc.start) from exc
        for number, line in enumerate(text.split("\n")):
            if not line:
                continue
            if text_over(line, max_record_size):
                assert max_record_size is not None
                raise too_long(max_record_size, record=record + 1,
                               offset=base + _line_offset(block, skip, number),
                               named_offset=True)
            try:
                value, end = scan_once(line, 0)
            except (StopIteration, ValueError, RecursionError):
                end = -1
            if end != len(line):
                if _WHITESPACE.fullmatch(line):
                    continue
                try:
                    value = decoder.decode(line)
                except (ValueError, RecursionError) as exc:
                    offset = base + _line_offset(block, skip, number)
                    raise _line_error(exc, line, record + 1, offset) from exc
            record += 1
            yield value, record


def _line_error(
    exc: ValueError | RecursionError, line: str, record: int, offset: int
) -> InputFormatError:
    """The error for a line the full decoder rejected; ``offset`` is where the line starts."""
    if isinstance(exc, json.JSONDecodeError):
        at = offset + len(line[: exc.pos].encode())
        return _parsing_error(exc.msg, record=record, offset=at)
    return _parsing_error(str(exc) or type(exc).__name__, record=record, offset=offset)


def _line_offset(block: bytes, skip: int, number: int) -> int:
    """Byte offset in ``block`` of line ``number`` (only computed for error messages)."""
    position = skip
    for _ in range(number):
        position = block.index(b"\n", position) + 1
    return position


# ----------------------------------------------------------------------------- DOCUMENT


class _TextStream:
    """Incrementally decoded UTF-8 text with the byte offset of what was consumed."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.bytes_read = 0
        self.eof = False
        self.first = True

    def read(self, size: int) -> str:
        data = self.source.read(size)
        self.eof = not data
        if self.first and data:
            # A BOM can only be judged once three bytes are in hand.
            while len(data) < len(_UTF8_BOM) and not self.eof:
                more = self.source.read(size)
                self.eof = not more
                data += more
            if data.startswith(_UTF8_BOM):
                data = data[len(_UTF8_BOM) :]
                self.bytes_read += len(_UTF8_BOM)
            self.first = False
        pending = len(self.decoder.getstate()[0])
        try:
            text = self.decoder.decode(data, final=self.eof)
        except UnicodeDecodeError as exc:
            raise _encoding_error(self.bytes_read - pending + exc.start) from exc
        self.bytes_read += len(data)
        return text


# Inside a top-level array that is read element by element: what may come next.
_FIRST_ELEMENT, _NEXT_ELEMENT, _SEPARATOR = "first element", "element", "separator"


def _stream_documents(  # noqa: C901 - one resumable loop over shared parse state; see below
    source: BinaryIO, max_record_size: int | None = None, split_arrays: bool = False
) -> Iterator[tuple[Any, int]]:
    """Yield each top-level JSON value of the object with its 1-based record number.

    With ``split_arrays``, a top-level array is read element by element: each element is
    yielded on its own under the array's record number (the caller's row selection must give
    the same rows for the elements one by one as for the whole array). No value held in
    memory is longer than ``max_record_size`` bytes (``OverMaxRecordSize``).

    The loop's checks are in helpers; what is left (13 > 10) moves the buffer, position,
    record and array state together, which a split would only do through a reader object.
    """
    raw_decode = new_decoder().raw_decode
    stream = _TextStream(source)
    buffer = ""
    position = 0
    consumed = 0  # bytes before buffer[0]
    record = 0
    array_state: str | None = None  # inside a split top-level array: what may come next
    array_offset = 0  # byte offset of that array
    while True:
        position = _WHITESPACE.match(buffer, position).end()  # type: ignore[union-attr]
        need_more = position == len(buffer)
        if not need_more and array_state is not None:
            after = _array_punctuation(buffer, position, array_state, record, consumed)
            if after is not None:
                position += 1
                array_state = after or None
                continue
        elif not need_more and split_arrays and buffer[position] == "[":
            record += 1
            array_offset = consumed + text_size(buffer[:position])
            position += 1
            array_state = _FIRST_ELEMENT
            continue
        this_record = record if array_state is not None else record + 1
        if not need_more:
            try:
                value, end = raw_decode(buffer, position)
            except json.JSONDecodeError as exc:
                _check_truncated(exc, buffer, stream.eof, this_record, consumed)
                need_more = True
            except (ValueError, RecursionError) as exc:
                # Reported at the start of the record, as when the array is read whole.
                offset = (array_offset if array_state is not None
                          else consumed + text_size(buffer[:position]))
                raise _parsing_error(str(exc), record=this_record, offset=offset) from exc
            else:
                if _value_ended(buffer, end, stream.eof):
                    _check_record_size(buffer, position, end, max_record_size, this_record,
                                       consumed)
                    if array_state is None:
                        record += 1
                    else:
                        array_state = _SEPARATOR
                    yield value, record
                    position = end
                    continue
                need_more = True
        if stream.eof:
            _check_array_closed(buffer, array_state, record, consumed)
            return
        consumed += text_size(buffer[:position])
        buffer = buffer[position:]
        position = 0
        if text_over(buffer, max_record_size):
            assert max_record_size is not None
            raise too_long(max_record_size, record=this_record, offset=consumed,
                           named_offset=True)
        # Read at least as much as is buffered: a large document is re-parsed O(log n) times.
        buffer += stream.read(max(_READ_BLOCK, len(buffer)))


def _array_punctuation(buffer: str, position: int, array_state: str, record: int,
                       consumed: int) -> str | None:
    """Inside a split top-level array, the state after the ``,`` or ``]`` at ``position``
    ("" when the array ends there), or None when a value comes first.

    Raises:
        InputFormatError: ``JSONParsingError`` when that character is not the one expected.
    """
    char = buffer[position]
    if array_state == _SEPARATOR or (array_state == _FIRST_ELEMENT and char == "]"):
        if char not in ",]" or (array_state == _FIRST_ELEMENT and char == ","):
            offset = consumed + text_size(buffer[:position])
            raise _parsing_error("Expecting ',' delimiter", record=record, offset=offset)
        return "" if char == "]" else _NEXT_ELEMENT
    return None


def _check_array_closed(buffer: str, array_state: str | None, record: int,
                        consumed: int) -> None:
    """At the end of the object: a split top-level array must have been closed."""
    if array_state is not None:
        offset = consumed + text_size(buffer)
        expected = "',' delimiter" if array_state == _SEPARATOR else "value"
        raise _parsing_error(f"Expecting {expected}", record=record, offset=offset)


def _check_truncated(exc: json.JSONDecodeError, buffer: str, eof: bool, record: int,
                     consumed: int) -> None:
    """Raise the decoder's error unless more text may complete the value."""
    truncated = exc.pos >= len(buffer) - _TRUNCATION_WINDOW or exc.msg.startswith(
        "Unterminated string"
    )
    if eof or not truncated:
        offset = consumed + text_size(buffer[: exc.pos])
        raise _parsing_error(exc.msg, record=record, offset=offset) from exc


def _value_ended(buffer: str, end: int, eof: bool) -> bool:
    """Whether the value decoded up to ``end`` is whole.

    A number or literal may go on in the next block ("1" of "1.5e3", "0."): decided once a
    character that cannot continue a number follows it.
    """
    return (
        eof
        or buffer[end - 1] in _CLOSED_VALUE_END
        or _NUMBER_TAIL.match(buffer, end).end() < len(buffer)  # type: ignore[union-attr]
    )


def _check_record_size(buffer: str, position: int, end: int, max_record_size: int | None,
                       record: int, consumed: int) -> None:
    if text_over(buffer[position:end], max_record_size):
        assert max_record_size is not None
        offset = consumed + text_size(buffer[:position])
        raise too_long(max_record_size, record=record, offset=offset, named_offset=True)
