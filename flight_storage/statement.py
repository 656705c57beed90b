"""Find which object a Flight SQL statement reads: ``FROM "bucket"."key"``.

S3 Select requests name the object outside the SQL (``Bucket``/``Key``) and write
``FROM s3object``; Flight SQL clients name it in the SQL. This module finds that table reference
and hands the dialect the statement with ``FROM stdin`` in its place, padded with spaces to the
same length so that line and column numbers of later syntax errors stay those the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

from flight_storage.errors import InvalidRequestError

_NAME_TOKENS = {TokenType.IDENTIFIER, TokenType.VAR, TokenType.STRING}
_PLACEHOLDER = "stdin"


@dataclass(frozen=True)
class TableReference:
    """The object a statement reads."""

    bucket: str
    key: str


def _top_level_from(tokens: list[Token]) -> int | None:
    depth = 0
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.FROM and depth == 0:
            return index
    return None


def split_table_reference(sql: str) -> tuple[TableReference | None, str]:
    """Return the ``"bucket"."key"`` a statement reads and the statement rewritten to ``stdin``.

    Statements that read ``s3object``/``stdin`` (or that do not tokenize) come back unchanged
    with no reference; the dialect then reports any syntax error itself.

    Example:
        >>> split_table_reference('SELECT _1 FROM "sales"."orders/2024-01.csv" WHERE _1 > 2')[0]
        TableReference(bucket='sales', key='orders/2024-01.csv')
    """
    try:
        tokens = Tokenizer().tokenize(sql)
    except TokenError:
        return None, sql
    start = _top_level_from(tokens)
    if start is None:
        return None, sql
    parts = tokens[start + 1 : start + 4]
    if (
        len(parts) < 3
        or parts[0].token_type not in _NAME_TOKENS
        or parts[1].token_type != TokenType.DOT
        or parts[2].token_type not in _NAME_TOKENS
    ):
        return None, sql
    bucket, key = parts[0].text, parts[2].text
    if not bucket or not key:
        raise InvalidRequestError("table reference must be \"bucket\".\"key\"")
    begin, end = parts[0].start, parts[2].end
    # Quoted names: include the quote characters in the replaced span.
    while begin > 0 and sql[begin - 1] in "\"'`":
        begin -= 1
    while end + 1 < len(sql) and sql[end + 1] in "\"'`":
        end += 1
    span = end - begin + 1
    replacement = _PLACEHOLDER.ljust(span) if span >= len(_PLACEHOLDER) else _PLACEHOLDER
    return TableReference(bucket, key), sql[:begin] + replacement + sql[end + 1 :]
