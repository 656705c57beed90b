"""Unit tests of the conformance runner: each comparison must pass right answers and fail
wrong ones. The engine is a fake that returns hand-made records (or raises)."""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import corpus, run

CORPUS_DIR = corpus.default_corpus_dir()
needs_corpus = pytest.mark.skipif(
    not (CORPUS_DIR / "generators.py").exists(), reason="shared corpus not present"
)

CSV_IN = {"CSV": {"FileHeaderInfo": "NONE", "FieldDelimiter": ",", "RecordDelimiter": "\n"}}
CSV_OUT = {"CSV": {"FieldDelimiter": ",", "RecordDelimiter": "\n"}}
S3TESTS_XML = (
    "output normalized: remove_xml_tags_from_result: split the concatenated Records payloads "
    "on '\\n', drop lines that contain 'Payload' or 'Records' at index>0, re-join every kept "
    "line with a trailing '\\n'"
)


@dataclass
class FakeResult:
    records: bytes
    stats: dict[str, int] = field(default_factory=dict)


class FakeError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class QuerySyntaxError(FakeError):
    """Named like the dialect's syntax error class (the runner recognises it by name)."""


Answer = Callable[[bytes, str, dict[str, Any]], Any]


@dataclass
class FakeEngine:
    answer: Answer
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, data: bytes, expression: str, **kwargs: Any) -> FakeResult:
        self.calls.append({"data": data, "expression": expression, **kwargs})
        got = self.answer(data, expression, kwargs)
        if isinstance(got, BaseException):
            raise got
        if isinstance(got, FakeResult):
            return got
        return FakeResult(got.encode() if isinstance(got, str) else got)


def fixed(text: str | Exception) -> Answer:
    return lambda data, query, kwargs: text


def by_query(table: Mapping[str, str | Exception]) -> Answer:
    return lambda data, query, kwargs: table[query]


def make_case(kind: str, file: str = "ceph_s3select_gtest", name: str = "T.t", **raw: Any
              ) -> corpus.Case:
    raw.setdefault("format", "csv")
    raw.setdefault("input", "1,1,1,1\n")
    raw.setdefault("input_serialization", CSV_IN)
    raw.setdefault("output_serialization", CSV_OUT)
    raw.setdefault("query", "select _1 from s3object;")
    raw.setdefault("notes", "")
    case_id = f"{file}:{name}:1"
    return corpus.Case(case_id, kind, file, {"id": case_id, "kind": kind, **raw})


def judge(case: corpus.Case, answer: Answer, **ctx: Any) -> corpus.Outcome:
    engine = FakeEngine(answer)
    context = corpus.RunContext(engine=engine, corpus_dir=CORPUS_DIR, **ctx)
    return corpus.run_case(case, context)


def passes(case: corpus.Case, answer: Answer, **ctx: Any) -> bool:
    outcome = judge(case, answer, **ctx)
    assert outcome.status in (corpus.PASSED, corpus.FAILED), outcome
    return outcome.status == corpus.PASSED


# ----------------------------------------------------------------------- constant / harness
def test_exact_multi_row_harness() -> None:
    case = make_case("constant", expected="128",
                     notes="multi-row harness run_s3select(query,input)")
    assert passes(case, fixed("128"))
    assert not passes(case, fixed("128\n"))
    assert not passes(case, fixed("127"))


def test_ceph_single_row_harness_keeps_first_field_of_first_row() -> None:
    case = make_case(
        "constant", expected="2007-01-01T00:00:00+00:00",
        notes="single-row harness run_s3select(query): input '1,1,1,1\\n'; engine output is cut",
    )
    assert passes(case, fixed("2007-01-01T00:00:00+00:00\n"))
    assert passes(case, fixed("2007-01-01T00:00:00+00:00,other\nsecond row\n"))
    assert not passes(case, fixed("2007-01-01T00:00:00Z\n"))
    assert not passes(case, fixed("x,2007-01-01T00:00:00+00:00\n"))


def test_nanosecond_build_expectation() -> None:
    case = make_case("constant", expected="05.234000Z", expected_nanosecond_build="05.234000000Z")
    assert passes(case, fixed("05.234000Z"))
    assert not passes(case, fixed("05.234000000Z"))
    assert passes(case, fixed("05.234000000Z"), nanosecond_build=True)
    only_nano = make_case("constant", expected="x", only_in_nanosecond_build=True)
    assert judge(only_nano, fixed("x")).status == corpus.SKIPPED
    assert passes(only_nano, fixed("x"), nanosecond_build=True)


def test_s3tests_strips_newlines_and_compares_string() -> None:
    case = make_case(
        "constant", file="ceph_s3tests", expected="ab12cd$$",
        notes=S3TESTS_XML + "; then all '\\n' removed; then compared as a string",
    )
    assert passes(case, fixed("ab12cd$$\n"))
    assert passes(case, fixed("ab12cd$$"))
    assert not passes(case, fixed("ab12cd$$,\n"))
    assert not passes(case, fixed("AB12cd$$\n"))


def test_s3tests_int_comparison() -> None:
    case = make_case(
        "constant", file="ceph_s3tests", expected="1234",
        notes=S3TESTS_XML
        + "; then all ',' removed; then converted with int() and compared to 1234",
    )
    assert passes(case, fixed("1234\n"))
    assert passes(case, fixed("1234,\n"))
    assert not passes(case, fixed("1235\n"))
    outcome = judge(case, fixed("abc\n"))
    assert outcome.status == corpus.FAILED and "not int" in outcome.detail


def test_s3tests_xml_filter_drops_event_tag_lines() -> None:
    assert corpus.s3tests_remove_xml_tags("1\n <Payload>\n2") == "1\n2\n"
    assert corpus.s3tests_remove_xml_tags("Records\n") == "Records\n\n"  # index 0 is kept


def test_s3tests_normalisation_parses_sides() -> None:
    norm = corpus.s3tests_normalisation(
        S3TESTS_XML + "; then all ',' removed (query A); then all '\\n' removed (equivalent_query)"
    )
    assert norm.removed == {"query": ",", "equivalent": "\n"}
    assert norm.numeric is None
    both = corpus.s3tests_normalisation(S3TESTS_XML + "; then all ',' removed; compared as float")
    assert both.removed == {"query": ",", "equivalent": ","} and both.numeric == "float"


def test_minio_trim_space() -> None:
    case = make_case("constant", file="minio", expected='{"_1":"2"}',
                     notes="expected is compared with strings.TrimSpace(decoded Records payload)")
    assert passes(case, fixed('{"_1":"2"}\n'))
    assert not passes(case, fixed('{"_1": "2"}\n'))
    byte_exact = make_case("constant", file="minio", expected="3\n", notes="byte for byte")
    assert passes(byte_exact, fixed("3\n"))
    assert not passes(byte_exact, fixed("3"))


def test_example_binary_drops_trailing_delimiter() -> None:
    case = make_case("constant", file="ceph_s3select_gtest", expected="45")
    case = corpus.Case("ceph_s3select_example:run_test.bash/aggregate_test/sum:1", "constant",
                       "ceph_s3select_gtest", case.raw)
    assert passes(case, fixed("45"))
    assert passes(case, fixed("45,"))
    assert passes(case, fixed("45\n"))
    assert not passes(case, fixed("4"))


def test_ceph_select_star_rows_are_unordered_inside_a_row() -> None:
    expected = "a. : 1\nb. : 2\n#=== 0 ===#\na. : 3\nb. : 4\n#=== 1 ===#\n"
    case = make_case("constant", format="json", expected=expected)
    assert passes(case, fixed(expected))
    assert passes(case, fixed("b. : 2\na. : 1\n#=== 0 ===#\nb. : 4\na. : 3\n#=== 1 ===#\n"))
    assert not passes(case, fixed("a. : 3\nb. : 2\n#=== 0 ===#\na. : 1\nb. : 4\n#=== 1 ===#\n"))
    assert not passes(case, fixed("a. : 1\nb. : 2\n#=== 0 ===#\n"))


def test_expected_stats_xml_and_dict() -> None:
    xml = ("<Stats><BytesScanned>50</BytesScanned><BytesProcessed>50</BytesProcessed>"
           "<BytesReturned>3</BytesReturned></Stats>")
    case = make_case("constant", file="minio", expected="-1\n", expected_stats=xml)
    good = {"BytesScanned": 50, "BytesProcessed": 50, "BytesReturned": 3}
    assert passes(case, lambda d, q, k: FakeResult(b"-1\n", good))
    outcome = judge(case, lambda d, q, k: FakeResult(b"-1\n", {**good, "BytesScanned": 49}))
    assert outcome.status == corpus.FAILED and "Stats" in outcome.detail
    assert corpus.parse_expected_stats({"BytesScanned": 36}) == {"BytesScanned": 36}


# ---------------------------------------------------------------------------- equivalence
def test_equivalence_same_and_different_outputs() -> None:
    case = make_case("equivalence", query="A", equivalent_query="B")
    assert passes(case, by_query({"A": "1\n2\n", "B": "1\n2\n"}))
    assert not passes(case, by_query({"A": "1\n2\n", "B": "1\n"}))
    outcome = judge(case, by_query({"A": "", "B": ""}))
    assert outcome.status == corpus.FAILED and "empty" in outcome.detail


def test_equivalence_uses_equivalent_input_serialization() -> None:
    header_in = {"CSV": {"FileHeaderInfo": "USE"}}
    case = make_case("equivalence", query="A", equivalent_query="B",
                     equivalent_input_serialization=header_in)
    engine = FakeEngine(lambda d, q, k: "1\n")
    corpus.run_case(case, corpus.RunContext(engine=engine, corpus_dir=CORPUS_DIR))
    assert [c["input_serialization"] for c in engine.calls] == [CSV_IN, header_in]


def test_s3tests_equivalence_normalises_each_side() -> None:
    case = make_case(
        "equivalence", file="ceph_s3tests", query="A", equivalent_query="B",
        notes=S3TESTS_XML + "; then all ',' removed (query A); then all ',' removed "
        "(equivalent_query)",
    )
    assert passes(case, by_query({"A": "1,2\n", "B": "12\n"}))
    assert not passes(case, by_query({"A": "1,2\n", "B": "1\n2\n"}))
    assert not passes(case, by_query({"A": "1,2\n", "B": "13\n"}))


def test_quote_fields_always_transform() -> None:
    out = {"CSV": {"QuoteFields": "ALWAYS", "QuoteCharacter": "<x: one of @ #>"}}
    case = make_case("equivalence", name="TestS3selectFunctions.opserialization_expressions",
                     query="A", equivalent_query="B", output_serialization=out,
                     equivalent_transform="wrap every value with the quote character")

    def right(data: bytes, query: str, kwargs: dict[str, Any]) -> str:
        quote = kwargs["output_serialization"]["CSV"].get("QuoteCharacter")
        return "12\n7\n" if query == "B" else f"{quote}12{quote}\n{quote}7{quote}\n"

    assert passes(case, right)
    assert not passes(case, lambda d, q, k: "12\n7\n")
    assert not passes(case, lambda d, q, k: '"12"\n"7"\n' if q == "A" else "12\n7\n")


# ----------------------------------------------------------------------------------- errors
def test_error_substring() -> None:
    case = make_case("error", file="ceph_s3tests", expect_error="ProcessingTimeError")
    assert passes(case, fixed(FakeError("ProcessingTimeError", "alias {c11} not exist")))
    assert not passes(case, fixed(FakeError("UnsupportedSyntax", "bad")))
    outcome = judge(case, fixed("1\n"))
    assert outcome.status == corpus.FAILED and "succeeded" in outcome.detail


def test_ceph_gtest_error_accepts_any_syntax_error() -> None:
    case = make_case("error", expect_error="extra characters after the number",
                     notes="error case: passes if the query fails to parse (any message) or ...")
    assert passes(case, fixed(QuerySyntaxError("ParseUnexpectedToken", "whatever")))
    assert passes(case, fixed(FakeError("UnsupportedSyntax", "whatever")))
    assert passes(case, fixed(FakeError("CastFailed", "extra characters after the number")))
    assert not passes(case, fixed(FakeError("CastFailed", "text cannot be converted")))


def test_minio_request_rejected_accepts_any_error() -> None:
    case = make_case("error", file="minio", expect_error="request rejected (NewS3Select ...)",
                     scan_range={"Start": "2600000"},
                     notes="the error may be raised when parsing the request or when opening "
                     "the object")
    assert passes(case, fixed(FakeError("InvalidScanRange", "start beyond the object")))
    assert not passes(case, fixed("{}\n"))


def test_engine_crash_and_unavailable_are_failures() -> None:
    case = make_case("error", expect_error="x")
    outcome = judge(case, fixed(NotImplementedError("later")))
    assert outcome.status == corpus.FAILED and "NotImplementedError: later" in outcome.detail

    def unavailable(data: bytes, query: str, kwargs: dict[str, Any]) -> Any:
        raise corpus.EngineUnavailable("ImportError: no run_select")

    outcome = judge(make_case("constant", expected="1"), unavailable)
    assert outcome.status == corpus.FAILED and "engine unavailable" in outcome.detail


def test_engine_error_on_constant_case_fails_with_code() -> None:
    outcome = judge(make_case("constant", expected="1"), fixed(FakeError("Bad", "boom")))
    assert outcome.status == corpus.FAILED and outcome.detail == "engine error: Bad: boom"


# ---------------------------------------------------------------------------------- oracle
def test_oracles_compute_from_the_input() -> None:
    notes = S3TESTS_XML + "; then all ',' removed; compared as int"
    minimum = make_case("oracle", file="ceph_s3tests", input="3,9,\n1,5,\n2,7,\n", notes=notes,
                        oracle="minimum of the integer values of CSV column 1 (1-based) of ...")
    assert passes(minimum, fixed("1\n"))
    assert not passes(minimum, fixed("2\n"))
    total = make_case("oracle", file="ceph_s3tests", input="3,9,\n1,5,\n2,7,\n", notes=notes,
                      oracle="sum of the integer values of CSV column 2 (1-based)")
    assert passes(total, fixed("21\n")) and not passes(total, fixed("20\n"))
    avg = make_case("oracle", file="ceph_s3tests", input="3,9,\n1,5,\n", oracle=(
        "float(sum of the integer values of CSV column 1 (1-based) of the generated object) / 2"
    ), notes=S3TESTS_XML + "; then all ',' removed; compared as float")
    assert passes(avg, fixed("2\n")) and not passes(avg, fixed("2.5\n"))
    triple = make_case("oracle", file="ceph_s3tests", input="3|9|\t1|5|\t",
                       input_serialization={"CSV": {"FieldDelimiter": "|",
                                                    "RecordDelimiter": "\t"}},
                       oracle="'<min of column 1>,<max of column 2>,<min of column 1 + 1>' ...",
                       notes=S3TESTS_XML + "; then all '\\n' removed;")
    assert passes(triple, fixed("1,9,2\n")) and not passes(triple, fixed("1,9,3\n"))


def test_unknown_oracle_is_a_runner_skip() -> None:
    outcome = judge(make_case("oracle", oracle="median of something"), fixed("1"))
    assert outcome.status == corpus.SKIPPED and outcome.detail.startswith("runner:")


@needs_corpus
def test_datetime_to_string_oracle_uses_generator_expectation() -> None:
    spec = {"name": "generate_rand_csv_datetime_to_string", "rows": 5, "const_format": False}
    case = make_case("oracle", input=None, generator=spec, oracle="each input row is ...")
    context = corpus.RunContext(engine=FakeEngine(fixed("")), corpus_dir=CORPUS_DIR, seed=3)
    want = context.generators.datetime_to_string(spec, context.generators.GlibcRand(3))[1]
    assert passes(case, fixed(want), seed=3)
    assert not passes(case, fixed(want[:-1]), seed=3)


# -------------------------------------------------------------------------------- property
def _where_engine(correct: bool) -> Answer:
    def answer(data: bytes, query: str, kwargs: dict[str, Any]) -> str:
        cond = query.split(" where ", 1)[1].rstrip(";")
        op = re.search(r"\)(<=|>=|!=|<|>|=)\(", cond)
        assert op is not None
        left, right = cond[: op.start() + 1], cond[op.end() - 1:]
        a, b = corpus.evaluate_c_arithmetic(left), corpus.evaluate_c_arithmetic(right)
        assert a is not None and b is not None
        truth = corpus._COMPARATORS[op.group(1)](a, b)
        return ("1" if truth == correct else "0") + "\n"
    return answer


def test_where_clause_property() -> None:
    case = make_case("property", file="ceph_s3tests", name="test_generate_where_clause",
                     input="5,\n", assertion="repeated 20 times: ...")
    assert passes(case, _where_engine(True))
    assert not passes(case, _where_engine(False))


def test_projection_property() -> None:
    case = make_case("property", file="ceph_s3tests", name="test_generate_projection",
                     input="5,\n", assertion="repeated 20 times: ...")

    def value(query: str) -> float:
        got = corpus.evaluate_c_arithmetic(query[len("select "):].split(" from")[0])
        assert got is not None
        return got

    assert passes(case, lambda d, q, k: f"{value(q)!r}\n")
    assert not passes(case, lambda d, q, k: f"{value(q) + 0.001!r}\n")


@needs_corpus
def test_vs_c_property_needs_exact_doubles() -> None:
    case = make_case("property", name="TestS3SElect.s3select_vs_C",
                     generator={"name": "gen_expr", "iterations": 5})

    def value(query: str) -> float:
        got = corpus.evaluate_c_arithmetic(query[len("select "):].split(" from")[0])
        assert got is not None
        return got

    case = corpus.Case(case.id, case.kind, case.file, {**case.raw, "input": "1,1,1,1\n"})
    assert passes(case, lambda d, q, k: f"{value(q)!r}\n")
    assert not passes(case, lambda d, q, k: f"{value(q) * (1 + 1e-15)!r}\n")


def test_c_arithmetic_precedence() -> None:
    assert corpus.evaluate_c_arithmetic("1.0+2.0*3.0-4.0/2.0") == 5.0
    assert corpus.evaluate_c_arithmetic("(1.0+2.0)*3.0") == 9.0
    assert corpus.evaluate_c_arithmetic("8.0/2.0/2.0") == 2.0
    assert corpus.evaluate_c_arithmetic("1.0/(2.0-2.0)") is None


def test_count_sum_difference_property() -> None:
    case = make_case("property", file="ceph_s3tests", name="test_column_sum_min_max",
                     assertion="... then count*2 == sum1-sum2")
    assert passes(case, fixed("3,30,24"))
    assert passes(case, fixed("0,null,null"))
    assert not passes(case, fixed("3,30,25"))


def test_case_counts_property() -> None:
    related = {"count_a": "QA", "count_b": "QB", "count_c": "QC"}
    case = make_case("property",
                     name="TestS3selectFunctions.test_case_value_when_then_else_expressions",
                     query="Q", related_queries=related)
    right = {"Q": "a\nc\nc\nb\n", "QA": "1", "QB": "1", "QC": "2"}
    assert passes(case, by_query(right))
    assert not passes(case, by_query({**right, "QC": "3"}))


def test_ceph_utcnow_property() -> None:
    case = make_case("property", name="TestS3selectFunctions.utcnow")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    assert passes(case, lambda d, q, k: datetime.now(UTC).strftime(
        "%Y-%m-%dT%H:%M:%S+00:00\n"))
    assert not passes(case, fixed("2001-01-01T00:00:00+00:00\n"))
    assert not passes(case, fixed(now.replace("+00:00", "Z") + "\n"))


def test_aws_utcnow_property_reads_pattern_from_notes() -> None:
    notes = ('matching ^\\{"_1":"\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?Z"\\}\\n$ '
             "(the example shows millisecond precision)")
    case = make_case("property", file="aws_docs", query="SELECT UTCNOW() FROM S3Object",
                     output_serialization={"JSON": {}}, notes=notes)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.123Z")
    assert passes(case, fixed('{"_1":"' + now + '"}\n'))
    assert not passes(case, fixed('{"_1":"' + now + '"}'))
    assert not passes(case, fixed('{"_1":"2001-01-01T00:00:00Z"}\n'))


def test_delimiter_round_trip_property() -> None:
    out = {"CSV": {"RecordDelimiter": "<x: one of @ #>", "FieldDelimiter": "<y: one of ! ^>"}}
    case = make_case("property", name="TestS3selectFunctions.opserialization_expressions",
                     query="select * from s3object ;", output_serialization=out)

    def echo(data: bytes, query: str, kwargs: dict[str, Any]) -> str:
        spec = kwargs["output_serialization"]["CSV"]
        return f"1{spec['FieldDelimiter']}2{spec['RecordDelimiter']}"

    assert passes(case, echo)
    assert not passes(case, lambda d, q, k: "1,2\n")
    calls: list[int] = []

    def drifting(data: bytes, query: str, kwargs: dict[str, Any]) -> str:
        calls.append(1)
        return echo(data, query, kwargs) * len(calls)

    assert not passes(case, drifting)


def test_select_star_identity_and_same_output_properties() -> None:
    chunk = make_case("property", name="TestS3selectFunctions.csv_chunk_processing",
                      input="1,2\n3,4\n")
    assert passes(chunk, fixed("1,2\n3,4\n")) and not passes(chunk, fixed("1,2\n"))
    same = make_case("property", file="aws_docs", query="A", equivalent_query="B")
    assert passes(same, by_query({"A": "{}\n", "B": "{}\n"}))
    assert not passes(same, by_query({"A": "{}\n", "B": "{}\n{}\n"}))


# ---------------------------------------------------------------------------------- values
def test_expected_values_with_missing() -> None:
    case = make_case("values", file="minio", format="json", output_serialization={"JSON": {}},
                     expected_values=[256, "x", "MISSING"])
    assert passes(case, fixed('{"pages":256.0}\n{"p":"x"}\n{}\n'))
    assert not passes(case, fixed('{"pages":256}\n{"p":"x"}\n{"p":null}\n'))
    assert not passes(case, fixed('{"pages":true}\n{"p":"x"}\n{}\n'))
    assert not passes(case, fixed('{"pages":256}\n{"p":"x"}\n'))


def test_expected_records_match_modes() -> None:
    def records_case(match: str, expected: list[Any], **raw: Any) -> corpus.Case:
        return make_case("values", file="py_partiql_parser", format="json",
                         output_serialization={"JSON": {}}, expected_records=expected,
                         match=match, **raw)

    exact = records_case("exact list", [{"a": 1}, {"a": 2}])
    assert passes(exact, fixed('{"a":1}\n{"a":2}\n'))
    assert not passes(exact, fixed('{"a":2}\n{"a":1}\n'))
    unordered = records_case("same length and contains each (order not checked)",
                             [{"a": 1}, {"a": 2}])
    assert passes(unordered, fixed('{"a":2}\n{"a":1}\n'))
    assert not passes(unordered, fixed('{"a":2}\n{"a":1}\n{"a":3}\n'))
    counted = records_case("3 records, contains the listed one", [{"a": 1}])
    assert passes(counted, fixed('{"a":0}\n{"a":1}\n{"a":2}\n'))
    assert not passes(counted, fixed('{"a":0}\n{"a":1}\n'))
    contains = records_case("contains", [{"a": 1}])
    assert passes(contains, fixed('{"a":0}\n{"a":1}\n'))
    assert not passes(contains, fixed('{"a":0}\n'))
    dumps = records_case("json.dumps(result) == '[' + input + ']' (key order and null kept)",
                         [{"b": 1, "a": None}], input='{"b": 1, "a": null}')
    assert passes(dumps, fixed('{"b":1,"a":null}\n'))
    assert not passes(dumps, fixed('{"a":null,"b":1}\n'))
    assert not passes(dumps, fixed('{"b":1}\n'))


def test_expected_json_suffix_contains_and_stats() -> None:
    case = make_case("values", file="moto", format="json",
                     output_serialization={"JSON": {"RecordDelimiter": ","}},
                     expected_json={"_1": [1, {"a": True}]}, expected_suffix=",")
    assert passes(case, fixed('{"_1":[1,{"a":true}]},'))
    assert not passes(case, fixed('{"_1":[1,{"a":true}]}\n'))
    assert not passes(case, fixed('{"_1":[1,{"a":1}]},'))
    contains = make_case("values", file="moto", expected_contains=['{"c":"d2"}'],
                         expected_stats={"BytesScanned": 10, "BytesReturned": 11})
    good = {"BytesScanned": 10, "BytesProcessed": 10, "BytesReturned": 11}
    assert passes(contains, lambda d, q, k: FakeResult(b'{"c":"d2"},', good))
    assert not passes(contains, lambda d, q, k: FakeResult(b'{"c":"d3"},', good))
    assert not passes(contains, lambda d, q, k: FakeResult(b'{"c":"d2"},', {**good,
                                                                          "BytesReturned": 1}))


def test_parse_json_records_with_comma_delimiter() -> None:
    assert corpus.parse_json_records('{"a":[1,2]},{"b":"x,y"},', ",") == [{"a": [1, 2]},
                                                                         {"b": "x,y"}]
    with pytest.raises(corpus.CaseFailure):
        corpus.parse_json_records('{"a":1}{"b":2}', "\n")


def test_json_equal_distinguishes_booleans_from_numbers() -> None:
    assert corpus.json_equal({"a": 1}, {"a": 1.0})
    assert not corpus.json_equal({"a": True}, {"a": 1})
    assert not corpus.json_equal([1, 2], [2, 1])


# ------------------------------------------------------------------ derived_unit / parse_ok
def test_derived_unit_single_csv_value() -> None:
    case = make_case("derived_unit", file="minio", expected="true",
                     output_serialization={"CSV": {}})
    assert passes(case, fixed("true\n"))
    assert not passes(case, fixed("false\n"))
    assert not passes(case, fixed("true\ntrue\n"))
    quoted = make_case("derived_unit", file="minio", expected="a,b", output_serialization={})
    assert passes(quoted, fixed('"a,b"\n'))
    empty = make_case("derived_unit", file="minio", expected="", output_serialization={"CSV": {}})
    assert passes(empty, fixed("\n")) and not passes(empty, fixed(""))


def test_parse_ok_statement_only_runs_over_empty_json() -> None:
    raw = {"id": "minio:sql.T:1", "kind": "parse_ok", "query": "select a from s3object"}
    case = corpus.Case("minio:sql.T:1", "parse_ok", "minio", raw)
    engine = FakeEngine(fixed(""))
    outcome = corpus.run_case(case, corpus.RunContext(engine=engine, corpus_dir=CORPUS_DIR))
    assert outcome.status == corpus.PASSED
    assert engine.calls[0]["data"] == b""
    assert engine.calls[0]["input_serialization"] == {"JSON": {"Type": "LINES"}}
    assert engine.calls[0]["flavor"] == "minio"
    assert not passes(case, fixed(QuerySyntaxError("ParseUnexpectedToken", "no")))


# ------------------------------------------------------------------------ inputs and flavour
def test_inputs_base64_compression_and_flavor() -> None:
    seen: list[dict[str, Any]] = []

    def record(data: bytes, query: str, kwargs: dict[str, Any]) -> str:
        seen.append({"data": data, **kwargs})
        return "x"

    case = make_case("constant", file="moto", expected="x", input="a,b", input_compression="GZIP")
    assert passes(case, record)
    assert gzip.decompress(seen[-1]["data"]) == b"a,b" and seen[-1]["flavor"] == "aws"
    case = make_case("constant", file="moto", expected="x", input="a,b", input_compression="BZIP2")
    assert passes(case, record) and bz2.decompress(seen[-1]["data"]) == b"a,b"
    case = make_case("constant", expected="x", input=None, input_base64="AAEC")
    assert passes(case, record) and seen[-1]["data"] == b"\x00\x01\x02"
    assert seen[-1]["flavor"] == "ceph"
    assert passes(case, record, flavor="aws") and seen[-1]["flavor"] == "aws"


def test_missing_blob_is_skipped() -> None:
    case = make_case("constant", input=None, expected="x",
                     input_file={"repo": "ceph/s3select", "path": "no/such.parquet"})
    outcome = judge(case, fixed("x"))
    assert outcome.status == corpus.SKIPPED and "not present locally" in outcome.detail


@needs_corpus
def test_generated_inputs_are_cached_and_seeded() -> None:
    spec = {"name": "create_random_csv_object", "rows": 3, "columns": 2}
    engine = FakeEngine(fixed("x"))
    context = corpus.RunContext(engine=engine, corpus_dir=CORPUS_DIR, seed=7)
    case = make_case("constant", input=None, generator=spec, expected="x")
    assert corpus.case_input(case, context) is corpus.case_input(case, context)
    assert corpus.case_input(case, context) == context.generators.materialize(spec, 7).encode()
    parquet = make_case("constant", input=None, expected="x",
                        generator={"name": "csv_to_parquet", "csv": "1,2\n"})
    assert corpus.case_input(parquet, context)[:4] == b"PAR1"


def test_scan_range_conversion() -> None:
    def with_range(spec: dict[str, str]) -> corpus.Case:
        return make_case("constant", scan_range=spec)

    assert corpus.scan_range_of(with_range({"Start": "76", "End": "109"}), 111) == (76, 109)
    assert corpus.scan_range_of(with_range({"Start": "76"}), 111) == (76, 110)
    assert corpus.scan_range_of(with_range({"End": "35"}), 111) == (76, 110)
    assert corpus.scan_range_of(make_case("constant"), 111) is None
    with pytest.raises(corpus.SkipCase):
        corpus.scan_range_of(with_range({}), 111)


# ------------------------------------------------------------ skips, known failures, CLI
def test_skip_rules_and_known_failures(tmp_path: Path) -> None:
    skips_file = tmp_path / "skips.json"
    skips_file.write_text(json.dumps({
        "rules": [{"name": "internal", "when": {"kind": ["internal_api"]}, "reason": "r1"},
                  {"name": "frag", "when": {"has_field": "fragment"}, "reason": "r2"}],
        "cases": {"ceph_s3select_gtest:T.t:1": "r3"},
    }))
    skips = corpus.SkipRules.load(skips_file)
    assert skips.reason(make_case("internal_api", name="X")) == "internal: r1"
    assert skips.reason(make_case("error", name="X", fragment="+a")) == "frag: r2"
    assert skips.reason(make_case("constant")) == "r3"
    assert skips.reason(make_case("constant", name="X")) is None

    failed = corpus.Outcome("a", corpus.FAILED, "boom")
    passed = corpus.Outcome("a", corpus.PASSED)
    assert corpus.apply_known_failures(failed, {"a": "why"}).status == corpus.XFAIL
    xpass = corpus.apply_known_failures(passed, {"a": "why"})
    assert xpass.status == corpus.FAILED and "now passes" in xpass.detail
    assert corpus.apply_known_failures(failed, {}).status == corpus.FAILED


def test_cli_table_final_line_json_and_known_failures(tmp_path: Path) -> None:
    lines = [
        {"id": "ceph_x:T.a:1", "kind": "constant", "format": "csv", "input": "1\n",
         "input_serialization": CSV_IN, "output_serialization": CSV_OUT,
         "query": "good", "expected": "1\n", "notes": ""},
        {"id": "ceph_x:T.b:1", "kind": "constant", "format": "csv", "input": "1\n",
         "input_serialization": CSV_IN, "output_serialization": CSV_OUT,
         "query": "bad", "expected": "2\n", "notes": ""},
        {"id": "ceph_x:T.c:1", "kind": "internal_api", "query": "x", "notes": ""},
        {"id": "ceph_x:T.d:1", "kind": "constant", "format": "csv", "input": "1\n",
         "input_serialization": CSV_IN, "output_serialization": CSV_OUT,
         "query": "bad", "expected": "3\n", "notes": ""},
    ]
    corpus_file = tmp_path / "ceph_x.jsonl"
    corpus_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    known = tmp_path / "known.json"
    known.write_text(json.dumps({"ceph_x:T.d:1": "old reason"}))
    out, results, rewritten = io.StringIO(), tmp_path / "out.json", tmp_path / "new_known.json"
    status = run.main([str(corpus_file), "--json", str(results), "--known-failures", str(known),
                       "--write-known-failures", str(rewritten), "--show-failures", "5",
                       "--corpus-dir", str(CORPUS_DIR)],
                      out, engine=FakeEngine(lambda d, q, k: "1\n"))
    text = out.getvalue()
    assert status == 1
    assert text.splitlines()[-1] == "1 passed, 1 failed, 1 skipped"
    assert re.search(r"ceph_x\s+constant\s+1\s+1\s+0\s+1", text)
    assert "FAILED ceph_x:T.b:1" in text and "'2\\n'" in text
    statuses = {r["id"]: r["status"] for r in json.loads(results.read_text())}
    assert statuses == {"ceph_x:T.a:1": "passed", "ceph_x:T.b:1": "failed",
                        "ceph_x:T.c:1": "skipped", "ceph_x:T.d:1": "xfail"}
    reasons = json.loads(rewritten.read_text())
    assert set(reasons) == {"ceph_x:T.b:1", "ceph_x:T.d:1"}
    assert reasons["ceph_x:T.b:1"].startswith("not yet conformant: output differs")
    assert len(corpus.known_failure_reason("x" * 500)) == len(corpus.KNOWN_FAILURE_PREFIX) + 200


def test_cli_filter_by_substring(tmp_path: Path) -> None:
    line = {"id": "ceph_x:T.a:1", "kind": "constant", "format": "csv", "input": "1\n",
            "query": "q", "expected": "1\n", "notes": ""}
    corpus_file = tmp_path / "ceph_x.jsonl"
    corpus_file.write_text(json.dumps(line) + "\n")
    out = io.StringIO()
    run.main([str(corpus_file), "-k", "nothing", "--corpus-dir", str(CORPUS_DIR)], out,
             engine=FakeEngine(fixed("1\n")))
    assert out.getvalue().splitlines()[-1] == "0 passed, 0 failed, 0 skipped"


@needs_corpus
def test_corpus_loads_with_unique_ids_and_known_kinds() -> None:
    cases = corpus.load_cases(corpus.corpus_files(CORPUS_DIR))
    assert cases
    skips = corpus.SkipRules.load(corpus.DEFAULT_SKIPS)
    for case in cases:
        assert case.kind in corpus.KIND_CHECKS or skips.reason(case) is not None, case.id
    known = corpus.load_known_failures(corpus.DEFAULT_KNOWN_FAILURES)
    ids = {case.id for case in cases}
    assert set(known) <= ids, "known_failures.json names cases that do not exist"
    assert set(json.loads(corpus.DEFAULT_SKIPS.read_text())["cases"]) <= ids


def _echo_engine(case: corpus.Case, suffix: str) -> FakeEngine:
    stats = corpus.parse_expected_stats(case.raw.get("expected_stats") or {})

    def answer(data: bytes, query: str, kwargs: dict[str, Any]) -> FakeResult:
        if case.kind == "derived_unit":
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\n").writerow([case.raw["expected"] + suffix])
            return FakeResult(buffer.getvalue().encode(), stats)
        return FakeResult((case.raw["expected"] + suffix).encode(), stats)

    return FakeEngine(answer)


@needs_corpus
@pytest.mark.parametrize("suffix", ["", "X"])
def test_echoing_expected_passes_and_anything_else_fails(suffix: str) -> None:
    """Self-consistency over the real corpus: each harness normalisation accepts the expected
    text itself and rejects it with one extra character."""
    skips = corpus.SkipRules.load(corpus.DEFAULT_SKIPS)
    cases = [
        case for case in corpus.load_cases(corpus.corpus_files(CORPUS_DIR))
        if case.kind in ("constant", "derived_unit") and skips.reason(case) is None
        and case.raw.get("expected") is not None and not case.raw.get("only_in_nanosecond_build")
    ]
    assert len(cases) > 500
    context = corpus.RunContext(engine=FakeEngine(fixed("")), corpus_dir=CORPUS_DIR)
    wrong = []
    for case in cases:
        context.engine = _echo_engine(case, suffix)
        outcome = corpus.run_case(case, context)
        if outcome.status != (corpus.PASSED if suffix == "" else corpus.FAILED):
            wrong.append((case.id, outcome.status, outcome.detail))
    assert wrong == []


@pytest.mark.parametrize("arguments", [
    ["../shared/conformance/*.jsonl"],  # the README's command where the corpus is absent
    ["--corpus-dir", "no/such/folder"],
    [],
])
def test_cli_without_the_corpus_names_what_is_missing(tmp_path: Path,
                                                      arguments: list[str]) -> None:
    """In a clone without the shared corpus: a usage error naming the missing path and how
    to point at the corpus, never a traceback."""
    import subprocess
    import sys

    script = Path(run.__file__).resolve()
    done = subprocess.run(
        [sys.executable, str(script), *arguments], cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", corpus.CORPUS_DIR_ENV: str(tmp_path / "absent")})
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "--corpus-dir" in done.stderr and corpus.CORPUS_DIR_ENV in done.stderr
    named = arguments[-1] if arguments else str(tmp_path / "absent")
    assert named in done.stderr
