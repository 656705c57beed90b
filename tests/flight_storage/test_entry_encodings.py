"""Each entry column's encoding is the smallest candidate on the entry's first rows
(``execution/entry_encodings.py``), and the written entry reads back the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flight_storage.execution import entry_encodings
from flight_storage.execution.decoded_shadows import write_batches


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(5)
    words = np.array(["alpha", "bravo", "charlie", "delta"])
    return pa.table({
        "ids": pa.array(np.arange(rows), pa.int64()),
        "codes": pa.array(rng.integers(0, 7, rows), pa.int64()),
        "words": pa.array(words[rng.integers(0, 4, rows)].tolist(), pa.string()),
        "stamps": pa.array(rng.integers(0, 10**17, rows), pa.timestamp("ns")),
    })


def test_distinct_values_leave_the_dictionary_and_repeated_values_keep_it() -> None:
    chosen = entry_encodings.choose(_table(40_000))
    assert set(chosen.dictionary) == {"codes", "words"}
    assert chosen.others["ids"] in {"DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT"}
    assert "stamps" in chosen.others


def test_an_entry_written_with_chosen_encodings_reads_back_unchanged(tmp_path: Path) -> None:
    table = _table(300_000)
    target = tmp_path / "entry.parquet"
    assert write_batches(target, table.schema, table.to_batches(max_chunksize=50_000)) == 300_000
    stored = pq.read_table(target)
    # the words (4 distinct values) are typed as a dictionary; every value reads back
    assert stored.schema.field("words").type == entry_encodings.DICTIONARY_TEXT
    assert stored.cast(table.schema).equals(table)
    metadata = pq.read_metadata(target)
    encodings = {metadata.row_group(0).column(i).path_in_schema:
                 metadata.row_group(0).column(i).encodings for i in range(4)}
    assert "RLE_DICTIONARY" not in encodings["ids"]
    assert "RLE_DICTIONARY" in encodings["words"]


def test_text_of_many_distinct_values_stays_plain_text(tmp_path: Path) -> None:
    table = pa.table({"ids": pa.array([f"id{i}" for i in range(50_000)])})
    target = tmp_path / "entry.parquet"
    write_batches(target, table.schema, table.to_batches(max_chunksize=10_000))
    assert pq.read_table(target).equals(table)


def test_an_empty_entry_is_written() -> None:
    assert entry_encodings.choose(_table(0)).dictionary == ["ids", "codes", "words", "stamps"]
