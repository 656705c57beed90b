"""Statements and parameters are tokenised with the dialect's tokenizer (issue #13, item 4).

In s3-select a backtick quotes a (timestamp) string literal; sqlglot's base tokenizer reads it
as an identifier. These failed before: a ``?`` inside backticks was counted as a marker, and a
double quote inside backticks made the statement untokenisable, hiding its table reference.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from flight_storage.errors import InvalidRequestError
from flight_storage.request.parameters import bind, placeholder_offsets
from flight_storage.request.statement import TableReference, split_table_reference


def test_question_mark_inside_backticks_is_text() -> None:
    sql = "select * from s3object where _1 = `2020?` and _2 = ?"
    assert placeholder_offsets(sql) == [sql.rindex("?")]


def test_binding_leaves_the_backtick_literal_alone() -> None:
    sql = "select * from s3object where _1 = `a?b` and _2 = ?"
    batch = pa.record_batch([pa.array([7])], names=["0"])
    assert bind(sql, batch) == "select * from s3object where _1 = `a?b` and _2 = 7"


def test_marker_count_excludes_backtick_text() -> None:
    with pytest.raises(InvalidRequestError, match="0 parameter marker"):
        bind("select `?` from s3object", pa.record_batch([pa.array([1])], names=["0"]))


def test_table_reference_found_past_a_double_quote_in_backticks() -> None:
    reference, rewritten = split_table_reference('select * from "b"."k" where _1 = `a"b`')
    assert reference == TableReference("b", "k")
    assert rewritten == 'select * from stdin   where _1 = `a"b`'
