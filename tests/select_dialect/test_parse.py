"""Read side: the s3-select tokenizer/parser tables and syntax errors."""

from __future__ import annotations

import pytest
from sqlglot import exp

from select_dialect import QuerySyntaxError, UnsupportedFeatureError, parse
from select_dialect.s3select import Missing, S3Table


def test_from_clause_json_path_and_alias() -> None:
    statement = parse("select s.a from S3Object[*].root.*.x[*] as s")
    table = statement.args["from_"].this
    assert isinstance(table, S3Table)
    assert table.args["path"] == [
        ("any_index",),
        ("key", "root"),
        ("any_key",),
        ("key", "x"),
        ("any_index",),
    ]
    assert table.args["alias"].this == "s"


@pytest.mark.parametrize("sql", ["select * from stdin;", "select * from /objectname;", "SELECT * FROM s3obJEct"])
def test_accepted_sources(sql: str) -> None:
    assert isinstance(parse(sql).args["from_"].this, S3Table)


def test_caret_is_power_and_double_equal_is_equality() -> None:
    projection = parse("select 2^3, a == b from stdin").expressions
    assert isinstance(projection[0], exp.Pow)
    assert isinstance(projection[1], exp.EQ)


def test_is_missing_and_escape_with_any_expression() -> None:
    where = parse("select * from stdin where a is not missing and b like 'x' escape lower('#')").args["where"].this
    assert isinstance(where.this, exp.Not)
    assert isinstance(where.this.this.expression, Missing)
    assert isinstance(where.expression, exp.Escape)


def test_ceph_not_negates_a_conjunction() -> None:
    where = parse("select 1 from stdin where not (1>2) and (3<1)", "ceph").args["where"].this
    assert isinstance(where, exp.Not)
    assert isinstance(where.this, exp.And)
    aws = parse("select 1 from stdin where not (1>2) and (3<1)", "aws").args["where"].this
    assert isinstance(aws, exp.And)


@pytest.mark.parametrize("sql", [
    "select 1 from stdin where not 1>2 and 3<1 or 2=2",
    "select 1 from stdin where not 1>2 or 3<1 and 2=2",
    "select not 1>2 or 2=2 from stdin",
])
def test_ceph_leading_not_negates_the_whole_or_chain(sql: str) -> None:
    # Ceph: arithmetic_predicate = "not" >> logical_predicate (the OR of AND-chains).
    statement = parse(sql, "ceph")
    node = statement.args["where"].this if statement.args.get("where") else (
        statement.expressions[0])
    assert isinstance(node, exp.Not)
    assert isinstance(node.this, exp.Or)
    aws = parse(sql, "aws")
    aws_node = aws.args["where"].this if aws.args.get("where") else aws.expressions[0]
    assert isinstance(aws_node, exp.Or)  # standard SQL: NOT binds tighter than AND and OR


@pytest.mark.parametrize(("flavor", "code"), [("aws", "ParseUnexpectedToken"), ("ceph", "UnsupportedSyntax")])
def test_syntax_error_carries_position_and_text(flavor: str, code: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse('select count(*) from stdin where _1 like "%aeio%" like;', flavor)
    error = info.value
    assert (error.line, error.column) == (1, 54)
    assert error.offending == "like"
    assert error.code == code  # RGW reports every syntax error as UnsupportedSyntax
    assert "line 1, column 54" in error.message
    assert "'like'" in error.message
    assert error.to_dict()["offending"] == "like"


def test_multi_line_syntax_error_line() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("select _1\nfrom s3object\nwhere _1 = = 2")
    assert info.value.line == 3
    assert info.value.column is not None
    assert info.value.offending


def test_add_and_version_are_ceph_functions() -> None:
    projection = parse("select add(-5, 0.5), version() from stdin").expressions
    assert [str(p.this) for p in projection] == ["ADD", "VERSION"]


def test_only_one_select_statement() -> None:
    with pytest.raises(QuerySyntaxError):
        parse("select * from s3object; select * from s3object")
    with pytest.raises(UnsupportedFeatureError):
        parse("drop table s3object")
