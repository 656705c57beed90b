"""Output serialization: expected text from the conformance README rules and corpus cases."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.formats.output import RecordWriter
from flight_storage.formats.values import (
    PRECISION_DAY,
    PRECISION_FRACTION,
    PRECISION_MINUTE,
    PRECISION_SECOND,
    PRECISION_YEAR,
    S3_TIMESTAMP,
    ZONE_NONE,
    ZONE_OFFSET,
    ZONE_Z,
)
from select_dialect.flavors import FLAVORS


def _write(
    columns: Sequence[pa.Array],
    *,
    flavor: str = "ceph",
    serialization: dict[str, Any] | None = None,
    names: Sequence[str] | None = None,
    is_json: Sequence[bool] | None = None,
    aggregate: bool = False,
    batches: int = 1,
) -> bytes:
    batch = pa.record_batch({f"c{i}": c for i, c in enumerate(columns)})
    writer = RecordWriter(
        serialization,
        printing=FLAVORS[flavor].printing,
        output_names=list(names or [f"_{i + 1}" for i in range(len(columns))]),
        output_is_json=list(is_json or [False] * len(columns)),
        is_aggregate=aggregate,
    )
    out = b""
    for start in range(batches):
        out += writer.write(batch.slice(start, 1) if batches > 1 else batch)
    return out + writer.finish()


# ----------------------------------------------------------------- Ceph CSV


def test_ceph_rows_end_with_newline() -> None:
    assert _write([pa.array([2])]) == b"2\n"
    assert _write([pa.array([True]), pa.array([False])]) == b"true,false\n"


def test_ceph_aggregate_row_has_no_newline() -> None:
    assert _write([pa.array([128])], aggregate=True) == b"128"
    assert _write([pa.array([8128]), pa.array([8256.0])], aggregate=True) == b"8128,8256"
    assert _write([pa.array([None], pa.float64())], aggregate=True) == b"null"  # avg of nothing


def test_ceph_aggregate_json_row_has_newline() -> None:
    assert (
        _write([pa.array([3975])], serialization={"JSON": {}}, aggregate=True) == b'{"_1":3975}\n'
    )


def test_ceph_null_prints_null() -> None:
    assert _write([pa.array([None], pa.int64())]) == b"null\n"
    assert _write([pa.array([None, "a"])]) == b"null\na\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (5.2 % 2, b"1.2000000000000002"),
        (5.2 % 2.5, b"0.20000000000000018"),
        (-5 / (0.5 - -0.25), b"-6.666666666666667"),
        (5 ** (0.5 - -0.25), b"3.34370152488211"),
        (1.234 + 1.235, b"2.4690000000000003"),
        (8256.0, b"8256"),
        (128.0, b"128"),
    ],
)
def test_floats_shortest_round_trip(value: float, text: bytes) -> None:
    assert _write([pa.array([value])]) == text + b"\n"
    assert _write([pa.array([value])], flavor="aws") == text + b"\n"


def test_ceph_does_not_quote_by_default() -> None:
    # s3-tests test_csv_parser: select _6 prints third=c31,c32,c33 as is
    assert _write([pa.array(["third=c31,c32,c33"])]) == b"third=c31,c32,c33\n"


def test_quote_fields_always() -> None:
    """Ceph quotes with C++'s ``std::quoted`` and its CSV reader's escape character (a backslash
    unless the input names another): rgw_s3select.cc hands the input's QuoteEscapeCharacter
    to s3select's csv_object, which quotes ``std::quoted(value, quote, escape_char)``. AWS
    doubles the quote (the output's QuoteEscapeCharacter, ``"`` by default)."""
    values = [pa.array(['a"b', "c\\d", None])]
    always = {"CSV": {"QuoteFields": "ALWAYS"}}
    assert _write(values, serialization=always) == b'"a\\"b"\n"c\\\\d"\n"null"\n'
    assert _write(values, flavor="aws", serialization=always) == b'"a""b"\n"c\\d"\n""\n'


# ----------------------------------------------------------------- Ceph JSON


def test_ceph_json_strings_unquoted() -> None:
    out = _write(
        [pa.array(["male", ""]), pa.array([1, None])],
        serialization={"JSON": {}},
        names=["gender", "c9"],
    )
    assert out == b'{"gender":male,"c9":1}\n{"gender":,"c9":null}\n'


def test_ceph_json_csv_input_values() -> None:
    # gtest json_format_csv_object: CSV strings print unquoted in Ceph JSON output
    out = _write([pa.array(["383", "362"]), pa.array(["886", "27"])], serialization={"JSON": {}})
    assert out == b'{"_1":383,"_2":886}\n{"_1":362,"_2":27}\n'


def test_ceph_json_text_columns() -> None:
    # {"c9":82} for the JSON string "82"; an absent key (SQL NULL) prints null
    col = pa.array(['"82"', None, "7", "null", '"a\\"b"'])
    out = _write([col], serialization={"JSON": {}}, names=["c9"], is_json=[True])
    assert out == b'{"c9":82}\n{"c9":null}\n{"c9":7}\n{"c9":null}\n{"c9":a"b}\n'
    assert _write([col], is_json=[True]) == b'82\nnull\n7\nnull\na"b\n'


# ----------------------------------------------------------------- AWS / MinIO


def test_aws_csv_null_is_empty_and_rows_end_with_delimiter() -> None:
    # MinIO TestCSVInput/0: ",bar,false" (empty field), every row ends with \n
    out = _write(
        [
            pa.array(["-1", None, "2.5"]),
            pa.array(["foo", "bar", "baz"]),
            pa.array(["true", "false", "true"]),
        ],
        flavor="aws",
    )
    assert out == b"-1,foo,true\n,bar,false\n2.5,baz,true\n"


def test_aws_aggregate_ends_with_record_delimiter() -> None:
    # moto test_bzipped_csv_to_csv: count(*) -> "4_" with RecordDelimiter "_"
    ser = {"CSV": {"RecordDelimiter": "_", "FieldDelimiter": ":"}}
    assert _write([pa.array([4])], flavor="aws", serialization=ser, aggregate=True) == b"4_"
    ser = {"CSV": {"RecordDelimiter": "\n", "FieldDelimiter": ":"}}
    out = _write(
        [pa.array(["a", "e"]), pa.array(["b", "r"]), pa.array(["c", "f"])],
        flavor="aws",
        serialization=ser,
    )
    assert out == b"a:b:c\ne:r:f\n"


def test_aws_json_compact_with_custom_delimiter() -> None:
    # moto: {"_1":1}, and {"cnt":1}, with RecordDelimiter ","
    ser = {"JSON": {"RecordDelimiter": ","}}
    assert _write([pa.array([1])], flavor="aws", serialization=ser, aggregate=True) == b'{"_1":1},'
    assert _write([pa.array([1])], flavor="aws", serialization=ser, names=["cnt"]) == b'{"cnt":1},'


def test_aws_json_strings_and_nulls() -> None:
    # MinIO: {"first":"1","_100":null} and {"num2":" 0.765111"}; {"text":""}
    out = _write(
        [pa.array(["1"]), pa.array([None], pa.string()), pa.array([""])],
        flavor="aws",
        serialization={"JSON": {}},
        names=["first", "_100", "text"],
    )
    assert out == b'{"first":"1","_100":null,"text":""}\n'


def test_aws_json_text_columns_missing_keys_dropped() -> None:
    # moto test_query_all: {"a1":"b1","a2":"b2","a3":null}; MISSING keys vanish -> {}
    cols = [pa.array(['"b1"', None]), pa.array(['"b2"', None]), pa.array(["null", None])]
    out = _write(cols, flavor="aws", serialization={"JSON": {"RecordDelimiter": ","}},
                 names=["a1", "a2", "a3"], is_json=[True] * 3)  # fmt: skip
    assert out == b'{"a1":"b1","a2":"b2","a3":null},{},'


def test_aws_json_array_into_csv_is_quoted_json_text() -> None:
    # MinIO select-output-field-as-csv
    col = pa.array(['["foo","bar","whatever"]'])
    out = _write(
        [col], flavor="aws", serialization={"CSV": {"QuoteCharacter": '"'}}, is_json=[True]
    )
    assert out == b'"[""foo"",""bar"",""whatever""]"\n'


def test_aws_json_string_escapes() -> None:
    out = _write([pa.array(['a"b\\c', "x\ty"])], flavor="aws", serialization={"JSON": {}})
    assert out == b'{"_1":"a\\"b\\\\c"}\n{"_1":"x\\ty"}\n'


def test_aws_csv_quotes_as_needed() -> None:
    # MinIO TestReadFailures re-written records
    out = _write([pa.array(['a "word"', "ok1", "b\nc"]), pa.array(["b", "x,y", "d"])], flavor="aws")
    assert out == b'"a ""word""",b\nok1,"x,y"\n"b\nc",d\n'


def test_multi_char_record_delimiter() -> None:
    out = _write([pa.array(["1", "a"]), pa.array(["2", "b"])], flavor="aws",
                 serialization={"CSV": {"RecordDelimiter": "\r\n"}})  # fmt: skip
    assert out == b"1,2\r\na,b\r\n"


# ----------------------------------------------------------------- timestamps


def _ts(local: dt.datetime, offset: int, zone: int, precision: int, digits: int) -> dict[str, Any]:
    utc = (local - dt.timedelta(minutes=offset)).replace(tzinfo=dt.UTC)
    return {"utc": utc, "offset_minutes": offset, "zone": zone, "precision": precision,
            "fraction_digits": digits}  # fmt: skip


TIMESTAMPS = [
    # (value, ceph text, aws shortest text)
    (_ts(dt.datetime(2007, 9, 17, 17, 56, 6, 234000), 0, ZONE_Z, PRECISION_FRACTION, 3),
     "2007-09-17T17:56:06.234000Z", "2007-09-17T17:56:06.234Z"),
    (_ts(dt.datetime(2007, 1, 1), 0, ZONE_NONE, PRECISION_YEAR, 0),
     "2007-01-01T00:00:00+00:00", "2007T"),
    (_ts(dt.datetime(2007, 9, 17), 0, ZONE_NONE, PRECISION_DAY, 0),
     "2007-09-17T00:00:00+00:00", "2007-09-17T"),
    (_ts(dt.datetime(2009, 9, 17, 17, 56, 6), -465, ZONE_OFFSET, PRECISION_SECOND, 0),
     "2009-09-17T17:56:06-07:45", "2009-09-17T17:56:06-07:45"),
    (_ts(dt.datetime(2010, 2, 3, 4, 11), 0, ZONE_Z, PRECISION_MINUTE, 0),
     "2010-02-03T04:11:00Z", "2010-02-03T04:11Z"),
    (_ts(dt.datetime(2017, 1, 2, 4, 4), 0, ZONE_Z, PRECISION_MINUTE, 0),
     "2017-01-02T04:04:00Z", "2017-01-02T04:04Z"),
    (_ts(dt.datetime(2017, 1, 1, 1, 0), 0, ZONE_NONE, PRECISION_MINUTE, 0),
     "2017-01-01T01:00:00+00:00", "2017-01-01T01:00-00:00"),
    (_ts(dt.datetime(2017, 1, 2, 3, 4, 5, 230000), 510, ZONE_OFFSET, PRECISION_FRACTION, 2),
     "2017-01-02T03:04:05.230000+08:30", "2017-01-02T03:04:05.23+08:30"),
    (_ts(dt.datetime(1969, 7, 20, 20, 18, 0, 1), 0, ZONE_Z, PRECISION_FRACTION, 6),
     "1969-07-20T20:18:00.000001Z", "1969-07-20T20:18:00.000001Z"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "ceph", "aws"), TIMESTAMPS, ids=[t[1] for t in TIMESTAMPS])
def test_s3_timestamps(value: dict[str, Any], ceph: str, aws: str) -> None:
    col = pa.array([value], S3_TIMESTAMP)
    assert _write([col]) == ceph.encode() + b"\n"
    assert _write([col], flavor="aws") == aws.encode() + b"\n"
    assert (
        _write([col], flavor="aws", serialization={"JSON": {}})
        == b'{"_1":"' + aws.encode() + b'"}\n'
    )


def test_null_timestamp() -> None:
    col = pa.array([None], S3_TIMESTAMP)
    assert _write([col]) == b"null\n"
    assert _write([col], flavor="aws", serialization={"JSON": {}}) == b'{"_1":null}\n'


def test_parquet_dates_and_timestamps() -> None:
    # MinIO TestParquetInputSchema: dates print 1996-03-13T; the first of a month 1996-04T
    dates = pa.array([dt.date(1996, 3, 13), dt.date(1996, 4, 1), None])
    assert _write([dates], flavor="aws") == b"1996-03-13T\n1996-04T\n\n"
    assert _write([dates]) == b"1996-03-13\n1996-04-01\nnull\n"
    ts = pa.array([dt.datetime(2020, 1, 2, 3, 4, 5, 120000)], pa.timestamp("us", tz="UTC"))
    assert _write([ts], flavor="aws") == b"2020-01-02T03:04:05.12Z\n"
    assert _write([ts]) == b"2020-01-02T03:04:05.120000Z\n"


def test_decimal_and_nested_values() -> None:
    out = _write([pa.array([decimal.Decimal("1.10")]), pa.array([[1, 2]])], flavor="aws",
                 serialization={"JSON": {}})  # fmt: skip
    assert out == b'{"_1":1.10,"_2":[1,2]}\n'


_DECIMALS = pa.array([decimal.Decimal("12345678901234567890123456789.123456789"),
                      decimal.Decimal("-0.000000001"), decimal.Decimal("0E-9"), None],
                     pa.decimal128(38, 9))


@pytest.mark.parametrize(("flavor", "serialization", "expected"), [
    ("ceph", None, b"12345678901234567890123456789.123456789\n-0.000000001\n0.000000000\nnull\n"),
    ("aws", None, b"12345678901234567890123456789.123456789\n-0.000000001\n0.000000000\n\n"),
    ("aws", {"JSON": {}}, b'{"_1":12345678901234567890123456789.123456789}\n'
                          b'{"_1":-0.000000001}\n{"_1":0.000000000}\n{"_1":null}\n'),
])  # fmt: skip
def test_decimals_print_every_digit_of_their_scale(flavor: str, serialization: Any,
                                                   expected: bytes) -> None:
    """Arrow's decimal -> string cast writes -1E-9 and 0E-9 below 10**-6; the writers do not."""
    assert _write([_DECIMALS], flavor=flavor, serialization=serialization) == expected


def test_decimals_inside_nested_values_print_exactly() -> None:
    """json.dumps refuses Decimal: a Parquet list or struct of decimals failed the query."""
    values = pa.array([[decimal.Decimal("1.50"), decimal.Decimal("-0.000000001")], None],
                      pa.list_(pa.decimal128(20, 9)))
    record = pa.array([{"x": decimal.Decimal("2.5")}], pa.struct([("x", pa.decimal128(5, 1))]))
    assert _write([values]) == b"[1.500000000,-0.000000001]\nnull\n"
    assert _write([record], flavor="aws", serialization={"JSON": {}}) == b'{"_1":{"x":2.5}}\n'


# ----------------------------------------------------------------- batches and options


def test_ceph_aggregate_over_several_batches_separates_rows() -> None:
    out = _write([pa.array([1, 2])], aggregate=True, batches=2)
    assert out == b"1\n2"


def test_default_output_is_csv_and_empty_batch() -> None:
    writer = RecordWriter(
        None, printing=FLAVORS["aws"].printing, output_names=["a"], output_is_json=[False], is_aggregate=False
    )
    assert writer.write(pa.record_batch({"c0": pa.array([], pa.int64())})) == b""
    assert writer.write(pa.record_batch({"c0": pa.array([7])})) == b"7\n"


def test_large_batch_matches_row_by_row() -> None:
    n = 5000
    cols = [pa.array(range(n)), pa.array([f"v,{i}" if i % 3 else None for i in range(n)])]
    whole = _write(cols, flavor="aws")
    expected = b"".join(b'%d,"v,%d"\n' % (i, i) if i % 3 else b"%d,\n" % i for i in range(n))
    assert whole == expected


@pytest.mark.parametrize(
    "serialization",
    [{"CSV": {}, "JSON": {}}, {"XML": {}}, {"CSV": {"QuoteFields": "SOMETIMES"}}],
)
def test_bad_output_serialization(serialization: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError):
        RecordWriter(
            serialization, printing=FLAVORS["aws"].printing, output_names=[], output_is_json=[], is_aggregate=False
        )


def _record_writer(output: dict | None, flavor: str) -> RecordWriter:
    return RecordWriter(output, printing=FLAVORS[flavor].printing, output_names=["_1"], output_is_json=[True],
                        is_aggregate=False, row_as_record=True)


def test_whole_row_records_in_aws_json_output() -> None:
    rows = pa.record_batch({"j0": pa.array(['{"a":1,"b":"x"}', None, "[1,2]"])})
    out = _record_writer({"JSON": {}}, "aws").write(rows)
    assert out == b'{"a":1,"b":"x"}\n{}\n{"_1":[1,2]}\n'


def test_whole_row_records_in_aws_csv_output() -> None:
    rows = pa.record_batch({"j0": pa.array(['{"a":1,"b":"x,y","c":null}', '{"a":true}'])})
    out = _record_writer({"CSV": {}}, "aws").write(rows)
    assert out == b'1,"x,y",\ntrue\n'


def test_ceph_select_star_on_json_prints_leaf_lines() -> None:
    row = '{"a":{"b":1,"c":"x"},"a":{"b":2},"l":[{"k":"v1"},{"k":"v2"}]}'
    writer = _record_writer(None, "ceph")
    first = writer.write(pa.record_batch({"j0": pa.array([row])}))
    second = writer.write(pa.record_batch({"j0": pa.array(['{"z":null}'])}))
    assert first == b"a.b. : 1\na.c. : x\nl.k. : v1\n#=== 0 ===#\n"
    assert second == b"z. : null\n#=== 1 ===#\n"
