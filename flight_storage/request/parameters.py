"""Bind Flight SQL statement parameters (``?``) into s3-select text as literals.

The ADBC driver sends parameters as a one-row Arrow batch through ``DoPut``. The dialect has no
parameter markers, so each ``?`` outside quotes and comments (as the dialect's tokenizer sees
them) is replaced by the SQL literal of its value before translation; values are rendered
(by the renderer the clients' pushdown uses too, ``protocol/literals.py``), never spliced as
text, so a string parameter can only ever be a string literal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from flight_storage.errors import InvalidRequestError, StorageError
from flight_storage.protocol import literals
from select_dialect.s3select import S3Select


def sql_literal(value: Any) -> str:
    """Render one parameter as an s3-select literal (the one renderer both sides share,
    :mod:`flight_storage.protocol.literals`).

    Raises:
        InvalidRequestError: the value has no exact literal.
    """
    try:
        return literals.sql_literal(value)
    except literals.LiteralError as exc:
        raise InvalidRequestError(f"parameter: {exc}") from None


def placeholder_offsets(sql: str) -> list[int]:
    """Character offsets of the ``?`` markers outside strings, identifiers and comments.

    The dialect's own tokenizer decides what is quoted: `` `...` `` is a string literal in
    s3-select (an identifier in sqlglot's base tokenizer), so a ``?`` inside it is text.
    """
    if "?" not in sql:  # no marker can hide in a statement without the character
        return []
    try:
        tokens = S3Select().tokenize(sql)
    except TokenError as exc:
        raise InvalidRequestError(f"cannot find parameters: {exc}") from None
    return [t.start for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]


def has_parameters(sql: str) -> bool:
    """True when ``sql`` has ``?`` markers (False when it does not tokenise: the translator
    reports that error later, with its position)."""
    try:
        return bool(placeholder_offsets(sql))
    except StorageError:
        return False


def bind(sql: str, batch: pa.RecordBatch | None) -> str:
    """Replace each ``?`` with the matching column of ``batch``'s single row.

    Raises:
        InvalidRequestError: the numbers of markers and values differ, or the batch has more than
            one row (one statement runs once).
    """
    offsets = placeholder_offsets(sql)
    values: Sequence[Any] = ()
    if batch is not None and batch.num_columns:
        if batch.num_rows != 1:
            raise InvalidRequestError(
                f"a query binds exactly one row of parameters, got {batch.num_rows}"
            )
        values = [column[0].as_py() for column in batch.columns]
    if len(values) != len(offsets):
        raise InvalidRequestError(
            f"statement has {len(offsets)} parameter marker(s) but {len(values)} value(s) bound"
        )
    out = sql
    for offset, value in sorted(zip(offsets, values, strict=True), reverse=True):
        out = out[:offset] + sql_literal(value) + out[offset + 1 :]
    return out
