"""The flavours: one list, their rules as flags, and the standard flavour's translation (issues
#12, #29, #31)."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from select_dialect import translate
from select_dialect.errors import QuerySemanticError, QuerySyntaxError, UnsupportedFeatureError
from select_dialect.flavors import (
    FLAVOR_NAMES,
    FLAVORS,
    STATEMENT_DEFAULT,
    Flavor,
    PrintingRules,
    ReadingRules,
)

HEADER = ["id", "k", "v"]


def _standard(sql: str) -> object:
    return translate(sql, input_format="csv", flavor="standard", header=HEADER)


def test_every_flavour_has_a_grammar_and_reading_and_printing_rules() -> None:
    from sqlglot.dialects.dialect import Dialect

    assert FLAVOR_NAMES == ("standard", "ceph", "aws", "minio")
    assert STATEMENT_DEFAULT == "standard"
    for record in FLAVORS.values():
        assert issubclass(record.grammar, Dialect)
        assert isinstance(record.reading, ReadingRules)
        assert isinstance(record.printing, PrintingRules)


def test_standard_limit_counts_result_rows_and_quotes_name_columns() -> None:
    t = translate('select "id" from s3object where k = \'a\' limit 3', input_format="csv",
                  flavor="standard", header=HEADER)
    assert t.sql == 'SELECT "_1" AS "c0" FROM "s3object" WHERE "_2" = \'a\' LIMIT 3'
    assert not t.limit_counts_input
    assert not t.whole_input
    assert t.reads_table
    ceph = translate("select _1 from s3object where _2 = 'a' limit 3", input_format="csv",
                     flavor="ceph")
    assert ceph.limit_counts_input


def test_group_having_order_distinct_are_lowered_and_need_the_whole_input() -> None:
    t = translate("select k, count(*) as n from s3object group by k having count(*) > 1 "
                  "order by n desc, 1", input_format="csv", flavor="standard", header=HEADER)
    assert t.sql == ('SELECT "_2" AS "c0", count(*) AS "c1" FROM "s3object" GROUP BY "_2" '
                     'HAVING count(*) > 1 ORDER BY count(*) DESC, 1')
    assert t.whole_input
    assert t.is_aggregate
    distinct = translate("select distinct k from s3object", input_format="csv",
                         flavor="standard", header=HEADER)
    assert distinct.sql == 'SELECT DISTINCT "_2" AS "c0" FROM "s3object"'
    assert distinct.whole_input


def test_select_without_from_reads_no_table() -> None:
    t = translate("select 1", input_format="csv", flavor="standard")
    assert t.sql == 'SELECT 1 AS "c0"'
    assert not t.reads_table
    with pytest.raises(QuerySyntaxError, match="missing FROM"):
        translate("select 1", input_format="csv", flavor="aws")


@pytest.mark.parametrize("flavor", ["ceph", "aws"])
@pytest.mark.parametrize("clause", ["group by _1", "order by _1", "having count(*) > 1"])
def test_s3_select_flavours_name_the_clause_and_the_standard_flavour(flavor: str,
                                                                     clause: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match="standard flavour runs it"):
        translate(f"select _1 from s3object {clause}", input_format="csv", flavor=flavor)


@pytest.mark.parametrize(("sql", "error", "text"), [
    ("insert into s3object values (1)", UnsupportedFeatureError,
     "INSERT is not allowed: the server is read-only"),
    ("  delete from s3object", UnsupportedFeatureError, "DELETE is not allowed"),
    ("selec _1 from s3object", QuerySyntaxError, "starts with SELECT, not 'selec'"),
    ("select _1 from s3object where", QuerySyntaxError, "missing after the token"),
    ("select nope from s3object", QuerySemanticError, "FileHeaderInfo"),
    ("select _1 from s3object limit 9223372036854775808", QuerySemanticError, "out of range"),
])
def test_errors_say_what_to_fix(sql: str, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text) as info:
        translate(sql, input_format="csv", flavor="standard")
    assert "<class" not in str(info.value)


def test_unknown_column_lists_the_header() -> None:
    with pytest.raises(QuerySemanticError, match=r"not exist in schema; .* names: id, k, v"):
        _standard("select nope from s3object")


# ------------------------------------------------------------------ rules are data (issue 29)


def test_the_lowering_reads_flags_never_flavour_names() -> None:
    import inspect

    from select_dialect import lowering, lowering_base, lowering_operators, translate

    for module in (lowering, lowering_base, lowering_operators, translate):
        source = inspect.getsource(module)
        assert not re.search(r"flavor\s*(==|!=|in)\s", source), module.__name__
        assert not re.search(r"""["'](ceph|aws|standard)["']""", source), module.__name__


def test_each_flag_a_flavour_sets_differs_from_the_defaults() -> None:
    defaults = Flavor("x", summary="")
    changed = {f.name for flavor in FLAVORS.values() for f in fields(Flavor)
               if getattr(flavor, f.name) != getattr(defaults, f.name)}
    assert {"sql_types", "double_quotes_are_strings", "aws_names", "reading",
            "printing"} <= changed
    # every reading and printing flag is one some flavour sets
    for record_type, part in ((ReadingRules, "reading"), (PrintingRules, "printing")):
        plain = record_type()
        set_somewhere = {f.name for flavor in FLAVORS.values() for f in fields(record_type)
                         if getattr(getattr(flavor, part), f.name) != getattr(plain, f.name)}
        unused = {f.name for f in fields(record_type)} - set_somewhere
        assert unused <= {"csv_comment", "csv_quoted_record_delimiter"}, unused


# ------------------------------------------------------------------ SQL types (issue 31)


def test_standard_max_and_min_of_a_field_order_text_the_s3_flavours_numbers() -> None:
    sql = "select max(v), min(k) from s3object"
    assert _standard(sql).sql == 'SELECT max("_3") AS "c0", min("_2") AS "c1" FROM "s3object"'
    aws = translate(sql, input_format="csv", flavor="aws", header=HEADER).sql
    assert 'max(TRY_CAST(btrim("_3") AS DOUBLE))' in aws


@pytest.mark.parametrize(("sql", "code", "text"), [
    ("select sum(v) from s3object", "IncorrectSqlFunctionArgumentType",
     "sum(VARCHAR) is not defined: sum takes a number and v is VARCHAR; cast it to a number: "
     "sum(CAST(v AS DOUBLE))"),
    ("select avg(k = 'a') from s3object", "IncorrectSqlFunctionArgumentType",
     "avg(BOOLEAN) is not defined"),
    ("select sum(cast(v as timestamp)) from s3object", "IncorrectSqlFunctionArgumentType",
     "sum(TIMESTAMP) is not defined"),
    ("select v * 2 from s3object", "InvalidDataType",
     "VARCHAR * BIGINT is not defined: v is VARCHAR; cast it to a number: CAST(v AS DOUBLE)"),
    ("select - k from s3object", "InvalidDataType", "-VARCHAR is not defined"),
    ("select cast(1 as timestamp) from s3object", "InvalidCast",
     "cannot cast BIGINT to TIMESTAMP"),
])
def test_standard_refuses_what_sql_does_not_define(sql: str, code: str, text: str) -> None:
    with pytest.raises(QuerySemanticError) as info:
        _standard(sql)
    assert info.value.code == code
    assert text in info.value.message


def test_standard_cast_to_timestamp_is_datafusions_and_text_beside_it_is_cast() -> None:
    got = _standard("select max(cast(k as timestamp)) from s3object "
                    "where cast(k as timestamp) > '2024-01-01'").sql
    assert got == ('SELECT max(CAST("_2" AS TIMESTAMP)) AS "c0" FROM "s3object" '
                   "WHERE (CAST(\"_2\" AS TIMESTAMP)) > (CAST('2024-01-01' AS TIMESTAMP))")
    # s3-select's flavours keep TO_TIMESTAMP (its UDF) and its number rules
    aws = translate("select cast(k as timestamp) from s3object", input_format="csv",
                    flavor="aws", header=HEADER).sql
    assert "s3_to_timestamp" in aws


@pytest.mark.parametrize(("literal", "sql_literal"), [("'2'", "2"), ("' -7 '", "-7"),
                                                   ("'2.5e1'", "2.5e1")])
def test_standard_string_literal_beside_a_number_is_cast_to_it(literal: str,
                                                                sql_literal: str) -> None:
    """SQL's rule for an untyped literal: ``CAST(k AS DOUBLE) = '2'`` compares with 2; the
    s3-select flavours keep S3 Select's (a string is never equal to a number)."""
    number = "cast(k as double)" if "." in literal or "e" in literal else "cast(k as bigint)"
    got = _standard(f"select id from s3object where {number} = {literal}").sql
    assert re.search(rf"= \(?{re.escape(sql_literal)}\)?$", got), got
    aws = translate(f"select id from s3object where cast(k as int) = {literal}",
                    input_format="csv", flavor="aws", header=HEADER).sql
    assert "CASE WHEN" in aws
    assert "ELSE FALSE" in aws


@pytest.mark.parametrize(("sql", "text"), [
    ("cast(k as bigint) = '2.5'", "cannot cast the string '2.5' to BIGINT"),
    ("cast(k as double) < 'cheap'", "cannot cast the string 'cheap' to DOUBLE"),
    ("cast(k as bigint) in ('1', 'x')", "cannot cast the string 'x' to BIGINT"),
])
def test_standard_string_literal_that_is_no_number_fails_naming_it(sql: str, text: str) -> None:
    with pytest.raises(QuerySemanticError) as info:
        _standard(f"select id from s3object where {sql}")
    assert info.value.code == "CastFailed"
    assert text in info.value.message


def test_order_by_prints_only_the_null_order_datafusion_does_not_default_to() -> None:
    got = _standard("select k from s3object order by 1 nulls first, 1 desc nulls last, 1, "
                    "1 desc, 1 nulls last, 1 desc nulls first").sql
    assert got.endswith("ORDER BY 1 NULLS FIRST, 1 DESC NULLS LAST, 1, 1 DESC, 1, 1 DESC")


_TRANSLATED_BY_FLAG = {
    "grammar": ("select _1 from s3object where not _1 = 'a' and _2 = 'b' or _3 = 'c'", None),
    "syntax_error_code": ("select _1 from s3object where", None),
    "unnamed_by_position": ("select _1 as a, upper(_2) from s3object", None),
    "alias_clashes_with_header": ("select _1 as id from s3object", ["id", "k"]),
    "star_keeps_empty_fields": ("select * from s3object", None),
}


def _translated(sql: str, header: list[str] | None, flavor: str) -> object:
    try:
        t = translate(sql, input_format="csv", flavor=flavor, header=header)
    except (QuerySyntaxError, QuerySemanticError) as error:
        return error.code
    return t.sql, t.output_names, t.keeps_empty_fields


@pytest.mark.parametrize("flag", sorted(_TRANSLATED_BY_FLAG))
def test_the_translator_reads_each_of_its_flags(monkeypatch: pytest.MonkeyPatch,
                                                 flag: str) -> None:
    # a record like aws's with one flag as ceph's: the translation follows the flag
    from dataclasses import replace

    flipped = replace(FLAVORS["aws"], name="x", reserved_words=False,
                      **{flag: getattr(FLAVORS["ceph"], flag)})
    monkeypatch.setitem(FLAVORS, "x", flipped)
    monkeypatch.setitem(FLAVORS, "y", replace(flipped, **{flag: getattr(FLAVORS["aws"], flag)}))
    sql, header = _TRANSLATED_BY_FLAG[flag]
    assert _translated(sql, header, "x") != _translated(sql, header, "y")
