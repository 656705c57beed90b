"""Every shape of the corpus format reaches a verdict: passed, failed, or skipped with a reason.

Synthetic corpus files (in ``tmp_path``) hold one case per generator of the shared
``generators.py`` and one per odd shape (an object that does not exist, an integer expected of
JSON output, fields the runner does not know, JSON inputs under an oracle, ...). The runner
must finish and judge each of them; what it cannot judge it skips, saying why.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from . import corpus, run
from .test_runner import CSV_IN, CSV_OUT, FakeEngine, FakeError, fixed, judge, make_case

CORPUS_DIR = corpus.default_corpus_dir()
GENERATORS = CORPUS_DIR / "generators.py"
pytestmark = pytest.mark.skipif(not GENERATORS.exists(), reason="shared corpus not present")

JSON_DOC_IN = {"JSON": {"Type": "DOCUMENT"}}
JSON_OUT: dict[str, Any] = {"JSON": {}}
SEED = 5

# Smallest spec per generator of generators.py (the name is the spec's "name"). The query
# generators (gen_expr, expr_genrator.py) build statements, not objects.
SPECS: dict[str, dict[str, Any]] = {
    "create_random_csv_object": {"rows": 4, "columns": 3},
    "create_random_csv_object_string": {"rows": 4, "columns": 3},
    "create_random_csv_object_trim": {"rows": 4, "columns": 3},
    "create_random_csv_object_escape": {"rows": 4, "columns": 3},
    "create_random_csv_object_null": {"rows": 4, "columns": 3},
    "create_random_json_object": {"rows": 4, "columns": 3},
    "create_csv_object_for_datetime": {"rows": 4, "columns": 2},
    "csv_to_json": {"of": {"name": "create_random_csv_object", "rows": 4, "columns": 3}},
    "generate_rand_csv": {"rows": 4},
    "generate_rand_columns_csv": {"rows": 4},
    "generate_rand_columns_csv_with_null": {"rows": 4},
    "generate_csv_like": {"rows": 4},
    "generate_rand_columns_csv_datetime": {"rows": 4},
    "generate_rand_csv_datetime_to_string": {"rows": 4, "const_format": False},
    "generate_csv": {"rows": 4},
    "generate_columns_csv": {"rows": 4},
    "generate_fix_columns_csv": {"rows": 4},
    "generate_csv_escape": {"rows": 4},
    "generate_csv_trim": {"rows": 4},
    "repeat": {"text": "a,b\n", "times": 3},
    "example/generate_rand_csv.c": {"rows": 4, "columns": 3},
    "csv_to_parquet": {"csv": "1,2\n3,4\n"},
}
JSON_GENERATORS = ("create_random_json_object", "csv_to_json")
QUERY_GENERATORS = ("gen_expr", "example/expr_genrator.py 5")


def _generators() -> ModuleType:
    return corpus.RunContext(engine=FakeEngine(fixed("")), corpus_dir=CORPUS_DIR).generators


def _generator_names() -> set[str]:
    """Every generator name generators.py dispatches on, plus its Parquet converter."""
    names = set(re.findall(r'name == "([^"]+)"', GENERATORS.read_text(encoding="utf-8")))
    return names | {"csv_to_parquet"}


def _object_bytes(spec: Mapping[str, Any], gen: ModuleType) -> bytes:
    """What the object of ``spec`` must be, built straight from generators.py."""
    if spec["name"] == "csv_to_parquet":
        return bytes(gen.csv_to_parquet_bytes(spec["csv"]))
    if spec["name"] == "generate_rand_csv_datetime_to_string":
        return str(gen.datetime_to_string(spec, gen.GlibcRand(SEED))[0]).encode()
    return str(gen.materialize(spec, SEED)).encode()


def _line(case_id: str, kind: str, **raw: Any) -> dict[str, Any]:
    raw.setdefault("format", "csv")
    raw.setdefault("input_serialization", CSV_IN)
    raw.setdefault("output_serialization", CSV_OUT)
    raw.setdefault("notes", "")
    return {"id": case_id, "kind": kind, **raw}


def _run(tmp_path: Path, stem: str, lines: list[dict[str, Any]],
         engine: corpus.Engine | None = None) -> tuple[dict[str, dict[str, str]], str]:
    """Run ``lines`` as the corpus file ``<stem>.jsonl``; per-case results and the output."""
    path = tmp_path / f"{stem}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    results, out = tmp_path / f"{stem}.results.json", io.StringIO()
    run.main([str(path), "--json", str(results), "--corpus-dir", str(CORPUS_DIR),
              "--seed", str(SEED), "--skips", str(tmp_path / "no-skips.json"),
              "--known-failures", str(tmp_path / "no-known.json")], out, engine=engine)
    return {r["id"]: r for r in json.loads(results.read_text(encoding="utf-8"))}, out.getvalue()


def test_every_generator_has_a_spec_here() -> None:
    """A generator added to generators.py must be added to SPECS (and so be run below)."""
    assert _generator_names() - set(SPECS) == set()


def test_each_generator_materializes_its_object_for_the_engine(tmp_path: Path) -> None:
    gen = _generators()
    names = sorted(_generator_names())
    want = {f"select '{name}' from s3object": _object_bytes({"name": name, **SPECS[name]}, gen)
            for name in names}

    engine = FakeEngine(lambda data, query, _: "ok\n" if data == want[query] else "other\n")
    lines = [
        _line(f"synthetic:gen/{name}:1", "constant", input=None,
              generator={"name": name, **SPECS[name]},
              format="json" if name in JSON_GENERATORS else "csv",
              input_serialization=JSON_DOC_IN if name in JSON_GENERATORS else CSV_IN,
              query=f"select '{name}' from s3object", expected="ok\n")
        for name in names
    ] + [
        _line(f"synthetic:gen/{name}:1", "constant", input=None, generator={"name": name},
              query="select 1 from s3object", expected="1\n")
        for name in QUERY_GENERATORS
    ]
    results, out = _run(tmp_path, "synthetic", lines, engine)
    for name in names:
        assert results[f"synthetic:gen/{name}:1"]["status"] == corpus.PASSED, name
    for name in QUERY_GENERATORS:
        outcome = results[f"synthetic:gen/{name}:1"]
        assert outcome["status"] == corpus.SKIPPED
        assert outcome["detail"].startswith(f"runner: generator {name!r} is not materializable")
    assert out.splitlines()[-1] == f"{len(names)} passed, 0 failed, 2 skipped"


def test_a_wrong_object_fails_the_generator_case(tmp_path: Path) -> None:
    """The check above can fail: an engine that sees other bytes answers differently."""
    line = _line("synthetic:gen/repeat:1", "constant", input=None,
                 generator={"name": "repeat", **SPECS["repeat"]}, query="q", expected="ok\n")
    results, _ = _run(tmp_path, "synthetic", [line],
                      FakeEngine(lambda d, q, k: "ok\n" if d == b"a,b\n" * 2 else "no\n"))
    assert results["synthetic:gen/repeat:1"]["status"] == corpus.FAILED


def _json_object(name: str) -> dict[str, Any]:
    return {"format": "json", "input": None, "generator": {"name": name, **SPECS[name]},
            "input_serialization": JSON_DOC_IN, "output_serialization": JSON_OUT}


S3TESTS_INT = ("remove_xml_tags_from_result: split on '\\n', drop tag lines; "
               "then all ',' removed; compared as int")

# Odd shapes run through the project's engine: (case id, kind, fields, status, detail start).
SHAPES: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("ceph_s3tests:test_count_json_operation:1", "constant",
     {**_json_object("create_random_json_object"), "notes": S3TESTS_INT,
      "query": "select count(0) from s3object[*].root;", "expected": 4}, corpus.PASSED, ""),
    ("ceph_s3tests:test_count_json_operation:2", "constant",
     {**_json_object("create_random_json_object"), "notes": S3TESTS_INT,
      "query": "select count(0) from s3object[*].root;", "expected": 3},
     corpus.FAILED, "value differs"),
    ("ceph_s3tests:test_count_json_operation:3", "constant",
     {**_json_object("create_random_json_object"),
      "query": "select count(0) from s3object[*];", "expected": 1}, corpus.PASSED, ""),
    ("ceph_s3tests:test_json_column_sum_min_max:1", "oracle",
     {**_json_object("csv_to_json"), "notes": S3TESTS_INT,
      "query": "select min(_1.c1) from s3object[*].root;",
      "oracle": "minimum of the integer values of CSV column 1 (1-based) of the CSV"},
     corpus.PASSED, ""),
    ("ceph_s3tests:test_json_column_sum_min_max:2", "oracle",
     {**_json_object("csv_to_json"), "notes": S3TESTS_INT,
      "query": "select max(_1.c1) from s3object[*].root;",
      "oracle": "minimum of the integer values of CSV column 1 (1-based) of the CSV"},
     corpus.FAILED, "oracle"),
    ("ceph_s3tests:test_json_column_sum_min_max:3", "property",
     {**_json_object("csv_to_json"),
      "query": "select count(0),sum(_1.c1),sum(_1.c2) from s3object[*].root "
               "where (_1.c1-_1.c2) = 2;",
      "assertion": "count,sum1,sum2 = res.split(','); count*2 == sum1-sum2"},
     corpus.PASSED, ""),
    ("ceph_s3tests:test_json_oracle_on_json:1", "oracle",
     {**_json_object("create_random_json_object"), "notes": S3TESTS_INT,
      "query": "select min(_1.c1) from s3object[*].root;",
      "oracle": "minimum of the integer values of CSV column 1 (1-based)"},
     corpus.SKIPPED, "runner: the oracle reads CSV columns, the input is json"),
    ("ceph_s3tests:test_oracle_on_text:1", "oracle",
     {"input": None, "notes": S3TESTS_INT, "query": "select min(_1) from s3object;",
      "generator": {"name": "create_random_csv_object_string",
                    **SPECS["create_random_csv_object_string"]},
      "oracle": "minimum of the integer values of CSV column 1 (1-based)"},
     corpus.SKIPPED, "runner: CSV column 1 of row"),
    ("ceph_synthetic:int_over_json_out:1", "constant",
     {"input": "1,2\n3,4\n5,6\n", "output_serialization": JSON_OUT,
      "query": "select sum(int(_1)) from s3object;", "expected": 9}, corpus.PASSED, ""),
    ("ceph_synthetic:int_over_json_out:2", "constant",
     {"input": "1,2\n3,4\n5,6\n", "output_serialization": JSON_OUT,
      "query": "select sum(int(_1)) from s3object;", "expected": 10},
     corpus.FAILED, "value differs"),
    ("ceph_synthetic:int_over_json_out:3", "constant",
     {"input": "1,2\n3,4\n5,6\n", "output_serialization": JSON_OUT,
      "query": "select int(_1) from s3object;", "expected": 1},
     corpus.FAILED, "expected one record with one value"),
    ("ceph_synthetic:int_over_csv_out:1", "constant",
     {"input": "1,2\n3,4\n5,6\n", "query": "select count(*) from s3object;", "expected": 3},
     corpus.PASSED, ""),
    ("ceph_synthetic:bool_over_json_out:1", "constant",
     {"input": "1,2\n", "output_serialization": JSON_OUT,
      "query": "select (1 > 2) from s3object;", "expected": False}, corpus.PASSED, ""),
    ("ceph_synthetic:list_over_csv_out:1", "constant",
     {"input": "1,2\n", "query": "select _1 from s3object;", "expected": [1]},
     corpus.SKIPPED, "runner: a JSON list or object is expected of CSV output"),
    ("ceph_synthetic:missing_object:1", "constant",
     {"input": None, "query": "select _1 from s3object;", "expected": "1\n"},
     corpus.SKIPPED, corpus.MISSING_OBJECT),
    ("ceph_synthetic:missing_object:2", "error",
     {"input": None, "query": "select _1 from s3object;", "expect_error": "NoSuchKey"},
     corpus.SKIPPED, "runner: expects 'NoSuchKey'"),
    ("ceph_synthetic:unknown_fields:1", "constant",
     {"input": "1,2\n", "query": "select _2 from s3object;", "expected": "2\n",
      "not_a_field_yet": {"nested": [1, 2]}, "expected_in_future": "ignored"},
     corpus.PASSED, ""),
    ("ceph_synthetic:unknown_fields:2", "constant",
     {"input": "1,2\n", "query": "select _2 from s3object;", "expected": "1\n",
      "not_a_field_yet": True}, corpus.FAILED, "output differs"),
    ("ceph_synthetic:unknown_kind:1", "approximate",
     {"input": "1,2\n", "query": "select _1 from s3object;"},
     corpus.SKIPPED, "runner: unknown kind 'approximate'"),
    ("ceph_synthetic:structured_input:1", "constant",
     {"format": "json", "input": {"a": 1}, "input_serialization": JSON_DOC_IN,
      "query": "select * from s3object;", "expected": "1\n"},
     corpus.SKIPPED, "runner: input is a JSON dict"),
    ("ceph_synthetic:spec_without_rows:1", "constant",
     {"input": None, "generator": {"name": "create_random_csv_object", "columns": 2},
      "query": "select _1 from s3object;", "expected": "1\n"},
     corpus.SKIPPED, "runner: generator 'create_random_csv_object' is not materializable"),
    ("ceph_synthetic:unknown_generator:1", "constant",
     {"input": None, "generator": {"name": "generate_from_the_future", "rows": 2},
      "query": "select _1 from s3object;", "expected": "1\n"},
     corpus.SKIPPED, "runner: generator 'generate_from_the_future' is not materializable"),
    ("ceph_synthetic:no_equivalent_query:1", "equivalence",
     {"input": "1,2\n", "query": "select _1 from s3object;"},
     corpus.SKIPPED, "runner: an equivalence case without an equivalent_query"),
    ("ceph_synthetic:no_query:1", "constant",
     {"input": "1,2\n", "expected": "1\n"}, corpus.SKIPPED, "runner: the case has no query"),
]


def test_odd_shapes_are_judged_or_skipped_with_a_reason(tmp_path: Path) -> None:
    lines = [_line(case_id, kind, **fields) for case_id, kind, fields, _, _ in SHAPES]
    results, out = _run(tmp_path, "synthetic", lines)
    for case_id, _, _, status, detail in SHAPES:
        assert results[case_id]["status"] == status, (case_id, results[case_id])
        assert results[case_id]["detail"].startswith(detail), (case_id, results[case_id])
    count = {s: sum(1 for *_, st, _ in SHAPES if st == s) for s in corpus.STATUSES}
    assert out.splitlines()[-1] == (
        f"{count[corpus.PASSED]} passed, {count[corpus.FAILED]} failed, "
        f"{count[corpus.SKIPPED]} skipped"
    )


def test_no_generators_file_skips_generated_cases(tmp_path: Path) -> None:
    case = make_case("constant", input=None, expected="x",
                     generator={"name": "repeat", "text": "x", "times": 1})
    context = corpus.RunContext(engine=FakeEngine(fixed("x")), corpus_dir=tmp_path)
    outcome = corpus.run_case(case, context)
    assert outcome.status == corpus.SKIPPED and "generators.py not found" in outcome.detail


# -------------------------------------------------------- value expectations, fake engine
def test_integer_expected_of_json_output_is_the_one_value() -> None:
    case = make_case("constant", output_serialization=JSON_OUT, expected=3)
    assert judge(case, fixed('{"_1":3}\n')).status == corpus.PASSED
    assert judge(case, fixed('{"count":3.0}\n')).status == corpus.PASSED
    for wrong in ('{"_1":4}\n', '{"_1":"3"}\n', '{"_1":true}\n', '{"_1":3,"_2":3}\n',
                  '{"_1":3}\n{"_1":3}\n', "3\n", ""):
        outcome = judge(case, fixed(wrong))
        assert outcome.status == corpus.FAILED, (wrong, outcome)
    delimited = make_case("constant", expected=3,
                          output_serialization={"JSON": {"RecordDelimiter": ","}})
    assert judge(delimited, fixed('{"_1":3},')).status == corpus.PASSED


def test_value_expected_of_csv_output_reads_the_field_back() -> None:
    case = make_case("constant", expected=2.5)
    assert judge(case, fixed("2.5\n")).status == corpus.PASSED
    assert judge(case, fixed("2.5")).status == corpus.PASSED  # Ceph: aggregate, no newline
    assert judge(case, fixed("2.50\n")).status == corpus.PASSED
    for wrong in ("2.4\n", "2.5\n2.5\n", "2.5,1\n", "x\n"):
        assert judge(case, fixed(wrong)).status == corpus.FAILED, wrong
    single_row = make_case("constant", expected=True,
                           notes="single-row harness run_s3select(query): output is cut")
    assert judge(single_row, fixed("true,false\nfalse\n")).status == corpus.PASSED
    assert judge(single_row, fixed("false,true\n")).status == corpus.FAILED


def test_value_expected_of_derived_unit_and_error_of_missing_bucket() -> None:
    unit = make_case("derived_unit", file="minio", expected=7, output_serialization=JSON_OUT)
    assert judge(unit, fixed('{"_1":7}\n')).status == corpus.PASSED
    assert judge(unit, fixed('{"_1":"7"}\n')).status == corpus.FAILED
    csv_unit = make_case("derived_unit", file="minio", expected=7)
    assert judge(csv_unit, fixed("7\n")).status == corpus.PASSED
    assert judge(csv_unit, fixed("8\n")).status == corpus.FAILED
    bucket = make_case("error", expect_error="NoSuchBucket")
    outcome = judge(bucket, fixed(FakeError("NoSuchBucket", "no bucket")))
    assert outcome.status == corpus.SKIPPED and "NoSuchBucket" in outcome.detail


def test_numeric_properties_read_json_output_values() -> None:
    case = make_case("property", file="ceph_s3tests", name="test_column_sum_min_max",
                     output_serialization=JSON_OUT, assertion="... count*2 == sum1-sum2")
    assert judge(case, fixed('{"_1":3,"_2":30,"_3":24}\n')).status == corpus.PASSED
    assert judge(case, fixed('{"_1":3,"_2":30,"_3":25}\n')).status == corpus.FAILED
    assert judge(case, fixed("not json\n")).status == corpus.FAILED


def test_loader_names_the_line_of_a_line_that_is_not_a_case(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a:b:1", "kind": "constant"}\n{"id": 7, "kind": "constant"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not a corpus case"):
        corpus.load_cases([path])
    path.write_text('{"id": "a:b:1", "kind": "constant"}\n{not json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not JSON"):
        corpus.load_cases([path])
