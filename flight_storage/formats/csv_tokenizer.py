"""The CSV tokenizer of the s3-select rules, and the vectorised split of whole records into
fields that calls it only for the records that need it.

:class:`Tokenizer` is the reference: it reads text by either rule set of
:class:`~select_dialect.flavors.ReadingRules` (``csv_quotes_anywhere``: Ceph's toggling
quotes, or RFC 4180 with lazy quotes; see :mod:`flight_storage.formats.csv_input`'s
docstring), records spanning lines included. :func:`lines_to_lists` splits records that hold
one line each: with ``pyarrow.compute`` where a record has no quote or escape character, by
Python's ``csv`` module where that reads a quoted record exactly as the lazy-quote rules do,
and by the tokenizer otherwise. The tests run every path on one generated corpus per flavour
and ask for the same fields (``tests/flight_storage/test_csv_paths.py``).

Hand-written: neither Python's ``csv`` module nor pyarrow reads Ceph's toggling quotes or the
lazy quotes of AWS/MinIO.
"""

from __future__ import annotations

import csv
import re

import pyarrow as pa
import pyarrow.compute as pc

from flight_storage.formats.csv_options import CsvInputOptions


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


class Tokenizer:
    """Splits text into records of fields following one rule set.

    ``tokenize(text, final)`` returns the complete records and how many characters they
    used; with ``final`` the text's tail is a record even without a record delimiter.
    :attr:`record_ends` then holds where each of those records ends in ``text`` (its record
    delimiter left out), so a caller can measure it. When ``split_records`` is False the
    caller has already split records and ``text`` is a single record.
    """

    def __init__(self, options: CsvInputOptions, split_records: bool) -> None:
        self.fd = options.field_delimiter
        self.rd = options.record_delimiter if split_records else None
        self.quote = options.quote
        self.escape = options.escape
        self.specials = _specials(options, split_records)
        self.rfc = not options.quotes_anywhere
        self.strict = options.unclosed_quote_error
        self.record_ends: list[int] = []

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
        self.record_ends = []
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
                i, in_quote = self._ceph_escape(text, j, in_quote, cur)
                continue
            if quote is not None and c == quote:
                in_quote = not in_quote
                i = j + 1
                continue
            if rd is not None and text.startswith(rd, j) and not in_quote:
                fields.append("".join(cur))
                rows.append(fields)
                self.record_ends.append(j)
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

    def _ceph_escape(self, text: str, j: int, in_quote: bool, cur: list[str]
                     ) -> tuple[int, bool]:
        """The escape character at ``j``: what it adds to ``cur``, and ``(next index,
        in_quote)`` after it."""
        quote, rd = self.quote, self.rd
        if self.escape == quote:  # inside quotes "" is a literal quote, else it closes
            assert quote is not None  # the escape is set, so the quote it equals is too
            if text.startswith(quote, j + 1):
                cur.append(quote)
                return j + 2, in_quote
            return j + 1, False
        nxt = j + 1
        if nxt < len(text) and not (rd is not None and text.startswith(rd, nxt)):
            cur.append(text[nxt])
            return nxt + 1, in_quote
        return nxt, in_quote

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
                self.record_ends.append(i)
                fields = []
                i = record_start = i + len(rd)
                continue
            i += len(fd)
            after_delimiter = True
        return self._rfc_end(rows, fields, after_delimiter, record_start, n, final)

    def _rfc_end(self, rows: list[list[str]], fields: list[str], after_delimiter: bool,
                 record_start: int, n: int, final: bool) -> tuple[list[list[str]], int]:
        """The rows at the end of the text: the last record's only when ``final``."""
        if after_delimiter:
            fields.append("")
        if not final:
            return rows, record_start
        if fields or self.rd is None:
            rows.append(fields or [""])
            self.record_ends.append(n)
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
            self.record_ends.append(n)
        return rows, n


def _needs_care_mask(lines: pa.Array, options: CsvInputOptions) -> pa.Array | None:
    mask = None
    for char in (options.quote, options.escape):
        if char:
            hit = pc.match_substring(lines, char)
            mask = hit if mask is None else pc.or_(mask, hit)
    return mask


def lines_to_lists(lines: pa.Array, options: CsvInputOptions) -> pa.ListArray:
    """Split each (complete, delimiter-free) record into its list of fields: vectorised where
    a record holds no quote or escape character, by :func:`split_records` where it does."""
    fast = pc.split_pattern(lines, options.field_delimiter)
    mask = _needs_care_mask(lines, options)
    if mask is None or not pc.any(mask).as_py():
        return fast
    careful_lines = pc.filter(lines, mask).to_pylist()
    careful = pa.array(split_records(careful_lines, options), type=fast.type)
    positions = pa.array(range(len(lines)), pa.int64())
    replacement = pa.array(range(len(lines), len(lines) + len(careful)), pa.int64())
    indices = pc.replace_with_mask(positions, mask, replacement)
    return pc.take(pa.concat_arrays([fast, careful]), indices)


def _split_toggling_quotes(record: str, fd: str, quote: str) -> list[str]:
    """Ceph's rules for a record without escape characters: quotes toggle, then vanish."""
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


def _lazy_quotes_well_formed(options: CsvInputOptions) -> re.Pattern[str] | None:
    """A record pattern for which Python's ``csv`` module equals the lazy-quote rules."""
    fd, quote = options.field_delimiter, options.quote
    if len(fd) != 1 or quote is None or options.escape not in (quote, None) or fd == quote:
        return None
    q, d = re.escape(quote), re.escape(fd)
    dq = f"{q}{q}" if options.escape == quote else "(?!)"
    field = f"(?:{q}(?:[^{q}\\r\\n]|{dq})*{q}|[^{q}{d}\\r\\n]*)"
    return re.compile(f"{field}(?:{d}{field})*")


def split_records(records: list[str], options: CsvInputOptions) -> list[list[str]]:
    """Fields of whole records (one line each) that contain quote or escape characters."""
    tokenizer = Tokenizer(options, split_records=False)
    fd, quote, escape = options.field_delimiter, options.quote, options.escape
    if options.quotes_anywhere:
        return [
            _split_toggling_quotes(r, fd, quote)
            if quote is not None and (escape is None or escape not in r)
            else tokenizer.tokenize(r, True)[0][0]
            for r in records
        ]
    pattern = _lazy_quotes_well_formed(options)
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
