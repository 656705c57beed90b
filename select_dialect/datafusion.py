"""Write side: sqlglot generator that prints the lowered AST as DataFusion SQL.

DataFusion's SQL is close to Postgres, so the generator extends sqlglot's Postgres generator
and overrides what differs, in ``TRANSFORMS`` (an inherited transform silently wins over a
``*_sql`` method) and ``TYPE_MAPPING``:

* ``TRY_CAST`` stays ``TRY_CAST`` (Postgres turns it into ``CAST``);
* ``DOUBLE`` is ``DOUBLE`` (not ``DOUBLE PRECISION``), text is ``VARCHAR``;
* every identifier is quoted (DataFusion lower-cases unquoted ones);
* function names are printed exactly as the lowering wrote them (lower case).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generators.postgres import PostgresGenerator


def _try_cast_sql(self: PostgresGenerator, expression: exp.TryCast) -> str:
    return f"TRY_CAST({self.sql(expression, 'this')} AS {self.sql(expression, 'to')})"


def _anonymous_sql(self: PostgresGenerator, expression: exp.Anonymous) -> str:
    return f"{expression.this}({self.expressions(expression, flat=True)})"


def _cast_sql(self: PostgresGenerator, expression: exp.Cast) -> str:
    return f"CAST({self.sql(expression, 'this')} AS {self.sql(expression, 'to')})"


class DataFusionGenerator(PostgresGenerator):
    """Generator of DataFusion SQL (always with quoted identifiers)."""

    TRANSFORMS = {
        **PostgresGenerator.TRANSFORMS,
        exp.TryCast: _try_cast_sql,
        exp.Cast: _cast_sql,
        exp.Anonymous: _anonymous_sql,
    }

    TYPE_MAPPING = {
        **PostgresGenerator.TYPE_MAPPING,
        exp.DataType.Type.DOUBLE: "DOUBLE",
        exp.DataType.Type.TEXT: "VARCHAR",
        exp.DataType.Type.VARCHAR: "VARCHAR",
        exp.DataType.Type.BIGINT: "BIGINT",
        exp.DataType.Type.BOOLEAN: "BOOLEAN",
        exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
    }


class DataFusion(Dialect):
    """Target dialect: only the generator is used."""

    # DataFusion orders NULLs last ascending, first descending: unless NULLS FIRST/LAST is
    # printed, a generated ORDER BY gets that order (sqlglot's default, "nulls_are_small",
    # left a user's ``ORDER BY x NULLS FIRST`` unprinted, so NULLs came last).
    NULL_ORDERING = "nulls_are_large"
    Generator = DataFusionGenerator


def to_sql(expression: exp.Expression) -> str:
    """Print a lowered expression (or statement) as DataFusion SQL.

    Example:
        >>> to_sql(exp.column("_1", quoted=True))
        '"_1"'
    """
    return DataFusion().generate(expression, identify=True)
