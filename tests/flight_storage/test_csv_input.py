"""CSV input: Ceph's and AWS/MinIO's parsing rules, chunking, ranges and errors."""

from __future__ import annotations

import io
import itertools
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_storage.errors import InputFormatError, InvalidRequestError
from flight_storage.execution.select_local import run_select
from flight_storage.formats.csv_input import iter_csv_batches, read_csv_header
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.output import RecordWriter
from select_dialect.flavors import FLAVORS

Row = list[str | None]


def _rows(
    data: bytes,
    flavor: str = "ceph",
    csv: dict[str, str] | None = None,
    *,
    opts: dict[str, Any] | None = None,
    num_columns: int | None = None,
    byte_range: tuple[int, int] | None = None,
    block_size: int = 4 << 20,
) -> list[Row]:
    options = CsvInputOptions.from_request(csv or {}, FLAVORS[flavor].reading, **(opts or {}))
    out: list[Row] = []
    batches = iter_csv_batches(
        io.BytesIO(data),
        options,
        num_columns=num_columns,
        byte_range=byte_range,
        block_size=block_size,
    )
    for batch in batches:
        assert batch.schema.names == [f"_{i + 1}" for i in range(batch.num_columns)]
        assert all(f.type == pa.string() and f.nullable for f in batch.schema)
        columns = batch.to_pydict()
        out += [[columns[name][r] for name in columns] for r in range(batch.num_rows)]
    return out


# ----------------------------------------------------------------- Ceph rules


def test_ceph_csv_parser_case() -> None:
    # ceph/s3-tests test_csv_parser
    data = (
        b',first,,,second,third="c31,c32,c33",forth="1,2,3,4",'
        b'fifth=my_string=\\"any_value\\" \\, my_other_string=\\"aaaa\\,bbb\\" ,\n'
    )
    assert _rows(data) == [
        [
            None,
            "first",
            None,
            None,
            "second",
            "third=c31,c32,c33",
            "forth=1,2,3,4",
            'fifth=my_string="any_value" , my_other_string="aaaa,bbb" ',
            None,  # the trailing delimiter adds a NULL column
        ]
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # quote character overrides the field delimiter (and is removed)
        (b'11,22,"a,b,c,d",last\n', ["11", "22", "a,b,c,d", "last"]),
        # escape char disables the next special character and is removed
        (
            b'11,22,str=\\"abcd\\"\\,str2=\\"123\\",last\n',
            ["11", "22", 'str="abcd",str2="123"', "last"],
        ),
        # no closing quote: the record delimiter closes the field
        (b'11,22,a="str,44,55,66\n', ["11", "22", "a=str,44,55,66"]),
        # escape before the record delimiter does not join records
        (b"a,b\\\nc\n", ["a", "b"]),
    ],
)
def test_ceph_parsing_rules(line: bytes, expected: Row) -> None:
    assert _rows(line)[0] == expected


def test_ceph_escape_does_not_join_records() -> None:
    assert _rows(b"a,b\\\nc\n") == [["a", "b"], ["c", None]]


def test_ceph_quote_and_escape_disabled_keeps_everything() -> None:
    # gtest csv_quote_string_and_escape_char:2 (select * reproduces the input)
    data = (
        b'1,   1   ,"Apple,:,fruit",Apple,:,fruit\n\n2,\t2,Apple",:,"fruit,Apple,:,fruit\n'
        b"5,5\t,Apple\\,:\\,fruit,Apple,:,fruit\n"
    )
    rows = _rows(data, csv={"QuoteCharacter": "", "QuoteEscapeCharacter": ""})
    assert rows[0][:6] == ["1", "   1   ", '"Apple', ":", 'fruit"', "Apple"]
    assert rows[1] == [None] * 8  # the empty line is a record
    assert rows[2][2:5] == ['Apple"', ":", '"fruit']
    assert rows[3][2:4] == ["Apple\\", ":\\"]


def test_ceph_quotes_honoured_with_default_escape() -> None:
    # gtest csv_quote_string_and_escape_char:1 input with default quote / escape
    # (_3 must equal _4,_5,_6 joined by ',' on every non-empty row)
    data = (
        b'1,   1   ,"Apple,:,fruit",Apple,:,fruit\n'
        b'4, \t4 ,""Apple",:"","fruit,Apple,:,fruit\n'
        b"5,5\t,Apple\\,:\\,fruit,Apple,:,fruit\n"
    )
    rows = _rows(data)
    assert rows[0][:3] == ["1", "   1   ", "Apple,:,fruit"]
    assert rows[1][:3] == ["4", " \t4 ", "Apple,:,fruit"]
    assert rows[2][:3] == ["5", "5\t", "Apple,:,fruit"]
    assert all(r[2] == ",".join(r[3:6]) for r in rows)  # type: ignore[arg-type]


def test_ceph_comments_empty_lines_and_trim() -> None:
    # gtest csv_comment_line_and_trim_char: '#' lines and empty lines skipped, ' '/'\t' trimmed
    data = b"1,   1   \n\n2,\t2\n\t\t  \t\n#3,#3\t\n4, \t4 \n"
    rows = _rows(
        data,
        csv={"Comments": "#"},
        opts={"extensions": {"comment_empty_lines": True, "trim_chars": [" ", "\t"]}},
    )
    assert rows == [["1", "1"], ["2", "2"], [None, None], ["4", "4"]]


def test_ceph_crlf_line_ends() -> None:
    assert _rows(b"a,b\r\nc,\r\n") == [["a", "b"], ["c", None]]


def test_custom_delimiters() -> None:
    # ceph s3-tests: FieldDelimiter '|' and RecordDelimiter '\t'
    assert _rows(b"1|2\t3|4\t", csv={"FieldDelimiter": "|", "RecordDelimiter": "\t"}) == [
        ["1", "2"],
        ["3", "4"],
    ]
    # multi-character delimiters (MinIO endswithhalfsep.csv)
    assert _rows(b"a,b,c%!a2,b2,c2%", "aws", MINIO_SETTINGS | {"RecordDelimiter": "%!"}) == [
        ["a", "b", "c"],
        ["a2", "b2", "c2%"],
    ]
    assert _rows(b"a::b::\n", csv={"FieldDelimiter": "::"}) == [["a", "b", None]]


# ----------------------------------------------------------------- AWS / MinIO rules

MINIO_CSV = (
    b"id,time,num,num2,text\n"
    b'1,2010-01-01T,7867786,4565.908123,"a text, with comma"\n'
    b"2,2017-01-02T03:04Z,-5, 0.765111,\n"
)


def test_aws_empty_field_is_empty_string_and_header_use() -> None:
    rows = _rows(MINIO_CSV, "aws", {"FileHeaderInfo": "USE"})
    assert rows == [
        ["1", "2010-01-01T", "7867786", "4565.908123", "a text, with comma"],
        ["2", "2017-01-02T03:04Z", "-5", " 0.765111", ""],
    ]
    header = read_csv_header(io.BytesIO(MINIO_CSV), CsvInputOptions.from_request({}, FLAVORS["aws"].reading))
    assert header == ["id", "time", "num", "num2", "text"]


def test_header_none_counts_header_as_data_and_ignore_skips() -> None:
    assert len(_rows(MINIO_CSV, "aws")) == 3
    assert len(_rows(MINIO_CSV, "aws", {"FileHeaderInfo": "IGNORE"})) == 2


# MinIO reads CSV with Go's LazyQuotes, by AWS's rules with these two settings on.
MINIO_SETTINGS = {"Comments": "#", "AllowQuotedRecordDelimiter": "TRUE"}
MINIO_LAZY = {
    "FileHeaderInfo": "USE",
    "QuoteCharacter": '"',
    "QuoteEscapeCharacter": '"',
} | MINIO_SETTINGS
MINIO_FILES = [
    # (name, input after the header line, expected CSV re-written by MinIO's TestReadFailures)
    ("badbarequote", b'ok1,ok2,ok3\r\na "word","b"\r\n', b'ok1,ok2,ok3\n"a ""word""",b\n'),
    ("baddoubleq", b'ok1,ok2,ok3\r\na""b,c\r\n', b'ok1,ok2,ok3\n"a""""b",c\n'),
    ("badextraq", b'ok1,ok2,ok3\r\n"a word",b"\r\n', b'ok1,ok2,ok3\na word,"b"""\n'),
    ("badstartline", b'ok1,ok2,ok3\r\na,"b\r\nc"d,e\r\n', b'ok1,ok2,ok3\na,"b\nc""d,e\n"\n'),
    ("crlfquoted", b'ok1,ok2,ok3\r\n"foo"bar"\r\n', b'ok1,ok2,ok3\n"foo""bar"\n'),
    (
        "oddquote",
        b"ok1,ok2,ok3\r\n" + b'"' * 7 + b",b,c\r\n",
        b"ok1,ok2,ok3\n" + b'"' * 7 + b',b,c\n"\n',
    ),
]


@pytest.mark.parametrize(("name", "body", "expected"), MINIO_FILES, ids=[f[0] for f in MINIO_FILES])
def test_minio_lazy_quote_files_round_trip(name: str, body: bytes, expected: bytes) -> None:
    data = b"header1,header2,header3\r\n" + body
    options = CsvInputOptions.from_request(MINIO_LAZY, FLAVORS["aws"].reading)
    assert read_csv_header(io.BytesIO(data), options) == ["header1", "header2", "header3"]
    out = b""
    for batch in iter_csv_batches(io.BytesIO(data), options, num_columns=None):
        # re-write only each record's own fields, like the MinIO test does
        for row in batch.to_pylist():
            fields = [v for v in row.values() if v is not None]
            single = pa.record_batch({f"c{i}": pa.array([v]) for i, v in enumerate(fields)})
            writer = RecordWriter(
                {"CSV": {}}, printing=FLAVORS["aws"].printing, output_names=list(single.schema.names),
                output_is_json=[False] * len(fields), is_aggregate=False,
            )  # fmt: skip
            out += writer.write(single)
    assert out == expected


def test_minio_badstartline2_select_star_widths() -> None:
    """MinIO prints each record with its own width; so does the engine for ``SELECT *`` read
    by AWS's rules (``SelectPlan.record_writer``)."""
    data = b'header1,header2,header3\r\nok1,ok2,ok3\r\na,b\r\n"d\r\n\r\ne'
    out = run_select(data, "SELECT * FROM S3Object", input_serialization={"CSV": MINIO_LAZY},
                     output_serialization={"CSV": {}}, flavor="aws").records
    assert out == b'ok1,ok2,ok3\na,b\n"d\n\ne"\n'


def test_minio_badstartline2_fields() -> None:
    data = b'header1,header2,header3\r\nok1,ok2,ok3\r\na,b\r\n"d\r\n\r\ne'
    rows = [[v for v in row if v is not None] for row in _rows(data, "aws", MINIO_LAZY)]
    assert rows == [["ok1", "ok2", "ok3"], ["a", "b"], ["d\n\ne"]]


def test_aws_quoted_record_delimiter_needs_the_flag() -> None:
    data = b'1,"x\ny",2\n3,4,5\n'
    assert _rows(data, "aws") == [["1", "x", None], ['y"', "2", None], ["3", "4", "5"]]
    flagged = _rows(data, "aws", {"AllowQuotedRecordDelimiter": "TRUE"})
    assert flagged == [["1", "x\ny", "2"], ["3", "4", "5"]]


def test_aws_escape_character_inside_quotes() -> None:
    rows = _rows(b'"a\\"b",c\n', "aws", {"QuoteEscapeCharacter": "\\"})
    assert rows == [['a"b', "c"]]


def test_minio_comments_setting_and_skipped_empty_lines() -> None:
    assert _rows(b"#x,y\n\na,b\n", "aws", MINIO_SETTINGS) == [["a", "b"]]
    assert _rows(b"#x,y\n\na,b\n", "aws") == [["#x", "y"], ["a", "b"]]


# ----------------------------------------------------------------- widths, batches, ranges


def test_num_columns_pads_and_drops() -> None:
    assert _rows(b"a,b,c\nd\n", num_columns=2) == [["a", "b"], ["d", None]]
    assert _rows(b"a,b,c\nd\n", num_columns=4) == [["a", "b", "c", None], ["d", None, None, None]]
    # the fast (uniform) path too
    assert _rows(b"a,b\nc,d\n", num_columns=3) == [["a", "b", None], ["c", "d", None]]


def test_widest_record_sets_the_width() -> None:
    assert _rows(b"a\nb,c,d\n") == [["a", None, None], ["b", "c", "d"]]


def test_batch_rows() -> None:
    options = CsvInputOptions()
    batches = list(iter_csv_batches(io.BytesIO(b"1\n" * 10), options, num_columns=1, batch_rows=3))
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]


def test_byte_range_reads_records_starting_inside() -> None:
    # MinIO TestCSVRanges/select-all: Start 76, End 109 (inclusive), so [76, 110)
    rows = _rows(MINIO_CSV, "aws", {"FileHeaderInfo": "USE"}, byte_range=(76, 110))
    assert rows == [["2", "2017-01-02T03:04Z", "-5", " 0.765111", ""]]
    # the header is skipped only when the range starts at 0
    assert _rows(MINIO_CSV, "aws", {"FileHeaderInfo": "USE"}, byte_range=(0, 31)) == [
        ["1", "2010-01-01T", "7867786", "4565.908123", "a text, with comma"]
    ]


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 64, 1 << 20])
def test_records_split_across_blocks(block_size: int) -> None:
    # gtest csv_chunk_processing: rows cut by chunk boundaries must be re-joined
    data = b"".join(b'%d,"q,%d",\xc3\xa9\xe2\x82\xac%d,\\,x\n' % (i, i, i) for i in range(200))
    rows = _rows(data, block_size=block_size)
    assert len(rows) == 200
    assert rows[137] == ["137", "q,137", "é€137", ",x"]


# ----------------------------------------------------------------- errors


def test_invalid_utf8_reports_offset() -> None:
    data = b"abc,def\nxy,\xff\xfe\n"
    with pytest.raises(InputFormatError) as info:
        _rows(data)
    assert info.value.code == "InvalidTextEncoding"
    assert info.value.offset == 11
    assert "11" in info.value.message


@pytest.mark.parametrize(
    "data", [b"a,b\n" + b"x" * 300 + b"\nc\n", b'a,"b"\n' + b"x" * 300 + b"\nc\n"]
)
def test_record_over_max_size(data: bytes) -> None:
    options = CsvInputOptions.from_request({}, FLAVORS["ceph"].reading, max_record_size=100)
    with pytest.raises(InputFormatError) as info:
        list(iter_csv_batches(io.BytesIO(data), options, num_columns=None, block_size=64))
    assert info.value.code == "OverMaxRecordSize"
    assert info.value.row == 2


def test_record_over_max_size_in_one_block() -> None:
    options = CsvInputOptions.from_request({}, FLAVORS["aws"].reading, max_record_size=100)
    data = b"a,b\n" * 50 + b"y" * 200 + b"\n" + b"c,d\n" * 50
    with pytest.raises(InputFormatError) as info:
        list(iter_csv_batches(io.BytesIO(data), options, num_columns=None))
    assert info.value.code == "OverMaxRecordSize"
    assert info.value.row == 51


@pytest.mark.parametrize(
    "csv",
    [{"FileHeaderInfo": "MAYBE"}, {"QuoteCharacter": "''"}, {"AllowQuotedRecordDelimiter": "yes"}],
)
def test_bad_options(csv: dict[str, str]) -> None:
    with pytest.raises(InvalidRequestError):
        CsvInputOptions.from_request(csv, FLAVORS["ceph"].reading)


def test_flavour_defaults() -> None:
    ceph = CsvInputOptions.from_request(None, FLAVORS["ceph"].reading)
    aws = CsvInputOptions.from_request(None, FLAVORS["aws"].reading)
    assert (ceph.escape, ceph.quote, ceph.field_delimiter, ceph.record_delimiter) == (
        "\\",
        '"',
        ",",
        "\n",
    )
    assert (aws.escape, aws.quote) == ('"', '"')


# ----------------------------------------------------------------- differential property tests


def _ref_ceph(record: str) -> Row:
    """Ceph's rules, written as plainly as possible (quote '"', escape '\\', field ',')."""
    if record.endswith("\r"):
        record = record[:-1]
    fields: list[str] = []
    cur, in_quote, i = "", False, 0
    while i < len(record):
        c = record[i]
        if c == "\\":
            cur += record[i + 1 : i + 2]
            i += 2
            continue
        if c == '"':
            in_quote = not in_quote
        elif c == "," and not in_quote:
            fields.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    fields.append(cur)
    return [f if f != "" else None for f in fields]


def _ref_lazy(record: str) -> Row:
    """Go encoding/csv with LazyQuotes for one record (quote '"', field ',')."""
    if record.endswith("\r"):
        record = record[:-1]
    fields: list[str] = []
    i, n = 0, len(record)
    while True:
        if i < n and record[i] == '"':
            i += 1
            cur = ""
            while i < n:
                if record[i] != '"':
                    cur += record[i]
                    i += 1
                elif record[i + 1 : i + 2] == '"':
                    cur += '"'
                    i += 2
                elif i + 1 == n or record[i + 1] == ",":
                    i += 1
                    break
                else:
                    cur += '"'
                    i += 1
            fields.append(cur)
        else:
            j = record.find(",", i)
            j = n if j == -1 else j
            fields.append(record[i:j])
            i = j
        if i >= n:
            return fields
        i += 1
        if i == n:
            fields.append("")
            return fields


_RECORD = st.text(alphabet=st.sampled_from(list('ab,"\\é €\r ')), max_size=12).filter(
    lambda r: "\n" not in r
)


def _check(records: list[str], flavor: str, ref: object, block: int) -> None:
    data = "".join(r + "\n" for r in records).encode("utf-8")
    got = _rows(data, flavor, block_size=block)
    expected = [ref(r) for r in records]  # type: ignore[operator]
    if flavor != "ceph":
        expected = [e for r, e in zip(records, expected, strict=False) if r not in ("", "\r")]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=False):
        assert g[: len(e)] == e and all(v is None for v in g[len(e) :])


@settings(max_examples=300, deadline=None)
@given(records=st.lists(_RECORD, max_size=8), block=st.sampled_from([3, 16, 4 << 20]))
def test_ceph_matches_reference(records: list[str], block: int) -> None:
    _check(records, "ceph", _ref_ceph, block)


@settings(max_examples=300, deadline=None)
@given(records=st.lists(_RECORD, max_size=8), block=st.sampled_from([3, 16, 4 << 20]))
def test_aws_matches_reference(records: list[str], block: int) -> None:
    _check(records, "aws", _ref_lazy, block)


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(
        st.lists(st.text(alphabet='ab,"é', max_size=5), min_size=3, max_size=3),
        min_size=1,
        max_size=30,
    ),
    quote_all=st.booleans(),
)
def test_aws_fast_path_matches_reference(records: list[list[str]], quote_all: bool) -> None:
    """Well-formed uniform RFC files take the pyarrow.csv path; it must agree."""
    lines = []
    for fields in records:
        lines.append(
            ",".join(
                '"' + f.replace('"', '""') + '"' if quote_all or '"' in f or "," in f else f
                for f in fields
            )
        )
    _check(lines, "aws", _ref_lazy, 4 << 20)


_FIELD = st.text(alphabet=st.sampled_from(list('ab,"\né ')), max_size=5)


def _rfc_line(fields: list[str], quote_all: bool) -> str:
    def one(f: str) -> str:
        needs = quote_all or any(c in f for c in ',"\n')
        return '"' + f.replace('"', '""') + '"' if needs else f

    return ",".join(one(f) for f in fields)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(
        st.lists(_FIELD, min_size=1, max_size=4).filter(lambda r: r != [""]), max_size=10
    ),
    quote_all=st.booleans(),
    block=st.sampled_from([2, 5, 4 << 20]),
    cuts=st.lists(st.integers(1, 400), max_size=4),
)
def test_quoted_record_delimiters_and_ranges(
    records: list[list[str]], quote_all: bool, block: int, cuts: list[int]
) -> None:
    """Quoted fields may hold line ends (MinIO); ranges split the same records."""
    data = "".join(_rfc_line(r, quote_all) + "\n" for r in records).encode("utf-8")
    csv = {"AllowQuotedRecordDelimiter": "TRUE"}
    whole = [[v for v in row if v is not None] for row in _rows(data, "aws", csv, block_size=block)]
    assert whole == records
    bounds = sorted({0, len(data), *[c for c in cuts if c < len(data)]})
    pieces: list[list[str]] = []
    for start, stop in itertools.pairwise(bounds):
        got = _rows(data, "aws", csv, block_size=block, byte_range=(start, stop))
        pieces += [[v for v in row if v is not None] for row in got]
    assert pieces == records


_FIELD_TEXT = st.text(alphabet=st.sampled_from(list('ab,"é x')), max_size=6)


@st.composite
def _ceph_fast_records(draw: Any) -> list[str]:
    """Three-field records without escapes: boundary-quoted, mid-quoted and plain fields."""
    records = []
    for _ in range(draw(st.integers(1, 8))):
        fields = []
        for _ in range(3):
            text = draw(_FIELD_TEXT)
            style = draw(st.sampled_from(["plain", "quoted", "raw"]))
            if style == "quoted":
                fields.append('"' + text.replace('"', "") + '"')
            elif style == "plain":
                fields.append(text.replace('"', "").replace(",", ""))
            else:
                fields.append(text)  # may hold quotes and delimiters anywhere
        records.append(",".join(fields))
    return records


@settings(max_examples=300, deadline=None)
@given(records=_ceph_fast_records(), block=st.sampled_from([16, 4 << 20]))
def test_ceph_pyarrow_path_matches_reference(records: list[str], block: int) -> None:
    """Blocks whose quotes all open or close a field take pyarrow.csv; the rest fall back."""
    _check(records, "ceph", _ref_ceph, block)
