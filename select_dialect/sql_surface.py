"""DataFusion's SQL on the standard surface: which statements go to DataFusion as written, and
the tables they name.

The s3-select translation (``translate.py``) reads one table and S3 Select's expressions. A
flavour with :attr:`~select_dialect.flavors.Flavor.datafusion_sql` (the standard surface) hands
DataFusion, as written, what that translation does not speak: JOINs, CTEs, subqueries, window
functions, set operations, DISTINCT aggregates and DataFusion's own functions (``ROUND``,
``DATE_TRUNC``, ``MEDIAN``, ``ILIKE``, ...; the s3-select UDFs registered beside them).
DataFusion itself checks the functions, so no list here grows one function at a time. What
this module checks first, on sqlglot's parse of the statement:

| the statement | answer |
|---|---|
| one SELECT (``WITH``, ``UNION``, subqueries inside) | planned by DataFusion over the tables it names |
| anything else (DDL, DML, ``COPY``, ``SET``, ``EXPLAIN``, several statements) | ``UnsupportedSyntax`` naming it |
| a table function in FROM (``read_csv('…')``, ``generate_series(…)``) | ``UnsupportedSyntax`` naming it: tables are ``"bucket"."key"`` |

Every table name that is not a CTE of the statement is a table of the server (``"bucket"."key"``,
``"bucket"."schema"."table"``, or a one-part name in the session), which the server resolves
and registers under the same name; DataFusion's session has no other tables (no file paths, no
``CREATE EXTERNAL TABLE``), and its SQL options refuse DDL, DML and statements again.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from select_dialect.errors import UnsupportedFeatureError

_READ = "postgres"
"""The sqlglot dialect that reads DataFusion's SQL (its parser follows PostgreSQL's)."""

_ONE_TABLE_SHAPES = (exp.Join, exp.With, exp.Subquery, exp.Window, exp.SetOperation,
                     exp.Lateral, exp.Unnest)
"""What the s3-select translation never reads: such a statement goes to DataFusion at once."""


@dataclass(frozen=True)
class TableName:
    """A table a statement names, one to three parts: as DataFusion reads them (``parts``: an
    unquoted part lower-cased) and as written (``written``: the bucket and key it resolves to;
    keys are case-sensitive, quoted or not)."""

    parts: tuple[str, ...]
    written: tuple[str, ...] = ()

    @property
    def sql(self) -> str:
        """The name as a DataFusion reference, each part quoted."""
        return ".".join('"' + p.replace('"', '""') + '"' for p in self.parts)


@dataclass(frozen=True)
class SqlStatement:
    """A SELECT for DataFusion: its tables and whether the s3-select translation may read it."""

    tables: tuple[TableName, ...]
    one_table: bool
    """A plain SELECT over at most one table (no join, CTE, subquery, window or set operation):
    the s3-select translation reads it first, DataFusion what it refuses."""


def parse_sql(sql: str) -> SqlStatement | None:
    """The statement as DataFusion's SQL, or None when it does not parse as such (the s3-select
    translation then reports its own syntax error).

    Raises:
        UnsupportedFeatureError: it parses, but is not one SELECT, or reads a table function.

    Example:
        >>> [t.parts for t in parse_sql('SELECT * FROM "b"."x.csv" a JOIN b.Y ON a.id = y.id').tables]
        [('b', 'x.csv'), ('b', 'y')]
    """
    try:
        statements = sqlglot.parse(sql, read=_READ)
    except (ParseError, TokenError):
        return None
    parsed = [s for s in statements if s is not None]
    if len(parsed) != 1:
        raise UnsupportedFeatureError("one statement at a time: the standard surface runs a "
                                      "single SELECT")
    tree = parsed[0]
    if not isinstance(tree, exp.Query):
        kind = str(tree.this).split()[0] if isinstance(tree, exp.Command) else tree.key
        raise UnsupportedFeatureError(
            f"{kind.upper()} is not allowed: the server is read-only (only SELECT statements run)")
    ctes = {c.alias_or_name.casefold() for c in tree.find_all(exp.CTE)}
    tables: list[TableName] = []
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise UnsupportedFeatureError(
                f"table function {_function_name(table.this)} is not available: read a "
                'table of this server by its name, "bucket"."key"')
        name = _table_name(table)
        if len(name.parts) == 1 and name.parts[0].casefold() in ctes:
            continue
        same = [t for t in tables if t.parts == name.parts]
        if same and same[0].written != name.written:
            raise UnsupportedFeatureError(
                f"{'.'.join(same[0].written)} and {'.'.join(name.written)} are one name to "
                "DataFusion (unquoted names are lower-cased): quote them")
        if not same:
            tables.append(name)
    one_table = (len(tables) <= 1 and not ctes and len(list(tree.find_all(exp.Select))) == 1
                 and next(tree.find_all(*_ONE_TABLE_SHAPES), None) is None)
    return SqlStatement(tuple(tables), one_table)


def _table_name(table: exp.Table) -> TableName:
    parts = [p for p in (table.args.get("catalog"), table.args.get("db"), table.this)
             if isinstance(p, exp.Identifier)]
    return TableName(tuple(p.name if p.quoted else p.name.lower() for p in parts),
                     tuple(p.name for p in parts))


def _function_name(node: exp.Expression) -> str:
    return node.sql(dialect=_READ).split("(", 1)[0].lower() + "(...)"
