"""Each column's Parquet encoding in a decoded-cache entry, chosen by trying them on a sample.

pyarrow's default (dictionary for every column, falling back to plain once a dictionary page
outgrows 1 MiB) keeps the fallback's first dictionary pages and is the worst choice for a
column of many distinct values: measured on the peer CSV's entry (1 M rows, zstd), a column of
row ids took 2.98 MB with it, 1.03 MB plain and 0.03 MB byte-stream-split; timestamps 9.2,
7.2 and 6.4 MB. A column of few distinct values (a word list, codes 0-999) is smallest as a
dictionary. So the writer encodes the first rows of an entry each candidate way and keeps,
per column, the smallest; readers decode every Parquet encoding, so the choice changes bytes
on disk, never a value.

A text column of few distinct values is also *typed* as an Arrow dictionary in the entry, so
DataFusion reads it as one and evaluates a predicate (``LIKE '%echo%'``) once per distinct
value instead of once per row (measured on the peer CSV's entry: 17.5 ms -> 10.4 ms a query,
the 1% projection filtering such a column 44 -> 31 ms; DuckDB does the same on its own
dictionaries). The engine hands no dictionary to a client: its batches are decoded to their
value type as they leave DataFusion (``session.arrow_batches``), and result schemas name the
value type.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SAMPLE_ROWS = 1 << 14
"""Rows each candidate encoding is tried on."""
DICTIONARY_MARGIN = 0.9
"""Another encoding replaces the dictionary only when it is this much smaller or less: a
dictionary decodes fast and keeps repeated values compact across pages."""
DICTIONARY = "dictionary"
DICTIONARY_TYPE_SHARE = 1 / 16
"""A text column is typed as a dictionary when its distinct values in the entry's first row
group are at most this share of its rows."""
DICTIONARY_TEXT = pa.dictionary(pa.int32(), pa.string())


def _candidates(data_type: pa.DataType) -> tuple[str, ...]:
    """The encodings worth trying for a column of ``data_type`` (dictionary first)."""
    if pa.types.is_integer(data_type) or pa.types.is_timestamp(data_type) \
            or pa.types.is_date(data_type):
        return (DICTIONARY, "PLAIN", "DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT")
    if pa.types.is_floating(data_type):
        return (DICTIONARY, "PLAIN", "BYTE_STREAM_SPLIT")
    if pa.types.is_string(data_type) or pa.types.is_binary(data_type):
        return (DICTIONARY, "PLAIN")
    return (DICTIONARY,)


@dataclass(frozen=True)
class Encodings:
    """The writer's arguments: which columns are dictionaries, the others' encodings."""

    dictionary: list[str] = field(default_factory=list)
    others: dict[str, str] = field(default_factory=dict)
    typed_dictionary: tuple[str, ...] = ()

    def writer_options(self) -> dict[str, object]:
        if not self.others:
            return {"use_dictionary": True}
        return {"use_dictionary": self.dictionary, "column_encoding": self.others}


def _size(column: pa.ChunkedArray, name: str, encoding: str) -> int:
    table = pa.table({name: column})
    options = (Encodings([name]) if encoding == DICTIONARY
               else Encodings([], {name: encoding})).writer_options()
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", write_statistics=False, **options)
    return out.tell()


def choose(sample: pa.Table) -> Encodings:
    """Per column of ``sample`` (an entry's first rows), its smallest candidate encoding."""
    head = sample.slice(0, SAMPLE_ROWS)
    dictionary, others = [], {}
    for name, column in zip(head.column_names, head.columns, strict=True):
        candidates = _candidates(column.type)
        if len(candidates) == 1 or head.num_rows == 0:
            dictionary.append(name)
            continue
        sizes = {encoding: _size(column, name, encoding) for encoding in candidates}
        best = min(sizes, key=sizes.__getitem__)
        if best == DICTIONARY or sizes[best] > DICTIONARY_MARGIN * sizes[DICTIONARY]:
            dictionary.append(name)
        else:
            others[name] = best
    typed = tuple(name for name in dictionary if _few_distinct(sample.column(name)))
    return Encodings(dictionary, others, typed)


def _few_distinct(column: pa.ChunkedArray) -> bool:
    """Whether a text column's distinct values are few enough to be typed as a dictionary."""
    if column.type != pa.string() or len(column) == 0:
        return False
    return bool(len(pc.unique(column)) <= DICTIONARY_TYPE_SHARE * len(column))


def entry_schema(schema: pa.Schema, chosen: Encodings) -> pa.Schema:
    """``schema`` with the text columns ``chosen`` types as dictionaries."""
    for name in chosen.typed_dictionary:
        index = schema.get_field_index(name)
        schema = schema.set(index, schema.field(index).with_type(DICTIONARY_TEXT))
    return schema


def is_text(data_type: pa.DataType) -> bool:
    """Whether an entry column holds text (plain, or typed as a dictionary of text)."""
    return bool(data_type == pa.string() or data_type == DICTIONARY_TEXT)
