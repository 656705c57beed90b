"""JSON values as the reader decodes them, and the lookup of a member by name.

``MISSING`` is S3 Select's MISSING (an absent key, an index out of range, a step into a
scalar). An object with duplicate keys is a :class:`DupObject`: a lookup sees the last
duplicate, its text keeps every member in document order. A number with a fraction or an
exponent whose value is integral decodes as an int (``3.0`` -> ``3``, ``1E2`` -> ``100``), as
Ceph and MinIO print such doubles. The key lookups are the name rules of the path steps
(docs/architecture.md): ``key`` (any case, the last match), ``exact_key`` (a quoted name under
AWS's rules: its own case) and ``only_key`` (unquoted under AWS's rules: any case, and members
spelled differently that both match are ``AmbiguousFieldName``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from flight_storage.errors import QueryExecutionError


class Missing:
    """The MISSING value (absent key, index out of range, step into a scalar)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()


class DupObject(dict):  # type: ignore[type-arg]
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
    return obj if len(obj) == len(pairs) else DupObject(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# Integral floats below this magnitude become ints (exact in a double: 2**53).
_EXACT_INTEGRAL: Final = float(2**53)


def parse_float(text: str) -> float | int:
    """A JSON number with a fraction or exponent: an integral value is kept as an int
    (``3.0`` -> ``3``, ``1E2`` -> ``100``), as Ceph and MinIO print such doubles."""
    value = float(text)
    if value.is_integer() and -_EXACT_INTEGRAL < value < _EXACT_INTEGRAL:
        return int(value)
    return value


def new_decoder() -> json.JSONDecoder:
    return json.JSONDecoder(
        object_pairs_hook=_object_from_pairs,
        parse_constant=_reject_constant,
        parse_float=parse_float,
    )


def pairs(obj: dict[str, Any]) -> Iterable[tuple[str, Any]]:
    return obj.pairs if type(obj) is DupObject else obj.items()


def lowered_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """Keys lower-cased; of keys equal but for case (or duplicated), the last one wins."""
    if type(obj) is DupObject:
        return {key.lower(): value for key, value in obj.pairs}
    joined = "".join(obj)
    if joined.islower() or joined == joined.lower():
        return obj  # no upper-case key: the object is its own lower-cased view
    # Without duplicates, insertion order is document order, so later variants overwrite.
    return dict(zip(map(str.lower, obj), obj.values(), strict=True))



def _key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return lowered_keys(value).get(key, MISSING)
    return MISSING


def _exact_key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return dict.get(value, key, MISSING)  # a duplicated key: its last value
    return MISSING


def _only_key_lookup(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        lowered = lowered_keys(value)
        check_unambiguous(value, lowered, key)
        return lowered.get(key, MISSING)
    return MISSING


def check_unambiguous(value: dict[str, Any], lowered: dict[str, Any], key: str) -> None:
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


KEY_LOOKUPS: Final[Mapping[str, Callable[[Any, str], Any]]] = {
    "key": _key_lookup,
    "exact_key": _exact_key_lookup,
    "only_key": _only_key_lookup,
}


def index_lookup(value: Any, index: int) -> Any:
    if type(value) is list and 0 <= index < len(value):
        return value[index]
    return MISSING
