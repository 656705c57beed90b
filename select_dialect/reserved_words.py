"""AWS S3 Select's reserved keywords, refused as unquoted names in the ``aws`` flavour.

AWS's SQL reference ("SELECT command", *Using reserved keywords as user-defined terms*): a
CSV header, JSON attribute or alias spelt like a reserved keyword must be double-quoted,
"otherwise a 400 parse error will result". The list is AWS's ("Reserved keywords", the same
for S3 Select and S3 Glacier Select). MinIO and Ceph accept these words as names, so only the
``aws`` flavour applies the rule (:attr:`select_dialect.flavors.Flavor.reserved_words`).

The parser itself accepts the words as names (Ceph's grammar needs that), so the rule is a
check of the parsed statement: every unquoted identifier that names a column, a path step or
an alias. Two places where a keyword is no name are left alone: the date part that opens
``DATE_ADD``/``DATE_DIFF`` (``date_add(day, 1, t)``) and the bare word ``MISSING``.
Hand-written: the list is AWS's own definition.
"""

from __future__ import annotations

from typing import Final

from sqlglot import exp

from select_dialect.errors import QuerySyntaxError

RESERVED_KEYWORD_CODE: Final = "ParseUnExpectedKeyword"
"""AWS's error code for "the SQL expression contains an unexpected keyword"."""

AWS_RESERVED_WORDS: Final[frozenset[str]] = frozenset("""
absolute action add all allocate alter and any are as asc assertion at authorization avg
bag begin between bit bit_length blob bool boolean both by
cascade cascaded case cast catalog char char_length character character_length check clob
close coalesce collate collation column commit connect connection constraint constraints
continue convert corresponding count create cross current current_date current_time
current_timestamp current_user cursor
date day deallocate dec decimal declare default deferrable deferred delete desc describe
descriptor diagnostics disconnect distinct domain double drop
else end end-exec escape except exception exec execute exists external extract
false fetch first float for foreign found from full
get global go goto grant group having hour
identity immediate in indicator initially inner input insensitive insert int integer
intersect interval into is isolation join key
language last leading left level like limit list local lower
match max min minute missing module month
names national natural nchar next no not null nullif numeric
octet_length of on only open option or order outer output overlaps
pad partial pivot position precision prepare preserve primary prior privileges procedure
public
read real references relative restrict revoke right rollback rows
schema scroll second section select session session_user set sexp size smallint some space
sql sqlcode sqlerror sqlstate string struct substring sum symbol system_user
table temporary then time timestamp timezone_hour timezone_minute to trailing transaction
translate translation trim true tuple
union unique unknown unpivot update upper usage user using
value values varchar varying view when whenever where with work write year zone
""".split())  # noqa: SIM905 - AWS's list as its documentation prints it

_DATE_PART_FUNCTIONS: Final = frozenset({"date_add", "date_diff"})


def refuse_reserved_names(statement: exp.Expression, sql: str) -> None:
    """Raise on the first unquoted name in ``statement`` that is an AWS reserved keyword.

    Raises:
        QuerySyntaxError: ``ParseUnExpectedKeyword``, with the word's line and column and
            what to write instead.

    Example:
        >>> from select_dialect.s3select import S3Select
        >>> sql = "SELECT s.value FROM S3Object s"
        >>> refuse_reserved_names(S3Select().parse(sql)[0], sql)
        Traceback (most recent call last):
        ...
        select_dialect.errors.QuerySyntaxError: ParseUnExpectedKeyword: value is a reserved keyword ...
    """
    for identifier in statement.find_all(exp.Identifier):
        word = str(identifier.this)
        if identifier.quoted or word.lower() not in AWS_RESERVED_WORDS:
            continue
        if not _names_something(identifier):
            continue
        start = identifier.meta.get("start")
        line = column = None
        where = ""
        if isinstance(start, int):
            line = sql.count("\n", 0, start) + 1
            column = start - sql.rfind("\n", 0, start)
            where = f" at line {line}, column {column}"
        raise QuerySyntaxError(
            f"{word} is a reserved keyword{where}; to use it as a name, double-quote it "
            f'("{word}")', code=RESERVED_KEYWORD_CODE, line=line, column=column,
            offending=word)


def _names_something(identifier: exp.Identifier) -> bool:
    """Whether the identifier is a column, path step or alias (not a keyword in place)."""
    parent = identifier.parent
    if isinstance(parent, exp.Column):
        if parent.table:
            return True
        if identifier.name.lower() == "missing":
            return False
        call = parent.parent
        return not (isinstance(call, exp.Anonymous)
                    and str(call.this).lower() in _DATE_PART_FUNCTIONS
                    and call.expressions and call.expressions[0] is parent)
    return isinstance(parent, (exp.Alias, exp.Dot, exp.TableAlias))
