"""JSON input reader: row selection per flavour, path text, streaming, byte ranges, errors."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_storage.errors import InputFormatError, InvalidRequestError
from flight_storage.formats.json_input import JsonInputOptions, iter_json_batches
from select_dialect.flavors import FLAVORS

WHOLE = {"row": ()}

# A Ceph-style person document (modelled on the corpus's json_queries input): duplicate
# top-level keys, an array of objects, nested arrays and a key after the array.
PERSON = """
{
"firstName": "Joe",
"lastName": "Jackson",
"age": "twenty",
"address": {"streetAddress": "101", "city": "San Diego"},

"firstName": "Joe_2",
"age": 21,

"phoneNumbers": [
  { "type": "home1", "number": "734928_1", "addr": 11 },
  { "type": "home2", "number": "734928_2", "addr": 22 },
  { "type": "home3", "number": "734928_3", "addr": 33 },
  "element-3",
  [ 11, 22, [44, 55], "post 3D", { "key_in_array": "value_per_key" } ],
  { "classname": "stam" }
],
"key_after_array": "XXX",
"description": { "main_desc": "value_1", "second_desc": "value_2" }
}
"""

NESTED = """
{"root": {
  "hello": "world",
  "nested_obj": {
    "hello2": "world",
    "nested2": {"c1": "c1_value", "array_nested2": [10, 20, 30, 40]},
    "nested3": {"hello3": "world", "nested4": {"c1": "c1_nested4", "arr": [100, 200]}}
  },
  "array_1": [1, 2, 3, 4]
}}
"""


class Trickle(io.RawIOBase):
    """A stream that returns at most ``step`` bytes per read; seekable only when ``seekable``
    (a byte range needs a seekable source, as the CSV reader's does)."""

    def __init__(self, data: bytes, step: int, seekable: bool = False) -> None:
        self.data = data
        self.step = step
        self.position = 0
        self._seekable = seekable

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._seekable

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if not self._seekable:
            raise io.UnsupportedOperation("seek")
        self.position = offset if whence == io.SEEK_SET else self.position + offset
        return self.position

    def tell(self) -> int:
        return self.position

    def read(self, size: int = -1) -> bytes:
        limit = self.step if size < 0 else min(size, self.step)
        chunk = self.data[self.position : self.position + limit]
        self.position += len(chunk)
        return chunk


def read_rows(
    data: str | bytes,
    *,
    json_type: str = "DOCUMENT",
    from_path: Sequence[tuple[Any, ...]] = (),
    paths: Mapping[str, Sequence[tuple[Any, ...]]] = WHOLE,
    flavor: str = "ceph",
    byte_range: tuple[int, int] | None = None,
    step: int | None = None,
    batch_rows: int = 8192,
) -> list[dict[str, str | None]]:
    raw = data.encode() if isinstance(data, str) else data
    source: Any = io.BytesIO(raw) if step is None else Trickle(raw, step,
                                                                byte_range is not None)
    rows: list[dict[str, str | None]] = []
    for batch in iter_json_batches(
        source,
        JsonInputOptions(json_type),
        from_path=from_path,
        paths=paths,
        reading=FLAVORS[flavor].reading,
        byte_range=byte_range,
        batch_rows=batch_rows,
    ):
        rows.extend(batch.to_pylist())
    return rows


def column(rows: list[dict[str, str | None]], name: str = "row") -> list[str | None]:
    return [row[name] for row in rows]


def key(name: str) -> tuple[str, str]:
    return ("key", name)


def index(number: int) -> tuple[str, int]:
    return ("index", number)


ANY_INDEX = ("any_index",)
ANY_KEY = ("any_key",)


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("request_json", "expected"),
    [
        (None, "DOCUMENT"),
        ({}, "DOCUMENT"),
        ({"Type": "DOCUMENT"}, "DOCUMENT"),
        ({"Type": "LINES"}, "LINES"),
        ({"Type": "lines"}, "LINES"),
    ],
)
def test_options_from_request(request_json: dict[str, str] | None, expected: str) -> None:
    assert JsonInputOptions.from_request(request_json).type == expected


def test_options_reject_unknown_type() -> None:
    with pytest.raises(InvalidRequestError) as info:
        JsonInputOptions.from_request({"Type": "ARRAY"})
    assert info.value.code == "InvalidJsonType"


# ----------------------------------------------------------------------------- values


def test_value_text_is_compact_json() -> None:
    doc = '{"i": 1, "s": "abc", "t": true, "f": false, "n": null, "a": [1, 2],' \
        ' "o": {"a": 1}, "x": 2.50, "e": 1E2, "u": "é\\u00e9\\n\\"q\\""}'
    names = ["i", "s", "t", "f", "n", "a", "o", "x", "e", "u"]
    rows = read_rows(doc, paths={name: (key(name),) for name in names})
    assert rows == [
        {
            "i": "1",
            "s": '"abc"',
            "t": "true",
            "f": "false",
            "n": "null",
            "a": "[1,2]",
            "o": '{"a":1}',
            "x": "2.5",
            "e": "100",
            "u": '"éé\\n\\"q\\""',
        }
    ]


def test_missing_is_null_but_json_null_is_text() -> None:
    rows = read_rows(
        '{"a": null, "b": 5, "c": [1]}',
        paths={
            "null": (key("a"),),
            "absent": (key("zzz"),),
            "into_scalar": (key("b"), key("x")),
            "index_into_object": (key("a"), index(0)),
            "out_of_range": (key("c"), index(1)),
            "negative": (key("c"), index(-1)),
            "key_on_array": (key("c"), key("x")),
        },
    )
    assert rows == [
        {
            "null": "null",
            "absent": None,
            "into_scalar": None,
            "index_into_object": None,
            "out_of_range": None,
            "negative": None,
            "key_on_array": None,
        }
    ]


def test_keys_match_case_insensitively_last_match_wins() -> None:
    rows = read_rows(
        '{"Name": 1, "other": 0, "NAME": 2}{"name": 1, "Name": 2, "name": 3}',
        paths={"lower": (key("name"),), "upper": (key("NAME"),), "mixed": (key("nAmE"),)},
    )
    assert rows == [
        {"lower": "2", "upper": "2", "mixed": "2"},
        {"lower": "3", "upper": "3", "mixed": "3"},
    ]


def test_schema_has_one_nullable_utf8_column_per_path_in_order() -> None:
    batches = list(
        iter_json_batches(
            io.BytesIO(b'{"a": 1}'),
            JsonInputOptions(),
            from_path=(),
            paths={"z": (key("a"),), "a": (), "m": (key("missing"),)},
        )
    )
    assert batches[0].schema == pa.schema(
        [pa.field("z", pa.string()), pa.field("a", pa.string()), pa.field("m", pa.string())]
    )
    assert batches[0].to_pylist() == [{"z": "1", "a": '{"a":1}', "m": None}]


def test_paths_sharing_prefixes_and_repeated_paths() -> None:
    rows = read_rows(
        NESTED,
        paths={
            "a": (key("root"), key("nested_obj"), key("nested2"), key("c1")),
            "b": (key("root"), key("nested_obj"), key("nested3"), key("nested4"), key("c1")),
            "c": (key("ROOT"), key("array_1"), index(3)),
            "d": (key("root"), key("nested_obj"), key("nested2"), key("c1")),
            "e": (key("root"), key("hello")),
        },
    )
    assert rows == [
        {"a": '"c1_value"', "b": '"c1_nested4"', "c": "4", "d": '"c1_value"', "e": '"world"'}
    ]


# ----------------------------------------------------------------------------- ceph rows


@pytest.mark.parametrize(
    ("from_path", "count"),
    [
        ((), 1),
        ((key("phoneNumbers"),), 11),  # 3 objects, a string, 6 flattened elements, 1 object
        ((key("phonenumbers"),), 11),
        ((key("address"),), 1),
        ((key("firstName"),), 2),  # every duplicate is a row
        ((key("nothing"),), 0),
        ((key("phoneNumbers"), key("addr")), 3),
        ((key("phoneNumbers"), index(4)), 6),  # the nested array, flattened
    ],
)
def test_ceph_from_path_row_counts(from_path: tuple[tuple[Any, ...], ...], count: int) -> None:
    assert len(read_rows(PERSON, from_path=from_path, paths={})) == count


def test_ceph_projection_sees_last_duplicate() -> None:
    rows = read_rows(
        PERSON,
        paths={
            "first": (key("firstname"),),
            "after": (key("key_after_array"),),
            "age": (key("age"),),
            "desc": (key("description"), key("main_desc")),
        },
    )
    assert rows == [{"first": '"Joe_2"', "after": '"XXX"', "age": "21", "desc": '"value_1"'}]


def test_whole_row_keeps_every_duplicate_in_document_order() -> None:
    for flavor in ("ceph", "aws"):
        (row,) = column(read_rows(PERSON, flavor=flavor))
        assert row is not None
        pairs = json.loads(row, object_pairs_hook=lambda p: p)
        assert [name for name, _ in pairs] == [
            "firstName", "lastName", "age", "address", "firstName", "age",
            "phoneNumbers", "key_after_array", "description",
        ]  # fmt: skip
        assert pairs[0][1] == "Joe" and pairs[4][1] == "Joe_2"
        assert json.loads(row)["firstName"] == "Joe_2"  # a last-wins reader sees Joe_2


def test_ceph_rows_of_an_array_of_objects() -> None:
    rows = read_rows(
        PERSON,
        from_path=(key("phonenumbers"),),
        paths={"addr": (key("addr"),), "first": (key("firstName"),), "row": ()},
    )
    assert column(rows, "addr")[:3] == ["11", "22", "33"]
    assert column(rows, "addr")[3:] == [None] * 8
    assert column(rows, "first") == [None] * 11
    assert column(rows, "row")[3:9] == ['"element-3"', "11", "22", "44", "55", '"post 3D"']


def test_ceph_multi_dimensional_array_access() -> None:
    phones = key("phoneNumbers")
    rows = read_rows(
        PERSON,
        paths={
            "a": (phones, index(4), index(2), index(1)),
            "b": (phones, index(4), index(2), index(2)),
            "c": (phones, index(4), index(3)),
            "d": (phones, index(3)),
            "e": (phones, index(4), index(4), key("KEY_IN_ARRAY")),
            "f": (phones, index(5), key("classname")),
            "g": (phones, index(4), index(2)),
        },
    )
    assert rows == [
        {
            "a": "55",
            "b": None,
            "c": '"post 3D"',
            "d": '"element-3"',
            "e": '"value_per_key"',
            "f": '"stam"',
            "g": "[44,55]",
        }
    ]


@pytest.mark.parametrize(
    ("from_path", "paths", "expected"),
    [
        (
            (key("root"), key("nested_obj"), key("nested3"), key("nested4")),
            {"x": (key("arr"), index(0)), "y": (key("arr"), index(5))},
            [{"x": "100", "y": None}],
        ),
        (
            (ANY_KEY, key("nested_obj"), ANY_KEY, key("nested4")),
            {"x": (key("c1"),)},
            [{"x": '"c1_nested4"'}],
        ),
        (
            (key("root"), key("nested_obj"), ANY_KEY),
            {"x": (key("c1"),)},
            [{"x": None}, {"x": '"c1_value"'}, {"x": None}],
        ),
        ((key("root"), key("array_1")), {"x": ()}, [{"x": "1"}, {"x": "2"}, {"x": "3"}, {"x": "4"}]),
        ((key("root"), key("array_1"), ANY_INDEX), {"x": ()}, [{"x": str(n)} for n in range(1, 5)]),
        ((key("root"), key("array_1"), index(1)), {"x": ()}, [{"x": "2"}]),
    ],
)
def test_ceph_from_paths_with_wildcards_and_indexes(
    from_path: tuple[tuple[Any, ...], ...],
    paths: dict[str, tuple[tuple[Any, ...], ...]],
    expected: list[dict[str, str | None]],
) -> None:
    assert read_rows(NESTED, from_path=from_path, paths=paths) == expected


def test_ceph_duplicate_keys_on_the_from_path_each_give_rows() -> None:
    doc = """{"root": [
        {"g": {"entry": {"see": ["GML", "XML"], "post": {"a": 1}},
               "entry": {"see": ["GML", "XML"], "post": {"a": 2}}}},
        {"g": {"entry": {"see": ["GML", "XML"]}}}
    ]}"""
    see = (key("root"), key("g"), key("entry"), key("see"))
    post = (key("root"), key("g"), key("entry"), key("post"))
    assert len(read_rows(doc, from_path=see, paths={})) == 6
    assert column(read_rows(doc, from_path=post, paths={"a": (key("a"),)}), "a") == ["1", "2"]
    assert len(read_rows(doc, from_path=(key("root"),), paths={})) == 2


def test_ceph_top_level_array_gives_one_row_per_element() -> None:
    doc = '[{"authors": [{"id": 2312688602}, {"id": 123}]}, {"authors": []}]'
    rows = read_rows(doc, paths={"id": (key("authors"), index(0), key("id"))})
    assert column(rows, "id") == ["2312688602", None]
    assert len(read_rows(doc, from_path=(key("authors"),), paths={})) == 2


# ----------------------------------------------------------------------------- aws rows

RULES = (
    '{ "Rules": [ {"id": "1"}, {"expr": "y > x"}, {"id": "2", "expr": "z = DEBUG"} ]}\n'
    '{ "created": "June 27", "modified": "July 6" }\n'
)


def test_aws_wildcard_from_path_keeps_missing_rows() -> None:
    rows = read_rows(
        RULES,
        json_type="LINES",
        flavor="aws",
        from_path=(key("Rules"), ANY_INDEX, key("id")),
        paths={"id": ()},
    )
    assert column(rows, "id") == ['"1"', None, '"2"', None]


def test_aws_top_level_array_is_one_row() -> None:
    doc = '[{"staff": [{"name": "J", "kids": 2}], "country": "USA"}]'
    assert column(read_rows(doc, flavor="aws")) == [
        '[{"staff":[{"name":"J","kids":2}],"country":"USA"}]'
    ]
    for from_path in [(key("staff"),), (key("staff"), ANY_INDEX)]:
        rows = read_rows(doc, flavor="aws", from_path=from_path, paths={"row": (), "n": (key("name"),)})
        assert rows == [{"row": None, "n": None}]


def test_aws_array_elements_and_whole_array() -> None:
    doc = '{"elements": [{"t": "a"}, {"t": "b"}], "data": "x"}\n{"elements": []}'
    elements = read_rows(
        doc, flavor="aws", from_path=(key("elements"), ANY_INDEX), paths={"t": (key("t"),)}
    )
    assert column(elements, "t") == ['"a"', '"b"']
    arrays = read_rows(doc, flavor="aws", from_path=(key("elements"),), paths={"row": ()})
    assert column(arrays) == ['[{"t":"a"},{"t":"b"}]', "[]"]


def test_aws_scalar_documents_are_rows() -> None:
    doc = '"a"\n1\n3.145\n["a"]\n{}\n{\n    "a": 1\n}\n'
    assert column(read_rows(doc, flavor="aws")) == ['"a"', "1", "3.145", '["a"]', "{}", '{"a":1}']


def test_aws_any_key_from_path() -> None:
    doc = '{"a": {"x": 1, "y": [2]}}'
    assert column(read_rows(doc, flavor="aws", from_path=(key("a"), ANY_KEY))) == ["1", "[2]"]


# ----------------------------------------------------------------------------- wildcard paths

ARRAYS = (
    '{"id": 0, "synonyms": ["foo", "bar"]}\n'
    '{"id": 2, "numbers": [2, 3.0, 4]}\n'
    '{"id": 3, "nested": [[2, 3.0, 4], [7, 8.5, 9]], "objs": [{"a": 1}, {"b": 2}, {"a": 3}]}\n'
)


def test_wildcard_paths_are_json_arrays_of_what_they_reach() -> None:
    rows = read_rows(
        ARRAYS,
        json_type="LINES",
        flavor="aws",
        paths={
            "syn": (key("synonyms"), ANY_INDEX),
            "nested": (key("nested"), ANY_INDEX),
            "flat": (key("nested"), ANY_INDEX, ANY_INDEX),
            "second": (key("nested"), ANY_INDEX, index(1)),
            "a": (key("objs"), ANY_INDEX, key("a")),
            "values": (key("objs"), index(0), ANY_KEY),
        },
    )
    assert rows == [
        {"syn": '["foo","bar"]', "nested": None, "flat": None, "second": None, "a": None,
         "values": None},
        {"syn": None, "nested": None, "flat": None, "second": None, "a": None, "values": None},
        {"syn": None, "nested": "[[2,3,4],[7,8.5,9]]", "flat": "[2,3,4,7,8.5,9]",
         "second": "[3,8.5]", "a": "[1,3]", "values": "[1]"},
    ]  # fmt: skip


def test_wildcard_on_the_wrong_kind_is_missing() -> None:
    rows = read_rows(
        '{"s": "x", "o": {"k": 1}, "e": []}',
        paths={
            "scalar": (key("s"), ANY_INDEX),
            "object": (key("o"), ANY_INDEX),
            "array_any_key": (key("e"), ANY_KEY),
            "empty": (key("e"), ANY_INDEX),
        },
    )
    assert rows == [{"scalar": None, "object": None, "array_any_key": None, "empty": "[]"}]


# ----------------------------------------------------------------------------- DOCUMENT stream


def test_concatenated_and_pretty_printed_documents() -> None:
    doc = '{"a": {"b0": "s"}, "c": "d0"}{"a": {"b1": "s"}, "c": "d1"}  \n\n{\n "c":\n  "d2"\n}\t'
    assert column(read_rows(doc, paths={"c": (key("c"),)}), "c") == ['"d0"', '"d1"', '"d2"']


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64])
def test_documents_split_across_reads(step: int) -> None:
    doc = PERSON + NESTED + ' 123 456\n"str\\"ing" true null -1.5e3 [1,[2]]{"k":"é€😀"}'
    expected = read_rows(doc, flavor="aws")
    assert read_rows(doc, flavor="aws", step=step) == expected
    assert column(expected)[-8:] == [
        "123", "456", '"str\\"ing"', "true", "null", "-1500", "[1,[2]]", '{"k":"é€😀"}'
    ]  # fmt: skip


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    documents=st.lists(json_values, min_size=1, max_size=6),
    indent=st.sampled_from([None, 0, 2]),
    separator=st.sampled_from(["", " ", "\n", "\r\n\t"]),
    step=st.integers(min_value=1, max_value=40),
)
def test_any_document_stream_reads_the_same_in_any_chunking(
    documents: list[Any], indent: int | None, separator: str, step: int
) -> None:
    texts = [json.dumps(document, indent=indent, ensure_ascii=False) for document in documents]
    if separator == "":
        # Two numbers or literals must not touch; containers and strings may.
        texts = [text if text[-1] in '}]"' else text + " " for text in texts]
    data = separator.join(texts)
    rows = read_rows(data, flavor="aws", step=step)
    assert [json.loads(text) for text in column(rows)] == documents  # type: ignore[arg-type]


def test_document_rows_are_batched() -> None:
    doc = '{"root": [' + ",".join(f'{{"c": {n}}}' for n in range(10)) + "]}"
    batches = list(
        iter_json_batches(
            io.BytesIO(doc.encode()),
            JsonInputOptions(),
            from_path=(key("root"),),
            paths={"c": (key("c"),)},
            batch_rows=3,
        )
    )
    assert [batch.num_rows for batch in batches] == [3, 3, 3, 1]
    assert [v for batch in batches for v in batch.column(0).to_pylist()] == [
        str(n) for n in range(10)
    ]


def test_no_paths_still_counts_rows() -> None:
    batches = list(
        iter_json_batches(
            io.BytesIO(b'{"a": 1}\n{"a": 2}\n{"a": 3}\n'),
            JsonInputOptions("LINES"),
            from_path=(),
            paths={},
            batch_rows=2,
        )
    )
    assert [(batch.num_rows, batch.num_columns) for batch in batches] == [(2, 0), (1, 0)]


def test_empty_object_gives_no_rows() -> None:
    assert read_rows("") == []
    assert read_rows(" \n\t ") == []
    assert read_rows("\n\n", json_type="LINES") == []


def test_utf8_bom_is_skipped() -> None:
    data = b'\xef\xbb\xbf{"a": 1}'
    assert column(read_rows(data)) == ['{"a":1}']
    assert column(read_rows(data, step=1)) == ['{"a":1}']
    assert column(read_rows(data, json_type="LINES")) == ['{"a":1}']


# ----------------------------------------------------------------------------- LINES


def test_lines_with_blank_lines_crlf_and_indentation() -> None:
    data = '{"id": 0}\r\n\n\t{"id": 1}  \n   \n{"id": 2}'
    assert column(read_rows(data, json_type="LINES", paths={"id": (key("id"),)}), "id") == [
        "0",
        "1",
        "2",
    ]


def lines_object(values: list[Any], blank_every: int) -> bytes:
    out = []
    for number, value in enumerate(values):
        out.append(json.dumps({"n": number, "v": value}, ensure_ascii=False))
        if blank_every and number % blank_every == 0:
            out.append("")
    return ("\n".join(out) + "\n").encode()


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.text(max_size=6) | st.integers(), min_size=1, max_size=25),
    blank_every=st.integers(min_value=0, max_value=4),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=6),
    step=st.sampled_from([None, 1, 3, 17]),
)
def test_byte_ranges_read_every_line_exactly_once(
    values: list[Any], blank_every: int, cuts: list[int], step: int | None
) -> None:
    data = lines_object(values, blank_every)
    bounds = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    numbers: list[str | None] = []
    for start, stop in pairwise(bounds):
        rows = read_rows(
            data, json_type="LINES", paths={"n": (key("n"),)}, byte_range=(start, stop),
            step=step,
        )
        numbers.extend(column(rows, "n"))
    assert numbers == [str(n) for n in range(len(values))]


def test_byte_range_takes_records_starting_in_range() -> None:
    data = b'{"n": 0}\n{"n": 1}\n{"n": 2}\n'  # records start at bytes 0, 9, 18

    def numbers(start: int, stop: int) -> list[str | None]:
        rows = read_rows(data, json_type="LINES", paths={"n": (key("n"),)},
                         byte_range=(start, stop))
        return column(rows, "n")

    assert numbers(0, 1) == ["0"]
    assert numbers(0, 10) == ["0", "1"]
    assert numbers(1, 10) == ["1"]
    assert numbers(9, 10) == ["1"]
    assert numbers(9, 9) == []  # an empty range
    assert numbers(10, 18) == []
    assert numbers(10, 19) == ["2"]
    assert numbers(26, 27) == []
    assert numbers(40, 51) == []


def test_lines_errors_name_record_and_byte_offset() -> None:
    data = b'{"a": 1}\n\n{"a": 2}\n{"a": 3,}\n'
    with pytest.raises(InputFormatError) as info:
        read_rows(data, json_type="LINES")
    assert info.value.code == "JSONParsingError"
    assert info.value.row == 3
    assert info.value.offset == data.index(b"}\n", 20)
    assert "record 3" in info.value.message


@pytest.mark.parametrize(
    "line",
    [
        '{"a": 1} {"b": 2}',  # two values on one line
        '{"a":',  # a value spanning lines is not a line
        "[1, 2",
        "NaN",
        '{"x": Infinity}',
        "1e400",
        "[" * 5000 + "]" * 5000,
        "9" * 5000,
        "'single'",
    ],
)
def test_invalid_lines_are_parsing_errors(line: str) -> None:
    data = '{"ok": 1}\n' + line + '\n"b"\n'
    with pytest.raises(InputFormatError) as info:
        read_rows(data, json_type="LINES")
    assert info.value.code == "JSONParsingError"
    assert info.value.row == 2


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        ('{"a": 1}\n{"a": 1,,}', 17),
        ('{"a": 1}\n{"a": [1, 2}', 20),
        ('{"a": 1}  {"a": "unterminated', 16),
        ('{"a": 1} {"b": ', 15),
        ('{"a": 1} tru', 9),
        ('{"a": 1} NaN', 9),
        ('{"a": 1} ' + "[" * 5000, 9),
        ('{"a": 1} ]', 9),
    ],
)
def test_document_errors_name_record_and_offset(data: str, offset: int) -> None:
    for step in (None, 1, 4):
        with pytest.raises(InputFormatError) as info:
            read_rows(data, step=step)
        assert info.value.code == "JSONParsingError"
        assert info.value.row == 2
        assert info.value.offset == offset


@pytest.mark.parametrize("json_type", ["DOCUMENT", "LINES"])
def test_number_beyond_double_range_is_a_parsing_error(json_type: str) -> None:
    with pytest.raises(InputFormatError) as info:
        read_rows('{"a": 1}\n{"x": [1e400]}\n', json_type=json_type)
    assert info.value.code == "JSONParsingError"
    assert info.value.row == 2


def test_document_error_offset_counts_bytes_not_characters() -> None:
    data = '{"é€😀": 1}{"é€😀": ,}'
    with pytest.raises(InputFormatError) as info:
        read_rows(data, step=3)
    assert info.value.offset == data.encode().index(b",")


@pytest.mark.parametrize("json_type", ["DOCUMENT", "LINES"])
@pytest.mark.parametrize("step", [None, 1, 2])
def test_invalid_utf8(json_type: str, step: int | None) -> None:
    data = b'{"a": "ok"}\n{"a": "\xc3\x28"}\n'
    with pytest.raises(InputFormatError) as info:
        read_rows(data, json_type=json_type, step=step)
    assert info.value.code == "InvalidTextEncoding"
    assert info.value.offset == data.index(b"\xc3")


def test_truncated_utf8_at_end() -> None:
    with pytest.raises(InputFormatError) as info:
        read_rows(b'"abc\xe2\x82', step=2)
    assert info.value.code == "InvalidTextEncoding"


def test_byte_range_with_document_input_is_rejected() -> None:
    with pytest.raises(InvalidRequestError):
        read_rows('{"a": 1}', byte_range=(0, 3))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"paths": {"x": (("attribute", "a"),)}},
        {"paths": {"x": (("index", "1"),)}},
        {"from_path": (("key",),)},
        {"batch_rows": 0},
    ],
)
def test_programming_errors_are_value_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        read_rows('{"a": 1}', **kwargs)


@settings(max_examples=150, deadline=None)
@given(
    documents=st.lists(st.lists(json_values, max_size=5) | json_values, min_size=1, max_size=4),
    path=st.sampled_from([(), (key("a"),), (("any_key",),), (key("a"), ("index", 0))]),
    step=st.integers(min_value=1, max_value=40),
)
def test_top_level_arrays_read_element_by_element_give_the_rows_of_the_whole(
    documents: list[Any], path: tuple[tuple[Any, ...], ...], step: int
) -> None:
    data = "\n".join(json.dumps(document) for document in documents)
    # The same documents under a key are not split: the path through the key reaches each
    # array whole, and Ceph's key steps pass through arrays, so the rows must agree.
    wrapped = "\n".join(json.dumps({"k": document}) for document in documents)
    expected = read_rows(wrapped, from_path=(key("k"), *path))
    assert read_rows(data, from_path=path, step=step) == expected


def _read_limited(data: bytes, flavor: str, limit: int) -> int:
    rows = 0
    for batch in iter_json_batches(
        io.BytesIO(data), JsonInputOptions(), from_path=(), paths={"v": (key("v"),)},
        reading=FLAVORS[flavor].reading, max_record_size=limit,
    ):
        rows += batch.num_rows
    return rows


@pytest.mark.slow  # a 10+ MiB array under tracemalloc (7 s)
def test_a_large_top_level_array_is_streamed_under_the_record_limit() -> None:
    elements = 200_000
    data = ("[" + ",".join(f'{{"v": {n}, "pad": "{"x" * 40}"}}' for n in range(elements)) + "]")
    raw = data.encode()
    assert len(raw) > 10 << 20
    tracemalloc.start()
    try:
        assert _read_limited(raw, "ceph", 1 << 20) == elements
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The document is over 10 MiB, its parsed form several times that; held one element
    # (and one read block) at a time, far less is live at once.
    assert peak < len(raw)


@pytest.mark.parametrize(
    ("flavor", "document"),
    [
        ("aws", "[" + ",".join(['{"v": 1}'] * 300_000) + "]"),  # aws: the array is one row
        ("ceph", '{"v": "' + "x" * (2 << 20) + '"}'),
        ("ceph", '[1, {"v": "' + "é" * (1 << 20) + '"}]'),
        ("ceph", '[1, {"v": "' + "é" * (300 << 10) + '"}]'),  # exactly held, under the limit
    ],
)
def test_a_document_value_over_the_record_limit_is_an_error(flavor: str, document: str) -> None:
    raw = document.encode()
    if len(raw) <= 1 << 20:
        assert _read_limited(raw, flavor, 1 << 20) == 2
        return
    with pytest.raises(InputFormatError) as info:
        _read_limited(raw, flavor, 1 << 20)
    assert info.value.code == "OverMaxRecordSize"


@pytest.mark.parametrize(
    "document", ["[1, 2", "[1,", "[", "[1 2]", "[,1]", "[1,]", "[1]]", "[{]"]
)
def test_a_broken_top_level_array_is_a_parsing_error(document: str) -> None:
    with pytest.raises(InputFormatError) as info:
        read_rows(document)
    assert info.value.code == "JSONParsingError"
