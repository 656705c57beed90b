"""The one rule of a record's size, ``OverMaxRecordSize``: every reader measures with it.

A record is as long as its bytes without the record delimiter that ends it: a CSV record's
fields with their delimiters and quotes (however it was tokenized), a JSON Lines line, a JSON
document's value (AWS: "The maximum length of a record in the input or result is 1 MB"). The
CSV readers (the reference reader's vectorised and tokenizer paths, the survey that lets
DataFusion read an object) and the JSON reader measure here and raise :func:`too_long`.

Hand-written: the rule is S3's; numpy and ``bytes.rfind`` do the scanning.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from flight_storage.errors import InputFormatError

DEFAULT_MAX_RECORD_SIZE: Final = 1024 * 1024
"""AWS's limit: 1 MiB."""


def text_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (counted without encoding when it is ASCII)."""
    return len(text) if text.isascii() else len(text.encode())


def text_over(text: str, limit: int | None) -> bool:
    """True when ``text`` (one record, its delimiter left out) is longer than ``limit`` bytes
    (None: no limit); exact, and cheap below a quarter of the limit (4 bytes a character at
    most)."""
    return limit is not None and len(text) * 4 > limit and text_size(text) > limit


def long_lines(lengths: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the lines (their byte lengths without the line end) longer than ``limit``."""
    return np.flatnonzero(lengths > limit)


def first_long_line(data: bytes, limit: int) -> int | None:
    """Byte offset in ``data`` of the first ``\\n``-terminated line (the last may lack its line
    feed) longer than ``limit`` bytes without its line feed, or None: found by looking for a
    line feed within every ``limit + 1`` bytes, no line split out."""
    start = 0
    while len(data) - start > limit:
        end = data.rfind(b"\n", start, start + limit + 1)
        if end == -1:
            return start
        start = end + 1
    return None


def too_long(limit: int, *, record: int | None = None, offset: int | None = None,
             named_offset: bool = False) -> InputFormatError:
    """The error of a record over ``limit`` bytes: record ``record`` (1-based), or the one at
    byte ``offset`` when its number is unknown; ``named_offset``: the message names the offset
    too (a reader that knows where the record starts; the CSV reader knows its block's).

    Example:
        >>> too_long(10, record=3, offset=40).message
        'record 3 is longer than the maximum record size (10 bytes)'
        >>> too_long(10, record=3, offset=40, named_offset=True).message
        'record 3 at byte offset 40 is longer than the maximum record size (10 bytes)'
    """
    if record is None:
        where = f"the record at byte offset {offset}"
    elif named_offset and offset is not None:
        where = f"record {record} at byte offset {offset}"
    else:
        where = f"record {record}"
    return InputFormatError(
        f"{where} is longer than the maximum record size ({limit} bytes)",
        code="OverMaxRecordSize",
        offset=offset,
        row=record,
    )
