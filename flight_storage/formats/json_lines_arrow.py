"""A typed JSON Lines table read by pyarrow's JSON parser straight from the bytes, where the
reference reader provably reads the same.

The reference path (:func:`~flight_storage.formats.json_input.iter_json_batches`, then
:func:`~flight_storage.formats.json_typed.typed_batch`) parses each line in Python; this one
hands a block of whole lines to ``pyarrow.json.read_json`` with the table's schema as its
explicit schema, about ten times faster. It takes a block only when every check below holds,
and otherwise stops (:func:`iter_arrow_lines` returns False) so that the caller's reference
reader reads the rest, errors included:

| check | why: where the reference reads otherwise |
|---|---|
| no column read is ``json`` or ``date`` | pyarrow cannot give a value's JSON text, nor read a date from a string |
| the block is valid UTF-8, without a byte-order mark | ``InvalidTextEncoding``; a BOM is skipped there |
| every line starts with ``{`` and ends with ``}`` (``\\r`` before the line end allowed), so no blank line and no line of two values | one row per non-blank line; two values on a line are ``JSONParsingError`` |
| no line is longer than the record limit | ``OverMaxRecordSize`` |
| no ``NaN`` or ``Infinity`` in the block | pyarrow accepts them in a key it ignores; the reference refuses them |
| pyarrow parses the block into exactly one row per line | anything pyarrow refuses (a value of another kind, a fraction in an ``int64``, duplicate keys, invalid JSON) is the reference's to convert or to report |

What pyarrow accepts under these checks it converts as ``typed_batch`` does (the same parser
and explicit types): strings unescaped, ``null`` and absent keys NULL, numbers exact or
refused, timestamps by the same ISO 8601 parser.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import BinaryIO, Final

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from flight_storage.formats.json_input import line_blocks
from flight_storage.formats.json_typed import JSON_TEXT
from flight_storage.formats.typed_columns import TypedColumns, arrow_type

_REFUSED_WORDS: Final = (b"NaN", b"Infinity")
_REFERENCE_TYPES: Final = frozenset({JSON_TEXT, "date"})
"""Column types only the reference path reads (the module's table)."""
_OPEN, _CLOSE, _CR, _LF = (ord(c) for c in "{}\r\n")


def arrow_reads(columns: TypedColumns, names: Sequence[str]) -> bool:
    """Whether :func:`iter_arrow_lines` can read the columns ``names`` at all."""
    return all(columns.types[columns.names.index(n)] not in _REFERENCE_TYPES for n in names)


def iter_arrow_lines(source: BinaryIO, columns: TypedColumns, names: Sequence[str], *,
                     byte_range: tuple[int, int] | None, max_record_size: int | None,
                     batch_rows: int) -> Generator[pa.RecordBatch, None, bool]:
    """Yield the columns ``names`` of the lines of ``source`` (those starting in
    ``byte_range``, the reference's rule) as typed batches, block by block, while each block
    passes the module's checks.

    Returns:
        True when every line was read; False at the first block that did not pass (nothing
        of it yielded): the reference reader reads from there.
    """
    schema = pa.schema([pa.field(n, arrow_type(columns.types[columns.names.index(n)]))
                        for n in names])
    for base, block in line_blocks(source, byte_range):
        table = _block(block, base, schema, max_record_size)
        if table is None:
            return False
        yield from table.to_batches(max_chunksize=batch_rows)
    return True


def _block(block: bytes, base: int, schema: pa.Schema, max_record_size: int | None
           ) -> pa.Table | None:
    """The block's rows, or None where a check fails."""
    if (base == 0 and block.startswith(b"\xef\xbb\xbf")) or any(
            word in block for word in _REFUSED_WORDS):
        return None
    lines = _line_count(block, max_record_size)
    if lines is None:
        return None
    try:
        pa.array([block], pa.binary()).cast(pa.string())  # validates UTF-8
        table = pa_json.read_json(
            pa.BufferReader(block),
            read_options=pa_json.ReadOptions(use_threads=False,
                                             block_size=max(len(block), 1 << 16)),
            parse_options=pa_json.ParseOptions(explicit_schema=schema,
                                               unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    return table if table.num_rows == lines else None


def _line_count(block: bytes, max_record_size: int | None) -> int | None:
    """Lines of the block when each is one ``{...}`` within the record limit, else None."""
    data = np.frombuffer(block, np.uint8)
    if not len(data):
        return 0
    ends = np.flatnonzero(data == _LF)
    if not len(ends) or ends[-1] != len(data) - 1:
        ends = np.append(ends, len(data))  # the object's last line has no line end
    starts = np.concatenate(([0], ends[:-1] + 1))
    if np.any(ends <= starts):
        return None  # an empty line
    last = ends - 1
    with_cr = data[last] == _CR
    last = np.where(with_cr, last - 1, last)
    if np.any(last < starts) or np.any(data[starts] != _OPEN) or np.any(data[last] != _CLOSE):
        return None
    if max_record_size is not None and int(np.max(ends - starts)) > max_record_size:
        return None
    return len(ends)
