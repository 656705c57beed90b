"""``||`` concatenation (every flavour) and table-qualified column names.

Both run through the real engine on a small CSV, the statement first passing through the
server's table-reference rewrite as a Flight SQL statement does: the translation alone would
not show that DataFusion gives NULL for ``NULL || 'x'`` or that the qualified name reads the
right column.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from flight_storage.execution.engine import InputSpec, SelectEngine
from flight_storage.request.statement import split_table_reference
from flight_storage.storage.sources import BytesSource
from select_dialect.errors import UnsupportedFeatureError
from select_dialect.flavors import FLAVOR_NAMES

CSV = b"id,first,last\n1,ada,lovelace\n2,alan,\n3,grace,hopper\n"
HEADER = InputSpec("csv", options={"FileHeaderInfo": "USE"})


def _rows(sql: str, flavor: str) -> list[tuple[object, ...]]:
    engine = SelectEngine()
    _, sql = split_table_reference(sql)
    plan = engine.plan(sql, BytesSource(CSV, "shop/people.csv"), HEADER, flavor=flavor)
    table = pa.Table.from_batches(list(engine.execute(plan)))
    return [tuple(row.values()) for row in table.to_pylist()]


@pytest.mark.parametrize("flavor", FLAVOR_NAMES)
def test_concatenation_joins_text_and_numbers(flavor: str) -> None:
    # ``first`` and ``last`` are AWS reserved keywords: the aws flavour needs them quoted,
    # and in Ceph's a double-quoted word is a string.
    first, last = ('"first"', '"last"') if flavor == "aws" else ("first", "last")
    rows = _rows(f"SELECT {first} || ' ' || {last} || '#' || CAST(id AS INT) FROM s3object "
                 f"WHERE {first} || {last} = 'gracehopper'", flavor)
    assert rows == [("grace hopper#3",)]


def test_concatenation_with_null_is_null() -> None:
    # The aws-rules flavours read the empty field as ''; NULL itself must propagate.
    rows = _rows("SELECT first || NULL, first || last FROM s3object WHERE id = '2'", "standard")
    assert rows == [(None, "alan")]


@pytest.mark.parametrize("qualifier", ['shop."people.csv"', '"shop"."people.csv"',
                                       '"people.csv"', "p", "stdin"])
def test_standard_flavour_reads_table_qualified_columns(qualifier: str) -> None:
    alias = " p" if qualifier == "p" else ""
    rows = _rows(f'SELECT {qualifier}.id, {qualifier}.last FROM "shop"."people.csv"{alias} '
                 f"WHERE {qualifier}.first = 'ada'", "standard")
    assert rows == [("1", "lovelace")]


def test_a_qualifier_naming_another_object_is_refused() -> None:
    with pytest.raises(UnsupportedFeatureError, match="nested paths"):
        _rows('SELECT shop."other.csv".id FROM "shop"."people.csv"', "standard")


def test_the_rewrite_keeps_positions_and_leaves_other_dots_alone() -> None:
    sql = ('SELECT "shop"."people.csv".id, s3object.x.y, \'a.b\' FROM "shop"."people.csv" '
           'WHERE "people.csv".id = 1')
    _, rewritten = split_table_reference(sql)
    assert len(rewritten) == len(sql)
    assert rewritten.split() == ["SELECT", "stdin.id,", "s3object.x.y,", "'a.b'", "FROM",
                                 "stdin", "WHERE", "stdin.id", "=", "1"]
