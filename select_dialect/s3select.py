"""Read side of the s3-select dialect: tokenizer and parser tables on top of sqlglot.

The grammar is the Ceph s3-select language (a superset of AWS S3 Select):

* ``^`` is exponentiation, ``==`` is equality, `` `...` `` is a (timestamp) literal string;
* ``IS [NOT] MISSING``; ``LIKE ... ESCAPE <any expression>``;
* ``FROM s3object|stdin|S3Object[*].a.b|/object/path [[AS] alias]``: the FROM clause is parsed
  into :class:`S3Table` carrying the JSON path steps of the row selector;
* every s3-select function is parsed into a plain ``exp.Anonymous`` (upper-cased name) so the
  translator sees the call exactly as written; ``CAST``, ``SUBSTRING ... FROM ... FOR``,
  ``TRIM(... FROM ...)``, ``EXTRACT(... FROM ...)`` and the aggregates keep sqlglot's nodes.

Double-quoted text is kept as a quoted identifier here; whether it is a string (Ceph) or a
column name (AWS) is the translator's decision (:mod:`select_dialect.lowering`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

# Function names parsed into ``exp.Anonymous`` (translated by name in lowering.py).
ANONYMOUS_FUNCTIONS: tuple[str, ...] = (
    "ADD",
    "CHARACTER_LENGTH",
    "CHAR_LENGTH",
    "COALESCE",
    "DATE_ADD",
    "DATE_DIFF",
    "FLOAT",
    "INT",
    "LOWER",
    "NULLIF",
    "TIMESTAMP",
    "TO_STRING",
    "TO_TIMESTAMP",
    "UPPER",
    "UTCNOW",
    "VERSION",
)

# Tokens that end a FROM clause (after the table and its optional alias). GROUP BY, HAVING
# and ORDER BY end it too, so that the translator, not a misleading alias, answers them.
_FROM_END = {TokenType.WHERE, TokenType.LIMIT, TokenType.SEMICOLON, TokenType.GROUP_BY,
             TokenType.HAVING, TokenType.ORDER_BY}


class S3Table(exp.Expression):
    """``FROM <name><path> [AS alias]``: ``this`` is the written name, ``path`` the steps."""

    arg_types = {"this": True, "path": False, "alias": False}


class Missing(exp.Expression):
    """The ``MISSING`` keyword (``IS MISSING``, ``COALESCE(missing)``)."""

    arg_types: ClassVar[dict[str, bool]] = {}


def _anonymous(name: str) -> Callable[[Sequence[exp.Expression]], exp.Expression]:
    def build(args: Sequence[exp.Expression]) -> exp.Expression:
        return exp.Anonymous(this=name, expressions=list(args))

    return build


class S3SelectParser(parser.Parser):
    """sqlglot parser with the s3-select tables."""

    FUNCTIONS = {
        **parser.Parser.FUNCTIONS,
        **{name: _anonymous(name) for name in ANONYMOUS_FUNCTIONS},
    }

    BITWISE: ClassVar[dict[TokenType, type[exp.Binary]]] = {}
    EXPONENT = {TokenType.CARET: exp.Pow}

    def _parse_escape(self, this: exp.Expr | None) -> exp.Expr | None:
        """``ESCAPE`` takes any expression (Ceph accepts any single character, even dynamic)."""
        if not self._match(TokenType.ESCAPE):
            return this
        return self.expression(exp.Escape(this=this, expression=self._parse_bitwise()))

    def _parse_is(self, this: exp.Expr | None) -> exp.Expr | None:
        index = self._index
        negate = self._match(TokenType.NOT)
        if self._match_text_seq("MISSING"):
            node: exp.Expression = exp.Is(this=this, expression=Missing())
            return exp.Not(this=node) if negate else node
        self._retreat(index)
        return super()._parse_is(this)

    def _parse_table(self, *_args: Any, **_kwargs: Any) -> exp.Expression | None:
        """The s3-select FROM clause: a name or an absolute object path, JSON steps, alias."""
        if not self._curr:
            self.raise_error("Expected a table after FROM")
            return None
        if self._curr.token_type == TokenType.SLASH:
            parts: list[str] = []
            while self._curr and self._curr.token_type not in _FROM_END:
                parts.append(self._curr.text)
                self._advance()
            return S3Table(this=exp.to_identifier("".join(parts)))
        name_token = self._curr
        if name_token.token_type in (TokenType.STRING, TokenType.NUMBER):
            self.raise_error("Expected a table name")
        self._advance()
        table = S3Table(this=exp.to_identifier(name_token.text), path=self._parse_from_path())
        self._match(TokenType.ALIAS)
        if self._curr and self._curr.token_type not in _FROM_END:
            alias_token = self._curr
            self._advance()
            table.set("alias", exp.to_identifier(alias_token.text))
        return table

    def _parse_from_path(self) -> list[tuple[Any, ...]]:
        steps: list[tuple[Any, ...]] = []
        while self._curr:
            if self._match(TokenType.L_BRACKET):
                if self._match(TokenType.STAR):
                    steps.append(("any_index",))
                elif self._curr and self._curr.token_type == TokenType.NUMBER:
                    steps.append(("index", int(self._curr.text)))
                    self._advance()
                else:
                    self.raise_error("Expected * or an index")
                if not self._match(TokenType.R_BRACKET):
                    self.raise_error("Expected ]")
            elif self._curr.token_type == TokenType.DOT:
                self._advance()
                if self._match(TokenType.STAR):
                    steps.append(("any_key",))
                elif self._curr and self._curr.token_type not in _FROM_END:
                    steps.append(("key", self._curr.text))
                    self._advance()
                else:
                    self.raise_error("Expected a key after .")
            else:
                break
        return steps


class CephParser(S3SelectParser):
    """Ceph's grammar: a leading ``NOT`` negates the whole predicate after it, OR-chain
    included (``arithmetic_predicate = "not" >> logical_predicate``, where
    ``logical_predicate`` is the OR of AND-chains): ``not a and b or c`` =
    ``not ((a and b) or c)``."""

    UNARY_PARSERS = {
        **S3SelectParser.UNARY_PARSERS,
        TokenType.NOT: lambda self: self.expression(exp.Not(this=self._parse_disjunction())),
    }


class S3Select(Dialect):
    """The s3-select dialect as AWS (and MinIO) read it."""

    INDEX_OFFSET = 0
    NORMALIZE_FUNCTIONS = "upper"
    # ORDER BY (standard flavour) without NULLS FIRST/LAST orders as DataFusion does: NULLs
    # are larger than any value. The generator (select_dialect.datafusion) says the same, so
    # it writes out exactly the NULLS FIRST/LAST that differ from that default.
    NULL_ORDERING = "nulls_are_large"

    class Tokenizer(tokens.Tokenizer):
        QUOTES = ["'", "`"]
        IDENTIFIERS = ['"']
        STRING_ESCAPES = ["'"]
        KEYWORDS = {
            **tokens.Tokenizer.KEYWORDS,
            "==": TokenType.EQ,
        }

    Parser = S3SelectParser


class CephS3Select(S3Select):
    """The s3-select dialect as Ceph reads it (the default flavour)."""

    Parser = CephParser
