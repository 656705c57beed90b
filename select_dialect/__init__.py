"""The s3-select dialect (Ceph and AWS flavours, and standard SQL) translated onto DataFusion SQL.

Depends only on sqlglot and the standard library.
"""

from __future__ import annotations

from select_dialect.errors import (
    QuerySemanticError,
    QuerySyntaxError,
    SelectDialectError,
    UnsupportedFeatureError,
)
from select_dialect.kinds import Column
from select_dialect.like_patterns import like_to_regex
from select_dialect.translate import Translation, parse, translate

__all__ = [
    "Column",
    "QuerySemanticError",
    "QuerySyntaxError",
    "SelectDialectError",
    "Translation",
    "UnsupportedFeatureError",
    "like_to_regex",
    "parse",
    "translate",
]
