"""A JSON Lines sample's columns and types (DuckDB's rules as a table), which JSON tables are
sniffed, once per object version, and the width limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.formats.json_sniff import sniff_json_lines
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.request.sniffing import TableSniffer
from flight_storage.request.tables import resolve_table
from flight_storage.storage.sources import BytesSource
from tests.flight_storage.test_server_support import write_bucket


@pytest.mark.parametrize("values, expected", [
    (["1", "-7", "null"], "int64"),
    (["1", "2.5"], "float64"),
    (["3.0"], "float64"),  # written as a double: DuckDB's DOUBLE
    (["1E2"], "float64"),
    (["true", "false"], "bool"),
    (['"a"', '"2024-08-16T20:29:54+02:00"'], "string"),
    (['"2024-08-16T20:29:54+02:00"', '"2024-08-16T20:29:54Z"', '"2024-08-16 20:29:54.5-05:30"'],
     "timestamp"),
    (['"2024-08-16 20:29:54"', '"2024-08-16T20:29"'], "timestamp"),
    (['"2024-08-16T20:29:54+02:00"', '"2024-08-16 20:29:54"'], "string"),  # DuckDB: VARCHAR
    (['"2024-08-16T20:29:54.1234567Z"'], "string"),  # nanoseconds: not what the reader takes
    (['"2024-08-16"', '"2023-01-31"'], "date"),
    (["null"], "string"),
    (['{"a": 1}'], "json"),
    (["[1, 2]"], "json"),
    (["1", '"x"'], "json"),
    (["true", "1"], "json"),
])
def test_a_keys_type_follows_its_sampled_values(values: list[str], expected: str) -> None:
    sample = "".join(f'{{"k": {v}}}\n' for v in values).encode()
    assert sniff_json_lines(sample).types == (expected,)


def test_columns_come_in_the_order_keys_first_appear() -> None:
    table = sniff_json_lines(b'{"b": 1, "a": 2}\n\n{"c": 3, "a": null}\n')
    assert table.names == ("b", "a", "c")
    assert table.sample_records == 2


@pytest.mark.parametrize("sample, reason", [
    (b"", "the object is empty"),
    (b"[1, 2]\n", "line 1 of the sample is not a JSON object"),
    (b'{"a": 1}\n{"a": \n', "line 2 of the sample is not one JSON value"),
    (b"{}\n", "the sample's objects have no keys"),
    (b'{"a": "\xff"}\n', "invalid UTF-8 in the sample"),
])
def test_an_unreadable_sample_says_why(sample: bytes, reason: str) -> None:
    assert sniff_json_lines(sample).reason == reason


def _columns(tmp_path: Path, files: dict[str, str], key: str,
             config: dict[str, object] | None = None, sniffer: TableSniffer | None = None
             ) -> list[tuple[str, str]] | None:
    catalog = write_bucket(tmp_path, files, config)
    table = resolve_table(catalog, "b", key, sniffer=sniffer or TableSniffer())
    columns = table.input.columns
    return None if columns is None else list(zip(columns.names, columns.types, strict=True))


def test_a_json_lines_object_is_sniffed_once_per_version(tmp_path: Path) -> None:
    sniffer = TableSniffer()
    assert _columns(tmp_path, {"t.jsonl": '{"id": 1}\n'}, "t.jsonl", sniffer=sniffer) == [
        ("id", "int64")]
    _columns(tmp_path, {}, "t.jsonl", sniffer=sniffer)
    assert sniffer.json.sniffs == 1
    (tmp_path / "b" / "t.jsonl").write_text('{"id": 1.5}\n')
    assert _columns(tmp_path, {}, "t.jsonl", sniffer=sniffer) == [("id", "float64")]
    assert sniffer.json.sniffs == 2


def test_which_json_tables_are_sniffed(tmp_path: Path) -> None:
    files = {"t.json": '{"id": 1}', "raw/t.jsonl": '{"id": 1}\n', "on/t.jsonl": '{"id": 1}\n',
             "odd.jsonl": "[1]\n"}
    config = {"tables": [{"prefix": "raw/"}, {"prefix": "on/", "sniff": True}]}
    write_bucket(tmp_path, files, config)
    assert _columns(tmp_path, {}, "t.json") is None  # a JSON document
    assert _columns(tmp_path, {}, "raw/t.jsonl") is None  # an entry without sniff
    assert _columns(tmp_path, {}, "on/t.jsonl") == [("id", "int64")]
    assert _columns(tmp_path, {}, "odd.jsonl") is None  # not objects: S3 Select's reading


def test_more_keys_than_max_columns_is_refused() -> None:
    columns = TypedColumns(tuple(f"k{i}" for i in range(5)), ("int64",) * 5)
    spec = InputSpec("json", options={"Type": "LINES"}, columns=columns)
    with pytest.raises(InvalidRequestError, match="limit is 3") as info:
        SelectEngine(EngineConfig(max_columns=3)).plan(
            "SELECT k0 FROM s3object", BytesSource(b'{"k0": 1}\n'), spec, flavor="standard")
    assert info.value.code == "TooManyColumns"
