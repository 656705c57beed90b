"""JSON text as S3 Select prints it: the one owner of JSON string quoting.

The ``s3_json_quote`` UDF (JSON values built inside a query) and the output writer (JSON
records) both quote strings here, so one string always gets one spelling: compact separators,
non-ASCII characters kept as they are (AWS and MinIO print UTF-8, not ``\\uXXXX``), and only
what JSON requires escaped (``"``, ``\\`` and the control characters).

Hand-written only around the vectorised path: ``pyarrow.compute`` has no JSON encoder, so the
common case (no control characters) is two ``replace_substring`` calls, and the rare rows with
control characters go through :func:`json.dumps` with the same settings.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_CONTROL_CHARACTERS = "[\\x00-\\x1f]"


def dumps(value: Any) -> str:
    """Compact JSON text of a Python value, non-ASCII characters kept (``{"a":"é"}``); a
    :class:`~decimal.Decimal` (a Parquet decimal inside a list or struct) prints its exact
    digits at its scale, which :func:`json.dumps` cannot do (it refuses decimals).

    Example:
        >>> dumps({"p": [decimal.Decimal("1.50"), None], "é": True})
        '{"p":[1.50,null],"é":true}'
    """
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        # json.dumps' own key text: strings as they are, other keys as their JSON text
        return "{" + ",".join(
            _dumps_leaf(key if isinstance(key, str) else _dumps_leaf(key)) + ":" + dumps(item)
            for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    return _dumps_leaf(value)


def _dumps_leaf(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def quote_strings(values: pa.Array) -> pa.Array:
    """Each Utf8 value as a JSON string literal (NULL stays NULL).

    Example:
        >>> quote_strings(pa.array(['a"b', "é\\n"])).to_pylist()
        ['"a\\\\"b"', '"é\\\\n"']
    """
    values = values.cast(pa.string())
    escaped = pc.replace_substring(values, "\\", "\\\\")
    escaped = pc.replace_substring(escaped, '"', '\\"')
    # the quotes as arrays: pyarrow broadcasts scalars here unreliably (see output.py, _lit)
    quote = pa.repeat(pa.scalar('"', pa.string()), len(values))
    quoted = pc.binary_join_element_wise(quote, escaped, quote, "")
    control = pc.fill_null(pc.match_substring_regex(values, _CONTROL_CHARACTERS), False)
    if pc.any(control).as_py():
        rows = pc.take(values, pc.indices_nonzero(control)).to_pylist()
        replacement = pa.array([dumps(v) for v in rows], pa.string())
        quoted = pc.replace_with_mask(quoted, control, replacement)
    return quoted
