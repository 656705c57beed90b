"""Which rows a JSON document holds (``FROM s3object[*].path``) and the JSON text at each of a
row's paths (one column per path the statement uses).

Rows follow the flavour's :attr:`~select_dialect.flavors.ReadingRules.json_partiql_rows`
(:mod:`flight_storage.formats.json_input` describes both rules); the paths of all columns
share one trie of closures, so a row is walked once whatever the number of columns. A path's
text is written by :func:`flight_storage.formats.json_text.decoded_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from flight_storage.formats.json_text import decoded_text
from flight_storage.formats.json_values import (
    KEY_LOOKUPS,
    MISSING,
    check_unambiguous,
    index_lookup,
    lowered_keys,
    pairs,
)


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
        _transparent_list_step(value, step, out)
    elif isinstance(value, dict):
        _transparent_object_step(value, step, out)
    elif kind == "any_index":
        out.append(value)


def _transparent_list_step(value: list[Any], step: tuple[Any, ...], out: list[Any]) -> None:
    kind = step[0]
    if kind == "index":
        if 0 <= step[1] < len(value):
            out.append(value[step[1]])
    elif kind == "any_index":
        out.extend(value)
    else:
        for element in value:
            _transparent_step(element, step, out)


def _transparent_object_step(value: dict[str, Any], step: tuple[Any, ...],
                             out: list[Any]) -> None:
    kind = step[0]
    if kind == "key":
        out.extend(member for key, member in pairs(value) if key.lower() == step[1])
    elif kind in _KEY_STEPS:
        member = KEY_LOOKUPS[kind](value, step[1])
        if member is not MISSING:
            out.append(member)
    elif kind == "any_key":
        out.extend(member for _, member in pairs(value))
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



def _partiql_step(value: Any, step: tuple[Any, ...], out: list[Any]) -> None:
    kind = step[0]
    if kind in _KEY_STEPS:
        out.append(KEY_LOOKUPS[kind](value, step[1]))
    elif kind == "index":
        out.append(index_lookup(value, step[1]))
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


def row_selector(partiql_rows: bool, from_path: Sequence[tuple[Any, ...]]
                  ) -> Callable[[Any], list[Any]]:
    select = _ROW_SELECTORS[partiql_rows]
    steps = tuple(_check_step(tuple(step)) for step in from_path)
    if not steps:
        return _whole_documents if partiql_rows else _flattened_documents
    return lambda document: select(document, steps)


def rows_split_over_arrays(partiql_rows: bool, from_path: Sequence[tuple[Any, ...]]) -> bool:
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
        return MISSING
    current = [value]
    for step in steps:
        reached: list[Any] = []
        kind = step[0]
        for item in current:
            if kind in _KEY_STEPS:
                found = KEY_LOOKUPS[kind](item, step[1])
            elif kind == "index":
                found = index_lookup(item, step[1])
            else:
                if kind == "any_index" and type(item) is list:
                    reached.extend(item)
                elif kind == "any_key" and isinstance(item, dict):
                    reached.extend(item.values())
                continue
            if found is not MISSING:
                reached.append(found)
        current = reached
    return current


_Visitor = Callable[[Any, list[Any]], None]


def _terminal_visitor(columns: tuple[int, ...]) -> _Visitor:
    if len(columns) == 1:
        (column,) = columns

        def visit_one(value: Any, texts: list[Any]) -> None:
            texts[column] = decoded_text(value)

        return visit_one

    def visit_many(value: Any, texts: list[Any]) -> None:
        text = decoded_text(value)
        for column in columns:
            texts[column] = text

    return visit_many


def _keys_visitor(children: tuple[tuple[tuple[str, str], _Visitor], ...]) -> _Visitor:
    folded = tuple((kind, key, child) for (kind, key), child in children if kind in _FOLDED_KEYS)
    exact = tuple((key, child) for (kind, key), child in children if kind == "exact_key")

    def visit(value: Any, texts: list[Any]) -> None:
        if isinstance(value, dict):
            if folded:
                lowered = lowered_keys(value)
                for kind, key, child in folded:
                    if kind == "only_key":
                        check_unambiguous(value, lowered, key)
                    member = lowered.get(key, MISSING)
                    if member is not MISSING:
                        child(member, texts)
            for key, child in exact:
                member = dict.get(value, key, MISSING)
                if member is not MISSING:
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
        if found is not MISSING:
            texts[column] = decoded_text(found)

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


class PathEvaluator:
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
            return [None if row is MISSING else decoded_text(row)]
        texts: list[str | None] = [None] * self.width
        if row is not MISSING and self.visit is not None:
            self.visit(row, texts)
        return texts
