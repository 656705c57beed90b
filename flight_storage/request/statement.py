"""Find which object a Flight SQL statement reads: ``FROM "bucket"."key" [WITH (...)]``.

S3 Select requests name the object outside the SQL (``Bucket``/``Key``) and write
``FROM s3object``; Flight SQL clients name it in the SQL, and may give the InputSerialization
there too, as options right after the name::

    SELECT * FROM "sales"."orders/2024-01.csv" WITH (FileHeaderInfo = 'USE', FieldDelimiter = ',')

An Apache Iceberg table of a configured catalog is named with three parts,
``"catalog"."namespace"."table"`` (a nested namespace as one dotted name, ``"lake"."a.b"."t"``),
and may name an older snapshot right after it, as Trino and Spark write it::

    SELECT * FROM "lake"."sales"."orders" FOR VERSION AS OF 4181216171713291547
    SELECT * FROM "lake"."sales"."orders" FOR TIMESTAMP AS OF '2024-01-02 00:00:00'

A one-part name (``FROM "orders/2024-01.csv"``, ``FROM orders``) is an *unqualified*
reference: the caller resolves it in the session's catalog and schema
(``flight_storage/rpc/sessions.py``). ``s3object`` and ``stdin`` stay S3 Select's own names.

This module finds that table reference and hands the dialect the statement with ``FROM stdin``
in its place, padded with spaces to the same length so that line and column numbers of later
syntax errors stay those the user wrote. Columns qualified with the table, as SQL tools write
them (``"sales"."orders/2024-01.csv".id``, ``"orders/2024-01.csv".id``), are rewritten to
``stdin.id`` the same way: the qualifier names the table, as SQL's scoping says, even where a
JSON document has a field of that name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from flight_storage.errors import InvalidRequestError
from select_dialect.s3select import S3Select

_NAME_TOKENS = {TokenType.IDENTIFIER, TokenType.VAR, TokenType.STRING}
_PLACEHOLDER = "stdin"
_S3_SELECT_TABLES = frozenset({"s3object", "stdin"})


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
    """The object a statement reads, and the InputSerialization options it gives.

    For an Iceberg table (``"catalog"."namespace"."table"``), ``bucket`` is the catalog,
    ``key`` the namespace and ``table`` the table; ``version``/``as_of`` the snapshot it asks
    for (``FOR VERSION AS OF n``, ``FOR TIMESTAMP AS OF 'text'``), None for the current one.
    """

    bucket: str
    key: str
    input_serialization: dict[str, Any] | None = None
    table: str | None = None
    version: int | None = None
    as_of: str | None = None
    qualified: bool = True
    """False for a one-part name: ``key`` is the name as written and ``bucket`` is empty until
    the caller resolves it in a session's namespace."""

    def names(self, bucket: str, key: str) -> bool:
        """Whether this reference may name ``bucket``/``key`` (an unqualified one: resolved
        in some schema, as the object or as the prefix table of its name)."""
        if self.qualified:  # "bucket"."table" names the prefix table table/ too
            return self.bucket == bucket and key in (self.key, self.key + "/")
        stem = key[:-1] if key.endswith("/") and not self.key.endswith("/") else key
        return stem == self.key or stem.endswith("/" + self.key)

    def in_namespace(self, bucket: str, key: str) -> TableReference:
        """This reference naming ``bucket``/``key`` (an unqualified name, resolved)."""
        return TableReference(bucket, key, self.input_serialization)

    def as_object(self) -> TableReference:
        """A three-part name that is no Iceberg table's, ``"bucket"."schema"."table"``, as the
        table ``schema/table`` of the bucket (where an ingest with a schema writes it); any
        other reference unchanged."""
        if self.table is None:
            return self
        if self.version is not None or self.as_of is not None:
            raise InvalidRequestError(f"{self.bucket} is no Iceberg catalog: FOR VERSION AS OF "
                                      "and FOR TIMESTAMP AS OF read Iceberg tables only")
        return TableReference(self.bucket, f"{self.key}/{self.table}", None)

    @property
    def is_iceberg(self) -> bool:
        """True for a three-part name: a table of an Iceberg catalog."""
        return self.table is not None


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


@functools.lru_cache(maxsize=1024)
def split_table_reference(sql: str) -> tuple[TableReference | None, str]:
    """Return the ``"bucket"."key"`` a statement reads and the statement rewritten to ``stdin``.

    Statements that read ``s3object``/``stdin`` (or that do not tokenize) come back unchanged
    with no reference; the dialect then reports any syntax error itself. Answers are kept for
    the last statements seen (every DoGet of an endpoint splits its statement again; the
    reference is read-only for callers).

    Example:
        >>> split_table_reference('SELECT _1 FROM "sales"."orders/2024-01.csv" WHERE _1 > 2')[0]
        TableReference(bucket='sales', key='orders/2024-01.csv', input_serialization=None, table=None, version=None, as_of=None, qualified=True)
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
    qualified = (
        len(parts) == 3
        and parts[0].token_type in _NAME_TOKENS
        and parts[1].token_type == TokenType.DOT
        and parts[2].token_type in _NAME_TOKENS
    )
    if qualified:
        bucket, key, width = parts[0].text, parts[2].text, 3
        if not bucket or not key:
            raise InvalidRequestError("table reference must be \"bucket\".\"key\"")
    elif _one_part_name(parts):
        bucket, key, width = "", parts[0].text, 1
    else:
        return None, sql
    table = _third_part(tokens, start) if qualified else None
    last = tokens[start + 5] if table is not None else parts[width - 1]
    begin, end = _quoted_span(sql, parts[0], last)
    span = end - begin + 1
    # (begin, end, text) edits, applied from the end so earlier positions stay valid.
    edits = [(begin, end, _PLACEHOLDER.ljust(span))]
    if table is not None:
        edits += _unqualified_columns(sql, tokens, start, 5, key, table)
        version, as_of, time_travel = _time_travel(tokens, start + 6)
        if time_travel is not None:
            edits.append((time_travel[0], time_travel[1],
                          " " * (time_travel[1] - time_travel[0] + 1)))
        reference = TableReference(bucket, key, None, table, version, as_of)
    else:
        edits += _unqualified_columns(sql, tokens, start, width, bucket, key)
        options, options_span = _with_options(tokens, start + 1 + width)
        if options_span is not None:
            lo, hi = options_span
            edits.append((lo, hi, " " * (hi - lo + 1)))
        reference = TableReference(bucket, key, options, qualified=qualified)
    rewritten = sql
    for lo, hi, text in sorted(edits, reverse=True):
        rewritten = rewritten[:lo] + text + rewritten[hi + 1 :]
    return reference, rewritten


def _third_part(tokens: list[Token], start: int) -> str | None:
    """The table of ``FROM "catalog"."namespace"."table"`` (None: a two-part name)."""
    rest = tokens[start + 4 : start + 6]
    if (len(rest) == 2 and rest[0].token_type == TokenType.DOT
            and rest[1].token_type in _NAME_TOKENS):
        if not rest[1].text:
            raise InvalidRequestError('table reference must be "catalog"."namespace"."table"')
        return rest[1].text
    return None


def _time_travel(tokens: list[Token], index: int
                 ) -> tuple[int | None, str | None, tuple[int, int] | None]:
    """``FOR VERSION AS OF n`` or ``FOR TIMESTAMP AS OF [TIMESTAMP] 'text'`` at ``index``:
    the snapshot id or the time, and the clause's span (None: no clause)."""
    words = [t.text.upper() for t in tokens[index : index + 4]]
    if not words or words[0] != "FOR":
        return None, None, None
    if len(words) < 4 or words[1] not in ("VERSION", "TIMESTAMP") or words[2:] != ["AS", "OF"]:
        raise InvalidRequestError("after an Iceberg table, write FOR VERSION AS OF <snapshot id> "
                                  "or FOR TIMESTAMP AS OF '<time>'")
    position = index + 4
    if (words[1] == "TIMESTAMP" and position < len(tokens)
            and tokens[position].text.upper() == "TIMESTAMP"):
        position += 1  # FOR TIMESTAMP AS OF TIMESTAMP '...'
    value = tokens[position] if position < len(tokens) else None
    if words[1] == "VERSION":
        if value is None or value.token_type != TokenType.NUMBER or not value.text.isdigit():
            raise InvalidRequestError("FOR VERSION AS OF takes a snapshot id (an integer)")
        return int(value.text), None, (tokens[index].start, value.end)
    if value is None or value.token_type != TokenType.STRING:
        raise InvalidRequestError("FOR TIMESTAMP AS OF takes a time in quotes, e.g. "
                                  "FOR TIMESTAMP AS OF '2024-01-02 00:00:00'")
    # a string token's end is before its closing quote
    return None, value.text, (tokens[index].start, value.end + 1)


def _one_part_name(parts: list[Token]) -> bool:
    """A one-part table name other than S3 Select's own (``s3object``, ``stdin``)."""
    if not parts or parts[0].token_type not in _NAME_TOKENS or not parts[0].text:
        return False
    if len(parts) > 1 and parts[1].token_type in (TokenType.DOT, TokenType.L_BRACKET):
        return False  # s3object[*].path, or a name with a dotted tail
    return parts[0].text.lower() not in _S3_SELECT_TABLES


def _quoted_span(sql: str, first: Token, last: Token) -> tuple[int, int]:
    """Where ``first``..``last`` sit in ``sql``, quote characters included."""
    begin, end = first.start, last.end
    while begin > 0 and sql[begin - 1] in "\"'`":
        begin -= 1
    while end + 1 < len(sql) and sql[end + 1] in "\"'`":
        end += 1
    return begin, end


def _unqualified_columns(sql: str, tokens: list[Token], from_index: int, width: int,
                         bucket: str, key: str) -> list[tuple[int, int, str]]:
    """Edits turning ``bucket.key.col`` and ``key.col`` into ``stdin.col`` (right-aligned in
    the same span when it is long enough).

    Only a qualifier that starts a reference (not after a dot) and is followed by a dot is
    rewritten; the FROM clause's own reference is left to the caller.
    """
    edits: list[tuple[int, int, str]] = []
    index = 0
    while index < len(tokens):
        if index in range(from_index, from_index + 1 + width) or (
                index and tokens[index - 1].token_type == TokenType.DOT):
            index += 1
            continue
        length = _qualifier_length(tokens, index, bucket, key)
        if length:
            begin, end = _quoted_span(sql, tokens[index], tokens[index + length - 1])
            edits.append((begin, end, _PLACEHOLDER.rjust(end - begin + 1)))
            index += length
            continue
        index += 1
    return edits


def _qualifier_length(tokens: list[Token], index: int, bucket: str, key: str) -> int:
    """How many tokens at ``index`` spell ``bucket . key`` or ``key`` before a dot (0: none)."""
    def name_at(i: int, text: str) -> bool:
        return (i < len(tokens) and tokens[i].token_type in _NAME_TOKENS
                and tokens[i].text == text)

    def dot_at(i: int) -> bool:
        return i < len(tokens) and tokens[i].token_type == TokenType.DOT

    if bucket and name_at(index, bucket) and dot_at(index + 1) and name_at(index + 2, key) \
            and dot_at(index + 3):
        return 3
    if name_at(index, key) and dot_at(index + 1):
        return 1
    return 0


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
