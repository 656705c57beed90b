"""s3-select SQL translated and run through DataFusion with the UDFs registered."""

from __future__ import annotations

import json
from typing import Any

import datafusion
import pyarrow as pa
import pytest

from flight_storage.execution import udfs as kernels
from flight_storage.execution.udfs import (
    parse_processing_error,
    processing_error,
    register_udfs,
    timestamp_to_string,
)
from select_dialect import translate, udf_names

ROW = [["1", "1", "1", "1"]]


def run(sql: str, rows: list[list[str | None]] = ROW, *, flavor: str = "ceph", input_format: str = "csv",
        columns: dict[str, pa.Array] | None = None) -> list[tuple[Any, ...]]:
    """Translate ``sql``, run it over ``rows`` (CSV fields) and return the output rows;
    timestamps come back in their printed form."""
    t = translate(sql, input_format=input_format, flavor=flavor)
    if columns is None:
        width = max([len(r) for r in rows] + [t.max_positional])
        columns = {
            f"_{i + 1}": pa.array([r[i] if i < len(r) and r[i] != "" else None for r in rows], pa.utf8())
            for i in range(width)
        }
    ctx = datafusion.SessionContext()
    register_udfs(ctx)
    ctx.register_record_batches("s3object", [[pa.record_batch(columns)]])
    table = ctx.sql(t.sql).to_arrow_table()
    out_columns = []
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if isinstance(column.type, pa.StructType):
            column = timestamp_to_string(column)
        out_columns.append(column.to_pylist())
    return list(zip(*out_columns, strict=True))


def one(sql: str, **options: Any) -> Any:
    return run(sql, **options)[0][0]


def error_of(sql: str, **options: Any) -> tuple[str, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - DataFusion raises a bare Exception
        run(sql, **options)
    parsed = parse_processing_error(str(info.value))
    assert parsed is not None, str(info.value)
    return parsed


_NULL_ARGUMENT = {
    "utf8": "CAST(NULL AS VARCHAR)",
    "int64": "CAST(NULL AS BIGINT)",
    "timestamp_ns_utc": "CAST(NULL AS TIMESTAMP)",
    "s3_timestamp": "s3_to_timestamp(CAST(NULL AS VARCHAR))",
}


def test_every_udf_name_is_registered() -> None:
    ctx = datafusion.SessionContext()
    register_udfs(ctx)
    ctx.register_record_batches("t", [[pa.record_batch({"x": pa.array([1])})]])
    for signature in udf_names.UDFS:
        args = ", ".join(_NULL_ARGUMENT[a] for a in signature.args)
        (value,) = ctx.sql(f"select {signature.name}({args}) as v from t").to_pydict()["v"]
        assert value is None, signature.name
    from flight_storage.execution.udfs import KERNELS

    assert set(KERNELS) == set(udf_names.UDF_NAMES)


def test_processing_error_round_trip() -> None:
    text = f"DataFusion error: Execution error: PyErr {{ value: {processing_error('CastFailed', 'it''s bad')!r} }}"
    assert parse_processing_error(text) == ("CastFailed", "its bad")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select -5 + 0.5 + -0.25 from stdin", -4.75),
        ("select -5 / (0.5 - -0.25) from stdin", -6.666666666666667),
        ("select 5 ^ (0.5 - -0.25) from stdin", 3.34370152488211),
        ("select 5.2 % 2 from stdin", 1.2000000000000002),
        ("select 1 + null from stdin", None),
        ("select (true and null) from stdin", None),
        ("select (not 'any_string') from stdin", False),
        ("select nullif(1, 1.0) from stdin", None),
        ('select nullif(5, "hello") from stdin', 5),
        ("select coalesce(nullif(5,5),nullif(1,1.0),2) from stdin", 2),
        ('select case 2+1 when (3+4) then "a" when 3 then "b" else "c" end from stdin', "b"),
        ('select ("a" in ("a","b")) from stdin', True),
        ("select (10 in (5.0*2.0, 12+1)) from stdin", True),
        ("select cast(5.123 as int) from stdin", 5),
        ("select cast(1.123456789 as decimal(9,1)) from stdin", 1.123456789),
        ("select cast('124' as int) + 1 from stdin", 125),
        ("select cast(5 as bool) from stdin", True),
        ("select cast('a' as bool) from stdin", False),
    ],
)
def test_expressions(sql: str, expected: Any) -> None:
    assert one(sql) == expected


def test_ceph_not_spans_the_conjunction() -> None:
    assert run('select "true" from stdin where not (null>0 or 4>3) and (7<1)') == [("true",)]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("select cast('1234a' as int) from s3object", "extra characters after the number"),
        ("select cast('a1234' as float) from s3object", "text cannot be converted to a number"),
        ("select cast('9223372036854775808' as int) from s3object", "converted value would fall out of the range"),
        ("select cast('999e+999' as float) from s3object", "converted value would fall out of the range"),
    ],
)
def test_cast_errors(sql: str, message: str) -> None:
    code, text = error_of(sql)
    assert code == "CastFailed"
    assert message in text


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ('select substring("12345",0,5) from stdin', "1234"),
        ('select substring("12345",-1,5) from stdin', "123"),
        ('select substring("123456789",-4) from stdin', "123456789"),
        ('select substring("01234567890",2.5*2+1,1+2) from stdin', "567"),
        ('select substring("123456789" from 0 for 100) from stdin', "123456789"),
        ('select trim("   \twelcome\t   ") from stdin', "\twelcome\t"),
        ('select trim(both "12" from "1112211foobar22211122") from stdin', "foobar"),
        ("select trim(TRAILING '1' from '111abcdef111') from stdin", "111abcdef"),
        ('select lower("ABcD12#$e") from stdin', "abcd12#$e"),
        ('select char_length("abcde") from stdin', 5),
    ],
)
def test_strings(sql: str, expected: Any) -> None:
    assert one(sql) == expected


def test_aws_substring_clamps_start() -> None:
    assert one("SELECT SUBSTRING('abcd' FROM -1 FOR 1) FROM S3Object", flavor="aws") == "a"


@pytest.mark.parametrize(
    ("pattern", "matches"),
    [
        ('"abc_defgh" like "abc$_defgh" escape "$"', True),
        ('"abc#efgh" like "abc##efgh" escape "#"', True),
        ('"ab%%a" like "ab$%%a" escape "$"', True),
        ('"abc" like "a[^b-c]c"', False),
        ('"adc" like "a[^b-c]c"', True),
        ('"abc#efgh" like substring("abc##efghi",1,9) escape "#"', True),
        ('substring("abcde",1,5) like substring("abcd_ab",1,5)', True),
    ],
)
def test_like(pattern: str, matches: bool) -> None:
    assert one(f"select ({pattern}) from stdin") is matches


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("2007T", "2007-01-01T00:00:00+00:00"),
        ("2007-09-17T17:56Z", "2007-09-17T17:56:00Z"),
        ("2007-09-17T17:56:05.234+02:44", "2007-09-17T17:56:05.234000+02:44"),
        ("2007-09-17T17:56:05.012345678-00:45", "2007-09-17T17:56:05.012345678-00:45"),
    ],
)
def test_to_timestamp(text: str, printed: str) -> None:
    assert one(f"select to_timestamp('{text}') from stdin") == printed


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("date_diff(year, to_timestamp('2009-09-17T17:56:06.234Z'), to_timestamp('2007-09-17T19:30:05.234Z'))", -1),
        ("date_diff(month, to_timestamp('2009-09-17T17:56:06.234Z'), to_timestamp('2007-09-17T19:30:05.234Z'))", -23),
        ("date_diff(day, to_timestamp('2009-09-17T17:56:06.234Z'), to_timestamp('2007-09-17T19:30:05.234Z'))", -730),
        ("date_diff(hour, to_timestamp('2007-09-17T17:56:06.234-03:45'), to_timestamp('2007-09-17T17:56:06.234+13:30'))", -17),
        ("date_diff(hour, to_timestamp('2007-09-17T17:56:06.234+14:00'), to_timestamp('2007-09-17T03:56:06.234Z'))", 0),
        ("extract(week from to_timestamp('2009-09-17T17:56:06.234Z'))", 38),
        ("extract(timezone_hour from to_timestamp('2009-09-17T17:56:06.234-07:45'))", -7),
        ("extract(timezone_minute from to_timestamp('2009-09-17T17:56:06.234-07:45'))", -45),
        ("extract(hour from to_timestamp('2009-09-17T17:56:06.234-07:45'))", 17),
    ],
)
def test_timestamp_arithmetic(sql: str, expected: int) -> None:
    assert one(f"select {sql} from stdin") == expected


@pytest.mark.parametrize(
    ("sql", "printed"),
    [
        ("date_add(month, -9, to_timestamp('2007-09-17T17:57:06Z'))", "2006-12-17T17:57:06Z"),
        ("date_add(day, 3, to_timestamp('2009-09-17T17:56:06.234567-09:15'))", "2009-09-20T17:56:06.234567-09:15"),
        ("date_add(second, -26, to_timestamp('2009-09-17T17:56:06.234567-00:30'))", "2009-09-17T17:55:40.234567-00:30"),
    ],
)
def test_date_add(sql: str, printed: str) -> None:
    assert one(f"select {sql} from stdin") == printed


@pytest.mark.parametrize(
    ("ts", "pattern", "expected"),
    [
        ("2009-09-17T17:56:06.234567Z", "yyyyMMdd-H:m:s", "20090917-17:56:6"),
        ("2009-03-17T17:56:06.234567Z", "yydaMMMM h m s.n", "0917PMMarch 5 56 6.234567000"),
        ("2009-03-07T01:08:06.234567-04:25", "X XX XXX XXXX XXXXX x xx xxx xxxx xxxxx",
         "-0425 -0425 -04:25 -0425 -04:25 -0425 -0425 -04:25 -0425 -04:25"),
        ("2009-03-07T01:08:06.002345Z", "n SSS SSSSSS SSSSSSSSS SSSSSSSSSSS", "2345000 002 002345 002345000 00234500000"),
        ("1969-07-20T20:18Z", "y-MM-dd''T''H:m:ssX", "1969-07-20T20:18:00Z"),
        ("1954-06-07T13:34:24.893361Z", "yyyysMMMMMdddSSSSSSSSSSSMMMM HHa:m -:-", "195424J07789336100000June 13PM:34 -:-"),
    ],
)
def test_to_string(ts: str, pattern: str, expected: str) -> None:
    assert one(f"select to_string(to_timestamp('{ts}'), '{pattern}') from stdin") == expected


def test_to_string_pattern_per_row() -> None:
    rows = [["2009-03-07T01:08:06Z", "yyyy"], ["2010-04-08T02:09:07Z", "MM-dd"]]
    assert run("select to_string(to_timestamp(_1), _2) from s3object", rows) == [("2009",), ("04-08",)]


LIMIT_ROWS = [["1", "8548", "7665"], ["2", "42926", "7334"], ["3", "1", "2"], ["4", "9", "1"]]


def test_ceph_limit_counts_scanned_rows() -> None:
    assert run("select _1 from s3object where _2 > _3 limit 1", LIMIT_ROWS) == [("1",)]
    assert run("select _1 from s3object where _2 > _3 limit 3", LIMIT_ROWS) == [("1",)]
    assert run("select count(0) from s3object where _2 > _3 limit 4", LIMIT_ROWS) == [(2,)]
    assert run("select _1 from s3object where _2 > _3 limit 2", LIMIT_ROWS, flavor="aws") == [("1",), ("4",)]


def test_aggregates_inside_expressions() -> None:
    rows = [[str(i), "1", "3"] for i in range(1, 5)]
    sql = (
        "select sum(cast(_1 as int)),max(cast(_3 as int)),"
        "substring('abcdefghijklm',(2-1)*3+sum(cast(_1 as int))/sum(cast(_1 as int))+1,"
        "(count(0) + count(0))/count(0)) from stdin"
    )
    assert run(sql, rows) == [(10, 3, "ef")]


def test_empty_group_aggregates_are_null() -> None:
    assert run("select min(cast(_1 as int)), sum(cast(_1 as int)), avg(cast(_1 as int)), count(0) from stdin where 1 = 0") == [
        (None, None, None, 0)
    ]


def test_aliases_in_where() -> None:
    rows = [["50", "60"], ["200", "1"], ["1", "1"]]
    sql = "select int(_1) as a1, int(_2) as a2 , (a1+a2) as a3 from s3object where a3>100 and a3<300"
    assert run(sql, rows) == [(50, 60, 110), (200, 1, 201)]


def test_json_values() -> None:
    columns = {
        "j0": pa.array(['891', '"82"', None, 'null', '"a\\"b"'], pa.utf8()),
    }
    t_sql = "select _1.c1 + 100, _1.c1 is null, lower(_1.c1) from s3object[*].root"
    assert run(t_sql, input_format="json", columns=columns) == [
        (991.0, False, "891"),
        (182.0, False, "82"),
        (None, True, None),
        (None, True, None),
        (None, False, 'a"b'),
    ]


def test_csv_field_versus_number() -> None:
    rows = [["2", " 0.765111"], ["3", "x"]]
    assert run("select _1 from s3object where _2 = 0.765111", rows, flavor="aws") == [("2",)]


# ------------------------------------------------------------------ JSON containers, formats


def test_json_in_compares_decoded_values() -> None:
    needles = pa.array(['"bar"', "3.0", "[2,3,4]", "8.5", "8.5", "1", "true", None, '"x"'])
    haystacks = pa.array(
        ['["foo","bar"]', "[2,3,4]", "[[2,3,4],[7,8.5,9]]", "[[2,3,4],[7,8.5,9]]",
         "[2,3,4,7,8.5,9]", "[true]", "[1]", "[1]", None]
    )  # fmt: skip
    assert kernels.json_in(needles, haystacks).to_pylist() == [
        True, True, True, False, True, False, False, None, None
    ]  # fmt: skip
    # A non-array haystack is a one-element list.
    assert kernels.json_in(pa.array(["2"]), pa.array(["2.0"])).to_pylist() == [True]


def test_json_equal_is_structural() -> None:
    first = pa.array(["[7,8.5,9]", '{"a":[1,2]}', "true", "[1]", None])
    second = pa.array(["[7.0,8.5,9]", '{"a":[1,2.0]}', "1", "[1,1]", "[1]"])
    assert kernels.json_equal(first, second).to_pylist() == [True, True, False, False, None]


def test_json_quote_escapes() -> None:
    values = pa.array(['a"b\\c', "x\ny\t", "é", None])
    out = kernels.json_quote(values).to_pylist()
    assert out[:3] == ['"a\\"b\\\\c"', '"x\\ny\\t"', '"é"']
    assert out[3] is None
    assert [json.loads(v) for v in out[:3]] == values.to_pylist()[:3]


def test_to_timestamp_accepts_the_iso_basic_format() -> None:
    parsed = kernels.to_timestamp(pa.array(["19171028T021607Z", "20071028T0216+01:00", "20071028T021607.5Z"]))
    assert timestamp_to_string(parsed).to_pylist() == [
        "1917-10-28T02:16:07Z",
        "2007-10-28T02:16:00+01:00",
        "2007-10-28T02:16:07.500000Z",
    ]
    with pytest.raises(Exception, match="S3SELECT_ERROR<CastFailed"):
        kernels.to_timestamp(pa.array(["1917102T021607Z"]))


def test_cast_int_accepts_a_plus_sign() -> None:
    assert kernels.cast_int(pa.array(["+00", " +7 ", "-3", None])).to_pylist() == [0, 7, -3, None]


def test_compact_timestamp_extract_year() -> None:
    rows = [["19171028T021607Z"], ["19551231T235959Z"]]
    assert run("select extract(year from to_timestamp(_1)) from s3object", rows) == [(1917,), (1955,)]
    assert run("select cast(to_string(to_timestamp(_1), 'x') as int) from s3object", rows) == [(0,), (0,)]


def test_utcnow_is_written_in_utc_per_flavor() -> None:
    ceph = run("select utcnow() from s3object")[0][0]
    aws = run("select utcnow() from s3object", flavor="aws")[0][0]
    assert ceph.endswith("+00:00")
    assert aws.endswith("Z")


def test_add_and_version_run() -> None:
    assert run("select add(-5, 0.5), add(1, 2), version() from stdin") == [(-4.5, 3, "41.a")]
