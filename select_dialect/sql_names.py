"""The name a SQL engine gives an output column the statement leaves unnamed.

S3 Select calls such a column ``_N`` (its position); a SQL client expects the expression's own
text, as DataFusion (``count(*)``, ``max(t.amount)``) and DuckDB (``count_star()``,
``max(amount)``) name it. :func:`sql_name` writes the expression as the user wrote it, in
sqlglot's SQL: function names in lower case as DataFusion prints them, without DataFusion's
type tags (``Int64(1)``) and without table qualifiers (DataFusion's would be our internal
table's, not the user's).
"""

from __future__ import annotations

from sqlglot import exp


def sql_name(expression: exp.Expr) -> str:
    """The display name of an unnamed output column.

    Example:
        >>> from sqlglot import parse_one
        >>> sql_name(parse_one("COUNT(*)"))
        'count(*)'
        >>> sql_name(parse_one("MAX(s.amount) + 1"))
        'max(amount) + 1'
    """
    unqualified = expression.copy()
    for column in unqualified.find_all(exp.Column):
        for part in ("table", "db", "catalog"):
            column.set(part, None)
    return unqualified.sql(normalize_functions="lower")
