"""Translator tests in the sqlglot style: one s3-select statement, its DataFusion SQL per target.

``validate_all(sql, write={target: expected})`` where a target is ``"<flavor>:<input format>"``
(``ceph:csv``, ``aws:json``, ...). ``expected`` is the exact DataFusion SQL, or an exception
class the translation must raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from select_dialect import QuerySemanticError, QuerySyntaxError, UnsupportedFeatureError, translate


def validate_all(sql: str, write: Mapping[str, str | type[Exception]], **options: Any) -> None:
    """Assert the translation of ``sql`` for every ``flavor:format`` target of ``write``."""
    for target, expected in write.items():
        flavor, input_format = target.split(":")
        if isinstance(expected, type):
            with pytest.raises(expected):
                translate(sql, input_format=input_format, flavor=flavor, **options)
            continue
        got = translate(sql, input_format=input_format, flavor=flavor, **options).sql
        assert got == expected, f"{target}: {got}"


def test_in_over_a_json_array_of_the_row() -> None:
    validate_all(
        "SELECT * FROM s3object s WHERE 'bar' IN s.synonyms[*]",
        write={
            "aws:json": 'SELECT "j0" AS "c0" FROM "s3object" WHERE s3_json_in(\'"bar"\', "j1")',
            "ceph:json": 'SELECT "j0" AS "c0" FROM "s3object" WHERE s3_json_in(\'"bar"\', "j1")',
            "aws:csv": UnsupportedFeatureError,
        },
    )
    t = translate("SELECT s.id FROM s3object s WHERE 8.5 IN s.nested[*][*]", input_format="json", flavor="aws")
    assert t.json_paths["j1"] == (("only_key", "nested"), ("any_index",), ("any_index",))
    assert "s3_json_in('8.5', \"j1\")" in t.sql


def test_tuple_and_array_literals_compare_structurally() -> None:
    equal = 'COALESCE(s3_json_equal(\'[7,8.5,9]\', "j1"), FALSE)'
    for sql in ("SELECT * FROM s3object s WHERE (7,8.5,9) = s.nested[1]",
                "SELECT * FROM s3object s WHERE [7,8.5,9] = s.nested[1]"):
        validate_all(sql, write={"aws:json": f'SELECT "j0" AS "c0" FROM "s3object" WHERE {equal}'})
    validate_all(
        "SELECT * FROM s3object s WHERE (7,8.5,9) != s.nested[1]",
        write={"aws:json": f'SELECT "j0" AS "c0" FROM "s3object" WHERE NOT {equal}'},
    )
    validate_all(
        "SELECT * FROM s3object s WHERE (1, 'a') < s.x",
        write={"aws:json": QuerySemanticError},
    )
    validate_all(
        "SELECT * FROM s3object s WHERE (s.a, 'x') IN s.pairs",
        write={
            "aws:json": 'SELECT "j0" AS "c0" FROM "s3object" WHERE '
            "s3_json_in(concat('[', COALESCE(\"j2\", 'null'), ',', COALESCE('\"x\"', 'null'), ']'), \"j1\")"
        },
    )


def test_in_list_of_arrays() -> None:
    validate_all(
        "SELECT * FROM s3object s WHERE s.a IN ([1,2], [3])",
        write={
            "aws:json": 'SELECT "j0" AS "c0" FROM "s3object" WHERE ((COALESCE(s3_json_equal("j1", \'[1,2]\'), '
            'FALSE)) OR (COALESCE(s3_json_equal("j1", \'[3]\'), FALSE)))'
        },
    )


# COUNT of a JSON path skips a JSON null (the text `null` in the path column)
_COUNT_J0 = 'count(CASE WHEN "j0" = \'null\' THEN CAST(NULL AS VARCHAR) ELSE "j0" END)'


def test_json_value_against_boolean_per_flavor() -> None:
    validate_all(
        "SELECT COUNT(id) AS n FROM s3object s WHERE v != true",
        write={
            # AWS/MinIO: 42 != true and "true" != true (different types are unequal).
            "aws:json": f'SELECT {_COUNT_J0} AS "c0" FROM "s3object" WHERE "j1" <> '
            "(CASE WHEN (TRUE) THEN 'true' ELSE 'false' END)",
            # Ceph: the value is read as a boolean.
            "ceph:json": f'SELECT {_COUNT_J0} AS "c0" FROM "s3object" WHERE '
            's3_string_to_bool(s3_json_to_string("j1")) <> (TRUE)',
        },
    )


def test_wildcard_paths_in_projections() -> None:
    t = translate("SELECT s.a[*].b FROM s3object s", input_format="json", flavor="aws")
    assert t.json_paths == {"j0": (("only_key", "a"), ("any_index",), ("only_key", "b"))}
    assert t.output_is_json == [True]
    t = translate('SELECT s."A"[*].b FROM s3object s', input_format="json", flavor="ceph")
    assert t.json_paths == {"j0": (("key", "A"), ("any_index",), ("key", "b"))}
    t = translate('SELECT s."A"[*].b FROM s3object s', input_format="json", flavor="standard")
    assert t.json_paths == {"j0": (("exact_key", "A"), ("any_index",), ("only_key", "b"))}


def test_from_path_starts_after_the_document_iterator() -> None:
    assert translate("select * from s3object[*].a.b", input_format="json").json_from_path == (
        ("key", "a"),
        ("key", "b"),
    )
    assert translate("select * from s3object", input_format="json").json_from_path == ()


def test_select_star_and_row_alias_are_records_on_json() -> None:
    for sql in ("SELECT * FROM s3object s", "SELECT s.* FROM s3object s"):
        t = translate(sql, input_format="json", flavor="aws")
        assert (t.row_as_record, t.output_names, t.json_paths) == (True, ["_1"], {"j0": ()})
    t = translate("SELECT s FROM s3object AS s", input_format="json", flavor="aws")
    assert (t.row_as_record, t.output_names) == (True, ["s"])
    # PartiQL: the last key of the FROM path names the row when there is no alias.
    t = translate("SELECT id FROM S3Object[*].Rules[*].id", input_format="json", flavor="aws")
    assert (t.row_as_record, t.output_names, t.json_paths) == (True, ["id"], {"j0": ()})
    assert not translate("SELECT * FROM s3object", input_format="csv").row_as_record
    with pytest.raises(QuerySemanticError):
        translate("SELECT t.* FROM s3object s", input_format="json", flavor="aws")


def test_ceph_add_and_version() -> None:
    validate_all(
        "select add(-5, 0.5), add(_1, 2) from stdin",
        write={"ceph:csv": 'SELECT (-5) + 0.5 AS "c0", (TRY_CAST(btrim("_1") AS DOUBLE)) + 2 AS "c1" FROM "s3object"'},
    )
    validate_all(
        "select version() from stdin",
        write={"ceph:csv": 'SELECT \'41.a\' AS "c0" FROM "s3object"', "aws:csv": UnsupportedFeatureError},
    )
    validate_all("select add(1) from stdin", write={"ceph:csv": QuerySemanticError})


def test_utcnow_zone_per_flavor() -> None:
    now = "date_trunc('second', now())"
    validate_all(
        "select utcnow() from s3object",
        write={
            "ceph:csv": f'SELECT s3_timestamp_from_utc({now}, 4) AS "c0" FROM "s3object"',
            "aws:csv": f'SELECT s3_timestamp_z({now}, 4) AS "c0" FROM "s3object"',
        },
    )


def test_alias_named_like_its_column_reads_the_column() -> None:
    # Inside its own definition the name is the input column (MinIO's lineitem test).
    t = translate(
        "SELECT DATE_ADD(day, 2, shipdate) AS shipdate FROM s3object",
        input_format="parquet",
        flavor="aws",
        columns=[__import__("select_dialect").Column("shipdate", "date")],
    )
    assert t.sql.count("s3_date_add") == 1
    assert 'CAST("shipdate" AS TIMESTAMP)' in t.sql


def test_alias_reused_in_where_and_projections() -> None:
    validate_all(
        "select int(_1) as a, a + 1 as b from s3object where a > 5",
        write={
            # the alias the WHERE clause reads is computed once per row, below the filter
            "ceph:csv": 'SELECT "__alias_0" AS "c0", "__alias_0" + 1 AS "c1" FROM (SELECT *, '
            'COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1")) AS "__alias_0" FROM "s3object") AS "s3object" '
            'WHERE "__alias_0" > 5'
        },
    )


@pytest.mark.parametrize(
    "sql",
    ["select a as b, b as a from s3object", "select a as a from s3object", "select b + 1 as a, a as b from s3object"],
)
def test_cyclic_aliases_are_rejected(sql: str) -> None:
    with pytest.raises(QuerySemanticError, match="cyclic reference to alias"):
        translate(sql, input_format="csv")


def test_ceph_syntax_errors_use_rgw_code_everywhere() -> None:
    for sql in ("select _1 from s3object limit -1", "select sum(1) from file.txt;", "select from"):
        with pytest.raises(QuerySyntaxError) as info:
            translate(sql, input_format="csv")
        assert info.value.code == "UnsupportedSyntax"
        with pytest.raises(QuerySyntaxError) as info:
            translate(sql, input_format="csv", flavor="aws")
        assert info.value.code.startswith("Parse")
