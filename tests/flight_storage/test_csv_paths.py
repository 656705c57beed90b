"""Every CSV reading path on one generated corpus per flavour (issue #29 item 4).

The reference reader has four ways to turn CSV bytes into fields, and DataFusion a fifth:

* the reference tokenizer (``csv_tokenizer.Tokenizer``), record by record: the definition;
* the vectorised split (``csv_tokenizer.lines_to_lists``: ``pyarrow.compute``, Python's
  ``csv`` module, Ceph's quote toggling), what the reader uses for a block pyarrow may not read;
* pyarrow's CSV reader (``csv_input._fast_table``), where the survey says an Arrow reader reads
  the block as s3-select does (``csv_guard.arrow_block_reason``);
* DataFusion's CSV reader, where the survey of the object says so (``csv_guard.survey_csv``).

Each flavour's corpus goes through all of them; every path that accepts the input gives the
tokenizer's fields, or the same error. A path may refuse an input (the fast path answers None,
the survey names a reason); none may read it differently.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flight_storage.errors import InputFormatError, StorageError
from flight_storage.execution.drivers.csv_format import csv_options
from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.formats.csv_guard import arrow_block_reason, survey_csv
from flight_storage.formats.csv_input import (
    _check_quotes_closed,
    _columns,
    _fast_table,
    _filter_lines,
    _filter_rows,
    _Position,
    iter_csv_batches,
)
from flight_storage.formats.csv_options import CsvInputOptions
from flight_storage.formats.csv_tokenizer import Tokenizer, UnclosedQuote, lines_to_lists
from flight_storage.storage.sources import FileSource
from select_dialect.flavors import FLAVORS
from tests.flight_storage.csv_corpus import ANY_BYTES, LINE

Rows = list[tuple[str | None, ...]]
Answer = Rows | str
"""The fields of every record, or the error code."""

FLAVOURS = ("ceph", "aws", "standard")
READINGS = [(flavor, {}) for flavor in FLAVOURS] + [
    ("aws", {"Comments": "#"}),  # MinIO's comment lines
    ("ceph", {"QuoteEscapeCharacter": '"'}),  # Ceph's quotes, a doubled quote is one
]
"""Each flavour's reading rules, and two request options that change which path may read."""

_CORPUS = st.one_of(
    ANY_BYTES,
    st.lists(LINE, min_size=1, max_size=30).map(lambda lines: "\n".join(lines).encode()),
).map(lambda data: data if data.endswith(b"\n") or not data else data + b"\n")
"""CSV objects: arbitrary bytes of the characters CSV rules care about, and lines of plain and
quoted fields; every record ends with its line feed (a final ``\\r`` reads alike then)."""


def _options(flavor: str, csv: dict[str, str] | None = None) -> CsvInputOptions:
    return CsvInputOptions.from_request(csv or {}, FLAVORS[flavor].reading)


def _table_rows(table: pa.Table | pa.RecordBatch) -> Rows:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [tuple(values) for values in zip(*columns, strict=True)]


def _as_rows(lists: list[list[str]], options: CsvInputOptions) -> Rows:
    """Fields as the reader's columns make them (empty fields per the flavour, padding)."""
    if not lists:
        return []
    return _table_rows(_columns(pa.array(lists, pa.list_(pa.string())), options, None))


def _lines(data: bytes, options: CsvInputOptions) -> pa.Array:
    """The object's records as the reader's line path sees them (``\\r`` before a line feed
    dropped, comments and, in the flavour, empty lines left out)."""
    text = data.decode("utf-8")
    lines = text.split("\n")[:-1] if text else []
    return _filter_lines(pa.array(lines, pa.string()), options)


def by_tokenizer(data: bytes, options: CsvInputOptions) -> Answer:
    """The definition: the tokenizer, one record (line) at a time; where a quoted field may
    hold a line end (``AllowQuotedRecordDelimiter``, the standard flavour), over the whole
    text, CRLF read as LF first (Go's rule, the reader's)."""
    if options.quoted_record_delimiter:
        return _by_record_tokenizer(data, options)
    try:
        lines = _lines(data, options).to_pylist()
    except UnicodeDecodeError:
        return "InvalidTextEncoding"
    tokenizer = Tokenizer(options, split_records=False)
    if options.unclosed_quote_error and options.quote is not None and any(
            tokenizer.unclosed_field(line) is not None for line in lines):
        return "CSVEscapingRecordDelimiter"
    return _as_rows([tokenizer.tokenize(line, True)[0][0] for line in lines], options)


def _by_record_tokenizer(data: bytes, options: CsvInputOptions) -> Answer:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "InvalidTextEncoding"
    try:
        rows, _ = Tokenizer(options, split_records=True).tokenize(text.replace("\r\n", "\n"),
                                                                 True)
    except UnclosedQuote:
        return "CSVParsingError"
    return _as_rows(_filter_rows(rows, options), options)


def by_vectorised_split(data: bytes, options: CsvInputOptions) -> Answer | None:
    """Records split at line ends (None where the reader never does: quotes that may hold a
    line end)."""
    if options.quoted_record_delimiter and options.quote and options.quote.encode() in data:
        return None
    try:
        lines = _lines(data, options)
    except UnicodeDecodeError:
        return "InvalidTextEncoding"
    if options.unclosed_quote_error:  # the reader's own check of this flavour
        try:
            _check_quotes_closed(lines, options, _Position())
        except InputFormatError as error:
            return error.code
    return _as_rows(lines_to_lists(lines, options).to_pylist(), options)


def by_pyarrow(data: bytes, options: CsvInputOptions) -> Answer | None:
    """pyarrow's reader where the survey lets it read the block (None: it refused)."""
    table = _fast_table(data, options)
    return None if table is None else _table_rows(table)


def by_reader(data: bytes, options: CsvInputOptions) -> Answer:
    """``iter_csv_batches``, which picks among the paths block by block."""
    try:
        batches = list(iter_csv_batches(io.BytesIO(data), options, num_columns=None,
                                        block_size=7))
    except InputFormatError as error:
        return error.code
    rows: Rows = []
    for batch in batches:
        rows.extend(_table_rows(batch))
    return rows


def by_datafusion(data: bytes, flavor: str, csv: dict[str, str], directory: Path
                  ) -> tuple[Answer, CsvInputOptions] | None:
    """DataFusion's reader where the survey and the engine let it read the object, with the
    options the plan reads by (``SELECT *`` keeps Ceph's empty fields); None where they
    refused."""
    path = directory / "object.csv"
    path.write_bytes(data)
    engine = SelectEngine(EngineConfig())
    try:  # planning SELECT * counts the fields with the reference reader
        plan = engine.plan("select * from s3object", FileSource(path, "b/o.csv", len(data)),
                           InputSpec("csv", "NONE", csv), flavor=flavor)
    except StorageError:
        return None
    if plan.reader != "datafusion":
        return None
    options = csv_options(engine, plan.input, flavor, plan.translation)
    return [tuple(r.values()) for b in engine.execute(plan) for r in b.to_pylist()], options


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _padded(answer: Answer, width: int) -> Answer:
    if isinstance(answer, str):
        return answer
    return [row + (None,) * (width - len(row)) for row in answer]


def _same(expected: Answer, got: Answer) -> bool:
    """Equal, rows padded to one width (a path builds only as many columns as it saw)."""
    if isinstance(expected, str) or isinstance(got, str):
        return expected == got
    width = max((len(r) for r in [*expected, *got]), default=0)
    return _padded(expected, width) == _padded(got, width)


PATHS: dict[str, Callable[[bytes, CsvInputOptions], Answer | None]] = {
    "vectorised split": by_vectorised_split,
    "pyarrow": by_pyarrow,
    "reader": by_reader,
}


@pytest.mark.parametrize(("flavor", "csv"), READINGS)
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_CORPUS)
@example(data=b'a,"b""c"\n')
@example(data=b'"a\n')
@example(data=b'x,"",y\n\n#c\n')
@example(data=b'",",","\n')
def test_every_path_reads_what_the_tokenizer_reads(tmp_path: Path, flavor: str,
                                                   csv: dict[str, str], data: bytes) -> None:
    options = _options(flavor, csv)
    expected = by_tokenizer(data, options)
    for name, read in PATHS.items():
        got = read(data, options)
        if got is None:
            # the paths that may refuse a block
            assert name in ("pyarrow", "vectorised split")
            continue
        if name == "reader" and isinstance(expected, str) and isinstance(got, str):
            # an object with several faults: the reader names the first it meets
            assert got == expected or not _is_text(data), (got, expected)
            continue
        assert _same(expected, got), f"{name}: {got!r}, the tokenizer: {expected!r}"
    native = by_datafusion(data, flavor, csv, tmp_path)
    if native is not None:
        rows, read_by = native
        expected = by_tokenizer(data, read_by)
        assert _same(expected, rows), f"datafusion: {rows!r}, the tokenizer: {expected!r}"


@pytest.mark.parametrize("flavor", FLAVOURS)
@settings(max_examples=60, deadline=None)
@given(lines=st.lists(LINE.filter(bool), min_size=1, max_size=30))
def test_the_survey_refuses_no_plain_corpus(flavor: str, lines: list[str]) -> None:
    """Plain and quoted fields without doubled quotes: both Arrow readers may read them (the
    paths are compared above, not only refused)."""
    data = "\n".join(lines).encode() + b"\n"
    options = _options(flavor)
    doubled = b'""' in data
    assert survey_csv([data], options).native
    assert (arrow_block_reason(data, options) == "") or (doubled and flavor == "ceph")


def test_a_record_is_as_long_on_every_path() -> None:
    """OverMaxRecordSize measures a record's bytes, its delimiter left out, whichever path
    reads it: the tokenizer of quoted record delimiters counted only its fields' characters
    (quotes and field delimiters left out) and let through what the line path refused."""
    record = '"' + "a" * 10 + '","' + "b" * 10 + '"'  # 27 bytes, 20 of them fields
    for csv in ({}, {"AllowQuotedRecordDelimiter": "TRUE"}):
        options = CsvInputOptions.from_request(csv, FLAVORS["aws"].reading, max_record_size=24)
        assert by_reader(f"x\n{record}\n".encode(), options) == "OverMaxRecordSize", csv
        roomy = CsvInputOptions.from_request(csv, FLAVORS["aws"].reading, max_record_size=27)
        assert _same(by_reader(f"x\n{record}\n".encode(), roomy),
                     [("x",), ("a" * 10, "b" * 10)])
