"""JSON text as S3 Select prints it: the one owner of writing JSON text.

Every JSON text the server writes is spelled here, so one value always gets one spelling:
compact separators, non-ASCII characters kept as they are (AWS and MinIO print UTF-8, not
``\\uXXXX``), only what JSON requires escaped (``"``, ``\\`` and the control characters), a
float as the shortest text that reads back (``repr``). Three callers: the JSON reader writes
the text of the values it decoded (:func:`decoded_text`, one cell per path per row), the output
writer the text of result values (:func:`dumps`: Parquet lists, structs and decimals) and the
``s3_json_quote`` UDF and JSON records quote strings (:func:`quote_strings`).

Hand-written only around the vectorised path: ``pyarrow.compute`` has no JSON encoder, so the
common case (no control characters) is two ``replace_substring`` calls, and the rare rows with
control characters go through the scalar encoder. The decoded values' containers go through
the C encoder of :mod:`json` built once (``JSONEncoder.encode`` builds one per call).
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

_CONTROL_CHARACTERS = "[\\x00-\\x1f]"
_OUT_OF_RANGE = "a number is outside the range of a double"

_string_text: Final[Callable[[str], str]] = json.encoder.encode_basestring  # type: ignore[attr-defined]
"""A string literal, non-ASCII kept (what ``json.dumps(s, ensure_ascii=False)`` writes)."""


def _finite_float_text(value: float) -> str:
    text = float.__repr__(value)
    if text[-1] in "nf":  # inf, nan: a literal beyond the double range
        raise ValueError(_OUT_OF_RANGE)
    return text


_SCALAR_TEXT: Final[Mapping[type, Callable[[Any], str]]] = {
    str: _string_text,
    int: int.__repr__,
    float: _finite_float_text,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _value: "null",
}
"""The text of each JSON scalar type (exact types: ``bool`` is not read as ``int``)."""

# No circular check (markers=None): decoded JSON cannot contain cycles. A dict subclass is
# written through its items(), so an object that keeps duplicate members writes them all.
_ENCODE_CONTAINER: Final = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, None, _string_text, None, ":", ",", False, False, False
)


def decoded_text(value: Any) -> str:
    """Compact JSON text of a value decoded from JSON (containers keep duplicate members).

    Raises:
        ValueError: a float beyond the range of a double.

    Example:
        >>> decoded_text({"é": [1, 2.5, None, "a\\"b"]})
        '{"é":[1,2.5,null,"a\\\\"b"]}'
    """
    scalar = _SCALAR_TEXT.get(type(value))
    if scalar is not None:
        return scalar(value)
    try:
        return "".join(_ENCODE_CONTAINER(value, 0))
    except ValueError as exc:
        raise ValueError(_OUT_OF_RANGE) from exc


def dumps(value: Any) -> str:
    """Compact JSON text of a result value, non-ASCII characters kept (``{"a":"é"}``); a
    :class:`~decimal.Decimal` (a Parquet decimal inside a list or struct) prints its exact
    digits at its scale, which :func:`json.dumps` cannot do (it refuses decimals); a float that
    is no number prints as :func:`json.dumps` writes it (``NaN``, ``Infinity``).

    Example:
        >>> dumps({"p": [decimal.Decimal("1.50"), None], "é": True})
        '{"p":[1.50,null],"é":true}'
    """
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        # json.dumps' own key text: strings as they are, other keys as their JSON text
        return "{" + ",".join(
            _leaf(key if isinstance(key, str) else _leaf(key)) + ":" + dumps(item)
            for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    return _leaf(value)


def _leaf(value: Any) -> str:
    scalar = _SCALAR_TEXT.get(type(value))
    if scalar is None or type(value) is float:  # other types, and NaN, as json.dumps has them
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return scalar(value)


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
        replacement = pa.array([_string_text(v) for v in rows], pa.string())
        quoted = pc.replace_with_mask(quoted, control, replacement)
    return quoted
