"""One spelling of a JSON string (issue #13, item 4): the ``s3_json_quote`` UDF, JSON
records and nested values all quote through :mod:`flight_storage.formats.json_text`.

Before, a row holding a control character went through ``json.dumps`` with ASCII escaping
(``"\\u00e9\\tx"``) while its neighbours kept UTF-8 (``"é"``)."""

from __future__ import annotations

import pyarrow as pa

from flight_storage.execution.select_local import run_select
from flight_storage.execution.udfs import json_quote
from flight_storage.formats.json_text import dumps, quote_strings

_VALUES = ["é", "é\tx", 'q"\\', None]


def test_quote_strings_keeps_non_ascii_in_every_row() -> None:
    assert quote_strings(pa.array(_VALUES)).to_pylist() == [
        '"é"', '"é\\tx"', '"q\\"\\\\"', None
    ]


def test_udf_and_writer_share_the_spelling() -> None:
    expected = [None if v is None else dumps(v) for v in _VALUES]
    assert json_quote(pa.array(_VALUES)).to_pylist() == expected


def test_json_array_of_strings_keeps_non_ascii_next_to_an_escape() -> None:
    data = '{"n":"É"}\n{"n":"É\\tx"}\n'.encode()
    result = run_select(
        data, "select [lower(s.n)] from s3object[*] s",
        input_serialization={"JSON": {"Type": "LINES"}}, output_serialization={"JSON": {}},
        flavor="aws",
    )
    assert result.records.decode() == '{"_1":["é"]}\n{"_1":["é\\tx"]}\n'
