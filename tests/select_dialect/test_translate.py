"""Translation to DataFusion SQL (sqlglot-style validate helpers) and its errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from select_dialect import (
    Column,
    QuerySemanticError,
    QuerySyntaxError,
    UnsupportedFeatureError,
    like_to_regex,
    translate,
)


def validate(sql: str, expected: str, **options: object) -> None:
    """Assert the DataFusion SQL produced for ``sql``."""
    options.setdefault("input_format", "csv")
    assert translate(sql, **options).sql == expected  # type: ignore[arg-type]


def test_positional_columns_and_ceph_limit_counts_input_rows() -> None:
    validate(
        "select _2 from s3object where _1 = 'a' limit 3",
        'SELECT "_2" AS "c0" FROM (SELECT * FROM "s3object" LIMIT 3) AS "s3object" WHERE "_1" = \'a\'',
    )


def test_aws_limit_counts_output_rows() -> None:
    validate(
        "select _2 from s3object where _1 = 'a' limit 3",
        'SELECT "_2" AS "c0" FROM "s3object" WHERE "_1" = \'a\' LIMIT 3',
        flavor="aws",
    )


def test_ceph_double_quotes_are_strings_aws_identifiers() -> None:
    validate('select "true" from stdin', "SELECT 'true' AS \"c0\" FROM \"s3object\"")
    validate(
        'select s."CAST" from s3object s',
        'SELECT "_3" AS "c0" FROM "s3object"',
        flavor="aws",
        header=["na.me", "qty", "CAST"],
    )


def test_power_modulo_and_numeric_field_coercion() -> None:
    validate("select 2^3 from stdin", 'SELECT power(2, 3) AS "c0" FROM "s3object"')
    validate(
        "select _1 from stdin where _1 > 5",
        'SELECT "_1" AS "c0" FROM "s3object" WHERE (TRY_CAST(btrim("_1") AS DOUBLE)) > 5',
    )


def test_two_csv_fields_compare_as_text() -> None:
    validate("select _1 from stdin where _2 > _3", 'SELECT "_1" AS "c0" FROM "s3object" WHERE "_2" > "_3"')


def test_like_with_classes_becomes_regex() -> None:
    validate(
        'select count(0) from stdin where _1 like "%r[r-s]"',
        'SELECT count(*) AS "c0" FROM "s3object" WHERE regexp_like("_1", \'^(?s:.*r[r-s])$\')',
    )


def test_dynamic_like_pattern_uses_udf() -> None:
    validate(
        "select _1 from stdin where _1 like _2 escape '#'",
        'SELECT "_1" AS "c0" FROM "s3object" WHERE s3_like("_1", "_2", \'#\')',
    )


@pytest.mark.parametrize(
    ("pattern", "escape", "regex"),
    [
        ("abc$_defgh", "$", r"^(?s:abc_defgh)$"),
        ("%#_ai%", "#", r"^(?s:.*_ai.*)$"),
        ("a[^d-f]b", None, r"^(?s:a[^d-f]b)$"),
        ("a.b", None, r"^(?s:a\.b)$"),
        ("[x", None, r"^(?s:\[x)$"),
    ],
)
def test_like_to_regex(pattern: str, escape: str | None, regex: str) -> None:
    assert like_to_regex(pattern, escape) == regex


def test_aliases_are_expanded_and_reused() -> None:
    validate(
        "select int(_1) as a1, a1 + 1 as a2 from s3object",
        'SELECT COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1")) AS "c0", '
        '(COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1"))) + 1 AS "c1" FROM "s3object"',
    )


def test_aliases_read_by_where_are_computed_below_it() -> None:
    validate(
        "select int(_1) as a1, a1 + 1 as a2 from s3object where a2 > 3",
        'SELECT "__alias_0" AS "c0", "__alias_1" AS "c1" FROM (SELECT *, "__alias_0" + 1 AS '
        '"__alias_1" FROM (SELECT *, COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1")) AS "__alias_0" FROM "s3object") AS '
        '"s3object") AS "s3object" WHERE "__alias_1" > 3',
    )


def test_cyclic_alias_is_rejected() -> None:
    with pytest.raises(QuerySemanticError, match="cyclic reference to alias"):
        translate(
            "select int(_1) as a1,int(_2) as a2, a1+a4 as a3, a5+a1 as a4, int(_3)+a3 as a5 from s3object",
            input_format="csv",
        )


def test_alias_equal_to_header_column_is_rejected_in_ceph() -> None:
    with pytest.raises(QuerySemanticError, match=r"multiple definition of column \{c4\}"):
        translate("select int(c1)+int(c2) as c4,c4 from s3object", input_format="csv", header=["c1", "c2", "c3", "c4"])


def test_unknown_header_column() -> None:
    with pytest.raises(QuerySemanticError, match=r"alias \{c11\} or column not exist in schema"):
        translate("select c1,c10,int(c11) from s3object", input_format="csv", header=[f"c{i}" for i in range(1, 11)])


def test_header_names_resolve_to_positions() -> None:
    t = translate("select c2, c1 from s3object", input_format="csv", header=["c1", "c2"])
    assert t.sql == 'SELECT "_2" AS "c0", "_1" AS "c1" FROM "s3object"'
    assert t.output_names == ["c2", "c1"]
    assert t.max_positional == 2


def test_string_arithmetic_is_an_error() -> None:
    with pytest.raises(QuerySemanticError, match="illegal binary operation with string"):
        translate("select not (1 + '2') from s3object", input_format="csv")


def test_json_paths_become_columns() -> None:
    t = translate(
        'select _1.phoneNumbers[12][2], _1.root."nested object".x, s.c1 from s3object[*].root as s',
        input_format="json",
    )
    assert t.json_paths == {
        "j0": (("key", "phoneNumbers"), ("index", 12), ("index", 2)),
        "j1": (("key", "root"), ("key", "nested object"), ("key", "x")),
        "j2": (("key", "c1"),),
    }
    assert t.json_from_path == (("key", "root"),)  # the steps after s3object[*]
    assert t.output_names == ["phoneNumbers", "x", "c1"]
    assert t.output_is_json == [True, True, True]


def test_output_names_per_flavor() -> None:
    sql = "select cast(_1 as int) as c1, c1 + 2, _2 from s3object"
    assert translate(sql, input_format="csv").output_names == ["c1", "_1", "_2"]
    assert translate(sql, input_format="csv", flavor="aws").output_names == ["c1", "_2", "_2"]


def test_aggregate_metadata() -> None:
    t = translate("select sum(int(_1)), count(*) from s3object", input_format="csv")
    assert t.is_aggregate
    assert t.sql == 'SELECT sum(COALESCE(TRY_CAST("_1" AS BIGINT), s3_cast_int("_1"))) AS "c0", count(*) AS "c1" FROM "s3object"'
    with pytest.raises(QuerySemanticError):
        translate("select _1, count(*) from s3object", input_format="csv")


def test_parquet_columns() -> None:
    columns = [Column("c0", "int64"), Column("c1", "string")]
    validate(
        "select _2 from s3object where c0 > 5",
        'SELECT "c1" AS "c0" FROM "s3object" WHERE "c0" > 5',
        input_format="parquet",
        columns=columns,
    )


@pytest.mark.parametrize(
    "sql",
    [
        "select * from s3object join other on true",
        "select * from s3object where _1 in (select _1 from s3object)",
        "select read_csv('/etc/passwd') from s3object",
        "select * from s3object group by _1",
        "select * from s3object order by _1",
    ],
)
def test_only_allow_listed_constructs(sql: str) -> None:
    with pytest.raises((UnsupportedFeatureError, QuerySyntaxError)):
        translate(sql, input_format="csv")


def test_other_tables_are_rejected() -> None:
    with pytest.raises(QuerySyntaxError):
        translate("select sum(1) from file.txt;", input_format="csv")


def test_identifiers_are_always_quoted_in_output() -> None:
    t = translate('select "x; drop table t" from s3object s', input_format="csv", flavor="aws", header=["x; drop table t"])
    assert t.sql == 'SELECT "_1" AS "c0" FROM "s3object"'


def test_deep_nesting_is_a_clear_error() -> None:
    sql = "select " + "(" * 3000 + "1" + ")" * 3000 + " from s3object"
    with pytest.raises((UnsupportedFeatureError, QuerySyntaxError)):
        translate(sql, input_format="csv")


def test_long_or_chain_translates() -> None:
    sql = "select _1 from s3object where " + " or ".join(f"_1 = '{i}'" for i in range(3000))
    assert "OR" in translate(sql, input_format="csv").sql


def test_select_dialect_imports_no_engine() -> None:
    code = (
        "import sys, select_dialect, select_dialect.translate;"
        "bad = [m for m in ('pyarrow', 'datafusion', 'pyspark', 'flight_storage', 'compute_client') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
