"""Flavour rules are data (issue #29 item 1): every consumer reads the flags of the flavour's
record, never its name, so a new flavour is one record.

Three kinds of test: a new flavour (MinIO's reading rules) added as one record runs end to end
through the translator, the readers, the drivers, the plan and the output writer; each reading
and printing flag, flipped alone, changes what its consumer does (so a consumer cannot ignore
it); and no consumer module spells a flavour's name outside its definition.
"""

from __future__ import annotations

import ast
import io
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flight_storage.errors import InputFormatError
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.execution.select_local import run_select
from flight_storage.formats.csv_input import iter_csv_batches
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.json_input import JsonInputOptions, iter_json_batches
from flight_storage.formats.output import RecordWriter
from flight_storage.request.sniffing import TableSniffer
from flight_storage.storage.sources import FileSource
from select_dialect import translate
from select_dialect.flavors import (
    AWS_PRINTING,
    AWS_READING,
    CEPH_PRINTING,
    CEPH_READING,
    FLAVOR_NAMES,
    FLAVORS,
    Flavor,
    PrintingRules,
    ReadingRules,
)

ROOT = Path(__file__).resolve().parents[2]

MINIO = Flavor("minio", "MinIO's S3 Select (a test flavour: one record, nothing else)",
               reading=replace(AWS_READING, csv_comment="#", csv_quoted_record_delimiter=True))
"""MinIO reads CSV as AWS does, with ``Comments`` ``#`` and ``AllowQuotedRecordDelimiter``
TRUE by default (csv_input.py's docstring)."""


@pytest.fixture
def minio(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setitem(FLAVORS, "minio", MINIO)
    yield "minio"


# ------------------------------------------------------------------ a new flavour is one record


def test_a_new_flavours_csv_is_read_by_its_own_rules_end_to_end(minio: str) -> None:
    data = b'a,b\n#not a record\n"two\nlines",x\n'
    csv = run_select(data, "select * from s3object", input_serialization={"CSV": {}},
                     output_serialization={"CSV": {}}, flavor=minio)
    assert csv.records == b'a,b\n"two\nlines",x\n'
    as_json = run_select(data, "select _1 from s3object where _2 = 'x'",
                         input_serialization={"CSV": {}}, output_serialization={"JSON": {}},
                         flavor=minio)
    assert as_json.records == b'{"_1":"two\\nlines"}\n'
    # the same bytes under AWS's rules: the comment is a record, the quote spans no line
    aws = run_select(data, "select count(*) from s3object", input_serialization={"CSV": {}},
                     output_serialization={"CSV": {}}, flavor="aws")
    assert aws.records == b"4\n"


def test_a_new_flavour_reads_json_parquet_and_datafusions_csv(
        minio: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = run_select(b'{"a": [1, 2]}\n{"a": {"b": "x"}}\n', "select s.a from s3object s",
                       input_serialization={"JSON": {"Type": "LINES"}},
                       output_serialization={"JSON": {}}, flavor=minio)
    assert lines.records == b'{"a":[1,2]}\n{"a":{"b":"x"}}\n'
    table = pa.table({"n": [1, 2, 3], "s": ["x", None, "z"]})
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "t.parquet")
    parquet = run_select((tmp_path / "t.parquet").read_bytes(),
                         "select s from s3object where n > 1",
                         input_serialization={"Parquet": {}}, output_serialization={"CSV": {}},
                         flavor=minio)
    assert parquet.records == b"\nz\n"
    # a plain CSV object under a record without quoted record delimiters: DataFusion reads it
    monkeypatch.setitem(FLAVORS, "plain", Flavor("plain", "AWS's rules under another name"))
    path = tmp_path / "plain.csv"
    path.write_bytes(b"1,a\n2,b\n3,c\n")
    engine = SelectEngine(EngineConfig())
    plan = engine.plan("select _2 from s3object where _1 > 1",
                       FileSource(path, "b/plain.csv", path.stat().st_size), InputSpec("csv"),
                       flavor="plain")
    assert plan.reader == "datafusion" and not plan.limit_counts_input
    writer = plan.record_writer({"CSV": {}})
    assert b"".join(writer.write(b) for b in engine.execute(plan)) == b"b\nc\n"


def test_a_new_flavour_reaches_the_translator_and_the_sniffer(minio: str) -> None:
    t = translate("select _1, upper(_2) from s3object limit 1", input_format="csv",
                  flavor=minio)
    assert t.output_names[1] == "_2" and not t.limit_counts_input
    assert not TableSniffer().applies(minio)


# ------------------------------------------------------------------ every flag is read


def _csv(data: bytes, reading: ReadingRules, csv: dict[str, str] | None = None, *,
         typed: bool = False) -> Any:
    options = CsvInputOptions.from_request(csv or {}, reading, typed=typed)
    try:
        return [b.to_pylist() for b in iter_csv_batches(io.BytesIO(data), options,
                                                         num_columns=None)]
    except InputFormatError as error:
        return error.code


def _json(data: bytes, reading: ReadingRules) -> Any:
    return [b.to_pylist() for b in iter_json_batches(
        io.BytesIO(data), JsonInputOptions("DOCUMENT"), from_path=(), paths={"r": ()},
        reading=reading)]


READ_BY_FLAG: dict[str, Callable[[ReadingRules], Any]] = {
    "csv_quotes_anywhere": lambda r: _csv(b'a"b,c"d\n', r),
    "csv_escape": lambda r: _csv(b'"a\\"b",c\n', r),
    "csv_empty_is_null": lambda r: _csv(b"a,,b\n", r),
    "csv_typed_empty_is_null": lambda r: _csv(b"a,,b\n", r, typed=True),
    "csv_skip_empty_lines": lambda r: _csv(b"a\n\nb\n", r),
    "csv_comment": lambda r: _csv(b"#a\nb\n", r),
    "csv_quoted_record_delimiter": lambda r: _csv(b'"a\nb",c\n', r),
    "csv_unclosed_quote_error": lambda r: _csv(b'"abc\n', r),
    "json_partiql_rows": lambda r: _json(b"[1, 2]", r),
}


def test_every_reading_flag_has_a_case() -> None:
    assert set(READ_BY_FLAG) == {f.name for f in fields(ReadingRules)}


@pytest.mark.parametrize("flag", sorted(READ_BY_FLAG))
def test_flipping_a_reading_flag_changes_what_is_read(flag: str) -> None:
    flipped_value = {"csv_escape": "\\", "csv_comment": "#"}.get(
        flag, not getattr(AWS_READING, flag))
    flipped = replace(AWS_READING, **{flag: flipped_value})
    assert READ_BY_FLAG[flag](flipped) != READ_BY_FLAG[flag](AWS_READING)


def _write(printing: PrintingRules, column: pa.Array, output: dict[str, Any],
           **kw: Any) -> bytes:
    writer = RecordWriter(output, printing=printing, output_names=["_1"],
                          output_is_json=[kw.pop("is_json", False)],
                          is_aggregate=kw.pop("aggregate", False), **kw)
    return writer.write(pa.record_batch({"c0": column})) + writer.finish()


PRINTED_BY_FLAG: dict[str, Callable[[PrintingRules], bytes]] = {
    "csv_null": lambda p: _write(p, pa.array([None], pa.string()), {"CSV": {}}),
    "csv_quote_as_needed": lambda p: _write(p, pa.array(["a,b"]), {"CSV": {}}),
    "csv_quote_escape_from_input": lambda p: _write(
        p, pa.array(['a"b']), {"CSV": {"QuoteFields": "ALWAYS"}}),
    "aggregate_row_delimited": lambda p: _write(p, pa.array([4]), {"CSV": {}},
                                                aggregate=True),
    "timestamps_as_written": lambda p: _write(
        p, pa.array([0], pa.date32()), {"CSV": {}}),
    "plain_json_values": lambda p: _write(p, pa.array(["x"]), {"JSON": {}}),
    "json_rows_as_leaf_lines": lambda p: _write(p, pa.array(['{"a":1}']), {"CSV": {}},
                                                is_json=True, row_as_record=True),
}


def test_every_printing_flag_has_a_case() -> None:
    assert set(PRINTED_BY_FLAG) == {f.name for f in fields(PrintingRules)}


@pytest.mark.parametrize("flag", sorted(PRINTED_BY_FLAG))
def test_flipping_a_printing_flag_changes_what_is_printed(flag: str) -> None:
    flipped = replace(AWS_PRINTING, **{flag: getattr(CEPH_PRINTING, flag)})
    assert PRINTED_BY_FLAG[flag](flipped) != PRINTED_BY_FLAG[flag](AWS_PRINTING)


def test_ceph_and_aws_records_differ_in_every_printing_flag() -> None:
    assert all(getattr(CEPH_PRINTING, f.name) != getattr(AWS_PRINTING, f.name)
               for f in fields(PrintingRules))
    assert CEPH_READING != AWS_READING


# ------------------------------------------------------------------ no consumer names a flavour

CONSUMERS = ("flight_storage", "compute_client", "select_dialect", "lazy_dataset")
DEFINITION = ROOT / "select_dialect" / "flavors.py"
ALLOWED = {("flight_storage/storage/s3_store.py", "standard")}
"""Strings that are no flavour: botocore's retry mode ``standard``."""
FLAVOR_CONSTANTS = {"CEPH", "AWS", "STANDARD"}


def _modules() -> Iterator[Path]:
    for package in CONSUMERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != DEFINITION and "_pb2" not in path.name:
                yield path


def _named_flavours(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Flavour names as string constants (``"rfc"`` too, the old second spelling of
    ``"aws"``), and comparisons with a flavour constant."""
    names = {*FLAVOR_NAMES, "rfc"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names:
            yield node.lineno, repr(node.value)
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Name) and side.id in FLAVOR_CONSTANTS:
                    yield node.lineno, f"a comparison with {side.id}"


def test_no_consumer_spells_a_flavours_name() -> None:
    found = []
    for path in _modules():
        relative = path.relative_to(ROOT).as_posix()
        for line, what in _named_flavours(ast.parse(path.read_text(), relative)):
            if (relative, what.strip("'")) not in ALLOWED:
                found.append(f"{relative}:{line}: {what}")
    assert not found, "decide by the flavour's flags (select_dialect/flavors.py):\n" + \
        "\n".join(found)


def test_the_name_check_finds_a_name_compare() -> None:
    sample = ast.parse('if flavor == "ceph" or rules != CEPH:\n    pass\n')
    assert sorted(what for _, what in _named_flavours(sample)) == [
        "'ceph'", "a comparison with CEPH"]
