"""Table names: objects, prefix tables, bucket configuration, typed columns, WITH options."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flight_storage.errors import InputFormatError, InvalidRequestError, ObjectNotFoundError
from flight_storage.execution.engine import EngineConfig, SelectEngine
from flight_storage.request.statement import split_table_reference
from flight_storage.request.tables import resolve_table
from flight_storage.storage.catalog import Catalog
from tests.flight_storage.test_server_support import write_bucket


def _rows(catalog: Catalog, key: str, sql: str, **engine: int) -> list[dict]:
    table = resolve_table(catalog, "b", key)
    eng = SelectEngine(EngineConfig(**engine))
    plan = eng.plan(sql, table.sources, table.input)
    return [row for batch in eng.execute_arrow(plan) for row in batch.to_pylist()]


def test_prefix_table_reads_every_object_in_key_order(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {"logs/a.csv": "1,x\n2,y\n", "logs/b.csv": "3,z\n",
                                 "logs/sub/c.csv": "4,w\n", "other.csv": "9,q\n"})
    rows = _rows(catalog, "logs/", "select _1 from s3object")
    assert [r["_1"] for r in rows] == ["1", "2", "3", "4"]


def test_prefix_table_partitions_group_small_objects(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {f"p/{i}.csv": f"{i},v\n" * 10 for i in range(5)})
    table = resolve_table(catalog, "b", "p/")
    plan = SelectEngine(EngineConfig(partition_bytes=45)).plan(
        "select _1 from s3object", table.sources, table.input)
    keys = [p.partition.keys for p in plan.partitions]
    assert [k for group in keys for k in group] == [f"b/p/{i}.csv" for i in range(5)]
    assert all(len(group) == 1 for group in keys)  # 40 bytes each, 45-byte partitions
    single = SelectEngine(EngineConfig()).plan("select _1 from s3object", table.sources,
                                               table.input)
    assert len(single.partitions) == 1


def test_prefix_mixing_formats_is_refused(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {"m/a.csv": "1\n", "m/b.ndjson": '{"a": 1}\n'})
    with pytest.raises(InvalidRequestError, match="mixes formats"):
        resolve_table(catalog, "b", "m/")


def test_empty_prefix_is_not_found(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {"m/a.csv": "1\n"})
    with pytest.raises(ObjectNotFoundError):
        resolve_table(catalog, "b", "nothing/")


def test_configured_columns_give_a_typed_table(tmp_path: Path) -> None:
    config = {"tables": [{"prefix": "t/", "InputSerialization": {"CSV": {"FileHeaderInfo": "USE"}},
                          "columns": [{"name": "id", "type": "int64"},
                                      {"name": "price", "type": "decimal(10,2)"},
                                      {"name": "at", "type": "timestamp"}]}]}
    catalog = write_bucket(tmp_path, {"t/a.csv": "id,price,at\n2,1.50,2024-01-01T00:00:00+02:00\n"
                                            "10,,2024-01-02T00:00:00Z\n"}, config)
    rows = _rows(catalog, "t/a.csv", "select id, price from s3object where id > 5")
    assert rows == [{"id": 10, "price": None}]
    rows = _rows(catalog, "t/a.csv", "select id from s3object where id < 5")
    assert rows == [{"id": 2}]


def test_configured_column_that_does_not_convert_fails_naming_line_and_column(
        tmp_path: Path) -> None:
    """The default (README, configuration reference): a field that does not convert fails the
    query that reads its column, naming the object, the line and the column."""
    config = {"tables": [{"prefix": "t/", "columns": [{"name": "id", "type": "int64"},
                                                      {"name": "name", "type": "string"}]}]}
    catalog = write_bucket(tmp_path, {"t/a.csv": "1,a\n2,b\nthree,c\n 4 ,d\n"}, config)
    with pytest.raises(InputFormatError) as info:
        _rows(catalog, "t/a.csv", "select id, name from s3object")
    assert info.value.code == "CastFailed"
    assert (info.value.line, info.value.column) == (3, 1)
    assert "b/t/a.csv: line 3, column 1 (id): 'three' is not a valid int64" in info.value.message
    assert "bad_values" in info.value.message
    # a query that does not read the column is not failed by it
    assert _rows(catalog, "t/a.csv", "select name from s3object") == [
        {"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}]


def test_configured_column_that_does_not_convert_is_null_when_configured(
        tmp_path: Path) -> None:
    """``"bad_values": "null"``: a bad field is NULL, so the other columns of its record still
    read, and the plan carries a warning naming the object, column and count."""
    config = {"tables": [{"prefix": "t/", "bad_values": "null",
                          "columns": [{"name": "id", "type": "int64"},
                                      {"name": "name", "type": "string"}]}]}
    catalog = write_bucket(tmp_path, {"t/a.csv": "1,a\n2,b\nthree,c\n 4 ,d\n"}, config)
    assert _rows(catalog, "t/a.csv", "select id, name from s3object") == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": None, "name": "c"},
        {"id": 4, "name": "d"}]
    table = resolve_table(catalog, "b", "t/a.csv")
    plan = SelectEngine(EngineConfig()).plan("select id from s3object", table.sources,
                                             table.input)
    assert plan.warnings == (
        "b/t/a.csv: 1 value of column 1 (id) is not a valid int64 (e.g. 'three'); read as NULL",)


def test_columns_type_json_lines_and_are_refused_on_a_json_document(tmp_path: Path) -> None:
    config = {"tables": [{"prefix": "", "columns": [{"name": "id", "type": "int64"}]}]}
    catalog = write_bucket(tmp_path, {"a.ndjson": '{"id": 1}\n', "a.csv": "1\n",
                                      "a.json": '{"id": 1}'}, config)
    assert resolve_table(catalog, "b", "a.csv").input.columns is not None
    assert resolve_table(catalog, "b", "a.ndjson").input.columns is not None
    with pytest.raises(InvalidRequestError, match=re.escape("'columns' in b/.flight-select.json")):
        resolve_table(catalog, "b", "a.json")


def test_with_options_set_input_serialization() -> None:
    reference, sql = split_table_reference(
        "SELECT s._1 FROM \"b\".\"x.txt\" WITH (FileHeaderInfo = 'IGNORE', "
        "FieldDelimiter = ';', CompressionType = 'GZIP') s WHERE s._2 = 'a'"
    )
    assert reference is not None
    assert reference.input_serialization == {
        "CSV": {"FileHeaderInfo": "IGNORE", "FieldDelimiter": ";"}, "CompressionType": "GZIP"}
    assert len(sql) == len("SELECT s._1 FROM \"b\".\"x.txt\" WITH (FileHeaderInfo = 'IGNORE', "
                           "FieldDelimiter = ';', CompressionType = 'GZIP') s WHERE s._2 = 'a'")
    assert "WITH" not in sql and sql.rstrip().endswith("s WHERE s._2 = 'a'")


@pytest.mark.parametrize(("sql", "key"), [
    ('SELECT "o/a.csv".x FROM "o/a.csv" WHERE x = 1', "o/a.csv"),
    ("SELECT * FROM orders o WHERE o._1 = '1'", "orders"),
    ("SELECT * FROM events WITH (Format = 'CSV')", "events"),
])
def test_one_part_name_is_an_unqualified_reference(sql: str, key: str) -> None:
    reference, rewritten = split_table_reference(sql)
    assert reference is not None and not reference.qualified and reference.key == key
    # names of at least five characters keep later columns where written (docs/server.md)
    assert len(rewritten) == len(sql) and "stdin" in rewritten
    assert reference.names("b", f"schema/{key}") and reference.names("b", f"{key}/")
    assert not reference.names("b", f"x{key}")


@pytest.mark.parametrize("sql", ["SELECT * FROM s3object s", "SELECT * FROM stdin",
                                 "SELECT * FROM S3Object[*].a", "SELECT 1"])
def test_s3_select_names_are_no_table_reference(sql: str) -> None:
    assert split_table_reference(sql) == (None, sql)


def test_with_options_override_the_bucket_configuration(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {"d/a.csv": "x;y\n1;2\n"},
                      {"tables": [{"prefix": "d/", "InputSerialization": {
                          "CSV": {"FileHeaderInfo": "USE"}}}]})
    reference, sql = split_table_reference(
        "SELECT y FROM \"b\".\"d/a.csv\" WITH (FieldDelimiter = ';')")
    assert reference is not None
    table = resolve_table(catalog, "b", reference.key, reference.input_serialization)
    assert table.input.options == {"FileHeaderInfo": "USE", "FieldDelimiter": ";"}
    engine = SelectEngine()
    plan = engine.plan(sql, table.sources, table.input)
    assert [r for b in engine.execute_arrow(plan) for r in b.to_pylist()] == [{"y": "2"}]


@pytest.mark.parametrize("text", [
    "SELECT * FROM \"b\".\"k\" WITH (Nope = 'x')",
    "SELECT * FROM \"b\".\"k\" WITH (FieldDelimiter)",
    "SELECT * FROM \"b\".\"k\" WITH (Format = 'xml')",
    "SELECT * FROM \"b\".\"k\" WITH (FieldDelimiter = ','",
])
def test_bad_with_options_are_clear_errors(text: str) -> None:
    with pytest.raises(InvalidRequestError):
        split_table_reference(text)


def test_list_page_pages_in_key_order(tmp_path: Path) -> None:
    catalog = write_bucket(tmp_path, {f"in/{i:02d}.csv": "1\n" for i in range(7)} | {"x.csv": "1\n"})
    first = catalog.list_page("b", "in/", "", 3)
    assert [o.key for o in first.objects] == ["in/00.csv", "in/01.csv", "in/02.csv"]
    assert first.next_start_after == "in/02.csv"
    last = catalog.list_page("b", "in/", "in/04.csv", 3)
    assert [o.key for o in last.objects] == ["in/05.csv", "in/06.csv"]
    assert last.next_start_after is None


@pytest.mark.parametrize("config, message", [
    ({"tables": [{"prefix": "t/", "colums": []}]}, "unknown key 'colums' in a table"),
    ({"table": []}, "unknown key 'table' in the document"),
    ({"tables": {"prefix": ""}}, "'tables' must be a list"),
    ({"tables": [{"InputSerialization": {}}]}, "needs a 'prefix'"),
    ({"tables": [{"prefix": "", "InputSerialization": "CSV"}]}, "must be a JSON object"),
    ({"tables": [{"prefix": "", "columns": []}]}, "must be a non-empty list"),
    ({"tables": [{"prefix": "", "columns": [{"name": "a", "typ": "int64"}]}]},
     "unknown key 'typ' in a column of table ''"),
    ({"tables": [{"prefix": "", "columns": [{"type": "int64"}]}]}, "needs a 'name'"),
    (["tables"], "the document must be a JSON object"),
])
def test_bad_bucket_configuration_is_refused_naming_the_key(
    tmp_path: Path, config: object, message: str
) -> None:
    catalog = write_bucket(tmp_path, {"t/a.csv": "1\n"})
    (tmp_path / "b" / ".flight-select.json").write_text(json.dumps(config))
    with pytest.raises(InvalidRequestError, match=re.escape("b/.flight-select.json: invalid bucket")) as info:
        resolve_table(catalog, "b", "t/a.csv")
    assert message in info.value.message


def test_a_column_declared_twice_is_refused(tmp_path: Path) -> None:
    config = {"tables": [{"prefix": "", "columns": [{"name": "a"}, {"name": "a"}]}]}
    catalog = write_bucket(tmp_path, {"x.csv": "1,2\n"}, config)
    with pytest.raises(InvalidRequestError, match="column 'a' is declared more than once"):
        resolve_table(catalog, "b", "x.csv")
