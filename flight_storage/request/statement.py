"""Find which object a Flight SQL statement reads: ``FROM "bucket"."key" [WITH (...)]``.

S3 Select requests name the object outside the SQL (``Bucket``/``Key``) and write
``FROM s3object``; Flight SQL clients name it in the SQL, and may give the InputSerialization
there too, as options right after the name::

    SELECT * FROM "sales"."orders/2024-01.csv" WITH (FileHeaderInfo = 'USE', FieldDelimiter = ',')

This module finds that table reference and hands the dialect the statement with ``FROM stdin``
in its place, padded with spaces to the same length so that line and column numbers of later
syntax errors stay those the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from flight_storage.errors import InvalidRequestError
from select_dialect.s3select import S3Select

_NAME_TOKENS = {TokenType.IDENTIFIER, TokenType.VAR, TokenType.STRING}
_PLACEHOLDER = "stdin"


# Option name (lower case) -> (section of InputSerialization or None for top level, AWS name).
_OPTIONS: dict[str, tuple[str | None, str]] = {
    "fileheaderinfo": ("CSV", "FileHeaderInfo"),
    "fielddelimiter": ("CSV", "FieldDelimiter"),
    "recorddelimiter": ("CSV", "RecordDelimiter"),
    "quotecharacter": ("CSV", "QuoteCharacter"),
    "quoteescapecharacter": ("CSV", "QuoteEscapeCharacter"),
    "comments": ("CSV", "Comments"),
    "allowquotedrecorddelimiter": ("CSV", "AllowQuotedRecordDelimiter"),
    "type": ("JSON", "Type"),
    "compressiontype": (None, "CompressionType"),
    "format": (None, "Format"),
}
_FORMATS = {"csv": "CSV", "json": "JSON", "parquet": "Parquet"}
_PUNCTUATION = {TokenType.COMMA, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.EQ,
                TokenType.SEMICOLON}


@dataclass(frozen=True)
class TableReference:
    """The object a statement reads, and the InputSerialization options it gives."""

    bucket: str
    key: str
    input_serialization: dict[str, Any] | None = None


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
        # the dialect's tokenizer: `...` is a string in s3-select, not an identifier
        tokens = S3Select().tokenize(sql)
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
    rewritten = sql[:begin] + replacement + sql[end + 1 :]
    options, options_span = _with_options(tokens, start + 4)
    if options_span is not None:
        lo, hi = options_span
        rewritten = rewritten[:lo] + " " * (hi - lo + 1) + rewritten[hi + 1 :]
    return TableReference(bucket, key, options), rewritten


def _with_options(tokens: list[Token], index: int) -> tuple[dict[str, Any] | None,
                                                             tuple[int, int] | None]:
    """Parse ``WITH (name = value, ...)`` at ``tokens[index]`` into an InputSerialization."""
    if index >= len(tokens) or tokens[index].token_type != TokenType.WITH:
        return None, None
    if index + 1 >= len(tokens) or tokens[index + 1].token_type != TokenType.L_PAREN:
        raise InvalidRequestError("WITH after the table name takes (name = 'value', ...)")
    request: dict[str, Any] = {}
    position = index + 2
    while position < len(tokens) and tokens[position].token_type != TokenType.R_PAREN:
        name_token = tokens[position]
        if (position + 2 >= len(tokens) or tokens[position + 1].token_type != TokenType.EQ
                or name_token.token_type in _PUNCTUATION
                or tokens[position + 2].token_type in _PUNCTUATION):
            raise InvalidRequestError(
                f"expected name = 'value' in WITH options near {name_token.text!r}"
            )
        _set_option(request, name_token.text, tokens[position + 2].text)
        position += 3
        if position < len(tokens) and tokens[position].token_type == TokenType.COMMA:
            position += 1
    if position >= len(tokens):
        raise InvalidRequestError("WITH options are not closed with ')'")
    span = (tokens[index].start, tokens[position].end)
    return _finish_request(request), span


def _set_option(request: dict[str, Any], name: str, value: str) -> None:
    entry = _OPTIONS.get(name.lower())
    if entry is None:
        raise InvalidRequestError(
            f"unknown input option {name!r}; use one of {sorted(v[1] for v in _OPTIONS.values())}"
        )
    section, aws_name = entry
    if section is None:
        request[aws_name] = value
    else:
        request.setdefault(section, {})[aws_name] = value


def _finish_request(request: dict[str, Any]) -> dict[str, Any]:
    fmt = request.pop("Format", None)
    if fmt is not None:
        section = _FORMATS.get(str(fmt).lower())
        if section is None:
            raise InvalidRequestError(f"unknown Format {fmt!r}; use CSV, JSON or Parquet")
        request.setdefault(section, {})
    if "CSV" in request and "JSON" in request:
        raise InvalidRequestError("WITH options mix CSV and JSON settings")
    return request
