"""JSON input (``InputSerialization.JSON``, DOCUMENT and LINES) as Arrow batches of JSON text.

The table ``s3object`` of a JSON query has one nullable Utf8 column per JSON path the query
uses (see docs/architecture.md). Each cell holds the compact JSON text of the value at that
path under the row (``1``, ``"abc"``, ``true``, ``null``, ``[1,2]``, ``{"a":1}``), or SQL NULL
when the path is MISSING (absent key, index out of range, a step into a scalar).

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import pyarrow as pa

from flight_storage.errors import InputFormatError, InvalidRequestError, QueryExecutionError
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
        source: the (decompressed) object, read sequentially; seeked when a byte range is
            given and it is seekable.
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
    select_rows = _row_selector(reading.json_partiql_rows, from_path)
    evaluate = _PathEvaluator(paths)
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
            source, max_record_size, split_arrays=_rows_split_over_arrays(reading.json_partiql_rows, from_path)
        )
    return _batches(documents, select_rows, evaluate, schema, batch_rows)


# ----------------------------------------------------------------------------- values


class _Missing:
    """The MISSING value (absent key, index out of range, step into a scalar)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Final = _Missing()


class _DupObject(dict):  # type: ignore[type-arg]
    """A JSON object with duplicate keys: lookups see the last value, ``items()`` all pairs.

    The C JSON encoder serializes a dict subclass through ``items()``, so the compact text
    keeps every member in document order.
    """

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return self.pairs


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    return obj if len(obj) == len(pairs) else _DupObject(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# Integral floats below this magnitude become ints (exact in a double: 2**53).
_EXACT_INTEGRAL: Final = float(2**53)


def _parse_float(text: str) -> float | int:
    """A JSON number with a fraction or exponent: an integral value is kept as an int
    (``3.0`` -> ``3``, ``1E2`` -> ``100``), as Ceph and MinIO print such doubles."""
    value = float(text)
    if value.is_integer() and -_EXACT_INTEGRAL < value < _EXACT_INTEGRAL:
        return int(value)
    return value


def _new_decoder() -> json.JSONDecoder:
    return json.JSONDecoder(
        object_pairs_hook=_object_from_pairs,
        parse_constant=_reject_constant,
        parse_float=_parse_float,
    )


def _pairs(obj: dict[str, Any]) -> Iterable[tuple[str, Any]]:
    return obj.pairs if type(obj) is _DupObject else obj.items()


def _lowered(obj: dict[str, Any]) -> dict[str, Any]:
    """Keys lower-cased; of keys equal but for case (or duplicated), the last one wins."""
    if type(obj) is _DupObject:
        return {key.lower(): value for key, value in obj.pairs}
    joined = "".join(obj)
    if joined.islower() or joined == joined.lower():
        return obj  # no upper-case key: the object is its own lower-cased view
    # Without duplicates, insertion order is document order, so later variants overwrite.
    return dict(zip(map(str.lower, obj), obj.values(), strict=True))


def _float_text(value: float) -> str:
    text = float.__repr__(value)
    if text[-1] in "nf":  # inf, nan: a literal beyond the double range
        raise ValueError("a number is outside the range of a double")
    return text


# Built once: JSONEncoder.encode would build a new C encoder on every call. No circular
# check (markers=None): decoded JSON cannot contain cycles.
_ENCODE_CONTAINER: Final = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, None, json.encoder.encode_basestring, None, ":", ",", False, False, False  # type: ignore[attr-defined]
)
_SCALAR_TEXT: Final[Mapping[type, Callable[[Any], str]]] = {
    str: json.encoder.encode_basestring,  # type: ignore[attr-defined]
    int: int.__repr__,
    float: _float_text,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def _text(value: Any) -> str:
    """Compact JSON text of a decoded value (containers keep duplicate members)."""
    scalar = _SCALAR_TEXT.get(type(value))
    if scalar is not None:
        return scalar(value)
    try:
        return "".join(_ENCODE_CONTAINER(value, 0))
    except ValueError as exc:
        raise ValueError("a number is outside the range of a double") from exc


# ----------------------------------------------------------------------------- rows


def _check_step(step: tuple[Any, ...]) -> tuple[Any, ...]:
    kind = step[0] if step else None
    arity = _STEP_ARITY.get(kind)  # type: ignore[arg-type]
    if arity is None or len(step) != arity:
        raise ValueError(f"malformed JSON path step {step!r}")
    if kind in _FOLDED_KEYS:
        return (kind, str(step[1]).lower())
    if kind == "exact_key":
        return (kind, str(step[1]))
    if kind == "index" and (not isinstance(step[1], int) or isinstance(step[1], bool)):
        raise ValueError(f"malformed JSON path step {step!r}")
    return tuple(step)


_STEP_ARITY: Final[Mapping[str, int]] = {
    "key": 2, "exact_key": 2, "only_key": 2, "index": 2, "any_index": 1, "any_key": 1,
}
_FOLDED_KEYS: Final = frozenset({"key", "only_key"})
_KEY_STEPS: Final = frozenset({"key", "exact_key", "only_key"})


def _transparent_step(value: Any, step: tuple[Any, ...], out: list[Any]) -> None:
    kind = step[0]
    if type(value) is list:
        if kind == "index":
            if 0 <= step[1] < len(value):
                out.append(value[step[1]])
        elif kind == "any_index":
            out.extend(value)
        else:
            for element in value:
                _transparent_step(element, step, out)
    elif isinstance(value, dict):
        if kind == "key":
            out.extend(member for key, member in _pairs(value) if key.lower() == step[1])
        elif kind in _KEY_STEPS:
            member = _KEY_LOOKUPS[kind](value, step[1])
            if member is not _MISSING:
                out.append(member)
        elif kind == "any_key":
            out.extend(member for _, member in _pairs(value))
        elif kind == "any_index":
            out.append(value)
    elif kind == "any_index":
        out.append(value)


def _flatten_into(value: Any, out: list[Any]) -> None:
    if type(value) is list:
        for element in value:
            _flatten_into(element, out)
    else:
        out.append(value)


def _transparent_rows(document: Any, steps: Sequence[tuple[Any, ...]]) -> list[Any]:
    current = [document]
    for step in steps:
        reached: list[Any] = []
        for value in current:
            _transparent_step(value, step, reached)
        current = reached
    rows: list[Any] = []
    for value in current:
        _flatten_into(value, rows)
    return rows


def _key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return _lowered(value).get(key, _MISSING)
    return _MISSING


def _exact_key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return dict.get(value, key, _MISSING)  # a duplicated key: its last value
    return _MISSING


def _only_key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        lowered = _lowered(value)
        _check_unambiguous(value, lowered, key)
        return lowered.get(key, _MISSING)
    return _MISSING


def _check_unambiguous(value: dict[str, Any], lowered: dict[str, Any], key: str) -> None:
    """Raise AmbiguousFieldName when members of ``value`` spelled differently match ``key``
    (folded). Cheap when no two members fold together: the folded view is as long."""
    if len(lowered) == dict.__len__(value):
        return
    spellings = sorted({name for name in dict.keys(value) if name.lower() == key})
    if len(spellings) > 1:
        raise QueryExecutionError(
            f"{key} is ambiguous: the object has the keys {', '.join(spellings)}, which differ "
            f'in case; quote the one you mean (a quoted name matches its own case), e.g. '
            f's3object."{spellings[0]}"',
            code="AmbiguousFieldName",
        )


_KEY_LOOKUPS: Final[Mapping[str, Callable[[Any, str], Any]]] = {
    "key": _key_lookup,
    "exact_key": _exact_key_lookup,
    "only_key": _only_key_lookup,
}


def _index_lookup(value: Any, index: int) -> Any:
    if type(value) is list and 0 <= index < len(value):
        return value[index]
    return _MISSING


def _partiql_step(value: Any, step: tuple[Any, ...], out: list[Any]) -> None:
    kind = step[0]
    if kind in _KEY_STEPS:
        out.append(_KEY_LOOKUPS[kind](value, step[1]))
    elif kind == "index":
        out.append(_index_lookup(value, step[1]))
    elif kind == "any_index" and type(value) is list:
        out.extend(value)
    elif kind == "any_key" and isinstance(value, dict):
        out.extend(value.values())
    else:
        out.append(value)


def _partiql_rows(document: Any, steps: Sequence[tuple[Any, ...]]) -> list[Any]:
    current = [document]
    for step in steps:
        reached: list[Any] = []
        for value in current:
            _partiql_step(value, step, reached)
        current = reached
    return current


_ROW_SELECTORS: Final[Mapping[bool, Callable[[Any, Sequence[tuple[Any, ...]]], list[Any]]]] = {
    False: _transparent_rows,
    True: _partiql_rows,
}
"""How ``from_path`` selects rows, by ``ReadingRules.json_partiql_rows``."""


def _whole_documents(document: Any) -> list[Any]:
    return [document]


def _flattened_documents(document: Any) -> list[Any]:
    if type(document) is not list:
        return [document]
    rows: list[Any] = []
    _flatten_into(document, rows)
    return rows


def _row_selector(partiql_rows: bool, from_path: Sequence[tuple[Any, ...]]
                  ) -> Callable[[Any], list[Any]]:
    select = _ROW_SELECTORS[partiql_rows]
    steps = tuple(_check_step(tuple(step)) for step in from_path)
    if not steps:
        return _whole_documents if partiql_rows else _flattened_documents
    return lambda document: select(document, steps)


def _rows_split_over_arrays(partiql_rows: bool, from_path: Sequence[tuple[Any, ...]]) -> bool:
    """Whether a top-level array's rows are the concatenation of its elements' rows.

    True where arrays are transparent (Ceph's rows) and the path starts with a step that
    passes through arrays (a key, ``*``) or is empty (arrays flattened): then DOCUMENT input
    is streamed element by element. ``[n]`` and ``[*]`` see the array as a whole, and with
    PartiQL rows a top-level array is one row.
    """
    return not partiql_rows and (not from_path or from_path[0][0] in ("key", "any_key"))


# ----------------------------------------------------------------------------- paths


_WILDCARDS: Final = frozenset({"any_index", "any_key"})


class _Node:
    """One step of the path trie: plain key/index children, wildcard tails, terminals."""

    __slots__ = ("indexes", "keys", "terminals", "wild")

    def __init__(self) -> None:
        self.terminals: list[int] = []
        self.keys: dict[tuple[str, str], _Node] = {}
        self.indexes: dict[int, _Node] = {}
        self.wild: list[tuple[tuple[tuple[Any, ...], ...], int]] = []


def _collect(value: Any, steps: tuple[tuple[Any, ...], ...]) -> Any:
    """Value of a path starting with a wildcard: a list of what it reaches, or MISSING."""
    first = steps[0][0]
    if (first == "any_index" and type(value) is not list) or (
        first == "any_key" and not isinstance(value, dict)
    ):
        return _MISSING
    current = [value]
    for step in steps:
        reached: list[Any] = []
        kind = step[0]
        for item in current:
            if kind in _KEY_STEPS:
                found = _KEY_LOOKUPS[kind](item, step[1])
            elif kind == "index":
                found = _index_lookup(item, step[1])
            else:
                if kind == "any_index" and type(item) is list:
                    reached.extend(item)
                elif kind == "any_key" and isinstance(item, dict):
                    reached.extend(item.values())
                continue
            if found is not _MISSING:
                reached.append(found)
        current = reached
    return current


_Visitor = Callable[[Any, list[Any]], None]


def _terminal_visitor(columns: tuple[int, ...]) -> _Visitor:
    if len(columns) == 1:
        (column,) = columns

        def visit_one(value: Any, texts: list[Any]) -> None:
            texts[column] = _text(value)

        return visit_one

    def visit_many(value: Any, texts: list[Any]) -> None:
        text = _text(value)
        for column in columns:
            texts[column] = text

    return visit_many


def _keys_visitor(children: tuple[tuple[tuple[str, str], _Visitor], ...]) -> _Visitor:
    folded = tuple((kind, key, child) for (kind, key), child in children if kind in _FOLDED_KEYS)
    exact = tuple((key, child) for (kind, key), child in children if kind == "exact_key")

    def visit(value: Any, texts: list[Any]) -> None:
        if isinstance(value, dict):
            if folded:
                lowered = _lowered(value)
                for kind, key, child in folded:
                    if kind == "only_key":
                        _check_unambiguous(value, lowered, key)
                    member = lowered.get(key, _MISSING)
                    if member is not _MISSING:
                        child(member, texts)
            for key, child in exact:
                member = dict.get(value, key, _MISSING)
                if member is not _MISSING:
                    child(member, texts)

    return visit


def _indexes_visitor(children: tuple[tuple[int, _Visitor], ...]) -> _Visitor:
    def visit(value: Any, texts: list[Any]) -> None:
        if type(value) is list:
            size = len(value)
            for index, child in children:
                if 0 <= index < size:
                    child(value[index], texts)

    return visit


def _wildcard_visitor(steps: tuple[tuple[Any, ...], ...], column: int) -> _Visitor:
    def visit(value: Any, texts: list[Any]) -> None:
        found = _collect(value, steps)
        if found is not _MISSING:
            texts[column] = _text(found)

    return visit


def _compile(node: _Node) -> _Visitor:
    """One closure per trie node, specialised to what the node holds."""
    parts: list[_Visitor] = []
    if node.terminals:
        parts.append(_terminal_visitor(tuple(node.terminals)))
    if node.keys:
        parts.append(_keys_visitor(tuple((k, _compile(c)) for k, c in node.keys.items())))
    if node.indexes:
        parts.append(_indexes_visitor(tuple((i, _compile(c)) for i, c in node.indexes.items())))
    parts.extend(_wildcard_visitor(steps, column) for steps, column in node.wild)
    if len(parts) == 1:
        return parts[0]

    def visit_all(value: Any, texts: list[Any]) -> None:
        for part in parts:
            part(value, texts)

    return visit_all


class _PathEvaluator:
    """Maps a row to the JSON text at each path (a trie shares common prefixes)."""

    def __init__(self, paths: Mapping[str, Sequence[tuple[Any, ...]]]) -> None:
        self.width = len(paths)
        root = _Node()
        for column, steps in enumerate(paths.values()):
            node = root
            checked = tuple(_check_step(tuple(step)) for step in steps)
            for position, step in enumerate(checked):
                if step[0] in _WILDCARDS:
                    node.wild.append((checked[position:], column))
                    break
                if step[0] in _KEY_STEPS:
                    node = node.keys.setdefault((step[0], step[1]), _Node())
                else:
                    node = node.indexes.setdefault(step[1], _Node())
            else:
                node.terminals.append(column)
        self.visit: _Visitor | None = _compile(root) if self.width else None
        self.whole_row_only = self.width == 1 and root.terminals == [0]

    def __call__(self, row: Any) -> list[str | None]:
        if self.whole_row_only:
            return [None if row is _MISSING else _text(row)]
        texts: list[str | None] = [None] * self.width
        if row is not _MISSING and self.visit is not None:
            self.visit(row, texts)
        return texts


# ----------------------------------------------------------------------------- batches


def _batches(
    documents: Iterator[tuple[Any, int]],
    select_rows: Callable[[Any], list[Any]],
    evaluate: _PathEvaluator,
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


def _skip_to(source: BinaryIO, position: int) -> bool:
    """Move ``source`` to ``position``; False when the object ends before it."""
    if position == 0:
        return True
    seekable = getattr(source, "seekable", None)
    if seekable is not None and seekable():
        source.seek(position)
        return True
    remaining = position
    while remaining:
        skipped = source.read(min(remaining, _READ_BLOCK))
        if not skipped:
            return False
        remaining -= len(skipped)
    return True


def _line_blocks(
    source: BinaryIO, byte_range: tuple[int, int] | None
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, bytes)`` blocks of whole lines whose first byte lies in the range."""
    start, stop = byte_range if byte_range is not None else (0, None)
    last = stop - 1 if stop is not None else None  # the range's last byte
    if start < 0 or (last is not None and last < start):
        return
    # Look at the byte before ``start``: a record starts at ``start`` only after a newline.
    base = start - 1 if start > 0 else 0
    if not _skip_to(source, base):
        return
    buffer = b""
    aligned = start == 0
    eof = False
    while not eof or buffer:
        if last is not None and base > last:
            return
        if not eof:
            data = source.read(max(_READ_BLOCK, len(buffer)))
            eof = not data
            buffer += data
        if not aligned:
            newline = buffer.find(b"\n")
            if newline < 0:
                base += len(buffer)
                buffer = b""
                continue
            base += newline + 1
            buffer = buffer[newline + 1 :]
            aligned = True
            if last is not None and base > last:
                return
        if last is not None and last - base < len(buffer):
            # The record holding byte ``last`` is the final one: read it to its end.
            cut = buffer.find(b"\n", max(last - base, 0))
            if cut >= 0 or eof:
                yield base, buffer if cut < 0 else buffer[: cut + 1]
                return
            continue
        cut = len(buffer) if eof else buffer.rfind(b"\n") + 1
        if cut:
            yield base, buffer[:cut]
            base += cut
            buffer = buffer[cut:]


def _line_documents(
    source: BinaryIO, byte_range: tuple[int, int] | None, max_record_size: int | None = None
) -> Iterator[tuple[Any, int]]:
    decoder = _new_decoder()
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
            if (max_record_size is not None and len(line) * 4 > max_record_size
                    and len(line.encode()) > max_record_size):
                raise InputFormatError(
                    f"record {record + 1} at byte offset "
                    f"{base + _line_offset(block, skip, number)} is longer than "
                    f"{max_record_size} bytes",
                    code="OverMaxRecordSize", row=record + 1,
                )
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


def _byte_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode())


def _over_limit(text: str, max_record_size: int | None) -> bool:
    # Four bytes per character at most: the exact count is taken only near the limit.
    return (max_record_size is not None and len(text) * 4 > max_record_size
            and _byte_length(text) > max_record_size)


def _record_too_long(record: int, offset: int, max_record_size: int | None) -> InputFormatError:
    return InputFormatError(
        f"record {record} at byte offset {offset} is longer than {max_record_size} bytes",
        code="OverMaxRecordSize", row=record, offset=offset,
    )


# Inside a top-level array that is read element by element: what may come next.
_FIRST_ELEMENT, _NEXT_ELEMENT, _SEPARATOR = "first element", "element", "separator"


def _stream_documents(
    source: BinaryIO, max_record_size: int | None = None, split_arrays: bool = False
) -> Iterator[tuple[Any, int]]:
    """Yield each top-level JSON value of the object with its 1-based record number.

    With ``split_arrays``, a top-level array is read element by element: each element is
    yielded on its own under the array's record number (the caller's row selection must give
    the same rows for the elements one by one as for the whole array). No value held in
    memory is longer than ``max_record_size`` bytes (``OverMaxRecordSize``).
    """
    raw_decode = _new_decoder().raw_decode
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
            char = buffer[position]
            if array_state == _SEPARATOR or (array_state == _FIRST_ELEMENT and char == "]"):
                if char not in ",]" or (array_state == _FIRST_ELEMENT and char == ","):
                    offset = consumed + _byte_length(buffer[:position])
                    raise _parsing_error("Expecting ',' delimiter", record=record, offset=offset)
                position += 1
                array_state = None if char == "]" else _NEXT_ELEMENT
                continue
        elif not need_more and split_arrays and buffer[position] == "[":
            record += 1
            array_offset = consumed + _byte_length(buffer[:position])
            position += 1
            array_state = _FIRST_ELEMENT
            continue
        this_record = record if array_state is not None else record + 1
        if not need_more:
            try:
                value, end = raw_decode(buffer, position)
            except json.JSONDecodeError as exc:
                truncated = exc.pos >= len(buffer) - _TRUNCATION_WINDOW or exc.msg.startswith(
                    "Unterminated string"
                )
                if stream.eof or not truncated:
                    offset = consumed + _byte_length(buffer[: exc.pos])
                    raise _parsing_error(exc.msg, record=this_record, offset=offset) from exc
                need_more = True
            except (ValueError, RecursionError) as exc:
                # Reported at the start of the record, as when the array is read whole.
                offset = (array_offset if array_state is not None
                          else consumed + _byte_length(buffer[:position]))
                raise _parsing_error(str(exc), record=this_record, offset=offset) from exc
            else:
                # A number or literal may go on in the next block ("1" of "1.5e3", "0."):
                # decided once a character that cannot continue a number follows it.
                if (
                    stream.eof
                    or buffer[end - 1] in _CLOSED_VALUE_END
                    or _NUMBER_TAIL.match(buffer, end).end() < len(buffer)  # type: ignore[union-attr]
                ):
                    if _over_limit(buffer[position:end], max_record_size):
                        offset = consumed + _byte_length(buffer[:position])
                        raise _record_too_long(this_record, offset, max_record_size)
                    if array_state is None:
                        record += 1
                    else:
                        array_state = _SEPARATOR
                    yield value, record
                    position = end
                    continue
                need_more = True
        if stream.eof:
            if array_state is not None:
                offset = consumed + _byte_length(buffer)
                expected = "',' delimiter" if array_state == _SEPARATOR else "value"
                raise _parsing_error(f"Expecting {expected}", record=record, offset=offset)
            return
        consumed += _byte_length(buffer[:position])
        buffer = buffer[position:]
        position = 0
        if _over_limit(buffer, max_record_size):
            raise _record_too_long(this_record, consumed, max_record_size)
        # Read at least as much as is buffered: a large document is re-parsed O(log n) times.
        buffer += stream.read(max(_READ_BLOCK, len(buffer)))
