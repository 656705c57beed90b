"""pyarrow's JSON parser reads a typed JSON Lines table only where the reference reader reads
the same: equal answers on a generated corpus, a stop at every input the module's table names,
and a stop mid-object leaves every row served exactly once, in order."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pyarrow as pa
import pytest

from flight_storage.execution.engine import EngineConfig, InputSpec, SelectEngine
from flight_storage.formats import json_input
from flight_storage.formats.json_lines_arrow import arrow_reads, iter_arrow_lines
from flight_storage.formats.json_typed import column_paths, typed_batch
from flight_storage.formats.typed_columns import TypedColumns
from flight_storage.storage.sources import BytesSource
from select_dialect.flavors import FLAVORS, STANDARD

COLUMNS = TypedColumns(("id", "s", "x", "ok", "ts"),
                       ("int64", "string", "float64", "bool", "timestamp"))
_STRINGS = ("plain", 'quo"te', "back\\slash", "new\nline", "caf\u00e9", "\u2603\U0001f600", "")


def _record(i: int, rng: random.Random) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": i, "s": rng.choice(_STRINGS), "x": rng.choice([1, 2.5, -0.0, 1e300, 3]),
        "ok": rng.random() < 0.5, "ts": rng.choice(["2024-08-16T20:29:54+02:00",
                                                     "2024-08-16 20:29:54.123456Z",
                                                     "2024-02-29T23:59:59-09:30"]),
        "extra": {"nested": [1, {"k": None}]}}
    for key in ("s", "x", "ok", "ts"):
        if rng.random() < 0.1:
            record[key] = None
        elif rng.random() < 0.1:
            del record[key]
    return record


def _corpus(rows: int, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    return "".join(json.dumps(_record(i, rng), ensure_ascii=rng.random() < 0.5) + "\n"
                   for i in range(rows)).encode()


def _reference(data: bytes, names: tuple[str, ...]) -> tuple[list[dict[str, Any]], int]:
    """The reference's rows and their count (a batch of no columns still has rows)."""
    batches = json_input.iter_json_batches(
        io.BytesIO(data), json_input.JsonInputOptions("LINES"), from_path=(),
        paths=column_paths(COLUMNS, names), reading=FLAVORS[STANDARD].reading)
    typed = [typed_batch(b, COLUMNS, first_record=1, object_name="b/k") for b in batches]
    return [r for b in typed for r in b.to_pylist()], sum(b.num_rows for b in typed)


def _arrow(data: bytes, names: tuple[str, ...]) -> tuple[list[pa.RecordBatch], bool]:
    reader = iter_arrow_lines(io.BytesIO(data), COLUMNS, names, byte_range=None,
                              max_record_size=1 << 20, batch_rows=4096)
    batches: list[pa.RecordBatch] = []
    while True:
        try:
            batches.append(next(reader))
        except StopIteration as done:
            finished = bool(done.value)
            break
    return batches, finished


@pytest.mark.parametrize("names", [COLUMNS.names, ("ts", "id"), ()])
def test_arrow_reads_the_corpus_as_the_reference_does(names: tuple[str, ...]) -> None:
    data = _corpus(3000)
    batches, finished = _arrow(data, names)
    assert finished
    expected, count = _reference(data, names)
    assert sum(b.num_rows for b in batches) == count == 3000
    rows = [r for b in batches for r in b.select(list(names)).to_pylist()]
    assert rows == expected


@pytest.mark.parametrize("data", [
    b'{"id": 1}\n\n{"id": 2}\n',  # a blank line
    b'{"id": 1}{"id": 2}\n\n',  # two values on a line (and a blank one to even the count)
    b'{"id": 1, "other": NaN}\n',  # a literal the reference refuses, in an ignored key
    b'\xef\xbb\xbf{"id": 1}\n',  # a byte-order mark
    b'{"id": 1, "id": 2}\n',  # a duplicate key
    b'{"id": 1, "s": 12}\n',  # a number in a string column (the reference keeps its text)
    b'{"id": 1.5}\n',  # a fraction in an int64 column
    b'{"id": 1, "s": "\xff"}\n',  # invalid UTF-8
    b'[1, 2]\n',  # not an object
    b' {"id": 1}\n',  # leading whitespace
    b'{"id": 1, "ts": 5}\n',  # a number for a timestamp
])
def test_arrow_stops_where_the_reference_reads_otherwise(data: bytes) -> None:
    batches, finished = _arrow(data, COLUMNS.names)
    assert batches == [] and not finished


@pytest.mark.parametrize("cut", [1, 1000, 500_000, 1 << 20])
def test_adjacent_byte_ranges_read_every_line_once(cut: int) -> None:
    data = _corpus(9000)
    cut = min(cut, len(data) - 1)
    pieces = []
    for span in ((0, cut), (cut, len(data))):
        reader = iter_arrow_lines(io.BytesIO(data), COLUMNS, ("id",), byte_range=span,
                                  max_record_size=1 << 20, batch_rows=4096)
        pieces += [i for b in reader for i in b.column(0).to_pylist()]
    assert pieces == list(range(9000))


def test_a_line_over_the_record_limit_is_the_references() -> None:
    data = b'{"id": 1, "s": "' + b"x" * 100 + b'"}\n'
    reader = iter_arrow_lines(io.BytesIO(data), COLUMNS, COLUMNS.names, byte_range=None,
                              max_record_size=64, batch_rows=10)
    with pytest.raises(StopIteration) as done:
        next(reader)
    assert done.value.value is False


def test_json_text_and_date_columns_are_never_arrows() -> None:
    columns = TypedColumns(("a", "j", "d"), ("int64", "json", "date"))
    assert arrow_reads(columns, ("a",))
    assert not arrow_reads(columns, ("a", "j"))
    assert not arrow_reads(columns, ("d",))


def test_a_stop_after_the_first_block_serves_every_row_once_in_order() -> None:
    first = _corpus(12000)  # over one 1 MiB block
    assert len(first) > 1 << 20
    data = first + b"\n" + b'{"id": 99999, "s": 7}\n'  # a blank line, then a number as text
    engine = SelectEngine(EngineConfig(native_readers=False))
    spec = InputSpec("json", options={"Type": "LINES"}, columns=COLUMNS)
    plan = engine.plan("SELECT id, s FROM s3object", BytesSource(data, "b/k.jsonl"), spec,
                       flavor=STANDARD)
    rows = [r for b in engine.execute(plan) for r in b.to_pylist()]
    expected = [{"id": r["id"], "s": r.get("s")} for r in
                (json.loads(line) for line in first.splitlines())]
    assert rows == [*[{"c0": e["id"], "c1": e["s"]} for e in expected],
                    {"c0": 99999, "c1": "7"}]
