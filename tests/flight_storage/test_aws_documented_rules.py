"""AWS S3 Select's documented rules, one test each, citing where each rule is written
(issue #13, item 2).

Sources: the AWS SQL reference as published in awsdocs/amazon-s3-userguide (commit
``1774277b``), files ``doc_source/s3-glacier-select-sql-reference-select.md`` ("SELECT
command") and ``…-date.md`` ("Date functions"); the S3 API reference for SelectObjectContent
errors; where AWS is silent, MinIO (``internal/s3select/sql/statement.go``) as recorded in the
conformance README. A rule the engine does not follow yet is a strict xfail naming the cause.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flight_storage.errors import ObjectNotFoundError, StorageError
from flight_storage.execution.select_local import run_select
from flight_storage.storage.catalog import Catalog
from select_dialect import SelectDialectError

_JSON_LINES = {"JSON": {"Type": "LINES"}}
_CSV_HEADER = {"CSV": {"FileHeaderInfo": "USE"}}


def _records(data: bytes, sql: str, input_serialization: dict[str, Any], *,
             flavor: str = "aws", output: str = "JSON") -> str:
    return run_select(data, sql, input_serialization=input_serialization,
                      output_serialization={output: {}}, flavor=flavor).records.decode()


def _error_code(data: bytes, sql: str, input_serialization: dict[str, Any]) -> str:
    with pytest.raises((SelectDialectError, StorageError)) as info:
        _records(data, sql, input_serialization)
    return str(info.value.code)


# --------------------------------------------- SELECT command, "Case sensitivity of header/
# attribute names": without double quotes names are case-insensitive, with them
# case-sensitive; "an error is thrown in cases of ambiguity".


def test_unquoted_json_attribute_matches_any_case() -> None:
    assert _records(b'{"NAME":"x"}\n', "SELECT s.name FROM S3Object s", _JSON_LINES) == (
        '{"name":"x"}\n'
    )


def test_unquoted_csv_header_matches_any_case() -> None:
    assert _records(b"NAME,b\nx,y\n", "SELECT s.name FROM S3Object s", _CSV_HEADER) == (
        '{"name":"x"}\n'
    )


def test_quoted_csv_header_is_case_sensitive() -> None:
    """Example #1: header "NAME", ``s."name"`` is a 400 MissingHeaderName."""
    assert _error_code(b"NAME,b\nx,y\n", 'SELECT s."name" FROM S3Object s',
                       _CSV_HEADER) == "MissingHeaderName"


def test_two_csv_headers_differing_in_case_are_ambiguous_unquoted() -> None:
    """Example #2: headers "NAME" and "name", unquoted ``s.name`` is AmbiguousFieldName (the
    clients quote every name they send, so they never meet it)."""
    assert _error_code(b"NAME,name\nx,y\n", "SELECT s.name FROM S3Object s",
                       _CSV_HEADER) == "AmbiguousFieldName"
    assert _error_code(b"NAME,name\nx,y\n", "SELECT * FROM S3Object s WHERE s.Name = 'x'",
                       _CSV_HEADER) == "AmbiguousFieldName"


def test_ceph_takes_the_exact_header_over_its_case_variants() -> None:
    assert _records(b"NAME,name\nx,y\n", "SELECT s.name FROM S3Object s", _CSV_HEADER,
                    flavor="ceph", output="CSV") == "y\n"


def test_two_parquet_columns_differing_in_case_are_ambiguous_unquoted(tmp_path: Path) -> None:
    """The header rule for Parquet's column names: quoting picks one, bare is ambiguous."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"NAME": ["x"], "name": ["y"]}), path)
    parquet = {"Parquet": {}}
    assert _error_code(path.read_bytes(), "SELECT s.name FROM S3Object s",
                       parquet) == "AmbiguousFieldName"
    assert _records(path.read_bytes(), 'SELECT s."name" FROM S3Object s', parquet) == (
        '{"name":"y"}\n')
    with pytest.raises((SelectDialectError, StorageError)):
        _records(path.read_bytes(), 'SELECT s."Name" FROM S3Object s', parquet)


def test_quoting_resolves_the_csv_ambiguity() -> None:
    sql = 'SELECT s."NAME", s."name" FROM S3Object s'
    assert _records(b"NAME,name\nx,y\n", sql, _CSV_HEADER) == '{"NAME":"x","name":"y"}\n'


def test_quoted_json_attribute_is_case_sensitive() -> None:
    """Example #1 for JSON: attribute "NAME", ``s."name"`` does not name it. JSON has no
    header to be missing from: a path that reaches nothing is MISSING, printed as an empty
    record (FROM clause example #1 below)."""
    assert _records(b'{"NAME":"x"}\n', 'SELECT s."name" FROM S3Object s', _JSON_LINES) == "{}\n"
    assert _records(b'{"NAME":"x"}\n', 'SELECT s."NAME" FROM S3Object s', _JSON_LINES) == (
        '{"NAME":"x"}\n')


def test_two_json_attributes_differing_in_case_are_ambiguous_unquoted() -> None:
    """Example #2 for JSON: attributes "NAME" and "name", ``s.name`` is AmbiguousFieldName;
    quoting picks one, and a record without the variants is not ambiguous."""
    data = b'{"name":0}\n{"NAME":1,"name":2}\n'
    with pytest.raises(StorageError) as info:
        _records(data, "SELECT s.name FROM S3Object s", _JSON_LINES)
    assert info.value.code == "AmbiguousFieldName"
    with pytest.raises(StorageError) as info:  # a nested object's keys too
        _records(b'{"a":{"Name":1,"nAme":2}}\n', "SELECT s.a.name FROM S3Object s", _JSON_LINES)
    assert info.value.code == "AmbiguousFieldName"
    assert _records(data, 'SELECT s."name" FROM S3Object s', _JSON_LINES) == (
        '{"name":0}\n{"name":2}\n')
    assert _records(data, "SELECT s.name FROM S3Object s", _JSON_LINES, flavor="ceph",
                    output="CSV") == "0\n2\n"


# --------------------------------------------- SELECT command, "Using reserved keywords as
# user-defined terms": a header/attribute named like a keyword needs double quotes,
# "otherwise a 400 parse error will result".


def test_quoted_reserved_word_names_a_json_attribute() -> None:
    assert _records(b'{"CAST":1}\n', 'SELECT s."CAST" FROM S3Object s', _JSON_LINES) == (
        '{"CAST":1}\n'
    )


def test_quoted_reserved_word_names_a_csv_header() -> None:
    assert _records(b"CAST,b\n1,2\n", 'SELECT s."CAST" FROM S3Object s', _CSV_HEADER) == (
        '{"CAST":"1"}\n'
    )


def test_unquoted_reserved_word_is_a_parse_error() -> None:
    with pytest.raises(SelectDialectError) as info:
        _records(b'{"CAST":1}\n', "SELECT s.CAST FROM S3Object s", _JSON_LINES)
    assert (info.value.code, info.value.line, info.value.column) == (
        "ParseUnExpectedKeyword", 1, 10)
    assert '"CAST"' in info.value.message  # what to write instead


@pytest.mark.parametrize(("sql", "word", "line", "column"), [
    ("SELECT s.value FROM S3Object s", "value", 1, 10),          # a path step
    ("SELECT s.a AS first FROM S3Object s", "first", 1, 15),     # an alias
    ("SELECT s.a FROM S3Object s\nWHERE s.date > ''", "date", 2, 9),
    ("SELECT time FROM S3Object", "time", 1, 8),                 # a bare name
    ("SELECT s.year.x FROM S3Object s", "year", 1, 10),          # inside a path
])
def test_every_reserved_name_position_is_refused_with_where_it_stands(
        sql: str, word: str, line: int, column: int) -> None:
    with pytest.raises(SelectDialectError) as info:
        _records(b'{"a":1}\n', sql, _JSON_LINES)
    assert (info.value.code, info.value.offending, info.value.line, info.value.column) == (
        "ParseUnExpectedKeyword", word, line, column)


def test_keywords_in_their_own_places_are_no_names() -> None:
    """A date part opening DATE_ADD/DATE_DIFF, EXTRACT's part and MISSING are keywords where
    they stand, not names; quoted, a reserved word is a name."""
    sql = ("SELECT DATE_DIFF(day, TO_TIMESTAMP(s.t), DATE_ADD(month, 1, TO_TIMESTAMP(s.t))), "
           "EXTRACT(year FROM TO_TIMESTAMP(s.t)), s.\"value\" "
           "FROM S3Object s WHERE s.gone IS MISSING OR s.gone = MISSING")
    got = _records(b'{"t":"2024-01-31T00:00:00Z","value":1}\n', sql, _JSON_LINES, output="CSV")
    assert got == "29,2024,1\n"


@pytest.mark.parametrize("flavor", ["standard", "ceph"])
def test_other_flavours_take_reserved_words_as_names(flavor: str) -> None:
    """Only AWS refuses them: Ceph's grammar and MinIO accept ``value`` as a name, and so
    does ``standard`` (what a SQL user's column names need)."""
    got = _records(b'{"value":1}\n', "SELECT s.value FROM S3Object s", _JSON_LINES,
                   flavor=flavor, output="CSV")
    assert got == "1\n"


# --------------------------------------------- SELECT command, FROM clause example #1:
# a path that matches nothing is MISSING, "changed to an empty record during output
# serialization"; ``IS NOT MISSING`` filters it out.

_RULES = (b'{ "Rules": [ {"id": "1"}, {"expr": "y > x"}, {"id": "2", "expr": "z = DEBUG"} ]}\n'
          b'{ "created": "June 27", "modified": "July 6" }\n')


def test_missing_prints_as_an_empty_record() -> None:
    assert _records(_RULES, "SELECT id FROM S3Object[*].Rules[*].id", _JSON_LINES) == (
        '{"id":"1"}\n{}\n{"id":"2"}\n{}\n'
    )


def test_is_not_missing_drops_the_empty_records() -> None:
    sql = "SELECT id FROM S3Object[*].Rules[*].id WHERE id IS NOT MISSING"
    assert _records(_RULES, sql, _JSON_LINES) == '{"id":"1"}\n{"id":"2"}\n'


def test_missing_and_null_in_comparisons_and_tests() -> None:
    """MISSING and NULL both make a comparison unknown; IS NULL holds for both, IS MISSING
    only for the absent key (PartiQL, which the reference's MISSING follows)."""
    sql = ("SELECT (s.a IS NULL) AS an, (s.a IS MISSING) AS am, (s.a = 1) AS aeq, "
           "(s.b IS NULL) AS bn, (s.b IS MISSING) AS bm, (s.b = 1) AS beq FROM S3Object s")
    got = [json.loads(line) for line in _records(b'{"a":null}\n', sql, _JSON_LINES).split()]
    assert got == [{"an": True, "am": False, "aeq": None, "bn": True, "bm": True, "beq": None}]


def test_null_prints_as_json_null_and_missing_drops_the_key() -> None:
    """README "MinIO / AWS": JSON ``null`` for NULL, the key left out for MISSING."""
    assert _records(b'{"a":null}\n{"b":1}\n', "SELECT s.a, s.b FROM S3Object s",
                    _JSON_LINES) == '{"a":null}\n{"b":1}\n'


# --------------------------------------------- output column names: the alias, else the last
# key of a path, else ``_N`` for the N-th projection (SELECT command, attribute access
# examples ``{"project_name":"project1"}``; MinIO statement.go ``Eval``).


def test_output_names_alias_key_and_position() -> None:
    data = b'{"projects":[{"project_name":"p1"}],"arr":[5,6],"k":1}\n'
    sql = ("SELECT s.projects[0].project_name, s.k AS alias, s.arr[1], s.k + 1 "
           "FROM S3Object s")
    assert _records(data, sql, _JSON_LINES) == (
        '{"project_name":"p1","alias":1,"_3":6,"_4":2}\n'
    )


def test_output_names_of_json_attributes_from_the_reference() -> None:
    data = (b'{ "created": "936864000", "dir_name": "important_docs", "files": [ { "name": "." } ],'
            b' "owner": "AWS S3" }\n')
    sql = "SELECT _1.dir_name, _1.owner FROM S3Object[*]"
    assert _records(data, sql, _JSON_LINES) == (
        '{"dir_name":"important_docs","owner":"AWS S3"}\n'
    )


# --------------------------------------------- Date functions, DATE_ADD examples: "result
# will add precision as necessary", and otherwise keeps the precision written.

_DATE_ADD = [
    ("DATE_ADD(year, 5, `2010-01-01T`)", "2015-01-01T"),
    ("DATE_ADD(month, 1, `2010T`)", "2010-02T"),
    ("DATE_ADD(month, 13, `2010T`)", "2011-02T"),
    ("DATE_ADD(day, -1, `2017-01-10T`)", "2017-01-09T"),
    ("DATE_ADD(hour, 1, `2017T`)", "2017-01-01T01:00-00:00"),
    ("DATE_ADD(hour, 1, `2017-01-02T03:04Z`)", "2017-01-02T04:04Z"),
    ("DATE_ADD(minute, 1, `2017-01-02T03:04:05.006Z`)", "2017-01-02T03:05:05.006Z"),
    ("DATE_ADD(second, 1, `2017-01-02T03:04:05.006Z`)", "2017-01-02T03:04:06.006Z"),
    ("TO_TIMESTAMP('2007-02-23T12:14:33.079-08:00')", "2007-02-23T12:14:33.079-08:00"),
]


@pytest.mark.parametrize(("expression", "expected"), _DATE_ADD)
def test_timestamp_precision_through_date_add(expression: str, expected: str) -> None:
    got = _records(b"1\n", f"SELECT {expression} FROM S3Object", {"CSV": {}}, output="CSV")
    assert got == expected + "\n"


# --------------------------------------------- ragged CSV rows: ``SELECT *`` "returns every
# row that passed the WHERE clause, as-is" (SELECT list); Ceph reproduces the input's fields
# (README, "Ceph CSV parsing rules").

_RAGGED = b"a,b,c\n1\n1,2,3,4\n"


@pytest.mark.parametrize("flavor", ["ceph", "aws", "standard"])
def test_select_star_prints_ragged_rows_as_they_are(flavor: str) -> None:
    got = _records(_RAGGED, "SELECT * FROM S3Object", {"CSV": {}}, flavor=flavor, output="CSV")
    assert got == "a,b,c\n1\n1,2,3,4\n"


def test_ceph_select_star_prints_empty_fields_that_its_where_reads_as_null() -> None:
    """Ceph's own engine (s3select_example, checked by hand): ``select *`` prints ``1,,3``,
    ``4`` and the empty line as they are, and ``where _2 is null`` keeps exactly those three
    (an empty field is NULL, a missing one too); ``where _2 = ''`` keeps none."""
    data = b"1,,3\n4\n1,2,3,4\n\n5,6\n"
    assert _records(data, "SELECT * FROM S3Object", {"CSV": {}}, flavor="ceph",
                    output="CSV") == data.decode()
    assert _records(data, "SELECT * FROM S3Object WHERE _2 IS NULL", {"CSV": {}},
                    flavor="ceph", output="CSV") == "1,,3\n4\n\n"
    assert _records(data, "SELECT * FROM S3Object WHERE _2 = ''", {"CSV": {}},
                    flavor="ceph", output="CSV") == ""


def test_ceph_select_star_on_datafusions_reader_keeps_empty_fields() -> None:
    """Records of one width go to DataFusion's reader, which must keep the empty field too."""
    from flight_storage.execution.select_local import run_select

    data = b"1,,3\n4,5,6\n" * 3000
    result = run_select(data, "SELECT * FROM S3Object WHERE _2 IS NULL",
                        input_serialization={"CSV": {}}, output_serialization={"CSV": {}},
                        flavor="ceph")
    assert (result.reader, result.records) == ("datafusion", b"1,,3\n" * 3000)


@pytest.mark.parametrize("native", [True, False])
def test_select_star_gives_ragged_records_back_as_they_are_on_either_reader(native: bool) -> None:
    """Short, long and empty-field records: ``SELECT *`` to CSV prints the input back byte
    for byte with the native readers on or off (on, the survey sends records of several
    widths to the reference reader: empty and missing fields differ in this flavour)."""
    from flight_storage.execution.engine import EngineConfig
    from flight_storage.execution.select_local import run_select

    data = b"".join(b"%d,x,y\n%d\n%d,,\n" % (i, i, i) for i in range(3000))
    got = run_select(data, "SELECT * FROM S3Object", input_serialization={"CSV": {}},
                     output_serialization={"CSV": {}}, flavor="aws",
                     config=EngineConfig(native_readers=native)).records
    assert got == data


@pytest.mark.parametrize(("flavor", "expected"), [("aws", "c\n\n3\n"), ("ceph", "c\nnull\n3\n")])
def test_a_column_a_row_lacks_is_null(flavor: str, expected: str) -> None:
    """README: "A non-existent column ``_100`` is NULL" (printed per flavour)."""
    got = _records(_RAGGED, "SELECT _3 FROM S3Object", {"CSV": {}}, flavor=flavor, output="CSV")
    assert got == expected


# --------------------------------------------- quoted identifiers naming CSV header columns
# (SELECT command, attribute access "Column Headers"; Ceph reads double quotes as a string).


def test_quoted_identifier_names_a_header_column_in_aws() -> None:
    sql = 'SELECT "first name", s."first name" FROM S3Object s'
    assert _records(b"first name,b\nx,y\n", sql, _CSV_HEADER, output="CSV") == "x,x\n"


def test_double_quotes_are_a_string_in_ceph() -> None:
    sql = 'SELECT "first name" FROM S3Object'
    got = _records(b"first name,b\nx,y\n", sql, _CSV_HEADER, flavor="ceph", output="CSV")
    assert got == "first name\n"


# --------------------------------------------- a missing object: SelectObjectContent answers
# NoSuchKey (S3 API reference, "Special errors").


def test_missing_object_is_no_such_key(tmp_path: Path) -> None:
    (tmp_path / "bucket").mkdir()
    with pytest.raises(ObjectNotFoundError) as info:
        Catalog(tmp_path).object("bucket", "absent.csv")
    assert info.value.code == "NoSuchKey"
