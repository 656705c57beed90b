"""Byte ranges of line-oriented objects (CSV, JSON Lines) aligned to whole records, and the
one owner of S3's ``ScanRange`` semantics.

AWS's rule for ``ScanRange``: a record belongs to the range in which its **first byte** lies;
``Start``/``End`` may fall anywhere (inside a record, inside a quoted field, inside a
multi-byte UTF-8 character). A record that starts in the range is read to its end even past
``End``. Splitting an object into adjacent ranges therefore reads every record exactly once.

One range convention inside the server: ``[start, stop)``, end exclusive, as in partition
tickets and DataFusion's file ranges. S3's ``ScanRange`` has an inclusive ``End`` and
shorthand forms; :func:`requested_scan_range` and :func:`scan_bounds` are the only places
that read it, and everything after them sees ``[start, stop)``.

Where records start:

* plain mode (``quote=None``): every occurrence of the record delimiter ends a record (Ceph's
  CSV rule, AWS's with ``AllowQuotedRecordDelimiter`` FALSE, JSON Lines). A record start is
  found locally by looking at the bytes just before ``start``.
* quote-aware mode (``quote`` given): a delimiter between an odd number of quote characters
  belongs to a field. Whether a position is inside quotes depends on everything before it,
  so the object is scanned from byte 0 (counting quote characters only).

A record starts at byte 0 and right after each delimiter, except at the end of the object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from flight_storage.errors import InvalidRequestError

DEFAULT_BLOCK_SIZE = 4 * 1024 * 1024


def requested_scan_range(start: int | None, end: int | None, size: int
                         ) -> tuple[int, int] | None:
    """S3's ``ScanRange`` as sent (``End`` inclusive; either may be absent) on an object of
    ``size`` bytes, as an inclusive ``(start, end)``; None when neither was sent.

    S3's rules: Start only reads from Start to the end; End only reads the **last** End
    bytes; both read Start..End.

    Example:
        >>> requested_scan_range(None, 10, 100), requested_scan_range(90, None, 100)
        ((90, 99), (90, 99))
    """
    if start is None and end is None:
        return None
    if start is None:
        assert end is not None
        return max(0, size - end), max(0, size - 1)
    return start, end if end is not None else max(size - 1, start)


def scan_bounds(scan_range: tuple[int, int], size: int) -> tuple[int, int]:
    """``[start, stop)`` of an inclusive S3 ``ScanRange`` on a ``size``-byte object.

    Raises:
        InvalidRequestError: ``InvalidScanRange`` for a reversed range or one starting past
            the end of a non-empty object.

    Example:
        >>> scan_bounds((10, 19), 15)
        (10, 15)
    """
    start, end = scan_range
    if not 0 <= start <= end:
        raise InvalidRequestError(f"invalid ScanRange {start}..{end}", code="InvalidScanRange")
    if start >= size > 0:
        raise InvalidRequestError(
            f"ScanRange starts at byte {start}, past the end of the {size}-byte object",
            code="InvalidScanRange",
        )
    return start, max(start, min(end + 1, size))


def _find_plain_start(source: BinaryIO, delimiter: bytes, start: int, block: int) -> int | None:
    """First record start at or after ``start`` (plain mode), or None when there is none."""
    if start == 0:
        return 0
    # A record starts at p when a delimiter ends just before p: look for the first
    # delimiter whose last byte is at position >= start - 1.
    pos = max(0, start - len(delimiter))
    source.seek(pos)
    window = b""
    while True:
        data = source.read(block)
        if not data:
            return None
        window += data
        index = window.find(delimiter)
        while index != -1:
            record_start = pos + index + len(delimiter)
            if record_start >= start:
                source.seek(record_start)
                if not source.read(1):
                    return None  # the delimiter ends the object: no record follows
                return record_start
            index = window.find(delimiter, index + 1)
        keep = len(delimiter) - 1
        pos += len(window) - keep
        window = window[len(window) - keep :] if keep else b""


class _QuoteScanner:
    """Tracks quote parity over a byte stream to find delimiters outside quotes: a delimiter
    after an even number of quotes (counted from byte 0) ends a record. One-byte delimiter and
    quote (the usual ``\n`` and ``"``) are found with numpy, about memory bandwidth; others
    by a loop over the tokens."""

    def __init__(self, delimiter: bytes, quote: bytes) -> None:
        self.delimiter = delimiter
        self.quote = quote
        self.in_quote = 0
        self.vectorised = len(delimiter) == 1 and len(quote) == 1 and delimiter != quote

    def boundaries(self, data: bytes, base: int) -> np.ndarray:
        """Absolute positions right after each delimiter outside quotes in ``data``, in order.

        ``data`` must start where the previous call's data ended (callers keep a partial
        delimiter or quote at the end of a block for the next call themselves).
        """
        if not self.vectorised:
            return np.array(list(self._loop(data, base)), dtype=np.int64)
        array = np.frombuffer(data, np.uint8)
        quotes = np.flatnonzero(array == self.quote[0])
        delimiters = np.flatnonzero(array == self.delimiter[0])
        before = np.searchsorted(quotes, delimiters) + self.in_quote
        self.in_quote = (self.in_quote + len(quotes)) % 2
        ends: np.ndarray = delimiters[before % 2 == 0] + (base + 1)
        return ends

    def _loop(self, data: bytes, base: int) -> Iterator[int]:
        quote, delim = self.quote, self.delimiter
        i = 0
        n = len(data)
        while i < n:
            if self.in_quote:
                j = data.find(quote, i)
                if j == -1:
                    return
                self.in_quote = 0
                i = j + len(quote)
                continue
            q = data.find(quote, i)
            d = data.find(delim, i)
            if d != -1 and (q == -1 or d < q):
                i = d + len(delim)
                yield base + i
            elif q != -1:
                self.in_quote = 1
                i = q + len(quote)
            else:
                return


def _safe_cut(data: bytes, tokens: tuple[bytes, ...]) -> int:
    """Length of the prefix of ``data`` that cannot end inside a partial token."""
    longest = max(len(t) for t in tokens)
    cut = len(data)
    for k in range(1, longest):
        tail = data[len(data) - k :] if k <= len(data) else data
        if any(t.startswith(tail) and len(t) > len(tail) for t in tokens):
            cut = len(data) - len(tail)
    return cut


def _iter_quoted_boundaries(
    source: BinaryIO, delimiter: bytes, quote: bytes, block: int
) -> Iterator[np.ndarray]:
    """Every record start after 0 (quote-aware), scanning from byte 0: one ascending array
    per block read."""
    scanner = _QuoteScanner(delimiter, quote)
    source.seek(0)
    pos = 0
    pending = b""
    while True:
        data = source.read(block)
        if not data:
            break
        buf = pending + data
        cut = _safe_cut(buf, (delimiter, quote))
        yield scanner.boundaries(buf[:cut], pos)
        pos += cut
        pending = buf[cut:]
    if pending:
        yield scanner.boundaries(pending, pos)


def iter_range_bytes(
    source: BinaryIO,
    record_delimiter: bytes,
    start: int,
    stop: int,
    *,
    quote: bytes | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Iterator[bytes]:
    """Yield the bytes of exactly the records whose first byte lies in ``[start, stop)``.

    The yielded blocks, concatenated, are the object's bytes from the first record start
    ``>= start`` up to the first record start ``>= stop`` (or the end of the object). A block
    boundary may fall anywhere; the caller splits records itself.

    Args:
        source: a seekable binary stream of the whole object.
        record_delimiter: the record delimiter as bytes (may be several bytes).
        start: first byte of the range.
        stop: one past the last byte of the range.
        quote: when given, delimiters inside quotes do not end records (quote-aware mode,
            which scans the object from its first byte).
        block_size: bytes read per step.

    Example:
        >>> import io
        >>> b"".join(iter_range_bytes(io.BytesIO(b"ab\\ncd\\nef\\n"), b"\\n", 1, 4))
        b'cd\\n'
    """
    span = record_span(source, record_delimiter, start, stop, quote=quote,
                       block_size=block_size)
    if span is not None:
        yield from iter_span_bytes(source, *span, block_size=block_size)


def record_span(
    source: BinaryIO,
    record_delimiter: bytes,
    start: int,
    stop: int,
    *,
    quote: bytes | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> tuple[int, int | None] | None:
    """``(first, after)``: the bytes of the records whose first byte lies in ``[start,
    stop)`` are ``[first, after)`` (``after`` None: to the end of the object); None when no
    record starts in the range. Arguments as :func:`iter_range_bytes`.

    Example:
        >>> import io
        >>> record_span(io.BytesIO(b"ab\\ncd\\nef\\n"), b"\\n", 1, 4)
        (3, 6)
    """
    if not record_delimiter:
        raise ValueError("record delimiter must not be empty")
    if stop <= start:
        return None
    end = stop - 1  # the last byte of the range
    if quote:
        first, after = _quoted_span(source, record_delimiter, quote, start, end, block_size)
    else:
        first = _find_plain_start(source, record_delimiter, start, block_size)
        if first is None or first > end:
            return None
        after = _find_plain_stop(source, record_delimiter, end, block_size)
    if first is None or first > end:
        return None
    return first, after


def _find_plain_stop(source: BinaryIO, delimiter: bytes, end: int, block: int) -> int | None:
    """First record start ``> end`` in plain mode (None: the end of the object)."""
    return _find_plain_start(source, delimiter, end + 1, block)


def _quoted_span(
    source: BinaryIO, delimiter: bytes, quote: bytes, start: int, end: int, block: int
) -> tuple[int | None, int | None]:
    first: int | None = 0 if start == 0 else None
    for boundaries in _iter_quoted_boundaries(source, delimiter, quote, block):
        if first is None:
            at = int(np.searchsorted(boundaries, start))
            if at < len(boundaries):
                first = int(boundaries[at])
        past = int(np.searchsorted(boundaries, end, side="right"))
        if past < len(boundaries):
            return first, int(boundaries[past])
    return first, None


def iter_span_bytes(source: BinaryIO, first: int, stop: int | None, *,
                    block_size: int = DEFAULT_BLOCK_SIZE) -> Iterator[bytes]:
    """The bytes ``[first, stop)`` of ``source`` (``stop`` None: to its end) in blocks of at
    most ``block_size`` bytes."""
    block = block_size
    source.seek(first)
    remaining = None if stop is None else stop - first
    while remaining is None or remaining > 0:
        data = source.read(block if remaining is None else min(block, remaining))
        if not data:
            return
        if remaining is not None:
            remaining -= len(data)
        yield data
