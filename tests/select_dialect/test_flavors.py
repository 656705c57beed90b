"""The flavours: one list, and the standard flavour's translation (issue #12)."""

from __future__ import annotations

import pytest

from select_dialect import translate
from select_dialect.errors import QuerySemanticError, QuerySyntaxError, UnsupportedFeatureError
from select_dialect.flavors import FLAVOR_NAMES, FLAVORS, STATEMENT_DEFAULT, engine_rules

HEADER = ["id", "k", "v"]


def _standard(sql: str) -> object:
    return translate(sql, input_format="csv", flavor="standard", header=HEADER)


def test_every_flavour_follows_an_engine_with_a_grammar() -> None:
    from select_dialect.s3select import DIALECTS

    assert FLAVOR_NAMES == ("standard", "ceph", "aws") and STATEMENT_DEFAULT == "standard"
    assert {engine_rules(name) for name in FLAVORS} <= set(DIALECTS)


def test_standard_limit_counts_result_rows_and_quotes_name_columns() -> None:
    t = translate('select "id" from s3object where k = \'a\' limit 3', input_format="csv",
                  flavor="standard", header=HEADER)
    assert t.sql == 'SELECT "_1" AS "c0" FROM "s3object" WHERE "_2" = \'a\' LIMIT 3'
    assert not t.limit_counts_input and not t.whole_input and t.reads_table
    ceph = translate("select _1 from s3object where _2 = 'a' limit 3", input_format="csv",
                     flavor="ceph")
    assert ceph.limit_counts_input


def test_group_having_order_distinct_are_lowered_and_need_the_whole_input() -> None:
    t = translate("select k, count(*) as n from s3object group by k having count(*) > 1 "
                  "order by n desc, 1", input_format="csv", flavor="standard", header=HEADER)
    assert t.sql == ('SELECT "_2" AS "c0", count(*) AS "c1" FROM "s3object" GROUP BY "_2" '
                     'HAVING count(*) > 1 ORDER BY count(*) DESC, 1')
    assert t.whole_input and t.is_aggregate
    distinct = translate("select distinct k from s3object", input_format="csv",
                         flavor="standard", header=HEADER)
    assert distinct.sql == 'SELECT DISTINCT "_2" AS "c0" FROM "s3object"' and distinct.whole_input


def test_select_without_from_reads_no_table() -> None:
    t = translate("select 1", input_format="csv", flavor="standard")
    assert t.sql == 'SELECT 1 AS "c0"' and not t.reads_table
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
