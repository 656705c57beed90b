"""Entry point: s3-select text -> DataFusion SQL over the table ``s3object`` plus metadata.

Example:
    >>> t = translate("select _2 from s3object where _1 = 'a' limit 3", input_format="csv")
    >>> t.sql
    'SELECT "_2" AS "c0" FROM (SELECT * FROM "s3object" LIMIT 3) AS "s3object" WHERE "_1" = \\'a\\''
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError

from select_dialect.aggregate_names import separate_aggregate_names
from select_dialect.datafusion import to_sql
from select_dialect.errors import (
    QuerySemanticError,
    QuerySyntaxError,
    UnsupportedFeatureError,
)
from select_dialect.flavors import (
    FLAVOR_NAMES,
    FLAVORS,
    S3_REQUEST_DEFAULT,
    STANDARD,
    Flavor,
)
from select_dialect.kinds import JSON, Column
from select_dialect.lowering import Lowering
from select_dialect.reserved_words import refuse_reserved_names
from select_dialect.s3select import S3Table
from select_dialect.sql_names import sql_name
from select_dialect.sql_nodes import is_aggregate

INPUT_FORMATS = ("csv", "json", "parquet")
MAX_QUERY_CHARS = 256 * 1024
"""The longest statement accepted by default (AWS S3 Select allows 256 KB)."""

_TABLE_NAMES = ("s3object", "stdin")
_AGGREGATE_CALLS = frozenset({"count", "sum", "avg", "min", "max"})
# Statement parts we accept; any other populated part of the SELECT is rejected.
_ALLOWED_SELECT_ARGS = frozenset({"expressions", "from_", "where", "limit"})
# What a flavour with standard SQL accepts beyond S3 Select (the clauses DataFusion runs).
_STANDARD_SQL_ARGS = frozenset({"group", "having", "order", "distinct"})


@dataclass(frozen=True)
class Translation:
    """The DataFusion statement for one s3-select query and what the caller needs around it.

    Attributes:
        sql: DataFusion SQL reading only the table; outputs ``c0 … cK-1`` (``*`` when
            ``select_star`` on CSV/Parquet input).
        output_names: display name of each output column (JSON output keys).
        result_names: the column names of the Arrow result on the SQL surface, where they
            differ from ``output_names`` (:attr:`Flavor.unnamed_as_sql`); empty: the same.
        output_is_json: per output column, True when its Utf8 values are JSON text.
        is_aggregate: the query aggregates (one output row, or one per group with GROUP BY).
        select_star: the projection is ``*``.
        max_positional: largest N of ``_N`` used (0 if none).
        positions: every CSV field position the statement reads (``_N`` or a header name's);
            a statement over very wide records reads only these.
        json_from_path: steps of ``FROM s3object[*].a.b`` (after the table name).
        json_paths: input column name -> JSON path steps (JSON input).
        limit: the LIMIT value, if any.
        limit_counts_input: True when LIMIT counts scanned rows (Ceph), already applied in
            ``sql`` below the WHERE clause.
        row_as_record: JSON input only: the single output column is the whole row (``SELECT
            *``, or in the aws flavour the bare FROM alias, ``SELECT s FROM s3object s``).
            AWS/MinIO print a row that is an object as the record itself (its members are
            the output fields, ``{}`` when MISSING) and any other value under
            ``output_names[0]``; Ceph prints its ``path. : value`` listing.
        filter_over_aliases: the WHERE clause reads aliases computed in a subquery below it
            (once per row); the engine must keep DataFusion from pushing the filter back down
            through that subquery (its ``push_down_filter`` rule would inline them again).
        whole_input: the result depends on all input rows together (GROUP BY, HAVING,
            DISTINCT, ORDER BY): it must be computed over every partition at once, never
            endpoint by endpoint.
        reads_table: the statement has a FROM clause (``SELECT 1`` reads no object).
        keeps_empty_fields: CSV empty fields are to be read as ``''`` (a field the record
            lacks stays NULL) and ``sql`` reads ``''`` as NULL itself: Ceph's ``SELECT *``
            prints each record with its own fields, so the reader must tell an empty field
            from a missing one.
    """

    sql: str
    output_names: list[str]
    output_is_json: list[bool]
    is_aggregate: bool
    select_star: bool
    max_positional: int
    json_from_path: tuple[tuple[Any, ...], ...] = ()
    json_paths: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)
    limit: int | None = None
    limit_counts_input: bool = False
    row_as_record: bool = False
    filter_over_aliases: bool = False
    whole_input: bool = False
    reads_table: bool = True
    keeps_empty_fields: bool = False
    positions: frozenset[int] = frozenset()
    result_names: list[str] = field(default_factory=list)


# Statements that would change data or schema: the server only reads, and says so.
_WRITE_KEYWORDS = frozenset({
    "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "TRUNCATE", "CREATE", "DROP",
    "ALTER", "RENAME", "GRANT", "REVOKE", "COPY", "LOAD", "VACUUM", "COMMENT",
})
# sqlglot names its own node class when a clause is cut short ("Required keyword: 'this'
# missing for <class 'sqlglot.expressions.query.Where'>"); users get the token instead.
_MISSING_PART = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")
_LARGEST_LIMIT = 2**63 - 1

def check_query_length(sql: str, limit: int = MAX_QUERY_CHARS, *, what: str = "query text",
                       setting: str | None = None) -> None:
    """The one rule for a statement's length: refuse one over ``limit`` characters.

    Every entry point (the server's RPCs before any work, the engine, the translator) calls
    this with its configured limit; ``setting`` names the option that sets it.

    Raises:
        UnsupportedFeatureError: code ``ExpressionTooLong`` (AWS's).

    Example:
        >>> check_query_length("select 1", limit=4)
        Traceback (most recent call last):
        ...
        select_dialect.errors.UnsupportedFeatureError: ExpressionTooLong: query text is 8 characters; the limit is 4
    """
    if len(sql) > limit:
        named = f" ({setting})" if setting else ""
        raise UnsupportedFeatureError(
            f"{what} is {len(sql)} characters; the limit{named} is {limit}",
            code="ExpressionTooLong")


def parse(sql: str, flavor: str = S3_REQUEST_DEFAULT,
          max_query_chars: int = MAX_QUERY_CHARS) -> exp.Select:
    """Parse one s3-select statement (syntax errors become :class:`QuerySyntaxError`).

    The error names the line, column and offending text; its code is AWS's
    (``ParseUnexpectedToken``, ...) in the ``aws`` and ``standard`` flavours and
    ``UnsupportedSyntax``, what RGW reports, in the ``ceph`` flavour.
    """
    rules = FLAVORS[flavor]
    try:
        statement = _parse(sql, rules.grammar, max_query_chars)
        if rules.reserved_words:
            refuse_reserved_names(statement, sql)
        return statement
    except QuerySyntaxError as error:
        _recode(error, rules)
        raise


def _recode(error: QuerySyntaxError, rules: Flavor) -> None:
    """Give a syntax error the flavour's one code, where it has one (Ceph's RGW)."""
    if rules.syntax_error_code is not None:
        error.code = rules.syntax_error_code


def _parse(sql: str, grammar: type[Dialect], max_query_chars: int) -> exp.Select:
    check_query_length(sql, max_query_chars)
    refuse_writes(sql)
    try:
        statements = grammar().parse(sql)
    except ParseError as error:
        raise _syntax_error(error) from None
    except TokenError as error:
        raise QuerySyntaxError(f"invalid token: {error}", code="ParseInvalidTokenError") from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise QuerySyntaxError("expected exactly one SELECT statement", line=1, column=1)
    statement = statements[0]
    if not isinstance(statement, exp.Select):
        word = sql.split(maxsplit=1)[0].upper() if sql.strip() else ""
        raise UnsupportedFeatureError(f"only SELECT statements run here, not {word}")
    return statement


def refuse_writes(sql: str) -> None:
    """INSERT, UPDATE, DDL, ...: refused by name before parsing (their syntax is not ours);
    any other first word but SELECT is named too (sqlglot would name a later token)."""
    words = re.match(r"\s*\(*\s*([A-Za-z_]+)", sql)
    if words is None:
        return
    word = words.group(1).upper()
    if word in _WRITE_KEYWORDS:
        raise UnsupportedFeatureError(
            f"{word} is not allowed: the server is read-only (only SELECT statements run)")
    if word not in ("SELECT", "WITH"):
        start = words.start(1)
        raise QuerySyntaxError(
            f"a statement starts with SELECT, not {words.group(1)!r}",
            line=sql.count("\n", 0, start) + 1, column=start - sql.rfind("\n", 0, start),
            offending=words.group(1))


def _syntax_error(error: ParseError) -> QuerySyntaxError:
    details = error.errors[0] if error.errors else {}
    description = details.get("description") or str(error).split(". Line")[0]
    line = details.get("line")
    column = details.get("col")
    offending = details.get("highlight") or ""
    if _MISSING_PART.search(description):
        description = "Incomplete statement: an expression is missing after the token"
    where = f" at line {line}, column {column}" if line is not None else ""
    return QuerySyntaxError(
        f"{description}{where}: {offending!r}",
        line=line,
        column=column,
        offending=offending,
    )


def translate(
    sql: str,
    *,
    input_format: str,
    flavor: str = S3_REQUEST_DEFAULT,
    columns: Sequence[Column] | None = None,
    header: Sequence[str] | None = None,
    table: str = "s3object",
    max_query_chars: int = MAX_QUERY_CHARS,
) -> Translation:
    """Translate an s3-select statement into DataFusion SQL over ``table``.

    Args:
        sql: the s3-select statement.
        input_format: ``csv``, ``json`` or ``parquet``.
        flavor: ``ceph`` (default), ``aws`` or ``standard`` (:mod:`select_dialect.flavors`).
        columns: Parquet columns (name, type) in file order.
        header: CSV header names when FileHeaderInfo is USE.
        table: the DataFusion table name to read.
        max_query_chars: the longest statement accepted (:func:`check_query_length`).

    Returns:
        The :class:`Translation`.

    Raises:
        QuerySyntaxError: the text does not parse.
        UnsupportedFeatureError: the statement uses something not supported or not allowed.
        QuerySemanticError: the statement cannot be evaluated (unknown column, cyclic alias...).

    Example:
        >>> translate("select count(*) from s3object", input_format="csv").is_aggregate
        True
    """
    if input_format not in INPUT_FORMATS:
        raise UnsupportedFeatureError(f"unsupported input format {input_format}")
    if flavor not in FLAVORS:
        raise UnsupportedFeatureError(
            f"unknown flavor {flavor!r}; use one of {', '.join(FLAVOR_NAMES)}")
    try:
        return _translate(sql, input_format, flavor, columns, header, table, max_query_chars)
    except QuerySyntaxError as error:
        _recode(error, FLAVORS[flavor])
        raise
    except RecursionError:
        raise UnsupportedFeatureError(
            "expression is nested too deeply", code="ExpressionTooComplex"
        ) from None


@dataclass(frozen=True)
class _FromClause:
    """What the FROM clause binds: the table reference, the JSON path below each document,
    the row's alias and every name that refers to the table."""

    source: S3Table | None
    path: tuple[tuple[Any, ...], ...]
    alias: exp.Identifier | None
    table_names: set[str]


@dataclass
class _Projections:
    """The lowered SELECT list and what the output writer needs of each column."""

    outputs: list[exp.Expr] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    sql_names: list[str] = field(default_factory=list)
    is_json: list[bool] = field(default_factory=list)
    select_star: bool = False
    row_as_record: bool = False


def _translate(
    sql: str,
    input_format: str,
    flavor: str,
    columns: Sequence[Column] | None,
    header: Sequence[str] | None,
    table: str,
    max_query_chars: int,
) -> Translation:
    # Every rule the flavour changes is a flag of its record (select_dialect/flavors.py).
    rules = FLAVORS[flavor]
    statement = parse(sql, flavor, max_query_chars)
    _check_shape(statement, flavor)
    from_clause = _read_from(statement, rules)
    projections = list(statement.expressions)
    aliases = _collect_aliases(projections, rules, input_format, header)
    # SELECT * on CSV printed record by record, each with its own fields; an empty field is
    # still NULL to every expression (the WHERE clause).
    keeps_empty_fields = (rules.star_keeps_empty_fields and input_format == "csv"
                          and len(projections) == 1
                          and _is_star(projections[0], from_clause.table_names))
    lowering = Lowering(
        input_format=input_format,
        flavor=rules,
        columns=columns,
        header=header,
        table_names=from_clause.table_names,
        aliases=aliases,
        empty_fields_are_null=keeps_empty_fields,
    )

    where = statement.args.get("where")
    grouped = statement.args.get("group") is not None
    aggregate = grouped or any(is_aggregate(p) for p in projections)
    if where is not None and not aggregate:
        # An alias the WHERE clause uses is computed once per row, in a subquery below the
        # filter, and read as a column by the filter and by the projections.
        lowering.materialize = _aliases_used(where.this, aliases)
    lowered = _lower_projections(projections, lowering, from_clause, aliases,
                                 rules=rules, input_format=input_format,
                                 star_names=_star_names(input_format, columns, header),
                                 check_grouped=aggregate and not grouped)

    condition = _lower_where(where, lowering) if where is not None else None
    limit = _limit_value(statement)
    counts_input = rules.limit_counts_input and limit is not None
    # copy=False: the trees were built here for this statement (a copy of a 256 KB WHERE
    # clause costs seconds).
    query = exp.select(*lowered.outputs, copy=False)
    if from_clause.source is not None:
        query = query.from_(_source_sql(table, limit if counts_input else None, lowering),
                            copy=False)
    if condition is not None:
        query = query.where(condition, copy=False)
    whole_input = _add_standard_clauses(query, statement, lowering)
    if limit is not None and not counts_input:
        query = query.limit(exp.Literal.number(limit), copy=False)
    elif counts_input and limit == 0:
        # Ceph stops before its first record and prints no row at all, not even an aggregate's
        # (``count(*) … limit 0``; with ``limit 6`` and no match it prints 0)
        query = query.limit(exp.Literal.number(0), copy=False)

    if aggregate:
        separate_aggregate_names(query)
    return Translation(
        sql=to_sql(query),
        output_names=lowered.names,
        output_is_json=lowered.is_json,
        is_aggregate=aggregate,
        select_star=lowered.select_star,
        max_positional=lowering.state.max_positional,
        json_from_path=from_clause.path,
        json_paths=dict(lowering.state.json_paths),
        limit=limit,
        limit_counts_input=counts_input,
        row_as_record=lowered.row_as_record,
        filter_over_aliases=bool(lowering.materialized),
        whole_input=whole_input,
        reads_table=from_clause.source is not None,
        keeps_empty_fields=keeps_empty_fields,
        positions=frozenset(lowering.state.positions),
        result_names=lowered.sql_names if lowered.sql_names != lowered.names else [],
    )


def _read_from(statement: exp.Select, rules: Flavor) -> _FromClause:
    """The FROM clause of ``statement`` (nothing bound for ``SELECT 1``)."""
    from_ = statement.args.get("from_")
    source: S3Table | None = from_.this if from_ is not None else None
    if source is None:
        return _FromClause(None, (), None, set())
    path = tuple(source.args.get("path") or ())
    if path[:1] == (("any_index",),):
        path = path[1:]  # s3object[*]: each document; the reader's rows start here
    alias = source.args.get("alias")
    if alias is None and rules.reading.json_partiql_rows and path and path[-1][0] == "key":
        # PartiQL: FROM S3Object[*].Rules[*].id binds the row to the name "id".
        alias = exp.to_identifier(path[-1][1])
    names = {str(source.this.this), "s3object"}
    if alias is not None:
        names.add(str(alias.this))
    return _FromClause(source, path, alias, names)


def _lower_projections(projections: list[exp.Expression], lowering: Lowering,
                       from_clause: _FromClause, aliases: dict[str, exp.Expression], *,
                       rules: Flavor, input_format: str, star_names: list[str],
                       check_grouped: bool) -> _Projections:
    """The SELECT list lowered, with each output column's display name and JSON-ness.

    ``star_names``: the output names of ``SELECT *`` on CSV or Parquet input.
    ``check_grouped``: an aggregate without GROUP BY, whose projections may not mix
    aggregates and bare columns (with GROUP BY, DataFusion checks the columns).
    """
    table_names = from_clause.table_names
    out = _Projections()
    out.select_star = len(projections) == 1 and _is_star(projections[0], table_names)
    if out.select_star and input_format == "json":
        out.row_as_record = True
        out.outputs.append(exp.alias_(lowering._json_path(()), "c0", quoted=True))
        out.names.append("_1")
        out.is_json.append(True)
        return out
    if out.select_star:
        out.outputs.append(exp.Star())
        out.names.extend(star_names)
        out.is_json.extend(False for _ in out.names)
        return out
    unnamed = 0
    for position, projection in enumerate(projections, start=1):
        if _is_star(projection, table_names):
            raise UnsupportedFeatureError("* must be the only projection")
        body = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(projection, exp.Alias):
            # Through the alias: inside its own definition the name is the column
            # (``date_add(day, 2, shipdate) as shipdate``), and WHERE / other
            # projections reuse the same lowered tree.
            node, kind = lowering.lower_alias(projection.alias)
        else:
            node, kind = lowering.lower(body)
        if check_grouped:
            _check_grouped(node)
        out.outputs.append(exp.alias_(node, f"c{len(out.outputs)}", quoted=True))
        if isinstance(projection, exp.Alias):
            name: str | None = projection.alias
        else:
            name = lowering.output_name(body)
        table_alias = from_clause.alias
        row_alias = _is_row_alias(body, table_alias, rules, input_format, aliases)
        if row_alias and table_alias is not None and len(projections) == 1:
            out.row_as_record = True
            name = str(table_alias.this) if name is None else name
        if name is None:
            unnamed += 1
            name = f"_{position if rules.unnamed_by_position else unnamed}"
            out.sql_names.append(sql_name(body) if rules.unnamed_as_sql else name)
        else:
            out.sql_names.append(name)
        out.names.append(name)
        out.is_json.append(kind == JSON)
    return out


def _lower_where(where: exp.Where, lowering: Lowering) -> exp.Expression:
    if is_aggregate(where.this):
        raise QuerySemanticError("aggregate functions are not allowed in WHERE")
    return lowering.lower_condition(where.this)


def _source_sql(table: str, input_limit: int | None, lowering: Lowering) -> exp.Expression:
    """What the statement reads: ``table``, cut to ``input_limit`` rows first when LIMIT
    counts scanned rows (Ceph), under one subquery per level of materialised aliases."""
    source: exp.Expression = exp.Table(this=exp.Identifier(this=table, quoted=True))
    if input_limit is not None:
        source = (
            exp.select(exp.Star())
            .from_(source.copy())
            .limit(exp.Literal.number(input_limit))
            .subquery(exp.Identifier(this=table, quoted=True))
        )
    levels = sorted({level for _, _, level in lowering.materialized.values()})
    for level in levels:  # an alias reading other aliases is computed one subquery above them
        computed = [exp.alias_(node, name, quoted=True)
                    for name, node, at in lowering.materialized.values() if at == level]
        source = (
            exp.select(exp.Star(), *computed, copy=False)
            .from_(source, copy=False)
            .subquery(exp.Identifier(this=table, quoted=True))
        )
    return source


def _add_standard_clauses(query: exp.Select, statement: exp.Select, lowering: Lowering) -> bool:
    """GROUP BY, HAVING, ORDER BY and DISTINCT of ``statement``, lowered onto ``query``.

    Their expressions are lowered like the projections (header names, aliases, coercions),
    so DataFusion matches a grouped projection with its GROUP BY expression; an ordinal
    (``ORDER BY 2``) stays an ordinal. Returns True when the statement has any of them.
    """
    group = statement.args.get("group")
    having = statement.args.get("having")
    order = statement.args.get("order")
    distinct = statement.args.get("distinct")
    if group is not None:
        query.set("group", exp.Group(expressions=[_lower_key(lowering, e)
                                                  for e in group.expressions]))
    if having is not None:
        query.set("having", exp.Having(this=lowering.lower_condition(having.this)))
    if order is not None:
        keys = [exp.Ordered(this=_lower_key(lowering, o.this), desc=o.args.get("desc"),
                            nulls_first=o.args.get("nulls_first"))
                for o in order.expressions]
        query.set("order", exp.Order(expressions=keys))
    if distinct is not None:
        if distinct.args.get("on") is not None:
            raise UnsupportedFeatureError("DISTINCT ON is not supported; use GROUP BY")
        query.set("distinct", exp.Distinct())
    return any(part is not None for part in (group, having, order, distinct))


def _lower_key(lowering: Lowering, node: exp.Expression) -> exp.Expression:
    """A GROUP BY / ORDER BY key: an ordinal as written, anything else lowered."""
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return node.copy()
    return lowering.lower(node)[0]


def _aliases_used(condition: exp.Expression, aliases: dict[str, exp.Expression]) -> set[str]:
    """Non-aggregate aliases that ``condition`` reads, directly or through other aliases."""
    used: set[str] = set()
    pending = [condition]
    while pending:
        for column in pending.pop().find_all(exp.Column):
            key = column.name.lower()
            if (not column.table and key in aliases and key not in used
                    and not is_aggregate(aliases[key])):
                used.add(key)
                pending.append(aliases[key])
    return used


def _check_shape(statement: exp.Select, flavor: str) -> None:
    standard_sql = FLAVORS[flavor].standard_sql
    for key, value in statement.args.items():
        if key in _ALLOWED_SELECT_ARGS or value in (None, [], False):
            continue
        if standard_sql and key in _STANDARD_SQL_ARGS:
            continue
        clause = _CLAUSE_NAMES.get(key, key.rstrip("_").upper())
        if key in _STANDARD_SQL_ARGS:
            raise UnsupportedFeatureError(
                f"{clause} is not part of S3 Select (the {flavor} flavour); the "
                f"{STANDARD} flavour runs it")
        raise UnsupportedFeatureError(f"unsupported clause: {clause}")
    source = statement.args.get("from_")
    if source is None and standard_sql:
        return
    if source is None:
        raise QuerySyntaxError("missing FROM clause", code="ParseSelectMissingFrom")
    table = source.this
    if not isinstance(table, S3Table):
        raise UnsupportedFeatureError("FROM must name the object (s3object)")
    name = str(table.this.this)
    if name.lower() not in _TABLE_NAMES and not name.startswith("/"):
        raise QuerySyntaxError(
            f"unexpected table {name!r}: FROM must be s3object, stdin or the object path",
            code="ParseUnexpectedToken",
            offending=name,
        )
    if name.startswith("/") and table.args.get("path"):
        raise QuerySyntaxError("an object path takes no JSON steps", offending=name)


_CLAUSE_NAMES = {"group": "GROUP BY", "order": "ORDER BY", "having": "HAVING",
                 "distinct": "DISTINCT"}


def _collect_aliases(
    projections: list[exp.Expression],
    rules: Flavor,
    input_format: str,
    header: Sequence[str] | None,
) -> dict[str, exp.Expression]:
    aliases: dict[str, exp.Expression] = {}
    header_names = {name.lower() for name in header or ()}
    for projection in projections:
        if not isinstance(projection, exp.Alias):
            continue
        name = projection.alias
        key = name.lower()
        if rules.alias_clashes_with_header and input_format == "csv" and key in header_names:
            raise QuerySemanticError(
                f"multiple definition of column {{{name}}} as schema-column and alias"
            )
        if key in aliases:
            raise QuerySemanticError(f"alias {{{name}}} is defined more than once")
        aliases[key] = projection.this
    return aliases


def _is_star(node: exp.Expression, table_names: set[str]) -> bool:
    """``*`` or ``<table or alias>.*``."""
    if isinstance(node, exp.Star):
        return True
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
        prefix = node.table
        if prefix and prefix.lower() not in {name.lower() for name in table_names}:
            raise QuerySemanticError(f"unknown table {prefix!r} in {prefix}.*")
        return True
    return False


def _is_row_alias(
    node: exp.Expression,
    table_alias: exp.Identifier | None,
    rules: Flavor,
    input_format: str,
    aliases: dict[str, exp.Expression],
) -> bool:
    """``SELECT s FROM s3object s`` on JSON (PartiQL rows): the projection is the row."""
    if not rules.reading.json_partiql_rows or input_format != "json" or table_alias is None:
        return False
    bare = isinstance(node, exp.Column) and not node.table
    if not (bare and isinstance(node.this, exp.Identifier)):
        return False
    name = node.this.this.lower()
    return name == str(table_alias.this).lower() and name not in aliases


def _star_names(
    input_format: str, columns: Sequence[Column] | None, header: Sequence[str] | None
) -> list[str]:
    if input_format == "parquet":
        return [c.name for c in columns or ()]
    return list(header or ())


def _limit_value(statement: exp.Select) -> int | None:
    limit = statement.args.get("limit")
    if limit is None:
        return None
    value = limit.expression
    if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
        raise QuerySyntaxError(f"LIMIT takes a non-negative integer, not {value.sql()}",
                               code="ParseUnexpectedToken", offending=value.sql())
    count = int(value.this)
    if count > _LARGEST_LIMIT:
        raise QuerySemanticError(
            f"LIMIT {count} is out of range: at most {_LARGEST_LIMIT}", code="IntegerOverflow")
    return count


def _check_grouped(node: exp.Expression) -> None:
    """In an aggregate query every column must sit inside an aggregate call."""
    for column in node.find_all(exp.Column):
        parent = column.parent
        inside = False
        while parent is not None:
            if isinstance(parent, exp.Anonymous) and str(parent.this) in _AGGREGATE_CALLS:
                inside = True
                break
            parent = parent.parent
        if not inside:
            raise QuerySemanticError(
                "a query with aggregates cannot also project non-aggregated columns"
            )


__all__ = ["Column", "Translation", "parse", "refuse_writes", "translate"]
