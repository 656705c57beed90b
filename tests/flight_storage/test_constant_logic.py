"""Boolean constants inside AND/OR/NOT over the reference readers.

DataFusion hands a WHERE clause to the reference readers' dataset as a pyarrow expression built
with ``&``/``|``/``~``; a literal on the left of one (``pa.BooleanScalar & Expression``) failed the
query with a Python TypeError (found by the differential fuzzer). The lowering folds boolean
constants with three-valued logic, so these answer as SQL says.
"""

from __future__ import annotations

import pytest

from flight_storage.execution.select_local import run_select

DATA = b'{"price": 1}\n{"price": null}\n{"other": 2}\n'

# (WHERE clause, rows counted in the aws flavour): price IS NULL holds for the 2nd and 3rd
# records (a missing key is NULL there); price = 1 only for the first.
CASES = [
    ("(NULL = NULL) AND s.price IS NULL", 0),
    ("s.price IS NULL AND (NULL = NULL)", 0),
    ("NOT (NULL = NULL) AND s.price IS NULL", 0),
    ("(NULL = NULL) OR s.price = 1", 1),
    ("(1 = 1) OR s.price = 1", 3),
    ("(1 = 2) OR s.price = 1", 1),
    ("(1 = 2) AND s.price IS NULL", 0),
    ("(1 = 1) AND s.price IS NULL", 2),
    ("NOT (1 = 2) AND s.price IS NULL", 2),
    ("NOT ((NULL = NULL) AND s.price = 1)", 0),  # NULL AND x is never TRUE here
]


@pytest.mark.parametrize(("where", "expected"), CASES)
def test_boolean_constants_in_a_json_filter(where: str, expected: int) -> None:
    result = run_select(DATA, f"SELECT COUNT(*) FROM S3Object[*] s WHERE {where}",
                        input_serialization={"JSON": {"Type": "LINES"}},
                        output_serialization={"JSON": {}}, flavor="aws")
    assert result.records == f'{{"_1":{expected}}}\n'.encode()
